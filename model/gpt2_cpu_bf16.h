// The bf16 mixed-precision path of the CPU back end: the CPU twin of the CUDA back end's recipe,
// a precision path of the graph of model/gpt2_cpu.h (gpt2_forward, gpt2_backward, gpt2_update).
// The matmuls take bf16 operands (weights, and the activations that feed them) and accumulate in
// fp32 (oneDNN, layers/matmul_bf16_cpu.h: AMX tiles or AVX512-BF16); everything else stays fp32:
// the master weights, gradients and AdamW moments of the GPT2<float> it works on, the residual
// stream, the layernorm/RoPE/GELU arithmetic (AVX-512: layers/*_bf16_cpu.h), attention's scores
// and row statistics (the tiled attention of attention/attention_bf16_cpu.h), the logits and the
// losses. GPT2<float> (model/gpt2_cpu.h) is the reference it is checked against
// (test/test_cpu_bf16.cpp). The bf16 weights are the round-to-nearest-even of the master weights,
// refreshed by every update and by set_params, so a resumed run rebuilds them bit for bit.
#pragma once

#include <vector>

#include "attention/attention_bf16_cpu.h"
#include "layers/adamw_bf16_cpu.h"
#include "layers/bf16_cpu.h"
#include "layers/classifier_bf16_cpu.h"
#include "layers/encoder_cpu.h"
#include "layers/gelu_bf16_cpu.h"
#include "layers/layernorm_bf16_cpu.h"
#include "layers/matmul_bf16_cpu.h"
#include "layers/residual_cpu.h"
#include "layers/rope_bf16_cpu.h"
#include "model/gpt2_cpu.h"

struct GPT2Bf16 {
    using Float = float;
    using X = bf16;                             // the matmuls' inputs and weights
    static constexpr bool full_activation_grads = false;  // its own gradient buffers, below
    GPT2<float>& model;           // master weights, gradients, moments, fp32 activations
    MatmulBf16 mm;
    AttentionCpuWorkspace attn_ws;
    std::vector<bf16> params_bf;  // (num_parameters) bf16 weights, the layout of the master weights
    // bf16 matmul inputs the forward saves for the backward's weight gradients
    std::vector<bf16> ln1, atty, ln2, fch_gelu;  // (L,B,T,C), (L,B,T,C), (L,B,T,C), (L,B,T,4C)
    std::vector<bf16> lnf;                       // (B,T,C)
    // the backward's: allocated at its first call for (B, T) (an evaluation never needs them)
    std::vector<bf16> dlogits;   // (B,T,Vp) softmax - onehot: by a forward told that a backward follows,
                                 // else by the backward from the logits (dlogits_ready)
    bool dlogits_ready = false;
    int bwd_B = 0, bwd_T = 0;    // the (B, T) the buffers below are sized for
    // The residual stream's gradient passes every residual add unchanged, so one buffer (dres)
    // carries it down, and each layernorm backward adds its part; the others serve every layer.
    std::vector<float> dres;     // (B,T,C) gradient of the residual stream
    std::vector<float> dln;      // (B,T,C) gradient of a layernorm output / the attention output
    std::vector<float> dfch;     // (B,T,4C) gradient of the GELU output
    std::vector<float> dqkvr, dqkv;  // (B,T,3C) before and after the RoPE backward
    std::vector<bf16> dout_bf;   // (B,T,4C) a matmul's output gradient in bf16
    std::vector<float> classifier_rows;
    std::vector<float> colsums;  // partial column sums of the bias and layernorm gradients (colsum_finish)
    RopeTableBf16 rope;
    StepProfile prof;
    int B = 0, T = 0;

    explicit GPT2Bf16(GPT2<float>& m) : model(m), params_bf(m.num_parameters) { weights_changed(); }

    // after anything wrote the master weights (init, set_params)
    void weights_changed() { round_to_bf16(params_bf.data(), model.params.data(), model.num_parameters); }

    // backward_follows (with targets): the classifier's pass over the logits also writes the
    // dlogits of the next backward; without it the forward computes the losses only.
    float forward(const int* inputs, const int* targets, int B_, int T_, bool backward_follows = false) {
        return gpt2_forward(*this, inputs, targets, B_, T_, backward_follows);
    }
    // Accumulates the gradient of loss_scale * the mean loss of the last forward into model.grads.
    void backward(float loss_scale) { gpt2_backward(*this, loss_scale); }

    double grad_norm() {
        prof.start();
        double n = std::sqrt(sum_squares_bf16_path(model.grads.data(), model.num_parameters));
        prof.lap(PROF_NORM);
        return n;
    }

