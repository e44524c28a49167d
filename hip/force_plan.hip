// The force assembly's CSR plan, built on the device (docs/design/force.md):
// for each key set (dst, then src; or mapping[dst] and mapping[src]) the
// edge ids in stable key order and each row's first position.
//
// A least-significant-digit radix sort, each pass stable:
//   0. every index is range-checked (first bad position of each array kept
//      with atomicMin) and each key set is checked for coming in order
//      already (a neighbour list grouped by centre gives dst keys in
//      order); the same read counts src's digits for every pass. The host
//      reads that verdict: with a bad index nothing more is launched, so
//      the outputs are untouched.
//   1. the digits of every pass over the whole set (src's from step 0,
//      dst's by one read of its keys); then per pass over at most
//      kMaxDigitBits bits of the key, one launch (Onesweep: Adinets and
//      Merrill, 2022): each tile of kTile edges ranks its edges by digit
//      in edge order (ballots within 32-lane groups, shared-memory
//      counts), finds how many edges of each digit the tiles before it
//      hold by a decoupled look-back, stages its edges by digit in shared
//      memory and writes them out in runs of one digit.
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
constexpr uint64_t kNoBad = ~0ull;

// The radix passes for keys below n_rows: their number and each one's bits
// (the earlier passes take the odd bit), 0 passes for one row or none.
constexpr int kMaxPasses = 4;
struct RadixPasses {
  int count = 0;
  int bits[kMaxPasses] = {0, 0, 0, 0};
  int shift[kMaxPasses] = {0, 0, 0, 0};
  __device__ uint32_t digit(int32_t key, int p) const {
    return (static_cast<uint32_t>(key) >> shift[p]) & ((1u << bits[p]) - 1);
  }
};

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

// A block's digit counts of every pass, in shared memory
// (counts[pass][digit]); then added to the grid's, hist[pass * kMaxDigits
// + digit], by one atomic per nonzero count. `on` false: nothing counted.
struct BlockDigitCounts {
  uint32_t (*counts)[kMaxDigits];
  __device__ void zero() const {
    for (int p = 0; p < kMaxPasses; ++p) counts[p][threadIdx.x] = 0;
  }
  __device__ void add(const RadixPasses &passes, bool on, int32_t key) const {
#pragma unroll
    for (int p = 0; p < kMaxPasses; ++p)
      if (on && p < passes.count) atomicAdd(&counts[p][passes.digit(key, p)], 1u);
  }
  __device__ void flush(const RadixPasses &passes, bool on, uint32_t *hist) const {
    for (int p = 0; on && p < passes.count; ++p)
      if (counts[p][threadIdx.x] != 0u)
        atomicAdd(&hist[p * kMaxDigits + threadIdx.x], counts[p][threadIdx.x]);
  }
};

