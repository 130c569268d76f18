// What the CPU back end's bf16 path does with the machine (scripts/bench_cpu_trainer.sh runs it):
//   1. the model's FLOPs per token (6 per matmul weight and token, plus attention's 12 L T C),
//   2. the throughput of the matmuls alone: every matmul of one training step (forward, dinp, dW;
//      the model's shapes) in bf16 through oneDNN and in fp32 through OpenBLAS, as total FLOPs over
//      total time (the best of REPS passes),
//   3. the share of the bf16 path's step time per layer kind, over STEPS training steps.
//   build/profile_cpu -e d4 -b 16 -t 64 [-a softmax|lssa|lssar] [-x steps]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "layers/matmul_cpu.h"
#include "model/backend_cpu.h"
#include "model/rand.h"

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
static double time_matmuls(const std::vector<Shape>& shapes, bool bf16_path, int reps) {
    size_t acts = 0, weights = 0;  // inp, dinp (N,C), out, dout (N,OC); w, dw (OC,C)
    for (const Shape& s : shapes) {
        acts = std::max(acts, (size_t)s.N * std::max(s.C, s.OC));
        weights = std::max(weights, (size_t)s.OC * s.C);
    }
    std::vector<float> a(acts, 0.01f), b(weights, 0.02f), out(acts), dw(weights);
    std::vector<bf16> ab(acts, float_to_bf16(0.01f)), bb(weights, float_to_bf16(0.02f));
    MatmulBf16 mm;
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {  // the first pass creates oneDNN's primitives
        double t0 = StepProfile::now();
        for (const Shape& s : shapes) {
            if (bf16_path) {
                mm.forward(out.data(), ab.data(), bb.data(), nullptr, s.N, s.C, s.OC);
                mm.backward(out.data(), dw.data(), ab.data(), ab.data(), bb.data(), s.N, s.C, s.OC);
            } else {
                matmul_forward(out.data(), a.data(), b.data(), (const float*)nullptr, s.N, s.C, s.OC);
                matmul_backward(out.data(), dw.data(), (float*)nullptr, a.data(), a.data(), b.data(), s.N, s.C, s.OC);
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

int main(int argc, char** argv) {
    std::string model = "d4", attn = "softmax";
    int B = 16, T = 64, steps = 4, reps = 3;
    for (int i = 1; i < argc; i++) {
        std::string f = argv[i];
        if (f == "-h" || i + 1 >= argc) {
            fprintf(stderr, "usage: %s [-e d4] [-b 16] [-t 64] [-a softmax|lssa|lssar] [-x steps]\n"
                            "prints the model's FLOPs per token, the matmul throughput of one step's matmuls (bf16\n"
                            "oneDNN, fp32 OpenBLAS) and the bf16 path's share of step time per layer kind\n", argv[0]);
            return f == "-h" ? 0 : 1;
        }
        const char* v = argv[++i];
        if (f == "-e") model = v;
        else if (f == "-b") B = atoi(v);
        else if (f == "-t") T = atoi(v);
        else if (f == "-a") attn = v;
        else if (f == "-x") steps = atoi(v);
        else fail("unknown flag " + f);
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (B < 1 || T < 1 || steps < 1) fail("-b, -t and -x must be >= 1");
    int layers = 0;
    if (sscanf(model.c_str(), "d%d", &layers) != 1 || layers < 1) fail("-e " + model + ": expected dL, e.g. d4");
    GPT2Config c;
    c.num_layers = layers;
    c.channels = 64 * layers;
    c.num_heads = layers;
    c.max_seq_len = T;
    if (!attn_kind_from_name(attn.c_str(), &c.attn)) fail("-a " + attn + ": expected softmax, lssa or lssar");
    int BT = B * T;

    std::vector<Shape> shapes = step_matmuls(c, BT);
    double matmul_flops = 0;
    for (const Shape& s : shapes) matmul_flops += 6.0 * s.N * s.C * s.OC;
    double flops_per_token = matmul_flops / BT + 12.0 * c.num_layers * T * c.channels;
    printf("flops_per_token %.6g\n", flops_per_token);

    ModelCPU m(c);
    std::string line = m.select_precision("bf16");
    if (!m.bf16) fail(line);
    printf("precision %s\n", line.c_str());
    double t_bf16 = time_matmuls(shapes, true, reps), t_fp32 = time_matmuls(shapes, false, reps);
    printf("matmul_gflops_bf16 %.1f\nmatmul_gflops_fp32 %.1f\n", matmul_flops / t_bf16 / 1e9, matmul_flops / t_fp32 / 1e9);

    m.init(1337);
    Rng rng(1);
    std::vector<int> tokens((size_t)BT + 1);
    double total = 0;
    for (int s = 0; s <= steps; s++) {  // step 0 warms up
        for (int& t : tokens) t = (int)(rng.next_u64() % c.vocab_size);
        if (s == 1) m.bf16->prof = StepProfile();
        double t0 = StepProfile::now();
        m.zero_grad();
        m.forward(tokens.data(), tokens.data() + 1, B, T);
        m.backward(1.0f);
        double norm = m.grad_norm();
        m.update(3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, norm > 1.0 ? (float)(1.0 / norm) : 1.0f, s + 1);
        if (s > 0) total += StepProfile::now() - t0;
    }
    double* sec = m.bf16->prof.seconds;
    double layer_sum = 0;
    for (int k = 0; k < NUM_PROFILE_KINDS; k++) layer_sum += sec[k];
    printf("step_ms_bf16 %.1f\nprofile bf16 (share of step time):", 1e3 * total / steps);
    for (int k = 0; k < NUM_PROFILE_KINDS; k++) printf(" %s %.1f%%", profile_kind_name(k), 100.0 * sec[k] / total);
    printf(" | untimed %.1f%%\n", 100.0 * (total - layer_sum) / total);
    return 0;
}
