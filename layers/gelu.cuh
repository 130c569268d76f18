// GELU, tanh approximation (GPT-2's). CPU twin: layers/gelu_cpu.h, test: test/test_layers_cuda.cu,
// experiments: dev/gelu.cu. Elementwise, 128-bit packs with a scalar tail for N % 8 != 0.
// The forward is usually fused into the fc matmul (layers/matmul.cuh, GELU_AUX_BIAS epilogue);
// these kernels serve the unfused path and the backward.
#pragma once

#include <cmath>
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2/pi)

__device__ __forceinline__ float gelu_value(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}

__device__ __forceinline__ float gelu_derivative(float x) {
    float cube = 0.044715f * x * x * x;
    float tanh_out = tanhf(GELU_SCALING_FACTOR * (x + cube));
    float sech2 = 1.0f - tanh_out * tanh_out;
    return 0.5f * (1.0f + tanh_out) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
}

// ----------------------------------------------------------------------------
// kernels

// out, inp (N); one thread per 8 elements. out may alias inp.
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, int N) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx + x128::size <= N) {
        x128 x = load128(inp + idx);
        x128 y;
        for (int k = 0; k < x128::size; k++) { y[k] = (floatX)gelu_value((float)x[k]); }
        store128(out + idx, y);
    } else {
        for (int i = idx; i < N; i++) { out[i] = (floatX)gelu_value((float)inp[i]); }
    }
}

// d_in_out (N): dout in, dinp out (= gelu'(inp) * dout, written in place); inp (N) the pre-GELU input.
__global__ void gelu_backward_inplace_kernel(floatX* d_in_out, const floatX* inp, int N) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx + x128::size <= N) {
        x128 d = load128(d_in_out + idx);
        x128 x = load128(inp + idx);
        for (int k = 0; k < x128::size; k++) { d[k] = (floatX)(gelu_derivative((float)x[k]) * (float)d[k]); }
        store128(d_in_out + idx, d);
    } else {
        for (int i = idx; i < N; i++) { d_in_out[i] = (floatX)(gelu_derivative((float)inp[i]) * (float)d_in_out[i]); }
    }
}

// ----------------------------------------------------------------------------
// launchers

// out, inp (N), may alias
void gelu_forward(floatX* out, const floatX* inp, int N, cudaStream_t stream) {
    CHECK_ALIGNED16(out); CHECK_ALIGNED16(inp);
    const int block_size = 256;
    cuda_launch(gelu_forward_kernel, dim3(ceil_div(N, block_size * x128::size)), dim3(block_size), 0, stream,
                out, inp, N);
    cudaCheck(cudaGetLastError());
}

// d_in_out (N): dout on entry, dinp on return (written =, not accumulated); inp (N) pre-GELU
void gelu_backward_inplace(floatX* d_in_out, const floatX* inp, int N, cudaStream_t stream) {
    CHECK_ALIGNED16(d_in_out); CHECK_ALIGNED16(inp);
    const int block_size = 256;
    cuda_launch(gelu_backward_inplace_kernel, dim3(ceil_div(N, block_size * x128::size)), dim3(block_size), 0,
                stream, d_in_out, inp, N);
    cudaCheck(cudaGetLastError());
}
