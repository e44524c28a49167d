//! Device paths: the plan built on the device (`hipkern_force_plan_build`),
//! the atomic-free assembly (`hipkern_force_assemble`) and the atomic
//! reference path.
//!
//! Every function takes its device inputs as `&(impl DeviceMemory<T> +
//! ?Sized)` and its outputs as `&mut (impl DeviceMemoryMut<T> + ?Sized)`: a
//! [`DeviceBuffer`], a view of one, or another library's memory borrowed as
//! a view ([`DeviceSlice::from_raw_parts`](crate::runtime::DeviceSlice::from_raw_parts)).
//! Lengths and devices are checked on the views before anything is launched.
use super::{validated_keys, CsrPlan, EdgeIndex, GhostMapping, Real, VirialSplit, MAX_PLAN_LEN};
use crate::runtime::{
    DeviceBuffer, DeviceMemory, DeviceMemoryMut, DeviceRepr, DeviceSlice, DeviceSliceMut, Error,
    Result, Stream,
};
use crate::Device;
use hipkern_sys as sys;

/// Input types the device kernels take: f32 or f64.
pub trait DeviceReal: DeviceRepr + Real {
    /// The C ABI's dtype code.
    const DTYPE: sys::hipkern_dtype;
}
impl DeviceReal for f32 {
    const DTYPE: sys::hipkern_dtype = sys::HIPKERN_DTYPE_F32;
}
impl DeviceReal for f64 {
    const DTYPE: sys::hipkern_dtype = sys::HIPKERN_DTYPE_F64;
}

fn split_code(s: VirialSplit) -> sys::hipkern_virial_split {
    match s {
        VirialSplit::Half => sys::HIPKERN_VIRIAL_HALF,
        VirialSplit::Src => sys::HIPKERN_VIRIAL_SRC,
    }
}

/// Index types the device plan build reads: int32 or int64.
pub trait DeviceIndex: DeviceRepr + EdgeIndex {
    /// The C ABI's index type code.
    const INDEX_TYPE: sys::hipkern_index_type;
}
impl DeviceIndex for i32 {
    const INDEX_TYPE: sys::hipkern_index_type = sys::HIPKERN_INDEX_I32;
}
impl DeviceIndex for i64 {
    const INDEX_TYPE: sys::hipkern_index_type = sys::HIPKERN_INDEX_I64;
}

/// Ghost folding for a plan built on the device: `mapping` (extended →
/// local, `N_ext` entries, int32 or int64) lives in device memory.
#[derive(Clone, Copy)]
pub struct DeviceGhostMapping<'a> {
    ptr: *const std::ffi::c_void,
    len: usize,
    index_type: sys::hipkern_index_type,
    device: &'a Device,
    n_local: usize,
}

impl<'a> DeviceGhostMapping<'a> {
    /// Borrows `mapping` (a buffer or a view) for the build; every entry
    /// must lie in `[0, n_local)`.
    pub fn new<M: DeviceIndex>(
        mapping: &'a (impl DeviceMemory<M> + ?Sized),
        n_local: usize,
    ) -> Self {
        let view = mapping.device_view();
        DeviceGhostMapping {
            ptr: view.as_ptr().cast(),
            len: view.len(),
            index_type: M::INDEX_TYPE,
            device: view.device(),
            n_local,
        }
    }
}

/// A valid CSR plan resident on one device: built there
/// ([`DevicePlan::build`]) or uploaded from a host [`CsrPlan`].
pub struct DevicePlan {
    n_rows: usize,
    n_edges: usize,
    dst_order: DeviceBuffer<i32>,
    dst_row_ptr: DeviceBuffer<i32>,
    src_order: DeviceBuffer<i32>,
    src_row_ptr: DeviceBuffer<i32>,
}

