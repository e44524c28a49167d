//! A plan's arrays in one device allocation, written by one copy from the
//! evaluator's page-locked staging.
//!
//! A plan of 32,768 boxes uploads about 7.6 MB in some fifteen arrays.
//! One allocation and one copy replace fifteen allocations and fifteen
//! copies. Page-locking the staging costs about as much as the plan it
//! serves, so an evaluator's first plan copies each array straight from
//! its host array into its place (no staging to allocate and fill), and
//! only from its second plan on (an evaluator that sees more than one
//! tree) does it keep page-locked staging, grown to its largest plan.
use crate::runtime::{Device, DeviceBuffer, DeviceRepr, Pinned, Result};
use crate::threads::{map_on_threads, threads_for};
use std::marker::PhantomData;
use std::sync::Mutex;

/// The staging an evaluator keeps for its plans' uploads.
#[derive(Default)]
pub(super) enum Staging {
    /// No plan yet: the first copies each array from where it is.
    #[default]
    FirstPlan,
    /// A plan was made: the next one page-locks its staging.
    Planned,
    /// Page-locked staging, the size of the largest plan so far.
    Pinned(Pinned<u8>),
}

/// Each array starts on this boundary: every element type's alignment,
/// and a whole number of the device's 256-byte transactions.
const PART_ALIGN: usize = 256;

/// Bytes a thread copies at least when the arrays are packed: below this
/// a thread's start costs more than its share (a memcpy moves ~10 GB/s).
const PACK_BYTES_PER_THREAD: usize = 1 << 20;

/// Where one array of `T` lies in a plan's allocation.
pub(super) struct Part<T> {
    offset: usize,
    _t: PhantomData<T>,
}

impl<T> Clone for Part<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Part<T> {}

impl<T> Part<T> {
    /// The array that starts at element `first` of this one.
    pub(super) fn at(self, first: usize) -> Part<T> {
        Part {
            offset: self.offset + first * std::mem::size_of::<T>(),
            _t: PhantomData,
        }
    }
}

/// A plan's arrays on the device, in one allocation.
pub(super) struct DeviceParts {
    buffer: DeviceBuffer<u8>,
}

impl DeviceParts {
    /// The device address of `part`.
    /// (`part` came from the packing this allocation holds, so the
    /// address is within it; it is never dereferenced on the host.)
    pub(super) fn ptr<T>(&self, part: Part<T>) -> *const T {
        self.buffer.as_ptr().wrapping_add(part.offset).cast()
    }

    /// The device address of `part`, to write.
    pub(super) fn ptr_mut<T>(&mut self, part: Part<T>) -> *mut T {
        self.buffer.as_mut_ptr().wrapping_add(part.offset).cast()
    }

    /// Bytes of the allocation (the arrays and their alignment gaps).
    pub(super) fn bytes(&self) -> usize {
        self.buffer.len()
    }

    /// Copies `host` into `part`'s first `host.len()` elements
    /// (synchronously; `part` came from this allocation's packing, sized
    /// for at least that many: the copy is bounds-checked regardless).
    pub(super) fn write<T: DeviceRepr>(&mut self, part: Part<T>, host: &[T]) -> Result<()> {
        let bytes = bytes_of(host);
        self.buffer
            .slice_mut(part.offset..part.offset + bytes.len())?
            .copy_from_host(bytes)
    }

    /// Copies `part`'s first `host.len()` elements into `host`
    /// (synchronously, after the work before it on the null stream).
    pub(super) fn read<T: DeviceRepr>(&self, part: Part<T>, host: &mut [T]) -> Result<()> {
        let len = std::mem::size_of_val(host);
        // SAFETY: DeviceRepr types are plain numbers: any bytes the device
        // wrote are a valid value; the length is the slice's own.
        let bytes = unsafe { std::slice::from_raw_parts_mut(host.as_mut_ptr().cast::<u8>(), len) };
        self.buffer
            .slice(part.offset..part.offset + len)?
            .copy_to_host(bytes)
    }
}

/// The host arrays of a plan, with their places in its allocation.
#[derive(Default)]
pub(super) struct Packing<'a> {
    parts: Vec<(usize, &'a [u8])>,
    end: usize,
    /// The end of the last array with host data: the reserved arrays
    /// (`reserve`) come after it and are not copied.
    data_end: usize,
}

fn bytes_of<T: DeviceRepr>(host: &[T]) -> &[u8] {
    // SAFETY: DeviceRepr types are plain numbers without padding, so every
    // byte of the slice is initialised; the length is the slice's own.
    unsafe { std::slice::from_raw_parts(host.as_ptr().cast(), std::mem::size_of_val(host)) }
}

