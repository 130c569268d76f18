// GPT-2 + RoPE on the GPU: the CUDA back end. The same model as model/gpt2_cpu.h (its twin and
// reference; test: test/test_model_cuda.cu), with llm.c's precision recipe:
//   parameters, activations, gradients  bf16 (floatX)
//   master weights, AdamW moments        fp32, updated by layers/adamw.cuh, which writes the bf16
//                                        parameters by stochastic rounding
//   every sum (matmuls, norms, softmax)  fp32
// Layer code: layers/*.cuh, attention/attention.cuh. Parameter layout: model/gpt2_config.h.
// Learned p (learn_p): theta (L, NH) is a bf16 parameter tensor like the others (fp32 master, AdamW
// without weight decay, ZeRO-1 shards); each forward computes p = 1 + softplus(theta) of the bf16
// theta into p_heads, each layer's attention backward adds dL/dp per head into dp_heads, and
// dtheta += dp sigmoid(theta) is written before the layer's gradients count as complete.
// ssmax: s (L, NH) is a bf16 parameter tensor the same way; each forward copies it to fp32 into
// p_heads, the attention takes it as its per-head p, its backward adds dL/ds into dp_heads, and
// ds += dp_heads (the identity's chain) is written at the same point as learned p's dtheta.
// Kernel launchers are defined in the headers, so include this file in one translation unit.
//
// Memory saving choices (llm.c's): the qkv matmul writes straight into the RoPE'd buffer (RoPE
// rotates in place; its backward needs no input); the attention and MLP projections go to one
// (B,T,C) scratch before the residual add fused with the next layernorm; the backward reuses
// three gradient buffers across layers; the fused classifier turns the logits into dlogits in
// place, so the logits of a forward are readable only until its backward (not at all after a
// training forward, forward(..., backward_follows = true), whose one classifier pass writes them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention.cuh"
#include "layers/adamw.cuh"
#include "layers/classifier.cuh"
#include "layers/cublas_common.cuh"
#include "layers/cuda_common.cuh"
#include "layers/encoder.cuh"
#include "layers/floatx.cuh"
#include "layers/gelu.cuh"
#include "layers/global_norm.cuh"
#include "layers/layernorm.cuh"
#include "layers/matmul.cuh"
#include "layers/residual.cuh"
#include "layers/rope.cuh"
#include "model/gpt2_config.h"
#include "model/gpt2_layout.h"
#include "model/gpt2_sizes.h"
#include "model/optimizer_state.cuh"
#include "model/rand.h"
#include "runtime/memory.h"

// Empty if the config is valid for the CUDA back end, else a message naming the field and the fix:
// the model's own rules (gpt2_config_error) plus what the CUDA kernels need.
inline std::string gpt2_cuda_config_error(const GPT2Config& c) {
    std::string err = gpt2_config_error(c);
    if (!err.empty()) return err;
    char msg[256];
    int hd = c.channels / c.num_heads;
    if (c.channels % 8 != 0) {
        snprintf(msg, sizeof msg, "config: channels = %d must be a multiple of 8 on the CUDA back end "
                                  "(128-bit packs of 8 bf16)", c.channels);
        return msg;
    }
    if (c.channels > LAYERNORM_BACKWARD_SMEM_BYTES / 8) {
        snprintf(msg, sizeof msg, "config: channels = %d is above %d, the most the layernorm backward kernel takes",
                 c.channels, LAYERNORM_BACKWARD_SMEM_BYTES / 8);
        return msg;
    }
    if (c.padded_vocab_size % 8 != 0) {
        snprintf(msg, sizeof msg, "config: padded_vocab_size = %d must be a multiple of 8 on the CUDA back end "
                                  "(pad it up, e.g. to a multiple of 64 as GPT-2's 50304)", c.padded_vocab_size);
        return msg;
    }
    if (hd != 32 && hd != 64 && hd != 128) {
        snprintf(msg, sizeof msg, "config: head dim channels/num_heads = %d/%d = %d: the CUDA attention kernels "
                                  "take 32, 64 or 128", c.channels, c.num_heads, hd);
        return msg;
    }
    return "";
}

// Device activations of one forward (L layers, B batch, T time, C channels, NH heads, Vp padded
// vocab) and the backward's gradient buffers, which are shared by all layers.
struct GPT2CudaActivations {
    // the forward's tensors this back end keeps (model/gpt2_sizes.h's GPT2_ACTIVATIONS with on_cuda),
    // shapes there
#define GPT2_CUDA_ACT_FIELD(name, per_layer, shape, cuda_type, on_cuda) GPT2_IF_##on_cuda(cuda_type* name;)
    GPT2_ACTIVATIONS(GPT2_CUDA_ACT_FIELD)
#undef GPT2_CUDA_ACT_FIELD
    floatX* proj;       // (B,T,C) attproj or fcproj output of the current layer, before the residual add
    // backward
    floatX* dresidual;  // (B,T,C) gradient of the residual stream at the current layer
    floatX* dbtc;       // (B,T,C) dlnf, dln2, datty, dln1
    floatX* dbt4c;      // (B,T,4C) dfch, dqkv
    float* scratch;     // fp32 partial sums of the matmul and layernorm backward
    void* attn_scratch; // attention_scratch_bytes(B,T,NH,hd)
    int* encoder_workspace;  // encoder_backward_workspace_ints(B,T)
    int* inputs;        // (B,T) token ids
    int* targets;       // (B,T)
};

