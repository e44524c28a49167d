//! One chunk on the device: staging it in the double buffer, then the
//! atomic splat or the tile modes' binning pass, capacity check and
//! accumulation (and the adaptive mode's choice between them).
use super::accumulate::device_refusal;
use super::options::{Binning, SinkMode};
use super::records::{ChunkMode, ChunkRecord, ChunkStage};
use super::scratch::{COUNTERS, FIELDS, PREPARED_BYTES, REPORT, REPORT_NONE, TASK_BYTES, TOTALS};
use super::DeviceSink;
use crate::psf::binning::bin_chunk;
use crate::psf::event::StarEvent;
use crate::psf::CHUNK_EVENTS;
use crate::runtime::{check, Error, Result};
use hipkern_sys as sys;
use std::time::Instant;

impl DeviceSink {
    /// Stages chunk `chunk` in the next slot and queues its upload; the
    /// compute stream waits for it. Returns the slot.
    fn stage(&mut self, chunk: &[StarEvent]) -> Result<usize> {
        debug_assert!(!chunk.is_empty() && chunk.len() <= CHUNK_EVENTS);
        let n = chunk.len() * FIELDS;
        let index = self.next;
        self.next ^= 1;
        let slot = &mut self.slots[index];
        if slot.used {
            // The previous upload from this staging buffer has finished reading it.
            slot.uploaded.synchronize()?;
        }
        for (dst, e) in slot.staging.as_mut_slice()[..n]
            .chunks_exact_mut(FIELDS)
            .zip(chunk)
        {
            dst.copy_from_slice(&e.to_array());
        }
        if slot.used {
            // The kernels that read this device buffer last are done before
            // the copy overwrites it.
            self.copy.wait_event(&slot.consumed)?;
        }
        // SAFETY: the staging buffer is owned by the sink and is not written
        // again before `uploaded` (recorded right after this copy) has
        // completed (the synchronize above, next time this slot is used);
        // the sink synchronizes both streams before it is dropped.
        unsafe {
            self.copy.copy_htod_async(
                &slot.staging.as_slice()[..n],
                &mut slot.events.slice_mut(..n)?,
            )?
        };
        slot.uploaded.record(&self.copy)?;
        self.stream.wait_event(&slot.uploaded)?;
        Ok(index)
    }

    /// [`DeviceSink::launch`]; on its error, the work queued before the
    /// refused chunk is waited for and counted (a second error while doing
    /// so is dropped: the first one is the caller's news).
    pub(super) fn launch_or_sync(&mut self, chunk: &[StarEvent], first: usize) -> Result<()> {
        let r = self.launch(chunk, first);
        self.or_sync(r)
    }

