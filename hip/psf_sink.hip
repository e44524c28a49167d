// The PSF sink's `atomic` mode (SPEC §7): star events splatted into an RGB
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
//     no shared memory, no barrier).
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
//     with `#pragma clang fp contract(off)` for this file (HIP-Clang's
//     default -ffp-contract=fast-honor-pragmas honours it), plain operators
//     and __builtin_sqrt, which the AMDGPU backend expands to a correctly
//     rounded square root (no afn flag: no fast-math).
// floor/ceil are exact everywhere. Only the order of the atomic sums into a
// pixel differs from the CPU's.
#include "hipkern_port.h"
#include "hipkern.h"

// nvcc (__NVCC__ is defined under hipcc on NVIDIA too) or clang HIP.
#if defined(__NVCC__) || defined(__HIP_PLATFORM_NVIDIA__)
#define HIPKERN_PSF_NVCC 1
#else
#pragma clang fp contract(off)
#endif

namespace {

constexpr int kRadius = HIPKERN_PSF_CACHE_RADIUS;
constexpr int kSide = HIPKERN_PSF_STAMP_SIDE;
constexpr size_t kStampPixels = static_cast<size_t>(kSide) * kSide;
constexpr int kFields = HIPKERN_PSF_EVENT_FIELDS;
constexpr unsigned kSplatBlock = 256;
constexpr unsigned kGroup = 32;  // threads per row group
constexpr unsigned kCheckBlock = 256;
constexpr int64_t kMaxBlocks = 65535;
constexpr unsigned long long kNone = ~0ull;
// No support from 48.5 px on fits the stamps; the check refuses supports
// beyond this before any integer arithmetic (it keeps the row search short).
constexpr double kMaxCachedSupport = 64.0;

#if defined(HIPKERN_PSF_NVCC)
__device__ __forceinline__ double hk_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double hk_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double hk_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double hk_sqrt(double a) { return __dsqrt_rn(a); }
#else
__device__ __forceinline__ double hk_add(double a, double b) { return a + b; }
__device__ __forceinline__ double hk_sub(double a, double b) { return a - b; }
__device__ __forceinline__ double hk_mul(double a, double b) { return a * b; }
__device__ __forceinline__ double hk_sqrt(double a) { return __builtin_sqrt(a); }
#endif

// h2 = s·s − dy·dy of row offset oy, dy = (oy + ½) − fy (support.rs row_h2).
__device__ __forceinline__ double row_h2(double fy, double s, int64_t oy) {
  const double dy = hk_sub(hk_add(static_cast<double>(oy), 0.5), fy);
  return hk_sub(hk_mul(s, s), hk_mul(dy, dy));
}

// Row oy's inclusive column offsets (support.rs row_span); false when the
// row is not in the support or its range is empty.
__device__ __forceinline__ bool row_span(double fx, double fy, double s, int64_t oy, int64_t *lo,
                                         int64_t *hi) {
  const double h2 = row_h2(fy, s, oy);
  if (!(h2 >= 0.0)) return false;  // negative or NaN
  const double w = hk_sqrt(h2);
  const double c = hk_sub(fx, 0.5);
  *lo = static_cast<int64_t>(ceil(hk_sub(c, w)));
  *hi = static_cast<int64_t>(floor(hk_add(c, w)));
  return *lo <= *hi;
}

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
