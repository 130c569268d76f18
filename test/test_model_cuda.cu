// The whole model on the CUDA back end (model/gpt2_cuda.cuh) against the CPU back end
// (model/gpt2_cpu.h), rung 4 of the correctness ladder: the same tiny model, seed and data,
// then the logits, losses and every parameter gradient of the first step, the gradient norm,
// the parameters after one AdamW step, the loss curve of 10 steps, and gradient accumulation;
// with learned p also the gradient of theta and the learned p after every step; ssmax's s and
// log-length scaling (attn_len) of softmax.
// Runs emulated (g++ + simt/) and, unchanged, on a GPU (nvcc).
//
// Tolerances. bf16 rounds to nearest with a relative error up to 2^-8 = 0.4%. The CUDA back end
// keeps weights, activations and gradients in bf16, so every tensor on the path from the input to
// the loss and back carries about a dozen independent 2^-8 roundings per layer and direction.
// Two limits, and a check passes within the larger:
//   - a floor for a well-conditioned model (softmax, LSSA): a whole gradient tensor then differs
//     from the fp32 CPU by ~1% relative in L2, hence 3e-2; the gradient norm averages over all
//     tensors, 1e-2; a logit by ~1% of the row's largest, 2e-2; a loss, a mean of -log softmax,
//     by far less than 1% of itself (~ln V), 1e-2 at every step (the brief's figure).
//   - the model's own sensitivity: a third run, the fp32 CPU model started from the weights
//     rounded to bf16 (the CUDA back end's first rounding, and nothing else), measures how much
//     this model and trajectory amplify one bf16-sized perturbation. LSSAR with p = 15 amplifies
//     a lot: its weights (relu(x)/m)^15 turn a relative change d of x into 15 d, and near-tied
//     scores decide which keys get weight at all, so rounding the weights alone moves its
//     layer-0 gradients by ~30% at initialisation. The CUDA back end applies that rounding plus
//     the activation and gradient roundings, each as large, so it may differ by a few times as
//     much: SENSITIVITY_FACTOR = 4 times the perturbed run's difference.
// Any indexing or wiring error is O(1) of the tensor it touches, above both limits.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/gpt2_cpu.h"
#include "model/gpt2_cuda.cuh"
#include "test/adamw_bound.h"
#include "test/tiny_gpt2_cuda.h"

constexpr double LOSS_RTOL = 1e-2;         // per-step loss, relative
constexpr double GRAD_NORM_RTOL = 1e-2;    // global gradient norm, relative
constexpr double GRAD_TENSOR_RTOL = 3e-2;  // ||g_cuda - g_cpu|| / ||g_cpu|| per tensor
constexpr double LOGIT_ATOL = 2e-2;        // |logit difference| / max |logit| of the row
constexpr double SENSITIVITY_FACTOR = 4;   // times the bf16-perturbed CPU run's difference
// A parameter after update 1 is p - lr (g / (|g| + eps) + wd p), a step of ~lr whatever |g|:
// bf16 may flip the sign of an element whose gradient is at the level of its rounding noise (a
// 2 lr jump; ln biases and softmax's key biases have many), which says nothing of the model. So
// the update is compared on the elements whose reference gradient stands clear of the noise:
// |g| >= CLEAR_GRAD_FACTOR x the tensor's rms gradient difference, and >= 1e3 eps, so that the
// eps term is below 1e-3 of the step. There the steps must agree within 1e-2 lr (plus the fp32
// rounding of the weight, 1e-6 |p|).
constexpr double CLEAR_GRAD_FACTOR = 10;
constexpr double CLEAR_STEP_RTOL = 1e-2;
// With the same gradients, the AdamW step of both back ends is the same fp32 formula; the GPU's
// fast-math division and square root are within 2 ulp, so 1e-5 of the step and 1e-6 of the weight.
constexpr double UPDATE_RTOL = 1e-5;

// AdamW settings of the comparison (GPT-2-like): 10 steps lower the loss by ~0.4 to 0.65.
constexpr float LR = 1e-3f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f, WEIGHT_DECAY = 0.1f;
// the tests' AdamW step `step` with these settings
static AdamWStep adamw_step(int step, double grad_scale = 1.0) {
    return {.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .weight_decay = WEIGHT_DECAY,
            .grad_scale = grad_scale, .step = step};
}

static GPT2Config tiny_config(AttnKind kind, float p, int learn_p = 0) {
    GPT2Config c = tiny_cuda_config(kind, p, 24);
    c.learn_p = learn_p;
    return c;
}

static float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

static std::vector<float> download_grads(const GPT2Cuda& model) {
    return download_bf16(model.grads_memory, model.num_parameters);
}

static double norm2(const float* x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return std::sqrt(s);
}
static double diff_norm2(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return std::sqrt(s);
}

// The reference, the reference started from bf16-rounded weights, and the CUDA back end.
struct ThreeModels {
    GPT2<float> cpu, perturbed;
    GPT2Cuda gpu;
    ThreeModels(const GPT2Config& c, uint64_t seed) : cpu(c), perturbed(c), gpu(c) {
        cpu.init(seed);
        perturbed.init(seed);
        for (float& x : perturbed.params) x = round_bf16(x);
        gpu.init(seed);
    }
    struct Losses { float cpu, perturbed, gpu; };
    // one batch through the three models
    Losses forward(const TokenBatch& b, int B, int T) {
        return {cpu.forward(b.inputs.data(), b.targets.data(), B, T),
                perturbed.forward(b.inputs.data(), b.targets.data(), B, T),
                gpu.forward(b.inputs.data(), b.targets.data(), B, T)};
    }
    // the three models' gradients of their last forward, zeroed first
    void backward() {
        cpu.zero_grad(), perturbed.zero_grad(), gpu.zero_grad();
        cpu.backward(1.0f), perturbed.backward(1.0f), gpu.backward(1.0f);
    }
};

