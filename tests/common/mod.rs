//! Shared test inputs.
use hipkern::rng::SplitMix64;

/// A neighbour-list-like edge set: edges grouped by dst (the centre atom,
/// centres `0..n_centres`, each with 0..=max_per_centre edges), src random
/// in `[0, n_ext)`; with `isolate_every = Some(m)`, every centre with
/// `k % m == 3` gets no edges of its own (it may still be a neighbour).
/// Returns (src, dst, g, edge_vec), g uniform in [-1, 1), edge_vec in [-4, 4).
pub fn edge_system(
    rng: &mut SplitMix64,
    n_ext: usize,
    n_centres: usize,
    max_per_centre: usize,
    isolate_every: Option<usize>,
) -> (Vec<i32>, Vec<i32>, Vec<f64>, Vec<f64>) {
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for k in 0..n_centres {
        if isolate_every.is_some_and(|m| k % m == 3) {
            continue;
        }
        for _ in 0..rng.below(max_per_centre + 1) {
            dst.push(k as i32);
            src.push(rng.below(n_ext) as i32);
        }
    }
    let e = src.len();
    let g = (0..3 * e).map(|_| rng.uniform_pm1()).collect();
    let r = (0..3 * e).map(|_| 4.0 * rng.uniform_pm1()).collect();
    (src, dst, g, r)
}
