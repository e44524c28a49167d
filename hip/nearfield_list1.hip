// The List 1 (near-field) evaluator (docs/design/list1.md): for every target box, the
// sum over its List 1 source boxes of the table entries times the source
// values, scaled per source level, in one of three table layouts.
//
// hipkern_list1_evaluate_grouped (the case-grouped schedule, below
// list1_group_products) launches two kernels per chunk: one case matrix per
// tile of same-case pairs built in shared memory, the per-pair sums into a
// scratch, then the per-target sums in list order.
//
// hipkern_list1_evaluate_tiled (the target-tiled schedule, below
// list1_tiled_kernel) launches one kernel: tiles of target boxes whose
// outputs stay in registers, one case matrix per key of the tile, the sums
// on NVIDIA's FP64 tensor cores (list1_tiled_mma_kernel) or with FMAs.
// Unlike the two others it is not bitwise the CPU evaluator (see there).
//
// hipkern_list1_evaluate launches one kernel: list1_orbit_kernel<D, Q> for
// ORBIT at q = Q ≤ 4 when every table's compact rows fit in shared memory,
// else list1_kernel<D, LAYOUT>:
//
//   Grid: target boxes on the grid's x axis. DENSE and the generic ORBIT
//     path: block i takes boxes i, i + gridDim.x, ...; block:
//     target_batch_size threads (lanes). The ORBIT fast path and FALLBACK
//     pack `boxes` groups of `lanes` threads into one block (group g of
//     block i takes boxes i·boxes + g, + gridDim.x·boxes, ...), so the
//     shared-memory staging below is paid once per several boxes: lanes =
//     min(target_batch_size, w) with w = nq where nq divides kLaneGroup
//     (32), else nq rounded up to whole lane groups (lanes past nq have no
//     target; a box never straddles a lane group unless the batch asks for
//     fewer lanes; box_lanes below, with its checks at warp 32 and 64). The
//     target-point loop has the launch-known bound n_q_points (= q^d) and
//     lane guard `t < n_box_targets`: lane l takes the box's target points
//     t = l, l + lanes, ... Each lane computes its targets' sums alone, in
//     registers, in the CPU evaluator's order (below), so the batch size
//     changes which thread computes a value, never the value.
//   Warp width: lanes and boxes are a split of the work only. No lane
//     reads another's registers (no shuffle, vote or warp-synchronous
//     shared memory: threads meet only across __syncthreads), so every
//     kernel here is correct at any warp width. The width only decides
//     which boxes share a warp or wavefront (their pair lists differ, so
//     they diverge: a matter of speed; see box_lanes).
//   Per (target t, pair j) the lane sums acc = Σ_s f[box_j, s]·T(case_j, s, t)
//     over the source modes in order, then u += scale·acc + disp (disp the
//     level's displacement times Σ_s f_s·N_s, only where it is nonzero:
//     2D Laplace). T per layout:
//   DENSE: T = values[table·n_rows + (case·nq + s)·nq + t], read straight
//     from global memory (consecutive lanes read consecutive t: coalesced).
//     No shared memory.
//   ORBIT, q ≤ 4 (list1_orbit_kernel, see orbit_pair): the block stages
//     the compact rows of every table and one OrbitRaw per case (the
//     descriptors re-expressed per raw source axis) in shared memory. Per
//     (t, pair) the lane folds, for every raw axis and every value of its
//     source digit, the code s_k·q + t_k (zero-axis flip, derivative sign,
//     zero by symmetry): D·q values in registers, the mode loops unrolled.
//     Per entry only the rank remains: a sum of per-digit terms (singleton
//     groups), a per-lane q×q table (a pair group), or the insertion of the
//     last code into the sorted first two (a triple); then one shared
//     load. Same rows and signs as OrbitDescriptors::slot (the multiset
//     rank of the sorted codes, however sorted). No full-entry map, no
//     hash, no transform scan.
//   ORBIT, q > 4 or rows too large (list1_kernel): the block decodes the
//     per-case descriptors into one OrbitCase per case in shared memory:
//     segment base, the derivative sign of g_c, per axis the node flip /
//     flippable / derivative flags, its position in its group and the
//     mixed-radix weight of its group, and which compare-exchanges of the
//     network apply. Per (t, pair) the lane carries its target digits
//     through g_c; per entry it carries the source digits, forms the
//     per-axis codes s_k·q + t_k, resolves zero-axis flips (derivative
//     sign, zero by symmetry), sorts equal-label axes with the network
//     (0,2), (0,1), (1,2), and adds the multiset ranks Σ C(x_i + i, i + 1)
//     weighted: row = base + rank, T = sign·values[table·n_rows + row]
//     (orbit.rs OrbitDescriptors::slot, step for step); values from global
//     memory.
//   FALLBACK: the block stages transform_signs and, per case, its
//     candidate transforms in shared memory: the transforms g (in order)
//     whose image case case_map[g, c] is the smallest one — the case is
//     the leading digit of a full id, so only they can reach the smallest
//     id; the reduction over them gives exactly the reduction over all
//     transforms, ties included (a positive sign replaces a negative one,
//     else the earlier transform stays). Staged too while they fit the
//     device's shared memory per block, in this order: the open-addressed
//     hash (keys and rows), transform_qpoint_map, the compact rows (else
//     each is read from global memory). Per entry the lane scans its
//     case's candidates for the smallest full id, applies the sparse sign
//     correction (binary search of the entry's full id; skipped when there
//     is none), and finds the compact row by probing at most probe_count
//     slots of the hash (fallback.rs FallbackDescriptors::slot; keys are
//     distinct, so the probe stops at the match). A representative
//     missing from the hash (impossible for validated descriptors) gives
//     NaN, never a silent value.
//   FALLBACK with a resolution table (n_resolve_orbits > 0;
//     list1_fallback_resolved_kernel<D, NQ>, NQ = q^D for q ≤ 4, else 0 and
//     the mode loop runtime-bound): the same slots without the scan or the
//     hash. The block stages transform_signs, resolve_case_orbit and
//     resolve_case_transform, and while they fit, in this order, the
//     qpoint map, resolve_rows and the compact rows. Per (t, pair) the lane
//     takes h = case_transform[c], o = case_orbit[c] and t' = qmap[h][t];
//     per entry e = resolve_rows[(o·nq + qmap[h][s])·nq + t'], row e &
//     0x7FFF, sign transform_signs[h], negated when bit 15 is set: the
//     fallback's own (row, sign) of the entry (fallback.rs
//     FallbackResolution; checked on the host against the scan and the
//     hash for every full entry), so the same bits as the descriptor path.
//     Same box packing as the descriptor path.
//
// Bit-identical to the CPU evaluator (src/nearfield/list1.rs) over the same
// entry values: every float64 step is one correctly rounded operation in
// the CPU's order, never contracted into a fused multiply-add — under nvcc
// through __dadd_rn/__dmul_rn (never merged into an FMA), under clang HIP
// (AMD) with `#pragma clang fp contract(off)` and plain operators (as
// psf_sink.hip). The sign of an entry is applied by negation (exact; on
// the ORBIT fast path a pair whose entries all share g_c's sign negates
// f_s instead: (−f)·v = f·(−v) = −(f·v), IEEE rounding being symmetric); an
// entry that is zero by symmetry adds nothing (the CPU adds ±0, which
// leaves a sum started at +0 unchanged).
#include "hipkern_port.h"
#include "hipkern.h"

#if defined(__NVCC__) || defined(__HIP_PLATFORM_NVIDIA__)
#define HIPKERN_L1_NVCC 1
#else
#pragma clang fp contract(off)
#endif