// every gradient tensor of the CUDA model against the CPU model's
static void check_gradients(ThreeModels& m, const char* when) {
    std::vector<float> g = download_grads(m.gpu);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = m.cpu.param_offsets[i], n = m.cpu.param_sizes[i];
        if (n == 0) continue;  // a tensor this config has no elements of (ptheta unless p is learned)
        const float* ref = m.cpu.grads.data() + off;
        double ref_norm = norm2(ref, n);
        double rel = diff_norm2(g.data() + off, ref, n) / ref_norm;
        double sensitivity = diff_norm2(m.perturbed.grads.data() + off, ref, n) / ref_norm;
        INFO(std::string(when) << ": d" << std::string(param_tensor_name(i)) << " |ref| = " << ref_norm
                               << ", relative L2 error " << rel << ", of the bf16-perturbed reference "
                               << sensitivity);
        CHECK(ref_norm > 0);
        CHECK(rel < std::max(GRAD_TENSOR_RTOL, SENSITIVITY_FACTOR * sensitivity));
    }
    double norm_cpu = m.cpu.grad_norm(), norm_gpu = m.gpu.grad_norm(), norm_pert = m.perturbed.grad_norm();
    INFO(when << ": grad norm cpu " << norm_cpu << " cuda " << norm_gpu << " perturbed cpu " << norm_pert);
    CHECK(std::fabs(norm_gpu - norm_cpu) <
          std::max(GRAD_NORM_RTOL * norm_cpu, SENSITIVITY_FACTOR * std::fabs(norm_pert - norm_cpu)));
}

// the change of every parameter tensor (fp32 master weights) in the update from p0, on the
// elements with a clear gradient; returns the fraction of the parameters compared
static double check_update(ThreeModels& m, const std::vector<float>& p0, const std::vector<float>& g_cpu,
                           const std::vector<float>& g_gpu, const char* when) {
    std::vector<float> p;
    m.gpu.get_params(p);
    size_t compared_total = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = m.cpu.param_offsets[i], n = m.cpu.param_sizes[i];
        double noise = diff_norm2(g_gpu.data() + off, g_cpu.data() + off, n) / std::sqrt((double)n);
        double threshold = std::max(CLEAR_GRAD_FACTOR * noise, 1e3 * EPS);
        size_t compared = 0;
        double worst = 0;
        for (size_t k = off; k < off + n; k++) {
            if (std::fabs(g_cpu[k]) < threshold) continue;
            compared++;
            double diff = ((double)p[k] - p0[k]) - ((double)m.cpu.params[k] - p0[k]);
            worst = std::max(worst, std::fabs(diff) / (CLEAR_STEP_RTOL * LR + 1e-6 * std::fabs(p0[k])));
        }
        compared_total += compared;
        INFO(std::string(when) << ": " << std::string(param_tensor_name(i)) << ": " << compared << " of " << n
                               << " elements with |g| >= " << threshold << ", largest step difference / tolerance "
                               << worst);
        CHECK(worst <= 1.0);
    }
    return (double)compared_total / m.cpu.num_parameters;
}

// the logits of the whole batch and the per-position losses of the last forward
static void check_logits_and_losses(ThreeModels& m, int B, int T) {
    int Vp = m.gpu.config.padded_vocab_size;
    std::vector<float> row(Vp);
    double worst = 0, worst_pert = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            m.gpu.logits_row(b, t, row.data());
            const float* ref = m.cpu.acts.logits + ((size_t)b * T + t) * Vp;
            const float* pert = m.perturbed.acts.logits + ((size_t)b * T + t) * Vp;
            double scale = 0, err = 0, err_pert = 0;
            for (int j = 0; j < Vp; j++) {
                scale = std::max(scale, (double)std::fabs(ref[j]));
                err = std::max(err, (double)std::fabs(row[j] - ref[j]));
                err_pert = std::max(err_pert, (double)std::fabs(pert[j] - ref[j]));
            }
            worst = std::max(worst, err / scale);
            worst_pert = std::max(worst_pert, err_pert / scale);
        }
    }
    INFO("largest |logit error| / max |logit| of its row: " << worst << ", of the bf16-perturbed reference "
                                                             << worst_pert);
    CHECK(worst < std::max(LOGIT_ATOL, SENSITIVITY_FACTOR * worst_pert));
    std::vector<float> losses(B * T);
    m.gpu.losses(losses.data());
    double worst_loss = 0, worst_loss_pert = 0;
    for (int i = 0; i < B * T; i++) {
        double ref = m.cpu.acts.losses[i];
        worst_loss = std::max(worst_loss, std::fabs(losses[i] - ref) / ref);
        worst_loss_pert = std::max(worst_loss_pert, std::fabs(m.perturbed.acts.losses[i] - ref) / ref);
    }
    INFO("largest relative error of a position's loss: " << worst_loss << ", of the bf16-perturbed reference "
                                                          << worst_loss_pert);
    CHECK(worst_loss < std::max(LOSS_RTOL, SENSITIVITY_FACTOR * worst_loss_pert));
}

