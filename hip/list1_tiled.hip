// hipkern_list1_evaluate_tiled, hipkern_list1_tile_targets and
// hipkern_list1_tiled_tensor_cores, the target-tiled schedule of the List 1
// evaluator (hipkern_list1_common.h: the other schedules and what they
// share; hipkern_list1_tiled.h: the staging its kernels share).
//
// hipkern_list1_evaluate_tiled launches one kernel, the one the caller
// names (hipkern_list1_tiles.kernel): tiles of target boxes whose outputs
// stay in registers, one case matrix per key of the tile, the sums on
// NVIDIA's FP64 tensor cores (list1_tiled_kernel per key,
// list1_staged_kernel source-staged) or with FMAs (list1_tiled_fma_kernel,
// every platform). Unlike the two other schedules it is not bitwise the
// CPU evaluator (see there).
//
// --- The target-tiled schedule (hipkern_list1_evaluate_tiled) -----------
//
// One block per tile of B = targets_per_tile target boxes (lanes; one
// width per kernel, below). The block walks the tile's keys (table ·
// n_cases + case, ascending). No kernel decodes a compact layout: each
// reads a key's case matrix as a dense nq × nq block (key_matrix_offset:
// the key matrices hipkern_list1_expand_keys wrote, or a DENSE table's
// own rows), so one instantiation per (kernel, q^d) serves every layout,
// and a layout's bits are the dense layout's.
//
// The per-key kernels (list1_tiled_kernel, list1_tiled_fma_kernel) take
// the keys in chunks of kTiledKeyChunk. Per chunk the block first
// resolves every (key, lane) slot at once — pair id, source box, level,
// scale, displacement term, checked against the lane's own list, case and
// table — and every key's matrix offset, into shared memory: many
// independent loads in flight instead of one dependent chain per key. Per
// key the block copies the case matrix T(case, ·, ·) into shared memory
// and the source vectors of the lanes with a pair of that key, pre-scaled
// (coalesced rows), and every such box adds T·(scale·f) into its outputs,
// in registers for the whole tile. A case never has two pairs in one
// target's list (the case fixes the source box), so a lane has at most one
// pair per key; the host's tiling puts a repeated pair under a repeated
// key.
//
// The key loop is software-pipelined: the loads of key e + 1's matrix
// entries and source values are issued into registers before key e's sums
// and stored into shared memory only after them, so their latency hides
// behind the sums and the barriers (one round of loads per key, all in
// flight at once); the next chunk's slots are resolved after the first
// key's sums of the current chunk (double-buffered slots).
//
// list1_tiled_fma_kernel (FMAs, every platform): 32 · S threads; the q^d
// outputs are cut into S parts of RO (≤ 9) and a thread holds RT = B / 32
// boxes × RO outputs, thread (part p, column g) taking lanes g, g + 32,
// ... and outputs p·RO .. p·RO + RO: one FMA per source mode in order. A
// warp is one part: its T reads are broadcasts, its source reads one per
// lane (odd row stride: no bank conflict). (Here a "lane" is a target box
// of the tile, and the 32 is kLaneGroup: a part is kLaneGroup threads, a
// warp on NVIDIA and wave32, half a wavefront on wave64, where a
// wavefront's two parts read two T rows: a speed matter only. Threads
// share data only through shared memory across __syncthreads, so the
// kernel is correct at any warp width; blocks of 32 · S threads with S odd
// end in a half-filled wavefront on wave64.) list1_tiled_kernel and
// list1_staged_kernel (NVIDIA sm_80+): the products on the FP64 tensor
// cores, below; compiled for NVIDIA alone (HIPKERN_L1_NVCC): AMD builds
// run list1_tiled_fma_kernel, and refuse the two others.
//
// Order: per target point, the keys ascending, then the source modes in
// order (one FMA each, or four per tensor-core step): the same for every
// layout (the case matrices are equal) and from run to run, per kernel;
// not the CPU evaluator's bits (list order, unfused).
#include "hipkern_list1_common.h"
#include "hipkern_list1_tiled.h"
#include "hipkern_list1_widths.h"