impl DevicePlan {
    /// Uploads a host plan (already validated by its constructors).
    pub fn upload(device: &Device, plan: &CsrPlan) -> Result<DevicePlan> {
        let _scope = device.enter()?;
        Ok(DevicePlan {
            n_rows: plan.n_rows(),
            n_edges: plan.n_edges(),
            dst_order: device.htod_copy(plan.dst_order())?,
            dst_row_ptr: device.htod_copy(plan.dst_row_ptr())?,
            src_order: device.htod_copy(plan.src_order())?,
            src_row_ptr: device.htod_copy(plan.src_row_ptr())?,
        })
    }
    /// Output rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Edges.
    pub fn n_edges(&self) -> usize {
        self.n_edges
    }

    /// Device scratch bytes [`DevicePlan::rebuild`] needs.
    pub fn scratch_bytes(n_edges: usize, n_rows: usize) -> Result<usize> {
        if n_edges > MAX_PLAN_LEN || n_rows >= MAX_PLAN_LEN {
            return Err(Error::InvalidInput(format!(
                "{n_edges} edges / {n_rows} rows exceed the plan's int32 limit"
            )));
        }
        let mut bytes = 0usize;
        // SAFETY: plain out-pointer to a local.
        let status = unsafe {
            sys::hipkern_force_plan_scratch_bytes(n_edges as i64, n_rows as i64, &mut bytes)
        };
        crate::runtime::check("hipkern_force_plan_scratch_bytes", status)?;
        Ok(bytes)
    }

    /// Builds the plan on the device from endpoint indices already there
    /// (a stable radix sort, a key set already in order taken as it is;
    /// keys `dst`/`src`, or `mapping[dst]`/
    /// `mapping[src]` with ghosts). Indices are checked on the device
    /// before anything is written; a bad one gives an [`Error::InvalidInput`]
    /// naming the array, its first bad position and value, as
    /// [`CsrPlan::build`] does. Allocates the plan and its scratch;
    /// synchronizes `stream`. The result equals [`CsrPlan::build`]'s.
    pub fn build<I: DeviceIndex>(
        stream: &Stream,
        src: &(impl DeviceMemory<I> + ?Sized),
        dst: &(impl DeviceMemory<I> + ?Sized),
        n_ext: usize,
        ghosts: Option<DeviceGhostMapping<'_>>,
    ) -> Result<DevicePlan> {
        let (src, dst) = (src.device_view(), dst.device_view());
        let n_rows = check_plan_inputs(stream, &src, &dst, n_ext, ghosts)?;
        let d = stream.device();
        let _scope = d.enter()?;
        let n_edges = src.len();
        let mut plan = DevicePlan {
            n_rows,
            n_edges,
            dst_order: d.alloc(n_edges)?,
            dst_row_ptr: d.alloc(n_rows + 1)?,
            src_order: d.alloc(n_edges)?,
            src_row_ptr: d.alloc(n_rows + 1)?,
        };
        let mut scratch = d.alloc::<u8>(Self::scratch_bytes(n_edges, n_rows)?)?;
        plan.rebuild(stream, &src, &dst, n_ext, ghosts, &mut scratch)?;
        Ok(plan)
    }

    /// Builds from host indices: uploads them (int32 or int64, mapping as
    /// int64) and builds on the device; see [`DevicePlan::build`].
    pub fn build_from_host<I: DeviceIndex>(
        stream: &Stream,
        src: &[I],
        dst: &[I],
        n_ext: usize,
        ghosts: Option<GhostMapping<'_>>,
    ) -> Result<DevicePlan> {
        let d = stream.device();
        let _scope = d.enter()?;
        let (src_d, dst_d) = (d.htod_copy(src)?, d.htod_copy(dst)?);
        let mapping_d = match ghosts {
            Some(g) => Some((d.htod_copy(g.mapping)?, g.n_local)),
            None => None,
        };
        let ghosts_d = mapping_d
            .as_ref()
            .map(|(m, n_local)| DeviceGhostMapping::new(m, *n_local));
        DevicePlan::build(stream, &src_d, &dst_d, n_ext, ghosts_d)
    }

