// Attention on the GPU: the one entry point the trainer calls, for every variant of the family
// (attention/attention_kind.h; specification doc/attention.md). Kernels:
// attention/attention_forward.cuh, attention/attention_backward.cuh (shared parts in
// attention/attention_common.cuh); CPU twin: attention/attention_cpu.h;
// test: test/test_attention_cuda.cu; benchmarks: dev/attention_forward.cu, dev/attention_backward.cu.
//
//   qkv     (B, T, 3, NH, hd) bf16   q, k, v of every head, RoPE applied to q and k
//   out     (B, T, NH, hd)    bf16
//   stats   (B, NH, T, 3)     fp32   what the forward saves for the backward (the CPU reference's
//                                    layout): l1 (lse or S1, m, Z), none and mean (0, 0, 0); lse in
//                                    log2 units (lse log2 e: the backward's), the reference's is natural
//   scratch attention_scratch_bytes(B, T, NH, hd) bytes, reused by forward and backward; the
//           forward's part (q and k scales, (B, NH, 5, T) in all) is O(B NH T), the backward adds
//           (B, NH, T, 2) row dots, two fp32 (B, T, NH, hd) gradient accumulators and a flag
//           (evaluation: attention_scratch_bytes(B, T, NH, hd, false))
//   dqkv    (B, T, 3, NH, hd) bf16   written (=), not accumulated, like llm.c's attention
// Memory kept between forward and backward beyond q, k, v and out: stats, 3 floats per row.
// hd must be 32, 64 or 128. p: the head parameter (attn_head_param) of every head: the re-weighting
// power, >= 1; ssmax's s; ignored by the other variants.
// A head parameter per head (learned p, doc/attention.md, section 'Learned p'; ssmax's learned s),
// the re-weighting variants and ssmax only:
//   p_head  (NH)                fp32   head h's p (or s) in place of p (null: p for every head)
//   dp_head (NH)                fp32   the backward adds dL/dp (dL/ds) of every head (summed over the
//                                      batch) to it (null: not computed, and nothing of it is run)
// attn_len: the n of sigmoid's bias -ln(n) and relu's scale 1/n, 0 for the row's n_t = t + 1,
// L > 0 for the constant L (attn_len_n, attention/attention_kind.h); for softmax and softmax_rw
// L > 1 is log-length scaling, row t's scores times max(1, ln(n_t) / ln(L)) (attn_row_factor).
// A run-time argument of the kernels, no instantiation of its own.
// The kind becomes a compile-time constant through attn_dispatch: a program built for one
// variant (make ATTN=...) holds that variant's kernels only.
#pragma once

#include <cmath>
#include "layers/cuda_common.cuh"
#include "attention/attention_kind.h"
#include "attention/attention_forward.cuh"
#include "attention/attention_backward.cuh"

// The scratch regions, each starting 16 bytes apart at least (a multiple of 4 floats from the
// cudaMalloc'd start): dqh takes 8-byte vector atomics (atomic_add2), which fault on a GPU at an
// address that is not a multiple of 8, whatever B NH T is.
inline size_t attention_scratch_region_floats(size_t floats) { return (floats + 3) / 4 * 4; }

// Scratch of forward and backward; with backward = false only what the forward needs (evaluation).
inline size_t attention_scratch_bytes(int B, int T, int NH, int hd, bool backward = true) {
    size_t rows = (size_t)B * NH * T, scales = attention_scratch_region_floats(5 * rows);
    if (!backward) { return sizeof(float) * scales; }
    return sizeof(float) * (scales + attention_scratch_region_floats(2 * rows) +
                            2 * attention_scratch_region_floats(rows * hd) + attention_scratch_region_floats(1));
}

struct AttentionScratch {
    float* scales;     // (B, NH, 4, T), then kfm (B, NH, T) (attention_common.cuh)
    float* rowd;       // (B, NH, T, 2)
    float* dqh;        // (B, T, NH, hd)
    float* dkh;        // (B, T, NH, hd)
    float* shift_off;  // 1: the backward's exp shift is off for this launch (attn_bwd_shifts)
};
inline AttentionScratch attention_scratch_split(void* scratch, int B, int T, int NH, int hd) {
    size_t rows = (size_t)B * NH * T;
    AttentionScratch s;
    s.scales = (float*)scratch;
    s.rowd = s.scales + attention_scratch_region_floats(5 * rows);
    s.dqh = s.rowd + attention_scratch_region_floats(2 * rows);
    s.dkh = s.dqh + attention_scratch_region_floats(rows * hd);
    s.shift_off = s.dkh + attention_scratch_region_floats(rows * hd);
    return s;
}

