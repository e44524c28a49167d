/*
 * hipkern_force.h — force / virial assembly.
 *
 * A section of the C ABI: include hipkern.h, which includes this file
 * and states the contract every entry point here keeps (status codes,
 * streams and devices, who owns memory, versioning).
 */
#ifndef HIPKERN_FORCE_H
#define HIPKERN_FORCE_H

#ifndef HIPKERN_H
#error "include hipkern.h, not hipkern_force.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- force / virial assembly (docs/design/force.md) --------------------- */
/** Element type of device inputs. */
typedef enum hipkern_dtype { HIPKERN_DTYPE_F32 = 1, HIPKERN_DTYPE_F64 = 2 } hipkern_dtype;

/** Where the per-edge virial -g (x) edge_vec goes. */
typedef enum hipkern_virial_split {
  /** Half to each endpoint. */
  HIPKERN_VIRIAL_HALF = 0,
  /** All to the source atom. */
  HIPKERN_VIRIAL_SRC = 1
} hipkern_virial_split;

/** Element type of index arrays. */
typedef enum hipkern_index_type { HIPKERN_INDEX_I32 = 1, HIPKERN_INDEX_I64 = 2 } hipkern_index_type;

/** Where a plan build found bad indices: the first bad position, or -1. */
typedef struct hipkern_force_plan_report {
  int64_t first_bad_src;
  int64_t first_bad_dst;
  int64_t first_bad_mapping;
} hipkern_force_plan_report;

/** Scratch bytes hipkern_force_plan_build needs for n_edges edges and n_rows output rows. */
int32_t hipkern_force_plan_scratch_bytes(int64_t n_edges, int64_t n_rows, size_t *bytes);

/**
 * Builds the CSR plan on the device: a stable sort of the edges by key (a
 * radix sort; a key set already in order is taken as it is), keys dst and
 * src, or mapping[dst] and mapping[src] when `mapping` is not
 * NULL (extended -> local, n_ext entries of `mapping_type`; rows are then
 * n_local). src/dst: n_edges entries of `index_type`, in [0, n_ext).
 * Outputs: dst_order/src_order (n_edges edge ids), dst_row_ptr/src_row_ptr
 * (n_rows + 1 offsets), int32 device arrays. Edges in one row appear in
 * increasing id, so the plan is exactly the host one.
 *
 * Every index is checked on the device first. If one is out of range
 * (negative or >= n_ext; mapping target negative or >= n_local), nothing
 * is written to the outputs, *report holds the first bad position of each
 * array (-1 where none) and the call returns HIPKERN_ERROR_INVALID_INDEX.
 * The call synchronizes `stream` to learn that verdict, and again before
 * it returns: the outputs are complete and the scratch is free then.
 * scratch: device memory of at least hipkern_force_plan_scratch_bytes
 * (about 13 bytes per edge).
 */
int32_t hipkern_force_plan_build(hipkern_index_type index_type, const void *src, const void *dst,
                                 int64_t n_edges, int64_t n_ext, hipkern_index_type mapping_type,
                                 const void *mapping, int64_t n_local, int32_t *dst_order,
                                 int32_t *dst_row_ptr, int32_t *src_order, int32_t *src_row_ptr,
                                 void *scratch, size_t scratch_bytes,
                                 hipkern_force_plan_report *report, void *stream);

/**
 * F_k = sum_{dst(e)=k} g_e - sum_{src(e)=k} g_e and the per-atom virial
 * (row-major 3x3) over a CSR plan: force (n_rows x 3) and virial
 * (n_rows x 9) of `out_dtype`, fully overwritten. g and edge_vec are E x 3
 * of `dtype`. Sums are float64 in registers in a fixed order; with
 * out_dtype F32 the float64 result is rounded once, and accum_scratch
 * (n_rows x 12 doubles of device memory) holds the first pass's sums (it
 * may be NULL for F64 outputs). The plan (dst_order/src_order: E edge ids;
 * dst_row_ptr/src_row_ptr: n_rows + 1 offsets, 0 .. E, non-decreasing) must
 * be valid: hipkern_force_plan_build makes one, the safe API validates
 * host-made ones. Asynchronous on `stream`; no atomics; bitwise
 * reproducible. NaN/Inf in an edge's g or edge_vec reach only the rows of
 * its endpoints.
 */
int32_t hipkern_force_assemble(hipkern_dtype dtype, const void *g, const void *edge_vec,
                               int64_t n_edges, const int32_t *dst_order,
                               const int32_t *dst_row_ptr, const int32_t *src_order,
                               const int32_t *src_row_ptr, int32_t n_rows,
                               hipkern_virial_split split, hipkern_dtype out_dtype, void *force,
                               void *virial, double *accum_scratch, void *stream);

/**
 * The reference path: materialises -g (x) edge_vec into outer_scratch
 * (E x 9 of `dtype`), zeroes force/virial and scatters with atomics in the
 * input precision (outputs are `dtype`). src/dst must be in [0, n_rows).
 * Not deterministic (atomic order); for comparison and benchmarks.
 */
int32_t hipkern_force_assemble_atomic(hipkern_dtype dtype, const void *g, const void *edge_vec,
                                      const int32_t *src, const int32_t *dst, int64_t n_edges,
                                      int32_t n_rows, hipkern_virial_split split,
                                      void *outer_scratch, void *force, void *virial,
                                      void *stream);

/**
 * Per-frame totals of a per-atom virial (n_rows x 9 float64, as
 * hipkern_force_assemble writes it): frame k sums the rows
 * frame_rows[frame_row_ptr[k] .. frame_row_ptr[k+1]) (frame_rows NULL:
 * the rows frame_row_ptr[k] .. frame_row_ptr[k+1] themselves, i.e.
 * consecutive frames). frame_row_ptr has n_frames + 1 non-decreasing
 * entries in [0, n_rows] (the rows of frames given by a frame id per
 * atom: hipkern_force_plan_build with src = dst = the ids and n_ext =
 * n_frames gives frame_rows = dst_order and frame_row_ptr = dst_row_ptr).
 * Writes frame_virial (n_frames x 9) and, when not NULL, frame_voigt
 * (n_frames x 6 in LAMMPS' order xx, yy, zz, xy, xz, yz). float64, fixed
 * order, no atomics: bitwise reproducible. Asynchronous on `stream`.
 */
int32_t hipkern_force_frame_virial(const double *virial, int64_t n_rows,
                                   const int32_t *frame_rows, const int32_t *frame_row_ptr,
                                   int64_t n_frames, double *frame_virial, double *frame_voigt,
                                   void *stream);

#ifdef __cplusplus
}
#endif

#endif /* HIPKERN_FORCE_H */
