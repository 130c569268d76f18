// Matmul (nn.Linear) through cuBLASLt, bf16 in/out with fp32 accumulation, bias and GELU fused
// into the epilogue. CPU twin: layers/matmul_cpu.h, test: test/test_layers_cuda.cu,
// experiments: dev/matmul.cu.
// Row-major (N, OC) = (N, C) @ (OC, C)^T is, read column-major, (OC, N) = W^T(OC, C) @ inp(C, N):
// cuBLASLt sees every row-major tensor as its column-major transpose, with no copies.
// Bias gradients come out of the backward's own GEMMs, as in TransformerEngine: the BGRADB epilogue
// of the dweight GEMM sums dout over the rows as it reads it, and DGELU_BGRAD on the dinp GEMM that
// applies gelu' sums its own output (the bias gradient of the layer before the GELU). cuBLASLt
// writes them (=) as bf16 into scratch, which is then added (+=, elementwise) to the gradients.
// Where cuBLASLt has no algorithm for them (printed once), or alpha != 1, or MATMUL_BGRAD=0 is set,
// the deterministic two-stage column sums of our own (layers/floatx.cuh) compute them instead.
// Descriptors, layouts, preferences and the heuristic's algorithm are built once per problem
// (shape, epilogue, dtype, alignments) and kept in the device's plan table (layers/cublas_common.cuh).
#pragma once

#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"
#include "layers/cublas_common.cuh"
#include "layers/gelu.cuh"  // the GELU epilogues' fallback

#include <atomic>
#include <cstdlib>
#include <cstring>

// ----------------------------------------------------------------------------
// cuBLASLt call

enum MatmulEpilogue { EPI_NONE, EPI_BIAS, EPI_GELU_AUX, EPI_GELU_AUX_BIAS, EPI_DGELU, EPI_BGRADB, EPI_DGELU_BGRAD,
                      EPI_COUNT };
inline const char* matmul_epilogue_name(MatmulEpilogue e) {
    static const char* names[] = {"DEFAULT", "BIAS", "GELU_AUX", "GELU_AUX_BIAS", "DGELU", "BGRADB", "DGELU_BGRAD"};
    return names[e];
}

// The largest power of two up to 256 that divides the address: what cuBLASLt may assume of it
// (it assumes 256 unless told; PyTorch sets these preferences the same way).
inline uint32_t matmul_alignment(const void* p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

constexpr cublasLtEpilogue_t matmul_lt_epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS,
                                                      CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                                                      CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_BGRADB,
                                                      CUBLASLT_EPILOGUE_DGELU_BGRAD};
inline bool matmul_epilogue_has_aux(MatmulEpilogue e) {
    return e == EPI_GELU_AUX || e == EPI_GELU_AUX_BIAS || e == EPI_DGELU || e == EPI_DGELU_BGRAD;
}
// the bias pointer: read (BIAS, GELU_AUX_BIAS) or written with a bias gradient (BGRADB, DGELU_BGRAD)
inline bool matmul_epilogue_has_bias(MatmulEpilogue e) {
    return e == EPI_BIAS || e == EPI_GELU_AUX_BIAS || e == EPI_BGRADB || e == EPI_DGELU_BGRAD;
}

// What one cuBLASLt call computes around the product d = alpha * op(a) @ op(b), named at the call:
// e.g. MatmulOptions{.transA = true, .bias = bias, .pre_gelu_out = pre_gelu} (a forward with bias
// and GELU), MatmulOptions{.transB = true, .accumulate = true} (a weight gradient). At most one of
// bias, bias_grad; at most one of pre_gelu_out, pre_gelu_in; pre_gelu_in takes no bias.
struct MatmulOptions {
    bool transA = false;                 // a is stored (k, m) column-major and read transposed; else (m, k)
    bool transB = false;                 // b is stored (n, k) and read transposed; else (k, n)
    bool accumulate = false;             // d += the result (beta 1); else d = the result
    const floatX* bias = nullptr;        // (m) read: added to every column of the product (BIAS)
    floatX* pre_gelu_out = nullptr;      // (m, n) written: the product (+ bias) before the GELU, d = gelu of it
                                         // (GELU_AUX[_BIAS])
    const floatX* pre_gelu_in = nullptr; // (m, n) read: d = product * gelu'(pre_gelu_in) (DGELU, backward)
    floatX* bias_grad = nullptr;         // written (=), matmul_cublaslt_try only: with pre_gelu_in the (m) row sums
                                         // of d (DGELU_BGRAD), else the (n) column sums of op(b) (BGRADB)
    float alpha = 1.0f;                  // scales the product (not the bias)
};

