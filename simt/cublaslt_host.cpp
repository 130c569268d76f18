// cuBLASLt subset on the host: see cublaslt_host.h for what is supported.
//
// Layout of the work: op(A) and op(B) of one batch are converted to fp32 and
// packed (A column-major, rows padded to a tile multiple; B one column after the
// other), then output tiles of MR x NR are accumulated over k in order
// kk = 0..k-1 in fp32 and finished by the epilogue. Columns are spread over
// OpenMP threads; every output element's sum order is fixed, so results do not
// depend on the thread count.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cublaslt_host.h"

// ----------------------------------------------------------------------------
// bf16 <-> fp32 on raw bits (the data pointers are untyped)

static inline float bf16_to_float(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// round to nearest, ties to even; NaN stays a (quiet) NaN
static inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float load_elem(const void* p, cudaDataType type, int64_t idx) {
    if (type == CUDA_R_32F) return ((const float*)p)[idx];
    return bf16_to_float(((const uint16_t*)p)[idx]);
}

static inline void store_elem(void* p, cudaDataType type, int64_t idx, float v) {
    if (type == CUDA_R_32F) ((float*)p)[idx] = v;
    else ((uint16_t*)p)[idx] = float_to_bf16(v);
}

static inline size_t elem_size(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

// ----------------------------------------------------------------------------
// GELU, tanh approximation, in fp32 (as the GPU epilogue)

static const float GELU_SCALE = 0.7978845608028654f;  // sqrt(2/pi)

static inline float gelu(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
}

static inline float gelu_grad(float x) {
    float t = tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - t * t;
    return 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

// ----------------------------------------------------------------------------
// descriptors

static const uint32_t HANDLE_MAGIC = 0x4c74486du;  // "mHtL"
static const uint64_t ALGO_MAGIC = 0x686f73742d616c67ull;

struct cublasLtContext {
    uint32_t magic;
};

struct cublasContext {
    cudaStream_t stream;
};

struct cublasLtMatrixLayoutHost {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t order;
    int32_t batch_count;
    int64_t batch_stride;  // elements between batches
};

struct cublasLtMatmulDescHost {
    int32_t compute_type, scale_type, pointer_mode;
    int32_t transa, transb, transc;
    uint32_t epilogue;
    const void* bias;  // bias (forward) or bias gradient (backward)
    int64_t bias_batch_stride;
    void* aux;         // pre-GELU values: written by GELU_AUX*, read by DGELU*
    int64_t aux_ld, aux_batch_stride;
    int32_t aux_type, bias_type;  // -1: the type of D
};

struct cublasLtMatmulPreferenceHost {
    uint32_t search_mode;
    uint64_t max_workspace_bytes;
    uint32_t min_alignment[4];  // A, B, C, D bytes; 256 unless set (cuBLASLt's documented default)
};

// The largest power of two up to 256 that divides p's address (256 for NULL, which every alignment divides).
static uint32_t pointer_alignment(const void* p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

static void report(const char* func, cublasStatus_t status, const char* why) {
    fprintf(stderr, "[cublasLt host] %s: %s: %s\n", func, cublasLtGetStatusName(status), why);
}

const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
        default: return "an error occurred in the host cuBLAS implementation";
    }
}

const char* cublasLtGetStatusName(cublasStatus_t status) { return cublasGetStatusName(status); }
const char* cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
    if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
    *lightHandle = new cublasLtContext{HANDLE_MAGIC};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
    if (!lightHandle || lightHandle->magic != HANDLE_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    lightHandle->magic = 0;
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
    *matLayout = new cublasLtMatrixLayoutHost{type, rows, cols, ld, CUBLASLT_ORDER_COL, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    delete matLayout;
    return CUBLAS_STATUS_SUCCESS;
}

// Copies an attribute value whose size must match exactly, as cuBLASLt checks.
template <class T>
static cublasStatus_t set_attr(T* field, const void* buf, size_t sizeInBytes, const char* func, const char* name) {
    if (!buf || sizeInBytes != sizeof(T)) {
        char why[160];
        snprintf(why, sizeof(why), "%s takes %zu bytes, got %zu%s", name, sizeof(T), sizeInBytes,
                 buf ? "" : " and a NULL buffer");
        report(func, CUBLAS_STATUS_INVALID_VALUE, why);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    memcpy(field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t L, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
    static const char* F = "cublasLtMatrixLayoutSetAttribute";
    if (!L) return CUBLAS_STATUS_NOT_INITIALIZED;
    switch (attr) {
        case CUBLASLT_MATRIX_LAYOUT_TYPE: {
            uint32_t t;
            cublasStatus_t s = set_attr(&t, buf, sizeInBytes, F, "TYPE");
            if (s == CUBLAS_STATUS_SUCCESS) L->type = (cudaDataType)t;
            return s;
        }
        case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_attr(&L->order, buf, sizeInBytes, F, "ORDER");
        case CUBLASLT_MATRIX_LAYOUT_ROWS: return set_attr(&L->rows, buf, sizeInBytes, F, "ROWS");
        case CUBLASLT_MATRIX_LAYOUT_COLS: return set_attr(&L->cols, buf, sizeInBytes, F, "COLS");
        case CUBLASLT_MATRIX_LAYOUT_LD: return set_attr(&L->ld, buf, sizeInBytes, F, "LD");
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_attr(&L->batch_count, buf, sizeInBytes, F, "BATCH_COUNT");
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
            return set_attr(&L->batch_stride, buf, sizeInBytes, F, "STRIDED_BATCH_OFFSET");
    }
    report(F, CUBLAS_STATUS_INVALID_VALUE, "unknown attribute");
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulDescHost* d = new cublasLtMatmulDescHost{};
    d->compute_type = computeType;
    d->scale_type = scaleType;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->aux_type = d->bias_type = -1;
    *matmulDesc = d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    delete matmulDesc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
    static const char* F = "cublasLtMatmulDescSetAttribute";
    if (!d) return CUBLAS_STATUS_NOT_INITIALIZED;
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set_attr(&d->compute_type, buf, sizeInBytes, F, "COMPUTE_TYPE");
        case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set_attr(&d->scale_type, buf, sizeInBytes, F, "SCALE_TYPE");
        case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set_attr(&d->pointer_mode, buf, sizeInBytes, F, "POINTER_MODE");
        case CUBLASLT_MATMUL_DESC_TRANSA: return set_attr(&d->transa, buf, sizeInBytes, F, "TRANSA");
        case CUBLASLT_MATMUL_DESC_TRANSB: return set_attr(&d->transb, buf, sizeInBytes, F, "TRANSB");
        case CUBLASLT_MATMUL_DESC_TRANSC: return set_attr(&d->transc, buf, sizeInBytes, F, "TRANSC");
        case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_attr(&d->epilogue, buf, sizeInBytes, F, "EPILOGUE");
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_attr(&d->bias, buf, sizeInBytes, F, "BIAS_POINTER");
        case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
            return set_attr(&d->bias_batch_stride, buf, sizeInBytes, F, "BIAS_BATCH_STRIDE");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
            return set_attr(&d->aux, buf, sizeInBytes, F, "EPILOGUE_AUX_POINTER");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set_attr(&d->aux_ld, buf, sizeInBytes, F, "EPILOGUE_AUX_LD");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
            return set_attr(&d->aux_batch_stride, buf, sizeInBytes, F, "EPILOGUE_AUX_BATCH_STRIDE");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
            return set_attr(&d->aux_type, buf, sizeInBytes, F, "EPILOGUE_AUX_DATA_TYPE");
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_attr(&d->bias_type, buf, sizeInBytes, F, "BIAS_DATA_TYPE");
    }
    report(F, CUBLAS_STATUS_INVALID_VALUE, "unknown attribute");
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = new cublasLtMatmulPreferenceHost{CUBLASLT_SEARCH_BEST_FIT, 0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
    static const char* F = "cublasLtMatmulPreferenceSetAttribute";
    if (!pref) return CUBLAS_STATUS_NOT_INITIALIZED;
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return set_attr(&pref->search_mode, buf, sizeInBytes, F, "SEARCH_MODE");
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
            return set_attr(&pref->max_workspace_bytes, buf, sizeInBytes, F, "MAX_WORKSPACE_BYTES");
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
            return set_attr(&pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, sizeInBytes,
                            F, "MIN_ALIGNMENT_*_BYTES");
    }
    report(F, CUBLAS_STATUS_INVALID_VALUE, "unknown attribute");
    return CUBLAS_STATUS_INVALID_VALUE;
}

// ----------------------------------------------------------------------------
// problem description, validated once from the descriptors

struct Problem {
    int64_t m, n, k;
    int batch;
    bool transa, transb;
    cudaDataType ab_type, cd_type, bias_type, aux_type;
    const cublasLtMatrixLayoutHost *A, *B, *C, *D;
    // epilogue, decoded
    bool add_bias;     // D += bias[i] before the activation
    bool apply_gelu;   // D = gelu(D)
    bool store_aux;    // aux = D before GELU
    bool apply_dgelu;  // D = D * gelu'(aux)
    bool bgrad_d;      // bias[i] = sum_j D[i,j]   (DGELU_BGRAD)
    bool bgrad_a;      // bias[i] = sum_k op(A)[i,k]
    bool bgrad_b;      // bias[j] = sum_k op(B)[k,j]
};

static bool is_matmul_type(int32_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

static const char* type_name(int32_t t) {
    switch (t) {
        case CUDA_R_32F: return "CUDA_R_32F";
        case CUDA_R_16BF: return "CUDA_R_16BF";
        case CUDA_R_16F: return "CUDA_R_16F";
        case CUDA_R_64F: return "CUDA_R_64F";
        default: return "another cudaDataType";
    }
}

// Fills p from the descriptors, or returns the status cuBLASLt would give and says why.
static cublasStatus_t describe(const cublasLtMatmulDescHost* d, const cublasLtMatrixLayoutHost* A,
                               const cublasLtMatrixLayoutHost* B, const cublasLtMatrixLayoutHost* C,
                               const cublasLtMatrixLayoutHost* D, Problem* p, char* why, size_t why_len) {
#define FAIL(status, ...) do { snprintf(why, why_len, __VA_ARGS__); return status; } while (0)
    if (!d || !A || !B || !C || !D) FAIL(CUBLAS_STATUS_INVALID_VALUE, "a descriptor is NULL");
    if (d->compute_type != CUBLAS_COMPUTE_32F && d->compute_type != CUBLAS_COMPUTE_32F_PEDANTIC)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "compute type %d: only CUBLAS_COMPUTE_32F is implemented", d->compute_type);
    if (d->scale_type != CUDA_R_32F)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "scale type %s: only CUDA_R_32F is implemented", type_name(d->scale_type));
    if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST && d->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "pointer mode %d: only scalar alpha/beta (HOST or DEVICE)", d->pointer_mode);
    for (int32_t t : {d->transa, d->transb})
        if (t != CUBLAS_OP_N && t != CUBLAS_OP_T) FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "transpose %d: only N and T", t);
    if (d->transc != CUBLAS_OP_N) FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC must be CUBLAS_OP_N");
    const cublasLtMatrixLayoutHost* layouts[4] = {A, B, C, D};
    const char* names = "ABCD";
    for (int i = 0; i < 4; i++) {
        const cublasLtMatrixLayoutHost* L = layouts[i];
        if (L->order != CUBLASLT_ORDER_COL)
            FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "matrix %c: only CUBLASLT_ORDER_COL is implemented", names[i]);
        if (!is_matmul_type(L->type))
            FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "matrix %c has type %s: only CUDA_R_32F and CUDA_R_16BF",
                 names[i], type_name(L->type));
        if (L->ld < (int64_t)(L->rows > 0 ? L->rows : 1))
            FAIL(CUBLAS_STATUS_INVALID_VALUE, "matrix %c: ld %lld < rows %llu", names[i], (long long)L->ld,
                 (unsigned long long)L->rows);
        if (L->batch_count < 1) FAIL(CUBLAS_STATUS_INVALID_VALUE, "matrix %c: batch count %d", names[i], L->batch_count);
        if (L->batch_count != D->batch_count)
            FAIL(CUBLAS_STATUS_INVALID_VALUE, "matrix %c: batch count %d differs from D's %d", names[i],
                 L->batch_count, D->batch_count);
    }
    if (A->type != B->type)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "A is %s but B is %s", type_name(A->type), type_name(B->type));
    if (C->type != D->type)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "C is %s but D is %s", type_name(C->type), type_name(D->type));
    if (A->type == CUDA_R_32F && D->type != CUDA_R_32F)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "fp32 A/B need an fp32 C/D, D is %s", type_name(D->type));

    p->transa = d->transa == CUBLAS_OP_T;
    p->transb = d->transb == CUBLAS_OP_T;
    p->m = (int64_t)D->rows;
    p->n = (int64_t)D->cols;
    p->k = (int64_t)(p->transa ? A->rows : A->cols);
    int64_t a_m = (int64_t)(p->transa ? A->cols : A->rows);
    int64_t b_k = (int64_t)(p->transb ? B->cols : B->rows);
    int64_t b_n = (int64_t)(p->transb ? B->rows : B->cols);
    if (a_m != p->m) FAIL(CUBLAS_STATUS_INVALID_VALUE, "op(A) has %lld rows, D has %lld", (long long)a_m, (long long)p->m);
    if (b_k != p->k) FAIL(CUBLAS_STATUS_INVALID_VALUE, "op(B) has %lld rows, op(A) has %lld columns", (long long)b_k, (long long)p->k);
    if (b_n != p->n) FAIL(CUBLAS_STATUS_INVALID_VALUE, "op(B) has %lld columns, D has %lld", (long long)b_n, (long long)p->n);
    if (C->rows != D->rows || C->cols != D->cols) FAIL(CUBLAS_STATUS_INVALID_VALUE, "C and D differ in shape");
    p->batch = D->batch_count;
    p->ab_type = A->type;
    p->cd_type = D->type;
    p->A = A; p->B = B; p->C = C; p->D = D;

    uint32_t e = d->epilogue;
    p->add_bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    p->apply_gelu = e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
                    e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    p->store_aux = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    p->apply_dgelu = e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    p->bgrad_d = e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    p->bgrad_a = e == CUBLASLT_EPILOGUE_BGRADA;
    p->bgrad_b = e == CUBLASLT_EPILOGUE_BGRADB;
    bool known = e == CUBLASLT_EPILOGUE_DEFAULT || p->add_bias || p->apply_gelu || p->apply_dgelu || p->bgrad_a || p->bgrad_b;
    if (!known) FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u is not implemented (ReLU variants are not)", e);

    bool uses_bias = p->add_bias || p->bgrad_d || p->bgrad_a || p->bgrad_b;
    bool uses_aux = p->store_aux || p->apply_dgelu;
    p->bias_type = d->bias_type == -1 ? D->type : (cudaDataType)d->bias_type;
    p->aux_type = d->aux_type == -1 ? D->type : (cudaDataType)d->aux_type;
    if (uses_bias && p->bias_type != D->type)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "bias type %s: only the type of D (%s)", type_name(p->bias_type), type_name(D->type));
    if (uses_aux && p->aux_type != D->type)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "aux type %s: only the type of D (%s)", type_name(p->aux_type), type_name(D->type));
    if (uses_aux && (d->aux_ld < p->m || d->aux_ld % 8 != 0))
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD %lld must be >= rows of D (%lld) and a multiple of 8",
             (long long)d->aux_ld, (long long)p->m);
    if (p->batch > 1 && (uses_aux || (uses_bias && !p->add_bias)))
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "batched matmuls support only the DEFAULT and BIAS epilogues");
    return CUBLAS_STATUS_SUCCESS;
