//! Streams and events.
use super::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use super::device::Device;
use super::error::{check, Error, Result};
use hipkern_sys as sys;
use std::ffi::c_void;
use std::sync::Arc;

pub(crate) struct StreamInner {
    pub(crate) raw: *mut c_void,
    pub(crate) device: Device,
    /// Created by hipkern (destroyed on drop) or borrowed
    /// ([`Stream::from_raw`]: never destroyed by hipkern).
    pub(crate) owned: bool,
}

// SAFETY: a hipStream_t is a handle the runtime lets any host thread use
// (the runtime API is thread-safe); we never touch what it points to.
unsafe impl Send for StreamInner {}
// SAFETY: as above; all uses go through runtime calls, which synchronise internally.
unsafe impl Sync for StreamInner {}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // Work queued on the stream still completes (the runtime defers the
        // destroy); errors are recorded on the device, never panicked.
        let r = self.device.with_current(|| {
            // SAFETY: raw came from hipkern_stream_create and is destroyed once.
            check("hipkern_stream_destroy", unsafe {
                sys::hipkern_stream_destroy(self.raw)
            })
        });
        if let Err(e) = r {
            self.device.record_free_error(e);
        }
    }
}

/// An ordered queue of device work. Cheap to clone (an `Arc`).
///
/// Created by [`Device::new_stream`] (destroyed when the last clone is
/// dropped) or borrowed from another library with [`Stream::from_raw`]
/// (never destroyed by hipkern).
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream({:p} on device {}, {})",
            self.inner.raw,
            self.inner.device.ordinal(),
            if self.inner.owned {
                "owned"
            } else {
                "borrowed"
            }
        )
    }
}

impl Stream {
    pub(crate) fn new(device: &Device) -> Result<Stream> {
        let _scope = device.enter()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("hipkern_stream_create", unsafe {
            sys::hipkern_stream_create(&mut raw)
        })?;
        Ok(Stream {
            inner: Arc::new(StreamInner {
                raw,
                device: device.clone(),
                owned: true,
            }),
        })
    }

