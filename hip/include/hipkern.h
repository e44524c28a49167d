/*
 * hipkern.h — the C ABI of hipkern's kernel layer.
 *
 * A C/C++ HIP (or CUDA) application links libhipkern (CMake:
 * find_package(hipkern CONFIG) and hipkern::hipkern; or pkg-config hipkern;
 * docs/c_and_cmake.md) and calls these entry points on memory and streams
 * it already owns. The shared library's SONAME carries HIPKERN_ABI_VERSION
 * (libhipkern.so.5) and it exports the hipkern_* entry points only. The ABI is plain
 * C: no C++ types, no HIP types. Streams and events are opaque pointers
 * (`hipStream_t`/`hipEvent_t` on AMD, `cudaStream_t`/`cudaEvent_t` on
 * NVIDIA), so a caller may pass its own; NULL means the default stream.
 *
 * Every entry point returns a status (int32_t) and none aborts:
 *   HIPKERN_SUCCESS (0)  success;
 *   > 0                  the platform runtime's own error code
 *                        (hipError_t on AMD, cudaError_t on NVIDIA);
 *                        hipkern_error_name / hipkern_error_string give
 *                        the runtime's name and message for it;
 *   < 0                  hipkern's own codes (HIPKERN_ERROR_*), below.
 *
 * Devices: an entry point that takes a stream acts on that stream's
 * device, whichever device is current on the calling thread, and leaves
 * the thread's current device as it found it (a caller may pass PyTorch's
 * stream on device 1 while device 0 is current); a NULL stream is the
 * current device's default stream. Entry points without a stream (device
 * properties, allocation, stream and event creation) act on the current
 * device (hipkern_set_device), as the HIP runtime does. (Built against a
 * CUDA older than 12.8, which lacks cudaStreamGetDevice, the stream's
 * device must be current.) While the stream is being captured into a
 * graph (CUDA graphs, HIP graphs) its device is not queried, since a
 * capture refuses the calls outside its permitted set: the stream's device
 * must then be current, as it is for PyTorch's and every framework's
 * capture. Kernel entry points are asynchronous on the
 * stream given; their own argument checks happen before anything is
 * launched.
 *
 * Versioning: HIPKERN_ABI_VERSION changes whenever an existing declaration
 * changes meaning or layout; hipkern_abi_version() reports the version the
 * library was built with, so a caller can refuse a mismatched library.
 * Changes in v5: hipkern_list1_evaluate lost its target_batch_size (32
 * lanes a target box always; HIPKERN_LIST1_MAX_BATCH is gone);
 * hipkern_list1_tiles.arithmetic became `kernel`
 * (hipkern_list1_tiled_kernel, which names one kernel, never falls back),
 * targets_per_tile is that kernel's one width (hipkern_list1_tile_targets,
 * new), and every tiled kernel reads case matrices as dense blocks only
 * (an ORBIT or FALLBACK table needs key matrices).
 */
#ifndef HIPKERN_H
#define HIPKERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HIPKERN_ABI_VERSION 5

/* ---- status codes (hipkern's own; runtime codes are positive) ---------- */
#define HIPKERN_SUCCESS 0
/** An argument is invalid (null pointer where one is required, bad enum). */
#define HIPKERN_ERROR_INVALID_ARGUMENT (-1)
/** The library was built without device code (the cpu platform). */
#define HIPKERN_ERROR_NO_TOOLCHAIN (-2)
/** A size computation would overflow. */
#define HIPKERN_ERROR_OVERFLOW (-3)
/** An index array holds a value out of range; the call's report says where. */
#define HIPKERN_ERROR_INVALID_INDEX (-4)
/** A host allocation failed (the machine has not the memory asked for). */
#define HIPKERN_ERROR_HOST_MEMORY (-5)

/* ---- platform, version, errors ----------------------------------------- */
/** HIPKERN_ABI_VERSION of the built library. */
int32_t hipkern_abi_version(void);
/** "amd", "nvidia" or "cpu": the platform the library was built for. */
const char *hipkern_platform(void);
/** Comma-separated device architectures compiled in ("" on cpu). */
const char *hipkern_compiled_archs(void);
/** The runtime library's version number (hipRuntimeGetVersion). */
int32_t hipkern_runtime_version(int32_t *version);
/**
 * The runtime version the library was compiled against: HIP_VERSION of the
 * HIP headers on AMD (major·10^7 + minor·10^5 + patch, e.g. 60443484 for
 * HIP 6.4.43484), CUDART_VERSION on NVIDIA (major·1000 + minor·10, e.g.
 * 13000); 0 on the cpu platform.
 */
