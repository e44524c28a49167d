/*
 * hipkern_port.h — what the kernel layer needs of the HIP runtime.
 *
 * Under a real HIP compiler (hipcc, or clang -x hip) this includes
 * <hip/hip_runtime.h> and nothing else.
 *
 * Under plain nvcc (sys/build.rs defines HIPKERN_PORT_CUDA) it maps the few
 * HIP runtime names hipkern's .hip files use onto CUDA. This exists because
 * the HIP-on-NVIDIA headers Debian ships (HIP 5.2, 5.7) do not compile
 * against CUDA 13 (cudaDeviceProp::clockRate and friends were removed).
 * Keep it to that subset: a name the kernels start using is added here, by
 * hand, with its CUDA meaning checked.
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

// Warp shuffle: CUDA needs the explicit full mask; all lanes participate.
#define HIPKERN_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))

#else

#include <hip/hip_runtime.h>

#define HIPKERN_SHFL_XOR(v, m) __shfl_xor((v), (m))

#endif

#endif /* HIPKERN_PORT_H */