// The cuBLASLt epilogue that computes the options' bias and GELU.
inline MatmulEpilogue matmul_epilogue_of(const MatmulOptions& o) {
    if (o.pre_gelu_out != nullptr) return o.bias != nullptr ? EPI_GELU_AUX_BIAS : EPI_GELU_AUX;
    if (o.pre_gelu_in != nullptr) return o.bias_grad != nullptr ? EPI_DGELU_BGRAD : EPI_DGELU;
    if (o.bias_grad != nullptr) return EPI_BGRADB;
    return o.bias != nullptr ? EPI_BIAS : EPI_NONE;
}
// the epilogue's bias pointer (read or written) and aux pointer (pre-GELU, written or read)
inline const void* matmul_bias_pointer(const MatmulOptions& o) {
    return o.bias_grad != nullptr ? (const void*)o.bias_grad : (const void*)o.bias;
}
inline const void* matmul_aux_pointer(const MatmulOptions& o) {
    return o.pre_gelu_out != nullptr ? (const void*)o.pre_gelu_out : (const void*)o.pre_gelu_in;
}

// The bias and aux pointers of this call on the plan's descriptor.
inline void matmul_plan_set_pointers(MatmulPlan& plan, const void* bias, const void* aux) {
    MatmulEpilogue epi = (MatmulEpilogue)plan.key.epilogue;
    if (matmul_epilogue_has_aux(epi)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                                   sizeof(aux)));
    }
    if (matmul_epilogue_has_bias(epi)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
}

// Builds plan for key: descriptor, layouts, preference (workspace, alignments), the heuristic's answer.
// bias, aux: pointers with key's alignments, on the descriptor before the heuristic, which takes
// their alignment from them (cuBLASLt documents it; the preferences cover only A, B, C, D).
inline void matmul_plan_build(MatmulPlan& plan, const MatmulPlanKey& key, cublasLtHandle_t handle, const void* bias,
                              const void* aux) {
    int m = key.m, n = key.n, k = key.k;
    MatmulEpilogue epi = (MatmulEpilogue)key.epilogue;
    plan.key = key;
    cublasCheck(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opA = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)));
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.layoutA, key.dtype, key.transA ? k : m, key.transA ? m : k,
                                           key.transA ? k : m));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.layoutB, key.dtype, key.transB ? n : k, key.transB ? k : n,
                                           key.transB ? n : k));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.layoutD, key.dtype, m, n, m));
    cublasLtEpilogue_t epilogue = matmul_lt_epilogues[epi];
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (matmul_epilogue_has_aux(epi)) {
        int64_t aux_ld = m;
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                   sizeof(aux_ld)));
    }
    if (matmul_epilogue_has_bias(epi)) {  // bf16: a bias gradient has the type of C (cublasLt.h)
        cudaDataType_t bias_type = key.dtype;
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                   sizeof(bias_type)));
    }
    matmul_plan_set_pointers(plan, bias, aux);
    cublasCheck(cublasLtMatmulPreferenceCreate(&plan.preference));
    uint64_t workspace_bytes = cublaslt_workspace_size;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace_bytes, sizeof(workspace_bytes)));
    const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {  // A, B, C (= D), D
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t alignments[4] = {key.alignment[0], key.alignment[1], key.alignment[2], key.alignment[2]};
    for (int i = 0; i < 4; i++) {
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan.preference, align_attrs[i], &alignments[i],
                                                         sizeof(alignments[i])));
    }
    int returned = 0;
    plan.heuristic_status = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.layoutA, plan.layoutB, plan.layoutD,
                                                           plan.layoutD, plan.preference, 1, &plan.heuristic, &returned);
    plan.found = plan.heuristic_status == CUBLAS_STATUS_SUCCESS && returned > 0;
}

