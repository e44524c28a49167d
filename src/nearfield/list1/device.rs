//! The List 1 evaluator on the device (`docs/design/list1.md`): a table
//! uploaded once in one of three layouts, evaluated many times on a stream
//! (`hipkern_list1_evaluate`, hip/nearfield_list1.hip).
//!
//! # What it computes
//!
//! In the per-target and case-grouped schedules, exactly what the CPU
//! float64 evaluator ([`crate::nearfield::evaluate_list1`]) computes over the same
//! entry values, bit for bit (the target-tiled schedule: the same to
//! rounding, below): per target box and
//! target point, the pairs in list order, per pair the source modes in
//! order, `u += scale·acc + disp` with the scalings of
//! [`crate::nearfield::level_scalings`] (computed on the host by that function and
//! uploaded per plan). The device never contracts a multiply and an add
//! into an FMA (see the kernel's header), so where the layouts hold the
//! same entry values the outputs are identical; a dense table built by
//! quadrature differs from its symmetry reduction by a few ulps per entry
//! (the orbit's members are separate quadratures), which the ORBIT and
//! fallback layouts replace by the representative's value.
//!
//! # Layouts ([`List1Layout`])
//!
//! - `Dense`: every entry, `n_tables × n_cases·q^{2d}` float64.
//! - `Orbit`: the compact rows of the arithmetic ORBIT addressing
//!   ([`OrbitDescriptors`]: `case_orbit_ranks`, `case_axis_perm`,
//!   `case_axis_sign`, `case_axis_group`, `case_value_offsets`,
//!   `axis_sign_power`) and those descriptors only; each row holds the
//!   value of its canonical entry with the representative's sign
//!   pre-applied (`row value = slot(rep).sign · T[rep]`), so that
//!   `T[c, s, t] = slot(c, s, t).sign · row value`. Scalar kernels and axis
//!   target/source derivatives; a directional source derivative is refused
//!   (use `Dense` or `Fallback`).
//! - `Fallback`: the rows in representative order and the generated
//!   descriptors ([`FallbackDescriptors`]: transform maps, transform
//!   signs, the open-addressed representative hash with its fixed probe
//!   count, the sparse sign lookup), validated against the dense oracle
//!   when they are prepared. Every kernel. Where
//!   [`FallbackDescriptors::resolution`] derives its plan-time table (the
//!   fallback's own row and sign of every entry of one canonical case per
//!   case orbit, and the transform taking each case there; checked on the
//!   host against [`FallbackDescriptors::slot`] for every full entry) the
//!   payload carries it too and the device resolves each entry with two
//!   table reads instead of scanning the candidate transforms and probing
//!   the hash; [`List1Payload::without_fallback_resolution`] keeps the pure
//!   descriptor path. Both give the same rows and signs, so the same bits.
//!
//! # Schedules ([`List1Schedule`])
//!
//! - `CaseGrouped` (the default where `q^d ≤` [`MAX_GROUPED_MODES`]):
//!   [`List1Evaluator::plan`] also groups each chunk's pairs by (table,
//!   case) into tiles (host counting sort, `list1_grouping.rs`); on the
//!   device a block builds its tile's case matrix `T(case, ·, ·)` once in
//!   shared memory, whatever the layout, and applies it to every pair of
//!   the tile, writing the per-pair sums `acc_j(t)` to the plan's scratch;
//!   a second kernel adds them per target in list order. The layouts differ
//!   only in how the matrix is built, once per tile, so ORBIT and the
//!   fallback run at dense's speed with their small tables. The scratch
//!   holds one chunk's `pairs × q^d` float64; chunks are cut so it stays
//!   under [`List1Evaluator::set_pair_scratch_bytes`] (default
//!   [`DEFAULT_PAIR_SCRATCH_BYTES`]).
//! - `PerTarget`: one kernel, target boxes over the grid, each lane reading
//!   every entry it needs from the layout; `list1_target_batch_size` lanes
//!   per box. No scratch.
//!
//! - `TargetTiled` ([`List1Schedule::TargetTiled`]; opt-in, `q^d ≤`
//!   [`MAX_TILED_MODES`]): the plan also cuts the target boxes into tiles
//!   of [`List1Evaluator::set_targets_per_tile`] boxes (host,
//!   `list1_tiling.rs`: boxes ordered by their sorted key lists, so a tile
//!   gathers boxes with the same cases; [`List1DevicePlan::tile_slots`]
//!   counts the lane slots walked). A block walks its tile's keys in
//!   ascending order, builds each case matrix once in shared memory and
//!   adds it into every box of the tile with a pair of that key; the
//!   outputs stay in registers and there is no scratch. The sums run on
//!   NVIDIA's FP64 tensor cores (`mma.sync` m8n8k4, sm_80 and later) where
//!   the device and build have them and
//!   [`List1Evaluator::set_tiled_tensor_cores`] allows it, else as FMAs.
//!   Keys in order and fused products: the CPU evaluator's value to
//!   rounding (≤ 5e−15 max-norm relative in the benchmark, ≤ 1e−13 asserted), not its bits; per
//!   arithmetic, the same bits for every layout, tile width and run.
//!   The key loop is software-pipelined: the next key's case-matrix
//!   entries and source values are loaded into registers before this
//!   key's products and stored after them. ORBIT decodes each key once into
//!   per-axis code and rank-term tables in shared memory, so an entry is a
//!   few table reads and the gather. It is the fastest schedule where the
//!   boxes of a tile share their cases (a uniform region) and no faster,
//!   or slower, where they do not (adaptive octrees, where many lane slots
//!   idle; the numbers: `docs/performance.md`, their history:
//!   `docs/history.md`); it is not bitwise the CPU evaluator's either, so
//!   it is not the default schedule.
//! - The tiled schedule's source-staged tensor-core kernel
//!   ([`List1Evaluator::set_tiled_source_staging`]): the per-key staging
//!   above is most of that kernel's instructions (hardware counters: 5 % of
//!   them tensor-core ops), and a tile's pairs read few distinct source
//!   boxes (a uniform region's 4 × 4 × 4 targets read 6 × 6 × 6 sources,
//!   against 64 × 27 rows staged key by key). So a plan cut for it also
//!   lists each tile's distinct sources (cutting a tile early where they
//!   would pass [`tile_source_bound`]) and each slot's position among
//!   them; the block loads the sources once per tile, pre-scaled, resolves
//!   and checks 32 keys' slots at a time, and then every warp walks those
//!   keys alone, with no barrier: its case-matrix fragments read straight
//!   from the table (the next key's while this key's products run), its
//!   source fragments from the staged rows. Same products in the same
//!   order as the per-key kernel: the same bits (tested). Decoding ORBIT
//!   or the fallback in every warp of every tile for every key costs more
//!   than staging saves (measured: `docs/history.md`), so a staged plan of an ORBIT or fallback table carries its
//!   keys' case matrices ([`List1Evaluator::set_tiled_key_matrices`],
//!   default on, where the tensor cores run): each distinct key's
//!   `q^d × q^d` matrix expanded once, on the device, from the layout
//!   (`hipkern_list1_expand_keys`, bit for bit the layout's entries), and
//!   read as the dense table's rows are. The table stays compact; the
//!   matrices take one per key the plan uses (27, 157 KB, for a uniform
//!   octree's interior against the dense table's 139 cases, 811 KB). On a
//!   uniform octree staged tiles are the fastest the tiled schedule has,
//!   in every layout; on adaptive trees they are cut at the source bound,
//!   leave most lane slots idle and lose to the per-key tiles
//!   (`docs/performance.md#list-1`). So the plan chooses
//!   ([`List1SourceStaging::Auto`], the default): it cuts both tilings,
//!   per key at [`default_targets_per_tile`] and staged at
//!   [`DEFAULT_STAGED_TARGETS_PER_TILE`], and keeps the staged one where
//!   its lanes busy is at least [`STAGED_LANES_BUSY_RATIO`] of the
//!   other's ([`prefer_source_staged`]), where the tensor cores run. The
//!   choice changes the time alone, never the bits.
//!
//! The per-target and grouped schedules compute every `acc_j(t)` as the
//! same ordered sum and every target's sum in list order, so they give the
//! same bits for finite source values
//! (tested; an entry that is zero by symmetry enters the grouped sums as
//! `f·0`, as in the dense layout, where the per-target ORBIT path skips
//! it, so an infinite or NaN device value can differ).
//!
//! Per-level tables (Yukawa) are uploaded side by side (`n_tables` blocks
//! of rows, one addressing: same kernel and `q`).
//!
//! # Use
//!
//! [`List1Payload`] prepares the host arrays of a layout (no device: what
//! is uploaded, its byte counts, and the entry each layout reconstructs),
//! [`List1Evaluator::new`] uploads one, [`List1Evaluator::plan`] validates
//! a tree's boxes and lists on the host and uploads them
//! ([`List1DevicePlan`], with its tiles), and
//! [`List1Evaluator::evaluate_into`] launches on
//! a stream into a caller's device buffer; [`List1Evaluator::evaluate`] does
//! all of it from host slices into a `Vec`.
//!
//! Everything is validated on the host before anything is launched or
//! written, with the CPU evaluator's own checks ([`List1Boxes::pairs`]:
//! CSR offsets, box ids, levels, centres, every pair a List 1 pair of a
//! 2:1 tree, named; [`crate::nearfield::level_scalings`]: the tables fit the levels),
//! plus the lengths and devices of the buffers and the plan's evaluator.
use crate::nearfield::cases::Cases;
use crate::nearfield::fallback::{FallbackDescriptors, FallbackResolution};
use crate::nearfield::kernels::{Derivative, Kernel};
use crate::nearfield::list1::{
    check_list1_inputs, check_source_values, shape_scalings, LevelScaling, List1Boxes, List1Tables,
    TableShape,
};
use crate::nearfield::list1_grouping::{group_pairs, tile_capacity, GroupChunk, PairGrouping};
use crate::nearfield::list1_tiling::{lanes_busy, tile_targets};
use crate::nearfield::orbit::OrbitDescriptors;
use crate::nearfield::reduced::ReducedTable;
use crate::nearfield::table::NearFieldTable;
use crate::runtime::{
    check, Device, DeviceBuffer, DeviceMemory, DeviceMemoryMut, DeviceRepr, Error, Result, Stream,
};
use hipkern_sys as sys;
use std::sync::atomic::{AtomicU64, Ordering};

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

