//! What a caller chooses of the device evaluator (`device`'s module docs):
//! the schedules, layouts and source staging, the tile widths and batch
//! sizes with their defaults, bounds and measured reasons, and the
//! evaluator's setters for them.
use super::{bad, List1Evaluator};
use crate::runtime::{Error, Result};
use hipkern_sys as sys;

/// The default `list1_target_batch_size`: one target lane per box.
pub const DEFAULT_TARGET_BATCH_SIZE: usize = 1;
/// The largest `list1_target_batch_size` (threads per block).
pub const MAX_TARGET_BATCH_SIZE: usize = sys::HIPKERN_LIST1_MAX_BATCH as usize;

/// The default bound of the case-grouped schedule's scratch (the pair
/// products of one chunk, `pairs × q^d` float64): 256 MiB.
pub const DEFAULT_PAIR_SCRATCH_BYTES: usize = 256 << 20;
/// The largest `q^d` of the case-grouped schedule.
pub const MAX_GROUPED_MODES: usize = sys::HIPKERN_LIST1_GROUPED_MAX_MODES as usize;
/// The largest `q^d` of the target-tiled schedule.
pub const MAX_TILED_MODES: usize = sys::HIPKERN_LIST1_TILED_MAX_MODES as usize;
/// Target boxes per tile of the target-tiled schedule that the device
/// takes (threads per block).
pub const TILE_TARGET_CHOICES: [usize; 3] = [32, 64, 128];

/// The default target boxes per tile for `n_modes = q^d` on this build's
/// platform. On NVIDIA: 64 for `17 ≤ q^d ≤ 36`, else 128 — on the H200
/// (`benches/list1.rs`, commit 2f9109f) 64 was the fastest width for 3D
/// q = 3 in every layout but ORBIT on the uniform octree (128 there, 14 %
/// faster), 128 for 3D q = 4 on the uniform octree and for 2D q = 4 (within
/// 10 % of the others); q^d from 17 to 36 other than 27 follows 27
/// unmeasured. Elsewhere 64, or 32 at `q^d > 36`, so that the block's case
/// matrix, source rows and slots stay within the 64 KB of LDS an AMD block
/// gets.
pub fn default_targets_per_tile(n_modes: usize) -> usize {
    if crate::runtime::platform() == "nvidia" {
        if (17..=36).contains(&n_modes) {
            64
        } else {
            128
        }
    } else if n_modes > 36 {
        32
    } else {
        64
    }
}

/// The distinct source boxes a tile of `targets_per_tile` boxes may read
/// (the host cuts a tile early past it): the tensor-core kernel keeps them
/// in shared memory, one row of `q^d` rounded up to 4, then to 4 mod 8,
/// doubles each. 4 per box (a uniform region's 4 × 4 × 4 targets read
/// 6 × 6 × 6 = 216 sources), within 96 KiB of rows, and never below 160 (a
/// box's own sources, at most one per case: 139 in 3D).
pub fn tile_source_bound(n_modes: usize, targets_per_tile: usize) -> usize {
    let k = n_modes.div_ceil(4) * 4;
    let row = 8 * if k % 8 == 4 { k } else { k + 4 };
    (4 * targets_per_tile).min((96 << 10) / row).max(160)
}

/// The default target boxes per tile of a source-staged plan: 32, the
/// fastest staged width in every configuration of `benches/list1.rs` on
/// the H200 and the H100 (3D q = 3 and q = 4 and 2D q = 4 uniform, 3D
/// q = 3 random; commit 6128bc7): small tiles read few sources, so more
/// tiles fit the source bound and run side by side.
pub const DEFAULT_STAGED_TARGETS_PER_TILE: usize = 32;

/// [`List1SourceStaging::Auto`] takes the source-staged tiles where their
/// lanes busy (pairs over lane slots walked) is at least this fraction of
/// the per-key tiles'. Measured on the H200 (commit 6128bc7): staged won
/// at 0.91× the per-key lanes busy (3D q = 3 and q = 4 uniform at 32
/// boxes), 1.00× (2D q = 4), and lost at 0.60× (3D q = 4 at 64 boxes) and
/// below (0.30×; the random octree 0.18–0.26×).
pub const STAGED_LANES_BUSY_RATIO: f64 = 0.85;

