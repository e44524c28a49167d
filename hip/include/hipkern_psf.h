/*
 * hipkern_psf.h — the PSF sink: atomic and tile modes, the direct path, producers.
 *
 * A section of the C ABI: include hipkern.h, which includes this file
 * and states the contract every entry point here keeps (status codes,
 * streams and devices, who owns memory, versioning).
 */
#ifndef HIPKERN_PSF_H
#define HIPKERN_PSF_H

#ifndef HIPKERN_H
#error "include hipkern.h, not hipkern_psf.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- PSF sink (docs/design/psf.md) ---------------------------------------- */
/** Stamp radius of the PSF cache: offsets dx, dy in -47..=47. */
#define HIPKERN_PSF_CACHE_RADIUS 47
/** Side of one stamp, 2 * 47 + 1. */
#define HIPKERN_PSF_STAMP_SIDE 95
/** float64 fields of one event: x, y, flux, r, g, b, support. */
#define HIPKERN_PSF_EVENT_FIELDS 7

/**
 * The `atomic` mode of the PSF sink: adds n_events star events into an RGB
 * float64 image with float64 atomicAdd.
 *
 * events: n_events x 7 float64 (x, y, flux, r, g, b, support), device.
 * stamps: the phase cache, (phases + 1)^2 stamps of 95 x 95 float64, device,
 *   stamps[((j * (phases + 1) + i) * 95 + (dy + 47)) * 95 + (dx + 47)]
 *   (i the x phase, j the y phase, phase (i / phases, j / phases)).
 * image: height x width x 3 float64 (row-major, RGB last), device; added to.
 * report: one uint64 of device memory. The caller sets it to all ones
 *   (0xFFFFFFFFFFFFFFFF, e.g. hipkern_fill_u64) before its first call.
 *   A first kernel checks every event (all fields finite, flux, r, g, b
 *   >= 0, support > 0, and every support pixel within the stamp radius of
 *   the anchor) and atomicMin's the index of each bad one into *report; the
 *   splat kernel then adds nothing at all when *report is no longer all
 *   ones. The word is sticky: after a rejected call, later calls on the same
 *   word add nothing until the caller resets it; read it after the stream
 *   has passed the call to learn the verdict.
 *
 * For an event at (x, y) with support s: anchor (floor x, floor y), phase
 * (fx, fy) = (x - floor x, y - floor y); the pixels whose centres lie within
 * s (per-row integer ranges, every step one correctly rounded float64
 * operation, no contraction: dy = (oy + 0.5) - fy, h2 = s*s - dy*dy, row in
 * support iff h2 >= 0, w = sqrt(h2), columns ceil((fx - 0.5) - w) ..
 * floor((fx - 0.5) + w)), clipped to the image, each get
 * v = ((w00 S00 + w10 S10) + w01 S01) + w11 S11 (the bilinear blend of the
 * four stamps bracketing the phase, gx = fx * phases,
 * i0 = min(floor gx, phases - 1), tx = gx - i0, w00 = (1 - tx)(1 - ty),
 * w10 = tx (1 - ty), w01 = (1 - tx) ty, w11 = tx ty) times flux*r, flux*g,
 * flux*b. Events with no support pixel in the image add nothing. Exactly
 * the float64 CPU reference per contribution; the order of the atomic sums
 * varies from run to run.
 *
 * phases in 1..=1024, width and height >= 1; n_events == 0 is a no-op.
 * Asynchronous on `stream`; no host allocation, no synchronization.
 */
int32_t hipkern_psf_splat_atomic(const double *events, int64_t n_events, const double *stamps,
                                 int32_t phases, double *image, int32_t width, int32_t height,
                                 uint64_t *report, void *stream);

/* ---- PSF sink: tile modes (tile16 / tile32) ---------------------------- */
/** Most references one accumulation task takes; longer tile lists are cut. */
#define HIPKERN_PSF_SEGMENT 256
/** hipkern_psf_tile_task.partial of a tile with one segment (writes the pixel). */
#define HIPKERN_PSF_DIRECT_TASK 0xFFFFFFFFu
/** Side of the centre tiles the adaptive selection counts events in. */
#define HIPKERN_PSF_CENTRE_TILE 32
/** Most events of one tile-mode chunk (event indices fit the tasks' event bitmask). */
#define HIPKERN_PSF_MAX_CHUNK_EVENTS 16384
/** Device bytes hipkern_psf_tile_scratch.prepared needs per event. */
#define HIPKERN_PSF_PREPARED_EVENT_BYTES 280

