// cuBLASLt for the project's matmuls: the API, cublasCheck, and the per-device handle,
// workspace and table of matmul plans. Under nvcc this is the real library (link $(NVCC_LDLIBS), see
// simt/simt.mk); under g++ it is the host implementation in simt/cublaslt_host.h,
// which runs the same call sites on the CPU.
#pragma once

#include <mutex>
#include <vector>

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

// A matmul problem as cuBLASLt's heuristic sees it: the shape, transposes, epilogue, data type and
// the alignment (bytes) of A, B, D, the bias and the epilogue's aux matrix. The pointers themselves
// are not part of it: they are set on the cached descriptor at each call.
struct MatmulPlanKey {
    int m = 0, n = 0, k = 0;
    bool transA = false, transB = false;
    int epilogue = 0;
    cudaDataType_t dtype = CUDA_R_16BF;
    uint32_t alignment[5] = {};
    bool operator==(const MatmulPlanKey& o) const {
        if (m != o.m || n != o.n || k != o.k || transA != o.transA || transB != o.transB ||
            epilogue != o.epilogue || dtype != o.dtype) return false;
        for (int i = 0; i < 5; i++) if (alignment[i] != o.alignment[i]) return false;
        return true;
    }
};

// What cuBLASLt built for one MatmulPlanKey: descriptor, layouts, preference, the heuristic's answer.
struct MatmulPlan {
    MatmulPlanKey key;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr, layoutD = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    cublasLtMatmulHeuristicResult_t heuristic = {};
    cublasStatus_t heuristic_status = CUBLAS_STATUS_SUCCESS;
    bool found = false;  // the heuristic returned an algorithm
};

inline void matmul_plan_destroy(MatmulPlan& p) {
    if (p.preference) cublasCheck(cublasLtMatmulPreferenceDestroy(p.preference));
    if (p.desc) cublasCheck(cublasLtMatmulDescDestroy(p.desc));
    if (p.layoutA) cublasCheck(cublasLtMatrixLayoutDestroy(p.layoutA));
    if (p.layoutB) cublasCheck(cublasLtMatrixLayoutDestroy(p.layoutB));
    if (p.layoutD) cublasCheck(cublasLtMatrixLayoutDestroy(p.layoutD));
    p = MatmulPlan{};
}

// One handle and one workspace per device: both belong to the device that was current when they
// were made, so each rank thread of a multi-GPU process (cudaSetDevice(rank) first) gets its own.
// 32 MiB: Hopper's fastest kernels want that much; others need 4 MiB.
// plans: the matmul problems seen on this device (a GPT-2 step has about 20; evaluation over
// varying lengths adds more: past MATMUL_MAX_PLANS the oldest is replaced). plan_mutex guards
// them and the cached descriptors, whose pointer attributes each call sets.
inline size_t cublaslt_workspace_size = 32 * 1024 * 1024;
constexpr int CUBLASLT_MAX_DEVICES = 64;
constexpr size_t MATMUL_MAX_PLANS = 64;
struct CublasLtDevice {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    std::vector<MatmulPlan> plans;
    size_t next_replaced = 0;           // the plan replaced next once MATMUL_MAX_PLANS are kept
    size_t plan_hits = 0, plan_misses = 0;
    std::mutex plan_mutex;
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

// The current device's handle, workspace and plans (cublaslt_setup() must have run on it).
inline CublasLtDevice& cublaslt_current() {
    CublasLtDevice& d = cublaslt_devices[cublaslt_current_device()];
    if (d.handle == nullptr) {
        fprintf(stderr, "[ERROR] cublaslt: no handle for device %d: call cublaslt_setup() after cudaSetDevice\n",
                cublaslt_current_device());
        exit(EXIT_FAILURE);
    }
    return d;
}

// The plan for key on device lt (plan_mutex held): the cached one, or null after a miss, when the
// caller builds the plan into the slot returned by matmul_plan_slot.
inline MatmulPlan* matmul_plan_find(CublasLtDevice& lt, const MatmulPlanKey& key) {
    for (MatmulPlan& p : lt.plans) {
        if (p.key == key) { lt.plan_hits++; return &p; }
    }
    lt.plan_misses++;
    return nullptr;
}
inline MatmulPlan& matmul_plan_slot(CublasLtDevice& lt) {
    if (lt.plans.size() < MATMUL_MAX_PLANS) {
        lt.plans.emplace_back();
        return lt.plans.back();
    }
    MatmulPlan& p = lt.plans[lt.next_replaced];
    lt.next_replaced = (lt.next_replaced + 1) % MATMUL_MAX_PLANS;
    matmul_plan_destroy(p);
    return p;
}

// Frees every device's handle, workspace and plans (each on its own device).
inline void cublaslt_teardown() {
    std::lock_guard<std::mutex> lock(cublaslt_mutex);
    int current = 0;
    cudaCheck(cudaGetDevice(&current));
    for (int device = 0; device < CUBLASLT_MAX_DEVICES; device++) {
        CublasLtDevice& d = cublaslt_devices[device];
        if (d.handle == nullptr) continue;
        cudaCheck(cudaSetDevice(device));
        for (MatmulPlan& p : d.plans) matmul_plan_destroy(p);
        d.plans.clear();
        d.next_replaced = 0;
        d.plan_hits = d.plan_misses = 0;
        cudaCheck(cudaFree(d.workspace));
        cublasCheck(cublasLtDestroy(d.handle));
        d.handle = nullptr;
        d.workspace = nullptr;
    }
    cudaCheck(cudaSetDevice(current));
}