/// Whether [`List1SourceStaging::Auto`] takes the source-staged tiles:
/// their lanes busy at least [`STAGED_LANES_BUSY_RATIO`] times the
/// per-key tiles' (each `pairs / slots`).
pub fn prefer_source_staged(per_key_lanes_busy: f64, staged_lanes_busy: f64) -> bool {
    staged_lanes_busy >= STAGED_LANES_BUSY_RATIO * per_key_lanes_busy
}

/// Which tensor-core kernel a target-tiled plan is cut for (module docs).
/// Both give the same bits, so the choice changes the time alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List1SourceStaging {
    /// The per-key staged kernel: tiles cut at the width alone, each key's
    /// case matrix and source rows staged per block.
    Off,
    /// The source-staged kernel: tiles cut at the width and at
    /// [`tile_source_bound`], their sources loaded once per tile; ORBIT and
    /// fallback plans carry their keys' case matrices where the tensor
    /// cores run ([`List1Evaluator::set_tiled_key_matrices`]).
    On,
    /// Per plan (the default): where the tensor cores run
    /// ([`List1Evaluator::tiled_tensor_cores_available`]), both tilings
    /// are cut and the staged one is kept if [`prefer_source_staged`]
    /// says so; elsewhere `Off`.
    Auto,
}

impl List1SourceStaging {
    /// `off`, `on` or `auto`.
    pub fn name(self) -> &'static str {
        match self {
            List1SourceStaging::Off => "off",
            List1SourceStaging::On => "on",
            List1SourceStaging::Auto => "auto",
        }
    }
}

impl std::fmt::Display for List1SourceStaging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for List1SourceStaging {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "off" => Ok(List1SourceStaging::Off),
            "on" => Ok(List1SourceStaging::On),
            "auto" => Ok(List1SourceStaging::Auto),
            _ => bad(format!("source staging '{s}': expected off, on or auto")),
        }
    }
}

/// How the device schedules the work (module docs); both give the same
/// bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List1Schedule {
    /// `hipkern_list1_evaluate`: target boxes over the grid, each taken by
    /// `list1_target_batch_size` lanes, each lane reading every entry it
    /// needs from the layout.
    PerTarget,
    /// `hipkern_list1_evaluate_grouped`: the pairs grouped by (table, case)
    /// into tiles; a tile's case matrix is built once in shared memory and
    /// applied to all its pairs, the products summed per target in list
    /// order. `q^d ≤` [`MAX_GROUPED_MODES`]; needs the plan's scratch.
    CaseGrouped,
    /// `hipkern_list1_evaluate_tiled`: the target boxes in tiles of one
    /// thread per box, each thread's outputs in registers; per key of the
    /// tile the block builds the case matrix once in shared memory and the
    /// threads with a pair of that key apply it with FMAs. Keys ascending,
    /// so the same value as the others to rounding, not bit for bit.
    /// `q^d ≤` [`MAX_TILED_MODES`].
    TargetTiled,
}

impl List1Schedule {
    /// The default for `n_modes = q^d` values per box: `CaseGrouped` where
    /// it applies (`n_modes ≤` [`MAX_GROUPED_MODES`]), else `PerTarget`.
    pub fn default_for(n_modes: usize) -> List1Schedule {
        if n_modes <= MAX_GROUPED_MODES {
            List1Schedule::CaseGrouped
        } else {
            List1Schedule::PerTarget
        }
    }

    /// Whether the schedule takes `n_modes = q^d` values per box (the
    /// grouped one needs `n_modes ≤` [`MAX_GROUPED_MODES`], the tiled one
    /// `n_modes ≤` [`MAX_TILED_MODES`]).
    pub fn check(self, n_modes: usize) -> Result<()> {
        let max = match self {
            List1Schedule::PerTarget => return Ok(()),
            List1Schedule::CaseGrouped => MAX_GROUPED_MODES,
            List1Schedule::TargetTiled => MAX_TILED_MODES,
        };
        if n_modes > max {
            return bad(format!(
                "the {self} schedule takes q^d ≤ {max}; this table has q^d = {n_modes} (use \
                 per-target)"
            ));
        }
        Ok(())
    }

    /// `per-target`, `grouped` or `tiled`.
    pub fn name(self) -> &'static str {
        match self {
            List1Schedule::PerTarget => "per-target",
            List1Schedule::CaseGrouped => "grouped",
            List1Schedule::TargetTiled => "tiled",
        }
    }

    /// Whether the schedule gives the CPU evaluator's bits (per-target and
    /// grouped: list order, unfused) or agrees to rounding (tiled).
    pub fn is_bitwise(self) -> bool {
        self != List1Schedule::TargetTiled
    }
}

