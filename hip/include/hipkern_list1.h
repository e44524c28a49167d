/*
 * hipkern_list1.h — the List 1 near-field evaluator and its plans on the device.
 *
 * A section of the C ABI: include hipkern.h, which includes this file
 * and states the contract every entry point here keeps (status codes,
 * streams and devices, who owns memory, versioning).
 */
#ifndef HIPKERN_LIST1_H
#define HIPKERN_LIST1_H

#ifndef HIPKERN_H
#error "include hipkern.h, not hipkern_list1.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- List 1 near-field evaluator (docs/design/list1.md) ------------------ */
/** Most transforms a descriptor fallback has (the 48 signed permutations of 3 axes). */
#define HIPKERN_LIST1_MAX_TRANSFORMS 48
/** Levels the per-level scaling arrays may cover (box levels 0..=31). */
#define HIPKERN_LIST1_MAX_LEVELS 32

/** How the table values are held on the device. */
typedef enum hipkern_list1_layout {
  /** Every entry: values[table * n_rows + (case * nq + s) * nq + t]. */
  HIPKERN_LIST1_DENSE = 0,
  /** Compact rows addressed by the arithmetic ORBIT descriptors. */
  HIPKERN_LIST1_ORBIT = 1,
  /** Compact rows addressed by the generated descriptor fallback. */
  HIPKERN_LIST1_FALLBACK = 2
} hipkern_list1_layout;

/**
 * One uploaded table (or one per source level) and its addressing, all
 * device pointers. nq = q^dim. Fields a layout does not use may be 0/NULL.
 *
 * values: n_tables x n_rows float64 (n_rows = n_cases * nq * nq for DENSE,
 *   the compact row count otherwise; rows of one table are contiguous).
 * mode_normalizers: nq float64 (the integral of each source mode), read
 *   only by pairs whose level displacement is nonzero (2D Laplace).
 * ORBIT (src/nearfield/symmetry/orbit.rs): case_orbit_ranks (n_cases),
 *   case_axis_perm, case_axis_sign, case_axis_group (n_cases x dim; group
 *   labels with 0x80 = flippable axis, 0x40 = derivative axis),
 *   case_value_offsets (n_case_orbits + 1), axis_sign_power (dim).
 * FALLBACK (src/nearfield/symmetry/fallback.rs): transform_qpoint_map
 *   (n_transforms x nq), transform_case_map (n_transforms x n_cases),
 *   transform_signs (n_transforms), the open-addressed representative
 *   lookup (lookup_size slots, a power of two, keys full ids with
 *   0xFFFFFFFF empty, rows the compact rows; a lookup probes at most
 *   probe_count slots, stopping at the match, of the Fibonacci hash
 *   (id * 0x9E3779B1) >> (32 - log2 lookup_size)), and the sparse sign
 *   corrections (n_sign_lookup full
 *   ids, ascending, with their signs). Optional, derived from those at plan
 *   time (n_resolve_orbits 0: none; fallback.rs FallbackResolution):
 *   resolve_case_orbit and resolve_case_transform (n_cases: the case orbit
 *   o of each case c and the first transform h taking c to its smallest
 *   image case), resolve_rows (n_resolve_orbits x nq x nq, u16: bit 15 the
 *   sign, bits 0..14 the row of the canonical case's entry), so that
 *   entry (c, s, t) has row/sign e = resolve_rows[(o * nq + qmap[h][s]) * nq
 *   + qmap[h][t]] times transform_signs[h], exactly the slot the transform
 *   scan and the hash give (checked on the host for every full entry).
 *   With it (n_resolve_orbits 1..256, n_rows <= 0x8000) the device reads
 *   the table instead of scanning the transforms and probing the hash.
 */