/** One accumulation task: references start .. start + count of tile `tile`. */
typedef struct hipkern_psf_tile_task {
  /** Tile index, ty * ceil(width / tile) + tx. */
  uint32_t tile;
  /** First reference (index into hipkern_psf_tile_scratch.references). */
  uint32_t start;
  /** References, 1..=HIPKERN_PSF_SEGMENT. */
  uint32_t count;
  /** Partial-sum slot, or HIPKERN_PSF_DIRECT_TASK when segments == 1. */
  uint32_t partial;
  /** Segment of its tile's list, 0-based. */
  uint32_t segment;
  /** Segments of its tile's list. */
  uint32_t segments;
} hipkern_psf_tile_task;

/** What the binning pass of one chunk found (written by hipkern_psf_tile_bin). */
typedef struct hipkern_psf_bin_totals {
  /** Tile references (event, tile) of the chunk. */
  uint64_t references;
  /** Tasks: sum over tiles of ceil(list / 256). */
  uint64_t tasks;
  /** Partial-sum slots: tasks of the tiles with more than one segment. */
  uint64_t partial_slots;
  /** Tiles with a non-empty list. */
  uint64_t occupied_tiles;
  /** Longest tile list. */
  uint64_t longest_list;
  /** Events whose centre (x, y) lies on the image. */
  uint64_t centre_events;
  /** 32 x 32 centre tiles holding at least one of them. */
  uint64_t centre_tiles;
  /** Capacity bits: 1 references, 2 tasks, 4 partials (0: everything fits). */
  uint64_t overflow;
} hipkern_psf_bin_totals;

/**
 * Device scratch of the tile modes, allocated once by the caller.
 * prepared: prepared_events x HIPKERN_PSF_PREPARED_EVENT_BYTES bytes.
 * tile_ends: ceil(width / tile) * ceil(height / tile) uint32 (the list
 *   starts during binning; afterwards each tile's list end, below bit 20;
 *   after an accumulation with device lists and merge, a tile with several
 *   segments also holds their count above bit 20).
 * references / tasks / partials: capacities in elements (partials in slots
 *   of tile * tile * 3 float64).
 * centre_marks: ceil(width / 32) * ceil(height / 32) uint32, zero when
 *   allocated; census_serial must differ from every serial used before
 *   with the same marks (and not be 0).
 * totals: one hipkern_psf_bin_totals. counters: 3 uint64 the passes add
 *   to (events with contributions, events without, contributions); the
 *   caller zeroes them.
 */
typedef struct hipkern_psf_tile_scratch {
  void *prepared;
  int64_t prepared_events;
  uint32_t *tile_ends;
  uint32_t *references;
  uint64_t references_capacity;
  hipkern_psf_tile_task *tasks;
  uint64_t tasks_capacity;
  double *partials;
  uint64_t partial_slots_capacity;
  uint32_t *centre_marks;
  hipkern_psf_bin_totals *totals;
  uint64_t *counters;
} hipkern_psf_tile_scratch;

/**
 * The binning pass of one tile-mode chunk (n_events <= 16384): checks the
 * events as hipkern_psf_splat_atomic does (into *report), prepares them
 * (anchor, stamp, blend weights, colour products, per-row spans, in-image
 * box; the counters; the centre-tile census into totals), and when
 * device_lists != 0 counts the references per tile (a tile gets an event
 * when a pixel of the event's clipped support lies in it) and scans them
 * into list starts and tasks. totals->overflow says which capacity the
 * chunk exceeds; nothing past the check is written then. tile is 16 or 32.
 * With device_lists == 0 the caller supplies tile_ends, references and
 * tasks itself (host binning, same lists) before hipkern_psf_tile_accumulate.
 * Asynchronous on `stream`: read totals after the stream has passed it.
 */
int32_t hipkern_psf_tile_bin(const double *events, int64_t n_events, int32_t phases,
                             int32_t width, int32_t height, int32_t tile, int32_t device_lists,
                             uint32_t census_serial, const hipkern_psf_tile_scratch *scratch,
                             uint64_t *report, void *stream);

