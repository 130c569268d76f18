// GPT-2 + RoPE model configuration, shared by the CPU and CUDA back ends and the checkpoints.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "attention/attention_kind.h"
#include "model/rand.h"

struct GPT2Config {
    int max_seq_len = 1024;         // longest sequence the trainer allocates for (RoPE has no limit)
    int vocab_size = 50257;         // real tokens
    int padded_vocab_size = 50304;  // rows of wte / logit columns, padded for the matmuls
    int num_layers = 12;
    int num_heads = 12;
    int channels = 768;
    AttnKind attn = ATTN_LSSAR;
    float p = 15.0f;                // the re-weighting power (ignored by variants without re-weighting)
    float rope_base = 10000.0f;
    int learn_p = 0;                // 1: p trainable per layer and head, p = 1 + softplus(theta), from p
    int attn_len = 0;               // the n of sigmoid's bias -ln(n) and relu's scale 1/n: 0 for the row's
                                    // n_t = t + 1, L > 0 for the constant L (the trainer's -tl 1: the
                                    // training length; doc/attention.md, section
                                    // 'Choices the cited papers leave open')
};

// Learned p (doc/attention.md, section 'Learned p'): p = 1 + softplus(theta) >= 1, theta initialised
// so that p starts at the configured p0 > 1.
inline double learned_p(double theta) { return 1.0 + std::max(theta, 0.0) + std::log1p(std::exp(-std::fabs(theta))); }
inline double learned_p_dtheta(double theta) {  // dp/dtheta = sigmoid(theta)
    return theta >= 0 ? 1.0 / (1.0 + std::exp(-theta)) : std::exp(theta) / (1.0 + std::exp(theta));
}
inline double learned_p_theta0(double p0) {  // softplus^-1(p0 - 1) = ln(expm1(p0 - 1)), stable for large p0
    double y = p0 - 1.0;
    return y + std::log(-std::expm1(-y));
}

// Empty if the config is valid, else a message that names the field, its value and the fix.
inline std::string gpt2_config_error(const GPT2Config& c) {
    char msg[256];
    auto positive = [&](const char* name, int v) {
        if (v <= 0) snprintf(msg, sizeof msg, "config: %s = %d must be > 0", name, v);
        return v > 0;
    };
    if (!positive("max_seq_len", c.max_seq_len) || !positive("vocab_size", c.vocab_size) ||
        !positive("padded_vocab_size", c.padded_vocab_size) || !positive("num_layers", c.num_layers) ||
        !positive("num_heads", c.num_heads) || !positive("channels", c.channels))
        return msg;
    if (c.padded_vocab_size < c.vocab_size) {
        snprintf(msg, sizeof msg, "config: padded_vocab_size = %d is smaller than vocab_size = %d",
                 c.padded_vocab_size, c.vocab_size);
        return msg;
    }
    if (c.channels % c.num_heads != 0) {
        snprintf(msg, sizeof msg, "config: channels = %d is not divisible by num_heads = %d", c.channels,
                 c.num_heads);
        return msg;
    }
    if ((c.channels / c.num_heads) % 2 != 0) {
        snprintf(msg, sizeof msg, "config: head dim channels/num_heads = %d must be even for RoPE's pairs",
                 c.channels / c.num_heads);
        return msg;
    }
    if (!attn_valid(c.attn)) {
        snprintf(msg, sizeof msg, "config: attn = %d is not an attention variant (0..%d: %s)", (int)c.attn,
                 ATTN_NUM_KINDS - 1, attn_kind_list().c_str());
        return msg;
    }
    if (attn_reweights(c.attn) && !(c.p >= 1.0f)) {
        snprintf(msg, sizeof msg, "config: p = %g must be >= 1 for %s (the re-weighting power)", c.p,
                 attn_kind_name(c.attn));
        return msg;
    }
    if (c.learn_p != 0 && c.learn_p != 1) {
        snprintf(msg, sizeof msg, "config: learn_p = %d must be 0 or 1", c.learn_p);
        return msg;
    }
    if (c.learn_p && !attn_reweights(c.attn)) {
        snprintf(msg, sizeof msg, "config: learn_p = 1 needs a variant with re-weighting; %s has no p",
                 attn_kind_name(c.attn));
        return msg;
    }
    if (c.learn_p && !(c.p > 1.0f)) {
        snprintf(msg, sizeof msg, "config: learn_p = 1 starts p at p = %g, which must be > 1 "
                 "(p = 1 + softplus(theta) reaches 1 only at theta = -inf)", c.p);
        return msg;
    }
    std::string len_error = attn_len_error(c.attn, c.attn_len);
    if (!len_error.empty()) return "config: " + len_error;
    if (!(c.rope_base > 1.0f)) {
        snprintf(msg, sizeof msg, "config: rope_base = %g must be > 1", c.rope_base);
        return msg;
    }
    return "";
}

