//! The device PSF sink, `atomic` mode (SPEC §7): events splatted through
//! the cache on the GPU with float64 atomics (`hipkern_psf_splat_atomic`).
//!
//! # What it computes
//!
//! Exactly what [`CpuSink`](super::CpuSink) computes, contribution by
//! contribution: the same support pixels (the per-row ranges of
//! [`super::support`], evaluated on the device with the same correctly
//! rounded float64 operations in the same order, never contracted into
//! fused multiply-adds), the same blend weights and blended value, the same
//! colour products. Only the order in which a pixel's contributions are
//! summed differs (atomics), so images agree within SPEC §7's tolerances,
//! not bitwise.
//!
//! # Streams and buffers
//!
//! Everything is allocated once in [`DeviceSink::new`]: the image, the
//! stamps (uploaded once), two pinned host staging buffers and two device
//! event buffers of [`CHUNK_EVENTS`] events each, and the device's one-word
//! verdict. Chunk `k` is written into staging slot `k mod 2`, copied on a
//! copy stream, and splatted on the compute stream, so chunk `k+1`'s upload
//! runs while chunk `k`'s kernel does. Two events per slot order the reuse:
//! `uploaded` (the host waits on it before rewriting the staging buffer; the
//! compute stream waits on it before the kernel) and `consumed` (the copy
//! stream waits on it before overwriting the device buffer).
//!
//! Every host↔device copy of the image is ordered on the compute stream.
use super::event::StarEvent;
use super::image::HdrImage;
use super::reference::{event_contributions, render_direct, SinkStats, MAX_DIRECT_SUPPORT};
use super::support::{anchor_phase, support_box};
use super::{PsfCache, CACHE_RADIUS, CHUNK_EVENTS, EVENT_FIELDS};
use crate::runtime::{check, Device, DeviceBuffer, Error, Event, Result, Stream};
use hipkern_sys as sys;
use std::sync::Arc;

/// The report word's value while no event was refused.
const REPORT_NONE: u64 = u64::MAX;
/// The largest image side (as [`HdrImage::new`]).
const MAX_SIDE: usize = 1 << 20;
/// float64 values of one event.
const FIELDS: usize = EVENT_FIELDS.len();

/// Page-locked host memory of `len` float64, freed on drop.
struct Pinned {
    ptr: *mut f64,
    len: usize,
    device: Device,
}

// SAFETY: the sink owns the allocation exclusively; it is plain host memory
// that any thread may access (the runtime API is thread-safe for the free).
unsafe impl Send for Pinned {}

impl Pinned {
    fn new(device: &Device, len: usize) -> Result<Pinned> {
        device.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; len·8 bytes cannot overflow (len is
        // CHUNK_EVENTS·7).
        check("hipkern_malloc_host", unsafe {
            sys::hipkern_malloc_host(&mut raw, len * std::mem::size_of::<f64>())
        })?;
        if raw.is_null() {
            return Err(Error::InvalidInput(format!(
                "hipkern_malloc_host returned NULL for {len} float64"
            )));
        }
        Ok(Pinned {
            ptr: raw.cast(),
            len,
            device: device.clone(),
        })
    }

    fn as_slice(&self) -> &[f64] {
        // SAFETY: ptr holds len float64 (page-locked, 8-byte aligned), owned
        // by self; any bit pattern is a valid f64.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [f64] {
        // SAFETY: as in as_slice, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let r = self.device.bind().and_then(|_| {
            // SAFETY: ptr came from hipkern_malloc_host and is freed once;
            // the sink synchronized its streams before dropping (no copy
            // still reads it).
            check("hipkern_free_host", unsafe {
                sys::hipkern_free_host(self.ptr.cast())
            })
        });
        if let Err(e) = r {
            self.device.record_free_error(e);
        }
    }
}

