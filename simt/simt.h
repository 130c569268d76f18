// SIMT emulator: the CUDA programming model on the CPU, for tests.
//
// Included by simt/dialect.cuh when the compiler is not nvcc. It supplies the
// names a kernel and its host launcher use (see simt/README.md):
//   - runtime API: cudaMalloc/Memcpy/Memset, streams, events, errors, device properties
//   - kernel execution: launch_kernel() runs every block; the threads of a block are
//     fibers switched at __syncthreads and warp collectives; blocks run on OpenMP threads
//   - shared memory: SHARED_ARRAY / DYNAMIC_SHARED / sptr<T>, every access checked
//     for bounds, alignment and races between barriers (like compute-sanitizer racecheck)
//   - warp collectives (__shfl_*_sync, __ballot_sync, __syncwarp), atomics, math, bf16
#pragma once
#define SIMT_EMULATOR 1

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <math.h>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <algorithm>
#include <atomic>

#include "simt_bf16.h"
#include "simt_fastmath.h"

// ----------------------------------------------------------------------------
// qualifiers

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
#define __managed__
// no __shared__: declare shared memory with SHARED_ARRAY / DYNAMIC_SHARED

// ----------------------------------------------------------------------------
// runtime API types

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorIllegalInstruction = 715,
    cudaErrorMisalignedAddress = 716,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxBlockDimX = 2,
    cudaDevAttrMaxBlockDimY = 3,
    cudaDevAttrMaxBlockDimZ = 4,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrTotalConstantMemory = 9,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMaxRegistersPerBlock = 12,
    cudaDevAttrClockRate = 13,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxRegistersPerMultiprocessor = 82,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
    cudaDevAttrMaxBlocksPerMultiprocessor = 106,
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    size_t totalConstMem;
    int major;
    int minor;
    size_t textureAlignment;
    int deviceOverlap;
    int multiProcessorCount;
    int kernelExecTimeoutEnabled;
    int integrated;
    int canMapHostMemory;
    int computeMode;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryClockRate;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    size_t sharedMemPerBlockOptin;
    int maxBlocksPerMultiProcessor;
    size_t reservedSharedMemPerBlock;
};

struct cudaFuncAttributes {
    size_t sharedSizeBytes;      // static shared memory (known after the kernel's first launch)
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
    int maxDynamicSharedSizeBytes;
};

namespace simt { namespace detail { struct Stream; struct Event; } }
typedef simt::detail::Stream* cudaStream_t;
typedef simt::detail::Event* cudaEvent_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00

// ----------------------------------------------------------------------------
// runtime API (simt_runtime.cpp). Work runs synchronously at the call, so every
// stream is trivially in order; errors follow CUDA: a launch error is left for
// cudaGetLastError(), an error while a kernel ran is also returned by the next
// synchronising call.

const char* cudaGetErrorString(cudaError_t err);
const char* cudaGetErrorName(cudaError_t err);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaMallocManaged(void** ptr, size_t bytes, unsigned int flags = 1);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags);
template <class T> inline cudaError_t cudaMalloc(T** ptr, size_t bytes) { return cudaMalloc((void**)ptr, bytes); }
template <class T> inline cudaError_t cudaMallocAsync(T** ptr, size_t bytes, cudaStream_t stream) {
    return cudaMallocAsync((void**)ptr, bytes, stream);
}
template <class T> inline cudaError_t cudaMallocManaged(T** ptr, size_t bytes, unsigned int flags = 1) {
    return cudaMallocManaged((void**)ptr, bytes, flags);
}
template <class T> inline cudaError_t cudaMallocHost(T** ptr, size_t bytes) { return cudaMallocHost((void**)ptr, bytes); }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = 0);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