fn bad<T>(msg: String) -> Result<T> {
    Err(Error::InvalidInput(format!("list 1 device: {msg}")))
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

    fn raw(self) -> sys::hipkern_list1_layout {
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

/// Symmetry-reduced tables of a List 1 evaluation (as [`List1Tables`] for
/// dense ones).
#[derive(Clone, Copy, Debug)]
pub enum List1ReducedTables<'a> {
    /// One table of a kernel with a scaling rule, any extent.
    Scaled(&'a ReducedTable),
    /// One table per source level, `tables[l]` at extent `root_extent/2^l`.
    PerLevel(&'a [ReducedTable]),
}

/// Bytes a table upload sends to the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct List1UploadBytes {
    /// The float64 values (every table's entries or rows).
    pub values: usize,
    /// The layout's addressing metadata (ORBIT or fallback descriptors; 0
    /// for dense), as [`OrbitDescriptors::metadata_bytes`] /
    /// [`FallbackDescriptors::metadata_bytes`] count them.
    pub descriptors: usize,
    /// The mode normalisers (`q^d` float64, read by 2D Laplace's
    /// displacement).
    pub normalizers: usize,
    /// The fallback's plan-time resolution table
    /// ([`FallbackResolution::bytes`]; 0 without one).
    pub resolution: usize,
}

impl List1UploadBytes {
    /// Everything.
    pub fn total(&self) -> usize {
        self.values + self.descriptors + self.normalizers + self.resolution
    }
}

/// What the evaluator knows of its tables besides the values: enough to
/// validate boxes and compute the level scalings exactly as the CPU does.
#[derive(Clone, Debug)]
struct TableMeta {
    kernel: Kernel,
    q: usize,
    dim: usize,
    nq: usize,
    n_cases: usize,
    /// Kernel, `q` and extent of each table, for the level scalings.
    shapes: Vec<TableShape>,
    per_level: bool,
}

/// The validated pairs of an evaluation, host side.
#[derive(Clone, Debug)]
struct HostPairs {
    starts: Vec<u32>,
    sources: Vec<u32>,
    cases: Vec<u8>,
    box_levels: Vec<u8>,
    scalings: Vec<LevelScaling>,
}

impl TableMeta {
    fn shape_of_reduced(t: &ReducedTable) -> TableShape {
        TableShape {
            kernel: t.kernel().clone(),
            q: t.q(),
            extent: t.extent(),
        }
    }

    /// Checks the tables (kernel, `q`, scaling rule; sizes the device can
    /// address) as [`level_scalings`] does, before any value is packed.
    fn new(shapes: Vec<TableShape>, per_level: bool) -> Result<TableMeta> {
        let Some(first) = shapes.first() else {
            return bad("per-level tables: the list is empty".into());
        };
        let (kernel, q, dim) = (first.kernel.clone(), first.q, first.kernel.dim());
        if !(dim == 2 || dim == 3) {
            return bad(format!("dimension {dim}: must be 2 or 3"));
        }
        let n_cases = Cases::new(dim)?.len();
        let nq = q.pow(dim as u32);
        // The scaling rule (Scaled) or one kernel and q (PerLevel).
        shape_scalings(&shapes, per_level, 1.0, &[])?;
        let meta = TableMeta {
            kernel,
            q,
            dim,
            nq,
            n_cases,
            shapes,
            per_level,
        };
        if (n_cases as u64) * (nq as u64) * (nq as u64) > u64::from(u32::MAX) {
            return bad(format!(
                "{n_cases} cases × (q^d = {nq})² entries do not fit the device's 32-bit entry ids"
            ));
        }
        Ok(meta)
    }

    /// The CPU evaluator's checks, in its order: the dimension, the boxes
    /// and pairs, the source values (when given), the level scalings.
    fn check(&self, boxes: &List1Boxes<'_>, values: Option<&[f64]>) -> Result<HostPairs> {
        let (pairs, scalings) = check_list1_inputs(boxes, &self.shapes, self.per_level, values)?;
        let n = boxes.n_boxes();
        let nq = self.nq;
        let max_level = scalings.len().saturating_sub(1);
        if scalings.len() > sys::HIPKERN_LIST1_MAX_LEVELS as usize {
            return bad(format!(
                "levels 0..={max_level}: the device takes at most {} levels",
                sys::HIPKERN_LIST1_MAX_LEVELS
            ));
        }
        if n.checked_mul(nq).is_none() || boxes.target_boxes.len().checked_mul(nq).is_none() {
            return bad(format!("{n} boxes × {nq} values overflow"));
        }
        Ok(HostPairs {
            starts: boxes.source_starts.to_vec(),
            sources: boxes.source_boxes.to_vec(),
            cases: pairs.cases.iter().map(|&c| c as u8).collect(),
            box_levels: boxes.levels.iter().map(|&l| l as u8).collect(),
            scalings,
        })
    }
}

/// The addressing of a layout, host side.
#[derive(Clone, Debug)]
enum HostAddressing {
    Dense,
    Orbit(Box<OrbitDescriptors>),
    Fallback(Box<FallbackDescriptors>, Option<Box<FallbackResolution>>),
}

/// The host arrays of one layout, ready to upload (module docs).
#[derive(Clone, Debug)]
pub struct List1Payload {
    layout: List1Layout,
    meta: TableMeta,
    n_tables: usize,
    n_rows: usize,
    values: Vec<f64>,
    normalizers: Vec<f64>,
    addressing: HostAddressing,
}

fn orbit_descriptors(kernel: &Kernel, q: usize) -> Result<OrbitDescriptors> {
    if let Some(Derivative::DirectionalSource(v)) = kernel.derivative() {
        return bad(format!(
            "the ORBIT layout does not model the directional source derivative along {v:?} \
             (its group keeps the direction collinear, not an axis); use the dense or the \
             fallback layout"
        ));
    }
    OrbitDescriptors::build(kernel, q)
}

/// Rows of the ORBIT layout from (full id, value) pairs holding at least
/// every representative, ascending: each row takes its first entry's value
/// times that entry's slot sign (0 for an entry zero by symmetry).
fn pack_orbit(
    desc: &OrbitDescriptors,
    nq: usize,
    entries: impl Iterator<Item = (usize, f64)>,
) -> Result<Vec<f64>> {
    let n = desc.n_rows();
    let mut out = vec![0.0f64; n];
    let mut seen = vec![false; n];
    let mut left = n;
    for (e, v) in entries {
        let slot = desc.slot(e / (nq * nq), (e / nq) % nq, e % nq);
        if !seen[slot.row] {
            seen[slot.row] = true;
            left -= 1;
            out[slot.row] = if slot.sign == 0 {
                0.0
            } else {
                f64::from(slot.sign) * v
            };
            if left == 0 {
                break;
            }
        }
    }
    if let Some(r) = seen.iter().position(|s| !s) {
        return bad(format!(
            "ORBIT row {r} has no entry (inconsistent descriptors)"
        ));
    }
    Ok(out)
}

impl List1Payload {
    /// The payload of dense tables in `layout`. ORBIT rows take each
    /// orbit's representative entry (the smallest full id), fallback rows
    /// the representatives in order; orbits that are zero by symmetry get
    /// exactly 0.
    pub fn from_tables(tables: &List1Tables<'_>, layout: List1Layout) -> Result<List1Payload> {
        let list: Vec<&NearFieldTable> = match tables {
            List1Tables::Scaled(t) => vec![*t],
            List1Tables::PerLevel(ts) => ts.iter().collect(),
        };
        let meta = TableMeta::new(
            list.iter().map(|t| TableShape::of(t)).collect(),
            matches!(tables, List1Tables::PerLevel(_)),
        )?;
        let (nq, q) = (meta.nq, meta.q);
        let (addressing, n_rows, values) = match layout {
            List1Layout::Dense => {
                let n = meta.n_cases * nq * nq;
                let mut v = Vec::with_capacity(n * list.len());
                for t in &list {
                    v.extend_from_slice(t.data());
                }
                (HostAddressing::Dense, n, v)
            }
            List1Layout::Orbit => {
                let desc = orbit_descriptors(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for t in &list {
                    v.extend(pack_orbit(&desc, nq, t.data().iter().copied().enumerate())?);
                }
                (
                    HostAddressing::Orbit(Box::new(desc.clone())),
                    desc.n_rows(),
                    v,
                )
            }
            List1Layout::Fallback => {
                let desc = FallbackDescriptors::prepare(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for t in &list {
                    v.extend(
                        desc.representatives
                            .iter()
                            .zip(&desc.zero_by_symmetry)
                            .map(|(&r, &z)| if z { 0.0 } else { t.data()[r as usize] }),
                    );
                }
                let n = desc.n_rows();
                let res = desc.resolution().map(Box::new);
                (HostAddressing::Fallback(Box::new(desc), res), n, v)
            }
        };
        let normalizers = list[0].mode_normalizers().to_vec();
        Ok(List1Payload {
            layout,
            n_tables: list.len(),
            meta,
            n_rows,
            values,
            normalizers,
            addressing,
        })
    }

    /// The payload of symmetry-reduced tables in `layout`: dense values
    /// through [`ReducedTable::reconstruct_full_table_from_symmetry`], ORBIT
    /// rows from the representatives (`row value = slot sign · value`),
    /// fallback rows the reduced data itself (its ids must be the
    /// fallback's representatives).
    pub fn from_reduced(
        tables: &List1ReducedTables<'_>,
        layout: List1Layout,
    ) -> Result<List1Payload> {
        let list: Vec<&ReducedTable> = match tables {
            List1ReducedTables::Scaled(t) => vec![*t],
            List1ReducedTables::PerLevel(ts) => ts.iter().collect(),
        };
        let meta = TableMeta::new(
            list.iter()
                .map(|t| TableMeta::shape_of_reduced(t))
                .collect(),
            matches!(tables, List1ReducedTables::PerLevel(_)),
        )?;
        let (nq, q) = (meta.nq, meta.q);
        let (addressing, n_rows, values) = match layout {
            List1Layout::Dense => {
                let n = meta.n_cases * nq * nq;
                let mut v = Vec::with_capacity(n * list.len());
                for t in &list {
                    v.extend(t.reconstruct_full_table_from_symmetry());
                }
                (HostAddressing::Dense, n, v)
            }
            List1Layout::Orbit => {
                let desc = orbit_descriptors(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for t in &list {
                    let reps = t
                        .reduced_entry_ids()
                        .iter()
                        .zip(t.reduced_data())
                        .map(|(&e, &x)| (e as usize, x));
                    v.extend(pack_orbit(&desc, nq, reps)?);
                }
                let n = desc.n_rows();
                (HostAddressing::Orbit(Box::new(desc)), n, v)
            }
            List1Layout::Fallback => {
                let desc = FallbackDescriptors::prepare(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for (l, t) in list.iter().enumerate() {
                    if t.reduced_entry_ids() != &desc.representatives[..] {
                        return bad(format!(
                            "reduced table {l}: its {} representative ids are not the \
                             fallback's {} representatives",
                            t.reduced_entry_ids().len(),
                            desc.representatives.len()
                        ));
                    }
                    v.extend_from_slice(t.reduced_data());
                }
                let n = desc.n_rows();
                let res = desc.resolution().map(Box::new);
                (HostAddressing::Fallback(Box::new(desc), res), n, v)
            }
        };
        let normalizers = list[0].mode_normalizers().to_vec();
        Ok(List1Payload {
            layout,
            n_tables: list.len(),
            meta,
            n_rows,
            values,
            normalizers,
            addressing,
        })
    }

    /// The ORBIT descriptors the rows are addressed with (ORBIT payloads).
    pub fn orbit_descriptors(&self) -> Option<&OrbitDescriptors> {
        match &self.addressing {
            HostAddressing::Orbit(d) => Some(d),
            _ => None,
        }
    }

    /// The generated fallback descriptors (fallback payloads).
    pub fn fallback_descriptors(&self) -> Option<&FallbackDescriptors> {
        match &self.addressing {
            HostAddressing::Fallback(d, _) => Some(d),
            _ => None,
        }
    }

    /// The fallback's plan-time resolution table (module docs), when the
    /// payload carries one: fallback payloads whose
    /// [`FallbackDescriptors::resolution`] is `Some`, unless
    /// [`List1Payload::without_fallback_resolution`] dropped it.
    pub fn fallback_resolution(&self) -> Option<&FallbackResolution> {
        match &self.addressing {
            HostAddressing::Fallback(_, r) => r.as_deref(),
            _ => None,
        }
    }

    /// The same payload without the fallback's resolution table: the
    /// device then takes the pure descriptor path (transform candidates,
    /// smallest full id, sign lookup, hash). Other layouts are unchanged.
    pub fn without_fallback_resolution(mut self) -> List1Payload {
        if let HostAddressing::Fallback(_, r) = &mut self.addressing {
            *r = None;
        }
        self
    }

    /// The layout.
    pub fn layout(&self) -> List1Layout {
        self.layout
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.meta.kernel
    }

    /// Nodes per axis.
    pub fn q(&self) -> usize {
        self.meta.q
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// Tables (1, or one per level).
    pub fn n_tables(&self) -> usize {
        self.n_tables
    }

    /// Values per table (every entry for dense, compact rows otherwise).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The values as uploaded (`n_tables × n_rows`).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Bytes an upload of this payload sends.
    pub fn upload_bytes(&self) -> List1UploadBytes {
        List1UploadBytes {
            values: self.values.len() * 8,
            descriptors: match &self.addressing {
                HostAddressing::Dense => 0,
                HostAddressing::Orbit(d) => d.metadata_bytes(),
                HostAddressing::Fallback(d, _) => d.metadata_bytes(),
            },
            normalizers: self.normalizers.len() * 8,
            resolution: self.fallback_resolution().map_or(0, |r| r.bytes()),
        }
    }

    /// Entry `(case, s, t)` of table `table` as the layout reconstructs it
    /// (the value the device reads): dense the value, ORBIT `slot sign ·
    /// row`, fallback `sign · row` of its slot (through the resolution
    /// table when the payload carries one).
    pub fn entry(&self, table: usize, case: usize, s: usize, t: usize) -> Result<f64> {
        let nq = self.meta.nq;
        if table >= self.n_tables || case >= self.meta.n_cases || s >= nq || t >= nq {
            return bad(format!(
                "entry (table {table}, case {case}, source mode {s}, target point {t}) out of \
                 range ({} tables, {} cases, {nq} points)",
                self.n_tables, self.meta.n_cases
            ));
        }
        let base = table * self.n_rows;
        Ok(match &self.addressing {
            HostAddressing::Dense => self.values[base + (case * nq + s) * nq + t],
            HostAddressing::Orbit(d) => {
                let slot = d.slot(case, s, t);
                if slot.sign == 0 {
                    0.0
                } else {
                    f64::from(slot.sign) * self.values[base + slot.row]
                }
            }
            HostAddressing::Fallback(d, Some(r)) => {
                let (row, sign) = r.slot(d, case, s, t);
                f64::from(sign) * self.values[base + row as usize]
            }
            HostAddressing::Fallback(d, None) => {
                let slot = d.slot(case, s, t)?;
                f64::from(slot.sign) * self.values[base + slot.row as usize]
            }
        })
    }

    /// The checks an evaluation makes before anything is launched
    /// (module docs), without a device: boxes and lists, `source_values`
    /// when given, and the level scalings.
    pub fn check(&self, boxes: &List1Boxes<'_>, source_values: Option<&[f64]>) -> Result<()> {
        self.meta.check(boxes, source_values).map(|_| ())
    }
}

/// The addressing of a layout, on the device.
enum DeviceAddressing {
    Dense,
    Orbit {
        ranks: DeviceBuffer<u16>,
        perm: DeviceBuffer<u8>,
        sign: DeviceBuffer<i8>,
        group: DeviceBuffer<u8>,
        offsets: DeviceBuffer<u32>,
        axis_sign_power: DeviceBuffer<u8>,
        n_case_orbits: usize,
    },
    Fallback {
        qmap: DeviceBuffer<u16>,
        cmap: DeviceBuffer<u8>,
        signs: DeviceBuffer<i8>,
        keys: DeviceBuffer<u32>,
        rows: DeviceBuffer<u32>,
        probe_count: u32,
        sign_ids: DeviceBuffer<u32>,
        sign_signs: DeviceBuffer<i8>,
        n_transforms: usize,
        resolution: Option<DeviceResolution>,
    },
}

/// A [`FallbackResolution`] on the device.
struct DeviceResolution {
    case_orbit: DeviceBuffer<u8>,
    case_transform: DeviceBuffer<u8>,
    rows: DeviceBuffer<u16>,
    n_orbits: usize,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A table on one device in one layout (module docs). Evaluates any
/// number of times; `Send + Sync` through its parts (device buffers and
/// host data).
pub struct List1Evaluator {
    id: u64,
    device: Device,
    layout: List1Layout,
    meta: TableMeta,
    n_tables: usize,
    n_rows: usize,
    values: DeviceBuffer<f64>,
    normalizers: DeviceBuffer<f64>,
    addressing: DeviceAddressing,
    bytes: List1UploadBytes,
    batch: usize,
    schedule: List1Schedule,
    pair_scratch_bytes: usize,
    /// Set by [`List1Evaluator::set_targets_per_tile`]; `None`: the
    /// defaults ([`default_targets_per_tile`] per key,
    /// [`DEFAULT_STAGED_TARGETS_PER_TILE`] staged).
    targets_per_tile: Option<usize>,
    tiled_tensor_cores: bool,
    /// `hipkern_list1_tiled_tensor_cores` on this device at upload.
    tensor_cores_available: bool,
    source_staging: List1SourceStaging,
    tiled_key_matrices: bool,
}

impl std::fmt::Debug for List1Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("List1Evaluator")
            .field("device", &self.device)
            .field("layout", &self.layout)
            .field("kernel", &self.meta.kernel)
            .field("q", &self.meta.q)
            .field("n_tables", &self.n_tables)
            .field("n_rows", &self.n_rows)
            .field("bytes", &self.bytes)
            .field("target_batch_size", &self.batch)
            .field("schedule", &self.schedule)
            .field("targets_per_tile", &self.targets_per_tile)
            .field("source_staging", &self.source_staging)
            .finish()
    }
}

/// The validated boxes and lists of one tree for one evaluator, on its
/// device ([`List1Evaluator::plan`]), with the case-grouped schedule's
/// tiles and, after its first grouped evaluation, its scratch.
///
/// The scratch is the plan's: evaluations of one plan in the grouped
/// schedule on different streams must be ordered by the caller (an event
/// between them), or one overwrites the pair products the other is still
/// summing. Use one plan per stream to run them concurrently.
pub struct List1DevicePlan {
    evaluator: u64,
    device: usize,
    n_targets: usize,
    n_boxes: usize,
    n_pairs: usize,
    displacement_pairs: usize,
    n_levels: usize,
    nq: usize,
    starts: DeviceBuffer<u32>,
    sources: DeviceBuffer<u32>,
    cases: DeviceBuffer<u8>,
    box_levels: DeviceBuffer<u8>,
    level_scale: DeviceBuffer<f64>,
    level_displacement: DeviceBuffer<f64>,
    level_table: DeviceBuffer<u32>,
    bytes: usize,
    groups: DeviceGrouping,
    tiles: Option<DeviceTiling>,
}

/// The target-tiled schedule's part of a plan (`q^d ≤` [`MAX_TILED_MODES`]).
struct DeviceTiling {
    targets_per_tile: usize,
    n_tiles: usize,
    slots: usize,
    tile_targets: DeviceBuffer<u32>,
    tile_key_offsets: DeviceBuffer<u32>,
    keys: DeviceBuffer<u32>,
    key_pairs: DeviceBuffer<u32>,
    /// Cut at [`tile_source_bound`] for the source-staged kernel (else only
    /// at the width, as the other tiled kernels want).
    source_staged: bool,
    max_tile_sources: usize,
    tile_source_offsets: DeviceBuffer<u32>,
    tile_sources: DeviceBuffer<u32>,
    key_source_slots: DeviceBuffer<u16>,
    /// The case matrices of the tiles' keys, for a source-staged plan of
    /// an ORBIT or fallback table ([`List1Evaluator::set_tiled_key_matrices`]).
    key_matrices: Option<KeyMatrices>,
}

/// The case matrices of a plan's distinct keys on the device
/// (`hipkern_list1_expand_keys`), `q^d × q^d` float64 each, and the index
/// from every key (`table · n_cases + case`) to its matrix (`u32::MAX`:
/// none).
struct KeyMatrices {
    count: usize,
    values: DeviceBuffer<f64>,
    index: DeviceBuffer<u32>,
}

/// The distinct keys of `keys` (ascending) and, for each of `n_keys` key
/// ids, its position among them (`u32::MAX` for a key not in `keys`).
fn key_matrix_index(keys: &[u32], n_keys: usize) -> (Vec<u32>, Vec<u32>) {
    let mut distinct = keys.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut index = vec![u32::MAX; n_keys];
    for (i, &k) in distinct.iter().enumerate() {
        index[k as usize] = i as u32;
    }
    (distinct, index)
}

/// The case-grouped schedule's part of a plan: the tiles on the device,
/// the chunks on the host, the scratch (allocated at the first grouped
/// evaluation).
struct DeviceGrouping {
    chunks: Vec<GroupChunk>,
    tile_offsets: DeviceBuffer<u32>,
    tile_keys: DeviceBuffer<u32>,
    tile_pairs: DeviceBuffer<u32>,
    max_chunk_pairs: usize,
    scratch: Option<DeviceBuffer<f64>>,
}

impl std::fmt::Debug for List1DevicePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("List1DevicePlan")
            .field("device", &self.device)
            .field("n_targets", &self.n_targets)
            .field("n_boxes", &self.n_boxes)
            .field("n_pairs", &self.n_pairs)
            .field("bytes", &self.bytes)
            .field("chunks", &self.groups.chunks.len())
            .finish()
    }
}

impl List1DevicePlan {
    /// Chunks of the case-grouped schedule (each one pair of launches; the
    /// evaluator's scratch bound when the plan was made sets how many).
    pub fn grouped_chunks(&self) -> usize {
        self.groups.chunks.len()
    }

    /// Bytes of the case-grouped schedule's scratch: the pair products of
    /// the largest chunk (allocated at the first grouped evaluation).
    pub fn pair_scratch_bytes(&self) -> usize {
        self.groups.max_chunk_pairs * self.nq * 8
    }

    /// The pairs as the C ABI's `hipkern_list1_evaluate*` entry points take
    /// them: device pointers into this plan's buffers, valid while it lives.
    pub fn raw_pairs(&self) -> sys::hipkern_list1_pairs {
        sys::hipkern_list1_pairs {
            n_targets: self.n_targets as i64,
            n_boxes: self.n_boxes as i64,
            n_pairs: self.n_pairs as i64,
            n_levels: self.n_levels as i32,
            source_starts: self.starts.as_ptr(),
            source_boxes: self.sources.as_ptr(),
            pair_cases: self.cases.as_ptr(),
            box_levels: self.box_levels.as_ptr(),
            level_scale: self.level_scale.as_ptr(),
            level_displacement: self.level_displacement.as_ptr(),
            level_table: self.level_table.as_ptr(),
        }
    }

    /// The tiles of the target-tiled schedule as `hipkern_list1_evaluate_tiled`
    /// takes them, with `arithmetic` (a `HIPKERN_LIST1_TILED_*`): device
    /// pointers into this plan's buffers, valid while it lives; `None` where
    /// the schedule does not apply (`q^d >` [`MAX_TILED_MODES`]).
    pub fn raw_tiles(&self, arithmetic: u32) -> Option<sys::hipkern_list1_tiles> {
        let tl = self.tiles.as_ref()?;
        Some(sys::hipkern_list1_tiles {
            targets_per_tile: tl.targets_per_tile as i32,
            arithmetic: arithmetic as i32,
            n_tiles: tl.n_tiles as i64,
            tile_targets: tl.tile_targets.as_ptr(),
            tile_key_offsets: tl.tile_key_offsets.as_ptr(),
            keys: tl.keys.as_ptr(),
            key_pairs: tl.key_pairs.as_ptr(),
            max_tile_sources: tl.max_tile_sources as i32,
            tile_source_offsets: tl.tile_source_offsets.as_ptr(),
            tile_sources: tl.tile_sources.as_ptr(),
            key_source_slots: tl.key_source_slots.as_ptr(),
            key_matrices: tl
                .key_matrices
                .as_ref()
                .map_or(std::ptr::null(), |m| m.values.as_ptr()),
            key_matrix_index: tl
                .key_matrices
                .as_ref()
                .map_or(std::ptr::null(), |m| m.index.as_ptr()),
            n_key_matrices: tl.key_matrices.as_ref().map_or(0, |m| m.count as i64),
        })
    }

    /// Case matrices the plan holds for the source-staged kernel (its
    /// tiles' distinct keys; 0 where it holds none: see
    /// [`List1Evaluator::set_tiled_key_matrices`]).
    pub fn key_matrices(&self) -> usize {
        self.tiles
            .as_ref()
            .and_then(|t| t.key_matrices.as_ref())
            .map_or(0, |m| m.count)
    }

    /// Device bytes of those matrices (`key_matrices() × q^{2d} × 8`).
    pub fn key_matrix_bytes(&self) -> usize {
        self.key_matrices() * self.nq * self.nq * 8
    }

    /// Tiles of the target-tiled schedule (0 where it does not apply).
    pub fn target_tiles(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.n_tiles)
    }

    /// The target-tiled schedule's lane slots (keys × lanes summed over the
    /// tiles): its work in units of one pair ([`Self::tiled_lanes_busy`]).
    pub fn tile_slots(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.slots)
    }

    /// `n_pairs() / tile_slots()`: the share of the tiled schedule's lane
    /// slots that hold a pair (1 for a uniform tree's interior; what
    /// [`List1SourceStaging::Auto`] compares).
    pub fn tiled_lanes_busy(&self) -> f64 {
        lanes_busy(self.n_pairs, self.tile_slots())
    }

    /// The most distinct source boxes of one tile of the tiled schedule
    /// (the tensor-core kernel's shared source rows; 0 where it does not
    /// apply).
    pub fn max_tile_sources(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.max_tile_sources)
    }

    /// Whether the tiles were cut for the source-staged kernel (by the
    /// evaluator's [`List1Evaluator::set_tiled_source_staging`] when the
    /// plan was made; false where the tiled schedule does not apply). The
    /// tiled schedule runs a plan on the kernel it was cut for, where the
    /// tensor cores are taken.
    pub fn tiled_for_source_staging(&self) -> bool {
        self.tiles.as_ref().is_some_and(|t| t.source_staged)
    }

    /// Target boxes per tile of the tiled schedule (0 where it does not
    /// apply).
    pub fn targets_per_tile(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.targets_per_tile)
    }

    /// Target boxes (output rows of `q^d` values).
    pub fn n_targets(&self) -> usize {
        self.n_targets
    }

    /// Boxes (source value rows of `q^d` values).
    pub fn n_boxes(&self) -> usize {
        self.n_boxes
    }

    /// (target box, source box) pairs.
    pub fn n_pairs(&self) -> usize {
        self.n_pairs
    }

    /// Pairs whose source level has a nonzero displacement (2D Laplace).
    pub fn displacement_pairs(&self) -> usize {
        self.displacement_pairs
    }

    /// Bytes the plan uploaded (offsets, source boxes, cases, levels,
    /// per-level scalings).
    pub fn upload_bytes(&self) -> usize {
        self.bytes
    }
}