// Layer l's slices of the parameters, or of the gradients (the same layout), with llm.c's names:
// GPT2Cuda::layer_params(l), layer_grads(l).
struct GPT2LayerParams {
    // l_<name> of every per-layer tensor of model/gpt2_config.h's GPT2_PARAM_TENSORS (shapes there),
    // null where the tensor is empty (learned p's theta without learn_p, ssmax's s for the other variants)
#define GPT2_LAYER_PARAM_FIELD(e, name, torch_name, per_layer, shape, decays, init) \
    GPT2_IF_##per_layer(floatX* l_##name;)
    GPT2_PARAM_TENSORS(GPT2_LAYER_PARAM_FIELD)
#undef GPT2_LAYER_PARAM_FIELD
};

// Layer l's slices of the forward's activations (GPT2CudaActivations), with llm.c's names:
// GPT2Cuda::layer_acts(l).
struct GPT2LayerActs {
    floatX* l_residual;  // (B,T,C) the layer's input: encoded for layer 0, else layer l-1's residual3
    // l_<name> of every per-layer activation the CUDA back end keeps (GPT2_ACTIVATIONS, shapes there)
#define GPT2_LAYER_ACT_FIELD(name, per_layer, shape, cuda_type, on_cuda) \
    GPT2_IF_##per_layer(GPT2_IF_##on_cuda(cuda_type* l_##name;))
    GPT2_ACTIVATIONS(GPT2_LAYER_ACT_FIELD)
#undef GPT2_LAYER_ACT_FIELD
};

struct GPT2Cuda : GPT2ParamLayout {
    GPT2Config config;
    // elements of params_memory and grads_memory: num_parameters, or more after reserve_shards(),
    // which pads them to shards x shard_size (the tail stays 0) for ZeRO-1
    size_t num_allocated = 0;
    size_t shard_size = 0;            // elements per shard after reserve_shards(), else 0
    cudaStream_t stream = 0;
    // device, in the layout of model/gpt2_config.h
    floatX* params_memory = nullptr;  // (num_allocated) bf16 weights the kernels read
    floatX* grads_memory = nullptr;   // (num_allocated) bf16 gradients
    // fp32 master weights and AdamW moments: of every parameter, or after shard_optimizer() of a
    // ZeRO-1 shard (model/optimizer_state.cuh)
    OptimizerState optimizer;
    float* norm_partials = nullptr;   // (GLOBAL_NORM_BLOCKS + 1): slots, then the aggregate
    // learned p and ssmax only (else null): fp32, (L, NH)
    float* p_heads = nullptr;         // p (ssmax: s) of every (layer, head), from the bf16 theta (s), by forward()
    float* dp_heads = nullptr;        // dL/dp (dL/ds) of every (layer, head) of the current backward
    // RoPE table for up to rope_len positions
    float* freqs_cis = nullptr;       // (rope_len, hd/2, 2)
    int rope_len = 0;
    // activations for the current (B, T)
    int B = 0, T = 0;
    GPT2CudaActivations acts{};
    std::vector<void*> act_allocations;
    std::vector<int> inputs_host;     // (B,T) of the last forward: the encoder backward sorts them on the host
    bool have_targets = false;
    bool logits_intact = false;       // false once the classifier has replaced them by dlogits
    bool dlogits_ready = false;       // the forward's classifier wrote dlogits (backward_follows)
    // if set, backward() calls it with l once layer l's parameter gradients are complete on
    // `stream` (data parallelism starts reducing them while the backward goes on)
    std::function<void(int)> on_layer_backward;

    explicit GPT2Cuda(const GPT2Config& c) : GPT2ParamLayout(c), config(c) {
        std::string err = gpt2_cuda_config_error(c);
        if (!err.empty()) throw std::invalid_argument(err);
        num_allocated = num_parameters;
        cublaslt_setup();
        cudaCheck(cudaMalloc(&params_memory, num_parameters * sizeof(floatX)));
        cudaCheck(cudaMalloc(&grads_memory, num_parameters * sizeof(floatX)));
        optimizer.init(num_parameters);
        cudaCheck(cudaMalloc(&norm_partials, (GLOBAL_NORM_BLOCKS + 1) * sizeof(float)));
        cudaCheck(cudaMemset(params_memory, 0, num_parameters * sizeof(floatX)));
        cudaCheck(cudaMemset(grads_memory, 0, num_parameters * sizeof(floatX)));
        if (head_params(c) > 0) {
            cudaCheck(cudaMalloc(&p_heads, head_params(c) * sizeof(float)));
            cudaCheck(cudaMalloc(&dp_heads, head_params(c) * sizeof(float)));
        }
        ensure_rope(c.max_seq_len);
    }
    GPT2Cuda(const GPT2Cuda&) = delete;
    GPT2Cuda& operator=(const GPT2Cuda&) = delete;
    ~GPT2Cuda() {
        free_activations();
        cudaFree(params_memory);
        cudaFree(grads_memory);
        cudaFree(norm_partials);
        cudaFree(p_heads);
        cudaFree(dp_heads);
        cudaFree(freqs_cis);
    }

