// cuBLASLt (and a little cuBLAS) on the host, for the emulated CUDA build.
//
// The subset of /usr/local/cuda/include/cublasLt.h and cublas_api.h that the
// project calls, with the same names, enum values and signatures, so one call
// site compiles against the real library under nvcc and against this file
// under g++. "Device" memory is host memory in the emulated build, so the
// matmul reads and writes the pointers it is given directly.
//
// What cublasLtMatmul computes (column-major, as cuBLASLt):
//   D[m,n] = epilogue(alpha * op(A)[m,k] @ op(B)[k,n] + beta * C[m,n] (+ bias[m]))
//   A, B: CUDA_R_32F or CUDA_R_16BF (both the same); C, D: the same type, fp32
//   when A/B are fp32; fp32 accumulation (CUBLAS_COMPUTE_32F), fp32 alpha/beta;
//   bf16 values are converted exactly and results rounded to nearest even.
//   Epilogues (GELU = tanh approximation, evaluated in fp32):
//     BIAS, GELU, GELU_BIAS        as the formula says
//     GELU_AUX, GELU_AUX_BIAS      also aux[i,j] (ld EPILOGUE_AUX_LD) = the value before GELU
//     DGELU                        D = (alpha * op(A) op(B) + beta * C) * gelu'(aux)
//     DGELU_BGRAD                  DGELU, and bias[i] = sum_j D[i,j] (fp32, before rounding)
//     BGRADA / BGRADB              D as DEFAULT, and bias[i] = sum_k op(A)[i,k] / bias[j] = sum_k op(B)[k,j]
// Anything else returns CUBLAS_STATUS_NOT_SUPPORTED (or INVALID_VALUE for an
// inconsistent description) and prints why, never a silently wrong result.
// Every matrix and vector must lie inside one cudaMalloc allocation of the
// emulator (INVALID_VALUE otherwise), so host pointers and lds, strides or batch
// counts that reach past a buffer fail here as they would fault on a GPU.
// The heuristic's algorithm assumes the alignments of the BIAS_POINTER and EPILOGUE_AUX_POINTER set
// on the descriptor when it ran (cuBLASLt documents that it depends on their values; NULL: 256
// bytes): a call with a pointer aligned to less fails, as it could on a GPU.
// Restrictions beyond cuBLASLt's own: bias and aux have D's type; batched calls
// take only the DEFAULT and BIAS epilogues; BGRADA/BGRADB need alpha == 1.
// The call is synchronous: it is done when it returns (stream order holds
// because emulated launches also complete before returning).
#pragma once

#include <cstddef>
#include <cstdint>

#include "simt.h"  // cudaStream_t

// ----------------------------------------------------------------------------
// library_types.h

#ifndef __LIBRARY_TYPES_H__
#define __LIBRARY_TYPES_H__
typedef enum cudaDataType_t {
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14,
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
} cudaDataType;
#endif

// ----------------------------------------------------------------------------
// cublas_api.h

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2, CUBLAS_OP_HERMITAN = 2, CUBLAS_OP_CONJG = 3 } cublasOperation_t;

typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;

typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_64F_PEDANTIC = 71,
    CUBLAS_COMPUTE_32I = 72,
    CUBLAS_COMPUTE_32I_PEDANTIC = 73,
} cublasComputeType_t;

typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DFALT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;

typedef cudaDataType cublasDataType_t;

const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

// Classic cuBLAS: a handle that only carries its stream, and two GEMMs
// (fp32 compute, same rules as cublasLtMatmul with the DEFAULT epilogue).
typedef struct cublasContext* cublasHandle_t;
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int m, int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha,
                                          const void* A, cudaDataType Atype, int lda, long long int strideA,
                                          const void* B, cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta,
                                          void* C, cudaDataType Ctype, int ldc, long long int strideC,
                                          int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo);

// ----------------------------------------------------------------------------
// cublasLt.h

typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatrixLayoutHost* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulDescHost* cublasLtMatmulDesc_t;
typedef struct cublasLtMatmulPreferenceHost* cublasLtMatmulPreference_t;

typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;

typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                  // uint32_t (cudaDataType)
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                 // int32_t (cublasLtOrder_t), only COL is supported
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                  // uint64_t
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,                  // uint64_t
    CUBLASLT_MATRIX_LAYOUT_LD = 4,                    // int64_t
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,           // int32_t
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,  // int64_t, in elements
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
    CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST,
    CUBLASLT_POINTER_MODE_DEVICE = CUBLAS_POINTER_MODE_DEVICE,
    CUBLASLT_POINTER_MODE_DEVICE_VECTOR = 2,
    CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 3,
    CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST = 4,
} cublasLtPointerMode_t;

typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,               // int32_t (cublasComputeType_t)
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,                 // int32_t (cudaDataType)
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,               // int32_t (cublasLtPointerMode_t)
    CUBLASLT_MATMUL_DESC_TRANSA = 3,                     // int32_t (cublasOperation_t)
    CUBLASLT_MATMUL_DESC_TRANSB = 4,                     // int32_t
    CUBLASLT_MATMUL_DESC_TRANSC = 5,                     // int32_t, only N is supported
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,                   // uint32_t (cublasLtEpilogue_t)
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,               // void*
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,         // int64_t, in elements
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,      // void*
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,           // int64_t, in elements
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13, // int64_t, in elements
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,    // int32_t (cudaDataType), -1 = D's type
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,            // int32_t (cudaDataType), -1 = D's type
} cublasLtMatmulDescAttributes_t;

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = (CUBLASLT_EPILOGUE_RELU | 128),
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = (CUBLASLT_EPILOGUE_GELU | 128),
    CUBLASLT_EPILOGUE_GELU_BIAS = (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = (CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;

typedef enum {
    CUBLASLT_SEARCH_BEST_FIT = 0,
    CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID = 1,
} cublasLtMatmulSearch_t;

typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,         // uint32_t (cublasLtMatmulSearch_t)
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, // uint64_t
    // uint32_t: the smallest alignment of A, B, C, D the caller promises; unset, 256 is assumed, and
    // cublasLtMatmul with a pointer aligned to less than the algorithm assumed fails (as on a GPU,
    // where it would be a misaligned access)
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes);

// Returns one result when the problem is supported, none (and NOT_SUPPORTED) otherwise.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream);