    /// Rebuilds this plan in place for a new neighbour list with the same
    /// edge and row counts (MD codes rebuild every few steps), using
    /// caller-owned `scratch` of at least [`DevicePlan::scratch_bytes`].
    /// On error the plan's previous contents are untouched.
    pub fn rebuild<I: DeviceIndex>(
        &mut self,
        stream: &Stream,
        src: &(impl DeviceMemory<I> + ?Sized),
        dst: &(impl DeviceMemory<I> + ?Sized),
        n_ext: usize,
        ghosts: Option<DeviceGhostMapping<'_>>,
        scratch: &mut (impl DeviceMemoryMut<u8> + ?Sized),
    ) -> Result<()> {
        let (src, dst) = (src.device_view(), dst.device_view());
        let mut scratch = scratch.device_view_mut();
        let n_rows = check_plan_inputs(stream, &src, &dst, n_ext, ghosts)?;
        if n_rows != self.n_rows || src.len() != self.n_edges {
            return Err(Error::InvalidInput(format!(
                "the plan holds {} edges and {} rows but the new list has {} and {n_rows}",
                self.n_edges,
                self.n_rows,
                src.len()
            )));
        }
        let need = Self::scratch_bytes(self.n_edges, n_rows)?;
        check_len("scratch", scratch.len(), need, "the plan build (bytes)")?;
        same_device(stream, "scratch", scratch.device())?;
        let (mapping_type, mapping_ptr, n_local) = match ghosts {
            Some(g) => (g.index_type, g.ptr, g.n_local as i64),
            None => (sys::HIPKERN_INDEX_I32, std::ptr::null(), 0),
        };
        let mut report = sys::hipkern_force_plan_report {
            first_bad_src: -1,
            first_bad_dst: -1,
            first_bad_mapping: -1,
        };
        self.same_device_as(stream)?;
        let _scope = stream.device().enter()?;
        // SAFETY: src/dst hold n_edges indices and the mapping n_ext (checked
        // above; views are live memory of their length by their
        // constructors' contracts), the outputs and scratch have the sizes
        // the C entry point needs, all on the stream's device (the plan's
        // checked by same_device_as); the call validates every index
        // on the device itself and writes no output when one is bad.
        let status = unsafe {
            sys::hipkern_force_plan_build(
                I::INDEX_TYPE,
                src.as_ptr().cast(),
                dst.as_ptr().cast(),
                self.n_edges as i64,
                n_ext as i64,
                mapping_type,
                mapping_ptr,
                n_local,
                self.dst_order.as_mut_ptr(),
                self.dst_row_ptr.as_mut_ptr(),
                self.src_order.as_mut_ptr(),
                self.src_row_ptr.as_mut_ptr(),
                scratch.as_mut_ptr().cast(),
                scratch.len(),
                &mut report,
                stream.as_raw(),
            )
        };
        if status == sys::HIPKERN_ERROR_INVALID_INDEX {
            return Err(bad_index_error(&src, &dst, n_ext, ghosts, &report));
        }
        crate::runtime::check("hipkern_force_plan_build", status)
    }

    /// The plan's device.
    pub fn device(&self) -> &Device {
        self.dst_order.device()
    }

    /// Refuses a stream of another device than the plan's.
    fn same_device_as(&self, stream: &Stream) -> Result<()> {
        same_device(stream, "plan", self.device())
    }

    /// Downloads the plan (validated again by [`CsrPlan::from_parts`]).
    pub fn to_host(&self) -> Result<CsrPlan> {
        let _scope = self.device().enter()?;
        CsrPlan::from_parts(
            self.n_edges,
            self.dst_order.to_vec()?,
            self.dst_row_ptr.to_vec()?,
            self.src_order.to_vec()?,
            self.src_row_ptr.to_vec()?,
        )
    }
}

