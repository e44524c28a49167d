//! Page-locked host memory: what a copy between host and device needs to
//! run at the link's rate, and asynchronously (from pageable memory the
//! runtime stages every copy through buffers of its own).
use super::{check, Device, DeviceRepr, Error, Result};
use crate::host_memory::{bytes_of, check_available};
use hipkern_sys as sys;

/// Page-locked host memory of `len` values of `T`, freed on drop.
pub(crate) struct Pinned<T: DeviceRepr> {
    ptr: *mut T,
    len: usize,
    device: Device,
}

// SAFETY: the owner holds the allocation exclusively; it is plain host
// memory that any thread may access (the runtime API is thread-safe for the
// free), and T is plain data (DeviceRepr).
unsafe impl<T: DeviceRepr> Send for Pinned<T> {}

impl<T: DeviceRepr> Pinned<T> {
    /// `len` values, uninitialised bytes zeroed by nothing: every bit
    /// pattern is a valid `T` (DeviceRepr).
    pub(crate) fn new(device: &Device, len: usize) -> Result<Pinned<T>> {
        let what = || {
            format!(
                "{len} × {} bytes of page-locked host memory",
                std::mem::size_of::<T>()
            )
        };
        // Checked against the machine first: page-locked memory cannot be
        // swapped out, and a size beyond the machine must be an error.
        let bytes = bytes_of::<T>(len as u128, &what)?;
        check_available(bytes, &what)?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::HostMemory {
            what: what(),
            needed_bytes: bytes,
            available_bytes: None,
        })?;
        let _scope = device.enter()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `bytes` is len · size_of::<T>(),
        // computed with checked arithmetic above.
        check("hipkern_malloc_host", unsafe {
            sys::hipkern_malloc_host(&mut raw, bytes)
        })?;
        if raw.is_null() && bytes > 0 {
            return Err(Error::HostMemory {
                what: what(),
                needed_bytes: bytes as u64,
                available_bytes: None,
            });
        }
        Ok(Pinned {
            ptr: raw.cast(),
            len,
            device: device.clone(),
        })
    }

    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr holds len values of T (page-locked, aligned for any
        // T: the runtime's allocations are page-aligned), owned by self;
        // any bit pattern is a valid T (DeviceRepr).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in as_slice, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: DeviceRepr> Drop for Pinned<T> {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        let r = self.device.with_current(|| {
            // SAFETY: ptr came from hipkern_malloc_host and is freed once;
            // the owner synchronized the streams that copy from or into it
            // before dropping it (no copy still reads or writes it).
            check("hipkern_free_host", unsafe {
                sys::hipkern_free_host(self.ptr.cast())
            })
        });
        if let Err(e) = r {
            self.device.record_free_error(e);
        }
    }
}
