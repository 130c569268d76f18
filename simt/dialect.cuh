// The kernel dialect of the project: the few names every CUDA source uses for launches and shared
// memory, defined here for both compilers so one kernel source builds two ways:
//   nvcc          -> real CUDA: the names map to <<<>>>, __shared__ and plain pointers (this file)
//   g++ -DSIMT    -> the SIMT emulator (simt/simt.h) runs the kernels on the CPU
// Kernels use only what both halves provide:
//   - launches go through cuda_launch(kernel, grid, block, smem_bytes, stream, args...)
//     (never <<<>>> at a call site); check with cudaGetLastError().
//   - shared memory is declared with SHARED_ARRAY(T, name, N) (static) or DYNAMIC_SHARED(T, name)
//     (dynamic), and pointers into it have type sptr<T>, so the emulator sees every shared access
//     and can report races.
//   - tensor cores through simt/mma.cuh.
// simt/README.md lists the rules in full.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#include <cuda_bf16.h>

template <class T> using sptr = T*;
#define SHARED_ARRAY(T, name, N) __shared__ T name[N]
#define DYNAMIC_SHARED(T, name) \
    extern __shared__ __align__(16) unsigned char name##_bytes[]; \
    T* name = reinterpret_cast<T*>(name##_bytes)
template <class U, class T> __device__ __forceinline__ U* sptr_cast(T* p) { return reinterpret_cast<U*>(p); }

// Launches a kernel; a launch error is left for cudaGetLastError(), as with <<<>>>.
template <class... KArgs, class... Args>
inline void launch_kernel(const char* /*name*/, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                          size_t smem_bytes, cudaStream_t stream, Args... args) {
    kernel<<<grid, block, smem_bytes, stream>>>(args...);
}
#else
#include "simt/simt.h"  // the CUDA model on the host: the same names, run on the CPU
#endif

#define cuda_launch(kernel, grid, block, smem_bytes, stream, ...) \
    launch_kernel(#kernel, kernel, grid, block, smem_bytes, stream, __VA_ARGS__)
