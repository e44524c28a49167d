//! The device PSF sink (`docs/design/psf.md`): `atomic`, `tile16`, `tile32` and
//! `adaptive` modes.
//!
//! # What it computes
//!
//! Exactly what [`CpuSink`](super::CpuSink) computes, contribution by
//! contribution: the same support pixels (the per-row ranges of
//! [`super::support`], evaluated on the device with the same correctly
//! rounded float64 operations in the same order, never contracted into
//! fused multiply-adds), the same blend weights and blended value, the same
//! colour products. Only the order in which a pixel's contributions are
//! summed may differ, so images agree within the acceptance's tolerances
//! (`docs/design/psf.md#acceptance`):
//!
//! - `atomic` (`hipkern_psf_splat_atomic`): float64 atomics into the image;
//!   the order of a pixel's sums varies from run to run.
//! - `tile16` / `tile32` (`hipkern_psf_tile_bin`, `hipkern_psf_tile_accumulate`):
//!   owner-computes. Per chunk the device prepares the events, builds
//!   per-tile lists of event indices (count, scan, scatter, sort: see
//!   [`super::binning`] for what the lists are) and one thread per pixel
//!   adds its tile's events in event order; a list longer than
//!   [`SEGMENT`](super::binning::SEGMENT) references is cut into segments
//!   whose partial sums a merge adds in segment order. No atomics touch
//!   the image: the image is bitwise the same on every run with the same
//!   chunking. A tile's list of one segment gives the CPU's own order.
//! - `adaptive`: per chunk, tiles (side [`AdaptiveThresholds::tile`]) when
//!   the chunk has at least [`AdaptiveThresholds::min_events`] events and
//!   at least [`AdaptiveThresholds::min_events_per_centre_tile`] events per
//!   occupied 32×32 centre tile on average, else `atomic`; the counts come
//!   from the binning pass (no extra pass over the events). The choice per
//!   chunk is in [`DeviceSink::chunk_log`]. The original values (tile16, 8,192
//!   events, 32 per centre tile: [`AdaptiveThresholds::SPEC`]) were right
//!   for lists built on the host; with device binning tiles win at every
//!   density measured (benches/RESULTS.md), so the defaults keep only the
//!   event count and take tile32.
//!
//! # Scratch
//!
//! Everything is allocated once when the sink is built: the image, the
//! stamps (uploaded once), two pinned host staging buffers and two device
//! event buffers of [`CHUNK_EVENTS`] events each, a few device words
//! (verdict, counters, binning totals), and for the tile modes the bounded
//! scratch of [`ScratchLimits`] (references, tasks, starts, partials) and the
//! prepared events of one chunk. A chunk that needs more of a buffer than
//! it has is refused with [`Error::ScratchExceeded`] naming it, before its
//! accumulation is launched: the image is exactly as before that chunk
//! and the sink stays usable. There is no implicit switch to another mode.
//! [`DeviceSink::scratch_peak`] reports the most each buffer held.
//!
//! # Streams
//!
//! Chunk `k` is written into staging slot `k mod 2`, copied on a copy
//! stream, and processed on the compute stream, so in `atomic` mode chunk
//! `k+1`'s upload runs while chunk `k`'s kernel does. Two events per slot
//! order the reuse: `uploaded` (the host waits on it before rewriting the
//! staging buffer; the compute stream waits on it before the kernels) and
//! `consumed` (the copy stream waits on it before overwriting the device
//! buffer). The tile modes wait for each chunk's binning pass (its totals
//! decide the launch size, the capacity check and the adaptive choice).
//! Every host↔device copy of the image is ordered on the compute stream.
//!
//! Every call makes the sink's device current for its own length and
//! restores the caller's current device (see [`crate::runtime`]).
use super::binning::{bin_chunk, tile_count, TileTask};
use super::event::StarEvent;
use super::image::HdrImage;
use super::reference::{render_direct, SinkStats, MAX_DIRECT_SUPPORT};
use super::support::{anchor_phase, support_box};
use super::{PsfCache, CACHE_RADIUS, CENTRE_TILE, CHUNK_EVENTS, EVENT_FIELDS};
use crate::host_memory::{bytes_of, check_available, filled_vec};
use crate::runtime::{check, Device, DeviceBuffer, Error, Event, Result, Stream};
use hipkern_sys as sys;
use std::sync::Arc;
use std::time::Instant;

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
        let what = || format!("{len} float64 of page-locked host memory");
        // Checked against the machine first: page-locked memory cannot be
        // swapped out, and a size beyond the machine must be an error.
        let bytes = bytes_of::<f64>(len as u128, &what)?;
        check_available(bytes, &what)?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::HostMemory {
            what: what(),
            needed_bytes: bytes,
            available_bytes: None,
        })?;
        let _scope = device.enter()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `bytes` is len·8, computed with
        // checked arithmetic above.
        check("hipkern_malloc_host", unsafe {
            sys::hipkern_malloc_host(&mut raw, bytes)
        })?;
        if raw.is_null() {
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
        let r = self.device.with_current(|| {
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

/// Words of the sink's device word buffer: the binning totals
/// (`hipkern_psf_bin_totals`, 8 words), the contribution counters (3) and
/// the verdict (1), so one copy brings all of them back.
const WORDS: usize = 12;
const TOTALS: usize = 0;
const COUNTERS: usize = 8;
const REPORT: usize = 11;
/// Bytes of one task (`hipkern_psf_tile_task`).
const TASK_BYTES: u64 = std::mem::size_of::<TileTask>() as u64;
const PREPARED_BYTES: u64 = sys::HIPKERN_PSF_PREPARED_EVENT_BYTES as u64;

/// How the sink accumulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkMode {
    /// Float64 atomics into the image.
    Atomic,
    /// Owner-computes, 16×16 tiles.
    Tile16,
    /// Owner-computes, 32×32 tiles.
    Tile32,
    /// Per chunk tiles or `atomic` ([`AdaptiveThresholds`]).
    Adaptive,
}

impl SinkMode {
    /// The mode's name (`atomic`, `tile16`, `tile32`, `adaptive`).
    pub fn name(self) -> &'static str {
        match self {
            SinkMode::Atomic => "atomic",
            SinkMode::Tile16 => "tile16",
            SinkMode::Tile32 => "tile32",
            SinkMode::Adaptive => "adaptive",
        }
    }

    /// The tile side the mode bins with (adaptive: the thresholds'); `None`
    /// for atomic.
    fn tile(self, adaptive: &AdaptiveThresholds) -> Option<usize> {
        match self {
            SinkMode::Atomic => None,
            SinkMode::Tile16 => Some(16),
            SinkMode::Tile32 => Some(32),
            SinkMode::Adaptive => Some(adaptive.tile),
        }
    }
}

/// Where the tile lists are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binning {
    /// On the device, in the binning pass (the default).
    Device,
    /// On the host ([`super::binning::bin_chunk`]) and uploaded: the
    /// comparison path (`docs/design/psf.md#tiles`). The lists are the same.
    Host,
}