fn upload<T: DeviceRepr>(device: &Device, host: &[T]) -> Result<DeviceBuffer<T>> {
    device.htod_copy(host)
}

impl List1Evaluator {
    /// Uploads `payload` to `device` (synchronously). The target batch size
    /// starts at [`DEFAULT_TARGET_BATCH_SIZE`].
    pub fn new(device: &Device, payload: &List1Payload) -> Result<List1Evaluator> {
        let _scope = device.enter()?;
        let values = upload(device, &payload.values)?;
        let normalizers = upload(device, &payload.normalizers)?;
        let addressing = match &payload.addressing {
            HostAddressing::Dense => DeviceAddressing::Dense,
            HostAddressing::Orbit(d) => DeviceAddressing::Orbit {
                ranks: upload(device, &d.case_orbit_ranks)?,
                perm: upload(device, &d.case_axis_perm)?,
                sign: upload(device, &d.case_axis_sign)?,
                group: upload(device, &d.case_axis_group)?,
                offsets: upload(device, &d.case_value_offsets)?,
                axis_sign_power: upload(device, &d.axis_sign_power)?,
                n_case_orbits: d.n_case_orbits(),
            },
            HostAddressing::Fallback(d, r) => DeviceAddressing::Fallback {
                qmap: upload(device, &d.transform_qpoint_map)?,
                cmap: upload(device, &d.transform_case_map)?,
                signs: upload(device, &d.transform_signs)?,
                keys: upload(device, &d.representative_lookup_keys)?,
                rows: upload(device, &d.representative_lookup_rows)?,
                probe_count: d.probe_count,
                sign_ids: upload(device, &d.sign_lookup_ids)?,
                sign_signs: upload(device, &d.sign_lookup_signs)?,
                n_transforms: d.n_transforms(),
                resolution: match r {
                    None => None,
                    Some(r) => Some(DeviceResolution {
                        case_orbit: upload(device, &r.case_orbit)?,
                        case_transform: upload(device, &r.case_transform)?,
                        rows: upload(device, &r.rows)?,
                        n_orbits: r.n_orbits(),
                    }),
                },
            },
        };
        let mut available = 0i32;
        // SAFETY: a valid out-pointer; the call reads the current device,
        // made `device` by the scope above.
        check("hipkern_list1_tiled_tensor_cores", unsafe {
            sys::hipkern_list1_tiled_tensor_cores(&mut available)
        })?;
        Ok(List1Evaluator {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
            layout: payload.layout,
            meta: payload.meta.clone(),
            n_tables: payload.n_tables,
            n_rows: payload.n_rows,
            values,
            normalizers,
            addressing,
            bytes: payload.upload_bytes(),
            batch: DEFAULT_TARGET_BATCH_SIZE,
            schedule: List1Schedule::default_for(payload.meta.nq),
            pair_scratch_bytes: DEFAULT_PAIR_SCRATCH_BYTES,
            targets_per_tile: None,
            tiled_tensor_cores: true,
            tensor_cores_available: available != 0,
            source_staging: List1SourceStaging::Auto,
            tiled_key_matrices: true,
        })
    }

