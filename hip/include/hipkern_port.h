/*
 * hipkern_port.h — what the kernel layer needs of the HIP runtime.
 *
 * Under a real HIP compiler (hipcc, or clang -x hip) this includes
 * <hip/hip_runtime.h> and nothing else of the runtime.
 *
 * Under plain nvcc (sys/build.rs defines HIPKERN_PORT_CUDA) it maps the few
 * HIP runtime names hipkern's .hip files use onto CUDA. This exists because
 * the HIP-on-NVIDIA headers Debian ships (HIP 5.2, 5.7) do not compile
 * against CUDA 13 (cudaDeviceProp::clockRate and friends were removed).
 * Keep it to that subset: a name the kernels start using is added here, by
 * hand, with its CUDA meaning checked.
 *
 * On every platform it also holds the warp-width constants and checks the
 * kernels share (kLaneGroup and below; docs/warp_size.md).
 */
#ifndef HIPKERN_PORT_H
#define HIPKERN_PORT_H

#if defined(HIPKERN_PORT_CUDA)

#include <cuda_runtime.h>

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaMemcpyKind hipMemcpyKind;
typedef cudaStreamCaptureStatus hipStreamCaptureStatus;

#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipHostMallocDefault cudaHostAllocDefault

#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipDriverGetVersion cudaDriverGetVersion
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#if CUDART_VERSION >= 12080
// (CUDA 12.8 added it; HIP has had it since ROCm 5.)
#define hipStreamGetDevice cudaStreamGetDevice
#define HIPKERN_HAS_STREAM_GET_DEVICE 1
#endif
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc(ptr, bytes, flags) cudaHostAlloc((ptr), (bytes), (flags))
#define hipHostFree cudaFreeHost
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize

// Butterfly shuffle within aligned segments of `width` lanes (a power of
// two, at most 32): lane l gets v from lane l ^ m of its segment. The full
// mask: every lane of the 32-lane warp executes the shuffle (hipkern's
// callers keep the whole warp converged and every lane in range; see
// force_assembly.hip). With width 32 this is exactly CUDA's default form.
#define HIPKERN_SHFL_XOR(v, m, width) __shfl_xor_sync(0xffffffffu, (v), (m), (width))
// v from lane `src` of the caller's aligned segment of `width` lanes (the
// same conditions: every lane of the warp executes it).
#define HIPKERN_SHFL(v, src, width) __shfl_sync(0xffffffffu, (v), (src), (width))
// The predicate over the caller's 32-lane group (kLaneGroup, here the
// warp), bit l for lane l: every lane of the warp executes it.
#define HIPKERN_GROUP_BALLOT(p) static_cast<uint32_t>(__ballot_sync(0xffffffffu, (p)))

#else

#include <hip/hip_runtime.h>
#define HIPKERN_HAS_STREAM_GET_DEVICE 1

// The same on AMD (ds_bpermute): no mask (the instruction serves the
// wavefront's active lanes, 32 or 64 of them; a caller's segment must be
// all active), and the width given explicitly: HIP's default width is
// warpSize, 64 on CDNA, which is not what a 32-lane group means. With
// width = kLaneGroup on wave64 each half-wavefront exchanges within itself.
// (HIP's *_sync shuffles take 64-bit lane masks; hipkern uses none.)
#define HIPKERN_SHFL_XOR(v, m, width) __shfl_xor((v), (m), (width))
#define HIPKERN_SHFL(v, src, width) __shfl((v), (src), (width))
// The predicate over the caller's 32-lane group (kLaneGroup), bit l for
// lane l of the group: HIP's ballot is 64-bit (bit = the lane's place in
// the wavefront, the active lanes only), and a group is lanes 0-31 or
// 32-63 of a wave64 (lanes 0-31 of a wave32, whose upper word is 0): the
// group's word starts at its first lane, __lane_id() & 32.
#define HIPKERN_GROUP_BALLOT(p) \
  static_cast<uint32_t>(__ballot(p) >> (static_cast<unsigned>(__lane_id()) & 32u))

#endif

// ---- Warp / wavefront width ------------------------------------------------
//
// The kernels run on 32-lane warps (NVIDIA; AMD RDNA, gfx10/11/12, which
// HIP runs in wave32 only: its hip_runtime.h refuses -mwavefrontsize64
// there) and on 64-lane wavefronts (AMD GCN and CDNA, GFX9: gfx90a,
// gfx942). No kernel reads warpSize (in ROCm 7 it is no longer a constant
// expression) and none assumes either width: docs/warp_size.md lists every
// place where the width matters and why each is right for both.
//
// kLaneGroup: the one width a kernel deliberately works in: lanes that
// exchange values (HIPKERN_SHFL_XOR) do so in aligned groups of at most
// kLaneGroup, threads laid out in fixed parts take kLaneGroup each, lanes
// per box round up to whole kLaneGroups. It is the warp on NVIDIA and
// wave32, half a wavefront on wave64. A group that exchanges values starts
// at a multiple of its size within a block of whole groups, so it never
// straddles a warp or wavefront boundary at either width: kLaneGroup
// divides both (checked below, and for the compiled target's own width in
// device passes).
constexpr int kLaneGroup = 32;
constexpr int kLaneGroupLog2 = 5;  // tid >> kLaneGroupLog2, tid & (kLaneGroup - 1)
constexpr int kMinWarpSize = 32;   // NVIDIA, RDNA wave32
constexpr int kMaxWarpSize = 64;   // GCN / CDNA wave64
static_assert((1 << kLaneGroupLog2) == kLaneGroup, "kLaneGroupLog2");
static_assert(kMinWarpSize % kLaneGroup == 0 && kMaxWarpSize % kLaneGroup == 0,
              "a lane group must lie within one warp or wavefront at every width");