namespace simt { namespace detail {
cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t func_get_attributes(cudaFuncAttributes* attr, const void* func);
// [p, p+bytes) lies inside one cudaMalloc / cudaMallocManaged / cudaMallocHost allocation
bool is_device_range(const void* p, size_t bytes);
}}  // namespace simt::detail
template <class F> inline cudaError_t cudaFuncSetAttribute(F* func, cudaFuncAttribute attr, int value) {
    return simt::detail::func_set_attribute((const void*)func, attr, value);
}
template <class F> inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, F* func) {
    return simt::detail::func_get_attributes(attr, (const void*)func);
}
// __constant__ / __device__ globals are ordinary host objects here
template <class T>
inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, size_t bytes, size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
    std::memcpy(reinterpret_cast<char*>(&symbol) + offset, src, bytes);
    return cudaSuccess;
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t bytes, size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
    std::memcpy(dst, reinterpret_cast<const char*>(&symbol) + offset, bytes);
    return cudaSuccess;
}

// ----------------------------------------------------------------------------
// emulator controls and reports

namespace simt {
// The report of the most recent launch on this host thread that failed while it ran
// (race, deadlock, bad shared access, launch limit), "" if that launch was clean.
std::string last_error_report();
// Same, but only when the failure was a shared-memory race ("" otherwise).
std::string last_race_report();
// Print each failure report to stderr when it happens (default true).
void set_print_reports(bool on);
// Host threads that run blocks of one launch (default: OpenMP's default).
void set_block_threads(int n);
// A thread that makes this many shared accesses without reaching a barrier or
// collective fails the launch (a spin-wait would never end); 0 restores 2^30.
void set_spin_limit(uint64_t accesses);
// Counters of this process, for tests of the emulator itself.
struct Stats { uint64_t launches, blocks, fiber_switches; };
Stats stats();
}  // namespace simt

// ----------------------------------------------------------------------------
// execution model internals used by the inline device functions below

namespace simt { namespace detail {

struct ThreadView {      // what a running fiber sees of itself
    uint3 thread_idx;
    int linear;          // threadIdx.x + threadIdx.y*bx + threadIdx.z*bx*by
};
struct BlockView {
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};
extern __thread ThreadView* t_thread;  // null in host code (__thread: no TLS wrapper call)
extern __thread BlockView* t_block;

[[noreturn]] void device_fail(cudaError_t code, const std::string& what);  // aborts the launch
void require_device(const char* what);    // fails unless called from a kernel
[[noreturn]] void misaligned_global(const void* p, size_t bytes, const char* what);  // aborts the launch
// A vector access to global memory (a 128-bit load or store, a float2/float4 atomic): the GPU
// faults (cudaErrorMisalignedAddress) unless its address is a multiple of its size; so does the
// launch here. Host code is not checked.
inline void global_vector_access(const void* p, size_t bytes, const char* what) {
    if ((uintptr_t)p % bytes != 0 && t_thread != nullptr) misaligned_global(p, bytes, what);
}
void set_epoch_counter(uint32_t value);   // of this host thread's executor (tests of the wrap-around)

// shared memory
enum AccessKind { kRead = 1, kWrite = 2, kAtomic = 3 };
void shared_access(const void* p, size_t bytes, size_t align, AccessKind kind);  // check + track
unsigned char* static_shared(const void* site, size_t bytes, size_t align, const char* name);
unsigned char* dynamic_shared(size_t align, const char* name, size_t* bytes);
unsigned char* block_shared(size_t* bytes);  // the whole shared memory of the running block

// warp collectives
void syncthreads();
int syncthreads_count(int pred);
void syncwarp(unsigned mask);
uint64_t shfl(unsigned mask, uint64_t value, int mode, int arg, int width, int bytes);
unsigned vote(unsigned mask, int pred, int mode);  // 0 ballot, 1 any, 2 all
unsigned reduce(unsigned mask, unsigned value, int op);  // ReduceOp over the lanes of mask
enum ReduceOp { kRedAdd, kRedMinS, kRedMaxS, kRedMinU, kRedMaxU, kRedAnd, kRedOr, kRedXor };
unsigned activemask();
void warp_mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c);
void warp_ldmatrix(uint32_t* r, int count, bool trans, const void* row_addr);

// asynchronous copies global -> shared (cp.async, simt/cp_async.cuh): queued per thread, performed
// at the cp_async_wait that completes their group
void cp_async(void* dst, const void* src, int bytes, int src_bytes);  // dst: shared, bounds checked
void cp_async_commit();
void cp_async_wait(int newest_pending);

// host launch
struct FnRef {  // non-owning reference to a callable
    void* obj;
    void (*call)(void*);
    template <class F> static FnRef of(F& f) { return FnRef{&f, [](void* o) { (*static_cast<F*>(o))(); }}; }
};
struct PtrArg { int index; const void* ptr; };
void launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            const PtrArg* ptr_args, int n_ptr_args, FnRef body);
}}  // namespace simt::detail

