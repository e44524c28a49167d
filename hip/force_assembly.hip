// Force / virial assembly from per-edge gradients (SPEC §4).
//
// hipkern_force_assemble: two segment-reduction launches over a CSR plan
// (dst order, then src order), each output row owned by one group of lanes,
// 3 force + 9 virial float64 accumulators in registers, the outer product
// recomputed per edge, no atomics. The src launch adds its sums to what the
// dst launch wrote; the order of every addition is fixed: bitwise
// reproducible.
//
// hipkern_force_assemble_atomic: the reference path the field uses
// (materialised E×9 outer product, then atomic scatters of force and
// virial to both endpoints) in the input precision, for comparison and as
// the benchmark's peer.
#include "hipkern_port.h"
#include "hipkern.h"

namespace {

constexpr unsigned kRowBlock = 128;
constexpr unsigned kEdgeBlock = 256;

// One row per group of LANES consecutive lanes of a warp: lane l sums
// edges begin+l, begin+l+LANES, ...; a fixed xor-butterfly then adds the
// lanes' partial sums, so the order of additions is fixed by the plan and
// LANES alone (bitwise reproducible). Several lanes per row keep several
// gathered loads in flight per row, which the memory system needs.
// Lanes past the last row run an empty segment: every lane of the warp
// takes part in the shuffles.
template <typename T, int LANES>
__global__ void segment_pass(const T *__restrict__ g, const T *__restrict__ r,
                             const int32_t *__restrict__ order, const int32_t *__restrict__ row_ptr,
                             int32_t n_rows, double force_sign, double virial_weight, bool first,
                             double *__restrict__ force, double *__restrict__ virial) {
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t row = tid / LANES;
  const int lane = static_cast<int>(tid % LANES);
  const bool live = row < static_cast<size_t>(n_rows);
  const int32_t begin = live ? row_ptr[row] : 0, end = live ? row_ptr[row + 1] : 0;
  const bool with_virial = virial_weight != 0.0;
  double acc[12];
#pragma unroll
  for (int c = 0; c < 12; ++c) acc[c] = 0.0;
  for (int32_t j = begin + lane; j < end; j += LANES) {
    const size_t e = static_cast<size_t>(order[j]);
    const double g0 = (double)g[3 * e], g1 = (double)g[3 * e + 1], g2 = (double)g[3 * e + 2];
    acc[0] += g0;
    acc[1] += g1;
    acc[2] += g2;
    if (with_virial) {
      const double gg[3] = {g0, g1, g2};
      const double rr[3] = {(double)r[3 * e], (double)r[3 * e + 1], (double)r[3 * e + 2]};
#pragma unroll
      for (int a = 0; a < 3; ++a)
#pragma unroll
        for (int b = 0; b < 3; ++b) acc[3 + 3 * a + b] -= gg[a] * rr[b];
    }
  }
#pragma unroll
  for (int m = LANES / 2; m > 0; m /= 2)
#pragma unroll
    for (int c = 0; c < 12; ++c) acc[c] += HIPKERN_SHFL_XOR(acc[c], m);
  if (!live || lane != 0) return;
  double *f = force + 3 * row;
  double *w = virial + 9 * row;
  for (int c = 0; c < 3; ++c) f[c] = (first ? 0.0 : f[c]) + force_sign * acc[c];
  for (int c = 0; c < 9; ++c) w[c] = (first ? 0.0 : w[c]) + virial_weight * acc[3 + c];
}

// Lanes per row from the mean segment length: about 8 edges per lane,
// between 1 and 32 lanes (a power of two, so groups never straddle a warp).
int lanes_for(int64_t n_edges, int32_t n_rows) {
  const int64_t mean = n_rows > 0 ? n_edges / n_rows : 0;
  int lanes = 1;
  while (lanes < 32 && lanes * 8 < mean) lanes *= 2;
  return lanes;
}

template <typename T, int LANES>
hipError_t launch_pass(const T *g, const T *r, const int32_t *order, const int32_t *row_ptr,
                       int32_t n_rows, double sign, double wv, bool first, double *force,
                       double *virial, hipStream_t s) {
  const size_t threads = static_cast<size_t>(n_rows) * LANES;
  const unsigned blocks = static_cast<unsigned>((threads + kRowBlock - 1) / kRowBlock);
  segment_pass<T, LANES><<<blocks, kRowBlock, 0, s>>>(g, r, order, row_ptr, n_rows, sign, wv, first,
                                                      force, virial);
  return hipGetLastError();
}

template <typename T>
hipError_t pass(int lanes, const T *g, const T *r, const int32_t *order, const int32_t *row_ptr,
                int32_t n_rows, double sign, double wv, bool first, double *force, double *virial,
                hipStream_t s) {
  switch (lanes) {
    case 1: return launch_pass<T, 1>(g, r, order, row_ptr, n_rows, sign, wv, first, force, virial, s);
    case 2: return launch_pass<T, 2>(g, r, order, row_ptr, n_rows, sign, wv, first, force, virial, s);
    case 4: return launch_pass<T, 4>(g, r, order, row_ptr, n_rows, sign, wv, first, force, virial, s);
    case 8: return launch_pass<T, 8>(g, r, order, row_ptr, n_rows, sign, wv, first, force, virial, s);
    case 16: return launch_pass<T, 16>(g, r, order, row_ptr, n_rows, sign, wv, first, force, virial, s);
    default: return launch_pass<T, 32>(g, r, order, row_ptr, n_rows, sign, wv, first, force, virial, s);
  }
}

template <typename T>
int32_t assemble(const T *g, const T *r, int64_t n_edges, const int32_t *dst_order,
                 const int32_t *dst_row_ptr, const int32_t *src_order, const int32_t *src_row_ptr,
                 int32_t n_rows, hipkern_virial_split split, double *force, double *virial,
                 hipStream_t s) {
  const double w_dst = split == HIPKERN_VIRIAL_HALF ? 0.5 : 0.0;
  const double w_src = split == HIPKERN_VIRIAL_HALF ? 0.5 : 1.0;
  const int lanes = lanes_for(n_edges, n_rows);
  (void)hipGetLastError();
  hipError_t e = pass<T>(lanes, g, r, dst_order, dst_row_ptr, n_rows, 1.0, w_dst, true, force,
                         virial, s);
  if (e != hipSuccess) return static_cast<int32_t>(e);
  e = pass<T>(lanes, g, r, src_order, src_row_ptr, n_rows, -1.0, w_src, false, force, virial, s);
  return static_cast<int32_t>(e);
}

template <typename T>
__global__ void outer_product(const T *__restrict__ g, const T *__restrict__ r, size_t n_edges,
                              T *__restrict__ outer) {
  size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_edges) return;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) outer[9 * e + 3 * a + b] = -g[3 * e + a] * r[3 * e + b];
}

