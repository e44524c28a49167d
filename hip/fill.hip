// Trivial kernels: fill and iota. They exist so the launch path (compile,
// link, launch on the caller's stream, launch-error check) is exercised end
// to end, and so tests can poison device buffers (NaN bit patterns) on the
// device itself.
#include "hipkern_port.h"
#include "hipkern.h"

namespace {

constexpr unsigned kFillBlock = 256;
// Grid-stride loops: the grid is capped so any n (size_t) is covered
// without a grid dimension overflow.
constexpr size_t kMaxFillBlocks = 65535;

template <typename T>
__global__ void fill_kernel(T *dst, size_t n, T value) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = value;
}

__global__ void iota_kernel(uint32_t *dst, size_t n, uint32_t start, uint32_t step) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = start + static_cast<uint32_t>(i) * step;
}

unsigned fill_blocks(size_t n) {
  size_t b = (n + kFillBlock - 1) / kFillBlock;
  return static_cast<unsigned>(b < kMaxFillBlocks ? b : kMaxFillBlocks);
}

// Launch errors (bad configuration, no device) surface through
// hipGetLastError right after the launch; asynchronous faults surface at the
// next synchronizing call on the stream.
template <typename T>
int32_t launch_fill(T *dst, size_t n, T value, void *stream) {
  if (n == 0) return HIPKERN_SUCCESS;
  if (!dst) return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  (void)hipGetLastError();  // a stale error must not be reported as ours
  fill_kernel<T><<<fill_blocks(n), kFillBlock, 0, static_cast<hipStream_t>(stream)>>>(dst, n, value);
  return static_cast<int32_t>(hipGetLastError());
}

}  // namespace

extern "C" {

int32_t hipkern_fill_u32(uint32_t *dst, size_t n, uint32_t value, void *stream) {
  return launch_fill<uint32_t>(dst, n, value, stream);
}

int32_t hipkern_fill_u64(uint64_t *dst, size_t n, uint64_t value, void *stream) {
  return launch_fill<uint64_t>(dst, n, value, stream);
}

int32_t hipkern_iota_u32(uint32_t *dst, size_t n, uint32_t start, uint32_t step, void *stream) {
  if (n == 0) return HIPKERN_SUCCESS;
  if (!dst) return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  (void)hipGetLastError();
  iota_kernel<<<fill_blocks(n), kFillBlock, 0, static_cast<hipStream_t>(stream)>>>(dst, n, start,
                                                                                 step);
  return static_cast<int32_t>(hipGetLastError());
}

}  // extern "C"
