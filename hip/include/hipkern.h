/*
 * hipkern.h — the C ABI of hipkern's kernel layer.
 *
 * A C/C++ HIP (or CUDA) application links libhipkern_kernels.a and calls
 * these entry points on memory and streams it already owns. The ABI is plain
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
 * Like the HIP runtime, calls act on the calling thread's current device
 * (hipkern_set_device). Kernel entry points are asynchronous on the stream
 * given; their own argument checks happen before anything is launched.
 *
 * Versioning: HIPKERN_ABI_VERSION changes whenever an existing declaration
 * changes meaning or layout; hipkern_abi_version() reports the version the
 * library was built with, so a caller can refuse a mismatched library.
 */
#ifndef HIPKERN_H
#define HIPKERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HIPKERN_ABI_VERSION 1

/* ---- status codes (hipkern's own; runtime codes are positive) ---------- */
#define HIPKERN_SUCCESS 0
/** An argument is invalid (null pointer where one is required, bad enum). */
#define HIPKERN_ERROR_INVALID_ARGUMENT (-1)
/** The library was built without device code (the cpu platform). */
#define HIPKERN_ERROR_NO_TOOLCHAIN (-2)
/** A size computation would overflow. */
#define HIPKERN_ERROR_OVERFLOW (-3)

/* ---- platform, version, errors ----------------------------------------- */
/** HIPKERN_ABI_VERSION of the built library. */
int32_t hipkern_abi_version(void);
/** "amd", "nvidia" or "cpu": the platform the library was built for. */
const char *hipkern_platform(void);
/** Comma-separated device architectures compiled in ("" on cpu). */
const char *hipkern_compiled_archs(void);
/** The runtime library's version number (hipRuntimeGetVersion). */
int32_t hipkern_runtime_version(int32_t *version);
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

/** Synchronous copy of `bytes` bytes. */
int32_t hipkern_memcpy(void *dst, const void *src, size_t bytes, hipkern_memcpy_kind kind);
/** Copy ordered on `stream`; host memory must stay valid until the stream passes it. */
int32_t hipkern_memcpy_async(void *dst, const void *src, size_t bytes, hipkern_memcpy_kind kind,
                             void *stream);
/** Sets `bytes` bytes of device memory to the byte `value`. */
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

/* ---- force / virial assembly (SPEC §4) ---------------------------------- */
/** Element type of device inputs. */
typedef enum hipkern_dtype { HIPKERN_DTYPE_F32 = 1, HIPKERN_DTYPE_F64 = 2 } hipkern_dtype;

/** Where the per-edge virial -g (x) edge_vec goes. */
typedef enum hipkern_virial_split {
  /** Half to each endpoint. */
  HIPKERN_VIRIAL_HALF = 0,
  /** All to the source atom. */
  HIPKERN_VIRIAL_SRC = 1
} hipkern_virial_split;

/**
 * F_k = sum_{dst(e)=k} g_e - sum_{src(e)=k} g_e and the per-atom virial
 * (row-major 3x3) over a CSR plan, float64 outputs force (n_rows x 3) and
 * virial (n_rows x 9), fully overwritten. g and edge_vec are E x 3 of
 * `dtype`. The plan (dst_order/src_order: E edge ids; dst_row_ptr/
 * src_row_ptr: n_rows + 1 offsets, 0 .. E, non-decreasing) must be valid:
 * the safe API validates it; a C caller passes what it built with the
 * same rules. Asynchronous on `stream`; no atomics; bitwise reproducible.
 */
int32_t hipkern_force_assemble(hipkern_dtype dtype, const void *g, const void *edge_vec,
                               int64_t n_edges, const int32_t *dst_order,
                               const int32_t *dst_row_ptr, const int32_t *src_order,
                               const int32_t *src_row_ptr, int32_t n_rows,
                               hipkern_virial_split split, double *force, double *virial,
                               void *stream);

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

#ifdef __cplusplus
}
#endif

#endif /* HIPKERN_H */
