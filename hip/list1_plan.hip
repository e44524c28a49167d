// hipkern_list1_classify_pairs, hipkern_list1_group_pairs: a List 1 plan
// built on the device (docs/design/list1.md, "plans on the device").
//
// A new tree's plan used to be the host's: every pair classified on every
// core, then counting-sorted by key, then uploaded. On the H100 that was
// most of a new tree's time (the classification alone 1.6–2.8 ms of
// 3.7–6.8 ms at 32,768 boxes); here the device does both steps over the
// tree's arrays, uploaded once:
//
//   1. list1_classify: a group of kTargetLanes lanes per target box (grid-
//      stride), lane l taking the box's pairs l, l + kTargetLanes, ... Each
//      pair's case is found by the CPU's accepted path, step for step
//      (Cases::aligned_case in src/nearfield/table/cases.rs: the same
//      correctly rounded operations in the same order, never contracted),
//      so every case id is the CPU's. A pair the path refuses, a source
//      box out of range and a bad target row are only reported (the
//      smallest index of each, by atomicMin): the caller names them (the
//      safe API asks the CPU's check for its message). Each block counts
//      the keys (table · n_cases + case) of its pairs in shared memory and
//      adds its nonzero counts once; the pairs per source level likewise.
//   2. list1_group_scatter: after the caller has turned the counts into
//      each key's first slot (its exclusive sum, per chunk), each block
//      ranks a tile of kScatterTile pairs by key in shared memory, reserves
//      each key's run with one atomic, and writes the pair ids there. The
//      order inside a key is the blocks' arrival order: it changes which
//      tile a pair's product is computed in, never a value (the grouped
//      kernel writes each product at its pair's index and sums them in
//      list order).
#include "hipkern_list1_common.h"

namespace {

constexpr int kPlanThreads = 256;
// Lanes per target box: a uniform 3D tree's interior box has 27 pairs, a
// 2D one 9; 32 keeps a 3D box's pairs in one pass.
constexpr int kTargetLanes = 32;
// Key counts kept in shared memory up to this many keys (16 KB; 3D has
// 139 cases, so 29 per-level tables fit); more keys count in global memory.
constexpr int64_t kSharedKeys = 4096;
// Pairs a block ranks at once in the scatter, kScatterItems a thread.
constexpr int kScatterItems = 8;
constexpr int kScatterTile = kPlanThreads * kScatterItems;
constexpr int64_t kMaxPlanBlocks = 4096;

// The report's counters as the atomics take them (uint64_t is unsigned
// long on LP64 Linux, a distinct type of the same width).
__device__ inline unsigned long long *ull(uint64_t *p) {
  return reinterpret_cast<unsigned long long *>(p);
}
// Cases::aligned_case's constants (src/nearfield/table/cases.rs):
// PAIR_TOLERANCE, the rounding constant 1.5·2^52, the case code's base
// (13) and shift (6).
constexpr double kPairTolerance = 1e-6;
constexpr double kRounder = 6755399441055744.0;
constexpr int kCaseBase = 13;
constexpr int kCaseShift = 6;

#if defined(HIPKERN_L1_NVCC)
__device__ __forceinline__ double hk_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double hk_div(double a, double b) { return __ddiv_rn(a, b); }
#else
__device__ __forceinline__ double hk_sub(double a, double b) { return a - b; }
__device__ __forceinline__ double hk_div(double a, double b) { return a / b; }
#endif

// The side of a box at `level` (< HIPKERN_LIST1_MAX_LEVELS): the root's
// divided by 2^level, one division, as List1Boxes::side_at_level.
__device__ inline double side_at(double root, int level) {
  return hk_div(root, static_cast<double>(1u << level));
}

// The case id of a (target, source) pair, or -1 where Cases::aligned_case
// returns None: the same operations in the same order.
template <int D>
__device__ int aligned_case(const double *ct, double ht, const double *cs, double hs,
                            const int32_t *__restrict__ case_indices) {
  const double ratio = hk_div(ht, hs);
  if (!(ratio == 0.5 || ratio == 1.0 || ratio == 2.0)) return -1;
  double raw[D];
  const double half_sum = hk_mul(2.0, hk_add(1.0, ratio));
  double gap = -__builtin_huge_val();
  bool small = true;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    raw[k] = hk_div(hk_mul(4.0, hk_sub(ct[k], cs[k])), hs);
    const double g = hk_sub(fabs(raw[k]), half_sum);
    gap = g > gap ? g : gap;  // f64::max over finite values
    small = small && fabs(raw[k]) <= kPairTolerance;
  }
  const bool same_box = ratio == 1.0 && small;
  if (!same_box && fabs(gap) > kPairTolerance) return -1;
  int code = 0;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    const double r = hk_sub(hk_add(raw[k], kRounder), kRounder);
    if (fabs(hk_sub(raw[k], r)) > kPairTolerance || r != r) return -1;
    const int v = static_cast<int>(r);
    if (v < -kCaseShift || v > kCaseShift) return -1;
    code = code * kCaseBase + (v + kCaseShift);
  }
  return case_indices[code];
}

