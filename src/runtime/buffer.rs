//! Device memory: owned buffers, borrowed device memory, typed views, copies,
//! and the traits ([`DeviceMemory`], [`DeviceMemoryMut`]) through which the
//! primitives take any of them.
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
        let _scope = device.enter()?;
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
    /// Nothing ties the result to the memory's owner: where the owner is a
    /// Rust value (a tensor wrapper), [`DeviceSlice::from_raw_parts`] and
    /// [`DeviceSliceMut::from_raw_parts_mut`] make views that borrow it,
    /// and check the pointer.
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
        let (ptr, len) = sub_range::<T>(self.ptr, self.len, range)?;
        Ok(DeviceSlice {
            ptr,
            len,
            device: &self.device,
            _t: PhantomData,
        })
    }

    /// A writable view of `range`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (ptr, len) = sub_range::<T>(self.ptr, self.len, range)?;
        Ok(DeviceSliceMut {
            ptr,
            len,
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
        let _scope = self.device.enter()?;
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
        let r = self.device.with_current(|| {
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

/// The checks [`DeviceSlice::from_raw_parts`] makes: no null pointer with
/// elements, alignment for `T`, and a byte range inside the address space.
fn check_raw_parts<T>(ptr: *const T, len: usize) -> Result<()> {
    let ty = std::any::type_name::<T>();
    let bytes = bytes_of::<T>(len)?;
    let addr = ptr as usize;
    if addr == 0 {
        if len > 0 {
            return Err(Error::InvalidInput(format!(
                "a null device pointer for {len} elements of {ty}"
            )));
        }
        return Ok(());
    }
    let align = std::mem::align_of::<T>();
    if addr % align != 0 {
        return Err(Error::InvalidInput(format!(
            "device address {addr:#x} is not aligned for {ty} ({align}-byte alignment)"
        )));
    }
    if addr.checked_add(bytes).is_none() {
        return Err(Error::InvalidInput(format!(
            "{len} elements of {ty} from device address {addr:#x} pass the end of the \
             address space"
        )));
    }
    Ok(())
}

/// A read-only view of device memory: part of a [`DeviceBuffer`], or
/// memory of another library borrowed with [`DeviceSlice::from_raw_parts`].
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    ptr: *mut c_void,
    len: usize,
    device: &'a Device,
    _t: PhantomData<&'a T>,
}

/// A writable view of device memory: part of a [`DeviceBuffer`], or
/// memory of another library borrowed with
/// [`DeviceSliceMut::from_raw_parts_mut`].
pub struct DeviceSliceMut<'a, T: DeviceRepr> {
    ptr: *mut c_void,
    len: usize,
    device: &'a Device,
    _t: PhantomData<&'a mut T>,
}

// SAFETY: a view is a device address, a length and a &Device (Sync); it
// only reads through runtime calls, and T: Send + Sync, as for &[T].
unsafe impl<T: DeviceRepr> Send for DeviceSlice<'_, T> {}
// SAFETY: as above; shared views only allow reads.
unsafe impl<T: DeviceRepr> Sync for DeviceSlice<'_, T> {}
// SAFETY: a writable view is exclusive (its constructors borrow mutably),
// so moving it to another thread is as for &mut [T].
unsafe impl<T: DeviceRepr> Send for DeviceSliceMut<'_, T> {}
// SAFETY: &DeviceSliceMut only allows reads (copies out), as for &mut [T].
unsafe impl<T: DeviceRepr> Sync for DeviceSliceMut<'_, T> {}

impl<T: DeviceRepr> std::fmt::Debug for DeviceSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceSlice<{}>[{}] on device {}",
            std::any::type_name::<T>(),
            self.len,
            self.device.ordinal()
        )
    }
}

impl<T: DeviceRepr> std::fmt::Debug for DeviceSliceMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceSliceMut<{}>[{}] on device {}",
            std::any::type_name::<T>(),
            self.len,
            self.device.ordinal()
        )
    }
}

/// Address of element `i` of a view (NULL stays NULL: an empty view).
fn offset<T>(ptr: *mut c_void, i: usize) -> *mut c_void {
    if ptr.is_null() {
        return ptr;
    }
    // Address arithmetic only (never dereferenced on the host); i <= len.
    (ptr as *mut T).wrapping_add(i).cast()
}