    // the per-(layer, head) parameters the attention takes as p_head: learned p's theta or ssmax's s,
    // L NH of them (0: the config's p for every head)
    static size_t head_params(const GPT2Config& c) {
        GPT2ParamLayout layout(c);
        return layout.param_sizes[P_PTHETA] + layout.param_sizes[P_SSMAX_S];
    }
    bool ssmax() const { return attn_head_param(config.attn) == ATTN_HEAD_S; }

    floatX* param(int i) { return params_memory + param_offsets[i]; }
    floatX* grad(int i) { return grads_memory + param_offsets[i]; }

    // layer l's parameters (base = params_memory) or gradients (base = grads_memory)
    GPT2LayerParams layer_tensors(floatX* base, int l) const {
        GPT2LayerParams t;
#define GPT2_LAYER_PARAM_SLICE(e, name, torch_name, per_layer, shape, decays, init) \
    GPT2_IF_##per_layer(t.l_##name = param_sizes[e] > 0 ? base + param_offset(e, l) : nullptr;)
        GPT2_PARAM_TENSORS(GPT2_LAYER_PARAM_SLICE)
#undef GPT2_LAYER_PARAM_SLICE
        return t;
    }
    GPT2LayerParams layer_params(int l) const { return layer_tensors(params_memory, l); }
    GPT2LayerParams layer_grads(int l) const { return layer_tensors(grads_memory, l); }

    // layer l's activations of the current (B, T)
    GPT2LayerActs layer_acts(int l) const {
        const GPT2CudaActivations& a = acts;
        size_t BTC = (size_t)B * T * config.channels;
        GPT2LayerActs t;
        t.l_residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        // layer l's slice: l times one layer's count, the per-layer tensor's count over L
        ActivationTensors<size_t> n = gpt2_activation_sizes(config, B, T);
        size_t L = config.num_layers;
#define GPT2_LAYER_ACT_SLICE(name, per_layer, shape, cuda_type, on_cuda) \
    GPT2_IF_##per_layer(GPT2_IF_##on_cuda(t.l_##name = a.name + l * (n.name / L);))
        GPT2_ACTIVATIONS(GPT2_LAYER_ACT_SLICE)
#undef GPT2_LAYER_ACT_SLICE
        return t;
    }

    // layer l's learned p (ssmax: s) and dL/dp (dL/ds) per head, (NH) each; null without learn_p or
    // ssmax (the config's p)
    const float* layer_p(int l) const { return p_heads ? p_heads + (size_t)l * config.num_heads : nullptr; }
    float* layer_dp(int l) { return dp_heads ? dp_heads + (size_t)l * config.num_heads : nullptr; }

    // GPT-2 initialisation with the CPU back end's values (gpt2_init_params, model/gpt2_config.h)
    void init(uint64_t seed) {
        std::vector<float> host(num_parameters);
        gpt2_init_params(host.data(), config, seed);
        set_params(host);
    }

    // ------------------------------------------------------------------------
    // parameters and optimizer state on the host (fp32, layout of model/gpt2_config.h)

    // The fp32 weights; the optimizer state must be whole (under ZeRO-1: Distributed::gather_params).
    void get_params(std::vector<float>& out) {
        if (optimizer.size() != num_parameters) {
            throw std::logic_error("get_params: this model holds the master weights of [" + std::to_string(optimizer.begin) +
                                   ", " + std::to_string(optimizer.end) + ") only (ZeRO-1): gather them across the ranks");
        }
        optimizer.get_master(out);
    }

    // master weights = in (the optimizer's range of it); the bf16 weights = in rounded to nearest
    void set_params(const std::vector<float>& in) {
        check_size("set_params", "params", in.size());
        optimizer.set_master(in);
        std::vector<floatX> rounded(num_parameters);
        for (size_t i = 0; i < num_parameters; i++) rounded[i] = __float2bfloat16(in[i]);
        cudaCheck(cudaMemcpy(params_memory, rounded.data(), num_parameters * sizeof(floatX), cudaMemcpyHostToDevice));
    }

    // Resume: the master weights in, and the bf16 weights exactly as the update of step
    // last_update_step left them, so that a resumed run continues bit for bit.
    void set_params(const std::vector<float>& in, int last_update_step) {
        set_params(in);
        round_params(last_update_step);
    }