inline void attention_check_args(int B, int T, int NH, int hd, AttnKind kind, float p, int attn_len, const char* who) {
    if (hd != 32 && hd != 64 && hd != 128) {
        fprintf(stderr, "[ERROR] %s: head size hd = %d is not supported; the attention kernels "
                        "(attention/attention.cuh) take hd = 32, 64 or 128\n", who, hd);
        exit(EXIT_FAILURE);
    }
    if (B < 1 || T < 1 || NH < 1) {
        fprintf(stderr, "[ERROR] %s: B = %d, T = %d, NH = %d: every dimension must be >= 1\n", who, B, T, NH);
        exit(EXIT_FAILURE);
    }
    if ((long long)B * NH > 65535) {
        fprintf(stderr, "[ERROR] %s: B * NH = %lld is above 65535, the largest gridDim.y of the attention "
                        "kernels; split the batch\n", who, (long long)B * NH);
        exit(EXIT_FAILURE);
    }
    if (attn_reweights(kind) && !(p >= 1.0f)) {
        fprintf(stderr, "[ERROR] %s: %s's re-weighting power p = %g must be >= 1 (the paper uses 3 and 15)\n", who,
                attn_kind_name(kind), p);
        exit(EXIT_FAILURE);
    }
    std::string len_error = attn_len_error(kind, attn_len);
    if (!len_error.empty()) {
        fprintf(stderr, "[ERROR] %s: %s\n", who, len_error.c_str());
        exit(EXIT_FAILURE);
    }
}

// A per-head parameter exists for the re-weighting variants (learned p) and ssmax (s) only: a
// per-head p or dp elsewhere is a programming error (the model refuses such a config first).
inline void attention_check_learned_p(AttnKind kind, const float* p_head, const float* dp_head, const char* who) {
    if ((p_head != nullptr || dp_head != nullptr) && attn_head_param(kind) == ATTN_HEAD_NONE) {
        fprintf(stderr, "[ERROR] %s: a per-head p (learned p, ssmax's s) was given to %s, which has no head "
                        "parameter\n", who, attn_kind_name(kind));
        exit(EXIT_FAILURE);
    }
    if (dp_head != nullptr && p_head == nullptr) {
        fprintf(stderr, "[ERROR] %s: dp_head without p_head: dL/dp is computed for a learned per-head p only\n", who);
        exit(EXIT_FAILURE);
    }
}

template <int HD, AttnKind K>
void attention_forward_hd(floatX* out, float* stats, const floatX* qkv, void* scratch, int B, int T, int NH, float p,
                          const float* p_head, int attn_len, cudaStream_t stream) {
    using Tile = AttnTile<HD>;
    dim3 grid(ceil_div(T, Tile::ROWS), B * NH);
    AttentionScratch s = attention_scratch_split(scratch, B, T, NH, HD);
    int rows = B * T * NH;
    if (AttnTraits<K>::cos_len) {
        cuda_launch(attn_row_scales_kernel<HD>, ceil_div(rows, 8), 256, 0, stream, s.scales, qkv, B, T, NH);
    }
    cuda_launch((attention_forward_kernel<HD, K>), grid, Tile::THREADS, 0, stream, out, stats, qkv,
                (const float*)s.scales, T, NH, p, p_head, attn_len);
}