// kDeviceWarpSize: the width of the device code being compiled, 0 in host
// passes (and where the compiler does not state it). The width is a
// property of the code object, fixed at compile time per target (the
// device's warpSize at launch could only repeat it), so the check is made
// here, in each target's device pass.
// Clang 20 and 21 (ROCm 6.4's) define __AMDGCN_WAVEFRONT_SIZE__ but mark
// it deprecated (a warning even on `defined`, silenced for this one read);
// clang 22 (ROCm 7.2's) no longer defines it. Without it GFX9 (GCN, CDNA)
// is wave64 only, and other targets rely on the width-independent check
// above (kDeviceWarpSize 0).
#if defined(__CUDA_ARCH__)
constexpr int kDeviceWarpSize = 32;
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-pragma"
#if defined(__AMDGCN_WAVEFRONT_SIZE__)
constexpr int kDeviceWarpSize = __AMDGCN_WAVEFRONT_SIZE__;
#elif defined(__GFX9__)
constexpr int kDeviceWarpSize = 64;
#else
constexpr int kDeviceWarpSize = 0;
#endif
#pragma clang diagnostic pop
#else
constexpr int kDeviceWarpSize = 0;
#endif
static_assert(kDeviceWarpSize == 0 ||
                  (kDeviceWarpSize % kLaneGroup == 0 && kDeviceWarpSize <= kMaxWarpSize),
              "the target's warp or wavefront is not a multiple of kLaneGroup lanes");

// Whether every group of `lanes` consecutive threads (group g: threads
// g·lanes .. g·lanes + lanes − 1) of a block of `threads` either lies inside
// one warp of `width` lanes or starts and ends on warp boundaries: no group
// is split between two warps that it shares with other groups. The
// launch-geometry checks (static_assert) evaluate it at width 32 and 64.
__host__ __device__ constexpr bool lane_groups_align(int lanes, int threads, int width) {
  for (int start = 0; start < threads; start += lanes) {
    const int end = start + lanes < threads ? start + lanes : threads;  // one past the last
    const bool inside = start / width == (end - 1) / width;
    // (a block's last warp may be partial: its missing lanes hold nothing)
    const bool whole = start % width == 0 && (end % width == 0 || end == threads);
    if (!inside && !whole) return false;
  }
  return true;
}
// Whether every such group lies inside one aligned segment of `width`
// lanes (what a shuffle of that width needs).
__host__ __device__ constexpr bool lane_groups_inside(int lanes, int threads, int width) {
  for (int start = 0; start < threads; start += lanes) {
    const int end = start + lanes < threads ? start + lanes : threads;
    if (start / width != (end - 1) / width) return false;
  }
  return true;
}

// Every C entry point that takes a stream acts on that stream's device, not
// on the calling thread's current device: a caller (PyTorch, Kokkos, a
// thread serving several GPUs) may pass a stream of device 1 while device 0
// is current. One of these per entry point, before its first runtime call:
// it makes the stream's device current for the call and restores the
// caller's on return, so the call leaves the thread as it found it. A NULL
// stream is the current device's default stream. Built against a CUDA
// older than 12.8 (no cudaStreamGetDevice) it keeps the current device,
// which is then the caller's to set (hipkern.h says so).
class StreamDeviceScope {
 public:
  explicit StreamDeviceScope(const void *stream) {
    status_ = hipGetDevice(&previous_);
    if (status_ != hipSuccess) return;
    device_ = previous_;
#if defined(HIPKERN_HAS_STREAM_GET_DEVICE)
    if (stream) {
      // A stream being captured into a graph is not asked for its device
      // (hipkern.h: it must then be current): CUDA 13.0 answers
      // cudaStreamGetDevice inside a capture with
      // cudaErrorStreamCaptureUnsupported and invalidates the capture, in
      // every capture mode, while cudaStreamIsCapturing, cudaGetDevice and
      // cudaSetDevice pass (asked of torch's libcudart on an H100).
      hipStream_t s = static_cast<hipStream_t>(const_cast<void *>(stream));
      hipStreamCaptureStatus capture = hipStreamCaptureStatusNone;
      status_ = hipStreamIsCapturing(s, &capture);
      if (status_ != hipSuccess) return;
      if (capture == hipStreamCaptureStatusNone) status_ = hipStreamGetDevice(s, &device_);
      if (status_ != hipSuccess) return;
    }
#else
    (void)stream;
#endif
    if (device_ != previous_) {
      status_ = hipSetDevice(device_);
      switched_ = status_ == hipSuccess;
    }
  }
  // A failed restore cannot be reported from here; the runtime keeps it as
  // its last error, which the caller's next hipGetLastError sees.
  ~StreamDeviceScope() {
    if (switched_) (void)hipSetDevice(previous_);
  }
  StreamDeviceScope(const StreamDeviceScope &) = delete;
  StreamDeviceScope &operator=(const StreamDeviceScope &) = delete;
  /** hipSuccess, or why the stream's device could not be made current. */
  hipError_t status() const { return status_; }
  /** The stream's device (current for the scope). */
  int device() const { return device_; }

 private:
  hipError_t status_ = hipSuccess;
  int previous_ = 0;
  int device_ = 0;
  bool switched_ = false;
};

// Declares `scope` for `stream` and returns the runtime's code when the
// stream's device cannot be made current.
#define HIPKERN_ON_STREAM_DEVICE(scope, stream)                        \
  StreamDeviceScope scope(stream);                                     \
  if (scope.status() != hipSuccess) return static_cast<int32_t>(scope.status())

#endif /* HIPKERN_PORT_H */
