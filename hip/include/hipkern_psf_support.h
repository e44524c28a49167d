// Internal to the PSF kernels (psf_sink.hip, psf_direct.hip): the support
// contract's float64 steps (src/psf/support.rs), each one correctly rounded
// IEEE operation, never contracted into a fused multiply-add (psf_sink.hip's
// header says how on each compiler). Include it first after hipkern.h: on
// clang HIP its pragma turns contraction off for the rest of the file.
#ifndef HIPKERN_PSF_SUPPORT_H
#define HIPKERN_PSF_SUPPORT_H

#include "hipkern_port.h"

// nvcc (__NVCC__ is defined under hipcc on NVIDIA too) or clang HIP.
#if defined(__NVCC__) || defined(__HIP_PLATFORM_NVIDIA__)
#define HIPKERN_PSF_NVCC 1
#else
#pragma clang fp contract(off)
#endif

namespace {

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

}  // namespace

#endif  // HIPKERN_PSF_SUPPORT_H
