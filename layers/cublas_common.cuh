// cuBLASLt for the project's matmuls: the API, cublasCheck, and the per-process handle and
// workspace (as llm.c). Under nvcc this is the real library (link $(NVCC_LDLIBS), see
// simt/simt.mk); under g++ it is the host implementation in simt/cublaslt_host.h,
// which runs the same call sites on the CPU.
#pragma once

#include "layers/cuda_common.cuh"
#include "simt/cublaslt.h"

inline void cublas_check(cublasStatus_t status, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "[cuBLAS ERROR] at file %s:%d:\n%d %s: %s\n", file, line, (int)status,
                cublasGetStatusName(status), cublasGetStatusString(status));
        exit(EXIT_FAILURE);
    }
}
#define cublasCheck(status) (cublas_check((status), __FILE__, __LINE__))

// One handle and one workspace per process (one GPU per process).
// 32 MiB: Hopper's fastest kernels want that much; others need 4 MiB.
inline size_t cublaslt_workspace_size = 32 * 1024 * 1024;
inline void* cublaslt_workspace = nullptr;
inline cublasLtHandle_t cublaslt_handle = nullptr;

// Call once after cudaSetDevice, before the first matmul.
inline void cublaslt_setup() {
    if (cublaslt_handle != nullptr) return;
    cublasCheck(cublasLtCreate(&cublaslt_handle));
    cudaCheck(cudaMalloc(&cublaslt_workspace, cublaslt_workspace_size));
}

inline void cublaslt_teardown() {
    if (cublaslt_handle == nullptr) return;
    cudaCheck(cudaFree(cublaslt_workspace));
    cublasCheck(cublasLtDestroy(cublaslt_handle));
    cublaslt_workspace = nullptr;
    cublaslt_handle = nullptr;
}