#define threadIdx (::simt::detail::t_thread->thread_idx)
#define blockIdx (::simt::detail::t_block->block_idx)
#define blockDim (::simt::detail::t_block->block_dim)
#define gridDim (::simt::detail::t_block->grid_dim)
static constexpr int warpSize = 32;

// ----------------------------------------------------------------------------
// shared memory: sptr<T> (tracked pointer), sref<T> (tracked element), arrays

namespace simt {
template <class T> class sptr;

// One element of shared memory: reads and writes go through the race checker.
// Load the whole element (T v = p[i]) before touching a member.
template <class T> class sref {
    using V = std::remove_const_t<T>;
    T* p_;
   public:
    explicit sref(T* p) : p_(p) {}
    V load() const {
        detail::shared_access(p_, sizeof(T), alignof(T), detail::kRead);
        V v;
        std::memcpy((void*)&v, (const void*)p_, sizeof(T));
        return v;
    }
    operator V() const { return load(); }
    void store(const V& v) const {
        static_assert(!std::is_const<T>::value, "store through a pointer to const shared memory");
        detail::shared_access(p_, sizeof(T), alignof(T), detail::kWrite);
        std::memcpy((void*)p_, (const void*)&v, sizeof(T));
    }
    const sref& operator=(const V& v) const { store(v); return *this; }
    const sref& operator=(const sref& o) const { store(o.load()); return *this; }
    template <class U> const sref& operator=(const sref<U>& o) const { store(o.load()); return *this; }
    template <class U> const sref& operator+=(const U& v) const { V t = load(); t += v; store(t); return *this; }
    template <class U> const sref& operator-=(const U& v) const { V t = load(); t -= v; store(t); return *this; }
    template <class U> const sref& operator*=(const U& v) const { V t = load(); t *= v; store(t); return *this; }
    template <class U> const sref& operator/=(const U& v) const { V t = load(); t /= v; store(t); return *this; }
    template <class U> const sref& operator|=(const U& v) const { V t = load(); t |= v; store(t); return *this; }
    template <class U> const sref& operator&=(const U& v) const { V t = load(); t &= v; store(t); return *this; }
    template <class U> const sref& operator^=(const U& v) const { V t = load(); t ^= v; store(t); return *this; }
    template <class U> const sref& operator<<=(const U& v) const { V t = load(); t <<= v; store(t); return *this; }
    template <class U> const sref& operator>>=(const U& v) const { V t = load(); t >>= v; store(t); return *this; }
    const sref& operator++() const { V t = load(); ++t; store(t); return *this; }
    const sref& operator--() const { V t = load(); --t; store(t); return *this; }
    V operator++(int) const { V t = load(); V r = t; ++t; store(t); return r; }
    V operator--(int) const { V t = load(); V r = t; --t; store(t); return r; }
    sptr<T> operator&() const;
    T* raw() const { return p_; }
};

// Pointer into shared memory. Carries the bounds of the array it came from, so an
// out-of-bounds index fails the launch (with its name) instead of corrupting a neighbour.
template <class T> class sptr {
    template <class U> friend class sptr;
    T* p_ = nullptr;
    const unsigned char* lo_ = nullptr;  // bounds of the array, in bytes
    const unsigned char* hi_ = nullptr;
    const char* name_ = nullptr;

   public:
    using element_type = T;
    sptr() = default;
    sptr(std::nullptr_t) {}
    sptr(T* p, const void* lo, const void* hi, const char* name)
        : p_(p), lo_((const unsigned char*)lo), hi_((const unsigned char*)hi), name_(name) {}
    template <class U, class = std::enable_if_t<std::is_same<const U, T>::value && !std::is_same<U, T>::value>>
    sptr(const sptr<U>& o) : p_(o.p_), lo_(o.lo_), hi_(o.hi_), name_(o.name_) {}

    T* raw() const { return p_; }
    const void* lo() const { return lo_; }
    const void* hi() const { return hi_; }
    const char* name() const { return name_; }
    template <class U> sptr<U> cast() const {
        static_assert(!std::is_const<T>::value || std::is_const<U>::value, "sptr_cast drops const");
        return sptr<U>(reinterpret_cast<U*>(p_), lo_, hi_, name_);
    }

    T* checked(ptrdiff_t i, size_t bytes) const {
        const unsigned char* a = (const unsigned char*)(p_ + i);
        if (p_ == nullptr || a < lo_ || a + bytes > hi_) out_of_bounds(i, bytes);
        return p_ + i;
    }
    [[noreturn]] void out_of_bounds(ptrdiff_t i, size_t bytes) const;

    sref<T> operator[](ptrdiff_t i) const { return sref<T>(checked(i, sizeof(T))); }
    sref<T> operator*() const { return sref<T>(checked(0, sizeof(T))); }
    template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
    sptr operator+(I k) const { sptr r = *this; r.p_ += (ptrdiff_t)k; return r; }
    template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
    sptr operator-(I k) const { sptr r = *this; r.p_ -= (ptrdiff_t)k; return r; }
    ptrdiff_t operator-(const sptr& o) const { return p_ - o.p_; }
    template <class I> sptr& operator+=(I k) { p_ += (ptrdiff_t)k; return *this; }
    template <class I> sptr& operator-=(I k) { p_ -= (ptrdiff_t)k; return *this; }
    sptr& operator++() { ++p_; return *this; }
    sptr& operator--() { --p_; return *this; }
    sptr operator++(int) { sptr r = *this; ++p_; return r; }
    sptr operator--(int) { sptr r = *this; --p_; return r; }
    explicit operator bool() const { return p_ != nullptr; }
    bool operator==(const sptr& o) const { return p_ == o.p_; }
    bool operator!=(const sptr& o) const { return p_ != o.p_; }
    bool operator<(const sptr& o) const { return p_ < o.p_; }
    bool operator<=(const sptr& o) const { return p_ <= o.p_; }
    bool operator>(const sptr& o) const { return p_ > o.p_; }
    bool operator>=(const sptr& o) const { return p_ >= o.p_; }
};
template <class T, class I, class = std::enable_if_t<std::is_integral<I>::value>>
inline sptr<T> operator+(I k, const sptr<T>& p) { return p + k; }

template <class T> sptr<T> sref<T>::operator&() const {
    // the bounds are those of the whole shared memory of the block (the array is not known here)
    size_t bytes = 0;
    unsigned char* base = detail::block_shared(&bytes);
    return sptr<T>(p_, base, base + bytes, "shared memory");
}

namespace detail {
[[noreturn]] void sptr_out_of_bounds(const char* name, const void* p, ptrdiff_t i, size_t elem, size_t bytes,
                                     const void* lo, const void* hi);
}
template <class T> void sptr<T>::out_of_bounds(ptrdiff_t i, size_t bytes) const {
    detail::sptr_out_of_bounds(name_, p_, i, sizeof(T), bytes, lo_, hi_);
}

// SHARED_ARRAY(T, name, N): N elements of static shared memory of this block.
template <class T, size_t N> class shared_array {
    sptr<T> p_;
   public:
    shared_array(const void* site, const char* name) {
        unsigned char* base = detail::static_shared(site, sizeof(T) * N, alignof(T), name);
        p_ = sptr<T>(reinterpret_cast<T*>(base), base, base + sizeof(T) * N, name);
    }
    sref<T> operator[](ptrdiff_t i) const { return p_[i]; }
    sref<T> operator*() const { return *p_; }
    operator sptr<T>() const { return p_; }
    template <class U = T, class = std::enable_if_t<!std::is_const<U>::value>>
    operator sptr<const U>() const { return p_; }
    template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
    sptr<T> operator+(I k) const { return p_ + k; }
    sptr<T> ptr() const { return p_; }
};

template <class T> inline sptr<T> dynamic_shared_ptr(const char* name) {
    size_t bytes = 0;
    unsigned char* base = detail::dynamic_shared(16, name, &bytes);
    return sptr<T>(reinterpret_cast<T*>(base), base, base + bytes, name);
}
}  // namespace simt

