// gradcheck_cu_<attn>: one forward and backward of the CUDA back end (model/gpt2_cuda.cuh) against
// the CPU reference (model/gpt2_cpu.h) on the same weights and tokens, at any size: every
// activation and every parameter gradient, as relative L2 errors against bounds derived from bf16.
// Exit status 0 if all are within their bounds, 1 otherwise. For whoever changes a kernel: run it
// on the GPU at the real size (gradcheck_cu_lssar -e d12 -t 1024 -b 2).
//   build/gradcheck_cu_<attn>       nvcc, on a GPU
//   build/gradcheck_cu_emu_<attn>   the same source under the SIMT emulator (test/test_gradcheck.cpp)
//
// The three runs, all from one GPT-2 initialisation w (fp32) and one batch of random tokens:
//   cuda       the CUDA back end: bf16 weights round(w), activations and gradients in bf16
//   reference  the CPU back end in float64 (float32 where two float64 models do not fit in the
//              memory available) on exactly the CUDA back end's weights round(w)
//   twin       the CPU back end in the same precision on w itself: the model's own sensitivity
//              to one bf16 rounding of its weights
// Bound of a tensor = max(FLOOR, SENSITIVITY_FACTOR x the twin's error), as test/test_model_cuda.cu
// argues: the floor is what a dozen 2^-8 roundings per layer and direction leave in a
// well-conditioned model (3e-2 relative L2 for a tensor); the CUDA back end applies a weight-sized
// rounding to the weights (here none: same weights), every activation and every gradient, so it may
// differ from the reference by a few times what one rounding of the weights moves
// (SENSITIVITY_FACTOR = 4). An indexing or wiring error is O(1) of the tensor it touches.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "runtime/cli.h"
#include "model/gpt2_cpu.h"
#include "model/gpt2_cuda.cuh"
#include "model/gpt2_descriptor.h"
#include "model/rand.h"

#ifndef ATTN_NAME
#error "build with -DATTN_NAME='\"softmax\"' (or another variant): eval/eval.mk does"
#endif

constexpr double FLOOR = 3e-2;              // relative L2 error of a tensor that any bf16 run may have
constexpr double SENSITIVITY_FACTOR = 4;    // times the fp32-weights twin's error
constexpr double LOSS_FLOOR = 1e-2;         // mean loss, relative (test/test_model_cuda.cu's figure)

struct Options {
    std::string model = "d12";
    int B = 2, T = 1024;
    float p = 15;
    int learn_p = 0;  // -pl 1: p per layer and head from theta, which gets a gradient like every weight
    long long seed = 1337;
    int precision = 0;  // 64 or 32 bits for the CPU runs; 0: float64 where it fits
    std::string scale_name;  // -scale NAME=F: multiplies the CUDA gradient of NAME by F (shows a wrong one fails)
    double scale = 1;
};

// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
static Options parse_options(int argc, char** argv) {
    Options o;
    CliTable t("[options]", std::string("One forward/backward of the CUDA back end (") + ATTN_NAME +
                                " attention) against the CPU reference on the same\nweights and tokens; prints the "
                                "relative L2 error of every activation and parameter gradient\nagainst its bf16-derived "
                                "bound and exits 1 if one is past it.");
    t.text("-e", &o.model, "<model>", "model descriptor dL[cC][hH][vV] (d12 = GPT-2 124M; head size C/H must be 32, 64 "
           "or 128)")
     .integer("-t", &o.T, 1, 1 << 20, "sequence length T")
     .integer("-b", &o.B, 1, 1 << 16, "batch size B")
     .number("-p", &o.p, 1, 1e6, "re-weighting power (>= 1)")
     .integer("-pl", &o.learn_p, 0, 1, "learned p: 1 (variants with re-weighting): theta per layer and head, p = 1 + "
              "softplus(theta) starting at -p (> 1); its gradient dptheta is compared with the others")
     .integer("-rs", &o.seed, 0, 1LL << 62, "seed of the weights and tokens")
     .custom("-f", "<64|32>", "CPU precision in bits (default: 64 where two float64 models fit in memory, else 32)",
             "16", [&o](const char* v) {
                 o.precision = (int)cli_parse_int("-f", v, 1, 128, "CPU precision in bits");
                 if (o.precision != 32 && o.precision != 64) cli_fail(std::string("-f ") + v + ": expected 64 or 32");
             })
     .custom("-scale", "<NAME=F>", "deliberately wrong gradient: multiply the CUDA gradient of tensor NAME (wte, qkvw, "
             "..., lnfb, ptheta) by F before comparing; the check must report it", "lnfw", [&o](const char* v) {
                 const char* eq = strchr(v, '=');
                 char* end = nullptr;
                 if (eq) o.scale = strtod(eq + 1, &end);
                 if (!eq || !end || *end || eq == v)
                     cli_fail(std::string("-scale ") + v + ": expected NAME=FACTOR, like lnfw=1.5");
                 o.scale_name.assign(v, eq - v);
             });
    t.parse(argc, argv);
    return o;
}

