// Force / virial assembly from per-edge gradients (docs/design/force.md).
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
//
// The plan they read is built by hipkern_force_plan_build (force_plan.hip).
#include "hipkern_port.h"
#include "hipkern.h"

namespace {

constexpr unsigned kRowBlock = 128;  // a multiple of kLaneGroup (and of 64): see segment_pass
constexpr unsigned kEdgeBlock = 256;

constexpr int kUnroll = 4;

// acc[0..3] += g; acc[3 + 3a + b] -= g[a] r[b] (in float64).
template <typename T>
__device__ __forceinline__ void add_edge(double acc[12], const T g[3], const T r[3],
                                         bool with_virial) {
  const double gg[3] = {(double)g[0], (double)g[1], (double)g[2]};
  acc[0] += gg[0];
  acc[1] += gg[1];
  acc[2] += gg[2];
  if (with_virial) {
    const double rr[3] = {(double)r[0], (double)r[1], (double)r[2]};
#pragma unroll
    for (int a = 0; a < 3; ++a)
#pragma unroll
      for (int b = 0; b < 3; ++b) acc[3 + 3 * a + b] -= gg[a] * rr[b];
  }
}

// One row per group of LANES consecutive lanes of a warp: lane l sums
// edges begin+l, begin+l+LANES, ...; a fixed xor-butterfly then adds the
// lanes' partial sums, so the order of additions is fixed by the plan and
// LANES alone (bitwise reproducible). Several lanes per row keep several
// gathered loads in flight per row, which the memory system needs.
// Lanes past the last row run an empty segment: every lane of the warp
// takes part in the shuffles.
//
// Warp width: the row groups are LANES-aligned within the block (row =
// tid / LANES) and LANES divides kLaneGroup, which divides 32 and 64, so a
// group lies inside one kLaneGroup segment of one warp or wavefront at
// either width; the butterfly's masks are < LANES, so with width kLaneGroup
// a lane only ever reads lanes of its own group (on wave64 the two halves
// of a wavefront, and the groups in them, never exchange). The launch
// (kRowBlock, a multiple of 64) has no partial warp, and no lane leaves
// before the shuffles (a lane past the last row is !live, not returned),
// so every lane a shuffle reads is active: CUDA's full mask holds, and on
// AMD no lane reads an inactive one. Width kLaneGroup rather than LANES:
// the same values (the masks stay below LANES) and CUDA's default shuffle.
template <typename T, typename O, int LANES>
__global__ void segment_pass(const T *__restrict__ g, const T *__restrict__ r,
                             const int32_t *__restrict__ order, const int32_t *__restrict__ row_ptr,
                             int32_t n_rows, double force_sign, double virial_weight, bool first,
                             double *acc_force, double *acc_virial, O *out_force, O *out_virial) {
  static_assert(LANES >= 1 && LANES <= kLaneGroup && (LANES & (LANES - 1)) == 0,
                "a row group is a power of two of at most kLaneGroup lanes");
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t row = tid / LANES;
  const int lane = static_cast<int>(tid % LANES);
  const bool live = row < static_cast<size_t>(n_rows);
  const int32_t begin = live ? row_ptr[row] : 0, end = live ? row_ptr[row + 1] : 0;
  const bool with_virial = virial_weight != 0.0;
  double acc[12];
#pragma unroll
  for (int c = 0; c < 12; ++c) acc[c] = 0.0;
  // Four edges per lane per step: their indices, then all their gathered
  // rows, are loaded before any is used, so four row pairs per lane are in
  // flight at once (the src pass's gathers are latency bound otherwise).
  // The additions still run in the order edge j, j+LANES, ...: the same
  // sums bit for bit as one edge per step.
  // int64: j + 3 * LANES must not overflow when E is near 2^31.
  int64_t j = static_cast<int64_t>(begin) + lane;
  for (; j + 3 * LANES < end; j += kUnroll * LANES) {
    size_t e[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) e[u] = static_cast<size_t>(order[j + u * LANES]);
    T gv[kUnroll][3], rv[kUnroll][3];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        gv[u][c] = g[3 * e[u] + c];
        rv[u][c] = with_virial ? r[3 * e[u] + c] : T(0);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) add_edge(acc, gv[u], rv[u], with_virial);
  }
  for (; j < end; j += LANES) {
    const size_t e = static_cast<size_t>(order[j]);
    T gv[3], rv[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      gv[c] = g[3 * e + c];
      rv[c] = with_virial ? r[3 * e + c] : T(0);
    }
    add_edge(acc, gv, rv, with_virial);
  }
#pragma unroll
  for (int m = LANES / 2; m > 0; m /= 2)
#pragma unroll
    for (int c = 0; c < 12; ++c) acc[c] += HIPKERN_SHFL_XOR(acc[c], m, kLaneGroup);
  if (!live || lane != 0) return;
  // The first (dst) pass leaves float64 sums in acc_*; the second (src)
  // pass adds its own and rounds once into out_* (for float64 outputs
  // acc_* and out_* are the same memory).
  double *af = acc_force + 3 * row;
  double *aw = acc_virial + 9 * row;
  if (first) {
    for (int c = 0; c < 3; ++c) af[c] = 0.0 + force_sign * acc[c];
    for (int c = 0; c < 9; ++c) aw[c] = 0.0 + virial_weight * acc[3 + c];
    return;
  }
  O *f = out_force + 3 * row;
  O *w = out_virial + 9 * row;
  for (int c = 0; c < 3; ++c) f[c] = static_cast<O>(af[c] + force_sign * acc[c]);
  for (int c = 0; c < 9; ++c) w[c] = static_cast<O>(aw[c] + virial_weight * acc[3 + c]);
}

