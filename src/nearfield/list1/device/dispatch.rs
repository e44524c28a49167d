//! Which kernel a plan runs: one place, pure functions of the contract,
//! the table's `q^d`, the device's tensor cores and the plan's tilings,
//! each rule with the measurement behind it (the numbers:
//! `docs/performance.md#list-1`, every row: `benches/RESULTS.md`).
//!
//! - `Exact`: `grouped` where it takes the table (`q^d ≤ 64`), else
//!   `per-target`. Both are bitwise the CPU evaluator; grouped was 3–26×
//!   faster than per-target on every bench tree (H200, kernels of
//!   d467148 and 3adea44).
//! - `Fast`: `per-target` above `q^d = 64` (no other kernel takes it).
//!   Else, with tensor cores: `staged` where its tiles keep the per-key
//!   tiles' lanes busy ([`STAGED_LANES_BUSY_RATIO`]), else `tiled` (with
//!   its keys' dense matrices it was within 0.5 % of `grouped` or faster
//!   on every bench tree: H100, the run of C ABI v5 in
//!   `docs/performance.md`). Without them: `tiled-fma` where
//!   `q^d ≤` [`NARROW_MODES`] or its lanes busy is at least
//!   [`PER_KEY_MIN_LANES_BUSY`], else `grouped`.
use super::List1Contract;
use super::List1Kernel;
use super::MAX_TILED_MODES;
use crate::runtime::Result;

/// `staged` is chosen where its tiles' lanes busy (pairs over lane slots
/// walked) is at least this fraction of the per-key tiles'. Measured on
/// the H200 (6128bc7) and the H100 (9da8886, and again with C ABI v5):
/// staged won at 0.91× the per-key lanes busy (3D q = 3 and q = 4
/// uniform), 1.00× (2D q = 4), and lost at 0.60× and below (the random
/// octrees 0.18–0.30×).
pub(crate) const STAGED_LANES_BUSY_RATIO: f64 = 0.85;

/// Without tensor cores: up to this `q^d` `tiled-fma` beat `grouped` on
/// every bench tree, the random ones included (H100, C ABI v5: 3D q = 3
/// random 0.285–0.293 against 0.333–0.357 ms; 2D q = 4 random 0.107–0.109
/// against 0.160–0.164 ms).
pub(crate) const NARROW_MODES: usize = 36;

/// Above [`NARROW_MODES`] `tiled-fma` needs this lanes busy to beat
/// `grouped`: at 3D q = 4 (H100, C ABI v5) it won on the uniform octree
/// (lanes busy 0.99: 0.79 against 1.17–1.58 ms) and lost in three layouts
/// of four on the random one (0.55: 1.05–1.07 against 0.95–1.02 ms; the
/// descriptor fallback's grouped 1.27).
pub(crate) const PER_KEY_MIN_LANES_BUSY: f64 = 0.75;

/// The distinct source boxes a `staged` tile of `targets_per_tile` boxes
/// may read (the host cuts a tile early past it): the kernel keeps them in
/// shared memory, one row of `q^d` rounded up to 4, then to 4 mod 8,
/// doubles each. 4 per box (a uniform region's 4 × 4 × 4 targets read
/// 6 × 6 × 6 = 216 sources), within 96 KiB of rows, and never below 160 (a
/// box's own sources, at most one per case: 139 in 3D).
pub fn staged_source_bound(n_modes: usize, targets_per_tile: usize) -> usize {
    let k = n_modes.div_ceil(4) * 4;
    let row = 8 * if k % 8 == 4 { k } else { k + 4 };
    (4 * targets_per_tile).min((96 << 10) / row).max(160)
}

/// What a plan's choice rests on: the lanes busy of its per-key tiles and,
/// where the tensor cores run, of its staged tiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct TileBusy {
    pub per_key: f64,
    pub staged: Option<f64>,
}

/// The kernel of a plan under `contract` for `n_modes = q^d`, and why.
/// `busy` is asked only where the fast contract compares tilings (the
/// host cuts them there alone); its error is the choice's.
pub(super) fn choose(
    contract: List1Contract,
    n_modes: usize,
    tensor_cores: bool,
    busy: impl FnOnce() -> Result<TileBusy>,
) -> Result<(List1Kernel, String)> {
    if let Some(choice) = choose_without_pairs(contract, n_modes) {
        return Ok(choice);
    }
    Ok(choose_fast(n_modes, tensor_cores, busy()?))
}

/// The kernel of a plan for one evaluation ([`super::List1Evaluator::evaluate`]):
/// the one whose plan the device builds, `grouped` (`per-target` beyond
/// [`MAX_TILED_MODES`]), under either contract. Its result is bitwise the
/// CPU's, which keeps the fast contract too; the fast contract's tiled
/// kernels run faster, but their plans cost far more than they save on
/// one evaluation.
pub(super) fn choose_for_one_evaluation(n_modes: usize) -> (List1Kernel, String) {
    let kernel = exact_kernel(n_modes);
    (
        kernel,
        format!("one evaluation: {kernel}, whose plan the device builds (bitwise the CPU's)"),
    )
}

/// The exact contract's kernel: `grouped`, `per-target` beyond what it takes.
fn exact_kernel(n_modes: usize) -> List1Kernel {
    if n_modes > MAX_TILED_MODES {
        List1Kernel::PerTarget
    } else {
        List1Kernel::Grouped
    }
}