namespace {

constexpr int64_t kMaxBlocks = int64_t{1} << 20;
constexpr uint32_t kNotFound = 0xFFFFFFFFu;
constexpr uint8_t kGroupFlippable = 0x80;
constexpr uint8_t kGroupDerivative = 0x40;

#if defined(HIPKERN_L1_NVCC)
__device__ __forceinline__ double hk_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double hk_mul(double a, double b) { return __dmul_rn(a, b); }
#else
__device__ __forceinline__ double hk_add(double a, double b) { return a + b; }
__device__ __forceinline__ double hk_mul(double a, double b) { return a * b; }
#endif

// Per-axis flags of an OrbitCase.
constexpr uint8_t kNodeFlip = 1;   // g_c flips this axis (sign −1): node m → q−1−m
constexpr uint8_t kFlippable = 2;  // c*_k = 0: the stabiliser may flip it
constexpr uint8_t kDerivative = 4; // the derivative axis

// One case's ORBIT descriptors, decoded once per block (shared memory).
struct OrbitCase {
  uint32_t base;     // case_value_offsets[case_orbit_ranks[c]]
  uint32_t w[3];     // mixed-radix weight of each axis' group
  uint8_t perm[3];   // g_c's permutation
  uint8_t flags[3];  // kNodeFlip | kFlippable | kDerivative
  uint8_t pos[3];    // position of the axis in its group (0-based)
  int8_t sign0;      // Π_k sign_k^{axis_sign_power_k}
  uint8_t net;       // network exchanges that apply: 1 = (0,2), 2 = (0,1), 4 = (1,2)
  uint8_t pad[3];
};

// C(x + i, i + 1): the multiset rank term of the i-th (0-based) code x.
// 32 bits suffice: the entry point keeps n_cases·q^{2d} below 2^32, so 3D
// has q ≤ 17 (codes x < 289) and 2D needs i ≤ 1 only.
__device__ __forceinline__ uint32_t rank_term(uint32_t x, int i) {
  return i == 0 ? x : (i == 1 ? (x + 1) * x / 2 : (x + 2) * (x + 1) * x / 6);
}

// C(a + m − 1, m): multisets of m codes over an alphabet of a.
__device__ __forceinline__ uint64_t multisets(uint64_t a, int m) {
  return m == 1 ? a : (m == 2 ? (a + 1) * a / 2 : (a + 2) * (a + 1) * a / 6);
}

template <int D>
__device__ void decode_orbit_case(const hipkern_list1_table &tab, int c, OrbitCase *out) {
  const int q2 = tab.q * tab.q;
  OrbitCase oc;
  oc.base = tab.case_value_offsets[tab.case_orbit_ranks[c]];
  uint8_t lab[3] = {0, 0, 0};
  int sign0 = 1;
  for (int k = 0; k < 3; ++k) {
    oc.w[k] = 0;
    oc.perm[k] = 0;
    oc.flags[k] = 0;
    oc.pos[k] = 0;
    oc.pad[k] = 0;
  }
  for (int k = 0; k < D; ++k) {
    const int8_t sg = tab.case_axis_sign[c * D + k];
    lab[k] = tab.case_axis_group[c * D + k];
    oc.perm[k] = tab.case_axis_perm[c * D + k];
    oc.flags[k] = static_cast<uint8_t>((sg < 0 ? kNodeFlip : 0) |
                                       ((lab[k] & kGroupFlippable) ? kFlippable : 0) |
                                       ((lab[k] & kGroupDerivative) ? kDerivative : 0));
    if (tab.axis_sign_power[k] & 1) sign0 *= sg;
  }
  oc.sign0 = static_cast<int8_t>(sign0);
  // Groups: axes of one label, ordered by their first axis; the rank is
  // Σ_groups r_g · Π_{later groups} count.
  uint64_t count[3] = {1, 1, 1};
  int first[3] = {0, 0, 0};
  for (int k = 0; k < D; ++k) {
    int f = k, m = 0, pos = 0;
    for (int j = 0; j < D; ++j) {
      if (lab[j] == lab[k]) {
        if (j < f) f = j;
        if (j < k) ++pos;
        ++m;
      }
    }
    first[k] = f;
    oc.pos[k] = static_cast<uint8_t>(pos);
    const uint64_t a = (lab[k] & kGroupFlippable) ? (q2 + 1) / 2 : q2;
    count[k] = multisets(a, m);
  }
  for (int k = 0; k < D; ++k) {
    uint64_t w = 1;
    // Every later group once: through its first axis.
    for (int j = 0; j < D; ++j)
      if (first[j] == j && j > first[k]) w *= count[j];
    oc.w[k] = static_cast<uint32_t>(w);
  }
  oc.net = 0;
  if (D == 3 && lab[0] == lab[2]) oc.net |= 1;
  if (lab[0] == lab[1]) oc.net |= 2;
  if (D == 3 && lab[1] == lab[2]) oc.net |= 4;
  *out = oc;
}

__device__ __forceinline__ int pick(const int *d, int k) {
  return k == 0 ? d[0] : (k == 1 ? d[1] : d[2]);
}

__device__ __forceinline__ void cswap(int &a, int &b) {
  if (a > b) {
    const int x = a;
    a = b;
    b = x;
  }
}

// One axis of an ORBIT entry, after g_c's node flip: the digit pair code
// p = x_s·q + x_t folded by the stabiliser where the axis is flippable
// (p and q² − 1 − p are one code, the smaller), with what that does to
// the sign: kFoldNegate (a derivative axis folded) and kFoldZero (a
// derivative axis on its own fold point: the entry is zero by symmetry).
constexpr uint32_t kFoldNegate = 1;
constexpr uint32_t kFoldZero = 2;
__device__ __forceinline__ int orbit_fold(uint8_t flags, int q2, int p, uint32_t &fold) {
  if (flags & kFlippable) {
    const int fl = q2 - 1 - p;
    const bool der = (flags & kDerivative) != 0;
    if (der && fl == p) fold |= kFoldZero;
    if (fl < p) {
      p = fl;
      if (der) fold ^= kFoldNegate;
    }
  }
  return p;
}

// The codes of one ORBIT entry sorted within the case's axis groups (the
// exchange network of decode_orbit_case), so the rank is a multiset rank.
template <int D>
__device__ __forceinline__ void orbit_sort_codes(const OrbitCase &oc, int *code) {
  if (D == 3 && (oc.net & 1)) cswap(code[0], code[2]);
  if (oc.net & 2) cswap(code[0], code[1]);
  if (D == 3 && (oc.net & 4)) cswap(code[1], code[2]);
}

// The target's digits (axis 0 slowest) and the source digit counter.
template <int D>
__device__ __forceinline__ void digits(int m, int q, int *d) {
  for (int k = D - 1; k >= 0; --k) {
    d[k] = m % q;
    m /= q;
  }
  for (int k = D; k < 3; ++k) d[k] = 0;
}

template <int D>
__device__ __forceinline__ void next_digits(int q, int *d) {
  for (int k = D - 1; k >= 0; --k) {
    if (++d[k] < q) return;
    d[k] = 0;
  }
}

template <int D, int LAYOUT>
__global__ void list1_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr,
                             const double *__restrict__ f, double *__restrict__ out,
                             int n_q_points, int n_box_targets, int qmap_shared,
                             uint32_t lookup_bits, int lanes, int boxes, int hash_shared,
                             int vals_shared) {
  extern __shared__ double smem_d[];
  unsigned char *smem = reinterpret_cast<unsigned char *>(smem_d);
  const int q = tab.q;
  const int q2 = q * q;
  const int nq = n_box_targets;
  const int64_t n_rows = tab.n_rows;
  const double *__restrict__ vals = tab.values;
  const double *__restrict__ norms = tab.mode_normalizers;

  // ---- per-block staging of the descriptors (shared memory) ----
  const OrbitCase *ocs = nullptr;
  const uint16_t *qmap = tab.transform_qpoint_map;
  const int8_t *tsig = tab.transform_signs;
  uint8_t *cand = nullptr, *cand_n = nullptr, *cand_case = nullptr;
  const int n_tr = tab.n_transforms;
  const uint32_t *lkeys = tab.lookup_keys;
  const uint32_t *lrows = tab.lookup_rows;
  const double *fvals = vals;
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    OrbitCase *s = reinterpret_cast<OrbitCase *>(smem);
    for (int c = threadIdx.x; c < tab.n_cases; c += blockDim.x) decode_orbit_case<D>(tab, c, s + c);
    ocs = s;
    __syncthreads();
  } else if (LAYOUT == HIPKERN_LIST1_FALLBACK) {
    // [values (if staged)] [hash keys, rows (if staged)] [qpoint map (if
    // staged)] [candidates n_cases × G] [count per case] [smallest image
    // case per case] [transform signs]
    unsigned char *p = smem;
    if (vals_shared) {
      double *sv = reinterpret_cast<double *>(p);
      const size_t nv = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(n_rows);
      for (size_t k = threadIdx.x; k < nv; k += blockDim.x) sv[k] = vals[k];
      fvals = sv;
      p += nv * 8;
    }
    if (hash_shared) {
      uint32_t *sk = reinterpret_cast<uint32_t *>(p);
      uint32_t *sr = sk + tab.lookup_size;
      for (uint32_t k = threadIdx.x; k < tab.lookup_size; k += blockDim.x) {
        sk[k] = tab.lookup_keys[k];
        sr[k] = tab.lookup_rows[k];
      }
      lkeys = sk;
      lrows = sr;
      p += static_cast<size_t>(tab.lookup_size) * 8;
    }
    if (qmap_shared) {
      uint16_t *sq = reinterpret_cast<uint16_t *>(p);
      for (int k = threadIdx.x; k < n_tr * nq; k += blockDim.x) sq[k] = tab.transform_qpoint_map[k];
      qmap = sq;
      p += static_cast<size_t>(n_tr) * nq * 2;
    }
    cand = p;
    cand_n = cand + static_cast<size_t>(tab.n_cases) * n_tr;
    cand_case = cand_n + tab.n_cases;
    int8_t *ss = reinterpret_cast<int8_t *>(cand_case + tab.n_cases);
    for (int k = threadIdx.x; k < n_tr; k += blockDim.x) ss[k] = tab.transform_signs[k];
    tsig = ss;
    for (int c = threadIdx.x; c < tab.n_cases; c += blockDim.x) {
      int m = 256;
      for (int g = 0; g < n_tr; ++g) {
        const int x = tab.transform_case_map[g * tab.n_cases + c];
        if (x < m) m = x;
      }
      int n = 0;
      for (int g = 0; g < n_tr; ++g)
        if (tab.transform_case_map[g * tab.n_cases + c] == m)
          cand[static_cast<size_t>(c) * n_tr + n++] = static_cast<uint8_t>(g);
      cand_n[c] = static_cast<uint8_t>(n);
      cand_case[c] = static_cast<uint8_t>(m);
    }
    __syncthreads();
  }

  // Group g of `lanes` threads takes boxes blockIdx.x·boxes + g, + gridDim.x·boxes, ...
  // (Only the fallback packs boxes: the other layouts keep one box per
  // block, lanes = blockDim.x.) A work split, right at any warp width:
  // after the barrier above no thread reads another's data (header).
  constexpr bool kPack = LAYOUT == HIPKERN_LIST1_FALLBACK;
  const int nlanes = kPack ? lanes : static_cast<int>(blockDim.x);
  const int nboxes = kPack ? boxes : 1;
  const int grp = kPack ? static_cast<int>(threadIdx.x) / lanes : 0;
  const int lane = kPack ? static_cast<int>(threadIdx.x) - grp * lanes : static_cast<int>(threadIdx.x);
  if (kPack && grp >= boxes) return;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * nboxes + grp; i < pr.n_targets;
       i += static_cast<int64_t>(gridDim.x) * nboxes) {
    const uint32_t ja = pr.source_starts[i], jb = pr.source_starts[i + 1];
    for (int tb = 0; tb < n_q_points; tb += nlanes) {
      const int t = tb + lane;
      if (!(t < n_box_targets)) continue;
      int td[3];
      digits<D>(t, q, td);
      double u = 0.0;
      for (uint32_t j = ja; j < jb; ++j) {
        const uint32_t sb = pr.source_boxes[j];
        const int c = pr.pair_cases[j];
        const int lvl = pr.box_levels[sb];
        const double scale = pr.level_scale[lvl];
        const double disp = pr.level_displacement[lvl];
        const size_t toff = static_cast<size_t>(pr.level_table[lvl]) * static_cast<size_t>(n_rows);
        const double *__restrict__ fs = f + static_cast<size_t>(sb) * nq;
        double acc = 0.0;
        if (LAYOUT == HIPKERN_LIST1_DENSE) {
          const double *__restrict__ T =
              vals + toff + static_cast<size_t>(c) * nq * nq + static_cast<size_t>(t);
          for (int s = 0; s < nq; ++s)
            acc = hk_add(acc, hk_mul(fs[s], T[static_cast<size_t>(s) * nq]));
        } else if (LAYOUT == HIPKERN_LIST1_ORBIT) {
          const OrbitCase oc = ocs[c];
          const double *__restrict__ V = vals + toff + oc.base;
          int tp[3] = {0, 0, 0};
#pragma unroll
          for (int k = 0; k < D; ++k) {
            const int x = pick(td, oc.perm[k]);
            tp[k] = (oc.flags[k] & kNodeFlip) ? q - 1 - x : x;
          }
          int sd[3] = {0, 0, 0};
          for (int s = 0; s < nq; ++s, next_digits<D>(q, sd)) {
            uint32_t fold = 0;
            int code[3] = {0, 0, 0};
#pragma unroll
            for (int k = 0; k < D; ++k) {
              int x = pick(sd, oc.perm[k]);
              if (oc.flags[k] & kNodeFlip) x = q - 1 - x;
              code[k] = orbit_fold(oc.flags[k], q2, x * q + tp[k], fold);
            }
            orbit_sort_codes<D>(oc, code);
            uint32_t rank = 0;
#pragma unroll
            for (int k = 0; k < D; ++k)
              rank += oc.w[k] * rank_term(static_cast<uint32_t>(code[k]), oc.pos[k]);
            if (fold & kFoldZero) continue;  // zero by symmetry: adds nothing
            const int sign = (fold & kFoldNegate) ? -oc.sign0 : oc.sign0;
            const double v = V[rank];
            acc = hk_add(acc, hk_mul(fs[s], sign < 0 ? -v : v));
          }
        } else {
          // Only the transforms taking the case to its smallest image can
          // give the smallest full id (the case is the id's leading digit):
          // the candidates, in transform order, so ties resolve as over
          // all transforms.
          const uint8_t *cl = cand + static_cast<size_t>(c) * n_tr;
          const int nc = cand_n[c];
          const uint32_t nq2 = static_cast<uint32_t>(nq) * static_cast<uint32_t>(nq);
          const uint32_t base = static_cast<uint32_t>(cand_case[c]) * nq2;
          const uint32_t full0 = static_cast<uint32_t>(c) * nq2 + static_cast<uint32_t>(t);
          const uint32_t mask = tab.lookup_size - 1;
          for (int s = 0; s < nq; ++s) {
            uint32_t best = 0xFFFFFFFFu;
            int bsign = 1;
            for (int i = 0; i < nc; ++i) {
              const int g = cl[i];
              const uint32_t id = base + static_cast<uint32_t>(qmap[g * nq + s]) * nq +
                                  static_cast<uint32_t>(qmap[g * nq + t]);
              const int sg = tsig[g];
              if (id < best || (id == best && sg > 0 && bsign < 0)) {
                best = id;
                bsign = sg;
              }
            }
            if (tab.n_sign_lookup > 0) {
              const uint32_t full = full0 + static_cast<uint32_t>(s) * nq;
              uint32_t lo = 0, hi = tab.n_sign_lookup;
              while (lo < hi) {
                const uint32_t mid = lo + (hi - lo) / 2;
                if (tab.sign_lookup_ids[mid] < full)
                  lo = mid + 1;
                else
                  hi = mid;
              }
              if (lo < tab.n_sign_lookup && tab.sign_lookup_ids[lo] == full)
                bsign = tab.sign_lookup_signs[lo];
            }
            const uint32_t h = lookup_bits == 0 ? 0u : (best * 0x9E3779B1u) >> (32 - lookup_bits);
            uint32_t row = kNotFound;
            // Keys are distinct: the first match is the only one.
            for (uint32_t p = 0; p < tab.probe_count; ++p) {
              const uint32_t k = (h + p) & mask;
              if (lkeys[k] == best) {
                row = lrows[k];
                break;
              }
            }
            const double v = row == kNotFound ? __longlong_as_double(0x7FF8000000000000ll)
                                              : fvals[toff + row];
            acc = hk_add(acc, hk_mul(fs[s], bsign < 0 ? -v : v));
          }
        }
        double d = 0.0;
        if (disp != 0.0) {
          double sum = -0.0;
          for (int s = 0; s < nq; ++s) sum = hk_add(sum, hk_mul(fs[s], norms[s]));
          d = hk_mul(disp, sum);
        }
        u = hk_add(u, hk_add(hk_mul(scale, acc), d));
      }
      out[static_cast<size_t>(i) * nq + t] = u;
    }
  }
}

// acc + f_s·T(c, s, t) of the resolved path: e = R[qh[s]·nq], T = ±V[row].
__device__ __forceinline__ double resolved_term(double acc, const uint16_t *R, const uint16_t *qh,
                                                const double *__restrict__ V,
                                                const double *__restrict__ fs, uint32_t hneg,
                                                int nq, int s) {
  const uint32_t e = R[static_cast<size_t>(qh[s]) * nq];
  const double v = V[e & 0x7FFFu];
  return hk_add(acc, hk_mul(fs[s], ((e ^ hneg) & 0x8000u) ? -v : v));
}

// FALLBACK through the plan-time resolution table (header): NQ = q^D
// (q ≤ 4, mode loop unrolled) or 0 (runtime nq). Shared memory: [values
// (if staged)] [resolve_rows (if staged)] [qpoint map (if staged)]
// [case_orbit n_cases] [case_transform n_cases] [transform signs].
// __launch_bounds__(512): launches take up to 512 threads; without it the
// unrolled q = 4 3D mode loop took 166 registers, too many for 512.
template <int D, int NQ>
__global__ void __launch_bounds__(512) list1_fallback_resolved_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr,
                                               const double *__restrict__ f,
                                               double *__restrict__ out, int n_box_targets,
                                               int lanes, int boxes, int vals_shared,
                                               int rows_shared, int qmap_shared) {
  extern __shared__ double smem_d[];
  unsigned char *p = reinterpret_cast<unsigned char *>(smem_d);
  const int nq = NQ > 0 ? NQ : n_box_targets;
  const int64_t n_rows = tab.n_rows;
  const int n_tr = tab.n_transforms;
  const double *__restrict__ norms = tab.mode_normalizers;
  const double *fvals = tab.values;
  const uint16_t *rrows = tab.resolve_rows;
  const uint16_t *qmap = tab.transform_qpoint_map;
  if (vals_shared) {
    double *sv = reinterpret_cast<double *>(p);
    const size_t nv = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(n_rows);
    for (size_t k = threadIdx.x; k < nv; k += blockDim.x) sv[k] = tab.values[k];
    fvals = sv;
    p += nv * 8;
  }
  if (rows_shared) {
    uint16_t *sr = reinterpret_cast<uint16_t *>(p);
    const size_t nr = static_cast<size_t>(tab.n_resolve_orbits) * nq * nq;
    for (size_t k = threadIdx.x; k < nr; k += blockDim.x) sr[k] = tab.resolve_rows[k];
    rrows = sr;
    p += nr * 2;
  }
  if (qmap_shared) {
    uint16_t *sq = reinterpret_cast<uint16_t *>(p);
    for (int k = threadIdx.x; k < n_tr * nq; k += blockDim.x) sq[k] = tab.transform_qpoint_map[k];
    qmap = sq;
    p += static_cast<size_t>(n_tr) * nq * 2;
  }
  uint8_t *corb = p;
  uint8_t *ctr = corb + tab.n_cases;
  int8_t *tsig = reinterpret_cast<int8_t *>(ctr + tab.n_cases);
  for (int c = threadIdx.x; c < tab.n_cases; c += blockDim.x) {
    corb[c] = tab.resolve_case_orbit[c];
    ctr[c] = tab.resolve_case_transform[c];
  }
  for (int k = threadIdx.x; k < n_tr; k += blockDim.x) tsig[k] = tab.transform_signs[k];
  __syncthreads();

  // Groups of `lanes` threads, one box each: a work split, right at any
  // warp width (no thread reads another's data past the barrier above).
  const int grp = static_cast<int>(threadIdx.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) - grp * lanes;
  if (grp >= boxes) return;
  const size_t nq2 = static_cast<size_t>(nq) * static_cast<size_t>(nq);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * boxes + grp; i < pr.n_targets;
       i += static_cast<int64_t>(gridDim.x) * boxes) {
    const uint32_t ja = pr.source_starts[i], jb = pr.source_starts[i + 1];
    for (int t = lane; t < nq; t += lanes) {
      double u = 0.0;
      for (uint32_t j = ja; j < jb; ++j) {
        const uint32_t sb = pr.source_boxes[j];
        const int c = pr.pair_cases[j];
        const int lvl = pr.box_levels[sb];
        const double scale = pr.level_scale[lvl];
        const double disp = pr.level_displacement[lvl];
        const double *__restrict__ V =
            fvals + static_cast<size_t>(pr.level_table[lvl]) * static_cast<size_t>(n_rows);
        const double *__restrict__ fs = f + static_cast<size_t>(sb) * nq;
        const int h = ctr[c];
        const uint16_t *qh = qmap + static_cast<size_t>(h) * nq;
        const uint16_t *R = rrows + static_cast<size_t>(corb[c]) * nq2 + qh[t];
        // Bit 15 of an entry flips the sign; XOR with the transform's.
        const uint32_t hneg = tsig[h] < 0 ? 0x8000u : 0u;
        double acc = 0.0;
        if constexpr (NQ > 0) {
#pragma unroll
          for (int s = 0; s < NQ; ++s) acc = resolved_term(acc, R, qh, V, fs, hneg, NQ, s);
        } else {
          for (int s = 0; s < nq; ++s) acc = resolved_term(acc, R, qh, V, fs, hneg, nq, s);
        }
        double d = 0.0;
        if (disp != 0.0) {
          double sum = -0.0;
          for (int s = 0; s < nq; ++s) sum = hk_add(sum, hk_mul(fs[s], norms[s]));
          d = hk_mul(disp, sum);
        }
        u = hk_add(u, hk_add(hk_mul(scale, acc), d));
      }
      out[static_cast<size_t>(i) * nq + t] = u;
    }
  }
}

