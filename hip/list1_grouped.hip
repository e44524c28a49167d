// hipkern_list1_evaluate_grouped, the case-grouped schedule of the List 1
// evaluator (hipkern_list1_common.h: the other schedules and what they
// share; its case_matrix_entry builds the case matrices here).
//
// hipkern_list1_evaluate_grouped launches two kernels per chunk: one case matrix per
// tile of same-case pairs built in shared memory, the per-pair sums into a
// scratch, then the per-target sums in list order.
//
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
#include "hipkern_list1_common.h"

namespace {

constexpr int kGroupPairsPerThread = 8;
constexpr int kGroupThreads = 256;

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

}  // namespace

extern "C" {

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

}  // extern "C"