// Step 0: every index range-checked (the first bad position of each array
// kept), and whether each key set comes in order. blockIdx.y: 0 = dst,
// 1 = src. The same read counts src's digits for every radix pass (the
// histogram step 1 needs), whether src turns out to need sorting or not:
// a neighbour list's src keys almost always do, and a separate histogram
// read of them cost 70 µs at E = 33.5 M against 32 µs more here
// (benches/RESULTS.md). dst's are not counted here: they usually come in
// order (no sort), and keys in order would make every lane of a group add
// to one counter.
template <typename I, typename M>
__global__ __launch_bounds__(kPlanBlock) void plan_check_keys(KeySet<I, M> dst, KeySet<I, M> src,
                                                              PlanStatus *st, RadixPasses passes,
                                                              uint32_t *hist_base) {
  __shared__ uint32_t counts[kMaxPasses][kMaxDigits];
  const BlockDigitCounts block_counts{counts};
  block_counts.zero();
  __syncthreads();
  const int set = static_cast<int>(blockIdx.y);
  const KeySet<I, M> ks = set == 1 ? src : dst;
  bool descent = false;
  for (int64_t tile = static_cast<int64_t>(blockIdx.x) * kTile; tile < ks.n_edges;
       tile += static_cast<int64_t>(gridDim.x) * kTile) {
    const int64_t base = tile + threadIdx.x;  // (the loop is uniform over the block)
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
#pragma unroll
    for (int r = 0; r < kItems; ++r) {
      const int64_t e = base + r * kPlanBlock;
      if (e >= ks.n_edges) continue;
      if (key[r] < 0) {
        if (raw[r] < 0 || raw[r] >= ks.n_ext)
          atomicMin(&st->bad[set == 1 ? 0 : 1], static_cast<unsigned long long>(e));
        // (a mapping entry out of range: plan_check_mapping records it)
      } else {
        if (prev[r] > key[r]) descent = true;
        block_counts.add(passes, set == 1, key[r]);
      }
    }
  }
  __syncthreads();
  block_counts.flush(passes, set == 1, hist_base + set * kMaxPasses * kMaxDigits);
  // One word per set for the whole grid: one write per block that saw a
  // descent, and none once some block has (a write per thread serialises
  // millions of atomics on one address).
  if (__syncthreads_or(descent) && threadIdx.x == 0 && st->sorted[set] != 0u)
    atomicExch(&st->sorted[set], 0u);
}

// Every pass's digit counts over the whole key set in one read of the keys
// (a block's counts in shared memory, then one global atomic per digit per
// block): hist[p * kMaxDigits + digit], zeroed by the caller.
template <typename I, typename M>
__global__ __launch_bounds__(kPlanBlock) void plan_digit_histogram(KeySet<I, M> ks,
                                                                   RadixPasses passes,
                                                                   uint32_t *hist) {
  __shared__ uint32_t counts[kMaxPasses][kMaxDigits];
  const BlockDigitCounts block_counts{counts};
  block_counts.zero();
  __syncthreads();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kTile;
  for (int64_t tile = static_cast<int64_t>(blockIdx.x) * kTile; tile < ks.n_edges;
       tile += stride) {
    const int64_t base = tile + threadIdx.x;
    int64_t raw[kItems];
#pragma unroll
    for (int r = 0; r < kItems; ++r) {
      const int64_t e = base + r * kPlanBlock;
      raw[r] = e < ks.n_edges ? static_cast<int64_t>(ks.idx[e]) : -1;
    }
#pragma unroll
    for (int r = 0; r < kItems; ++r) {
      const int32_t key = ks.key_of(raw[r]);
      if (key < 0) continue;  // past the end (indices were checked in step 0)
      block_counts.add(passes, true, key);
    }
  }
  __syncthreads();
  block_counts.flush(passes, true, hist);
}

// Decoupled look-back (Merrill and Garland's single-pass scan, as Onesweep
// uses it for radix sorting): each tile publishes, per digit, first its own
// count and then its inclusive prefix over the tiles before it, in one
// 64-bit word: high half 2 * epoch + (1 for a prefix, 0 for a count alone),
// low half the value. A word whose high half is below 2 * epoch is from
// an earlier pass (or zero) and not ready yet. Epochs (1 + set * kMaxPasses
// + pass) let one table, zeroed once per build, serve every pass.
// The status words are read and written by relaxed device-scope atomics
// (one 64-bit access each: the flag and the value never tear apart; no
// other data passes between blocks, so no fence), and a waiting tile
// pauses between polls rather than hammering the word (rocPRIM's look-back
// does the same).
__device__ inline unsigned long long load_status(const unsigned long long *word) {
#if defined(__CUDA_ARCH__)
  unsigned long long w;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(word) : "memory");
  return w;
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(word, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  return *word;  // (host pass: never called)
#endif
}

__device__ inline void store_status(unsigned long long *word, unsigned long long w) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" : : "l"(word), "l"(w) : "memory");
#elif defined(__HIP_DEVICE_COMPILE__)
  __hip_atomic_store(word, w, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  *word = w;
#endif
}