// ---- ORBIT, q = 1..4: per-(pair, lane) hoisted addressing ----
//
// The canonical-frame descriptors are re-expressed per *raw* source axis j
// (the axis the mode loop's digit s_j runs over): canonical axis k takes
// its source and target digits from raw axis perm[k], so per raw axis the
// node flip, flippable and derivative flags, and the mixed-radix weight of
// its group, are all a case needs. Per (pair, lane) the lane folds, for
// every raw axis and every value of its source digit, the code
// p = s·q + t (zero-axis flip applied, derivative sign and zero noted):
// D·q values in registers (the mode loops are unrolled, so every index is
// known at compile time). Per entry the rank is then
//   all singleton groups:  Σ_j w_j·code_j
//   one pair {a, b} + c:   w_ab·(min + C(max+1, 2)) (a q×q table per lane) + w_c·code_c
//   one triple:            lo + C(mid+1, 2) + C(hi+2, 3), by inserting
//                          code_2 into the sorted (code_0, code_1)
// — the same multiset rank as the network sort of orbit.rs (any ascending
// sort gives the same ranks; ties give equal terms). Packed per entry in
// one u32: bits 0..29 the byte offset 8·(table·n_rows + base + rank) of
// the value in shared memory, and, only for a case with a flippable
// derivative axis (a singleton group), bit 30 zero by symmetry and bit 31
// the sign (the sum of the sign bits mod 2: carries out of bit 31 are
// dropped); other cases have one sign per pair, g_c's.
constexpr uint32_t kRankMask = 0x3FFFFFFFu;
constexpr uint32_t kZeroBit = 0x40000000u;
constexpr uint32_t kSignBit = 0x80000000u;

enum : uint8_t { kShapeS = 0, kShapeP01 = 1, kShapeP02 = 2, kShapeP12 = 3, kShapeT = 4 };

struct OrbitRaw {
  uint32_t base;    // case_value_offsets[case_orbit_ranks[c]]
  uint32_t w[3];    // per raw axis: the mixed-radix weight of its group
  uint8_t fl[3];    // per raw axis: kNodeFlip | kFlippable | kDerivative
  uint8_t shape;    // kShape*
  uint8_t zero;     // some entry may be zero by symmetry or change sign
  uint8_t neg;      // sign0 < 0
  uint8_t pad[2];
};

template <int D>
__device__ void decode_orbit_raw(const hipkern_list1_table &tab, int c, OrbitRaw *out) {
  OrbitCase oc;
  decode_orbit_case<D>(tab, c, &oc);
  OrbitRaw r;
  uint8_t lab[3] = {0xFF, 0xFE, 0xFD};
  r.zero = 0;
  r.pad[0] = r.pad[1] = 0;
  for (int k = 0; k < 3; ++k) {
    r.w[k] = 0;
    r.fl[k] = 0;
  }
  for (int k = 0; k < D; ++k) {
    const int j = oc.perm[k];
    r.fl[j] = oc.flags[k];
    r.w[j] = oc.w[k];
    lab[j] = tab.case_axis_group[c * D + k];
    if ((oc.flags[k] & kDerivative) && (oc.flags[k] & kFlippable)) r.zero = 1;
  }
  r.base = oc.base;
  r.neg = oc.sign0 < 0 ? 1 : 0;
  uint8_t sh = kShapeS;
  if (D == 3 && lab[0] == lab[1] && lab[1] == lab[2])
    sh = kShapeT;
  else if (lab[0] == lab[1])
    sh = kShapeP01;
  else if (D == 3 && lab[0] == lab[2])
    sh = kShapeP02;
  else if (D == 3 && lab[1] == lab[2])
    sh = kShapeP12;
  r.shape = sh;
  *out = r;
}

__device__ __forceinline__ uint32_t r1(uint32_t x) { return (x * (x + 1)) >> 1; }
__device__ __forceinline__ uint32_t r2(uint32_t x) { return x * (x + 1) * (x + 2) / 6; }

// acc = Σ_s f_s·T(c, s, t) for one pair, in mode order. `sm`: the shared
// values; `B8`: the byte offset of the pair's table segment in them. The
// per-entry rank is kept as a byte offset (8·row), so the value load is
// one shared load at [offset + constant]. Z: some entry of the case may be
// zero by symmetry or flip sign (a flippable derivative axis): the packed
// sign / zero bits; else the whole pair has the sign of g_c (NEG), applied
// to f (f·(−v) = (−f)·v = −(f·v), exactly: IEEE rounding is symmetric).
template <int D, int Q, int SH, bool Z, bool NEG>
__device__ __forceinline__ double orbit_pair(const OrbitRaw &rc, const int *td,
                                             const char *__restrict__ sm, uint32_t B8,
                                             const double *__restrict__ fs) {
  constexpr int Q2 = Q * Q;
  uint32_t X[3][Q];  // folded code per raw axis and source digit
  uint32_t S[3][Q];  // sign / zero bits per raw axis and source digit
#pragma unroll
  for (int j = 0; j < 3; ++j) {
#pragma unroll
    for (int d = 0; d < Q; ++d) {
      X[j][d] = 0;
      S[j][d] = 0;
    }
  }
#pragma unroll
  for (int j = 0; j < D; ++j) {
    const uint8_t f = rc.fl[j];
    const bool nf = (f & kNodeFlip) != 0;
    const int y = nf ? Q - 1 - td[j] : td[j];
#pragma unroll
    for (int d = 0; d < Q; ++d) {
      const int x = nf ? Q - 1 - d : d;
      uint32_t fold = 0;
      X[j][d] = static_cast<uint32_t>(orbit_fold(f, Q2, x * Q + y, fold));
      S[j][d] = Z ? ((fold & kFoldZero) ? kZeroBit : 0u) | ((fold & kFoldNegate) ? kSignBit : 0u)
                  : 0u;
    }
  }
  constexpr int PA = SH == kShapeP12 ? 1 : 0;
  constexpr int PB = SH == kShapeP01 ? 1 : 2;
  constexpr int PC = SH == kShapeP01 ? 2 : (SH == kShapeP02 ? 1 : 0);
  // Singleton axes' terms (bytes, plus the sign / zero bits).
  uint32_t A[3][Q];
#pragma unroll
  for (int j = 0; j < 3; ++j) {
#pragma unroll
    for (int d = 0; d < Q; ++d) A[j][d] = 8 * rc.w[j] * X[j][d] + S[j][d];
  }
  // The pair group's term: w·(min + C(max+1, 2)) = w·max(x + C(y+1, 2), y + C(x+1, 2)).
  uint32_t PT[Q][Q];
  if constexpr (SH == kShapeP01 || SH == kShapeP02 || SH == kShapeP12) {
    const uint32_t w8 = 8 * rc.w[PA];
#pragma unroll
    for (int a = 0; a < Q; ++a) {
#pragma unroll
      for (int b = 0; b < Q; ++b) {
        const uint32_t x = X[PA][a], y = X[PB][b];
        const uint32_t u = x + r1(y), v = y + r1(x);
        PT[a][b] = w8 * (u > v ? u : v);
      }
    }
  }
  // The triple: inserting z into the sorted a ≤ b gives
  //   z + C(a+1,2) + C(b+2,3), a + C(z+1,2) + C(b+2,3) or a + C(b+1,2) + C(z+2,3)
  // for z ≤ a, a < z ≤ b, z > b; the right one is the largest of the three.
  uint32_t Z8[Q], R1z[Q], R2z[Q];
  if constexpr (SH == kShapeT) {
#pragma unroll
    for (int d = 0; d < Q; ++d) {
      Z8[d] = 8 * X[2][d];
      R1z[d] = 8 * r1(X[2][d]);
      R2z[d] = 8 * r2(X[2][d]);
    }
  }
  const uint32_t B = B8 + (Z && rc.neg ? kSignBit : 0u);
  double acc = 0.0;
  constexpr int Q1 = D == 3 ? Q : 1;
#pragma unroll
  for (int s0 = 0; s0 < Q; ++s0) {
#pragma unroll
    for (int s1 = 0; s1 < Q; ++s1) {
      uint32_t c1 = 0, c2 = 0, c3 = 0;
      if constexpr (SH == kShapeT) {
        const uint32_t x = X[0][s0], y = X[1][s1];
        const uint32_t ta = x < y ? x : y, tb = x < y ? y : x;
        c1 = B + 8 * (r1(ta) + r2(tb));
        c2 = B + 8 * (ta + r2(tb));
        c3 = B + 8 * (ta + r1(tb));
      }
#pragma unroll
      for (int s2 = 0; s2 < Q1; ++s2) {
        const int s = D == 3 ? (s0 * Q + s1) * Q + s2 : s0 * Q + s1;
        const int dg[3] = {s0, s1, s2};
        uint32_t P;
        if constexpr (SH == kShapeS) {
          P = B + A[0][s0] + A[1][s1];
          if constexpr (D == 3) P += A[2][s2];
        } else if constexpr (SH == kShapeT) {
          const uint32_t g1 = c1 + Z8[s2], g2 = c2 + R1z[s2], g3 = c3 + R2z[s2];
          const uint32_t g12 = g1 > g2 ? g1 : g2;
          P = g12 > g3 ? g12 : g3;
        } else {
          P = B + PT[dg[PA]][dg[PB]];
          if constexpr (D == 3) P += A[PC][dg[PC]];
        }
        if constexpr (Z) {
          if (P & kZeroBit) continue;  // zero by symmetry: adds nothing
          const double v = *reinterpret_cast<const double *>(sm + (P & kRankMask));
          const double sv = __longlong_as_double(__double_as_longlong(v) ^
                                                 (static_cast<long long>(P & kSignBit) << 32));
          acc = hk_add(acc, hk_mul(fs[s], sv));
        } else {
          const double v = *reinterpret_cast<const double *>(sm + P);
          acc = hk_add(acc, hk_mul(NEG ? -fs[s] : fs[s], v));
        }
      }
    }
  }
  return acc;
}

template <int D, int Q, bool Z, bool NEG>
__device__ __forceinline__ double orbit_pair_shape(const OrbitRaw &rc, const int *td,
                                                   const char *__restrict__ sm, uint32_t B8,
                                                   const double *__restrict__ fs) {
  if constexpr (D == 2) {
    if (rc.shape == kShapeP01) return orbit_pair<D, Q, kShapeP01, Z, NEG>(rc, td, sm, B8, fs);
    return orbit_pair<D, Q, kShapeS, Z, NEG>(rc, td, sm, B8, fs);
  } else {
    switch (rc.shape) {
      case kShapeT:
        if constexpr (!Z) return orbit_pair<D, Q, kShapeT, Z, NEG>(rc, td, sm, B8, fs);
        // (a derivative axis is its own group: no triple with Z)
        return orbit_pair<D, Q, kShapeT, false, false>(rc, td, sm, B8, fs);
      case kShapeP01: return orbit_pair<D, Q, kShapeP01, Z, NEG>(rc, td, sm, B8, fs);
      case kShapeP02: return orbit_pair<D, Q, kShapeP02, Z, NEG>(rc, td, sm, B8, fs);
      case kShapeP12: return orbit_pair<D, Q, kShapeP12, Z, NEG>(rc, td, sm, B8, fs);
      default: return orbit_pair<D, Q, kShapeS, Z, NEG>(rc, td, sm, B8, fs);
    }
  }
}

// ORBIT at q = Q (1..4) with the compact rows of every table staged in
// shared memory: [values n_tables·n_rows doubles] [OrbitRaw per case].
// Block: `boxes` groups of `lanes` threads, group g takes target boxes
// blockIdx.x·boxes + g, + gridDim.x·boxes, ...; lane l of a group takes
// t = l, l + lanes, ... (lanes = packed_box_lanes: min(batch, nq rounded
// up to a lane group)); a work split, right at any warp width. (On AMD,
// HIP maps the 2 of __launch_bounds__ to amdgpu_waves_per_eu(2), a
// register-budget hint in waves per SIMD, not CUDA's blocks per SM.)
template <int D, int Q>
__global__ void __launch_bounds__(512, 2)
    list1_orbit_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr,
                       const double *__restrict__ f, double *__restrict__ out, int lanes,
                       int boxes) {
  extern __shared__ double smem_d[];
  constexpr int NQ = D == 3 ? Q * Q * Q : Q * Q;
  const size_t n_vals = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(tab.n_rows);
  double *sv = smem_d;
  OrbitRaw *rcs = reinterpret_cast<OrbitRaw *>(smem_d + n_vals);
  for (size_t k = threadIdx.x; k < n_vals; k += blockDim.x) sv[k] = tab.values[k];
  for (int c = threadIdx.x; c < tab.n_cases; c += blockDim.x) decode_orbit_raw<D>(tab, c, rcs + c);
  __syncthreads();
  const int g = static_cast<int>(threadIdx.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) - g * lanes;
  if (g >= boxes) return;
  const int64_t n_rows = tab.n_rows;
  const double *__restrict__ norms = tab.mode_normalizers;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * boxes + g; i < pr.n_targets;
       i += static_cast<int64_t>(gridDim.x) * boxes) {
    const uint32_t ja = pr.source_starts[i], jb = pr.source_starts[i + 1];
    for (int t = lane; t < NQ; t += lanes) {
      int td[3];
      digits<D>(t, Q, td);
      double u = 0.0;
      for (uint32_t j = ja; j < jb; ++j) {
        const uint32_t sb = pr.source_boxes[j];
        const int c = pr.pair_cases[j];
        const int lvl = pr.box_levels[sb];
        const double scale = pr.level_scale[lvl];
        const double disp = pr.level_displacement[lvl];
        const double *__restrict__ fs = f + static_cast<size_t>(sb) * NQ;
        const OrbitRaw rc = rcs[c];
        const uint32_t B8 =
            8 * (static_cast<uint32_t>(pr.level_table[lvl]) * static_cast<uint32_t>(n_rows) + rc.base);
        const char *sm = reinterpret_cast<const char *>(sv);
        const double acc = rc.zero ? orbit_pair_shape<D, Q, true, false>(rc, td, sm, B8, fs)
                           : rc.neg ? orbit_pair_shape<D, Q, false, true>(rc, td, sm, B8, fs)
                                    : orbit_pair_shape<D, Q, false, false>(rc, td, sm, B8, fs);
        double dd = 0.0;
        if (disp != 0.0) {
          double sum = -0.0;
          for (int s = 0; s < NQ; ++s) sum = hk_add(sum, hk_mul(fs[s], norms[s]));
          dd = hk_mul(disp, sum);
        }
        u = hk_add(u, hk_add(hk_mul(scale, acc), dd));
      }
      out[static_cast<size_t>(i) * NQ + t] = u;
    }
  }
}

// ---- The case-grouped schedule (hipkern_list1_evaluate_grouped) ----
//
// Phase 1, list1_group_products<D, LAYOUT>: block k takes tile k (+
// gridDim.x, ...). It builds the tile's case matrix Tc[s·nq + t] =
// T(case, s, t) in shared memory, each entry by the layout's own
// reconstruction (dense: the value; ORBIT: group_orbit_entry, the generic
// path's steps; FALLBACK: the resolution table or the candidate scan +
// hash), then runs the tile's pairs in rounds of G·kGroupPairsPerThread
// (G = blockDim.x / nq groups of nq lanes): the round's pair ids and source
// boxes, then their source vectors, are staged in shared memory (rows
// padded to an odd stride so the groups of one warp read distinct banks);
// lane (g, t) keeps kGroupPairsPerThread sums in registers, pair slots
// p·G + g, and adds f_s·Tc[s·nq + t] over s in order: one shared load of
// Tc per kGroupPairsPerThread multiply-adds instead of one table read per
// multiply-add. Each sum is the per-pair sum of the per-target path, step
// for step (from +0, unfused, s in order), written to pair_values.
// Phase 2, list1_group_sums: lane (box, t) adds its pairs' products in list
// order, u += scale·acc + disp, exactly as the per-target path.
constexpr int kGroupPairsPerThread = 8;
constexpr int kGroupThreads = 256;

