// Rotary position embedding on q and k inside qkv. CPU twin: layers/rope_cpu.h,
// test: test/test_layers_cuda.cu, experiments: dev/rope.cu.
// Interleaved pairs (2i, 2i+1) of every head are rotated by angle t * base^(-2i/hd).
// The cos/sin table is computed once on the host in double (the angle t*freq reaches
// thousands of radians, where fp32 sin/cos of the product, fast-math or not, lose accuracy).
#pragma once

#include <cmath>
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// floats of the cos/sin table of T positions: (T, hd/2, 2)
inline size_t rope_table_floats(int T, int hd) { return (size_t)T * (hd / 2) * 2; }

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

// Rotates the pack x (8 elements of q or k: 4 pairs) at position t, whose first element is c0 of
// its head (c0 even). sign +1 rotates (forward), -1 rotates back (backward: the rotation is
// orthogonal). When hd % 8 != 0 the pack may run into the next head.
__device__ inline void rope_rotate_pack(x128& x, const float* freqs_cis, int t, int c0, int hd, float sign) {
    int half = hd / 2;
    const float* cs = freqs_cis + ((size_t)t * half + c0 / 2) * 2;
    float cos_sin[x128::size];  // {cos, sin} of the pack's 4 pairs
    if (c0 + x128::size <= hd && c0 % 4 == 0) {  // 4 pairs in one head, 16-byte aligned: two f128 loads
        f128 a = load128(cs), b = load128(cs + f128::size);
        for (int k = 0; k < f128::size; k++) { cos_sin[k] = a[k]; cos_sin[f128::size + k] = b[k]; }
    } else {
        for (int j = 0; j < x128::size / 2; j++) {
            int c = (c0 + 2 * j) % hd;  // wraps into the next head
            const float* e = freqs_cis + ((size_t)t * half + c / 2) * 2;
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

// out, inp (B*T, 3, C = NH*hd); freqs_cis (T, hd/2, 2). One thread per 8-element pack (16 bytes) of
// q or k, and of v when sections = 3 (copied: out != inp). C % 8 == 0, so no pack straddles q, k, v;
// hd is even, so none straddles a pair. out may alias inp: each thread reads then writes its pack.
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
    if (section < 2) { rope_rotate_pack(x, freqs_cis, bt % T, pack * x128::size % hd, hd, sign); }
    store128(out + offset, x);
}

// The backward of RoPE fused with the qkv bias gradient, in one pass over dqkv:
// dqkv (B*T, 3C): in: d(rotated qkv), out: d qkv (q, k rotated back, v as it is), in place;
// scratch (gridDim.y, 3C) fp32: partial column sums of the output d qkv (the bias gradient) over
// this block's rows. Block (32, 8) over 256 columns, grid (ceil(3C / 256), splits).
__global__ void rope_backward_bias_kernel(floatX* dqkv, float* scratch, const float* freqs_cis, int BT, int T,
                                          int C, int hd) {
    int c = blockIdx.x * 256 + threadIdx.x * x128::size;  // column of 3C
    float acc[x128::size] = {};
    if (c < 3 * C) {
        bool rotated = c < 2 * C;
        int c0 = c % C % hd;
        for (int row = blockIdx.y * 8 + threadIdx.y; row < BT; row += gridDim.y * 8) {
            floatX* p = dqkv + (size_t)row * 3 * C + c;
            x128 x = load128(p);
            if (rotated) {
                rope_rotate_pack(x, freqs_cis, row % T, c0, hd, -1.0f);
                store128(p, x);
            }
            for (int k = 0; k < x128::size; k++) { acc[k] += (float)x[k]; }
        }
    }
    column_pack_partials_store(scratch + (size_t)blockIdx.y * 3 * C, acc, 3 * C);
}

// ----------------------------------------------------------------------------
// launchers

inline void rope_check(int NH, int hd, const char* name) {
    if (hd % 2 != 0) {
        fprintf(stderr, "[ERROR] %s: head size hd = %d must be even (pairs are rotated)\n", name, hd);
        exit(EXIT_FAILURE);
    }
    CHECK_MULTIPLE_OF(NH * hd, 8);
}

inline void rope_launch(floatX* out, const floatX* inp, const float* freqs_cis, int B, int T, int NH, int hd,
                        float sign, const char* name, cudaStream_t stream) {
    rope_check(NH, hd, name);
    int C = NH * hd;
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

// dqkv (B,T,3,NH,hd): in: the gradient of the rotated qkv, out: that of qkv (= rope_backward in
// place); dbias (3C) += column sums of the output (the qkv bias gradient, deterministic), in the
// same pass; scratch: COLUMN_SUM_MAX_SPLITS * 3C floats on the device
void rope_backward_bias(floatX* dqkv, floatX* dbias, float* scratch, const float* freqs_cis, int B, int T, int NH,
                        int hd, cudaStream_t stream) {
    rope_check(NH, hd, "rope_backward_bias");
    CHECK_ALIGNED16(dqkv);
    int C = NH * hd;
    int splits = column_sum_splits(B * T);
    cuda_launch(rope_backward_bias_kernel, dim3(ceil_div(3 * C, 256), splits), dim3(32, 8), 0, stream,
                dqkv, scratch, freqs_cis, B * T, T, C, hd);
    cudaCheck(cudaGetLastError());
    column_sum_accumulate(dbias, scratch, splits, 3 * C, 3 * C, stream);  // dbias += splits' sums, in order
}