/// Lengths, devices and limits of a device plan build; returns the row count.
fn check_plan_inputs<I: DeviceIndex>(
    stream: &Stream,
    src: &DeviceSlice<'_, I>,
    dst: &DeviceSlice<'_, I>,
    n_ext: usize,
    ghosts: Option<DeviceGhostMapping<'_>>,
) -> Result<usize> {
    if src.len() != dst.len() {
        return Err(Error::InvalidInput(format!(
            "src has {} entries but dst has {}",
            src.len(),
            dst.len()
        )));
    }
    if src.len() > MAX_PLAN_LEN || n_ext >= MAX_PLAN_LEN {
        return Err(Error::InvalidInput(format!(
            "{} edges / {n_ext} atoms exceed the plan's int32 limit",
            src.len()
        )));
    }
    same_device(stream, "src", src.device())?;
    same_device(stream, "dst", dst.device())?;
    match ghosts {
        None => Ok(n_ext),
        Some(g) => {
            same_device(stream, "mapping", g.device)?;
            if g.len != n_ext {
                return Err(Error::InvalidInput(format!(
                    "mapping has {} entries but n_ext = {n_ext}",
                    g.len
                )));
            }
            if g.n_local > n_ext {
                return Err(Error::InvalidInput(format!(
                    "n_local = {} exceeds n_ext = {n_ext}",
                    g.n_local
                )));
            }
            Ok(g.n_local)
        }
    }
}

/// The value at one position of a device index array, for error messages.
fn index_at<I: DeviceIndex>(buf: &DeviceSlice<'_, I>, at: usize) -> String {
    match buf.slice(at..at + 1).and_then(|s| s.to_vec()) {
        Ok(v) => v[0].to_i64().to_string(),
        Err(e) => format!("(unreadable: {e})"),
    }
}

fn bad_index_error<I: DeviceIndex>(
    src: &DeviceSlice<'_, I>,
    dst: &DeviceSlice<'_, I>,
    n_ext: usize,
    ghosts: Option<DeviceGhostMapping<'_>>,
    report: &sys::hipkern_force_plan_report,
) -> Error {
    for (name, buf, at) in [
        ("src", src, report.first_bad_src),
        ("dst", dst, report.first_bad_dst),
    ] {
        if at >= 0 {
            return Error::InvalidInput(format!(
                "{name}[{at}] = {} is out of range [0, n_ext = {n_ext})",
                index_at(buf, at as usize)
            ));
        }
    }
    let at = report.first_bad_mapping;
    let value = match ghosts {
        Some(g) => {
            let read = |bytes: usize| -> Result<i64> {
                let mut v = [0u8; 8];
                // SAFETY: g.ptr points at g.len >= at + 1 elements of `bytes`
                // bytes each on g.device (checked before the build).
                let status = unsafe {
                    sys::hipkern_memcpy(
                        v.as_mut_ptr().cast(),
                        g.ptr.cast::<u8>().add(at as usize * bytes).cast(),
                        bytes,
                        sys::HIPKERN_MEMCPY_DEVICE_TO_HOST,
                    )
                };
                crate::runtime::check("hipkern_memcpy", status)?;
                Ok(if bytes == 4 {
                    i32::from_ne_bytes([v[0], v[1], v[2], v[3]]) as i64
                } else {
                    i64::from_ne_bytes(v)
                })
            };
            let bytes = if g.index_type == sys::HIPKERN_INDEX_I64 {
                8
            } else {
                4
            };
            match g.device.with_current(|| read(bytes)) {
                Ok(v) => v.to_string(),
                Err(e) => format!("(unreadable: {e})"),
            }
        }
        None => "?".into(),
    };
    let n_local = ghosts.map_or(0, |g| g.n_local);
    Error::InvalidInput(format!(
        "mapping[{at}] = {value} is out of range [0, n_local = {n_local})"
    ))
}

fn check_len(name: &str, got: usize, want: usize, what: &str) -> Result<()> {
    if got != want {
        return Err(Error::InvalidInput(format!(
            "{name} has {got} elements but {what} need {want}"
        )));
    }
    Ok(())
}

fn same_device(stream: &Stream, name: &str, dev: &Device) -> Result<()> {
    if dev.ordinal() != stream.device().ordinal() {
        return Err(Error::InvalidInput(format!(
            "{name} is on device {} but the stream on {}",
            dev.ordinal(),
            stream.device().ordinal()
        )));
    }
    Ok(())
}

