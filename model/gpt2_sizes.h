// The activations of one forward pass of GPT-2 + RoPE and their element counts: one list for every
// back end. The CPU graph (model/gpt2_cpu.h) keeps all of them; the CUDA back end
// (model/gpt2_cuda.cuh, layout_activations) allocates the ones it keeps from the same counts,
// so a new activation is sized here once.
#pragma once

#include <cstddef>

#include "model/gpt2_config.h"

// The activations, one line each: X(name, per_layer, shape, cuda_type, on_cuda)
// shape: one layer's slice for a per-layer tensor (stacked over the L layers), in B batch, T time,
// C channels, NH heads, Vp padded vocabulary. cuda_type: the element type of the CUDA back end's
// buffer (floatX: the build's activation type, bf16). on_cuda: whether the CUDA back end keeps it
// (the CPU keeps every one; the CUDA graph does without the pre-RoPE qkv and the projections'
// outputs, which its GPT2CudaActivations::proj serves one layer at a time). Everything else derives
// from this list: ActivationTensors, the sizes, the CUDA graph's buffers (GPT2CudaActivations,
// layout_activations), its per-layer slices (GPT2LayerActs) and the manifest (tools/print_manifest.cpp).
#define GPT2_ACTIVATIONS(X)                          \
    X(encoded, false, (B, T, C), floatX, true)       \
    X(ln1, true, (B, T, C), floatX, true)            \
    X(ln1_mean, true, (B, T), float, true)           \
    X(ln1_rstd, true, (B, T), float, true)           \
    X(qkv, true, (B, T, 3 * C), floatX, false)       \
    X(qkvr, true, (B, T, 3 * C), floatX, true)       \
    X(atty, true, (B, T, C), floatX, true)           \
    X(attstats, true, (B, NH, T, 3), float, true)    \
    X(attproj, true, (B, T, C), floatX, false)       \
    X(residual2, true, (B, T, C), floatX, true)      \
    X(ln2, true, (B, T, C), floatX, true)            \
    X(ln2_mean, true, (B, T), float, true)           \
    X(ln2_rstd, true, (B, T), float, true)           \
    X(fch, true, (B, T, 4 * C), floatX, true)        \
    X(fch_gelu, true, (B, T, 4 * C), floatX, true)   \
    X(fcproj, true, (B, T, C), floatX, false)        \
    X(residual3, true, (B, T, C), floatX, true)      \
    X(lnf, false, (B, T, C), floatX, true)           \
    X(lnf_mean, false, (B, T), float, true)          \
    X(lnf_rstd, false, (B, T), float, true)          \
    X(logits, false, (B, T, Vp), floatX, true)       \
    X(losses, false, (B, T), float, true)

// One field per tensor: P = T* for the buffers and P = size_t for their element counts.
template <class P> struct ActivationTensors {
#define GPT2_ACT_FIELD(name, per_layer, shape, cuda_type, on_cuda) P name;
    GPT2_ACTIVATIONS(GPT2_ACT_FIELD)
#undef GPT2_ACT_FIELD
};
constexpr int NUM_ACTIVATION_TENSORS = sizeof(ActivationTensors<size_t>) / sizeof(size_t);

struct ActivationInfo {
    const char* name;
    bool per_layer;
    const char* shape;      // of one slice (per_layer) or of the tensor, as written in GPT2_ACTIVATIONS
    const char* cuda_type;  // "floatX" or "float"
    bool on_cuda;
};
constexpr ActivationInfo ACTIVATION_TABLE[NUM_ACTIVATION_TENSORS] = {
#define GPT2_ACT_ROW(name, per_layer, shape, cuda_type, on_cuda) {#name, per_layer, #shape, #cuda_type, on_cuda},
    GPT2_ACTIVATIONS(GPT2_ACT_ROW)
#undef GPT2_ACT_ROW
};

inline ActivationTensors<size_t> gpt2_activation_sizes(const GPT2Config& c, int B_, int T_) {
    size_t L = c.num_layers, C = c.channels, NH = c.num_heads, Vp = c.padded_vocab_size;
    size_t B = B_, T = T_;
    (void)C, (void)NH, (void)Vp;
    ActivationTensors<size_t> s;
#define GPT2_ACT_SIZE(name, per_layer, shape, cuda_type, on_cuda) \
    s.name = (per_layer ? L : 1) * GPT2_DIMS_PRODUCT shape;
    GPT2_ACTIVATIONS(GPT2_ACT_SIZE)
#undef GPT2_ACT_SIZE
    return s;
}
