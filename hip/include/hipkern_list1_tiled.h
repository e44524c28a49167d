// hipkern_list1_tiled.h — the target-tiled schedule's staging, shared by its
// three kernels (list1_tiled_kernel, list1_staged_kernel,
// list1_tiled_fma_kernel; list1_tiled.hip says how the schedule works): the
// per-tile and per-chunk shared state, the key slots, the key matrices and
// the pipelined key walk. Internal, never installed; after
// hipkern_list1_common.h, in the same anonymous namespace.
#ifndef HIPKERN_LIST1_TILED_H
#define HIPKERN_LIST1_TILED_H

#include "hipkern_list1_common.h"

namespace {

constexpr int kTiledMaxThreads = 256;
constexpr int kTiledKeyChunk = 8;
constexpr int kTiledSlots = 2 * kTiledKeyChunk;  // two chunks: one written while the other is read
constexpr uint32_t kBadPair = 0xFFFFFFFEu;      // a slot whose pair fails its checks

// Outputs per thread: RO ≤ 9 with S = ⌈nq / RO⌉ parts as few as that allows
// (27 → 3 × 9, 64 → 8 × 8, 16 → 2 × 8, 25 → 3 × 9 padded to 27).
__host__ __device__ constexpr int tiled_parts(int nq) { return nq <= 9 ? 1 : (nq + 8) / 9; }
__host__ __device__ constexpr int tiled_ro(int nq) {
  return (nq + tiled_parts(nq) - 1) / tiled_parts(nq);
}
// T is stored per part: [part][s][o], rows of RO rounded up to even (16-byte
// aligned pairs); the staged source rows have an odd stride.
__host__ __device__ constexpr int tiled_part_stride(int nq) {
  return tiled_ro(nq) + (tiled_ro(nq) & 1);
}
__host__ __device__ constexpr int tiled_f_stride(int nq) { return nq | 1; }

// The per-tile and per-chunk shared state both per-key kernels keep after
// their matrices: [slot scale S·B f64] [slot displacement S·B f64] [slot
// matrix offset S u64] [slot box S·B u32] [lane target, list begin, list
// end, bad: 4·B u32] [tile bad u32], S = kTiledSlots.
__host__ __device__ inline size_t tiled_state_bytes(int b) {
  const size_t n = static_cast<size_t>(kTiledSlots) * b * 20 +
                   static_cast<size_t>(kTiledSlots) * 8 + static_cast<size_t>(b) * 16 + 4;
  return (n + 15) / 16 * 16;
}

#if defined(HIPKERN_L1_NVCC)
__device__ __forceinline__ double hk_fma(double a, double b, double c) { return __fma_rn(a, b, c); }
#else
__device__ __forceinline__ double hk_fma(double a, double b, double c) { return fma(a, b, c); }
#endif

struct TiledState {
  double *sscale, *sdisp;
  uint64_t *svoff;  // per slot: the offset of its key's case matrix in the matrices
  uint32_t *sbox, *ltarget, *lbegin, *lend, *lbad;
  uint32_t *tbad;  // the tile is bad (a key without a matrix): every output NaN
};

__device__ inline TiledState tiled_state(unsigned char *at, int b) {
  TiledState st;
  const int n = kTiledSlots * b;
  st.sscale = reinterpret_cast<double *>(at);
  st.sdisp = st.sscale + n;
  st.svoff = reinterpret_cast<uint64_t *>(st.sdisp + n);
  st.sbox = reinterpret_cast<uint32_t *>(st.svoff + kTiledSlots);
  st.ltarget = st.sbox + n;
  st.lbegin = st.ltarget + b;
  st.lend = st.lbegin + b;
  st.lbad = st.lend + b;
  st.tbad = st.lbad + b;
  return st;
}

// The offset of key `key`'s case matrix (nq × nq, entry s·nq + t =
// T(case, s, t)) in the matrices the tiled kernels read: with key matrices
// (tiles.key_matrices) matrix key_matrix_index[key], else (a DENSE table,
// checked by the entry point) the key's own rows in tab.values, since
// DENSE's rows of table·n_cases + case start at key·nq². A key past the
// tables reads matrix 0: its pairs are refused one by one (the slots'
// table check), as every kernel refuses a pair of another table. A key
// whose index is n_key_matrices or more reads matrix 0 and sets *tile_bad
// (same value from any writer).
__device__ __forceinline__ uint64_t key_matrix_offset(const hipkern_list1_table &tab,
                                                      const hipkern_list1_tiles &tl, uint32_t key,
                                                      int nq, uint32_t *tile_bad) {
  uint64_t x = 0;
  if (static_cast<uint64_t>(key) <
      static_cast<uint64_t>(tab.n_tables) * static_cast<uint64_t>(tab.n_cases)) {
    x = key;
    if (tl.key_matrices != nullptr) {
      x = tl.key_matrix_index[key];
      if (static_cast<int64_t>(x) >= tl.n_key_matrices) {
        *tile_bad = 1u;
        x = 0;
      }
    }
  }
  return x * static_cast<uint64_t>(nq) * static_cast<uint64_t>(nq);
}

// Tile k's lanes into shared memory, by the block: target (kNotFound for
// none), list range, bad flag cleared. No barrier.
template <int B, int THREADS>
__device__ void tile_lanes(const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl, int64_t k,
                           uint32_t *ltarget, uint32_t *lbegin, uint32_t *lend, uint32_t *lbad) {
  for (int lane = static_cast<int>(threadIdx.x); lane < B; lane += THREADS) {
    const uint32_t i = tl.tile_targets[static_cast<size_t>(k) * B + lane];
    const bool mine = static_cast<int64_t>(i) < pr.n_targets;
    ltarget[lane] = mine ? i : kNotFound;
    lbegin[lane] = mine ? pr.source_starts[i] : 0u;
    lend[lane] = mine ? pr.source_starts[i + 1] : 0u;
    lbad[lane] = 0u;
  }
}

#if defined(HIPKERN_L1_NVCC)
// The source box of pair j in a lane's slot of key `key` (table · n_cases
// + case), or kBadPair: j outside the lane's list [begin, end), or of
// another case or table. (Only the source-staged kernel calls it, and it
// is built for NVIDIA alone.)
__device__ __forceinline__ uint32_t tiled_pair_box(const hipkern_list1_table &tab,
                                                   const hipkern_list1_pairs &pr, uint32_t j,
                                                   uint32_t begin, uint32_t end, uint32_t key) {
  if (j < begin || j >= end) return kBadPair;
  const int c = static_cast<int>(key % static_cast<uint32_t>(tab.n_cases));
  const uint32_t table = key / static_cast<uint32_t>(tab.n_cases);
  const uint32_t b = pr.source_boxes[j];
  return table < static_cast<uint32_t>(tab.n_tables) && pr.pair_cases[j] == c &&
                 pr.level_table[pr.box_levels[b]] == table
             ? b
             : kBadPair;
}
#endif  // HIPKERN_L1_NVCC

// The displacement term of source box b: the level's displacement times
// Σ_s f[b, s]·N_s (in mode order, fused), 0 where the level has none.
template <int NQ>
__device__ __forceinline__ double tiled_displacement_term(const hipkern_list1_table &tab,
                                                          const hipkern_list1_pairs &pr,
                                                          const double *__restrict__ f,
                                                          uint32_t b) {
  const double disp = pr.level_displacement[pr.box_levels[b]];
  if (disp == 0.0) return 0.0;
  const double *__restrict__ fs = f + static_cast<size_t>(b) * NQ;
  double sum = 0.0;
  for (int s = 0; s < NQ; ++s) sum = hk_fma(fs[s], tab.mode_normalizers[s], sum);
  return disp * sum;
}

// Tile k's lanes into shared memory, the tile's bad flag cleared. Ends
// with a barrier.
template <int B, int THREADS>
__device__ void tiled_tile_begin(const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl,
                                 int64_t k, const TiledState &st) {
  __syncthreads();  // the previous tile's lanes and bad flags are read
  if (threadIdx.x == 0) *st.tbad = 0u;
  tile_lanes<B, THREADS>(pr, tl, k, st.ltarget, st.lbegin, st.lend, st.lbad);
  __syncthreads();
}

// The slots of keys ec .. ec + nk (nk ≤ kTiledKeyChunk) into chunk buffer
// `buf`: per key its case matrix's offset (key_matrix_offset); per (key,
// lane) the box (kNotFound: no pair; kBadPair: a pair outside the lane's
// list or of another case or table, which also sets the lane's bad flag),
// scale, displacement term. Every slot's loads are independent of the
// others'. Read only after a later barrier.
template <int NQ, int B, int THREADS>
__device__ void tiled_slots(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                            const hipkern_list1_tiles &tl, const double *__restrict__ f,
                            uint32_t ec, int nk, int buf, const TiledState &st) {
  constexpr int N = kTiledKeyChunk * B;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < nk)
    st.svoff[buf * kTiledKeyChunk + tid] =
        key_matrix_offset(tab, tl, tl.keys[ec + static_cast<uint32_t>(tid)], NQ, st.tbad);
#pragma unroll
  for (int it = 0; it < (N + THREADS - 1) / THREADS; ++it) {
    const int x = tid + it * THREADS;
    if (x < N) {
      const int kk = x / B, lane = x - kk * B;
      uint32_t box = kNotFound;
      double scale = 0.0, dterm = 0.0;
      if (kk < nk && st.ltarget[lane] != kNotFound) {
        const uint32_t e = ec + static_cast<uint32_t>(kk);
        const uint32_t j = tl.key_pairs[static_cast<size_t>(e) * B + lane];
        if (j != kNotFound) {
          // tiled_pair_box and tiled_displacement_term written out: through
          // them nvcc 13.0 allocated these kernels differently (the dense
          // 64-box tensor kernel 126 registers instead of 80), unlike the
          // build that was measured.
          const uint32_t key = tl.keys[e];
          const int c = static_cast<int>(key % static_cast<uint32_t>(tab.n_cases));
          const uint32_t table = key / static_cast<uint32_t>(tab.n_cases);
          box = kBadPair;
          if (j >= st.lbegin[lane] && j < st.lend[lane]) {
            const uint32_t b = pr.source_boxes[j];
            const int lvl = pr.box_levels[b];
            if (table < static_cast<uint32_t>(tab.n_tables) && pr.pair_cases[j] == c &&
                pr.level_table[lvl] == table) {
              box = b;
              scale = pr.level_scale[lvl];
              const double disp = pr.level_displacement[lvl];
              if (disp != 0.0) {
                const double *__restrict__ fs = f + static_cast<size_t>(b) * NQ;
                double sum = 0.0;
                for (int s = 0; s < NQ; ++s) sum = hk_fma(fs[s], tab.mode_normalizers[s], sum);
                dterm = disp * sum;
              }
            }
          }
          if (box == kBadPair) st.lbad[lane] = 1u;  // same value from any writer
        }
      }
      const int at = (buf * kTiledKeyChunk + kk) * B + lane;
      st.sbox[at] = box;
      st.sscale[at] = scale;
      st.sdisp[at] = dterm;
    }
  }
}

