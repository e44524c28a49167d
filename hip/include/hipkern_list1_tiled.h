// hipkern_list1_tiled.h — the target-tiled schedule's staging, shared by its
// three kernels (list1_tiled_kernel, list1_tiled_mma_kernel,
// list1_tiled_mma_sources_kernel; list1_tiled.hip says how the schedule
// works): the per-tile and per-chunk shared state, the key slots, the ORBIT
// per-axis tables and the pipelined key walk. Internal, never installed;
// after hipkern_list1_common.h, in the same anonymous namespace.
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

// The per-tile and per-chunk shared state both kernels keep after their
// matrices: [slot scale S·B f64] [slot displacement S·B f64] [slot value
// offset S u64] [slot box S·B u32] [lane target, list begin, list end, bad:
// 4·B u32] [slot case S i32] [slot candidate count,
// smallest image case: 2·S i32] [mode words 2·nq u32] [ORBIT rank terms
// 2 × 3 × kTiledMaxQ2 u32] [ORBIT axis codes 2 × 3 × kTiledMaxQ2 u16]
// [align 16] [slot OrbitCase S] [slot candidates S × max transforms u8],
// S = kTiledSlots.
constexpr int kTiledMaxQ2 = 64;  // q² of the tiled schedule: q^d ≤ 64 gives q ≤ 8 (2D), 4 (3D)
__host__ __device__ inline size_t tiled_state_head_bytes(int nq, int b) {
  size_t n = static_cast<size_t>(kTiledSlots) * b * 20 + static_cast<size_t>(kTiledSlots) * 8 +
             static_cast<size_t>(b) * 16 + static_cast<size_t>(kTiledSlots) * 12 +
             8 * static_cast<size_t>(nq) + 2 * 3 * kTiledMaxQ2 * 6;
  return (n + 15) / 16 * 16;
}
__host__ __device__ inline size_t tiled_state_bytes(int nq, int b) {
  return tiled_state_head_bytes(nq, b) +
         static_cast<size_t>(kTiledSlots) * (sizeof(OrbitCase) + HIPKERN_LIST1_MAX_TRANSFORMS);
}

#if defined(HIPKERN_L1_NVCC)
__device__ __forceinline__ double hk_fma(double a, double b, double c) { return __fma_rn(a, b, c); }
#else
__device__ __forceinline__ double hk_fma(double a, double b, double c) { return fma(a, b, c); }
#endif

struct TiledState {
  double *sscale, *sdisp;
  uint64_t *svoff;  // per slot: the offset of its table's rows in tab.values
  uint32_t *sbox, *ltarget, *lbegin, *lend, *lbad;
  int *scase;  // per slot: its case
  int *cinfo;  // 2 per slot
  // ORBIT: per mode m its digits placed for the axis pair index of each
  // original axis j (6 bits at 6j): swd[m] = Σ d_j(m)·q << 6j as the
  // source, twd[m] = Σ d_j(m) << 6j as the target, so swd[s] + twd[t]
  // holds d_j(s)·q + d_j(t) for every axis.
  uint32_t *swd, *twd;
  // ORBIT, two sets (keys alternate): per position k the rank term
  // w_k · C(code + pos_k, pos_k + 1) of each code, and per position k and
  // axis pair index (of axis perm_k) the folded code | orbit_fold's
  // flags << 8 (tiled_orbit_tables).
  uint32_t *orank;
  uint16_t *ocode;
  OrbitCase *soc;  // 1 per slot
  uint8_t *cand;   // HIPKERN_LIST1_MAX_TRANSFORMS per slot
};

__device__ inline TiledState tiled_state(unsigned char *at, int nq, int b) {
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
  st.scase = reinterpret_cast<int *>(st.lbad + b);
  st.cinfo = st.scase + kTiledSlots;
  st.swd = reinterpret_cast<uint32_t *>(st.cinfo + 2 * kTiledSlots);
  st.twd = st.swd + nq;
  st.orank = st.twd + nq;
  st.ocode = reinterpret_cast<uint16_t *>(st.orank + 2 * 3 * kTiledMaxQ2);
  const size_t off = tiled_state_head_bytes(nq, b);
  st.soc = reinterpret_cast<OrbitCase *>(at + off);
  st.cand = at + off + sizeof(OrbitCase) * kTiledSlots;
  return st;
}