#undef FAIL
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
    static const char* F = "cublasLtMatmulAlgoGetHeuristic";
    if (!lightHandle || lightHandle->magic != HANDLE_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount) return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    Problem p;
    char why[256];
    cublasStatus_t status = describe(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p, why, sizeof(why));
    if (status != CUBLAS_STATUS_SUCCESS) {
        report(F, status, why);
        return status == CUBLAS_STATUS_INVALID_VALUE ? status : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
    memset(&r, 0, sizeof(r));
    r.algo.data[0] = ALGO_MAGIC;
    // the algorithm assumes the alignments the preference promised (256 bytes where it promised none)
    for (int i = 0; i < 4; i++) r.algo.data[1] |= (uint64_t)(preference ? preference->min_alignment[i] : 256) << (16 * i);
    // and those of the bias and aux pointers on the descriptor now: cuBLASLt documents that the
    // heuristic, which does not dereference them, depends on their values for the alignment
    r.algo.data[2] = pointer_alignment(operationDesc->bias) | (uint64_t)pointer_alignment(operationDesc->aux) << 16;
    r.workspaceSize = 0;  // the host matmul needs no workspace
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// ----------------------------------------------------------------------------
// the matmul

// Output tile: MR rows (two 8-float vectors) x NR columns, accumulated in registers.
static const int MR = 16;
static const int NR = 6;
static const int64_t PANEL_ROWS = 128;  // rows of packed A reused from cache across column tiles
typedef float vec8 __attribute__((vector_size(32)));

// acc[c][r] = sum_kk Ap[kk*a_ld + r] * Bp[c*k + kk], kk = 0..k-1 in order
static void tile_kernel(const float* Ap, int64_t a_ld, const float* Bp, int64_t k, float acc[NR][MR]) {
    vec8 c0[NR] = {}, c1[NR] = {};
    for (int64_t kk = 0; kk < k; kk++) {
        vec8 a0, a1;
        memcpy(&a0, Ap + kk * a_ld, sizeof(a0));
        memcpy(&a1, Ap + kk * a_ld + 8, sizeof(a1));
        for (int c = 0; c < NR; c++) {
            float b = Bp[c * k + kk];
            c0[c] += a0 * b;
            c1[c] += a1 * b;
        }
    }
    for (int c = 0; c < NR; c++) {
        memcpy(&acc[c][0], &c0[c], sizeof(vec8));
        memcpy(&acc[c][8], &c1[c], sizeof(vec8));
    }
}

// Pointers of one batch.
struct Operands {
    const void *A, *B, *C;
    void* D;
    const void* bias_in;  // forward bias
    void* bias_out;       // bias gradient
    void* aux;
    int64_t aux_ld;
    float alpha, beta;
};

// Applies alpha/beta and the epilogue to one element and stores it; returns the fp32 value stored.
static inline float finish_element(const Problem& p, const Operands& o, int64_t i, int64_t j, float acc) {
    float v = o.alpha * acc;
    if (o.beta != 0.0f) v += o.beta * load_elem(o.C, p.cd_type, i + j * p.C->ld);
    if (p.add_bias) v += load_elem(o.bias_in, p.bias_type, i);
    if (p.store_aux) store_elem(o.aux, p.aux_type, i + j * o.aux_ld, v);
    if (p.apply_gelu) v = gelu(v);
    if (p.apply_dgelu) v *= gelu_grad(load_elem(o.aux, p.aux_type, i + j * o.aux_ld));
    store_elem(o.D, p.cd_type, i + j * p.D->ld, v);
    return v;
}

static void matmul_one_batch(const Problem& p, const Operands& o) {
    const int64_t m = p.m, n = p.n, k = p.k;
    const int64_t m_pad = (m + MR - 1) / MR * MR;
    const int64_t n_pad = (n + NR - 1) / NR * NR;
    const int64_t lda = p.A->ld, ldb = p.B->ld;

    // Ap: op(A) column-major, [k][m_pad]; Bp: op(B) column after column, [n_pad][k]
    // (each loop nest reads the source along its contiguous dimension)
    std::vector<float> Ap((size_t)(m_pad * k), 0.0f), Bp((size_t)(n_pad * k), 0.0f);
    if (p.transa) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++)
            for (int64_t kk = 0; kk < k; kk++) Ap[kk * m_pad + i] = load_elem(o.A, p.ab_type, kk + i * lda);
    } else {
        #pragma omp parallel for schedule(static)
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t i = 0; i < m; i++) Ap[kk * m_pad + i] = load_elem(o.A, p.ab_type, i + kk * lda);
    }
    if (p.transb) {
        #pragma omp parallel for schedule(static)
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t j = 0; j < n; j++) Bp[j * k + kk] = load_elem(o.B, p.ab_type, j + kk * ldb);
    } else {
        #pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < n; j++)
            for (int64_t kk = 0; kk < k; kk++) Bp[j * k + kk] = load_elem(o.B, p.ab_type, kk + j * ldb);
    }

    // fp32 results kept for the DGELU_BGRAD row sums, [n][m]
    std::vector<float> G(p.bgrad_d ? (size_t)(m * n) : 0);
    for (int64_t i0 = 0; i0 < m_pad; i0 += PANEL_ROWS) {
        const int64_t i1 = i0 + PANEL_ROWS < m_pad ? i0 + PANEL_ROWS : m_pad;
        #pragma omp parallel for schedule(dynamic, 4)
        for (int64_t j0 = 0; j0 < n_pad; j0 += NR) {
            float acc[NR][MR];
            for (int64_t ir = i0; ir < i1; ir += MR) {
                tile_kernel(Ap.data() + ir, m_pad, Bp.data() + j0 * k, k, acc);
                for (int c = 0; c < NR && j0 + c < n; c++) {
                    for (int r = 0; r < MR && ir + r < m; r++) {
                        float v = finish_element(p, o, ir + r, j0 + c, acc[c][r]);
                        if (p.bgrad_d) G[(size_t)((j0 + c) * m + ir + r)] = v;
                    }
                }
            }
        }
    }

    // bias gradients: fp32 sums in a fixed order, rounded once
    if (p.bgrad_d) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++) {
            float s = 0.0f;
            for (int64_t j = 0; j < n; j++) s += G[(size_t)(j * m + i)];
            store_elem(o.bias_out, p.bias_type, i, s);
        }
    }
    if (p.bgrad_a) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++) {
            float s = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) s += Ap[kk * m_pad + i];
            store_elem(o.bias_out, p.bias_type, i, s);
        }
    }
    if (p.bgrad_b) {
        #pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) s += Bp[j * k + kk];
            store_elem(o.bias_out, p.bias_type, j, s);
        }
    }
}

