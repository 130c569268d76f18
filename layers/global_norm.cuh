// Global gradient norm (squared sum), deterministic two-stage reduction: every tensor adds its
// per-block sums into a fixed number of fp32 slots (the same slot count and order on every run and
// GPU), then one block adds the slots in a fixed tree. CPU twin: layers/global_norm_cpu.h,
// test: test/test_layers_cuda.cu, experiments: dev/global_norm.cu.
#pragma once

#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

constexpr int GLOBAL_NORM_BLOCKS = 256;  // slots of partial sums (fixed: independent of the GPU)

// ----------------------------------------------------------------------------
// kernels

// partials (GLOBAL_NORM_BLOCKS) fp32: slot blockIdx.x = (reset ? 0 : slot) + this block's sum of squares;
// values (count) floatX. Grid-stride over 8-wide packs, then a scalar tail.
__global__ void global_norm_squared_kernel(float* partials, const floatX* values, size_t count, bool reset) {
    size_t num_packs = count / x128::size;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (size_t i = tid; i < num_packs; i += stride) {
        x128 p = load128(values + i * x128::size);
        for (int k = 0; k < x128::size; k++) { float x = (float)p[k]; acc += x * x; }
    }
    for (size_t i = num_packs * x128::size + tid; i < count; i += stride) {
        float x = (float)values[i];
        acc += x * x;
    }
    float block_total = block_sum(acc);
    if (threadIdx.x == 0) { partials[blockIdx.x] = reset ? block_total : partials[blockIdx.x] + block_total; }
}

// out (1) fp32 = sum of partials (num_partials), one block
__global__ void global_norm_aggregate_kernel(float* out, const float* partials, int num_partials) {
    float acc = 0.0f;
    for (int i = threadIdx.x; i < num_partials; i += blockDim.x) { acc += partials[i]; }
    float total = block_sum(acc);
    if (threadIdx.x == 0) { *out = total; }
}

// ----------------------------------------------------------------------------
// launchers

// partials (GLOBAL_NORM_BLOCKS) fp32 on the device; values (count) floatX, 16-byte aligned.
// reset = true for the first tensor of a norm, false to add further tensors.
void global_norm_squared(float* partials, const floatX* values, size_t count, bool reset, cudaStream_t stream) {
    CHECK_ALIGNED16(values);
    const int block_size = 512;
    cuda_launch(global_norm_squared_kernel, dim3(GLOBAL_NORM_BLOCKS), dim3(block_size), 0, stream,
                partials, values, count, reset);
    cudaCheck(cudaGetLastError());
}

// out (1) fp32 on the device = the squared norm accumulated in partials (GLOBAL_NORM_BLOCKS)
void global_norm_aggregate(float* out, const float* partials, cudaStream_t stream) {
    const int block_size = 256;
    cuda_launch(global_norm_aggregate_kernel, dim3(1), dim3(block_size), 0, stream, out, partials,
                GLOBAL_NORM_BLOCKS);
    cudaCheck(cudaGetLastError());
}
