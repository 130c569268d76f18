// GPT-2 + RoPE on the CPU back end: parameters, activations, forward to the mean loss,
// backward to every parameter gradient, AdamW update.
//
// The graph (gpt2_forward, gpt2_backward, gpt2_update) is written once, over a precision path
// that says which kernels run and in which type the matmuls read their inputs:
//   ReferencePath<F> (here): the fp32 path, every tensor in F (float trains, double checks
//                      gradients), layers/*_cpu.h and attention/attention_cpu.h (namespace ref);
//   GPT2Fast<X> (model/gpt2_cpu_fast.h): the fast path, fp32 or bf16 matmul operands with fp32 master
//                      weights, gradients and activations, Highway kernels dispatched to the CPU's ISA
//                      (layers/fast_cpu.h, attention/attention_fast_cpu.h).
// GPT2<F> holds the state both paths work on (weights, gradients, AdamW moments, activations).
#pragma once

#include <algorithm>
#include <chrono>
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
#include "model/gpt2_sizes.h"
#include "model/rand.h"

// Activations of one forward pass (and, with the same layout, their gradients): the tensors of
// model/gpt2_sizes.h.
template <class T> using Activations = ActivationTensors<T*>;
static_assert(sizeof(Activations<float>) == NUM_ACTIVATION_TENSORS * sizeof(float*), "one pointer per tensor");

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

template <class F> struct GPT2 : GPT2ParamLayout {
    GPT2Config config;
    std::vector<F> params, grads, m, v;  // (num_parameters) each; AdamW moments allocated lazily
    // activations and their gradients for the current (B, T)
    int B = 0, T = 0;
    std::vector<F> acts_memory, grad_acts_memory;
    Activations<F> acts, grad_acts;
    std::vector<int> inputs, targets;  // (B,T) of the last forward
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

    // tensor i, or layer l's slice of it (param_offset)
    F* param(int i, int l = 0) { return params.data() + param_offset(i, l); }
    F* grad(int i, int l = 0) { return grads.data() + param_offset(i, l); }

    // The learned head parameter of layer l's heads, as the attention takes it (p_head): learned p,
    // p = 1 + softplus(theta), or ssmax's s itself; empty for the others (re-weighting's p: the config's).
    std::vector<double> layer_p(int l) {
        std::vector<double> p;
        int NH = config.num_heads;
        for (int h = 0; config.learn_p && h < NH; h++) p.push_back(learned_p((double)param(P_PTHETA)[l * NH + h]));
        for (int h = 0; learns_s() && h < NH; h++) p.push_back((double)param(P_SSMAX_S)[l * NH + h]);
        return p;
    }
    bool learns_s() const { return attn_head_param(config.attn) == ATTN_HEAD_S; }
    // whether the attention's backward gives dL/dp_head (learned p, ssmax's s)
    bool learns_head_param() const { return config.learn_p || learns_s(); }

    // GPT-2 initialisation (gpt2_init_params in model/gpt2_config.h)
    void init(uint64_t seed) { gpt2_init_params(params.data(), config, seed); }

    // Activations for (B_, T_), and their gradients unless with_grads is false (the fast path,
    // model/gpt2_cpu_fast.h, keeps its own smaller gradient buffers).
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

    // Forward pass over inputs (B,T) in precision F. With targets (B,T) it returns the mean loss;
    // without, -1. Token ids must be in [0, vocab_size).
    F forward(const int* inputs_, const int* targets_, int B_, int T_);

    void zero_grad() { std::fill(grads.begin(), grads.end(), F(0)); }

    // Backward of the mean loss of the last forward (which must have had targets).
    // Accumulates into grads (call zero_grad() first, or not, to accumulate micro-steps).
    // loss_scale multiplies the gradient (1/grad_accum_steps for accumulation).
    void backward(F loss_scale = F(1));

    // sqrt of the sum of squares of every parameter gradient
    double grad_norm() const { return std::sqrt(ref::global_norm_squared(grads.data(), num_parameters)); }

    // grads *= s.grad_scale, then AdamW step s.step (1-based); weight decay on the matrices only
    // (param_tensor_decays), theta's learning rate scaled by p_lr_scale (param_tensor_lr).
    void update(const AdamWStep& s);
};

// ----------------------------------------------------------------------------
// The graph. A precision path P provides:
//   GPT2<Float>& model;                     the state it works on
//   X                                       the type the matmuls read their inputs and weights in
//   full_activation_grads                   whether model.grad_acts holds every activation's gradient
//   matmul_inputs(l), lnf_input()           where the matmuls' inputs of layer l and the classifier's live
//   grad_views(l)                           the gradient buffers of layer l (the path decides which share one)
//   weight(i, l)                            tensor i (layer l's slice) as the matmuls read it
//   and the kernels: layernorm, matmul, rope, attention, gelu, classifier forward and backward, adamw.

