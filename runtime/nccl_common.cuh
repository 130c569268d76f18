// NCCL for multi-GPU training: the API and ncclCheck. Under nvcc this is the real library
// (link $(NVCC_LDLIBS), see simt/simt.mk); under g++ it is the host implementation in
// simt/nccl_host.h, where ranks are threads or processes of one machine.
#pragma once

#include "layers/cuda_common.cuh"
#include "simt/nccl.h"

inline void nccl_check(ncclResult_t status, const char* file, int line) {
    if (status != ncclSuccess) {
        fprintf(stderr, "[NCCL ERROR] at file %s:%d:\n%s\n%s\n", file, line, ncclGetErrorString(status),
                ncclGetLastError(nullptr));
        exit(EXIT_FAILURE);
    }
}
#define ncclCheck(status) (nccl_check((status), __FILE__, __LINE__))
