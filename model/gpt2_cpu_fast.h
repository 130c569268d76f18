// The fast path of the CPU back end: a precision path of the graph of model/gpt2_cpu.h
// (gpt2_forward, gpt2_backward, gpt2_update) on the Highway kernels of layers/fast_cpu.h and
// attention/attention_fast_cpu.h, dispatched at run time to the best ISA target the CPU runs.
// GPT2Fast<X> with X the matmuls' input type:
//   float  fp32 numerics: oneDNN's fp32 matmuls (an OpenMP runtime: one thread pool with the layers),
//          every product and sum in fp32;
//   bf16   bf16 numerics, the CPU twin of the CUDA back end's recipe: the matmuls take bf16
//          operands (weights, and the activations that feed them) and accumulate in fp32 (oneDNN:
//          AMX tiles or AVX512-BF16; on a CPU without bf16 instructions the same products exactly,
//          on widened operands through sgemm, layers/matmul_fast_cpu.h), and so do attention's
//          products that meet a matmul.
// Everything else is fp32 in both: the master weights, gradients and AdamW moments of the GPT2<float>
// it works on, the residual stream, the layernorm/RoPE/GELU arithmetic, attention's scores and row
// statistics, the logits and the losses. GPT2<float> on its reference path (model/gpt2_cpu.h) is what
// it is checked against (test/test_cpu_fast.cpp). The bf16 weights are the round-to-nearest-even of
// the master weights, refreshed by every update and by set_params, so a resumed run rebuilds them bit
// for bit.
#pragma once

#include <cmath>
#include <type_traits>
#include <vector>

#include "attention/attention_fast_cpu.h"
#include "layers/encoder_cpu.h"
#include "layers/fast_cpu.h"
#include "layers/matmul_fast_cpu.h"
#include "layers/residual_cpu.h"
#include "layers/rope_fast_cpu.h"
#include "model/gpt2_cpu.h"