impl std::fmt::Display for List1Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for List1Schedule {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "per-target" => Ok(List1Schedule::PerTarget),
            "grouped" => Ok(List1Schedule::CaseGrouped),
            "tiled" => Ok(List1Schedule::TargetTiled),
            _ => bad(format!(
                "schedule '{s}': expected per-target, grouped or tiled"
            )),
        }
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
    /// `list1_target_batch_size`: threads per target box.
    pub fn target_batch_size(&self) -> usize {
        self.batch
    }

    /// Sets `list1_target_batch_size` (1..=[`MAX_TARGET_BATCH_SIZE`]); the
    /// output does not depend on it, bit for bit.
    pub fn set_target_batch_size(&mut self, n: usize) -> Result<()> {
        if !(1..=MAX_TARGET_BATCH_SIZE).contains(&n) {
            return bad(format!(
                "list1_target_batch_size {n}: must be in 1..={MAX_TARGET_BATCH_SIZE}"
            ));
        }
        self.batch = n;
        Ok(())
    }

    /// The schedule ([`List1Schedule`]; the default is `CaseGrouped` where
    /// `q^d ≤` [`MAX_GROUPED_MODES`], else `PerTarget`).
    pub fn schedule(&self) -> List1Schedule {
        self.schedule
    }

    /// Sets the schedule; `CaseGrouped` needs `q^d ≤` [`MAX_GROUPED_MODES`],
    /// `TargetTiled` `q^d ≤` [`MAX_TILED_MODES`]. Per-target and grouped
    /// give the same bits; tiled the same value to rounding
    /// ([`List1Schedule::is_bitwise`]).
    pub fn set_schedule(&mut self, schedule: List1Schedule) -> Result<()> {
        schedule.check(self.meta.nq)?;
        self.schedule = schedule;
        Ok(())
    }

    /// The bound on a plan's case-grouped scratch in bytes (the pair
    /// products of one chunk; default [`DEFAULT_PAIR_SCRATCH_BYTES`]).
    pub fn pair_scratch_bytes(&self) -> usize {
        self.pair_scratch_bytes
    }

    /// Sets the scratch bound for plans made after this call: a plan cuts
    /// its targets into chunks of at most `bytes / (8·q^d)` pairs (a target
    /// with more pairs than that is a chunk alone, and its scratch is
    /// larger). At least `8·q^d` bytes.
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

    /// Target boxes per tile of the target-tiled schedule in the plans this
    /// evaluator makes for the per-key kernels: the width set, else
    /// [`default_targets_per_tile`] (a plan keeps the width it was made
    /// with: [`List1DevicePlan::targets_per_tile`]).
    ///
    /// [`List1DevicePlan::targets_per_tile`]: crate::nearfield::List1DevicePlan::targets_per_tile
    pub fn targets_per_tile(&self) -> usize {
        self.targets_per_tile
            .unwrap_or_else(|| default_targets_per_tile(self.meta.nq))
    }

    /// The same for the source-staged kernel: the width set, else
    /// [`DEFAULT_STAGED_TARGETS_PER_TILE`].
    pub fn staged_targets_per_tile(&self) -> usize {
        self.targets_per_tile
            .unwrap_or(DEFAULT_STAGED_TARGETS_PER_TILE)
    }

    /// Sets the target boxes per tile (one of [`TILE_TARGET_CHOICES`]) for
    /// plans made after this call, of every tiled kernel; `None` restores
    /// the defaults. The device refuses a tile whose shared memory exceeds
    /// its limit per block when it is evaluated.
    pub fn set_targets_per_tile(&mut self, n: impl Into<Option<usize>>) -> Result<()> {
        let n = n.into();
        if let Some(n) = n.filter(|n| !TILE_TARGET_CHOICES.contains(n)) {
            return bad(format!(
                "{n} target boxes per tile: must be one of {TILE_TARGET_CHOICES:?}"
            ));
        }
        self.targets_per_tile = n;
        Ok(())
    }

    /// Whether the tiled schedule may take NVIDIA's FP64 tensor cores
    /// (default true: where the device and the build have them, sm_80 and
    /// later; else it takes FMAs).
    pub fn tiled_tensor_cores(&self) -> bool {
        self.tiled_tensor_cores
    }

    /// Lets the tiled schedule take the FP64 tensor cores where it can
    /// (`true`) or always FMAs (`false`). The two sum four products per
    /// step or one: the same value to rounding, not the same bits.
    pub fn set_tiled_tensor_cores(&mut self, allow: bool) {
        self.tiled_tensor_cores = allow;
    }

    /// Whether this device and build run the tiled schedule on the FP64
    /// tensor cores (`hipkern_list1_tiled_tensor_cores`: NVIDIA sm_80 and
    /// later), where [`Self::tiled_tensor_cores`] allows it. Elsewhere the
    /// FMA kernel runs every tiled plan.
    pub fn tiled_tensor_cores_available(&self) -> bool {
        self.tensor_cores_available
    }

    /// Which tensor-core kernel the tiled plans are cut for (default
    /// [`List1SourceStaging::Auto`]).
    pub fn tiled_source_staging(&self) -> List1SourceStaging {
        self.source_staging
    }

    /// Cuts the tiled plans made after this call for the source-staged
    /// tensor-core kernel (`On`: each tile's source boxes loaded once into
    /// shared memory, each warp reading its case-matrix fragments itself,
    /// no barrier per key; tiles cut at [`tile_source_bound`] too), for the
    /// per-key one (`Off`), or by plan (`Auto`, the default: the staged
    /// tiles where their lanes busy holds up, as on uniform trees, the
    /// per-key ones where they are cut short, as on adaptive trees; module
    /// docs). A plan keeps the kernel it was cut for
    /// ([`List1DevicePlan::tiled_for_source_staging`]). The same products
    /// in the same order: the same bits, whichever is taken.
    ///
    /// [`List1DevicePlan::tiled_for_source_staging`]: crate::nearfield::List1DevicePlan::tiled_for_source_staging
    pub fn set_tiled_source_staging(&mut self, staging: List1SourceStaging) {
        self.source_staging = staging;
    }

    /// Whether source-staged plans of an ORBIT or fallback table carry
    /// their keys' case matrices where the tensor cores run (default true).
    pub fn tiled_key_matrices(&self) -> bool {
        self.tiled_key_matrices
    }

    /// With `true` (the default), a plan made for the source-staged kernel
    /// of an ORBIT or fallback table, where the tensor cores run
    /// ([`Self::tiled_tensor_cores`] and
    /// [`Self::tiled_tensor_cores_available`]: the FMA kernel does not read
    /// them), expands, once, the case matrix of each
    /// distinct key its tiles use (`hipkern_list1_expand_keys`: the
    /// layout's own entries, bit for bit) into a device buffer of
    /// [`List1DevicePlan::key_matrix_bytes`], and the kernel reads those as
    /// it reads a dense table's rows: no decode per tile and key. At most
    /// the dense table's size (one matrix per key used: 27 of 139 cases for
    /// a uniform octree's interior); the table itself stays compact. With
    /// `false` the kernel reconstructs every entry from the layout per
    /// tile. The same entries in the same order: the same bits. For plans
    /// made after this call.
    ///
    /// [`List1DevicePlan::key_matrix_bytes`]: crate::nearfield::List1DevicePlan::key_matrix_bytes
    pub fn set_tiled_key_matrices(&mut self, on: bool) {
        self.tiled_key_matrices = on;
    }
}