static int param_tensor_index(const std::string& name) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (name == param_tensor_name(i)) return i;
    std::string all;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) all += std::string(i ? ", " : "") + param_tensor_name(i);
    cli_fail("-scale " + name + ": no such parameter tensor (" + all + ")");
}

// ----------------------------------------------------------------------------
// comparisons

struct Verdict {
    int checked = 0, failed = 0;
    double worst_margin = 0;  // largest error / bound
};

// ||a - ref|| / ||ref|| over n values taken every `stride` from `count` rows of `width` (logits: V of Vp)
template <class A, class R>
static double rel_l2(const A* a, const R* ref, size_t rows, size_t width, size_t stride) {
    double d = 0, r = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < width; j++) {
            double x = (double)a[i * stride + j], y = (double)ref[i * stride + j];
            d += (x - y) * (x - y);
            r += y * y;
        }
    return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
}

static void report(Verdict& v, const char* kind, const std::string& name, size_t n, double err, double twin) {
    double bound = std::max(FLOOR, SENSITIVITY_FACTOR * twin);
    bool ok = err <= bound && std::isfinite(err);
    v.checked++;
    if (!ok) v.failed++;
    v.worst_margin = std::max(v.worst_margin, std::isfinite(err) ? err / bound : INFINITY);
    printf("%-10s %-10s %11zu  %10.3e  %10.3e  %10.3e  %s\n", kind, name.c_str(), n, err, twin, bound,
           ok ? "ok" : "FAILED");
}

// ----------------------------------------------------------------------------
// the device's activations on the host (double), in the CPU model's layout