    // The bf16 weights of the optimizer's range from the master weights, with the stochastic
    // rounding of the update of that step (the same seeds and cuts). step < 1: no update yet, they
    // stay rounded to nearest.
    void round_params(int step) {
        if (step < 1) return;
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            size_t first = std::max(param_offsets[i], optimizer.begin);
            size_t last = std::min(param_offsets[i] + param_sizes[i], optimizer.end);
            if (first >= last) continue;
            params_from_master(params_memory + first, optimizer.master + (first - optimizer.begin), last - first,
                               hash_index_seed((unsigned int)step, (unsigned int)i), stream);
        }
        cudaCheck(cudaDeviceSynchronize());
    }

    // AdamW moments of the optimizer's range; zeros before the first update
    void get_optimizer(std::vector<float>& m, std::vector<float>& v) { optimizer.get_moments(m, v); }
    void set_optimizer(const std::vector<float>& m, const std::vector<float>& v) { optimizer.set_moments(m, v); }

    // ------------------------------------------------------------------------
    // forward, backward, update

    // Forward pass over inputs (B,T) on the host. With targets (B,T) it returns the mean loss;
    // without, -1. Token ids must be in [0, vocab_size).
    // backward_follows (with targets): the classifier's one pass over the logits also writes the
    // dlogits the next backward() needs, in their place (logits_row is then unavailable); without
    // it, the forward computes the losses only and backward() makes the dlogits.
    float forward(const int* inputs, const int* targets, int B_, int T_, bool backward_follows = false) {
        const GPT2Config& c = config;
        int V = c.vocab_size, Vp = c.padded_vocab_size, L = c.num_layers, NH = c.num_heads, C = c.channels;
        int hd = C / NH;
        if (B_ <= 0 || T_ <= 0) throw std::invalid_argument("forward: B = " + std::to_string(B_) + ", T = " +
                                                             std::to_string(T_) + " must both be > 0");
        for (int i = 0; i < B_ * T_; i++) {
            if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
                throw std::out_of_range("token id out of range [0, " + std::to_string(V) + ") at position " +
                                        std::to_string(i));
            }
        }
        ensure_activations(B_, T_);
        ensure_rope(T);
        GPT2CudaActivations& a = acts;
        int BT = B * T;
        inputs_host.assign(inputs, inputs + BT);
        have_targets = targets != nullptr;
        cudaCheck(cudaMemcpy(a.inputs, inputs, BT * sizeof(int), cudaMemcpyHostToDevice));
        if (have_targets) cudaCheck(cudaMemcpy(a.targets, targets, BT * sizeof(int), cudaMemcpyHostToDevice));

        if (c.learn_p) learned_p_forward(p_heads, param(P_PTHETA), (int)param_sizes[P_PTHETA], stream);
        if (ssmax()) ssmax_s_forward(p_heads, param(P_SSMAX_S), (int)param_sizes[P_SSMAX_S], stream);
        encoder_forward(a.encoded, a.inputs, param(P_WTE), B, T, C, stream);  // encoded (B,T,C)
        GPT2LayerParams w0 = layer_params(0);
        GPT2LayerActs a0 = layer_acts(0);
        layernorm_forward(a0.l_ln1, a0.l_ln1_mean, a0.l_ln1_rstd, a.encoded, w0.l_ln1w, w0.l_ln1b, BT, C, stream);
        for (int l = 0; l < L; l++) {
            GPT2LayerParams w = layer_params(l);
            GPT2LayerActs la = layer_acts(l);
            // attention: ln1 (computed by the previous layer's fused residual + layernorm) -> residual2
            matmul_forward(la.l_qkvr, la.l_ln1, w.l_qkvw, BT, C, 3 * C, stream, {.bias = w.l_qkvb});
            rope_forward(la.l_qkvr, la.l_qkvr, freqs_cis, B, T, NH, hd, stream);
            attention_forward_cuda(la.l_atty, la.l_attstats, la.l_qkvr, a.attn_scratch, B, T, NH, hd, c.attn, c.p,
                                   stream, layer_p(l), c.attn_len);
            matmul_forward(a.proj, la.l_atty, w.l_attprojw, BT, C, C, stream, {.bias = w.l_attprojb});  // attproj
            fused_residual_layernorm_forward(la.l_residual2, la.l_ln2, la.l_ln2_mean, la.l_ln2_rstd, la.l_residual,
                                             a.proj, w.l_ln2w, w.l_ln2b, BT, C, stream);
            // MLP: fc with GELU fused into its epilogue, then fcproj, then residual3 and the next layernorm
            matmul_forward(la.l_fch_gelu, la.l_ln2, w.l_fcw, BT, C, 4 * C, stream,
                           {.bias = w.l_fcb, .pre_gelu = la.l_fch});
            matmul_forward(a.proj, la.l_fch_gelu, w.l_fcprojw, BT, 4 * C, C, stream, {.bias = w.l_fcprojb});  // fcproj
            if (l + 1 < L) {  // the next layer's ln1
                GPT2LayerParams wn = layer_params(l + 1);
                GPT2LayerActs next = layer_acts(l + 1);
                fused_residual_layernorm_forward(la.l_residual3, next.l_ln1, next.l_ln1_mean, next.l_ln1_rstd,
                                                 la.l_residual2, a.proj, wn.l_ln1w, wn.l_ln1b, BT, C, stream);
            } else {
                fused_residual_layernorm_forward(la.l_residual3, a.lnf, a.lnf_mean, a.lnf_rstd, la.l_residual2,
                                                 a.proj, param(P_LNFW), param(P_LNFB), BT, C, stream);
            }
        }
        // tied lm head: logits (B,T,Vp) = lnf @ wte^T
        matmul_forward(a.logits, a.lnf, param(P_WTE), BT, C, Vp, stream);
        logits_intact = true;
        dlogits_ready = false;
        if (!have_targets) {
            cudaCheck(cudaDeviceSynchronize());
            return -1.0f;
        }
        // dlogits = (softmax - onehot) / BT: the backward's loss_scale enters as the lm head's alpha
        fused_classifier(a.logits, a.losses, a.targets, 1.0f / (float)BT, BT, V, Vp, backward_follows, stream);
        logits_intact = !backward_follows;
        dlogits_ready = backward_follows;
        std::vector<float> losses_host(BT);
        cudaCheck(cudaMemcpy(losses_host.data(), a.losses, BT * sizeof(float), cudaMemcpyDeviceToHost));
        double sum = 0.0;
        for (float x : losses_host) sum += x;
        return (float)(sum / BT);
    }

    // out (Vp) = logits at (b, t) of the last forward (before its backward, which overwrites them)
    void logits_row(int b, int t, float* out) {
        if (!logits_intact) throw std::logic_error("logits_row: the logits were replaced by dlogits (a backward, or "
                                                   "forward(..., backward_follows = true)): run forward again");
        if (b < 0 || b >= B || t < 0 || t >= T) {
            throw std::out_of_range("logits_row: (b, t) = (" + std::to_string(b) + ", " + std::to_string(t) +
                                    ") outside the last forward's (B, T) = (" + std::to_string(B) + ", " +
                                    std::to_string(T) + ")");
        }
        int Vp = config.padded_vocab_size;
        std::vector<floatX> row(Vp);
        cudaCheck(cudaMemcpy(row.data(), acts.logits + ((size_t)b * T + t) * Vp, Vp * sizeof(floatX),
                             cudaMemcpyDeviceToHost));
        for (int i = 0; i < Vp; i++) out[i] = __bfloat162float(row[i]);
    }

    // out (B*T) = per-position losses of the last forward (which must have had targets)
    void losses(float* out) {
        if (!have_targets) throw std::logic_error("losses: the last forward had no targets");
        cudaCheck(cudaMemcpy(out, acts.losses, (size_t)B * T * sizeof(float), cudaMemcpyDeviceToHost));
    }

    void zero_grad() { cudaCheck(cudaMemset(grads_memory, 0, num_parameters * sizeof(floatX))); }

    // Backward of loss_scale * (mean loss of the last forward, which must have had targets).
    // Accumulates into the gradients (zero_grad() first, or not, to accumulate micro-steps).
    // Which call writes which gradient. dresidual, dbtc (B,T,C) and dbt4c (B,T,4C) are the buffers
    // all layers share; the parameter gradients are accumulated (+=); a bias gradient comes out of
    // the pass that writes the tensor it sums, not out of a call of its own layer:
    //   call                        activation gradient              parameter gradients (+=)
    //   fused_classifier            dlogits, in place of the logits  -
    //   matmul_backward lm head     dbtc = dlnf                      dwte
    //   layernorm_backward lnf      dresidual = d residual3[L-1]     dlnfw, dlnfb; dfcprojb[L-1] (dresidual's
    //                                                                column sums)
    //   layer l = L-1 .. 0:
    //   matmul_backward fcproj      dbt4c = dfch (through GELU')     dfcprojw; dfcb (dfch's column sums)
    //   matmul_backward fc          dbtc = dln2                      dfcw
    //   layernorm_backward ln2      dresidual += : d residual2       dln2w, dln2b; dattprojb (dresidual's sums)
    //   matmul_backward attproj     dbtc = datty                     dattprojw
    //   attention_backward_cuda     dbt4c = dqkvr                    learned p, ssmax: dp_heads[l] (dL/dp, dL/ds; fp32)
    //   learned_p_backward          -                                dptheta[l]
    //   ssmax_s_backward            -                                dssmax_s[l]
    //   rope_backward_bias          dbt4c = dqkv, in place           dqkvb (dqkv's column sums)
    //   matmul_backward qkv         dbtc = dln1                      dqkvw
    //   layernorm_backward ln1      dresidual += : d (layer input)   dln1w, dln1b; l > 0: dfcprojb[l-1]
    //                                                                (dresidual's column sums)
    //   then on_layer_backward(l): layer l's gradients are complete
    //   encoder_backward            -                                dwte (the rows of the input tokens)
    void backward(float loss_scale = 1.0f) {
        if (!have_targets) throw std::logic_error("backward: the last forward had no targets");
        if (!logits_intact && !dlogits_ready)
            throw std::logic_error("backward: called twice after one forward (run forward again)");
        const GPT2Config& c = config;
        int V = c.vocab_size, Vp = c.padded_vocab_size, L = c.num_layers, NH = c.num_heads, C = c.channels;
        int hd = C / NH;
        int BT = B * T;
        GPT2CudaActivations& a = acts;
        // dlogits (B,T,Vp) = (softmax - onehot) / BT in place of the logits, unless the forward wrote
        // them; losses written again (the same values)
        if (!dlogits_ready) fused_classifier(a.logits, a.losses, a.targets, 1.0f / (float)BT, BT, V, Vp, true, stream);
        logits_intact = false;
        dlogits_ready = false;
        // dbtc = dlnf (B,T,C), dwte (Vp,C) += dlogits^T @ lnf; the backward's loss_scale as alpha
        matmul_backward(a.dbtc, grad(P_WTE), a.scratch, a.logits, a.lnf, param(P_WTE), BT, C, Vp, stream,
                        {.alpha = loss_scale});
        // the layernorm backward accumulates into dresidual: start the residual stream's gradient at 0
        cudaCheck(cudaMemsetAsync(a.dresidual, 0, (size_t)BT * C * sizeof(floatX), stream));
        if (dp_heads) cudaCheck(cudaMemsetAsync(dp_heads, 0, head_params(c) * sizeof(float), stream));
        // the layernorm backwards also sum the columns of the dresidual they write: the bias gradient of
        // the projection (fcproj, attproj) whose output gradient it is, so those never re-read it (fc's
        // comes out of fcproj's dinp GEMM, qkv's out of the RoPE backward)
        layernorm_backward(a.dresidual, grad(P_LNFW), grad(P_LNFB), a.scratch, a.dbtc, layer_acts(L - 1).l_residual3,
                           param(P_LNFW), a.lnf_mean, a.lnf_rstd, BT, C, stream, layer_grads(L - 1).l_fcprojb);
        for (int l = L - 1; l >= 0; l--) {
            GPT2LayerParams w = layer_params(l);
            GPT2LayerParams g = layer_grads(l);
            GPT2LayerActs la = layer_acts(l);
            // MLP: dresidual holds d residual3, which is also d fcproj
            // dbt4c = d fch (through gelu'), its column sums d fcb
            matmul_backward(a.dbt4c, g.l_fcprojw, a.scratch, a.dresidual, la.l_fch_gelu, w.l_fcprojw, BT, 4 * C, C,
                            stream, {.pre_gelu = la.l_fch, .dinp_colsum = g.l_fcb});
            matmul_backward(a.dbtc, g.l_fcw, a.scratch, a.dbt4c, la.l_ln2, w.l_fcw, BT, C, 4 * C,
                            stream);  // dbtc = d ln2
            layernorm_backward(a.dresidual, g.l_ln2w, g.l_ln2b, a.scratch, a.dbtc, la.l_residual2, w.l_ln2w,
                               la.l_ln2_mean, la.l_ln2_rstd, BT, C, stream, g.l_attprojb);  // dresidual = d residual2
            // attention
            matmul_backward(a.dbtc, g.l_attprojw, a.scratch, a.dresidual, la.l_atty, w.l_attprojw, BT, C, C,
                            stream);  // dbtc = d atty
            attention_backward_cuda(a.dbt4c, a.dbtc, la.l_qkvr, la.l_atty, la.l_attstats,
                                    a.attn_scratch, B, T, NH, hd, c.attn, c.p, stream, layer_p(l),
                                    layer_dp(l), c.attn_len);  // dbt4c = d qkvr; learned p: dp_heads of layer l
            if (c.learn_p) {  // dtheta += dp sigmoid(theta), before the layer's gradients count as complete
                learned_p_backward(g.l_ptheta, layer_dp(l), w.l_ptheta, NH, stream);
            }
            if (ssmax()) ssmax_s_backward(g.l_ssmax_s, layer_dp(l), NH, stream);  // ds += dL/ds, likewise
            // dbt4c = d qkv, and the qkv bias gradient from the same pass
            rope_backward_bias(a.dbt4c, g.l_qkvb, a.scratch, freqs_cis, B, T, NH, hd, stream);
            matmul_backward(a.dbtc, g.l_qkvw, a.scratch, a.dbt4c, la.l_ln1, w.l_qkvw, BT, C, 3 * C,
                            stream);  // dbtc = d ln1
            layernorm_backward(a.dresidual, g.l_ln1w, g.l_ln1b, a.scratch, a.dbtc, la.l_residual, w.l_ln1w,
                               la.l_ln1_mean, la.l_ln1_rstd, BT, C, stream,
                               l > 0 ? layer_grads(l - 1).l_fcprojb : nullptr);  // dresidual = d (layer input)
            if (on_layer_backward) on_layer_backward(l);
        }
        encoder_backward(grad(P_WTE), a.encoder_workspace, a.dresidual, inputs_host.data(), B, T, C, stream);
        cudaCheck(cudaStreamSynchronize(stream));  // not the device: reductions may still run on another stream
    }

    // sqrt of the sum of squares of every parameter gradient (fp32 sums of the bf16 gradients)
    double grad_norm() {
        global_norm_squared(norm_partials, grads_memory, num_parameters, true, stream);
        global_norm_aggregate(norm_partials + GLOBAL_NORM_BLOCKS, norm_partials, stream);
        float squared = 0.0f;
        cudaCheck(cudaMemcpy(&squared, norm_partials + GLOBAL_NORM_BLOCKS, sizeof(float), cudaMemcpyDeviceToHost));
        return std::sqrt((double)squared);
    }

    // AdamW step s.step (1-based) on the gradients times s.grad_scale (clipping) of the parameters
    // the optimizer state covers (all, or a ZeRO-1 shard); weight decay on the matrices only
    // (param_tensor_decays); the hyperparameters read as float (layers/adamw.cuh). The bf16 weights
    // are the new fp32 master weights stochastically rounded, seeded by (step, tensor): every run
    // and every rank rounds alike.
    void update(const AdamWStep& s) { update_range(s, optimizer.begin, optimizer.end); }

    // The AdamW step of update() on the parameters [begin, end) only; the others, their master
    // weights and moments are not touched. A tensor cut by the range is updated on its part; the
    // stochastic rounding of that part is seeded alike but indexed from the cut, so its bf16
    // weights may differ from a whole update's by one rounding step (the fp32 master weights and
    // moments are the same).
    void update_range(const AdamWStep& s, size_t begin, size_t end) {
        int step = s.step;
        if (step < 1) throw std::invalid_argument("update: step = " + std::to_string(step) + " must be >= 1");
        if (!optimizer.covers(begin, end)) {
            throw std::out_of_range("update_range: [" + std::to_string(begin) + ", " + std::to_string(end) +
                                    ") is not inside the parameters [" + std::to_string(optimizer.begin) + ", " +
                                    std::to_string(optimizer.end) + ") whose optimizer state this model holds");
        }
        optimizer.ensure_moments();
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            size_t first = std::max(param_offsets[i], begin);
            size_t last = std::min(param_offsets[i] + param_sizes[i], end);
            if (first >= last) continue;
            unsigned int seed = hash_index_seed((unsigned int)step, (unsigned int)i);
            size_t local = first - optimizer.begin;  // index into the optimizer state
            AdamWStep tensor = s;
            tensor.weight_decay = param_tensor_decays(i) ? s.weight_decay : 0.0;
            adamw_update(params_memory + first, optimizer.master + local, grads_memory + first, optimizer.m + local,
                         optimizer.v + local, last - first, tensor, seed, stream);
        }
        cudaCheck(cudaDeviceSynchronize());
    }

    // Pads the parameter and gradient buffers to shards x shard_size elements (param_shard_size),
    // keeping their values; the padding is 0 and no kernel writes it. NCCL's reduce-scatter and
    // all-gather need equal shards.
    void reserve_shards(int shards) {
        if (shards < 1) throw std::invalid_argument("reserve_shards: shards = " + std::to_string(shards) + " must be >= 1");
        size_t per = param_shard_size(num_parameters, shards);
        size_t total = per * shards;
        if (total > num_allocated) {
            grow(params_memory, total);
            grow(grads_memory, total);
            num_allocated = total;
        }
        shard_size = per;
    }

    // ZeRO-1 over `shards` ranks, this one being `rank`: the parameter and gradient buffers padded
    // to equal shards (reserve_shards), and the optimizer state cut to this rank's shard. The
    // optimizer state must be whole before.
    void shard_optimizer(int shards, int rank) {
        reserve_shards(shards);
        size_t first = std::min(num_parameters, (size_t)rank * shard_size);
        size_t last = std::min(num_parameters, first + shard_size);
        optimizer.shard(first, last, shard_size);
    }

    // buffer of num_allocated elements -> n >= num_allocated, the same values, 0 after them
    template <class T> void grow(T*& buffer, size_t n) {
        T* bigger = nullptr;
        cudaCheck(cudaMalloc(&bigger, n * sizeof(T)));
        cudaCheck(cudaMemset(bigger, 0, n * sizeof(T)));
        cudaCheck(cudaMemcpy(bigger, buffer, num_allocated * sizeof(T), cudaMemcpyDeviceToDevice));
        cudaCheck(cudaFree(buffer));
        buffer = bigger;
    }

    // ------------------------------------------------------------------------
    // memory

    void check_size(const char* who, const char* what, size_t n) const {
        if (n != num_parameters) {
            throw std::invalid_argument(std::string(who) + ": " + what + " has " + std::to_string(n) +
                                        " values, the model has " + std::to_string(num_parameters) +
                                        " parameters (a checkpoint of another config?)");
        }
    }

    // RoPE's cos/sin table covers at least len positions
    void ensure_rope(int len) {
        if (len <= rope_len) return;
        int hd = config.channels / config.num_heads;
        std::vector<float> table(rope_table_floats(len, hd));
        rope_precompute_freqs(table.data(), len, hd, (double)config.rope_base);
        cudaFree(freqs_cis);
        cudaCheck(cudaMalloc(&freqs_cis, table.size() * sizeof(float)));
        cudaCheck(cudaMemcpy(freqs_cis, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice));
        rope_len = len;
    }

    // Device bytes of the activations for (B_, T_): what ensure_activations(B_, T_) allocates,
    // counted instead (e.g. whether an evaluation length fits on a GPU).
    size_t activation_bytes(int B_, int T_) const { return activation_bytes(config, B_, T_); }
    static size_t activation_bytes(const GPT2Config& c, int B_, int T_) {
        ActivationCounter count;
        GPT2CudaActivations unused{};
        layout_activations(c, unused, B_, T_, count);
        return count.bytes;
    }

    // Device bytes the model holds besides its activations, in a training run at sequence length
    // T: bf16 weights and gradients, fp32 master weights and AdamW moments (all of them: ZeRO-1
    // shards them later), the global norm's partial sums, learned p's (ssmax's) per-head p and dL/dp, the
    // RoPE table, and cuBLASLt's workspace (cublaslt_setup: one per GPU and process).
    static size_t state_bytes(const GPT2Config& c, int T) {
        GPT2ParamLayout layout(c);
        size_t bytes = layout.num_parameters * (2 * sizeof(floatX) + 3 * sizeof(float));
        bytes += (GLOBAL_NORM_BLOCKS + 1) * sizeof(float);
        bytes += 2 * head_params(c) * sizeof(float);  // learned p, ssmax
        bytes += rope_table_floats(std::max(c.max_seq_len, T), c.channels / c.num_heads) * sizeof(float);
        return bytes + cublaslt_workspace_size;
    }

    // alloc_act's two modes, for layout_activations
    struct ActivationAllocator {
        std::vector<void*>* allocations;
        template <class P> void operator()(P*& ptr, size_t count, size_t elem_bytes = sizeof(P)) {
            void* p = nullptr;
            cudaCheck(cudaMalloc(&p, count * elem_bytes));
            allocations->push_back(p);
            ptr = (P*)p;
        }
    };
    struct ActivationCounter {
        size_t bytes = 0;
        template <class P> void operator()(P*& ptr, size_t count, size_t elem_bytes = sizeof(P)) {
            bytes += count * elem_bytes;
            ptr = nullptr;
        }
    };

    void free_activations() {
        for (void* p : act_allocations) cudaFree(p);
        act_allocations.clear();
        acts = GPT2CudaActivations{};
        B = T = 0;
    }

    void ensure_activations(int B_, int T_) {
        if (B_ == B && T_ == T) return;
        free_activations();
        ActivationAllocator alloc{&act_allocations};
        layout_activations(config, acts, B_, T_, alloc);
        B = B_;
        T = T_;
    }

    // every activation buffer of config c for (B_, T_), each through alloc(pointer, count[, bytes
    // of one element]): allocated (ActivationAllocator) or counted (ActivationCounter)
    template <class Alloc>
    static void layout_activations(const GPT2Config& c, GPT2CudaActivations& a, int B_, int T_, Alloc& alloc_act) {
        // the forward's tensors, sized as on every back end (model/gpt2_sizes.h); the CPU's pre-RoPE
        // qkv, attproj and fcproj are not kept here (proj below serves the current layer)
        ActivationTensors<size_t> s = gpt2_activation_sizes(c, B_, T_);
#define GPT2_CUDA_ACT_ALLOC(name, per_layer, shape, cuda_type, on_cuda) GPT2_IF_##on_cuda(alloc_act(a.name, s.name);)
        GPT2_ACTIVATIONS(GPT2_CUDA_ACT_ALLOC)
#undef GPT2_CUDA_ACT_ALLOC
        // the backward's buffers, shared by all layers, and the kernels' workspaces
        size_t C = c.channels, NH = c.num_heads, BT = (size_t)B_ * T_;
        alloc_act(a.proj, BT * C);
        alloc_act(a.dresidual, BT * C);
        alloc_act(a.dbtc, BT * C);
        alloc_act(a.dbt4c, BT * 4 * C);
        size_t scratch_floats = std::max(matmul_backward_scratch_floats(4 * (int)C), layernorm_backward_scratch_floats((int)C));
        alloc_act(a.scratch, scratch_floats);
        alloc_act(a.attn_scratch, attention_scratch_bytes(B_, T_, (int)NH, (int)(C / NH)), 1);
        alloc_act(a.encoder_workspace, encoder_backward_workspace_ints(B_, T_));
        alloc_act(a.inputs, BT);
        alloc_act(a.targets, BT);
    }
};