#[cfg(test)]
mod tests {
    use super::{prefer_source_staged, List1SourceStaging};

    #[test]
    fn auto_staging_follows_the_measured_lanes_busy() {
        // Lanes busy per key / staged on the H200's bench trees (6128bc7)
        // and whether staged was faster there.
        for (per_key, staged, faster) in [
            (0.997, 0.909, true),  // 3D q = 3 and q = 4 uniform, 32 boxes
            (0.996, 0.908, true),  // 3D q = 3 uniform, 64 boxes
            (1.000, 1.000, true),  // 2D q = 4 uniform, 32 boxes
            (0.996, 0.595, false), // 3D q = 4 uniform, 64 boxes
            (0.994, 0.298, false), // 3D q = 4 uniform, 128 boxes
            (0.633, 0.163, false), // 3D q = 3 random, 32 boxes
            (0.551, 0.125, false), // 3D q = 3 random, 64 boxes
        ] {
            assert_eq!(
                prefer_source_staged(per_key, staged),
                faster,
                "{per_key} {staged}"
            );
        }
        for s in ["off", "on", "auto"] {
            assert_eq!(s.parse::<List1SourceStaging>().unwrap().name(), s);
        }
        let e = "yes".parse::<List1SourceStaging>().unwrap_err().to_string();
        assert!(e.contains("'yes'") && e.contains("off, on or auto"), "{e}");
    }
}