// ORBIT's T(c, s, t) from a decoded OrbitCase: the steps of list1_kernel's
// ORBIT branch for one entry (0 for an entry that is zero by symmetry: the
// per-target path skips it, here it adds f·0 = ±0, which leaves a sum
// started at +0 unchanged).
template <int D>
__device__ double group_orbit_entry(const OrbitCase &oc, const double *__restrict__ V, int q,
                                    const uint8_t *sdig, const uint8_t *tdig) {
  const int q2 = q * q;
  const int td[3] = {tdig[0], tdig[1], tdig[2]};
  const int sd[3] = {sdig[0], sdig[1], sdig[2]};
  uint32_t fold = 0;
  int code[3] = {0, 0, 0};
#pragma unroll
  for (int k = 0; k < D; ++k) {
    int xt = pick(td, oc.perm[k]);
    int xs = pick(sd, oc.perm[k]);
    if (oc.flags[k] & kNodeFlip) {
      xt = q - 1 - xt;
      xs = q - 1 - xs;
    }
    code[k] = orbit_fold(oc.flags[k], q2, xs * q + xt, fold);
  }
  orbit_sort_codes<D>(oc, code);
  uint32_t rank = 0;
#pragma unroll
  for (int k = 0; k < D; ++k) rank += oc.w[k] * rank_term(static_cast<uint32_t>(code[k]), oc.pos[k]);
  if (fold & kFoldZero) return 0.0;
  const double v = V[rank];
  return ((fold & kFoldNegate) != 0) != (oc.sign0 < 0) ? -v : v;
}

// FALLBACK's T(c, s, t) by the descriptor path: the candidates cl[0..nc)
// of case c (transforms to its smallest image case cmin, in order), the
// sparse sign correction, the hash (list1_kernel's FALLBACK branch, one
// entry); NaN for a representative missing from the hash.
__device__ double group_fallback_entry(const hipkern_list1_table &tab, const uint8_t *cl, int nc,
                                       int cmin, int c, int s, int t, int nq,
                                       uint32_t lookup_bits, const double *__restrict__ V) {
  const uint32_t nq2 = static_cast<uint32_t>(nq) * static_cast<uint32_t>(nq);
  const uint32_t base = static_cast<uint32_t>(cmin) * nq2;
  uint32_t best = 0xFFFFFFFFu;
  int bsign = 1;
  for (int i = 0; i < nc; ++i) {
    const int g = cl[i];
    const uint32_t id = base + static_cast<uint32_t>(tab.transform_qpoint_map[g * nq + s]) * nq +
                        static_cast<uint32_t>(tab.transform_qpoint_map[g * nq + t]);
    const int sg = tab.transform_signs[g];
    if (id < best || (id == best && sg > 0 && bsign < 0)) {
      best = id;
      bsign = sg;
    }
  }
  if (tab.n_sign_lookup > 0) {
    const uint32_t full = static_cast<uint32_t>(c) * nq2 + static_cast<uint32_t>(s) * nq +
                          static_cast<uint32_t>(t);
    uint32_t lo = 0, hi = tab.n_sign_lookup;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (tab.sign_lookup_ids[mid] < full)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < tab.n_sign_lookup && tab.sign_lookup_ids[lo] == full) bsign = tab.sign_lookup_signs[lo];
  }
  const uint32_t mask = tab.lookup_size - 1;
  const uint32_t h = lookup_bits == 0 ? 0u : (best * 0x9E3779B1u) >> (32 - lookup_bits);
  uint32_t row = kNotFound;
  for (uint32_t p = 0; p < tab.probe_count; ++p) {
    const uint32_t k = (h + p) & mask;
    if (tab.lookup_keys[k] == best) {
      row = tab.lookup_rows[k];
      break;
    }
  }
  const double v = row == kNotFound ? __longlong_as_double(0x7FF8000000000000ll) : V[row];
  return bsign < 0 ? -v : v;
}

// What a block decodes once per case (one thread, into shared memory) before
// any thread reads case_matrix_entry: ORBIT's OrbitCase; the descriptor
// fallback's candidate transforms cand[0 .. cinfo[0]) to the smallest image
// case cinfo[1]. Nothing for DENSE or the fallback's resolution table.
template <int D, int LAYOUT>
__device__ void decode_case_layout(const hipkern_list1_table &tab, int c, OrbitCase *soc,
                                   uint8_t *cand, int *cinfo) {
  if (LAYOUT == HIPKERN_LIST1_ORBIT) decode_orbit_case<D>(tab, c, soc);
  if (LAYOUT == HIPKERN_LIST1_FALLBACK && tab.n_resolve_orbits == 0) {
    const int n_cases = tab.n_cases;
    int m = 256, n = 0;
    for (int h = 0; h < tab.n_transforms; ++h) {
      const int x = tab.transform_case_map[h * n_cases + c];
      if (x < m) m = x;
    }
    for (int h = 0; h < tab.n_transforms; ++h)
      if (tab.transform_case_map[h * n_cases + c] == m) cand[n++] = static_cast<uint8_t>(h);
    cinfo[0] = n;
    cinfo[1] = m;
  }
}

// T(c, s, t) of table V (its rows) as the layout reconstructs it, after
// decode_case_layout: DENSE reads it; ORBIT from the decoded OrbitCase and
// the digits table dig (3 per mode); the fallback through its resolution
// table (two reads) or the candidates, the sign lookup and the hash.
template <int D, int LAYOUT>
__device__ __forceinline__ double case_matrix_entry(const hipkern_list1_table &tab,
                                                    const double *__restrict__ V, int c, int s,
                                                    int tt, int nq, const OrbitCase *soc,
                                                    const uint8_t *dig, const uint8_t *cand,
                                                    const int *cinfo, uint32_t lookup_bits) {
  if (LAYOUT == HIPKERN_LIST1_DENSE) return V[(static_cast<size_t>(c) * nq + s) * nq + tt];
  if (LAYOUT == HIPKERN_LIST1_ORBIT)
    return group_orbit_entry<D>(*soc, V + soc->base, tab.q, dig + 3 * s, dig + 3 * tt);
  if (tab.n_resolve_orbits > 0) {
    const int h = tab.resolve_case_transform[c];
    const uint16_t *qh = tab.transform_qpoint_map + static_cast<size_t>(h) * nq;
    const uint32_t r =
        tab.resolve_rows[(static_cast<size_t>(tab.resolve_case_orbit[c]) * nq + qh[s]) * nq +
                         qh[tt]];
    const uint32_t hneg = tab.transform_signs[h] < 0 ? 0x8000u : 0u;
    const double x = V[r & 0x7FFFu];
    return ((r ^ hneg) & 0x8000u) ? -x : x;
  }
  return group_fallback_entry(tab, cand, cinfo[0], cinfo[1], c, s, tt, nq, lookup_bits, V);
}

// dig[3m .. 3m + 3) = the digits of mode m (axis 0 slowest), by the block.
template <int D>
__device__ void fill_digits(int q, int nq, uint8_t *dig) {
  for (int m = static_cast<int>(threadIdx.x); m < nq; m += static_cast<int>(blockDim.x)) {
    int d[3];
    digits<D>(m, q, d);
    dig[3 * m] = static_cast<uint8_t>(d[0]);
    dig[3 * m + 1] = static_cast<uint8_t>(d[1]);
    dig[3 * m + 2] = static_cast<uint8_t>(d[2]);
  }
}

// Shared memory of list1_group_products: [Tc nq² f64] [F rounds·stride f64]
// [pair ids rounds u32] [source boxes rounds u32] [key ok rounds u8]
// [digits nq × 3 u8] [layout scratch]. rounds = G · kGroupPairsPerThread,
// stride = nq | 1.
__host__ __device__ inline size_t group_products_shared(int nq, int groups) {
  const size_t rounds = static_cast<size_t>(groups) * kGroupPairsPerThread;
  const size_t stride = static_cast<size_t>(nq | 1);
  size_t b = static_cast<size_t>(nq) * nq * 8 + rounds * stride * 8 + rounds * 9 +
             3 * static_cast<size_t>(nq);
  b = (b + 15) / 16 * 16;
  return b + sizeof(OrbitCase) + HIPKERN_LIST1_MAX_TRANSFORMS + 16;
}

template <int D, int LAYOUT>
__global__ void __launch_bounds__(kGroupThreads)
    list1_group_products(hipkern_list1_table tab, hipkern_list1_pairs pr, hipkern_list1_groups gr,
                         const double *__restrict__ f, int nq, uint32_t lookup_bits) {
  extern __shared__ double smem_d[];
  const int groups = static_cast<int>(blockDim.x) / nq;
  const int rounds = groups * kGroupPairsPerThread;
  const int stride = nq | 1;
  double *Tc = smem_d;
  double *F = Tc + static_cast<size_t>(nq) * nq;
  uint32_t *pid = reinterpret_cast<uint32_t *>(F + static_cast<size_t>(rounds) * stride);
  uint32_t *pbox = pid + rounds;
  uint8_t *pok = reinterpret_cast<uint8_t *>(pbox + rounds);
  uint8_t *dig = pok + rounds;  // digits of every mode index (ORBIT)
  size_t off = static_cast<size_t>(nq) * nq * 8 + static_cast<size_t>(rounds) * stride * 8 +
               static_cast<size_t>(rounds) * 9 + 3 * static_cast<size_t>(nq);
  off = (off + 15) / 16 * 16;
  unsigned char *extra = reinterpret_cast<unsigned char *>(smem_d) + off;
  OrbitCase *soc = reinterpret_cast<OrbitCase *>(extra);
  uint8_t *cand = extra + sizeof(OrbitCase);  // candidates (FALLBACK)
  int *cinfo = reinterpret_cast<int *>(cand + HIPKERN_LIST1_MAX_TRANSFORMS);  // count, min case

  const int tid = static_cast<int>(threadIdx.x);
  const int g = tid / nq;
  const int t = tid - g * nq;
  const int n_cases = tab.n_cases;
  const int64_t n_rows = tab.n_rows;
  // The digits of every mode index (axis 0 slowest), once per block: the
  // ORBIT entries read them instead of dividing by q (read after the
  // first tile's barriers).
  if (LAYOUT == HIPKERN_LIST1_ORBIT) fill_digits<D>(tab.q, nq, dig);
  for (int64_t k = blockIdx.x; k < gr.n_tiles; k += gridDim.x) {
    const uint32_t a = gr.tile_offsets[k], b = gr.tile_offsets[k + 1];
    const uint32_t key = gr.tile_keys[k];
    const int c = static_cast<int>(key % static_cast<uint32_t>(n_cases));
    const uint32_t table = key / static_cast<uint32_t>(n_cases);
    const bool key_ok = table < static_cast<uint32_t>(tab.n_tables);
    const double *__restrict__ V =
        tab.values + static_cast<size_t>(key_ok ? table : 0) * static_cast<size_t>(n_rows);
    __syncthreads();  // the previous tile is done with Tc and the layout scratch
    if (tid == 0) decode_case_layout<D, LAYOUT>(tab, c, soc, cand, cinfo);
    __syncthreads();
    for (int e = tid; e < nq * nq; e += blockDim.x) {
      const int s = e / nq, tt = e - s * nq;
      Tc[e] = case_matrix_entry<D, LAYOUT>(tab, V, c, s, tt, nq, soc, dig, cand, cinfo, lookup_bits);
    }
    for (uint32_t base = a; base < b; base += static_cast<uint32_t>(rounds)) {
      __syncthreads();  // Tc built; the previous round's F, pid read
      for (int r = tid; r < rounds; r += blockDim.x) {
        const uint32_t idx = base + static_cast<uint32_t>(r);
        uint32_t j = kNotFound, sb = 0;
        uint8_t ok = 0;
        if (idx < b) {
          j = gr.tile_pairs[idx];
          if (static_cast<int64_t>(j) < gr.pair_begin || static_cast<int64_t>(j) >= gr.pair_end) {
            j = kNotFound;  // outside the chunk: skipped
          } else {
            sb = pr.source_boxes[j];
            ok = key_ok && pr.pair_cases[j] == c && pr.level_table[pr.box_levels[sb]] == table;
          }
        }
        pid[r] = j;
        pbox[r] = sb;
        pok[r] = ok;
      }
      __syncthreads();
      for (int e = tid; e < rounds * nq; e += blockDim.x) {
        const int r = e / nq, s = e - r * nq;
        F[static_cast<size_t>(r) * stride + s] =
            pid[r] != kNotFound ? f[static_cast<size_t>(pbox[r]) * nq + s] : 0.0;
      }
      __syncthreads();
      if (g < groups) {
        double acc[kGroupPairsPerThread];
#pragma unroll
        for (int p = 0; p < kGroupPairsPerThread; ++p) acc[p] = 0.0;
        const double *Fg = F + static_cast<size_t>(g) * stride;
        for (int s = 0; s < nq; ++s) {
          const double v = Tc[s * nq + t];
#pragma unroll
          for (int p = 0; p < kGroupPairsPerThread; ++p)
            acc[p] = hk_add(acc[p], hk_mul(Fg[static_cast<size_t>(p) * groups * stride + s], v));
        }
#pragma unroll
        for (int p = 0; p < kGroupPairsPerThread; ++p) {
          const int r = p * groups + g;
          const uint32_t j = pid[r];
          if (j == kNotFound) continue;
          gr.pair_values[static_cast<size_t>(j - gr.pair_begin) * nq + t] =
              pok[r] ? acc[p] : __longlong_as_double(0x7FF8000000000000ll);
        }
      }
    }
  }
}

__global__ void list1_group_sums(hipkern_list1_table tab, hipkern_list1_pairs pr,
                                 hipkern_list1_groups gr, const double *__restrict__ f,
                                 double *__restrict__ out, int nq, int lanes, int boxes) {
  // Groups of `lanes` threads (box_lanes), one box each: a work split with
  // no shared data at all, right at any warp width.
  const int grp = static_cast<int>(threadIdx.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) - grp * lanes;
  if (grp >= boxes) return;
  const double *__restrict__ norms = tab.mode_normalizers;
  const double *__restrict__ pv = gr.pair_values;
  for (int64_t i = gr.target_begin + static_cast<int64_t>(blockIdx.x) * boxes + grp;
       i < gr.target_end; i += static_cast<int64_t>(gridDim.x) * boxes) {
    const uint32_t ja = pr.source_starts[i], jb = pr.source_starts[i + 1];
    for (int t = lane; t < nq; t += lanes) {
      double u = 0.0;
      for (uint32_t j = ja; j < jb; ++j) {
        const uint32_t sb = pr.source_boxes[j];
        const int lvl = pr.box_levels[sb];
        const double scale = pr.level_scale[lvl];
        const double disp = pr.level_displacement[lvl];
        // A pair outside the chunk (pair_begin/pair_end not the chunk's
        // source_starts) reads nothing out of bounds: NaN.
        const double acc = (static_cast<int64_t>(j) >= gr.pair_begin &&
                            static_cast<int64_t>(j) < gr.pair_end)
                               ? pv[static_cast<size_t>(j - gr.pair_begin) * nq + t]
                               : __longlong_as_double(0x7FF8000000000000ll);
        double d = 0.0;
        if (disp != 0.0) {
          const double *__restrict__ fs = f + static_cast<size_t>(sb) * nq;
          double sum = -0.0;
          for (int s = 0; s < nq; ++s) sum = hk_add(sum, hk_mul(fs[s], norms[s]));
          d = hk_mul(disp, sum);
        }
        u = hk_add(u, hk_add(hk_mul(scale, acc), d));
      }
      out[static_cast<size_t>(i) * nq + t] = u;
    }
  }
}