int32_t hipkern_build_runtime_version(void);
/** The installed driver's version number (hipDriverGetVersion); 0 if none. */
int32_t hipkern_driver_version(int32_t *version);
/** Name of a status: hipkern's own, or the runtime's (hipGetErrorName). Never NULL. */
const char *hipkern_error_name(int32_t status);
/** Message of a status: hipkern's own, or the runtime's (hipGetErrorString). Never NULL. */
const char *hipkern_error_string(int32_t status);
/** Returns and clears the runtime's last error (hipGetLastError). */
int32_t hipkern_get_last_error(void);

/* ---- devices ------------------------------------------------------------ */
/** Properties of one device, in fixed-size C types. */
typedef struct hipkern_device_props {
  /** Marketing name, NUL-terminated. */
  char name[256];
  /** Architecture: "gfx1201" on AMD (gcnArchName), "sm_90" on NVIDIA. */
  char arch_name[64];
  /** Global memory in bytes. */
  uint64_t total_global_mem;
  /** Compute units (AMD) or streaming multiprocessors (NVIDIA). */
  int32_t multiprocessor_count;
  /** Wavefront (AMD) or warp (NVIDIA) size. */
  int32_t warp_size;
  /** Compute capability (NVIDIA) or gfx major/minor (AMD). */
  int32_t major;
  int32_t minor;
  /** Shared memory (LDS) per block in bytes. */
  uint64_t shared_mem_per_block;
  int32_t max_threads_per_block;
  int32_t pci_bus_id;
} hipkern_device_props;

/** Number of visible devices; the runtime's error when there is no driver or no device. */
int32_t hipkern_device_count(int32_t *count);
int32_t hipkern_get_device_properties(int32_t device, hipkern_device_props *props);
int32_t hipkern_set_device(int32_t device);
int32_t hipkern_get_device(int32_t *device);
int32_t hipkern_device_synchronize(void);
/** Free and total memory of the current device in bytes. */
int32_t hipkern_mem_get_info(size_t *free_bytes, size_t *total_bytes);

/* ---- memory ------------------------------------------------------------- */
/** Device allocation on the current device; *ptr is NULL when bytes == 0. */
int32_t hipkern_malloc(void **ptr, size_t bytes);
/** Frees device memory; NULL is a no-op. */
int32_t hipkern_free(void *ptr);
/** Page-locked host allocation (for truly asynchronous copies). */
int32_t hipkern_malloc_host(void **ptr, size_t bytes);
int32_t hipkern_free_host(void *ptr);

typedef enum hipkern_memcpy_kind {
  HIPKERN_MEMCPY_HOST_TO_DEVICE = 1,
  HIPKERN_MEMCPY_DEVICE_TO_HOST = 2,
  HIPKERN_MEMCPY_DEVICE_TO_DEVICE = 3
} hipkern_memcpy_kind;

/**
 * Synchronous copy of `bytes` bytes: when it returns, the bytes are at
 * `dst` (for every kind, so work on any stream, blocking or not, sees
 * them).
 */
int32_t hipkern_memcpy(void *dst, const void *src, size_t bytes, hipkern_memcpy_kind kind);
/** Copy ordered on `stream`; host memory must stay valid until the stream passes it. */
int32_t hipkern_memcpy_async(void *dst, const void *src, size_t bytes, hipkern_memcpy_kind kind,
                             void *stream);
/** Sets `bytes` bytes of device memory to the byte `value`; done when it returns. */
int32_t hipkern_memset(void *dst, int32_t value, size_t bytes);
int32_t hipkern_memset_async(void *dst, int32_t value, size_t bytes, void *stream);

/* ---- streams and events -------------------------------------------------- */
/** A non-blocking stream on the current device. */
int32_t hipkern_stream_create(void **stream);
int32_t hipkern_stream_destroy(void *stream);
int32_t hipkern_stream_synchronize(void *stream);
/** Makes later work on `stream` wait for `event`. */
int32_t hipkern_stream_wait_event(void *stream, void *event);
/** An event with timing enabled, on the current device. */
int32_t hipkern_event_create(void **event);
int32_t hipkern_event_destroy(void *event);
int32_t hipkern_event_record(void *event, void *stream);
int32_t hipkern_event_synchronize(void *event);
/** Milliseconds between two recorded, completed events. */
int32_t hipkern_event_elapsed_time(float *ms, void *start, void *end);

