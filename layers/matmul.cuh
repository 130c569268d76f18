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

// d = epilogue(alpha * op(a) @ op(b) [+ d]) through cuBLASLt; false if its heuristic has no
// algorithm for this problem (status and algorithm count), every other status is checked.
// bias: read (BIAS, GELU_AUX_BIAS), or written = (BGRADB: n column sums of op(b); DGELU_BGRAD:
// m row sums of d; neither depends on accumulate). The descriptor, layouts and heuristic come
// from the device's plan cache (built on a miss).
inline bool matmul_cublaslt_try(floatX* d, const floatX* a, const floatX* b, const floatX* bias, int m, int n,
                                int k, cudaStream_t stream, bool transA, bool transB, bool accumulate,
                                floatX* pre_gelu, MatmulEpilogue epi, cublasStatus_t* heuristic_status,
                                float alpha = 1.0f) {
    CublasLtDevice& lt = cublaslt_current();
    MatmulPlanKey key;
    key.m = m, key.n = n, key.k = k, key.transA = transA, key.transB = transB, key.epilogue = epi;
    key.dtype = CUDA_R_16BF;
    const void* operands[5] = {a, b, d, matmul_epilogue_has_bias(epi) ? bias : nullptr,
                               matmul_epilogue_has_aux(epi) ? pre_gelu : nullptr};
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
    const float beta = accumulate ? 1.0f : 0.0f;
    cublasCheck(cublasLtMatmul(lt.handle, plan->desc, &alpha, a, plan->layoutA, b, plan->layoutB, &beta, d,
                               plan->layoutD, d, plan->layoutD, &plan->heuristic.algo, lt.workspace,
                               cublaslt_workspace_size, stream));
    return true;
}

// Says once per epilogue (per process) that cuBLASLt has no algorithm for it, why, and what runs instead.
inline void matmul_tell_fallback(MatmulEpilogue epi, int m, int n, int k, bool transA, bool transB,
                                 cublasStatus_t status, const void* a, const void* b, const void* d, const void* bias,
                                 const char* instead) {
    static std::atomic<bool> told[EPI_COUNT] = {};
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

// d (m, n) column-major = epilogue(alpha * op(a) (m, k) @ op(b) (k, n) [+ d if accumulate] [+ bias (m)]).
// a is (k, m) column-major when transA, else (m, k); b is (n, k) when transB, else (k, n).
// pre_gelu (m, n): forward: written with the pre-GELU values (GELU_AUX[_BIAS]) while d gets GELU;
//                  backward: read, d = (op(a) @ op(b)) * gelu'(pre_gelu) (DGELU).
// Where cuBLASLt has no algorithm with the fused epilogue, the product runs without it and the
// project's kernels apply the epilogue (printed once per epilogue); no algorithm even then is an error.
void matmul_cublaslt(floatX* d, const floatX* a, const floatX* b, const floatX* bias, int m, int n, int k,
                     cudaStream_t stream, bool transA, bool transB, bool accumulate, floatX* pre_gelu,
                     bool backward, float alpha = 1.0f) {
    if (backward && pre_gelu != nullptr && bias != nullptr) {
        fprintf(stderr, "[ERROR] matmul_cublaslt: the backward GELU epilogue takes no bias\n");
        exit(EXIT_FAILURE);
    }
    MatmulEpilogue epi = pre_gelu != nullptr ? (backward ? EPI_DGELU : bias != nullptr ? EPI_GELU_AUX_BIAS : EPI_GELU_AUX)
                                             : bias != nullptr ? EPI_BIAS : EPI_NONE;
    cublasStatus_t status;
    if (matmul_cublaslt_try(d, a, b, bias, m, n, k, stream, transA, transB, accumulate, pre_gelu, epi, &status,
                           alpha)) return;
    matmul_tell_fallback(epi, m, n, k, transA, transB, status, a, b, d, bias,
                         epi == EPI_NONE ? "" : ": the product runs without it, the project's kernels apply the epilogue");
    // the fallback: the plain product (into pre_gelu for the forward GELU), then the epilogue
    floatX* product = (epi == EPI_GELU_AUX || epi == EPI_GELU_AUX_BIAS) ? pre_gelu : d;
    if (epi == EPI_NONE || !matmul_cublaslt_try(product, a, b, nullptr, m, n, k, stream, transA, transB,
                                                accumulate && product == d, nullptr, EPI_NONE, &status,
                                                alpha)) {
        fprintf(stderr, "[ERROR] matmul_cublaslt: no cuBLASLt algorithm for m=%d n=%d k=%d transA=%d transB=%d, "
                        "even without an epilogue (heuristic: %s; alignments A %u, B %u, D %u bytes; cuBLASLt "
                        "needs m, n, k multiples of 8 and 16-byte aligned rows for bf16)\n", m, n, k, transA, transB,
                cublasGetStatusName(status), matmul_alignment(a), matmul_alignment(b), matmul_alignment(d));
        exit(EXIT_FAILURE);
    }
    size_t count = (size_t)m * n;
    if (bias != nullptr) {
        cuda_launch(matmul_add_bias_kernel, dim3((unsigned)((count + 255) / 256)), dim3(256), 0, stream, product, bias, m, n);
        cudaCheck(cudaGetLastError());
    }
    if (epi == EPI_GELU_AUX || epi == EPI_GELU_AUX_BIAS) gelu_forward(d, pre_gelu, (int)count, stream);
    if (epi == EPI_DGELU) gelu_backward_inplace(d, pre_gelu, (int)count, stream);
}

// ----------------------------------------------------------------------------
// launchers

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC, or null).
// pre_gelu (N,OC) or null: when given, pre_gelu = the above and out = gelu(pre_gelu), one fused call.
// C, OC multiples of 8 (cuBLASLt's bf16 epilogues and 16-byte aligned rows).
void matmul_forward(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int N, int C, int OC,
                    floatX* pre_gelu, cudaStream_t stream) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_MULTIPLE_OF(OC, 8);
    matmul_cublaslt(out, weight, inp, bias, OC, N, C, stream, true, false, false, pre_gelu, false);
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