    /// Borrows a stream that another library created on `device`: a
    /// `hipStream_t` / `cudaStream_t` such as PyTorch's current stream
    /// (`torch.cuda.current_stream().cuda_stream`), so hipkern's work is
    /// ordered with the caller's. hipkern never destroys it (dropping the
    /// last clone does nothing). A null `raw` is `device`'s default
    /// (null) stream, which synchronizes with the device's blocking
    /// streams; hipkern's own streams are non-blocking.
    ///
    /// # Safety
    /// `raw` must be null or a live stream of `device` (created while
    /// `device` was current), and must stay alive (not be destroyed) as
    /// long as the returned `Stream` or any clone of it is used, and until
    /// the work queued through it has completed.
    pub unsafe fn from_raw(device: &Device, raw: *mut c_void) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                raw,
                device: device.clone(),
                owned: false,
            }),
        }
    }

    /// Whether hipkern created this stream (and destroys it on drop);
    /// false for one borrowed with [`Stream::from_raw`].
    pub fn is_owned(&self) -> bool {
        self.inner.owned
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The raw `hipStream_t` / `cudaStream_t`, for the C ABI's kernel entry points.
    pub fn as_raw(&self) -> *mut c_void {
        self.inner.raw
    }

    /// Waits for everything queued so far.
    pub fn synchronize(&self) -> Result<()> {
        let _scope = self.inner.device.enter()?;
        // SAFETY: valid stream handle.
        check("hipkern_stream_synchronize", unsafe {
            sys::hipkern_stream_synchronize(self.inner.raw)
        })
    }

    /// Later work on this stream waits for `event` (its latest record):
    /// an event of hipkern's or one borrowed with [`Event::from_raw`]
    /// (another library's work), of this stream's device or of another
    /// device of the process. Nothing waits on the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let raw_event = event.handle()?;
        let _scope = self.inner.device.enter()?;
        // SAFETY: a live stream of this device (its constructors' contract)
        // and a non-null live event (Event's constructors' contract).
        check("hipkern_stream_wait_event", unsafe {
            sys::hipkern_stream_wait_event(self.inner.raw, raw_event)
        })
    }

    fn same_device(&self, other: &Device, what: &str) -> Result<()> {
        if other.ordinal() != self.inner.device.ordinal() {
            return Err(Error::InvalidInput(format!(
                "{what} is on device {} but the stream is on device {}",
                other.ordinal(),
                self.inner.device.ordinal()
            )));
        }
        Ok(())
    }

    /// Stream-ordered host→device copy; `src.len()` must equal `dst.len()`.
    ///
    /// # Safety
    /// `src` must stay valid and unmodified until the stream has passed this
    /// copy (synchronize the stream or an event recorded after it). With
    /// pageable memory the runtime stages the copy, but with pinned memory
    /// it reads `src` asynchronously.
    pub unsafe fn copy_htod_async<T: DeviceRepr>(
        &self,
        src: &[T],
        dst: &mut DeviceSliceMut<'_, T>,
    ) -> Result<()> {
        self.same_device(dst.device(), "the destination")?;
        if src.len() != dst.len() {
            return Err(Error::InvalidInput(format!(
                "copy of {} elements into a slice of {}",
                src.len(),
                dst.len()
            )));
        }
        let _scope = self.inner.device.enter()?;
        // SAFETY: lengths match; the caller keeps src alive (see # Safety).
        check("hipkern_memcpy_async", unsafe {
            sys::hipkern_memcpy_async(
                dst.as_raw_mut(),
                src.as_ptr().cast(),
                std::mem::size_of_val(src),
                sys::HIPKERN_MEMCPY_HOST_TO_DEVICE,
                self.inner.raw,
            )
        })
    }

    /// Stream-ordered device→host copy; `src.len()` must equal `dst.len()`.
    ///
    /// # Safety
    /// `dst` must stay valid, and must not be read, until the stream has
    /// passed this copy.
    pub unsafe fn copy_dtoh_async<T: DeviceRepr>(
        &self,
        src: &DeviceSlice<'_, T>,
        dst: &mut [T],
    ) -> Result<()> {
        self.same_device(src.device(), "the source")?;
        if src.len() != dst.len() {
            return Err(Error::InvalidInput(format!(
                "copy of {} elements into a host slice of {}",
                src.len(),
                dst.len()
            )));
        }
        let _scope = self.inner.device.enter()?;
        // SAFETY: lengths match; the caller keeps dst alive (see # Safety).
        check("hipkern_memcpy_async", unsafe {
            sys::hipkern_memcpy_async(
                dst.as_mut_ptr().cast(),
                src.as_raw(),
                std::mem::size_of_val(dst),
                sys::HIPKERN_MEMCPY_DEVICE_TO_HOST,
                self.inner.raw,
            )
        })
    }

    /// Stream-ordered device→device copy. Safe: both sides are device
    /// memory borrowed for the call, and a free of either synchronises the
    /// device first (hipFree/cudaFree do), so the copy cannot outlive them.
    pub fn copy_dtod_async<T: DeviceRepr>(
        &self,
        src: &DeviceSlice<'_, T>,
        dst: &mut DeviceSliceMut<'_, T>,
    ) -> Result<()> {
        self.same_device(src.device(), "the source")?;
        self.same_device(dst.device(), "the destination")?;
        if src.len() != dst.len() {
            return Err(Error::InvalidInput(format!(
                "copy of {} elements into a slice of {}",
                src.len(),
                dst.len()
            )));
        }
        let _scope = self.inner.device.enter()?;
        // SAFETY: both ranges are live device memory of equal length.
        check("hipkern_memcpy_async", unsafe {
            sys::hipkern_memcpy_async(
                dst.as_raw_mut(),
                src.as_raw(),
                src.len() * std::mem::size_of::<T>(),
                sys::HIPKERN_MEMCPY_DEVICE_TO_DEVICE,
                self.inner.raw,
            )
        })
    }

    /// Fills `dst` with `value` on the device (the trivial kernel; also how
    /// tests poison outputs with NaN before a run).
    pub fn fill<T: FillValue>(&self, dst: &mut DeviceSliceMut<'_, T>, value: T) -> Result<()> {
        self.same_device(dst.device(), "the destination")?;
        let _scope = self.inner.device.enter()?;
        let n = dst.len();
        // SAFETY: dst is live device memory of n elements of T, and T is 4 or 8 bytes (FillValue).
        let status = unsafe {
            match std::mem::size_of::<T>() {
                4 => sys::hipkern_fill_u32(
                    dst.as_raw_mut().cast(),
                    n,
                    value.bits() as u32,
                    self.inner.raw,
                ),
                8 => {
                    sys::hipkern_fill_u64(dst.as_raw_mut().cast(), n, value.bits(), self.inner.raw)
                }
                _ => unreachable!("FillValue is only implemented for 4- and 8-byte types"),
            }
        };
        check("hipkern_fill", status)
    }

    /// `dst[i] = start + i * step` (wrapping).
    pub fn iota_u32(&self, dst: &mut DeviceSliceMut<'_, u32>, start: u32, step: u32) -> Result<()> {
        self.same_device(dst.device(), "the destination")?;
        let _scope = self.inner.device.enter()?;
        // SAFETY: dst is live device memory of dst.len() u32s.
        check("hipkern_iota_u32", unsafe {
            sys::hipkern_iota_u32(
                dst.as_raw_mut().cast(),
                dst.len(),
                start,
                step,
                self.inner.raw,
            )
        })
    }

    /// Records a new event at the current end of the stream.
    pub fn record_event(&self) -> Result<Event> {
        let e = Event::new(&self.inner.device)?;
        e.record(self)?;
        Ok(e)
    }
}