/* ---- trivial kernels (the launch path end to end; poisoning buffers) ---- */
/** dst[i] = value for i < n (4-byte elements: u32, i32, f32 bit patterns). */
int32_t hipkern_fill_u32(uint32_t *dst, size_t n, uint32_t value, void *stream);
/** dst[i] = value for i < n (8-byte elements: u64, i64, f64 bit patterns). */
int32_t hipkern_fill_u64(uint64_t *dst, size_t n, uint64_t value, void *stream);
/** dst[i] = start + i * step (wrapping, modulo 2^32) for i < n. */
int32_t hipkern_iota_u32(uint32_t *dst, size_t n, uint32_t start, uint32_t step, void *stream);

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

/* ---- PSF sink (docs/design/psf.md) ---------------------------------------- */
/** Stamp radius of the PSF cache: offsets dx, dy in -47..=47. */
#define HIPKERN_PSF_CACHE_RADIUS 47
/** Side of one stamp, 2 * 47 + 1. */
#define HIPKERN_PSF_STAMP_SIDE 95
/** float64 fields of one event: x, y, flux, r, g, b, support. */
#define HIPKERN_PSF_EVENT_FIELDS 7

/**
 * The `atomic` mode of the PSF sink: adds n_events star events into an RGB
 * float64 image with float64 atomicAdd.
 *
 * events: n_events x 7 float64 (x, y, flux, r, g, b, support), device.
 * stamps: the phase cache, (phases + 1)^2 stamps of 95 x 95 float64, device,
 *   stamps[((j * (phases + 1) + i) * 95 + (dy + 47)) * 95 + (dx + 47)]
 *   (i the x phase, j the y phase, phase (i / phases, j / phases)).
 * image: height x width x 3 float64 (row-major, RGB last), device; added to.
 * report: one uint64 of device memory. The caller sets it to all ones
 *   (0xFFFFFFFFFFFFFFFF, e.g. hipkern_fill_u64) before its first call.
 *   A first kernel checks every event (all fields finite, flux, r, g, b
 *   >= 0, support > 0, and every support pixel within the stamp radius of
 *   the anchor) and atomicMin's the index of each bad one into *report; the
 *   splat kernel then adds nothing at all when *report is no longer all
 *   ones. The word is sticky: after a rejected call, later calls on the same
 *   word add nothing until the caller resets it; read it after the stream
 *   has passed the call to learn the verdict.
 *
 * For an event at (x, y) with support s: anchor (floor x, floor y), phase
 * (fx, fy) = (x - floor x, y - floor y); the pixels whose centres lie within
 * s (per-row integer ranges, every step one correctly rounded float64
 * operation, no contraction: dy = (oy + 0.5) - fy, h2 = s*s - dy*dy, row in
 * support iff h2 >= 0, w = sqrt(h2), columns ceil((fx - 0.5) - w) ..
 * floor((fx - 0.5) + w)), clipped to the image, each get
 * v = ((w00 S00 + w10 S10) + w01 S01) + w11 S11 (the bilinear blend of the
 * four stamps bracketing the phase, gx = fx * phases,
 * i0 = min(floor gx, phases - 1), tx = gx - i0, w00 = (1 - tx)(1 - ty),
 * w10 = tx (1 - ty), w01 = (1 - tx) ty, w11 = tx ty) times flux*r, flux*g,
 * flux*b. Events with no support pixel in the image add nothing. Exactly
 * the float64 CPU reference per contribution; the order of the atomic sums
 * varies from run to run.
 *
 * phases in 1..=1024, width and height >= 1; n_events == 0 is a no-op.
 * Asynchronous on `stream`; no host allocation, no synchronization.
 */
int32_t hipkern_psf_splat_atomic(const double *events, int64_t n_events, const double *stamps,
                                 int32_t phases, double *image, int32_t width, int32_t height,
                                 uint64_t *report, void *stream);

/* ---- PSF sink: tile modes (tile16 / tile32) ---------------------------- */
/** Most references one accumulation task takes; longer tile lists are cut. */
#define HIPKERN_PSF_SEGMENT 256
/** hipkern_psf_tile_task.partial of a tile with one segment (writes the pixel). */
#define HIPKERN_PSF_DIRECT_TASK 0xFFFFFFFFu
/** Side of the centre tiles the adaptive selection counts events in. */
#define HIPKERN_PSF_CENTRE_TILE 32
/** Most events of one tile-mode chunk (event indices fit the sort's bitmask). */
#define HIPKERN_PSF_MAX_CHUNK_EVENTS 16384
/** Device bytes hipkern_psf_tile_scratch.prepared needs per event. */
#define HIPKERN_PSF_PREPARED_EVENT_BYTES 280