// ORBIT: the mode words of mode m (TiledState::swd, twd): its digits d_j
// placed at bits 6j, times q as the source (sw), as they are as the target
// (tw), so sw(s) + tw(t) holds d_j(s)·q + d_j(t) for every axis j.
template <int D>
__device__ __forceinline__ void mode_words(int m, int q, uint32_t &sw, uint32_t &tw) {
  int d[3];
  digits<D>(m, q, d);
  sw = 0;
  tw = 0;
  for (int j = 0; j < D; ++j) {
    sw += static_cast<uint32_t>(d[j] * q) << (6 * j);
    tw += static_cast<uint32_t>(d[j]) << (6 * j);
  }
}

// ORBIT: the mode words of every mode into TiledState::swd, twd, by the block.
template <int D>
__device__ void tiled_mode_words(int q, int nq, const TiledState &st) {
  for (int m = static_cast<int>(threadIdx.x); m < nq; m += static_cast<int>(blockDim.x))
    mode_words<D>(m, q, st.swd[m], st.twd[m]);
}

// ORBIT: the per-axis tables of one OrbitCase, entries x = first, first +
// step, ... of D·q² — the per-axis steps of group_orbit_entry done once per
// (position, digit pair) instead of once per entry: position k, pair
// P = x_s·q + x_t of the raw digits of axis perm_k gives the code (node
// flip, then the stabiliser's fold) with orbit_fold's flags << 8 at
// cd[k·stride + P], and the rank term w_k · C(code + pos_k, pos_k + 1) of
// each code at rk[k·stride + code].
template <int D>
__device__ void orbit_axis_tables(const OrbitCase &oc, int q, uint16_t *cd, uint32_t *rk,
                                  int stride, int first, int step) {
  const int q2 = q * q;
  for (int x = first; x < D * q2; x += step) {
    const int k = x / q2, pi = x - k * q2;
    int xs = pi / q, xt = pi - (pi / q) * q;
    if (oc.flags[k] & kNodeFlip) {
      xs = q - 1 - xs;
      xt = q - 1 - xt;
    }
    uint32_t fold = 0;
    const int p = orbit_fold(oc.flags[k], q2, xs * q + xt, fold);
    cd[k * stride + pi] = static_cast<uint16_t>(static_cast<uint32_t>(p) | (fold << 8));
    rk[k * stride + pi] = oc.w[k] * rank_term(static_cast<uint32_t>(pi), oc.pos[k]);
  }
}

