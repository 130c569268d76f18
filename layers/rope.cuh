// Rotary position embedding on q and k inside qkv. CPU twin: layers/rope_cpu.h,
// test: test/test_layers_cuda.cu, experiments: dev/rope.cu.
// Interleaved pairs (2i, 2i+1) of every head are rotated by angle t * base^(-2i/hd).
// The cos/sin table is computed once on the host in double (the angle t*freq reaches
// thousands of radians, where fp32 sin/cos of the product, fast-math or not, lose accuracy).
#pragma once

#include <cmath>
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// freqs_cis (T, hd/2, 2) float on the host: {cos, sin} of t * base^(-2i/hd)
inline void rope_precompute_freqs(float* freqs_cis, int T, int hd, double base) {
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < hd / 2; i++) {
            double angle = t * std::pow(base, -2.0 * i / hd);
            freqs_cis[((size_t)t * (hd / 2) + i) * 2 + 0] = (float)std::cos(angle);
            freqs_cis[((size_t)t * (hd / 2) + i) * 2 + 1] = (float)std::sin(angle);
        }
    }
}

// ----------------------------------------------------------------------------
// kernel

// out, inp (B, T, 3, NH, hd); freqs_cis (T, hd/2, 2). One thread per pair of q, k or v.
// sign +1 rotates (forward), -1 rotates back (backward: the rotation is orthogonal).
// v pairs are copied when out != inp. out may alias inp: each thread reads then writes its own pair.
__global__ void rope_kernel(floatX* out, const floatX* inp, const float* freqs_cis, int B, int T, int NH, int hd,
                            float sign) {
    int half = hd / 2;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over (B, T, 3, NH, hd/2)
    if (idx >= B * T * 3 * NH * half) { return; }
    int i = idx % half;
    int qkv = (idx / (half * NH)) % 3;
    int t = (idx / (half * NH * 3)) % T;
    size_t offset = (size_t)idx * 2;
    float x0 = (float)inp[offset];
    float x1 = (float)inp[offset + 1];
    if (qkv == 2) {
        if (out != inp) {
            out[offset] = (floatX)x0;
            out[offset + 1] = (floatX)x1;
        }
        return;
    }
    float c = freqs_cis[((size_t)t * half + i) * 2 + 0];
    float s = sign * freqs_cis[((size_t)t * half + i) * 2 + 1];
    out[offset] = (floatX)(x0 * c - x1 * s);
    out[offset + 1] = (floatX)(x0 * s + x1 * c);
}

// ----------------------------------------------------------------------------
// launchers

// out, inp (B,T,3,NH,hd), may alias; freqs_cis (>=T, hd/2, 2) device, from rope_precompute_freqs
void rope_forward(floatX* out, const floatX* inp, const float* freqs_cis, int B, int T, int NH, int hd,
                  cudaStream_t stream) {
    if (hd % 2 != 0) {
        fprintf(stderr, "[ERROR] rope_forward: head size hd = %d must be even (pairs are rotated)\n", hd);
        exit(EXIT_FAILURE);
    }
    const int block_size = 256;
    int num_pairs = B * T * 3 * NH * hd / 2;
    cuda_launch(rope_kernel, dim3(ceil_div(num_pairs, block_size)), dim3(block_size), 0, stream,
                out, inp, freqs_cis, B, T, NH, hd, 1.0f);
    cudaCheck(cudaGetLastError());
}

// dinp, dout (B,T,3,NH,hd), may alias (written =, not accumulated); freqs_cis as in rope_forward
void rope_backward(floatX* dinp, const floatX* dout, const float* freqs_cis, int B, int T, int NH, int hd,
                   cudaStream_t stream) {
    if (hd % 2 != 0) {
        fprintf(stderr, "[ERROR] rope_backward: head size hd = %d must be even (pairs are rotated)\n", hd);
        exit(EXIT_FAILURE);
    }
    const int block_size = 256;
    int num_pairs = B * T * 3 * NH * hd / 2;
    cuda_launch(rope_kernel, dim3(ceil_div(num_pairs, block_size)), dim3(block_size), 0, stream,
                dinp, dout, freqs_cis, B, T, NH, hd, -1.0f);
    cudaCheck(cudaGetLastError());
}