template <int D>
__global__ void __launch_bounds__(kPlanThreads)
    list1_classify(hipkern_list1_tree tr, int64_t target_begin, int64_t target_end,
                   const uint32_t *__restrict__ level_table, int32_t n_cases, int64_t n_keys,
                   uint32_t *__restrict__ key_counts, uint8_t *__restrict__ pair_cases,
                   hipkern_list1_pair_report *report) {
  __shared__ uint32_t s_keys[kSharedKeys];
  __shared__ uint32_t s_levels[HIPKERN_LIST1_MAX_LEVELS];
  const int tid = static_cast<int>(threadIdx.x);
  const bool keys_in_shared = n_keys <= kSharedKeys;
  for (int64_t k = tid; keys_in_shared && k < n_keys; k += blockDim.x) s_keys[k] = 0;
  if (tid < HIPKERN_LIST1_MAX_LEVELS) s_levels[tid] = 0;
  __syncthreads();
  const int groups = static_cast<int>(blockDim.x) / kTargetLanes;
  const int grp = tid / kTargetLanes;
  const int lane = tid - grp * kTargetLanes;
  const uint64_t n_boxes = static_cast<uint64_t>(tr.n_boxes);
  for (int64_t i = target_begin + static_cast<int64_t>(blockIdx.x) * groups + grp; i < target_end;
       i += static_cast<int64_t>(gridDim.x) * groups) {
    const uint32_t a = tr.source_starts[i], b = tr.source_starts[i + 1];
    const uint32_t tb = tr.target_boxes[i];
    if (a > b || b > static_cast<uint64_t>(tr.n_pairs) || tb >= n_boxes ||
        tr.box_levels[tb] >= HIPKERN_LIST1_MAX_LEVELS) {
      if (lane == 0) atomicMin(ull(&report->first_bad_target), static_cast<unsigned long long>(i));
      continue;
    }
    double ct[D];
#pragma unroll
    for (int k = 0; k < D; ++k) ct[k] = tr.centers[static_cast<size_t>(tb) * D + k];
    const double ht = side_at(tr.root_extent, tr.box_levels[tb]);
    for (uint64_t j = static_cast<uint64_t>(a) + lane; j < b; j += kTargetLanes) {
      const uint32_t sb = tr.source_boxes[j];
      if (sb >= n_boxes) {
        pair_cases[j] = 0xFF;
        atomicMin(ull(&report->first_bad_source), static_cast<unsigned long long>(j));
        continue;
      }
      const int ls = tr.box_levels[sb];
      int c = -1;
      if (ls < HIPKERN_LIST1_MAX_LEVELS) {
        atomicAdd(&s_levels[ls], 1u);
        double cs[D];
#pragma unroll
        for (int k = 0; k < D; ++k) cs[k] = tr.centers[static_cast<size_t>(sb) * D + k];
        c = aligned_case<D>(ct, ht, cs, side_at(tr.root_extent, ls), tr.case_indices);
      }
      if (c < 0 || c >= n_cases) {
        pair_cases[j] = 0xFF;
        atomicMin(ull(&report->first_not_a_pair), static_cast<unsigned long long>(j));
        continue;
      }
      pair_cases[j] = static_cast<uint8_t>(c);
      const uint64_t key = static_cast<uint64_t>(level_table[ls]) * n_cases + c;
      if (key >= static_cast<uint64_t>(n_keys)) {
        atomicMin(ull(&report->first_bad_key), static_cast<unsigned long long>(j));
      } else if (keys_in_shared) {
        atomicAdd(&s_keys[key], 1u);
      } else {
        atomicAdd(&key_counts[key], 1u);
      }
    }
  }
  __syncthreads();
  for (int64_t k = tid; keys_in_shared && k < n_keys; k += blockDim.x)
    if (s_keys[k] != 0) atomicAdd(&key_counts[k], s_keys[k]);
  if (tid < HIPKERN_LIST1_MAX_LEVELS && s_levels[tid] != 0)
    atomicAdd(ull(&report->level_pairs[tid]), static_cast<unsigned long long>(s_levels[tid]));
}

