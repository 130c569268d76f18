// Common CUDA header of the project: every .cuh kernel file includes this first.
//
// The same kernel source builds two ways:
//   nvcc          -> real CUDA (this file maps the project's helpers to CUDA)
//   g++ -DSIMT    -> the SIMT emulator in test/simt/ runs the kernels on the CPU
// so kernels use only what both sides provide:
//   - launches go through cuda_launch(kernel, grid, block, smem_bytes, stream, args...)
//     (never <<<>>> at a call site); check with cudaCheck(cudaGetLastError()).
//   - shared memory is declared with SHARED_ARRAY(T, name, N) (static) or
//     DYNAMIC_SHARED(T, name) (dynamic), and pointers into it have type sptr<T>,
//     so the emulator can see every shared access and report races.
//   - tensor cores through the wrappers of layers/mma.cuh.
#pragma once

#include <cstdio>
#include <cstdlib>
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
#include "../test/simt/simt.h"  // the CUDA model on the host (defines the same names)
#endif

#define cuda_launch(kernel, grid, block, smem_bytes, stream, ...) \
    launch_kernel(#kernel, kernel, grid, block, smem_bytes, stream, __VA_ARGS__)

inline void cuda_check(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(err));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) (cuda_check((err), __FILE__, __LINE__))

__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