// Lanes per row from the mean segment length: about 8 edges per lane,
// between 1 and kLaneGroup lanes (a power of two, so groups never straddle
// a lane group, hence never a warp or wavefront: segment_pass). The same
// choice at every warp width (on wave64 too a row gets at most 32 lanes),
// so the sums, whose order LANES fixes, are the same bits on every device.
constexpr int lanes_for(int64_t n_edges, int32_t n_rows) {
  const int64_t mean = n_rows > 0 ? n_edges / n_rows : 0;
  int lanes = 1;
  while (lanes < kLaneGroup && lanes * 8 < mean) lanes *= 2;
  return lanes;
}

// Host-side checks of the row-group geometry at warp 32 and wavefront 64.
static_assert(lanes_for(0, 0) == 1 && lanes_for(100, 100) == 1 && lanes_for(9, 1) == 2 &&
                  lanes_for(129, 1) == 32 && lanes_for(int64_t{1} << 40, 1) == kLaneGroup,
              "lanes_for");
static_assert(kRowBlock % kLaneGroup == 0 && kRowBlock % kMaxWarpSize == 0,
              "segment_pass blocks are whole warps and wavefronts");
constexpr bool row_groups_ok(int lanes) {
  return kRowBlock % lanes == 0 && lane_groups_inside(lanes, kRowBlock, kLaneGroup) &&
         lane_groups_inside(lanes, kRowBlock, 32) && lane_groups_inside(lanes, kRowBlock, 64);
}
static_assert(row_groups_ok(1) && row_groups_ok(2) && row_groups_ok(4) && row_groups_ok(8) &&
                  row_groups_ok(16) && row_groups_ok(32),
              "every segment_pass row group lies inside one shuffle segment, warp and wavefront");

// Everything one segment pass needs besides the input type.
template <typename O>
struct PassArgs {
  const int32_t *order, *row_ptr;
  int32_t n_rows;
  double sign, virial_weight;
  bool first;
  double *acc_force, *acc_virial;
  O *out_force, *out_virial;
};

template <typename T, typename O, int LANES>
hipError_t launch_pass(const T *g, const T *r, const PassArgs<O> &a, hipStream_t s) {
  const size_t threads = static_cast<size_t>(a.n_rows) * LANES;
  const unsigned blocks = static_cast<unsigned>((threads + kRowBlock - 1) / kRowBlock);
  segment_pass<T, O, LANES><<<blocks, kRowBlock, 0, s>>>(
      g, r, a.order, a.row_ptr, a.n_rows, a.sign, a.virial_weight, a.first, a.acc_force,
      a.acc_virial, a.out_force, a.out_virial);
  return hipGetLastError();
}

