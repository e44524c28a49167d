// The PSF sink's `atomic` mode (docs/design/psf.md#tiles): star events splatted into an RGB
// float64 image through the phase cache, with float64 atomicAdd.
//
// hipkern_psf_splat_atomic launches two kernels on the caller's stream:
//
//   psf_check: one thread per event; every field finite, flux and colours
//     >= 0, support > 0, and the support within the stamps (exactly
//     PsfCache::fits). The index of each bad event is atomicMin'd into the
//     caller's report word.
//   psf_splat: one block of kSplatBlock threads per event (grid-stride over
//     the events). It does nothing when the report word says an event was
//     bad, so a rejected call adds nothing. The block's threads form row
//     groups of kGroup consecutive threads: group g takes the support rows
//     oy_lo + g, oy_lo + g + groups, ...; within a row the group's lanes
//     take consecutive columns (so stamp reads are coalesced, the image's
//     RGB triples nearly so). Every thread computes the event's anchor,
//     phase, blend weights and row range itself (a few float64 operations;
//     no shared memory, no barrier, no cross-lane operation: a row group is
//     a split of the work, not a warp, and is right at any warp width).
//
// Bit-identical to the CPU sink (src/psf/support.rs, cache.rs,
// reference.rs): every float64 step of the row ranges, the blend weights,
// the blended value and the colour products is one correctly rounded IEEE
// operation in the CPU's order, never contracted into a fused multiply-add:
//   - under nvcc (plain, through hipkern_port.h, or under hipcc on NVIDIA)
//     through the __dadd_rn/__dsub_rn/__dmul_rn/__dsqrt_rn intrinsics,
//     which CUDA documents are never merged into an FMA (nvcc's --fmad=true
//     default would otherwise fuse a*b + c);
//   - under clang HIP (AMD), whose __dmul_rn & co. are plain operators,
//     with `#pragma clang fp contract(off)` for this file (in the header) (HIP-Clang's
//     default -ffp-contract=fast-honor-pragmas honours it), plain operators
//     and __builtin_sqrt, which the AMDGPU backend expands to a correctly
//     rounded square root (no afn flag: no fast-math).
// floor/ceil are exact everywhere. Only the order of the atomic sums into a
// pixel differs from the CPU's.
// (The uncontracted operations and the row ranges: hipkern_psf_support.h.)
#include "hipkern_port.h"
#include "hipkern.h"
#include "hipkern_psf_support.h"

namespace {

constexpr int kRadius = HIPKERN_PSF_CACHE_RADIUS;
constexpr int kSide = HIPKERN_PSF_STAMP_SIDE;
constexpr size_t kStampPixels = static_cast<size_t>(kSide) * kSide;
constexpr int kFields = HIPKERN_PSF_EVENT_FIELDS;
constexpr unsigned kSplatBlock = 256;
// Threads per row group: a work split only (psf_splat has no shuffle, no
// barrier, no shared memory), so correct at every warp width. 32 so a
// group's consecutive columns are one NVIDIA / wave32 warp's coalesced
// reads; on wave64 a wavefront takes two row groups (two rows of the same
// event, whose column loops differ only in their trip counts).
constexpr unsigned kGroup = 32;
static_assert(kSplatBlock % kGroup == 0, "whole row groups per block");
constexpr unsigned kCheckBlock = 256;
constexpr int64_t kMaxBlocks = 65535;
constexpr unsigned long long kNone = ~0ull;
// No support from 48.5 px on fits the stamps; the check refuses supports
// beyond this before any integer arithmetic (it keeps the row search short).
constexpr double kMaxCachedSupport = 64.0;

// The inclusive row offsets with h2 >= 0 (support.rs support_rows); s must
// be at most kMaxCachedSupport (the loops then take a step or two).
__device__ __forceinline__ bool support_rows(double fy, double s, int64_t *lo, int64_t *hi) {
  if (!(row_h2(fy, s, 0) >= 0.0)) return false;
  const double c = hk_sub(fy, 0.5);
  int64_t l = static_cast<int64_t>(ceil(hk_sub(c, s)));
  int64_t h = static_cast<int64_t>(floor(hk_add(c, s)));
  if (l > 0) l = 0;
  if (h < 0) h = 0;
  while (row_h2(fy, s, l - 1) >= 0.0) --l;
  while (row_h2(fy, s, l) < 0.0) ++l;
  while (row_h2(fy, s, h + 1) >= 0.0) ++h;
  while (row_h2(fy, s, h) < 0.0) --h;
  *lo = l;
  *hi = h;
  return true;
}

// StarEvent::validate and PsfCache::fits in one.
__device__ bool event_ok(const double *e) {
  for (int f = 0; f < kFields; ++f)
    if (!isfinite(e[f])) return false;
  if (e[2] < 0.0 || e[3] < 0.0 || e[4] < 0.0 || e[5] < 0.0) return false;
  const double s = e[6];
  if (!(s > 0.0)) return false;
  if (s > kMaxCachedSupport) return false;
  const double fx = hk_sub(e[0], floor(e[0]));
  const double fy = hk_sub(e[1], floor(e[1]));
  int64_t oy_lo, oy_hi, ox_lo, ox_hi;
  if (!support_rows(fy, s, &oy_lo, &oy_hi)) return true;  // no pixel centre at all
  if (!row_span(fx, fy, s, 0, &ox_lo, &ox_hi)) return true;
  return oy_lo >= -kRadius && oy_hi <= kRadius && ox_lo >= -kRadius && ox_hi <= kRadius;
}

__global__ void psf_check(const double *__restrict__ events, int64_t n_events,
                          unsigned long long *report) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n_events;
       k += stride)
    if (!event_ok(events + kFields * k)) atomicMin(report, static_cast<unsigned long long>(k));
}

// The bracketing stamp index and weight of one phase coordinate
// (PsfCache::blend_weights): g = f·P, i0 = min(max(⌊g⌋, 0), P − 1), t = g − i0.
__device__ __forceinline__ int split_phase(double f, int phases, double *t) {
  const double g = hk_mul(f, static_cast<double>(phases));
  double fl = floor(g);
  if (fl < 0.0) fl = 0.0;
  int i0 = static_cast<int>(fl);
  if (i0 > phases - 1) i0 = phases - 1;
  *t = hk_sub(g, static_cast<double>(i0));
  return i0;
}

