// What the CPU back end's fast path does with the machine (scripts/bench_cpu_trainer.sh runs it):
//   1. the model's FLOPs per token (6 per matmul weight and token, plus attention's 12 L T C),
//   2. the kernels: the fast path's ISA target, OpenBLAS's core (openblas_get_corename), oneDNN's ISA,
//   3. the throughput of the matmuls alone: every matmul of one training step (forward, dinp, dW;
//      the model's shapes) in bf16 (oneDNN, or its exact emulation where the CPU has no bf16
//      matmuls) and in fp32 through oneDNN (the fast path's) and OpenBLAS's sgemm, as total FLOPs
//      over total time (best of REPS),
//   4. the step time of the fast path in the numerics -pr names (fp32, bf16, auto: as the trainer's)
//      and its share per layer kind, over STEPS training steps,
//   5. with -el, the long-context evaluation: tokens/s of eval/loss_vs_length.h's loss_vs_length at
//      each length on the reference path and on the fast path (the same weights and tokens), and the
//      fast path's share of that time per layer kind.
//   build/profile_cpu -e d4 -b 16 -t 64 [-a softmax|lssa|lssar|...] [-pr auto|fp32|bf16] [-x steps]
//                     [-el 1024,2048 [-en tokens]]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "eval/loss_vs_length.h"
#include "layers/matmul_cpu.h"
#include "model/backend_cpu.h"
#include "model/gpt2_descriptor.h"
#include "model/rand.h"
#include "runtime/cli.h"

struct Shape {
    int N, C, OC;  // inp (N,C) @ w (OC,C)^T
};

static std::vector<Shape> step_matmuls(const GPT2Config& c, int BT) {
    int C = c.channels;
    std::vector<Shape> s;
    for (int l = 0; l < c.num_layers; l++) {
        s.push_back({BT, C, 3 * C});
        s.push_back({BT, C, C});
        s.push_back({BT, C, 4 * C});
        s.push_back({BT, 4 * C, C});
    }
    s.push_back({BT, C, c.padded_vocab_size});
    return s;
}

// seconds of one step's matmuls (forward, dinp, dW of every shape), best of reps
enum MatmulKind { MM_BF16, MM_F32_ONEDNN, MM_F32_SGEMM };
static double time_matmuls(const std::vector<Shape>& shapes, MatmulKind kind, int reps) {
    size_t acts = 0, weights = 0;  // inp, dinp (N,C), out, dout (N,OC); w, dw (OC,C)
    for (const Shape& s : shapes) {
        acts = std::max(acts, (size_t)s.N * std::max(s.C, s.OC));
        weights = std::max(weights, (size_t)s.OC * s.C);
    }
    std::vector<float> a(acts, 0.01f), b(weights, 0.02f), out(acts), dw(weights);
    std::vector<bf16> ab(acts, float_to_bf16(0.01f)), bb(weights, float_to_bf16(0.02f));
    MatmulBf16 mm;
    MatmulSgemm sgemm;
    MatmulF32 f32;
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {  // the first pass creates oneDNN's primitives
        double t0 = StepProfile::now();
        for (const Shape& s : shapes) {
            if (kind == MM_BF16) {
                mm.forward(out.data(), ab.data(), bb.data(), nullptr, s.N, s.C, s.OC);
                mm.backward(out.data(), dw.data(), ab.data(), ab.data(), bb.data(), s.N, s.C, s.OC);
            } else if (kind == MM_F32_ONEDNN) {
                f32.forward(out.data(), a.data(), b.data(), nullptr, s.N, s.C, s.OC);
                f32.backward(out.data(), dw.data(), a.data(), a.data(), b.data(), s.N, s.C, s.OC);
            } else {
                sgemm.forward(out.data(), a.data(), b.data(), nullptr, s.N, s.C, s.OC);
                sgemm.backward(out.data(), dw.data(), a.data(), a.data(), b.data(), s.N, s.C, s.OC);
            }
        }
        if (r > 0) best = std::min(best, StepProfile::now() - t0);
    }
    return best;
}

static void fail(const std::string& msg) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    exit(1);
}

