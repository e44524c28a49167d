// The force assembly's CSR plan, built on the device (docs/design/force.md):
// for each key set (dst, then src; or mapping[dst] and mapping[src]) the
// edge ids in stable key order and each row's first position.
//
// A least-significant-digit radix sort, each pass stable:
//   0. every index is range-checked (first bad position of each array kept
//      with atomicMin) and each key set is checked for coming in order
//      already (a neighbour list grouped by centre gives dst keys in
//      order). The host reads that verdict: with a bad index nothing more
//      is launched, so the outputs are untouched.
//   1. per pass over at most kMaxDigitBits bits of the key: each tile of
//      kTile edges counts its digits; an exclusive scan of the counts,
//      digit-major over the tiles, gives every (digit, tile) its first
//      output slot; each tile ranks its edges by digit in edge order
//      (ballots within 32-lane groups, shared-memory counts), stages them
//      by digit in shared memory and writes them out in runs of one digit.
//   2. row_ptr[k] = the first position whose key is >= k, by a binary
//      search in the sorted keys.
// A key set already in order skips 1: its order is the identity and its
// rows are found by the same search over its keys in edge order.
// The result is exactly the host plan (CsrPlan: edges of one row in
// increasing id), with no atomics in the order: bitwise the same run to
// run. Why radix rather than the first version's counting sort by atomics
// (a scatter through per-row cursors, then every row sorted by edge id),
// and what each step costs: benches/RESULTS.md, force_assembly.
#include "hipkern_port.h"
#include "hipkern.h"

namespace {

constexpr unsigned kPlanBlock = 256;
constexpr int kGroups = kPlanBlock / kLaneGroup;  // 32-lane groups per block
// Edges per lane per tile. A tile is kPlanBlock * kItems consecutive edges;
// each group takes kLaneGroup * kItems consecutive edges of it, kLaneGroup
// at a time (coalesced loads). On the H100 at E = 33.5 M, 16 (tiles of
// 4,096) built the plan in 2.17 ms against 1.90 ms for 8, and four tiles
// of 2,048 per block with the next one's loads in flight in 2.04 ms: more
// registers, fewer blocks resident (benches/RESULTS.md).
constexpr int kItems = 8;
constexpr int kTile = kPlanBlock * kItems;
constexpr int kGroupSpan = kLaneGroup * kItems;
// At most 8 key bits per pass (keys below 2^31: at most 4 passes; 393,216
// rows take 3 of 7, 6, 6 bits): 256 digits are 256 threads, one digit per
// thread where digits are scanned, and a tile of 2048 edges still leaves
// runs of ~8 or more edges per digit to write.
constexpr int kMaxDigitBits = 8;
constexpr int kMaxDigits = 1 << kMaxDigitBits;
static_assert(kMaxDigits == kPlanBlock, "one digit per thread in the digit scans");
static_assert(kPlanBlock % kMaxWarpSize == 0 && lane_groups_inside(kLaneGroup, kPlanBlock, 32) &&
                  lane_groups_inside(kLaneGroup, kPlanBlock, 64),
              "the plan's 32-lane groups lie inside warps and wavefronts");
constexpr int kScanPerThread = 8;
constexpr int kScanTile = kPlanBlock * kScanPerThread;  // counts per scan tile
constexpr uint64_t kNoBad = ~0ull;

// In scratch, read back by the host after step 0. Set to all ones first.
struct PlanStatus {
  unsigned long long bad[3];  // first bad position of src, dst, mapping (kNoBad: none)
  unsigned int sorted[2];     // dst, src keys non-decreasing in edge order (nonzero: yes)
};

template <typename I>
__global__ void plan_check_mapping(const I *__restrict__ mapping, int64_t n_ext, int64_t n_local,
                                   PlanStatus *st) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n_ext) return;
  const int64_t m = static_cast<int64_t>(mapping[k]);
  if (m < 0 || m >= n_local) atomicMin(&st->bad[2], static_cast<unsigned long long>(k));
}

// The endpoints' indices and what turns one into a key.
template <typename I, typename M>
struct KeySet {
  const I *idx;
  int64_t n_edges, n_ext;
  const M *mapping;  // null: the key is the index
  int64_t n_rows;

