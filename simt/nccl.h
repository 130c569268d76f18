// NCCL for both builds: the real library under nvcc (link $(NVCC_LDLIBS)), the host implementation
// of the subset the project calls (simt/nccl_host.h: ranks as threads or processes of one machine)
// under g++.
#pragma once

#include "simt/dialect.cuh"

#if defined(__CUDACC__)
#include <nccl.h>
#else
#include "simt/nccl_host.h"
#endif