// d = epilogue(alpha * op(a) @ op(b) [+ d]) through cuBLASLt, the epilogue from opt
// (matmul_epilogue_of); false if its heuristic has no algorithm for this problem (status and
// algorithm count), every other status is checked. opt.bias_grad is written = (BGRADB: n column
// sums of op(b); DGELU_BGRAD: m row sums of d; neither depends on accumulate). The descriptor,
// layouts and heuristic come from the device's plan cache (built on a miss).
inline bool matmul_cublaslt_try(floatX* d, const floatX* a, const floatX* b, int m, int n, int k,
                                const MatmulOptions& opt, cudaStream_t stream, cublasStatus_t* heuristic_status) {
    CublasLtDevice& lt = cublaslt_current();
    MatmulEpilogue epi = matmul_epilogue_of(opt);
    MatmulPlanKey key;
    key.m = m, key.n = n, key.k = k, key.transA = opt.transA, key.transB = opt.transB, key.epilogue = epi;
    key.dtype = CUDA_R_16BF;
    const void* operands[5] = {a, b, d, matmul_epilogue_has_bias(epi) ? matmul_bias_pointer(opt) : nullptr,
                               matmul_epilogue_has_aux(epi) ? matmul_aux_pointer(opt) : nullptr};
    for (int i = 0; i < 5; i++) key.alignment[i] = operands[i] ? matmul_alignment(operands[i]) : 0;
    std::lock_guard<std::mutex> lock(lt.plan_mutex);
    MatmulPlan* plan = matmul_plan_find(lt, key);
    if (plan == nullptr) {
        plan = &matmul_plan_slot(lt);
        matmul_plan_build(*plan, key, lt.handle, operands[3], operands[4]);
    }
    *heuristic_status = plan->heuristic_status;
    if (!plan->found) return false;
    matmul_plan_set_pointers(*plan, operands[3], operands[4]);
    const float beta = opt.accumulate ? 1.0f : 0.0f;
    cublasCheck(cublasLtMatmul(lt.handle, plan->desc, &opt.alpha, a, plan->layoutA, b, plan->layoutB, &beta, d,
                               plan->layoutD, d, plan->layoutD, &plan->heuristic.algo, lt.workspace,
                               cublaslt_workspace_size, stream));
    return true;
}

// Says once per epilogue (per process) that cuBLASLt has no algorithm for it, why, and what runs instead.
inline void matmul_tell_fallback(int m, int n, int k, const MatmulOptions& opt, cublasStatus_t status, const void* a,
                                 const void* b, const void* d, const char* instead) {
    static std::atomic<bool> told[EPI_COUNT] = {};
    MatmulEpilogue epi = matmul_epilogue_of(opt);
    const void* bias = matmul_bias_pointer(opt);
    bool transA = opt.transA, transB = opt.transB;
    if (told[epi].exchange(true)) return;
    fprintf(stderr, "[matmul] cuBLASLt has no algorithm for m=%d n=%d k=%d transA=%d transB=%d with the %s epilogue "
                    "(heuristic: %s; alignments A %u, B %u, D %u, bias %u bytes)%s\n", m, n, k, transA, transB,
            matmul_epilogue_name(epi), cublasGetStatusName(status), matmul_alignment(a), matmul_alignment(b),
            matmul_alignment(d), bias ? matmul_alignment(bias) : 0, instead);
}

// d (m, n) column-major += bias (m) broadcast over the n columns (the BIAS epilogue's fallback)
__global__ void matmul_add_bias_kernel(floatX* d, const floatX* bias, int m, int n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)m * n) d[i] = (floatX)((float)d[i] + (float)bias[i % m]);
}

