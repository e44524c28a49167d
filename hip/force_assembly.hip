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


// ---- CSR plan build on the device ----------------------------------------
//
// A stable counting sort of the edges by key (dst and src, or mapping[dst]
// and mapping[src]) in five steps, all on the caller's stream:
//   1. validate + histogram: every index is range-checked (the first bad
//      position of each array is kept with atomicMin); each thread takes a
//      run of kChunk consecutive edges and adds each run of equal keys with
//      one atomic (neighbour lists are grouped by centre, so dst keys come
//      in long runs);
//   2. exclusive scan of the counts into row_ptr (reduce, scan of the tile
//      sums, scan of the tiles) and a copy of it as per-row cursors;
//   3. scatter: each run claims consecutive slots of its row with one
//      atomic on the cursor;
//   4. the order inside a row depends on which atomic came first, so every
//      row is then sorted by edge id (bitonic: rows of up to kShortRow
//      edges by one warp each, in registers; longer rows by one block
//      each: chunks of kLongChunk sorted in shared memory, then merged
//      in passes through a scratch copy). Rows already ascending are left
//      as they are. Increasing edge ids within a row
//      is exactly what a stable sort gives: the plan equals the host one.
// Steps 2-4 write outputs only if step 1 found every index valid (each
// kernel reads the validation words first), so a bad input leaves the
// outputs untouched; the host learns the verdict by one copy at the end.

constexpr int kChunk = 8;            // consecutive edges per thread (runs)
constexpr unsigned kPlanBlock = 256;
constexpr int kScanPerThread = 8;
constexpr int kScanTile = kPlanBlock * kScanPerThread;  // counts per scan tile
constexpr int kShortRow = 8 * kLaneGroup;  // rows up to this long: one lane group each, 8 per lane
constexpr int kShortGroups = kPlanBlock / kLaneGroup;
static_assert(kShortRow == 256, "kShortRow (the plan's long-row threshold)");
// plan_sort_short_rows: whole lane groups per block, each inside one warp
// (NVIDIA, wave32) or one half of a wavefront (wave64).
static_assert(kPlanBlock % kLaneGroup == 0 && kPlanBlock % kMaxWarpSize == 0 &&
                  lane_groups_inside(kLaneGroup, kPlanBlock, 32) &&
                  lane_groups_inside(kLaneGroup, kPlanBlock, 64),
              "plan_sort_short_rows lane groups");
constexpr int kLongChunk = 2048;     // shared-memory chunk of a long row
constexpr int64_t kScatterWindowBytes = 24 << 20;  // order slots per scatter window (L2: 50 MB)
constexpr uint64_t kNoBad = ~0ull;

// Validation words, in scratch: first bad position of src, dst, mapping.
struct PlanStatus {
  unsigned long long bad[4];
};

__device__ inline bool plan_is_bad(const PlanStatus *st) {
  return (st->bad[0] & st->bad[1] & st->bad[2]) != kNoBad;
}

template <typename I>
__global__ void plan_check_mapping(const I *__restrict__ mapping, int64_t n_ext, int64_t n_local,
                                   PlanStatus *st) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n_ext) return;
  const int64_t m = static_cast<int64_t>(mapping[k]);
  if (m < 0 || m >= n_local) atomicMin(&st->bad[2], static_cast<unsigned long long>(k));
}

// The key of one endpoint, or -1 when it is out of range (its position is
// recorded in *bad); a mapping entry out of range gives -1 too (the mapping
// check records it).
template <typename I, typename M>
__device__ inline int32_t plan_key(I v, int64_t n_ext, const M *mapping, int64_t n_rows, int64_t e,
                                   unsigned long long *bad) {
  const int64_t x = static_cast<int64_t>(v);
  if (x < 0 || x >= n_ext) {
    atomicMin(bad, static_cast<unsigned long long>(e));
    return -1;
  }
  const int64_t k = mapping ? static_cast<int64_t>(mapping[x]) : x;
  return (k >= 0 && k < n_rows) ? static_cast<int32_t>(k) : -1;
}

// Adds `run` to counter `key` (skipping invalid keys); with `order`,
// claims `run` consecutive slots and writes the run's edge ids there.
__device__ inline void plan_flush(int32_t key, int32_t run, int64_t first_edge, int32_t *counter,
                                  int32_t *order) {
  if (key < 0 || run == 0) return;
  const int32_t at = atomicAdd(&counter[key], run);
  if (order)
    for (int32_t i = 0; i < run; ++i) order[at + i] = static_cast<int32_t>(first_edge + i);
}