// One key's loads, in registers between their issue and their store: the
// case matrix entries x = s·nq + t (thread's x = tid + u·THREADS) and the
// source values x = r·nq + s of the B lanes (unscaled; 0 for a lane
// without a pair).
template <int NQ, int B, int THREADS>
struct TiledKeyLoads {
  static constexpr int kA = (NQ * NQ + THREADS - 1) / THREADS;
  static constexpr int kG = (B * NQ + THREADS - 1) / THREADS;
  double a[kA];
  double g[kG];
};

// Issues key slot `slot`'s loads (its matrix offset and boxes are in
// shared memory from tiled_slots): the case matrix straight from
// `matrices` (key matrices or DENSE's rows: coalesced, entry s·nq + t at
// s·nq + t).
template <int NQ, int B, int THREADS>
__device__ __forceinline__ void tiled_issue(const double *__restrict__ matrices,
                                            const double *__restrict__ f, const TiledState &st,
                                            int slot, TiledKeyLoads<NQ, B, THREADS> &ld) {
  using L = TiledKeyLoads<NQ, B, THREADS>;
  const int tid = static_cast<int>(threadIdx.x);
  const double *__restrict__ M = matrices + st.svoff[slot];
#pragma unroll
  for (int u = 0; u < L::kA; ++u) {
    const int x = u * THREADS + tid;
    ld.a[u] = x < NQ * NQ ? M[x] : 0.0;
  }
  const uint32_t *sbox = st.sbox + slot * B;
#pragma unroll
  for (int u = 0; u < L::kG; ++u) {
    const int x = u * THREADS + tid;
    const int r = x / NQ, s = x - r * NQ;
    const uint32_t b = x < B * NQ ? sbox[r] : kNotFound;
    ld.g[u] = b < kBadPair ? f[static_cast<size_t>(b) * NQ + s] : 0.0;
  }
}