__global__ void __launch_bounds__(kSplatBlock)
    psf_splat(const double *__restrict__ events, int64_t n_events,
              const double *__restrict__ stamps, int phases, double *image, int width, int height,
              const unsigned long long *report) {
  if (*report != kNone) return;  // a bad event in this call (or an earlier one): add nothing
  const int group = static_cast<int>(threadIdx.x / kGroup);
  const int lane = static_cast<int>(threadIdx.x % kGroup);
  const int groups = static_cast<int>(blockDim.x / kGroup);
  const double wd = static_cast<double>(width), hd = static_cast<double>(height);
  for (int64_t k = blockIdx.x; k < n_events; k += gridDim.x) {
    const double *e = events + kFields * k;
    const double x = e[0], y = e[1], s = e[6];
    // Clearly outside (reference.rs place): skipped before any integer
    // arithmetic, exactly as the CPU does.
    if (hk_add(hk_add(x, s), 1.0) < 0.0 || hk_sub(hk_sub(x, s), 1.0) > wd ||
        hk_add(hk_add(y, s), 1.0) < 0.0 || hk_sub(hk_sub(y, s), 1.0) > hd)
      continue;
    const double flx = floor(x), fly = floor(y);
    const int64_t ax = static_cast<int64_t>(flx), ay = static_cast<int64_t>(fly);
    const double fx = hk_sub(x, flx), fy = hk_sub(y, fly);
    int64_t oy_lo, oy_hi;
    if (!support_rows(fy, s, &oy_lo, &oy_hi)) continue;
    if (oy_lo < -ay) oy_lo = -ay;
    if (oy_hi > height - 1 - ay) oy_hi = height - 1 - ay;
    if (oy_lo > oy_hi) continue;
    double tx, ty;
    const int i0 = split_phase(fx, phases, &tx);
    const int j0 = split_phase(fy, phases, &ty);
    const double ux = hk_sub(1.0, tx), uy = hk_sub(1.0, ty);
    const double w00 = hk_mul(ux, uy), w10 = hk_mul(tx, uy), w01 = hk_mul(ux, ty),
                 w11 = hk_mul(tx, ty);
    const size_t row_stamps = static_cast<size_t>(phases) + 1;
    const double *s00 = stamps + (static_cast<size_t>(j0) * row_stamps + i0) * kStampPixels;
    const double *s10 = s00 + kStampPixels;
    const double *s01 = s00 + row_stamps * kStampPixels;
    const double *s11 = s01 + kStampPixels;
    const double flux = e[2];
    const double cr = hk_mul(flux, e[3]), cg = hk_mul(flux, e[4]), cb = hk_mul(flux, e[5]);
    const double c = hk_sub(fx, 0.5);
    for (int64_t oy = oy_lo + group; oy <= oy_hi; oy += groups) {
      const double h2 = row_h2(fy, s, oy);
      if (!(h2 >= 0.0)) continue;
      const double w = hk_sqrt(h2);
      const int64_t lo = static_cast<int64_t>(ceil(hk_sub(c, w)));
      const int64_t hi = static_cast<int64_t>(floor(hk_add(c, w)));
      // Checked events never leave the stamp (row 0 is the widest row and
      // psf_check bounded it); this only keeps reads in bounds regardless.
      if (lo < -kRadius || hi > kRadius || oy < -kRadius || oy > kRadius) continue;
      const int64_t ix_lo = ax + lo < 0 ? 0 : ax + lo;
      const int64_t ix_hi = ax + hi > width - 1 ? width - 1 : ax + hi;
      if (ix_lo > ix_hi) continue;
      const int n = static_cast<int>(ix_hi - ix_lo + 1);
      const size_t q0 = static_cast<size_t>(oy + kRadius) * kSide +
                        static_cast<size_t>(ix_lo - ax + kRadius);
      double *px0 = image + (static_cast<size_t>(ay + oy) * width + static_cast<size_t>(ix_lo)) * 3;
      for (int t = lane; t < n; t += kGroup) {
        const size_t q = q0 + t;
        const double v = hk_add(hk_add(hk_add(hk_mul(w00, s00[q]), hk_mul(w10, s10[q])),
                                       hk_mul(w01, s01[q])),
                                hk_mul(w11, s11[q]));
        double *px = px0 + 3 * static_cast<size_t>(t);
        atomicAdd(px, hk_mul(v, cr));
        atomicAdd(px + 1, hk_mul(v, cg));
        atomicAdd(px + 2, hk_mul(v, cb));
      }
    }
  }
}


// ---- tile modes (tile16 / tile32) ---------------------------------------
//
// Per chunk (hipkern_psf_tile_bin, then hipkern_psf_tile_accumulate):
//   psf_prepare   one event group (kEventGroup threads) per event, the
//                 group's threads taking its rows: the event's anchor, stamp
//                 offset, blend weights, colour products, the 95 per-row
//                 column spans (offsets, int8) and the bounding box of its
//                 in-image pixels; the contribution counters and the
//                 centre-tile census of the adaptive mode. With device
//                 lists, the group's threads then take its tiles: +1 on
//                 every tile its support reaches (per tile row band: the
//                 widest row of the band, since the spans are nested about
//                 row 0).
//   psf_tile_scan one block: exclusive scan of the counts into list starts,
//                 the totals, the capacity check, and the tasks (a tile's
//                 list in segments of <= kSegment references; a tile with
//                 one segment writes its pixels directly, the others write
//                 partial sums into their own slots).
//   psf_tile_scatter  one event group per event, its tiles as prepare counts
//                 them: the event's index into each tile's
//                 list through the start (used as a cursor; afterwards it
//                 holds the list's end).
//   psf_tile_accumulate  one block per task, one thread per pixel of the
//                 tile: the task's events (with device lists, its share of
//                 the tile's list in event order, so that the order never
//                 depends on the scatter's atomics) staged in shared memory,
//                 then added to the pixel in list order (CPU order), the
//                 pixel read first when the task is its tile's first. With
//                 device lists, the last of a tile's tasks to finish sums
//                 the tile's partials into its pixels in segment order.
//   psf_tile_merge  (host lists) one block per tile with partial sums: the
//                 pixel is the sum of its partials in segment order.
// No atomics touch the image; the counts' atomics only count.
constexpr unsigned kSegment = HIPKERN_PSF_SEGMENT;
constexpr uint32_t kDirectTask = HIPKERN_PSF_DIRECT_TASK;
constexpr int kCentreTile = HIPKERN_PSF_CENTRE_TILE;
constexpr int kMaxChunk = HIPKERN_PSF_MAX_CHUNK_EVENTS;
constexpr unsigned kScanBlock = 1024;
constexpr int kRowSlots = 96;  // 95 rows, padded
// Threads per event in psf_prepare (and its tile counts) and psf_tile_scatter:
// a work split only (they meet through shared memory across
// __syncthreads), so right at any warp width. One thread per event left
// 16,384 threads for the chunk, too few to hide the 96 rows' float64
// latency: on the H100 (dense fixture, tile32, 2026-12-07) prepare took
// 86 us, count 47 us and scatter 55 us a chunk that way.
constexpr int kEventGroup = 32;
constexpr int kGroupsPerBlock = static_cast<int>(kCheckBlock) / kEventGroup;
static_assert(kCheckBlock % kEventGroup == 0, "whole event groups per block");
static_assert(kRowSlots % kEventGroup == 0, "every thread of a group takes as many rows");
// Tile columns one row band of an event reaches at most: 95 px at tile 16,
// the smallest tile the entry points take (16 and 32).
constexpr int kBandColumns = 8;
static_assert((2 * HIPKERN_PSF_CACHE_RADIUS + 16 - 1) / 16 + 1 <= kBandColumns,
              "a band's columns fit kBandColumns");