  // Edge e's key, or -1 when its index is out of range or maps out of
  // range.
  __device__ int32_t key(int64_t e) const { return key_of(static_cast<int64_t>(idx[e])); }
  // The key of index x (loaded by the caller).
  __device__ int32_t key_of(int64_t x) const {
    if (x < 0 || x >= n_ext) return -1;
    const int64_t k = mapping ? static_cast<int64_t>(mapping[x]) : x;
    return (k >= 0 && k < n_rows) ? static_cast<int32_t>(k) : -1;
  }
};

// The lanes of the caller's 32-lane group that are `valid` and have the
// same digit (its low `bits` bits), the caller among them if valid. Every
// lane of the group calls it together (the ballots); `bits` is the same
// for all.
__device__ inline uint32_t group_peers(bool valid, uint32_t digit, int bits) {
  uint32_t peers = HIPKERN_GROUP_BALLOT(valid);
  for (int b = 0; b < bits; ++b) {
    const bool bit = (digit >> b) & 1u;
    const uint32_t m = HIPKERN_GROUP_BALLOT(bit);
    peers &= bit ? m : ~m;
  }
  return peers;
}

__device__ inline int group_lane() { return static_cast<int>(threadIdx.x) & (kLaneGroup - 1); }

// Block-wide exclusive scan of one int per thread: within each 32-lane
// group by shuffles, then the groups' sums through shared memory (two
// barriers). *total: the block's sum. Every thread of the block calls it.
__device__ inline int32_t block_scan_exclusive(int32_t v, int32_t *group_sums, int32_t *total) {
  const int lane = group_lane();
  const int group = static_cast<int>(threadIdx.x) / kLaneGroup;
  int32_t x = v;
#pragma unroll
  for (int d = 1; d < kLaneGroup; d *= 2) {
    const int32_t y = HIPKERN_SHFL(x, lane >= d ? lane - d : lane, kLaneGroup);
    if (lane >= d) x += y;
  }
  if (lane == kLaneGroup - 1) group_sums[group] = x;
  __syncthreads();
  int32_t before = 0, all = 0;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int32_t sum = group_sums[g];
    before += g < group ? sum : 0;
    all += sum;
  }
  *total = all;
  __syncthreads();  // group_sums free again
  return before + x - v;
}

// A lane's kItems keys (and edge ids) of one tile: edges base + r *
// kLaneGroup + lane (base: its group's first edge), -1 past the end. All
// loads are issued before any is used. keys_in/ids_in null: from the
// indices and the positions.
template <typename I, typename M>
__device__ inline void load_tile(const KeySet<I, M> &ks, const int32_t *__restrict__ keys_in,
                                 const int32_t *__restrict__ ids_in, int64_t base, int lane,
                                 int32_t (&key)[kItems], int32_t (&id)[kItems]) {
  int64_t raw[kItems];
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    const int64_t e = base + r * kLaneGroup + lane;
    const bool in = e < ks.n_edges;
    raw[r] = !in ? -1 : (keys_in ? keys_in[e] : static_cast<int64_t>(ks.idx[e]));
    if (ids_in) id[r] = in ? ids_in[e] : 0;
    else id[r] = static_cast<int32_t>(e);
  }
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    const int64_t e = base + r * kLaneGroup + lane;
    key[r] = e >= ks.n_edges ? -1 : (keys_in ? static_cast<int32_t>(raw[r]) : ks.key_of(raw[r]));
  }
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

// Step 0: every index range-checked (the first bad position of each array
// kept), and whether each key set comes in order. blockIdx.y: 0 = dst,
// 1 = src. A pure stream over the indices: the digits are counted only
// for a set that needs sorting.
template <typename I, typename M>
__global__ __launch_bounds__(kPlanBlock) void plan_check_keys(KeySet<I, M> dst, KeySet<I, M> src,
                                                              PlanStatus *st) {
  const int set = static_cast<int>(blockIdx.y);
  const KeySet<I, M> ks = set == 1 ? src : dst;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  // Every index loaded before any is used (kItems per thread in flight).
  int64_t raw[kItems], raw_prev[kItems];
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    const int64_t e = base + r * kPlanBlock;
    raw[r] = e < ks.n_edges ? static_cast<int64_t>(ks.idx[e]) : 0;
    raw_prev[r] = e < ks.n_edges && e > 0 ? static_cast<int64_t>(ks.idx[e - 1]) : -1;
  }
  int32_t key[kItems], prev[kItems];
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    key[r] = ks.key_of(raw[r]);
    prev[r] = ks.key_of(raw_prev[r]);
  }
  bool descent = false;
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    const int64_t e = base + r * kPlanBlock;
    if (e >= ks.n_edges) continue;
    if (key[r] < 0) {
      if (raw[r] < 0 || raw[r] >= ks.n_ext)
        atomicMin(&st->bad[set == 1 ? 0 : 1], static_cast<unsigned long long>(e));
      // (a mapping entry out of range: plan_check_mapping records it)
    } else if (prev[r] > key[r]) {
      descent = true;
    }
  }
  // One word per set for the whole grid: one write per block that saw a
  // descent, and none once some block has (a write per thread serialises
  // millions of atomics on one address).
  if (__syncthreads_or(descent) && threadIdx.x == 0 && st->sorted[set] != 0u)
    atomicExch(&st->sorted[set], 0u);
}

