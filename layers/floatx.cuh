// The storage type of activations and parameters on the GPU (bf16, math in fp32), plus the
// small device utilities every layer kernel shares: 128-bit packs, warp/block sums,
// stochastic rounding. Included by the layers/*.cuh kernel files after cuda_common.cuh.
#pragma once

#include <cmath>
#include <cstring>
#include "layers/cuda_common.cuh"

typedef __nv_bfloat16 floatX;

// ----------------------------------------------------------------------------
// 128-bit packs: x128 holds 8 floatX, f128 holds 4 floats.
// A pointer handed to load128/store128 must be 16-byte aligned (the GPU faults otherwise; so does
// the emulated launch).

template <class T>
struct alignas(16) Packed128 {
    static constexpr int size = 16 / sizeof(T);
    T payload[size];
    __device__ T& operator[](int i) { return payload[i]; }
    __device__ const T& operator[](int i) const { return payload[i]; }
    __device__ static Packed128 zeros() {
        Packed128 p;
        for (int k = 0; k < size; k++) { p.payload[k] = (T)0.0f; }
        return p;
    }
};
typedef Packed128<floatX> x128;
typedef Packed128<float> f128;

template <class T>
__device__ __forceinline__ Packed128<T> load128(const T* address) {
    Packed128<T> p;
#if defined(__CUDACC__)
    int4 bits = *reinterpret_cast<const int4*>(address);  // one 128-bit load
    memcpy(&p, &bits, sizeof(bits));
#else
    simt::detail::global_vector_access(address, 16, "128-bit load (load128)");
    memcpy(&p, address, sizeof(p));
#endif
    return p;
}

template <class T>
__device__ __forceinline__ void store128(T* address, const Packed128<T>& p) {
#if defined(__CUDACC__)
    int4 bits;
    memcpy(&bits, &p, sizeof(bits));
    *reinterpret_cast<int4*>(address) = bits;  // one 128-bit store
#else
    simt::detail::global_vector_access(address, 16, "128-bit store (store128)");
    memcpy(address, &p, sizeof(p));
#endif
}

// Host-side alignment check for the launchers: x128 access needs 16-byte alignment.
inline void check_aligned16(const void* ptr, const char* what, const char* file, int line) {
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
        fprintf(stderr, "[ERROR] %s:%d: %s = %p is not 16-byte aligned; 128-bit loads need it "
                        "(allocate with cudaMalloc and keep tensor offsets multiples of 8 elements)\n",
                file, line, what, ptr);
        exit(EXIT_FAILURE);
    }
}
#define CHECK_ALIGNED16(ptr) check_aligned16((ptr), #ptr, __FILE__, __LINE__)

// Host-side shape check for the launchers.
inline void check_multiple_of(long long value, int multiple, const char* what, const char* file, int line) {
    if (value % multiple != 0) {
        fprintf(stderr, "[ERROR] %s:%d: %s = %lld is not a multiple of %d, which these kernels need "
                        "(128-bit packs of %d bf16); pad the dimension to a multiple of %d\n",
                file, line, what, value, multiple, multiple, multiple);
        exit(EXIT_FAILURE);
    }
}
#define CHECK_MULTIPLE_OF(value, multiple) check_multiple_of((value), (multiple), #value, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// Reductions (fixed order: the same inputs give bitwise the same sum on every run).

__device__ __forceinline__ float warp_sum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) { val += __shfl_xor_sync(0xffffffff, val, offset); }
    return val;
}