/// Capacities of the tile modes' bounded scratch, in bytes (defaults of
/// `docs/design/psf.md#bounded-scratch`). Each is allocated once when the sink is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchLimits {
    /// Tile references (4 bytes each); default 32 MiB.
    pub references: u64,
    /// Accumulation tasks (24 bytes each); default 2 MiB.
    pub tasks: u64,
    /// List starts, one per tile (4 bytes each); default 128 KiB, which
    /// holds the 32,400 tiles of a 3840×2160 image in `tile16`. Checked when
    /// the sink is built.
    pub starts: u64,
    /// Partial sums (a slot of tile²·3 float64 per segment of a long list);
    /// default 128 MiB.
    pub partials: u64,
}

impl Default for ScratchLimits {
    fn default() -> Self {
        ScratchLimits {
            references: 32 << 20,
            tasks: 2 << 20,
            starts: 128 << 10,
            partials: 128 << 20,
        }
    }
}

/// Bytes of each scratch buffer: a capacity, or the most a chunk used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScratchUsage {
    /// Tile references.
    pub references: u64,
    /// Tasks.
    pub tasks: u64,
    /// List starts.
    pub starts: u64,
    /// Partial sums.
    pub partials: u64,
    /// Prepared events.
    pub prepared: u64,
}

/// The `adaptive` mode's selection (`docs/design/psf.md#adaptive`), per chunk: tiles of side
/// `tile` when both counts hold, else `atomic`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveThresholds {
    /// Fewest events in the chunk; default 8,192 (half a chunk): a short
    /// remainder chunk goes to atomic.
    pub min_events: usize,
    /// Fewest events per occupied 32×32 centre tile on average (events
    /// whose centre lies on the image, over the centre tiles holding one);
    /// default 0 (device binning: tile16 and tile32 beat atomic on the
    /// dispersed fixture's 2 events per centre tile, 0.57× and 0.54×).
    pub min_events_per_centre_tile: f64,
    /// Tile side of the chunks that go to tiles, 16 or 32; default 32
    /// (faster than tile16 on every fixture measured but the boundary one,
    /// where the two are within their spread).
    pub tile: usize,
}