using simt::sptr;
template <class U, class T> inline sptr<U> sptr_cast(const sptr<T>& p) { return p.template cast<U>(); }
template <class U, class T, size_t N> inline sptr<U> sptr_cast(const simt::shared_array<T, N>& a) {
    return a.ptr().template cast<U>();
}

#define SHARED_ARRAY(T, name, N)                         \
    static const char name##_simt_site = 0;              \
    const ::simt::shared_array<T, (N)> name(&name##_simt_site, #name)
#define DYNAMIC_SHARED(T, name) ::sptr<T> name = ::simt::dynamic_shared_ptr<T>(#name)

// ----------------------------------------------------------------------------
// barriers and warp collectives

inline void __syncthreads() { simt::detail::syncthreads(); }
inline int __syncthreads_count(int pred) { return simt::detail::syncthreads_count(pred); }
inline int __syncthreads_and(int pred) {
    return simt::detail::syncthreads_count(pred != 0) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
inline int __syncthreads_or(int pred) { return simt::detail::syncthreads_count(pred != 0) > 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { simt::detail::syncwarp(mask); }
inline unsigned __activemask() { return simt::detail::activemask(); }
inline unsigned __ballot_sync(unsigned mask, int pred) { return simt::detail::vote(mask, pred, 0); }
inline int __any_sync(unsigned mask, int pred) { return (int)simt::detail::vote(mask, pred, 1); }
inline int __all_sync(unsigned mask, int pred) { return (int)simt::detail::vote(mask, pred, 2); }
// sm_80 warp reductions (redux.sync)
inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return simt::detail::reduce(mask, v, simt::detail::kRedAdd); }
inline int __reduce_add_sync(unsigned mask, int v) { return (int)simt::detail::reduce(mask, (unsigned)v, simt::detail::kRedAdd); }
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return simt::detail::reduce(mask, v, simt::detail::kRedMinU); }
inline int __reduce_min_sync(unsigned mask, int v) { return (int)simt::detail::reduce(mask, (unsigned)v, simt::detail::kRedMinS); }
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return simt::detail::reduce(mask, v, simt::detail::kRedMaxU); }
inline int __reduce_max_sync(unsigned mask, int v) { return (int)simt::detail::reduce(mask, (unsigned)v, simt::detail::kRedMaxS); }
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) { return simt::detail::reduce(mask, v, simt::detail::kRedAnd); }
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) { return simt::detail::reduce(mask, v, simt::detail::kRedOr); }
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) { return simt::detail::reduce(mask, v, simt::detail::kRedXor); }

