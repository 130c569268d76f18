// The bf16 mixed-precision path of the CPU back end: the CPU twin of the CUDA back end's recipe.
// The matmuls take bf16 operands (weights, and the activations that feed them) and accumulate in
// fp32 (oneDNN, layers/matmul_bf16_cpu.h: AMX tiles or AVX512-BF16); everything else stays fp32:
// the master weights, gradients and AdamW moments of the GPT2<float> it works on, the residual
// stream, the layernorm/RoPE/GELU arithmetic (AVX-512: layers/*_bf16_cpu.h), attention's scores
// and row statistics (the tiled attention of attention/attention_bf16_cpu.h), the logits and the
// losses. GPT2<float> (model/gpt2_cpu.h) is the reference it is checked against
// (test/test_cpu_bf16.cpp). The bf16 weights are the round-to-nearest-even of the master weights,
// refreshed by every update and by set_params, so a resumed run rebuilds them bit for bit.
#pragma once

#include <chrono>
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

// Wall time per layer kind, accumulated over steps: lap(kind) charges the time since the last lap.
enum ProfileKind {
    PROF_MATMUL, PROF_CLASSIFIER, PROF_LAYERNORM, PROF_GELU, PROF_ATTENTION, PROF_ROPE, PROF_RESIDUAL,
    PROF_ENCODER, PROF_ADAMW, PROF_NORM, PROF_OTHER, NUM_PROFILE_KINDS
};
inline const char* profile_kind_name(int k) {
    static const char* names[NUM_PROFILE_KINDS] = {"matmul", "classifier", "layernorm", "gelu",  "attention", "rope",
                                                   "residual", "encoder", "adamw", "gradnorm", "other"};
    return names[k];
}
struct StepProfile {
    double seconds[NUM_PROFILE_KINDS] = {};
    double last = now();
    static double now() {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    void start() { last = now(); }
    void lap(int kind) {
        double t = now();
        seconds[kind] += t - last;
        last = t;
    }
};

struct GPT2Bf16 {
    GPT2<float>& g;               // master weights, gradients, moments, fp32 activations
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

    explicit GPT2Bf16(GPT2<float>& model) : g(model), params_bf(model.num_parameters) { weights_changed(); }

    // after anything wrote the master weights (init, set_params)
    void weights_changed() { round_to_bf16(params_bf.data(), g.params.data(), g.num_parameters); }

    const bf16* w_bf(int i, int l = 0) const { return params_bf.data() + g.param_offset(i, l); }
    float* param(int i, int l = 0) { return g.params.data() + g.param_offset(i, l); }
    float* grad(int i, int l = 0) { return g.grads.data() + g.param_offset(i, l); }

    void ensure_buffers(int B_, int T_) {
        if (B_ == B && T_ == T) return;
        size_t BT = (size_t)B_ * T_, C = g.config.channels, L = g.config.num_layers;
        ln1.assign(L * BT * C, 0);
        atty.assign(L * BT * C, 0);
        ln2.assign(L * BT * C, 0);
        fch_gelu.assign(L * BT * 4 * C, 0);
        lnf.assign(BT * C, 0);
        B = B_;
        T = T_;
    }
    void ensure_backward_buffers() {
        if (bwd_B == B && bwd_T == T) return;
        size_t BT = (size_t)B * T, C = g.config.channels;
        dlogits.assign(BT * g.config.padded_vocab_size, 0);
        dres.assign(BT * C, 0);
        dln.assign(BT * C, 0);
        dfch.assign(BT * 4 * C, 0);
        dqkvr.assign(BT * 3 * C, 0);
        dqkv.assign(BT * 3 * C, 0);
        dout_bf.assign(BT * 4 * C, 0);
        bwd_B = B;
        bwd_T = T;
    }