static std::string profile_line(const StepProfile& prof, double total) {
    double layer_sum = 0;
    std::string out;
    char buf[64];
    for (int k = 0; k < NUM_PROFILE_KINDS; k++) {
        layer_sum += prof.seconds[k];
        snprintf(buf, sizeof buf, " %s %.1f%%", profile_kind_name(k), 100.0 * prof.seconds[k] / total);
        out += buf;
    }
    snprintf(buf, sizeof buf, " | untimed %.1f%%", 100.0 * (total - layer_sum) / total);
    return out + buf;
}

// tokens/s of loss_vs_length at length L over the first N tokens of span (after one untimed
// forward of the timed forwards' shape, which sizes the activations); the fast path's profile of the
// timed part into *prof when given
static double eval_tokens_per_s(ModelCPU& m, const std::vector<int>& span, int64_t N, int L, int tokens_per_forward,
                                StepProfile* prof, double* seconds) {
    int64_t batch = std::max<int64_t>(1, std::min<int64_t>(N / L, tokens_per_forward / L));  // as loss_vs_length batches
    loss_vs_length(m, span, batch * L, {L}, tokens_per_forward);
    if (m.profile()) *m.profile() = StepProfile();
    double t0 = StepProfile::now();
    loss_vs_length(m, span, N, {L}, tokens_per_forward);
    *seconds = StepProfile::now() - t0;
    if (prof && m.profile()) *prof = *m.profile();
    return (double)N / *seconds;
}

