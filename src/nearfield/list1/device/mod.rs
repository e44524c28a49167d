//! The List 1 evaluator on the device (`docs/design/list1.md`): a table
//! uploaded once in one of three layouts, a plan per tree that chooses its
//! kernel, evaluated many times on a stream (`hip/list1_*.hip`).
//!
//! # Contracts ([`List1Contract`])
//!
//! - `Exact`: bit for bit what the CPU float64 evaluator
//!   ([`crate::nearfield::evaluate_list1`]) computes over the same entry
//!   values: per target box and point the pairs in list order, per pair the
//!   source modes in order, `u += scale·acc + disp` with the scalings of
//!   [`crate::nearfield::level_scalings`], never a fused multiply-add.
//! - `Fast` (the default): the same value within 1e−13 relative max-norm
//!   (measured ≤ 5e−15): keys (table, case) in ascending order, fused
//!   products, on NVIDIA's FP64 tensor cores where they exist. Bitwise the
//!   same across layouts and runs.
//!
//! # Kernels ([`List1Kernel`]) and the choice
//!
//! `per-target` (any `q^d`) and `grouped` (`q^d ≤` [`MAX_TILED_MODES`]:
//! one case matrix per group of pairs of a key, built once in shared
//! memory, sums per target in list order) keep `Exact`; `tiled`, `staged`
//! (tensor cores) and `tiled-fma` (every platform) keep `Fast`: tiles of
//! target boxes walk their keys ascending, each key's case matrix applied
//! to every box of the tile with a pair of that key, outputs in registers;
//! `staged` also loads each tile's distinct source boxes once. Every plan
//! chooses its kernel in one place (`dispatch.rs`, from the measured
//! rules) and says which and why ([`List1DevicePlan::kernel`],
//! [`List1DevicePlan::reason`]).
//!
//! # Layouts ([`List1Layout`])
//!
//! - `Dense`: every entry, `n_tables × n_cases·q^{2d}` float64.
//! - `Orbit`: the compact rows of the arithmetic ORBIT addressing
//!   ([`OrbitDescriptors`]) and those descriptors only; each row holds its
//!   canonical entry's value with the representative's sign applied, so
//!   `T[c, s, t] = slot(c, s, t).sign · row value`. Scalar kernels and axis
//!   derivatives; a directional source derivative is refused (use `Dense`
//!   or `Fallback`).
//! - `Fallback`: the rows in representative order and the generated
//!   descriptors ([`FallbackDescriptors`]), with the plan-time resolution
//!   table where [`FallbackDescriptors::resolution`] derives one (two
//!   table reads per entry instead of scanning the transforms and probing
//!   the hash; [`List1Payload::without_fallback_resolution`] keeps the
//!   pure descriptor path). Every kernel.
//!
//! `per-target` and `grouped` reconstruct entries from the layout; the
//! tiled kernels read dense case matrices only: a compact layout's plan
//! expands the case matrix of each key its tiles use once, on the device
//! (`hipkern_list1_expand_keys`, the layout's entries bit for bit), so
//! every layout gives the same bits at dense's speed while the table
//! stays compact. Where the layouts hold the same entry values the
//! outputs are identical; a dense table built by quadrature differs from
//! its symmetry reduction by a few ulps per entry (the orbit's members are
//! separate quadratures), which ORBIT and the fallback replace by the
//! representative's value. An entry zero by symmetry enters the grouped
//! sums as `f·0`, as in the dense layout, where the per-target ORBIT path
//! skips it, so an infinite or NaN device value can differ.
//!
//! Per-level tables (Yukawa) are uploaded side by side (`n_tables` blocks
//! of rows, one addressing: same kernel and `q`).
//!
//! # Use
//!
//! [`List1Payload`] prepares the host arrays of a layout (no device: what
//! is uploaded, its byte counts, and the entry each layout reconstructs),
//! [`List1Evaluator::new`] uploads one, [`List1Evaluator::plan`] validates
//! a tree's boxes and lists, chooses the kernel and builds what it needs
//! ([`List1DevicePlan`]: on the device where the kernel is chosen without
//! the pairs, `grouped` and `per-target`; on the host for the tiled
//! kernels), and
//! [`List1Evaluator::evaluate_into`] launches on a stream into a caller's
//! device buffer; [`List1Evaluator::evaluate`] does all of it from host
//! slices into a `Vec`.
//!
//! Everything is validated before any output is written, with the CPU
//! evaluator's own checks and messages ([`List1Boxes::pairs`]:
//! CSR offsets, box ids, levels, centres, every pair a List 1 pair of a
//! 2:1 tree, named; [`crate::nearfield::level_scalings`]: the tables fit
//! the levels), plus the lengths and devices of the buffers and the plan's
//! evaluator. A plan built on the device checks each pair there and has
//! the CPU's check name whatever the device reports.
//!
//! [`OrbitDescriptors`]: crate::nearfield::OrbitDescriptors
//! [`FallbackDescriptors`]: crate::nearfield::FallbackDescriptors
//! [`FallbackDescriptors::resolution`]: crate::nearfield::FallbackDescriptors::resolution
//! [`List1Boxes::pairs`]: crate::nearfield::List1Boxes::pairs