static_assert((HIPKERN_PSF_MAX_CHUNK_EVENTS + kGroupsPerBlock - 1) / kGroupsPerBlock <=
                  kMaxBlocks,
              "one block per kGroupsPerBlock events of a chunk");

struct Prepared {
  double w[4];       // blend weights w00, w10, w01, w11
  double col[3];     // flux·r, flux·g, flux·b
  int64_t stamp;     // element offset of stamp (i0, j0); -1: the event adds nothing
  int32_t ax, ay;    // anchor
  int32_t px_lo, px_hi, py_lo, py_hi;  // in-image pixels it touches (inclusive)
};
static_assert(sizeof(Prepared) + 2 * kRowSlots == HIPKERN_PSF_PREPARED_EVENT_BYTES,
              "prepared event size");

struct RowSpan {
  int8_t lo, hi;
};

__device__ __forceinline__ Prepared *prepared_of(void *base) {
  return static_cast<Prepared *>(base);
}
__device__ __forceinline__ RowSpan *rows_of(void *base, int64_t capacity) {
  return reinterpret_cast<RowSpan *>(static_cast<char *>(base) + capacity * sizeof(Prepared));
}

// Calls f(tile) for every tile of side `tile` the event's in-image pixels
// reach, band by band (rows ty·tile .. ty·tile + tile − 1): the band's
// columns are those of its row nearest the anchor row (the widest: spans
// shrink monotonically away from row 0), clipped to the image. The
// (band, column) pairs are dealt to the threads of an event group: thread
// `lane` of kEventGroup takes pairs lane, lane + kEventGroup, ...
// (ax, ay): the anchor; py_lo .. py_hi: the in-image rows the event's
// pixels reach (an event with pixels on the image).
template <typename F>
__device__ __forceinline__ void for_each_tile(int ax, int ay, int py_lo, int py_hi,
                                              const RowSpan *rows, int tile, int width, int lane,
                                              F f) {
  const int ntx = (width + tile - 1) / tile;
  const int ty_lo = py_lo / tile;
  const int pairs = (py_hi / tile - ty_lo + 1) * kBandColumns;
  for (int i = lane; i < pairs; i += kEventGroup) {
    const int ty = ty_lo + i / kBandColumns;
    int b_lo = ty * tile, b_hi = ty * tile + tile - 1;
    if (b_lo < py_lo) b_lo = py_lo;
    if (b_hi > py_hi) b_hi = py_hi;
    int oy = 0;
    if (oy < b_lo - ay) oy = b_lo - ay;
    if (oy > b_hi - ay) oy = b_hi - ay;
    const RowSpan sp = rows[oy + kRadius];
    int a = ax + sp.lo, b = ax + sp.hi;
    if (a < 0) a = 0;
    if (b > width - 1) b = width - 1;
    const int tx = a / tile + i % kBandColumns;
    if (a <= b && tx <= b / tile) f(static_cast<uint32_t>(ty * ntx + tx));
  }
}