/// The checks both device paths make before launching: edge arrays E×3,
/// outputs N×3 and N×9, all on the stream's device.
fn check_io<T: DeviceRepr, O: DeviceRepr>(
    stream: &Stream,
    n_edges: usize,
    n_rows: usize,
    g: &DeviceSlice<'_, T>,
    edge_vec: &DeviceSlice<'_, T>,
    force: &DeviceSliceMut<'_, O>,
    virial: &DeviceSliceMut<'_, O>,
) -> Result<()> {
    let edges = format!("{n_edges} edges (E×3)");
    check_len("g", g.len(), 3 * n_edges, &edges)?;
    check_len("edge_vec", edge_vec.len(), 3 * n_edges, &edges)?;
    check_len(
        "force",
        force.len(),
        3 * n_rows,
        &format!("{n_rows} rows (N×3)"),
    )?;
    check_len(
        "virial",
        virial.len(),
        9 * n_rows,
        &format!("{n_rows} rows (N×9)"),
    )?;
    for (name, dev) in [
        ("g", g.device()),
        ("edge_vec", edge_vec.device()),
        ("force", force.device()),
        ("virial", virial.device()),
    ] {
        same_device(stream, name, dev)?;
    }
    Ok(())
}

/// Assembles into caller-provided float64 outputs (force `n_rows×3`,
/// virial `n_rows×9`, fully overwritten), asynchronously on `stream`.
/// Lengths are checked before anything is launched.
pub fn assemble_device_into<T: DeviceReal>(
    stream: &Stream,
    plan: &DevicePlan,
    g: &(impl DeviceMemory<T> + ?Sized),
    edge_vec: &(impl DeviceMemory<T> + ?Sized),
    split: VirialSplit,
    force: &mut (impl DeviceMemoryMut<f64> + ?Sized),
    virial: &mut (impl DeviceMemoryMut<f64> + ?Sized),
) -> Result<()> {
    let (g, edge_vec) = (g.device_view(), edge_vec.device_view());
    let (mut force, mut virial) = (force.device_view_mut(), virial.device_view_mut());
    check_io(
        stream,
        plan.n_edges,
        plan.n_rows,
        &g,
        &edge_vec,
        &force,
        &virial,
    )?;
    plan.same_device_as(stream)?;
    // SAFETY: checked above: every view has the length the call needs and
    // is on the stream's device; a view is live device memory of its length
    // (a buffer's by construction, a borrowed one by the contract of
    // DeviceSlice::from_raw_parts / DeviceSliceMut::from_raw_parts_mut).
    unsafe {
        launch_assemble(
            stream,
            plan,
            &g,
            &edge_vec,
            split,
            sys::HIPKERN_DTYPE_F64,
            force.as_mut_ptr().cast(),
            virial.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    }
}

/// The one call of `hipkern_force_assemble`, outputs of `out_dtype`.
///
/// # Safety
/// `g`/`edge_vec` hold `3 × plan.n_edges` values, `force`/`virial` point at
/// `3 × n_rows` / `9 × n_rows` values of `out_dtype`, `accum` at
/// `12 × n_rows` doubles (or is null for float64 outputs), all on the
/// stream's device. The plan is valid (built on the device, or validated on
/// the host: indices in range, row_ptr monotone from 0 to E), which is the
/// kernel's precondition.
// Mirrors the C entry point: every buffer is a separate role.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_assemble<T: DeviceReal>(
    stream: &Stream,
    plan: &DevicePlan,
    g: &DeviceSlice<'_, T>,
    edge_vec: &DeviceSlice<'_, T>,
    split: VirialSplit,
    out_dtype: sys::hipkern_dtype,
    force: *mut std::ffi::c_void,
    virial: *mut std::ffi::c_void,
    accum: *mut f64,
) -> Result<()> {
    let _scope = stream.device().enter()?;
    // SAFETY: the caller's contract (above).
    let status = unsafe {
        sys::hipkern_force_assemble(
            T::DTYPE,
            g.as_ptr().cast(),
            edge_vec.as_ptr().cast(),
            plan.n_edges as i64,
            plan.dst_order.as_ptr(),
            plan.dst_row_ptr.as_ptr(),
            plan.src_order.as_ptr(),
            plan.src_row_ptr.as_ptr(),
            plan.n_rows as i32,
            split_code(split),
            out_dtype,
            force,
            virial,
            accum,
            stream.as_raw(),
        )
    };
    crate::runtime::check("hipkern_force_assemble", status)
}