impl Default for AdaptiveThresholds {
    fn default() -> Self {
        AdaptiveThresholds {
            min_events: 8192,
            min_events_per_centre_tile: 0.0,
            tile: 32,
        }
    }
}

impl AdaptiveThresholds {
    /// The original selection, from the report whose CPU built the tile lists
    /// (`docs/design/psf.md#adaptive`):
    /// tile16 for chunks of ≥ 8,192 events with ≥ 32 events per occupied
    /// centre tile.
    pub const SPEC: AdaptiveThresholds = AdaptiveThresholds {
        min_events: 8192,
        min_events_per_centre_tile: 32.0,
        tile: 16,
    };

    /// Whether a chunk of `events` with `centre_events` on-image centres in
    /// `centre_tiles` occupied centre tiles goes to tiles.
    pub fn selects_tiles(&self, events: usize, centre_events: u64, centre_tiles: u64) -> bool {
        events >= self.min_events
            && centre_tiles > 0
            && centre_events as f64 >= self.min_events_per_centre_tile * centre_tiles as f64
    }
}

/// How one chunk was accumulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkMode {
    /// Float64 atomics.
    Atomic,
    /// 16×16 tiles.
    Tile16,
    /// 32×32 tiles.
    Tile32,
}

/// One chunk of the sink's cached path, as it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRecord {
    /// Events in the chunk.
    pub events: usize,
    /// How it was accumulated.
    pub mode: ChunkMode,
    /// Tile references (tile modes and adaptive; else 0).
    pub references: u64,
    /// Tasks.
    pub tasks: u64,
    /// Partial-sum slots.
    pub partial_slots: u64,
    /// The longest tile list.
    pub longest_list: u64,
    /// Events whose centre lies on the image.
    pub centre_events: u64,
    /// Occupied 32×32 centre tiles.
    pub centre_tiles: u64,
}

/// Time spent, from device events (only with [`DeviceSinkBuilder::profile`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SinkTimings {
    /// Binning pass (check, prepare, and with device binning count + scan), ms.
    pub bin_ms: f64,
    /// Host binning (wall clock, including the lists' upload), ms.
    pub host_binning_ms: f64,
    /// Tile accumulation (scatter, sort, accumulate, merge), ms.
    pub accumulate_ms: f64,
    /// Atomic splats (and their contribution counts), ms.
    pub atomic_ms: f64,
}

/// The tile modes' device scratch.
struct TileScratch {
    tile: usize,
    prepared: DeviceBuffer<u8>,
    tile_ends: DeviceBuffer<u32>,
    references: DeviceBuffer<u32>,
    tasks: DeviceBuffer<TileTask>,
    partials: DeviceBuffer<f64>,
    centre_marks: DeviceBuffer<u32>,
    partial_slots: u64,
    /// The census serial of the last chunk (0: none yet; marks start zero).
    serial: u32,
}