// The digit counts of one tile into counts[digit * n_tiles + tile]: the
// keys from the indices (keys_in null, pass 0) or as the previous pass
// wrote them.
template <typename I, typename M>
__global__ __launch_bounds__(kPlanBlock) void plan_digit_counts(KeySet<I, M> ks,
                                                                const int32_t *__restrict__ keys_in,
                                                                int shift, int bits, int32_t *counts,
                                                                int64_t n_tiles) {
  __shared__ int32_t hist[kMaxDigits];
  hist[threadIdx.x] = 0;
  __syncthreads();
  const int lane = group_lane();
  const uint32_t digit_mask = (1u << bits) - 1;
  int32_t key[kItems], id[kItems];
  load_tile(ks, keys_in, nullptr,
            static_cast<int64_t>(blockIdx.x) * kTile +
                static_cast<int64_t>(threadIdx.x / kLaneGroup) * kGroupSpan,
            lane, key, id);
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    const bool valid = key[r] >= 0;
    const uint32_t digit = valid ? (static_cast<uint32_t>(key[r]) >> shift) & digit_mask : 0;
    const uint32_t peers = group_peers(valid, digit, bits);
    if (valid && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
  }
  __syncthreads();
  if (threadIdx.x <= digit_mask)
    counts[static_cast<int64_t>(threadIdx.x) * n_tiles + blockIdx.x] = hist[threadIdx.x];
}