// Step 1 (orders null: histogram into counters) or step 3 (orders set:
// scatter through the cursors). blockIdx.y + set_base: 0 = dst keys, 1 =
// src keys. Only keys in [key_lo, key_hi) are counted or scattered: the
// scatter of a large key set runs in windows of keys whose slots fit in
// L2, so the random 4-byte writes of a window meet in L2 instead of each
// costing a read-modify-write of a DRAM sector.
template <typename I, typename M>
__global__ void plan_runs(const I *__restrict__ src, const I *__restrict__ dst, int64_t n_edges,
                          int64_t n_ext, const M *__restrict__ mapping, int64_t n_rows,
                          int32_t *counters_dst, int32_t *counters_src, int32_t *order_dst,
                          int32_t *order_src, int set_base, int32_t key_lo, int32_t key_hi,
                          PlanStatus *st) {
  const bool scatter = order_dst != nullptr || order_src != nullptr;
  if (scatter && plan_is_bad(st)) return;
  const bool is_src = blockIdx.y + set_base == 1;
  const I *idx = is_src ? src : dst;
  int32_t *counter = is_src ? counters_src : counters_dst;
  int32_t *order = is_src ? order_src : order_dst;
  unsigned long long *bad = &st->bad[is_src ? 0 : 1];
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t begin = t * kChunk;
  if (begin >= n_edges) return;
  const int64_t end = begin + kChunk < n_edges ? begin + kChunk : n_edges;
  int32_t key = -1, run = 0;
  int64_t first = begin;
  for (int64_t e = begin; e < end; ++e) {
    int32_t k = plan_key(idx[e], n_ext, mapping, n_rows, e, bad);
    if (k < key_lo || k >= key_hi) k = -1;  // another window's key
    if (k != key) {
      plan_flush(key, run, first, counter, order);
      key = k;
      run = 0;
      first = e;
    }
    ++run;
  }
  plan_flush(key, run, first, counter, order);
}

// Block-wide exclusive scan of one value per thread (Hillis-Steele in
// shared memory); returns the thread's prefix, *total the block's sum.
__device__ inline int64_t block_exclusive_scan(int64_t v, int64_t *shared, int64_t *total) {
  const unsigned t = threadIdx.x;
  shared[t] = v;
  __syncthreads();
  for (unsigned d = 1; d < blockDim.x; d *= 2) {
    const int64_t add = t >= d ? shared[t - d] : 0;
    __syncthreads();
    shared[t] += add;
    __syncthreads();
  }
  const int64_t inclusive = shared[t];
  *total = shared[blockDim.x - 1];
  __syncthreads();
  return inclusive - v;
}

// Step 2a: the sum of every tile of counts. blockIdx.y picks dst/src.
__global__ void plan_tile_sums(const int32_t *counts_dst, const int32_t *counts_src,
                               int64_t n_rows, int64_t n_tiles, int64_t *tile_sums) {
  __shared__ int64_t shared[kPlanBlock];
  const int32_t *counts = blockIdx.y == 1 ? counts_src : counts_dst;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kScanTile;
  int64_t sum = 0;
  for (int i = 0; i < kScanPerThread; ++i) {
    const int64_t k = base + static_cast<int64_t>(threadIdx.x) * kScanPerThread + i;
    if (k < n_rows) sum += counts[k];
  }
  int64_t total;
  block_exclusive_scan(sum, shared, &total);
  if (threadIdx.x == 0) tile_sums[blockIdx.y * n_tiles + blockIdx.x] = total;
}

// Step 2b: exclusive scan of the tile sums, in place, one block per key set.
__global__ void plan_scan_tile_sums(int64_t n_tiles, int64_t *tile_sums) {
  __shared__ int64_t shared[kPlanBlock];
  int64_t *sums = tile_sums + blockIdx.y * n_tiles;
  int64_t carry = 0;
  for (int64_t base = 0; base < n_tiles; base += blockDim.x) {
    const int64_t k = base + threadIdx.x;
    const int64_t v = k < n_tiles ? sums[k] : 0;
    int64_t total;
    const int64_t prefix = block_exclusive_scan(v, shared, &total);
    if (k < n_tiles) sums[k] = carry + prefix;
    carry += total;
  }
}