impl TileScratch {
    fn new(
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
    fn raw(&mut self, words: &mut DeviceBuffer<u64>) -> sys::hipkern_psf_tile_scratch {
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

    fn capacity(&self) -> ScratchUsage {
        ScratchUsage {
            references: 4 * self.references.len() as u64,
            tasks: TASK_BYTES * self.tasks.len() as u64,
            starts: 4 * self.tile_ends.len() as u64,
            partials: self.partial_slots * self.slot_bytes(),
            prepared: self.prepared.len() as u64,
        }
    }

    fn slot_bytes(&self) -> u64 {
        (self.tile * self.tile * 3 * 8) as u64
    }
}

/// Builds a [`DeviceSink`]: mode, binning, scratch capacities, adaptive
/// thresholds, profiling. [`DeviceSink::new`] is `builder(..).build()`.
#[derive(Clone, Debug)]
pub struct DeviceSinkBuilder {
    device: Device,
    cache: Arc<PsfCache>,
    width: usize,
    height: usize,
    mode: SinkMode,
    binning: Binning,
    limits: ScratchLimits,
    thresholds: AdaptiveThresholds,
    profile: bool,
}

impl DeviceSinkBuilder {
    /// The mode (default `atomic`).
    pub fn mode(mut self, mode: SinkMode) -> Self {
        self.mode = mode;
        self
    }

    /// Where the tile lists are built (default on the device).
    pub fn binning(mut self, binning: Binning) -> Self {
        self.binning = binning;
        self
    }

    /// The scratch capacities (default [`ScratchLimits::default`]).
    pub fn scratch(mut self, limits: ScratchLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The adaptive mode's thresholds (default [`AdaptiveThresholds::default`]).
    pub fn adaptive(mut self, thresholds: AdaptiveThresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// Times the kernels with device events ([`DeviceSink::timings`]).
    pub fn profile(mut self, on: bool) -> Self {
        self.profile = on;
        self
    }

    /// Allocates the sink (every buffer it will use). A tile mode whose
    /// list starts do not fit [`ScratchLimits::starts`] is refused with
    /// [`Error::ScratchExceeded`].
    pub fn build(self) -> Result<DeviceSink> {
        let (width, height, device) = (self.width, self.height, &self.device);
        if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
            return Err(Error::InvalidInput(format!(
                "image size {width}×{height} (each side must be in 1..={MAX_SIDE})"
            )));
        }
        let per_tile = self.thresholds.min_events_per_centre_tile;
        if per_tile.is_nan() || per_tile < 0.0 {
            return Err(Error::InvalidInput(format!(
                "adaptive threshold min_events_per_centre_tile = {} (must be ≥ 0)",
                self.thresholds.min_events_per_centre_tile
            )));
        }
        if self.thresholds.tile != 16 && self.thresholds.tile != 32 {
            return Err(Error::InvalidInput(format!(
                "adaptive tile side {} (must be 16 or 32)",
                self.thresholds.tile
            )));
        }
        let _scope = device.enter()?;
        let scratch = match self.mode.tile(&self.thresholds) {
            Some(t) => Some(TileScratch::new(device, &self.limits, t, width, height)?),
            None => None,
        };
        let stream = device.new_stream()?;
        let copy = device.new_stream()?;
        let mut image = device.alloc::<f64>(width * height * 3)?;
        let mut stamps = device.alloc::<f64>(self.cache.stamps().len())?;
        let mut words = device.alloc_zeroed::<u64>(WORDS)?;
        stream.fill(&mut image.as_slice_mut(), 0.0f64)?;
        stream.fill(&mut words.slice_mut(REPORT..)?, REPORT_NONE)?;
        // SAFETY: the cache (held by the Arc below) outlives the copy, which
        // the synchronize at the end of this function waits for.
        unsafe { stream.copy_htod_async(self.cache.stamps(), &mut stamps.as_slice_mut())? };
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
            cache: self.cache,
            width,
            height,
            mode: self.mode,
            binning: self.binning,
            thresholds: self.thresholds,
            stream,
            copy,
            stamps,
            image,
            words,
            scratch,
            slots,
            next: 0,
            host: None,
            pinned_image: None,
            host_stats: SinkStats::default(),
            counter_offset: [0; 3],
            last_counters: [0; 3],
            stats: SinkStats::default(),
            peak: ScratchUsage::default(),
            log: Vec::new(),
            profile: self.profile.then(Profile::default),
        })
    }
}

/// Pending device-event pairs of the profile, and what they summed to.
#[derive(Default)]
struct Profile {
    pending: Vec<(ChunkStage, Event, Event)>,
    spare: Vec<Event>,
    timings: SinkTimings,
}

#[derive(Clone, Copy)]
enum ChunkStage {
    Bin,
    Accumulate,
    Atomic,
}

/// The float64 PSF sink on one device.
///
/// Same contract as [`CpuSink`](super::CpuSink): chunks of at most
/// [`CHUNK_EVENTS`], [`SinkStats`] with the same meaning, events refused
/// with errors naming them. Every event of a call is validated on the host
/// before anything is launched, so a bad event costs nothing; a scratch
/// capacity refusal ([`Error::ScratchExceeded`]) stops the call at the
/// chunk that needed too much, saying how many events went in.
pub struct DeviceSink {
    device: Device,
    cache: Arc<PsfCache>,
    width: usize,
    height: usize,
    mode: SinkMode,
    binning: Binning,
    thresholds: AdaptiveThresholds,
    stream: Stream,
    copy: Stream,
    stamps: DeviceBuffer<f64>,
    image: DeviceBuffer<f64>,
    /// Totals, counters, verdict (see [`WORDS`]).
    words: DeviceBuffer<u64>,
    scratch: Option<TileScratch>,
    slots: [Slot; 2],
    next: usize,
    /// The direct path's host image, allocated on first use.
    host: Option<HdrImage>,
    /// [`DeviceSink::finish_pinned`]'s image, allocated on first use.
    pinned_image: Option<Pinned>,
    /// What the host counts itself: events, chunks, the direct path.
    host_stats: SinkStats,
    /// Device counts of refused chunks and of the time before the last
    /// reset (subtracted from the counters).
    counter_offset: [u64; 3],
    /// The counters as read at the last tile chunk's binning (every count
    /// of a tile-mode sink comes from a binning pass).
    last_counters: [u64; 3],
    /// As of the last synchronization.
    stats: SinkStats,
    peak: ScratchUsage,
    log: Vec<ChunkRecord>,
    profile: Option<Profile>,
}

impl std::fmt::Debug for DeviceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSink")
            .field("device", &self.device)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("mode", &self.mode)
            .field("binning", &self.binning)
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

fn device_refusal(index: u64) -> Error {
    Error::InvalidInput(format!(
        "the device refused event {index} of a chunk although the host accepted it; \
         that chunk and the later ones were not accumulated"
    ))
}

impl DeviceSink {
    /// An `atomic`-mode sink onto a black `width × height` image (each side
    /// in `1..=2^20`) on `device`, over `cache` (its stamps are uploaded
    /// once, `(P+1)²·95²·8` bytes): `DeviceSink::builder(..).build()`. On
    /// the `cpu` platform no `Device` exists (`Device::new` gives
    /// [`Error::NoToolchain`]).
    pub fn new(
        device: &Device,
        cache: Arc<PsfCache>,
        width: usize,
        height: usize,
    ) -> Result<DeviceSink> {
        DeviceSink::builder(device, cache, width, height).build()
    }

