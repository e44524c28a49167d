// hipkern_list1_expand_keys: the case matrices of a list of keys (table ·
// n_cases + case), each entry as the layout reconstructs it
// (case_matrix_entry, hipkern_list1_common.h), for the tiled schedule's
// key matrices.
#include "hipkern_list1_common.h"

namespace {

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

}  // extern "C"