    // backward_follows (with targets): the classifier's pass over the logits also writes the
    // dlogits of the next backward; without it the forward computes the losses only.
    float forward(const int* inputs, const int* targets, int B_, int T_, bool backward_follows = false) {
        prof.start();
        g.start_forward(inputs, targets, B_, T_, false);
        ensure_buffers(B_, T_);
        dlogits_ready = false;
        const GPT2Config& c = g.config;
        int L = c.num_layers, C = c.channels;
        size_t BT = (size_t)B * T;
        Activations<float>& a = g.acts;
        prof.lap(PROF_OTHER);
        encoder_forward(a.encoded, inputs, param(P_WTE), B, T, C);
        prof.lap(PROF_ENCODER);
        for (int l = 0; l < L; l++) forward_layer(l, l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C);
        float* last = a.residual3 + (L - 1) * BT * C;
        layernorm_forward_bf16(lnf.data(), a.lnf_mean, a.lnf_rstd, last, param(P_LNFW), param(P_LNFB), (int)BT, C);
        widen_bf16(a.lnf, lnf.data(), BT * C);  // the final layernorm's output as the classifier reads it
        prof.lap(PROF_LAYERNORM);
        // without targets, the logits of rows [logits_from, BT) only (GPT2::logits_from)
        size_t first = g.have_targets ? 0 : std::min(g.logits_from, BT);
        if (first < BT)
            mm.forward(a.logits + first * c.padded_vocab_size, lnf.data() + first * C, w_bf(P_WTE), nullptr,
                       (int)(BT - first), C, c.padded_vocab_size);
        prof.lap(PROF_MATMUL);
        g.mean_loss = -1;
        if (g.have_targets) {
            if (backward_follows) ensure_backward_buffers();
            fused_classifier_bf16(a.losses, backward_follows ? dlogits.data() : nullptr, a.logits, targets, (int)BT,
                                  c.vocab_size, c.padded_vocab_size, classifier_rows);
            dlogits_ready = backward_follows;
            double sum = 0;
            for (size_t i = 0; i < BT; i++) sum += a.losses[i];
            g.mean_loss = (float)(sum / BT);
            prof.lap(PROF_CLASSIFIER);
        }
        return g.mean_loss;
    }

    // layer l of the forward, from its residual input (B,T,C)
    void forward_layer(int l, const float* residual) {
        const GPT2Config& c = g.config;
        int C = c.channels, NH = c.num_heads, hd = C / NH;
        size_t BT = (size_t)B * T, o1 = l * BT * C, o3 = l * BT * 3 * C, o4 = l * BT * 4 * C, ol = l * BT;
        Activations<float>& a = g.acts;
        layernorm_forward_bf16(ln1.data() + o1, a.ln1_mean + ol, a.ln1_rstd + ol, residual, param(P_LN1W, l),
                               param(P_LN1B, l), (int)BT, C);
        prof.lap(PROF_LAYERNORM);
        mm.forward(a.qkv + o3, ln1.data() + o1, w_bf(P_QKVW, l), param(P_QKVB, l), (int)BT, C, 3 * C);
        prof.lap(PROF_MATMUL);
        rope_forward_bf16(a.qkvr + o3, a.qkv + o3, B, T, NH, hd, rope, (double)c.rope_base);
        prof.lap(PROF_ROPE);
        std::vector<double> p_head = g.layer_p(l);  // learned p (empty: c.p)
        attention_forward_cpu(attn_ws, a.atty + o1, a.attstats + l * BT * NH * 3, a.qkvr + o3, B, T, NH, hd, c.attn,
                              (double)c.p, p_head.empty() ? nullptr : p_head.data(), c.attn_len);
        round_to_bf16(atty.data() + o1, a.atty + o1, BT * C);
        prof.lap(PROF_ATTENTION);
        mm.forward(a.attproj + o1, atty.data() + o1, w_bf(P_ATTPROJW, l), param(P_ATTPROJB, l), (int)BT, C, C);
        prof.lap(PROF_MATMUL);
        residual_forward(a.residual2 + o1, residual, a.attproj + o1, (int)(BT * C));
        prof.lap(PROF_RESIDUAL);
        layernorm_forward_bf16(ln2.data() + o1, a.ln2_mean + ol, a.ln2_rstd + ol, a.residual2 + o1, param(P_LN2W, l),
                               param(P_LN2B, l), (int)BT, C);
        prof.lap(PROF_LAYERNORM);
        mm.forward(a.fch + o4, ln2.data() + o1, w_bf(P_FCW, l), param(P_FCB, l), (int)BT, C, 4 * C);
        prof.lap(PROF_MATMUL);
        gelu_forward_bf16(fch_gelu.data() + o4, a.fch + o4, BT * 4 * C);
        prof.lap(PROF_GELU);
        mm.forward(a.fcproj + o1, fch_gelu.data() + o4, w_bf(P_FCPROJW, l), param(P_FCPROJB, l), (int)BT, 4 * C, C);
        prof.lap(PROF_MATMUL);
        residual_forward(a.residual3 + o1, a.residual2 + o1, a.fcproj + o1, (int)(BT * C));
        prof.lap(PROF_RESIDUAL);
    }