// 10 AdamW steps of both back ends from the same init on the same data; attn_len: the config's.
static void compare_training(AttnKind kind, float p, int attn_len = 0) {
    auto start = std::chrono::steady_clock::now();
    GPT2Config c = tiny_config(kind, p);
    c.attn_len = attn_len;
    const int B = 2, T = 24, STEPS = 10;
    ThreeModels m(c, 1337);
    std::vector<float> p0;
    m.gpu.get_params(p0);
    {   // the same initial weights, exactly
        REQUIRE(p0.size() == m.cpu.params.size());
        size_t mismatches = 0;
        for (size_t i = 0; i < p0.size(); i++) mismatches += p0[i] != m.cpu.params[i];
        CHECK(mismatches == 0);
    }
    // the loss difference may grow with the perturbed reference's largest so far
    double envelope = 0;
    float first_loss = 0, last_loss = 0;
    for (int step = 1; step <= STEPS; step++) {
        TokenBatch batch = make_token_batch(B, T, c.vocab_size, 100 + step);
        auto [loss_cpu, loss_pert, loss_gpu] = m.forward(batch, B, T);
        if (step == 1) check_logits_and_losses(m, B, T);
        m.backward();
        std::vector<float> g_gpu;
        if (step == 1) {
            check_gradients(m, "step 1");
            g_gpu = download_grads(m.gpu);
        }
        const AdamWStep adamw = adamw_step(step);
        m.cpu.update(adamw);
        m.perturbed.update(adamw);
        m.gpu.update(adamw);
        if (step == 1) {
            double fraction = check_update(m, p0, m.cpu.grads, g_gpu, "update 1");
            MESSAGE("update 1 compared on " << 100 * fraction << "% of the parameters");
            // thousands of elements at least (LSSAR p = 15 is ill-conditioned at initialisation: ~20%)
            CHECK(fraction > 0.1);
        }
        envelope = std::max(envelope, (double)std::fabs(loss_pert - loss_cpu));
        MESSAGE(std::string(attn_kind_name(kind)) << " p=" << p << " step " << step << ": loss cpu " << loss_cpu << " cuda "
                                     << loss_gpu << " (relative difference " << std::fabs(loss_gpu - loss_cpu) / loss_cpu
                                     << "), bf16-perturbed cpu " << loss_pert);
        CHECK(std::fabs(loss_gpu - loss_cpu) < std::max(LOSS_RTOL * loss_cpu, SENSITIVITY_FACTOR * envelope));
        if (step == 1) first_loss = loss_cpu;
        last_loss = loss_cpu;
    }
    // the comparison means something only if training moved the loss
    CHECK(last_loss < first_loss - 0.2f);
    if (attn_head_param(kind) == ATTN_HEAD_S) {  // ssmax's s trained on both back ends (from SSMAX_S0)
        std::vector<float> params;
        m.gpu.get_params(params);
        size_t off = m.cpu.param_offsets[P_SSMAX_S], n = m.cpu.param_sizes[P_SSMAX_S];
        REQUIRE(n == (size_t)c.num_layers * c.num_heads);
        double gpu_move = 0, cpu_move = 0;
        for (size_t k = off; k < off + n; k++) {
            gpu_move = std::max(gpu_move, std::fabs(params[k] - SSMAX_S0));
            cpu_move = std::max(cpu_move, std::fabs(m.cpu.params[k] - SSMAX_S0));
        }
        MESSAGE("ssmax: the largest move of s in " << STEPS << " steps: cpu " << cpu_move << " cuda " << gpu_move);
        // AdamW's first steps move a parameter by ~lr each whatever its gradient: 10 lr in all
        CHECK(cpu_move > 0.5 * STEPS * LR);
        CHECK(gpu_move > 0.5 * STEPS * LR);
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE(std::string(attn_kind_name(kind)) << ": " << STEPS << " steps of the three models in " << seconds << " s");
}

TEST_CASE("10 AdamW steps: CUDA back end vs CPU back end, softmax") { compare_training(ATTN_SOFTMAX, 0.0f); }
TEST_CASE("10 AdamW steps: CUDA back end vs CPU back end, lssar p=15") { compare_training(ATTN_LSSAR, 15.0f); }
TEST_CASE("10 AdamW steps: CUDA back end vs CPU back end, lssa") { compare_training(ATTN_LSSA, 0.0f); }
// ssmax: s (L, NH) is one more parameter tensor, so check_gradients compares its gradient (dL/ds
// through the attention's dp_head) and check_update its step with the others'
TEST_CASE("10 AdamW steps: CUDA back end vs CPU back end, ssmax") { compare_training(ATTN_SSMAX, 0.0f); }
// log-length scaling beyond L = 8 (rows 8 to 23 of T = 24 scaled by ln(n_t) / ln 8)
TEST_CASE("10 AdamW steps: CUDA back end vs CPU back end, softmax with log-length scaling beyond 8") {
    compare_training(ATTN_SOFTMAX, 0.0f, 8);
}

// The first step alone for LSSAR at p = 3, better conditioned than p = 15 (its weights amplify a
// relative change of x 3 times, not 15): logits, losses, every gradient tensor, the norm.
TEST_CASE("first step: CUDA back end vs CPU back end, lssar p=3") {
    GPT2Config c = tiny_config(ATTN_LSSAR, 3.0f);
    const int B = 2, T = 24;
    ThreeModels m(c, 1337);
    TokenBatch batch = make_token_batch(B, T, c.vocab_size, 101);
    m.forward(batch, B, T);
    check_logits_and_losses(m, B, T);
    m.backward();
    check_gradients(m, "lssar p=3, step 1");
}

// forward(..., backward_follows = true): the classifier's one pass writes the losses and the
// dlogits; the gradients against the CPU reference, and bit for bit those of the path where the
// backward makes the dlogits (the same kernel, the same dloss; loss_scale 1/2 through the lm
// head's alpha in both). The logits are then gone. Bit for bit: lnf's gradients (before any
// attention atomics) everywhere, every gradient with one emulator thread (a fixed atomics order).
TEST_CASE("forward with backward_follows: one classifier pass, the same losses and gradients") {
#if !defined(__CUDACC__)
    simt::set_block_threads(1);
#endif
    GPT2Config c = tiny_config(ATTN_SOFTMAX, 0.0f);
    const int B = 2, T = 24;
    ThreeModels m(c, 1337);
    TokenBatch batch = make_token_batch(B, T, c.vocab_size, 105);
    m.cpu.forward(batch.inputs.data(), batch.targets.data(), B, T);
    m.perturbed.forward(batch.inputs.data(), batch.targets.data(), B, T);
    float loss_fused = m.gpu.forward(batch.inputs.data(), batch.targets.data(), B, T, true);
    std::vector<float> losses_fused((size_t)B * T);
    m.gpu.losses(losses_fused.data());
    std::vector<float> row(c.padded_vocab_size);
    CHECK_THROWS_AS(m.gpu.logits_row(0, 0, row.data()), std::logic_error);
    for (auto* model : {&m.cpu, &m.perturbed}) {
        model->zero_grad();
        model->backward(0.5f);
    }
    m.gpu.zero_grad();
    m.gpu.backward(0.5f);
    check_gradients(m, "backward_follows, loss_scale 1/2");
    CHECK_THROWS_AS(m.gpu.backward(0.5f), std::logic_error);
    std::vector<float> g_fused = download_grads(m.gpu);

    GPT2Cuda two_pass(c);
    two_pass.init(1337);
    float loss_two_pass = two_pass.forward(batch.inputs.data(), batch.targets.data(), B, T);
    std::vector<float> losses_two_pass((size_t)B * T);
    two_pass.losses(losses_two_pass.data());
    two_pass.zero_grad();
    two_pass.backward(0.5f);
    std::vector<float> g_two_pass = download_grads(two_pass);
    CHECK(loss_fused == loss_two_pass);
    CHECK(losses_fused == losses_two_pass);
    for (int i : {P_LNFW, P_LNFB}) {
        size_t off = m.cpu.param_offsets[i], n = m.cpu.param_sizes[i];
        CHECK(memcmp(g_fused.data() + off, g_two_pass.data() + off, n * sizeof(float)) == 0);
    }
#if !defined(__CUDACC__)
    CHECK(memcmp(g_fused.data(), g_two_pass.data(), g_fused.size() * sizeof(float)) == 0);
    simt::set_block_threads(0);
#endif
}

// Two micro-batches of B with loss_scale 1/2 (CUDA) against one batch of 2B (CPU): the same
// gradient, gradient norm and update. LSSA: well-conditioned (the floors apply), so a gradient
// that missed a micro-batch (off by ~50%) stands out; LSSAR with learned p from 3: theta's
// gradient accumulates too.
static void check_accumulation(const GPT2Config& c) {
    const int B = 2, T = 16;
    ThreeModels m(c, 7);
    std::vector<float> p0;
    m.gpu.get_params(p0);
    TokenBatch full = make_token_batch(2 * B, T, c.vocab_size, 99);  // rows 0..B-1: micro-batch 1, B..2B-1: 2
    size_t half = (size_t)B * T;
    float loss_cpu = m.cpu.forward(full.inputs.data(), full.targets.data(), 2 * B, T);
    m.perturbed.forward(full.inputs.data(), full.targets.data(), 2 * B, T);
    m.cpu.zero_grad();
    m.cpu.backward(1.0f);
    m.perturbed.zero_grad();
    m.perturbed.backward(1.0f);
    m.gpu.zero_grad();
    float loss_gpu = 0;
    for (int micro = 0; micro < 2; micro++) {
        loss_gpu += 0.5f * m.gpu.forward(full.inputs.data() + micro * half, full.targets.data() + micro * half, B, T);
        m.gpu.backward(0.5f);
    }
    CHECK(std::fabs(loss_gpu - loss_cpu) < LOSS_RTOL * loss_cpu);
    check_gradients(m, "2 micro-steps");
    std::vector<float> g_gpu = download_grads(m.gpu);
    m.cpu.update(adamw_step(1));
    m.perturbed.update(adamw_step(1));
    m.gpu.update(adamw_step(1));
    double fraction = check_update(m, p0, m.cpu.grads, g_gpu, "the accumulated update");
    CHECK(fraction > 0.5);
    float next_cpu = m.cpu.forward(full.inputs.data(), full.targets.data(), 2 * B, T);
    float next_gpu = 0;
    for (int micro = 0; micro < 2; micro++) {
        next_gpu += 0.5f * m.gpu.forward(full.inputs.data() + micro * half, full.targets.data() + micro * half, B, T);
    }
    CHECK(std::fabs(next_gpu - next_cpu) < LOSS_RTOL * next_cpu);
}
TEST_CASE("gradient accumulation over 2 micro-steps") { check_accumulation(tiny_config(ATTN_LSSA, 0.0f)); }
TEST_CASE("gradient accumulation over 2 micro-steps, learned p") { check_accumulation(tiny_config(ATTN_LSSAR, 3.0f, 1)); }
TEST_CASE("gradient accumulation over 2 micro-steps, ssmax's s") { check_accumulation(tiny_config(ATTN_SSMAX, 0.0f)); }

// Learned p (-pl 1): theta (L, NH) is one more parameter tensor, so check_gradients compares its
// gradient with the others' (a wrong dL/dp is O(1) of it). Then STEPS updates of both back ends
// and, after each, the learned p of every (layer, head), the CUDA model's from its fp32 master
// theta. AdamW moves theta by about lr per step whatever |g| (g / sqrt(v)): where theta's gradient
// is small and changes sign from batch to batch, bf16 noise in it changes the direction of a step,
// so every step trains on one batch (theta's gradient then changes slowly; on fresh batches this
// tiny model's p wander by more than their steps). From p = 15 the model is ill-conditioned
// (theta's gradient differs by ~50% between the back ends, by ~30% for the bf16-perturbed CPU run),
// so the moves are compared from p = 3. Each step of the CUDA back end's theta is checked against
// AdamW in float64 from its own moments and gradient (a wrong learning rate, moment or bias
// correction fails it). The runs' p are then compared with the larger of two bounds: how far
// AdamW can carry two runs apart whose theta gradients differ by check_gradients' tolerance at
// every step (any one element by up to the tensor's whole L2 tolerance; test/adamw_bound.h's
// first-order bound over the steps so far, times 2 for its remainder, times dp/dtheta =
// sigmoid(theta) <= 1), and SENSITIVITY_FACTOR times the largest so far of what the bf16-perturbed
// CPU run's move differs by (its move: it starts from theta rounded to bf16); plus the fp32
// rounding of theta (1e-6 of p). A small theta gradient is within that tolerance of 0, where a step
// may go either way: the bound is loose where AdamW is, not a part of the move (which would hold
// or not by chance).
static void compare_learned_p(AttnKind kind, float p0) {
    GPT2Config c = tiny_config(kind, p0, 1);
    const int B = 2, T = 24, STEPS = 5;
    ThreeModels m(c, 1337);
    std::string name = attn_kind_name(kind);
    std::vector<double> start = learned_p_values(c, m.cpu.params.data());
    std::vector<double> start_pert = learned_p_values(c, m.perturbed.params.data());
    CHECK(model_learned_p(m.gpu) == start);
    std::vector<double> envelope(start.size(), 0.0);
    std::vector<std::vector<double>> g_hist(start.size()), delta_hist(start.size()), lr_hist(start.size());
    for (int step = 1; step <= STEPS; step++) {
        TokenBatch batch = make_token_batch(B, T, c.vocab_size, 301);
        m.forward(batch, B, T);
        m.backward();
        size_t off = m.cpu.param_offsets[P_PTHETA], n = start.size();
        {  // theta's gradients and check_gradients' tolerance of them: the error of any one element is
           // at most the tensor's whole L2 error
            double ref_norm = norm2(m.cpu.grads.data() + off, n);
            double pert = diff_norm2(m.perturbed.grads.data() + off, m.cpu.grads.data() + off, n) / ref_norm;
            double delta = std::max(GRAD_TENSOR_RTOL, SENSITIVITY_FACTOR * pert) * ref_norm;
            for (size_t k = 0; k < n; k++) {
                g_hist[k].push_back(m.cpu.grads[off + k]);
                delta_hist[k].push_back(delta);
                lr_hist[k].push_back(param_tensor_lr(P_PTHETA, LR, m.cpu.p_lr_scale));
            }
        }
        if (step == 1) {
            check_gradients(m, "learned p, step 1");
            std::vector<float> g = download_grads(m.gpu);
            std::string line;
            for (size_t k = 0; k < start.size(); k++) {
                size_t i = m.cpu.param_offsets[P_PTHETA] + k;
                char text[64];
                snprintf(text, sizeof text, " %.4g/%.4g", m.cpu.grads[i], g[i]);
                line += text;
            }
            size_t off = m.cpu.param_offsets[P_PTHETA], n = start.size();
            double ref_norm = norm2(m.cpu.grads.data() + off, n);
            MESSAGE(name << " learned p from " << p0 << ", step 1: dtheta cpu/cuda of every (layer, head):" << line
                         << "; relative L2 error " << diff_norm2(g.data() + off, m.cpu.grads.data() + off, n) / ref_norm
                         << ", of the bf16-perturbed reference "
                         << diff_norm2(m.perturbed.grads.data() + off, m.cpu.grads.data() + off, n) / ref_norm);
        }
        // the CUDA back end's theta step against AdamW in float64 from its own state and gradient:
        // within ~10 roundings of the step (16 half-ulps of fp32) and the new theta's own rounding
        std::vector<float> theta0, m0, v0, g_gpu = download_grads(m.gpu);
        m.gpu.get_params(theta0);
        m.gpu.get_optimizer(m0, v0);
        const AdamWStep adamw = adamw_step(step);
        m.cpu.update(adamw);
        m.perturbed.update(adamw);
        m.gpu.update(adamw);
        std::vector<float> theta1;
        m.gpu.get_params(theta1);
        for (size_t k = 0; k < n; k++) {
            size_t i = off + k;
            double mm = m0[i], vv = v0[i], u32 = std::ldexp(1.0, -24);
            double exact = adamw_step_exact(theta0[i], mm, vv, g_gpu[i], param_tensor_lr(P_PTHETA, LR, m.cpu.p_lr_scale),
                                            BETA1, BETA2, EPS, 0.0, step);
            double bound = 16 * u32 * std::fabs(exact - theta0[i]) + u32 * std::fabs(exact);
            INFO(name << " step " << step << ", theta " << k << ": " << theta1[i] << " against AdamW's " << exact);
            CHECK(std::fabs(theta1[i] - exact) <= bound);
        }
        std::vector<double> p_cpu = learned_p_values(c, m.cpu.params.data()), p_gpu = model_learned_p(m.gpu);
        std::vector<double> p_pert = learned_p_values(c, m.perturbed.params.data());
        REQUIRE(p_gpu.size() == p_cpu.size());
        double largest_move = 0, worst = 0;
        std::string line;
        for (size_t k = 0; k < p_cpu.size(); k++) largest_move = std::max(largest_move, std::fabs(p_cpu[k] - start[k]));
        for (size_t k = 0; k < p_cpu.size(); k++) {
            envelope[k] = std::max(envelope[k], std::fabs((p_pert[k] - start_pert[k]) - (p_cpu[k] - start[k])));
            double apart = 2 * adamw_trajectory_bound(g_hist[k], delta_hist[k], lr_hist[k], BETA1, BETA2, EPS);
            double tol = std::max(apart, SENSITIVITY_FACTOR * envelope[k]) + 1e-6 * p_cpu[k];
            worst = std::max(worst, std::fabs(p_gpu[k] - p_cpu[k]) / tol);
            char text[96];
            snprintf(text, sizeof text, " %.6f/%.6f/%.6f", p_cpu[k], p_gpu[k], p_pert[k]);
            line += text;
        }
        MESSAGE(name << " learned p from " << p0 << ", step " << step << ", p cpu/cuda/perturbed cpu of every (layer, head):"
                     << line << "; largest difference / bound " << worst);
        CHECK(worst <= 1.0);
        // p moved, on both back ends: AdamW's first steps are ~lr on theta, ~lr sigmoid(theta) on p
        if (step == STEPS) {
            double gpu_move = 0;
            for (size_t k = 0; k < p_gpu.size(); k++) gpu_move = std::max(gpu_move, std::fabs(p_gpu[k] - start[k]));
            CHECK(largest_move > 0.5 * STEPS * LR * learned_p_dtheta(learned_p_theta0(p0)));
            CHECK(gpu_move > 0.5 * STEPS * LR * learned_p_dtheta(learned_p_theta0(p0)));
        }
    }
}

TEST_CASE("learned p: CUDA back end vs CPU back end, lssar from p = 3") { compare_learned_p(ATTN_LSSAR, 3.0f); }
TEST_CASE("learned p: CUDA back end vs CPU back end, softmax_rw from p = 3") { compare_learned_p(ATTN_SOFTMAX_RW, 3.0f); }

// The update alone, on the same gradients: the CUDA back end's bf16 gradients, handed to the CPU
// model too (times grad_scale, exact for a power of two). Two steps, so the bias correction and
// the moments of step 1 enter step 2; weight decay only on the matrices.
TEST_CASE("AdamW update on the same gradients: grad_scale, weight decay mask, bias correction") {
    GPT2Config c = tiny_config(ATTN_SOFTMAX, 0.0f);
    const int B = 1, T = 16;
    const float grad_scale = 0.5f;
    GPT2<float> cpu(c);
    GPT2Cuda gpu(c);
    cpu.init(11);
    gpu.init(11);
    for (int step = 1; step <= 2; step++) {
        TokenBatch batch = make_token_batch(B, T, c.vocab_size, 200 + step);
        gpu.forward(batch.inputs.data(), batch.targets.data(), B, T);
        gpu.zero_grad();
        gpu.backward(1.0f);
        std::vector<float> g = download_grads(gpu);
        for (size_t i = 0; i < g.size(); i++) cpu.grads[i] = grad_scale * g[i];
        cpu.update(adamw_step(step));
        gpu.update(adamw_step(step, grad_scale));
    }
    std::vector<float> p, mom1, mom2;
    gpu.get_params(p);
    gpu.get_optimizer(mom1, mom2);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = cpu.param_offsets[i], n = cpu.param_sizes[i];
        double worst_p = 0, worst_m = 0, worst_v = 0;
        for (size_t k = off; k < off + n; k++) {
            double tol_p = UPDATE_RTOL * LR + 1e-6 * std::fabs(cpu.params[k]);
            worst_p = std::max(worst_p, std::fabs((double)p[k] - cpu.params[k]) / tol_p);
            worst_m = std::max(worst_m, std::fabs((double)mom1[k] - cpu.m[k]) / (UPDATE_RTOL * std::fabs(cpu.m[k]) + 1e-30));
            worst_v = std::max(worst_v, std::fabs((double)mom2[k] - cpu.v[k]) / (UPDATE_RTOL * std::fabs(cpu.v[k]) + 1e-30));
        }
        INFO(std::string(param_tensor_name(i)) << ": largest difference / tolerance: weights " << worst_p << ", m "
                                              << worst_m << ", v " << worst_v);
        CHECK(worst_p <= 1.0);
        CHECK(worst_m <= 1.0);
        CHECK(worst_v <= 1.0);
    }
}

