// GPT-2 + RoPE on the CPU back end: parameters, activations, forward to the mean loss,
// backward to every parameter gradient, AdamW update. Templated on the float type:
// float trains, double checks gradients. Layer code: layers/*_cpu.h, attention/attention_cpu.h.
#pragma once

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention_cpu.h"
#include "layers/adamw_cpu.h"
#include "layers/classifier_cpu.h"
#include "layers/encoder_cpu.h"
#include "layers/gelu_cpu.h"
#include "layers/global_norm_cpu.h"
#include "layers/layernorm_cpu.h"
#include "layers/matmul_cpu.h"
#include "layers/residual_cpu.h"
#include "layers/rope_cpu.h"
#include "model/gpt2_config.h"
#include "model/gpt2_layout.h"
#include "model/rand.h"

// Activations of one forward pass (and, with the same layout, their gradients): one field per
// tensor, P = T* for the buffers and P = size_t for their element counts.
// L layers, B batch, T time, C channels, NH heads, Vp padded vocab.
template <class P> struct ActivationTensors {
    P encoded;    // (B,T,C)
    P ln1;        // (L,B,T,C)
    P ln1_mean;   // (L,B,T)
    P ln1_rstd;   // (L,B,T)
    P qkv;        // (L,B,T,3C) before RoPE
    P qkvr;       // (L,B,T,3C) after RoPE
    P atty;       // (L,B,T,C)
    P attstats;   // (L,B,NH,T,3)
    P attproj;    // (L,B,T,C)
    P residual2;  // (L,B,T,C)
    P ln2;        // (L,B,T,C)
    P ln2_mean;   // (L,B,T)
    P ln2_rstd;   // (L,B,T)
    P fch;        // (L,B,T,4C)
    P fch_gelu;   // (L,B,T,4C)
    P fcproj;     // (L,B,T,C)
    P residual3;  // (L,B,T,C)
    P lnf;        // (B,T,C)
    P lnf_mean;   // (B,T)
    P lnf_rstd;   // (B,T)
    P logits;     // (B,T,Vp)
    P losses;     // (B,T)
};
template <class T> using Activations = ActivationTensors<T*>;
constexpr int NUM_ACTIVATION_TENSORS = sizeof(ActivationTensors<size_t>) / sizeof(size_t);
static_assert(sizeof(Activations<float>) == NUM_ACTIVATION_TENSORS * sizeof(float*), "one pointer per tensor");