// Step 2c: row_ptr[k] = the exclusive prefix of counts; the counts become
// the scatter cursors (the same values). row_ptr[n_rows] = n_edges.
__global__ void plan_scan_tiles(int32_t *counts_dst, int32_t *counts_src, int64_t n_rows,
                                int64_t n_tiles, const int64_t *tile_sums, int64_t n_edges,
                                int32_t *row_ptr_dst, int32_t *row_ptr_src, const PlanStatus *st) {
  if (plan_is_bad(st)) return;
  __shared__ int64_t shared[kPlanBlock];
  const bool is_src = blockIdx.y == 1;
  int32_t *counts = is_src ? counts_src : counts_dst;
  int32_t *row_ptr = is_src ? row_ptr_src : row_ptr_dst;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kScanTile +
                       static_cast<int64_t>(threadIdx.x) * kScanPerThread;
  int32_t c[kScanPerThread];
  int64_t sum = 0;
  for (int i = 0; i < kScanPerThread; ++i) {
    c[i] = base + i < n_rows ? counts[base + i] : 0;
    sum += c[i];
  }
  int64_t total;
  const int64_t tile_base = n_tiles > 0 ? tile_sums[blockIdx.y * n_tiles + blockIdx.x] : 0;
  int64_t at = tile_base + block_exclusive_scan(sum, shared, &total);
  for (int i = 0; i < kScanPerThread; ++i) {
    if (base + i < n_rows) {
      row_ptr[base + i] = static_cast<int32_t>(at);
      counts[base + i] = static_cast<int32_t>(at);
    }
    at += c[i];
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) row_ptr[n_rows] = static_cast<int32_t>(n_edges);
}

// Ascending bitonic sort of s[0..n) (n a power of two) by `threads`
// cooperating threads, numbered `lane`; `sync` is called between stages by
// every thread of the block (stage loops run to n_max, the block's largest
// n, so that every thread reaches every barrier).
__device__ inline void bitonic_stage(int32_t *s, int n, int k, int j, int lane, int threads) {
  if (k > n) return;
  for (int i = lane; i < n; i += threads) {
    const int p = i ^ j;
    if (p > i) {
      const int32_t a = s[i], b = s[p];
      const bool up = (i & k) == 0;
      if ((a > b) == up) {
        s[i] = b;
        s[p] = a;
      }
    }
  }
}

__device__ inline int next_pow2(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Ascending bitonic sort of kLaneGroup * R values held by the kLaneGroup
// lanes of a group, R per lane in registers (element x = lane * R + r):
// partners within a lane are swapped in registers, partners across lanes
// meet through shuffles. No shared memory and no barriers: a row costs
// about 15 R shuffles instead of hundreds of shared-memory round trips.
// Warp width: the shuffles' masks are j / R < kLaneGroup and their width
// kLaneGroup, so a lane reads only lanes of its own group: the warp on
// NVIDIA and wave32, one half of the wavefront on wave64 (the other half,
// another group, may be elsewhere in the code: a shuffle reads no lane of
// it). Registers and shuffles only: no memory ordering is involved.
template <int R>
__device__ inline void warp_bitonic_sort(int32_t (&v)[R], int lane) {
  constexpr int N = kLaneGroup * R;
#pragma unroll
  for (int k = 2; k <= N; k *= 2) {
#pragma unroll
    for (int j = k / 2; j > 0; j /= 2) {
      if (j < R) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int q = r ^ j;
          if (q > r) {
            const int x = lane * R + r;
            const bool up = (x & k) == 0;
            const int32_t a = v[r], b = v[q];
            if ((a > b) == up) {
              v[r] = b;
              v[q] = a;
            }
          }
        }
      } else {
        const int lane_mask = j / R;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int x = lane * R + r;
          const int32_t other = HIPKERN_SHFL_XOR(v[r], lane_mask, kLaneGroup);
          const bool up = (x & k) == 0;
          const bool lower = (lane & lane_mask) == 0;
          // The lower element of a pair keeps the smaller value when the
          // block ascends, the larger when it descends.
          v[r] = (lower == up) ? (v[r] < other ? v[r] : other) : (v[r] > other ? v[r] : other);
        }
      }
    }
  }
}

