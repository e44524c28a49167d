// The List 1 (near-field) evaluator (SPEC §6): for every target box, the
// sum over its List 1 source boxes of the table entries times the source
// values, scaled per source level, in one of three table layouts.
//
// hipkern_list1_evaluate launches one kernel, list1_kernel<D, LAYOUT>:
//
//   Grid: target boxes on the grid's x axis (block i takes boxes i,
//     i + gridDim.x, ...). Block: target_batch_size threads (lanes). The
//     target-point loop has the launch-known bound n_q_points (= q^d) and
//     lane guard `t < n_box_targets`: lane l takes the box's target points
//     t = l, l + batch, ... Each lane computes its targets' sums alone, in
//     registers, in the CPU evaluator's order (below), so the batch size
//     changes which thread computes a value, never the value.
//   Per (target t, pair j) the lane sums acc = Σ_s f[box_j, s]·T(case_j, s, t)
//     over the source modes in order, then u += scale·acc + disp (disp the
//     level's displacement times Σ_s f_s·N_s, only where it is nonzero:
//     2D Laplace). T per layout:
//   DENSE: T = values[table·n_rows + (case·nq + s)·nq + t], read straight
//     from global memory (consecutive lanes read consecutive t: coalesced).
//     No shared memory.
//   ORBIT: the block first decodes the per-case descriptors (perm, signs,
//     group labels, case_orbit_ranks, case_value_offsets, axis_sign_power)
//     into one OrbitCase per case in shared memory: segment base, the
//     derivative sign of g_c, per axis the node flip / flippable /
//     derivative flags, its position in its group and the mixed-radix
//     weight of its group, and which compare-exchanges of the network
//     apply. Per (t, pair) the lane carries its target digits through g_c;
//     per entry it carries the source digits, forms the per-axis codes
//     s_k·q + t_k, resolves zero-axis flips (derivative sign, zero by
//     symmetry), sorts equal-label axes with the network (0,2), (0,1),
//     (1,2), and adds the multiset ranks Σ C(x_i + i, i + 1) weighted:
//     row = base + rank, T = sign·values[table·n_rows + row] (orbit.rs
//     OrbitDescriptors::slot, step for step). No full-entry map, no hash,
//     no transform scan.
//   FALLBACK: the block stages transform_signs and, per case, its
//     candidate transforms in shared memory: the transforms g (in order)
//     whose image case case_map[g, c] is the smallest one — the case is
//     the leading digit of a full id, so only they can reach the smallest
//     id; the reduction over them gives exactly the reduction over all
//     transforms, ties included (a positive sign replaces a negative one,
//     else the earlier transform stays). transform_qpoint_map is staged
//     too when it fits (kFallbackSharedMax bytes with the rest; else read
//     from global memory). Per entry the lane scans its case's candidates
//     for the smallest full id, applies the sparse sign correction
//     (binary search of the entry's full id; skipped when there is none),
//     and finds the compact row by probing exactly probe_count slots of
//     the open-addressed hash, global memory (fallback.rs
//     FallbackDescriptors::slot). A representative missing from the hash
//     (impossible for validated descriptors) gives NaN, never a silent
//     value.
//
// Bit-identical to the CPU evaluator (src/nearfield/list1.rs) over the same
// entry values: every float64 step is one correctly rounded operation in
// the CPU's order, never contracted into a fused multiply-add — under nvcc
// through __dadd_rn/__dmul_rn (never merged into an FMA), under clang HIP
// (AMD) with `#pragma clang fp contract(off)` and plain operators (as
// psf_sink.hip). The sign of an entry is applied by negation (exact); an
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
// Shared memory the fallback's transform maps may take (else global).
constexpr size_t kFallbackSharedMax = 40 * 1024;
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
                             uint32_t lookup_bits) {
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
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    OrbitCase *s = reinterpret_cast<OrbitCase *>(smem);
    for (int c = threadIdx.x; c < tab.n_cases; c += blockDim.x) decode_orbit_case<D>(tab, c, s + c);
    ocs = s;
    __syncthreads();
  } else if (LAYOUT == HIPKERN_LIST1_FALLBACK) {
    // [qpoint map (if it fits)] [candidates n_cases × G] [count per case]
    // [smallest image case per case] [transform signs]
    unsigned char *p = smem;
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

  for (int64_t i = blockIdx.x; i < pr.n_targets; i += gridDim.x) {
    const uint32_t ja = pr.source_starts[i], jb = pr.source_starts[i + 1];
    for (int tb = 0; tb < n_q_points; tb += blockDim.x) {
      const int t = tb + static_cast<int>(threadIdx.x);
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
            int sign = oc.sign0;
            int code[3] = {0, 0, 0};
#pragma unroll
            for (int k = 0; k < D; ++k) {
              int x = pick(sd, oc.perm[k]);
              if (oc.flags[k] & kNodeFlip) x = q - 1 - x;
              int p = x * q + tp[k];
              if (oc.flags[k] & kFlippable) {
                const int fl = q2 - 1 - p;
                const bool der = (oc.flags[k] & kDerivative) != 0;
                if (der && fl == p) sign = 0;
                if (fl < p) {
                  p = fl;
                  if (der) sign = -sign;
                }
              }
              code[k] = p;
            }
            if (D == 3 && (oc.net & 1)) cswap(code[0], code[2]);
            if (oc.net & 2) cswap(code[0], code[1]);
            if (D == 3 && (oc.net & 4)) cswap(code[1], code[2]);
            uint32_t rank = 0;
#pragma unroll
            for (int k = 0; k < D; ++k)
              rank += oc.w[k] * rank_term(static_cast<uint32_t>(code[k]), oc.pos[k]);
            if (sign == 0) continue;  // zero by symmetry: adds nothing
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
            for (uint32_t p = 0; p < tab.probe_count; ++p) {
              const uint32_t k = (h + p) & mask;
              if (tab.lookup_keys[k] == best) row = tab.lookup_rows[k];
            }
            const double v = row == kNotFound ? __longlong_as_double(0x7FF8000000000000ll)
                                              : vals[toff + row];
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

template <int D, int LAYOUT>
int32_t launch(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr, const double *f,
               double *out, int nq, int batch, hipStream_t s) {
  size_t shmem = 0;
  int qmap_shared = 0;
  uint32_t bits = 0;
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    shmem = sizeof(OrbitCase) * static_cast<size_t>(tab.n_cases);
  } else if (LAYOUT == HIPKERN_LIST1_FALLBACK) {
    const size_t g = static_cast<size_t>(tab.n_transforms);
    const size_t rest = g * tab.n_cases + 2 * static_cast<size_t>(tab.n_cases) + g;
    const size_t qbytes = g * nq * 2;
    if (qbytes + rest <= kFallbackSharedMax) {
      shmem = qbytes + rest;
      qmap_shared = 1;
    } else {
      shmem = rest;
    }
    shmem = (shmem + 7) / 8 * 8;
    while ((1u << bits) < tab.lookup_size) ++bits;
  }
  const int64_t blocks = pr.n_targets < kMaxBlocks ? pr.n_targets : kMaxBlocks;
  (void)hipGetLastError();  // a stale error must not be reported as ours
  list1_kernel<D, LAYOUT><<<static_cast<unsigned>(blocks), static_cast<unsigned>(batch), shmem, s>>>(
      tab, pr, f, out, nq, nq, qmap_shared, bits);
  return static_cast<int32_t>(hipGetLastError());
}

bool pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

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
  if (t.dim != 2 && t.dim != 3) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (t.q < 1 || t.n_cases < 1 || t.n_cases > 256 || t.n_tables < 1 || t.n_rows < 1)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (p.n_targets < 0 || p.n_boxes < 0 || p.n_pairs < 0 || p.n_levels < 1 ||
      p.n_levels > HIPKERN_LIST1_MAX_LEVELS)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  // nq = q^dim and full entry ids n_cases·nq² must fit 32 bits.
  int64_t nq = 1;
  for (int k = 0; k < t.dim; ++k) {
    nq *= t.q;
    if (nq > 65536) return HIPKERN_ERROR_OVERFLOW;
  }
  if (static_cast<uint64_t>(t.n_cases) * static_cast<uint64_t>(nq * nq) > 0xFFFFFFFFull)
    return HIPKERN_ERROR_OVERFLOW;
  if (t.n_rows > INT64_MAX / t.n_tables || p.n_targets > INT64_MAX / nq ||
      p.n_boxes > INT64_MAX / nq)
    return HIPKERN_ERROR_OVERFLOW;
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
  } else {
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  }
  if (p.n_targets == 0) return HIPKERN_SUCCESS;
  if (!out || !p.source_starts) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (p.n_pairs > 0 &&
      (!p.source_boxes || !p.pair_cases || !p.box_levels || !p.level_scale ||
       !p.level_displacement || !p.level_table || !source_values || !t.values ||
       !t.mode_normalizers || p.n_boxes == 0))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
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

}  // extern "C"