// Stores the loads of slot `slot` into the case matrix A[index(s, t)] and
// the source rows G[r·ldg + s] = scale_r · f[box_r, s] (a lane without a
// pair: 0 where ZERO_EMPTY — the tensor cores read every row — else
// untouched).
template <int NQ, int B, int THREADS, bool ZERO_EMPTY, typename Index>
__device__ __forceinline__ void tiled_store(const TiledKeyLoads<NQ, B, THREADS> &ld,
                                            const TiledState &st, int slot, double *A, Index index,
                                            double *G, int ldg) {
  using L = TiledKeyLoads<NQ, B, THREADS>;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int u = 0; u < L::kA; ++u) {
    const int x = u * THREADS + tid;
    if (x < NQ * NQ) A[index(x / NQ, x % NQ)] = ld.a[u];
  }
  const uint32_t *sbox = st.sbox + slot * B;
  const double *sscale = st.sscale + slot * B;
#pragma unroll
  for (int u = 0; u < L::kG; ++u) {
    const int x = u * THREADS + tid;
    if (x < B * NQ) {
      const int r = x / NQ, s = x - r * NQ;
      const bool has = sbox[r] < kBadPair;
      if (ZERO_EMPTY || has) G[r * ldg + s] = has ? ld.g[u] * sscale[r] : 0.0;
    }
  }
}