// One row of 2 .. kLaneGroup * R edge ids, loaded, checked, sorted if
// needed and written back by the kLaneGroup lanes of a group.
template <int R>
__device__ inline void sort_row_in_lanes(int32_t *row, int32_t len, int lane) {
  int32_t v[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int x = lane * R + r;
    v[r] = x < len ? row[x] : INT32_MAX;
  }
  // A row the scatter left ascending (every row of a key that came in one
  // run, as dst does from a neighbour list) needs no sort and no write.
  // Each lane checks its elements against their successors in memory (the
  // successor of a lane's last element is the next lane's first).
  int ascending = 1;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int x = lane * R + r;
    if (x + 1 < len) {
      const int32_t successor = r + 1 < R ? v[(r + 1) % R] : row[x + 1];
      ascending &= v[r] <= successor;
    }
  }
  // AND over the group's lanes (masks < kLaneGroup: within the group).
  for (int m = kLaneGroup / 2; m > 0; m /= 2)
    ascending &= HIPKERN_SHFL_XOR(ascending, m, kLaneGroup);
  if (ascending) return;
  warp_bitonic_sort<R>(v, lane);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int x = lane * R + r;
    if (x < len) row[x] = v[r];
  }
}

// Step 4a: rows of 2..kShortRow edges sorted by the kLaneGroup lanes of
// one group each, in registers (the smallest R that holds the row); longer
// rows are appended to long_rows for step 4b. blockIdx.y picks dst/src.
// Warp width: a group is a warp on NVIDIA and wave32 and half a wavefront
// on wave64 (kPlanBlock is whole groups, each kLaneGroup-aligned). Every
// branch below is uniform over the group, so each group's lanes reach its
// shuffles together: on NVIDIA the group is the whole warp (the full
// mask); on wave64 the two groups of a wavefront may take different
// branches (one returns, or sorts with another R), which only masks the
// other half's lanes off: a group's shuffles read its own lanes alone.
__global__ void plan_sort_short_rows(int32_t *order_dst, int32_t *order_src,
                                     const int32_t *row_ptr_dst, const int32_t *row_ptr_src,
                                     int64_t n_rows, int32_t *long_count, int32_t *long_rows,
                                     int64_t long_capacity, const PlanStatus *st) {
  if (plan_is_bad(st)) return;
  const bool is_src = blockIdx.y == 1;
  int32_t *order = is_src ? order_src : order_dst;
  const int32_t *row_ptr = is_src ? row_ptr_src : row_ptr_dst;
  const int group = threadIdx.x / kLaneGroup, lane = threadIdx.x % kLaneGroup;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kShortGroups + group;
  if (row >= n_rows) return;  // the whole group: rows are per group
  const int32_t begin = row_ptr[row], len = row_ptr[row + 1] - begin;
  if (len > kShortRow) {
    if (lane == 0) {
      const int32_t slot = atomicAdd(&long_count[blockIdx.y], 1);
      if (slot < long_capacity) long_rows[blockIdx.y * long_capacity + slot] = static_cast<int32_t>(row);
    }
    return;
  }
  // Every branch is uniform over the group (len is the group's).
  int32_t *r = order + begin;
  if (len <= 1) return;
  if (len <= kLaneGroup) sort_row_in_lanes<1>(r, len, lane);
  else if (len <= 2 * kLaneGroup) sort_row_in_lanes<2>(r, len, lane);
  else if (len <= 4 * kLaneGroup) sort_row_in_lanes<4>(r, len, lane);
  else sort_row_in_lanes<8>(r, len, lane);
}