__global__ void __launch_bounds__(kCheckBlock)
    psf_prepare(const double *__restrict__ events, int64_t n_events, int phases, int width,
                int height, void *prepared_base, int64_t capacity, uint32_t *centre_marks,
                uint32_t census_serial, hipkern_psf_bin_totals *totals, uint64_t *counters,
                int tile, uint32_t *tile_ends, const unsigned long long *report) {
  // Per event of the block: its in-image pixels, and their bounding box.
  __shared__ int32_t s_n[kGroupsPerBlock];
  __shared__ int32_t s_px_lo[kGroupsPerBlock], s_px_hi[kGroupsPerBlock];
  __shared__ int32_t s_py_lo[kGroupsPerBlock], s_py_hi[kGroupsPerBlock];
  // The block's counts, added to the chunk's once per block: with one
  // global atomic per event on the same few words this kernel took 47 us
  // a dense chunk on the H100, 29 us without.
  __shared__ unsigned long long s_count[5];  // placed, outside, contributions, centre events, tiles
  if (*report != kNone) return;  // the same for every thread: before any barrier
  const int g = static_cast<int>(threadIdx.x) / kEventGroup;
  const int lane = static_cast<int>(threadIdx.x) % kEventGroup;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kGroupsPerBlock + g;
  const bool valid = k < n_events;
  if (threadIdx.x < 5) s_count[threadIdx.x] = 0;
  if (lane == 0) {
    s_n[g] = 0;
    s_px_lo[g] = s_py_lo[g] = INT32_MAX;
    s_px_hi[g] = s_py_hi[g] = INT32_MIN;
  }
  __syncthreads();
  const double *e = events + kFields * (valid ? k : 0);
  const double x = e[0], y = e[1], s = e[6];
  const double wd = static_cast<double>(width), hd = static_cast<double>(height);
  const bool inside = !(hk_add(hk_add(x, s), 1.0) < 0.0 || hk_sub(hk_sub(x, s), 1.0) > wd ||
                        hk_add(hk_add(y, s), 1.0) < 0.0 || hk_sub(hk_sub(y, s), 1.0) > hd);
  const double flx = floor(x), fly = floor(y);
  // Only an event near the image has an anchor that fits int64.
  const int64_t ax = inside ? static_cast<int64_t>(flx) : 0;
  const int64_t ay = inside ? static_cast<int64_t>(fly) : 0;
  const double fx = hk_sub(x, flx), fy = hk_sub(y, fly);
  if (valid) {
    RowSpan *rows = rows_of(prepared_base, capacity) + k * kRowSlots;
    int32_t n = 0, px_lo = INT32_MAX, px_hi = INT32_MIN, py_lo = INT32_MAX, py_hi = INT32_MIN;
    for (int r = lane; r < kRowSlots; r += kEventGroup) {
      RowSpan span{127, -128};
      int64_t lo, hi;
      const int64_t oy = r - kRadius;
      if (inside && r < kSide && row_span(fx, fy, s, oy, &lo, &hi) && lo >= -kRadius &&
          hi <= kRadius) {
        span.lo = static_cast<int8_t>(lo);
        span.hi = static_cast<int8_t>(hi);
        const int64_t py = ay + oy;
        const int64_t a = ax + lo < 0 ? 0 : ax + lo;
        const int64_t b = ax + hi > width - 1 ? width - 1 : ax + hi;
        if (py >= 0 && py < height && a <= b) {
          // a, b and py are clamped into the image, whose sides are int32.
          n += static_cast<int32_t>(b - a + 1);
          if (py < py_lo) py_lo = static_cast<int32_t>(py);
          if (py > py_hi) py_hi = static_cast<int32_t>(py);
          if (a < px_lo) px_lo = static_cast<int32_t>(a);
          if (b > px_hi) px_hi = static_cast<int32_t>(b);
        }
      }
      rows[r] = span;
    }
    if (n > 0) {
      atomicAdd(&s_n[g], n);
      atomicMin(&s_px_lo[g], px_lo);
      atomicMax(&s_px_hi[g], px_hi);
      atomicMin(&s_py_lo[g], py_lo);
      atomicMax(&s_py_hi[g], py_hi);
    }
  }
  __syncthreads();
  if (tile_ends && valid && s_n[g] > 0) {
    // The tile counts of device lists: +1 on every tile the event's support
    // reaches, its rows (written above) visible to the block after the
    // barrier. A kernel of its own re-read the prepared events and took
    // 28 us a dense chunk on the H100; counted here, the dense fixture's
    // binning took 0.245 ms instead of 0.335 (tile32, 2026-12-08).
    for_each_tile(static_cast<int32_t>(ax), static_cast<int32_t>(ay), s_py_lo[g], s_py_hi[g],
                  rows_of(prepared_base, capacity) + k * kRowSlots, tile, width, lane,
                  [&](uint32_t t) { atomicAdd(&tile_ends[t], 1u); });
  }
  if (valid && lane == 0) {
    // Centre-tile census (fixtures::centre_tiles): events whose centre is on
    // the image. A tile already marked this chunk is not exchanged again.
    if (x >= 0.0 && y >= 0.0 && x < wd && y < hd) {
      const int ntx = (width + kCentreTile - 1) / kCentreTile;
      const int t = (static_cast<int>(floor(y)) / kCentreTile) * ntx +
                    static_cast<int>(floor(x)) / kCentreTile;
      atomicAdd(&s_count[3], 1ull);
      if (*static_cast<volatile uint32_t *>(&centre_marks[t]) != census_serial &&
          atomicExch(&centre_marks[t], census_serial) != census_serial)
        atomicAdd(&s_count[4], 1ull);
    }
    const int32_t n = s_n[g];
    Prepared p;
    p.stamp = -1;
    p.ax = p.ay = 0;
    p.px_lo = p.py_lo = 1;
    p.px_hi = p.py_hi = 0;
    for (int c = 0; c < 4; ++c) p.w[c] = 0.0;
    for (int c = 0; c < 3; ++c) p.col[c] = 0.0;
    if (n > 0) {
      double tx, ty;
      const int i0 = split_phase(fx, phases, &tx);
      const int j0 = split_phase(fy, phases, &ty);
      const double ux = hk_sub(1.0, tx), uy = hk_sub(1.0, ty);
      p.w[0] = hk_mul(ux, uy);
      p.w[1] = hk_mul(tx, uy);
      p.w[2] = hk_mul(ux, ty);
      p.w[3] = hk_mul(tx, ty);
      const double flux = e[2];
      p.col[0] = hk_mul(flux, e[3]);
      p.col[1] = hk_mul(flux, e[4]);
      p.col[2] = hk_mul(flux, e[5]);
      p.stamp = static_cast<int64_t>(static_cast<size_t>(j0) * (phases + 1) + i0) *
                static_cast<int64_t>(kStampPixels);
      p.ax = static_cast<int32_t>(ax);
      p.ay = static_cast<int32_t>(ay);
      p.px_lo = s_px_lo[g];
      p.px_hi = s_px_hi[g];
      p.py_lo = s_py_lo[g];
      p.py_hi = s_py_hi[g];
      atomicAdd(&s_count[0], 1ull);
      atomicAdd(&s_count[2], static_cast<unsigned long long>(n));
    } else {
      atomicAdd(&s_count[1], 1ull);
    }
    prepared_of(prepared_base)[k] = p;
  }
  __syncthreads();
  if (threadIdx.x < 5 && s_count[threadIdx.x] != 0) {
    unsigned long long *to =
        threadIdx.x < 3 ? reinterpret_cast<unsigned long long *>(&counters[threadIdx.x])
        : threadIdx.x == 3
            ? reinterpret_cast<unsigned long long *>(&totals->centre_events)
            : reinterpret_cast<unsigned long long *>(&totals->centre_tiles);
    atomicAdd(to, s_count[threadIdx.x]);
  }
}

// Exclusive scan of N values per thread over the block, in shared memory
// (Hillis–Steele, one barrier per step for all N); every thread calls it.
// buf holds N × blockDim.x values; in place, v[j] becomes thread t's
// exclusive prefix of value j, total[j] the sum. (The scan kernel's four
// single scans took 22 us a dense chunk on the H100; four at once, 21 us:
// the block's serial tile loops are most of it.)
template <int N>
__device__ void block_exclusive_scan(uint64_t v[N], uint64_t *buf, uint64_t total[N]) {
  const unsigned t = threadIdx.x, n = blockDim.x;
  for (int j = 0; j < N; ++j) buf[j * n + t] = v[j];
  __syncthreads();
  for (unsigned off = 1; off < n; off <<= 1) {
    uint64_t add[N];
    for (int j = 0; j < N; ++j) add[j] = t >= off ? buf[j * n + t - off] : 0;
    __syncthreads();
    for (int j = 0; j < N; ++j) buf[j * n + t] += add[j];
    __syncthreads();
  }
  for (int j = 0; j < N; ++j) {
    total[j] = buf[j * n + n - 1];
    v[j] = buf[j * n + t] - v[j];
  }
  __syncthreads();
}