typedef struct hipkern_list1_table {
  hipkern_list1_layout layout;
  int32_t dim;
  int32_t q;
  int32_t n_cases;
  int32_t n_tables;
  int64_t n_rows;
  const double *values;
  const double *mode_normalizers;
  int32_t n_case_orbits;
  const uint16_t *case_orbit_ranks;
  const uint8_t *case_axis_perm;
  const int8_t *case_axis_sign;
  const uint8_t *case_axis_group;
  const uint32_t *case_value_offsets;
  const uint8_t *axis_sign_power;
  int32_t n_transforms;
  const uint16_t *transform_qpoint_map;
  const uint8_t *transform_case_map;
  const int8_t *transform_signs;
  uint32_t lookup_size;
  uint32_t probe_count;
  const uint32_t *lookup_keys;
  const uint32_t *lookup_rows;
  uint32_t n_sign_lookup;
  const uint32_t *sign_lookup_ids;
  const int8_t *sign_lookup_signs;
  int32_t n_resolve_orbits;
  const uint8_t *resolve_case_orbit;
  const uint8_t *resolve_case_transform;
  const uint16_t *resolve_rows;
} hipkern_list1_table;

/**
 * The (target box, source box) pairs of one evaluation, device pointers.
 * Target box i (output row i) has the pairs source_starts[i] ..
 * source_starts[i + 1] (n_targets + 1 offsets, 0 .. n_pairs, non-decreasing);
 * pair j reads source box source_boxes[j] (< n_boxes) through interaction
 * case pair_cases[j] (< n_cases); its source level is box_levels[box]
 * (< n_levels) and gives the factor level_scale[level], the displacement
 * factor level_displacement[level] and the table level_table[level]
 * (< n_tables).
 */
typedef struct hipkern_list1_pairs {
  int64_t n_targets;
  int64_t n_boxes;
  int64_t n_pairs;
  int32_t n_levels;
  const uint32_t *source_starts;
  const uint32_t *source_boxes;
  const uint8_t *pair_cases;
  const uint8_t *box_levels;
  const double *level_scale;
  const double *level_displacement;
  const uint32_t *level_table;
} hipkern_list1_pairs;

/**
 * List 1: out[i * nq + t] = sum over the pairs j of target box i, in list
 * order, of (scale * acc_j + disp_j), starting from 0, with
 * acc_j = sum over source modes s in order of f[box_j * nq + s] * T(case_j, s, t)
 * (from 0) and disp_j = displacement * sum_s f[box_j * nq + s] * N_s when the
 * level's displacement is nonzero, else 0. T is the table entry as the
 * layout reconstructs it (DENSE: the value; ORBIT: sign * values[row] with
 * row and sign computed from the case descriptors, sign 0 meaning an entry
 * that is zero by symmetry; FALLBACK: the smallest full id among the
 * transformed candidates, ties to a positive sign then the earlier
 * transform, its sign corrected by the sparse sign lookup, its row from the
 * hash; a representative missing from the hash gives NaN). Every float64
 * operation is one correctly rounded IEEE operation in that order, never
 * contracted into a fused multiply-add: the result is bitwise the CPU
 * evaluator's (src/nearfield/list1/cpu.rs) over the same entry values.
 *
 * Target boxes are spread over the grid's x axis (grid-stride); each box
 * is taken by a group of at most 32 lanes (DENSE: one group per block, the
 * ORBIT and FALLBACK layouts may pack several boxes' groups into one
 * block), lane l taking the box's target points t = l, l + lanes, ...
 * below q^dim (32: the fastest measured; list1_per_target.hip says why).
 * The lanes do not change any sum: each value is computed by one lane
 * alone, in the order above.
 *
 * source_values: n_boxes x nq float64; out: n_targets x nq float64, fully
 * overwritten (n_targets == 0 writes nothing). The pairs, cases, levels and
 * descriptors must be valid (the safe API validates them on the host); the
 * entry point checks the pointers, sizes and enumerations it is given and
 * returns HIPKERN_ERROR_INVALID_ARGUMENT before launching anything.
 * Asynchronous on `stream`.
 */
int32_t hipkern_list1_evaluate(const hipkern_list1_table *table, const hipkern_list1_pairs *pairs,
                               const double *source_values, double *out, void *stream);

/** Largest q^dim the case-grouped schedule takes (its case matrix and a
 * round of source vectors in one block's shared memory). */
#define HIPKERN_LIST1_GROUPED_MAX_MODES 64
/** Largest pair count (pair_end) of the case-grouped schedule: pair ids
 * and a tile's rounds stay below 2^32. */
#define HIPKERN_LIST1_GROUPED_MAX_PAIRS 0xFFFF0000ll