/// Element types the fill kernel writes: 4- or 8-byte plain values.
///
/// # Safety
/// Implementors must be exactly 4 or 8 bytes, valid for every bit pattern,
/// and `bits` must return their in-memory representation (zero-extended).
pub unsafe trait FillValue: DeviceRepr {
    /// The in-memory bits.
    fn bits(self) -> u64;
}
// SAFETY (all below): 4- or 8-byte primitive numbers, every bit pattern valid.
unsafe impl FillValue for u32 {
    fn bits(self) -> u64 {
        self as u64
    }
}
unsafe impl FillValue for i32 {
    fn bits(self) -> u64 {
        self as u32 as u64
    }
}
unsafe impl FillValue for f32 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
unsafe impl FillValue for u64 {
    fn bits(self) -> u64 {
        self
    }
}
unsafe impl FillValue for i64 {
    fn bits(self) -> u64 {
        self as u64
    }
}
unsafe impl FillValue for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// A timing event (device timestamps between stream points), created by
/// [`Event::new`] (destroyed on drop) or borrowed from another library with
/// [`Event::from_raw`] (never destroyed by hipkern).
pub struct Event {
    raw: *mut c_void,
    device: Device,
    owned: bool,
}

// SAFETY: an event handle may be recorded and queried from any host thread
// (thread-safe runtime API); we never dereference it.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// A new timing event on `device`.
    pub fn new(device: &Device) -> Result<Event> {
        let _scope = device.enter()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("hipkern_event_create", unsafe {
            sys::hipkern_event_create(&mut raw)
        })?;
        Ok(Event {
            raw,
            device: device.clone(),
            owned: true,
        })
    }

    /// Borrows an event that another library created on `device` (a
    /// `hipEvent_t` / `cudaEvent_t`, e.g. recorded by PyTorch after the
    /// work that produces hipkern's inputs), to order hipkern's streams
    /// after it ([`Stream::wait_event`]) or to record it after hipkern's
    /// work ([`Event::record`]). hipkern never destroys it. A null `raw`
    /// is refused when the event is used ([`Error::InvalidInput`]), and
    /// [`Event::elapsed_ms`] needs an event created with timing enabled
    /// (the runtime's error otherwise).
    ///
    /// # Safety
    /// `raw` must be null or a live event created while `device` was
    /// current, and must stay alive (not be destroyed) as long as the
    /// returned `Event` is used and until every wait queued on it and
    /// every record of it through hipkern has completed.
    pub unsafe fn from_raw(device: &Device, raw: *mut c_void) -> Event {
        Event {
            raw,
            device: device.clone(),
            owned: false,
        }
    }

    /// The device the event belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw `hipEvent_t` / `cudaEvent_t`, for the caller's own runtime calls.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }

    /// Whether hipkern created this event (and destroys it on drop);
    /// false for one borrowed with [`Event::from_raw`].
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// The handle, or the refusal of a null borrowed one.
    pub(crate) fn handle(&self) -> Result<*mut c_void> {
        if self.raw.is_null() {
            return Err(Error::InvalidInput(
                "a null event (borrowed with Event::from_raw)".into(),
            ));
        }
        Ok(self.raw)
    }

    /// Records the event at the current end of `stream` (a stream of the
    /// event's device; a later record replaces the earlier one for
    /// waiters that come after it).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        stream.same_device(&self.device, "the event")?;
        let raw = self.handle()?;
        let _scope = self.device.enter()?;
        // SAFETY: a non-null live event and a live stream of the same
        // device (checked above; the constructors' contracts).
        check("hipkern_event_record", unsafe {
            sys::hipkern_event_record(raw, stream.inner.raw)
        })
    }

    /// Waits until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        let raw = self.handle()?;
        let _scope = self.device.enter()?;
        // SAFETY: a non-null live event (the constructors' contract).
        check("hipkern_event_synchronize", unsafe {
            sys::hipkern_event_synchronize(raw)
        })
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let (start_raw, end_raw) = (self.handle()?, end.handle()?);
        let _scope = self.device.enter()?;
        let mut ms = 0f32;
        // SAFETY: non-null live events (the constructors' contract) and a
        // valid out-pointer.
        check("hipkern_event_elapsed_time", unsafe {
            sys::hipkern_event_elapsed_time(&mut ms, start_raw, end_raw)
        })?;
        Ok(ms)
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Event({:p} on device {}, {})",
            self.raw,
            self.device.ordinal(),
            if self.owned { "owned" } else { "borrowed" }
        )
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let r = self.device.with_current(|| {
            // SAFETY: raw came from hipkern_event_create and is destroyed once.
            check("hipkern_event_destroy", unsafe {
                sys::hipkern_event_destroy(self.raw)
            })
        });
        if let Err(e) = r {
            self.device.record_free_error(e);
        }
    }
}