template <class X> struct GPT2Fast {
    static_assert(std::is_same<X, float>::value || std::is_same<X, bf16>::value, "X: float or bf16");
    static constexpr bool is_bf16 = std::is_same<X, bf16>::value;
    static constexpr FastNumerics numerics = is_bf16 ? FastNumerics::bf16 : FastNumerics::fp32;
    using Float = float;
    static constexpr bool full_activation_grads = false;  // its own gradient buffers, below
    GPT2<float>& model;           // master weights, gradients, moments, fp32 activations
    typename std::conditional<is_bf16, MatmulBf16, MatmulF32>::type mm;
    AttentionFast attn;
    std::vector<bf16> params_bf;  // bf16 only: (num_parameters) bf16 weights, the layout of the master weights
    // bf16 only: the matmul inputs the forward saves for the backward's weight gradients (fp32: the
    // activations themselves, model.acts)
    std::vector<bf16> ln1, atty, ln2, fch_gelu;  // (L,B,T,C), (L,B,T,C), (L,B,T,C), (L,B,T,4C)
    std::vector<bf16> lnf;                       // (B,T,C)
    // the backward's: allocated at its first call for (B, T) (an evaluation never needs them)
    std::vector<X> dlogits;      // (B,T,Vp) softmax - onehot: by a forward told that a backward follows,
                                 // else by the backward from the logits (dlogits_ready)
    bool dlogits_ready = false;
    int bwd_B = 0, bwd_T = 0;    // the (B, T) the buffers below are sized for
    // The residual stream's gradient passes every residual add unchanged, so one buffer (dres)
    // carries it down, and each layernorm backward adds its part; the others serve every layer.
    std::vector<float> dres;     // (B,T,C) gradient of the residual stream
    std::vector<float> dln;      // (B,T,C) gradient of a layernorm output / the attention output
    std::vector<float> dfch;     // (B,T,4C) gradient of the GELU output
    std::vector<float> dqkvr, dqkv;  // (B,T,3C) before and after the RoPE backward
    std::vector<X> dout_x;       // (B,T,4C) a matmul's output gradient in X (fp32: the GELU's)
    std::vector<float> classifier_rows;
    std::vector<float> colsums;  // partial column sums of the bias and layernorm gradients
    RopeTableFast rope;
    StepProfile prof;
    int B = 0, T = 0;

    explicit GPT2Fast(GPT2<float>& m) : model(m) {
        if (is_bf16) params_bf.assign(m.num_parameters, 0);
        weights_changed();
    }

    // after anything wrote the master weights (init, set_params)
    void weights_changed() {
        if (is_bf16) fast_round_bf16(params_bf.data(), model.params.data(), model.num_parameters);
    }

    // backward_follows (with targets): the classifier's pass over the logits also writes the
    // dlogits of the next backward; without it the forward computes the losses only.
    float forward(const int* inputs, const int* targets, int B_, int T_, bool backward_follows = false) {
        return gpt2_forward(*this, inputs, targets, B_, T_, backward_follows);
    }
    // Accumulates the gradient of loss_scale * the mean loss of the last forward into model.grads.
    void backward(float loss_scale) { gpt2_backward(*this, loss_scale); }

    double grad_norm() {
        prof.start();
        double n = std::sqrt(fast_sum_squares(model.grads.data(), model.num_parameters));
        prof.lap(PROF_NORM);
        return n;
    }

    // grads *= s.grad_scale, AdamW step s.step on the master weights (decay on the matrices only,
    // theta's learning rate scaled as the reference path's), and their new bf16 copy; the
    // hyperparameters are read as float (in_float)
    void update(const AdamWStep& s) { gpt2_update(*this, in_float(s)); }

    // ------------------------------------------------------------------------
    // the path's hooks (model/gpt2_cpu.h)
    void lap_start() { prof.start(); }
    void lap(int kind) { prof.lap(kind); }

    void start_forward() {
        dlogits_ready = false;
        if (model.B == B && model.T == T) return;
        B = model.B;
        T = model.T;
        if (!is_bf16) return;
        size_t BT = (size_t)B * T, C = model.config.channels, L = model.config.num_layers;
        ln1.assign(L * BT * C, 0);
        atty.assign(L * BT * C, 0);
        ln2.assign(L * BT * C, 0);
        fch_gelu.assign(L * BT * 4 * C, 0);
        lnf.assign(BT * C, 0);
    }
    void ensure_backward_buffers() {
        if (bwd_B == B && bwd_T == T) return;
        size_t BT = (size_t)B * T, C = model.config.channels;
        dlogits.assign(BT * model.config.padded_vocab_size, 0);
        dres.assign(BT * C, 0);
        dln.assign(BT * C, 0);
        dfch.assign(BT * 4 * C, 0);
        dqkvr.assign(BT * 3 * C, 0);
        dqkv.assign(BT * 3 * C, 0);
        dout_x.assign(BT * 4 * C, 0);
        bwd_B = B;
        bwd_T = T;
    }
    void start_backward() {
        ensure_backward_buffers();
        std::fill(dres.begin(), dres.end(), 0.0f);
    }

    MatmulInputs<X> matmul_inputs(int l) {
        size_t BTC = (size_t)B * T * model.config.channels;
        if constexpr (is_bf16) {
            return {ln1.data() + l * BTC, atty.data() + l * BTC, ln2.data() + l * BTC, fch_gelu.data() + l * 4 * BTC};
        } else {
            Activations<float>& a = model.acts;
            return {a.ln1 + l * BTC, a.atty + l * BTC, a.ln2 + l * BTC, a.fch_gelu + l * 4 * BTC};
        }
    }
    X* lnf_input() {
        if constexpr (is_bf16) return lnf.data();
        else return model.acts.lnf;
    }
    const X* weight(int i, int l = 0) const {
        if constexpr (is_bf16) return params_bf.data() + model.param_offset(i, l);
        else return model.params.data() + model.param_offset(i, l);
    }
    LayerGrads<float> grad_views(int) {
        float* r = dres.data();
        return {r, r, r, r, dfch.data(), nullptr, dln.data(), r, dln.data(), dqkvr.data(), dqkv.data(), dln.data(),
                dln.data()};
    }

    // forward
    void layernorm_forward(X* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                           int C) {
        fast_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    }
    void matmul_forward(float* out, const X* inp, const X* w, const float* bias, int N, int C, int OC) {
        mm.forward(out, inp, w, bias, N, C, OC);
    }
    void rope_forward(float* out, const float* inp, int B_, int T_, int NH, int hd, double base) {
        rope.ensure(T_, hd, base);
        fast_rope_rotate(out, inp, B_, T_, NH, hd, rope.cs.data(), 1.0f);
    }
    void attention_forward(float* out, float* stats, const float* qkv, int B_, int T_, int NH, int hd, AttnKind kind,
                           double p, const double* p_head, int attn_len) {
        attn.forward(numerics, out, stats, qkv, B_, T_, NH, hd, kind, p, p_head, attn_len);
    }
    void gelu_forward(X* out, const float* inp, size_t N) { fast_gelu_forward(out, inp, N); }
    void to_matmul_input(X* out, const float* inp, size_t N) {
        if constexpr (is_bf16) fast_round_bf16(out, inp, N);  // fp32: the matmul reads the activation itself
    }
    void from_matmul_input(float* out, const X* inp, size_t N) {
        if constexpr (is_bf16) fast_widen_bf16(out, inp, N);
    }
    float classifier_forward(const int* targets, bool backward_follows) {
        Activations<float>& a = model.acts;
        int BT = B * T;
        if (backward_follows) ensure_backward_buffers();
        fast_classifier(a.losses, backward_follows ? dlogits.data() : (X*)nullptr, a.logits, targets, BT,
                        model.config.vocab_size, model.config.padded_vocab_size, classifier_rows);
        dlogits_ready = backward_follows;
        double sum = 0;
        for (int i = 0; i < BT; i++) sum += a.losses[i];
        return (float)(sum / BT);
    }

    // backward
    // dlogits (softmax - onehot, unless the forward wrote them) times loss_scale / BT: the scale is the
    // classifier matmul's alpha
    void classifier_backward(float* dlnf, float loss_scale) {
        Activations<float>& a = model.acts;
        int BT = B * T, C = model.config.channels, Vp = model.config.padded_vocab_size;
        if (!dlogits_ready) {  // the same function of the same logits as in the forward: the same bits
            fast_classifier(a.losses, dlogits.data(), a.logits, model.targets.data(), BT, model.config.vocab_size, Vp,
                            classifier_rows);
            dlogits_ready = true;
            prof.lap(PROF_CLASSIFIER);
        }
        mm.backward(dlnf, model.grad(P_WTE), dlogits.data(), lnf_input(), weight(P_WTE), BT, C, Vp,
                    loss_scale / (float)BT);
        prof.lap(PROF_MATMUL);
    }
    void residual_backward(float*, float*, const float*, size_t) {}  // one buffer carries the residual's gradient
    const X* matmul_dout(const float* dout, float* dbias, int N, int OC) {
        if constexpr (is_bf16) {
            fast_matmul_dout(dout_x.data(), dbias, dout, N, OC, colsums);
            return dout_x.data();
        } else {
            if (dbias) fast_colsums(dbias, dout, N, OC, colsums);
            return dout;
        }
    }
    void matmul_backward(float* dinp, float* dw, const X* dout, const X* inp, const X* w, int N, int C, int OC) {
        mm.backward(dinp, dw, dout, inp, w, N, C, OC);
    }
    // d fch in X as the next matmul_backward reads it, and the fc bias gradient
    const X* gelu_backward(float*, float* dbias, const float* inp, const float* dout, int N, int OC) {
        fast_gelu_backward(dout_x.data(), dbias, inp, dout, N, OC, colsums);
        return dout_x.data();
    }
    void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                            const float* mean, const float* rstd, int N, int C) {
        fast_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, colsums);
    }
    void attention_backward(float* dqkv_, const float* dout, const float* qkv, int B_, int T_, int NH, int hd,
                            AttnKind kind, double p, const double* p_head, double* dp_head, int attn_len) {
        attn.backward(numerics, dqkv_, dout, qkv, B_, T_, NH, hd, kind, p, p_head, dp_head, attn_len);
    }
    void rope_backward(float* dinp, const float* dout, int B_, int T_, int NH, int hd, double base) {
        rope.ensure(T_, hd, base);
        fast_rope_rotate(dinp, dout, B_, T_, NH, hd, rope.cs.data(), -1.0f);
    }

    // AdamW on tensor i, grads *= grad_scale inside, and the tensor's new bf16 weights
    void adamw(int i, const AdamWStep& s) {
        size_t off = model.param_offsets[i];
        fast_adamw(model.params.data() + off, is_bf16 ? params_bf.data() + off : nullptr, model.grads.data() + off,
                   model.m.data() + off, model.v.data() + off, model.param_sizes[i], (float)s.lr, (float)s.beta1,
                   (float)s.beta2, (float)s.eps, (float)s.weight_decay, (float)s.grad_scale, s.step);
    }
};