namespace {

// Targets per tile (hipkern_list1_tiles.targets_per_tile), one width per
// kernel (hipkern_list1_tile_targets): each more width is one more
// instantiation per q^d, and the layer's compile time. The widths measured
// fastest (benches/RESULTS.md):
//   list1_tiled_kernel 64: on the H100, where per-key tiles are chosen
//     (the random octree), dense 0.245 ms against 0.253 at 32 and 0.400
//     at 128 ("list1, source staging chosen per plan (auto)", 9da8886);
//   list1_staged_kernel 32: the fastest staged width in every
//     configuration of that run and of the H200 run of 6128bc7;
//   list1_tiled_fma_kernel 32: the fastest or within ~30 % of it in the
//     H200 run of 2f9109f, and it keeps the block's case matrix, source
//     rows and slots within the 64 KB of LDS an AMD block gets at q^d = 64.
// (The values: hipkern_list1_widths.h, shared with the cpu stub.)
constexpr int kTiledTargets = HIPKERN_L1_TILED_TARGETS;
constexpr int kStagedTargets = HIPKERN_L1_STAGED_TARGETS;
constexpr int kFmaTargets = HIPKERN_L1_FMA_TARGETS;
static_assert(kFmaTargets % kLaneGroup == 0, "the FMA kernel's width is whole lane groups");

// The width of kernel `kernel` (hipkern_list1_tiled_kernel), 0 for none.
inline int tile_width(int32_t kernel) {
  switch (kernel) {
    case HIPKERN_LIST1_TILED: return kTiledTargets;
    case HIPKERN_LIST1_STAGED: return kStagedTargets;
    case HIPKERN_LIST1_TILED_FMA: return kFmaTargets;
    default: return 0;
  }
}

// [T parts × nq × part stride f64] [F B × odd stride f64] [state].
__host__ __device__ inline size_t tiled_matrix_bytes(int nq, int b) {
  return static_cast<size_t>(tiled_parts(nq)) * nq * tiled_part_stride(nq) * 8 +
         static_cast<size_t>(b) * tiled_f_stride(nq) * 8;
}
__host__ __device__ inline size_t tiled_shared(int nq, int b) {
  return (tiled_matrix_bytes(nq, b) + 15) / 16 * 16 + tiled_state_bytes(b);
}

template <int NQ>
__global__ void __launch_bounds__(kTiledMaxThreads)
    list1_tiled_fma_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr,
                           hipkern_list1_tiles tl, const double *__restrict__ f,
                           double *__restrict__ out, const double *__restrict__ matrices) {
  constexpr int S = tiled_parts(NQ);
  constexpr int RO = tiled_ro(NQ);
  constexpr int LDP = tiled_part_stride(NQ);
  constexpr int LDF = tiled_f_stride(NQ);
  constexpr int B = kFmaTargets;
  constexpr int RT = B / kLaneGroup;
  constexpr int THREADS = kLaneGroup * S;
  extern __shared__ double smem_d[];
  double *Tc = smem_d;
  double *F = Tc + S * NQ * LDP;
  const TiledState st = tiled_state(
      reinterpret_cast<unsigned char *>(smem_d) + (tiled_matrix_bytes(NQ, B) + 15) / 16 * 16, B);

  const int tid = static_cast<int>(threadIdx.x);
  const int part = tid >> kLaneGroupLog2;  // one lane group per part (see above)
  const int col = tid & (kLaneGroup - 1);
  // The padding of the last part (outputs past nq) stays zero.
  for (int x = tid; x < S * NQ * LDP; x += THREADS) Tc[x] = 0.0;
  for (int64_t k = blockIdx.x; k < tl.n_tiles; k += gridDim.x) {
    tiled_tile_begin<B, THREADS>(pr, tl, k, st);
    double u[RT][RO];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int o = 0; o < RO; ++o) u[r][o] = 0.0;
    auto sums = [&](int slot) {
      bool has[RT];
      bool any = false;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        has[r] = st.sbox[slot * B + col + kLaneGroup * r] < kBadPair;
        any = any || has[r];
      }
      if (!any) return;
      const double *Tp = Tc + part * NQ * LDP;
#pragma unroll 3
      for (int s = 0; s < NQ; ++s) {
        double g[RT];
#pragma unroll
        for (int r = 0; r < RT; ++r) g[r] = has[r] ? F[(col + kLaneGroup * r) * LDF + s] : 0.0;
        double v[RO];
        const double2 *row2 = reinterpret_cast<const double2 *>(Tp + s * LDP);
#pragma unroll
        for (int o2 = 0; o2 < RO / 2; ++o2) {
          const double2 w = row2[o2];
          v[2 * o2] = w.x;
          v[2 * o2 + 1] = w.y;
        }
        if (RO & 1) v[RO - 1] = Tp[s * LDP + RO - 1];
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
          for (int o = 0; o < RO; ++o) u[r][o] = hk_fma(v[o], g[r], u[r][o]);
      }
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const double dt = st.sdisp[slot * B + col + kLaneGroup * r];
        if (has[r] && dt != 0.0)
#pragma unroll
          for (int o = 0; o < RO; ++o) u[r][o] += dt;
      }
    };
    tiled_walk<NQ, B, THREADS, false>(
        tab, pr, tl, matrices, f, k, st, Tc,
        [](int s, int t) { return ((t / RO) * NQ + s) * LDP + t % RO; }, F, LDF, sums);
    __syncthreads();  // every lane's bad flag and the tile's are final
    const bool tile_bad = *st.tbad != 0u;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int lane = col + kLaneGroup * r;
      const uint32_t i = st.ltarget[lane];
      if (i == kNotFound) continue;
      const bool nan = tile_bad || st.lbad[lane] != 0u;
      double *ob = out + static_cast<size_t>(i) * NQ;
#pragma unroll
      for (int o = 0; o < RO; ++o) {
        const int t = part * RO + o;
        if (t < NQ) ob[t] = nan ? __longlong_as_double(0x7FF8000000000000ll) : u[r][o];
      }
    }
  }
}

