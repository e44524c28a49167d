//! `hipkern._native`: the extension module under the `hipkern` Python
//! package. Python code imports `hipkern`, `hipkern.torch`,
//! `hipkern.nearfield` and `hipkern.psf`, never this module: the checks a
//! user relies on (shapes, dtypes, devices) are made in those wrappers, and
//! the functions here that take raw device pointers trust them.
//!
//! Errors: hipkern's `InvalidInput` becomes `ValueError`, a host
//! allocation that cannot be made `MemoryError`, a file problem `OSError`,
//! everything else (the runtime, a missing device) `RuntimeError`; the
//! message is hipkern's own. Long calls release the GIL.
use pyo3::exceptions::{PyMemoryError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod force;
mod nearfield;
mod psf;

/// A hipkern error as the Python exception a caller expects.
pub(crate) fn to_py(e: hipkern::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        hipkern::Error::InvalidInput(_) | hipkern::Error::ScratchExceeded { .. } => {
            PyValueError::new_err(msg)
        }
        hipkern::Error::HostMemory { .. } => PyMemoryError::new_err(msg),
        hipkern::Error::Io { .. } => PyOSError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// `Result` of hipkern as a `PyResult`.
pub(crate) trait IntoPy<T> {
    fn py(self) -> PyResult<T>;
}
impl<T> IntoPy<T> for hipkern::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// "cpu", "nvidia" or "amd": the platform this extension's kernels were
/// built for.
#[pyfunction]
fn platform() -> &'static str {
    hipkern::runtime::platform()
}

/// The device architectures compiled in (empty on cpu).
#[pyfunction]
fn compiled_archs() -> Vec<String> {
    hipkern::runtime::compiled_archs()
}

/// The C ABI version of the kernel layer linked in.
#[pyfunction]
fn abi_version() -> i32 {
    // SAFETY: a plain query without arguments.
    unsafe { hipkern_sys::hipkern_abi_version() }
}

/// The number of visible devices; RuntimeError with the runtime's message
/// where there is no driver or no device (and on the cpu platform).
#[pyfunction]
fn device_count(py: Python<'_>) -> PyResult<usize> {
    py.detach(hipkern::runtime::device_count).py()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(platform, m)?)?;
    m.add_function(wrap_pyfunction!(compiled_archs, m)?)?;
    m.add_function(wrap_pyfunction!(abi_version, m)?)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    force::register(m)?;
    nearfield::register(m)?;
    psf::register(m)?;
    Ok(())
}