/// The address and length of `range` of `len` elements at `ptr`: what
/// every sub-view (of a buffer or of a view) is made of.
fn sub_range<T>(
    ptr: *mut c_void,
    len: usize,
    range: impl RangeBounds<usize>,
) -> Result<(*mut c_void, usize)> {
    let (start, end) = resolve_range(range, len)?;
    Ok((offset::<T>(ptr, start), end - start))
}

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    /// A read-only view of `len` elements of `T` at `ptr` on `device`,
    /// memory that `owner` (a tensor wrapper, a Kokkos view, an
    /// allocation guard) keeps alive: the view borrows `owner`, so it
    /// cannot outlive it. Refused with [`Error::InvalidInput`]: a null
    /// `ptr` with `len > 0`, a `ptr` not aligned for `T`, a byte length
    /// that overflows. A null `ptr` with `len == 0` is an empty view.
    ///
    /// The view cannot outlive its owner:
    ///
    /// ```compile_fail,E0597
    /// use hipkern::runtime::{Device, DeviceSlice};
    ///
    /// fn view_outliving_its_owner(device: &Device, ptr: *const f64) -> usize {
    ///     let view = {
    ///         let tensor = vec![0u8; 8]; // stands for the memory's owner
    ///         // SAFETY: never runs: this does not compile.
    ///         unsafe { DeviceSlice::from_raw_parts(&tensor, device, ptr, 1) }.unwrap()
    ///     };
    ///     view.len()
    /// }
    /// ```
    ///
    /// # Safety
    /// `ptr` (when `len > 0`) must point to `len` elements of `T` of device
    /// memory allocated on `device` (or mapped into it), which stays
    /// allocated while `owner` is borrowed, and which nobody writes while
    /// work that hipkern queued to read it through the view may still run.
    pub unsafe fn from_raw_parts<O: ?Sized>(
        owner: &'a O,
        device: &'a Device,
        ptr: *const T,
        len: usize,
    ) -> Result<DeviceSlice<'a, T>> {
        let _ = owner;
        check_raw_parts(ptr, len)?;
        Ok(DeviceSlice {
            ptr: ptr.cast_mut().cast(),
            len,
            device,
            _t: PhantomData,
        })
    }
    /// A view of `range` of this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>> {
        let (ptr, len) = sub_range::<T>(self.ptr, self.len, range)?;
        Ok(DeviceSlice {
            ptr,
            len,
            device: self.device,
            _t: PhantomData,
        })
    }
    /// The device address (may be NULL for an empty view).
    pub fn as_ptr(&self) -> *const T {
        self.ptr as *const T
    }
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
        let _scope = self.device.enter()?;
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
    /// A writable view of `len` elements of `T` at `ptr` on `device`,
    /// memory that `owner` keeps alive: the view borrows `owner` mutably,
    /// so it cannot outlive it and nothing else reaches the memory through
    /// `owner` meanwhile. Refused as [`DeviceSlice::from_raw_parts`]
    /// refuses (null with `len > 0`, misaligned, overflowing).
    ///
    /// # Safety
    /// `ptr` (when `len > 0`) must point to `len` elements of `T` of device
    /// memory allocated on `device` (or mapped into it), which stays
    /// allocated while `owner` is borrowed, and which nobody else reads or
    /// writes while work that hipkern queued through the view may still
    /// run (in particular no other view of the same memory is used in the
    /// same call).
    pub unsafe fn from_raw_parts_mut<O: ?Sized>(
        owner: &'a mut O,
        device: &'a Device,
        ptr: *mut T,
        len: usize,
    ) -> Result<DeviceSliceMut<'a, T>> {
        let _ = owner;
        check_raw_parts(ptr.cast_const(), len)?;
        Ok(DeviceSliceMut {
            ptr: ptr.cast(),
            len,
            device,
            _t: PhantomData,
        })
    }
    /// A writable view of `range` of this view (borrowing it).
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (ptr, len) = sub_range::<T>(self.ptr, self.len, range)?;
        Ok(DeviceSliceMut {
            ptr,
            len,
            device: self.device,
            _t: PhantomData,
        })
    }
    /// The device address.
    pub fn as_ptr(&self) -> *const T {
        self.ptr as *const T
    }
    /// The device address, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.cast()
    }
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
        let _scope = self.device.enter()?;
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

/// Device memory a primitive may read: a [`DeviceBuffer`], a
/// [`DeviceSlice`] (part of a buffer, or another library's memory borrowed
/// with [`DeviceSlice::from_raw_parts`]) or a [`DeviceSliceMut`]. The
/// primitives take `&(impl DeviceMemory<T> + ?Sized)`, so `&buffer` and
/// `&view` both work. A primitive asks for the view once per call and
/// checks its length and device before anything is launched.
pub trait DeviceMemory<T: DeviceRepr> {
    /// The whole memory as a read-only view.
    fn device_view(&self) -> DeviceSlice<'_, T>;
}

/// Device memory a primitive may write: a [`DeviceBuffer`] or a
/// [`DeviceSliceMut`] (taken as `&mut (impl DeviceMemoryMut<T> + ?Sized)`).
pub trait DeviceMemoryMut<T: DeviceRepr>: DeviceMemory<T> {
    /// The whole memory as a writable view.
    fn device_view_mut(&mut self) -> DeviceSliceMut<'_, T>;
}

impl<T: DeviceRepr> DeviceMemory<T> for DeviceBuffer<T> {
    fn device_view(&self) -> DeviceSlice<'_, T> {
        self.as_slice()
    }
}

impl<T: DeviceRepr> DeviceMemoryMut<T> for DeviceBuffer<T> {
    fn device_view_mut(&mut self) -> DeviceSliceMut<'_, T> {
        self.as_slice_mut()
    }
}

impl<T: DeviceRepr> DeviceMemory<T> for DeviceSlice<'_, T> {
    fn device_view(&self) -> DeviceSlice<'_, T> {
        *self
    }
}