// --- The target-tiled schedule (hipkern_list1_evaluate_tiled) -----------
//
// One block per tile of B = targets_per_tile target boxes (lanes). The
// block walks the tile's keys (table · n_cases + case, ascending) in
// chunks of kTiledKeyChunk. Per chunk it first resolves every (key, lane)
// slot at once — pair id, source box, level, scale, displacement term,
// checked against the lane's own list, case and table — and decodes every
// key's layout descriptors (decode_case_layout), into shared memory: many
// independent loads in flight instead of one dependent chain per key.
// Per key the block builds the case matrix T(case, ·, ·) once in shared
// memory (case_matrix_entry, any layout) and the source vectors of the
// lanes with a pair of that key, pre-scaled (coalesced rows), and every
// such box adds T·(scale·f) into its outputs, in registers for the whole
// tile. A case never has two pairs in one target's list (the case fixes
// the source box), so a lane has at most one pair per key; the host's
// tiling puts a repeated pair under a repeated key.
//
// The key loop is software-pipelined: the loads of key e + 1's matrix
// entries and source values are issued into registers before key e's sums
// and stored into shared memory only after them, so their latency hides
// behind the sums and the barriers (one round of loads per key, all in
// flight at once); the next chunk's slots are resolved after the first
// key's sums of the current chunk (double-buffered slots). ORBIT builds
// the next key's per-axis code and rank-term tables (tiled_orbit_tables)
// between the two barriers of a key, so its entries are a few shared
// reads and the gather (tiled_orbit_entry) instead of the whole decode.
//
// Two kernels do the sums. list1_tiled_kernel (FMAs, every platform):
// 32 · S threads; the q^d outputs are cut into S parts of RO (≤ 9) and a
// thread holds RT = B / 32 boxes × RO outputs, thread (part p, column g)
// taking lanes g, g + 32, ... and outputs p·RO .. p·RO + RO: one FMA per
// source mode in order. A warp is one part: its T reads are broadcasts,
// its source reads one per lane (odd row stride: no bank conflict).
// (Here a "lane" is a target box of the tile, and the 32 is kLaneGroup:
// a part is kLaneGroup threads, a warp on NVIDIA and wave32, half a
// wavefront on wave64, where a wavefront's two parts read two T rows: a
// speed matter only. Threads share data only through shared memory across
// __syncthreads, so the kernel is correct at any warp width; blocks of
// 32 · S threads with S odd end in a half-filled wavefront on wave64.)
// list1_tiled_mma_kernel (NVIDIA sm_80+): the products on the FP64 tensor
// cores, below; it and list1_tiled_mma_sources_kernel are compiled for
// NVIDIA alone (HIPKERN_L1_NVCC): AMD builds run list1_tiled_kernel.
//
// Order: per target point, the keys ascending, then the source modes in
// order (one FMA each, or four per tensor-core step): the same for every
// B and layout (the case matrices are equal), so the same bits for every
// tile width and layout and from run to run, per kernel; not the CPU
// evaluator's bits (list order, unfused).
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

// [T parts × nq × part stride f64] [F B × odd stride f64] [state].
__host__ __device__ inline size_t tiled_matrix_bytes(int nq, int b) {
  return static_cast<size_t>(tiled_parts(nq)) * nq * tiled_part_stride(nq) * 8 +
         static_cast<size_t>(b) * tiled_f_stride(nq) * 8;
}
__host__ __device__ inline size_t tiled_shared(int nq, int b) {
  return (tiled_matrix_bytes(nq, b) + 15) / 16 * 16 + tiled_state_bytes(nq, b);
}

template <int D, int LAYOUT, int NQ, int RT>
__global__ void __launch_bounds__(kTiledMaxThreads)
    list1_tiled_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr, hipkern_list1_tiles tl,
                       const double *__restrict__ f, double *__restrict__ out,
                       uint32_t lookup_bits) {
  constexpr int S = tiled_parts(NQ);
  constexpr int RO = tiled_ro(NQ);
  constexpr int LDP = tiled_part_stride(NQ);
  constexpr int LDF = tiled_f_stride(NQ);
  constexpr int B = kLaneGroup * RT;
  constexpr int THREADS = kLaneGroup * S;
  extern __shared__ double smem_d[];
  double *Tc = smem_d;
  double *F = Tc + S * NQ * LDP;
  const TiledState st = tiled_state(
      reinterpret_cast<unsigned char *>(smem_d) + (tiled_matrix_bytes(NQ, B) + 15) / 16 * 16, NQ,
      B);

  const int tid = static_cast<int>(threadIdx.x);
  const int part = tid >> kLaneGroupLog2;  // one lane group per part (see above)
  const int col = tid & (kLaneGroup - 1);
  if (LAYOUT == HIPKERN_LIST1_ORBIT) tiled_mode_words<D>(tab.q, NQ, st);
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
    tiled_walk<D, LAYOUT, NQ, B, THREADS, false>(
        tab, pr, tl, f, k, st, lookup_bits, Tc,
        [](int s, int t) { return ((t / RO) * NQ + s) * LDP + t % RO; }, F, LDF, sums);
    __syncthreads();  // every lane's bad flag is final
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int lane = col + kLaneGroup * r;
      const uint32_t i = st.ltarget[lane];
      if (i == kNotFound) continue;
      const bool nan = st.lbad[lane] != 0u;
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
// The same tiles, slots, pipelined staging and order of keys as
// list1_tiled_kernel, but per key the products are matrix products on the
// FP64 tensor cores (mma.sync m8n8k4, sm_80 and later): U(t, n) += Σ_s
// A(t, s) · G(s, n) with A(t, s) = T(case, s, t) (the case matrix, q^d
// padded to whole 8 × 4 tiles with zeros) and G(s, n) = scale_n · f[box_n,
// s] (zero for a lane without a pair of the key), n over 32 target boxes.
// The block has WARPS column groups of 32 boxes and MSPLIT warps per
// group, warp (m0, group) taking the row tiles m0, m0 + MSPLIT, ...: more
// warps to issue loads and hide their latency, the same products. A warp's
// accumulators (its row tiles × 4 fragments of 8 × 8) stay in registers
// for the whole tile. Each mma adds four products to an accumulator
// element (a k-step); the order (keys ascending, k-steps of the source
// modes in order) is the same for every tile width, split and layout, so
// the same bits for all of them and from run to run, but not the FMA
// kernel's bits.
//
// NVIDIA only, from here to the matching #endif (HIPKERN_L1_NVCC: nvcc, or
// hipcc on NVIDIA): mma.sync.aligned is an instruction of the whole
// converged 32-thread warp, so the 32s below (tid >> 5, tid & 31,
// 32 · WARPS, the fragment layouts lane / 4, lane % 4, __syncwarp) are the
// NVIDIA warp itself, not kLaneGroup. No AMD build compiles or launches
// these kernels (tiled_kernel picks list1_tiled_kernel there).
#if defined(HIPKERN_L1_NVCC)
// Padded sizes: rows (target points) to 8, columns (source modes) to 4;
// the row stride ≡ 4 (mod 16) doubles so a fragment load (rows g = 0..3 or
// 4..7 of a half-warp, columns c = 0..3) hits 16 distinct bank pairs.
__host__ __device__ constexpr int mma_m_tiles(int nq) { return (nq + 7) / 8; }
__host__ __device__ constexpr int mma_k_steps(int nq) { return (nq + 3) / 4; }
__host__ __device__ constexpr int mma_stride(int nq) {
  return (mma_k_steps(nq) * 4 + 11) / 16 * 16 + 4;
}
// Warps per column group: as many as the row tiles allow, at most 8 warps
// in the block.
__host__ __device__ constexpr int mma_msplit(int nq, int warps) {
  return mma_m_tiles(nq) < 8 / warps ? mma_m_tiles(nq) : 8 / warps;
}

// [A m_tiles·8 × stride f64] [G B × stride f64] [state].
__host__ __device__ inline size_t mma_matrix_bytes(int nq, int b) {
  return static_cast<size_t>(mma_m_tiles(nq)) * 8 * mma_stride(nq) * 8 +
         static_cast<size_t>(b) * mma_stride(nq) * 8;
}
__host__ __device__ inline size_t mma_keyed_shared(int nq, int b) {
  return (mma_matrix_bytes(nq, b) + 15) / 16 * 16 + tiled_state_bytes(nq, b);
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

// Whether every architecture this file is built for has the FP64 mma
// (sm_80+), from nvcc's list of them (host and device passes).
constexpr bool mma_built() {
#if defined(__CUDA_ARCH_LIST__)
  constexpr int archs[] = {__CUDA_ARCH_LIST__};
  for (int a : archs)
    if (a < 800) return false;
  return true;
#else
  return false;
#endif
}

template <int D, int LAYOUT, int NQ, int WARPS, int MSPLIT>
__global__ void __launch_bounds__(32 * WARPS * MSPLIT)
    list1_tiled_mma_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr,
                           hipkern_list1_tiles tl, const double *__restrict__ f,
                           double *__restrict__ out, uint32_t lookup_bits) {
  constexpr int MT = mma_m_tiles(NQ);
  constexpr int MW = (MT + MSPLIT - 1) / MSPLIT;  // row tiles per warp (at most)
  constexpr int KS = mma_k_steps(NQ);
  constexpr int LD = mma_stride(NQ);
  constexpr int B = 32 * WARPS;
  constexpr int THREADS = B * MSPLIT;
  extern __shared__ double smem_d[];
  double *A = smem_d;
  double *G = A + MT * 8 * LD;
  const TiledState st = tiled_state(
      reinterpret_cast<unsigned char *>(smem_d) + (mma_matrix_bytes(NQ, B) + 15) / 16 * 16, NQ, B);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int wn = warp % WARPS;  // column group: boxes wn·32 .. wn·32 + 32
  const int m0 = warp / WARPS;  // first row tile
  const int lane = tid & 31;
  const int g = lane >> 2, cq = lane & 3;
  if (LAYOUT == HIPKERN_LIST1_ORBIT) tiled_mode_words<D>(tab.q, NQ, st);
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
    tiled_walk<D, LAYOUT, NQ, B, THREADS, true>(
        tab, pr, tl, f, k, st, lookup_bits, A, [](int s, int t) { return t * LD + s; }, G, LD,
        sums);
    __syncthreads();  // every lane's bad flag is final
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int l = wn * 32 + n * 8 + 2 * cq + h;
        const uint32_t ib = st.ltarget[l];
        if (ib == kNotFound) continue;
        const bool nan = st.lbad[l] != 0u;
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
// (hipkern_list1_tiles.arithmetic = HIPKERN_LIST1_TILED_TENSOR_SOURCES.)
// The same tiles and keys as list1_tiled_kernel, the products as matrix
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
// block resolves and checks every (key, box) slot and decodes each key's
// layout descriptors (ORBIT: its per-axis tables) into shared memory
// (two barriers, ORBIT three), then every warp walks the chunk's keys on
// its own, without barriers: warp (row tile m, column group ng) reads its A fragments
// (rows t = 8m .. 8m + 7, all source modes) straight from the layout —
// DENSE from the table, ORBIT decoded from the per-axis tables, FALLBACK
// through case_matrix_entry — the next key's while this key's products
// run, and its B fragments from the source rows; its accumulators (8 × 8
// per column tile, NT tiles) stay in registers for the whole tile.
//
// Order: per output, the keys ascending, per key the k-steps of four
// source modes in order, then the displacement term: the same for every
// tile width and layout (the case matrices are equal) and from run to run,
// so the same bits; not the FMA kernel's bits, nor the CPU evaluator's.
constexpr int kMmaKeyChunk = 32;
// mma_slots decodes key kk with thread kk: every block has ≥ 32 threads.
static_assert(kMmaKeyChunk <= 32, "a key chunk per warp's threads");
// The source rows' stride in doubles: the k-steps' columns, ≡ 4 (mod 8),
// so a B fragment load (a half-warp: 4 rows × 4 consecutive columns) of
// rows distinct mod 4 hits 16 distinct bank pairs.
__host__ __device__ constexpr int mma_row_stride(int nq) {
  return mma_k_steps(nq) * 4 % 8 == 4 ? mma_k_steps(nq) * 4 : mma_k_steps(nq) * 4 + 4;
}
// Column tiles (8 boxes) per warp and column groups per tile of b boxes:
// a warp takes the whole tile (b / 4 accumulator doubles a thread), so the
// A fragments it reads or decodes per key (ORBIT: about 70 SASS
// instructions an entry, against one load for DENSE) serve every box.
__host__ __device__ constexpr int mma_n_tiles(int b) { return b / 8; }
__host__ __device__ constexpr int mma_groups(int b) { return b / (8 * mma_n_tiles(b)); }
__host__ __device__ constexpr int mma_threads(int nq, int b) {
  return 32 * mma_m_tiles(nq) * mma_groups(b);
}

// Shared memory: [source rows (rows + 1) × stride f64, row `rows` zero]
// [their displacement terms rows + 1 f64] [key value offsets C u64]
// [ORBIT rank terms C × D·q² u32] [lane target, begin, end, bad 4·B u32]
// [key case C i32] [candidate count, smallest image case 2·C i32] [tile
// flags 2 u32] [ORBIT codes C × D·q² u16] [slots C × B u16] [align 16]
// [OrbitCase C] [candidates C × max transforms u8], C = kMmaKeyChunk.
__host__ __device__ inline size_t mma_head_bytes(int nq, int b, int rows, int dq2) {
  constexpr size_t C = kMmaKeyChunk;
  size_t n = static_cast<size_t>(rows + 1) * mma_row_stride(nq) * 8 +
             static_cast<size_t>(rows + 1) * 8 + C * 8 + C * dq2 * 4 + static_cast<size_t>(b) * 16 +
             C * 12 + 8 + C * dq2 * 2 + C * b * 2;
  return (n + 15) / 16 * 16;
}
__host__ __device__ inline size_t mma_sources_shared(int nq, int b, int rows, int dq2) {
  return mma_head_bytes(nq, b, rows, dq2) +
         kMmaKeyChunk * (sizeof(OrbitCase) + HIPKERN_LIST1_MAX_TRANSFORMS);
}

struct MmaState {
  double *G, *gdisp;
  uint64_t *kvoff;
  uint32_t *orank;
  uint32_t *ltarget, *lbegin, *lend, *lbad;
  int *kcase, *cinfo;
  uint32_t *flags;  // [0] the tile is bad (NaN everywhere), [1] some row has a displacement
  uint16_t *ocode, *slots;
  OrbitCase *soc;
  uint8_t *cand;
};

__device__ inline MmaState mma_state(unsigned char *at, int nq, int b, int rows, int dq2) {
  constexpr int C = kMmaKeyChunk;
  MmaState st;
  st.G = reinterpret_cast<double *>(at);
  st.gdisp = st.G + static_cast<size_t>(rows + 1) * mma_row_stride(nq);
  st.kvoff = reinterpret_cast<uint64_t *>(st.gdisp + rows + 1);
  st.orank = reinterpret_cast<uint32_t *>(st.kvoff + C);
  st.ltarget = st.orank + C * dq2;
  st.lbegin = st.ltarget + b;
  st.lend = st.lbegin + b;
  st.lbad = st.lend + b;
  st.kcase = reinterpret_cast<int *>(st.lbad + b);
  st.cinfo = st.kcase + C;
  st.flags = reinterpret_cast<uint32_t *>(st.cinfo + 2 * C);
  st.ocode = reinterpret_cast<uint16_t *>(st.flags + 2);
  st.slots = st.ocode + C * dq2;
  const size_t off = mma_head_bytes(nq, b, rows, dq2);
  st.soc = reinterpret_cast<OrbitCase *>(at + off);
  st.cand = at + off + sizeof(OrbitCase) * C;
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
// block: per key its case, table offset and decoded layout descriptors;
// per (key, lane) the source row of the lane's pair of that key (the zero
// row `rows` for none), checked: the pair in the lane's list, of the key's
// case and table, its source box the tile's source at that row — else the
// lane is bad (NaN) and the slot takes the zero row. With key matrices
// (DENSE's kernel runs them for every layout) a key's offset is its
// matrix's, case 0; a key without one makes the tile bad. Ends without a
// barrier.
template <int D, int LAYOUT, int NQ, int B, int THREADS>
__device__ void mma_slots(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                          const hipkern_list1_tiles &tl, int64_t k, uint32_t ec, int nk, int rows,
                          const MmaState &st) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < nk) {
    const uint32_t key = tl.keys[ec + static_cast<uint32_t>(tid)];
    if (LAYOUT == HIPKERN_LIST1_DENSE && tl.key_matrices != nullptr) {
      // A key past the tables reads matrix 0: its pairs are refused one by
      // one (tiled_pair_box), as without key matrices.
      uint32_t x = 0;
      if (static_cast<uint64_t>(key) <
          static_cast<uint64_t>(tab.n_tables) * static_cast<uint64_t>(tab.n_cases)) {
        x = tl.key_matrix_index[key];
        if (static_cast<int64_t>(x) >= tl.n_key_matrices) {
          st.flags[0] = 1u;  // same value from any writer
          x = 0;
        }
      }
      st.kcase[tid] = 0;
      st.kvoff[tid] = static_cast<uint64_t>(x) * static_cast<uint64_t>(NQ * NQ);
    } else {
      tiled_key_layout<D, LAYOUT>(tab, key, st.kcase + tid, st.kvoff + tid, st.soc + tid,
                                  st.cand + tid * HIPKERN_LIST1_MAX_TRANSFORMS,
                                  st.cinfo + 2 * tid);
    }
  }
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
// past q^d, from `values` (the table's rows, or the key matrices). ORBIT:
// sw[ks] = the source mode word of 4ks + cq, tw the target's (mode_words).
template <int D, int LAYOUT, int NQ>
__device__ __forceinline__ void mma_a_fragments(const hipkern_list1_table &tab,
                                                const double *__restrict__ values,
                                                const MmaState &st, int kk, int dq2, int t,
                                                int cq, const uint32_t *sw, uint32_t tw,
                                                uint32_t lookup_bits, double *a) {
  constexpr int KS = mma_k_steps(NQ);
  const double *__restrict__ V = values + st.kvoff[kk];
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    const OrbitCase oc = st.soc[kk];
    const uint16_t *cd = st.ocode + kk * dq2;
    const uint32_t *rk = st.orank + kk * dq2;
    const int stride = dq2 / D;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
      a[ks] = (4 * ks + cq < NQ && t < NQ) ? orbit_table_entry<D>(oc, V, cd, rk, stride, sw[ks] + tw)
                                           : 0.0;
  } else {
    const int c = st.kcase[kk];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const int s = 4 * ks + cq;
      a[ks] = (s < NQ && t < NQ)
                  ? case_matrix_entry<D, LAYOUT>(tab, V, c, s, t, NQ, st.soc + kk, nullptr,
                                                 st.cand + kk * HIPKERN_LIST1_MAX_TRANSFORMS,
                                                 st.cinfo + 2 * kk, lookup_bits)
                  : 0.0;
    }
  }
}