// d (m, n) column-major = epilogue(alpha * op(a) (m, k) @ op(b) (k, n) [+ d if accumulate] [+ bias (m)]),
// with the layouts, accumulation and epilogue of opt (MatmulOptions; no bias_grad here).
// Where cuBLASLt has no algorithm with the fused epilogue, the product runs without it and the
// project's kernels apply the epilogue (printed once per epilogue); no algorithm even then is an error.
void matmul_cublaslt(floatX* d, const floatX* a, const floatX* b, int m, int n, int k, const MatmulOptions& opt,
                     cudaStream_t stream) {
    if (opt.pre_gelu_in != nullptr && opt.bias != nullptr) {
        fprintf(stderr, "[ERROR] matmul_cublaslt: the backward GELU epilogue takes no bias\n");
        exit(EXIT_FAILURE);
    }
    if ((opt.pre_gelu_in != nullptr && opt.pre_gelu_out != nullptr) ||
        (opt.bias != nullptr && opt.bias_grad != nullptr)) {
        fprintf(stderr, "[ERROR] matmul_cublaslt: pre_gelu_out and pre_gelu_in, or bias and bias_grad, both given\n");
        exit(EXIT_FAILURE);
    }
    if (opt.bias_grad != nullptr) {
        fprintf(stderr, "[ERROR] matmul_cublaslt: bias_grad is for matmul_cublaslt_try (matmul_backward falls back "
                        "to the column sums where cuBLASLt has no algorithm)\n");
        exit(EXIT_FAILURE);
    }
    MatmulEpilogue epi = matmul_epilogue_of(opt);
    cublasStatus_t status;
    if (matmul_cublaslt_try(d, a, b, m, n, k, opt, stream, &status)) return;
    matmul_tell_fallback(m, n, k, opt, status, a, b, d,
                         epi == EPI_NONE ? "" : ": the product runs without it, the project's kernels apply the epilogue");
    // the fallback: the plain product (into pre_gelu_out for the forward GELU), then the epilogue
    floatX* product = opt.pre_gelu_out != nullptr ? opt.pre_gelu_out : d;
    MatmulOptions plain{.transA = opt.transA, .transB = opt.transB, .accumulate = opt.accumulate && product == d,
                        .alpha = opt.alpha};
    if (epi == EPI_NONE || !matmul_cublaslt_try(product, a, b, m, n, k, plain, stream, &status)) {
        fprintf(stderr, "[ERROR] matmul_cublaslt: no cuBLASLt algorithm for m=%d n=%d k=%d transA=%d transB=%d, "
                        "even without an epilogue (heuristic: %s; alignments A %u, B %u, D %u bytes; cuBLASLt "
                        "needs m, n, k multiples of 8 and 16-byte aligned rows for bf16)\n", m, n, k, opt.transA,
                opt.transB, cublasGetStatusName(status), matmul_alignment(a), matmul_alignment(b), matmul_alignment(d));
        exit(EXIT_FAILURE);
    }
    size_t count = (size_t)m * n;
    if (opt.bias != nullptr) {
        cuda_launch(matmul_add_bias_kernel, dim3((unsigned)((count + 255) / 256)), dim3(256), 0, stream, product,
                    opt.bias, m, n);
        cudaCheck(cudaGetLastError());
    }
    if (opt.pre_gelu_out != nullptr) gelu_forward(d, opt.pre_gelu_out, (int)count, stream);
    if (opt.pre_gelu_in != nullptr) gelu_backward_inplace(d, opt.pre_gelu_in, (int)count, stream);
}

// ----------------------------------------------------------------------------
// launchers

// The optional parts of matmul_forward, named at the call: {.bias = b}, {.bias = b, .pre_gelu = pre}.
struct MatmulForwardOptions {
    const floatX* bias = nullptr;  // (OC) added to every row, or null
    floatX* pre_gelu = nullptr;    // (N,OC) or null: when given, pre_gelu = the product (+ bias) and
                                   // out = gelu(pre_gelu), one fused call
};

// out (N,OC) = inp (N,C) @ weight (OC,C)^T [+ bias (OC)] [then GELU, the pre-GELU values into pre_gelu].
// C, OC multiples of 8 (cuBLASLt's bf16 epilogues and 16-byte aligned rows).
void matmul_forward(floatX* out, const floatX* inp, const floatX* weight, int N, int C, int OC, cudaStream_t stream,
                    const MatmulForwardOptions& opt = {}) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_MULTIPLE_OF(OC, 8);
    // column-major: out (OC, N) = weight^T (OC, C) @ inp (C, N)
    matmul_cublaslt(out, weight, inp, OC, N, C, MatmulOptions{.transA = true, .bias = opt.bias,
                                                              .pre_gelu_out = opt.pre_gelu}, stream);
}