// What a training run of config c at micro-batch B x T allocates on the GPU, counted from the lists
// the model allocates from (the trainer refuses a run that does not fit): every buffer but the
// CUDA context's and the libraries' internal ones.
inline MemoryEstimate gpt2_cuda_training_memory(const GPT2Config& c, int B, int T) {
    MemoryEstimate m;
    m.state_bytes = (double)GPT2Cuda::state_bytes(c, T);
    m.activation_bytes = (double)GPT2Cuda::activation_bytes(c, B, T);
    m.state_what = "bf16 weights and gradients, fp32 master weights and AdamW moments, cuBLASLt workspace";
    m.activation_what = "bf16 activations and gradient buffers of one micro-batch";
    return m;
}

// The fp32 values of parameter tensor i without copying the whole model: from the fp32 master
// weights this model's optimizer state holds (all of them on one GPU; under ZeRO-1 the shard that
// has them), else from the bf16 weights the kernels read.
inline std::vector<float> model_tensor_values(GPT2Cuda& model, int i) {
    size_t off = model.param_offsets[i], n = model.param_sizes[i];
    std::vector<floatX> bits(n);
    cudaCheck(cudaMemcpy(bits.data(), model.param(i), n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> values(n);
    for (size_t k = 0; k < n; k++) values[k] = __bfloat162float(bits[k]);
    size_t first = std::max(off, model.optimizer.begin), last = std::min(off + n, model.optimizer.end);
    if (first < last) {
        cudaCheck(cudaMemcpy(values.data() + (first - off), model.optimizer.master + (first - model.optimizer.begin),
                             (last - first) * sizeof(float), cudaMemcpyDeviceToHost));
    }
    return values;
}

// The learned p of every (layer, head), (L, NH) row-major (empty unless the model learns p), as
// model_learned_p (model/gpt2_config.h) gives it for the CPU back end.
inline std::vector<double> model_learned_p(GPT2Cuda& model) {
    if (!model.config.learn_p) return {};
    std::vector<double> p;
    for (float t : model_tensor_values(model, P_PTHETA)) p.push_back(learned_p((double)t));
    return p;
}

// ssmax's s of every (layer, head) (empty for the other variants), as model_ssmax_s gives it for
// the CPU back end.
inline std::vector<double> model_ssmax_s(GPT2Cuda& model) {
    if (attn_head_param(model.config.attn) != ATTN_HEAD_S) return {};
    std::vector<float> s = model_tensor_values(model, P_SSMAX_S);
    return std::vector<double>(s.begin(), s.end());
}