template <typename T>
__global__ void atomic_scatter(const T *__restrict__ g, const T *__restrict__ outer,
                               const int32_t *__restrict__ src, const int32_t *__restrict__ dst,
                               size_t n_edges, T w_dst, T w_src, T *force, T *virial) {
  size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_edges) return;
  const size_t d = static_cast<size_t>(dst[e]), s = static_cast<size_t>(src[e]);
  for (int a = 0; a < 3; ++a) {
    atomicAdd(&force[3 * d + a], g[3 * e + a]);
    atomicAdd(&force[3 * s + a], -g[3 * e + a]);
  }
  for (int c = 0; c < 9; ++c) {
    if (w_dst != T(0)) atomicAdd(&virial[9 * d + c], w_dst * outer[9 * e + c]);
    atomicAdd(&virial[9 * s + c], w_src * outer[9 * e + c]);
  }
}

template <typename T>
int32_t assemble_atomic(const T *g, const T *r, const int32_t *src, const int32_t *dst,
                        size_t n_edges, int32_t n_rows, hipkern_virial_split split, T *outer,
                        T *force, T *virial, hipStream_t s) {
  (void)hipGetLastError();
  hipError_t e = hipMemsetAsync(force, 0, 3 * sizeof(T) * (size_t)n_rows, s);
  if (e == hipSuccess) e = hipMemsetAsync(virial, 0, 9 * sizeof(T) * (size_t)n_rows, s);
  if (e != hipSuccess) return static_cast<int32_t>(e);
  if (n_edges == 0) return HIPKERN_SUCCESS;
  const size_t blocks = (n_edges + kEdgeBlock - 1) / kEdgeBlock;
  outer_product<T><<<static_cast<unsigned>(blocks), kEdgeBlock, 0, s>>>(g, r, n_edges, outer);
  e = hipGetLastError();
  if (e != hipSuccess) return static_cast<int32_t>(e);
  const T w_dst = split == HIPKERN_VIRIAL_HALF ? T(0.5) : T(0);
  const T w_src = split == HIPKERN_VIRIAL_HALF ? T(0.5) : T(1);
  atomic_scatter<T><<<static_cast<unsigned>(blocks), kEdgeBlock, 0, s>>>(g, outer, src, dst, n_edges,
                                                                        w_dst, w_src, force, virial);
  return static_cast<int32_t>(hipGetLastError());
}