    // Accumulates the gradient of loss_scale * the mean loss of the last forward into g.grads.
    // The residual stream's gradient passes every residual add unchanged, so one buffer (dres)
    // carries it down, and each layernorm backward adds its part.
    void backward(float loss_scale) {
        if (!g.have_targets) throw std::logic_error("backward: the last forward had no targets");
        prof.start();
        const GPT2Config& c = g.config;
        int L = c.num_layers, C = c.channels;
        size_t BT = (size_t)B * T;
        Activations<float>& a = g.acts;
        ensure_backward_buffers();
        if (!dlogits_ready) {  // the same function of the same logits as in the forward: the same bits
            fused_classifier_bf16(a.losses, dlogits.data(), a.logits, g.targets.data(), (int)BT, c.vocab_size,
                                  c.padded_vocab_size, classifier_rows);
            dlogits_ready = true;
            prof.lap(PROF_CLASSIFIER);
        }
        // dlogits = (softmax - onehot) * loss_scale / BT: the scale is the matmuls' alpha
        mm.backward(dln.data(), grad(P_WTE), dlogits.data(), lnf.data(), w_bf(P_WTE), (int)BT, C,
                    c.padded_vocab_size, loss_scale / (float)BT);
        prof.lap(PROF_MATMUL);
        std::fill(dres.begin(), dres.end(), 0.0f);
        float* last = a.residual3 + (L - 1) * BT * C;
        layernorm_backward_bf16(dres.data(), grad(P_LNFW), grad(P_LNFB), dln.data(), last, param(P_LNFW), a.lnf_mean,
                                a.lnf_rstd, (int)BT, C, colsums);
        prof.lap(PROF_LAYERNORM);
        for (int l = L - 1; l >= 0; l--) {
            backward_mlp(l);
            backward_attention(l, l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C);
        }
        encoder_backward(grad(P_WTE), dres.data(), g.inputs.data(), B, T, C);
        prof.lap(PROF_ENCODER);
    }

    // dres: d residual3 of layer l in, d residual2 out
    void backward_mlp(int l) {
        int C = g.config.channels;
        size_t BT = (size_t)B * T, o1 = l * BT * C, o4 = l * BT * 4 * C, ol = l * BT;
        Activations<float>& a = g.acts;
        matmul_dout_bf16(dout_bf.data(), grad(P_FCPROJB, l), dres.data(), (int)BT, C, colsums);
        mm.backward(dfch.data(), grad(P_FCPROJW, l), dout_bf.data(), fch_gelu.data() + o4, w_bf(P_FCPROJW, l),
                    (int)BT, 4 * C, C);
        prof.lap(PROF_MATMUL);
        gelu_backward_bf16(dout_bf.data(), grad(P_FCB, l), a.fch + o4, dfch.data(), (int)BT, 4 * C, colsums);
        prof.lap(PROF_GELU);
        mm.backward(dln.data(), grad(P_FCW, l), dout_bf.data(), ln2.data() + o1, w_bf(P_FCW, l), (int)BT, C, 4 * C);
        prof.lap(PROF_MATMUL);
        layernorm_backward_bf16(dres.data(), grad(P_LN2W, l), grad(P_LN2B, l), dln.data(), a.residual2 + o1,
                                param(P_LN2W, l), a.ln2_mean + ol, a.ln2_rstd + ol, (int)BT, C, colsums);
        prof.lap(PROF_LAYERNORM);
    }

