// Model FLOPs utilisation: the FLOPs a training step needs against the GPU's dense bf16 peak.
#pragma once

#include <cctype>
#include <cmath>
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

// Dense bf16 tensor-core peaks (FP32 accumulation, no sparsity), from the vendor's datasheets and
// whitepapers; a figure "with sparsity" there is twice the dense one. A name matches where it
// appears in the device name as a whole word (so "L4" is not "L40S", "A10" not "A100" or "A10G");
// the first match counts, so a variant comes before its family.
struct GpuPeak {
    const char* name;
    double flops;
};
inline const GpuPeak GPU_PEAKS[] = {
    {"B200", 2250e12},          // NVIDIA HGX B200 datasheet: FP16/BF16 4.5 PFLOPS per GPU with sparsity
    {"H100 PCIe", 756e12},      // NVIDIA H100 datasheet: BF16 1,513 TFLOPS with sparsity (PCIe)
    {"H100 NVL", 835e12},       // NVIDIA H100 datasheet: BF16 1,671 TFLOPS with sparsity (NVL)
    {"H100", 989e12},           // NVIDIA H100 datasheet: BF16 1,979 TFLOPS with sparsity (SXM)
    {"GH200", 989e12},          // NVIDIA GH200 datasheet: BF16 1,979 TFLOPS with sparsity
    {"H200", 989e12},           // NVIDIA H200 datasheet: BF16 1,979 TFLOPS with sparsity (SXM)
    {"A100", 312e12},           // NVIDIA A100 datasheet: BF16 312 TFLOPS (624 with sparsity)
    {"L40S", 362e12},           // NVIDIA L40S datasheet: BF16 362.05 TFLOPS (733 with sparsity)
    {"L4", 121e12},             // NVIDIA L4 datasheet: BF16 242 TFLOPS with sparsity
    {"RTX 6000 Ada", 364.2e12}, // NVIDIA Ada Lovelace architecture whitepaper: RTX 6000 Ada, peak BF16 tensor
                                // TFLOPS with FP32 accumulate 364.2 (728.5 with sparsity)
    {"RTX 4090", 165.2e12},     // NVIDIA Ada Lovelace architecture whitepaper: GeForce RTX 4090, peak BF16
                                // tensor TFLOPS with FP32 accumulate 165.2 (330.4 with sparsity)
    {"RTX A6000", 154.8e12},    // NVIDIA Ampere GA102 whitepaper: RTX A6000, peak BF16 tensor TFLOPS with
                                // FP32 accumulate 154.8 (309.7 with sparsity)
    {"A10", 125e12},            // NVIDIA A10 datasheet: BF16 125 TFLOPS (250 with sparsity)
};

// true if `key` appears in `name` with no letter or digit right before or after it
inline bool gpu_name_has(const std::string& name, const std::string& key) {
    for (size_t at = name.find(key); at != std::string::npos; at = name.find(key, at + 1)) {
        bool before = at == 0 || !isalnum((unsigned char)name[at - 1]);
        size_t end = at + key.size();
        bool after = end == name.size() || !isalnum((unsigned char)name[end]);
        if (before && after) return true;
    }
    return false;
}

// The dense bf16 peak of a GPU by its name; 0 where unknown (then "MFU n/a" is printed).
inline double peak_flops_of(const std::string& name) {
    for (const GpuPeak& g : GPU_PEAKS)
        if (gpu_name_has(name, g.name)) return g.flops;
    return 0;
}

// What the trainer prints where a GPU's peak is unknown.
inline const char* MFU_UNKNOWN = "MFU n/a (add its peak to runtime/mfu.h)";

// The peak of this process's GPU, its name in *name: -1 where there is no GPU (the CPU back end,
// the emulator), 0 for a GPU of unknown peak.
inline double device_peak_flops(std::string* name = nullptr) {
#ifdef __CUDACC__
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 0;
    if (name) *name = prop.name;
    return peak_flops_of(prop.name);
#else
    if (name) name->clear();
    return -1;
#endif
}

// The MFU of a step: flops_per_step / seconds / peak; NaN for a GPU of unknown peak (printed "n/a"),
// -1 without a GPU (not printed).
inline double step_mfu(double flops_per_step, double seconds, double peak) {
    if (peak < 0) return -1;
    if (peak == 0 || !(seconds > 0)) return NAN;
    return flops_per_step / seconds / peak;
}
