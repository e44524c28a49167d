//! Device memory: owned buffers, borrowed device memory, typed views, copies.
use super::device::Device;
use super::error::{check, Error, Result};
use hipkern_sys as sys;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

/// Types that may be copied to and from the device byte for byte.
///
/// # Safety
/// Implementors must be `Copy`, contain no pointers or references, have no
/// padding bytes, and be valid for every bit pattern the device may write
/// (plain numbers and arrays of them).
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {}

// SAFETY (all below): primitive numbers and arrays of them: no padding, no
// pointers, every bit pattern valid.
unsafe impl DeviceRepr for u8 {}
unsafe impl DeviceRepr for i8 {}
unsafe impl DeviceRepr for u16 {}
unsafe impl DeviceRepr for i16 {}
unsafe impl DeviceRepr for u32 {}
unsafe impl DeviceRepr for i32 {}
unsafe impl DeviceRepr for u64 {}
unsafe impl DeviceRepr for i64 {}
unsafe impl DeviceRepr for f32 {}
unsafe impl DeviceRepr for f64 {}
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] {}

/// `len` elements of `T` in device memory, freed on drop when owned.
///
/// Allocated through [`Device::alloc`], or borrowed from another library
/// (PyTorch, Kokkos, the caller's own `hipMalloc`) with the `unsafe`
/// [`DeviceBuffer::from_raw_parts`], in which case drop frees nothing.
pub struct DeviceBuffer<T: DeviceRepr> {
    ptr: *mut c_void,
    len: usize,
    device: Device,
    owned: bool,
    _t: PhantomData<T>,
}

// SAFETY: the buffer is a device address plus a length; T: Send + Sync.
// Access goes through runtime calls, and &mut rules the host-side aliasing
// exactly as for a Vec<T>.
unsafe impl<T: DeviceRepr> Send for DeviceBuffer<T> {}
// SAFETY: shared references only allow reads (copies out), which may overlap.
unsafe impl<T: DeviceRepr> Sync for DeviceBuffer<T> {}

fn bytes_of<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        Error::InvalidInput(format!(
            "{len} elements of {} bytes overflow usize",
            std::mem::size_of::<T>()
        ))
    })
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    pub(crate) fn alloc(device: &Device, len: usize) -> Result<Self> {
        let bytes = bytes_of::<T>(len)?;
        device.bind()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: valid out-pointer; 0 bytes gives NULL without a runtime call.
        check("hipkern_malloc", unsafe {
            sys::hipkern_malloc(&mut ptr, bytes)
        })
        .map_err(|e| match e {
            Error::Runtime {
                call,
                code,
                name,
                message,
            } => Error::Runtime {
                call,
                code,
                name,
                message: format!(
                    "{message} (allocating {bytes} bytes on device {})",
                    device.ordinal()
                ),
            },
            other => other,
        })?;
        Ok(DeviceBuffer {
            ptr,
            len,
            device: device.clone(),
            owned: true,
            _t: PhantomData,
        })
    }

    /// Wraps device memory owned by someone else; dropping it frees nothing.
    ///
    /// # Safety
    /// `ptr` must point to at least `len` elements of `T` of device memory
    /// on `device`, aligned for `T`, valid for the buffer's whole lifetime,
    /// and not accessed by anyone else while hipkern writes to it.
    pub unsafe fn from_raw_parts(device: &Device, ptr: *mut T, len: usize) -> Self {
        DeviceBuffer {
            ptr: ptr.cast(),
            len,
            device: device.clone(),
            owned: false,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device it lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device address (NULL for an empty owned buffer).
    pub fn as_ptr(&self) -> *const T {
        self.ptr as *const T
    }

    /// The device address, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.cast()
    }

    /// A read-only view of `range`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        let (start, end) = resolve_range(range, self.len)?;
        Ok(DeviceSlice {
            ptr: self.elem_ptr(start),
            len: end - start,
            device: &self.device,
            _t: PhantomData,
        })
    }

    /// A writable view of `range`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (start, end) = resolve_range(range, self.len)?;
        let ptr = self.elem_ptr(start);
        Ok(DeviceSliceMut {
            ptr,
            len: end - start,
            device: &self.device,
            _t: PhantomData,
        })
    }

    /// The whole buffer as a view.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            ptr: self.ptr,
            len: self.len,
            device: &self.device,
            _t: PhantomData,
        }
    }

    /// The whole buffer as a writable view.
    pub fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            ptr: self.ptr,
            len: self.len,
            device: &self.device,
            _t: PhantomData,
        }
    }

    fn elem_ptr(&self, i: usize) -> *mut c_void {
        if self.ptr.is_null() {
            return self.ptr;
        }
        // Address arithmetic only (never dereferenced on the host); i <= len.
        (self.ptr as *mut T).wrapping_add(i).cast()
    }

    /// Synchronous copy from the host; lengths must match.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.as_slice_mut().copy_from_host(src)
    }

    /// Synchronous copy to the host; lengths must match.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.as_slice().copy_to_host(dst)
    }

    /// The contents as a `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.as_slice().to_vec()
    }

    /// Sets every byte to zero (synchronously).
    pub fn memset_zero(&mut self) -> Result<()> {
        let bytes = bytes_of::<T>(self.len)?;
        self.device.bind()?;
        // SAFETY: ptr covers `bytes` bytes of device memory.
        check("hipkern_memset", unsafe {
            sys::hipkern_memset(self.ptr, 0, bytes)
        })
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if !self.owned || self.ptr.is_null() {
            return;
        }
        let r = self.device.bind().and_then(|_| {
            // SAFETY: ptr came from hipkern_malloc and is freed exactly once.
            check("hipkern_free", unsafe { sys::hipkern_free(self.ptr) })
        });
        if let Err(e) = r {
            self.device.record_free_error(e);
        }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}] on device {}",
            std::any::type_name::<T>(),
            self.len,
            self.device.ordinal()
        )
    }
}

