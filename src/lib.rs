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
//!
//! # Features
//!
//! The default feature `cli` builds the `hipkern` program and everything it
//! reads and writes. A library user who wants none of that depends on
//! `hipkern = { version = "0.1", default-features = false }` and adds what
//! it needs: `cache` ([`nearfield::TableCache`], SQLite compiled from the
//! bundled source), `fits` ([`psf::write_fits`], cfitsio likewise), `png`
//! ([`psf::write_png`]). `require-device` makes a build without a HIP or
//! CUDA compiler fail instead of building the `cpu` platform.
//!
//! # Quick start
//!
//! Each example runs the float64 CPU path, and the device path too where
//! [`Device::new`] finds a GPU, checking one against the other.
//!
//! Force and virial from per-edge gradients (a ring of atoms):
//!
//! ```
//! use hipkern::force::{assemble_device, assemble_with_plan, CsrPlan, DevicePlan, VirialSplit};
//!
//! let n_atoms = 4;
//! let (src, dst) = (vec![0i32, 1, 2, 3], vec![1i32, 2, 3, 0]);
//! let edge_vec = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0];
//! let g: Vec<f64> = edge_vec.iter().map(|r| 0.5 * r).collect(); // dE/d(edge_vec)
//! let plan = CsrPlan::build(&src, &dst, n_atoms, None)?;
//! let cpu = assemble_with_plan(&plan, &g, &edge_vec, VirialSplit::Half)?;
//! // F_k = Σ_{dst(e)=k} g_e − Σ_{src(e)=k} g_e: atom 1 gets edge 0's g, gives edge 1's.
//! assert_eq!(&cpu.force[3..6], &[0.5, -0.5, 0.0]);
//!
//! if let Ok(device) = hipkern::Device::new(0) {
//!     let stream = device.new_stream()?;
//!     let dplan = DevicePlan::build_from_host(&stream, &src, &dst, n_atoms, None)?;
//!     let (g_d, r_d) = (device.htod_copy(&g)?, device.htod_copy(&edge_vec)?);
//!     let (force, virial) = assemble_device(&stream, &dplan, &g_d, &r_d, VirialSplit::Half)?;
//!     stream.synchronize()?;
//!     assert_eq!(force.to_vec()?, cpu.force);
//!     assert_eq!(virial.to_vec()?, cpu.virial);
//! }
//! # Ok::<(), hipkern::Error>(())
//! ```
//!
//! A near-field table (2D Laplace, two Gauss–Legendre nodes per axis) and
//! List 1 on a small adaptive quadtree:
//!
//! ```
//! use hipkern::nearfield::{
//!     evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Evaluator, List1Layout,
//!     List1Tables, RandomTreeConfig, ReducedTable,
//! };
//!
//! let (dim, q) = (2, 2);
//! let reduced = ReducedTable::build(&Kernel::laplace(dim)?, q, 1.0, &EntryQuadrature::default())?;
//! let table = reduced.to_dense()?;
//! let tree = BalancedTree::random(&RandomTreeConfig::new(dim, 7, 3))?;
//! let targets = tree.all_boxes(); // every leaf is a target box
//! let boxes = tree.list1_boxes(&targets);
//! let density: Vec<f64> = tree.box_points(q)?.chunks(dim).map(|x| (x[0] - x[1]).cos()).collect();
//! let u = evaluate_list1(&boxes, &List1Tables::Scaled(&table), &density)?;
//! assert_eq!(u.len(), tree.n_boxes() * table.n_modes());
//!
//! if let Ok(device) = hipkern::Device::new(0) {
//!     let stream = device.new_stream()?;
//!     let tables = List1Tables::Scaled(&table);
//!     let mut evaluator = List1Evaluator::from_tables(&device, &tables, List1Layout::Dense)?;
//!     let on_device = evaluator.evaluate(&stream, &boxes, &density)?;
//!     let peak = u.iter().fold(0.0f64, |m, x| m.max(x.abs()));
//!     let err = on_device.iter().zip(&u).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
//!     assert!(err <= 1e-13 * peak);
//! }
//! # Ok::<(), hipkern::Error>(())
//! ```
//!
//! Star events splatted into a float64 RGB image through the PSF cache:
//!
//! ```
//! use hipkern::psf::{CacheConfig, CpuSink, DeviceSink, MoffatPsf, PsfCache, StarEvent};
//! use std::sync::Arc;
//!
//! let psf = MoffatPsf::default();
//! let cache = Arc::new(PsfCache::build_with(psf, &CacheConfig { phases: 4, threads: 0 })?);
//! let star = |x, y, flux| StarEvent {
//!     x, y, flux, r: 1.0, g: 0.8, b: 0.6, support: psf.support_radius(),
//! };
//! let events = [star(20.3, 11.7, 1e3), star(5.0, 30.5, 40.0), star(63.9, 0.2, 7.5)];
//! let mut sink = CpuSink::new(cache.clone(), 64, 48)?;
//! sink.accumulate(&events)?;
//! let image = sink.into_image();
//! assert!(image.data().iter().all(|v| v.is_finite() && *v >= 0.0));
//!
//! if let Ok(device) = hipkern::Device::new(0) {
//!     let mut on_device = DeviceSink::new(&device, cache, 64, 48)?;
//!     on_device.accumulate(&events)?;
//!     on_device.finish()?.compare(&image)?.accept(1e-10)?;
//! }
//! # Ok::<(), hipkern::Error>(())
//! ```
#![deny(missing_docs)]

pub mod force;
pub mod host_memory;
pub mod nearfield;
pub mod npy;
pub mod psf;
pub mod rng;
pub mod runtime;
mod threads;

pub use runtime::{
    Device, DeviceBuffer, DeviceMemory, DeviceMemoryMut, Error, Event, Result, Stream,
};