__device__ __forceinline__ uint64_t tasks_of(uint64_t n) {
  return (n + kSegment - 1) / kSegment;
}

__global__ void __launch_bounds__(kScanBlock)
    psf_tile_scan(uint32_t n_tiles, uint32_t *tile_ends, hipkern_psf_tile_task *tasks,
                  uint64_t references_capacity, uint64_t tasks_capacity,
                  uint64_t partial_slots_capacity, hipkern_psf_bin_totals *totals,
                  const unsigned long long *report) {
  __shared__ uint64_t buf[4 * kScanBlock];
  __shared__ uint64_t longest[kScanBlock];
  if (*report != kNone) return;
  const unsigned t = threadIdx.x;
  const uint32_t per = (n_tiles + kScanBlock - 1) / kScanBlock;
  const uint32_t first = t * per < n_tiles ? t * per : n_tiles;
  const uint32_t last = first + per < n_tiles ? first + per : n_tiles;
  uint64_t refs = 0, ntasks = 0, slots = 0, occupied = 0, top = 0;
  for (uint32_t i = first; i < last; ++i) {
    const uint64_t n = tile_ends[i];
    refs += n;
    ntasks += tasks_of(n);
    if (n > kSegment) slots += tasks_of(n);
    if (n > 0) ++occupied;
    if (n > top) top = n;
  }
  uint64_t first_of[4] = {refs, ntasks, slots, occupied}, totals_of[4];
  block_exclusive_scan<4>(first_of, buf, totals_of);
  const uint64_t ref0 = first_of[0], task0 = first_of[1], slot0 = first_of[2];
  const uint64_t total_refs = totals_of[0], total_tasks = totals_of[1];
  const uint64_t total_slots = totals_of[2], total_occupied = totals_of[3];
  longest[t] = top;
  __syncthreads();
  for (unsigned off = kScanBlock / 2; off > 0; off >>= 1) {
    if (t < off && longest[t + off] > longest[t]) longest[t] = longest[t + off];
    __syncthreads();
  }
  uint64_t overflow = 0;
  if (total_refs > references_capacity) overflow |= 1;
  if (total_tasks > tasks_capacity) overflow |= 2;
  if (total_slots > partial_slots_capacity) overflow |= 4;
  if (total_refs > 0xFFFFFFFFull) overflow |= 1;
  if (t == 0) {
    totals->references = total_refs;
    totals->tasks = total_tasks;
    totals->partial_slots = total_slots;
    totals->occupied_tiles = total_occupied;
    totals->longest_list = longest[0];
    totals->overflow = overflow;
  }
  if (overflow) return;  // nothing past the check is written
  uint64_t ref = ref0, task = task0, slot = slot0;
  for (uint32_t i = first; i < last; ++i) {
    const uint64_t n = tile_ends[i];
    tile_ends[i] = static_cast<uint32_t>(ref);  // the scatter's cursor
    const uint64_t m = tasks_of(n);
    for (uint64_t seg = 0; seg < m; ++seg) {
      hipkern_psf_tile_task tk;
      tk.tile = i;
      tk.start = static_cast<uint32_t>(ref + seg * kSegment);
      const uint64_t left = n - seg * kSegment;
      tk.count = static_cast<uint32_t>(left < kSegment ? left : kSegment);
      tk.partial = m > 1 ? static_cast<uint32_t>(slot + seg) : kDirectTask;
      tk.segment = static_cast<uint32_t>(seg);
      tk.segments = static_cast<uint32_t>(m);
      tasks[task + seg] = tk;
    }
    ref += n;
    task += m;
    if (m > 1) slot += m;
  }
}

__global__ void __launch_bounds__(kCheckBlock)
    psf_tile_scatter(int64_t n_events, int tile, int width, void *prepared_base, int64_t capacity,
                     uint32_t *tile_ends, uint32_t *references,
                     const hipkern_psf_bin_totals *totals, const unsigned long long *report) {
  if (*report != kNone || totals->overflow) return;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kGroupsPerBlock +
                    static_cast<int>(threadIdx.x) / kEventGroup;
  if (k >= n_events) return;
  const Prepared p = prepared_of(prepared_base)[k];
  if (p.stamp < 0) return;  // no pixel on the image
  const RowSpan *rows = rows_of(prepared_base, capacity) + k * kRowSlots;
  for_each_tile(p.ax, p.ay, p.py_lo, p.py_hi, rows, tile, width,
                static_cast<int>(threadIdx.x) % kEventGroup, [&](uint32_t t) {
                  references[atomicAdd(&tile_ends[t], 1u)] = static_cast<uint32_t>(k);
                });
}

// tile × tile threads; kMaxTile = 32. Blocks of 256 or 1024 threads (whole
// warps and wavefronts), one thread per pixel; threads exchange data only
// through shared memory across __syncthreads: correct at any warp width.
constexpr int kMaxTile = 32;

// With device lists, tile_ends[t] holds list t's end below bit
// kArrivalShift and, above it, how many of the tile's partial tasks have
// finished: a list's end is at most kMaxChunk events × 49 tiles (an event
// reaches at most 7 × 7 tiles of 16 px), below 2^20, and a tile has at
// most kMaxChunk / kSegment tasks. The binning zeroes the words per chunk.
constexpr int kArrivalShift = 20;
constexpr uint32_t kEndMask = (1u << kArrivalShift) - 1;
constexpr uint32_t kArrival = 1u << kArrivalShift;
static_assert(static_cast<int64_t>(kMaxChunk) * 49 <= kEndMask, "list ends below bit 20");
static_assert(kMaxChunk / kSegment < (1 << (32 - kArrivalShift)), "arrivals above bit 20");