/// One half of the double buffer.
struct Slot {
    staging: Pinned,
    events: DeviceBuffer<f64>,
    /// Recorded on the copy stream after the upload from `staging`.
    uploaded: Event,
    /// Recorded on the compute stream after the kernel reading `events`.
    consumed: Event,
    /// Whether both events have been recorded (the slot was used).
    used: bool,
}

/// The float64 PSF sink on one device, `atomic` mode.
///
/// Same contract as [`CpuSink`](super::CpuSink): chunks of at most
/// [`CHUNK_EVENTS`], [`SinkStats`] with the same meaning, events refused
/// with errors naming them. One call is all or nothing: every chunk of it is
/// validated on the host before anything is launched.
pub struct DeviceSink {
    device: Device,
    cache: Arc<PsfCache>,
    width: usize,
    height: usize,
    stream: Stream,
    copy: Stream,
    stamps: DeviceBuffer<f64>,
    image: DeviceBuffer<f64>,
    report: DeviceBuffer<u64>,
    slots: [Slot; 2],
    next: usize,
    /// The direct path's host image, allocated on first use.
    host: Option<HdrImage>,
    stats: SinkStats,
}

impl std::fmt::Debug for DeviceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSink")
            .field("device", &self.device)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("phases", &self.cache.phases())
            .field("stats", &self.stats)
            .finish()
    }
}

fn cache_refusal(e: &StarEvent, index: usize) -> Error {
    let (_, fx) = anchor_phase(e.x);
    let (_, fy) = anchor_phase(e.y);
    Error::InvalidInput(format!(
        "event {index}: support = {} at (x, y) = ({}, {}) needs pixel offsets {:?} beyond the \
         cache radius {CACHE_RADIUS} px (offsets −{CACHE_RADIUS}..={CACHE_RADIUS}); \
         render it by the direct path",
        e.support,
        e.x,
        e.y,
        support_box(fx, fy, e.support)
    ))
}

fn direct_refusal(e: &StarEvent, index: usize) -> Error {
    Error::InvalidInput(format!(
        "event {index}: support = {:e} px exceeds the direct path's limit {MAX_DIRECT_SUPPORT:e} px",
        e.support
    ))
}

