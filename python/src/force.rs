//! Force/virial assembly for `hipkern.torch` (and numpy callers): the CPU
//! path on host arrays, and the device path on raw pointers into torch's
//! own memory, on torch's stream.
use crate::IntoPy;
use hipkern::force::{assemble_with_plan, CsrPlan, DevicePlan, GhostMapping, VirialSplit};
use hipkern_sys as sys;
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::ffi::c_void;

type Plan<'py> = (
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
);

/// The CSR plan on the host (stable counting sort), as
/// (dst_order, dst_row_ptr, src_order, src_row_ptr), int32. `mapping`
/// (extended → local owner, `n_ext` entries) folds ghosts into `n_local`
/// rows. Every index is checked first; the error names the array, the
/// position and the value.
#[pyfunction]
#[pyo3(signature = (src, dst, n_ext, mapping=None, n_local=0))]
fn force_plan_cpu<'py>(
    py: Python<'py>,
    src: PyReadonlyArray1<'py, i64>,
    dst: PyReadonlyArray1<'py, i64>,
    n_ext: usize,
    mapping: Option<PyReadonlyArray1<'py, i64>>,
    n_local: usize,
) -> PyResult<Plan<'py>> {
    let (src, dst) = (src.as_slice()?, dst.as_slice()?);
    let mapping = match &mapping {
        Some(m) => Some(m.as_slice()?),
        None => None,
    };
    let plan = py
        .detach(|| {
            let ghosts = mapping.map(|mapping| GhostMapping { mapping, n_local });
            CsrPlan::build(src, dst, n_ext, ghosts)
        })
        .py()?;
    Ok((
        PyArray1::from_slice(py, plan.dst_order()),
        PyArray1::from_slice(py, plan.dst_row_ptr()),
        PyArray1::from_slice(py, plan.src_order()),
        PyArray1::from_slice(py, plan.src_row_ptr()),
    ))
}

/// (force N×3, virial N×9), float64.
type ForceVirial<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// Edge inputs of either precision (the wrapper gives both the same).
#[derive(FromPyObject)]
enum EdgeArray<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

/// The segment reduction over a plan on the CPU, float64 sums; returns
/// float64 (force N×3, virial N×9), virial split half to each endpoint
/// (DeePMD's convention). The plan is validated (`CsrPlan::from_parts`):
/// any plan error is a `ValueError` naming the array and the position.
#[pyfunction]
fn force_assemble_cpu<'py>(
    py: Python<'py>,
    g: EdgeArray<'py>,
    edge_vec: EdgeArray<'py>,
    dst_order: PyReadonlyArray1<'py, i32>,
    dst_row_ptr: PyReadonlyArray1<'py, i32>,
    src_order: PyReadonlyArray1<'py, i32>,
    src_row_ptr: PyReadonlyArray1<'py, i32>,
) -> PyResult<ForceVirial<'py>> {
    let parts = [&dst_order, &dst_row_ptr, &src_order, &src_row_ptr]
        .map(|a| a.as_slice().map(<[i32]>::to_vec));
    let [dst_order, dst_row_ptr, src_order, src_row_ptr] = parts;
    let (dst_order, dst_row_ptr, src_order, src_row_ptr) =
        (dst_order?, dst_row_ptr?, src_order?, src_row_ptr?);
    let n_edges = dst_order.len();
    let assembly = match (&g, &edge_vec) {
        (EdgeArray::F32(g), EdgeArray::F32(r)) => {
            let (g, r) = (g.as_slice()?, r.as_slice()?);
            py.detach(|| {
                let plan =
                    CsrPlan::from_parts(n_edges, dst_order, dst_row_ptr, src_order, src_row_ptr)?;
                assemble_with_plan(&plan, g, r, VirialSplit::Half)
            })
        }
        (EdgeArray::F64(g), EdgeArray::F64(r)) => {
            let (g, r) = (g.as_slice()?, r.as_slice()?);
            py.detach(|| {
                let plan =
                    CsrPlan::from_parts(n_edges, dst_order, dst_row_ptr, src_order, src_row_ptr)?;
                assemble_with_plan(&plan, g, r, VirialSplit::Half)
            })
        }
        _ => {
            return Err(PyValueError::new_err(
                "g and edge_vec must have the same dtype",
            ))
        }
    }
    .py()?;
    let n = assembly.force.len() / 3;
    let force = PyArray1::from_vec(py, assembly.force).reshape([n, 3])?;
    let virial = PyArray1::from_vec(py, assembly.virial).reshape([n, 9])?;
    Ok((force, virial))
}

/// Device bytes of scratch the device plan build needs.
#[pyfunction]
fn force_plan_scratch_bytes(n_edges: usize, n_rows: usize) -> PyResult<usize> {
    DevicePlan::scratch_bytes(n_edges, n_rows).py()
}