// targets_per_tile = B; blocks of mma_threads(NQ, B): warp w takes row
// tile m = w mod MT (target points 8m .. 8m + 7) of column group ng = w /
// MT (boxes 8·NT·ng .. 8·NT·(ng + 1)). `rows` = tiles.max_tile_sources.
template <int D, int LAYOUT, int NQ, int B>
__global__ void __launch_bounds__(mma_threads(NQ, B))
    list1_tiled_mma_sources_kernel(hipkern_list1_table tab, hipkern_list1_pairs pr,
                           hipkern_list1_tiles tl, const double *__restrict__ f,
                           double *__restrict__ out, uint32_t lookup_bits) {
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
  const int dq2 = LAYOUT == HIPKERN_LIST1_ORBIT ? D * tab.q * tab.q : 0;
  // Key matrices (any table's layout) run in DENSE's instance.
  const double *__restrict__ values =
      LAYOUT == HIPKERN_LIST1_DENSE && tl.key_matrices != nullptr ? tl.key_matrices : tab.values;
  extern __shared__ double smem_d[];
  const MmaState st = mma_state(reinterpret_cast<unsigned char *>(smem_d), NQ, B, rows, dq2);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int m = warp % MT;   // row tile
  const int ng = warp / MT;  // column group
  const int lane = tid & 31;
  const int g = lane >> 2, cq = lane & 3;
  const int t = m * 8 + g;  // this thread's target point in the A fragments
  uint32_t sw[KS] = {}, tw = 0;
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    uint32_t unused = 0;
    if (t < NQ) mode_words<D>(t, tab.q, unused, tw);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      sw[ks] = 0;
      if (4 * ks + cq < NQ) mode_words<D>(4 * ks + cq, tab.q, sw[ks], unused);
    }
  }
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
      if (i != 0) __syncthreads();  // the previous chunk's slots and tables are read
      mma_slots<D, LAYOUT, NQ, B, THREADS>(tab, pr, tl, k, ec, nk, rows, st);
      __syncthreads();
      if constexpr (LAYOUT == HIPKERN_LIST1_ORBIT) {
        // Every key's per-axis tables, by the block.
        for (int x = tid; x < nk * dq2; x += THREADS) {
          const int kk = x / dq2;
          orbit_axis_tables<D>(st.soc[kk], tab.q, st.ocode + kk * dq2, st.orank + kk * dq2,
                               dq2 / D, x - kk * dq2, dq2);
        }
        __syncthreads();
      }
      if (st.flags[0] != 0u) continue;  // a bad tile: NaN below
      const bool disp = st.flags[1] != 0u;
      double a[KS];
      mma_a_fragments<D, LAYOUT, NQ>(tab, values, st, 0, dq2, t, cq, sw, tw, lookup_bits, a);
      for (int kk = 0; kk < nk; ++kk) {
        // The next key's A fragments load while this key's products run.
        double an[KS];
        if (kk + 1 < nk)
          mma_a_fragments<D, LAYOUT, NQ>(tab, values, st, kk + 1, dq2, t, cq, sw, tw, lookup_bits,
                                         an);
        __syncwarp();  // converged after the layout's branches, before mma.sync.aligned
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

// Whether this device and build run list1_tiled_mma_kernel.
bool mma_available() {
  if (!mma_built()) return false;
  int dev = 0, major = 0;
  if (hipGetDevice(&dev) != hipSuccess ||
      hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, dev) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  return major >= 8;
}
#endif  // HIPKERN_L1_NVCC (the tensor-core kernels)

// hipkern_list1_expand_keys: block per key (grid-stride), the layout
// decoded once by thread 0, then every entry of the key's case matrix, row
// s (source mode) by column t (target mode), as case_matrix_entry gives it.
template <int D, int LAYOUT>
__global__ void __launch_bounds__(256)
    list1_expand_keys_kernel(hipkern_list1_table tab, const uint32_t *__restrict__ keys,
                             int64_t n_keys, double *__restrict__ out, int nq,
                             uint32_t lookup_bits) {
  __shared__ OrbitCase soc;
  __shared__ uint8_t cand[HIPKERN_LIST1_MAX_TRANSFORMS];
  __shared__ int cinfo[2];
  __shared__ uint8_t dig[3 * HIPKERN_LIST1_TILED_MAX_MODES];
  const int tid = static_cast<int>(threadIdx.x);
  if (LAYOUT == HIPKERN_LIST1_ORBIT) fill_digits<D>(tab.q, nq, dig);
  const size_t nq2 = static_cast<size_t>(nq) * static_cast<size_t>(nq);
  for (int64_t i = blockIdx.x; i < n_keys; i += gridDim.x) {
    const uint32_t key = keys[i];
    const int c = static_cast<int>(key % static_cast<uint32_t>(tab.n_cases));
    const uint32_t table = key / static_cast<uint32_t>(tab.n_cases);
    const bool ok = table < static_cast<uint32_t>(tab.n_tables);
    __syncthreads();  // the digits written; the previous key's layout read
    if (tid == 0 && ok) decode_case_layout<D, LAYOUT>(tab, c, &soc, cand, cinfo);
    __syncthreads();
    const double *__restrict__ V =
        tab.values + static_cast<size_t>(ok ? table : 0) * static_cast<size_t>(tab.n_rows);
    double *__restrict__ o = out + static_cast<size_t>(i) * nq2;
    for (int x = tid; x < static_cast<int>(nq2); x += static_cast<int>(blockDim.x)) {
      const int sm = x / nq, tt = x - sm * nq;
      o[x] = ok ? case_matrix_entry<D, LAYOUT>(tab, V, c, sm, tt, nq, &soc, dig, cand, cinfo,
                                               lookup_bits)
                : __longlong_as_double(0x7FF8000000000000ll);
    }
  }
}

// The kernel hipkern_list1_evaluate_tiled runs for `tl`: the tensor-core
// kernels where the caller allows them (arithmetic AUTO: per-key staged;
// TENSOR_SOURCES: source-staged) and the device and build have them, else
// the FMA kernel. Chosen once per call: the entry point checks its shared
// memory, launch_tiled launches it.
enum class TiledKernel { kFma, kMmaKeyed, kMmaSources };
TiledKernel tiled_kernel(const hipkern_list1_tiles &tl) {
#if defined(HIPKERN_L1_NVCC)  // the tensor-core kernels exist on NVIDIA alone
  if (tl.arithmetic != HIPKERN_LIST1_TILED_FMA && mma_available())
    return tl.arithmetic == HIPKERN_LIST1_TILED_TENSOR_SOURCES ? TiledKernel::kMmaSources
                                                               : TiledKernel::kMmaKeyed;
#else
  (void)tl;
#endif
  return TiledKernel::kFma;
}

// Dynamic shared memory of kernel `which` for q^dim = nq, b boxes per
// tile and `rows` = tiles.max_tile_sources.
size_t tiled_shared_bytes(TiledKernel which, int dim, int layout, int nq, int b, int q, int rows) {
#if defined(HIPKERN_L1_NVCC)
  if (which == TiledKernel::kMmaKeyed) return mma_keyed_shared(nq, b);
  if (which == TiledKernel::kMmaSources)
    return mma_sources_shared(nq, b, rows, layout == HIPKERN_LIST1_ORBIT ? dim * q * q : 0);
#else
  (void)which;
  (void)dim;
  (void)layout;
  (void)q;
  (void)rows;
#endif
  return tiled_shared(nq, b);
}

// The largest dynamic shared memory one block may take on this device.
int shared_limit() {
  int dev = 0, lim = 0;
  if (hipGetDevice(&dev) != hipSuccess) return 48 * 1024;
#if defined(HIPKERN_L1_NVCC)
  if (hipDeviceGetAttribute(&lim, hipDeviceAttributeSharedMemPerBlockOptin, dev) != hipSuccess)
    lim = 48 * 1024;
#else
  if (hipDeviceGetAttribute(&lim, hipDeviceAttributeMaxSharedMemoryPerBlock, dev) != hipSuccess)
    lim = 48 * 1024;
#endif
  (void)hipGetLastError();
  return lim > 0 ? lim : 48 * 1024;
}

// Lets `kernel` take `bytes` of dynamic shared memory (over 48 KB on NVIDIA).
int32_t allow_shared(const void *kernel, size_t bytes) {
#if defined(HIPKERN_L1_NVCC)
  if (bytes > 48 * 1024)
    return static_cast<int32_t>(hipFuncSetAttribute(
        kernel, hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
#else
  (void)kernel;
  (void)bytes;
#endif
  return 0;
}

// ---- Lanes per target box of the packed per-target kernels ----
//
// list1_orbit_kernel, list1_fallback_resolved_kernel, list1_group_sums:
// box_lanes(nq) = nq when it divides kLaneGroup (boxes then share a lane
// group evenly), else nq rounded up to whole lane groups, at most the
// batch; list1_kernel's FALLBACK path rounds up to whole lane groups
// always. Groups of lanes are a split of the work, not a correctness
// matter (no cross-lane operation: header); the rounding keeps a box from
// straddling a lane group, so that boxes sharing a warp (which diverge:
// different pair lists) share it whole. kLaneGroup (32), not the device's
// width, on every device: on wave64 rounding to 64 would idle more lanes
// (nq = 27: 37 of 64 instead of 5 of 32) to spare two 32-lane boxes one
// shared wavefront. The checks below state what the geometry gives at
// warp 32 and at wavefront 64.
constexpr int round_up_to_lane_groups(int n) {
  return (n + kLaneGroup - 1) / kLaneGroup * kLaneGroup;
}
constexpr int box_lanes(int nq) {
  return kLaneGroup % nq == 0 ? nq : round_up_to_lane_groups(nq);
}
constexpr int packed_box_lanes(int nq, int batch) {
  return batch < box_lanes(nq) ? batch : box_lanes(nq);
}
constexpr int rounded_box_lanes(int nq, int batch) {
  return batch < round_up_to_lane_groups(nq) ? batch : round_up_to_lane_groups(nq);
}
// Boxes per block of about `tpb` threads (at least one).
constexpr int boxes_per_block(int tpb, int lanes) { return tpb / lanes > 1 ? tpb / lanes : 1; }
// The packed geometry's boxes relative to warps of `width` lanes
// (lane_groups_align: none split between two warps it shares).
constexpr bool packed_boxes_align(int lanes, int tpb, int width) {
  return lane_groups_align(lanes, boxes_per_block(tpb, lanes) * lanes, width);
}

// Host-side checks of that arithmetic (nq = q^d of 2D and 3D tables).
static_assert(box_lanes(1) == 1 && box_lanes(4) == 4 && box_lanes(8) == 8 &&
                  box_lanes(16) == 16 && box_lanes(9) == 32 && box_lanes(25) == 32 &&
                  box_lanes(27) == 32 && box_lanes(36) == 64 && box_lanes(64) == 64 &&
                  box_lanes(81) == 96 && box_lanes(125) == 128 && box_lanes(216) == 224,
              "box_lanes");
static_assert(packed_box_lanes(27, 7) == 7 && packed_box_lanes(27, 1024) == 32 &&
                  rounded_box_lanes(8, 1024) == 32 && rounded_box_lanes(64, 40) == 40,
              "packed_box_lanes, rounded_box_lanes");
static_assert(boxes_per_block(256, 32) == 8 && boxes_per_block(512, 27) == 18 &&
                  boxes_per_block(256, 224) == 1 && boxes_per_block(256, 352) == 1,
              "boxes_per_block");
// Warp 32 (NVIDIA, RDNA): no box is ever split between two warps it shares.
constexpr bool packed_align_32(int nq) {
  return packed_boxes_align(box_lanes(nq), 256, 32) && packed_boxes_align(box_lanes(nq), 512, 32) &&
         packed_boxes_align(rounded_box_lanes(nq, 1024), 256, 32);
}
static_assert(packed_align_32(1) && packed_align_32(4) && packed_align_32(8) &&
                  packed_align_32(9) && packed_align_32(16) && packed_align_32(27) &&
                  packed_align_32(64) && packed_align_32(81) && packed_align_32(125) &&
                  packed_align_32(216) && packed_align_32(343),
              "packed boxes at warp 32");
// Wavefront 64 (CDNA): the same for every nq up to 64 (lanes dividing 32,
// 32 itself: two boxes a wavefront, or 64) and for lanes a multiple of 64;
// lanes an odd multiple of 32 above 32 (96, 160, 224, ...: nq 65..96,
// 129..160, 193..224, ...) put the tail of one box and the head of the
// next in one wavefront: still correct (a work split), only some
// divergence there.
constexpr bool packed_align_64(int nq) {
  return packed_boxes_align(box_lanes(nq), 256, 64) && packed_boxes_align(box_lanes(nq), 512, 64) &&
         packed_boxes_align(rounded_box_lanes(nq, 1024), 256, 64);
}
static_assert(packed_align_64(1) && packed_align_64(4) && packed_align_64(8) &&
                  packed_align_64(9) && packed_align_64(16) && packed_align_64(27) &&
                  packed_align_64(64) && packed_align_64(125),
              "packed boxes at wavefront 64");
static_assert(packed_align_64(343), "352 lanes: one box a block at 256 and 512 threads");
static_assert(!packed_align_64(81) && !packed_align_64(144) && !packed_align_64(216),
              "96-, 160- and 224-lane boxes share a wavefront at wave64 (work split only)");

// The ORBIT fast path (q = Q ≤ 4, every table's compact rows in shared
// memory); false (nothing launched) when the rows do not fit.
template <int D, int Q>
bool launch_orbit_fast(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                       const double *f, double *out, int nq, int batch, hipStream_t s,
                       int32_t *rc) {
  const size_t shmem = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(tab.n_rows) * 8 +
                       sizeof(OrbitRaw) * static_cast<size_t>(tab.n_cases);
  if (tab.n_rows >= (int64_t{1} << 30) || shmem > static_cast<size_t>(shared_limit())) return false;
  // Lanes per box: box_lanes (nq when it divides a lane group, else whole
  // lane groups: different boxes' pair lists differ, and would diverge).
  const int lanes = packed_box_lanes(nq, batch);
  const int tpb = shmem > 64 * 1024 ? 512 : 256;
  const int boxes = boxes_per_block(tpb, lanes);
  int64_t blocks = (pr.n_targets + boxes - 1) / boxes;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  (void)hipGetLastError();  // a stale error must not be reported as ours
  const int32_t e = allow_shared(reinterpret_cast<const void *>(&list1_orbit_kernel<D, Q>), shmem);
  if (e != 0) {
    *rc = e;
    return true;
  }
  list1_orbit_kernel<D, Q><<<static_cast<unsigned>(blocks), static_cast<unsigned>(boxes * lanes),
                             shmem, s>>>(tab, pr, f, out, lanes, boxes);
  *rc = static_cast<int32_t>(hipGetLastError());
  return true;
}

// FALLBACK through the resolution table (n_resolve_orbits > 0).
template <int D, int NQ>
int32_t launch_fallback_resolved(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                                 const double *f, double *out, int nq, int batch, hipStream_t s) {
  const size_t g = static_cast<size_t>(tab.n_transforms);
  const size_t lim = static_cast<size_t>(shared_limit());
  const size_t qbytes = g * nq * 2;
  const size_t rbytes = static_cast<size_t>(tab.n_resolve_orbits) * nq * nq * 2;
  const size_t vbytes = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(tab.n_rows) * 8;
  size_t shmem = 2 * static_cast<size_t>(tab.n_cases) + g;
  int qmap_shared = 0, rows_shared = 0, vals_shared = 0;
  // Staged in order of reads per byte while they fit: the qpoint map (one
  // uniform read per entry), the resolution rows, the compact rows.
  if (shmem + qbytes <= lim) {
    shmem += qbytes;
    qmap_shared = 1;
  }
  if (shmem + rbytes <= lim) {
    shmem += rbytes;
    rows_shared = 1;
  }
  if (shmem + vbytes <= lim) {
    shmem += vbytes;
    vals_shared = 1;
  }
  shmem = (shmem + 7) / 8 * 8;
  const int lanes = packed_box_lanes(nq, batch);
  const int tpb = shmem > 64 * 1024 ? 512 : 256;
  const int boxes = boxes_per_block(tpb, lanes);
  int64_t blocks = (pr.n_targets + boxes - 1) / boxes;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  (void)hipGetLastError();  // a stale error must not be reported as ours
  const int32_t e =
      allow_shared(reinterpret_cast<const void *>(&list1_fallback_resolved_kernel<D, NQ>), shmem);
  if (e != 0) return e;
  list1_fallback_resolved_kernel<D, NQ>
      <<<static_cast<unsigned>(blocks), static_cast<unsigned>(lanes * boxes), shmem, s>>>(
          tab, pr, f, out, nq, lanes, boxes, vals_shared, rows_shared, qmap_shared);
  return static_cast<int32_t>(hipGetLastError());
}

template <int D>
int32_t launch_resolved_q(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                          const double *f, double *out, int nq, int batch, hipStream_t s) {
  constexpr int Q2 = D == 3 ? 8 : 4, Q3 = D == 3 ? 27 : 9, Q4 = D == 3 ? 64 : 16;
  switch (tab.q) {
    case 1: return launch_fallback_resolved<D, 1>(tab, pr, f, out, nq, batch, s);
    case 2: return launch_fallback_resolved<D, Q2>(tab, pr, f, out, nq, batch, s);
    case 3: return launch_fallback_resolved<D, Q3>(tab, pr, f, out, nq, batch, s);
    case 4: return launch_fallback_resolved<D, Q4>(tab, pr, f, out, nq, batch, s);
    default: return launch_fallback_resolved<D, 0>(tab, pr, f, out, nq, batch, s);
  }
}

// log2 of the fallback hash's size (its index is the top bits of a
// multiplicative hash).
uint32_t hash_bits(const hipkern_list1_table &tab) {
  uint32_t bits = 0;
  while ((1u << bits) < tab.lookup_size) ++bits;
  return bits;
}

template <int D, int LAYOUT>
int32_t launch(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr, const double *f,
               double *out, int nq, int batch, hipStream_t s) {
  size_t shmem = 0;
  int qmap_shared = 0, hash_shared = 0, vals_shared = 0;
  int lanes = batch, boxes = 1;
  uint32_t bits = 0;
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    int32_t rc = 0;
    bool done = false;
    switch (tab.q) {
      case 1: done = launch_orbit_fast<D, 1>(tab, pr, f, out, nq, batch, s, &rc); break;
      case 2: done = launch_orbit_fast<D, 2>(tab, pr, f, out, nq, batch, s, &rc); break;
      case 3: done = launch_orbit_fast<D, 3>(tab, pr, f, out, nq, batch, s, &rc); break;
      case 4: done = launch_orbit_fast<D, 4>(tab, pr, f, out, nq, batch, s, &rc); break;
      default: break;
    }
    if (done) return rc;
    shmem = sizeof(OrbitCase) * static_cast<size_t>(tab.n_cases);
  } else if (LAYOUT == HIPKERN_LIST1_FALLBACK) {
    if (tab.n_resolve_orbits > 0) return launch_resolved_q<D>(tab, pr, f, out, nq, batch, s);
    const size_t g = static_cast<size_t>(tab.n_transforms);
    const size_t rest = g * tab.n_cases + 2 * static_cast<size_t>(tab.n_cases) + g;
    const size_t qbytes = g * nq * 2;
    const size_t hbytes = static_cast<size_t>(tab.lookup_size) * 8;
    const size_t vbytes = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(tab.n_rows) * 8;
    const size_t lim = static_cast<size_t>(shared_limit());
    // Staged in order of benefit while they fit: the hash (probed per
    // entry), the qpoint map (read per candidate), the compact rows.
    shmem = rest;
    if (shmem + hbytes <= lim) {
      shmem += hbytes;
      hash_shared = 1;
    }
    if (shmem + qbytes <= lim) {
      shmem += qbytes;
      qmap_shared = 1;
    }
    if (shmem + vbytes + 8 <= lim) {
      shmem += vbytes;
      vals_shared = 1;
    }
    shmem = (shmem + 7) / 8 * 8;
    bits = hash_bits(tab);
    lanes = rounded_box_lanes(nq, batch);
    const int tpb = shmem > 64 * 1024 ? 512 : 256;
    boxes = boxes_per_block(tpb, lanes);
    (void)hipGetLastError();
    const int32_t e = allow_shared(reinterpret_cast<const void *>(&list1_kernel<D, LAYOUT>), shmem);
    if (e != 0) return e;
  }
  int64_t blocks = (pr.n_targets + boxes - 1) / boxes;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  (void)hipGetLastError();  // a stale error must not be reported as ours
  list1_kernel<D, LAYOUT><<<static_cast<unsigned>(blocks), static_cast<unsigned>(lanes * boxes),
                            shmem, s>>>(tab, pr, f, out, nq, nq, qmap_shared, bits, lanes, boxes,
                                        hash_shared, vals_shared);
  return static_cast<int32_t>(hipGetLastError());
}

bool pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The checks of a table shared by every entry point; *nq_out = q^dim.
int32_t check_table(const hipkern_list1_table &t, int64_t *nq_out) {
  if (t.dim != 2 && t.dim != 3) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (t.q < 1 || t.n_cases < 1 || t.n_cases > 256 || t.n_tables < 1 || t.n_rows < 1)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  // nq = q^dim and full entry ids n_cases·nq² must fit 32 bits.
  int64_t nq = 1;
  for (int k = 0; k < t.dim; ++k) {
    nq *= t.q;
    if (nq > 65536) return HIPKERN_ERROR_OVERFLOW;
  }
  if (static_cast<uint64_t>(t.n_cases) * static_cast<uint64_t>(nq * nq) > 0xFFFFFFFFull)
    return HIPKERN_ERROR_OVERFLOW;
  if (t.n_rows > INT64_MAX / t.n_tables) return HIPKERN_ERROR_OVERFLOW;
  if (t.layout == HIPKERN_LIST1_DENSE) {
    if (t.n_rows != static_cast<int64_t>(t.n_cases) * nq * nq) return HIPKERN_ERROR_INVALID_ARGUMENT;
  } else if (t.layout == HIPKERN_LIST1_ORBIT) {
    if (t.n_case_orbits < 1 || !t.case_orbit_ranks || !t.case_axis_perm || !t.case_axis_sign ||
        !t.case_axis_group || !t.case_value_offsets || !t.axis_sign_power)
      return HIPKERN_ERROR_INVALID_ARGUMENT;
  } else if (t.layout == HIPKERN_LIST1_FALLBACK) {
    const int max_g = t.dim == 3 ? HIPKERN_LIST1_MAX_TRANSFORMS : 8;
    if (t.n_transforms < 1 || t.n_transforms > max_g || !pow2(t.lookup_size) ||
        t.probe_count < 1 || t.probe_count > t.lookup_size || !t.transform_qpoint_map ||
        !t.transform_case_map || !t.transform_signs || !t.lookup_keys || !t.lookup_rows ||
        (t.n_sign_lookup > 0 && (!t.sign_lookup_ids || !t.sign_lookup_signs)))
      return HIPKERN_ERROR_INVALID_ARGUMENT;
    // Optional resolution table: rows are 15 bits, case orbits 8 bits.
    if (t.n_resolve_orbits < 0 || t.n_resolve_orbits > 256 ||
        (t.n_resolve_orbits > 0 && (!t.resolve_case_orbit || !t.resolve_case_transform ||
                                    !t.resolve_rows || t.n_rows > 0x8000)))
      return HIPKERN_ERROR_INVALID_ARGUMENT;
  } else {
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  }
  *nq_out = nq;
  return HIPKERN_SUCCESS;
}

// check_table and the pair counts: the checks the evaluate entry points
// share; *nq_out = q^dim.
int32_t check_table_and_pairs(const hipkern_list1_table &t, const hipkern_list1_pairs &p,
                              int64_t *nq_out) {
  if (p.n_targets < 0 || p.n_boxes < 0 || p.n_pairs < 0 || p.n_levels < 1 ||
      p.n_levels > HIPKERN_LIST1_MAX_LEVELS)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  int64_t nq = 0;
  const int32_t rc = check_table(t, &nq);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (p.n_targets > INT64_MAX / nq || p.n_boxes > INT64_MAX / nq) return HIPKERN_ERROR_OVERFLOW;
  *nq_out = nq;
  return HIPKERN_SUCCESS;
}

// The pointers an evaluation with targets reads or writes.
int32_t check_buffers(const hipkern_list1_table &t, const hipkern_list1_pairs &p,
                      const double *source_values, const double *out) {
  if (!out || !p.source_starts) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (p.n_pairs > 0 &&
      (!p.source_boxes || !p.pair_cases || !p.box_levels || !p.level_scale ||
       !p.level_displacement || !p.level_table || !source_values || !t.values ||
       !t.mode_normalizers || p.n_boxes == 0))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  return HIPKERN_SUCCESS;
}

// Both kernels of the case-grouped schedule for one chunk.
template <int D, int LAYOUT>
int32_t launch_grouped(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                       const hipkern_list1_groups &gr, const double *f, double *out, int nq,
                       hipStream_t s) {
  const uint32_t bits = LAYOUT == HIPKERN_LIST1_FALLBACK ? hash_bits(tab) : 0;
  (void)hipGetLastError();  // a stale error must not be reported as ours
  // No pairs: no products to write (and no table read).
  if (gr.n_tiles > 0 && gr.pair_end > gr.pair_begin) {
    const int groups = kGroupThreads / nq;
    const size_t shmem = group_products_shared(nq, groups);
    const int32_t e =
        allow_shared(reinterpret_cast<const void *>(&list1_group_products<D, LAYOUT>), shmem);
    if (e != 0) return e;
    const int64_t blocks = gr.n_tiles < kMaxBlocks ? gr.n_tiles : kMaxBlocks;
    list1_group_products<D, LAYOUT><<<static_cast<unsigned>(blocks),
                                      static_cast<unsigned>(groups * nq), shmem, s>>>(
        tab, pr, gr, f, nq, bits);
    const int32_t rc = static_cast<int32_t>(hipGetLastError());
    if (rc != 0) return rc;
  }
  // Lanes per box as the ORBIT fast path: nq when it divides a lane group,
  // else nq rounded up to whole lane groups (box_lanes).
  const int lanes = box_lanes(nq);
  const int boxes = boxes_per_block(kGroupThreads, lanes);
  const int64_t n = gr.target_end - gr.target_begin;
  int64_t blocks = (n + boxes - 1) / boxes;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  list1_group_sums<<<static_cast<unsigned>(blocks), static_cast<unsigned>(lanes * boxes), 0, s>>>(
      tab, pr, gr, f, out, nq, lanes, boxes);
  return static_cast<int32_t>(hipGetLastError());
}

// One block per tile of a tiled-schedule kernel (grid-stride past
// kMaxBlocks) with `shmem` bytes of dynamic shared memory.
template <typename Kernel>
int32_t launch_tiles(Kernel kernel, size_t shmem, int threads, const hipkern_list1_table &tab,
                     const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl, const double *f,
                     double *out, uint32_t bits, hipStream_t s) {
  (void)hipGetLastError();  // a stale error must not be reported as ours
  const int32_t e = allow_shared(reinterpret_cast<const void *>(kernel), shmem);
  if (e != 0) return e;
  const int64_t blocks = tl.n_tiles < kMaxBlocks ? tl.n_tiles : kMaxBlocks;
  kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), shmem, s>>>(
      tab, pr, tl, f, out, bits);
  return static_cast<int32_t>(hipGetLastError());
}

// The kernel `which` (tiled_kernel) at targets_per_tile = B (checked by the
// entry point: 32, 64 or 128).
template <int D, int LAYOUT, int NQ, int B>
int32_t launch_tiled_b(TiledKernel which, const hipkern_list1_table &tab,
                       const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl,
                       const double *f, double *out, hipStream_t s) {
  const uint32_t bits = LAYOUT == HIPKERN_LIST1_FALLBACK ? hash_bits(tab) : 0;
  const size_t shmem = tiled_shared_bytes(which, D, LAYOUT, NQ, B, tab.q, tl.max_tile_sources);
#if defined(HIPKERN_L1_NVCC)
  // NVIDIA only: WARPS and the thread counts are in 32-thread NVIDIA warps.
  if (which == TiledKernel::kMmaKeyed) {
    constexpr int WARPS = B / 32;
    constexpr int MSPLIT = mma_msplit(NQ, WARPS);
    return launch_tiles(&list1_tiled_mma_kernel<D, LAYOUT, NQ, WARPS, MSPLIT>, shmem,
                        32 * WARPS * MSPLIT, tab, pr, tl, f, out, bits, s);
  }
  if (which == TiledKernel::kMmaSources)
    return launch_tiles(&list1_tiled_mma_sources_kernel<D, LAYOUT, NQ, B>, shmem,
                        mma_threads(NQ, B), tab, pr, tl, f, out, bits, s);
#endif
  // Every platform: B / kLaneGroup boxes a thread, kLaneGroup threads a part.
  static_assert(B % kLaneGroup == 0, "targets_per_tile is whole lane groups");
  return launch_tiles(&list1_tiled_kernel<D, LAYOUT, NQ, B / kLaneGroup>, shmem,
                      kLaneGroup * tiled_parts(NQ), tab, pr, tl, f, out, bits, s);
}

template <int D, int LAYOUT, int NQ>
int32_t launch_tiled_nq(TiledKernel which, const hipkern_list1_table &tab,
                        const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl,
                        const double *f, double *out, hipStream_t s) {
  switch (tl.targets_per_tile) {
    case 32: return launch_tiled_b<D, LAYOUT, NQ, 32>(which, tab, pr, tl, f, out, s);
    case 64: return launch_tiled_b<D, LAYOUT, NQ, 64>(which, tab, pr, tl, f, out, s);
    default: return launch_tiled_b<D, LAYOUT, NQ, 128>(which, tab, pr, tl, f, out, s);
  }
}

// q^D ≤ 64: 2D q ≤ 8, 3D q ≤ 4 (checked by the entry point).
template <int D, int LAYOUT>
int32_t launch_tiled(TiledKernel which, const hipkern_list1_table &tab,
                     const hipkern_list1_pairs &pr, const hipkern_list1_tiles &tl, const double *f,
                     double *out, hipStream_t s) {
  if constexpr (D == 3) {
    switch (tab.q) {
      case 1: return launch_tiled_nq<D, LAYOUT, 1>(which, tab, pr, tl, f, out, s);
      case 2: return launch_tiled_nq<D, LAYOUT, 8>(which, tab, pr, tl, f, out, s);
      case 3: return launch_tiled_nq<D, LAYOUT, 27>(which, tab, pr, tl, f, out, s);
      default: return launch_tiled_nq<D, LAYOUT, 64>(which, tab, pr, tl, f, out, s);
    }
  } else {
    switch (tab.q) {
      case 1: return launch_tiled_nq<D, LAYOUT, 1>(which, tab, pr, tl, f, out, s);
      case 2: return launch_tiled_nq<D, LAYOUT, 4>(which, tab, pr, tl, f, out, s);
      case 3: return launch_tiled_nq<D, LAYOUT, 9>(which, tab, pr, tl, f, out, s);
      case 4: return launch_tiled_nq<D, LAYOUT, 16>(which, tab, pr, tl, f, out, s);
      case 5: return launch_tiled_nq<D, LAYOUT, 25>(which, tab, pr, tl, f, out, s);
      case 6: return launch_tiled_nq<D, LAYOUT, 36>(which, tab, pr, tl, f, out, s);
      case 7: return launch_tiled_nq<D, LAYOUT, 49>(which, tab, pr, tl, f, out, s);
      default: return launch_tiled_nq<D, LAYOUT, 64>(which, tab, pr, tl, f, out, s);
    }
  }
}

template <int D, int LAYOUT>
int32_t launch_expand(const hipkern_list1_table &tab, const uint32_t *keys, int64_t n_keys,
                      double *out, int nq, hipStream_t s) {
  const uint32_t bits = LAYOUT == HIPKERN_LIST1_FALLBACK ? hash_bits(tab) : 0;
  const int64_t blocks = n_keys < kMaxBlocks ? n_keys : kMaxBlocks;
  (void)hipGetLastError();  // a stale error must not be reported as ours
  list1_expand_keys_kernel<D, LAYOUT>
      <<<static_cast<unsigned>(blocks), 256, 0, s>>>(tab, keys, n_keys, out, nq, bits);
  return static_cast<int32_t>(hipGetLastError());
}

}  // namespace