namespace simt { namespace detail {
enum ShflMode { kShflIdx = 0, kShflUp = 1, kShflDown = 2, kShflXor = 3 };
template <class T> inline T shfl_t(unsigned mask, T v, int mode, int arg, int width) {
    static_assert(std::is_trivially_copyable<T>::value && (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8),
                  "warp shuffles move 2-, 4- or 8-byte values");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = shfl(mask, bits, mode, arg, width, (int)sizeof(T));
    T r;
    std::memcpy(&r, &bits, sizeof(T));
    return r;
}
}}  // namespace simt::detail
template <class T> inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
    return simt::detail::shfl_t(mask, v, simt::detail::kShflIdx, src_lane, width);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
    return simt::detail::shfl_t(mask, v, simt::detail::kShflUp, (int)delta, width);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
    return simt::detail::shfl_t(mask, v, simt::detail::kShflDown, (int)delta, width);
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
    return simt::detail::shfl_t(mask, v, simt::detail::kShflXor, lane_mask, width);
}
// a shared element passed straight in is loaded first
template <class T> inline std::remove_const_t<T> __shfl_sync(unsigned m, simt::sref<T> v, int s, int w = warpSize) {
    return __shfl_sync(m, v.load(), s, w);
}
template <class T> inline std::remove_const_t<T> __shfl_up_sync(unsigned m, simt::sref<T> v, unsigned d, int w = warpSize) {
    return __shfl_up_sync(m, v.load(), d, w);
}
template <class T> inline std::remove_const_t<T> __shfl_down_sync(unsigned m, simt::sref<T> v, unsigned d, int w = warpSize) {
    return __shfl_down_sync(m, v.load(), d, w);
}
template <class T> inline std::remove_const_t<T> __shfl_xor_sync(unsigned m, simt::sref<T> v, int l, int w = warpSize) {
    return __shfl_xor_sync(m, v.load(), l, w);
}

