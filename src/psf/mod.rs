//! The PSF sink (`docs/design/psf.md`): the Moffat model, the immutable phase cache of
//! pixel-integrated stamps, star events and their files, the HDR image and
//! its comparison, seeded fixtures, the float64 CPU sinks, and the device
//! sink (`atomic`, `tile16`, `tile32`, `adaptive`).
//!
//! # The PSF
//!
//! A Moffat profile of unit flux ([`MoffatPsf`]):
//!
//! ```text
//! α = FWHM / (2 √(2^{1/β} − 1)),   I(r) = (β − 1)/(π α²) · (1 + r²/α²)^(−β),
//! flux outside r = (1 + r²/α²)^(1−β),   support R = α √(tail^{1/(1−β)} − 1).
//! ```
//!
//! (FWHM 2.7, β 4.5, tail 1e−8: R = 45.84777786185942 px.)
//!
//! # Coordinates, stamps and phases
//!
//! Coordinates are continuous pixel units: pixel `(ix, iy)` covers
//! `[ix, ix+1) × [iy, iy+1)`, its centre is `(ix + ½, iy + ½)`. An event at
//! `(x, y)` ([`StarEvent`]: x, y, flux, r, g, b, support) has anchor
//! `(ax, ay) = (⌊x⌋, ⌊y⌋)` and phase `φ = (fx, fy) = (x − ⌊x⌋, y − ⌊y⌋)`.
//! The cache ([`PsfCache`]) holds `(P+1)²` stamps (P = 64 by default): stamp
//! `(i, j)` is the PSF centred at phase `(i/P, j/P)` integrated over every
//! pixel `[dx, dx+1) × [dy, dy+1)`, `|dx|, |dy| ≤ 47` ([`CACHE_RADIUS`]),
//! stored at `stamps[((j·(P+1) + i)·95 + dy + 47)·95 + dx + 47]`.
//!
//! # The splat
//!
//! An event's blend takes the four stamps bracketing its phase
//! ([`PsfCache::blend_weights`]):
//!
//! ```text
//! i0 = min(⌊fx·P⌋, P − 1),  tx = fx·P − i0        (j0, ty likewise from fy)
//! w00 = (1−tx)(1−ty),  w10 = tx(1−ty),  w01 = (1−tx)ty,  w11 = tx·ty
//! S00 = stamp(i0, j0), S10 = stamp(i0+1, j0), S01 = stamp(i0, j0+1), S11 = stamp(i0+1, j0+1)
//! ```
//!
//! and every pixel `(ax + dx, ay + dy)` of its support that lies in the
//! image gets
//!
//! ```text
//! v = ((w00·S00[dx,dy] + w10·S10[dx,dy]) + w01·S01[dx,dy]) + w11·S11[dx,dy]
//! (R, G, B) += v · (flux·r, flux·g, flux·b)
//! ```
//!
//! (not renormalised). The support is the pixels whose centre lies within
//! the event's own `support` of `(x, y)`: per row `dy`, with
//! `h = (dy + ½) − fy` and `w = √(support² − h²)`, the columns
//! `dx ∈ [⌈fx − ½ − w⌉, ⌊fx − ½ + w⌋]` ([`support`] states the exact float64
//! operations, which the device repeats bit for bit). The support is
//! clipped at the image's edge; an event whose centre is off the image
//! contributes its wing; one with no support pixel in the image is counted
//! ([`SinkStats::outside`]) and skipped. The blend differs from exact pixel
//! integrals by about 5e−5 relative at P = 64, falling ∝ 1/P²: the model's
//! accuracy, not a tolerance between implementations.
//!
//! Events go in chunks of at most [`CHUNK_EVENTS`] (16,384). A sink
//! validates events (their fields, and [`PsfCache::fits`]) before it
//! accumulates any: the first bad one is the error, naming it, and nothing
//! of its chunk ([`CpuSink`]) or of the call ([`DeviceSink`]) is applied. An
//! event whose support needs offsets beyond ±47 cannot go through the cache:
//! `accumulate` refuses it, `accumulate_routed` sends it by the direct path
//! ([`render_direct`], exact: [`MoffatPsf::pixel_integral`] at each support
//! pixel, on the host; for the device sink mid-stream: the image is
//! downloaded, the events added, the image uploaded).
//!
//! # Modes of the device sink
//!
//! - `atomic`: one float64 atomic add per contribution and channel; the
//!   order of a pixel's sums varies from run to run.
//! - `tile16`, `tile32`: owner-computes. The image is cut into tiles of 16
//!   or 32 px; each tile gets the list of the chunk's events with a support
//!   pixel in it, in event order ([`binning`]); one thread owns each pixel
//!   and adds its tile's events in list order. A list of at most
//!   [`binning::SEGMENT`] (256) references is one task that writes the
//!   pixels directly (the CPU reference's own order of additions); a longer
//!   one is cut into segments of 256 whose partial sums a second kernel adds
//!   into the pixel in segment order. No atomics touch the image: bitwise
//!   the same on every run with the same chunking. Lists are built on the
//!   device by default, or on the host ([`Binning::Host`], the comparison
//!   path; the same lists).
//! - `adaptive`: per chunk, tiles when the chunk has at least
//!   `min_events` events and at least `min_events_per_centre_tile` events
//!   per occupied 32×32 centre tile on average (over the events whose centre
//!   is on the image; a chunk with none goes to `atomic`), else `atomic`
//!   ([`AdaptiveThresholds`]). The original
//!   values ([`AdaptiveThresholds::SPEC`]: tile16, 8,192 events, 32 per
//!   tile) were measured with host-built lists; the defaults (tile32,
//!   8,192 events, 0 per tile) come from device binning, where tiles won at
//!   every density measured (benches/RESULTS.md).
//!
//! # Bounded scratch
//!
//! Every buffer is allocated once, when the sink is built ([`ScratchLimits`],
//! defaults of `docs/design/psf.md#bounded-scratch`): references 32 MiB (4 B per event–tile pair), tasks
//! 2 MiB (24 B per segment), starts 128 KiB (4 B per tile, checked at build:
//! the 32,400 tiles of 3840×2160 in tile16 fit), partials 128 MiB (one slot
//! of `tile²·3` float64 per segment of a long list), the prepared events of
//! one chunk (280 B per event), plus the double-buffered event staging. A
//! chunk that needs more of a buffer than it has is refused before its
//! accumulation with [`crate::Error::ScratchExceeded`] (the buffer, bytes
//! needed, bytes available): the image is exactly as before that chunk,
//! the chunks before it stay, and the sink stays usable. No implicit switch
//! to another mode.
//!
//! # Limits
//!
//! Whatever a caller or a file asks for is checked before work starts, and
//! a request beyond a limit is an error naming it, never an abort or a run
//! without end: the PSF's parameters ([`MoffatPsf::validate`]: FWHM
//! 0.5..=1000 px, β 1.1..=100, tail 1e−15..=0.5, support radius ≤
//! [`MAX_DIRECT_SUPPORT`]), phases 1..=[`MAX_PHASES`], threads
//! 0..=[`MAX_THREADS`], image sides 1..=[`MAX_IMAGE_SIDE`], and the sizes
//! event-file headers claim (against the bytes the file holds). Host
//! allocations sized by the input (the cache's stamps, the image, the
//! events, output buffers) are checked against the machine's available
//! memory and made fallibly ([`crate::host_memory`],
//! [`crate::Error::HostMemory`]). File-system failures while writing or
//! reading are [`crate::Error::Io`]; a malformed file or a bad path is
//! [`crate::Error::InvalidInput`]. A sink's image can still hold an
//! infinity where finite events' sums overflow float64:
//! [`HdrImage::first_non_finite`] finds it before the image is written.
//!
//! # Pieces
//!
//! - [`MoffatPsf`]: the model and accurate pixel integrals.
//! - [`PsfCache`]: the stamps, one contiguous float64 array (layout in its
//!   docs), built in parallel; share it between sinks with an `Arc`.
//! - [`support`]: anchor, phase and the per-row ranges of the support.
//! - [`StarEvent`], [`read_events`], [`write_events`]: events and the
//!   binary event file (or an N×7 float64 `.npy`).
//! - [`HdrImage`], [`Comparison`]: the image, its totals, and the
//!   acceptance of one image against a reference
//!   (`docs/design/psf.md#acceptance`).
//! - [`fixtures`]: the seeded dense, dispersed, magnified, ordinary and
//!   boundary event sets.
//! - [`CpuSink`]: the serial reference and the row-parallel sink (bitwise
//!   equal), in chunks of ≤ [`CHUNK_EVENTS`]; [`render_direct`].
//! - [`DeviceSink`]: the same sums on the GPU, by float64 atomics or
//!   owner-computes tiles with bounded scratch ([`ScratchLimits`]) and the
//!   per-chunk [`AdaptiveThresholds`] selection; [`binning`]: what the tile
//!   lists are, and the host binning path.
//! - [`SinkHub`], [`Producer`]: many threads feeding one sink, each
//!   through its own producer, with bounded memory ([`HubLimits`]) and, on
//!   request, a reproducible order of chunks ([`ChunkOrder::Sequence`]).
pub mod binning;
mod cache;
mod device;
mod event;
pub mod fixtures;
mod image;
mod model;
mod output;
mod producers;
mod reference;
pub mod sky;
pub mod support;