// The parameter tensors, one line each, in the order of the one contiguous buffer:
//   X(enum, name, torch_name, per_layer, shape, decays, init)   (per_layer, decays: true or false)
// shape: one layer's slice for a per-layer tensor (stacked over the L layers in the buffer), the
// whole tensor otherwise, in C channels, Vp padded vocabulary, NH heads, NHP (NH with learned p,
// else 0) and NHS (NH for ssmax, else 0). torch_name: the PyTorch module's name (nanoGPT's), under
// transformer.h.<layer>. for a per-layer tensor, under transformer. otherwise. decays: AdamW's weight
// decay applies (the matrices; not biases, layernorms or the head parameters). init: gpt2_init_params.
// Everything else derives from this list: ParamTensor, the names, sizes, per-layer and decay
// flags, the initialisation, the CUDA graph's per-layer slices (GPT2LayerParams) and the manifest
// the Python and shell scripts read (tools/print_manifest.cpp).
#define GPT2_PARAM_TENSORS(X)                                                           \
    X(P_WTE, wte, "wte.weight", false, (Vp, C), true, INIT_WTE)                      \
    X(P_LN1W, ln1w, "ln_1.weight", true, (C), false, INIT_ONES)                      \
    X(P_LN1B, ln1b, "ln_1.bias", true, (C), false, INIT_ZEROS)                       \
    X(P_QKVW, qkvw, "attn.c_attn.weight", true, (3 * C, C), true, INIT_NORMAL)       \
    X(P_QKVB, qkvb, "attn.c_attn.bias", true, (3 * C), false, INIT_ZEROS)            \
    X(P_ATTPROJW, attprojw, "attn.c_proj.weight", true, (C, C), true, INIT_RESIDUAL) \
    X(P_ATTPROJB, attprojb, "attn.c_proj.bias", true, (C), false, INIT_ZEROS)        \
    X(P_LN2W, ln2w, "ln_2.weight", true, (C), false, INIT_ONES)                      \
    X(P_LN2B, ln2b, "ln_2.bias", true, (C), false, INIT_ZEROS)                       \
    X(P_FCW, fcw, "mlp.c_fc.weight", true, (4 * C, C), true, INIT_NORMAL)            \
    X(P_FCB, fcb, "mlp.c_fc.bias", true, (4 * C), false, INIT_ZEROS)                 \
    X(P_FCPROJW, fcprojw, "mlp.c_proj.weight", true, (C, 4 * C), true, INIT_RESIDUAL) \
    X(P_FCPROJB, fcprojb, "mlp.c_proj.bias", true, (C), false, INIT_ZEROS)           \
    X(P_LNFW, lnfw, "ln_f.weight", false, (C), false, INIT_ONES)                     \
    X(P_LNFB, lnfb, "ln_f.bias", false, (C), false, INIT_ZEROS)                      \
    X(P_PTHETA, ptheta, "attn.p_theta", true, (NHP), false, INIT_THETA0)             \
    X(P_SSMAX_S, ssmax_s, "attn.ssmax_s", true, (NHS), false, INIT_SSMAX_S0)

enum ParamTensor {
#define GPT2_PARAM_ENUM(e, name, torch_name, per_layer, shape, decays, init) e,
    GPT2_PARAM_TENSORS(GPT2_PARAM_ENUM)
#undef GPT2_PARAM_ENUM
    NUM_PARAM_TENSORS
};

// How gpt2_init_params fills a tensor: zeros; ones; wte: N(0, 0.02) on the real vocabulary's rows,
// zero on the padding; N(0, 0.02); the residual projections' N(0, 0.02 / sqrt(2 L)); learned p's
// theta at the config's p; ssmax's s at SSMAX_S0.
enum ParamInit { INIT_ZEROS, INIT_ONES, INIT_WTE, INIT_NORMAL, INIT_RESIDUAL, INIT_THETA0, INIT_SSMAX_S0 };