// ----------------------------------------------------------------------------
// atomics: global memory through GCC atomics (blocks run on several host threads);
// shared memory through sptr (fibers of a block never run at once, so a plain
// read-modify-write is atomic; it is tracked as an atomic access)

namespace simt { namespace detail {
template <class T, class F> inline T atomic_rmw(T* p, F f) {  // CAS loop, any 2/4/8-byte T
    static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomic on 2/4/8 bytes");
    using U = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
    U* up = reinterpret_cast<U*>(p);
    U old_bits = __atomic_load_n(up, __ATOMIC_RELAXED);
    for (;;) {
        T old_v, new_v;
        std::memcpy(&old_v, &old_bits, sizeof(T));
        new_v = f(old_v);
        U new_bits;
        std::memcpy(&new_bits, &new_v, sizeof(T));
        if (__atomic_compare_exchange_n(up, &old_bits, new_bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            return old_v;
    }
}
template <class T, class F> inline T shared_rmw(const sptr<T>& p, F f) {
    T* q = p.checked(0, sizeof(T));
    shared_access(q, sizeof(T), alignof(T), kAtomic);
    T old = *q;
    *q = f(old);
    return old;
}
}}  // namespace simt::detail

#define SIMT_ATOMIC(NAME, T, EXPR)                                                                       \
    inline T NAME(T* p, T v) {                                                                           \
        return simt::detail::atomic_rmw(p, [v](T o) -> T { return EXPR; });                            \
    }                                                                                                    \
    inline T NAME(const sptr<T>& p, T v) {                                                               \
        return simt::detail::shared_rmw(p, [v](T o) -> T { return EXPR; });                            \
    }
SIMT_ATOMIC(atomicAdd, float, o + v)
SIMT_ATOMIC(atomicAdd, double, o + v)
SIMT_ATOMIC(atomicAdd, int, (int)((unsigned)o + (unsigned)v))
SIMT_ATOMIC(atomicAdd, unsigned int, o + v)
SIMT_ATOMIC(atomicAdd, unsigned long long, o + v)
SIMT_ATOMIC(atomicAdd, __nv_bfloat16, __hadd(o, v))
SIMT_ATOMIC(atomicAdd, __nv_bfloat162, __hadd2(o, v))
SIMT_ATOMIC(atomicSub, int, (int)((unsigned)o - (unsigned)v))
SIMT_ATOMIC(atomicSub, unsigned int, o - v)
SIMT_ATOMIC(atomicMax, int, o > v ? o : v)
SIMT_ATOMIC(atomicMax, unsigned int, o > v ? o : v)
SIMT_ATOMIC(atomicMax, long long, o > v ? o : v)
SIMT_ATOMIC(atomicMax, unsigned long long, o > v ? o : v)
SIMT_ATOMIC(atomicMin, int, o < v ? o : v)
SIMT_ATOMIC(atomicMin, unsigned int, o < v ? o : v)
SIMT_ATOMIC(atomicMin, long long, o < v ? o : v)
SIMT_ATOMIC(atomicMin, unsigned long long, o < v ? o : v)
SIMT_ATOMIC(atomicExch, int, v)
SIMT_ATOMIC(atomicExch, unsigned int, v)
SIMT_ATOMIC(atomicExch, unsigned long long, v)
SIMT_ATOMIC(atomicExch, float, v)
SIMT_ATOMIC(atomicAnd, int, o & v)
SIMT_ATOMIC(atomicAnd, unsigned int, o & v)
SIMT_ATOMIC(atomicAnd, unsigned long long, o & v)
SIMT_ATOMIC(atomicOr, int, o | v)
SIMT_ATOMIC(atomicOr, unsigned int, o | v)
SIMT_ATOMIC(atomicOr, unsigned long long, o | v)
SIMT_ATOMIC(atomicXor, int, o ^ v)
SIMT_ATOMIC(atomicXor, unsigned int, o ^ v)
SIMT_ATOMIC(atomicXor, unsigned long long, o ^ v)
SIMT_ATOMIC(atomicInc, unsigned int, (o >= v) ? 0u : o + 1u)
SIMT_ATOMIC(atomicDec, unsigned int, (o == 0u || o > v) ? v : o - 1u)
#undef SIMT_ATOMIC

// sm_90's vector atomics on global memory (atomicAdd of float2, float4): the address must be a
// multiple of the vector's size; each element is added atomically (the CUDA guide guarantees no
// more: the vector is not one atomic access)
inline float2 atomicAdd(float2* p, float2 v) {
    simt::detail::global_vector_access(p, sizeof(float2), "atomicAdd(float2*)");
    float x = atomicAdd(&p->x, v.x);
    float y = atomicAdd(&p->y, v.y);
    return make_float2(x, y);
}
inline float4 atomicAdd(float4* p, float4 v) {
    simt::detail::global_vector_access(p, sizeof(float4), "atomicAdd(float4*)");
    float x = atomicAdd(&p->x, v.x);
    float y = atomicAdd(&p->y, v.y);
    float z = atomicAdd(&p->z, v.z);
    float w = atomicAdd(&p->w, v.w);
    return make_float4(x, y, z, w);
}

#define SIMT_ATOMIC_CAS(T)                                                                               \
    inline T atomicCAS(T* p, T compare, T v) {                                                           \
        T expected = compare;                                                                            \
        __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
        return expected;                                                                                 \
    }                                                                                                    \
    inline T atomicCAS(const sptr<T>& p, T compare, T v) {                                               \
        return simt::detail::shared_rmw(p, [compare, v](T o) -> T { return o == compare ? v : o; });    \
    }
SIMT_ATOMIC_CAS(int)
SIMT_ATOMIC_CAS(unsigned int)
SIMT_ATOMIC_CAS(unsigned long long)
SIMT_ATOMIC_CAS(unsigned short)
#undef SIMT_ATOMIC_CAS

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ----------------------------------------------------------------------------
// loads/stores with cache hints (plain here), math intrinsics, bit tricks

template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// fast-math intrinsics: simt/simt_fastmath.h
namespace simt { namespace fastmath { inline bool on_device() { return ::simt::detail::t_thread != nullptr; } } }
inline float __expf(float x) { return simt::fastmath::expf_(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return simt::fastmath::logf_(x); }
inline float __log2f(float x) { return simt::fastmath::log2f_(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __powf(float x, float y) { return simt::fastmath::powf_(x, y); }
inline float __fdividef(float a, float b) { return simt::fastmath::fdividef_(a, b); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float rsqrtf(float x) { return simt::fastmath::dev_rsqrtf(x); }
// --use_fast_math: device code's expf, exp2f, logf, log2f, powf are the intrinsics' (host code's stay libm's)
#ifndef SIMT_EXACT_MATH
#define expf(x) ::simt::fastmath::dev_expf(x)
#define exp2f(x) ::simt::fastmath::dev_exp2f(x)
#define logf(x) ::simt::fastmath::dev_logf(x)
#define log2f(x) ::simt::fastmath::dev_log2f(x)
#define powf(x, y) ::simt::fastmath::dev_powf(x, y)
#endif
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
// __fadd_rn, __fsub_rn, __fmul_rn: rounded on their own, never contracted into an FMA with a
// neighbouring operation (nvcc's guarantee; g++ contracts a * b + c in C++ unless the result is
// laundered through a register first)
namespace simt { namespace detail {
inline float rounded(float r) {
#if defined(__x86_64__)
    __asm__("" : "+x"(r));
#else
    volatile float v = r;
    r = v;
#endif
    return r;
}
}}  // namespace simt::detail
inline float __fadd_rn(float a, float b) { return simt::detail::rounded(a + b); }
inline float __fsub_rn(float a, float b) { return simt::detail::rounded(a - b); }
inline float __fmul_rn(float a, float b) { return simt::detail::rounded(a * b); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline unsigned __float2uint_rz(float x) { return (unsigned)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, 8); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    uint64_t v = ((uint64_t)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((int64_t)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned __sad(int a, int b, unsigned c) { return c + (unsigned)(a > b ? a - b : b - a); }
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((((uint64_t)hi << 32) | lo) << (shift & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((uint64_t)hi << 32) | lo) >> (shift & 31));
}
inline void __nanosleep(unsigned) {}

// CUDA's device-side min/max overloads
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }

inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }

// ----------------------------------------------------------------------------
// kernel launch (the project's launch helper; cuda_launch() passes #kernel as name)

namespace simt { namespace detail {
template <class A> inline void collect_ptr(PtrArg* out, int& n, int index, const A& a) {
    if constexpr (std::is_pointer<A>::value) {
        if (a != nullptr) out[n++] = PtrArg{index, (const void*)a};
    }
}
template <class Tuple, size_t... I> inline int collect_ptrs(PtrArg* out, const Tuple& t, std::index_sequence<I...>) {
    int n = 0;
    (collect_ptr(out, n, (int)I, std::get<I>(t)), ...);
    return n;
}
}}  // namespace simt::detail

template <class... KArgs, class... Args>
inline void launch_kernel(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, Args... args) {
    static_assert(sizeof...(KArgs) == sizeof...(Args), "kernel launched with the wrong number of arguments");
    // the kernel's parameters, converted once as a real launch does
    std::tuple<std::decay_t<KArgs>...> params(static_cast<std::decay_t<KArgs>>(args)...);
    simt::detail::PtrArg ptrs[sizeof...(KArgs) + 1];
    int n_ptrs = simt::detail::collect_ptrs(ptrs, params, std::index_sequence_for<KArgs...>{});
    auto body = [&]() {
        std::tuple<std::decay_t<KArgs>...> copy = params;  // each thread gets its own copy
        std::apply(kernel, copy);
    };
    simt::detail::launch(name, (const void*)kernel, grid, block, smem_bytes, stream, ptrs, n_ptrs,
                         simt::detail::FnRef::of(body));
}