    /// A builder with the defaults: `atomic`, device binning, the default
    /// scratch capacities and adaptive thresholds, no profiling.
    pub fn builder(
        device: &Device,
        cache: Arc<PsfCache>,
        width: usize,
        height: usize,
    ) -> DeviceSinkBuilder {
        DeviceSinkBuilder {
            device: device.clone(),
            cache,
            width,
            height,
            mode: SinkMode::Atomic,
            binning: Binning::Device,
            limits: ScratchLimits::default(),
            thresholds: AdaptiveThresholds::default(),
            profile: false,
        }
    }

    /// Image width.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Image height.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The mode.
    pub fn mode(&self) -> SinkMode {
        self.mode
    }

    /// Where tile lists are built.
    pub fn binning(&self) -> Binning {
        self.binning
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<PsfCache> {
        &self.cache
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The counters (as [`CpuSink::stats`](super::CpuSink::stats)); the
    /// device counts the contributions, and every accumulating call
    /// synchronizes before it returns, so they are up to date.
    pub fn stats(&self) -> SinkStats {
        self.stats
    }

    /// Capacity of each scratch buffer (zero in `atomic` mode, which has none).
    pub fn scratch_capacity(&self) -> ScratchUsage {
        self.scratch
            .as_ref()
            .map(TileScratch::capacity)
            .unwrap_or_default()
    }

    /// The most of each scratch buffer one chunk used so far.
    pub fn scratch_peak(&self) -> ScratchUsage {
        self.peak
    }

    /// Every chunk of the cached path so far, in order, with its mode.
    pub fn chunk_log(&self) -> &[ChunkRecord] {
        &self.log
    }

    /// Kernel times so far, as of the last synchronization; `None` unless
    /// built with [`DeviceSinkBuilder::profile`].
    pub fn timings(&self) -> Option<SinkTimings> {
        self.profile.as_ref().map(|p| p.timings)
    }

    /// Accumulates `events` through the cache, in chunks of at most
    /// [`CHUNK_EVENTS`]. Every event of the call is validated first
    /// ([`StarEvent::validate`], and [`PsfCache::fits`]); the first bad one
    /// is the error, naming its index in `events`, and nothing of the call
    /// is accumulated. Chunks overlap their uploads with the previous
    /// chunk's kernels (`atomic`; the tile modes wait for each chunk's
    /// binning pass); the call returns when its work is done, with
    /// [`DeviceSink::stats`] up to date.
    pub fn accumulate(&mut self, events: &[StarEvent]) -> Result<()> {
        for (i, e) in events.iter().enumerate() {
            e.validate(i)?;
            if !PsfCache::fits(e.x, e.y, e.support) {
                return Err(cache_refusal(e, i));
            }
        }
        let _scope = self.device.enter()?;
        for (k, chunk) in events.chunks(CHUNK_EVENTS).enumerate() {
            self.launch_or_sync(chunk, k * CHUNK_EVENTS)?;
            self.host_stats.events += chunk.len() as u64;
            self.host_stats.chunks += 1;
        }
        self.sync()
    }

    /// Like [`DeviceSink::accumulate`], but events that do not fit the cache
    /// go by the direct path (`docs/design/psf.md#direct-path`, mid-stream): per chunk,
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
        let _scope = self.device.enter()?;
        let mut n_direct = 0;
        for (k, chunk) in events.chunks(CHUNK_EVENTS).enumerate() {
            let (cached, direct): (Vec<StarEvent>, Vec<StarEvent>) = chunk
                .iter()
                .partition(|e| PsfCache::fits(e.x, e.y, e.support));
            if !cached.is_empty() {
                self.launch_or_sync(&cached, k * CHUNK_EVENTS)?;
                self.host_stats.events += cached.len() as u64;
            }
            self.host_stats.chunks += 1;
            if !direct.is_empty() {
                let mut host = match self.host.take() {
                    Some(h) => h,
                    None => HdrImage::new(self.width, self.height)?,
                };
                self.download(host.data_mut())?;
                let d = render_direct(self.cache.psf(), &direct, &mut host)?;
                self.upload(host.data())?;
                self.host = Some(host);
                self.host_stats.events += direct.len() as u64;
                self.host_stats.direct += d.rendered;
                self.host_stats.outside += d.outside;
                self.host_stats.contributions += d.contributions;
                n_direct += direct.len();
            }
        }
        self.sync()?;
        Ok(n_direct)
    }

    /// Waits for everything queued, checks the device's verdict and brings
    /// the counters (and the profile) up to date.
    pub fn sync(&mut self) -> Result<()> {
        let _scope = self.device.enter()?;
        self.stream.synchronize()?;
        let words = self.read_words()?;
        if words[REPORT] != REPORT_NONE {
            self.reset_report()?;
            return Err(device_refusal(words[REPORT]));
        }
        self.fold_counters(&words);
        self.drain_profile()
    }

    /// Waits for everything queued and downloads the image. The sink goes
    /// on accumulating into the same device image afterwards.
    pub fn finish(&mut self) -> Result<HdrImage> {
        // Poisoned: a value the copy did not write would show as NaN. Host
        // memory for it is checked and allocated fallibly (the device may
        // hold an image the host has no room for).
        let (w, h) = (self.width, self.height);
        let mut data = filled_vec(w * h * 3, f64::NAN, &|| {
            format!("the host copy of the {w}×{h} float64 RGB image")
        })?;
        let _scope = self.device.enter()?;
        self.download(&mut data)?;
        HdrImage::from_data(self.width, self.height, data)
    }

    /// Like [`DeviceSink::finish`], into the sink's own page-locked copy of
    /// the image (allocated, and poisoned with NaN, on first use): the
    /// fastest way out (a pageable download of a 4K image takes 3–6× as
    /// long). The slice is height × width × 3, row-major.
    pub fn finish_pinned(&mut self) -> Result<&[f64]> {
        let _scope = self.device.enter()?;
        if self.pinned_image.is_none() {
            let mut p = Pinned::new(&self.device, self.width * self.height * 3)?;
            p.as_mut_slice().fill(f64::NAN);
            self.pinned_image = Some(p);
        }
        self.sync()?;
        let dst = self.pinned_image.as_mut().expect("allocated above");
        // SAFETY: the pinned buffer is owned by the sink and not touched
        // until the synchronize below has waited for the copy.
        unsafe {
            self.stream
                .copy_dtoh_async(&self.image.as_slice(), dst.as_mut_slice())?;
        }
        self.stream.synchronize()?;
        Ok(self
            .pinned_image
            .as_ref()
            .expect("allocated above")
            .as_slice())
    }

    /// Back to a black image and zero counters, chunk log, peaks and
    /// timings, keeping every buffer (for repeated replays).
    pub fn reset(&mut self) -> Result<()> {
        let _scope = self.device.enter()?;
        self.sync()?;
        self.stream.fill(&mut self.image.as_slice_mut(), 0.0f64)?;
        self.stream.synchronize()?;
        let words = self.read_words()?;
        self.counter_offset
            .copy_from_slice(&words[COUNTERS..COUNTERS + 3]);
        self.host_stats = SinkStats::default();
        self.stats = SinkStats::default();
        self.peak = ScratchUsage::default();
        self.log.clear();
        if let Some(p) = self.profile.as_mut() {
            p.timings = SinkTimings::default();
        }
        Ok(())
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
        let _scope = self.device.enter()?;
        self.upload(image.data())
    }

    fn read_words(&self) -> Result<[u64; WORDS]> {
        let mut w = [0u64; WORDS];
        self.words.copy_to_host(&mut w)?;
        Ok(w)
    }

    fn reset_report(&mut self) -> Result<()> {
        self.stream
            .fill(&mut self.words.slice_mut(REPORT..)?, REPORT_NONE)?;
        self.stream.synchronize()
    }

    /// stats = what the host counted + the device counters (less refused chunks').
    fn fold_counters(&mut self, words: &[u64; WORDS]) {
        let c = |i: usize| words[COUNTERS + i].wrapping_sub(self.counter_offset[i]);
        let h = self.host_stats;
        self.stats = SinkStats {
            cached: c(0),
            outside: h.outside + c(1),
            contributions: h.contributions + c(2),
            ..h
        };
    }

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
    fn launch_or_sync(&mut self, chunk: &[StarEvent], first: usize) -> Result<()> {
        self.launch(chunk, first).inspect_err(|_| {
            let _ = self.sync();
        })
    }

    /// Queues one validated chunk (≤ CHUNK_EVENTS events, all fitting);
    /// `first` is the index in the caller's events of its first one.
    fn launch(&mut self, chunk: &[StarEvent], first: usize) -> Result<()> {
        let slot = self.stage(chunk)?;
        let result = match self.mode {
            SinkMode::Atomic => {
                let start = self.mark()?;
                self.splat_atomic(slot, chunk.len(), true)?;
                self.close(ChunkStage::Atomic, start)?;
                self.log.push(ChunkRecord {
                    events: chunk.len(),
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
            _ => self.tile_chunk(slot, chunk, first),
        };
        self.slots[slot].consumed.record(&self.stream)?;
        self.slots[slot].used = true;
        result
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

    /// A device event on the compute stream when profiling.
    fn mark(&mut self) -> Result<Option<Event>> {
        let Some(p) = self.profile.as_mut() else {
            return Ok(None);
        };
        let e = match p.spare.pop() {
            Some(e) => e,
            None => Event::new(&self.device)?,
        };
        e.record(&self.stream)?;
        Ok(Some(e))
    }

    /// Closes a profiled stage opened by [`DeviceSink::mark`].
    fn close(&mut self, stage: ChunkStage, start: Option<Event>) -> Result<()> {
        let Some(start) = start else {
            return Ok(());
        };
        let end = self.mark()?.expect("profiling");
        self.profile
            .as_mut()
            .expect("profiling")
            .pending
            .push((stage, start, end));
        Ok(())
    }

    /// Adds the finished profiled stages (the stream has been synchronized).
    fn drain_profile(&mut self) -> Result<()> {
        let Some(p) = self.profile.as_mut() else {
            return Ok(());
        };
        for (stage, a, b) in p.pending.drain(..) {
            let ms = f64::from(a.elapsed_ms(&b)?);
            match stage {
                ChunkStage::Bin => p.timings.bin_ms += ms,
                ChunkStage::Accumulate => p.timings.accumulate_ms += ms,
                ChunkStage::Atomic => p.timings.atomic_ms += ms,
            }
            p.spare.push(a);
            p.spare.push(b);
        }
        Ok(())
    }

    /// The device image into `dst` (width·height·3), after all queued work.
    fn download(&mut self, dst: &mut [f64]) -> Result<()> {
        self.sync()?;
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