impl<T: DeviceRepr> DeviceMemory<T> for DeviceSliceMut<'_, T> {
    fn device_view(&self) -> DeviceSlice<'_, T> {
        self.as_slice()
    }
}

impl<T: DeviceRepr> DeviceMemoryMut<T> for DeviceSliceMut<'_, T> {
    fn device_view_mut(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            ptr: self.ptr,
            len: self.len,
            device: self.device,
            _t: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceMemory, DeviceMemoryMut, DeviceSlice, DeviceSliceMut};
    use crate::runtime::{Device, Error};

    /// Stands for a tensor wrapper that owns device memory.
    struct Owner;

    fn invalid<T: std::fmt::Debug>(r: crate::Result<T>, part: &str) {
        match r {
            Err(Error::InvalidInput(m)) => assert!(m.contains(part), "{part:?} not in {m}"),
            other => panic!("expected InvalidInput({part:?}), got {other:?}"),
        }
    }

    // No runtime call happens below: views are made and checked on the
    // host only (the addresses are made up and never dereferenced).
    #[test]
    fn raw_views_refuse_null_misaligned_and_overflowing_pointers() {
        let d = Device::detached_for_tests(0);
        let owner = Owner;
        let mut owner_mut = Owner;
        // SAFETY (all below): the views are refused, or only their length
        // and address are read; nothing reaches the runtime.
        unsafe {
            invalid(
                DeviceSlice::from_raw_parts(&owner, &d, std::ptr::null::<f64>(), 3),
                "null device pointer for 3 elements of f64",
            );
            invalid(
                DeviceSliceMut::from_raw_parts_mut(
                    &mut owner_mut,
                    &d,
                    std::ptr::null_mut::<u32>(),
                    1,
                ),
                "null device pointer",
            );
            invalid(
                DeviceSlice::from_raw_parts(&owner, &d, 0x1004 as *const f64, 2),
                "0x1004 is not aligned for f64 (8-byte alignment)",
            );
            invalid(
                DeviceSliceMut::from_raw_parts_mut(&mut owner_mut, &d, 0x1002 as *mut u32, 2),
                "not aligned for u32",
            );
            invalid(
                DeviceSlice::from_raw_parts(&owner, &d, 0x1000 as *const f64, usize::MAX / 4),
                "overflow",
            );
            invalid(
                DeviceSlice::from_raw_parts(&owner, &d, (usize::MAX - 7) as *const f64, 2),
                "pass the end of the address space",
            );
            // Null with no elements is an empty view; one byte types need no alignment.
            let empty =
                DeviceSlice::from_raw_parts(&owner, &d, std::ptr::null::<f64>(), 0).unwrap();
            assert!(empty.is_empty() && empty.as_ptr().is_null());
            assert_eq!(empty.slice(..).unwrap().len(), 0);
            let bytes = DeviceSlice::from_raw_parts(&owner, &d, 0x1003 as *const u8, 5).unwrap();
            assert_eq!(bytes.len(), 5);
        }
    }

    #[test]
    fn raw_views_have_their_lengths_and_sub_views_their_offsets() {
        let d = Device::detached_for_tests(3);
        let owner = vec![0u8; 4];
        let mut owner_mut = [0u8; 2];
        // SAFETY: only lengths and addresses are read (no runtime call).
        let (v, mut m) = unsafe {
            (
                DeviceSlice::from_raw_parts(&owner, &d, 0x10_0000 as *const f64, 10).unwrap(),
                DeviceSliceMut::from_raw_parts_mut(&mut owner_mut, &d, 0x20_0000 as *mut u32, 7)
                    .unwrap(),
            )
        };
        assert_eq!((v.len(), v.device().ordinal()), (10, 3));
        let sub = v.slice(2..5).unwrap();
        assert_eq!((sub.len(), sub.as_ptr() as usize), (3, 0x10_0000 + 16));
        assert_eq!(v.slice(10..).unwrap().len(), 0);
        assert!(v.slice(4..11).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let r = v.slice(5..4);
        assert!(r.is_err());
        // Through the traits the primitives use, the same memory.
        assert_eq!(v.device_view().len(), 10);
        assert_eq!(v.device_view().as_ptr(), v.as_ptr());
        assert_eq!(m.device_view().len(), 7);
        {
            let mut w = m.device_view_mut();
            assert_eq!((w.len(), w.as_mut_ptr() as usize), (7, 0x20_0000));
            let mut tail = w.slice_mut(3..).unwrap();
            assert_eq!(
                (tail.len(), tail.as_mut_ptr() as usize),
                (4, 0x20_0000 + 12)
            );
        }
        assert_eq!(m.as_slice().len(), 7);
        assert!(m.slice_mut(..8).is_err());
        // Trait objects work (frame_voigt takes one).
        let dy: &dyn DeviceMemory<u32> = &m;
        assert_eq!(dy.device_view().len(), 7);
        let dm: &mut dyn DeviceMemoryMut<u32> = &mut m;
        assert_eq!(dm.device_view_mut().len(), 7);
        assert!(format!("{v:?}").contains("DeviceSlice<f64>[10] on device 3"));
    }
}