// One file per concern, each extending `List1Evaluator` with its part:
// what a caller chooses (options: contract, layout, scratch bound; the
// kernels' names), which kernel a plan runs (dispatch), what is uploaded
// once per table (payload), what is checked and uploaded once per tree
// (plan), and the launches through the C ABI (launch). The
// evaluator itself is defined here, so that its fields stay private to
// this module and its files.
mod dispatch;
mod launch;
mod options;
mod parts;
mod payload;
mod plan;
mod tree_plan;

pub use dispatch::staged_source_bound;
pub use options::{
    List1Contract, List1Kernel, List1Layout, DEFAULT_PAIR_SCRATCH_BYTES, MAX_TILED_MODES,
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
    contract: List1Contract,
    pair_scratch_bytes: usize,
    /// `hipkern_list1_tiled_tensor_cores` on this device at upload.
    tensor_cores_available: bool,
    /// The plans' upload staging (parts.rs): none for the first plan (each
    /// array copied from where it is), then page-locked, as large as the
    /// largest plan's arrays so far.
    plan_staging: std::sync::Mutex<parts::Staging>,
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
            .field("contract", &self.contract)
            .field("tensor_cores", &self.tensor_cores_available)
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

/// The plan for a named kernel and the raw C structs, for the benches and
/// tests that time or check every kernel (the product chooses through the
/// contract). Not a stable API.
#[doc(hidden)]
pub mod internals {
    pub use super::plan::DownloadedPlan;
    use super::{List1DevicePlan, List1Evaluator, List1Kernel};
    use crate::nearfield::list1::List1Boxes;
    use crate::runtime::Result;
    use hipkern_sys as sys;

    /// [`List1Evaluator::plan`] for `kernel` instead of the dispatch's
    /// choice (an error where the device or table cannot run it).
    pub fn plan_with_kernel(
        evaluator: &List1Evaluator,
        boxes: &List1Boxes<'_>,
        kernel: List1Kernel,
    ) -> Result<List1DevicePlan> {
        evaluator.plan_checked(boxes, None, Some((kernel, "forced".into())))
    }

    /// A plan for `kernel` built on the host whatever the kernel (the
    /// device plans' tests compare against it).
    pub fn plan_on_host(
        evaluator: &List1Evaluator,
        boxes: &List1Boxes<'_>,
        kernel: List1Kernel,
    ) -> Result<List1DevicePlan> {
        evaluator.check_kernel(kernel)?;
        let _scope = evaluator.device.enter()?;
        evaluator.plan_on_host(boxes, None, Some((kernel, "forced, on the host".into())))
    }

    /// The plan's pair cases, its grouped tiles and its chunks,
    /// downloaded.
    pub fn download_plan(plan: &List1DevicePlan) -> Result<DownloadedPlan> {
        plan.download()
    }

    /// The evaluator's table as the C entry points take it.
    pub fn raw_table(evaluator: &List1Evaluator) -> sys::hipkern_list1_table {
        evaluator.raw_table()
    }

    /// The plan's pairs as the C entry points take them.
    pub fn raw_pairs(plan: &List1DevicePlan) -> sys::hipkern_list1_pairs {
        plan.raw_pairs()
    }

    /// The plan's tiles (a tiled plan's) as `hipkern_list1_evaluate_tiled`
    /// takes them.
    pub fn raw_tiles(plan: &List1DevicePlan) -> Option<sys::hipkern_list1_tiles> {
        plan.raw_tiles()
    }
}