TEST_CASE("parameters and optimizer state round-trip through the host") {
    GPT2Config c = tiny_config(ATTN_SOFTMAX, 0.0f);
    GPT2Cuda gpu(c);
    std::vector<float> p(gpu.num_parameters), m(gpu.num_parameters), v(gpu.num_parameters);
    std::vector<float> m0, v0;
    gpu.get_optimizer(m0, v0);  // zeros before any update
    CHECK(m0 == std::vector<float>(gpu.num_parameters, 0.0f));
    CHECK(v0 == std::vector<float>(gpu.num_parameters, 0.0f));
    Rng rng(5);
    for (size_t i = 0; i < p.size(); i++) {
        p[i] = (float)rng.normal();
        m[i] = (float)rng.normal();
        v[i] = (float)rng.uniform();
    }
    gpu.set_params(p);
    gpu.set_optimizer(m, v);
    std::vector<float> p2, m2, v2;
    gpu.get_params(p2);
    gpu.get_optimizer(m2, v2);
    CHECK(p2 == p);
    CHECK(m2 == m);
    CHECK(v2 == v);
    CHECK_THROWS_AS(gpu.set_params(std::vector<float>(3)), std::invalid_argument);
}

// GPT-2 124M evaluating one 16K-token sequence (loss versus length at 16x the training length):
// the device memory it needs, from the model's own allocation list (activation_bytes). The
// attention keeps O(B NH T) statistics, never a T x T matrix, so the activations grow linearly:
// doubling T at most doubles them (the T-independent scratch makes it slightly less).
TEST_CASE("GPT-2 124M evaluates a 16K-token sequence within an 80 GB GPU; activations linear in T") {
    GPT2Config c;
    c.max_seq_len = 1024;
    c.vocab_size = 50257;
    c.padded_vocab_size = 50304;
    c.num_layers = 12;
    c.num_heads = 12;
    c.channels = 768;
    c.attn = ATTN_LSSAR;
    c.p = 15.0f;
    GPT2Cuda model(c);
    size_t weights = model.num_parameters * (2 * sizeof(floatX) + sizeof(float));  // bf16 weights, grads; fp32 master
    size_t rope = (size_t)16384 * 64 * sizeof(float);
    size_t a8 = model.activation_bytes(1, 8192), a16 = model.activation_bytes(1, 16384);
    double total_gb = (weights + rope + a16) / 1e9;
    MESSAGE("T = 16384: weights " << weights / 1e9 << " GB + activations " << a16 / 1e9 << " GB = " << total_gb
                                  << " GB (T = 8192: activations " << a8 / 1e9 << " GB)");
    // 10% of the 80 GB left for the CUDA context, cuBLASLt's workspace and fragmentation
    CHECK(total_gb < 0.9 * 80);
    CHECK(a16 <= 2 * a8);
}