// lanes: lanes_for's choice, 1 .. kLaneGroup.
template <typename T, typename O>
hipError_t pass(int lanes, const T *g, const T *r, const PassArgs<O> &a, hipStream_t s) {
  static_assert(kLaneGroup == 32, "the cases below run up to kLaneGroup lanes");
  switch (lanes) {
    case 1: return launch_pass<T, O, 1>(g, r, a, s);
    case 2: return launch_pass<T, O, 2>(g, r, a, s);
    case 4: return launch_pass<T, O, 4>(g, r, a, s);
    case 8: return launch_pass<T, O, 8>(g, r, a, s);
    case 16: return launch_pass<T, O, 16>(g, r, a, s);
    default: return launch_pass<T, O, 32>(g, r, a, s);
  }
}

// acc_force/acc_virial: where the dst pass leaves its float64 sums (the
// outputs themselves when O is double, else the caller's scratch).
template <typename T, typename O>
int32_t assemble(const T *g, const T *r, int64_t n_edges, const int32_t *dst_order,
                 const int32_t *dst_row_ptr, const int32_t *src_order, const int32_t *src_row_ptr,
                 int32_t n_rows, hipkern_virial_split split, double *acc_force, double *acc_virial,
                 O *force, O *virial, hipStream_t s) {
  const double w_dst = split == HIPKERN_VIRIAL_HALF ? 0.5 : 0.0;
  const double w_src = split == HIPKERN_VIRIAL_HALF ? 0.5 : 1.0;
  const int lanes = lanes_for(n_edges, n_rows);
  (void)hipGetLastError();
  const PassArgs<O> dst_pass{dst_order, dst_row_ptr, n_rows, 1.0, w_dst, true,
                             acc_force, acc_virial, force, virial};
  hipError_t e = pass<T, O>(lanes, g, r, dst_pass, s);
  if (e != hipSuccess) return static_cast<int32_t>(e);
  const PassArgs<O> src_pass{src_order, src_row_ptr, n_rows, -1.0, w_src, false,
                             acc_force, acc_virial, force, virial};
  return static_cast<int32_t>(pass<T, O>(lanes, g, r, src_pass, s));
}