    // grads *= grad_scale, AdamW step t on the master weights (decay on the matrices only, theta's
    // learning rate scaled as the fp32 path's), and their new bf16 copy
    void update(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
        gpt2_update(*this, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    }

    // ------------------------------------------------------------------------
    // the path's hooks (model/gpt2_cpu.h)
    void lap_start() { prof.start(); }
    void lap(int kind) { prof.lap(kind); }

    void start_forward() {
        dlogits_ready = false;
        if (model.B == B && model.T == T) return;
        B = model.B;
        T = model.T;
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
        dout_bf.assign(BT * 4 * C, 0);
        bwd_B = B;
        bwd_T = T;
    }
    void start_backward() {
        ensure_backward_buffers();
        std::fill(dres.begin(), dres.end(), 0.0f);
    }

    MatmulInputs<bf16> matmul_inputs(int l) {
        size_t BTC = (size_t)B * T * model.config.channels;
        return {ln1.data() + l * BTC, atty.data() + l * BTC, ln2.data() + l * BTC, fch_gelu.data() + l * 4 * BTC};
    }
    bf16* lnf_input() { return lnf.data(); }
    const bf16* weight(int i, int l = 0) const { return params_bf.data() + model.param_offset(i, l); }
    LayerGrads<float> grad_views(int) {
        float* r = dres.data();
        return {r, r, r, r, dfch.data(), nullptr, dln.data(), r, dln.data(), dqkvr.data(), dqkv.data(), dln.data(),
                dln.data()};
    }

    // forward
    void layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                           int N, int C) {
        layernorm_forward_bf16(out, mean, rstd, inp, w, b, N, C);
    }
    void matmul_forward(float* out, const bf16* inp, const bf16* w, const float* bias, int N, int C, int OC) {
        mm.forward(out, inp, w, bias, N, C, OC);
    }
    void rope_forward(float* out, const float* inp, int B_, int T_, int NH, int hd, double base) {
        rope_forward_bf16(out, inp, B_, T_, NH, hd, rope, base);
    }
    void attention_forward(float* out, float* stats, const float* qkv, int B_, int T_, int NH, int hd, AttnKind kind,
                           double p, const double* p_head, int attn_len) {
        attention_forward_cpu(attn_ws, out, stats, qkv, B_, T_, NH, hd, kind, p, p_head, attn_len);
    }
    void gelu_forward(bf16* out, const float* inp, size_t N) { gelu_forward_bf16(out, inp, N); }
    void to_matmul_input(bf16* out, const float* inp, size_t N) { round_to_bf16(out, inp, N); }
    void from_matmul_input(float* out, const bf16* inp, size_t N) { widen_bf16(out, inp, N); }
    float classifier_forward(const int* targets, bool backward_follows) {
        Activations<float>& a = model.acts;
        int BT = B * T;
        if (backward_follows) ensure_backward_buffers();
        fused_classifier_bf16(a.losses, backward_follows ? dlogits.data() : nullptr, a.logits, targets, BT,
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
            fused_classifier_bf16(a.losses, dlogits.data(), a.logits, model.targets.data(), BT,
                                  model.config.vocab_size, Vp, classifier_rows);
            dlogits_ready = true;
            prof.lap(PROF_CLASSIFIER);
        }
        mm.backward(dlnf, model.grad(P_WTE), dlogits.data(), lnf.data(), weight(P_WTE), BT, C, Vp,
                    loss_scale / (float)BT);
        prof.lap(PROF_MATMUL);
    }
    void residual_backward(float*, float*, const float*, size_t) {}  // one buffer carries the residual's gradient
    const bf16* matmul_dout(const float* dout, float* dbias, int N, int OC) {
        matmul_dout_bf16(dout_bf.data(), dbias, dout, N, OC, colsums);
        return dout_bf.data();
    }
    void matmul_backward(float* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int N, int C,
                         int OC) {
        mm.backward(dinp, dw, dout, inp, w, N, C, OC);
    }
    // d fch in bf16 as the next matmul_backward reads it (no fp32 copy), and the fc bias gradient
    const bf16* gelu_backward(float*, float* dbias, const float* inp, const float* dout, int N, int OC) {
        gelu_backward_bf16(dout_bf.data(), dbias, inp, dout, N, OC, colsums);
        return dout_bf.data();
    }
    void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                            const float* mean, const float* rstd, int N, int C) {
        layernorm_backward_bf16(dinp, dw, db, dout, inp, w, mean, rstd, N, C, colsums);
    }
    void attention_backward(float* dqkv, const float* dout, const float* qkv, int B_, int T_, int NH, int hd,
                            AttnKind kind, double p, const double* p_head, double* dp_head, int attn_len) {
        attention_backward_cpu(attn_ws, dqkv, dout, qkv, B_, T_, NH, hd, kind, p, p_head, dp_head, attn_len);
    }
    void rope_backward(float* dinp, const float* dout, int B_, int T_, int NH, int hd, double base) {
        rope_backward_bf16(dinp, dout, B_, T_, NH, hd, rope, base);
    }

    // AdamW on tensor i, grads *= grad_scale inside, and the tensor's new bf16 weights
    void adamw(int i, double lr, double beta1, double beta2, double eps, double weight_decay, double grad_scale,
               int t) {
        size_t off = model.param_offsets[i];
        adamw_update_bf16(model.params.data() + off, params_bf.data() + off, model.grads.data() + off,
                          model.m.data() + off, model.v.data() + off, model.param_sizes[i], (float)lr, (float)beta1,
                          (float)beta2, (float)eps, (float)weight_decay, (float)grad_scale, t);
    }
};
