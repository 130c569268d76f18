// The evaluation tools' results on the CPU back end's reference path (ModelCPU with -pr ref, called the
// fp32 path below) and its fast path in bf16 numerics (-pr bf16, on every CPU: exactly emulated where
// the CPU has no bf16 instructions) agree: on one small model trained briefly (fp32 path) to predict a stream, the same weights
// evaluated by
//   loss_vs_length (eval/loss_vs_length.h) at 1/2x to 4x the training length,
//   passkey_greedy_match (eval/passkey.h: one forward without targets from set_logits_from_row's row,
//     logits_row at the answer positions),
//   mc_score (eval/mc_eval.h: per-example summed and mean losses, the predictions),
//   attention_map (eval/attention_maps.h: each path's own row code on its saved q and k),
//   the final layernorm's output that orbits/hidden_states.cu writes (acts.lnf),
// for softmax and LSSAR.
//
// Tolerances, as test_cpu_fast.cpp derives them for the whole model: bf16 keeps 8 significant bits
// (2^-8 relative per rounding), and the bf16 path rounds the operands of every matmul and of
// attention's weight products, about a dozen roundings per layer that average out over a tensor:
// losses differ by well under 1% (LOSS_RTOL), a tensor (hidden states, an attention map) by ~1%
// in relative L2 (TENSOR_RTOL). Where a model amplifies a bf16-sized perturbation (LSSAR's p = 15
// sharpens near-tied rows), a check also passes within SENSITIVITY_FACTOR times the difference of a
// third evaluation: the fp32 path on the bf16-rounded weights (the bf16 path's first rounding alone).
// Greedy predictions are compared exactly where they cannot flip: wherever the fp32 path's top two
// logits are further apart than twice the largest logit difference between the paths.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "eval/attention_maps.h"
#include "eval/loss_vs_length.h"
#include "eval/mc_eval.h"
#include "eval/passkey.h"
#include "model/backend_cpu.h"
#include "model/rand.h"

constexpr double LOSS_RTOL = 1e-2, TENSOR_RTOL = 3e-2, SENSITIVITY_FACTOR = 4;
constexpr int STREAM_V = 97;  // the stream's tokens: next = (5 cur + 3) mod 97, 1 in 8 random


static std::vector<int> stream(size_t n, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> out;
    int cur = (int)(rng.next_u64() % STREAM_V);
    for (size_t i = 0; i < n; i++) {
        out.push_back(cur);
        cur = rng.next_u64() % 8 == 0 ? (int)(rng.next_u64() % STREAM_V) : (5 * cur + 3) % STREAM_V;
    }
    return out;
}

// L = 2, C = 64 (2 heads of 32), a vocabulary of 128, T = 32 in training
// n tokens that follow `last` by the stream's rule, with no random token
static std::vector<int> continuation(int last, int n) {
    std::vector<int> out;
    for (int i = 0; i < n; i++) out.push_back(last = (5 * last + 3) % STREAM_V);
    return out;
}

static GPT2Config eval_config(AttnKind kind) {
    GPT2Config c;
    c.max_seq_len = 32;
    c.vocab_size = 128;
    c.padded_vocab_size = 128;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 64;
    c.attn = kind;
    c.p = 15.0f;
    return c;
}

// 150 AdamW steps of B 4, T 32 on the stream (fp32 path): the weights every evaluation below reads
static std::vector<float> trained_weights(const GPT2Config& c) {
    ModelCPU m(c);
    m.init(7);
    const int B = 4, T = 32;
    for (int step = 1; step <= 150; step++) {
        std::vector<int> s = stream((size_t)B * (T + 1), 1000 + step), in, tg;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) in.push_back(s[b * (T + 1) + t]), tg.push_back(s[b * (T + 1) + t + 1]);
        m.zero_grad();
        m.forward(in.data(), tg.data(), B, T);
        m.backward(1.0f);
        double norm = m.grad_norm();
        m.update({.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f,
                  .grad_scale = norm > 1.0 ? (float)(1.0 / norm) : 1.0f, .step = step});
    }
    std::vector<float> params;
    m.get_params(params);
    return params;
}