static std::vector<double> download(const floatX* d, size_t n) {
    std::vector<floatX> bits(n);
    cudaCheck(cudaMemcpy(bits.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<double> out(n);
    for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(bits[i]);
    return out;
}
static std::vector<double> download(const float* d, size_t n) {
    std::vector<float> f(n);
    cudaCheck(cudaMemcpy(f.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return std::vector<double>(f.begin(), f.end());
}

struct ActView {
    const char* name;
    int cpu_index;      // position in Activations<F>
    std::vector<double> cuda;
};

// the activations both back ends keep (the CPU's pre-RoPE qkv, attproj and fcproj have no CUDA copy)
static std::vector<ActView> cuda_activations(const GPT2Cuda& g, const size_t* sizes) {
    const GPT2CudaActivations& a = g.acts;
    std::vector<ActView> v;
    auto add = [&](const char* name, int idx, std::vector<double> x) { v.push_back({name, idx, std::move(x)}); };
    add("encoded", 0, download(a.encoded, sizes[0]));
    add("ln1", 1, download(a.ln1, sizes[1]));
    add("ln1_mean", 2, download(a.ln1_mean, sizes[2]));
    add("ln1_rstd", 3, download(a.ln1_rstd, sizes[3]));
    add("qkvr", 5, download(a.qkvr, sizes[5]));
    add("atty", 6, download(a.atty, sizes[6]));
    add("attstats", 7, download(a.attstats, sizes[7]));
    add("residual2", 9, download(a.residual2, sizes[9]));
    add("ln2", 10, download(a.ln2, sizes[10]));
    add("ln2_mean", 11, download(a.ln2_mean, sizes[11]));
    add("ln2_rstd", 12, download(a.ln2_rstd, sizes[12]));
    add("fch", 13, download(a.fch, sizes[13]));
    add("fch_gelu", 14, download(a.fch_gelu, sizes[14]));
    add("residual3", 16, download(a.residual3, sizes[16]));
    add("lnf", 17, download(a.lnf, sizes[17]));
    add("lnf_mean", 18, download(a.lnf_mean, sizes[18]));
    add("lnf_rstd", 19, download(a.lnf_rstd, sizes[19]));
    add("logits", 20, download(a.logits, sizes[20]));
    add("losses", 21, download(a.losses, sizes[21]));
    return v;
}

// ----------------------------------------------------------------------------
// the check in CPU precision F

template <class F>
static int run_check(const Options& o, const GPT2Config& config) {
    auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&]() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    int B = o.B, T = o.T, V = config.vocab_size, Vp = config.padded_vocab_size;
    std::vector<int> inputs((size_t)B * T), targets((size_t)B * T);
    Rng rng((uint64_t)o.seed + 1);
    for (size_t i = 0; i < inputs.size(); i++) {
        inputs[i] = (int)(rng.next_u64() % V);
        targets[i] = (int)(rng.next_u64() % V);
    }

    // CUDA back end: forward (activations kept), backward
    GPT2Cuda gpu(config);
    gpu.init((uint64_t)o.seed);
    float loss_cuda = gpu.forward(inputs.data(), targets.data(), B, T);
    ActivationTensors<size_t> named_sizes = gpt2_activation_sizes(config, B, T);
    const size_t* sizes = (const size_t*)&named_sizes;  // in the order of the fields
    std::vector<ActView> acts = cuda_activations(gpu, sizes);
    gpu.zero_grad();
    gpu.backward(1.0f);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<double> grads_cuda = download(gpu.grads_memory, gpu.num_parameters);
    std::vector<double> weights_cuda = download(gpu.params_memory, gpu.num_parameters);
    printf("cuda back end: loss %.6f, forward + backward done (%.1f s)\n", loss_cuda, seconds());

    // the reference on the CUDA back end's weights, the twin on the unrounded ones
    GPT2<F> ref(config), twin(config);
    for (size_t i = 0; i < ref.num_parameters; i++) ref.params[i] = (F)weights_cuda[i];
    twin.init((uint64_t)o.seed);
    double loss_ref = ref.forward(inputs.data(), targets.data(), B, T);
    ref.zero_grad();
    ref.backward(F(1));
    printf("cpu reference (float%zu): loss %.6f (%.1f s)\n", 8 * sizeof(F), loss_ref, seconds());
    double loss_twin = twin.forward(inputs.data(), targets.data(), B, T);
    twin.zero_grad();
    twin.backward(F(1));
    printf("cpu twin on the fp32 weights: loss %.6f (%.1f s)\n\n", loss_twin, seconds());

    int scaled = o.scale_name.empty() ? -1 : param_tensor_index(o.scale_name);
    if (scaled >= 0) {
        printf("-scale %s=%g: the CUDA gradient of %s is multiplied by %g before the comparison\n\n",
               o.scale_name.c_str(), o.scale, o.scale_name.c_str(), o.scale);
        for (size_t i = 0; i < gpu.param_sizes[scaled]; i++) grads_cuda[gpu.param_offsets[scaled] + i] *= o.scale;
    }

    Verdict v;
    printf("%-10s %-10s %11s  %10s  %10s  %10s\n", "what", "tensor", "elements", "rel. L2", "twin", "bound");
    double loss_err = std::fabs(loss_cuda - loss_ref) / std::fabs(loss_ref);
    double loss_twin_err = std::fabs(loss_twin - loss_ref) / std::fabs(loss_ref);
    double loss_bound = std::max(LOSS_FLOOR, SENSITIVITY_FACTOR * loss_twin_err);
    bool loss_ok = loss_err <= loss_bound;
    v.checked++;
    v.failed += !loss_ok;
    printf("%-10s %-10s %11d  %10.3e  %10.3e  %10.3e  %s\n", "loss", "mean", 1, loss_err, loss_twin_err, loss_bound,
           loss_ok ? "ok" : "FAILED");
    F** ref_acts = (F**)&ref.acts;
    F** twin_acts = (F**)&twin.acts;
    for (const ActView& a : acts) {
        // logits: the V real columns of each (B*T) row of Vp
        bool logits = strcmp(a.name, "logits") == 0;
        size_t rows = logits ? (size_t)B * T : a.cuda.size(), width = logits ? V : 1, stride = logits ? Vp : 1;
        double err = rel_l2(a.cuda.data(), ref_acts[a.cpu_index], rows, width, stride);
        double twin_err = rel_l2(twin_acts[a.cpu_index], ref_acts[a.cpu_index], rows, width, stride);
        report(v, "activation", a.name, rows * width, err, twin_err);
    }
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = ref.param_offsets[i], n = ref.param_sizes[i];
        if (n == 0) continue;  // a tensor this config has no elements of (ptheta unless p is learned, ssmax_s)
        double err = rel_l2(grads_cuda.data() + off, ref.grads.data() + off, n, 1, 1);
        double twin_err = rel_l2(twin.grads.data() + off, ref.grads.data() + off, n, 1, 1);
        report(v, "gradient", std::string("d") + param_tensor_name(i), n, err, twin_err);
    }
    printf("\n%s: %d of %d tensors within their bounds, worst at %.2f of its bound (%.1f s)\n",
           v.failed ? "FAILED" : "passed", v.checked - v.failed, v.checked, v.worst_margin, seconds());
    return v.failed ? 1 : 0;
}

// bytes of one CPU model of precision `bytes_per_value` at (B, T): parameters, gradients, activations and theirs
static double cpu_model_bytes(const GPT2Config& c, int B, int T, size_t bytes_per_value) {
    size_t psizes[NUM_PARAM_TENSORS], n = 0;
    gpt2_param_sizes(psizes, c);
    ActivationTensors<size_t> named_sizes = gpt2_activation_sizes(c, B, T);
    const size_t* asizes = (const size_t*)&named_sizes;
    for (size_t s : psizes) n += 2 * s;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) n += 2 * asizes[i];
    return (double)n * bytes_per_value;
}

static double available_bytes() {
    FILE* f = fopen("/proc/meminfo", "r");
    double kib = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib > 0 ? kib * 1024 : (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE) / 2;
}

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    GPT2Config config;
    std::string err;
    if (!gpt2_parse_descriptor(o.model, &config, &err))
        cli_fail("-e " + o.model + ": not a model descriptor dL[cC][hH][vV] (like d12 or d2c64h2v97)");
    if (!err.empty()) cli_fail("-e " + o.model + ": " + err);
    config.max_seq_len = o.T;
    attn_kind_from_name(ATTN_NAME, &config.attn);
    config.p = o.p;
    config.learn_p = o.learn_p;
    if (o.learn_p && !attn_reweights(config.attn))
        cli_fail(std::string("-pl 1: ") + ATTN_NAME + " attention has no re-weighting, so there is no p to learn");
    if (o.learn_p && !(o.p > 1)) {
        char msg[160];
        snprintf(msg, sizeof msg, "-pl 1 with -p %g: learned p = 1 + softplus(theta) starts at -p, which must be > 1", o.p);
        cli_fail(msg);
    }
    err = gpt2_cuda_config_error(config);
    if (err.empty()) err = gpt2_config_error(config);
    if (!err.empty()) cli_fail("-e " + o.model + ": " + err);
    double need64 = 2 * cpu_model_bytes(config, o.B, o.T, 8), avail = available_bytes();
    int bits = o.precision ? o.precision : (need64 < 0.8 * avail ? 64 : 32);
    char power[64] = "";
    if (attn_reweights(config.attn))
        snprintf(power, sizeof power, config.learn_p ? " p learned per layer and head from %g" : " p %g", o.p);
    else if (attn_head_param(config.attn) == ATTN_HEAD_S)
        snprintf(power, sizeof power, " s learned per layer and head from %g", SSMAX_S0);
    printf("gradcheck: %s attention%s, %d layers, %d heads, %d channels, vocab %d, B %d x T %d; CPU in float%d "
           "(two float64 models need %.1f GiB, %.1f GiB available)\n",
           ATTN_NAME, power, config.num_layers,
           config.num_heads, config.channels, config.vocab_size, o.B, o.T, bits, need64 / (1 << 30),
           avail / (1 << 30));
    return bits == 64 ? run_check<double>(o, config) : run_check<float>(o, config);
}