/**
 * One chunk of the case-grouped schedule (hipkern_list1_evaluate_grouped),
 * device pointers except the counts. The chunk is the target boxes
 * target_begin .. target_end and their pairs pair_begin .. pair_end
 * (pair_begin = source_starts[target_begin], pair_end =
 * source_starts[target_end] <= HIPKERN_LIST1_GROUPED_MAX_PAIRS). Its pairs
 * are grouped by key = table · n_cases + case (table =
 * level_table[box_levels[source box]]): tile k holds the pair ids
 * tile_pairs[tile_offsets[k] .. tile_offsets[k + 1]] (tile_offsets: n_tiles
 * + 1 ascending absolute indices into tile_pairs; each id in pair_begin ..
 * pair_end, every pair of the chunk in exactly one tile: a pair in no tile
 * is not detected, its target would read stale scratch), all of key
 * tile_keys[k]. pair_values: scratch of (pair_end − pair_begin) x nq
 * float64, overwritten when the chunk has pairs.
 */
typedef struct hipkern_list1_groups {
  int64_t target_begin;
  int64_t target_end;
  int64_t pair_begin;
  int64_t pair_end;
  int64_t n_tiles;
  const uint32_t *tile_offsets;
  const uint32_t *tile_keys;
  const uint32_t *tile_pairs;
  double *pair_values;
} hipkern_list1_groups;

/**
 * List 1 of one chunk, case-grouped: the same values as
 * hipkern_list1_evaluate, bit for bit, for the chunk's target rows
 * out[target_begin · nq ..  target_end · nq) (other rows untouched), in two
 * kernels on `stream`:
 *   1. per tile, the block builds the tile's case matrix T(case, s, t)
 *      once in shared memory (from the layout, as hipkern_list1_evaluate
 *      reconstructs it) and computes, for every pair j of the tile,
 *      acc_j(t) = sum over s in order of f[box_j · nq + s] · T(case, s, t)
 *      (from 0, unfused) into pair_values[(j − pair_begin) · nq + t]; a
 *      pair whose own case or table differs from its tile's key gets NaN
 *      (never another case's values); a pair id outside the chunk is
 *      skipped (nothing written out of bounds);
 *   2. per target box i and point t, u = sum over its pairs j in list
 *      order of (scale · acc_j(t) + disp_j), as hipkern_list1_evaluate.
 * A case matrix is read by every pair of its tile, so each table entry is
 * reconstructed once per tile instead of once per pair.
 * Bitwise the per-target result for finite source values (an entry zero
 * by symmetry enters as f · 0 here, as in DENSE; the per-target ORBIT path
 * skips it, which differs only for an infinite or NaN f).
 * Requires q^dim <= HIPKERN_LIST1_GROUPED_MAX_MODES and the products
 * kernel's shared memory (49,984 bytes at q^dim = 64) within the device's
 * limit per block. The entry point checks those, what
 * hipkern_list1_evaluate checks, and the chunk's ranges and pointers, and
 * returns HIPKERN_ERROR_INVALID_ARGUMENT before launching anything.
 */
int32_t hipkern_list1_evaluate_grouped(const hipkern_list1_table *table,
                                       const hipkern_list1_pairs *pairs,
                                       const hipkern_list1_groups *groups,
                                       const double *source_values, double *out, void *stream);

/** Largest q^dim of the target-tiled schedule (a box's outputs are one
 * thread's registers). */
#define HIPKERN_LIST1_TILED_MAX_MODES 64

/** Largest hipkern_list1_tiles.max_tile_sources (source rows of one tile). */
#define HIPKERN_LIST1_TILED_MAX_SOURCES 4096

/** hipkern_list1_tiles.kernel: the kernel hipkern_list1_evaluate_tiled
 * runs, exactly that one (no fallback). TILED and STAGED run on NVIDIA's
 * FP64 tensor cores (mma.sync m8n8k4, sm_80 and later) and are refused
 * where hipkern_list1_tiled_tensor_cores says 0 (every AMD build); TILED
 * stages each key's case matrix and its boxes' source values per key,
 * STAGED loads each tile's source boxes once (the tile-source fields) and
 * reads the case matrix fragments straight from memory, with no per-key
 * barrier. TILED_FMA takes FMAs, on every platform. TILED and STAGED
 * compute the same products in the same order: the same bits. */
