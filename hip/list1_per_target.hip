// hipkern_list1_evaluate, the per-target schedule of the List 1 evaluator
// (hipkern_list1_common.h: the other schedules, what they share, and the
// bit-identity with the CPU evaluator).
//
// hipkern_list1_evaluate launches one kernel: list1_orbit_kernel<D, Q> for
// ORBIT at q = Q ≤ 4 when every table's compact rows fit in shared memory,
// else list1_kernel<D, LAYOUT>:
//
//   Grid: target boxes on the grid's x axis. DENSE and the generic ORBIT
//     path: block i takes boxes i, i + gridDim.x, ...; block:
//     kTargetBatch threads (lanes). The ORBIT fast path and FALLBACK
//     pack `boxes` groups of `lanes` threads into one block (group g of
//     block i takes boxes i·boxes + g, + gridDim.x·boxes, ...), so the
//     shared-memory staging below is paid once per several boxes: lanes =
//     min(kTargetBatch, w) with w = nq where nq divides kLaneGroup
//     (32), else nq rounded up to whole lane groups (lanes past nq have no
//     target; a box never straddles a lane group; box_lanes in
//     hipkern_list1_common.h, with its checks at warp 32 and 64). The
//     target-point loop has the launch-known bound n_q_points (= q^d) and
//     lane guard `t < n_box_targets`: lane l takes the box's target points
//     t = l, l + lanes, ... Each lane computes its targets' sums alone, in
//     registers, in the CPU evaluator's order (below), so the lanes
//     change which thread computes a value, never the value.
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
#include "hipkern_list1_common.h"

namespace {

// The source digit counter: the next mode's digits (axis 0 slowest).
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
// t = l, l + lanes, ... (lanes = packed_box_lanes: min(kTargetBatch, nq rounded
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

// Lanes per target box (the batch of the kernels above): 32, the fastest measured —
// faster than one lane in every configuration of benches/RESULTS.md
// "list1 — 2026-12-03" (H200), 1.4× (2D q = 4 fallback) to 29× (3D q = 4
// dense 71.5 against 2.43 ms; 3D q = 3 uniform dense 11.56 against 0.452).
// One kLaneGroup: no box straddles two lane groups.
constexpr int kTargetBatch = 32;
static_assert(kTargetBatch == kLaneGroup, "a box's lanes are one lane group");

// The ORBIT fast path (q = Q ≤ 4, every table's compact rows in shared
// memory); false (nothing launched) when the rows do not fit.
template <int D, int Q>
bool launch_orbit_fast(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr,
                       const double *f, double *out, int nq, hipStream_t s, int32_t *rc) {
  const size_t shmem = static_cast<size_t>(tab.n_tables) * static_cast<size_t>(tab.n_rows) * 8 +
                       sizeof(OrbitRaw) * static_cast<size_t>(tab.n_cases);
  if (tab.n_rows >= (int64_t{1} << 30) || shmem > static_cast<size_t>(shared_limit())) return false;
  // Lanes per box: box_lanes (nq when it divides a lane group, else whole
  // lane groups: different boxes' pair lists differ, and would diverge).
  const int lanes = packed_box_lanes(nq, kTargetBatch);
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
                                 const double *f, double *out, int nq, hipStream_t s) {
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
  const int lanes = packed_box_lanes(nq, kTargetBatch);
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
                          const double *f, double *out, int nq, hipStream_t s) {
  constexpr int Q2 = D == 3 ? 8 : 4, Q3 = D == 3 ? 27 : 9, Q4 = D == 3 ? 64 : 16;
  switch (tab.q) {
    case 1: return launch_fallback_resolved<D, 1>(tab, pr, f, out, nq, s);
    case 2: return launch_fallback_resolved<D, Q2>(tab, pr, f, out, nq, s);
    case 3: return launch_fallback_resolved<D, Q3>(tab, pr, f, out, nq, s);
    case 4: return launch_fallback_resolved<D, Q4>(tab, pr, f, out, nq, s);
    default: return launch_fallback_resolved<D, 0>(tab, pr, f, out, nq, s);
  }
}

template <int D, int LAYOUT>
int32_t launch(const hipkern_list1_table &tab, const hipkern_list1_pairs &pr, const double *f,
               double *out, int nq, hipStream_t s) {
  size_t shmem = 0;
  int qmap_shared = 0, hash_shared = 0, vals_shared = 0;
  int lanes = kTargetBatch, boxes = 1;
  uint32_t bits = 0;
  if (LAYOUT == HIPKERN_LIST1_ORBIT) {
    int32_t rc = 0;
    bool done = false;
    switch (tab.q) {
      case 1: done = launch_orbit_fast<D, 1>(tab, pr, f, out, nq, s, &rc); break;
      case 2: done = launch_orbit_fast<D, 2>(tab, pr, f, out, nq, s, &rc); break;
      case 3: done = launch_orbit_fast<D, 3>(tab, pr, f, out, nq, s, &rc); break;
      case 4: done = launch_orbit_fast<D, 4>(tab, pr, f, out, nq, s, &rc); break;
      default: break;
    }
    if (done) return rc;
    shmem = sizeof(OrbitCase) * static_cast<size_t>(tab.n_cases);
  } else if (LAYOUT == HIPKERN_LIST1_FALLBACK) {
    if (tab.n_resolve_orbits > 0) return launch_resolved_q<D>(tab, pr, f, out, nq, s);
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
    lanes = rounded_box_lanes(nq, kTargetBatch);
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


}  // namespace

extern "C" {

int32_t hipkern_list1_evaluate(const hipkern_list1_table *table, const hipkern_list1_pairs *pairs,
                               const double *source_values, double *out, void *stream) {
  if (!table || !pairs) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_list1_table &t = *table;
  const hipkern_list1_pairs &p = *pairs;
  int64_t nq = 0;
  const int32_t rc = check_table_and_pairs(t, p, &nq);
  if (rc != HIPKERN_SUCCESS) return rc;
  if (p.n_targets == 0) return HIPKERN_SUCCESS;
  const int32_t rb = check_buffers(t, p, source_values, out);
  if (rb != HIPKERN_SUCCESS) return rb;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const int n = static_cast<int>(nq);
  if (t.dim == 2) {
    switch (t.layout) {
      case HIPKERN_LIST1_DENSE: return launch<2, HIPKERN_LIST1_DENSE>(t, p, source_values, out, n, s);
      case HIPKERN_LIST1_ORBIT: return launch<2, HIPKERN_LIST1_ORBIT>(t, p, source_values, out, n, s);
      default: return launch<2, HIPKERN_LIST1_FALLBACK>(t, p, source_values, out, n, s);
    }
  }
  switch (t.layout) {
    case HIPKERN_LIST1_DENSE: return launch<3, HIPKERN_LIST1_DENSE>(t, p, source_values, out, n, s);
    case HIPKERN_LIST1_ORBIT: return launch<3, HIPKERN_LIST1_ORBIT>(t, p, source_values, out, n, s);
    default: return launch<3, HIPKERN_LIST1_FALLBACK>(t, p, source_values, out, n, s);
  }
}

}  // extern "C"