extern "C" {

int32_t hipkern_list1_evaluate(const hipkern_list1_table *table, const hipkern_list1_pairs *pairs,
                               const double *source_values, double *out,
                               int32_t target_batch_size, void *stream) {
  if (!table || !pairs) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_list1_table &t = *table;
  const hipkern_list1_pairs &p = *pairs;
  if (target_batch_size < 1 || target_batch_size > HIPKERN_LIST1_MAX_BATCH)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  int64_t nq = 0;
  const int32_t rc = check_table_and_pairs(t, p, &nq);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (p.n_targets == 0) return HIPKERN_SUCCESS;
  const int32_t rb = check_buffers(t, p, source_values, out);
  if (rb != HIPKERN_SUCCESS) return rb;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const int n = static_cast<int>(nq);
  const int b = target_batch_size;
  if (t.dim == 2) {
    switch (t.layout) {
      case HIPKERN_LIST1_DENSE: return launch<2, HIPKERN_LIST1_DENSE>(t, p, source_values, out, n, b, s);
      case HIPKERN_LIST1_ORBIT: return launch<2, HIPKERN_LIST1_ORBIT>(t, p, source_values, out, n, b, s);
      default: return launch<2, HIPKERN_LIST1_FALLBACK>(t, p, source_values, out, n, b, s);
    }
  }
  switch (t.layout) {
    case HIPKERN_LIST1_DENSE: return launch<3, HIPKERN_LIST1_DENSE>(t, p, source_values, out, n, b, s);
    case HIPKERN_LIST1_ORBIT: return launch<3, HIPKERN_LIST1_ORBIT>(t, p, source_values, out, n, b, s);
    default: return launch<3, HIPKERN_LIST1_FALLBACK>(t, p, source_values, out, n, b, s);
  }
}

int32_t hipkern_list1_evaluate_grouped(const hipkern_list1_table *table,
                                       const hipkern_list1_pairs *pairs,
                                       const hipkern_list1_groups *groups,
                                       const double *source_values, double *out, void *stream) {
  if (!table || !pairs || !groups) return HIPKERN_ERROR_INVALID_ARGUMENT;
  // Before the checks that ask the device for its shared-memory limit
  // and tensor cores: the stream's device is the one asked.
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  const hipkern_list1_table &t = *table;
  const hipkern_list1_pairs &p = *pairs;
  const hipkern_list1_groups &g = *groups;
  int64_t nq = 0;
  const int32_t rc = check_table_and_pairs(t, p, &nq);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (nq > HIPKERN_LIST1_GROUPED_MAX_MODES) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (g.target_begin < 0 || g.target_begin > g.target_end || g.target_end > p.n_targets ||
      g.pair_begin < 0 || g.pair_begin > g.pair_end || g.pair_end > p.n_pairs ||
      g.pair_end > HIPKERN_LIST1_GROUPED_MAX_PAIRS || g.n_tiles < 0 ||
      g.pair_end - g.pair_begin > INT64_MAX / nq)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  // The products kernel's shared memory (49,984 bytes at q^dim = 64) must
  // fit the device's limit per block.
  if (group_products_shared(static_cast<int>(nq), kGroupThreads / static_cast<int>(nq)) >
      static_cast<size_t>(shared_limit()))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (g.n_tiles > 0 && (!g.tile_offsets || !g.tile_keys || !g.tile_pairs || !g.pair_values))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (g.pair_end > g.pair_begin && g.n_tiles == 0) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (g.target_end == g.target_begin) return HIPKERN_SUCCESS;
  const int32_t rb = check_buffers(t, p, source_values, out);
  if (rb != HIPKERN_SUCCESS) return rb;
  hipStream_t s = static_cast<hipStream_t>(stream);
  const int n = static_cast<int>(nq);
  if (t.dim == 2) {
    switch (t.layout) {
      case HIPKERN_LIST1_DENSE: return launch_grouped<2, HIPKERN_LIST1_DENSE>(t, p, g, source_values, out, n, s);
      case HIPKERN_LIST1_ORBIT: return launch_grouped<2, HIPKERN_LIST1_ORBIT>(t, p, g, source_values, out, n, s);
      default: return launch_grouped<2, HIPKERN_LIST1_FALLBACK>(t, p, g, source_values, out, n, s);
    }
  }
  switch (t.layout) {
    case HIPKERN_LIST1_DENSE: return launch_grouped<3, HIPKERN_LIST1_DENSE>(t, p, g, source_values, out, n, s);
    case HIPKERN_LIST1_ORBIT: return launch_grouped<3, HIPKERN_LIST1_ORBIT>(t, p, g, source_values, out, n, s);
    default: return launch_grouped<3, HIPKERN_LIST1_FALLBACK>(t, p, g, source_values, out, n, s);
  }
}

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
  const int b = g.targets_per_tile;
  if ((b != 32 && b != 64 && b != 128) || g.n_tiles < 0 || g.n_tiles > INT64_MAX / b ||
      (g.arithmetic != HIPKERN_LIST1_TILED_AUTO && g.arithmetic != HIPKERN_LIST1_TILED_FMA &&
       g.arithmetic != HIPKERN_LIST1_TILED_TENSOR_SOURCES))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  // The source fields belong to the source-staged arithmetic alone: the
  // others ignore them (their plans are not cut at a source bound, so a
  // tile may have more than HIPKERN_LIST1_TILED_MAX_SOURCES sources).
  // Checked by arithmetic, not by the kernel a device runs, so a call is
  // refused or taken alike everywhere.
  const bool staged = g.arithmetic == HIPKERN_LIST1_TILED_TENSOR_SOURCES;
  if (staged && (g.max_tile_sources < 0 || g.max_tile_sources > HIPKERN_LIST1_TILED_MAX_SOURCES))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  const bool key_matrices = staged && g.key_matrices != nullptr;
  if (key_matrices && (!g.key_matrix_index || g.n_key_matrices < 1 ||
                       g.n_key_matrices > int64_t{0xFFFFFFFF} ||
                       g.n_key_matrices > INT64_MAX / (nq * nq)))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  const TiledKernel which = tiled_kernel(g);
  // The source-staged kernel reads key matrices as DENSE reads its rows;
  // the others (no tensor cores here) reconstruct from the layout.
  const int layout =
      key_matrices && which == TiledKernel::kMmaSources ? HIPKERN_LIST1_DENSE : t.layout;
  const size_t shmem =
      tiled_shared_bytes(which, t.dim, layout, static_cast<int>(nq), b, t.q, g.max_tile_sources);
  if (shmem > static_cast<size_t>(shared_limit())) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (g.n_tiles == 0) return HIPKERN_SUCCESS;
  if (!g.tile_key_offsets || !g.keys || !g.tile_targets || !g.key_pairs ||
      (staged && (!g.tile_source_offsets || !g.tile_sources || !g.key_source_slots)))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  const int32_t rb = check_buffers(t, p, source_values, out);
  if (rb != HIPKERN_SUCCESS) return rb;
  hipStream_t s = static_cast<hipStream_t>(stream);
  if (t.dim == 2) {
    switch (layout) {
      case HIPKERN_LIST1_DENSE: return launch_tiled<2, HIPKERN_LIST1_DENSE>(which, t, p, g, source_values, out, s);
      case HIPKERN_LIST1_ORBIT: return launch_tiled<2, HIPKERN_LIST1_ORBIT>(which, t, p, g, source_values, out, s);
      default: return launch_tiled<2, HIPKERN_LIST1_FALLBACK>(which, t, p, g, source_values, out, s);
    }
  }
  switch (layout) {
    case HIPKERN_LIST1_DENSE: return launch_tiled<3, HIPKERN_LIST1_DENSE>(which, t, p, g, source_values, out, s);
    case HIPKERN_LIST1_ORBIT: return launch_tiled<3, HIPKERN_LIST1_ORBIT>(which, t, p, g, source_values, out, s);
    default: return launch_tiled<3, HIPKERN_LIST1_FALLBACK>(which, t, p, g, source_values, out, s);
  }
}