int main(int argc, char** argv) {
    std::string model = "d4", attn = "softmax", precision = "auto";
    int B = 16, T = 64, steps = 4, reps = 3, tokens_per_forward = 4096;
    std::vector<long long> eval_lengths;
    long long eval_tokens = 0;
    for (int i = 1; i < argc; i++) {
        std::string f = argv[i];
        if (f == "-h" || i + 1 >= argc) {
            fprintf(stderr, "usage: %s [-e d4 | d4c128h2v256] [-b 16] [-t 64] [-a softmax|lssa|lssar|...] [-x steps]\n"
                            "          [-pr auto|fp32|bf16] [-el 1024,2048] [-en tokens] [-ef tokens per forward]\n"
                            "prints the model's FLOPs per token, the fast path's ISA target, the kernels of OpenBLAS and\n"
                            "oneDNN, the matmul throughput of one step's matmuls (bf16 oneDNN or its emulation, fp32\n"
                            "oneDNN and OpenBLAS), the fast path's step time in -pr's numerics (default auto) and its share per layer\n"
                            "kind, and with -el the tokens/s of loss_vs_length at those lengths on the reference and the\n"
                            "fast path (-en tokens scored per length, default 2 x the longest; -ef as loss_vs_length's -f,\n"
                            "default 4096)\n", argv[0]);
            return f == "-h" ? 0 : 1;
        }
        const char* v = argv[++i];
        if (f == "-e") model = v;
        else if (f == "-b") B = atoi(v);
        else if (f == "-t") T = atoi(v);
        else if (f == "-a") attn = v;
        else if (f == "-pr") precision = v;
        else if (f == "-x") steps = atoi(v);
        else if (f == "-el") eval_lengths = cli_parse_int_list("-el", v, 1, 1 << 20, 16, "lengths", "1024,2048");
        else if (f == "-en") eval_tokens = cli_parse_int("-en", v, 1, 1LL << 30);
        else if (f == "-ef") tokens_per_forward = (int)cli_parse_int("-ef", v, 1, 1 << 30);
        else fail("unknown flag " + f);
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (B < 1 || T < 1 || steps < 1) fail("-b, -t and -x must be >= 1");
    GPT2Config c;
    std::string err;
    if (!gpt2_parse_descriptor(model, &c, &err)) fail("-e " + model + ": expected a descriptor dL[cC][hH][vV], e.g. d4 or d4c128h2v256");
    if (!err.empty()) fail("-e " + err);
    c.max_seq_len = T;
    for (long long L : eval_lengths) c.max_seq_len = std::max(c.max_seq_len, (int)L);
    if (!attn_kind_from_name(attn.c_str(), &c.attn)) fail("-a " + attn + ": expected one of " + attn_kind_list());
    err = gpt2_config_error(c);
    if (!err.empty()) fail(err);
    int BT = B * T;

    std::vector<Shape> shapes = step_matmuls(c, BT);
    double matmul_flops = 0;
    for (const Shape& s : shapes) matmul_flops += 6.0 * s.N * s.C * s.OC;
    double flops_per_token = matmul_flops / BT + 12.0 * c.num_layers * T * c.channels;
    printf("model %s (L %d, C %d, NH %d, V %d), B %d, T %d, attention %s\n", model.c_str(), c.num_layers, c.channels,
           c.num_heads, c.vocab_size, B, T, attn.c_str());
    printf("flops_per_token %.6g\n", flops_per_token);

    ModelCPU m(c);
    if (precision != "auto" && precision != "fp32" && precision != "bf16") fail("-pr " + precision + ": expected auto, fp32 or bf16");
    std::string line = m.select_precision(precision);
    const std::string numerics = m.precision();
    printf("precision %s\n", line.c_str());
    printf("numerics %s\n", numerics.c_str());
    printf("fast_target %s\n", fast_cpu_target().c_str());
    printf("openblas_corename %s\n", openblas_get_corename());
    printf("onednn_isa %s%s\n", cpu_bf16_matmul().onednn_isa.c_str(), cpu_bf16_matmul().hardware ? "" : " (no bf16 matmuls: emulated)");
    double t_bf16 = time_matmuls(shapes, MM_BF16, reps), t_fp32 = time_matmuls(shapes, MM_F32_ONEDNN, reps),
           t_sgemm = time_matmuls(shapes, MM_F32_SGEMM, reps);
    printf("matmul_gflops_bf16 %.1f\nmatmul_gflops_fp32 %.1f\nmatmul_gflops_sgemm %.1f\n", matmul_flops / t_bf16 / 1e9,
           matmul_flops / t_fp32 / 1e9, matmul_flops / t_sgemm / 1e9);

    m.init(1337);
    Rng rng(1);
    std::vector<int> tokens((size_t)BT + 1);
    double total = 0;
    for (int s = 0; s <= steps; s++) {  // step 0 warms up
        for (int& t : tokens) t = (int)(rng.next_u64() % c.vocab_size);
        if (s == 1) *m.profile() = StepProfile();
        double t0 = StepProfile::now();
        m.zero_grad();
        m.forward(tokens.data(), tokens.data() + 1, B, T, true);  // as the trainer: a backward follows
        m.backward(1.0f);
        double norm = m.grad_norm();
        m.update({.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f,
                  .grad_scale = norm > 1.0 ? (float)(1.0 / norm) : 1.0f, .step = s + 1});
        if (s > 0) total += StepProfile::now() - t0;
    }
    printf("step_ms %.1f\n", 1e3 * total / steps);
    printf("tokens_per_s %.1f\n", BT * steps / total);
    printf("profile %s (share of step time):%s\n", numerics.c_str(), profile_line(*m.profile(), total).c_str());

    if (!eval_lengths.empty()) {
        // the two paths on one set of weights (the trained ones above) and one span of tokens
        std::vector<float> params;
        m.get_params(params);
        ModelCPU ref(c);
        ref.set_params(params);
        int64_t longest = *std::max_element(eval_lengths.begin(), eval_lengths.end());
        int64_t N = eval_tokens > 0 ? eval_tokens : 2 * longest;
        std::vector<int> span((size_t)N + 1);
        for (int& t : span) t = (int)(rng.next_u64() % c.vocab_size);
        for (long long L : eval_lengths) {
            if (N % L != 0) fail("-en " + std::to_string(N) + " is not a multiple of the length " + std::to_string(L));
            StepProfile prof;
            double s32, s16;
            double tok32 = eval_tokens_per_s(ref, span, N, (int)L, tokens_per_forward, nullptr, &s32);
            double tok16 = eval_tokens_per_s(m, span, N, (int)L, tokens_per_forward, &prof, &s16);
            printf("eval_T %lld tokens %lld: ref %.1f tok/s, %s %.1f tok/s, %s / ref %.2fx\n", L, (long long)N, tok32,
                   numerics.c_str(), tok16, numerics.c_str(), tok16 / tok32);
            printf("profile %s eval T %lld (share of time):%s\n", numerics.c_str(), L, profile_line(prof, s16).c_str());
        }
    }
    return 0;
}