/** One accumulation task: references start .. start + count of tile `tile`. */
typedef struct hipkern_psf_tile_task {
  /** Tile index, ty * ceil(width / tile) + tx. */
  uint32_t tile;
  /** First reference (index into hipkern_psf_tile_scratch.references). */
  uint32_t start;
  /** References, 1..=HIPKERN_PSF_SEGMENT. */
  uint32_t count;
  /** Partial-sum slot, or HIPKERN_PSF_DIRECT_TASK when segments == 1. */
  uint32_t partial;
  /** Segment of its tile's list, 0-based. */
  uint32_t segment;
  /** Segments of its tile's list. */
  uint32_t segments;
} hipkern_psf_tile_task;

/** What the binning pass of one chunk found (written by hipkern_psf_tile_bin). */
typedef struct hipkern_psf_bin_totals {
  /** Tile references (event, tile) of the chunk. */
  uint64_t references;
  /** Tasks: sum over tiles of ceil(list / 256). */
  uint64_t tasks;
  /** Partial-sum slots: tasks of the tiles with more than one segment. */
  uint64_t partial_slots;
  /** Tiles with a non-empty list. */
  uint64_t occupied_tiles;
  /** Longest tile list. */
  uint64_t longest_list;
  /** Events whose centre (x, y) lies on the image. */
  uint64_t centre_events;
  /** 32 x 32 centre tiles holding at least one of them. */
  uint64_t centre_tiles;
  /** Capacity bits: 1 references, 2 tasks, 4 partials (0: everything fits). */
  uint64_t overflow;
} hipkern_psf_bin_totals;

/**
 * Device scratch of the tile modes, allocated once by the caller.
 * prepared: prepared_events x HIPKERN_PSF_PREPARED_EVENT_BYTES bytes.
 * tile_ends: ceil(width / tile) * ceil(height / tile) uint32 (the list
 *   starts during binning; afterwards each tile's list end).
 * references / tasks / partials: capacities in elements (partials in slots
 *   of tile * tile * 3 float64).
 * centre_marks: ceil(width / 32) * ceil(height / 32) uint32, zero when
 *   allocated; census_serial must differ from every serial used before
 *   with the same marks (and not be 0).
 * totals: one hipkern_psf_bin_totals. counters: 3 uint64 the passes add
 *   to (events with contributions, events without, contributions); the
 *   caller zeroes them.
 */
typedef struct hipkern_psf_tile_scratch {
  void *prepared;
  int64_t prepared_events;
  uint32_t *tile_ends;
  uint32_t *references;
  uint64_t references_capacity;
  hipkern_psf_tile_task *tasks;
  uint64_t tasks_capacity;
  double *partials;
  uint64_t partial_slots_capacity;
  uint32_t *centre_marks;
  hipkern_psf_bin_totals *totals;
  uint64_t *counters;
} hipkern_psf_tile_scratch;

/**
 * The binning pass of one tile-mode chunk (n_events <= 16384): checks the
 * events as hipkern_psf_splat_atomic does (into *report), prepares them
 * (anchor, stamp, blend weights, colour products, per-row spans, in-image
 * box; the counters; the centre-tile census into totals), and when
 * device_lists != 0 counts the references per tile (a tile gets an event
 * when a pixel of the event's clipped support lies in it) and scans them
 * into list starts and tasks. totals->overflow says which capacity the
 * chunk exceeds; nothing past the check is written then. tile is 16 or 32.
 * With device_lists == 0 the caller supplies tile_ends, references and
 * tasks itself (host binning, same lists) before hipkern_psf_tile_accumulate.
 * Asynchronous on `stream`: read totals after the stream has passed it.
 */
int32_t hipkern_psf_tile_bin(const double *events, int64_t n_events, int32_t phases,
                             int32_t width, int32_t height, int32_t tile, int32_t device_lists,
                             uint32_t census_serial, const hipkern_psf_tile_scratch *scratch,
                             uint64_t *report, void *stream);