// A task's events in list (event) order into s_ref. With device lists the
// scatter left the tile's list in any order: the task's share is ranks
// segment × kSegment .. + count of the list's events, found from a bitmask
// of the chunk's events (event k is bit k % 32 of word k / 32; these 32s
// are a uint32_t's bits, not lanes). Host lists come in order. (A sort
// kernel, one block per tile before the accumulation, took 37 us a dense
// chunk on the H100; done here by every task, the dense fixture's
// accumulation took 5.82 ms against 5.87 with the sort kernel, tile32,
// 2026-12-08; the dispersed fixture's, two events a tile, about 0.1 ms
// more, repaid by its binning.)
__device__ void task_events(const hipkern_psf_tile_task &tk, const uint32_t *references,
                            const uint32_t *tile_ends, bool device_lists, uint32_t *s_ref,
                            uint32_t *s_mask, uint64_t *s_scan) {
  constexpr int kWordBits = 32;
  constexpr int kWords = kMaxChunk / kWordBits;
  const unsigned t = threadIdx.x;
  const int count = static_cast<int>(tk.count);
  if (!device_lists) {
    for (int i = t; i < count; i += blockDim.x) s_ref[i] = references[tk.start + i];
    return;
  }
  const uint32_t list_start = tk.start - tk.segment * kSegment;
  const uint32_t list_len = (tile_ends[tk.tile] & kEndMask) - list_start;
  for (int w = t; w < kWords; w += blockDim.x) s_mask[w] = 0;
  __syncthreads();
  for (uint32_t i = t; i < list_len; i += blockDim.x) {
    const uint32_t k = references[list_start + i];
    atomicOr(&s_mask[k / kWordBits], 1u << (k % kWordBits));
  }
  __syncthreads();
  const int per = (kWords + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int w0 = static_cast<int>(t) * per;
  const int w1 = w0 + per < kWords ? w0 + per : kWords;
  uint64_t mine = 0;
  for (int w = w0; w < w1; ++w) mine += __popc(s_mask[w]);
  uint64_t at[1] = {mine}, total[1];
  block_exclusive_scan<1>(at, s_scan, total);
  const uint64_t lo = static_cast<uint64_t>(tk.segment) * kSegment, hi = lo + count;
  uint64_t rank = at[0];
  for (int w = w0; w < w1 && rank < hi; ++w) {
    uint32_t bits = s_mask[w];
    if (rank + __popc(bits) <= lo) {
      rank += __popc(bits);
      continue;
    }
    while (bits && rank < hi) {
      const int b = __ffs(bits) - 1;
      bits &= bits - 1;
      if (rank >= lo) s_ref[rank - lo] = static_cast<uint32_t>(w * kWordBits + b);
      ++rank;
    }
  }
}

// A pixel's value from its tile's partial sums, first at p, `slot` apart:
// their sum in segment order. Volatile reads: the tile's other tasks wrote
// them (through L2, never this SM's L1).
__device__ __forceinline__ void merge_partials(const volatile double *p, uint32_t segments,
                                               size_t slot, double *pixel) {
  double a0 = p[0], a1 = p[1], a2 = p[2];
  for (uint32_t sg = 1; sg < segments; ++sg) {
    const volatile double *q = p + sg * slot;
    a0 = hk_add(a0, q[0]);
    a1 = hk_add(a1, q[1]);
    a2 = hk_add(a2, q[2]);
  }
  pixel[0] = a0;
  pixel[1] = a1;
  pixel[2] = a2;
}

__global__ void __launch_bounds__(kMaxTile * kMaxTile)
    psf_tile_accumulate(uint64_t n_tasks, int tile, const hipkern_psf_tile_task *tasks,
                        const uint32_t *references, void *prepared_base, int64_t capacity,
                        const double *__restrict__ stamps, int phases, double *image, int width,
                        int height, double *partials, int device_lists, int merge_here,
                        uint32_t *tile_ends, const hipkern_psf_bin_totals *totals,
                        const unsigned long long *report) {
  __shared__ uint32_t s_ref[kSegment];  // the task's events, in list order
  __shared__ uint32_t s_mask[kMaxChunk / 32];
  __shared__ uint64_t s_scan[kMaxTile * kMaxTile];
  __shared__ double s_w[kSegment][4];
  __shared__ double s_col[kSegment][3];
  __shared__ int64_t s_stamp[kSegment];
  __shared__ int32_t s_ax[kSegment], s_ay[kSegment];
  __shared__ RowSpan s_rows[kSegment][kMaxTile];
  __shared__ bool s_last;
  if (*report != kNone) return;
  if (device_lists && (totals->overflow || blockIdx.x >= totals->tasks)) return;
  if (blockIdx.x >= n_tasks) return;
  const hipkern_psf_tile_task tk = tasks[blockIdx.x];
  const int ntx = (width + tile - 1) / tile;
  const int tx0 = static_cast<int>(tk.tile % ntx) * tile;
  const int ty0 = static_cast<int>(tk.tile / ntx) * tile;
  const Prepared *pp = prepared_of(prepared_base);
  const RowSpan *all_rows = rows_of(prepared_base, capacity);
  const int count = static_cast<int>(tk.count);
  task_events(tk, references, tile_ends, device_lists != 0, s_ref, s_mask, s_scan);
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    const Prepared &p = pp[s_ref[i]];
    for (int c = 0; c < 4; ++c) s_w[i][c] = p.w[c];
    for (int c = 0; c < 3; ++c) s_col[i][c] = p.col[c];
    s_stamp[i] = p.stamp;
    s_ax[i] = p.ax;
    s_ay[i] = p.ay;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < count * tile; idx += blockDim.x) {
    const int i = idx / tile, r = idx % tile;
    const int oy = ty0 + r - s_ay[i];
    RowSpan sp{127, -128};
    if (s_stamp[i] >= 0 && oy >= -kRadius && oy <= kRadius)
      sp = all_rows[static_cast<int64_t>(s_ref[i]) * kRowSlots + oy + kRadius];
    s_rows[i][r] = sp;
  }
  __syncthreads();
  const int r = threadIdx.x / tile, c = threadIdx.x % tile;
  const int px = tx0 + c, py = ty0 + r;
  // (Threads off the image stay for the merge's barriers below.)
  const bool on_image = px < width && py < height;
  double *pixel = image + (on_image ? (static_cast<size_t>(py) * width + px) * 3 : 0);
  double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0;
  if (on_image && tk.segment == 0) {
    acc0 = pixel[0];
    acc1 = pixel[1];
    acc2 = pixel[2];
  }
  // kEventsInFlight events' stamp values are loaded before the first of
  // them is added (the sums stay in list order), so each thread has that
  // many events' loads in flight. On the H100 (dense fixture, tile32,
  // 2026-12-07) the accumulation took 6.72 ms with one event at a time
  // (73 % of the DRAM peak), 6.15 ms with 2 and 5.94 ms with 4 (84 %);
  // 8 spills registers.
  constexpr int kEventsInFlight = 4;
  // Adds event j's blended value (stamp values a00, a10, a01, a11) to the
  // pixel, in the CPU's order of operations.
  auto add = [&](int j, double a00, double a10, double a01, double a11) {
    const double v = hk_add(hk_add(hk_add(hk_mul(s_w[j][0], a00), hk_mul(s_w[j][1], a10)),
                                   hk_mul(s_w[j][2], a01)),
                            hk_mul(s_w[j][3], a11));
    acc0 = hk_add(acc0, hk_mul(v, s_col[j][0]));
    acc1 = hk_add(acc1, hk_mul(v, s_col[j][1]));
    acc2 = hk_add(acc2, hk_mul(v, s_col[j][2]));
  };
  // Event j's first stamp value's address for this pixel, or null when the
  // pixel is not in its support.
  auto first_stamp = [&](int j) -> const double * {
    const RowSpan sp = s_rows[j][r];
    const int ox = px - s_ax[j];
    if (ox < sp.lo || ox > sp.hi) return nullptr;
    const int oy = py - s_ay[j];
    return stamps + s_stamp[j] + static_cast<size_t>(oy + kRadius) * kSide +
           static_cast<size_t>(ox + kRadius);
  };
  const size_t next_row = (static_cast<size_t>(phases) + 1) * kStampPixels;  // s00 to s01
  const int events = on_image ? count : 0;
  int i = 0;
  for (; i + kEventsInFlight <= events; i += kEventsInFlight) {
    double a[kEventsInFlight][4];
    bool on[kEventsInFlight];
#pragma unroll
    for (int u = 0; u < kEventsInFlight; ++u) {
      const double *s00 = first_stamp(i + u);
      on[u] = s00 != nullptr;
      if (on[u]) {
        a[u][0] = s00[0];
        a[u][1] = s00[kStampPixels];
        a[u][2] = s00[next_row];
        a[u][3] = s00[next_row + kStampPixels];
      }
    }
#pragma unroll
    for (int u = 0; u < kEventsInFlight; ++u)
      if (on[u]) add(i + u, a[u][0], a[u][1], a[u][2], a[u][3]);
  }
  for (; i < events; ++i) {
    const double *s00 = first_stamp(i);
    if (s00)
      add(i, s00[0], s00[kStampPixels], s00[next_row], s00[next_row + kStampPixels]);
  }
  if (tk.partial == kDirectTask) {
    if (on_image) {
      pixel[0] = acc0;
      pixel[1] = acc1;
      pixel[2] = acc2;
    }
    return;
  }
  const size_t slot = static_cast<size_t>(tile) * tile * 3;
  double *out = partials + static_cast<size_t>(tk.partial) * slot + threadIdx.x * 3;
  out[0] = acc0;
  out[1] = acc1;
  out[2] = acc2;
  if (!merge_here) return;  // psf_tile_merge sums the partials
  // The tile's last task to finish sums its partials into the pixels, in
  // segment order (the merge kernel's sums, bit for bit): each task's
  // partials are made visible before it counts itself in. The merge kernel
  // took 28 us a dense chunk on the H100, most of its blocks idle; here the
  // dense fixture's accumulation took 5.75 ms against 5.82 (tile32,
  // 2026-12-08).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    s_last = (atomicAdd(&tile_ends[tk.tile], kArrival) >> kArrivalShift) == tk.segments - 1;
  __syncthreads();
  if (!s_last || !on_image) return;
  __threadfence();
  merge_partials(partials + static_cast<size_t>(tk.partial - tk.segment) * slot + threadIdx.x * 3,
                 tk.segments, slot, pixel);
}