typedef enum hipkern_list1_tiled_kernel {
  HIPKERN_LIST1_TILED = 0,      /* per-key tiles on NVIDIA's FP64 tensor cores (sm_80+) */
  HIPKERN_LIST1_STAGED = 1,     /* source-staged tiles on the FP64 tensor cores */
  HIPKERN_LIST1_TILED_FMA = 2   /* per-key tiles with FMAs, every platform */
} hipkern_list1_tiled_kernel;

/**
 * The target-tiled schedule (hipkern_list1_evaluate_tiled), device pointers
 * except the counts. `kernel` is a hipkern_list1_tiled_kernel, and
 * targets_per_tile must be its width (hipkern_list1_tile_targets). Tile k
 * is targets_per_tile target boxes tile_targets[k · targets_per_tile +
 * lane] (0xFFFFFFFF: no box on that lane; every target box should be on
 * exactly one lane of one tile: a box on none keeps its output rows) and
 * the keys keys[tile_key_offsets[k] .. tile_key_offsets[k + 1])
 * (tile_key_offsets: n_tiles + 1 ascending absolute indices), each key =
 * table · n_cases + case (table = level_table[box_levels[source box]]).
 * For the key at absolute index e, key_pairs[e · targets_per_tile + lane]
 * is the pair id of that lane's box with that key, or 0xFFFFFFFF; every
 * pair of a tile's boxes must appear exactly once (a pair in no slot is
 * not detected: it is left out of its target's sum).
 * The tile's source boxes (STAGED alone checks and reads these four
 * fields; the others ignore them: null, any max_tile_sources):
 * tile_sources[tile_source_offsets[k] .. tile_source_offsets[k + 1])
 * (n_tiles + 1 ascending absolute offsets; at most max_tile_sources per
 * tile, itself within 0 .. HIPKERN_LIST1_TILED_MAX_SOURCES), and
 * key_source_slots[e · targets_per_tile + lane] the position among them of
 * the source box of the pair in key_pairs at the same place (anything
 * where there is no pair). A slot that names another box than its pair's
 * source, like a pair outside its list, makes that box's outputs NaN, and
 * a tile with more sources than max_tile_sources (or a source box past
 * n_boxes) has every output NaN.
 * Key matrices (read by every kernel): each kernel reads key `key`'s case
 * matrix as one dense q^dim × q^dim block, entry s · q^dim + t =
 * T(case, s, t): with key_matrices non-null, key_matrices +
 * key_matrix_index[key] · q^{2·dim} (as hipkern_list1_expand_keys writes
 * them; key_matrix_index has n_tables · n_cases entries and
 * n_key_matrices, 1 .. 2^32 − 1, matrices follow key_matrices), else the
 * table's own rows, which only a DENSE table has: an ORBIT or FALLBACK
 * table needs key matrices. A tile with a key whose index is
 * n_key_matrices or more has every output NaN. The matrices hold the
 * layout's entries, so every layout gives the dense layout's bits.
 */
typedef struct hipkern_list1_tiles {
  int32_t targets_per_tile;
  int32_t kernel;
  int64_t n_tiles;
  const uint32_t *tile_targets;
  const uint32_t *tile_key_offsets;
  const uint32_t *keys;
  const uint32_t *key_pairs;
  int32_t max_tile_sources;
  const uint32_t *tile_source_offsets;
  const uint32_t *tile_sources;
  const uint16_t *key_source_slots;
  const double *key_matrices;
  const uint32_t *key_matrix_index;
  int64_t n_key_matrices;
} hipkern_list1_tiles;

/**
 * The case matrices of `n_keys` keys (each table · n_cases + case) as the
 * table's layout reconstructs them: key_matrices[i · q^{2·dim} + s · q^dim
 * + t] = T(case, s, t) of key keys[i]'s table, bit for bit the entry the
 * List 1 kernels read (a key past the tables: NaN). For the target-tiled
 * schedule's key matrices (hipkern_list1_tiles). One kernel on `stream`.
 * Requires q^dim <= HIPKERN_LIST1_TILED_MAX_MODES; checks the table as
 * hipkern_list1_evaluate does and returns HIPKERN_ERROR_INVALID_ARGUMENT
 * before launching anything.
 */