/// The kernel where the pairs play no part in the choice (`q^d` beyond
/// the tiled kernels, or the exact contract), else `None`. Such a plan
/// needs no host tiling: it is built on the device (tree_plan.rs).
pub(super) fn choose_without_pairs(
    contract: List1Contract,
    n_modes: usize,
) -> Option<(List1Kernel, String)> {
    match exact_kernel(n_modes) {
        List1Kernel::PerTarget => Some((
            List1Kernel::PerTarget,
            format!("q^d = {n_modes} > {MAX_TILED_MODES}: only per-target takes it"),
        )),
        k if contract == List1Contract::Exact => {
            Some((k, "exact: the fastest bitwise kernel".into()))
        }
        _ => None,
    }
}

/// The fast contract's kernel for `q^d ≤` [`MAX_TILED_MODES`] (module docs).
fn choose_fast(n_modes: usize, tensor_cores: bool, b: TileBusy) -> (List1Kernel, String) {
    if tensor_cores {
        let staged = b.staged.unwrap_or(0.0);
        let (kernel, cmp) = if staged >= STAGED_LANES_BUSY_RATIO * b.per_key {
            (List1Kernel::Staged, "≥")
        } else {
            (List1Kernel::Tiled, "<")
        };
        return (
            kernel,
            format!(
                "fast: staged tiles {staged:.3} lanes busy {cmp} {STAGED_LANES_BUSY_RATIO} × \
                 per-key {:.3}",
                b.per_key
            ),
        );
    }
    let per_key = List1Kernel::TiledFma;
    if n_modes <= NARROW_MODES {
        (
            per_key,
            format!("fast, no tensor cores: q^d = {n_modes} ≤ {NARROW_MODES}"),
        )
    } else if b.per_key >= PER_KEY_MIN_LANES_BUSY {
        (
            per_key,
            format!(
                "fast, no tensor cores: per-key tiles {:.3} lanes busy ≥ \
                 {PER_KEY_MIN_LANES_BUSY}",
                b.per_key
            ),
        )
    } else {
        (
            List1Kernel::Grouped,
            format!(
                "fast, no tensor cores: q^d = {n_modes} > {NARROW_MODES} and per-key tiles \
                 only {:.3} lanes busy",
                b.per_key
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{choose, staged_source_bound, TileBusy};
    use crate::nearfield::list1::device::{List1Contract, List1Kernel};

    fn fast(n_modes: usize, tensor: bool, per_key: f64, staged: Option<f64>) -> List1Kernel {
        choose(List1Contract::Fast, n_modes, tensor, || {
            Ok(TileBusy { per_key, staged })
        })
        .unwrap()
        .0
    }

    #[test]
    fn the_rules_pick_the_measured_winners() {
        // (q^d, tensor cores, per-key busy, staged busy, the fastest
        // kernel measured): the bench trees on the H100 (C ABI v5).
        use List1Kernel::*;
        for (nq, tensor, per_key, staged, want) in [
            (27, true, 0.996, Some(0.909), Staged), // 3D q = 3 uniform
            (64, true, 0.996, Some(0.909), Staged), // 3D q = 4 uniform
            (16, true, 1.000, Some(1.000), Staged), // 2D q = 4 uniform
            (27, true, 0.551, Some(0.163), Tiled),  // 3D q = 3 random
            (64, true, 0.551, Some(0.163), Tiled),  // 3D q = 4 random
            (16, true, 0.85, Some(0.3), Tiled),     // 2D q = 4 random
            (27, false, 0.996, None, TiledFma),     // 3D q = 3 uniform, FMAs
            (27, false, 0.551, None, TiledFma),     // 3D q = 3 random, FMAs
            (64, false, 0.996, None, TiledFma),     // 3D q = 4 uniform, FMAs
            (64, false, 0.551, None, Grouped),      // 3D q = 4 random, FMAs
        ] {
            assert_eq!(fast(nq, tensor, per_key, staged), want, "{nq} {per_key}");
        }
    }

    #[test]
    fn exact_and_large_tables_never_cut_tiles() {
        let never = || -> crate::runtime::Result<TileBusy> { panic!("no tiling needed") };
        assert_eq!(
            choose(List1Contract::Exact, 27, true, never).unwrap().0,
            List1Kernel::Grouped
        );
        assert_eq!(
            choose(List1Contract::Exact, 125, true, never).unwrap().0,
            List1Kernel::PerTarget
        );
        assert_eq!(
            choose(List1Contract::Fast, 125, true, never).unwrap().0,
            List1Kernel::PerTarget
        );
        // Whatever it chooses, a kernel of the contract (or a stricter one).
        for nq in [1, 9, 27, 64] {
            let (k, why) = choose(List1Contract::Fast, nq, false, || {
                Ok(TileBusy {
                    per_key: 0.1,
                    staged: Some(1.0),
                })
            })
            .unwrap();
            assert_ne!(k, List1Kernel::Staged, "no tensor cores: {why}");
        }
    }

    #[test]
    fn staged_source_bound_keeps_rows_in_shared_memory() {
        assert_eq!(staged_source_bound(27, 32), 160); // 4·32 = 128, at least 160
        assert_eq!(staged_source_bound(27, 64), 256);
        assert_eq!(staged_source_bound(64, 128), (96 << 10) / (8 * 68));
    }
}
