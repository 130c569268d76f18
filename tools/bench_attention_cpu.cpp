// The fast path's attention (attention/attention_fast_cpu.h) on every ISA target this CPU runs,
// against the reference path's (attention/attention_cpu.h) on the same inputs in the same run.
//   build/bench_attention_cpu [-a softmax,lssar] [-s 32x64,8x256,2x1024] [-hd 64] [-nh 2] [-r 5] [-th 1]
// For each variant and shape (B x T): the reference's forward, then per target and numerics the fast
// forward and forward + backward (ms per call, the median of -r calls after one untimed; the
// reference's of at most 3), and the reference forward's time over the fast forward's. fp32 and
// bf16 numerics on every target; on a CPU with AVX512-BF16 the AVX-512 target's bf16 twice, with the
// dot products (vdpbf16ps) and with their exact emulation. One thread unless -th says otherwise
// (OMP_NUM_THREADS is ignored).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "attention/attention_cpu.h"
#include "attention/attention_fast_cpu.h"
#include "layers/fast_cpu.h"
#include "model/rand.h"
#include "runtime/cli.h"

struct BenchShape {
    int B, T;
};

static std::vector<BenchShape> parse_shapes(const char* s) {
    std::vector<BenchShape> shapes;
    for (const std::string& item : cli_split_commas(s)) {
        int B = 0, T = 0;
        char tail = 0;
        if (sscanf(item.c_str(), "%dx%d%c", &B, &T, &tail) != 2 || B < 1 || T < 1 || (double)B * T > (1 << 24))
            cli_fail(cli_bad_value("-s", s, "expected BxT shapes separated by commas, B and T >= 1 (B T <= 2^24)",
                                   "shapes"));
        shapes.push_back({B, T});
    }
    return shapes;
}

static std::vector<AttnKind> parse_kinds(const char* s) {
    std::vector<AttnKind> kinds;
    for (const std::string& name : cli_split_commas(s)) {
        AttnKind kind;
        if (!attn_kind_from_name(name.c_str(), &kind))
            cli_fail("-a " + std::string(s) + ": '" + name + "' is not a variant; expected " + attn_kind_list());
        kinds.push_back(kind);
    }
    return kinds;
}

// ms per call of f: one untimed call, then the median of reps
template <class F> static double median_ms(int reps, F&& f) {
    f();
    std::vector<double> ms;
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

int main(int argc, char** argv) {
    std::vector<AttnKind> kinds = parse_kinds("softmax,lssar");
    std::vector<BenchShape> shapes = parse_shapes("32x64,8x256,2x1024");
    int hd = 64, NH = 2, reps = 5, threads = 1;
    for (int i = 1; i < argc; i++) {
        std::string f = argv[i];
        if (f == "-h" || i + 1 >= argc) {
            fprintf(f == "-h" ? stdout : stderr,
                    "usage: %s [-a softmax,lssar] [-s 32x64,8x256,2x1024] [-hd 64] [-nh 2] [-r 5] [-th 1]\n"
                    "the fast path's attention on every ISA target this CPU runs, fp32 and bf16 numerics: forward\n"
                    "and forward + backward, ms per call (median of -r calls; the reference's of at most 3), and the\n"
                    "reference path's forward on the same inputs over the fast forward (-a variants, -s BxT shapes,\n"
                    "-th OpenMP threads)\n",
                    argv[0]);
            return f == "-h" ? 0 : 1;
        }
        const char* v = argv[++i];
        if (f == "-a") kinds = parse_kinds(v);
        else if (f == "-s") shapes = parse_shapes(v);
        else if (f == "-hd") hd = (int)cli_parse_int("-hd", v, 1, 1024, "head size");
        else if (f == "-nh") NH = (int)cli_parse_int("-nh", v, 1, 1024, "heads");
        else if (f == "-r") reps = (int)cli_parse_int("-r", v, 1, 1000, "repeats");
        else if (f == "-th") threads = (int)cli_parse_int("-th", v, 1, 1024, "threads");
        else cli_fail("unknown flag " + f + " (" + argv[0] + " -h lists them)");
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    omp_set_num_threads(threads);
    const std::vector<int64_t> targets = fast_cpu_targets();
    printf("cpu targets:");
    for (int64_t t : targets) printf(" %s", fast_cpu_target_name(t));
    printf("; AVX512-BF16 dot products: %s; %d thread%s, NH %d, hd %d, median of %d calls\n",
           fast_cpu_has_bf16_dot() ? "yes" : "no", threads, threads == 1 ? "" : "s", NH, hd, reps);
    for (AttnKind kind : kinds) {
        const double p = attn_variant(kind).test_p;
        for (const BenchShape& sh : shapes) {
            const int C = NH * hd;
            const size_t n_qkv = (size_t)sh.B * sh.T * 3 * C, n_out = (size_t)sh.B * sh.T * C;
            std::vector<float> qkv(n_qkv), out(n_out), dout(n_out), dqkv(n_qkv);
            std::vector<float> stats((size_t)sh.B * NH * sh.T * 3);
            Rng rng(1337);
            for (float& x : qkv) x = rng.normal();
            for (float& x : dout) x = rng.normal();
            const double ref_fwd = median_ms(std::min(reps, 3), [&] {
                ref::attention_forward(out.data(), stats.data(), qkv.data(), sh.B, sh.T, NH, hd, kind, p);
            });
            printf("%s B %d T %d: reference forward %.2f ms\n", attn_kind_name(kind), sh.B, sh.T, ref_fwd);
            for (int64_t target : targets) {
                fast_cpu_force_target(target);
                fast_cpu_allow_bf16_dot(true);
                const bool target_dot = fast_cpu_uses_bf16_dot();
                // fp32; bf16; bf16 with its exact emulation where the target has the dot products
                for (int mode = 0; mode < 3; mode++) {
                    if (mode == 2 && !target_dot) continue;
                    fast_cpu_allow_bf16_dot(mode != 2);
                    const FastNumerics num = mode == 0 ? FastNumerics::fp32 : FastNumerics::bf16;
                    AttentionFast fast;
                    const double fwd = median_ms(reps, [&] {
                        fast.forward(num, out.data(), stats.data(), qkv.data(), sh.B, sh.T, NH, hd, kind, p);
                    });
                    const double both = median_ms(reps, [&] {
                        fast.forward(num, out.data(), stats.data(), qkv.data(), sh.B, sh.T, NH, hd, kind, p);
                        fast.backward(num, dqkv.data(), dout.data(), qkv.data(), sh.B, sh.T, NH, hd, kind, p);
                    });
                    const char* how = num == FastNumerics::fp32 ? "" : fast_cpu_uses_bf16_dot() ? " vdpbf16ps" : " emulated";
                    printf("  %-6s %s%-10s forward %8.2f ms  forward+backward %8.2f ms  reference forward / forward %6.1fx\n",
                           fast_cpu_target_name(target), fast_numerics_name(num), how, fwd, both, ref_fwd / fwd);
                }
            }
            fast_cpu_allow_bf16_dot(true);
            fast_cpu_force_target(0);
        }
    }
    return 0;
}