// Layer l's matmul inputs, as the matmuls read them (X: F on the reference path, float or bf16 on the fast path)
template <class X> struct MatmulInputs {
    X* ln1;       // (B,T,C)
    X* atty;      // (B,T,C)
    X* ln2;       // (B,T,C)
    X* fch_gelu;  // (B,T,4C)
};

// Layer l's activation gradients. The reference path gives every tensor its own (grad_acts); the
// fast path passes the residual stream's gradient down one buffer and shares the rest across layers.
template <class F> struct LayerGrads {
    F* res3;      // (B,T,C) d residual3, the layer's output
    F* res2;      // (B,T,C) d residual2
    F* res_in;    // (B,T,C) d the layer's input (residual3 of layer l-1, or encoded)
    F* fcproj;    // (B,T,C)
    F* fch_gelu;  // (B,T,4C)
    F* fch;       // (B,T,4C)
    F* ln2;       // (B,T,C)
    F* attproj;   // (B,T,C)
    F* atty;      // (B,T,C)
    F* qkvr;      // (B,T,3C)
    F* qkv;       // (B,T,3C)
    F* ln1;       // (B,T,C)
    F* lnf;       // (B,T,C) of the final layernorm
};

// Forward pass over inputs (B,T). With targets (B,T) it returns the mean loss; without, -1.
// backward_follows (with targets): a path may prepare the classifier's gradient in the same pass.
template <class Path>
typename Path::Float gpt2_forward(Path& P, const int* inputs, const int* targets, int B, int T,
                                  bool backward_follows) {
    using F = typename Path::Float;
    auto& m = P.model;
    const GPT2Config& c = m.config;
    int Vp = c.padded_vocab_size, L = c.num_layers, NH = c.num_heads, C = c.channels, hd = C / NH;
    P.lap_start();
    m.start_forward(inputs, targets, B, T, Path::full_activation_grads);
    P.start_forward();
    size_t BT = (size_t)B * T;
    Activations<F>& a = m.acts;
    P.lap(PROF_OTHER);
    ref::encoder_forward(a.encoded, inputs, m.param(P_WTE), B, T, C);
    P.lap(PROF_ENCODER);
    for (int l = 0; l < L; l++) {
        size_t o1 = l * BT * C, o3 = l * BT * 3 * C, o4 = l * BT * 4 * C, ol = l * BT;
        F* residual = l == 0 ? a.encoded : a.residual3 + o1 - BT * C;  // (B,T,C) the layer's input
        auto x = P.matmul_inputs(l);
        P.layernorm_forward(x.ln1, a.ln1_mean + ol, a.ln1_rstd + ol, residual, m.param(P_LN1W, l),
                            m.param(P_LN1B, l), (int)BT, C);
        P.lap(PROF_LAYERNORM);
        P.matmul_forward(a.qkv + o3, x.ln1, P.weight(P_QKVW, l), m.param(P_QKVB, l), (int)BT, C, 3 * C);
        P.lap(PROF_MATMUL);
        P.rope_forward(a.qkvr + o3, a.qkv + o3, B, T, NH, hd, (double)c.rope_base);
        P.lap(PROF_ROPE);
        std::vector<double> p_head = m.layer_p(l);  // learned p, ssmax's s (empty: c.p)
        P.attention_forward(a.atty + o1, a.attstats + ol * NH * 3, a.qkvr + o3, B, T, NH, hd, c.attn, (double)c.p,
                            p_head.empty() ? nullptr : p_head.data(), c.attn_len);
        P.to_matmul_input(x.atty, a.atty + o1, BT * C);
        P.lap(PROF_ATTENTION);
        P.matmul_forward(a.attproj + o1, x.atty, P.weight(P_ATTPROJW, l), m.param(P_ATTPROJB, l), (int)BT, C, C);
        P.lap(PROF_MATMUL);
        ref::residual_forward(a.residual2 + o1, residual, a.attproj + o1, (int)(BT * C));
        P.lap(PROF_RESIDUAL);
        P.layernorm_forward(x.ln2, a.ln2_mean + ol, a.ln2_rstd + ol, a.residual2 + o1, m.param(P_LN2W, l),
                            m.param(P_LN2B, l), (int)BT, C);
        P.lap(PROF_LAYERNORM);
        P.matmul_forward(a.fch + o4, x.ln2, P.weight(P_FCW, l), m.param(P_FCB, l), (int)BT, C, 4 * C);
        P.lap(PROF_MATMUL);
        P.gelu_forward(x.fch_gelu, a.fch + o4, BT * 4 * C);
        P.lap(PROF_GELU);
        P.matmul_forward(a.fcproj + o1, x.fch_gelu, P.weight(P_FCPROJW, l), m.param(P_FCPROJB, l), (int)BT, 4 * C,
                         C);
        P.lap(PROF_MATMUL);
        ref::residual_forward(a.residual3 + o1, a.residual2 + o1, a.fcproj + o1, (int)(BT * C));
        P.lap(PROF_RESIDUAL);
    }
    F* last = a.residual3 + (L - 1) * BT * C;
    auto lnf = P.lnf_input();
    P.layernorm_forward(lnf, a.lnf_mean, a.lnf_rstd, last, m.param(P_LNFW), m.param(P_LNFB), (int)BT, C);
    P.from_matmul_input(a.lnf, lnf, BT * C);  // acts.lnf: the final layernorm's output as the classifier reads it
    P.lap(PROF_LAYERNORM);
    // without targets, the logits of rows [logits_from, BT) only (GPT2::logits_from)
    size_t first = m.have_targets ? 0 : std::min(m.logits_from, BT);
    if (first < BT)
        P.matmul_forward(a.logits + first * Vp, lnf + first * C, P.weight(P_WTE), (const F*)nullptr, (int)(BT - first),
                         C, Vp);
    P.lap(PROF_MATMUL);
    m.mean_loss = -1;
    if (m.have_targets) {
        m.mean_loss = P.classifier_forward(targets, backward_follows);  // losses (B,T) and their mean
        P.lap(PROF_CLASSIFIER);
    }
    return m.mean_loss;
}

