//! hipkern: HIP GPU kernels with a C ABI, for ROCm (and CUDA, through HIP)
//! applications.
//!
//! This crate is the safe face of the kernel layer (`hipkern-sys`, the
//! C ABI in `hip/include/hipkern.h`, `HIPKERN_ABI_VERSION` 4). Three
//! scatter-heavy primitives, each with a float64 CPU reference that is part
//! of the product (tests, small problems, machines without a GPU) and that
//! every device result is checked against:
//!
//! - [`nearfield`]: near-field interaction tables of volume-potential FMM,
//!   `T[case, s, t] = ∫_{[0,L]^d} φ_s(y) G(x_t − y) dy`, their box-size
//!   scaling, their symmetry reduction (one value per orbit of the
//!   kernel's signed permutations, addressed arithmetically or by generated
//!   descriptors), a SQLite cache, and the List 1 evaluator
//!   `u[B, t] = Σ_{S ∈ L1(B)} Σ_s f[S, s]·(scale·T[case(B, S), s, t] +
//!   displacement·N_s)` on the CPU and the device.
//! - [`force`]: force and per-atom virial from per-edge gradients,
//!   `F_k = Σ_{dst(e)=k} g_e − Σ_{src(e)=k} g_e`,
//!   `W_k = ½ Σ_{dst(e)=k} V_e + ½ Σ_{src(e)=k} V_e` with
//!   `V_e = −g_e ⊗ edge_vec_e`, as an atomic-free segment reduction over a
//!   CSR plan.
//! - [`psf`]: a PSF sink that splats star events into a float64 RGB image
//!   through a cache of pixel-integrated Moffat stamps at sub-pixel phases
//!   (bilinear blend of four stamps), by atomics or owner-computes tiles
//!   with bounded scratch.
//!
//! The module docs state the math each one implements. [`runtime`] is the
//! device layer (devices, streams, events, buffers, errors, in the manner of
//! cudarc's safe layer); [`rng`] a seeded generator for fixtures.
//!
//! The crate is built for exactly one platform, chosen when `hipkern-sys`
//! is built: `amd`, `nvidia` or `cpu` ([`runtime::platform`]). On `cpu`
//! every CPU path works and [`Device::new`] returns [`Error::NoToolchain`].
//! Bad input is an [`Error`] that names what is wrong; what was already
//! accumulated stays and the refused work is not half-applied (a few
//! low-level lookups, such as [`nearfield::OrbitDescriptors::slot`],
//! document a panic on ids out of range instead).
#![deny(missing_docs)]

pub mod force;
pub mod host_memory;
pub mod nearfield;
mod npy;
pub mod psf;
pub mod rng;
pub mod runtime;

pub use runtime::{Device, DeviceBuffer, Error, Event, Result, Stream};