// Exclusive scan of v[0..n) in place, in three launches: the sum of each
// tile of kScanTile values, a scan of those sums (one block), then each
// tile from its sum's prefix.
__global__ void scan_tile_sums(const int32_t *v, int64_t n, int64_t *tile_sums) {
  __shared__ int64_t shared[kPlanBlock];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kScanTile;
  int64_t sum = 0;
  for (int i = 0; i < kScanPerThread; ++i) {
    const int64_t k = base + static_cast<int64_t>(threadIdx.x) * kScanPerThread + i;
    if (k < n) sum += v[k];
  }
  int64_t total;
  block_exclusive_scan(sum, shared, &total);
  if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

__global__ void scan_sums(int64_t n_tiles, int64_t *tile_sums) {
  __shared__ int64_t shared[kPlanBlock];
  int64_t carry = 0;
  for (int64_t base = 0; base < n_tiles; base += blockDim.x) {
    const int64_t k = base + threadIdx.x;
    const int64_t x = k < n_tiles ? tile_sums[k] : 0;
    int64_t total;
    const int64_t prefix = block_exclusive_scan(x, shared, &total);
    if (k < n_tiles) tile_sums[k] = carry + prefix;
    carry += total;
  }
}

__global__ void scan_tiles(int32_t *v, int64_t n, const int64_t *tile_sums) {
  __shared__ int64_t shared[kPlanBlock];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kScanTile +
                       static_cast<int64_t>(threadIdx.x) * kScanPerThread;
  int32_t c[kScanPerThread];
  int64_t sum = 0;
  for (int i = 0; i < kScanPerThread; ++i) {
    c[i] = base + i < n ? v[base + i] : 0;
    sum += c[i];
  }
  int64_t total;
  int64_t at = tile_sums[blockIdx.x] + block_exclusive_scan(sum, shared, &total);
  for (int i = 0; i < kScanPerThread; ++i) {
    if (base + i < n) v[base + i] = static_cast<int32_t>(at);
    at += c[i];
  }
}

// One radix pass over one tile: the tile's edges ranked by digit in edge
// order (each group's edges in rounds of kLaneGroup; a group's running
// count per digit in shared memory, taken by one atomic per digit per
// round whose old value the leader hands to its peers), placed in shared
// memory by digit, then written to their slots, offsets[digit * n_tiles +
// tile] (the scanned counts) onwards, consecutive slots from consecutive
// threads. keys_in/ids_in null: pass 0 (keys from the indices, ids the
// edge positions). keys_out: the keys in the new order (the next pass's
// input, or the row search's).
template <typename I, typename M>
__global__ __launch_bounds__(kPlanBlock) void plan_digit_scatter(
    KeySet<I, M> ks, const int32_t *__restrict__ keys_in, const int32_t *__restrict__ ids_in,
    int32_t *__restrict__ keys_out, int32_t *__restrict__ ids_out,
    const int32_t *__restrict__ offsets, int64_t n_tiles, int shift, int bits) {
  __shared__ int32_t group_count[kGroups][kMaxDigits];  // running count, then the group's prefix
  __shared__ int32_t first_slot[kMaxDigits];             // the tile's first slot of each digit
  __shared__ int32_t out_shift[kMaxDigits];              // output slot minus tile slot
  __shared__ int32_t staged_key[kTile], staged_id[kTile];
  __shared__ int32_t group_sums[kGroups];
  for (int g = 0; g < kGroups; ++g) group_count[g][threadIdx.x] = 0;
  __syncthreads();
  const int group = static_cast<int>(threadIdx.x) / kLaneGroup;
  const int lane = group_lane();
  const unsigned d = threadIdx.x;
  const uint32_t digit_mask = (1u << bits) - 1;
  int32_t key[kItems], id[kItems], rank[kItems];
  load_tile(ks, keys_in, ids_in,
            static_cast<int64_t>(blockIdx.x) * kTile + static_cast<int64_t>(group) * kGroupSpan,
            lane, key, id);
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    const bool valid = key[r] >= 0;
    const uint32_t digit = (static_cast<uint32_t>(key[r]) >> shift) & digit_mask;
    const uint32_t peers = group_peers(valid, digit, bits);
    const int leader = __ffs(peers) - 1;
    int32_t before = 0;
    if (valid && lane == leader) before = atomicAdd(&group_count[group][digit], __popc(peers));
    before = HIPKERN_SHFL(before, leader < 0 ? lane : leader, kLaneGroup);
    rank[r] = valid ? before + __popc(peers & ((1u << lane) - 1u)) : -1;
  }
  __syncthreads();
  int32_t digit_total = 0;
  if (d <= digit_mask)
    for (int g = 0; g < kGroups; ++g) {
      const int32_t c = group_count[g][d];
      group_count[g][d] = digit_total;
      digit_total += c;
    }
  int32_t tile_total;
  const int32_t first = block_scan_exclusive(digit_total, group_sums, &tile_total);
  if (d <= digit_mask) {
    first_slot[d] = first;
    out_shift[d] = offsets[static_cast<int64_t>(d) * n_tiles + blockIdx.x] - first;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kItems; ++r) {
    if (rank[r] < 0) continue;
    const uint32_t digit = (static_cast<uint32_t>(key[r]) >> shift) & digit_mask;
    const int32_t slot = first_slot[digit] + group_count[group][digit] + rank[r];
    staged_key[slot] = key[r];
    staged_id[slot] = id[r];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < tile_total; i += kPlanBlock) {
    const int32_t k = staged_key[i];
    const int32_t at = out_shift[(static_cast<uint32_t>(k) >> shift) & digit_mask] + i;
    keys_out[at] = k;
    ids_out[at] = staged_id[i];
  }
}

