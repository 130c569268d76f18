// Asynchronous copies global -> shared (PTX cp.async, sm_80+): a thread issues copies, closes
// them into a group with cp_async_commit, and cp_async_wait<N> blocks until all its groups but
// the newest N are complete; the copied bytes are then visible to that thread, and to the
// others of the block after a __syncthreads. A __syncthreads alone does not wait for them.
//   cp_async_16(dst, src, valid)  16 bytes (.cg: bypasses L1), dst and src 16-byte aligned
//   cp_async_4(dst, src, valid)   4 bytes (.ca), 4-byte aligned
// valid = false: nothing is read (src must still be an address of the tensor) and dst is
// filled with zeros (src-size 0).
// Under nvcc inline PTX; under the SIMT emulator a per-thread queue whose copies are performed
// only by the wait that completes their group (simt/simt_exec.cpp), so a kernel that reads the
// destination too early reads stale bytes there and fails its tests.
#pragma once

#include "simt/dialect.cuh"

#if defined(__CUDACC__)

__device__ __forceinline__ uint32_t cp_async_smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
template <class T> __device__ __forceinline__ void cp_async_16(T* dst, const T* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(cp_async_smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
template <class T> __device__ __forceinline__ void cp_async_4(T* dst, const T* src, bool valid) {
    static_assert(sizeof(T) == 4, "cp_async_4 copies one 4-byte element");
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(cp_async_smem_u32(dst)), "l"(src),
                 "r"(valid ? 4 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#else  // SIMT emulator

template <class T> inline void cp_async_16(sptr<T> dst, const T* src, bool valid) {
    ::simt::detail::cp_async(dst.checked(0, 16), src, 16, valid ? 16 : 0);
}
template <class T> inline void cp_async_4(sptr<T> dst, const T* src, bool valid) {
    static_assert(sizeof(T) == 4, "cp_async_4 copies one 4-byte element");
    ::simt::detail::cp_async(dst.checked(0, 4), src, 4, valid ? 4 : 0);
}
inline void cp_async_commit() { ::simt::detail::cp_async_commit(); }
template <int N> inline void cp_async_wait() {
    static_assert(N >= 0, "cp.async.wait_group takes a count of groups");
    ::simt::detail::cp_async_wait(N);
}

#endif