/**
 * The accumulation of one binned chunk: with device_lists, scatters the
 * event indices into the lists and sorts each list into event order; then
 * one block per task (n_tasks = totals->tasks), one thread per pixel, adds
 * the task's events to the pixel in list order (a tile's first task starts
 * from the image's value), writing the pixel (one segment) or its partial
 * slot; with merge != 0 a second kernel sums the partials of each tile with
 * several segments in segment order into the pixel. No atomics on the
 * image: the result is bitwise the same on every run with the same chunks.
 * Does nothing when *report says an event was refused or (device_lists)
 * totals->overflow is set.
 */
int32_t hipkern_psf_tile_accumulate(const double *stamps, int32_t phases, double *image,
                                    int32_t width, int32_t height, int32_t tile,
                                    int32_t device_lists, int64_t n_events, uint64_t n_tasks,
                                    int32_t merge, const hipkern_psf_tile_scratch *scratch,
                                    const uint64_t *report, void *stream);

/**
 * The contribution counters of n_events checked events (adds to
 * counters[0..3] as hipkern_psf_tile_bin does); for the atomic mode.
 */
int32_t hipkern_psf_count(const double *events, int64_t n_events, int32_t width, int32_t height,
                          uint64_t *counters, const uint64_t *report, void *stream);

/* ---- PSF sink: the direct path (docs/design/psf.md#direct-path) ------------ */
/** Largest support the direct path takes, pixels (offsets stay exact in float64). */
#define HIPKERN_PSF_MAX_DIRECT_SUPPORT 1e12

/** A circular Moffat PSF of unit flux (src/psf/model.rs: MoffatPsf). */
typedef struct hipkern_psf_moffat {
  /** Full width at half maximum, pixels, 0.5..=1000. */
  double fwhm;
  /** Moffat exponent, 1.1..=100. */
  double beta;
  /** Flux fraction outside the support radius, 1e-15..=0.5. */
  double tail;
} hipkern_psf_moffat;

/**
 * The direct path: adds n_events star events of any support (up to
 * HIPKERN_PSF_MAX_DIRECT_SUPPORT, so also those the stamps cannot hold)
 * into the image without the cache. Each support pixel (the same pixels
 * as hipkern_psf_splat_atomic's rule, clipped to the image) gets the PSF
 * integrated over it by tensor Gauss-Legendre (8, 6 or 4 nodes per axis
 * as the pixel's nearest point lies within 4 px, 12 px or beyond:
 * MoffatPsf::pixel_integral) at the pixel centre relative to the event,
 * times flux*r, flux*g, flux*b. One thread per pixel adds the events in
 * their order (no atomics): the result is the same bits on every run, and
 * the float64 CPU reference's up to the device's pow (a few ulp per
 * value).
 *
 * events: n_events x 7 float64 (as hipkern_psf_splat_atomic), device.
 * psf: host memory, read during the call. HIPKERN_ERROR_INVALID_ARGUMENT
 *   for a field out of its range (or not finite).
 * image: height x width x 3 float64, device; added to.
 * report: as hipkern_psf_splat_atomic's. A first kernel checks every event
 *   (fields finite, flux and colours >= 0, 0 < support <=
 *   HIPKERN_PSF_MAX_DIRECT_SUPPORT) and atomicMin's the index of each bad
 *   one into it; the render then adds nothing.
 *
 * n_events == 0 is a no-op. Work grows with the image's 16 x 16 tiles
 * times the events (each tile skips an event whose support misses it) plus
 * the support pixels: meant for the few large events of a frame.
 * Asynchronous on `stream`; no host allocation, no synchronization.
 */
int32_t hipkern_psf_render_direct(const double *events, int64_t n_events,
                                  const hipkern_psf_moffat *psf, double *image, int32_t width,
                                  int32_t height, uint64_t *report, void *stream);

