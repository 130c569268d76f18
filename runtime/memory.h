// The memory a training run needs, estimated before anything is allocated, and what the machine has,
// so that a run that cannot fit is refused with the sizes instead of ending in std::bad_alloc.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "model/gpt2_config.h"
#include "model/gpt2_sizes.h"

// What a training run needs, as its back end states it (runtime/backend.h, backend_training_memory):
// the state that lives as long as the model (weights, gradients, optimizer moments) and the
// activations of one micro-batch, with what each holds, for the refusal's message.
struct MemoryEstimate {
    double state_bytes = 0, activation_bytes = 0;
    std::string state_what = "weights, gradients and AdamW moments", activation_what = "activations of one micro-batch";
    bool lower_bound = false;  // the back end allocates more than this (what it leaves out, unknown here)
    double total() const { return state_bytes + activation_bytes; }
};

// The CPU back end: fp32 weights, gradients and AdamW's two moments (16 bytes a parameter), and the
// fp32 activations of one micro-batch of B x T (model/gpt2_sizes.h, the list every back end sizes
// from; it keeps their gradients too, not counted: a lower bound). The CUDA back end counts its own
// allocations (model/gpt2_cuda.cuh, gpt2_cuda_training_memory).
inline MemoryEstimate cpu_training_memory_estimate(const GPT2Config& c, int B, int T) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(sizes, c);
    double params = 0;
    for (size_t s : sizes) params += (double)s;
    ActivationTensors<size_t> named = gpt2_activation_sizes(c, B, T);
    const size_t* act_sizes = (const size_t*)&named;
    double acts = 0;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) acts += (double)act_sizes[i];
    MemoryEstimate m;
    m.state_bytes = 16.0 * params;
    m.activation_bytes = 4.0 * acts;
    m.state_what = "fp32 weights, gradients and AdamW moments";
    m.activation_what = "fp32 activations of one micro-batch";
    m.lower_bound = true;
    return m;
}

// MemAvailable of /proc/meminfo in bytes; 0 if unknown.
inline double host_memory_available() {
    FILE* f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

// "12.3 GiB"
inline std::string format_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) bytes /= 1024, u++;
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
    return buf;
}

// "" if the estimate fits into `available` bytes (0: unknown, not checked), else the refusal: the
// flags, the size needed and of what (the back end's figures), what the machine has (`where`:
// which memory) and the fix.
inline std::string memory_shortfall(const MemoryEstimate& need, double available, const std::string& flags,
                                    const std::string& where) {
    if (available <= 0 || need.total() <= available) return "";
    return flags + ": the run " + (need.lower_bound ? "needs at least " : "allocates ") + format_bytes(need.total()) +
           " (" + need.state_what + ": " + format_bytes(need.state_bytes) + "; " + need.activation_what + ": " +
           format_bytes(need.activation_bytes) + "), the machine has " + format_bytes(available) + " available (" +
           where + "); use a smaller model (-e), micro-batch (-b) or sequence length (-t)";
}

// The memory a run of this back end can use, and *where what it is measured: the GPU's free memory
// on the CUDA back end, MemAvailable of /proc/meminfo on the CPU back end and under the emulator.
inline double backend_memory_available(std::string* where) {
#if defined(__CUDACC__)
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        *where = "free memory of the GPU (cudaMemGetInfo)";
        return (double)free_bytes;
    }
#endif
    *where = "MemAvailable of /proc/meminfo";
    return host_memory_available();
}
