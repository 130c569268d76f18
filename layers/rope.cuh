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

// out, inp (B*T, 3, C = NH*hd); freqs_cis (T, hd/2, 2). One thread per 8-element pack (16 bytes) of
// q or k, and of v when sections = 3 (copied: out != inp). C % 8 == 0, so no pack straddles q, k, v;
// hd is even, so none straddles a pair (one may straddle heads when hd % 8 != 0).
// sign +1 rotates (forward), -1 rotates back (backward: the rotation is orthogonal).
// out may alias inp: each thread reads then writes its own pack.
__global__ void rope_kernel(floatX* out, const floatX* inp, const float* freqs_cis, int BT, int T, int C, int hd,
                            int sections, float sign) {
    int packs = C / x128::size;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // over (B*T, sections, C/8)
    if (idx >= BT * sections * packs) { return; }
    int pack = idx % packs;
    int section = (idx / packs) % sections;
    int bt = idx / (packs * sections);
    size_t offset = (size_t)bt * 3 * C + (size_t)section * C + (size_t)pack * x128::size;
    x128 x = load128(inp + offset);
    if (section < 2) {
        int half = hd / 2;
        int c0 = pack * x128::size % hd;  // the pack's first element within its head
        const float* cs = freqs_cis + ((size_t)(bt % T) * half + c0 / 2) * 2;
        float cos_sin[x128::size];  // {cos, sin} of the pack's 4 pairs
        if (c0 + x128::size <= hd && c0 % 4 == 0) {  // 4 pairs in one head, 16-byte aligned: two f128 loads
            f128 a = load128(cs), b = load128(cs + f128::size);
            for (int k = 0; k < f128::size; k++) { cos_sin[k] = a[k]; cos_sin[f128::size + k] = b[k]; }
        } else {
            for (int j = 0; j < x128::size / 2; j++) {
                int c = (c0 + 2 * j) % hd;  // wraps into the next head
                const float* e = freqs_cis + ((size_t)(bt % T) * half + c / 2) * 2;
                cos_sin[2 * j] = e[0];
                cos_sin[2 * j + 1] = e[1];
            }
        }
        for (int j = 0; j < x128::size / 2; j++) {
            float x0 = (float)x[2 * j], x1 = (float)x[2 * j + 1];
            float c = cos_sin[2 * j], s = sign * cos_sin[2 * j + 1];
            x[2 * j] = (floatX)(x0 * c - x1 * s);
            x[2 * j + 1] = (floatX)(x0 * s + x1 * c);
        }
    }
    store128(out + offset, x);
}

// ----------------------------------------------------------------------------
// launchers

inline void rope_launch(floatX* out, const floatX* inp, const float* freqs_cis, int B, int T, int NH, int hd,
                        float sign, const char* name, cudaStream_t stream) {
    if (hd % 2 != 0) {
        fprintf(stderr, "[ERROR] %s: head size hd = %d must be even (pairs are rotated)\n", name, hd);
        exit(EXIT_FAILURE);
    }
    int C = NH * hd;
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_ALIGNED16(out);
    CHECK_ALIGNED16(inp);
    const int block_size = 256;
    int sections = out == inp ? 2 : 3;  // in place, v is left as it is
    long long num_packs = (long long)B * T * sections * (C / 8);
    cuda_launch(rope_kernel, dim3((unsigned)ceil_div(num_packs, block_size)), dim3(block_size), 0, stream,
                out, inp, freqs_cis, B * T, T, C, hd, sections, sign);
    cudaCheck(cudaGetLastError());
}

// out, inp (B,T,3,NH,hd), may alias; freqs_cis (>=T, hd/2, 2) device, from rope_precompute_freqs;
// hd even, NH*hd a multiple of 8, out and inp 16-byte aligned
void rope_forward(floatX* out, const floatX* inp, const float* freqs_cis, int B, int T, int NH, int hd,
                  cudaStream_t stream) {
    rope_launch(out, inp, freqs_cis, B, T, NH, hd, 1.0f, "rope_forward", stream);
}

// dinp, dout (B,T,3,NH,hd), may alias (written =, not accumulated); freqs_cis and shapes as in rope_forward
void rope_backward(floatX* dinp, const floatX* dout, const float* freqs_cis, int B, int T, int NH, int hd,
                   cudaStream_t stream) {
    rope_launch(dinp, dout, freqs_cis, B, T, NH, hd, -1.0f, "rope_backward", stream);
}