pub use crate::threads::MAX_THREADS;
pub use cache::{offset_index, CacheConfig, PsfCache, MAX_PHASES};
pub use device::{
    AdaptiveThresholds, Binning, ChunkMode, ChunkRecord, DeviceSink, DeviceSinkBuilder,
    ScratchLimits, ScratchUsage, SinkMode, SinkTimings,
};
pub use event::{
    encode_events, parse_events, read_events, validate_events, write_events, write_events_npy,
    write_events_npy_to, write_events_to, EventFile, EventFormat, StarEvent, EVENT_FIELDS,
    EVENT_HEADER_BYTES, EVENT_MAGIC, EVENT_RECORD_BYTES, EVENT_VERSION,
};
pub use image::{Comparison, FluxSums, HdrImage, LUMA, MAX_IMAGE_SIDE};
pub use model::MoffatPsf;
pub use output::{
    tone_map, white_point, write_image_npy, write_image_npy_to, ImageMeta, Preview,
    TONE_PERCENTILE, TONE_SOFTENING,
};
#[cfg(feature = "fits")]
pub use output::{write_fits, write_fits_new};
#[cfg(feature = "png")]
pub use output::{write_png, write_png_to, PngError};
pub use producers::{
    ChunkOrder, ChunkSink, HubLimits, HubStats, Producer, ProducerStats, SinkHub, SinkHubBuilder,
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