inline ActivationTensors<size_t> gpt2_activation_sizes(const GPT2Config& c, int B, int T_) {
    size_t L = c.num_layers, C = c.channels, NH = c.num_heads, Vp = c.padded_vocab_size;
    size_t BT = (size_t)B * T_;
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

template <class F> struct GPT2 : GPT2ParamLayout {
    GPT2Config config;
    std::vector<F> params, grads, m, v;  // (num_parameters) each; AdamW moments allocated lazily
    // activations and their gradients for the current (B, T)
    int B = 0, T = 0;
    std::vector<F> acts_memory, grad_acts_memory;
    Activations<F> acts, grad_acts;
    std::vector<int> inputs, targets;  // (B,F) of the last forward
    bool have_targets = false;
    F mean_loss = -1;
    // A forward without targets computes the logits of rows [logits_from, B*T) only (the
    // classifier matmul is most of a small model's forward): for tools that read a few last rows.
    size_t logits_from = 0;
    // learning-rate multiplier of learned p's theta (param_tensor_lr; the trainer's -plr)
    double p_lr_scale = 1.0;

    explicit GPT2(const GPT2Config& c) : GPT2ParamLayout(c), config(c) {
        std::string err = gpt2_config_error(c);
        if (!err.empty()) throw std::invalid_argument(err);
        params.assign(num_parameters, F(0));
        grads.assign(num_parameters, F(0));
    }

    F* param(int i) { return params.data() + param_offsets[i]; }
    F* grad(int i) { return grads.data() + param_offsets[i]; }

    // Learned p of layer l's heads, p = 1 + softplus(theta) (empty without learn_p: the config's p).
    std::vector<double> layer_p(int l) {
        std::vector<double> p;
        for (int h = 0; config.learn_p && h < config.num_heads; h++)
            p.push_back(learned_p((double)param(P_PTHETA)[l * config.num_heads + h]));
        return p;
    }

    // GPT-2 initialisation (gpt2_init_params in model/gpt2_config.h)
    void init(uint64_t seed) { gpt2_init_params(params.data(), config, seed); }

    // Activations for (B_, T_), and their gradients unless with_grads is false (the bf16 path,
    // model/gpt2_cpu_bf16.h, keeps its own smaller gradient buffers).
    void ensure_activations(int B_, int T_, bool with_grads = true) {
        if (B_ == B && T_ == T && grad_acts_memory.empty() != with_grads) return;
        ActivationTensors<size_t> named = gpt2_activation_sizes(config, B_, T_);
        const size_t* sizes = (const size_t*)&named;
        size_t total = 0;
        for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) total += sizes[i];
        acts_memory.assign(total, F(0));
        if (with_grads) grad_acts_memory.assign(total, F(0));
        else std::vector<F>().swap(grad_acts_memory);
        F** a = (F**)&acts;
        F** g = (F**)&grad_acts;
        size_t off = 0;
        for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
            a[i] = acts_memory.data() + off;
            g[i] = with_grads ? grad_acts_memory.data() + off : nullptr;
            off += sizes[i];
        }
        B = B_;
        T = T_;
    }

    // Checks the token ids (in [0, vocab_size)), sizes the activations, keeps inputs and targets.
    void start_forward(const int* inputs_, const int* targets_, int B_, int T_, bool with_grads) {
        int V = config.vocab_size;
        for (int i = 0; i < B_ * T_; i++) {
            if (inputs_[i] < 0 || inputs_[i] >= V || (targets_ && (targets_[i] < 0 || targets_[i] >= V))) {
                throw std::out_of_range("token id out of range [0, " + std::to_string(V) + ") at position " +
                                        std::to_string(i));
            }
        }
        ensure_activations(B_, T_, with_grads);
        inputs.assign(inputs_, inputs_ + B * T);
        have_targets = targets_ != nullptr;
        if (have_targets) targets.assign(targets_, targets_ + B * T);
    }

    // Forward pass over inputs (B,F). With targets (B,F) it returns the mean loss; without, -1.
    // Token ids must be in [0, vocab_size).
    F forward(const int* inputs_, const int* targets_, int B_, int T_) {
        const GPT2Config& c = config;
        int V = c.vocab_size, Vp = c.padded_vocab_size, L = c.num_layers, NH = c.num_heads, C = c.channels;
        int hd = C / NH;
        start_forward(inputs_, targets_, B_, T_, true);
        size_t BT = (size_t)B * T;
        Activations<F>& a = acts;
        encoder_forward(a.encoded, inputs_, param(P_WTE), B, T, C);
        for (int l = 0; l < L; l++) {
            F* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
            F* ln1 = a.ln1 + l * BT * C;
            F* qkv = a.qkv + l * BT * 3 * C;
            F* qkvr = a.qkvr + l * BT * 3 * C;
            F* atty = a.atty + l * BT * C;
            F* attproj = a.attproj + l * BT * C;
            F* residual2 = a.residual2 + l * BT * C;
            F* ln2 = a.ln2 + l * BT * C;
            F* fch = a.fch + l * BT * 4 * C;
            F* fch_gelu = a.fch_gelu + l * BT * 4 * C;
            F* fcproj = a.fcproj + l * BT * C;
            F* residual3 = a.residual3 + l * BT * C;
            layernorm_forward(ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, residual, param(P_LN1W) + l * C,
                              param(P_LN1B) + l * C, (int)BT, C);
            matmul_forward(qkv, ln1, param(P_QKVW) + (size_t)l * 3 * C * C, param(P_QKVB) + l * 3 * C, (int)BT, C,
                           3 * C);
            rope_forward(qkvr, qkv, B, T, NH, hd, (double)c.rope_base);
            std::vector<double> p_head = layer_p(l);
            attention_forward(atty, a.attstats + l * BT * NH * 3, qkvr, B, T, NH, hd, c.attn, (double)c.p,
                              p_head.empty() ? nullptr : p_head.data(), c.attn_len);
            matmul_forward(attproj, atty, param(P_ATTPROJW) + (size_t)l * C * C, param(P_ATTPROJB) + l * C,
                           (int)BT, C, C);
            residual_forward(residual2, residual, attproj, (int)(BT * C));
            layernorm_forward(ln2, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, residual2, param(P_LN2W) + l * C,
                              param(P_LN2B) + l * C, (int)BT, C);
            matmul_forward(fch, ln2, param(P_FCW) + (size_t)l * 4 * C * C, param(P_FCB) + l * 4 * C, (int)BT, C,
                           4 * C);
            gelu_forward(fch_gelu, fch, (int)(BT * 4 * C));
            matmul_forward(fcproj, fch_gelu, param(P_FCPROJW) + (size_t)l * C * 4 * C, param(P_FCPROJB) + l * C,
                           (int)BT, 4 * C, C);
            residual_forward(residual3, residual2, fcproj, (int)(BT * C));
        }
        F* last = a.residual3 + (L - 1) * BT * C;
        layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, param(P_LNFW), param(P_LNFB), (int)BT, C);
        size_t first = have_targets ? 0 : std::min(logits_from, BT);
        matmul_forward(a.logits + first * Vp, a.lnf + first * C, param(P_WTE), (const F*)nullptr, (int)(BT - first),
                       C, Vp);
        mean_loss = -1;
        if (have_targets) {
            fused_classifier(a.losses, (F*)nullptr, a.logits, targets_, F(0), (int)BT, V, Vp);
            F sum = 0;
            for (size_t i = 0; i < BT; i++) sum += a.losses[i];
            mean_loss = sum / F(BT);
        }
        return mean_loss;
    }

    void zero_grad() { std::fill(grads.begin(), grads.end(), F(0)); }

    // Backward of the mean loss of the last forward (which must have had targets).
    // Accumulates into grads (call zero_grad() first, or not, to accumulate micro-steps).
    // loss_scale multiplies the gradient (1/grad_accum_steps for accumulation).
    void backward(F loss_scale = F(1)) {
        if (!have_targets) throw std::logic_error("backward: the last forward had no targets");
        const GPT2Config& c = config;
        int V = c.vocab_size, Vp = c.padded_vocab_size, L = c.num_layers, NH = c.num_heads, C = c.channels;
        int hd = C / NH;
        size_t BT = (size_t)B * T;
        Activations<F>& a = acts;
        Activations<F>& g = grad_acts;
        std::fill(grad_acts_memory.begin(), grad_acts_memory.end(), F(0));
        fused_classifier(a.losses, g.logits, a.logits, targets.data(), loss_scale / F(BT), (int)BT, V, Vp);
        matmul_backward(g.lnf, grad(P_WTE), (F*)nullptr, g.logits, a.lnf, param(P_WTE), (int)BT, C, Vp);
        F* last = a.residual3 + (L - 1) * BT * C;
        F* dlast = g.residual3 + (L - 1) * BT * C;
        layernorm_backward(dlast, grad(P_LNFW), grad(P_LNFB), g.lnf, last, param(P_LNFW), a.lnf_mean, a.lnf_rstd,
                           (int)BT, C);
        for (int l = L - 1; l >= 0; l--) {
            F* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
            F* dresidual = l == 0 ? g.encoded : g.residual3 + (l - 1) * BT * C;
            size_t o1 = l * BT * C, o3 = l * BT * 3 * C, o4 = l * BT * 4 * C, ol = l * BT;
            // MLP
            residual_backward(g.residual2 + o1, g.fcproj + o1, g.residual3 + o1, (int)(BT * C));
            matmul_backward(g.fch_gelu + o4, grad(P_FCPROJW) + (size_t)l * C * 4 * C, grad(P_FCPROJB) + l * C,
                            g.fcproj + o1, a.fch_gelu + o4, param(P_FCPROJW) + (size_t)l * C * 4 * C, (int)BT,
                            4 * C, C);
            gelu_backward(g.fch + o4, a.fch + o4, g.fch_gelu + o4, (int)(BT * 4 * C));
            matmul_backward(g.ln2 + o1, grad(P_FCW) + (size_t)l * 4 * C * C, grad(P_FCB) + l * 4 * C, g.fch + o4,
                            a.ln2 + o1, param(P_FCW) + (size_t)l * 4 * C * C, (int)BT, C, 4 * C);
            layernorm_backward(g.residual2 + o1, grad(P_LN2W) + l * C, grad(P_LN2B) + l * C, g.ln2 + o1,
                               a.residual2 + o1, param(P_LN2W) + l * C, a.ln2_mean + ol, a.ln2_rstd + ol, (int)BT,
                               C);
            // attention
            residual_backward(dresidual, g.attproj + o1, g.residual2 + o1, (int)(BT * C));
            matmul_backward(g.atty + o1, grad(P_ATTPROJW) + (size_t)l * C * C, grad(P_ATTPROJB) + l * C,
                            g.attproj + o1, a.atty + o1, param(P_ATTPROJW) + (size_t)l * C * C, (int)BT, C, C);
            std::vector<double> p_head = layer_p(l), dp(NH, 0.0);
            attention_backward(g.qkvr + o3, g.atty + o1, a.qkvr + o3, B, T, NH, hd, c.attn, (double)c.p,
                               p_head.empty() ? nullptr : p_head.data(), dp.data(), c.attn_len);
            for (int h = 0; c.learn_p && h < NH; h++) {  // dL/dtheta = dL/dp sigmoid(theta)
                F theta = param(P_PTHETA)[l * NH + h];
                grad(P_PTHETA)[l * NH + h] += F(dp[h] * learned_p_dtheta((double)theta));
            }
            rope_backward(g.qkv + o3, g.qkvr + o3, B, T, NH, hd, (double)c.rope_base);
            matmul_backward(g.ln1 + o1, grad(P_QKVW) + (size_t)l * 3 * C * C, grad(P_QKVB) + l * 3 * C, g.qkv + o3,
                            a.ln1 + o1, param(P_QKVW) + (size_t)l * 3 * C * C, (int)BT, C, 3 * C);
            layernorm_backward(dresidual, grad(P_LN1W) + l * C, grad(P_LN1B) + l * C, g.ln1 + o1, residual,
                               param(P_LN1W) + l * C, a.ln1_mean + ol, a.ln1_rstd + ol, (int)BT, C);
        }
        encoder_backward(grad(P_WTE), g.encoded, inputs.data(), B, T, C);
    }

    // sqrt of the sum of squares of every parameter gradient
    double grad_norm() const { return std::sqrt(global_norm_squared(grads.data(), num_parameters)); }

    // AdamW step t (1-based); weight decay on the matrices only (param_tensor_decays), theta's
    // learning rate scaled by p_lr_scale (param_tensor_lr).
    void update(double lr, double beta1, double beta2, double eps, double weight_decay, int t) {
        if (m.empty()) {
            m.assign(num_parameters, F(0));
            v.assign(num_parameters, F(0));
        }
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            size_t off = param_offsets[i];
            adamw_update(params.data() + off, grads.data() + off, m.data() + off, v.data() + off, param_sizes[i],
                         param_tensor_lr(i, lr, p_lr_scale), beta1, beta2, eps,
                         param_tensor_decays(i) ? weight_decay : 0.0, t);
        }
    }
};
