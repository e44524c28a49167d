//! The PSF sink (SPEC §7): the Moffat model, the immutable phase cache of
//! pixel-integrated stamps, star events and their files, the HDR image and
//! its comparison, seeded fixtures, the float64 CPU sinks, and the device
//! sink (`atomic`, `tile16`, `tile32`, `adaptive`).
//!
//! # The math
//!
//! The PSF is a Moffat profile of unit flux ([`MoffatPsf`]):
//!
//! ```text
//! α = FWHM / (2 √(2^{1/β} − 1)),   I(r) = (β − 1)/(π α²) · (1 + r²/α²)^(−β),
//! flux outside r = (1 + r²/α²)^(1−β),   support R = α √(tail^{1/(1−β)} − 1).
//! ```
//!
//! Coordinates are continuous pixel units: pixel `(ix, iy)` covers
//! `[ix, ix+1) × [iy, iy+1)`, its centre is `(ix + ½, iy + ½)`. An event at
//! `(x, y)` ([`StarEvent`]) has anchor `(⌊x⌋, ⌊y⌋)` and phase
//! `φ = (x − ⌊x⌋, y − ⌊y⌋)`. The cache ([`PsfCache`]) holds, for the
//! `(P+1)²` phases `(i/P, j/P)` (P = 64), the PSF centred at that phase
//! integrated over every pixel `[dx, dx+1) × [dy, dy+1)`, `|dx|, |dy| ≤ 47`.
//! The event's value at pixel `(⌊x⌋+dx, ⌊y⌋+dy)` is the bilinear blend in φ of
//! the four stamps bracketing φ (not renormalised) times `flux·(r, g, b)`,
//! for the pixels whose centre lies within the event's `support`
//! ([`support`] states the per-row integer ranges exactly), clipped at the
//! image's edge. The blend differs from exact pixel integrals by about
//! 5e−5 relative at P = 64, falling ∝ 1/P²: the model's accuracy.
//!
//! An event whose support needs pixels beyond offset 47 cannot go through
//! the cache: the cached sink refuses it naming it, and [`render_direct`]
//! (the direct path) renders it exactly.
//!
//! # Pieces
//!
//! - [`MoffatPsf`]: the model and accurate pixel integrals.
//! - [`PsfCache`]: the stamps, one contiguous float64 array (layout in its
//!   docs), built in parallel; share it between sinks with an `Arc`.
//! - [`support`]: anchor, phase and the per-row ranges of the support.
//! - [`StarEvent`], [`read_events`], [`write_events`]: events and the
//!   binary event file (or an N×7 float64 `.npy`).
//! - [`HdrImage`], [`Comparison`]: the image, its totals, and SPEC §7's
//!   acceptance of one image against a reference.
//! - [`fixtures`]: the seeded dense, dispersed, magnified, ordinary and
//!   boundary event sets.
//! - [`CpuSink`]: the serial reference and the row-parallel sink (bitwise
//!   equal), in chunks of ≤ [`CHUNK_EVENTS`]; [`render_direct`].
//! - [`DeviceSink`]: the same sums on the GPU, by float64 atomics or
//!   owner-computes tiles with bounded scratch ([`ScratchLimits`]) and the
//!   per-chunk [`AdaptiveThresholds`] selection; [`binning`]: what the tile
//!   lists are, and the host binning path.
pub mod binning;
mod cache;
mod device;
mod event;
pub mod fixtures;
mod image;
mod model;
mod output;
mod reference;
pub mod support;

pub use cache::{offset_index, CacheConfig, PsfCache};
pub use device::{
    AdaptiveThresholds, Binning, ChunkMode, ChunkRecord, DeviceSink, DeviceSinkBuilder,
    ScratchLimits, ScratchUsage, SinkMode, SinkTimings,
};
pub use event::{
    encode_events, parse_events, read_events, validate_events, write_events, write_events_npy,
    EventFile, EventFormat, StarEvent, EVENT_FIELDS, EVENT_HEADER_BYTES, EVENT_MAGIC,
    EVENT_RECORD_BYTES, EVENT_VERSION,
};
pub use image::{Comparison, FluxSums, HdrImage, LUMA};
pub use model::MoffatPsf;
pub use output::{
    tone_map, white_point, write_fits, write_image_npy, write_png, ImageMeta, Preview,
    TONE_PERCENTILE, TONE_SOFTENING,
};
pub use reference::{
    count_contributions, event_contributions, render_direct, CpuSink, DirectStats, SinkStats,
    MAX_DIRECT_SUPPORT, ROW_BLOCK,
};

/// The cache's stamp radius: offsets `dx, dy ∈ −47..=47`.
pub const CACHE_RADIUS: usize = 47;
/// Side of a stamp, `2·47 + 1 = 95`.
pub const STAMP_SIDE: usize = 2 * CACHE_RADIUS + 1;
/// Values per stamp, `95² = 9025`.
pub const STAMP_PIXELS: usize = STAMP_SIDE * STAMP_SIDE;
/// Default phase intervals per axis, `P = 64`.
pub const DEFAULT_PHASES: usize = 64;
/// The most events a sink takes in one chunk.
pub const CHUNK_EVENTS: usize = 16_384;
/// Default image width.
pub const DEFAULT_WIDTH: usize = 3840;
/// Default image height.
pub const DEFAULT_HEIGHT: usize = 2160;
/// Side of the centre tiles fixtures and the adaptive mode count events in.
pub const CENTRE_TILE: usize = 32;