// Host lists: one block per tile with partial sums (its first task).
__global__ void __launch_bounds__(kMaxTile * kMaxTile)
    psf_tile_merge(uint64_t n_tasks, int tile, const hipkern_psf_tile_task *tasks,
                   double *image, int width, int height, const double *partials,
                   const unsigned long long *report) {
  if (*report != kNone) return;
  if (blockIdx.x >= n_tasks) return;
  const hipkern_psf_tile_task tk = tasks[blockIdx.x];
  if (tk.segment != 0 || tk.partial == kDirectTask) return;
  const int ntx = (width + tile - 1) / tile;
  const int px = static_cast<int>(tk.tile % ntx) * tile + static_cast<int>(threadIdx.x) % tile;
  const int py = static_cast<int>(tk.tile / ntx) * tile + static_cast<int>(threadIdx.x) / tile;
  if (px >= width || py >= height) return;
  const size_t slot = static_cast<size_t>(tile) * tile * 3;
  merge_partials(partials + static_cast<size_t>(tk.partial) * slot + threadIdx.x * 3, tk.segments,
                 slot, image + (static_cast<size_t>(py) * width + px) * 3);
}

// The contribution counters of the atomic mode (the same counts psf_prepare makes).
__global__ void psf_count(const double *__restrict__ events, int64_t n_events, int width,
                          int height, uint64_t *counters, const unsigned long long *report) {
  if (*report != kNone) return;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n_events) return;
  const double *e = events + kFields * k;
  const double x = e[0], y = e[1], s = e[6];
  const double wd = static_cast<double>(width), hd = static_cast<double>(height);
  uint64_t n = 0;
  if (!(hk_add(hk_add(x, s), 1.0) < 0.0 || hk_sub(hk_sub(x, s), 1.0) > wd ||
        hk_add(hk_add(y, s), 1.0) < 0.0 || hk_sub(hk_sub(y, s), 1.0) > hd)) {
    const double flx = floor(x), fly = floor(y);
    const int64_t ax = static_cast<int64_t>(flx), ay = static_cast<int64_t>(fly);
    const double fx = hk_sub(x, flx), fy = hk_sub(y, fly);
    for (int64_t oy = -kRadius; oy <= kRadius; ++oy) {
      int64_t lo, hi;
      const int64_t py = ay + oy;
      if (py < 0 || py >= height || !row_span(fx, fy, s, oy, &lo, &hi)) continue;
      const int64_t a = ax + lo < 0 ? 0 : ax + lo;
      const int64_t b = ax + hi > width - 1 ? width - 1 : ax + hi;
      if (a <= b) n += static_cast<uint64_t>(b - a + 1);
    }
  }
  if (n > 0) {
    atomicAdd(reinterpret_cast<unsigned long long *>(&counters[0]), 1ull);
    atomicAdd(reinterpret_cast<unsigned long long *>(&counters[2]),
              static_cast<unsigned long long>(n));
  } else {
    atomicAdd(reinterpret_cast<unsigned long long *>(&counters[1]), 1ull);
  }
}

