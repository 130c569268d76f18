// cuBLASLt for the project's matmuls: the API, cublasCheck, and the per-device handle and
// workspace. Under nvcc this is the real library (link $(NVCC_LDLIBS), see
// simt/simt.mk); under g++ it is the host implementation in simt/cublaslt_host.h,
// which runs the same call sites on the CPU.
#pragma once

#include <mutex>

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

// One handle and one workspace per device: both belong to the device that was current when they
// were made, so each rank thread of a multi-GPU process (cudaSetDevice(rank) first) gets its own.
// 32 MiB: Hopper's fastest kernels want that much; others need 4 MiB.
inline size_t cublaslt_workspace_size = 32 * 1024 * 1024;
constexpr int CUBLASLT_MAX_DEVICES = 64;
struct CublasLtDevice {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
};
inline CublasLtDevice cublaslt_devices[CUBLASLT_MAX_DEVICES];
inline std::mutex cublaslt_mutex;

inline int cublaslt_current_device() {
    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    if (device < 0 || device >= CUBLASLT_MAX_DEVICES) {
        fprintf(stderr, "[ERROR] cublaslt: device %d is beyond the %d this build keeps handles for "
                        "(CUBLASLT_MAX_DEVICES in layers/cublas_common.cuh)\n", device, CUBLASLT_MAX_DEVICES);
        exit(EXIT_FAILURE);
    }
    return device;
}

// Call after cudaSetDevice, before the first matmul on that device (again is harmless).
inline void cublaslt_setup() {
    int device = cublaslt_current_device();
    std::lock_guard<std::mutex> lock(cublaslt_mutex);
    CublasLtDevice& d = cublaslt_devices[device];
    if (d.handle != nullptr) return;
    cublasCheck(cublasLtCreate(&d.handle));
    cudaCheck(cudaMalloc(&d.workspace, cublaslt_workspace_size));
}

// The current device's handle and workspace (cublaslt_setup() must have run on it).
inline const CublasLtDevice& cublaslt_current() {
    const CublasLtDevice& d = cublaslt_devices[cublaslt_current_device()];
    if (d.handle == nullptr) {
        fprintf(stderr, "[ERROR] cublaslt: no handle for device %d: call cublaslt_setup() after cudaSetDevice\n",
                cublaslt_current_device());
        exit(EXIT_FAILURE);
    }
    return d;
}

// Frees every device's handle and workspace (each on its own device).
inline void cublaslt_teardown() {
    std::lock_guard<std::mutex> lock(cublaslt_mutex);
    int current = 0;
    cudaCheck(cudaGetDevice(&current));
    for (int device = 0; device < CUBLASLT_MAX_DEVICES; device++) {
        CublasLtDevice& d = cublaslt_devices[device];
        if (d.handle == nullptr) continue;
        cudaCheck(cudaSetDevice(device));
        cudaCheck(cudaFree(d.workspace));
        cublasCheck(cublasLtDestroy(d.handle));
        d = CublasLtDevice{};
    }
    cudaCheck(cudaSetDevice(current));
}