// --- The target-tiled schedule on NVIDIA's FP64 tensor cores -------------
//
// list1_tiled_kernel: the same tiles, slots, pipelined staging and order
// of keys as list1_tiled_fma_kernel, but per key the products are matrix
// products on the FP64 tensor cores (mma.sync m8n8k4, sm_80 and later):
// U(t, n) += Σ_s A(t, s) · G(s, n) with A(t, s) = T(case, s, t) (the case
// matrix, q^d padded to whole 8 × 4 tiles with zeros) and G(s, n) =
// scale_n · f[box_n, s] (zero for a lane without a pair of the key), n
// over 32 target boxes. The block has WARPS column groups of 32 boxes and
// MSPLIT warps per group, warp (m0, group) taking the row tiles m0, m0 +
// MSPLIT, ...: more warps to issue loads and hide their latency, the same
// products. A warp's accumulators (its row tiles × 4 fragments of 8 × 8)
// stay in registers for the whole tile. Each mma adds four products to an
// accumulator element (a k-step); the order (keys ascending, k-steps of
// the source modes in order) is list1_staged_kernel's, so the same bits as
// it, for every layout and from run to run, but not the FMA kernel's bits.
//
// NVIDIA only, from here to the matching #endif (HIPKERN_L1_NVCC: nvcc, or
// hipcc on NVIDIA): mma.sync.aligned is an instruction of the whole
// converged 32-thread warp, so the 32s below (tid >> 5, tid & 31,
// 32 · WARPS, the fragment layouts lane / 4, lane % 4, __syncwarp) are the
// NVIDIA warp itself, not kLaneGroup. No AMD build compiles or launches
// these kernels (the entry point refuses them there).
#if defined(HIPKERN_L1_NVCC)
// Padded sizes: rows (target points) to 8, columns (source modes) to 4;
// the row stride ≡ 4 (mod 16) doubles so a fragment load (rows g = 0..3 or
// 4..7 of a half-warp, columns c = 0..3) hits 16 distinct bank pairs.
__host__ __device__ constexpr int mma_m_tiles(int nq) { return (nq + 7) / 8; }
__host__ __device__ constexpr int mma_k_steps(int nq) { return (nq + 3) / 4; }
__host__ __device__ constexpr int mma_stride(int nq) {
  return (mma_k_steps(nq) * 4 + 11) / 16 * 16 + 4;
}
// Column groups of 32 boxes, and warps per column group: as many as the
// row tiles allow, at most 8 warps in the block.
constexpr int kTiledWarps = kTiledTargets / 32;
static_assert(kTiledTargets % 32 == 0, "list1_tiled_kernel's width is whole warps");
__host__ __device__ constexpr int mma_msplit(int nq) {
  return mma_m_tiles(nq) < 8 / kTiledWarps ? mma_m_tiles(nq) : 8 / kTiledWarps;
}
__host__ __device__ constexpr int mma_keyed_threads(int nq) {
  return 32 * kTiledWarps * mma_msplit(nq);
}

// [A m_tiles·8 × stride f64] [G B × stride f64] [state].
__host__ __device__ inline size_t mma_matrix_bytes(int nq, int b) {
  return static_cast<size_t>(mma_m_tiles(nq)) * 8 * mma_stride(nq) * 8 +
         static_cast<size_t>(b) * mma_stride(nq) * 8;
}
__host__ __device__ inline size_t mma_keyed_shared(int nq, int b) {
  return (mma_matrix_bytes(nq, b) + 15) / 16 * 16 + tiled_state_bytes(b);
}

// d = a·b + c on one 8 × 8 × 4 tile (fragments: a = A(lane / 4, lane % 4),
// b = B(lane % 4, lane / 4), c/d = C(lane / 4, 2·(lane % 4) + {0, 1})).
__device__ __forceinline__ void mma_8x8x4(double &d0, double &d1, double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d0), "+d"(d1)
               : "d"(a), "d"(b));
#else
  (void)d0;
  (void)d1;
  (void)a;
  (void)b;
  __trap();  // never launched: mma_available() is false for these builds
#endif
}

// (mma_built, mma_available: hipkern_list1_common.h.)

