//! What a caller chooses of the device evaluator (`device`'s module docs):
//! the result contract, the table layout and the bound on the grouped
//! kernel's scratch; and the kernels a plan can run, named once for C,
//! Rust, the CLI and the bench. Which kernel a plan runs is decided in one
//! place, `dispatch.rs`.
use super::{bad, List1Evaluator};
use crate::runtime::{Error, Result};
use hipkern_sys as sys;

/// The default bound of the grouped kernel's scratch (the pair products
/// of one chunk, `pairs × q^d` float64): 256 MiB.
pub const DEFAULT_PAIR_SCRATCH_BYTES: usize = 256 << 20;
/// The largest `q^d` of the grouped and tiled kernels (larger tables run
/// the per-target kernel).
pub const MAX_TILED_MODES: usize = sys::HIPKERN_LIST1_TILED_MAX_MODES as usize;

/// What a plan promises about its result against the CPU float64
/// evaluator ([`crate::nearfield::evaluate_list1`]) over the same entry
/// values (`docs/design/list1.md#result-contracts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum List1Contract {
    /// Bit for bit the CPU evaluator's result (finite source values): the
    /// pairs in list order, unfused multiplies and adds. Runs the grouped
    /// kernel (`q^d ≤` [`MAX_TILED_MODES`]) or the per-target one.
    Exact,
    /// Within 1e−13 relative max-norm of it (measured ≤ 5e−15): keys in
    /// ascending order, fused products, on the tensor cores where they
    /// exist. The fastest kernel the measurements name for the plan's tree
    /// (`dispatch.rs`). The default.
    #[default]
    Fast,
}

impl List1Contract {
    /// `exact` or `fast`.
    pub fn name(self) -> &'static str {
        match self {
            List1Contract::Exact => "exact",
            List1Contract::Fast => "fast",
        }
    }
}

impl std::fmt::Display for List1Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for List1Contract {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "exact" => Ok(List1Contract::Exact),
            "fast" => Ok(List1Contract::Fast),
            _ => bad(format!("contract '{s}': expected exact or fast")),
        }
    }
}

/// The device kernels a plan can run (one name each in C, Rust, the CLI
/// and the bench; `docs/design/list1.md#kernels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List1Kernel {
    /// `per-target` (`hipkern_list1_evaluate`): every target box taken by
    /// 32 lanes, each reading the entries it needs from the layout. Any
    /// `q^d`; bitwise.
    PerTarget,
    /// `grouped` (`hipkern_list1_evaluate_grouped`): the pairs grouped by
    /// (table, case); a block builds its group's case matrix once and
    /// applies it to every pair, a second kernel sums per target in list
    /// order. `q^d ≤` [`MAX_TILED_MODES`]; bitwise.
    Grouped,
    /// `tiled` (`hipkern_list1_evaluate_tiled`, `HIPKERN_LIST1_TILED`):
    /// tiles of 64 target boxes, per key of the tile one case matrix
    /// applied on NVIDIA's FP64 tensor cores to every box with a pair of
    /// that key. To rounding.
    Tiled,
    /// `staged` (`HIPKERN_LIST1_STAGED`): tiles of 32 target boxes whose
    /// distinct source boxes are loaded once per tile; every warp walks
    /// the keys alone on the tensor cores. To rounding, the same bits as
    /// `tiled`.
    Staged,
    /// `tiled-fma` (`HIPKERN_LIST1_TILED_FMA`): the `tiled` walk with
    /// FMAs, on every platform (the tiled kernel AMD builds have). To
    /// rounding.
    TiledFma,
}

impl List1Kernel {
    /// Every kernel.
    pub const ALL: [List1Kernel; 5] = [
        List1Kernel::PerTarget,
        List1Kernel::Grouped,
        List1Kernel::Tiled,
        List1Kernel::Staged,
        List1Kernel::TiledFma,
    ];

    /// `per-target`, `grouped`, `tiled`, `staged` or `tiled-fma`.
    pub fn name(self) -> &'static str {
        match self {
            List1Kernel::PerTarget => "per-target",
            List1Kernel::Grouped => "grouped",
            List1Kernel::Tiled => "tiled",
            List1Kernel::Staged => "staged",
            List1Kernel::TiledFma => "tiled-fma",
        }
    }

    /// The contract its results keep: [`List1Contract::Exact`] for
    /// per-target and grouped, [`List1Contract::Fast`] for the tiled ones.
    pub fn contract(self) -> List1Contract {
        match self {
            List1Kernel::PerTarget | List1Kernel::Grouped => List1Contract::Exact,
            _ => List1Contract::Fast,
        }
    }

    /// The tiled kernels' `hipkern_list1_tiled_kernel`.
    pub(super) fn raw_tiled(self) -> Option<sys::hipkern_list1_tiled_kernel> {
        match self {
            List1Kernel::Tiled => Some(sys::HIPKERN_LIST1_TILED),
            List1Kernel::Staged => Some(sys::HIPKERN_LIST1_STAGED),
            List1Kernel::TiledFma => Some(sys::HIPKERN_LIST1_TILED_FMA),
            _ => None,
        }
    }
}