fn resolve_range(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::InvalidInput(format!(
            "range {start}..{end} out of bounds for a buffer of {len}"
        )));
    }
    Ok((start, end))
}

/// A read-only view of device memory.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    ptr: *mut c_void,
    len: usize,
    device: &'a Device,
    _t: PhantomData<&'a T>,
}

/// A writable view of device memory.
pub struct DeviceSliceMut<'a, T: DeviceRepr> {
    ptr: *mut c_void,
    len: usize,
    device: &'a Device,
    _t: PhantomData<&'a mut T>,
}

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device.
    pub fn device(&self) -> &'a Device {
        self.device
    }
    /// The device address, for the C ABI.
    pub fn as_raw(&self) -> *const c_void {
        self.ptr
    }
    /// Synchronous copy to the host; lengths must match.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.len {
            return Err(Error::InvalidInput(format!(
                "copy of {} device elements into a host slice of {}",
                self.len,
                dst.len()
            )));
        }
        self.device.bind()?;
        // SAFETY: both ranges are valid for len elements; dst is exclusively borrowed.
        check("hipkern_memcpy", unsafe {
            sys::hipkern_memcpy(
                dst.as_mut_ptr().cast(),
                self.ptr,
                std::mem::size_of_val(dst),
                sys::HIPKERN_MEMCPY_DEVICE_TO_HOST,
            )
        })
    }
    /// The contents as a `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v: Vec<T> = Vec::with_capacity(self.len);
        // SAFETY: the copy below writes all len elements before set_len is
        // observed; on error the Vec is dropped with length 0. T: DeviceRepr
        // is valid for any bit pattern.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(v.as_mut_ptr(), self.len);
            self.copy_to_host(dst)?;
            v.set_len(self.len);
        }
        Ok(v)
    }
}

impl<'a, T: DeviceRepr> DeviceSliceMut<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device.
    pub fn device(&self) -> &'a Device {
        self.device
    }
    /// The device address, for the C ABI.
    pub fn as_raw_mut(&mut self) -> *mut c_void {
        self.ptr
    }
    /// A read-only view of the same memory.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            ptr: self.ptr,
            len: self.len,
            device: self.device,
            _t: PhantomData,
        }
    }
    /// Synchronous copy from the host; lengths must match.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::InvalidInput(format!(
                "copy of {} host elements into a device slice of {}",
                src.len(),
                self.len
            )));
        }
        self.device.bind()?;
        // SAFETY: both ranges are valid for len elements.
        check("hipkern_memcpy", unsafe {
            sys::hipkern_memcpy(
                self.ptr,
                src.as_ptr().cast(),
                std::mem::size_of_val(src),
                sys::HIPKERN_MEMCPY_HOST_TO_DEVICE,
            )
        })
    }
    /// Synchronous copy to the host.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.as_slice().copy_to_host(dst)
    }
}