template <int NQ>
__global__ void __launch_bounds__(mma_keyed_threads(NQ))
    list1_tiled_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr, hipkern_list1_tiles tl,
                       const double *__restrict__ f, double *__restrict__ out,
                       const double *__restrict__ matrices) {
  constexpr int WARPS = kTiledWarps;
  constexpr int MSPLIT = mma_msplit(NQ);
  constexpr int MT = mma_m_tiles(NQ);
  constexpr int MW = (MT + MSPLIT - 1) / MSPLIT;  // row tiles per warp (at most)
  constexpr int KS = mma_k_steps(NQ);
  constexpr int LD = mma_stride(NQ);
  constexpr int B = kTiledTargets;
  constexpr int THREADS = mma_keyed_threads(NQ);
  extern __shared__ double smem_d[];
  double *A = smem_d;
  double *G = A + MT * 8 * LD;
  const TiledState st = tiled_state(
      reinterpret_cast<unsigned char *>(smem_d) + (mma_matrix_bytes(NQ, B) + 15) / 16 * 16, B);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int wn = warp % WARPS;  // column group: boxes wn·32 .. wn·32 + 32
  const int m0 = warp / WARPS;  // first row tile
  const int lane = tid & 31;
  const int g = lane >> 2, cq = lane & 3;
  // The padding (rows past nq, columns past nq) stays zero.
  for (int x = tid; x < MT * 8 * LD + B * LD; x += THREADS) A[x] = 0.0;
  for (int64_t k = blockIdx.x; k < tl.n_tiles; k += gridDim.x) {
    tiled_tile_begin<B, THREADS>(pr, tl, k, st);
    double acc[MW][4][2];
#pragma unroll
    for (int i = 0; i < MW; ++i)
#pragma unroll
      for (int n = 0; n < 4; ++n) acc[i][n][0] = acc[i][n][1] = 0.0;
    auto sums = [&](int slot) {
      const double *Gw = G + wn * 32 * LD;
#pragma unroll 2
      for (int ks = 0; ks < KS; ++ks) {
        double a[MW], b[4];
#pragma unroll
        for (int i = 0; i < MW; ++i) {
          const int m = m0 + i * MSPLIT;
          a[i] = m < MT ? A[(m * 8 + g) * LD + ks * 4 + cq] : 0.0;
        }
#pragma unroll
        for (int n = 0; n < 4; ++n) b[n] = Gw[(n * 8 + g) * LD + ks * 4 + cq];
#pragma unroll
        for (int i = 0; i < MW; ++i)
          if (m0 + i * MSPLIT < MT)
#pragma unroll
            for (int n = 0; n < 4; ++n) mma_8x8x4(acc[i][n][0], acc[i][n][1], a[i], b[n]);
      }
      // The displacement term (2D Laplace) of each of this thread's
      // accumulator columns' boxes (0 for a lane without a pair).
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const double dt = st.sdisp[slot * B + wn * 32 + n * 8 + 2 * cq + h];
          if (dt != 0.0)
#pragma unroll
            for (int i = 0; i < MW; ++i) acc[i][n][h] += dt;
        }
    };
    tiled_walk<NQ, B, THREADS, true>(tab, pr, tl, matrices, f, k, st, A,
                                     [](int s, int t) { return t * LD + s; }, G, LD, sums);
    __syncthreads();  // every lane's bad flag and the tile's are final
    const bool tile_bad = *st.tbad != 0u;
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int l = wn * 32 + n * 8 + 2 * cq + h;
        const uint32_t ib = st.ltarget[l];
        if (ib == kNotFound) continue;
        const bool nan = tile_bad || st.lbad[l] != 0u;
        double *ob = out + static_cast<size_t>(ib) * NQ;
#pragma unroll
        for (int i = 0; i < MW; ++i) {
          const int t = (m0 + i * MSPLIT) * 8 + g;
          if (m0 + i * MSPLIT < MT && t < NQ)
            ob[t] = nan ? __longlong_as_double(0x7FF8000000000000ll) : acc[i][n][h];
        }
      }
  }
}

// --- The same on the tensor cores, source-staged ---------------------------
//
// list1_staged_kernel (hipkern_list1_tiles.kernel = HIPKERN_LIST1_STAGED):
// the same tiles and keys as list1_tiled_kernel, the products as matrix
// products on the FP64 tensor cores (mma.sync m8n8k4, sm_80 and later):
// per key U(t, n) += Σ_s A(t, s) · G(s, n) with A(t, s) = T(case, s, t)
// (q^d padded to whole 8 × 4 tiles with zeros) and G(s, n) = scale_n ·
// f[box_n, s], n over the tile's boxes (zero for a box without a pair of
// the key).
//
// Source-staged: a tile's pairs read few distinct source boxes (a uniform
// region's 4 × 4 × 4 targets read 6 × 6 × 6 sources), so the block loads
// the tile's sources (hipkern_list1_tiles.tile_sources) once, pre-scaled
// by their level's scale, into shared rows G_r (and their displacement
// terms), and a key's column n is row key_source_slots[key, n] of them (a
// zero row for a box without a pair): no per-key staging of source
// values. The keys are taken in chunks of kMmaKeyChunk: per chunk the
// block resolves and checks every (key, box) slot and each key's matrix
// offset into shared memory (two barriers), then every warp walks the
// chunk's keys on its own, without barriers: warp (row tile m, column
// group ng) reads its A fragments (rows t = 8m .. 8m + 7, all source
// modes) straight from the key's dense case matrix, the next key's while
// this key's products run, and its B fragments from the source rows; its
// accumulators (8 × 8 per column tile, NT tiles) stay in registers for
// the whole tile.
//
// Order: per output, the keys ascending, per key the k-steps of four
// source modes in order, then the displacement term: list1_tiled_kernel's
// order, for every layout (the case matrices are equal) and from run to
// run, so the same bits; not the FMA kernel's bits, nor the CPU
// evaluator's.
constexpr int kMmaKeyChunk = 32;
// mma_slots resolves key kk with thread kk: every block has ≥ 32 threads.
static_assert(kMmaKeyChunk <= 32, "a key chunk per warp's threads");
// The source rows' stride in doubles: the k-steps' columns, ≡ 4 (mod 8),
// so a B fragment load (a half-warp: 4 rows × 4 consecutive columns) of
// rows distinct mod 4 hits 16 distinct bank pairs.
__host__ __device__ constexpr int mma_row_stride(int nq) {
  return mma_k_steps(nq) * 4 % 8 == 4 ? mma_k_steps(nq) * 4 : mma_k_steps(nq) * 4 + 4;
}
// Column tiles (8 boxes) per warp and column groups per tile of b boxes:
// a warp takes the whole tile (b / 4 accumulator doubles a thread), so the
// A fragments it reads per key serve every box.
__host__ __device__ constexpr int mma_n_tiles(int b) { return b / 8; }
__host__ __device__ constexpr int mma_groups(int b) { return b / (8 * mma_n_tiles(b)); }
__host__ __device__ constexpr int mma_threads(int nq, int b) {
  return 32 * mma_m_tiles(nq) * mma_groups(b);
}