// Accumulates the gradient of loss_scale * the mean loss of the last forward into model.grads.
template <class Path> void gpt2_backward(Path& P, typename Path::Float loss_scale) {
    using F = typename Path::Float;
    auto& m = P.model;
    if (!m.have_targets) throw std::logic_error("backward: the last forward had no targets");
    const GPT2Config& c = m.config;
    int L = c.num_layers, NH = c.num_heads, C = c.channels, hd = C / NH, B = m.B, T = m.T;
    size_t BT = (size_t)B * T;
    Activations<F>& a = m.acts;
    P.lap_start();
    P.start_backward();
    // the classifier: dlogits = (softmax - onehot) * loss_scale / BT, then d lnf and d wte
    LayerGrads<F> top = P.grad_views(L - 1);
    P.classifier_backward(top.lnf, loss_scale);
    F* last = a.residual3 + (L - 1) * BT * C;
    P.layernorm_backward(top.res3, m.grad(P_LNFW), m.grad(P_LNFB), top.lnf, last, m.param(P_LNFW), a.lnf_mean,
                         a.lnf_rstd, (int)BT, C);
    P.lap(PROF_LAYERNORM);
    for (int l = L - 1; l >= 0; l--) {
        size_t o1 = l * BT * C, o3 = l * BT * 3 * C, o4 = l * BT * 4 * C, ol = l * BT;
        F* residual = l == 0 ? a.encoded : a.residual3 + o1 - BT * C;
        LayerGrads<F> d = P.grad_views(l);
        auto x = P.matmul_inputs(l);
        // MLP
        P.residual_backward(d.res2, d.fcproj, d.res3, BT * C);
        P.lap(PROF_RESIDUAL);
        auto dout = P.matmul_dout(d.fcproj, m.grad(P_FCPROJB, l), (int)BT, C);
        P.matmul_backward(d.fch_gelu, m.grad(P_FCPROJW, l), dout, x.fch_gelu, P.weight(P_FCPROJW, l), (int)BT, 4 * C,
                          C);
        P.lap(PROF_MATMUL);
        dout = P.gelu_backward(d.fch, m.grad(P_FCB, l), a.fch + o4, d.fch_gelu, (int)BT, 4 * C);
        P.lap(PROF_GELU);
        P.matmul_backward(d.ln2, m.grad(P_FCW, l), dout, x.ln2, P.weight(P_FCW, l), (int)BT, C, 4 * C);
        P.lap(PROF_MATMUL);
        P.layernorm_backward(d.res2, m.grad(P_LN2W, l), m.grad(P_LN2B, l), d.ln2, a.residual2 + o1,
                             m.param(P_LN2W, l), a.ln2_mean + ol, a.ln2_rstd + ol, (int)BT, C);
        P.lap(PROF_LAYERNORM);
        // attention
        P.residual_backward(d.res_in, d.attproj, d.res2, BT * C);
        P.lap(PROF_RESIDUAL);
        dout = P.matmul_dout(d.attproj, m.grad(P_ATTPROJB, l), (int)BT, C);
        P.matmul_backward(d.atty, m.grad(P_ATTPROJW, l), dout, x.atty, P.weight(P_ATTPROJW, l), (int)BT, C, C);
        P.lap(PROF_MATMUL);
        std::vector<double> p_head = m.layer_p(l), dp(NH, 0.0);
        P.attention_backward(d.qkvr, d.atty, a.qkvr + o3, B, T, NH, hd, c.attn, (double)c.p,
                             p_head.empty() ? nullptr : p_head.data(), m.learns_head_param() ? dp.data() : nullptr,
                             c.attn_len);
        for (int h = 0; c.learn_p && h < NH; h++) {  // dL/dtheta = dL/dp sigmoid(theta)
            F theta = m.param(P_PTHETA)[l * NH + h];
            m.grad(P_PTHETA)[l * NH + h] += F(dp[h] * learned_p_dtheta((double)theta));
        }
        for (int h = 0; m.learns_s() && h < NH; h++) m.grad(P_SSMAX_S)[l * NH + h] += F(dp[h]);  // s is p_head
        P.lap(PROF_ATTENTION);
        P.rope_backward(d.qkv, d.qkvr, B, T, NH, hd, (double)c.rope_base);
        P.lap(PROF_ROPE);
        dout = P.matmul_dout(d.qkv, m.grad(P_QKVB, l), (int)BT, 3 * C);
        P.matmul_backward(d.ln1, m.grad(P_QKVW, l), dout, x.ln1, P.weight(P_QKVW, l), (int)BT, C, 3 * C);
        P.lap(PROF_MATMUL);
        P.layernorm_backward(d.res_in, m.grad(P_LN1W, l), m.grad(P_LN1B, l), d.ln1, residual, m.param(P_LN1W, l),
                             a.ln1_mean + ol, a.ln1_rstd + ol, (int)BT, C);
        P.lap(PROF_LAYERNORM);
    }
    ref::encoder_backward(m.grad(P_WTE), P.grad_views(0).res_in, m.inputs.data(), B, T, C);
    P.lap(PROF_ENCODER);
}