/// Assembles into outputs in the input precision `T`: the float64 sums
/// are rounded once (for f32, each output is the float64 result rounded to
/// nearest). `accum` is float64 scratch of `n_rows × 12`.
// Mirrors the C entry point: every buffer is a separate role.
#[allow(clippy::too_many_arguments)]
pub fn assemble_device_rounded_into<T: DeviceReal>(
    stream: &Stream,
    plan: &DevicePlan,
    g: &(impl DeviceMemory<T> + ?Sized),
    edge_vec: &(impl DeviceMemory<T> + ?Sized),
    split: VirialSplit,
    accum: &mut (impl DeviceMemoryMut<f64> + ?Sized),
    force: &mut (impl DeviceMemoryMut<T> + ?Sized),
    virial: &mut (impl DeviceMemoryMut<T> + ?Sized),
) -> Result<()> {
    let (g, edge_vec) = (g.device_view(), edge_vec.device_view());
    let mut accum = accum.device_view_mut();
    let (mut force, mut virial) = (force.device_view_mut(), virial.device_view_mut());
    check_io(
        stream,
        plan.n_edges,
        plan.n_rows,
        &g,
        &edge_vec,
        &force,
        &virial,
    )?;
    check_len(
        "accum",
        accum.len(),
        12 * plan.n_rows,
        &format!("{} rows (N×12)", plan.n_rows),
    )?;
    same_device(stream, "accum", accum.device())?;
    plan.same_device_as(stream)?;
    // SAFETY: checked above, as in assemble_device_into; accum holds
    // n_rows × 12 doubles.
    unsafe {
        launch_assemble(
            stream,
            plan,
            &g,
            &edge_vec,
            split,
            T::DTYPE,
            force.as_mut_ptr().cast(),
            virial.as_mut_ptr().cast(),
            accum.as_mut_ptr(),
        )
    }
}

/// Allocates the outputs and assembles; returns (force, virial).
pub fn assemble_device<T: DeviceReal>(
    stream: &Stream,
    plan: &DevicePlan,
    g: &(impl DeviceMemory<T> + ?Sized),
    edge_vec: &(impl DeviceMemory<T> + ?Sized),
    split: VirialSplit,
) -> Result<(DeviceBuffer<f64>, DeviceBuffer<f64>)> {
    let d = stream.device();
    let _scope = d.enter()?;
    let mut force = d.alloc::<f64>(3 * plan.n_rows)?;
    let mut virial = d.alloc::<f64>(9 * plan.n_rows)?;
    assemble_device_into(stream, plan, g, edge_vec, split, &mut force, &mut virial)?;
    Ok((force, virial))
}

/// Validated endpoint indices on the device, for the atomic reference path.
pub struct DeviceEdges {
    n_rows: usize,
    src: DeviceBuffer<i32>,
    dst: DeviceBuffer<i32>,
}

impl DeviceEdges {
    /// Validates (and, with ghosts, maps) the endpoints, then uploads them.
    pub fn upload<I: EdgeIndex>(
        device: &Device,
        src: &[I],
        dst: &[I],
        n_ext: usize,
        ghosts: Option<GhostMapping<'_>>,
    ) -> Result<DeviceEdges> {
        let (dst_keys, src_keys, n_rows) = validated_keys(src, dst, n_ext, ghosts)?;
        let _scope = device.enter()?;
        Ok(DeviceEdges {
            n_rows,
            src: device.htod_copy(&src_keys)?,
            dst: device.htod_copy(&dst_keys)?,
        })
    }
    /// Output rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
}