// The activations the CUDA back end allocates (and counts for its memory estimate) have the sizes
// of the one list every back end reads (model/gpt2_sizes.h), tensor by tensor.
struct RecordedCounts {
    std::map<const void*, size_t> counts;  // by the address of the pointer allocated into
    template <class P> void operator()(P*& ptr, size_t count, size_t = sizeof(P)) {
        counts[(const void*)&ptr] = count;
        ptr = nullptr;
    }
};
TEST_CASE("the CUDA back end's activations have the sizes of model/gpt2_sizes.h") {
    GPT2Config c = tiny_config(ATTN_LSSAR, 15.0f);
    const int B = 3, T = 20;
    GPT2CudaActivations a{};
    RecordedCounts rec;
    GPT2Cuda::layout_activations(c, a, B, T, rec);
    ActivationTensors<size_t> s = gpt2_activation_sizes(c, B, T);
#define SAME_SIZE(name) CHECK_MESSAGE(rec.counts.at(&a.name) == s.name, #name)
    SAME_SIZE(encoded); SAME_SIZE(ln1); SAME_SIZE(ln1_mean); SAME_SIZE(ln1_rstd); SAME_SIZE(qkvr); SAME_SIZE(atty);
    SAME_SIZE(attstats); SAME_SIZE(residual2); SAME_SIZE(ln2); SAME_SIZE(ln2_mean); SAME_SIZE(ln2_rstd);
    SAME_SIZE(fch); SAME_SIZE(fch_gelu); SAME_SIZE(residual3); SAME_SIZE(lnf); SAME_SIZE(lnf_mean);
    SAME_SIZE(lnf_rstd); SAME_SIZE(logits); SAME_SIZE(losses);
#undef SAME_SIZE
    // and the estimate counts what the list holds: those at their element sizes, then the rest
    size_t named = (s.encoded + s.ln1 + s.qkvr + s.atty + s.residual2 + s.ln2 + s.fch + s.fch_gelu + s.residual3 + s.lnf +
                    s.logits) * sizeof(floatX) +
                   (s.ln1_mean + s.ln1_rstd + s.attstats + s.ln2_mean + s.ln2_rstd + s.lnf_mean + s.lnf_rstd + s.losses) *
                       sizeof(float);
    CHECK(GPT2Cuda::activation_bytes(c, B, T) > named);
}