// First index in sorted a[0..n) whose value is not below x.
__device__ inline int32_t lower_bound(const int32_t *a, int32_t n, int32_t x) {
  int32_t lo = 0, hi = n;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (a[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Step 4b: each block sorts whole long rows (grid-stride over the list):
// chunks of kLongChunk in shared memory, then merge passes between the row
// and its slice of `spare` (E entries, same offsets). Every element finds
// its place by a binary search in the other run (ids are distinct).
__global__ void plan_sort_long_rows(int32_t *order, const int32_t *row_ptr,
                                    const int32_t *long_count, const int32_t *long_rows,
                                    int32_t *spare, const PlanStatus *st) {
  if (plan_is_bad(st)) return;
  __shared__ int32_t s[kLongChunk];
  const int32_t n_long = *long_count;
  for (int32_t li = blockIdx.x; li < n_long; li += gridDim.x) {
    const int32_t row = long_rows[li];
    const int32_t begin = row_ptr[row], len = row_ptr[row + 1] - begin;
    int32_t *a = order + begin, *b = spare + begin;
    for (int32_t c0 = 0; c0 < len; c0 += kLongChunk) {
      const int32_t m = len - c0 < kLongChunk ? len - c0 : kLongChunk;
      const int n = next_pow2(m);
      for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i < m ? a[c0 + i] : INT32_MAX;
      __syncthreads();
      for (int k = 2; k <= n; k *= 2)
        for (int j = k / 2; j > 0; j /= 2) {
          bitonic_stage(s, n, k, j, threadIdx.x, blockDim.x);
          __syncthreads();
        }
      for (int i = threadIdx.x; i < m; i += blockDim.x) a[c0 + i] = s[i];
      __syncthreads();
    }
    int32_t *from = a, *to = b;
    for (int64_t w = kLongChunk; w < len; w *= 2) {
      for (int32_t i = threadIdx.x; i < len; i += blockDim.x) {
        const int64_t p = (i / (2 * w)) * (2 * w);
        const int32_t a0 = static_cast<int32_t>(p);
        const int32_t b0 = static_cast<int32_t>(p + w < len ? p + w : len);
        const int32_t b1 = static_cast<int32_t>(p + 2 * w < len ? p + 2 * w : len);
        const int32_t x = from[i];
        const int32_t rank = i < b0 ? (i - a0) + lower_bound(from + b0, b1 - b0, x)
                                    : (i - b0) + lower_bound(from + a0, b0 - a0, x);
        to[a0 + rank] = x;
      }
      __syncthreads();
      int32_t *t = from;
      from = to;
      to = t;
    }
    if (from != a)
      for (int32_t i = threadIdx.x; i < len; i += blockDim.x) a[i] = from[i];
    __syncthreads();
  }
}

// Byte layout of the plan-build scratch; every region 256-byte aligned.
struct PlanScratch {
  size_t status, counts, tile_sums, long_count, long_rows, spare, total;
  int64_t n_tiles, long_capacity;
};

size_t align256(size_t x) { return (x + 255) & ~static_cast<size_t>(255); }

PlanScratch plan_scratch_layout(int64_t n_edges, int64_t n_rows) {
  PlanScratch l;
  l.n_tiles = (n_rows + kScanTile - 1) / kScanTile;
  l.long_capacity = n_edges / (kShortRow + 1) + 1;
  size_t at = 0;
  l.status = at;
  at = align256(at + sizeof(PlanStatus));
  l.counts = at;
  at = align256(at + 2 * sizeof(int32_t) * static_cast<size_t>(n_rows));
  l.tile_sums = at;
  at = align256(at + 2 * sizeof(int64_t) * static_cast<size_t>(l.n_tiles));
  l.long_count = at;
  at = align256(at + 2 * sizeof(int32_t));
  l.long_rows = at;
  at = align256(at + 2 * sizeof(int32_t) * static_cast<size_t>(l.long_capacity));
  l.spare = at;
  at = align256(at + sizeof(int32_t) * static_cast<size_t>(n_edges));
  l.total = at;
  return l;
}

template <typename I, typename M>
hipError_t plan_build(const I *src, const I *dst, int64_t n_edges, int64_t n_ext, const M *mapping,
                      int64_t n_rows, int32_t *dst_order, int32_t *dst_row_ptr,
                      int32_t *src_order, int32_t *src_row_ptr, char *scratch,
                      const PlanScratch &l, PlanStatus *host_status, hipStream_t s) {
  PlanStatus *st = reinterpret_cast<PlanStatus *>(scratch + l.status);
  int32_t *counts = reinterpret_cast<int32_t *>(scratch + l.counts);
  int32_t *counts_dst = counts, *counts_src = counts + n_rows;
  int64_t *tile_sums = reinterpret_cast<int64_t *>(scratch + l.tile_sums);
  int32_t *long_count = reinterpret_cast<int32_t *>(scratch + l.long_count);
  int32_t *long_rows = reinterpret_cast<int32_t *>(scratch + l.long_rows);
  int32_t *spare = reinterpret_cast<int32_t *>(scratch + l.spare);
  hipError_t e = hipMemsetAsync(st, 0xff, sizeof(PlanStatus), s);
  if (e == hipSuccess) e = hipMemsetAsync(counts, 0, 2 * sizeof(int32_t) * n_rows, s);
  if (e == hipSuccess) e = hipMemsetAsync(long_count, 0, 2 * sizeof(int32_t), s);
  if (e != hipSuccess) return e;
  if (mapping) {
    const unsigned blocks = static_cast<unsigned>((n_ext + kPlanBlock - 1) / kPlanBlock);
    if (blocks > 0) plan_check_mapping<M><<<blocks, kPlanBlock, 0, s>>>(mapping, n_ext, n_rows, st);
    if ((e = hipGetLastError()) != hipSuccess) return e;
  }
  const int64_t run_threads = (n_edges + kChunk - 1) / kChunk;
  const dim3 run_grid(static_cast<unsigned>((run_threads + kPlanBlock - 1) / kPlanBlock), 2);
  if (n_edges > 0) {
    plan_runs<I, M><<<run_grid, kPlanBlock, 0, s>>>(src, dst, n_edges, n_ext, mapping, n_rows,
                                                    counts_dst, counts_src, nullptr, nullptr, 0, 0,
                                                    static_cast<int32_t>(n_rows), st);
    if ((e = hipGetLastError()) != hipSuccess) return e;
  }
  const dim3 tile_grid(static_cast<unsigned>(l.n_tiles), 2);
  if (l.n_tiles > 0) {
    plan_tile_sums<<<tile_grid, kPlanBlock, 0, s>>>(counts_dst, counts_src, n_rows, l.n_tiles, tile_sums);
    plan_scan_tile_sums<<<dim3(1, 2), kPlanBlock, 0, s>>>(l.n_tiles, tile_sums);
  }
  // Zero rows: row_ptr is just {E} (= {0} when there are no rows either).
  plan_scan_tiles<<<dim3(l.n_tiles > 0 ? static_cast<unsigned>(l.n_tiles) : 1, 2), kPlanBlock, 0, s>>>(
      counts_dst, counts_src, n_rows, l.n_tiles, tile_sums, n_edges, dst_row_ptr, src_row_ptr, st);
  if ((e = hipGetLastError()) != hipSuccess) return e;
  if (n_edges > 0) {
    // Scatter, each key set in key windows of about kScatterWindowBytes of
    // slots (rows split evenly by key; a skewed window is only slower).
    const int64_t windows = (4 * n_edges + kScatterWindowBytes - 1) / kScatterWindowBytes;
    const dim3 set_grid(run_grid.x, 1);
    for (int set = 0; set < 2; ++set)
      for (int64_t w = 0; w < windows; ++w) {
        const int32_t lo = static_cast<int32_t>(n_rows * w / windows);
        const int32_t hi = static_cast<int32_t>(n_rows * (w + 1) / windows);
        plan_runs<I, M><<<set_grid, kPlanBlock, 0, s>>>(
            src, dst, n_edges, n_ext, mapping, n_rows, counts_dst, counts_src,
            set == 0 ? dst_order : nullptr, set == 1 ? src_order : nullptr, set, lo, hi, st);
      }
    const dim3 short_grid(static_cast<unsigned>((n_rows + kShortGroups - 1) / kShortGroups), 2);
    plan_sort_short_rows<<<short_grid, kPlanBlock, 0, s>>>(dst_order, src_order, dst_row_ptr,
                                                           src_row_ptr, n_rows, long_count, long_rows,
                                                           l.long_capacity, st);
    // One launch per key set: they share `spare`.
    constexpr unsigned kLongGrid = 264;
    plan_sort_long_rows<<<kLongGrid, kPlanBlock, 0, s>>>(dst_order, dst_row_ptr, long_count,
                                                         long_rows, spare, st);
    plan_sort_long_rows<<<kLongGrid, kPlanBlock, 0, s>>>(src_order, src_row_ptr, long_count + 1,
                                                         long_rows + l.long_capacity, spare, st);
    if ((e = hipGetLastError()) != hipSuccess) return e;
  }
  e = hipMemcpyAsync(host_status, st, sizeof(PlanStatus), hipMemcpyDeviceToHost, s);
  if (e == hipSuccess) e = hipStreamSynchronize(s);
  return e;
}

template <typename I>
hipError_t plan_build_mapped(hipkern_index_type mapping_type, const I *src, const I *dst,
                             int64_t n_edges, int64_t n_ext, const void *mapping, int64_t n_rows,
                             int32_t *dst_order, int32_t *dst_row_ptr, int32_t *src_order,
                             int32_t *src_row_ptr, char *scratch, const PlanScratch &l,
                             PlanStatus *host_status, hipStream_t s) {
  if (mapping_type == HIPKERN_INDEX_I64)
    return plan_build<I, int64_t>(src, dst, n_edges, n_ext, static_cast<const int64_t *>(mapping),
                                  n_rows, dst_order, dst_row_ptr, src_order, src_row_ptr, scratch, l,
                                  host_status, s);
  return plan_build<I, int32_t>(src, dst, n_edges, n_ext, static_cast<const int32_t *>(mapping),
                                n_rows, dst_order, dst_row_ptr, src_order, src_row_ptr, scratch, l,
                                host_status, s);
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

bool valid_index_type(hipkern_index_type t) {
  return t == HIPKERN_INDEX_I32 || t == HIPKERN_INDEX_I64;
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

int32_t hipkern_force_plan_scratch_bytes(int64_t n_edges, int64_t n_rows, size_t *bytes) {
  if (!bytes || n_edges < 0 || n_edges > INT32_MAX || n_rows < 0 || n_rows >= INT32_MAX)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  *bytes = plan_scratch_layout(n_edges, n_rows).total;
  return HIPKERN_SUCCESS;
}

int32_t hipkern_force_plan_build(hipkern_index_type index_type, const void *src, const void *dst,
                                 int64_t n_edges, int64_t n_ext, hipkern_index_type mapping_type,
                                 const void *mapping, int64_t n_local, int32_t *dst_order,
                                 int32_t *dst_row_ptr, int32_t *src_order, int32_t *src_row_ptr,
                                 void *scratch, size_t scratch_bytes,
                                 hipkern_force_plan_report *report, void *stream) {
  if (!report) return HIPKERN_ERROR_INVALID_ARGUMENT;
  report->first_bad_src = report->first_bad_dst = report->first_bad_mapping = -1;
  if (n_edges < 0 || n_edges > INT32_MAX || n_ext < 0 || n_ext >= INT32_MAX)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (!valid_index_type(index_type) || (mapping && !valid_index_type(mapping_type)))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (mapping && (n_local < 0 || n_local > n_ext)) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const int64_t n_rows = mapping ? n_local : n_ext;
  const PlanScratch l = plan_scratch_layout(n_edges, n_rows);
  if (!dst_row_ptr || !src_row_ptr || !scratch || scratch_bytes < l.total)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_edges > 0 && (!src || !dst || !dst_order || !src_order))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  (void)hipGetLastError();
  hipStream_t s = static_cast<hipStream_t>(stream);
  char *sc = static_cast<char *>(scratch);
  PlanStatus host{};
  hipError_t e;
  if (index_type == HIPKERN_INDEX_I64)
    e = plan_build_mapped<int64_t>(mapping_type, static_cast<const int64_t *>(src),
                                   static_cast<const int64_t *>(dst), n_edges, n_ext, mapping,
                                   n_rows, dst_order, dst_row_ptr, src_order, src_row_ptr, sc, l,
                                   &host, s);
  else
    e = plan_build_mapped<int32_t>(mapping_type, static_cast<const int32_t *>(src),
                                   static_cast<const int32_t *>(dst), n_edges, n_ext, mapping,
                                   n_rows, dst_order, dst_row_ptr, src_order, src_row_ptr, sc, l,
                                   &host, s);
  if (e != hipSuccess) return static_cast<int32_t>(e);
  const auto pos = [](unsigned long long b) { return b == kNoBad ? int64_t{-1} : static_cast<int64_t>(b); };
  report->first_bad_src = pos(host.bad[0]);
  report->first_bad_dst = pos(host.bad[1]);
  report->first_bad_mapping = pos(host.bad[2]);
  if (report->first_bad_src >= 0 || report->first_bad_dst >= 0 || report->first_bad_mapping >= 0)
    return HIPKERN_ERROR_INVALID_INDEX;
  return HIPKERN_SUCCESS;
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