// Shared memory: [source rows (rows + 1) × stride f64, row `rows` zero]
// [their displacement terms rows + 1 f64] [key matrix offsets C u64]
// [lane target, begin, end, bad 4·B u32] [tile flags 2 u32] [slots C × B
// u16], C = kMmaKeyChunk.
__host__ __device__ inline size_t mma_sources_shared(int nq, int b, int rows) {
  constexpr size_t C = kMmaKeyChunk;
  const size_t n = static_cast<size_t>(rows + 1) * mma_row_stride(nq) * 8 +
                   static_cast<size_t>(rows + 1) * 8 + C * 8 + static_cast<size_t>(b) * 16 + 8 +
                   C * b * 2;
  return (n + 15) / 16 * 16;
}

struct MmaState {
  double *G, *gdisp;
  uint64_t *kvoff;  // per chunk key: the offset of its case matrix (key_matrix_offset)
  uint32_t *ltarget, *lbegin, *lend, *lbad;
  uint32_t *flags;  // [0] the tile is bad (NaN everywhere), [1] some row has a displacement
  uint16_t *slots;
};

__device__ inline MmaState mma_state(unsigned char *at, int nq, int b, int rows) {
  constexpr int C = kMmaKeyChunk;
  MmaState st;
  st.G = reinterpret_cast<double *>(at);
  st.gdisp = st.G + static_cast<size_t>(rows + 1) * mma_row_stride(nq);
  st.kvoff = reinterpret_cast<uint64_t *>(st.gdisp + rows + 1);
  st.ltarget = reinterpret_cast<uint32_t *>(st.kvoff + C);
  st.lbegin = st.ltarget + b;
  st.lend = st.lbegin + b;
  st.lbad = st.lend + b;
  st.flags = st.lbad + b;
  st.slots = reinterpret_cast<uint16_t *>(st.flags + 2);
  return st;
}

// Where lane l's slot goes in a key's row of B slots: a warp's thread
// (g, ·) of column group ng reads its NT boxes ng·8NT + 8n + g, n = 0 ..
// NT − 1, as NT consecutive u16.
template <int B>
__device__ __forceinline__ int mma_slot_index(int l) {
  constexpr int NT = mma_n_tiles(B);
  const int ng = l / (8 * NT), n = (l / 8) % NT, g = l % 8;
  return ng * 8 * NT + g * NT + n;
}

// Tile k's start, by the block: its lanes (target, list range, bad
// cleared), its source rows (scale · f, rows past the sources untouched),
// their displacement terms and the tile flags. A tile with more sources
// than the rows, or a source box out of range, is bad (every output NaN).
// Ends without a barrier: the chunk's slots follow before one.
template <int NQ, int B, int THREADS>
__device__ void mma_tile_begin(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                               const hipkern_list1_tiles &tl, const double *__restrict__ f,
                               int64_t k, int rows, const MmaState &st) {
  constexpr int LD = mma_row_stride(NQ);
  const int tid = static_cast<int>(threadIdx.x);
  __syncthreads();  // the previous tile's lanes, flags and rows are read
  if (tid == 0) {
    st.flags[0] = 0u;
    st.flags[1] = 0u;
  }
  tile_lanes<B, THREADS>(pr, tl, k, st.ltarget, st.lbegin, st.lend, st.lbad);
  __syncthreads();  // flags cleared before anyone sets them
  const uint32_t o = tl.tile_source_offsets[k];
  const uint32_t n = tl.tile_source_offsets[k + 1] - o;
  if (n > static_cast<uint32_t>(rows)) {
    if (tid == 0) st.flags[0] = 1u;
    return;
  }
  for (int x = tid; x < static_cast<int>(n) * NQ; x += THREADS) {
    const int r = x / NQ, s = x - r * NQ;
    const uint32_t b = tl.tile_sources[o + static_cast<uint32_t>(r)];
    double v = 0.0;
    if (static_cast<int64_t>(b) < pr.n_boxes)
      v = pr.level_scale[pr.box_levels[b]] * f[static_cast<size_t>(b) * NQ + s];
    else
      st.flags[0] = 1u;  // same value from any writer
    st.G[r * LD + s] = v;
  }
  for (int r = tid; r < static_cast<int>(n); r += THREADS) {
    const uint32_t b = tl.tile_sources[o + static_cast<uint32_t>(r)];
    const double dterm =
        static_cast<int64_t>(b) < pr.n_boxes ? tiled_displacement_term<NQ>(tab, pr, f, b) : 0.0;
    if (dterm != 0.0) st.flags[1] = 1u;
    st.gdisp[r] = dterm;
  }
}