/// The reference path on the device: materialised E×9 outer product in
/// `outer` (scratch, E×9), then atomic scatters in the input precision into
/// `force` (N×3) and `virial` (N×9). Not bitwise reproducible.
// Mirrors the C entry point: every buffer is a separate role.
#[allow(clippy::too_many_arguments)]
pub fn assemble_atomic_device_into<T: DeviceReal>(
    stream: &Stream,
    edges: &DeviceEdges,
    g: &(impl DeviceMemory<T> + ?Sized),
    edge_vec: &(impl DeviceMemory<T> + ?Sized),
    split: VirialSplit,
    outer: &mut (impl DeviceMemoryMut<T> + ?Sized),
    force: &mut (impl DeviceMemoryMut<T> + ?Sized),
    virial: &mut (impl DeviceMemoryMut<T> + ?Sized),
) -> Result<()> {
    let (g, edge_vec) = (g.device_view(), edge_vec.device_view());
    let mut outer = outer.device_view_mut();
    let (mut force, mut virial) = (force.device_view_mut(), virial.device_view_mut());
    let e = edges.src.len();
    check_io(stream, e, edges.n_rows, &g, &edge_vec, &force, &virial)?;
    check_len("outer", outer.len(), 9 * e, &format!("{e} edges (E×9)"))?;
    same_device(stream, "outer", outer.device())?;
    same_device(stream, "edges", edges.src.device())?;
    let _scope = stream.device().enter()?;
    // SAFETY: lengths and devices checked above; indices validated on the host before upload.
    let status = unsafe {
        sys::hipkern_force_assemble_atomic(
            T::DTYPE,
            g.as_ptr().cast(),
            edge_vec.as_ptr().cast(),
            edges.src.as_ptr(),
            edges.dst.as_ptr(),
            e as i64,
            edges.n_rows as i32,
            split_code(split),
            outer.as_mut_ptr().cast(),
            force.as_mut_ptr().cast(),
            virial.as_mut_ptr().cast(),
            stream.as_raw(),
        )
    };
    crate::runtime::check("hipkern_force_assemble_atomic", status)
}

/// Which frame each output row belongs to, on the device: the rows of
/// every frame in a fixed order (for [`frame_virials_device_into`]).
pub struct DeviceFrames {
    n_rows: usize,
    n_frames: usize,
    /// The rows grouped by frame (stable); `None`: frames are consecutive.
    rows: Option<DeviceBuffer<i32>>,
    row_ptr: DeviceBuffer<i32>,
}

impl DeviceFrames {
    /// Consecutive frames of `frame_size` rows; `n_rows` must be a multiple.
    pub fn by_size(device: &Device, n_rows: usize, frame_size: usize) -> Result<DeviceFrames> {
        if frame_size == 0 {
            return Err(Error::InvalidInput("frame size 0".into()));
        }
        if n_rows % frame_size != 0 {
            return Err(Error::InvalidInput(format!(
                "{n_rows} rows are not a whole number of frames of {frame_size}"
            )));
        }
        if n_rows > MAX_PLAN_LEN {
            return Err(Error::InvalidInput(format!(
                "{n_rows} rows exceed the device limit of {MAX_PLAN_LEN}"
            )));
        }
        let n_frames = n_rows / frame_size;
        let row_ptr: Vec<i32> = (0..=n_frames).map(|k| (k * frame_size) as i32).collect();
        let _scope = device.enter()?;
        Ok(DeviceFrames {
            n_rows,
            n_frames,
            rows: None,
            row_ptr: device.htod_copy(&row_ptr)?,
        })
    }

