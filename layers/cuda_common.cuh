// Common CUDA header of the project's layers: every .cuh kernel file includes this first. The kernel
// dialect (launches, shared memory; real CUDA under nvcc, the emulator under g++) is simt/dialect.cuh;
// this file adds the error check and small helpers every layer uses.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstdint>

#include "simt/dialect.cuh"

inline void cuda_check(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(err));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) (cuda_check((err), __FILE__, __LINE__))

__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