// The key of pair j, or n_keys where the pair has none (a source out of
// range, a refused case): such a pair is not written.
__device__ inline uint64_t pair_key(const hipkern_list1_tree &tr, uint64_t j,
                                    const uint32_t *__restrict__ level_table, int32_t n_cases,
                                    int64_t n_keys, const uint8_t *__restrict__ pair_cases) {
  const uint32_t sb = tr.source_boxes[j];
  const int c = pair_cases[j];
  if (sb >= static_cast<uint64_t>(tr.n_boxes) || c >= n_cases) return n_keys;
  const int ls = tr.box_levels[sb];
  if (ls >= HIPKERN_LIST1_MAX_LEVELS) return n_keys;
  const uint64_t key = static_cast<uint64_t>(level_table[ls]) * n_cases + c;
  return key < static_cast<uint64_t>(n_keys) ? key : n_keys;
}

__global__ void __launch_bounds__(kPlanThreads)
    list1_group_scatter(hipkern_list1_tree tr, int64_t pair_begin, int64_t pair_end,
                        const uint32_t *__restrict__ level_table, int32_t n_cases,
                        int64_t n_keys, const uint8_t *__restrict__ pair_cases,
                        uint32_t *__restrict__ key_next, uint32_t *__restrict__ tile_pairs,
                        int64_t n_tile_pairs) {
  __shared__ uint32_t s_run[kSharedKeys];  // each key's count in the tile, then its run's start
  const int tid = static_cast<int>(threadIdx.x);
  const uint64_t none = static_cast<uint64_t>(n_keys);
  if (n_keys > kSharedKeys) {
    // Too many keys to rank in shared memory: one atomic a pair.
    for (int64_t j = pair_begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + tid;
         j < pair_end; j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const uint64_t key = pair_key(tr, j, level_table, n_cases, n_keys, pair_cases);
      if (key == none) continue;
      const uint32_t at = atomicAdd(&key_next[key], 1u);
      if (at < n_tile_pairs) tile_pairs[at] = static_cast<uint32_t>(j);
    }
    return;
  }
  for (int64_t base = pair_begin + static_cast<int64_t>(blockIdx.x) * kScatterTile;
       base < pair_end; base += static_cast<int64_t>(gridDim.x) * kScatterTile) {
    for (int64_t k = tid; k < n_keys; k += blockDim.x) s_run[k] = 0;
    __syncthreads();
    uint64_t key[kScatterItems];
    uint32_t rank[kScatterItems];
#pragma unroll
    for (int it = 0; it < kScatterItems; ++it) {
      const int64_t j = base + static_cast<int64_t>(it) * kPlanThreads + tid;
      key[it] = j < pair_end ? pair_key(tr, j, level_table, n_cases, n_keys, pair_cases) : none;
      rank[it] = key[it] != none ? atomicAdd(&s_run[key[it]], 1u) : 0;
    }
    __syncthreads();
    for (int64_t k = tid; k < n_keys; k += blockDim.x)
      if (s_run[k] != 0) s_run[k] = atomicAdd(&key_next[k], s_run[k]);
    __syncthreads();
#pragma unroll
    for (int it = 0; it < kScatterItems; ++it) {
      if (key[it] == none) continue;
      const uint32_t at = s_run[key[it]] + rank[it];
      if (at < n_tile_pairs)
        tile_pairs[at] = static_cast<uint32_t>(base + static_cast<int64_t>(it) * kPlanThreads + tid);
    }
    __syncthreads();  // s_run read before the next tile clears it
  }
}