// First position in [0, n) whose key is not below x (keys non-decreasing).
template <typename KeyAt>
__device__ inline int64_t first_at_least(int64_t n, int32_t x, const KeyAt &key_at) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (key_at(mid) < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Row starts from the sorted keys: row_ptr[k] for k = 0..n_rows.
__global__ void plan_rows_sorted(const int32_t *__restrict__ keys, int64_t n_edges, int64_t n_rows,
                                 int32_t *row_ptr) {
  const auto key_at = [keys](int64_t p) { return keys[p]; };
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k <= n_rows;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    row_ptr[k] = static_cast<int32_t>(first_at_least(n_edges, static_cast<int32_t>(k), key_at));
}

// A key set already in order: the identity order and its row starts.
template <typename I, typename M>
__global__ void plan_rows_in_order(KeySet<I, M> ks, int32_t *order, int32_t *row_ptr) {
  const auto key_at = [&ks](int64_t p) { return ks.key(p); };
  const int64_t n = ks.n_edges > ks.n_rows + 1 ? ks.n_edges : ks.n_rows + 1;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i < ks.n_edges) order[i] = static_cast<int32_t>(i);
    if (i <= ks.n_rows)
      row_ptr[i] = static_cast<int32_t>(first_at_least(ks.n_edges, static_cast<int32_t>(i), key_at));
  }
}

// The radix passes for keys below n_rows: their number and each one's bits
// (the earlier passes take the odd bit), 0 passes for one row or none.
struct RadixPasses {
  int count = 0;
  int bits[4] = {0, 0, 0, 0};
  int shift[4] = {0, 0, 0, 0};
};