// The slots of keys ec .. ec + nk (nk ≤ kMmaKeyChunk) of tile k, by the
// block: per key its case matrix's offset (key_matrix_offset: a key
// without a matrix makes the tile bad); per (key, lane) the source row of
// the lane's pair of that key (the zero row `rows` for none), checked: the
// pair in the lane's list, of the key's case and table, its source box the
// tile's source at that row — else the lane is bad (NaN) and the slot
// takes the zero row. Ends without a barrier.
template <int NQ, int B, int THREADS>
__device__ void mma_slots(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                          const hipkern_list1_tiles &tl, int64_t k, uint32_t ec, int nk, int rows,
                          const MmaState &st) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < nk)
    st.kvoff[tid] =
        key_matrix_offset(tab, tl, tl.keys[ec + static_cast<uint32_t>(tid)], NQ, st.flags);
  const uint32_t o = tl.tile_source_offsets[k];
  const uint32_t n_src = tl.tile_source_offsets[k + 1] - o;
  for (int x = tid; x < nk * B; x += THREADS) {
    const int kk = x / B, lane = x - kk * B;
    uint16_t slot = static_cast<uint16_t>(rows);
    if (st.ltarget[lane] != kNotFound) {
      const uint32_t e = ec + static_cast<uint32_t>(kk);
      const size_t at = static_cast<size_t>(e) * B + lane;
      const uint32_t j = tl.key_pairs[at];
      if (j != kNotFound) {
        const uint32_t b = tiled_pair_box(tab, pr, j, st.lbegin[lane], st.lend[lane], tl.keys[e]);
        const uint32_t r = tl.key_source_slots[at];
        // n_src ≤ rows first: offsets out of order (a bad tile) must not
        // send the read of tile_sources past its end.
        if (b != kBadPair && n_src <= static_cast<uint32_t>(rows) && r < n_src &&
            tl.tile_sources[o + r] == b)
          slot = static_cast<uint16_t>(r);
        else
          st.lbad[lane] = 1u;  // same value from any writer
      }
    }
    st.slots[kk * B + mma_slot_index<B>(lane)] = slot;
  }
}

// A warp's A fragments of chunk key kk: a[ks] = T(case, 4ks + cq, t), 0
// past q^d, from its dense case matrix in `matrices`.
template <int NQ>
__device__ __forceinline__ void mma_a_fragments(const double *__restrict__ matrices,
                                                const MmaState &st, int kk, int t, int cq,
                                                double *a) {
  constexpr int KS = mma_k_steps(NQ);
  const double *__restrict__ M = matrices + st.kvoff[kk];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const int s = 4 * ks + cq;
    a[ks] = (s < NQ && t < NQ) ? M[s * NQ + t] : 0.0;
  }
}

// targets_per_tile = kStagedTargets; blocks of mma_threads(NQ, B): warp w
// takes row tile m = w mod MT (target points 8m .. 8m + 7) of column group
// ng = w / MT (boxes 8·NT·ng .. 8·NT·(ng + 1)). `rows` =
// tiles.max_tile_sources.
template <int NQ>
__global__ void __launch_bounds__(mma_threads(NQ, kStagedTargets))
    list1_staged_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr, hipkern_list1_tiles tl,
                        const double *__restrict__ f, double *__restrict__ out,
                        const double *__restrict__ matrices) {
  constexpr int B = kStagedTargets;
  constexpr int MT = mma_m_tiles(NQ);
  constexpr int KS = mma_k_steps(NQ);
  constexpr int LD = mma_row_stride(NQ);
  constexpr int NT = mma_n_tiles(B);
  constexpr int THREADS = mma_threads(NQ, B);
  // The next key's A fragments are prefetched into registers; with more
  // than 256 threads a block (more column groups) a thread at q^d > 32
  // would get under 128 registers and spill.
  static_assert(THREADS <= 256 || KS <= 8, "the A prefetch would spill");
  const int rows = tl.max_tile_sources;
  extern __shared__ double smem_d[];
  const MmaState st = mma_state(reinterpret_cast<unsigned char *>(smem_d), NQ, B, rows);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int m = warp % MT;   // row tile
  const int ng = warp / MT;  // column group
  const int lane = tid & 31;
  const int g = lane >> 2, cq = lane & 3;
  const int t = m * 8 + g;  // this thread's target point in the A fragments
  // The padding (columns past nq) and the zero row stay zero.
  for (int x = tid; x < (rows + 1) * LD; x += THREADS) st.G[x] = 0.0;
  if (tid == 0) st.gdisp[rows] = 0.0;
  for (int64_t k = blockIdx.x; k < tl.n_tiles; k += gridDim.x) {
    mma_tile_begin<NQ, B, THREADS>(tab, pr, tl, f, k, rows, st);
    double acc[NT][2];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = 0.0;
    const uint32_t e0 = tl.tile_key_offsets[k], e1 = tl.tile_key_offsets[k + 1];
    // Counted from e0 in 64 bits (not ec < e1 in 32): offsets near 2^32
    // must not wrap the loop into a near-endless one.
    const uint64_t n_keys = e0 < e1 ? e1 - e0 : 0u;
    for (uint64_t i = 0; i < n_keys; i += kMmaKeyChunk) {
      const uint32_t ec = e0 + static_cast<uint32_t>(i);
      const int nk = n_keys - i < static_cast<uint64_t>(kMmaKeyChunk)
                         ? static_cast<int>(n_keys - i)
                         : kMmaKeyChunk;
      if (i != 0) __syncthreads();  // the previous chunk's slots are read
      mma_slots<NQ, B, THREADS>(tab, pr, tl, k, ec, nk, rows, st);
      __syncthreads();
      if (st.flags[0] != 0u) continue;  // a bad tile: NaN below
      const bool disp = st.flags[1] != 0u;
      double a[KS];
      mma_a_fragments<NQ>(matrices, st, 0, t, cq, a);
      for (int kk = 0; kk < nk; ++kk) {
        // The next key's A fragments load while this key's products run.
        double an[KS];
        if (kk + 1 < nk) mma_a_fragments<NQ>(matrices, st, kk + 1, t, cq, an);
        __syncwarp();  // converged before mma.sync.aligned
        const uint16_t *sl = st.slots + kk * B + ng * 8 * NT + g * NT;
        int roff[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) roff[n] = static_cast<int>(sl[n]) * LD + cq;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          double b[NT];
#pragma unroll
          for (int n = 0; n < NT; ++n) b[n] = st.G[roff[n] + 4 * ks];
#pragma unroll
          for (int n = 0; n < NT; ++n) mma_8x8x4(acc[n][0], acc[n][1], a[ks], b[n]);
        }
        if (disp) {
          // The displacement term (2D Laplace) of each accumulator column's
          // box (0 for a box without a pair: the zero row's).
          const uint16_t *sk = st.slots + kk * B;
#pragma unroll
          for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int l = ng * 8 * NT + n * 8 + 2 * cq + h;
              const double dt = st.gdisp[sk[mma_slot_index<B>(l)]];
              if (dt != 0.0) acc[n][h] += dt;
            }
        }
        if (kk + 1 < nk) {
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) a[ks] = an[ks];
        }
      }
    }
    __syncthreads();  // every lane's bad flag is final
    const bool tile_bad = st.flags[0] != 0u;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int l = ng * 8 * NT + n * 8 + 2 * cq + h;
        const uint32_t ib = st.ltarget[l];
        if (ib == kNotFound || t >= NQ) continue;
        const bool nan = tile_bad || st.lbad[l] != 0u;
        out[static_cast<size_t>(ib) * NQ + t] =
            nan ? __longlong_as_double(0x7FF8000000000000ll) : acc[n][h];
      }
  }
}
#endif  // HIPKERN_L1_NVCC (the tensor-core kernels)