/* ---- PSF producers (docs/design/psf.md#producers) ----------------------- */
/*
 * Many threads feeding the atomic splat (a C/OpenMP renderer: one producer
 * per thread). A hub owns a fixed set of page-locked chunk buffers, all
 * allocated by hipkern_psf_hub_create, and one worker thread that applies
 * chunks in arrival order on the configured stream: upload, splat
 * (hipkern_psf_splat_atomic), read the device's verdict, synchronize. A
 * producer checks its events and copies them into its own buffer with no
 * lock; a full buffer goes to the hub's queue and the producer takes a free
 * one, waiting (never allocating) when none is free.
 *
 * Errors reach the producer whose events caused them. push refuses, all or
 * none, a call holding an event with a field not finite, flux or a colour
 * negative or support not positive: it returns
 * HIPKERN_ERROR_INVALID_ARGUMENT with *bad_event = that event's number
 * among all the producer's pushed events (0, 1, ...). An event whose
 * support does not fit the stamps (the device's own check,
 * hipkern_psf_splat_atomic; a support of 48 px or more is refused by push
 * itself) is found when its chunk is applied: that
 * event alone is left out, and the producer's next push, flush or destroy
 * returns HIPKERN_ERROR_INVALID_ARGUMENT with its number (taking none of
 * that push's events: push again). An error of the runtime is returned the
 * same way (*bad_event = -1); the hub then applies no later chunk and
 * hipkern_psf_hub_finish returns it.
 *
 * The image is the sum of every accepted event's contributions in an order
 * that varies from run to run (float64 atomics); the Rust SinkHub adds the
 * tile modes and a reproducible sequence order. One producer is used by
 * one thread at a time; different producers, and the hub's create and
 * finish, may run on different threads at once.
 */
typedef struct hipkern_psf_hub hipkern_psf_hub;
typedef struct hipkern_psf_producer hipkern_psf_producer;

/** What a hub splats into: the caller's memory and stream, alive until it is destroyed. */
typedef struct hipkern_psf_hub_config {
  /** The phase cache (device), as hipkern_psf_splat_atomic reads it. */
  const double *stamps;
  int32_t phases;
  /** height x width x 3 float64 (device), added to. */
  double *image;
  int32_t width;
  int32_t height;
  /** Events per chunk, 1 .. HIPKERN_PSF_MAX_CHUNK_EVENTS. */
  int64_t chunk_events;
  /**
   * Chunk buffers, 2 .. 1024 (chunk_events x 56 bytes each, page-locked);
   * the hub takes at most buffers - 1 producers at once.
   */
  int32_t buffers;
  /** The stream every upload and splat runs on (NULL: the default stream). */
  void *stream;
} hipkern_psf_hub_config;

/** What a hub did, and where its time went (seconds, host clock). */
typedef struct hipkern_psf_hub_stats {
  int64_t chunks;
  int64_t events;
  /** Events left out: refused by the device, or after a runtime error. */
  int64_t refused_events;
  /** Times a producer found no free buffer. */
  int64_t buffer_waits;
  int64_t max_queued;
  /** Producers' time waiting for a buffer, summed. */
  double buffer_wait_s;
  /** The worker's time applying chunks (uploads, splats, verdicts), and waiting for one. */
  double sink_busy_s;
  double sink_idle_s;
} hipkern_psf_hub_stats;

/** A hub over `config` (checked: pointers, phases 1..=1024, sizes >= 1, the limits above). */
int32_t hipkern_psf_hub_create(const hipkern_psf_hub_config *config, hipkern_psf_hub **hub);
/** A producer of `hub` (HIPKERN_ERROR_INVALID_ARGUMENT beyond buffers - 1 live ones). */
int32_t hipkern_psf_producer_create(hipkern_psf_hub *hub, hipkern_psf_producer **producer);
/**
 * Adds n_events events (n x 7 float64, host: x, y, flux, r, g, b, support),
 * all or none (see above). *bad_event (may be NULL) is -1 unless an event
 * is named.
 */
int32_t hipkern_psf_producer_push(hipkern_psf_producer *producer, const double *events,
                                  int64_t n_events, int64_t *bad_event);
/**
 * Hands over the events the producer holds, waits until the worker has
 * applied every chunk of this producer, and returns its first unread
 * refusal (as push does).
 */
int32_t hipkern_psf_producer_flush(hipkern_psf_producer *producer, int64_t *bad_event);
/** Flushes and frees the producer; returns its first unread refusal. NULL is a no-op. */
int32_t hipkern_psf_producer_destroy(hipkern_psf_producer *producer);
/**
 * Waits until every queued chunk is applied (the image is then complete on
 * the stream, which is synchronized) and fills *stats (may be NULL).
 * HIPKERN_ERROR_INVALID_ARGUMENT, changing nothing, while a producer of the
 * hub is alive; else the first runtime error any chunk met, or success.
 */
int32_t hipkern_psf_hub_finish(hipkern_psf_hub *hub, hipkern_psf_hub_stats *stats);
/** Applies what is queued, stops the worker, frees the hub (refused while producers live). */
int32_t hipkern_psf_hub_destroy(hipkern_psf_hub *hub);

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

#endif /* HIPKERN_H */
