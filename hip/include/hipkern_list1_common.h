// hipkern_list1_common.h — what the List 1 translation units share. Internal:
// compiled into them, never installed (CMake installs hipkern.h alone).
//
// The List 1 (near-field) evaluator (docs/design/list1.md): for every target box, the
// sum over its List 1 source boxes of the table entries times the source
// values, scaled per source level, in one of three table layouts. One
// translation unit per entry point, each with its kernels and their launch:
//
//   list1_per_target.hip  hipkern_list1_evaluate (per-target schedule)
//   list1_grouped.hip     hipkern_list1_evaluate_grouped (case-grouped)
//   list1_tiled.hip       hipkern_list1_evaluate_tiled, hipkern_list1_tile_targets,
//                         hipkern_list1_tiled_tensor_cores (target-tiled, FMAs or
//                         NVIDIA's FP64 tensor cores, over dense case matrices; its
//                         staging machinery: hipkern_list1_tiled.h)
//   list1_keys.hip        hipkern_list1_expand_keys
//   list1_plan.hip        hipkern_list1_classify_pairs, hipkern_list1_group_pairs
//                         (a plan built on the device)
//
// This header holds what several of them use: common constants, the ORBIT
// descriptor decode, one table entry as each layout reconstructs it (DENSE,
// ORBIT, FALLBACK: case_matrix_entry), the lane geometry of the packed
// kernels, and the host side: the table and pair checks, the device's
// shared-memory limit and whether it runs the tensor-core kernels.
// Everything is in an anonymous namespace: each translation unit has its
// own copy (internal linkage), and the host functions are inline, so a unit
// that does not call one has nothing to warn about.
//
// Bit-identical to the CPU evaluator (src/nearfield/list1/cpu.rs) over the same
// entry values: every float64 step is one correctly rounded operation in
// the CPU's order, never contracted into a fused multiply-add — under nvcc
// through __dadd_rn/__dmul_rn (never merged into an FMA), under clang HIP
// (AMD) with `#pragma clang fp contract(off)` and plain operators (as
// psf_sink.hip). The sign of an entry is applied by negation (exact; on
// the ORBIT fast path a pair whose entries all share g_c's sign negates
// f_s instead: (−f)·v = f·(−v) = −(f·v), IEEE rounding being symmetric); an
// entry that is zero by symmetry adds nothing (the CPU adds ±0, which
// leaves a sum started at +0 unchanged).

#ifndef HIPKERN_LIST1_COMMON_H
#define HIPKERN_LIST1_COMMON_H

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

// The digits of mode m (axis 0 slowest).
template <int D>
__device__ __forceinline__ void digits(int m, int q, int *d) {
  for (int k = D - 1; k >= 0; --k) {
    d[k] = m % q;
    m /= q;
  }
  for (int k = D; k < 3; ++k) d[k] = 0;
}

// ---- One table entry T(c, s, t) as each layout reconstructs it ----
//
// (The case-grouped products and the key expansion build whole case
// matrices from these — the tiled kernels read the key expansion's; the
// per-target kernels have their own hoisted forms of the same steps.)

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
// ([[maybe_unused]]: list1_per_target.hip includes it without calling it.)
[[maybe_unused]] __device__ double group_fallback_entry(const hipkern_list1_table &tab,
                                                        const uint8_t *cl, int nc, int cmin, int c,
                                                        int s, int t, int nq, uint32_t lookup_bits,
                                                        const double *__restrict__ V) {
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
         packed_boxes_align(rounded_box_lanes(nq, kLaneGroup), 256, 32);
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
         packed_boxes_align(rounded_box_lanes(nq, kLaneGroup), 256, 64);
}
static_assert(packed_align_64(1) && packed_align_64(4) && packed_align_64(8) &&
                  packed_align_64(9) && packed_align_64(16) && packed_align_64(27) &&
                  packed_align_64(64) && packed_align_64(125),
              "packed boxes at wavefront 64");
static_assert(packed_align_64(343), "352 lanes: one box a block at 256 and 512 threads");
static_assert(!packed_align_64(81) && !packed_align_64(144) && !packed_align_64(216),
              "96-, 160- and 224-lane boxes share a wavefront at wave64 (work split only)");

// ---- Host side shared by the entry points ----

// log2 of the fallback hash's size (its index is the top bits of a
// multiplicative hash).
inline uint32_t hash_bits(const hipkern_list1_table &tab) {
  uint32_t bits = 0;
  while ((1u << bits) < tab.lookup_size) ++bits;
  return bits;
}

// The largest dynamic shared memory one block may take on this device.
inline int shared_limit() {
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
inline int32_t allow_shared(const void *kernel, size_t bytes) {
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

#if defined(HIPKERN_L1_NVCC)  // the tensor-core kernels exist on NVIDIA alone
// Whether every architecture this unit is built for has the FP64 mma
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

// Whether this device and build run the tensor-core kernels
// (list1_tiled_kernel, list1_staged_kernel).
inline bool mma_available() {
  if (!mma_built()) return false;
  int dev = 0, major = 0;
  if (hipGetDevice(&dev) != hipSuccess ||
      hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, dev) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  return major >= 8;
}
#endif  // HIPKERN_L1_NVCC

inline bool pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The checks of a table shared by every entry point; *nq_out = q^dim.
inline int32_t check_table(const hipkern_list1_table &t, int64_t *nq_out) {
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
inline int32_t check_table_and_pairs(const hipkern_list1_table &t,
                                     const hipkern_list1_pairs &p, int64_t *nq_out) {
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
inline int32_t check_buffers(const hipkern_list1_table &t, const hipkern_list1_pairs &p,
                             const double *source_values, const double *out) {
  if (!out || !p.source_starts) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (p.n_pairs > 0 &&
      (!p.source_boxes || !p.pair_cases || !p.box_levels || !p.level_scale ||
       !p.level_displacement || !p.level_table || !source_values || !t.values ||
       !t.mode_normalizers || p.n_boxes == 0))
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  return HIPKERN_SUCCESS;
}

}  // namespace

#endif  // HIPKERN_LIST1_COMMON_H