struct ParamTensorInfo {
    const char* name;        // the C++ name (checkpoint tools, messages)
    const char* torch_name;  // the PyTorch module's
    bool per_layer;          // one slice per layer (layer l's: the l-th of num_layers equal parts)
    const char* shape;       // of one slice (per_layer) or of the tensor, as written in GPT2_PARAM_TENSORS
    bool decays;
    ParamInit init;
};

constexpr ParamTensorInfo PARAM_TENSOR_TABLE[NUM_PARAM_TENSORS] = {
#define GPT2_PARAM_ROW(e, name, torch_name, per_layer, shape, decays, init) \
    {#name, torch_name, per_layer, #shape, decays, init},
    GPT2_PARAM_TENSORS(GPT2_PARAM_ROW)
#undef GPT2_PARAM_ROW
};

inline const char* param_tensor_name(int i) { return PARAM_TENSOR_TABLE[i].name; }

// GPT2_IF_##flag(code): code where a table's flag column is true, nothing where it is false
#define GPT2_IF_true(...) __VA_ARGS__
#define GPT2_IF_false(...)

// the product of a shape's dimensions: GPT2_DIMS_PRODUCT (a, b) = a * b
constexpr size_t gpt2_dims_product(std::initializer_list<size_t> dims) {
    size_t n = 1;
    for (size_t d : dims) n *= d;
    return n;
}
#define GPT2_DIMS_PRODUCT(...) gpt2_dims_product({__VA_ARGS__})

// Element counts of every parameter tensor.
inline void gpt2_param_sizes(size_t sizes[NUM_PARAM_TENSORS], const GPT2Config& c) {
    size_t Vp = c.padded_vocab_size, C = c.channels, L = c.num_layers, NH = c.num_heads;
    size_t NHP = c.learn_p ? NH : 0, NHS = attn_head_param(c.attn) == ATTN_HEAD_S ? NH : 0;
    (void)Vp, (void)C, (void)NHP, (void)NHS;
#define GPT2_PARAM_SIZE(e, name, torch_name, per_layer, shape, decays, init) \
    sizes[e] = (per_layer ? L : 1) * GPT2_DIMS_PRODUCT shape;
    GPT2_PARAM_TENSORS(GPT2_PARAM_SIZE)
#undef GPT2_PARAM_SIZE
}

// Tensors with one slice per layer (layer l's: the l-th of num_layers equal parts); the others
// (wte, lnfw, lnfb) belong to no layer.
inline bool param_tensor_per_layer(int i) { return PARAM_TENSOR_TABLE[i].per_layer; }

// Weight decay applies to the matrices only, not to biases and layernorm parameters.
inline bool param_tensor_decays(int i) { return PARAM_TENSOR_TABLE[i].decays; }

// The learning rate of tensor i: lr, and for learned p's theta lr * p_lr_scale. AdamW moves every
// element by about lr per step whatever its gradient's size, and p = 1 + softplus(theta) moves
// with theta once p >> 1, so at lr alone p moves at most lr per step (doc/attention.md, section 'Learned p').
// ssmax's s trains at lr, without a multiplier: unlike p it is its own parameter (no softplus) and
// of order 1 (SSMAX_S0), so about lr per step moves it across its whole scale within 1/lr steps,
// a small part of a run.
inline double param_tensor_lr(int i, double lr, double p_lr_scale) { return i == P_PTHETA ? lr * p_lr_scale : lr; }

// Data-parallel shards of the parameter buffer (ZeRO-1 and the optimizer files of a checkpoint):
// num_parameters / shards rounded up to a multiple of 8 (every shard starts 16-byte aligned for
// the 128-bit kernels); shard r is [r * size, (r + 1) * size) clipped to num_parameters.
inline size_t param_shard_size(size_t num_parameters, int shards) {
    size_t per = (num_parameters + shards - 1) / shards;
    return (per + 7) / 8 * 8;
}

inline void param_shard_range(size_t num_parameters, int shards, int rank, size_t* begin, size_t* end) {
    size_t per = param_shard_size(num_parameters, shards);
    *begin = std::min(num_parameters, (size_t)rank * per);
    *end = std::min(num_parameters, *begin + per);
}

// GPT-2 initialisation of the whole parameter buffer (both back ends call this, so they start
// from identical weights): N(0, 0.02) weights, residual projections (attprojw, fcprojw) with std
// 0.02/sqrt(2L), zero biases, unit layernorm weights, zero padded vocabulary rows; learned p's
// theta at p; ssmax's s at SSMAX_S0.
template <class T>
void gpt2_init_params(T* params, const GPT2Config& c, uint64_t seed) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(sizes, c);
    Rng rng(seed);
    double residual_std = 0.02 / std::sqrt(2.0 * c.num_layers);
    T* p = params;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = sizes[i];
        switch (PARAM_TENSOR_TABLE[i].init) {
        case INIT_ONES:
            for (size_t k = 0; k < n; k++) p[k] = T(1);
            break;
        case INIT_WTE: {
            size_t real = (size_t)c.vocab_size * c.channels;
            for (size_t k = 0; k < n; k++) p[k] = k < real ? T(0.02 * rng.normal()) : T(0);
            break;
        }
        case INIT_NORMAL:
            for (size_t k = 0; k < n; k++) p[k] = T(0.02 * rng.normal());
            break;
        case INIT_RESIDUAL:
            for (size_t k = 0; k < n; k++) p[k] = T(residual_std * rng.normal());
            break;
        case INIT_THETA0:
            for (size_t k = 0; k < n; k++) p[k] = T(learned_p_theta0(c.p));
            break;
        case INIT_SSMAX_S0:
            for (size_t k = 0; k < n; k++) p[k] = T(SSMAX_S0);
            break;
        case INIT_ZEROS:
            for (size_t k = 0; k < n; k++) p[k] = T(0);
            break;
        }
        p += n;
    }
}