// The three evaluations: the fp32 path, the bf16 path, and the fp32 path on the bf16-rounded weights.
struct Paths {
    ModelCPU fp32, bf16, perturbed;
    Paths(const GPT2Config& c, const std::vector<float>& params) : fp32(c), bf16(c), perturbed(c) {
        fp32.set_params(params);
        bf16.select_precision("bf16");
        REQUIRE(bf16.precision() == std::string("bf16"));
        bf16.set_params(params);
        std::vector<float> rounded = params;
        for (float& x : rounded) x = bf16_to_float(float_to_bf16(x));
        perturbed.set_params(rounded);
    }
};

static double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, n = 0;
    for (size_t i = 0; i < a.size(); i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), n += (double)b[i] * b[i];
    return std::sqrt(d / n);
}

static void check_tensor(const char* what, const std::vector<float>& got, const std::vector<float>& ref,
                         const std::vector<float>& perturbed) {
    double rel = rel_l2(got, ref), sens = rel_l2(perturbed, ref);
    INFO(std::string(what) << ": relative L2 difference " << rel << ", of the perturbed fp32 path " << sens);
    MESSAGE(std::string(what) << ": relative L2 difference bf16 / fp32 path " << rel << " (perturbed fp32 path: " << sens << ")");
    CHECK(rel < std::max(TENSOR_RTOL, SENSITIVITY_FACTOR * sens));
    CHECK(rel > 0);  // the bf16 path really ran
}

