//! The runtime layer: devices, streams, events, device buffers, errors.
//!
//! Modelled on cudarc's safe layer: an `Arc`-shared [`Device`], RAII
//! [`DeviceBuffer`]s whose drop frees (errors recorded on the device, never
//! panicked), typed views, synchronous and stream-ordered copies, and an
//! `unsafe` marker trait ([`DeviceRepr`]) for types that may cross to the
//! device. Every call goes through the C ABI of `hipkern.h`.
mod buffer;
mod device;
mod error;
mod stream;

pub use buffer::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
pub use device::{
    arch_is_compiled, build_runtime_version, compiled_archs, device_count, driver_version,
    format_runtime_version, platform, runtime_version, Device, DeviceProperties,
};
pub(crate) use error::check;
pub use error::{Error, Result};
pub use stream::{Event, FillValue, Stream};
