//! Random edge sets, ghost folding, frames, and the float64 reference
//! (a direct loop over edges with compensated sums), with the comparisons
//! every output goes through.
use super::npy::{Dtype, F32, F64};

// ---- random numbers -----------------------------------------------------

/// SplitMix64 (Steele, Lea and Flood, 2014).
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `[-1, 1)`.
    pub fn pm1(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

// ---- edge sets and the reference ----------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Half,
    Src,
}

pub use Split::{Half, Src};

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Half => "half",
            Src => "src",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Ghosts {
    pub mapping: Vec<i64>,
    pub n_local: usize,
}

/// One edge set. The values are exactly representable in `precision`, so the
/// float64 reference of these values is the reference for the file's values.
#[derive(Clone, Debug)]
pub struct Case {
    pub n_ext: usize,
    pub src: Vec<i64>,
    pub dst: Vec<i64>,
    pub g: Vec<f64>,
    pub edge_vec: Vec<f64>,
    pub precision: Dtype,
    pub ghosts: Option<Ghosts>,
}

impl Case {
    pub fn n_edges(&self) -> usize {
        self.src.len()
    }
    pub fn n_rows(&self) -> usize {
        self.ghosts.as_ref().map_or(self.n_ext, |g| g.n_local)
    }
}

/// The shape of a random edge set: `hub_edges` edges touch one hub atom
/// (as src or dst), `self_edges` have src == dst, the last `isolated` atoms
/// have no edge at all; the rest are random pairs.
#[derive(Clone, Copy, Debug)]
pub struct Graph {
    pub n_ext: usize,
    pub n_edges: usize,
    pub hub_edges: usize,
    pub self_edges: usize,
    pub isolated: usize,
}

pub fn random_case(seed: u64, graph: Graph, precision: Dtype) -> Case {
    let mut rng = SplitMix64(seed);
    let active = graph.n_ext - graph.isolated;
    assert!(graph.n_edges == 0 || active > 0);
    assert!(graph.hub_edges + graph.self_edges <= graph.n_edges);
    let hub = if active > 0 { rng.below(active) } else { 0 };
    let mut pairs: Vec<(usize, usize)> = (0..graph.n_edges)
        .map(|e| {
            let other = rng.below(active);
            if e < graph.hub_edges {
                if rng.below(2) == 0 {
                    (hub, other)
                } else {
                    (other, hub)
                }
            } else if e < graph.hub_edges + graph.self_edges {
                (other, other)
            } else {
                (rng.below(active), other)
            }
        })
        .collect();
    // Fisher–Yates, so that hub and self edges are spread over the list.
    for i in (1..pairs.len()).rev() {
        pairs.swap(i, rng.below(i + 1));
    }
    let round = |x: f64| match precision {
        F32 => f64::from(x as f32),
        _ => x,
    };
    let n = 3 * graph.n_edges;
    // Gradients over several binades, edge vectors in [-4, 4).
    let g = (0..n)
        .map(|_| round(rng.pm1() * 2f64.powi(rng.below(9) as i32 - 4)))
        .collect();
    let edge_vec = (0..n).map(|_| round(4.0 * rng.pm1())).collect();
    Case {
        n_ext: graph.n_ext,
        src: pairs.iter().map(|p| p.0 as i64).collect(),
        dst: pairs.iter().map(|p| p.1 as i64).collect(),
        g,
        edge_vec,
        precision,
        ghosts: None,
    }
}

/// Folds atoms `n_local..` into random owners among `0..n_local` (local atoms own themselves).
pub fn with_ghosts(mut case: Case, n_local: usize, seed: u64) -> Case {
    assert!(0 < n_local && n_local <= case.n_ext);
    let mut rng = SplitMix64(seed);
    let mapping = (0..case.n_ext)
        .map(|k| {
            if k < n_local {
                k as i64
            } else {
                rng.below(n_local) as i64
            }
        })
        .collect();
    case.ghosts = Some(Ghosts { mapping, n_local });
    case
}

/// Float64 sums with Neumaier's compensation.
pub struct Sums {
    pub sum: Vec<f64>,
    pub compensation: Vec<f64>,
}

impl Sums {
    pub fn new(n: usize) -> Sums {
        Sums {
            sum: vec![0.0; n],
            compensation: vec![0.0; n],
        }
    }
    pub fn add(&mut self, i: usize, x: f64) {
        let s = self.sum[i];
        let t = s + x;
        self.compensation[i] += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        self.sum[i] = t;
    }
    pub fn finish(self) -> Vec<f64> {
        self.sum
            .iter()
            .zip(&self.compensation)
            .map(|(s, c)| s + c)
            .collect()
    }
}

/// Force (rows×3) and per-atom virial (rows×9), row-major.
pub struct Expected {
    pub force: Vec<f64>,
    pub virial: Vec<f64>,
}