__device__ inline void pause_polling() {
#if defined(__CUDA_ARCH__)
  __nanosleep(32);
#elif defined(__HIP_DEVICE_COMPILE__)
  __builtin_amdgcn_s_sleep(1);
#endif
}

__device__ inline void publish(unsigned long long *word, uint32_t epoch, bool prefix,
                               uint32_t value) {
  store_status(word, (static_cast<unsigned long long>(2 * epoch + (prefix ? 1 : 0)) << 32) | value);
}

// The sum of digit d's counts in tiles [0, tile): back from tile - 1,
// adding counts until a prefix is found. The tiles before `tile` took
// their numbers earlier and so are running or done: the wait ends.
// kLookBackWindow words are loaded at once (independent loads, one round
// trip), then taken in order up to the first prefix or the first word
// not yet published, where the next window starts. On the H100 at
// E = 33.5 M a window of 4 took the three passes from 467/433/429 µs
// (one word a round trip) to 437/399/391 µs (benches/RESULTS.md).
constexpr int kLookBackWindow = 4;
__device__ inline uint32_t look_back(const unsigned long long *status, int64_t tile, unsigned d,
                                     uint32_t epoch) {
  uint32_t sum = 0;
  for (int64_t t = tile - 1; t >= 0;) {
    unsigned long long w[kLookBackWindow];
#pragma unroll
    for (int i = 0; i < kLookBackWindow; ++i)
      w[i] = t - i >= 0 ? load_status(status + (t - i) * kMaxDigits + d) : 0ull;
    int taken = 0;
#pragma unroll
    for (int i = 0; i < kLookBackWindow; ++i) {
      if (t - i < 0) break;
      const uint32_t tag = static_cast<uint32_t>(w[i] >> 32);
      if (tag < 2 * epoch) break;  // not published yet: the next window starts here
      sum += static_cast<uint32_t>(w[i]);
      if (tag == 2 * epoch + 1) return sum;
      taken = i + 1;
    }
    if (taken == 0) pause_polling();
    t -= taken;
  }
  return sum;
}