impl DeviceSink {
    /// A sink onto a black `width × height` image (each side in
    /// `1..=2^20`) on `device`, over `cache` (its stamps are uploaded once,
    /// `(P+1)²·95²·8` bytes). Allocates every buffer the sink uses; on the
    /// `cpu` platform no `Device` exists (`Device::new` gives
    /// [`Error::NoToolchain`]).
    pub fn new(
        device: &Device,
        cache: Arc<PsfCache>,
        width: usize,
        height: usize,
    ) -> Result<DeviceSink> {
        if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
            return Err(Error::InvalidInput(format!(
                "image size {width}×{height} (each side must be in 1..={MAX_SIDE})"
            )));
        }
        let stream = device.new_stream()?;
        let copy = device.new_stream()?;
        let mut image = device.alloc::<f64>(width * height * 3)?;
        let mut stamps = device.alloc::<f64>(cache.stamps().len())?;
        let mut report = device.alloc::<u64>(1)?;
        stream.fill(&mut image.as_slice_mut(), 0.0f64)?;
        stream.fill(&mut report.as_slice_mut(), REPORT_NONE)?;
        // SAFETY: the cache (held by the Arc below) outlives the copy, which
        // the synchronize at the end of this function waits for.
        unsafe { stream.copy_htod_async(cache.stamps(), &mut stamps.as_slice_mut())? };
        let slot = || -> Result<Slot> {
            Ok(Slot {
                staging: Pinned::new(device, CHUNK_EVENTS * FIELDS)?,
                events: device.alloc::<f64>(CHUNK_EVENTS * FIELDS)?,
                uploaded: Event::new(device)?,
                consumed: Event::new(device)?,
                used: false,
            })
        };
        let slots = [slot()?, slot()?];
        stream.synchronize()?;
        Ok(DeviceSink {
            device: device.clone(),
            cache,
            width,
            height,
            stream,
            copy,
            stamps,
            image,
            report,
            slots,
            next: 0,
            host: None,
            stats: SinkStats::default(),
        })
    }

    /// Image width.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Image height.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<PsfCache> {
        &self.cache
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The counters so far (as [`CpuSink::stats`](super::CpuSink::stats)).
    pub fn stats(&self) -> SinkStats {
        self.stats
    }

    /// Accumulates `events` through the cache, in chunks of at most
    /// [`CHUNK_EVENTS`]. Every event of the call is validated first
    /// ([`StarEvent::validate`], and [`PsfCache::fits`]); the first bad one
    /// is the error, naming its index in `events`, and nothing of the call
    /// is accumulated. Asynchronous: returns once the chunks are queued
    /// ([`DeviceSink::finish`] waits).
    pub fn accumulate(&mut self, events: &[StarEvent]) -> Result<()> {
        for (i, e) in events.iter().enumerate() {
            e.validate(i)?;
            if !PsfCache::fits(e.x, e.y, e.support) {
                return Err(cache_refusal(e, i));
            }
        }
        for chunk in events.chunks(CHUNK_EVENTS) {
            self.launch(chunk)?;
            self.count_cached(chunk);
            self.stats.chunks += 1;
        }
        Ok(())
    }

    /// Like [`DeviceSink::accumulate`], but events that do not fit the cache
    /// go by the direct path (SPEC §7's mid-stream direct path): per chunk,
    /// the fitting events go to the device in order; then, if the chunk has
    /// others, the sink synchronizes, downloads the image, renders them
    /// with [`render_direct`] on the host (in order), and uploads it again.
    /// The order of [`CpuSink::accumulate_routed`](super::CpuSink::accumulate_routed).
    /// Every event of the call is validated first (fields, and a support of
    /// at most [`MAX_DIRECT_SUPPORT`]); a bad one is the error, naming its
    /// index, and nothing is accumulated. Returns how many went directly.
    pub fn accumulate_routed(&mut self, events: &[StarEvent]) -> Result<usize> {
        for (i, e) in events.iter().enumerate() {
            e.validate(i)?;
            if e.support > MAX_DIRECT_SUPPORT {
                return Err(direct_refusal(e, i));
            }
        }
        let mut n_direct = 0;
        for chunk in events.chunks(CHUNK_EVENTS) {
            let (cached, direct): (Vec<StarEvent>, Vec<StarEvent>) = chunk
                .iter()
                .partition(|e| PsfCache::fits(e.x, e.y, e.support));
            if !cached.is_empty() {
                self.launch(&cached)?;
                self.count_cached(&cached);
            }
            self.stats.chunks += 1;
            if !direct.is_empty() {
                let mut host = match self.host.take() {
                    Some(h) => h,
                    None => HdrImage::new(self.width, self.height)?,
                };
                self.download(host.data_mut())?;
                let d = render_direct(self.cache.psf(), &direct, &mut host)?;
                self.upload(host.data())?;
                self.host = Some(host);
                self.stats.events += direct.len() as u64;
                self.stats.direct += d.rendered;
                self.stats.outside += d.outside;
                self.stats.contributions += d.contributions;
                n_direct += direct.len();
            }
        }
        Ok(n_direct)
    }

    /// Waits for everything queued and downloads the image. The sink goes
    /// on accumulating into the same device image afterwards.
    pub fn finish(&mut self) -> Result<HdrImage> {
        // Poisoned: a value the copy did not write would show as NaN.
        let mut data = vec![f64::NAN; self.width * self.height * 3];
        self.download(&mut data)?;
        HdrImage::from_data(self.width, self.height, data)
    }

    /// Replaces the device image by `image` (same size, else an error and
    /// the device image unchanged), after the work queued so far.
    pub fn upload_image(&mut self, image: &HdrImage) -> Result<()> {
        if image.width() != self.width || image.height() != self.height {
            return Err(Error::InvalidInput(format!(
                "upload_image: a {}×{} image into a {}×{} sink",
                image.width(),
                image.height(),
                self.width,
                self.height
            )));
        }
        self.upload(image.data())
    }

    /// The per-event counters of a chunk that went through the cache
    /// (as the CPU sink counts them).
    fn count_cached(&mut self, chunk: &[StarEvent]) {
        for e in chunk {
            self.stats.events += 1;
            match event_contributions(e, self.width, self.height) {
                0 => self.stats.outside += 1,
                n => {
                    self.stats.cached += 1;
                    self.stats.contributions += n;
                }
            }
        }
    }

    /// Queues one validated chunk (≤ CHUNK_EVENTS events, all fitting).
    fn launch(&mut self, chunk: &[StarEvent]) -> Result<()> {
        debug_assert!(!chunk.is_empty() && chunk.len() <= CHUNK_EVENTS);
        let n = chunk.len() * FIELDS;
        let slot = &mut self.slots[self.next];
        self.next ^= 1;
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
            // The kernel that read this device buffer last is done before
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
        self.device.bind()?;
        // SAFETY: `events` holds n = len·7 float64 of this chunk (uploaded
        // before the kernel on this stream, by the event wait above),
        // `stamps` the cache's (P+1)²·95² float64, `image` width·height·3
        // float64, `report` one word, all on this device, and the stream is
        // the sink's. The entry point checks every event on the device
        // before it adds anything, so no read leaves the stamps.
        let status = unsafe {
            sys::hipkern_psf_splat_atomic(
                slot.events.as_ptr(),
                chunk.len() as i64,
                self.stamps.as_ptr(),
                self.cache.phases() as i32,
                self.image.as_mut_ptr(),
                self.width as i32,
                self.height as i32,
                self.report.as_mut_ptr(),
                self.stream.as_raw(),
            )
        };
        check("hipkern_psf_splat_atomic", status)?;
        slot.consumed.record(&self.stream)?;
        slot.used = true;
        Ok(())
    }

    /// Waits for the compute stream and checks the device's verdict word.
    fn sync_and_check(&mut self) -> Result<()> {
        self.stream.synchronize()?;
        let mut word = [0u64; 1];
        self.report.copy_to_host(&mut word)?;
        if word[0] != REPORT_NONE {
            self.stream
                .fill(&mut self.report.as_slice_mut(), REPORT_NONE)?;
            self.stream.synchronize()?;
            return Err(Error::InvalidInput(format!(
                "the device refused event {} of a chunk although the host accepted it; \
                 that chunk and the later ones were not accumulated",
                word[0]
            )));
        }
        Ok(())
    }

    /// The device image into `dst` (width·height·3), after all queued work.
    fn download(&mut self, dst: &mut [f64]) -> Result<()> {
        self.sync_and_check()?;
        // SAFETY: dst is exclusively borrowed for this call, and the
        // synchronize below waits for the copy before returning.
        unsafe {
            self.stream.copy_dtoh_async(&self.image.as_slice(), dst)?;
        }
        self.stream.synchronize()
    }

    /// `src` (width·height·3) into the device image, after all queued work.
    fn upload(&mut self, src: &[f64]) -> Result<()> {
        // SAFETY: src is borrowed for this call, and the synchronize below
        // waits for the copy before returning.
        unsafe {
            self.stream
                .copy_htod_async(src, &mut self.image.as_slice_mut())?;
        }
        self.stream.synchronize()
    }
}

impl Drop for DeviceSink {
    fn drop(&mut self) {
        // No copy may still read a staging buffer, nor a kernel a buffer,
        // when they are freed. Errors are recorded on the device.
        for s in [&self.copy, &self.stream] {
            if let Err(e) = s.synchronize() {
                self.device.record_free_error(e);
            }
        }
    }
}