    /// `r`, after waiting for and counting the work queued before it when
    /// it is an error (a second error then is dropped).
    pub(super) fn or_sync(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            let _ = self.sync();
        }
        r
    }

    /// Queues one validated chunk (≤ CHUNK_EVENTS events, all fitting);
    /// `first` is the index in the caller's events of its first one.
    fn launch(&mut self, chunk: &[StarEvent], first: usize) -> Result<()> {
        let slot = self.stage(chunk)?;
        let result = match self.mode {
            SinkMode::Atomic => self.atomic_chunk(slot, chunk.len()),
            _ => self.tile_chunk(slot, chunk, first),
        };
        self.release(slot, result)
    }

    /// After any launch on a staged slot, whatever became of it: the slot's
    /// `consumed` event is recorded and the slot marked used, so that its
    /// next `stage` waits for the upload queued from its staging buffer.
    fn release(&mut self, slot: usize, result: Result<()>) -> Result<()> {
        let recorded = self.slots[slot].consumed.record(&self.stream);
        self.slots[slot].used = true;
        if recorded.is_err() {
            // The event may not cover the upload: wait for it here instead.
            let _ = self.copy.synchronize();
        }
        result.and(recorded)
    }

    /// One chunk of the `atomic` mode.
    fn atomic_chunk(&mut self, slot: usize, n: usize) -> Result<()> {
        let start = self.mark()?;
        self.splat_atomic(slot, n, true)?;
        self.close(ChunkStage::Atomic, start)?;
        self.log.push(ChunkRecord {
            events: n,
            mode: ChunkMode::Atomic,
            references: 0,
            tasks: 0,
            partial_slots: 0,
            longest_list: 0,
            centre_events: 0,
            centre_tiles: 0,
        });
        Ok(())
    }

    /// `hipkern_psf_splat_atomic` (and with `count`, `hipkern_psf_count`)
    /// on the events of `slot`.
    fn splat_atomic(&mut self, slot: usize, n: usize, count: bool) -> Result<()> {
        let _scope = self.device.enter()?;
        let words = self.words.as_mut_ptr();
        let events = self.slots[slot].events.as_ptr();
        // SAFETY: `events` holds n·7 float64 of this chunk (uploaded before
        // the kernels on this stream, by the event wait in `stage`),
        // `stamps` the cache's (P+1)²·95² float64, `image` width·height·3
        // float64, `words` WORDS words (verdict at REPORT, counters at
        // COUNTERS), all on this device, and the stream is the sink's. The
        // entry point checks every event on the device before it adds
        // anything, so no read leaves the stamps.
        unsafe {
            check(
                "hipkern_psf_splat_atomic",
                sys::hipkern_psf_splat_atomic(
                    events,
                    n as i64,
                    self.stamps.as_ptr(),
                    self.cache.phases() as i32,
                    self.image.as_mut_ptr(),
                    self.width as i32,
                    self.height as i32,
                    words.add(REPORT),
                    self.stream.as_raw(),
                ),
            )?;
            if count {
                check(
                    "hipkern_psf_count",
                    sys::hipkern_psf_count(
                        events,
                        n as i64,
                        self.width as i32,
                        self.height as i32,
                        words.add(COUNTERS),
                        words.add(REPORT),
                        self.stream.as_raw(),
                    ),
                )?;
            }
        }
        Ok(())
    }

    /// Queues the direct path for `events` (validated by `check_routed`, at
    /// most [`CHUNK_EVENTS`]): staged like a chunk, then
    /// `hipkern_psf_render_direct` on the compute stream, after the work
    /// queued before it.
    pub(super) fn launch_direct(&mut self, events: &[StarEvent]) -> Result<()> {
        let slot = self.stage(events)?;
        let result = self.render_direct(slot, events.len());
        self.release(slot, result)
    }

    /// `hipkern_psf_render_direct` on the `n` events of `slot`.
    fn render_direct(&mut self, slot: usize, n: usize) -> Result<()> {
        let psf = self.cache.psf();
        let moffat = sys::hipkern_psf_moffat {
            fwhm: psf.fwhm,
            beta: psf.beta,
            tail: psf.tail,
        };
        let start = self.mark()?;
        let _scope = self.device.enter()?;
        let events = self.slots[slot].events.as_ptr();
        // SAFETY: `events` holds n·7 float64 (uploaded before this stream's
        // kernels, by the wait in `stage`), `image` width·height·3 float64
        // and `words` WORDS words (verdict at REPORT), all on this device,
        // and the stream is the sink's; the entry point checks every event
        // on the device before it adds anything, and writes only the
        // image's own pixels.
        check("hipkern_psf_render_direct", unsafe {
            sys::hipkern_psf_render_direct(
                events,
                n as i64,
                &moffat,
                self.image.as_mut_ptr(),
                self.width as i32,
                self.height as i32,
                self.words.as_mut_ptr().add(REPORT),
                self.stream.as_raw(),
            )
        })?;
        self.close(ChunkStage::Direct, start)
    }

    /// One chunk of a tile mode or the adaptive mode.
    fn tile_chunk(&mut self, slot: usize, chunk: &[StarEvent], first: usize) -> Result<()> {
        let device_lists = self.binning == Binning::Device;
        let (width, height, phases) = (
            self.width as i32,
            self.height as i32,
            self.cache.phases() as i32,
        );
        let sc = self.scratch.as_mut().expect("tile modes have scratch");
        let tile = sc.tile;
        sc.serial = sc.serial.wrapping_add(1).max(1);
        let serial = sc.serial;
        let raw = sc.raw(&mut self.words);
        let events = self.slots[slot].events.as_ptr();
        let start = self.mark()?;
        let _scope = self.device.enter()?;
        // SAFETY: `events` holds the chunk's len·7 float64 (uploaded before
        // this stream's kernels, by the wait in `stage`); `raw` points into
        // this sink's scratch and word buffers, sized as the header says
        // (prepared for CHUNK_EVENTS ≥ len events, tile_ends for every tile
        // of this image and tile side, centre_marks for every 32×32 tile),
        // all on this device; the scan writes only within the capacities it
        // is given and reports an overflow instead.
        check("hipkern_psf_tile_bin", unsafe {
            sys::hipkern_psf_tile_bin(
                events,
                chunk.len() as i64,
                phases,
                width,
                height,
                tile as i32,
                i32::from(device_lists),
                serial,
                &raw,
                self.words.as_mut_ptr().add(REPORT),
                self.stream.as_raw(),
            )
        })?;
        self.close(ChunkStage::Bin, start)?;
        self.stream.synchronize()?;
        let words = self.read_words()?;
        if words[REPORT] != REPORT_NONE {
            self.reset_report()?;
            self.fold_counters(&words);
            return Err(device_refusal(words[REPORT]));
        }
        let counters_before = self.last_counters;
        self.last_counters = [words[COUNTERS], words[COUNTERS + 1], words[COUNTERS + 2]];
        let t = &words[TOTALS..TOTALS + 8];
        let (centre_events, centre_tiles) = (t[5], t[6]);
        let tiles = match self.mode {
            SinkMode::Adaptive => {
                self.thresholds
                    .selects_tiles(chunk.len(), centre_events, centre_tiles)
            }
            _ => true,
        };
        let mut record = ChunkRecord {
            events: chunk.len(),
            mode: ChunkMode::Atomic,
            references: t[0],
            tasks: t[1],
            partial_slots: t[2],
            longest_list: t[4],
            centre_events,
            centre_tiles,
        };
        if !tiles {
            // The binning pass counted the contributions already.
            let start = self.mark()?;
            self.splat_atomic(slot, chunk.len(), false)?;
            self.close(ChunkStage::Atomic, start)?;
            self.log.push(record);
            return Ok(());
        }
        record.mode = if tile == 16 {
            ChunkMode::Tile16
        } else {
            ChunkMode::Tile32
        };
        let sc = self.scratch.as_mut().expect("tile modes have scratch");
        let cap = sc.capacity();
        let slot_bytes = sc.slot_bytes();
        let host_start = Instant::now();
        let host_lists = (!device_lists).then(|| bin_chunk(chunk, self.width, self.height, tile));
        if let Some(l) = &host_lists {
            record.references = l.references.len() as u64;
            record.tasks = l.tasks.len() as u64;
            record.partial_slots = l.partial_slots;
            record.longest_list = l.longest_list;
        }
        let (references, tasks, partial_slots) =
            (record.references, record.tasks, record.partial_slots);
        let need = [
            ("references", 4 * references, cap.references),
            ("tasks", TASK_BYTES * tasks, cap.tasks),
            ("partials", slot_bytes * partial_slots, cap.partials),
        ];
        if let Some(&(buffer, needed_bytes, capacity_bytes)) = need.iter().find(|(_, n, c)| n > c) {
            // Nothing of this chunk reaches the image; its counts do not count.
            for i in 0..3 {
                self.counter_offset[i] += words[COUNTERS + i] - counters_before[i];
            }
            return Err(Error::ScratchExceeded {
                buffer,
                needed_bytes,
                capacity_bytes,
                accumulated_events: first,
            });
        }
        if let Some(lists) = &host_lists {
            // Synchronous copies: the stream is idle (synchronized above).
            if !lists.references.is_empty() {
                sc.references
                    .slice_mut(..lists.references.len())?
                    .copy_from_host(&lists.references)?;
            }
            sc.tile_ends.copy_from_host(&lists.ends)?;
            if !lists.tasks.is_empty() {
                sc.tasks
                    .slice_mut(..lists.tasks.len())?
                    .copy_from_host(&lists.tasks)?;
            }
        }
        if !device_lists {
            let ms = host_start.elapsed().as_secs_f64() * 1e3;
            if let Some(p) = self.profile.as_mut() {
                p.timings.host_binning_ms += ms;
            }
        }
        let peak = &mut self.peak;
        peak.references = peak.references.max(4 * references);
        peak.tasks = peak.tasks.max(TASK_BYTES * tasks);
        peak.partials = peak.partials.max(slot_bytes * partial_slots);
        peak.starts = peak.starts.max(cap.starts);
        peak.prepared = peak.prepared.max(PREPARED_BYTES * chunk.len() as u64);
        let sc = self.scratch.as_mut().expect("tile modes have scratch");
        let raw = sc.raw(&mut self.words);
        let start = self.mark()?;
        let _scope = self.device.enter()?;
        // SAFETY: as for the binning pass; with host lists, `tile_ends`,
        // `references` and `tasks` hold the uploaded lists (checked against
        // the capacities above), whose references index this chunk's
        // events; n_tasks is the binning's own task count.
        check("hipkern_psf_tile_accumulate", unsafe {
            sys::hipkern_psf_tile_accumulate(
                self.stamps.as_ptr(),
                phases,
                self.image.as_mut_ptr(),
                width,
                height,
                tile as i32,
                i32::from(device_lists),
                chunk.len() as i64,
                tasks,
                i32::from(partial_slots > 0),
                &raw,
                self.words.as_ptr().add(REPORT),
                self.stream.as_raw(),
            )
        })?;
        self.close(ChunkStage::Accumulate, start)?;
        self.log.push(record);
        Ok(())
    }
}