int32_t hipkern_list1_expand_keys(const hipkern_list1_table *table, const uint32_t *keys,
                                  int64_t n_keys, double *key_matrices, void *stream);

/**
 * Whether the calling thread's current device runs the tensor-core
 * kernels (HIPKERN_LIST1_TILED, HIPKERN_LIST1_STAGED): *available = 1
 * where every architecture of the build has them (sm_80 and later) and so
 * does the device, else 0 (every AMD build; a device that cannot be
 * queried), and hipkern_list1_evaluate_tiled refuses them.
 */
int32_t hipkern_list1_tiled_tensor_cores(int32_t *available);

/**
 * *targets_per_tile = the width of `kernel` (a hipkern_list1_tiled_kernel),
 * the one hipkern_list1_tiles.targets_per_tile it takes (on every
 * platform and device; whether the kernel runs here:
 * hipkern_list1_tiled_tensor_cores). HIPKERN_ERROR_INVALID_ARGUMENT for
 * another kernel or a null pointer.
 */
int32_t hipkern_list1_tile_targets(int32_t kernel, int32_t *targets_per_tile);

/**
 * List 1, target-tiled: the value of hipkern_list1_evaluate to rounding,
 * one kernel on `stream`, one block per tile. Each box with a pair j of a
 * key adds, per key (ascending),
 *   sum over s in order of T(case, s, t) · (scale_j · f[box_j · nq + s])
 * into its outputs u(t), then disp_j (the level's displacement times
 * sum_s f_s · N_s, where nonzero). out[i · nq + t] = u(t) for every box i
 * of a tile; NaN for a box one of whose slots holds a pair outside its
 * list or of another case or table (or a source slot of another box).
 * The sums (tiles.kernel): TILED_FMA with FMAs (32 · ceil(q^dim / 9)
 * threads, each holding at most 9 outputs of one box in registers; per key
 * the block copies the case matrix and the scaled source rows into shared
 * memory; one FMA per source mode in order); TILED and STAGED on the FP64
 * tensor cores (TILED: warps of 32 boxes × rows of 8 target points, with
 * TILED_FMA's per-key staging; STAGED: one warp per 8 target points of the
 * whole tile), the products as 8 × 8 × 4 matrix tiles: four source modes
 * per step, in order. Either order (keys ascending) is not
 * hipkern_list1_evaluate's: results agree with it (and the CPU evaluator)
 * to rounding, not bit for bit; for one kernel (TILED and STAGED alike)
 * they are the same bits for every layout and from run to run.
 * Requires q^dim <= HIPKERN_LIST1_TILED_MAX_MODES and the kernel's shared
 * memory within the device's limit per block (TILED_FMA and TILED: about
 * 8 · q^dim · (q^dim + 1 + targets_per_tile) bytes plus slots for 16
 * keys; STAGED: about 8 · (max_tile_sources + 1) · (q^dim rounded up to 4,
 * then to 4 mod 8) bytes plus 32 keys' slots). The entry point checks
 * those, the kernel, its width and its tensor cores, the key matrices (or
 * a DENSE table), what hipkern_list1_evaluate checks, and the tiles'
 * pointers, and returns HIPKERN_ERROR_INVALID_ARGUMENT before launching
 * anything.
 */
int32_t hipkern_list1_evaluate_tiled(const hipkern_list1_table *table,
                                     const hipkern_list1_pairs *pairs,
                                     const hipkern_list1_tiles *tiles,
                                     const double *source_values, double *out, void *stream);

/* ---- List 1 plans on the device ------------------------------------------ */

/**
 * A tree's boxes and List 1 lists as the device plan reads them: device
 * pointers except the counts and the geometry. Box b has centre
 * centers[b · dim ..] and side root_extent / 2^box_levels[b]; target row i
 * is box target_boxes[i] with the pairs source_starts[i] ..
 * source_starts[i + 1] of source_boxes. case_indices is volumential's
 * lookup from a case code to a case id (13^dim entries, −1 where a code is
 * no case; the code of the case vector v is the base-13 number of
 * v_k + 6, the last component least significant). n_boxes and n_pairs are
 * at most UINT32_MAX.
 */