// The learned p of every (layer, head), (L, NH) row-major, from a whole parameter buffer
// (empty without learn_p).
inline std::vector<double> learned_p_values(const GPT2Config& c, const float* params) {
    size_t sizes[NUM_PARAM_TENSORS], offset = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < P_PTHETA; i++) offset += sizes[i];
    std::vector<double> p;
    for (size_t k = 0; k < sizes[P_PTHETA]; k++) p.push_back(learned_p((double)params[offset + k]));
    return p;
}

// ssmax's s of every (layer, head), (L, NH) row-major, from a whole parameter buffer (empty for
// the other variants).
inline std::vector<double> ssmax_s_values(const GPT2Config& c, const float* params) {
    size_t sizes[NUM_PARAM_TENSORS], offset = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < P_SSMAX_S; i++) offset += sizes[i];
    return std::vector<double>(params + offset, params + offset + sizes[P_SSMAX_S]);
}

// The learned p of a model (the fp32 weights), empty unless it learns p. The CUDA back end has
// its own, which copies theta only (model/gpt2_cuda.cuh).
template <class Model> std::vector<double> model_learned_p(Model& model) {
    if (!model.config.learn_p) return {};
    std::vector<float> params;
    model.get_params(params);
    return learned_p_values(model.config, params.data());
}

// ssmax's s of a model (the fp32 weights), empty for the other variants. The CUDA back end has its
// own, which copies s only (model/gpt2_cuda.cuh).
template <class Model> std::vector<double> model_ssmax_s(Model& model) {
    if (attn_head_param(model.config.attn) != ATTN_HEAD_S) return {};
    std::vector<float> params;
    model.get_params(params);
    return ssmax_s_values(model.config, params.data());
}

// "p mean 14.9 min 14.2 max 15.3" of head parameter values named `name`; "p 7.5" of one.
inline std::string head_param_summary(const char* name, const std::vector<double>& v) {
    if (v.empty()) return "";
    char text[96];
    if (v.size() == 1) {
        snprintf(text, sizeof text, "%s %.4g", name, v[0]);
        return text;
    }
    double sum = 0, lo = v[0], hi = v[0];
    for (double x : v) { sum += x; lo = std::min(lo, x); hi = std::max(hi, x); }
    snprintf(text, sizeof text, "%s mean %.4g min %.4g max %.4g", name, sum / v.size(), lo, hi);
    return text;
}

// "p mean 14.9 min 14.2 max 15.3" of learned p values; "p 7.5" of one (-pw's schedule).
inline std::string learned_p_summary(const std::vector<double>& p) { return head_param_summary("p", p); }
// "s mean 0.43 min 0.41 max 0.47" of ssmax's s values.
inline std::string ssmax_s_summary(const std::vector<double>& s) { return head_param_summary("s", s); }