// ORBIT: table set `set` for the OrbitCase of a key, by the block.
template <int D>
__device__ void tiled_orbit_tables(const OrbitCase &oc, int q, int set, const TiledState &st) {
  orbit_axis_tables<D>(oc, q, st.ocode + set * 3 * kTiledMaxQ2, st.orank + set * 3 * kTiledMaxQ2,
                       kTiledMaxQ2, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

// ORBIT's T(c, s, t) from the per-axis tables of its case
// (orbit_axis_tables) and pw = swd[s] + twd[t] (the mode words): the value
// group_orbit_entry gives, bit for bit (the same codes, sorting network,
// rank and sign).
template <int D>
__device__ __forceinline__ double orbit_table_entry(const OrbitCase &oc,
                                                    const double *__restrict__ V,
                                                    const uint16_t *cd, const uint32_t *rk,
                                                    int stride, uint32_t pw) {
  int code[3] = {0, 0, 0};
  uint32_t fold = 0;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    const uint32_t e = cd[k * stride + ((pw >> (6 * oc.perm[k])) & 63u)];
    code[k] = static_cast<int>(e & 0xFFu);
    fold ^= (e >> 8) & kFoldNegate;  // negation parity
    fold |= (e >> 8) & kFoldZero;    // any zero
  }
  orbit_sort_codes<D>(oc, code);
  uint32_t rank = 0;
#pragma unroll
  for (int k = 0; k < D; ++k) rank += rk[k * stride + code[k]];
  if (fold & kFoldZero) return 0.0;
  const double v = (V + oc.base)[rank];
  return ((fold & kFoldNegate) != 0) != (oc.sign0 < 0) ? -v : v;
}

// The same from table set `set` of the FMA kernel's state.
template <int D>
__device__ __forceinline__ double tiled_orbit_entry(const OrbitCase &oc,
                                                    const double *__restrict__ V, int set,
                                                    const TiledState &st, int s, int t) {
  return orbit_table_entry<D>(oc, V, st.ocode + set * 3 * kTiledMaxQ2,
                              st.orank + set * 3 * kTiledMaxQ2, kTiledMaxQ2,
                              st.swd[s] + st.twd[t]);
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

// Key `key`'s case, the offset of its table's rows in tab.values (a key
// past the tables, rejected per pair by tiled_pair_box, reads table 0) and
// its decoded layout descriptors (decode_case_layout), by one thread.
template <int D, int LAYOUT>
__device__ void tiled_key_layout(const hipkern_list1_table &tab, uint32_t key, int *kcase,
                                 uint64_t *voff, OrbitCase *soc, uint8_t *cand, int *cinfo) {
  const int c = static_cast<int>(key % static_cast<uint32_t>(tab.n_cases));
  const uint32_t table = key / static_cast<uint32_t>(tab.n_cases);
  *kcase = c;
  *voff = static_cast<uint64_t>(table < static_cast<uint32_t>(tab.n_tables) ? table : 0) *
          static_cast<uint64_t>(tab.n_rows);
  decode_case_layout<D, LAYOUT>(tab, c, soc, cand, cinfo);
}

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

// Tile k's lanes into shared memory. Ends with a barrier.
template <int B, int THREADS>
__device__ void tiled_tile_begin(const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl,
                                 int64_t k, const TiledState &st) {
  __syncthreads();  // the previous tile's lanes and bad flags are read
  tile_lanes<B, THREADS>(pr, tl, k, st.ltarget, st.lbegin, st.lend, st.lbad);
  __syncthreads();
}

// The slots of keys ec .. ec + nk (nk ≤ kTiledKeyChunk) into chunk buffer
// `buf`: per key its case, table offset and decoded layout descriptors; per (key, lane)
// the box (kNotFound: no pair; kBadPair: a pair outside the lane's list or
// of another case or table, which also sets the lane's bad flag), scale,
// displacement term. Every slot's loads are independent of the others'.
// Read only after a later barrier.
template <int D, int LAYOUT, int NQ, int B, int THREADS>
__device__ void tiled_slots(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                            const hipkern_list1_tiles &tl, const double *__restrict__ f,
                            uint32_t ec, int nk, int buf, const TiledState &st) {
  constexpr int N = kTiledKeyChunk * B;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < nk) {
    const int slot = buf * kTiledKeyChunk + tid;
    tiled_key_layout<D, LAYOUT>(tab, tl.keys[ec + static_cast<uint32_t>(tid)], st.scase + slot,
                                st.svoff + slot, st.soc + slot,
                                st.cand + slot * HIPKERN_LIST1_MAX_TRANSFORMS, st.cinfo + 2 * slot);
  }
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
          // them nvcc 13.0 allocates these kernels differently (the dense
          // 64-box tensor kernel 126 registers instead of 80, ORBIT's at 128
          // boxes 255 instead of 128), unlike the build that was measured.
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

// Issues key slot `slot`'s loads (its case, table, descriptors and boxes
// are in shared memory from tiled_slots; ORBIT's tables in set `set`).
template <int D, int LAYOUT, int NQ, int B, int THREADS>
__device__ __forceinline__ void tiled_issue(const hipkern_list1_table &tab,
                                            const double *__restrict__ f, const TiledState &st,
                                            int slot, int set, uint32_t lookup_bits,
                                            TiledKeyLoads<NQ, B, THREADS> &ld) {
  using L = TiledKeyLoads<NQ, B, THREADS>;
  const int tid = static_cast<int>(threadIdx.x);
  const int c = st.scase[slot];
  const double *__restrict__ V = tab.values + st.svoff[slot];
#pragma unroll
  for (int u = 0; u < L::kA; ++u) {
    const int x = u * THREADS + tid;
    const int s = x / NQ, t = x - s * NQ;
    if (LAYOUT == HIPKERN_LIST1_ORBIT)
      ld.a[u] = x < NQ * NQ ? tiled_orbit_entry<D>(st.soc[slot], V, set, st, s, t) : 0.0;
    else
      ld.a[u] = x < NQ * NQ
                    ? case_matrix_entry<D, LAYOUT>(tab, V, c, s, t, NQ, st.soc + slot, nullptr,
                                                   st.cand + slot * HIPKERN_LIST1_MAX_TRANSFORMS,
                                                   st.cinfo + 2 * slot, lookup_bits)
                    : 0.0;
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

// The pipelined walk over tile k's keys e0 .. e1 shared by both kernels:
// tiled_slots for the first chunk; key e0's loads; then per key e (slot):
// barrier, store e's loads, barrier, issue e + 1's loads, sums(slot) (the
// kernel's products from A and G), and after the first key of a chunk the
// next chunk's slots. `A_index` maps (s, t) to the case matrix's layout.
template <int D, int LAYOUT, int NQ, int B, int THREADS, bool ZERO_EMPTY, typename Index,
          typename Sums>
__device__ __forceinline__ void tiled_walk(const hipkern_list1_table &tab,
                                           const hipkern_list1_pairs &pr,
                                           const hipkern_list1_tiles &tl,
                                           const double *__restrict__ f, int64_t k,
                                           const TiledState &st, uint32_t lookup_bits, double *A,
                                           Index A_index, double *G, int ldg, Sums sums) {
  const uint32_t e0 = tl.tile_key_offsets[k], e1 = tl.tile_key_offsets[k + 1];
  if (e0 >= e1) return;
  const uint32_t n = e1 - e0;
  tiled_slots<D, LAYOUT, NQ, B, THREADS>(tab, pr, tl, f, e0,
                                         n < kTiledKeyChunk ? static_cast<int>(n) : kTiledKeyChunk,
                                         0, st);
  __syncthreads();
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    tiled_orbit_tables<D>(st.soc[0], tab.q, 0, st);
    __syncthreads();
  }
  TiledKeyLoads<NQ, B, THREADS> ld;
  tiled_issue<D, LAYOUT, NQ, B, THREADS>(tab, f, st, 0, 0, lookup_bits, ld);
  for (uint32_t j = 0; j < n; ++j) {
    const int slot = tiled_slot_of(j);
    __syncthreads();  // the previous key's A, G, slot and ORBIT tables are read
    tiled_store<NQ, B, THREADS, ZERO_EMPTY>(ld, st, slot, A, A_index, G, ldg);
    // ORBIT: the next key's tables into the other set (its last reader
    // was key j − 1's issue, before this key's first barrier).
    if (LAYOUT == HIPKERN_LIST1_ORBIT && j + 1 < n)
      tiled_orbit_tables<D>(st.soc[tiled_slot_of(j + 1)], tab.q, static_cast<int>((j + 1) & 1),
                            st);
    __syncthreads();
    if (j + 1 < n)
      tiled_issue<D, LAYOUT, NQ, B, THREADS>(tab, f, st, tiled_slot_of(j + 1),
                                             static_cast<int>((j + 1) & 1), lookup_bits, ld);
    sums(slot);
    // The next chunk into the other buffer: its last reader was the key
    // before this one (ordered by this key's first barrier); its first
    // reader is this chunk's last key, after further barriers.
    if (j % kTiledKeyChunk == 0 && j + kTiledKeyChunk < n) {
      const uint32_t left = n - j - kTiledKeyChunk;
      tiled_slots<D, LAYOUT, NQ, B, THREADS>(
          tab, pr, tl, f, e0 + j + kTiledKeyChunk,
          left < kTiledKeyChunk ? static_cast<int>(left) : kTiledKeyChunk,
          static_cast<int>(((j / kTiledKeyChunk) + 1) & 1), st);
    }
  }
}

}  // namespace

#endif  // HIPKERN_LIST1_TILED_H