// dinp (N, C) = alpha * dout (N, OC) @ weight (OC, C) [* gelu'(pre_gelu)]  (column-major: (C, N) =
// weight (C, OC) @ dout (OC, N)); dinp_colsum (C) += column sums of dinp, or null (DGELU_BGRAD
// only with alpha 1: whether its bias gradient includes alpha is not documented; the column sums do).
inline void matmul_backward_dinp(floatX* dinp, floatX* dinp_colsum, float* scratch, const floatX* dout,
                                 const floatX* weight, const floatX* pre_gelu, int N, int C, int OC,
                                 cudaStream_t stream, float alpha) {
    if (dinp_colsum != nullptr && alpha == 1.0f && matmul_bgrad_epilogues()) {
        floatX* grad = (floatX*)scratch;  // C bf16 values, written by the epilogue
        cublasStatus_t status;
        if (matmul_cublaslt_try(dinp, weight, dout, grad, C, N, OC, stream, false, false, false, (floatX*)pre_gelu,
                                EPI_DGELU_BGRAD, &status, alpha)) {
            matmul_bias_grad_add(dinp_colsum, grad, C, stream);
            return;
        }
        matmul_tell_fallback(EPI_DGELU_BGRAD, C, N, OC, false, false, status, weight, dout, dinp, grad,
                             ": DGELU runs alone, the column sums of dinp give the bias gradient");
    }
    matmul_cublaslt(dinp, weight, dout, nullptr, C, N, OC, stream, false, false, false, (floatX*)pre_gelu, true,
                    alpha);
    if (dinp_colsum != nullptr) column_sums_accumulate_bf16(dinp_colsum, scratch, dinp, N, C, stream);
}

// dweight (OC, C) += alpha * dout^T @ inp (column-major: (C, OC) += inp (C, N) @ dout (OC, N)^T);
// dbias (OC) += column sums of dout, or null (alpha 1; BGRADB: the sums over k of the B operand).
inline void matmul_backward_dweight(floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                                    const floatX* inp, int N, int C, int OC, cudaStream_t stream, float alpha) {
    if (dbias != nullptr && matmul_bgrad_epilogues()) {
        floatX* grad = (floatX*)scratch;  // OC bf16 values, written by the epilogue
        cublasStatus_t status;
        if (matmul_cublaslt_try(dweight, inp, dout, grad, C, OC, N, stream, false, true, true, nullptr, EPI_BGRADB,
                                &status, alpha)) {
            matmul_bias_grad_add(dbias, grad, OC, stream);
            return;
        }
        matmul_tell_fallback(EPI_BGRADB, C, OC, N, false, true, status, inp, dout, dweight, grad,
                             ": the column sums of dout give the bias gradient");
    }
    if (dbias != nullptr) column_sums_accumulate_bf16(dbias, scratch, dout, N, OC, stream);  // deterministic
    matmul_cublaslt(dweight, inp, dout, nullptr, C, OC, N, stream, false, true, true, nullptr, true, alpha);
}

// dinp (N,C) = alpha * dout (N,OC) @ weight (OC,C)   (written =, not accumulated);
//   with pre_gelu (N,C) given (the pre-GELU activation that produced inp): dinp *= gelu'(pre_gelu), fused.
// dweight (OC,C) += alpha * dout^T @ inp (N,C);  dbias (OC) += column sums of dout (dbias may be
// null; with a bias, alpha must be 1).
// dinp_colsum (C) += column sums of dinp, or null: with pre_gelu, the bias gradient of the layer
//   whose output went through the GELU (its own matmul_backward then takes no dbias).
// scratch: matmul_backward_scratch_floats(max(OC, C)) floats on the device (used when a bias
//   gradient is asked for).
void matmul_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                     const floatX* inp, const floatX* weight, const floatX* pre_gelu, int N, int C, int OC,
                     cudaStream_t stream, float alpha = 1.0f, floatX* dinp_colsum = nullptr) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_MULTIPLE_OF(OC, 8);
    if (dbias != nullptr && alpha != 1.0f) {
        fprintf(stderr, "[ERROR] matmul_backward: alpha = %g with a bias gradient (the bias kernel sums dout "
                        "unscaled): scale dout instead\n", alpha);
        exit(EXIT_FAILURE);
    }
    if (dinp_colsum != nullptr && pre_gelu == nullptr) {
        fprintf(stderr, "[ERROR] matmul_backward: dinp_colsum is fused with the GELU backward only (pre_gelu is "
                        "null): pass the bias gradient as the previous layer's dbias instead\n");
        exit(EXIT_FAILURE);
    }
    matmul_backward_dinp(dinp, dinp_colsum, scratch, dout, weight, pre_gelu, N, C, OC, stream, alpha);
    matmul_backward_dweight(dweight, dbias, scratch, dout, inp, N, C, OC, stream, alpha);
}