// The CUDA back end's memory estimate (gpt2_cuda_training_memory: what the trainer checks and its
// refusal names) against what a training step leaves allocated on the device: every cudaMalloc'd
// byte, from cudaMemGetInfo's free memory before the model and after its first update (AdamW's
// moments appear there), cuBLASLt's workspace taken out of both (it is made once per process and
// GPU, by whichever model comes first). Emulated: within 10% (the estimate counts every buffer; the
// emulator allocates exactly what is asked). On a GPU the driver's 2 MiB granularity adds to the
// small buffers of this tiny model, so there it must be at least 90% of what was allocated.
TEST_CASE("the CUDA back end's memory estimate is what a training step allocates (within 10%)") {
    const std::pair<int, int> shapes[] = {{4, 64}, {8, 16}};
    for (const auto& shape : shapes) {
        const int B = shape.first, T = shape.second;
        CAPTURE(B);
        CAPTURE(T);
        GPT2Config c = tiny_config(ATTN_LSSAR, 15.0f);
        c.max_seq_len = T;
        c.learn_p = 1;
        bool had_workspace = cublaslt_devices[cublaslt_current_device()].handle != nullptr;
        size_t free_before = 0, free_after = 0, total = 0;
        cudaCheck(cudaMemGetInfo(&free_before, &total));
        {
            GPT2Cuda model(c);
            model.init(5);
            TokenBatch batch = make_token_batch(B, T, c.vocab_size, 106);
            model.forward(batch.inputs.data(), batch.targets.data(), B, T, true);
            model.backward();
            model.update({.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                          .grad_scale = 1.0f, .step = 1});
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaMemGetInfo(&free_after, &total));
        }
        double allocated = (double)free_before - (double)free_after - (had_workspace ? 0.0 : (double)cublaslt_workspace_size);
        MemoryEstimate e = gpt2_cuda_training_memory(c, B, T);
        double estimate = e.total() - (double)cublaslt_workspace_size;
        MESSAGE("B " << B << " T " << T << ": estimate " << estimate << " bytes (activations " << e.activation_bytes
                     << "), allocated " << allocated << ", ratio " << estimate / allocated);
#if defined(__CUDACC__)
        CHECK(estimate >= 0.9 * allocated - 64.0 * (1 << 20));
#else
        CHECK(std::fabs(estimate - allocated) <= 0.1 * allocated);
#endif
    }
}