    // dres: d residual2 of layer l in, d of the layer's input (residual) out
    void backward_attention(int l, const float* residual) {
        const GPT2Config& c = g.config;
        int C = c.channels, NH = c.num_heads, hd = C / NH;
        size_t BT = (size_t)B * T, o1 = l * BT * C, o3 = l * BT * 3 * C, ol = l * BT;
        Activations<float>& a = g.acts;
        matmul_dout_bf16(dout_bf.data(), grad(P_ATTPROJB, l), dres.data(), (int)BT, C, colsums);
        mm.backward(dln.data(), grad(P_ATTPROJW, l), dout_bf.data(), atty.data() + o1, w_bf(P_ATTPROJW, l), (int)BT,
                    C, C);
        prof.lap(PROF_MATMUL);
        std::vector<double> p_head = g.layer_p(l), dp(NH, 0.0);
        attention_backward_cpu(attn_ws, dqkvr.data(), dln.data(), a.qkvr + o3, B, T, NH, hd, c.attn, (double)c.p,
                               p_head.empty() ? nullptr : p_head.data(), c.learn_p ? dp.data() : nullptr, c.attn_len);
        for (int h = 0; c.learn_p && h < NH; h++)  // dL/dtheta = dL/dp sigmoid(theta), as the fp32 path
            g.grad(P_PTHETA)[l * NH + h] += (float)(dp[h] * learned_p_dtheta((double)g.param(P_PTHETA)[l * NH + h]));
        prof.lap(PROF_ATTENTION);
        rope_backward_bf16(dqkv.data(), dqkvr.data(), B, T, NH, hd, rope, (double)c.rope_base);
        prof.lap(PROF_ROPE);
        matmul_dout_bf16(dout_bf.data(), grad(P_QKVB, l), dqkv.data(), (int)BT, 3 * C, colsums);
        mm.backward(dln.data(), grad(P_QKVW, l), dout_bf.data(), ln1.data() + o1, w_bf(P_QKVW, l), (int)BT, C,
                    3 * C);
        prof.lap(PROF_MATMUL);
        layernorm_backward_bf16(dres.data(), grad(P_LN1W, l), grad(P_LN1B, l), dln.data(), residual,
                                param(P_LN1W, l), a.ln1_mean + ol, a.ln1_rstd + ol, (int)BT, C, colsums);
        prof.lap(PROF_LAYERNORM);
    }

    double grad_norm() {
        prof.start();
        double n = std::sqrt(sum_squares_bf16_path(g.grads.data(), g.num_parameters));
        prof.lap(PROF_NORM);
        return n;
    }

    // grads *= grad_scale, AdamW step t on the master weights (decay on the matrices only, theta's
    // learning rate scaled as the fp32 path's), and
    // their new bf16 copy
    void update(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
        prof.start();
        if (g.m.empty()) {
            g.m.assign(g.num_parameters, 0.0f);
            g.v.assign(g.num_parameters, 0.0f);
        }
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            size_t off = g.param_offsets[i];
            adamw_update_bf16(g.params.data() + off, params_bf.data() + off, g.grads.data() + off, g.m.data() + off,
                              g.v.data() + off, g.param_sizes[i], (float)param_tensor_lr(i, lr, g.p_lr_scale),
                              beta1, beta2, eps,
                              param_tensor_decays(i) ? weight_decay : 0.0f, grad_scale, t);
        }
        prof.lap(PROF_ADAMW);
    }
};