// Whether matmul_backward takes bias gradients from cuBLASLt's BGRADB / DGELU_BGRAD epilogues (the
// default) or from the column sums; MATMUL_BGRAD=0 in the environment, or
// matmul_set_bgrad_epilogues(false), chooses the column sums (tests run both paths).
inline std::atomic<int> matmul_bgrad_setting{-1};  // -1: not decided yet
inline void matmul_set_bgrad_epilogues(bool on) { matmul_bgrad_setting = on ? 1 : 0; }
inline bool matmul_bgrad_epilogues() {
    if (matmul_bgrad_setting < 0) {
        const char* env = getenv("MATMUL_BGRAD");
        if (env != nullptr && strcmp(env, "0") != 0 && strcmp(env, "1") != 0) {
            fprintf(stderr, "[ERROR] MATMUL_BGRAD=%s: set it to 0 (bias gradients from the column sums) or 1 "
                            "(from cuBLASLt's epilogues, the default), or leave it unset\n", env);
            exit(EXIT_FAILURE);
        }
        matmul_bgrad_setting = env != nullptr && strcmp(env, "0") == 0 ? 0 : 1;
    }
    return matmul_bgrad_setting == 1;
}

// dbias (n) += grad (n), both bf16: adds a bias gradient a cuBLASLt epilogue wrote (=) to the gradient
__global__ void matmul_bias_grad_add_kernel(floatX* dbias, const floatX* grad, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dbias[i] = (floatX)((float)dbias[i] + (float)grad[i]);
}
inline void matmul_bias_grad_add(floatX* dbias, const floatX* grad, int n, cudaStream_t stream) {
    cuda_launch(matmul_bias_grad_add_kernel, dim3(ceil_div(n, 256)), dim3(256), 0, stream, dbias, grad, n);
    cudaCheck(cudaGetLastError());
}

// Floats of fp32 scratch matmul_backward needs for bias gradients of up to cols columns (OC for
// dbias, C for dinp_colsum): the column sums' partials, or the epilogues' bf16 vector.
inline size_t matmul_backward_scratch_floats(int cols) { return (size_t)COLUMN_SUM_MAX_SPLITS * cols; }

// The optional parts of matmul_backward, named at the call: e.g. {.dbias = db} (a layer's own bias
// gradient), {.pre_gelu = pre, .dinp_colsum = dpb} (the input came out of a GELU whose layer has
// bias pb), {.alpha = scale}.
struct MatmulBackwardOptions {
    floatX* dbias = nullptr;          // (OC) += column sums of dout, or null (then alpha must be 1)
    const floatX* pre_gelu = nullptr; // (N,C) or null: the pre-GELU activation that produced inp;
                                      // dinp *= gelu'(pre_gelu), fused into the dinp GEMM
    floatX* dinp_colsum = nullptr;    // (C) += column sums of dinp, or null; with pre_gelu only: the bias
                                      // gradient of the layer whose output went through the GELU (its own
                                      // matmul_backward then takes no dbias)
    float alpha = 1.0f;               // scales dinp and dweight
};

// dinp (N, C) = alpha * dout (N, OC) @ weight (OC, C) [* gelu'(pre_gelu)]  (column-major: (C, N) =
// weight (C, OC) @ dout (OC, N)); dinp_colsum (C) += column sums of dinp, or null (DGELU_BGRAD
// only with alpha 1: whether its bias gradient includes alpha is not documented; the column sums do).
inline void matmul_backward_dinp(floatX* dinp, float* scratch, const floatX* dout, const floatX* weight, int N, int C,
                                 int OC, cudaStream_t stream, const MatmulBackwardOptions& opt) {
    if (opt.dinp_colsum != nullptr && opt.alpha == 1.0f && matmul_bgrad_epilogues()) {
        floatX* grad = (floatX*)scratch;  // C bf16 values, written by the epilogue
        MatmulOptions fused{.pre_gelu_in = opt.pre_gelu, .bias_grad = grad, .alpha = opt.alpha};  // DGELU_BGRAD
        cublasStatus_t status;
        if (matmul_cublaslt_try(dinp, weight, dout, C, N, OC, fused, stream, &status)) {
            matmul_bias_grad_add(opt.dinp_colsum, grad, C, stream);
            return;
        }
        matmul_tell_fallback(C, N, OC, fused, status, weight, dout, dinp,
                             ": DGELU runs alone, the column sums of dinp give the bias gradient");
    }
    matmul_cublaslt(dinp, weight, dout, C, N, OC, MatmulOptions{.pre_gelu_in = opt.pre_gelu, .alpha = opt.alpha},
                    stream);
    if (opt.dinp_colsum != nullptr) column_sums_accumulate_bf16(opt.dinp_colsum, scratch, dinp, N, C, stream);
}

