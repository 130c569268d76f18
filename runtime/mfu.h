// Model FLOPs utilisation: the FLOPs a training step needs against the GPU's dense bf16 peak.
#pragma once

#include <string>

#include "model/gpt2_config.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

// FLOPs of one training token (forward and backward): 6 per parameter for the matmuls, plus the
// attention's 6 L C T (PaLM's estimate, as llm.c).
inline double training_flops_per_token(size_t num_parameters, const GPT2Config& c, int T) {
    return 6.0 * num_parameters + 6.0 * c.num_layers * c.channels * T;
}

// Dense bf16 tensor-core peak of a GPU by its name, 0 where unknown (then no MFU is printed).
inline double peak_flops_of(const std::string& name) {
    if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) return 989e12;
    if (name.find("A100") != std::string::npos) return 312e12;
    if (name.find("L40S") != std::string::npos) return 362e12;
    if (name.find("A10") != std::string::npos) return 125e12;
    return 0;
}

// The peak of this process's GPU; 0 on the CPU back end and under the emulator.
inline double device_peak_flops() {
#ifdef __CUDACC__
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 0;
    return peak_flops_of(prop.name);
#else
    return 0;
#endif
}