// The checks both entry points share: the tree's counts and pointers, the
// target range, the key space.
int32_t check_tree(const hipkern_list1_tree &t, int64_t target_begin, int64_t target_end,
                   const uint32_t *level_table, int32_t n_cases, int64_t n_keys) {
  if (t.dim != 2 && t.dim != 3) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (!(t.root_extent > 0.0) || !(t.root_extent <= 1.7976931348623157e308))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (t.n_boxes < 0 || t.n_targets < 0 || t.n_pairs < 0 || t.n_boxes > UINT32_MAX ||
      t.n_pairs > UINT32_MAX)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (target_begin < 0 || target_begin > target_end || target_end > t.n_targets)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_cases < 1 || n_cases > 255 || n_keys < 1) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (target_end > target_begin &&
      (!t.source_starts || !t.target_boxes || !t.box_levels || !level_table ||
       (t.n_pairs > 0 && (!t.source_boxes || !t.centers || !t.case_indices))))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  return HIPKERN_SUCCESS;
}

template <typename T>
unsigned plan_blocks(T work, int per_block) {
  const int64_t b = (static_cast<int64_t>(work) + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxPlanBlocks ? kMaxPlanBlocks : b));
}

}  // namespace

extern "C" {

int32_t hipkern_list1_classify_pairs(const hipkern_list1_tree *tree, int64_t target_begin,
                                     int64_t target_end, const uint32_t *level_table,
                                     int32_t n_cases, int64_t n_keys, uint32_t *key_counts,
                                     uint8_t *pair_cases, hipkern_list1_pair_report *report,
                                     void *stream) {
  if (!tree) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_list1_tree &t = *tree;
  const int32_t rc = check_tree(t, target_begin, target_end, level_table, n_cases, n_keys);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (target_end == target_begin) return HIPKERN_SUCCESS;
  if (!key_counts || !report || (t.n_pairs > 0 && !pair_cases))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const unsigned blocks = plan_blocks(target_end - target_begin, kPlanThreads / kTargetLanes);
  (void)hipGetLastError();  // a stale error must not be reported as ours
  if (t.dim == 2)
    list1_classify<2><<<blocks, kPlanThreads, 0, s>>>(t, target_begin, target_end, level_table,
                                                      n_cases, n_keys, key_counts, pair_cases,
                                                      report);
  else
    list1_classify<3><<<blocks, kPlanThreads, 0, s>>>(t, target_begin, target_end, level_table,
                                                      n_cases, n_keys, key_counts, pair_cases,
                                                      report);
  return static_cast<int32_t>(hipGetLastError());
}

int32_t hipkern_list1_group_pairs(const hipkern_list1_tree *tree, int64_t pair_begin,
                                  int64_t pair_end, const uint32_t *level_table,
                                  int32_t n_cases, int64_t n_keys, const uint8_t *pair_cases,
                                  uint32_t *key_next, uint32_t *tile_pairs, int64_t n_tile_pairs,
                                  void *stream) {
  if (!tree) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_list1_tree &t = *tree;
  const int32_t rc = check_tree(t, 0, 0, level_table, n_cases, n_keys);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (pair_begin < 0 || pair_begin > pair_end || pair_end > t.n_pairs || n_tile_pairs < 0)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (pair_end == pair_begin) return HIPKERN_SUCCESS;
  if (!level_table || !key_next || !pair_cases || !tile_pairs || !t.source_boxes ||
      !t.box_levels)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const unsigned blocks = plan_blocks(pair_end - pair_begin, kScatterTile);
  (void)hipGetLastError();  // a stale error must not be reported as ours
  list1_group_scatter<<<blocks, kPlanThreads, 0, s>>>(t, pair_begin, pair_end, level_table,
                                                      n_cases, n_keys, pair_cases, key_next,
                                                      tile_pairs, n_tile_pairs);
  return static_cast<int32_t>(hipGetLastError());
}

}  // extern "C"
