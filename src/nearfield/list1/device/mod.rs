//! The List 1 evaluator on the device (`docs/design/list1.md`): a table
//! uploaded once in one of three layouts, evaluated many times on a stream
//! (`hipkern_list1_evaluate`, hip/list1_per_target.hip and the other hip/list1_*.hip).
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
//!   case) into tiles (host counting sort, `src/nearfield/list1/grouping.rs`); on the
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
//!   `src/nearfield/list1/tiling.rs`: boxes ordered by their sorted key lists, so a tile
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
//!
//! [`OrbitDescriptors`]: crate::nearfield::OrbitDescriptors
//! [`FallbackDescriptors`]: crate::nearfield::FallbackDescriptors
//! [`FallbackDescriptors::resolution`]: crate::nearfield::FallbackDescriptors::resolution
//! [`FallbackDescriptors::slot`]: crate::nearfield::FallbackDescriptors::slot
//! [`List1Boxes::pairs`]: crate::nearfield::List1Boxes::pairs

// One file per concern, each extending `List1Evaluator` with its part:
// what a caller chooses (options: schedules, layouts, widths, batch sizes),
// what is uploaded once per table (payload), what is checked and uploaded
// once per tree (plan), and the launches through the C ABI (launch). The
// evaluator itself is defined here, so that its fields stay private to
// this module and its files.
mod launch;
mod options;
mod payload;
mod plan;

pub use options::{
    default_targets_per_tile, prefer_source_staged, tile_source_bound, List1Layout, List1Schedule,
    List1SourceStaging, DEFAULT_PAIR_SCRATCH_BYTES, DEFAULT_STAGED_TARGETS_PER_TILE,
    DEFAULT_TARGET_BATCH_SIZE, MAX_GROUPED_MODES, MAX_TARGET_BATCH_SIZE, MAX_TILED_MODES,
    STAGED_LANES_BUSY_RATIO, TILE_TARGET_CHOICES,
};
pub use payload::{List1Payload, List1ReducedTables, List1UploadBytes};
pub use plan::List1DevicePlan;

use crate::nearfield::kernels::Kernel;
use crate::runtime::{Device, DeviceBuffer, DeviceRepr, Error, Result};
use payload::{DeviceAddressing, TableMeta};
use std::sync::atomic::AtomicU64;

fn bad<T>(msg: String) -> Result<T> {
    Err(Error::InvalidInput(format!("list 1 device: {msg}")))
}

fn upload<T: DeviceRepr>(device: &Device, host: &[T]) -> Result<DeviceBuffer<T>> {
    device.htod_copy(host)
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

impl List1Evaluator {
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
}