    /// Frames given by `frame_of[k]` in `[0, n_frames)` for every row `k`:
    /// grouped on the device by the plan build's stable sort (so
    /// a bad id is reported as `frame_of[i] = v`, before anything is
    /// written). Synchronizes `stream`.
    pub fn by_ids<I: DeviceIndex>(
        stream: &Stream,
        frame_of: &(impl DeviceMemory<I> + ?Sized),
        n_frames: usize,
    ) -> Result<DeviceFrames> {
        let frame_of = frame_of.device_view();
        // Keys = frame ids: dst_order lists each frame's rows in row order.
        let plan = DevicePlan::build(stream, &frame_of, &frame_of, n_frames, None).map_err(
            |e| match e {
                Error::InvalidInput(m) => Error::InvalidInput(
                    m.replacen("src[", "frame_of[", 1)
                        .replacen("dst[", "frame_of[", 1)
                        .replacen("n_ext = ", "", 1)
                        .replacen("src has", "frame_of has", 1),
                ),
                other => other,
            },
        )?;
        Ok(DeviceFrames {
            n_rows: frame_of.len(),
            n_frames,
            rows: Some(plan.dst_order),
            row_ptr: plan.dst_row_ptr,
        })
    }

    /// Number of frames.
    pub fn n_frames(&self) -> usize {
        self.n_frames
    }

    /// Number of rows the frames cover.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
}

/// Total virial per frame from a per-atom virial on the device (`N×9`
/// float64, as the assembly writes it): `frame_virial` gets `n_frames × 9`,
/// and `frame_voigt`, when given, `n_frames × 6` in LAMMPS' order (xx, yy,
/// zz, xy, xz, yz). Fixed-order float64 sums: bitwise reproducible.
///
/// `frame_voigt` is a trait object so that `None` needs no type: pass
/// `Some(&mut buffer)` or `Some(&mut view)`.
pub fn frame_virials_device_into(
    stream: &Stream,
    virial: &(impl DeviceMemory<f64> + ?Sized),
    frames: &DeviceFrames,
    frame_virial: &mut (impl DeviceMemoryMut<f64> + ?Sized),
    frame_voigt: Option<&mut dyn DeviceMemoryMut<f64>>,
) -> Result<()> {
    let virial = virial.device_view();
    let mut frame_virial = frame_virial.device_view_mut();
    let mut frame_voigt = frame_voigt.map(|v| v.device_view_mut());
    check_len(
        "virial",
        virial.len(),
        9 * frames.n_rows,
        &format!("{} rows (N×9)", frames.n_rows),
    )?;
    let per_frame = format!("{} frames", frames.n_frames);
    check_len(
        "frame_virial",
        frame_virial.len(),
        9 * frames.n_frames,
        &format!("{per_frame} (K×9)"),
    )?;
    same_device(stream, "virial", virial.device())?;
    same_device(stream, "frame_virial", frame_virial.device())?;
    same_device(stream, "frames", frames.row_ptr.device())?;
    let voigt_ptr = match frame_voigt.as_mut() {
        Some(v) => {
            check_len(
                "frame_voigt",
                v.len(),
                6 * frames.n_frames,
                &format!("{per_frame} (K×6)"),
            )?;
            same_device(stream, "frame_voigt", v.device())?;
            v.as_mut_ptr()
        }
        None => std::ptr::null_mut(),
    };
    let _scope = stream.device().enter()?;
    // SAFETY: virial holds n_rows × 9 doubles, row_ptr n_frames + 1
    // offsets in [0, n_rows] (made by by_size or by the validated plan
    // build), rows (when present) n_rows row ids, the outputs the sizes
    // checked above; all on the stream's device.
    let status = unsafe {
        sys::hipkern_force_frame_virial(
            virial.as_ptr(),
            frames.n_rows as i64,
            frames
                .rows
                .as_ref()
                .map_or(std::ptr::null(), |r| r.as_ptr()),
            frames.row_ptr.as_ptr(),
            frames.n_frames as i64,
            frame_virial.as_mut_ptr(),
            voigt_ptr,
            stream.as_raw(),
        )
    };
    crate::runtime::check("hipkern_force_frame_virial", status)
}
