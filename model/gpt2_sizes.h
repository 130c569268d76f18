// The activations of one forward pass of GPT-2 + RoPE and their element counts: one list for every
// back end. The CPU graph (model/gpt2_cpu.h) keeps all of them; the CUDA back end
// (model/gpt2_cuda.cuh, layout_activations) allocates the ones it keeps from the same counts,
// so a new activation is sized here once.
#pragma once

#include <cstddef>

#include "model/gpt2_config.h"

// One field per tensor: P = T* for the buffers and P = size_t for their element counts.
// L layers, B batch, T time, C channels, NH heads, Vp padded vocab.
template <class P> struct ActivationTensors {
    P encoded;    // (B,T,C)
    P ln1;        // (L,B,T,C)
    P ln1_mean;   // (L,B,T)
    P ln1_rstd;   // (L,B,T)
    P qkv;        // (L,B,T,3C) before RoPE (the CPU only)
    P qkvr;       // (L,B,T,3C) after RoPE
    P atty;       // (L,B,T,C)
    P attstats;   // (L,B,NH,T,3)
    P attproj;    // (L,B,T,C) (the CPU only)
    P residual2;  // (L,B,T,C)
    P ln2;        // (L,B,T,C)
    P ln2_mean;   // (L,B,T)
    P ln2_rstd;   // (L,B,T)
    P fch;        // (L,B,T,4C)
    P fch_gelu;   // (L,B,T,4C)
    P fcproj;     // (L,B,T,C) (the CPU only)
    P residual3;  // (L,B,T,C)
    P lnf;        // (B,T,C)
    P lnf_mean;   // (B,T)
    P lnf_rstd;   // (B,T)
    P logits;     // (B,T,Vp)
    P losses;     // (B,T)
};
constexpr int NUM_ACTIVATION_TENSORS = sizeof(ActivationTensors<size_t>) / sizeof(size_t);

inline ActivationTensors<size_t> gpt2_activation_sizes(const GPT2Config& c, int B, int T) {
    size_t L = c.num_layers, C = c.channels, NH = c.num_heads, Vp = c.padded_vocab_size;
    size_t BT = (size_t)B * T;
    ActivationTensors<size_t> s;
    s.encoded = BT * C;
    s.ln1 = L * BT * C;
    s.ln1_mean = s.ln1_rstd = L * BT;
    s.qkv = s.qkvr = L * BT * 3 * C;
    s.atty = L * BT * C;
    s.attstats = L * BT * NH * 3;
    s.attproj = s.residual2 = s.ln2 = L * BT * C;
    s.ln2_mean = s.ln2_rstd = L * BT;
    s.fch = s.fch_gelu = L * BT * 4 * C;
    s.fcproj = s.residual3 = L * BT * C;
    s.lnf = BT * C;
    s.lnf_mean = s.lnf_rstd = BT;
    s.logits = BT * Vp;
    s.losses = BT;
    return s;
}