// One radix pass over one tile, its output slots found in the same launch:
// the tile takes the next tile number (so that every tile it waits for has
// started), ranks its edges by digit in edge order (each group's edges in
// rounds of kLaneGroup; a group's running count per digit in shared
// memory, taken by one atomic per digit per round whose old value the
// leader hands to its peers), publishes its digit counts, looks back for
// the tiles before it, places its edges in shared memory by digit and
// writes them out in runs of one digit, consecutive slots from
// consecutive threads. A digit's runs start at the digit's first slot
// over all tiles (the scanned histogram) plus the earlier tiles' counts.
// keys_in/ids_in null: pass 0 (keys from the indices, ids the edge
// positions). keys_out: the keys in the new order (the next pass's input,
// or the row search's).
// kPassBlocksPerSM: ptxas then fits the pass in 48 registers (58 when
// unbounded, four blocks an SM; 20 bytes spill), and a fifth tile is in
// flight on each SM while the others wait on barriers and the look-back.
// On the H100 at E = 33.5 M the plan build took 1.624-1.637 ms against
// 1.663-1.671 ms with four, in two calls (benches/RESULTS.md). NVIDIA
// only: on AMD the second bound means waves per EU (docs/warp_size.md),
// which ROCm's compiler cannot meet here (it warns and reaches two).
#if defined(__HIP_PLATFORM_NVIDIA__)
constexpr int kPassBlocksPerSM = 5;
#define HIPKERN_PASS_BOUNDS __launch_bounds__(kPlanBlock, kPassBlocksPerSM)
#else
#define HIPKERN_PASS_BOUNDS __launch_bounds__(kPlanBlock)
#endif
template <typename I, typename M>
__global__ HIPKERN_PASS_BOUNDS void plan_digit_pass(
    KeySet<I, M> ks, const int32_t *__restrict__ keys_in, const int32_t *__restrict__ ids_in,
    int32_t *__restrict__ keys_out, int32_t *__restrict__ ids_out, const uint32_t *hist,
    unsigned long long *status, uint32_t *tile_counter, uint32_t epoch, int shift, int bits) {
  __shared__ int32_t group_count[kGroups][kMaxDigits];  // running count, then the group's prefix
  __shared__ int32_t first_slot[kMaxDigits];             // the tile's first slot of each digit
  __shared__ int32_t out_shift[kMaxDigits];              // output slot minus tile slot
  __shared__ int32_t staged_key[kTile], staged_id[kTile];
  __shared__ int32_t group_sums[kGroups];
  __shared__ uint32_t tile_number;
  for (int g = 0; g < kGroups; ++g) group_count[g][threadIdx.x] = 0;
  if (threadIdx.x == 0) tile_number = atomicAdd(tile_counter, 1u);
  const unsigned d = threadIdx.x;
  const uint32_t digit_mask = (1u << bits) - 1;
  // The digit's first slot over all tiles (every block scans the 256
  // counts; cheaper than a launch).
  int32_t unused_total;
  const int32_t digit_start = block_scan_exclusive(
      d <= digit_mask ? static_cast<int32_t>(hist[d]) : 0, group_sums, &unused_total);
  const int64_t tile = tile_number;  // (the scan's barriers published it)
  const int group = static_cast<int>(threadIdx.x) / kLaneGroup;
  const int lane = group_lane();
  int32_t key[kItems], id[kItems], rank[kItems];
  load_tile(ks, keys_in, ids_in, tile * kTile + static_cast<int64_t>(group) * kGroupSpan, lane,
            key, id);
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
  unsigned long long *word = status + tile * kMaxDigits + d;
  if (d <= digit_mask) publish(word, epoch, tile == 0, static_cast<uint32_t>(digit_total));
  int32_t tile_total;
  const int32_t first = block_scan_exclusive(digit_total, group_sums, &tile_total);
  if (d <= digit_mask) {
    uint32_t before = 0;
    if (tile > 0) {
      before = look_back(status, tile, d, epoch);
      publish(word, epoch, true, before + static_cast<uint32_t>(digit_total));
    }
    first_slot[d] = first;
    out_shift[d] = digit_start + static_cast<int32_t>(before) - first;
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
// The look-back region (both sets' histograms and tile counters, the tile
// status table) is zeroed once per build that sorts.
struct PlanScratch {
  size_t status, hist, tile_counters, tile_status, lookback_end, keys_a, keys_b, ids, total;
  int64_t n_tiles;  // of kTile edges: the blocks of every edge kernel
};

size_t align256(size_t x) { return (x + 255) & ~static_cast<size_t>(255); }

PlanScratch plan_scratch_layout(int64_t n_edges) {
  PlanScratch l;
  l.n_tiles = (n_edges + kTile - 1) / kTile;
  const size_t edges = sizeof(int32_t) * static_cast<size_t>(n_edges);
  size_t at = 0;
  l.status = at;
  at = align256(at + sizeof(PlanStatus));
  l.hist = at;
  at = align256(at + sizeof(uint32_t) * 2 * kMaxPasses * kMaxDigits);
  l.tile_counters = at;
  at = align256(at + sizeof(uint32_t) * 2 * kMaxPasses);
  l.tile_status = at;
  at = align256(at + sizeof(unsigned long long) * kMaxDigits * static_cast<size_t>(l.n_tiles));
  l.lookback_end = at;
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

// Blocks of the histogram pass: enough to fill any current GPU, few enough
// that the blocks' global atomics (one per digit per pass) stay far below
// the edges' count.
constexpr int64_t kHistogramBlocks = 1024;
unsigned histogram_blocks(const PlanScratch &l) {
  return static_cast<unsigned>(l.n_tiles < kHistogramBlocks ? l.n_tiles : kHistogramBlocks);
}

// Steps 1 and 2 for key set `set` (0 dst, 1 src) whose keys are not in
// order: the histogram, the passes, ping-ponging keys between
// keys_a/keys_b and ids between `ids` and `order` so that the last pass
// writes `order`; then the row starts. The look-back region is zero.
template <typename I, typename M>
hipError_t sort_key_set(const KeySet<I, M> &ks, int set, char *scratch, const PlanScratch &l,
                        const RadixPasses &passes, int32_t *order, int32_t *row_ptr,
                        hipStream_t s) {
  uint32_t *hist = reinterpret_cast<uint32_t *>(scratch + l.hist) + set * kMaxPasses * kMaxDigits;
  uint32_t *counters = reinterpret_cast<uint32_t *>(scratch + l.tile_counters) + set * kMaxPasses;
  unsigned long long *status = reinterpret_cast<unsigned long long *>(scratch + l.tile_status);
  int32_t *keys[2] = {reinterpret_cast<int32_t *>(scratch + l.keys_a),
                      reinterpret_cast<int32_t *>(scratch + l.keys_b)};
  int32_t *ids_tmp = reinterpret_cast<int32_t *>(scratch + l.ids);
  const unsigned tiles = static_cast<unsigned>(l.n_tiles);
  if (set == 0)  // (src's digits were counted in step 0)
    plan_digit_histogram<I, M><<<histogram_blocks(l), kPlanBlock, 0, s>>>(ks, passes, hist);
  const int32_t *keys_in = nullptr, *ids_in = nullptr;
  for (int p = 0; p < passes.count; ++p) {
    int32_t *keys_out = keys[p % 2];
    int32_t *ids_out = (passes.count - 1 - p) % 2 == 0 ? order : ids_tmp;
    const uint32_t epoch = static_cast<uint32_t>(1 + set * kMaxPasses + p);
    plan_digit_pass<I, M><<<tiles, kPlanBlock, 0, s>>>(ks, keys_in, ids_in, keys_out, ids_out,
                                                      hist + p * kMaxDigits, status,
                                                      counters + p, epoch, passes.shift[p],
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
  if (n_edges > 0) {
    // (src's histogram and the tile counters start at zero; the status
    // table is zeroed only once the verdict says a set needs sorting.)
    e = hipMemsetAsync(scratch + l.hist, 0, l.tile_status - l.hist, s);
    if (e != hipSuccess) return e;
    plan_check_keys<I, M><<<dim3(histogram_blocks(l), 2), kPlanBlock, 0, s>>>(
        dst_keys, src_keys, st, passes, reinterpret_cast<uint32_t *>(scratch + l.hist));
  }
  if ((e = hipGetLastError()) != hipSuccess) return e;
  e = hipMemcpyAsync(host_status, st, sizeof(PlanStatus), hipMemcpyDeviceToHost, s);
  if (e == hipSuccess) e = hipStreamSynchronize(s);
  if (e != hipSuccess) return e;
  if ((host_status->bad[0] & host_status->bad[1] & host_status->bad[2]) != kNoBad) return hipSuccess;
  const KeySet<I, M> *sets[2] = {&dst_keys, &src_keys};
  int32_t *orders[2] = {dst_order, src_order}, *row_ptrs[2] = {dst_row_ptr, src_row_ptr};
  if (passes.count > 0 && (!host_status->sorted[0] || !host_status->sorted[1])) {
    e = hipMemsetAsync(scratch + l.tile_status, 0, l.lookback_end - l.tile_status, s);
    if (e != hipSuccess) return e;
  }
  for (int set = 0; set < 2; ++set) {
    // (With one row or none every key is 0: in order.)
    if (host_status->sorted[set] || passes.count == 0) {
      plan_rows_in_order<I, M><<<grid_for(n_edges > n_rows + 1 ? n_edges : n_rows + 1), kPlanBlock,
                                 0, s>>>(*sets[set], orders[set], row_ptrs[set]);
      e = hipGetLastError();
    } else {
      e = sort_key_set(*sets[set], set, scratch, l, passes, orders[set], row_ptrs[set], s);
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
  *bytes = plan_scratch_layout(n_edges).total;
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
  const PlanScratch l = plan_scratch_layout(n_edges);
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