// grads *= s.grad_scale, AdamW step s.step (1-based) on every tensor: weight decay on the matrices
// only (param_tensor_decays), theta's learning rate scaled by p_lr_scale (param_tensor_lr).
template <class Path>
void gpt2_update(Path& P, const AdamWStep& s) {
    auto& m = P.model;
    P.lap_start();
    if (m.m.empty()) {
        m.m.assign(m.num_parameters, 0);
        m.v.assign(m.num_parameters, 0);
    }
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        AdamWStep tensor = s;
        tensor.lr = param_tensor_lr(i, s.lr, m.p_lr_scale);
        tensor.weight_decay = param_tensor_decays(i) ? s.weight_decay : 0.0;
        P.adamw(i, tensor);
    }
    P.lap(PROF_ADAMW);
}

// ----------------------------------------------------------------------------
// The reference path: every tensor in F, every activation gradient kept (grad_acts), the kernels
// of layers/*_cpu.h and attention/attention_cpu.h (ref::), which accumulate into zeroed buffers.
template <class F> struct ReferencePath {
    using Float = F;
    using X = F;
    static constexpr bool full_activation_grads = true;
    GPT2<F>& model;

    void lap_start() {}
    void lap(int) {}
    void start_forward() {}
    void start_backward() { std::fill(model.grad_acts_memory.begin(), model.grad_acts_memory.end(), F(0)); }

    MatmulInputs<F> matmul_inputs(int l) {
        Activations<F>& a = model.acts;
        size_t BTC = (size_t)model.B * model.T * model.config.channels;
        return {a.ln1 + l * BTC, a.atty + l * BTC, a.ln2 + l * BTC, a.fch_gelu + l * 4 * BTC};
    }
    F* lnf_input() { return model.acts.lnf; }
    const F* weight(int i, int l = 0) { return model.param(i, l); }
    LayerGrads<F> grad_views(int l) {
        Activations<F>& g = model.grad_acts;
        size_t BTC = (size_t)model.B * model.T * model.config.channels, o1 = l * BTC;
        return {g.residual3 + o1, g.residual2 + o1, l == 0 ? g.encoded : g.residual3 + o1 - BTC,
                g.fcproj + o1,    g.fch_gelu + 4 * o1, g.fch + 4 * o1, g.ln2 + o1, g.attproj + o1,
                g.atty + o1,      g.qkvr + 3 * o1,   g.qkv + 3 * o1, g.ln1 + o1, g.lnf};
    }

    // forward
    void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* w, const F* b, int N, int C) {
        ref::layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    }
    void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int N, int C, int OC) {
        ref::matmul_forward(out, inp, w, bias, N, C, OC);
    }
    void rope_forward(F* out, const F* inp, int B, int T, int NH, int hd, double base) {
        ref::rope_forward(out, inp, B, T, NH, hd, base);
    }
    void attention_forward(F* out, F* stats, const F* qkv, int B, int T, int NH, int hd, AttnKind kind, double p,
                           const double* p_head, int attn_len) {
        ref::attention_forward(out, stats, qkv, B, T, NH, hd, kind, p, p_head, attn_len);
    }
    void gelu_forward(F* out, const F* inp, size_t N) { ref::gelu_forward(out, inp, (int)N); }
    void to_matmul_input(F*, const F*, size_t) {}    // the matmuls read the activations themselves
    void from_matmul_input(F*, const F*, size_t) {}
    F classifier_forward(const int* targets, bool) {
        Activations<F>& a = model.acts;
        int BT = model.B * model.T;
        ref::fused_classifier(a.losses, (F*)nullptr, a.logits, targets, F(0), BT, model.config.vocab_size,
                         model.config.padded_vocab_size);
        F sum = 0;
        for (int i = 0; i < BT; i++) sum += a.losses[i];
        return sum / F(BT);
    }

    // backward
    void classifier_backward(F* dlnf, F loss_scale) {
        Activations<F>& a = model.acts;
        Activations<F>& g = model.grad_acts;
        int BT = model.B * model.T, C = model.config.channels, Vp = model.config.padded_vocab_size;
        ref::fused_classifier(a.losses, g.logits, a.logits, model.targets.data(), loss_scale / F(BT), BT,
                         model.config.vocab_size, Vp);
        ref::matmul_backward(dlnf, model.grad(P_WTE), (F*)nullptr, g.logits, a.lnf, model.param(P_WTE), BT, C, Vp);
    }
    void residual_backward(F* dinp1, F* dinp2, const F* dout, size_t N) { ref::residual_backward(dinp1, dinp2, dout, (int)N); }
    // a matmul's output gradient as its backward reads it, and the bias gradient
    const F* matmul_dout(const F* dout, F* dbias, int N, int OC) {
        ref::matmul_bias_backward(dbias, dout, N, OC);
        return dout;
    }
    void matmul_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, int N, int C, int OC) {
        ref::matmul_backward(dinp, dw, (F*)nullptr, dout, inp, w, N, C, OC);
    }
    // d fch (N,OC) from d fch_gelu, as the next matmul_backward reads it, and the fc bias gradient
    const F* gelu_backward(F* dinp, F* dbias, const F* inp, const F* dout, int N, int OC) {
        ref::gelu_backward(dinp, inp, dout, N * OC);
        return matmul_dout(dinp, dbias, N, OC);
    }
    void layernorm_backward(F* dinp, F* dw, F* db, const F* dout, const F* inp, const F* w, const F* mean,
                            const F* rstd, int N, int C) {
        ref::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    }
    void attention_backward(F* dqkv, const F* dout, const F* qkv, int B, int T, int NH, int hd, AttnKind kind,
                            double p, const double* p_head, double* dp_head, int attn_len) {
        ref::attention_backward(dqkv, dout, qkv, B, T, NH, hd, kind, p, p_head, dp_head, attn_len);
    }
    void rope_backward(F* dinp, const F* dout, int B, int T, int NH, int hd, double base) {
        ref::rope_backward(dinp, dout, B, T, NH, hd, base);
    }

    // AdamW on tensor i (grads *= s.grad_scale in place)
    void adamw(int i, const AdamWStep& s) {
        size_t off = model.param_offsets[i], n = model.param_sizes[i];
        ref::adamw_update(model.params.data() + off, model.grads.data() + off, model.m.data() + off,
                          model.v.data() + off, n, s);
    }
};

template <class F> F GPT2<F>::forward(const int* inputs_, const int* targets_, int B_, int T_) {
    ReferencePath<F> path{*this};
    return gpt2_forward(path, inputs_, targets_, B_, T_, false);
}
template <class F> void GPT2<F>::backward(F loss_scale) {
    ReferencePath<F> path{*this};
    gpt2_backward(path, loss_scale);
}
template <class F> void GPT2<F>::update(const AdamWStep& s) {
    ReferencePath<F> path{*this};
    gpt2_update(path, s);
}