// GPT-2 124M at the paper's micro-batch B 64 x T 1024: what the CUDA back end allocates (bf16
// activations) fits an 80 GB GPU with 10% to spare; the CPU back end's fp32 list is printed beside.
TEST_CASE("GPT-2 124M trains at B 64 x T 1024 within an 80 GB GPU by the CUDA back end's own count") {
    GPT2Config c;
    c.max_seq_len = 1024;
    c.vocab_size = 50257;
    c.padded_vocab_size = 50304;
    c.num_layers = 12;
    c.num_heads = 12;
    c.channels = 768;
    c.attn = ATTN_LSSAR;
    c.p = 15.0f;
    MemoryEstimate cuda = gpt2_cuda_training_memory(c, 64, 1024), cpu = cpu_training_memory_estimate(c, 64, 1024);
    MESSAGE("124M, B 64 x T 1024: CUDA back end " << cuda.total() / 1e9 << " GB (state " << cuda.state_bytes / 1e9
                                                  << ", activations " << cuda.activation_bytes / 1e9
                                                  << "); the CPU back end's fp32 list " << cpu.total() / 1e9 << " GB");
    CHECK(cuda.total() < 0.9 * 80e9);
    CHECK(cuda.total() < cpu.total());
}

TEST_CASE("bad configs and calls are refused with the field named") {
    auto message_of = [](const GPT2Config& c) {
        try {
            GPT2Cuda model(c);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    GPT2Config c = tiny_config(ATTN_SOFTMAX, 0.0f);
    c.padded_vocab_size = 100;
    CHECK(message_of(c).find("padded_vocab_size = 100") != std::string::npos);
    c = tiny_config(ATTN_SOFTMAX, 0.0f);
    c.num_heads = 4;  // hd = 16
    CHECK(message_of(c).find("head dim") != std::string::npos);
    c = tiny_config(ATTN_SOFTMAX, 0.0f);
    c.channels = 60;
    c.num_heads = 2;
    CHECK(message_of(c).find("channels = 60") != std::string::npos);
    c = tiny_config(ATTN_LSSAR, 0.5f);
    CHECK(message_of(c).find("p = 0.5") != std::string::npos);

    c = tiny_config(ATTN_SOFTMAX, 0.0f);
    GPT2Cuda gpu(c);
    gpu.init(1);
    std::vector<int> tokens(8, 3), bad(8, c.vocab_size);
    CHECK_THROWS_AS(gpu.forward(bad.data(), nullptr, 1, 8), std::out_of_range);
    CHECK(gpu.forward(tokens.data(), nullptr, 1, 8) == -1.0f);
    CHECK_THROWS_AS(gpu.backward(1.0f), std::logic_error);  // no targets
    gpu.forward(tokens.data(), tokens.data(), 1, 8);
    gpu.backward(1.0f);
    CHECK_THROWS_AS(gpu.backward(1.0f), std::logic_error);  // the logits are now dlogits
    std::vector<float> row(c.padded_vocab_size);
    CHECK_THROWS_AS(gpu.logits_row(0, 0, row.data()), std::logic_error);
}