// Whether this device and build run the tensor-core kernels
// (hipkern_list1_tiled_tensor_cores).
bool tensor_cores() {
#if defined(HIPKERN_L1_NVCC)
  return mma_available();
#else
  return false;
#endif
}

// Dynamic shared memory of kernel `which` (hipkern_list1_tiled_kernel) for
// q^dim = nq and `rows` = tiles.max_tile_sources.
size_t tiled_shared_bytes(int32_t which, int nq, int rows) {
#if defined(HIPKERN_L1_NVCC)
  if (which == HIPKERN_LIST1_TILED) return mma_keyed_shared(nq, kTiledTargets);
  if (which == HIPKERN_LIST1_STAGED) return mma_sources_shared(nq, kStagedTargets, rows);
#else
  (void)which;
  (void)rows;
#endif
  return tiled_shared(nq, kFmaTargets);
}

// One block per tile of a tiled-schedule kernel (grid-stride past
// kMaxBlocks) with `shmem` bytes of dynamic shared memory.
template <typename Kernel>
int32_t launch_tiles(Kernel kernel, size_t shmem, int threads, const hipkern_list1_table &tab,
                     const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl, const double *f,
                     double *out, const double *matrices, hipStream_t s) {
  (void)hipGetLastError();  // a stale error must not be reported as ours
  const int32_t e = allow_shared(reinterpret_cast<const void *>(kernel), shmem);
  if (e != 0) return e;
  const int64_t blocks = tl.n_tiles < kMaxBlocks ? tl.n_tiles : kMaxBlocks;
  kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), shmem, s>>>(
      tab, pr, tl, f, out, matrices);
  return static_cast<int32_t>(hipGetLastError());
}

// Kernel `which` (checked by the entry point: the tensor-core kernels only
// where they run) at q^dim = NQ, reading the key matrices or DENSE's rows.
template <int NQ>
int32_t launch_tiled_nq(int32_t which, const hipkern_list1_table &tab,
                        const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl,
                        const double *f, double *out, hipStream_t s) {
  const double *matrices = tl.key_matrices != nullptr ? tl.key_matrices : tab.values;
  const size_t shmem = tiled_shared_bytes(which, NQ, tl.max_tile_sources);
#if defined(HIPKERN_L1_NVCC)
  // NVIDIA only: the thread counts are in 32-thread NVIDIA warps.
  if (which == HIPKERN_LIST1_TILED)
    return launch_tiles(&list1_tiled_kernel<NQ>, shmem, mma_keyed_threads(NQ), tab, pr, tl, f,
                        out, matrices, s);
  if (which == HIPKERN_LIST1_STAGED)
    return launch_tiles(&list1_staged_kernel<NQ>, shmem, mma_threads(NQ, kStagedTargets), tab, pr,
                        tl, f, out, matrices, s);
#endif
  // Every platform: kLaneGroup threads a part.
  return launch_tiles(&list1_tiled_fma_kernel<NQ>, shmem, kLaneGroup * tiled_parts(NQ), tab, pr,
                      tl, f, out, matrices, s);
}