int32_t hipkern_list1_expand_keys(const hipkern_list1_table *table, const uint32_t *keys,
                                  int64_t n_keys, double *key_matrices, void *stream) {
  if (!table) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_list1_table &t = *table;
  int64_t nq = 0;
  const int32_t rc = check_table(t, &nq);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (nq > HIPKERN_LIST1_TILED_MAX_MODES || n_keys < 0) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_keys > INT64_MAX / (nq * nq)) return HIPKERN_ERROR_OVERFLOW;
  if (n_keys == 0) return HIPKERN_SUCCESS;
  if (!keys || !key_matrices || !t.values) return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const int n = static_cast<int>(nq);
  if (t.dim == 2) {
    switch (t.layout) {
      case HIPKERN_LIST1_DENSE: return launch_expand<2, HIPKERN_LIST1_DENSE>(t, keys, n_keys, key_matrices, n, s);
      case HIPKERN_LIST1_ORBIT: return launch_expand<2, HIPKERN_LIST1_ORBIT>(t, keys, n_keys, key_matrices, n, s);
      default: return launch_expand<2, HIPKERN_LIST1_FALLBACK>(t, keys, n_keys, key_matrices, n, s);
    }
  }
  switch (t.layout) {
    case HIPKERN_LIST1_DENSE: return launch_expand<3, HIPKERN_LIST1_DENSE>(t, keys, n_keys, key_matrices, n, s);
    case HIPKERN_LIST1_ORBIT: return launch_expand<3, HIPKERN_LIST1_ORBIT>(t, keys, n_keys, key_matrices, n, s);
    default: return launch_expand<3, HIPKERN_LIST1_FALLBACK>(t, keys, n_keys, key_matrices, n, s);
  }
}

int32_t hipkern_list1_tiled_tensor_cores(int32_t *available) {
  if (!available) return HIPKERN_ERROR_INVALID_ARGUMENT;
#if defined(HIPKERN_L1_NVCC)
  *available = mma_available() ? 1 : 0;
#else
  *available = 0;
#endif
  return HIPKERN_SUCCESS;
}

}  // extern "C"
