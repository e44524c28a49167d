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
 * Sections: this file holds the contract and the runtime's entry points
 * (platform, devices, memory, streams, events); each primitive's entry
 * points are in its own header, which this one includes at its end:
 * hipkern_force.h, hipkern_psf.h, hipkern_list1.h. Include hipkern.h.
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

#ifdef __cplusplus
}
#endif

/* One header per primitive, each a section of this ABI, installed beside
 * this one (the other headers of hip/include are the kernels' own). */
#include "hipkern_force.h"
#include "hipkern_psf.h"
#include "hipkern_list1.h"

#endif /* HIPKERN_H */
