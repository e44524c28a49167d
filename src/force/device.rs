//! Device paths: the plan on the device, the atomic-free assembly
//! (`hipkern_force_assemble`) and the atomic reference path.
use super::{validated_keys, CsrPlan, EdgeIndex, GhostMapping, Real, VirialSplit};
use crate::runtime::{DeviceBuffer, DeviceRepr, Error, Result, Stream};
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

/// A validated [`CsrPlan`] resident on one device.
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
    g: &DeviceBuffer<T>,
    edge_vec: &DeviceBuffer<T>,
    force: &DeviceBuffer<O>,
    virial: &DeviceBuffer<O>,
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
    g: &DeviceBuffer<T>,
    edge_vec: &DeviceBuffer<T>,
    split: VirialSplit,
    force: &mut DeviceBuffer<f64>,
    virial: &mut DeviceBuffer<f64>,
) -> Result<()> {
    check_io(
        stream,
        plan.n_edges,
        plan.n_rows,
        g,
        edge_vec,
        force,
        virial,
    )?;
    same_device(stream, "plan", plan.dst_order.device())?;
    let e = plan.n_edges;
    stream.device().bind()?;
    // SAFETY: every pointer is live device memory of the checked length on
    // the stream's device; the plan was validated on the host (indices in
    // range, row_ptr monotone from 0 to E), which is the kernel's precondition.
    let status = unsafe {
        sys::hipkern_force_assemble(
            T::DTYPE,
            g.as_ptr().cast(),
            edge_vec.as_ptr().cast(),
            e as i64,
            plan.dst_order.as_ptr(),
            plan.dst_row_ptr.as_ptr(),
            plan.src_order.as_ptr(),
            plan.src_row_ptr.as_ptr(),
            plan.n_rows as i32,
            split_code(split),
            force.as_mut_ptr(),
            virial.as_mut_ptr(),
            stream.as_raw(),
        )
    };
    crate::runtime::check("hipkern_force_assemble", status)
}

/// Allocates the outputs and assembles; returns (force, virial).
pub fn assemble_device<T: DeviceReal>(
    stream: &Stream,
    plan: &DevicePlan,
    g: &DeviceBuffer<T>,
    edge_vec: &DeviceBuffer<T>,
    split: VirialSplit,
) -> Result<(DeviceBuffer<f64>, DeviceBuffer<f64>)> {
    let d = stream.device();
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
    g: &DeviceBuffer<T>,
    edge_vec: &DeviceBuffer<T>,
    split: VirialSplit,
    outer: &mut DeviceBuffer<T>,
    force: &mut DeviceBuffer<T>,
    virial: &mut DeviceBuffer<T>,
) -> Result<()> {
    let e = edges.src.len();
    check_io(stream, e, edges.n_rows, g, edge_vec, force, virial)?;
    check_len("outer", outer.len(), 9 * e, &format!("{e} edges (E×9)"))?;
    stream.device().bind()?;
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