template <int HD, AttnKind K>
void attention_backward_hd(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                           const float* stats, void* scratch, int B, int T, int NH, float p, const float* p_head,
                           float* dp_head, int attn_len, cudaStream_t stream) {
    using Tile = AttnTile<HD>;
    using V = AttnTraits<K>;
    dim3 grid(ceil_div(T, Tile::ROWS), B * NH);
    AttentionScratch s = attention_scratch_split(scratch, B, T, NH, HD);
    int rows = B * T * NH;
    cudaCheck(cudaMemsetAsync(s.dqh, 0, sizeof(float) * rows * HD, stream));
    if (AttnTraits<K>::cos_len) {
        cuda_launch(attn_row_scales_kernel<HD>, ceil_div(rows, 8), 256, 0, stream, s.scales, qkv, B, T, NH);
    }
    if constexpr (V::reweight) {  // (attention_rowd_kernel exists for the re-weighting variants only)
        if (dp_head != nullptr) {  // D2, D1 and learned p's dL/dp
            cuda_launch((attention_rowd_kernel<HD, K, true>), grid, Tile::THREADS, 0, stream, s.rowd, dp_head, dout,
                        qkv, stats, (const float*)s.scales, T, NH, p, p_head, attn_len);
        } else {  // D2 and D1 from the unrounded weights
            cuda_launch((attention_rowd_kernel<HD, K, false>), grid, Tile::THREADS, 0, stream, s.rowd,
                        (float*)nullptr, dout, qkv, stats, (const float*)s.scales, T, NH, p, p_head, attn_len);
        }
    } else if (V::norm == ATTN_NORM_L1) {  // D2 = D1 = dy . y
        float* shift_off = attn_bwd_shifts<K>() ? s.shift_off : nullptr;  // exp: then the shifted lse into D2's place
        if (shift_off != nullptr) { cudaCheck(cudaMemsetAsync(shift_off, 0, sizeof(float), stream)); }
        cuda_launch(attention_rowdot_kernel<HD>, ceil_div(rows, 8), 256, 0, stream, s.rowd, dout, out, B, T, NH, stats,
                    shift_off);
        if (shift_off != nullptr) {
            cuda_launch(attn_bwd_norm_kernel, ceil_div(rows, 256), 256, 0, stream, s.rowd, stats,
                        (const float*)shift_off, rows);
        }
    } else {  // none, mean: no row sum to differentiate
        cudaCheck(cudaMemsetAsync(s.rowd, 0, sizeof(float) * rows * 2, stream));
    }
    constexpr size_t dyn_smem = attn_bwd_dynamic_smem<HD, K>();  // above 48 KiB with the static part: opt in
    cudaCheck(cudaFuncSetAttribute(attention_backward_kernel<HD, K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)dyn_smem));
    cuda_launch((attention_backward_kernel<HD, K>), grid, Tile::THREADS, dyn_smem, stream, dqkv, s.dqh, s.dkh, dout, qkv,
                stats, (const float*)s.rowd, (const float*)s.scales, T, NH, p, p_head, attn_len,
                (const float*)s.shift_off);
    if constexpr (V::ssmax) {  // dL/ds from dqh, before attn_normgrad_kernel (which reads it too)
        if (dp_head != nullptr) {
            cuda_launch(attn_ssmax_ds_kernel<HD>, dim3(ceil_div(T, ATTN_SSMAX_DS_ROWS), B * NH),
                        32 * ATTN_SSMAX_DS_WARPS, 0, stream, dp_head, (const float*)s.dqh, qkv, T, NH,
                        (const float*)s.shift_off);
        }
    }
    cuda_launch((attn_normgrad_kernel<HD, K>), ceil_div(rows, 8), 256, 0, stream, dqkv, (const float*)s.dqh,
                (const float*)s.dkh, qkv, (const float*)s.scales, B, T, NH, p, p_head, attn_len,
                (const float*)s.shift_off);
}

// out, stats = attention(qkv). scratch: attention_scratch_bytes(B, T, NH, hd) bytes.
inline void attention_forward_cuda(floatX* out, float* stats, const floatX* qkv, void* scratch, int B, int T,
                                   int NH, int hd, AttnKind kind, float p, cudaStream_t stream = 0,
                                   const float* p_head = nullptr, int attn_len = 0) {
    attention_check_args(B, T, NH, hd, kind, p, attn_len, "attention_forward_cuda");
    attention_check_learned_p(kind, p_head, nullptr, "attention_forward_cuda");
    CHECK_ALIGNED16(qkv);  // 128-bit tile loads
    attn_dispatch(kind, [&](auto k) {
        constexpr AttnKind K = decltype(k)::value;
        switch (hd) {
            case 32: attention_forward_hd<32, K>(out, stats, qkv, scratch, B, T, NH, p, p_head, attn_len, stream); break;
            case 64: attention_forward_hd<64, K>(out, stats, qkv, scratch, B, T, NH, p, p_head, attn_len, stream); break;
            case 128: attention_forward_hd<128, K>(out, stats, qkv, scratch, B, T, NH, p, p_head, attn_len, stream); break;
        }
    });
    cudaCheck(cudaGetLastError());
}

