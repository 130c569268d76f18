// The CPU fast path's matmuls (the reference is layers/matmul_cpu.h), shapes as nn.Linear:
// inp (N,C), w (OC,C), out (N,OC) = inp @ w^T + bias; the backward overwrites dinp (each has one
// writer) and accumulates dw (over micro-steps); alpha scales both (the classifier's loss scale).
//   MatmulF32    fp32 through oneDNN's matmul primitive, which runs the model's shapes faster than
//                OpenBLAS's sgemm (build/profile_cpu measures both; doc/performance.md has the figures);
//   MatmulSgemm  fp32 through OpenBLAS's sgemm (its OpenMP build: Makefile, BLAS_LDLIBS), the baseline
//                of the benchmarks and the exact emulation's engine;
//   MatmulBf16   bf16 operands, fp32 accumulation and results: oneDNN's matmul primitive where the CPU
//                has bf16 instructions (AMX tiles, AVX512-BF16's vdpbf16ps); elsewhere the same
//                products computed exactly (a bf16 x bf16 product has 16 significant bits) by sgemm on
//                the operands widened to fp32, so the bf16 numerics run on every CPU.
// Why oneDNN for bf16: Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (its cblas.h declares
// cblas_sbgemm, the library does not export it), and oneDNN is Intel's library for exactly these
// kernels (build/profile_cpu measures both in every benchmark run; doc/performance.md has the figures).
#pragma once

#include <cblas.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <dnnl.hpp>

#include "layers/fast_cpu.h"

struct MatmulSgemm {
    // out (N,OC) = inp (N,C) @ w (OC,C)^T + bias (OC, or null)
    void forward(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC) {
        if (bias) {
#pragma omp parallel for schedule(static)
            for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, bias ? 1.0f : 0.0f, out, OC);
    }
    // dinp (N,C) = alpha dout (N,OC) @ w (OC,C); dw (OC,C) += alpha dout^T @ inp (N,C)
    void backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, int N, int C, int OC,
                  float alpha = 1.0f) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, alpha, dout, OC, w, C, 0.0f, dinp, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, alpha, dout, OC, inp, C, 1.0f, dw, C);
    }
};

// oneDNN's matmul primitive on operands of type T (float or bf16), fp32 results: dst (M,N) [+]= alpha
// src @ wei (+ bias (N)). src (M,K) is row-major, or with src_t its transpose (K,M) is; wei (K,N) is
// given as row-major (K,N) or, with wei_t, as row-major (N,K). One primitive per problem, kept.
template <class T> struct OneDnnMatmul {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    // (M, N, K, src transposed, wei transposed, accumulate, bias, alpha bits)
    typedef std::tuple<long, long, long, bool, bool, bool, bool, uint32_t> Key;
    std::map<Key, dnnl::matmul> primitives;

    void run(float* dst, const T* src, bool src_t, const T* wei, bool wei_t, const float* bias, long M, long N, long K,
             float alpha, bool accumulate) {
        using dt = dnnl::memory::data_type;
        using md = dnnl::memory::desc;
        const dt in = sizeof(T) == 2 ? dt::bf16 : dt::f32;
        md src_md({M, K}, in, src_t ? dnnl::memory::dims{1, M} : dnnl::memory::dims{K, 1});
        md wei_md({K, N}, in, wei_t ? dnnl::memory::dims{1, K} : dnnl::memory::dims{N, 1});
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
};

struct MatmulF32 {
    OneDnnMatmul<float> dnn;
    // out (N,OC) = inp (N,C) @ w (OC,C)^T + bias (OC, or null)
    void forward(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC) {
        dnn.run(out, inp, false, w, true, bias, N, OC, C, 1.0f, false);
    }
    // dinp (N,C) = alpha dout (N,OC) @ w (OC,C); dw (OC,C) += alpha dout^T @ inp (N,C)
    void backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, int N, int C, int OC,
                  float alpha = 1.0f) {
        dnn.run(dinp, dout, false, w, false, nullptr, N, C, OC, alpha, false);
        dnn.run(dw, dout, true, inp, false, nullptr, OC, C, N, alpha, true);
    }
};

// What the CPU offers for bf16 matmuls: the ISA oneDNN dispatches to (after ONEDNN_MAX_CPU_ISA).
struct CpuBf16Matmul {
    std::string onednn_isa;
    bool hardware = false;  // oneDNN runs bf16 on AMX or AVX512-BF16
};
inline CpuBf16Matmul cpu_bf16_matmul() {
    CpuBf16Matmul s;
    dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: s.onednn_isa = "AMX-BF16 (avx512_core_amx)"; break;
    case dnnl::cpu_isa::avx512_core_bf16: s.onednn_isa = "AVX512-BF16 (avx512_core_bf16)"; break;
    case dnnl::cpu_isa::avx512_core_vnni: s.onednn_isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core: s.onednn_isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx2_vnni: s.onednn_isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx2: s.onednn_isa = "avx2"; break;
    default: s.onednn_isa = "an ISA without bf16"; break;
    }
    s.hardware = (isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx512_core_bf16) &&
                 fast_cpu_has_bf16_dot();
    return s;
}

struct MatmulBf16 {
    bool hardware = cpu_bf16_matmul().hardware;
    OneDnnMatmul<bf16> dnn;
    std::vector<float> wide_a, wide_b;  // the widened operands where the CPU has no bf16 matmuls

    // dst (M,N) fp32 [+]= alpha * src @ wei (+ bias (N)). src (M,K) bf16 is row-major, or with
    // src_t its transpose (K,M) is; wei (K,N) bf16 is given as row-major (K,N) or, with wei_t, as
    // row-major (N,K).
    void run(float* dst, const bf16* src, bool src_t, const bf16* wei, bool wei_t, const float* bias, long M, long N,
             long K, float alpha, bool accumulate) {
        if (!hardware) return run_widened(dst, src, src_t, wei, wei_t, bias, M, N, K, alpha, accumulate);
        dnn.run(dst, src, src_t, wei, wei_t, bias, M, N, K, alpha, accumulate);
    }

    // the same products, exact, on fp32 copies of the bf16 operands
    void run_widened(float* dst, const bf16* src, bool src_t, const bf16* wei, bool wei_t, const float* bias, long M,
                     long N, long K, float alpha, bool accumulate) {
        if (wide_a.size() < (size_t)(M * K)) wide_a.resize(M * K);
        if (wide_b.size() < (size_t)(K * N)) wide_b.resize(K * N);
        fast_widen_bf16(wide_a.data(), src, (size_t)(M * K));
        fast_widen_bf16(wide_b.data(), wei, (size_t)(K * N));
        float beta = accumulate ? 1.0f : 0.0f;
        if (bias) {
#pragma omp parallel for schedule(static)
            for (long m = 0; m < M; m++) {
                float* row = dst + m * N;
                for (long n = 0; n < N; n++) row[n] = (accumulate ? row[n] : 0.0f) + bias[n];
            }
            beta = 1.0f;
        }
        cblas_sgemm(CblasRowMajor, src_t ? CblasTrans : CblasNoTrans, wei_t ? CblasTrans : CblasNoTrans, (int)M,
                    (int)N, (int)K, alpha, wide_a.data(), src_t ? (int)M : (int)K, wide_b.data(),
                    wei_t ? (int)K : (int)N, beta, dst, (int)N);
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