template <typename T>
int32_t assemble_out(hipkern_dtype out_dtype, const T *g, const T *r, int64_t n_edges,
                     const int32_t *dst_order, const int32_t *dst_row_ptr,
                     const int32_t *src_order, const int32_t *src_row_ptr, int32_t n_rows,
                     hipkern_virial_split split, void *force, void *virial, double *accum,
                     hipStream_t s) {
  if (out_dtype == HIPKERN_DTYPE_F64) {
    double *f = static_cast<double *>(force), *w = static_cast<double *>(virial);
    return assemble<T, double>(g, r, n_edges, dst_order, dst_row_ptr, src_order, src_row_ptr,
                               n_rows, split, f, w, f, w, s);
  }
  return assemble<T, float>(g, r, n_edges, dst_order, dst_row_ptr, src_order, src_row_ptr, n_rows,
                            split, accum, accum + 3 * static_cast<size_t>(n_rows),
                            static_cast<float *>(force), static_cast<float *>(virial), s);
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


// Per-frame totals of the per-atom virial: one block per frame, thread t
// sums the frame's rows t, t+kFrameBlock, ... (in the order frame_rows
// lists them, or consecutive rows when it is null), then a fixed shared
// memory tree adds the threads' sums: bitwise reproducible.
constexpr unsigned kFrameBlock = 128;

__global__ void frame_virial_sum(const double *__restrict__ virial,
                                 const int32_t *__restrict__ frame_rows,
                                 const int32_t *__restrict__ frame_row_ptr, int64_t n_frames,
                                 double *frame_virial, double *frame_voigt) {
  __shared__ double part[9][kFrameBlock];
  for (int64_t k = blockIdx.x; k < n_frames; k += gridDim.x) {
    const int32_t begin = frame_row_ptr[k], end = frame_row_ptr[k + 1];
    double acc[9];
#pragma unroll
    for (int c = 0; c < 9; ++c) acc[c] = 0.0;
    for (int64_t j = static_cast<int64_t>(begin) + threadIdx.x; j < end; j += kFrameBlock) {
      const size_t row = frame_rows ? static_cast<size_t>(frame_rows[j]) : static_cast<size_t>(j);
#pragma unroll
      for (int c = 0; c < 9; ++c) acc[c] += virial[9 * row + c];
    }
#pragma unroll
    for (int c = 0; c < 9; ++c) part[c][threadIdx.x] = acc[c];
    __syncthreads();
    for (unsigned half = kFrameBlock / 2; half > 0; half /= 2) {
      if (threadIdx.x < half)
#pragma unroll
        for (int c = 0; c < 9; ++c) part[c][threadIdx.x] += part[c][threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      for (int c = 0; c < 9; ++c) frame_virial[9 * k + c] = part[c][0];
      if (frame_voigt) {
        // LAMMPS' order: xx, yy, zz, xy, xz, yz (row-major 3x3 indices).
        const int voigt[6] = {0, 4, 8, 1, 2, 5};
        for (int c = 0; c < 6; ++c) frame_voigt[6 * k + c] = part[voigt[c]][0];
      }
    }
    __syncthreads();
  }
}

}  // namespace

extern "C" {

int32_t hipkern_force_assemble(hipkern_dtype dtype, const void *g, const void *edge_vec,
                               int64_t n_edges, const int32_t *dst_order,
                               const int32_t *dst_row_ptr, const int32_t *src_order,
                               const int32_t *src_row_ptr, int32_t n_rows,
                               hipkern_virial_split split, hipkern_dtype out_dtype, void *force,
                               void *virial, double *accum_scratch, void *stream) {
  if (n_rows < 0 || n_edges < 0 || n_edges > INT32_MAX || !valid_split(split))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (out_dtype != HIPKERN_DTYPE_F32 && out_dtype != HIPKERN_DTYPE_F64)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_rows == 0) return HIPKERN_SUCCESS;
  if (!dst_row_ptr || !src_row_ptr || !force || !virial) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (out_dtype == HIPKERN_DTYPE_F32 && !accum_scratch) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_edges > 0 && (!g || !edge_vec || !dst_order || !src_order))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  switch (dtype) {
    case HIPKERN_DTYPE_F32:
      return assemble_out<float>(out_dtype, static_cast<const float *>(g),
                                 static_cast<const float *>(edge_vec), n_edges, dst_order,
                                 dst_row_ptr, src_order, src_row_ptr, n_rows, split, force, virial,
                                 accum_scratch, s);
    case HIPKERN_DTYPE_F64:
      return assemble_out<double>(out_dtype, static_cast<const double *>(g),
                                  static_cast<const double *>(edge_vec), n_edges, dst_order,
                                  dst_row_ptr, src_order, src_row_ptr, n_rows, split, force, virial,
                                  accum_scratch, s);
  }
  return HIPKERN_ERROR_INVALID_ARGUMENT;
}

int32_t hipkern_force_frame_virial(const double *virial, int64_t n_rows,
                                   const int32_t *frame_rows, const int32_t *frame_row_ptr,
                                   int64_t n_frames, double *frame_virial, double *frame_voigt,
                                   void *stream) {
  if (n_rows < 0 || n_rows > INT32_MAX || n_frames < 0) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_frames == 0) return HIPKERN_SUCCESS;
  if (!frame_row_ptr || !frame_virial || (n_rows > 0 && !virial))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  (void)hipGetLastError();
  const unsigned blocks = static_cast<unsigned>(n_frames < 65535 ? n_frames : 65535);
  frame_virial_sum<<<blocks, kFrameBlock, 0, static_cast<hipStream_t>(stream)>>>(
      virial, frame_rows, frame_row_ptr, n_frames, frame_virial, frame_voigt);
  return static_cast<int32_t>(hipGetLastError());
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
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
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