// The slot of the key at position j of the tile's keys.
__device__ __forceinline__ int tiled_slot_of(uint32_t j) {
  return static_cast<int>(((j / kTiledKeyChunk) & 1) * kTiledKeyChunk + j % kTiledKeyChunk);
}

// The pipelined walk over tile k's keys e0 .. e1 shared by both per-key
// kernels: tiled_slots for the first chunk; key e0's loads; then per key e
// (slot): barrier, store e's loads, barrier, issue e + 1's loads,
// sums(slot) (the kernel's products from A and G), and after the first key
// of a chunk the next chunk's slots. `A_index` maps (s, t) to the case
// matrix's layout in shared memory.
template <int NQ, int B, int THREADS, bool ZERO_EMPTY, typename Index, typename Sums>
__device__ __forceinline__ void tiled_walk(const hipkern_list1_table &tab,
                                           const hipkern_list1_pairs &pr,
                                           const hipkern_list1_tiles &tl,
                                           const double *__restrict__ matrices,
                                           const double *__restrict__ f, int64_t k,
                                           const TiledState &st, double *A, Index A_index,
                                           double *G, int ldg, Sums sums) {
  const uint32_t e0 = tl.tile_key_offsets[k], e1 = tl.tile_key_offsets[k + 1];
  if (e0 >= e1) return;
  const uint32_t n = e1 - e0;
  tiled_slots<NQ, B, THREADS>(tab, pr, tl, f, e0,
                              n < kTiledKeyChunk ? static_cast<int>(n) : kTiledKeyChunk, 0, st);
  __syncthreads();
  TiledKeyLoads<NQ, B, THREADS> ld;
  tiled_issue<NQ, B, THREADS>(matrices, f, st, 0, ld);
  for (uint32_t j = 0; j < n; ++j) {
    const int slot = tiled_slot_of(j);
    __syncthreads();  // the previous key's A, G and slot are read
    tiled_store<NQ, B, THREADS, ZERO_EMPTY>(ld, st, slot, A, A_index, G, ldg);
    __syncthreads();
    if (j + 1 < n) tiled_issue<NQ, B, THREADS>(matrices, f, st, tiled_slot_of(j + 1), ld);
    sums(slot);
    // The next chunk into the other buffer: its last reader was the key
    // before this one (ordered by this key's first barrier); its first
    // reader is this chunk's last key, after further barriers.
    if (j % kTiledKeyChunk == 0 && j + kTiledKeyChunk < n) {
      const uint32_t left = n - j - kTiledKeyChunk;
      tiled_slots<NQ, B, THREADS>(tab, pr, tl, f, e0 + j + kTiledKeyChunk,
                                  left < kTiledKeyChunk ? static_cast<int>(left) : kTiledKeyChunk,
                                  static_cast<int>(((j / kTiledKeyChunk) + 1) & 1), st);
    }
  }
}

}  // namespace

#endif  // HIPKERN_LIST1_TILED_H
