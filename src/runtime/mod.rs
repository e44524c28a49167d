//! The runtime layer: devices, streams, events, device buffers, errors.
//!
//! Modelled on cudarc's safe layer: an `Arc`-shared [`Device`], RAII
//! [`DeviceBuffer`]s whose drop frees (errors recorded on the device, never
//! panicked), typed views, synchronous and stream-ordered copies, and an
//! `unsafe` marker trait ([`DeviceRepr`]) for types that may cross to the
//! device. Every call goes through the C ABI of `hipkern.h`.
//!
//! # Devices and the caller's current device
//!
//! Every call makes its device current on the calling thread for its own
//! length only and restores the device that was current before (it
//! switches only when another one is): hipkern never changes the device
//! the caller's own HIP/CUDA calls go to. [`Device::bind`] is the one call
//! that changes it on purpose. A process may hold one [`Device`] per GPU
//! and drive each from its own thread. A thread that only ever uses one
//! device can bind it once: hipkern's calls then never switch (on CUDA,
//! restoring a thread's default device 0 would otherwise create device
//! 0's context in a process that never used it).
//!
//! # Interop: another library's streams, events and memory
//!
//! A stream, event or allocation of PyTorch, Kokkos or the caller's own
//! code can be used without copies, and hipkern never destroys or frees
//! it: [`Stream::from_raw`] (a null stream is the device's default
//! stream), [`Event::from_raw`], and typed views that borrow the memory's
//! owner so they cannot outlive it ([`DeviceSlice::from_raw_parts`],
//! [`DeviceSliceMut::from_raw_parts_mut`], which refuse a null pointer
//! with elements and a misaligned one). The primitives take any
//! [`DeviceMemory`] / [`DeviceMemoryMut`]: a [`DeviceBuffer`] or a view.
//!
//! Waiting on a foreign event: the producer records an event after the
//! work that writes the inputs; a hipkern stream waits for it on the
//! device (nothing blocks the host), and the producer's stream waits for an
//! event recorded after hipkern's work in turn.
//!
//! ```no_run
//! use hipkern::runtime::{Device, DeviceSlice, Event, Stream};
//! use std::ffi::c_void;
//!
//! /// What another library hands over: its stream, an event it recorded
//! /// after writing the tensor, and the tensor (its device address and length).
//! struct Foreign {
//!     stream: *mut c_void,
//!     ready: *mut c_void,
//!     data: *const f64,
//!     len: usize,
//! }
//!
//! fn run(device: &Device, tensor: &Foreign) -> hipkern::Result<Vec<f64>> {
//!     // SAFETY: the library created both handles on `device` and keeps
//!     // them alive until the work queued below is done (the synchronize).
//!     let (theirs, ready) = unsafe {
//!         (
//!             Stream::from_raw(device, tensor.stream),
//!             Event::from_raw(device, tensor.ready),
//!         )
//!     };
//!     // SAFETY: `data` holds `len` float64 on `device` while `tensor` lives.
//!     let x = unsafe { DeviceSlice::from_raw_parts(tensor, device, tensor.data, tensor.len)? };
//!     let ours = device.new_stream()?;
//!     ours.wait_event(&ready)?; // after the producer's writes
//!     let mut copy = device.alloc::<f64>(x.len())?;
//!     ours.copy_dtod_async(&x, &mut copy.as_slice_mut())?;
//!     let done = ours.record_event()?;
//!     theirs.wait_event(&done)?; // the producer's later work comes after ours
//!     ours.synchronize()?;
//!     copy.to_vec()
//! }
//! ```
mod buffer;
mod device;
mod error;
mod pinned;
mod stream;

pub use buffer::{
    DeviceBuffer, DeviceMemory, DeviceMemoryMut, DeviceRepr, DeviceSlice, DeviceSliceMut,
};
pub use device::{
    arch_is_compiled, build_runtime_version, compiled_archs, device_count, driver_version,
    format_runtime_version, platform, runtime_version, Device, DeviceProperties,
};
pub(crate) use error::check;
pub use error::{Error, Result};
pub(crate) use pinned::Pinned;
pub use stream::{Event, FillValue, Stream};