impl std::fmt::Display for List1Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for List1Kernel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        List1Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .map_or_else(
                || {
                    bad(format!(
                        "kernel '{s}': expected per-target, grouped, tiled, staged or tiled-fma"
                    ))
                },
                Ok,
            )
    }
}

/// How a table is held on the device (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List1Layout {
    /// Every entry.
    Dense,
    /// Compact rows + the arithmetic ORBIT descriptors.
    Orbit,
    /// Compact rows + the generated descriptor fallback.
    Fallback,
}

impl List1Layout {
    /// The three layouts.
    pub const ALL: [List1Layout; 3] = [
        List1Layout::Dense,
        List1Layout::Orbit,
        List1Layout::Fallback,
    ];

    /// `dense`, `orbit` or `fallback`.
    pub fn name(self) -> &'static str {
        match self {
            List1Layout::Dense => "dense",
            List1Layout::Orbit => "orbit",
            List1Layout::Fallback => "fallback",
        }
    }

    pub(super) fn raw(self) -> sys::hipkern_list1_layout {
        match self {
            List1Layout::Dense => sys::HIPKERN_LIST1_DENSE,
            List1Layout::Orbit => sys::HIPKERN_LIST1_ORBIT,
            List1Layout::Fallback => sys::HIPKERN_LIST1_FALLBACK,
        }
    }
}

impl std::fmt::Display for List1Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for List1Layout {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "dense" => Ok(List1Layout::Dense),
            "orbit" => Ok(List1Layout::Orbit),
            "fallback" => Ok(List1Layout::Fallback),
            other => bad(format!(
                "layout {other:?}: must be dense, orbit or fallback"
            )),
        }
    }
}

impl List1Evaluator {
    /// The contract of the plans this evaluator makes (default
    /// [`List1Contract::Fast`]).
    pub fn contract(&self) -> List1Contract {
        self.contract
    }

    /// Sets the contract for plans made after this call (a plan keeps the
    /// kernel it chose: [`super::List1DevicePlan::kernel`]).
    pub fn set_contract(&mut self, contract: List1Contract) {
        self.contract = contract;
    }

    /// The bound on a plan's grouped scratch in bytes (the pair products of
    /// one chunk; default [`DEFAULT_PAIR_SCRATCH_BYTES`]).
    pub fn pair_scratch_bytes(&self) -> usize {
        self.pair_scratch_bytes
    }

    /// Sets the scratch bound for plans made after this call: a grouped
    /// plan cuts its targets into chunks of at most `bytes / (8·q^d)` pairs
    /// (a target with more pairs than that is a chunk alone, and its
    /// scratch is larger). At least `8·q^d` bytes.
    pub fn set_pair_scratch_bytes(&mut self, bytes: usize) -> Result<()> {
        let row = 8 * self.meta.nq;
        if bytes < row {
            return bad(format!(
                "pair scratch of {bytes} bytes: must hold one pair's products ({row} bytes)"
            ));
        }
        self.pair_scratch_bytes = bytes;
        Ok(())
    }

    /// Whether this device and build have NVIDIA's FP64 tensor cores for
    /// the `tiled` and `staged` kernels (`hipkern_list1_tiled_tensor_cores`:
    /// sm_80 and later); elsewhere the fast contract runs `tiled-fma` or
    /// `grouped`.
    pub fn tensor_cores_available(&self) -> bool {
        self.tensor_cores_available
    }
}

#[cfg(test)]
mod tests {
    use super::{List1Contract, List1Kernel};

    #[test]
    fn names_round_trip() {
        for k in List1Kernel::ALL {
            assert_eq!(k.name().parse::<List1Kernel>().unwrap(), k);
        }
        for c in [List1Contract::Exact, List1Contract::Fast] {
            assert_eq!(c.name().parse::<List1Contract>().unwrap(), c);
        }
        assert_eq!(List1Contract::default(), List1Contract::Fast);
        let e = "auto".parse::<List1Kernel>().unwrap_err().to_string();
        assert!(e.contains("'auto'") && e.contains("tiled-fma"), "{e}");
        let e = "quick".parse::<List1Contract>().unwrap_err().to_string();
        assert!(e.contains("'quick'") && e.contains("exact or fast"), "{e}");
    }
}