/**
 * The accumulation of one binned chunk: with device_lists, scatters the
 * event indices into the lists (in any order; each task takes its share of
 * its tile's list in event order); then one block per task (n_tasks =
 * totals->tasks), one thread per pixel, adds the task's events to the pixel
 * in list order (a tile's first task starts from the image's value),
 * writing the pixel (one segment) or its partial slot. With merge != 0 the
 * partials of each tile with several segments are summed in segment order
 * into the pixel: with device lists by the tile's last task to finish
 * (tile_ends' words count a tile's finished tasks above bit 20, and keep
 * the count: accumulate once per binning), with host lists by a second
 * kernel; merge must be nonzero whenever totals->partial_slots is. No
 * atomics on the image: the result is bitwise the same on every run with
 * the same chunks. Does nothing when *report says an event was refused or
 * (device_lists) totals->overflow is set.
 */
int32_t hipkern_psf_tile_accumulate(const double *stamps, int32_t phases, double *image,
                                    int32_t width, int32_t height, int32_t tile,
                                    int32_t device_lists, int64_t n_events, uint64_t n_tasks,
                                    int32_t merge, const hipkern_psf_tile_scratch *scratch,
                                    const uint64_t *report, void *stream);

/**
 * The contribution counters of n_events checked events (adds to
 * counters[0..3] as hipkern_psf_tile_bin does); for the atomic mode.
 */
int32_t hipkern_psf_count(const double *events, int64_t n_events, int32_t width, int32_t height,
                          uint64_t *counters, const uint64_t *report, void *stream);

/* ---- PSF sink: the direct path (docs/design/psf.md#direct-path) ------------ */
/** Largest support the direct path takes, pixels (offsets stay exact in float64). */
#define HIPKERN_PSF_MAX_DIRECT_SUPPORT 1e12

/** A circular Moffat PSF of unit flux (src/psf/model.rs: MoffatPsf). */
typedef struct hipkern_psf_moffat {
  /** Full width at half maximum, pixels, 0.5..=1000. */
  double fwhm;
  /** Moffat exponent, 1.1..=100. */
  double beta;
  /** Flux fraction outside the support radius, 1e-15..=0.5. */
  double tail;
} hipkern_psf_moffat;

/**
 * The direct path: adds n_events star events of any support (up to
 * HIPKERN_PSF_MAX_DIRECT_SUPPORT, so also those the stamps cannot hold)
 * into the image without the cache. Each support pixel (the same pixels
 * as hipkern_psf_splat_atomic's rule, clipped to the image) gets the PSF
 * integrated over it by tensor Gauss-Legendre (8, 6 or 4 nodes per axis
 * as the pixel's nearest point lies within 4 px, 12 px or beyond:
 * MoffatPsf::pixel_integral) at the pixel centre relative to the event,
 * times flux*r, flux*g, flux*b. One thread per pixel adds the events in
 * their order (no atomics): the result is the same bits on every run, and
 * the float64 CPU reference's up to the device's pow (a few ulp per
 * value).
 *
 * events: n_events x 7 float64 (as hipkern_psf_splat_atomic), device.
 * psf: host memory, read during the call. HIPKERN_ERROR_INVALID_ARGUMENT
 *   for a field out of its range (or not finite).
 * image: height x width x 3 float64, device; added to.
 * report: as hipkern_psf_splat_atomic's. A first kernel checks every event
 *   (fields finite, flux and colours >= 0, 0 < support <=
 *   HIPKERN_PSF_MAX_DIRECT_SUPPORT) and atomicMin's the index of each bad
 *   one into it; the render then adds nothing.
 *
 * n_events == 0 is a no-op. Work grows with the image's 16 x 16 tiles
 * times the events (each tile skips an event whose support misses it) plus
 * the support pixels: meant for the few large events of a frame.
 * Asynchronous on `stream`; no host allocation, no synchronization.
 */
int32_t hipkern_psf_render_direct(const double *events, int64_t n_events,
                                  const hipkern_psf_moffat *psf, double *image, int32_t width,
                                  int32_t height, uint64_t *report, void *stream);