    /// [`List1Payload::from_tables`] uploaded.
    pub fn from_tables(
        device: &Device,
        tables: &List1Tables<'_>,
        layout: List1Layout,
    ) -> Result<List1Evaluator> {
        List1Evaluator::new(device, &List1Payload::from_tables(tables, layout)?)
    }

    /// [`List1Payload::from_reduced`] uploaded.
    pub fn from_reduced(
        device: &Device,
        tables: &List1ReducedTables<'_>,
        layout: List1Layout,
    ) -> Result<List1Evaluator> {
        List1Evaluator::new(device, &List1Payload::from_reduced(tables, layout)?)
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The layout.
    pub fn layout(&self) -> List1Layout {
        self.layout
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.meta.kernel
    }

    /// Nodes per axis.
    pub fn q(&self) -> usize {
        self.meta.q
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// `q^d`: values per box.
    pub fn n_modes(&self) -> usize {
        self.meta.nq
    }

    /// Tables (1, or one per level).
    pub fn n_tables(&self) -> usize {
        self.n_tables
    }

    /// Values per table.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Bytes the table upload sent (values + descriptors + normalisers).
    pub fn upload_bytes(&self) -> List1UploadBytes {
        self.bytes
    }

    /// Whether the fallback layout resolves entries through its plan-time
    /// table (module docs); false for the pure descriptor path and for the
    /// other layouts.
    pub fn fallback_resolved(&self) -> bool {
        matches!(
            self.addressing,
            DeviceAddressing::Fallback {
                resolution: Some(_),
                ..
            }
        )
    }

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
    pub fn set_tiled_key_matrices(&mut self, on: bool) {
        self.tiled_key_matrices = on;
    }

    /// Validates `boxes` as the CPU evaluator does (module docs) and
    /// uploads them for this evaluator (synchronously).
    pub fn plan(&self, boxes: &List1Boxes<'_>) -> Result<List1DevicePlan> {
        let hp = self.meta.check(boxes, None)?;
        let _scope = self.device.enter()?;
        self.upload_plan(&hp)
    }

    fn upload_plan(&self, hp: &HostPairs) -> Result<List1DevicePlan> {
        let d = &self.device;
        let scale: Vec<f64> = hp.scalings.iter().map(|s| s.scale).collect();
        let disp: Vec<f64> = hp.scalings.iter().map(|s| s.displacement).collect();
        let table: Vec<u32> = hp.scalings.iter().map(|s| s.table as u32).collect();
        let displacement_pairs = hp
            .sources
            .iter()
            .filter(|&&s| disp[usize::from(hp.box_levels[s as usize])] != 0.0)
            .count();
        let nq = self.meta.nq;
        let n_cases = self.meta.n_cases;
        let key = |j: usize| {
            let lvl = usize::from(hp.box_levels[hp.sources[j] as usize]);
            hp.scalings[lvl].table * n_cases + usize::from(hp.cases[j])
        };
        // Only the source-staged kernel needs its tiles' sources bounded;
        // the others keep full tiles.
        let cut = |staged: bool| {
            let (width, bound) = if staged {
                let w = self.staged_targets_per_tile();
                (w, tile_source_bound(nq, w))
            } else {
                (self.targets_per_tile(), usize::MAX)
            };
            let t = tile_targets(
                &hp.starts,
                |j| key(j) as u32,
                |j| hp.sources[j],
                width,
                bound,
            );
            (t, staged)
        };
        let tensor = self.tiled_tensor_cores && self.tensor_cores_available;
        let tiling = (nq <= MAX_TILED_MODES).then(|| match self.source_staging {
            List1SourceStaging::Off => cut(false),
            List1SourceStaging::On => cut(true),
            List1SourceStaging::Auto if !tensor => cut(false),
            List1SourceStaging::Auto => {
                let per_key = cut(false);
                let staged = cut(true);
                let pairs = hp.sources.len();
                if prefer_source_staged(
                    lanes_busy(pairs, per_key.0.slots()),
                    lanes_busy(pairs, staged.0.slots()),
                ) {
                    staged
                } else {
                    per_key
                }
            }
        });
        let grouping: PairGrouping = group_pairs(
            &hp.starts,
            self.n_tables * n_cases,
            key,
            (self.pair_scratch_bytes / (8 * nq)).max(1),
            tile_capacity(nq),
        );
        // The source-staged kernel's key matrices (ORBIT and fallback).
        let key_matrices = match &tiling {
            Some((t, true))
                if tensor
                    && self.tiled_key_matrices
                    && self.layout != List1Layout::Dense
                    && !t.keys.is_empty() =>
            {
                Some(self.expand_keys(&t.keys)?)
            }
            _ => None,
        };
        let bytes = 4 * (hp.starts.len() + hp.sources.len())
            + hp.cases.len()
            + hp.box_levels.len()
            + 20 * scale.len()
            + 4 * (grouping.tile_offsets.len()
                + grouping.tile_keys.len()
                + grouping.tile_pairs.len())
            + tiling.as_ref().map_or(0, |(t, _)| {
                4 * (t.tile_targets.len()
                    + t.tile_key_offsets.len()
                    + t.keys.len()
                    + t.key_pairs.len()
                    + t.tile_source_offsets.len()
                    + t.tile_sources.len())
                    + 2 * t.key_source_slots.len()
            })
            + key_matrices
                .as_ref()
                .map_or(0, |m| 4 * (m.count + m.index.len()));
        Ok(List1DevicePlan {
            evaluator: self.id,
            device: d.ordinal(),
            n_targets: hp.starts.len() - 1,
            n_boxes: hp.box_levels.len(),
            n_pairs: hp.sources.len(),
            displacement_pairs,
            n_levels: scale.len(),
            starts: upload(d, &hp.starts)?,
            sources: upload(d, &hp.sources)?,
            cases: upload(d, &hp.cases)?,
            box_levels: upload(d, &hp.box_levels)?,
            level_scale: upload(d, &scale)?,
            level_displacement: upload(d, &disp)?,
            level_table: upload(d, &table)?,
            bytes,
            nq,
            groups: DeviceGrouping {
                tile_offsets: upload(d, &grouping.tile_offsets)?,
                tile_keys: upload(d, &grouping.tile_keys)?,
                tile_pairs: upload(d, &grouping.tile_pairs)?,
                chunks: grouping.chunks,
                max_chunk_pairs: grouping.max_chunk_pairs,
                scratch: None,
            },
            tiles: match tiling {
                None => None,
                Some((t, source_staged)) => Some(DeviceTiling {
                    targets_per_tile: t.targets_per_tile,
                    n_tiles: t.n_tiles(),
                    slots: t.slots(),
                    tile_targets: upload(d, &t.tile_targets)?,
                    tile_key_offsets: upload(d, &t.tile_key_offsets)?,
                    keys: upload(d, &t.keys)?,
                    key_pairs: upload(d, &t.key_pairs)?,
                    source_staged,
                    max_tile_sources: t.max_tile_sources,
                    tile_source_offsets: upload(d, &t.tile_source_offsets)?,
                    tile_sources: upload(d, &t.tile_sources)?,
                    key_source_slots: upload(d, &t.key_source_slots)?,
                    key_matrices,
                }),
            },
        })
    }

    /// The case matrices of the distinct keys among `keys` (ids below
    /// `n_tables · n_cases`, from the plan's validated pairs), expanded on
    /// the device (synchronously, on a stream of its own).
    fn expand_keys(&self, keys: &[u32]) -> Result<KeyMatrices> {
        let d = &self.device;
        let nq = self.meta.nq;
        let (distinct, index) = key_matrix_index(keys, self.n_tables * self.meta.n_cases);
        let keys_d = upload(d, &distinct)?;
        let mut values = d.alloc::<f64>(distinct.len() * nq * nq)?;
        let stream = d.new_stream()?;
        let t = self.raw_table();
        let _scope = d.enter()?;
        // SAFETY: the evaluator's table (live buffers, checked at upload),
        // `distinct.len()` keys below n_tables · n_cases on the device and
        // room for as many q^d × q^d matrices; synchronized before the
        // buffers can be dropped.
        let status = unsafe {
            sys::hipkern_list1_expand_keys(
                &t,
                keys_d.as_ptr(),
                distinct.len() as i64,
                values.as_mut_ptr(),
                stream.as_raw(),
            )
        };
        check("hipkern_list1_expand_keys", status)?;
        stream.synchronize()?;
        Ok(KeyMatrices {
            count: distinct.len(),
            values,
            index: upload(d, &index)?,
        })
    }

    fn same_device(&self, what: &str, ordinal: usize) -> Result<()> {
        if ordinal != self.device.ordinal() {
            return bad(format!(
                "{what} is on device {ordinal}, the evaluator's table on device {}",
                self.device.ordinal()
            ));
        }
        Ok(())
    }

    /// List 1 of `source_values` (`n_boxes × q^d` on the device) over
    /// `plan` into `out` (`n_targets × q^d`, fully overwritten),
    /// asynchronously on `stream`, in the evaluator's schedule. Checked
    /// before anything is launched: the plan is this evaluator's,
    /// everything is on its device, the lengths. Device-resident source
    /// values are not checked for finiteness (a non-finite value reaches
    /// the targets whose lists hold its box).
    ///
    /// The case-grouped schedule writes the pair products into the plan's
    /// scratch (allocated here the first time): evaluations of one plan on
    /// different streams must be ordered by the caller, as for `out`.
    ///
    /// `source_values` and `out` may be buffers or views (another
    /// library's memory borrowed with
    /// [`DeviceSlice::from_raw_parts`](crate::runtime::DeviceSlice::from_raw_parts)).
    pub fn evaluate_into(
        &self,
        stream: &Stream,
        plan: &mut List1DevicePlan,
        source_values: &(impl DeviceMemory<f64> + ?Sized),
        out: &mut (impl DeviceMemoryMut<f64> + ?Sized),
    ) -> Result<()> {
        let source_values = source_values.device_view();
        let mut out = out.device_view_mut();
        if plan.evaluator != self.id {
            return bad(
                "the plan was made by another evaluator (its level scalings belong to that \
                 evaluator's tables)"
                    .into(),
            );
        }
        self.same_device("the stream", stream.device().ordinal())?;
        self.same_device("the plan", plan.device)?;
        self.same_device("source_values", source_values.device().ordinal())?;
        self.same_device("out", out.device().ordinal())?;
        let nq = self.meta.nq;
        if source_values.len() != plan.n_boxes * nq {
            return bad(format!(
                "source_values has {} values, expected n_boxes × q^d = {} × {nq}",
                source_values.len(),
                plan.n_boxes
            ));
        }
        if out.len() != plan.n_targets * nq {
            return bad(format!(
                "out has {} values, expected n_targets × q^d = {} × {nq}",
                out.len(),
                plan.n_targets
            ));
        }
        let _scope = self.device.enter()?;
        // SAFETY: every pointer is live device memory of this device with
        // the length the descriptors say (checked above and at upload; a
        // view is live memory of its length by its constructor's
        // contract); the
        // plan's indices were validated on the host (box ids < n_boxes, case
        // ids < n_cases, levels < n_levels, tables < n_tables), and the
        // descriptors come from OrbitDescriptors / FallbackDescriptors of
        // this kernel and q (the fallback's resolution table from
        // FallbackDescriptors::resolution, whose rows, case orbits and
        // transforms it checked), so every read the kernel makes is in
        // bounds.
        match self.schedule {
            List1Schedule::PerTarget => unsafe {
                self.launch(stream, plan, source_values.as_ptr(), out.as_mut_ptr())
            },
            List1Schedule::CaseGrouped => {
                if plan.n_pairs as u64 > sys::HIPKERN_LIST1_GROUPED_MAX_PAIRS as u64 {
                    return bad(format!(
                        "the grouped schedule takes at most {} pairs; this plan has {} (use \
                         the per-target schedule)",
                        sys::HIPKERN_LIST1_GROUPED_MAX_PAIRS,
                        plan.n_pairs
                    ));
                }
                let g = &mut plan.groups;
                let need = g.max_chunk_pairs * nq;
                if g.scratch.as_ref().is_none_or(|b| b.len() < need) {
                    g.scratch = None;
                    g.scratch = Some(self.device.alloc::<f64>(need.max(1))?);
                }
                // SAFETY: as above; the tiles come from group_pairs over the
                // plan's own validated pairs (every pair of a chunk in one
                // tile of its own key, ids inside the chunk), and the
                // scratch holds the largest chunk's pairs × q^d.
                unsafe {
                    self.launch_grouped(stream, plan, source_values.as_ptr(), out.as_mut_ptr())
                }
            }
            // SAFETY: as above; the tiles come from tile_targets over the
            // plan's own validated pairs (every target on one lane, every
            // pair in one slot of its own key and its own target's lane).
            List1Schedule::TargetTiled => unsafe {
                self.launch_tiled(stream, plan, source_values.as_ptr(), out.as_mut_ptr())
            },
        }
    }

    /// The table as the C ABI's `hipkern_list1_evaluate*` entry points take
    /// it: device pointers into this evaluator's buffers, valid while it
    /// lives (for a caller that drives the C entry points itself; using
    /// them is `unsafe` there).
    pub fn raw_table(&self) -> sys::hipkern_list1_table {
        let null8 = std::ptr::null::<u8>();
        let mut t = sys::hipkern_list1_table {
            layout: self.layout.raw(),
            dim: self.meta.dim as i32,
            q: self.meta.q as i32,
            n_cases: self.meta.n_cases as i32,
            n_tables: self.n_tables as i32,
            n_rows: self.n_rows as i64,
            values: self.values.as_ptr(),
            mode_normalizers: self.normalizers.as_ptr(),
            n_case_orbits: 0,
            case_orbit_ranks: std::ptr::null(),
            case_axis_perm: null8,
            case_axis_sign: std::ptr::null(),
            case_axis_group: null8,
            case_value_offsets: std::ptr::null(),
            axis_sign_power: null8,
            n_transforms: 0,
            transform_qpoint_map: std::ptr::null(),
            transform_case_map: null8,
            transform_signs: std::ptr::null(),
            lookup_size: 0,
            probe_count: 0,
            lookup_keys: std::ptr::null(),
            lookup_rows: std::ptr::null(),
            n_sign_lookup: 0,
            sign_lookup_ids: std::ptr::null(),
            sign_lookup_signs: std::ptr::null(),
            n_resolve_orbits: 0,
            resolve_case_orbit: null8,
            resolve_case_transform: null8,
            resolve_rows: std::ptr::null(),
        };
        match &self.addressing {
            DeviceAddressing::Dense => {}
            DeviceAddressing::Orbit {
                ranks,
                perm,
                sign,
                group,
                offsets,
                axis_sign_power,
                n_case_orbits,
            } => {
                t.n_case_orbits = *n_case_orbits as i32;
                t.case_orbit_ranks = ranks.as_ptr();
                t.case_axis_perm = perm.as_ptr();
                t.case_axis_sign = sign.as_ptr();
                t.case_axis_group = group.as_ptr();
                t.case_value_offsets = offsets.as_ptr();
                t.axis_sign_power = axis_sign_power.as_ptr();
            }
            DeviceAddressing::Fallback {
                qmap,
                cmap,
                signs,
                keys,
                rows,
                probe_count,
                sign_ids,
                sign_signs,
                n_transforms,
                resolution,
            } => {
                t.n_transforms = *n_transforms as i32;
                t.transform_qpoint_map = qmap.as_ptr();
                t.transform_case_map = cmap.as_ptr();
                t.transform_signs = signs.as_ptr();
                t.lookup_size = keys.len() as u32;
                t.probe_count = *probe_count;
                t.lookup_keys = keys.as_ptr();
                t.lookup_rows = rows.as_ptr();
                t.n_sign_lookup = sign_ids.len() as u32;
                t.sign_lookup_ids = sign_ids.as_ptr();
                t.sign_lookup_signs = sign_signs.as_ptr();
                if let Some(r) = resolution {
                    t.n_resolve_orbits = r.n_orbits as i32;
                    t.resolve_case_orbit = r.case_orbit.as_ptr();
                    t.resolve_case_transform = r.case_transform.as_ptr();
                    t.resolve_rows = r.rows.as_ptr();
                }
            }
        }
        t
    }

    /// # Safety
    /// `f` and `out` point to `n_boxes·q^d` and `n_targets·q^d` float64 on
    /// the evaluator's device, `plan` is this evaluator's.
    unsafe fn launch(
        &self,
        stream: &Stream,
        plan: &List1DevicePlan,
        f: *const f64,
        out: *mut f64,
    ) -> Result<()> {
        let t = self.raw_table();
        let p = plan.raw_pairs();
        let _scope = self.device.enter()?;
        // SAFETY: the caller's contract (see above); the structs live
        // across the call, which copies them into the launch.
        let status = unsafe {
            sys::hipkern_list1_evaluate(&t, &p, f, out, self.batch as i32, stream.as_raw())
        };
        check("hipkern_list1_evaluate", status)
    }

    /// # Safety
    /// As [`Self::launch`], and the plan's scratch holds its largest
    /// chunk's pairs × q^d.
    unsafe fn launch_grouped(
        &self,
        stream: &Stream,
        plan: &mut List1DevicePlan,
        f: *const f64,
        out: *mut f64,
    ) -> Result<()> {
        let t = self.raw_table();
        let p = plan.raw_pairs();
        let g = &mut plan.groups;
        let scratch = match g.scratch.as_mut() {
            Some(b) => b.as_mut_ptr(),
            None => return bad("the grouped schedule's scratch is missing".into()),
        };
        let _scope = self.device.enter()?;
        for ch in &g.chunks {
            let groups = sys::hipkern_list1_groups {
                target_begin: ch.targets.start as i64,
                target_end: ch.targets.end as i64,
                pair_begin: ch.pairs.start as i64,
                pair_end: ch.pairs.end as i64,
                n_tiles: ch.tiles.len() as i64,
                // SAFETY (offsets): tile ranges index the uploaded arrays
                // (tile_offsets has one more entry than tile_keys).
                tile_offsets: unsafe { g.tile_offsets.as_ptr().add(ch.tiles.start) },
                tile_keys: unsafe { g.tile_keys.as_ptr().add(ch.tiles.start) },
                tile_pairs: g.tile_pairs.as_ptr(),
                pair_values: scratch,
            };
            // SAFETY: the caller's contract; the structs live across the
            // call, which copies them into the launches.
            let status = unsafe {
                sys::hipkern_list1_evaluate_grouped(&t, &p, &groups, f, out, stream.as_raw())
            };
            check("hipkern_list1_evaluate_grouped", status)?;
        }
        Ok(())
    }

    /// # Safety
    /// As [`Self::launch`].
    unsafe fn launch_tiled(
        &self,
        stream: &Stream,
        plan: &List1DevicePlan,
        f: *const f64,
        out: *mut f64,
    ) -> Result<()> {
        // The kernel the plan's tiles were cut for.
        let arithmetic = if !self.tiled_tensor_cores {
            sys::HIPKERN_LIST1_TILED_FMA
        } else if plan.tiled_for_source_staging() {
            sys::HIPKERN_LIST1_TILED_TENSOR_SOURCES
        } else {
            sys::HIPKERN_LIST1_TILED_AUTO
        };
        let Some(tiles) = plan.raw_tiles(arithmetic) else {
            return bad(format!(
                "the tiled schedule takes q^d ≤ {MAX_TILED_MODES}; this plan has q^d = {}",
                plan.nq
            ));
        };
        let t = self.raw_table();
        let p = plan.raw_pairs();
        let _scope = self.device.enter()?;
        // SAFETY: the caller's contract; the structs live across the call,
        // which copies them into the launch.
        let status =
            unsafe { sys::hipkern_list1_evaluate_tiled(&t, &p, &tiles, f, out, stream.as_raw()) };
        check("hipkern_list1_evaluate_tiled", status)
    }

    /// List 1 of host `source_values` over host `boxes`: validated as the
    /// CPU evaluator validates (same checks, same order, same messages),
    /// uploaded, evaluated on `stream` and downloaded (`n_targets × q^d`,
    /// per target box in node order, as [`crate::nearfield::evaluate_list1`]).
    pub fn evaluate(
        &self,
        stream: &Stream,
        boxes: &List1Boxes<'_>,
        source_values: &[f64],
    ) -> Result<Vec<f64>> {
        let hp = self.meta.check(boxes, Some(source_values))?;
        let _scope = self.device.enter()?;
        let mut plan = self.upload_plan(&hp)?;
        self.evaluate_plan(stream, &mut plan, source_values)
    }

    /// List 1 of host `source_values` over an uploaded plan (checked:
    /// length and finite values, as the CPU evaluator), into a `Vec`.
    pub fn evaluate_plan(
        &self,
        stream: &Stream,
        plan: &mut List1DevicePlan,
        source_values: &[f64],
    ) -> Result<Vec<f64>> {
        check_source_values(source_values, plan.n_boxes, self.meta.nq)?;
        self.same_device("the stream", stream.device().ordinal())?;
        let _scope = self.device.enter()?;
        let f = upload(&self.device, source_values)?;
        let mut out = self.device.alloc::<f64>(plan.n_targets * self.meta.nq)?;
        self.evaluate_into(stream, plan, &f, &mut out)?;
        let mut host = vec![f64::NAN; out.len()];
        // SAFETY: `host` is exclusively borrowed here and the synchronize
        // below waits for the copy before it is read or dropped.
        unsafe { stream.copy_dtoh_async(&out.as_slice(), &mut host)? };
        stream.synchronize()?;
        Ok(host)
    }
}

#[cfg(test)]
mod tests {
    use super::{key_matrix_index, prefer_source_staged, List1SourceStaging};

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

    #[test]
    fn key_matrix_index_numbers_the_distinct_keys_in_order() {
        let (distinct, index) = key_matrix_index(&[7, 2, 7, 0, 2, 9], 12);
        assert_eq!(distinct, [0, 2, 7, 9]);
        let none = u32::MAX;
        assert_eq!(
            index,
            [0, none, 1, none, none, none, none, 2, none, 3, none, none]
        );
        let (distinct, index) = key_matrix_index(&[], 3);
        assert!(distinct.is_empty());
        assert_eq!(index, [none; 3]);
    }
}