__device__ __forceinline__ float warp_max(float val) {
    for (int offset = 16; offset > 0; offset /= 2) { val = fmaxf(val, __shfl_xor_sync(0xffffffff, val, offset)); }
    return val;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple of 32.
// Every thread of the block must call it (it holds barriers).
__device__ inline float block_sum(float val) {
    SHARED_ARRAY(float, warp_sums, 32);
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    int num_warps = blockDim.x / 32;
    val = warp_sum(val);
    if (lane == 0) { warp_sums[warp] = val; }
    __syncthreads();
    val = lane < num_warps ? warp_sums[lane] : 0.0f;
    val = warp_sum(val);
    __syncthreads();  // warp_sums may be written again by the next call
    return val;
}

// Max over the block, returned to every thread (same rules as block_sum).
__device__ inline float block_max(float val) {
    SHARED_ARRAY(float, warp_maxes, 32);
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    int num_warps = blockDim.x / 32;
    val = warp_max(val);
    if (lane == 0) { warp_maxes[warp] = val; }
    __syncthreads();
    val = lane < num_warps ? warp_maxes[lane] : -INFINITY;
    val = warp_max(val);
    __syncthreads();
    return val;
}

// ----------------------------------------------------------------------------
// Stochastic rounding fp32 -> bf16, deterministic from (index, seed).

__host__ __device__ __forceinline__ unsigned int float_bits(float x) {
    unsigned int u;
    memcpy(&u, &x, sizeof(u));
    return u;
}
__host__ __device__ __forceinline__ float bits_float(unsigned int u) {
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

// A 32-bit integer hash (xorshift-multiply rounds): well mixed bits from (index, seed).
__host__ __device__ __forceinline__ unsigned int hash_index_seed(unsigned int index, unsigned int seed) {
    unsigned int h = index * 0x9E3779B1u ^ (seed + 0x7F4A7C15u);
    h ^= h >> 16; h *= 0x85EBCA6Bu;
    h ^= h >> 13; h *= 0xC2B2AE35u;
    h ^= h >> 16; h += seed * 0x27D4EB2Fu;
    h ^= h >> 15; h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h;
}

// Rounds x up or down to a neighbouring bf16 with probability proportional to proximity:
// adding 16 random bits below the bf16 mantissa then truncating. The truncated float is
// exactly representable in bf16, so the final conversion is exact.
__device__ __forceinline__ floatX stochastic_round_bf16(float x, unsigned int random) {
    unsigned int bits = float_bits(x);
    if ((bits & 0x7F800000u) == 0x7F800000u) { return (floatX)x; }  // inf / nan unchanged
    bits = (bits + (random & 0xFFFFu)) & 0xFFFF0000u;
    return (floatX)bits_float(bits);
}

// ----------------------------------------------------------------------------
// Deterministic first stage of a column reduction over the rows of a (rows, cols) bf16 matrix, for
// kernels that sum columns while they do something else with the rows (bias gradients).
// Block (32, 8) over 256 columns: threadIdx.x holds the sums acc[8] of one 8-column pack at column
// c, threadIdx.y one of 8 row phases. Writes this block's 256 column sums (phases added in order)
// to partials + blockIdx.x * 256, for the columns below cols. Every thread of the block calls it.
constexpr int COLUMN_SUM_MAX_SPLITS = 128;  // row splits (gridDim.y) of the kernels that use it

__device__ inline void column_pack_partials_store(float* partials, const float acc[8], int cols) {
    SHARED_ARRAY(float, phase_sums, 8 * 256);
    for (int k = 0; k < 8; k++) { phase_sums[threadIdx.y * 256 + threadIdx.x * 8 + k] = acc[k]; }
    __syncthreads();
    int col = threadIdx.y * 32 + threadIdx.x;  // 0..255: one column of the block per thread
    if ((int)blockIdx.x * 256 + col < cols) {
        float sum = 0.0f;
        for (int y = 0; y < 8; y++) { sum += phase_sums[y * 256 + col]; }
        partials[blockIdx.x * 256 + col] = sum;
    }
}

// Row splits for a first stage over rows rows: one per 64 rows, at most COLUMN_SUM_MAX_SPLITS.
inline int column_sum_splits(int rows) {
    int splits = ceil_div(rows, 64);
    return splits > COLUMN_SUM_MAX_SPLITS ? COLUMN_SUM_MAX_SPLITS : splits;
}

// ----------------------------------------------------------------------------
// Deterministic second stage of a column reduction: out[c] += sum over rows r of
// partials[r * row_stride + c], for c < cols, always in the same order.
// Block (32, 16): 32 columns; the 16 threads of a column each sum rows y, y+16, ... in order,
// then thread y = 0 adds the 16 sums in order. Launch with grid ceil(cols / 32).
__global__ void column_sum_accumulate_kernel(floatX* out, const float* partials, int rows, int cols,
                                             int row_stride) {
    SHARED_ARRAY(float, sums, 16 * 32);
    int c = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < cols) {
        for (int r = threadIdx.y; r < rows; r += 16) { acc += partials[(size_t)r * row_stride + c]; }
    }
    sums[threadIdx.y * 32 + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float total = 0.0f;
        for (int y = 0; y < 16; y++) { total += sums[y * 32 + threadIdx.x]; }
        out[c] = (floatX)((float)out[c] + total);
    }
}

// out (cols) += column sums of partials (rows, cols with row_stride), deterministic
inline void column_sum_accumulate(floatX* out, const float* partials, int rows, int cols, int row_stride,
                                  cudaStream_t stream) {
    cuda_launch(column_sum_accumulate_kernel, dim3(ceil_div(cols, 32)), dim3(32, 16), 0, stream,
                out, partials, rows, cols, row_stride);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// Column sums of a bf16 matrix, both stages: the bias gradients no other pass computes (matmul_backward's
// path where cuBLASLt's bias-gradient epilogues are unavailable or switched off).

// partials (gridDim.y, cols) fp32: column sums of x (rows, cols) over this block's rows.
// Block (32, 8): threadIdx.x picks an 8-column pack of the block's 256 columns, threadIdx.y one of
// 8 row phases (column_pack_partials_store adds the phases in order).
__global__ void column_sums_partials_kernel(float* partials, const floatX* x, int rows, int cols) {
    int c = blockIdx.x * 256 + threadIdx.x * x128::size;
    float acc[x128::size] = {};
    if (c < cols) {
        for (int row = blockIdx.y * 8 + threadIdx.y; row < rows; row += gridDim.y * 8) {
            x128 d = load128(x + (size_t)row * cols + c);
            for (int k = 0; k < x128::size; k++) { acc[k] += (float)d[k]; }
        }
    }
    column_pack_partials_store(partials + (size_t)blockIdx.y * cols, acc, cols);
}

// out (cols) += column sums of x (rows, cols), deterministic; cols a multiple of 8;
// scratch: COLUMN_SUM_MAX_SPLITS * cols floats on the device
inline void column_sums_accumulate_bf16(floatX* out, float* scratch, const floatX* x, int rows, int cols,
                                        cudaStream_t stream) {
    CHECK_MULTIPLE_OF(cols, 8);
    CHECK_ALIGNED16(x);
    int splits = column_sum_splits(rows);
    cuda_launch(column_sums_partials_kernel, dim3(ceil_div(cols, 256), splits), dim3(32, 8), 0, stream,
                scratch, x, rows, cols);
    cudaCheck(cudaGetLastError());
    column_sum_accumulate(out, scratch, splits, cols, cols, stream);  // out += splits' sums, in order
}