/// The definition, edge by edge: g_e to dst, −g_e to src, the virial
/// −g_e ⊗ edge_vec_e split half/half or all to src, endpoints folded into
/// their owners.
pub fn reference(case: &Case, split: Split) -> Expected {
    let rows = case.n_rows();
    let owner = |k: i64| -> usize {
        let k = usize::try_from(k).expect("index >= 0");
        match &case.ghosts {
            Some(gh) => usize::try_from(gh.mapping[k]).expect("owner >= 0"),
            None => k,
        }
    };
    let mut force = Sums::new(3 * rows);
    let mut virial = Sums::new(9 * rows);
    for e in 0..case.n_edges() {
        let (s, d) = (owner(case.src[e]), owner(case.dst[e]));
        let g = &case.g[3 * e..3 * e + 3];
        let r = &case.edge_vec[3 * e..3 * e + 3];
        for (a, &ga) in g.iter().enumerate() {
            force.add(3 * d + a, ga);
            force.add(3 * s + a, -ga);
            for (b, &rb) in r.iter().enumerate() {
                let v = -ga * rb;
                match split {
                    Half => {
                        virial.add(9 * s + 3 * a + b, 0.5 * v);
                        virial.add(9 * d + 3 * a + b, 0.5 * v);
                    }
                    Src => virial.add(9 * s + 3 * a + b, v),
                }
            }
        }
    }
    Expected {
        force: force.finish(),
        virial: virial.finish(),
    }
}

/// How output rows are grouped into frames.
#[derive(Clone, Debug)]
pub enum Frames {
    Size(usize),
    Ids {
        ids: Vec<i64>,
        n_frames: usize,
        dtype: Dtype,
    },
}

impl Frames {
    /// The frame of each of `rows` rows, and the number of frames.
    pub fn frame_of(&self, rows: usize) -> (Vec<usize>, usize) {
        match self {
            Frames::Size(s) => {
                assert_eq!(rows % s, 0, "the reference takes whole frames");
                ((0..rows).map(|k| k / s).collect(), rows / s)
            }
            Frames::Ids { ids, n_frames, .. } => {
                assert_eq!(ids.len(), rows);
                (ids.iter().map(|&f| f as usize).collect(), *n_frames)
            }
        }
    }
}

/// Per-frame virial (K×9, the sum of the frame's rows) and its Voigt form
/// (K×6: xx, yy, zz, xy = W[0][1], xz = W[0][2], yz = W[1][2]).
pub fn frame_reference(
    virial: &[f64],
    frame_of: &[usize],
    n_frames: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut sums = Sums::new(9 * n_frames);
    for (k, &f) in frame_of.iter().enumerate() {
        for c in 0..9 {
            sums.add(9 * f + c, virial[9 * k + c]);
        }
    }
    let full = sums.finish();
    let voigt = full
        .chunks_exact(9)
        .flat_map(|w| [w[0], w[4], w[8], w[1], w[2], w[5]])
        .collect();
    (full, voigt)
}

// ---- comparisons --------------------------------------------------------

pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// max |got − want| / max |want| over the whole array (max |want| floored at
/// the smallest normal float64, so an all-zero reference asks for zeros).
/// NaN anywhere in `got` counts as infinitely far.
pub fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = max_abs(want).max(f64::MIN_POSITIVE);
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| {
            let d = (a - b).abs();
            if d.is_nan() {
                f64::INFINITY
            } else {
                d
            }
        })
        .fold(0.0f64, f64::max);
    worst / scale
}

pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let err = relative_error(got, want);
    assert!(
        err <= tol,
        "{what}: relative max-norm error {err:e} > {tol:e}"
    );
}

/// Distance in float32 steps (+0 and −0 are one value).
pub fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| -> i64 {
        let bits = x.to_bits();
        if bits >> 31 == 1 {
            -i64::from(bits & 0x7FFF_FFFF)
        } else {
            i64::from(bits)
        }
    };
    key(a).abs_diff(key(b))
}

/// The float32 step above |x|.
pub fn ulp(x: f32) -> f32 {
    let x = x.abs();
    f32::from_bits(x.to_bits() + 1) - x
}

/// Each float32 value is the float64 reference rounded once, to within one
/// ulp; where the array's float64 rounding error (`tol` × max |want|) is
/// itself more than an ulp of the value (cancellation), within that error
/// plus one ulp.
pub fn assert_rounded_once(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    let scale = max_abs(want);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let rounded = b as f32;
        let ok = ulps(a, rounded) <= 1
            || (f64::from(a) - b).abs() <= tol * scale + f64::from(ulp(rounded));
        assert!(
            ok,
            "{what}[{i}] = {a:e}, but the reference {b:e} rounds to {rounded:e}"
        );
    }
}

/// The relative tolerance of a backend's output, as float64.
pub fn tolerance(backend: &str, precision: Dtype) -> f64 {
    match (backend, precision) {
        // Atomic sums in the input precision, in any order.
        ("device-atomic", F32) => 1e-4,
        ("device-atomic", _) => 1e-12,
        // Float64 sums of the input values, in another order than the reference's.
        _ => 1e-13,
    }
}

// ---- bad input --------------------------------------------------------

/// A small valid case: 6 atoms (one isolated), 8 edges, float64.
pub fn small_case() -> Case {
    random_case(
        7000,
        Graph {
            n_ext: 6,
            n_edges: 8,
            hub_edges: 3,
            self_edges: 1,
            isolated: 1,
        },
        F64,
    )
}