RadixPasses radix_passes(int64_t n_rows) {
  RadixPasses p;
  int key_bits = 0;
  while (key_bits < 63 && (int64_t{1} << key_bits) < n_rows) ++key_bits;
  p.count = (key_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  for (int i = 0, at = 0; i < p.count; ++i) {
    p.bits[i] = key_bits / p.count + (i < key_bits % p.count ? 1 : 0);
    p.shift[i] = at;
    at += p.bits[i];
  }
  return p;
}

// Byte layout of the plan-build scratch; every region 256-byte aligned.
struct PlanScratch {
  size_t status, counts, tile_sums, keys_a, keys_b, ids, total;
  int64_t n_tiles;  // of kTile edges: the blocks of every edge kernel
};

size_t align256(size_t x) { return (x + 255) & ~static_cast<size_t>(255); }

PlanScratch plan_scratch_layout(int64_t n_edges, int64_t n_rows) {
  PlanScratch l;
  l.n_tiles = (n_edges + kTile - 1) / kTile;
  const RadixPasses passes = radix_passes(n_rows);
  const int64_t n_counts = (int64_t{1} << passes.bits[0]) * l.n_tiles;  // pass 0 has the most digits
  const int64_t scan_tiles_max = (n_counts + kScanTile - 1) / kScanTile;
  const size_t edges = sizeof(int32_t) * static_cast<size_t>(n_edges);
  size_t at = 0;
  l.status = at;
  at = align256(at + sizeof(PlanStatus));
  l.counts = at;
  at = align256(at + sizeof(int32_t) * static_cast<size_t>(n_counts));
  l.tile_sums = at;
  at = align256(at + sizeof(int64_t) * static_cast<size_t>(scan_tiles_max));
  l.keys_a = at;
  at = align256(at + edges);
  l.keys_b = at;
  at = align256(at + edges);
  l.ids = at;
  at = align256(at + edges);
  l.total = at;
  return l;
}

unsigned grid_for(int64_t n) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride beyond
  const int64_t blocks = (n + kPlanBlock - 1) / kPlanBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

// Steps 1 and 2 for one key set whose keys are not in order: the passes,
// ping-ponging keys between keys_a/keys_b and ids between `ids` and `order`
// so that the last pass writes `order`; then the row starts.
template <typename I, typename M>
hipError_t sort_key_set(const KeySet<I, M> &ks, char *scratch, const PlanScratch &l,
                        const RadixPasses &passes, int32_t *order, int32_t *row_ptr,
                        hipStream_t s) {
  int32_t *counts = reinterpret_cast<int32_t *>(scratch + l.counts);
  int64_t *tile_sums = reinterpret_cast<int64_t *>(scratch + l.tile_sums);
  int32_t *keys[2] = {reinterpret_cast<int32_t *>(scratch + l.keys_a),
                      reinterpret_cast<int32_t *>(scratch + l.keys_b)};
  int32_t *ids_tmp = reinterpret_cast<int32_t *>(scratch + l.ids);
  const unsigned tiles = static_cast<unsigned>(l.n_tiles);
  const int32_t *keys_in = nullptr, *ids_in = nullptr;
  for (int p = 0; p < passes.count; ++p) {
    plan_digit_counts<I, M><<<tiles, kPlanBlock, 0, s>>>(ks, keys_in, passes.shift[p],
                                                        passes.bits[p], counts, l.n_tiles);
    const int64_t n = (int64_t{1} << passes.bits[p]) * l.n_tiles;
    const unsigned scan_grid = static_cast<unsigned>((n + kScanTile - 1) / kScanTile);
    scan_tile_sums<<<scan_grid, kPlanBlock, 0, s>>>(counts, n, tile_sums);
    scan_sums<<<1, kPlanBlock, 0, s>>>(scan_grid, tile_sums);
    scan_tiles<<<scan_grid, kPlanBlock, 0, s>>>(counts, n, tile_sums);
    int32_t *keys_out = keys[p % 2];
    int32_t *ids_out = (passes.count - 1 - p) % 2 == 0 ? order : ids_tmp;
    plan_digit_scatter<I, M><<<tiles, kPlanBlock, 0, s>>>(ks, keys_in, ids_in, keys_out, ids_out,
                                                         counts, l.n_tiles, passes.shift[p],
                                                         passes.bits[p]);
    keys_in = keys_out;
    ids_in = ids_out;
  }
  plan_rows_sorted<<<grid_for(ks.n_rows + 1), kPlanBlock, 0, s>>>(keys_in, ks.n_edges, ks.n_rows,
                                                                 row_ptr);
  return hipGetLastError();
}

// Step 0 for both key sets, the verdict read back (a bad index: nothing
// more is launched), then each set sorted or taken as it is.
template <typename I, typename M>
hipError_t plan_build(const I *src, const I *dst, int64_t n_edges, int64_t n_ext, const M *mapping,
                      int64_t n_rows, int32_t *dst_order, int32_t *dst_row_ptr,
                      int32_t *src_order, int32_t *src_row_ptr, char *scratch,
                      const PlanScratch &l, PlanStatus *host_status, hipStream_t s) {
  PlanStatus *st = reinterpret_cast<PlanStatus *>(scratch + l.status);
  const RadixPasses passes = radix_passes(n_rows);
  const KeySet<I, M> dst_keys{dst, n_edges, n_ext, mapping, n_rows};
  const KeySet<I, M> src_keys{src, n_edges, n_ext, mapping, n_rows};
  hipError_t e = hipMemsetAsync(st, 0xff, sizeof(PlanStatus), s);
  if (e != hipSuccess) return e;
  if (mapping && n_ext > 0)
    plan_check_mapping<M><<<grid_for(n_ext), kPlanBlock, 0, s>>>(mapping, n_ext, n_rows, st);
  if (n_edges > 0)
    plan_check_keys<I, M><<<dim3(static_cast<unsigned>(l.n_tiles), 2), kPlanBlock, 0, s>>>(
        dst_keys, src_keys, st);
  if ((e = hipGetLastError()) != hipSuccess) return e;
  e = hipMemcpyAsync(host_status, st, sizeof(PlanStatus), hipMemcpyDeviceToHost, s);
  if (e == hipSuccess) e = hipStreamSynchronize(s);
  if (e != hipSuccess) return e;
  if ((host_status->bad[0] & host_status->bad[1] & host_status->bad[2]) != kNoBad) return hipSuccess;
  const KeySet<I, M> *sets[2] = {&dst_keys, &src_keys};
  int32_t *orders[2] = {dst_order, src_order}, *row_ptrs[2] = {dst_row_ptr, src_row_ptr};
  for (int set = 0; set < 2; ++set) {
    if (host_status->sorted[set]) {
      plan_rows_in_order<I, M><<<grid_for(n_edges > n_rows + 1 ? n_edges : n_rows + 1), kPlanBlock,
                                 0, s>>>(*sets[set], orders[set], row_ptrs[set]);
      e = hipGetLastError();
    } else {
      e = sort_key_set(*sets[set], scratch, l, passes, orders[set], row_ptrs[set], s);
    }
    if (e != hipSuccess) return e;
  }
  // The scratch is the caller's again when the call returns.
  return hipStreamSynchronize(s);
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

bool valid_index_type(hipkern_index_type t) {
  return t == HIPKERN_INDEX_I32 || t == HIPKERN_INDEX_I64;
}

}  // namespace

extern "C" {

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

}  // extern "C"