// dqkv = d(loss)/d(qkv) from dout, recomputing the scores from qkv, out and stats.
inline void attention_backward_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                    const float* stats, void* scratch, int B, int T, int NH, int hd, AttnKind kind,
                                    float p, cudaStream_t stream = 0, const float* p_head = nullptr,
                                    float* dp_head = nullptr, int attn_len = 0) {
    attention_check_args(B, T, NH, hd, kind, p, attn_len, "attention_backward_cuda");
    attention_check_learned_p(kind, p_head, dp_head, "attention_backward_cuda");
    CHECK_ALIGNED16(qkv);
    CHECK_ALIGNED16(dout);
    CHECK_ALIGNED16(scratch);  // its regions start at multiples of 16 bytes from it
    attn_dispatch(kind, [&](auto k) {
        constexpr AttnKind K = decltype(k)::value;
        switch (hd) {
            case 32: attention_backward_hd<32, K>(dqkv, dout, qkv, out, stats, scratch, B, T, NH, p, p_head, dp_head,
                                                  attn_len, stream); break;
            case 64: attention_backward_hd<64, K>(dqkv, dout, qkv, out, stats, scratch, B, T, NH, p, p_head, dp_head,
                                                  attn_len, stream); break;
            case 128: attention_backward_hd<128, K>(dqkv, dout, qkv, out, stats, scratch, B, T, NH, p, p_head, dp_head,
                                                    attn_len, stream); break;
        }
    });
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// Learned p's parameter (doc/attention.md, section 'Learned p'): p = 1 + softplus(theta) per
// (layer, head); the CPU twins are learned_p and learned_p_dtheta (model/gpt2_config.h).
//   theta  (n) bf16, the parameter;  p, dp (n) fp32;  dtheta (n) bf16, the parameter's gradient

__global__ void learned_p_kernel(float* p, const floatX* theta, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float t = (float)theta[i];
    p[i] = 1.0f + softplus_from(t, expf(-fabsf(t)));
}

// dtheta += dp dp/dtheta = dp sigmoid(theta) (accumulates, like every parameter gradient)
__global__ void learned_p_backward_kernel(floatX* dtheta, const float* dp, const floatX* theta, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float t = (float)theta[i];
    dtheta[i] = (floatX)((float)dtheta[i] + dp[i] * sigmoid_from(t, expf(-fabsf(t))));
}

inline void learned_p_forward(float* p, const floatX* theta, int n, cudaStream_t stream = 0) {
    cuda_launch(learned_p_kernel, ceil_div(n, 128), 128, 0, stream, p, theta, n);
    cudaCheck(cudaGetLastError());
}

inline void learned_p_backward(floatX* dtheta, const float* dp, const floatX* theta, int n, cudaStream_t stream = 0) {
    cuda_launch(learned_p_backward_kernel, ceil_div(n, 128), 128, 0, stream, dtheta, dp, theta, n);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// ssmax's parameter: s per (layer, head), a bf16 parameter tensor like learned p's theta, passed to
// the kernels as p_head in fp32 as it is (the identity where learned p takes 1 + softplus(theta)).
//   s  (n) bf16, the parameter;  s_heads, ds_heads (n) fp32;  ds (n) bf16, the parameter's gradient

__global__ void ssmax_s_kernel(float* s_heads, const floatX* s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    s_heads[i] = (float)s[i];
}

// ds += ds_heads (accumulates, like every parameter gradient; ds_h/ds_h = 1)
__global__ void ssmax_s_backward_kernel(floatX* ds, const float* ds_heads, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    ds[i] = (floatX)((float)ds[i] + ds_heads[i]);
}

inline void ssmax_s_forward(float* s_heads, const floatX* s, int n, cudaStream_t stream = 0) {
    cuda_launch(ssmax_s_kernel, ceil_div(n, 128), 128, 0, stream, s_heads, s, n);
    cudaCheck(cudaGetLastError());
}

inline void ssmax_s_backward(floatX* ds, const float* ds_heads, int n, cudaStream_t stream = 0) {
    cuda_launch(ssmax_s_backward_kernel, ceil_div(n, 128), 128, 0, stream, ds, ds_heads, n);
    cudaCheck(cudaGetLastError());
}