static void check_evaluations(AttnKind kind) {
    // one thread: the models are small, and on a shared machine OpenMP's threads waiting beside
    // OpenBLAS's would take most of the time (the kernels' thread counts are tested elsewhere)
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    GPT2Config c = eval_config(kind);
    Paths m(c, trained_weights(c));
    INFO(std::string(attn_kind_name(kind)));

    // loss_vs_length at 16 .. 128 (training length 32), the same 512 tokens at every length
    std::vector<int> span = stream(513, 77), lengths = {16, 32, 64, 128};
    std::vector<LengthLoss> l32 = loss_vs_length(m.fp32, span, 512, lengths, 256);
    std::vector<LengthLoss> l16 = loss_vs_length(m.bf16, span, 512, lengths, 256);
    std::vector<LengthLoss> lp = loss_vs_length(m.perturbed, span, 512, lengths, 256);
    for (size_t i = 0; i < lengths.size(); i++) {
        double d = std::fabs(l16[i].loss - l32[i].loss), sens = std::fabs(lp[i].loss - l32[i].loss);
        INFO("loss_vs_length at " << lengths[i] << ": fp32 " << l32[i].loss << ", bf16 " << l16[i].loss << ", perturbed "
                                  << lp[i].loss);
        CHECK(d <= std::max(LOSS_RTOL * l32[i].loss, SENSITIVITY_FACTOR * sens));
        CHECK(l32[i].loss < 0.5 * std::log((double)STREAM_V));  // the model learned the stream
    }
    MESSAGE(std::string(attn_kind_name(kind)) << ": loss_vs_length 16/32/64/128 fp32 " << l32[0].loss << " " << l32[1].loss << " "
                                 << l32[2].loss << " " << l32[3].loss << ", bf16 " << l16[0].loss << " " << l16[1].loss
                                 << " " << l16[2].loss << " " << l16[3].loss);

    // passkey's verdicts: prompts of 60 tokens of the stream, answers the rule's next 4 tokens
    // (true) or 4 other tokens (false), at T = 64 (prompt and answer fill the row: passkey's EOT
    // padding, a GPT-2 token, never reaches this vocabulary); the predictions agree wherever they
    // cannot flip
    const int T = 64, V = c.vocab_size, Vp = c.padded_vocab_size;
    int compared = 0, agreeing_verdicts = 0, trials = 0;
    for (int trial = 0; trial < 6; trial++) {
        std::vector<int> prompt = stream(60, 500 + trial), answer = continuation(prompt.back(), 4);
        if (trial % 2) answer = {1, 2, 3, 4};
        std::vector<int> p32, p16;
        bool v32 = passkey_greedy_match(m.fp32, prompt, answer, T, &p32);
        bool v16 = passkey_greedy_match(m.bf16, prompt, answer, T, &p16);
        trials++;
        agreeing_verdicts += v32 == v16;
        // the logits behind each prediction, read back after one more forward of each path
        std::vector<int> inputs(T, GPT2Tokenizer::EOT);
        std::copy(prompt.begin(), prompt.end(), inputs.begin());
        std::copy(answer.begin(), answer.end(), inputs.begin() + prompt.size());
        m.fp32.forward(inputs.data(), nullptr, 1, T);
        m.bf16.forward(inputs.data(), nullptr, 1, T);
        std::vector<float> a(Vp), b(Vp);
        for (size_t i = 0; i < answer.size(); i++) {
            int pos = (int)(prompt.size() - 1 + i);
            m.fp32.logits_row(0, pos, a.data());
            m.bf16.logits_row(0, pos, b.data());
            double diff = 0, top = -1e30, second = -1e30;
            for (int v = 0; v < V; v++) {
                diff = std::max(diff, std::fabs((double)a[v] - b[v]));
                if (a[v] > top) second = top, top = a[v];
                else if (a[v] > second) second = a[v];
            }
            if (top - second > 2 * diff) {
                compared++;
                CHECK(p16[i] == p32[i]);
            }
        }
        if (trial % 2 == 0) CHECK(v32);  // the stream's continuation is what the model predicts
    }
    CHECK(agreeing_verdicts == trials);
    CHECK(compared >= 20);  // of 24 predictions, most are far from a tie

    // mc_score: 12 examples, context 20 tokens of the stream, completions the rule's next 6 (the
    // label) or 6 random tokens; per-example summed and mean losses
    McFile file;
    file.path = "(in memory)";
    Rng pick(9);
    for (int i = 0; i < 12; i++) {
        McExample e;
        e.index = i;
        e.context = stream(20, 700 + i);
        e.label = (int)(pick.next_u64() % 4);
        for (int k = 0; k < 4; k++) {
            std::vector<int> other;
            for (int j = 0; j < 6; j++) other.push_back((int)(pick.next_u64() % STREAM_V));
            e.completions.push_back(k == e.label ? continuation(e.context.back(), 6) : other);
        }
        file.examples.push_back(e);
    }
    file.max_completions = 4;
    file.longest_row = 26;
    std::vector<int> which(12);
    for (int i = 0; i < 12; i++) which[i] = i;
    McResult r32 = mc_score(m.fp32, file, which, 8, 32), r16 = mc_score(m.bf16, file, which, 8, 32),
             rp = mc_score(m.perturbed, file, which, 8, 32);
    for (int i = 0; i < 12; i++) {
        const McExampleScore &a = r32.per_example[i], &b = r16.per_example[i], &p = rp.per_example[i];
        for (int k = 0; k < 4; k++) {
            double d = std::fabs(b.sum_loss[k] - a.sum_loss[k]), sens = std::fabs(p.sum_loss[k] - a.sum_loss[k]);
            CAPTURE(i);
            CAPTURE(k);
            CHECK(d <= std::max(LOSS_RTOL * a.sum_loss[k], SENSITIVITY_FACTOR * sens));
            CHECK(std::fabs(b.mean_loss[k] - a.mean_loss[k]) <= std::max(LOSS_RTOL * a.mean_loss[k], SENSITIVITY_FACTOR * sens));
        }
        CHECK(b.pred == a.pred);  // the rule's continuation wins by whole nats on both paths
        CHECK(a.pred == a.label);
    }

    // attention maps and hidden states after a forward of one sequence at 4x the training length
    std::vector<int> seq = stream(128, 31);
    std::vector<float> hidden[3];
    std::vector<float> maps[3];
    ModelCPU* models[3] = {&m.fp32, &m.bf16, &m.perturbed};
    for (int k = 0; k < 3; k++) {
        models[k]->forward(seq.data(), nullptr, 1, 128);
        hidden[k].assign(models[k]->gpt.acts.lnf, models[k]->gpt.acts.lnf + (size_t)128 * c.channels);
        for (int l = 0; l < c.num_layers; l++)
            for (int h = 0; h < c.num_heads; h++) {
                std::vector<float> W;
                std::vector<uint8_t> valid;
                attention_map(*models[k], l, h, W, valid);
                maps[k].insert(maps[k].end(), W.begin(), W.end());
            }
    }
    check_tensor("hidden states (final layernorm output)", hidden[1], hidden[0], hidden[2]);
    check_tensor("attention maps (every layer and head)", maps[1], maps[0], maps[2]);
}

TEST_CASE("evaluations on the fp32 and the bf16 path agree: softmax") {
    check_evaluations(ATTN_SOFTMAX);
}
TEST_CASE("evaluations on the fp32 and the bf16 path agree: LSSAR p = 15") {
    check_evaluations(ATTN_LSSAR);
}