// q^dim ≤ 64: 2D q ≤ 8, 3D q ≤ 4 (checked by the entry point); the kernels
// depend on q^dim alone (dense case matrices: no per-axis decode).
int32_t launch_tiled(int32_t which, int nq, const hipkern_list1_table &tab,
                     const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl, const double *f,
                     double *out, hipStream_t s) {
  switch (nq) {
    case 1: return launch_tiled_nq<1>(which, tab, pr, tl, f, out, s);
    case 4: return launch_tiled_nq<4>(which, tab, pr, tl, f, out, s);
    case 8: return launch_tiled_nq<8>(which, tab, pr, tl, f, out, s);
    case 9: return launch_tiled_nq<9>(which, tab, pr, tl, f, out, s);
    case 16: return launch_tiled_nq<16>(which, tab, pr, tl, f, out, s);
    case 25: return launch_tiled_nq<25>(which, tab, pr, tl, f, out, s);
    case 27: return launch_tiled_nq<27>(which, tab, pr, tl, f, out, s);
    case 36: return launch_tiled_nq<36>(which, tab, pr, tl, f, out, s);
    case 49: return launch_tiled_nq<49>(which, tab, pr, tl, f, out, s);
    case 64: return launch_tiled_nq<64>(which, tab, pr, tl, f, out, s);
    default: return HIPKERN_ERROR_INVALID_ARGUMENT;  // no q^2 or q^3 ≤ 64
  }
}

}  // namespace

extern "C" {

int32_t hipkern_list1_evaluate_tiled(const hipkern_list1_table *table,
                                     const hipkern_list1_pairs *pairs,
                                     const hipkern_list1_tiles *tiles,
                                     const double *source_values, double *out, void *stream) {
  if (!table || !pairs || !tiles) return HIPKERN_ERROR_INVALID_ARGUMENT;
  // Before the checks that ask the device for its shared-memory limit
  // and tensor cores: the stream's device is the one asked.
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  const hipkern_list1_table &t = *table;
  const hipkern_list1_pairs &p = *pairs;
  const hipkern_list1_tiles &g = *tiles;
  int64_t nq = 0;
  const int32_t rc = check_table_and_pairs(t, p, &nq);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (nq > HIPKERN_LIST1_TILED_MAX_MODES) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const int32_t which = g.kernel;
  const int b = tile_width(which);
  if (b == 0 || g.targets_per_tile != b || g.n_tiles < 0 || g.n_tiles > INT64_MAX / b)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  // The tensor-core kernels where the device and build have them, never a
  // silent fallback: a caller asks hipkern_list1_tiled_tensor_cores.
  if (which != HIPKERN_LIST1_TILED_FMA && !tensor_cores()) return HIPKERN_ERROR_INVALID_ARGUMENT;
  // The source fields belong to the source-staged kernel alone: the
  // others ignore them (their plans are not cut at a source bound, so a
  // tile may have more than HIPKERN_LIST1_TILED_MAX_SOURCES sources).
  const bool staged = which == HIPKERN_LIST1_STAGED;
  if (staged && (g.max_tile_sources < 0 || g.max_tile_sources > HIPKERN_LIST1_TILED_MAX_SOURCES))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  // Every kernel reads a key's case matrix as a dense block: the key
  // matrices, else a DENSE table's own rows (no kernel decodes a compact
  // layout).
  if (g.key_matrices != nullptr) {
    if (!g.key_matrix_index || g.n_key_matrices < 1 || g.n_key_matrices > int64_t{0xFFFFFFFF} ||
        g.n_key_matrices > INT64_MAX / (nq * nq))
      return HIPKERN_ERROR_INVALID_ARGUMENT;
  } else if (t.layout != HIPKERN_LIST1_DENSE) {
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  }
  const size_t shmem = tiled_shared_bytes(which, static_cast<int>(nq), g.max_tile_sources);
  if (shmem > static_cast<size_t>(shared_limit())) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (g.n_tiles == 0) return HIPKERN_SUCCESS;
  if (!g.tile_key_offsets || !g.keys || !g.tile_targets || !g.key_pairs ||
      (staged && (!g.tile_source_offsets || !g.tile_sources || !g.key_source_slots)))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  const int32_t rb = check_buffers(t, p, source_values, out);
  if (rb != HIPKERN_SUCCESS) return rb;
  return launch_tiled(which, static_cast<int>(nq), t, p, g, source_values, out,
                      static_cast<hipStream_t>(stream));
}

int32_t hipkern_list1_tile_targets(int32_t kernel, int32_t *targets_per_tile) {
  const int b = tile_width(kernel);
  if (b == 0 || !targets_per_tile) return HIPKERN_ERROR_INVALID_ARGUMENT;
  *targets_per_tile = b;
  return HIPKERN_SUCCESS;
}

int32_t hipkern_list1_tiled_tensor_cores(int32_t *available) {
  if (!available) return HIPKERN_ERROR_INVALID_ARGUMENT;
  *available = tensor_cores() ? 1 : 0;
  return HIPKERN_SUCCESS;
}

}  // extern "C"
