//! What a sink is built with: its mode, where tile lists are built, the
//! scratch capacities, the adaptive thresholds, and the builder that
//! allocates every buffer.
use super::records::Profile;
use super::scratch::{Slot, TileScratch, FIELDS, REPORT, REPORT_NONE, WORDS};
use super::DeviceSink;
use crate::psf::reference::SinkStats;
use crate::psf::{PsfCache, CHUNK_EVENTS};
use crate::runtime::Pinned;
use crate::runtime::{Device, Error, Event, Result};
use std::sync::Arc;

/// The largest image side (as [`HdrImage::new`](crate::psf::HdrImage::new)).
const MAX_SIDE: usize = 1 << 20;

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
    /// On the host ([`binning::bin_chunk`](crate::psf::binning::bin_chunk)) and uploaded: the
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

/// Builds a [`DeviceSink`]: mode, binning, scratch capacities, adaptive
/// thresholds, profiling. [`DeviceSink::new`] is `builder(..).build()`.
#[derive(Clone, Debug)]
pub struct DeviceSinkBuilder {
    pub(super) device: Device,
    pub(super) cache: Arc<PsfCache>,
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) mode: SinkMode,
    pub(super) binning: Binning,
    pub(super) limits: ScratchLimits,
    pub(super) thresholds: AdaptiveThresholds,
    pub(super) profile: bool,
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
            pinned_image: None,
            frames: None,
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