unsigned grid_for(int64_t items, unsigned per_block) {
  const int64_t b = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

}  // namespace

extern "C" {

int32_t hipkern_psf_splat_atomic(const double *events, int64_t n_events, const double *stamps,
                                 int32_t phases, double *image, int32_t width, int32_t height,
                                 uint64_t *report, void *stream) {
  if (n_events < 0 || phases < 1 || phases > 1024 || width < 1 || height < 1 || !report)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_events > INT64_MAX / (kFields * 8)) return HIPKERN_ERROR_OVERFLOW;
  if (n_events == 0) return HIPKERN_SUCCESS;
  if (!events || !stamps || !image) return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  unsigned long long *rep = reinterpret_cast<unsigned long long *>(report);
  (void)hipGetLastError();  // a stale error must not be reported as ours
  psf_check<<<grid_for(n_events, kCheckBlock), kCheckBlock, 0, s>>>(events, n_events, rep);
  hipError_t e = hipGetLastError();
  if (e != hipSuccess) return static_cast<int32_t>(e);
  psf_splat<<<grid_for(n_events, 1), kSplatBlock, 0, s>>>(events, n_events, stamps, phases, image,
                                                          width, height, rep);
  return static_cast<int32_t>(hipGetLastError());
}

}  // extern "C"

extern "C" {

int32_t hipkern_psf_tile_bin(const double *events, int64_t n_events, int32_t phases,
                             int32_t width, int32_t height, int32_t tile, int32_t device_lists,
                             uint32_t census_serial, const hipkern_psf_tile_scratch *scratch,
                             uint64_t *report, void *stream) {
  if (n_events < 0 || n_events > kMaxChunk || phases < 1 || phases > 1024 || width < 1 ||
      height < 1 || !report || !scratch || (tile != 16 && tile != 32))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_psf_tile_scratch sc = *scratch;
  if (!sc.totals || !sc.counters || !sc.centre_marks || !sc.prepared ||
      sc.prepared_events < n_events || (device_lists && (!sc.tile_ends || !sc.tasks)))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  (void)hipGetLastError();
  hipError_t e = hipMemsetAsync(sc.totals, 0, sizeof(hipkern_psf_bin_totals), s);
  if (e != hipSuccess) return static_cast<int32_t>(e);
  const uint32_t n_tiles = static_cast<uint32_t>(((width + tile - 1) / tile)) *
                           static_cast<uint32_t>((height + tile - 1) / tile);
  if (device_lists) {
    e = hipMemsetAsync(sc.tile_ends, 0, sizeof(uint32_t) * n_tiles, s);
    if (e != hipSuccess) return static_cast<int32_t>(e);
  }
  if (n_events == 0) return HIPKERN_SUCCESS;
  if (!events) return HIPKERN_ERROR_INVALID_ARGUMENT;
  unsigned long long *rep = reinterpret_cast<unsigned long long *>(report);
  psf_check<<<grid_for(n_events, kCheckBlock), kCheckBlock, 0, s>>>(events, n_events, rep);
  psf_prepare<<<grid_for(n_events, kGroupsPerBlock), kCheckBlock, 0, s>>>(
      events, n_events, phases, width, height, sc.prepared, sc.prepared_events, sc.centre_marks,
      census_serial, sc.totals, sc.counters, tile, device_lists ? sc.tile_ends : nullptr, rep);
  if (device_lists) {
    psf_tile_scan<<<1, kScanBlock, 0, s>>>(n_tiles, sc.tile_ends, sc.tasks,
                                           sc.references_capacity, sc.tasks_capacity,
                                           sc.partial_slots_capacity, sc.totals, rep);
  }
  return static_cast<int32_t>(hipGetLastError());
}

int32_t hipkern_psf_tile_accumulate(const double *stamps, int32_t phases, double *image,
                                    int32_t width, int32_t height, int32_t tile,
                                    int32_t device_lists, int64_t n_events, uint64_t n_tasks,
                                    int32_t merge, const hipkern_psf_tile_scratch *scratch,
                                    const uint64_t *report, void *stream) {
  if (n_events < 0 || n_events > kMaxChunk || phases < 1 || phases > 1024 || width < 1 ||
      height < 1 || !report || !scratch || (tile != 16 && tile != 32) || !stamps || !image)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_psf_tile_scratch sc = *scratch;
  if (!sc.totals || !sc.prepared || !sc.tile_ends || !sc.tasks || !sc.references ||
      sc.prepared_events < n_events || n_tasks > sc.tasks_capacity || n_tasks > 0x7FFFFFFFull ||
      (merge && !sc.partials))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_tasks == 0) return HIPKERN_SUCCESS;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const unsigned long long *rep = reinterpret_cast<const unsigned long long *>(report);
  (void)hipGetLastError();
  const unsigned grid = static_cast<unsigned>(n_tasks);
  if (device_lists)
    psf_tile_scatter<<<grid_for(n_events, kGroupsPerBlock), kCheckBlock, 0, s>>>(
        n_events, tile, width, sc.prepared, sc.prepared_events, sc.tile_ends, sc.references,
        sc.totals, rep);
  const bool fused_merge = device_lists && merge;
  const unsigned threads = static_cast<unsigned>(tile * tile);
  psf_tile_accumulate<<<grid, threads, 0, s>>>(
      n_tasks, tile, sc.tasks, sc.references, sc.prepared, sc.prepared_events, stamps, phases,
      image, width, height, sc.partials, device_lists, fused_merge ? 1 : 0, sc.tile_ends, sc.totals,
      rep);
  if (merge && !fused_merge)
    psf_tile_merge<<<grid, threads, 0, s>>>(n_tasks, tile, sc.tasks, image, width, height,
                                            sc.partials, rep);
  return static_cast<int32_t>(hipGetLastError());
}

int32_t hipkern_psf_count(const double *events, int64_t n_events, int32_t width, int32_t height,
                          uint64_t *counters, const uint64_t *report, void *stream) {
  if (n_events < 0 || width < 1 || height < 1 || !report || !counters)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_events > INT64_MAX / (kFields * 8)) return HIPKERN_ERROR_OVERFLOW;
  if (n_events == 0) return HIPKERN_SUCCESS;
  if (!events) return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  (void)hipGetLastError();
  psf_count<<<grid_for(n_events, kCheckBlock), kCheckBlock, 0, s>>>(
      events, n_events, width, height, counters,
      reinterpret_cast<const unsigned long long *>(report));
  return static_cast<int32_t>(hipGetLastError());
}

}  // extern "C"