bool valid_split(hipkern_virial_split s) {
  return s == HIPKERN_VIRIAL_HALF || s == HIPKERN_VIRIAL_SRC;
}

}  // namespace

extern "C" {

int32_t hipkern_force_assemble(hipkern_dtype dtype, const void *g, const void *edge_vec,
                               int64_t n_edges, const int32_t *dst_order,
                               const int32_t *dst_row_ptr, const int32_t *src_order,
                               const int32_t *src_row_ptr, int32_t n_rows,
                               hipkern_virial_split split, double *force, double *virial,
                               void *stream) {
  if (n_rows < 0 || n_edges < 0 || n_edges > INT32_MAX || !valid_split(split))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_rows == 0) return HIPKERN_SUCCESS;
  if (!dst_row_ptr || !src_row_ptr || !force || !virial) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_edges > 0 && (!g || !edge_vec || !dst_order || !src_order))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  hipStream_t s = static_cast<hipStream_t>(stream);
  switch (dtype) {
    case HIPKERN_DTYPE_F32:
      return assemble<float>(static_cast<const float *>(g), static_cast<const float *>(edge_vec),
                             n_edges, dst_order, dst_row_ptr, src_order, src_row_ptr, n_rows, split, force,
                             virial, s);
    case HIPKERN_DTYPE_F64:
      return assemble<double>(static_cast<const double *>(g),
                              static_cast<const double *>(edge_vec), n_edges, dst_order, dst_row_ptr,
                              src_order, src_row_ptr, n_rows, split, force, virial, s);
  }
  return HIPKERN_ERROR_INVALID_ARGUMENT;
}

int32_t hipkern_force_assemble_atomic(hipkern_dtype dtype, const void *g, const void *edge_vec,
                                      const int32_t *src, const int32_t *dst, int64_t n_edges,
                                      int32_t n_rows, hipkern_virial_split split,
                                      void *outer_scratch, void *force, void *virial,
                                      void *stream) {
  if (n_rows < 0 || n_edges < 0 || !valid_split(split)) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_rows == 0) return HIPKERN_SUCCESS;
  if (!force || !virial) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_edges > 0 && (!g || !edge_vec || !src || !dst || !outer_scratch))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  hipStream_t s = static_cast<hipStream_t>(stream);
  const size_t e = static_cast<size_t>(n_edges);
  switch (dtype) {
    case HIPKERN_DTYPE_F32:
      return assemble_atomic<float>(static_cast<const float *>(g),
                                    static_cast<const float *>(edge_vec), src, dst, e, n_rows,
                                    split, static_cast<float *>(outer_scratch),
                                    static_cast<float *>(force), static_cast<float *>(virial), s);
    case HIPKERN_DTYPE_F64:
      return assemble_atomic<double>(static_cast<const double *>(g),
                                     static_cast<const double *>(edge_vec), src, dst, e, n_rows,
                                     split, static_cast<double *>(outer_scratch),
                                     static_cast<double *>(force), static_cast<double *>(virial),
                                     s);
  }
  return HIPKERN_ERROR_INVALID_ARGUMENT;
}

}  // extern "C"
