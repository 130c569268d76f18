// Residual add. CPU twin: layers/residual_cpu.h, test: test/test_layers_cuda.cu.
// The backward needs no kernel: the residual stream's gradient buffer is shared by both branches
// (layernorm_backward and matmul_backward accumulate into it). The add fused with the next
// layernorm lives in layers/layernorm.cuh (fused_residual_layernorm_forward).
#pragma once

#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// out, inp1, inp2 (N); one thread per 8 elements, scalar tail for N % 8 != 0. out may alias an input.
__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx + x128::size <= N) {
        x128 a = load128(inp1 + idx);
        x128 b = load128(inp2 + idx);
        x128 o;
        for (int k = 0; k < x128::size; k++) { o[k] = (floatX)((float)a[k] + (float)b[k]); }
        store128(out + idx, o);
    } else {
        for (int i = idx; i < N; i++) { out[i] = (floatX)((float)inp1[i] + (float)inp2[i]); }
    }
}

// out, inp1, inp2 (N)
void residual_forward(floatX* out, const floatX* inp1, const floatX* inp2, int N, cudaStream_t stream) {
    CHECK_ALIGNED16(out); CHECK_ALIGNED16(inp1); CHECK_ALIGNED16(inp2);
    const int block_size = 256;
    cuda_launch(residual_forward_kernel, dim3(ceil_div(N, block_size * x128::size)), dim3(block_size), 0, stream,
                out, inp1, inp2, N);
    cudaCheck(cudaGetLastError());
}