typedef struct hipkern_list1_tree {
  int32_t dim;
  double root_extent;
  int64_t n_boxes;
  int64_t n_targets;
  int64_t n_pairs;
  const double *centers;
  const uint8_t *box_levels;
  const uint32_t *target_boxes;
  const uint32_t *source_starts;
  const uint32_t *source_boxes;
  const int32_t *case_indices;
} hipkern_list1_tree;

/**
 * What hipkern_list1_classify_pairs found, accumulated over calls (device
 * memory). Before the first call the caller sets the four firsts to
 * UINT64_MAX (none) and level_pairs to 0; each call lowers a first to the
 * smallest index it finds and adds its pairs to level_pairs.
 *   first_bad_target: a target row whose box is out of range or at a level
 *     >= HIPKERN_LIST1_MAX_LEVELS, or whose offsets decrease or pass
 *     n_pairs (its pairs are not read);
 *   first_bad_source: a pair whose source box is out of range;
 *   first_not_a_pair: a pair whose boxes are no List 1 pair of a
 *     2:1-balanced tree (the CPU's Cases::aligned_case refuses it: sizes
 *     more than one level apart, not touching, overlapping, not aligned);
 *   first_bad_key: a pair whose key level_table[level] · n_cases + case is
 *     not below n_keys;
 *   level_pairs[l]: the pairs whose source box is at level l.
 */
typedef struct hipkern_list1_pair_report {
  uint64_t first_bad_target;
  uint64_t first_bad_source;
  uint64_t first_not_a_pair;
  uint64_t first_bad_key;
  uint64_t level_pairs[HIPKERN_LIST1_MAX_LEVELS];
} hipkern_list1_pair_report;

/**
 * The first step of a plan built on the device: for every pair j of the
 * target rows target_begin .. target_end, pair_cases[j] = its case id
 * (bitwise the CPU's classification: the same rounded operations in the
 * same order; 0xFF for a pair found wrong, and nothing written for the
 * pairs of a bad target row), and key_counts[key] += 1 for its key =
 * level_table[source level] · n_cases + case (< n_keys; level_table has
 * HIPKERN_LIST1_MAX_LEVELS entries). What it finds wrong goes to `report`
 * (hipkern_list1_pair_report); a pair found wrong is counted in no key.
 * One kernel on `stream`.
 * Checks the tree's counts and pointers, the target range, 1 <= n_cases
 * <= 255 and n_keys >= 1, and returns HIPKERN_ERROR_INVALID_ARGUMENT
 * before launching anything; an empty range launches nothing.
 */
int32_t hipkern_list1_classify_pairs(const hipkern_list1_tree *tree, int64_t target_begin,
                                     int64_t target_end, const uint32_t *level_table,
                                     int32_t n_cases, int64_t n_keys, uint32_t *key_counts,
                                     uint8_t *pair_cases, hipkern_list1_pair_report *report,
                                     void *stream);

/**
 * The second step: the pairs pair_begin .. pair_end (one chunk of the
 * case-grouped schedule, classified by hipkern_list1_classify_pairs with
 * nothing reported) written into tile_pairs by key: pair j goes to
 * tile_pairs[key_next[key]++], key as above. The caller sets key_next[key]
 * to the first slot of the key's run (the counts' exclusive sum, from the
 * chunk's first slot), so that each key's pairs fill its run and the
 * runs cut into tiles give hipkern_list1_groups. The order within a run is
 * not fixed (it changes no value of the grouped schedule). A pair whose
 * key is not below n_keys, or whose slot is not below n_tile_pairs, is not
 * written. Checks as hipkern_list1_classify_pairs and the pair range; one
 * kernel on `stream`.
 */
int32_t hipkern_list1_group_pairs(const hipkern_list1_tree *tree, int64_t pair_begin,
                                  int64_t pair_end, const uint32_t *level_table,
                                  int32_t n_cases, int64_t n_keys, const uint8_t *pair_cases,
                                  uint32_t *key_next, uint32_t *tile_pairs, int64_t n_tile_pairs,
                                  void *stream);

#ifdef __cplusplus
}
#endif

#endif /* HIPKERN_LIST1_H */
