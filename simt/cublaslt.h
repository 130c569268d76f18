// cuBLASLt for both builds: the real library under nvcc (link $(NVCC_LDLIBS)), the host
// implementation of the subset the project calls (simt/cublaslt_host.h, run on the CPU) under g++.
#pragma once

#include "simt/dialect.cuh"

#if defined(__CUDACC__)
#include <cublasLt.h>
#include <cublas_v2.h>
#else
#include "simt/cublaslt_host.h"
#endif
