// The fast CPU path's attention (model/gpt2_cpu_fast.h): every variant of attention/attention_kind.h,
// forward and backward (the head parameter's dL/dp included: learned p, ssmax's s), tiled and
// vectorised once in Highway for every ISA (attention/attention_fast_cpu-inl.h; layers/fast_cpu.h:
// targets and numerics). The definition is the reference, attention/attention_cpu.h: this
// computes the same functions, formula by formula, with the same stable evaluation of the
// re-weighting and the same degenerate rows
// (doc/attention.md, section 'Attention on the CPU fast path').
//
// qkv (B, T, 3, NH, hd) fp32, RoPE applied;  out (B, T, NH, hd) fp32;  stats (B, NH, T, 3) as the
// reference's. Scores, row statistics, the re-weighting and dW are fp32 in both numerics; with
// FastNumerics::bf16 the products whose results meet a bf16 matmul (weights x values, ds x keys, the
// accumulations of dk and dv) take bf16 operands.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attention/attention_kind.h"
#include "layers/fast_cpu.h"

// What the layer keeps between calls: the forward's operands of every head and each thread's
// scratch (sizes change rarely: nothing is allocated in a training step after the first).
class AttentionFast {
public:
    AttentionFast();
    ~AttentionFast();
    AttentionFast(const AttentionFast&) = delete;
    AttentionFast& operator=(const AttentionFast&) = delete;

    // attn_len: as the reference's attention_forward (0: the row's n_t); stats may be null
    void forward(FastNumerics num, float* out, float* stats, const float* qkv, int B, int T, int NH, int hd,
                 AttnKind kind, double p, const double* p_head = nullptr, int attn_len = 0);
    // dqkv = d(loss)/d(qkv) (written, not accumulated: unlike the reference's attention_backward);
    // dp_head[h] += d(loss)/d(p of head h) when given (re-weighting's p, ssmax's s)
    void backward(FastNumerics num, float* dqkv, const float* dout, const float* qkv, int B, int T, int NH, int hd,
                  AttnKind kind, double p, const double* p_head = nullptr, double* dp_head = nullptr,
                  int attn_len = 0);

    struct Impl;

private:
    std::unique_ptr<Impl> impl;
};

// The weights of head h of a forward on one sequence (qkv (1, T, 3, NH, hd)) with the forward's own
// code: W (T, T) row-major, zero above the diagonal; valid[t] = 0 for a degenerate row. What
// eval/attention_maps.h reads on the fast path.
void attention_map_fast(FastNumerics num, std::vector<float>& W, std::vector<uint8_t>& valid, const float* qkv, int T,
                        int NH, int hd, int h, AttnKind kind, double p, int attn_len = 0);