/* ---- PSF producers (docs/design/psf.md#producers) ----------------------- */
/*
 * Many threads feeding the atomic splat (a C/OpenMP renderer: one producer
 * per thread). A hub owns a fixed set of page-locked chunk buffers, all
 * allocated by hipkern_psf_hub_create, and one worker thread that applies
 * chunks in arrival order on the configured stream: upload, splat
 * (hipkern_psf_splat_atomic), read the device's verdict, synchronize. A
 * producer checks its events and copies them into its own buffer with no
 * lock; a full buffer goes to the hub's queue and the producer takes a free
 * one, waiting (never allocating) when none is free.
 *
 * Errors reach the producer whose events caused them. push refuses, all or
 * none, a call holding an event with a field not finite, flux or a colour
 * negative or support not positive: it returns
 * HIPKERN_ERROR_INVALID_ARGUMENT with *bad_event = that event's number
 * among all the producer's pushed events (0, 1, ...). An event whose
 * support does not fit the stamps (the device's own check,
 * hipkern_psf_splat_atomic; a support of 48 px or more is refused by push
 * itself) is found when its chunk is applied: that
 * event alone is left out, and the producer's next push, flush or destroy
 * returns HIPKERN_ERROR_INVALID_ARGUMENT with its number (taking none of
 * that push's events: push again). An error of the runtime is returned the
 * same way (*bad_event = -1); the hub then applies no later chunk and
 * hipkern_psf_hub_finish returns it.
 *
 * The image is the sum of every accepted event's contributions in an order
 * that varies from run to run (float64 atomics); the Rust SinkHub adds the
 * tile modes and a reproducible sequence order. One producer is used by
 * one thread at a time; different producers, and the hub's create and
 * finish, may run on different threads at once.
 */
typedef struct hipkern_psf_hub hipkern_psf_hub;
typedef struct hipkern_psf_producer hipkern_psf_producer;

/** What a hub splats into: the caller's memory and stream, alive until it is destroyed. */
typedef struct hipkern_psf_hub_config {
  /** The phase cache (device), as hipkern_psf_splat_atomic reads it. */
  const double *stamps;
  int32_t phases;
  /** height x width x 3 float64 (device), added to. */
  double *image;
  int32_t width;
  int32_t height;
  /** Events per chunk, 1 .. HIPKERN_PSF_MAX_CHUNK_EVENTS. */
  int64_t chunk_events;
  /**
   * Chunk buffers, 2 .. 1024 (chunk_events x 56 bytes each, page-locked);
   * the hub takes at most buffers - 1 producers at once.
   */
  int32_t buffers;
  /** The stream every upload and splat runs on (NULL: the default stream). */
  void *stream;
} hipkern_psf_hub_config;

/** What a hub did, and where its time went (seconds, host clock). */
typedef struct hipkern_psf_hub_stats {
  int64_t chunks;
  int64_t events;
  /** Events left out: refused by the device, or after a runtime error. */
  int64_t refused_events;
  /** Times a producer found no free buffer. */
  int64_t buffer_waits;
  int64_t max_queued;
  /** Producers' time waiting for a buffer, summed. */
  double buffer_wait_s;
  /** The worker's time applying chunks (uploads, splats, verdicts), and waiting for one. */
  double sink_busy_s;
  double sink_idle_s;
} hipkern_psf_hub_stats;

/** A hub over `config` (checked: pointers, phases 1..=1024, sizes >= 1, the limits above). */
int32_t hipkern_psf_hub_create(const hipkern_psf_hub_config *config, hipkern_psf_hub **hub);
/** A producer of `hub` (HIPKERN_ERROR_INVALID_ARGUMENT beyond buffers - 1 live ones). */
int32_t hipkern_psf_producer_create(hipkern_psf_hub *hub, hipkern_psf_producer **producer);
/**
 * Adds n_events events (n x 7 float64, host: x, y, flux, r, g, b, support),
 * all or none (see above). *bad_event (may be NULL) is -1 unless an event
 * is named.
 */
int32_t hipkern_psf_producer_push(hipkern_psf_producer *producer, const double *events,
                                  int64_t n_events, int64_t *bad_event);
/**
 * Hands over the events the producer holds, waits until the worker has
 * applied every chunk of this producer, and returns its first unread
 * refusal (as push does).
 */
int32_t hipkern_psf_producer_flush(hipkern_psf_producer *producer, int64_t *bad_event);
/** Flushes and frees the producer; returns its first unread refusal. NULL is a no-op. */
int32_t hipkern_psf_producer_destroy(hipkern_psf_producer *producer);
/**
 * Waits until every queued chunk is applied (the image is then complete on
 * the stream, which is synchronized) and fills *stats (may be NULL).
 * HIPKERN_ERROR_INVALID_ARGUMENT, changing nothing, while a producer of the
 * hub is alive; else the first runtime error any chunk met, or success.
 */
int32_t hipkern_psf_hub_finish(hipkern_psf_hub *hub, hipkern_psf_hub_stats *stats);
/** Applies what is queued, stops the worker, frees the hub (refused while producers live). */
int32_t hipkern_psf_hub_destroy(hipkern_psf_hub *hub);

#ifdef __cplusplus
}
#endif

#endif /* HIPKERN_PSF_H */