// Whether elements [0, extent) of p lie in one emulated device allocation; says why not.
static bool device_range(const void* p, int64_t extent, size_t esize, const char* name, char* why, size_t why_len) {
    if (p && extent >= 0 && simt::detail::is_device_range(p, (size_t)extent * esize)) return true;
    snprintf(why, why_len, "%s (%lld elements at %p) is not inside one cudaMalloc allocation: a host pointer, "
             "or a size/ld/stride that runs past the buffer", name, (long long)extent, p);
    return false;
}

// The same for a (batched) matrix: the last element is (batch-1)*stride + (cols-1)*ld + rows-1.
static bool device_matrix(const void* p, const cublasLtMatrixLayoutHost* L, size_t esize, const char* name,
                          char* why, size_t why_len) {
    if (L->batch_stride < 0) {
        snprintf(why, why_len, "matrix %s: negative batch strides are not implemented", name);
        return false;
    }
    int64_t extent = (int64_t)(L->batch_count - 1) * L->batch_stride + ((int64_t)L->cols - 1) * L->ld + (int64_t)L->rows;
    return device_range(p, extent, esize, name, why, why_len);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
    static const char* F = "cublasLtMatmul";
    if (!lightHandle || lightHandle->magic != HANDLE_MAGIC) {
        report(F, CUBLAS_STATUS_NOT_INITIALIZED, "the handle was not made by cublasLtCreate");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    Problem p;
    char why[256];
    cublasStatus_t status = describe(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p, why, sizeof(why));
    if (status != CUBLAS_STATUS_SUCCESS) {
        report(F, status, why);
        return status;
    }
#define FAIL(status, msg) do { report(F, status, msg); return status; } while (0)
#define FAIL_MEM(msg) FAIL(CUBLAS_STATUS_INVALID_VALUE, msg)
    if (algo && algo->data[0] != ALGO_MAGIC) FAIL(CUBLAS_STATUS_INVALID_VALUE, "algo was not returned by cublasLtMatmulAlgoGetHeuristic");
    if (!alpha || !beta) FAIL(CUBLAS_STATUS_INVALID_VALUE, "alpha or beta is NULL");
    if (algo) {
        const void* ptrs[4] = {A, B, C, D};
        for (int i = 0; i < 4; i++) {
            uint64_t need = (algo->data[1] >> (16 * i)) & 0xFFFF;
            if (ptrs[i] && need > 1 && (uintptr_t)ptrs[i] % need != 0) {
                snprintf(why, sizeof why, "%c = %p is not %llu-byte aligned, as the algorithm assumes (set "
                         "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES from the pointer before the heuristic)",
                         "ABCD"[i], ptrs[i], (unsigned long long)need, "ABCD"[i]);
                FAIL(CUBLAS_STATUS_EXECUTION_FAILED, why);
            }
        }
    }
    bool uses_bias = p.add_bias || p.bgrad_d || p.bgrad_a || p.bgrad_b;
    bool uses_aux = p.store_aux || p.apply_dgelu;
    if (algo) {
        const void* ptrs[2] = {uses_bias ? computeDesc->bias : nullptr, uses_aux ? computeDesc->aux : nullptr};
        const char* names[2] = {"BIAS_POINTER", "EPILOGUE_AUX_POINTER"};
        for (int i = 0; i < 2; i++) {
            uint64_t need = (algo->data[2] >> (16 * i)) & 0xFFFF;
            if (ptrs[i] && need > 1 && (uintptr_t)ptrs[i] % need != 0) {
                snprintf(why, sizeof why, "%s = %p is not %llu-byte aligned, as the algorithm assumes (the heuristic "
                         "takes the alignment from the pointer set then: set it before the heuristic)", names[i],
                         ptrs[i], (unsigned long long)need);
                FAIL(CUBLAS_STATUS_EXECUTION_FAILED, why);
            }
        }
    }
    Operands o{};
    o.alpha = *(const float*)alpha;
    o.beta = *(const float*)beta;
    if (p.m * p.n > 0 && !D) FAIL(CUBLAS_STATUS_INVALID_VALUE, "D is NULL");
    if (p.m * p.n * p.k > 0 && (!A || !B)) FAIL(CUBLAS_STATUS_INVALID_VALUE, "A or B is NULL");
    if (o.beta != 0.0f && !C) FAIL(CUBLAS_STATUS_INVALID_VALUE, "beta is nonzero but C is NULL");
    if (C == D && (Cdesc->ld != Ddesc->ld || Cdesc->batch_stride != Ddesc->batch_stride))
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "in-place (C == D) needs identical C and D layouts");
    if (uses_bias && !computeDesc->bias) FAIL(CUBLAS_STATUS_INVALID_VALUE, "the epilogue needs BIAS_POINTER");
    if (uses_aux && !computeDesc->aux) FAIL(CUBLAS_STATUS_INVALID_VALUE, "the epilogue needs EPILOGUE_AUX_POINTER");
    // Whether cuBLASLt scales BGRADA/BGRADB by alpha is not documented: refuse rather than guess.
    if ((p.bgrad_a || p.bgrad_b) && o.alpha != 1.0f)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "BGRADA/BGRADB are implemented for alpha == 1 only");

    // every byte the call touches must lie in one cudaMalloc allocation, as on a GPU
    // (catches host pointers and lds, strides or batch counts that run past a buffer)
    char where[256];
    const size_t ab = elem_size(p.ab_type), cd = elem_size(p.cd_type), bs = elem_size(p.bias_type);
    if (p.m * p.k > 0 && !device_matrix(A, Adesc, ab, "A", where, sizeof(where))) FAIL_MEM(where);
    if (p.k * p.n > 0 && !device_matrix(B, Bdesc, ab, "B", where, sizeof(where))) FAIL_MEM(where);
    if (p.m * p.n > 0 && o.beta != 0.0f && !device_matrix(C, Cdesc, cd, "C", where, sizeof(where))) FAIL_MEM(where);
    if (p.m * p.n > 0 && !device_matrix(D, Ddesc, cd, "D", where, sizeof(where))) FAIL_MEM(where);
    if (uses_bias) {
        int64_t len = p.bgrad_b ? p.n : p.m;
        int64_t extent = len + (p.add_bias ? (p.batch - 1) * computeDesc->bias_batch_stride : 0);
        if (len > 0 && !device_range(computeDesc->bias, extent, bs, "the bias vector", where, sizeof(where)))
            FAIL_MEM(where);
    }
    if (uses_aux && p.m * p.n > 0 &&
        !device_range(computeDesc->aux, (p.n - 1) * computeDesc->aux_ld + p.m, elem_size(p.aux_type),
                      "the epilogue aux matrix", where, sizeof(where)))
        FAIL_MEM(where);
