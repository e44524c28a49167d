//! hipkern: HIP GPU kernels with a C ABI, for ROCm (and CUDA, through HIP)
//! applications.
//!
//! This crate is the safe face of the kernel layer (`hipkern-sys`, the
//! C ABI in `hip/include/hipkern.h`). It is built for exactly one platform,
//! chosen when `hipkern-sys` is built: `amd`, `nvidia` or `cpu`
//! ([`runtime::platform`]). On `cpu` every CPU path works and
//! [`Device::new`] returns [`Error::NoToolchain`].
#![deny(missing_docs)]

pub mod force;
pub mod nearfield;
pub mod psf;
pub mod rng;
pub mod runtime;

pub use runtime::{Device, DeviceBuffer, Error, Event, Result, Stream};