fn check(call: &'static str, status: i32) -> PyResult<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(crate::to_py(hipkern::Error::from_status(call, status)))
    }
}

fn index_type(bits: u32) -> PyResult<sys::hipkern_index_type> {
    match bits {
        32 => Ok(sys::HIPKERN_INDEX_I32),
        64 => Ok(sys::HIPKERN_INDEX_I64),
        _ => Err(PyValueError::new_err(format!(
            "index width {bits} (int32 or int64 only)"
        ))),
    }
}

fn real_type(bits: u32) -> PyResult<sys::hipkern_dtype> {
    match bits {
        32 => Ok(sys::HIPKERN_DTYPE_F32),
        64 => Ok(sys::HIPKERN_DTYPE_F64),
        _ => Err(PyValueError::new_err(format!(
            "float width {bits} (float32 or float64 only)"
        ))),
    }
}

fn ptr(address: usize) -> *mut c_void {
    address as *mut c_void
}

/// The device plan build (`hipkern_force_plan_build`) on memory the
/// caller owns, on `stream` (a `cudaStream_t`/`hipStream_t` as an integer,
/// 0 for the default stream). Returns None, or (first_bad_src,
/// first_bad_dst, first_bad_mapping) when an index is out of range (the
/// outputs are then untouched). Synchronizes the stream (the verdict).
///
/// Not safe on its own: every address must be device memory of the
/// stream's device of the size the C ABI documents; `hipkern.torch`
/// checks that before calling.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn force_plan_build_device(
    py: Python<'_>,
    index_bits: u32,
    src: usize,
    dst: usize,
    n_edges: i64,
    n_ext: i64,
    mapping_bits: u32,
    mapping: usize,
    n_local: i64,
    out: [usize; 4],
    scratch: usize,
    scratch_bytes: usize,
    stream: usize,
) -> PyResult<Option<(i64, i64, i64)>> {
    let (it, mt) = (index_type(index_bits)?, index_type(mapping_bits)?);
    let mut report = sys::hipkern_force_plan_report {
        first_bad_src: -1,
        first_bad_dst: -1,
        first_bad_mapping: -1,
    };
    let status = py.detach(|| {
        // SAFETY: the caller's contract (above): hipkern.torch passes
        // contiguous tensors of the stream's device with the lengths the
        // entry point reads; the entry point checks every index itself.
        unsafe {
            sys::hipkern_force_plan_build(
                it,
                ptr(src),
                ptr(dst),
                n_edges,
                n_ext,
                mt,
                ptr(mapping),
                n_local,
                out[0] as *mut i32,
                out[1] as *mut i32,
                out[2] as *mut i32,
                out[3] as *mut i32,
                ptr(scratch),
                scratch_bytes,
                &mut report,
                ptr(stream),
            )
        }
    });
    if status == sys::HIPKERN_ERROR_INVALID_INDEX {
        return Ok(Some((
            report.first_bad_src,
            report.first_bad_dst,
            report.first_bad_mapping,
        )));
    }
    check("hipkern_force_plan_build", status)?;
    Ok(None)
}

/// The atomic-free assembly (`hipkern_force_assemble`, virial half to
/// each endpoint) on memory the caller owns, asynchronously on `stream`.
/// Outputs of `out_bits` (the input precision): float32 outputs need
/// `accum` (n_rows × 12 float64), float64 ones take 0.
///
/// Not safe on its own: as `force_plan_build_device`, and the plan must
/// be a valid CSR plan of `n_edges` edges and `n_rows` rows.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn force_assemble_device(
    py: Python<'_>,
    real_bits: u32,
    g: usize,
    edge_vec: usize,
    n_edges: i64,
    plan: [usize; 4],
    n_rows: i32,
    out_bits: u32,
    force: usize,
    virial: usize,
    accum: usize,
    stream: usize,
) -> PyResult<()> {
    let (dtype, out_dtype) = (real_type(real_bits)?, real_type(out_bits)?);
    let status = py.detach(|| {
        // SAFETY: the caller's contract (above).
        unsafe {
            sys::hipkern_force_assemble(
                dtype,
                ptr(g),
                ptr(edge_vec),
                n_edges,
                plan[0] as *const i32,
                plan[1] as *const i32,
                plan[2] as *const i32,
                plan[3] as *const i32,
                n_rows,
                sys::HIPKERN_VIRIAL_HALF,
                out_dtype,
                ptr(force),
                ptr(virial),
                accum as *mut f64,
                ptr(stream),
            )
        }
    });
    check("hipkern_force_assemble", status)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(force_plan_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(force_assemble_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(force_plan_scratch_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(force_plan_build_device, m)?)?;
    m.add_function(wrap_pyfunction!(force_assemble_device, m)?)?;
    Ok(())
}