// dweight (OC, C) += alpha * dout^T @ inp (column-major: (C, OC) += inp (C, N) @ dout (OC, N)^T);
// dbias (OC) += column sums of dout, or null (alpha 1; BGRADB: the sums over k of the B operand).
inline void matmul_backward_dweight(floatX* dweight, float* scratch, const floatX* dout, const floatX* inp, int N,
                                    int C, int OC, cudaStream_t stream, const MatmulBackwardOptions& opt) {
    if (opt.dbias != nullptr && matmul_bgrad_epilogues()) {
        floatX* grad = (floatX*)scratch;  // OC bf16 values, written by the epilogue
        MatmulOptions fused{.transB = true, .accumulate = true, .bias_grad = grad, .alpha = opt.alpha};  // BGRADB
        cublasStatus_t status;
        if (matmul_cublaslt_try(dweight, inp, dout, C, OC, N, fused, stream, &status)) {
            matmul_bias_grad_add(opt.dbias, grad, OC, stream);
            return;
        }
        matmul_tell_fallback(C, OC, N, fused, status, inp, dout, dweight,
                             ": the column sums of dout give the bias gradient");
    }
    if (opt.dbias != nullptr) column_sums_accumulate_bf16(opt.dbias, scratch, dout, N, OC, stream);  // deterministic
    matmul_cublaslt(dweight, inp, dout, C, OC, N, MatmulOptions{.transB = true, .accumulate = true, .alpha = opt.alpha},
                    stream);
}

// dinp (N,C) = alpha * dout (N,OC) @ weight (OC,C)   (written =, not accumulated)
//   [* gelu'(pre_gelu) with opt.pre_gelu];  [opt.dinp_colsum (C) += column sums of dinp]
// dweight (OC,C) += alpha * dout^T @ inp (N,C);  [opt.dbias (OC) += column sums of dout]
// The calls that write what, in this order:
//   dinp, dinp_colsum   the dinp GEMM (DGELU[_BGRAD] epilogue with pre_gelu), or the column sums after it
//   dweight, dbias      the dweight GEMM (BGRADB epilogue with dbias), or the column sums before it
// scratch: matmul_backward_scratch_floats(max(OC, C)) floats on the device (used when a bias
//   gradient is asked for).
void matmul_backward(floatX* dinp, floatX* dweight, float* scratch, const floatX* dout, const floatX* inp,
                     const floatX* weight, int N, int C, int OC, cudaStream_t stream,
                     const MatmulBackwardOptions& opt = {}) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_MULTIPLE_OF(OC, 8);
    if (opt.dbias != nullptr && opt.alpha != 1.0f) {
        fprintf(stderr, "[ERROR] matmul_backward: alpha = %g with a bias gradient (the bias kernel sums dout "
                        "unscaled): scale dout instead\n", opt.alpha);
        exit(EXIT_FAILURE);
    }
    if (opt.dinp_colsum != nullptr && opt.pre_gelu == nullptr) {
        fprintf(stderr, "[ERROR] matmul_backward: dinp_colsum is fused with the GELU backward only (pre_gelu is "
                        "null): pass the bias gradient as the previous layer's dbias instead\n");
        exit(EXIT_FAILURE);
    }
    matmul_backward_dinp(dinp, scratch, dout, weight, N, C, OC, stream, opt);
    matmul_backward_dweight(dweight, scratch, dout, inp, N, C, OC, stream, opt);
}