#undef FAIL_MEM
#undef FAIL

    for (int b = 0; b < p.batch; b++) {
        o.A = (const char*)A + (size_t)(b * Adesc->batch_stride) * ab;
        o.B = (const char*)B + (size_t)(b * Bdesc->batch_stride) * ab;
        o.C = C ? (const char*)C + (size_t)(b * Cdesc->batch_stride) * cd : nullptr;
        o.D = (char*)D + (size_t)(b * Ddesc->batch_stride) * cd;
        o.bias_in = computeDesc->bias ? (const char*)computeDesc->bias + (size_t)(b * computeDesc->bias_batch_stride) * bs
                                      : nullptr;
        o.bias_out = (void*)computeDesc->bias;
        o.aux = computeDesc->aux;
        o.aux_ld = computeDesc->aux_ld;
        matmul_one_batch(p, o);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// ----------------------------------------------------------------------------
// classic cuBLAS GEMMs, through cublasLtMatmul

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasContext{nullptr};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha,
                                          const void* A, cudaDataType Atype, int lda, long long int strideA,
                                          const void* B, cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta,
                                          void* C, cudaDataType Ctype, int ldc, long long int strideC,
                                          int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batchCount < 1) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtContext lt{HANDLE_MAGIC};
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, computeType, CUDA_R_32F);
    desc->transa = transa;
    desc->transb = transb;
    bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    cublasLtMatrixLayoutHost La{Atype, (uint64_t)(ta ? k : m), (uint64_t)(ta ? m : k), lda, CUBLASLT_ORDER_COL, batchCount, strideA};
    cublasLtMatrixLayoutHost Lb{Btype, (uint64_t)(tb ? n : k), (uint64_t)(tb ? k : n), ldb, CUBLASLT_ORDER_COL, batchCount, strideB};
    cublasLtMatrixLayoutHost Lc{Ctype, (uint64_t)m, (uint64_t)n, ldc, CUBLASLT_ORDER_COL, batchCount, strideC};
    cublasStatus_t status = cublasLtMatmul(&lt, desc, alpha, A, &La, B, &Lb, beta, C, &Lc, C, &Lc, nullptr,
                                           nullptr, 0, handle->stream);
    cublasLtMatmulDescDestroy(desc);
    return status;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int m, int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc) {
    return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B,
                                      CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT);
}
