//! The sink's buffers beside the image and the stamps: the page-locked
//! staging of the double buffer, the device word buffer (binning totals,
//! counters, verdict) and the tile modes' bounded scratch.
use super::options::{ScratchLimits, ScratchUsage};
use crate::psf::binning::{tile_count, TileTask};
use crate::psf::{CENTRE_TILE, CHUNK_EVENTS, EVENT_FIELDS};
use crate::runtime::{Device, DeviceBuffer, Error, Event, Pinned, Result};
use hipkern_sys as sys;

/// The report word's value while no event was refused.
pub(super) const REPORT_NONE: u64 = u64::MAX;
/// float64 values of one event.
pub(super) const FIELDS: usize = EVENT_FIELDS.len();

/// One half of the double buffer.
pub(super) struct Slot {
    pub(super) staging: Pinned<f64>,
    pub(super) events: DeviceBuffer<f64>,
    /// Recorded on the copy stream after the upload from `staging`.
    pub(super) uploaded: Event,
    /// Recorded on the compute stream after the kernel reading `events`.
    pub(super) consumed: Event,
    /// Whether both events have been recorded (the slot was used).
    pub(super) used: bool,
}

/// Words of the sink's device word buffer: the binning totals
/// (`hipkern_psf_bin_totals`, 8 words), the contribution counters (3) and
/// the verdict (1), so one copy brings all of them back.
pub(super) const WORDS: usize = 12;
pub(super) const TOTALS: usize = 0;
pub(super) const COUNTERS: usize = 8;
pub(super) const REPORT: usize = 11;
/// Bytes of one task (`hipkern_psf_tile_task`).
pub(super) const TASK_BYTES: u64 = std::mem::size_of::<TileTask>() as u64;
pub(super) const PREPARED_BYTES: u64 = sys::HIPKERN_PSF_PREPARED_EVENT_BYTES as u64;

/// The tile modes' device scratch.
pub(super) struct TileScratch {
    pub(super) tile: usize,
    prepared: DeviceBuffer<u8>,
    pub(super) tile_ends: DeviceBuffer<u32>,
    pub(super) references: DeviceBuffer<u32>,
    pub(super) tasks: DeviceBuffer<TileTask>,
    partials: DeviceBuffer<f64>,
    centre_marks: DeviceBuffer<u32>,
    partial_slots: u64,
    /// The census serial of the last chunk (0: none yet; marks start zero).
    pub(super) serial: u32,
}

impl TileScratch {
    pub(super) fn new(
        device: &Device,
        limits: &ScratchLimits,
        tile: usize,
        w: usize,
        h: usize,
    ) -> Result<Self> {
        let n_tiles = tile_count(w, h, tile) as u64;
        if 4 * n_tiles > limits.starts {
            return Err(Error::ScratchExceeded {
                buffer: "starts",
                needed_bytes: 4 * n_tiles,
                capacity_bytes: limits.starts,
                accumulated_events: 0,
            });
        }
        let slot_bytes = (tile * tile * 3 * 8) as u64;
        let partial_slots = limits.partials / slot_bytes;
        let len = |bytes: u64, each: u64| -> usize { (bytes / each).max(1) as usize };
        Ok(TileScratch {
            tile,
            prepared: device.alloc::<u8>(CHUNK_EVENTS * PREPARED_BYTES as usize)?,
            tile_ends: device.alloc::<u32>(n_tiles as usize)?,
            references: device.alloc::<u32>(len(limits.references, 4))?,
            tasks: device.alloc::<TileTask>(len(limits.tasks, TASK_BYTES))?,
            partials: device.alloc::<f64>(len(partial_slots * slot_bytes, 8))?,
            centre_marks: device
                .alloc_zeroed::<u32>(w.div_ceil(CENTRE_TILE) * h.div_ceil(CENTRE_TILE))?,
            partial_slots,
            serial: 0,
        })
    }

    /// The C ABI's view (pointers into this scratch and `words`).
    pub(super) fn raw(&mut self, words: &mut DeviceBuffer<u64>) -> sys::hipkern_psf_tile_scratch {
        let w = words.as_mut_ptr();
        sys::hipkern_psf_tile_scratch {
            prepared: self.prepared.as_mut_ptr().cast(),
            prepared_events: CHUNK_EVENTS as i64,
            tile_ends: self.tile_ends.as_mut_ptr(),
            references: self.references.as_mut_ptr(),
            references_capacity: self.references.len() as u64,
            tasks: self.tasks.as_mut_ptr().cast(),
            tasks_capacity: self.tasks.len() as u64,
            partials: self.partials.as_mut_ptr(),
            partial_slots_capacity: self.partial_slots,
            centre_marks: self.centre_marks.as_mut_ptr(),
            // SAFETY (of the offsets): words has WORDS elements.
            totals: w.wrapping_add(TOTALS).cast(),
            counters: w.wrapping_add(COUNTERS),
        }
    }

    pub(super) fn capacity(&self) -> ScratchUsage {
        ScratchUsage {
            references: 4 * self.references.len() as u64,
            tasks: TASK_BYTES * self.tasks.len() as u64,
            starts: 4 * self.tile_ends.len() as u64,
            partials: self.partial_slots * self.slot_bytes(),
            prepared: self.prepared.len() as u64,
        }
    }

    pub(super) fn slot_bytes(&self) -> u64 {
        (self.tile * self.tile * 3 * 8) as u64
    }
}