impl<'a> Packing<'a> {
    /// Places `host` after the arrays before it.
    pub(super) fn add<T: DeviceRepr>(&mut self, host: &'a [T]) -> Part<T> {
        debug_assert_eq!(
            self.end, self.data_end,
            "arrays go before the reserved ones"
        );
        let offset = self.end.next_multiple_of(PART_ALIGN);
        let bytes = bytes_of(host);
        self.parts.push((offset, bytes));
        self.end = offset + bytes.len();
        self.data_end = self.end;
        Part {
            offset,
            _t: PhantomData,
        }
    }

    /// Places an array of `len` elements that the device writes (nothing
    /// is copied into it) after the arrays before it; after every `add`.
    pub(super) fn reserve<T: DeviceRepr>(&mut self, len: usize) -> Part<T> {
        let offset = self.end.next_multiple_of(PART_ALIGN);
        self.end = offset + len * std::mem::size_of::<T>();
        Part {
            offset,
            _t: PhantomData,
        }
    }

    /// Copies the arrays into the evaluator's `staging` (module docs),
    /// then into one new device allocation (synchronously).
    pub(super) fn upload(self, device: &Device, staging: &Mutex<Staging>) -> Result<DeviceParts> {
        let mut buffer = device.alloc::<u8>(self.end)?;
        if self.end == 0 {
            return Ok(DeviceParts { buffer });
        }
        let mut staging = staging.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*staging, Staging::FirstPlan) {
            *staging = Staging::Planned;
            drop(staging);
            return self.upload_each(buffer);
        }
        if !matches!(&*staging, Staging::Pinned(s) if s.len() >= self.data_end) {
            // The old staging goes first: the two need not fit together.
            *staging = Staging::Planned;
            match Pinned::new(device, self.data_end) {
                Ok(pinned) => *staging = Staging::Pinned(pinned),
                // No page-locked memory now (a memlock limit, a loaded
                // host): this plan's arrays are copied as a first plan's
                // are; the next one tries again.
                Err(_) => {
                    drop(staging);
                    return self.upload_each(buffer);
                }
            }
        }
        let Staging::Pinned(pinned) = &mut *staging else {
            unreachable!("staging page-locked above")
        };
        let host = &mut pinned.as_mut_slice()[..self.data_end];
        self.pack(host);
        buffer.slice_mut(..self.data_end)?.copy_from_host(host)?;
        Ok(DeviceParts { buffer })
    }

    /// Each array copied from its host array into its place in `buffer`
    /// (pageable, one copy each; the alignment gaps are never read).
    fn upload_each(&self, mut buffer: DeviceBuffer<u8>) -> Result<DeviceParts> {
        for &(offset, bytes) in &self.parts {
            if !bytes.is_empty() {
                buffer
                    .slice_mut(offset..offset + bytes.len())?
                    .copy_from_host(bytes)?;
            }
        }
        Ok(DeviceParts { buffer })
    }

    /// The arrays into `host` (`data_end` bytes), on every core for large
    /// plans; the alignment gaps zeroed.
    fn pack(&self, host: &mut [u8]) {
        let mut jobs = Vec::with_capacity(self.parts.len());
        let mut rest = host;
        let mut at = 0;
        for &(offset, bytes) in &self.parts {
            let (gap, tail) = rest.split_at_mut(offset - at);
            gap.fill(0);
            let (dst, tail) = tail.split_at_mut(bytes.len());
            jobs.push((dst, bytes));
            rest = tail;
            at = offset + bytes.len();
        }
        let threads = threads_for(self.data_end, PACK_BYTES_PER_THREAD);
        map_on_threads(threads, jobs, |(dst, src)| dst.copy_from_slice(src));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_aligned_and_packed_in_order() {
        let a = [1u32, 2, 3];
        let b = [7u8; 5];
        let c = [0.5f64, -2.0];
        let mut p = Packing::default();
        let (pa, pb, pc) = (p.add(&a), p.add(&b), p.add(&c));
        assert_eq!((pa.offset, pb.offset, pc.offset), (0, 256, 512));
        assert_eq!(p.end, 512 + 16);
        let mut host = vec![0xAAu8; p.end];
        p.pack(&mut host);
        assert_eq!(&host[..12], bytes_of(&a));
        assert!(host[12..256].iter().all(|&x| x == 0));
        assert_eq!(&host[256..261], &b);
        assert_eq!(&host[512..528], bytes_of(&c));
    }
}
