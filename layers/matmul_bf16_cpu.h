// bf16 path of the CPU matmul (the fp32 reference is layers/matmul_cpu.h): bf16 operands, fp32
// accumulation and fp32 results, through oneDNN's matmul primitive (link -ldnnl), which runs on
// AMX tiles where the CPU has them and on AVX512-BF16's dot products (vdpbf16ps) otherwise.
// Why oneDNN: Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (its cblas.h declares
// cblas_sbgemm, the library does not export it), and oneDNN is Intel's library for exactly these
// kernels, and runs the model's shapes faster than OpenBLAS's sgemm (build/profile_cpu measures
// both in every benchmark run; doc/performance.md has the figures).
// Shapes as nn.Linear: inp (N,C), w (OC,C), out (N,OC) = inp @ w^T + bias.
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "layers/bf16_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

struct MatmulBf16 {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    // one primitive per problem: (M, N, K, src transposed, wei transposed, accumulate, bias, alpha bits)
    typedef std::tuple<long, long, long, bool, bool, bool, bool, uint32_t> Key;
    std::map<Key, dnnl::matmul> primitives;

    // dst (M,N) fp32 [+]= alpha * src @ wei (+ bias (N)). src (M,K) bf16 is row-major, or with
    // src_t its transpose (K,M) is; wei (K,N) bf16 is given as row-major (K,N) or, with wei_t, as
    // row-major (N,K).
    void run(float* dst, const bf16* src, bool src_t, const bf16* wei, bool wei_t, const float* bias, long M, long N,
             long K, float alpha, bool accumulate) {
        using dt = dnnl::memory::data_type;
        using md = dnnl::memory::desc;
        md src_md({M, K}, dt::bf16, src_t ? dnnl::memory::dims{1, M} : dnnl::memory::dims{K, 1});
        md wei_md({K, N}, dt::bf16, wei_t ? dnnl::memory::dims{1, K} : dnnl::memory::dims{N, 1});
        md dst_md({M, N}, dt::f32, {N, 1});
        md bias_md({1, N}, dt::f32, {N, 1});
        uint32_t alpha_bits;
        memcpy(&alpha_bits, &alpha, 4);
        Key key(M, N, K, src_t, wei_t, accumulate, bias != nullptr, alpha_bits);
        auto found = primitives.find(key);
        if (found == primitives.end()) {
            dnnl::primitive_attr attr;
            if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
            if (accumulate) {
                dnnl::post_ops ops;
                ops.append_sum(1.0f);
                attr.set_post_ops(ops);
            }
            dnnl::matmul::desc desc = bias ? dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md)
                                           : dnnl::matmul::desc(src_md, wei_md, dst_md);
            found = primitives.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine))).first;
        }
        dnnl::memory src_mem(src_md, engine, (void*)src), wei_mem(wei_md, engine, (void*)wei);
        dnnl::memory dst_mem(dst_md, engine, dst);
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
        if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, engine, (void*)bias));
        found->second.execute(stream, args);
        stream.wait();
    }

    // out (N,OC) = inp (N,C) @ w (OC,C)^T + bias (OC, or null)
    void forward(float* out, const bf16* inp, const bf16* w, const float* bias, int N, int C, int OC) {
        run(out, inp, false, w, true, bias, N, OC, C, 1.0f, false);
    }
    // dinp (N,C) = alpha * dout (N,OC) @ w (OC,C)            (overwrites: each dinp has one writer)
    // dw (OC,C) += alpha * dout^T (OC,N) @ inp (N,C)         (accumulates over micro-steps)
    void backward(float* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int N, int C, int OC,
                  float alpha = 1.0f) {
        run(dinp, dout, false, w, false, nullptr, N, C, OC, alpha, false);
        run(dw, dout, true, inp, false, nullptr, OC, C, N, alpha, true);
    }
};

// The matmul backward's dout in bf16 and the bias gradient from its fp32 values:
// dout_bf (N,OC) = bf16(dout (N,OC)); dbias (OC) += column sums of dout (null: none).
// Parallel over chunks of rows, the sums by colsum_finish (the same bits for any number of
// threads); partial: scratch.
BF16_CPU_TARGET inline void matmul_dout_bf16(bf16* dout_bf, float* dbias, const float* dout, int N, int OC,
                                             std::vector<float>& partial) {
    const int chunks = colsum_chunks(N);
    float* part = colsum_partial(partial, N, OC);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < chunks; c++) {
        int n1 = std::min(N, (c + 1) * COLSUM_ROWS);
        for (int o = 0; o < OC; o += 16) {  // the chunk's rows stay in cache across its column blocks
            __mmask16 m = OC - o >= 16 ? (__mmask16)0xffff : tail_mask(OC - o);
            __m512 sum = _mm512_setzero_ps();
            for (int n = c * COLSUM_ROWS; n < n1; n++) {
                __m512 x = _mm512_maskz_loadu_ps(m, dout + (size_t)n * OC + o);
                sum = _mm512_add_ps(sum, x);
                store_bf16_masked(dout_bf + (size_t)n * OC + o, x, m);
            }
            _mm512_mask_storeu_ps(part + (size_t)c * OC + o, m, sum);
        }
    }
    if (dbias) colsum_finish(dbias, part, chunks, OC);
}

#pragma GCC diagnostic pop
