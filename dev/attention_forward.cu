/*
Attention forward kernels (attention/attention.cuh): validation against the CPU reference and a
benchmark, with the project's softmax kernel as the baseline in the same run.

Compile:  make build/attention_forward
Run:      ./build/attention_forward [variant] [-p P] [-hd HD] [-nh NH] [-tokens N] [-check | -bench] [-T t1,t2,..]
  variant   a variant of attention/attention_kind.h (softmax, lssa, lssar, sigmoid, relu, softmax_rw,
            sigmoid_l1_rw, relu_l1_rw, ssmax) | all (default all)
  -p        the re-weighting power, ssmax's s (default 15)
  -hd       head size 32 | 64 | 128 (default 64);  -nh heads (default 12, GPT-2 small)
  -tokens   B*T of every benchmark shape (default 16384: B = tokens / T, at least 1)
  -check    only validate (B=1, NH=2, T=300 against the float64 CPU reference)
  -bench    only benchmark, T in {1K, 2K, 4K, 8K, 16K} unless -T says otherwise

FLOP/s count the nominal causal attention work of softmax for every variant (two matmuls over
half of the T x T scores: 2 B NH T^2 hd), so the TFLOP/s ratio between variants is the inverse
time ratio.

Where cuDNN is installed the nvcc build defines ATTN_DEV_CUDNN (dev/dev.mk) and the
benchmark adds cuDNN's flash attention (attention/attention_cudnn.h) as a row "cudnn", checked against
the softmax kernel on the same inputs before it is timed, and a line of ratios per T:
softmax/cuDNN and lssar/softmax (times).

dev/attention_backward.cu includes this file for its helpers (ATTN_DEV_NO_MAIN).
*/
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "attention/attention.cuh"
#include "attention/attention_cpu.h"
#include "runtime/cli.h"

// ----------------------------------------------------------------------------
// options and inputs

// Every variant of the family, in attention/attention_kind.h's order.
inline std::vector<AttnKind> all_kinds() {
    std::vector<AttnKind> kinds;
    for (const AttnVariant& v : ATTN_VARIANT_TABLE) kinds.push_back(v.kind);
    return kinds;
}

struct DevOptions {
    std::vector<AttnKind> kinds = all_kinds();
    float p = 15.0f;
    int hd = 64, nh = 12, tokens = 16384;
    bool check = true, bench = true;
    std::vector<int> lengths{1024, 2048, 4096, 8192, 16384};
};

inline DevOptions dev_parse_args(int argc, char** argv, const char* prog) {
    DevOptions o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) { fprintf(stderr, "%s: %s needs a value\n", prog, a.c_str()); exit(EXIT_FAILURE); }
            return argv[++i];
        };
        AttnKind k;
        if (a == "all") { o.kinds = all_kinds(); }
        else if (attn_kind_from_name(a.c_str(), &k)) { o.kinds = {k}; }
        else if (a == "-p") { o.p = (float)atof(next()); }
        else if (a == "-hd") { o.hd = atoi(next()); }
        else if (a == "-nh") { o.nh = atoi(next()); }
        else if (a == "-tokens") { o.tokens = atoi(next()); }
        else if (a == "-check") { o.bench = false; }
        else if (a == "-bench") { o.check = false; }
        else if (a == "-T") {
            o.lengths.clear();
            for (long long t : cli_parse_int_list("-T", next(), 1, 1 << 20, 32, "sequence lengths", "1024,4096"))
                o.lengths.push_back((int)t);
        } else {
            fprintf(stderr, "%s: unknown argument '%s'; usage: %s [<variant>|all] [-p P] [-hd HD] "
                            "[-nh NH] [-tokens N] [-check|-bench] [-T t1,t2,..]\n", prog, a.c_str(), prog);
            exit(EXIT_FAILURE);
        }
    }
    return o;
}

// bf16 inputs (as floats, exactly representable) of normal(0, 1) entries
inline std::vector<float> dev_random_bf16(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (auto& v : x) v = (float)(floatX)normal(gen);
    return x;
}

template <class T> T* dev_upload_bf16(const std::vector<float>& x) {
    std::vector<floatX> h(x.begin(), x.end());
    T* d;
    cudaCheck(cudaMalloc(&d, h.size() * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    return d;
}
// One attention problem on the device: random bf16 qkv (B,T,3,NH,hd) and, for the backward, dout
// (B,T,NH,hd) from the given seeds, kept on the host too; out (B,T,NH,hd), stats (B,NH,T,3),
// scratch, and dqkv for the backward. Freed on destruction.
struct DevAttnBuffers {
    std::vector<float> qkv, dout;
    floatX *d_qkv = nullptr, *d_dout = nullptr, *d_out = nullptr, *d_dqkv = nullptr;
    float* d_stats = nullptr;
    void* scratch = nullptr;

    // dout_seed 0: forward only (no dout, no dqkv)
    DevAttnBuffers(int B, int T, int NH, int hd, unsigned qkv_seed, unsigned dout_seed = 0) {
        size_t BTC = (size_t)B * T * NH * hd;
        qkv = dev_random_bf16(3 * BTC, qkv_seed);
        d_qkv = dev_upload_bf16<floatX>(qkv);
        cudaCheck(cudaMalloc(&d_out, BTC * sizeof(floatX)));
        cudaCheck(cudaMalloc(&d_stats, (size_t)B * NH * T * 3 * sizeof(float)));
        cudaCheck(cudaMalloc(&scratch, attention_scratch_bytes(B, T, NH, hd)));
        if (dout_seed != 0) {
            dout = dev_random_bf16(BTC, dout_seed);
            d_dout = dev_upload_bf16<floatX>(dout);
            cudaCheck(cudaMalloc(&d_dqkv, 3 * BTC * sizeof(floatX)));
        }
    }
    DevAttnBuffers(const DevAttnBuffers&) = delete;
    DevAttnBuffers& operator=(const DevAttnBuffers&) = delete;
    ~DevAttnBuffers() {
        for (void* p : {(void*)d_qkv, (void*)d_dout, (void*)d_out, (void*)d_dqkv, (void*)d_stats, scratch})
            if (p != nullptr) cudaFree(p);
    }
};

inline std::vector<float> dev_download_bf16(const floatX* d, size_t n) {
    std::vector<floatX> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    return std::vector<float>(h.begin(), h.end());
}

// max |a - ref| / max |ref|
inline double dev_rel_err(const std::vector<float>& a, const std::vector<double>& ref) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < a.size(); i++) {
        err = std::max(err, std::fabs((double)a[i] - ref[i]));
        scale = std::max(scale, std::fabs(ref[i]));
        if (!std::isfinite(a[i])) return INFINITY;
    }
    return scale > 0 ? err / scale : err;
}

// Times fn (already warmed up) with CUDA events: milliseconds per call, median of `reps`.
template <class F> float dev_time_ms(F fn, int reps = 10) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        cudaCheck(cudaEventRecord(start));
        fn();
        cudaCheck(cudaEventRecord(stop));
        cudaCheck(cudaEventSynchronize(stop));
        float t;
        cudaCheck(cudaEventElapsedTime(&t, start, stop));
        ms.push_back(t);
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// nominal FLOPs of causal attention forward: two matmuls over half the scores
inline double dev_forward_flops(int B, int NH, int T, int hd) { return 2.0 * B * NH * (double)T * T * hd; }

// ----------------------------------------------------------------------------
// cuDNN's flash attention as a baseline (attention/attention_cudnn.h, built where cuDNN is installed).
// Before it is timed at a shape, its output is checked against the project's softmax kernel on
// the same inputs, so a wrong graph never reports a time.

#ifdef ATTN_DEV_CUDNN
#include "attention/attention_cudnn.h"

struct DevCudnnResult {
    bool timed = false;        // checked against the softmax kernel, then timed
    std::string note;          // the check's errors, or why cuDNN did not run
    float ms = 0, total_ms = 0;  // forward: ms; backward: backward ms and forward+backward ms
};
inline bool& dev_cudnn_check_failed() {  // a check failed: the program exits with status 1
    static bool failed = false;
    return failed;
}

inline std::vector<float> dev_download_f32(const float* d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

// max|a - ref| / max|ref| over part `part` (0 q, 1 k, 2 v) of two (B*T, 3, C) tensors
inline double dev_part_rel_err(const std::vector<float>& a, const std::vector<float>& ref, int BT, int C, int part) {
    std::vector<float> a_part;
    std::vector<double> ref_part;
    for (int bt = 0; bt < BT; bt++)
        for (int c = 0; c < C; c++) {
            a_part.push_back(a[((size_t)bt * 3 + part) * C + c]);
            ref_part.push_back(ref[((size_t)bt * 3 + part) * C + c]);
        }
    return dev_rel_err(a_part, ref_part);
}

// cuDNN forward at this shape: checked against the softmax kernel's out and stats (still in
// d_out, d_stats from its timing runs), then timed.
inline DevCudnnResult dev_cudnn_forward(const floatX* d_qkv, const floatX* d_out, const float* d_stats, int B, int T,
                                        int NH, int hd) {
    DevCudnnResult r;
    size_t rows = (size_t)B * NH * T, C = (size_t)NH * hd;
    floatX* c_out;
    float* c_stats;
    cudaCheck(cudaMalloc(&c_out, (size_t)B * T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&c_stats, rows * sizeof(float)));
    auto fn = [&]() { return cudnn_attention_forward(c_out, c_stats, d_qkv, B, T, NH, hd); };
    if (!fn()) {
        r.note = "not run: " + cudnn_attention_error();
    } else {
        cudaCheck(cudaDeviceSynchronize());
        std::vector<float> ref = dev_download_bf16(d_out, (size_t)B * T * C);
        double out_err = dev_rel_err(dev_download_bf16(c_out, ref.size()), std::vector<double>(ref.begin(), ref.end()));
        std::vector<float> lse = dev_download_f32(c_stats, rows), stats = dev_download_f32(d_stats, rows * 3);
        double lse_err = 0;
        for (size_t i = 0; i < rows; i++) {  // cuDNN's lse is natural, the kernel's in log2 units
            double d = std::fabs((double)lse[i] - stats[i * 3] * M_LN2);
            lse_err = std::isfinite(d) ? std::max(lse_err, d) : INFINITY;
        }
        // out: each kernel is within 1/64 of max|out| of the exact result (bf16 P and bf16 output,
        // 2^-8 relative each; the bound dev -check and test/test_attention_cuda.cu hold the softmax
        // kernel to), so the two differ by at most 2/64.
        // lse: fp32 in both, from the same bf16 q, k; the sum over up to 16K exponentials in fp32
        // moves log Z by at most ~T * 2^-24 = 1e-3; a wrong scale or mask moves it by O(1).
        bool ok = out_err <= 2.0 / 64 && lse_err <= 1e-2;
        char buf[160];
        snprintf(buf, sizeof(buf), "check vs softmax kernel: out %.2e (<= %.2e), lse %.2e (<= 1e-2) %s", out_err,
                 2.0 / 64, lse_err, ok ? "OK" : "FAIL");
        r.note = std::string(buf) + "; " + cudnn_attention_plan_info(false, B, T, NH, hd);
        if (ok) {
            r.ms = dev_time_ms([&]() { fn(); });
            r.timed = true;
        } else {
            dev_cudnn_check_failed() = true;
        }
    }
    cudaCheck(cudaFree(c_out));
    cudaCheck(cudaFree(c_stats));
    return r;
}

// "softmax/cuDNN" and "lssar/softmax" time ratios, "-" where one side did not run
inline std::string dev_ratio(float num, float den) {
    if (!(num > 0) || !(den > 0)) return "-";
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f", num / den);
    return buf;
}
#endif

// ----------------------------------------------------------------------------

#ifndef ATTN_DEV_NO_MAIN
static void validate_forward(const DevOptions& o) {
    const int B = 1, NH = 2, T = 300, hd = o.hd, C = NH * hd;
    DevAttnBuffers buf(B, T, NH, hd, 1);
    const std::vector<float>& qkv = buf.qkv;
    floatX *d_qkv = buf.d_qkv, *d_out = buf.d_out;
    float* d_stats = buf.d_stats;
    void* scratch = buf.scratch;
    std::vector<double> qkv_d(qkv.begin(), qkv.end()), out_ref((size_t)B * T * C), stats_ref((size_t)B * NH * T * 3);
    for (AttnKind kind : o.kinds) {
        ref::attention_forward(out_ref.data(), stats_ref.data(), qkv_d.data(), B, T, NH, hd, kind, (double)o.p);
        attention_forward_cuda(d_out, d_stats, d_qkv, scratch, B, T, NH, hd, kind, o.p);
        cudaCheck(cudaDeviceSynchronize());
        double err = dev_rel_err(dev_download_bf16(d_out, out_ref.size()), out_ref);
        // bf16 weights and output: ~2^-8 relative; test/test_attention_cuda.cu holds the exact bounds
        bool ok = err <= 1.0 / 64;
        printf("validate %-13s hd=%d T=%d p=%g: max|y - ref| / max|ref| = %.2e  %s\n", attn_kind_name(kind), hd, T,
               o.p, err, ok ? "OK" : "FAIL");
        if (!ok) exit(EXIT_FAILURE);
    }
}

static void bench_forward(const DevOptions& o) {
    printf("\nforward, hd=%d NH=%d, B*T=%d, p=%g  (ms, TFLOP/s at 2 B NH T^2 hd)\n", o.hd, o.nh, o.tokens, o.p);
    printf("%6s %3s  %-13s %9s %8s %10s\n", "T", "B", "kernel", "ms", "TFLOP/s", "vs softmax");
    for (int T : o.lengths) {
        int B = std::max(1, o.tokens / T), NH = o.nh, hd = o.hd;
        DevAttnBuffers buf(B, T, NH, hd, 2);
        floatX *d_qkv = buf.d_qkv, *d_out = buf.d_out;
        float* d_stats = buf.d_stats;
        void* scratch = buf.scratch;
        double flops = dev_forward_flops(B, NH, T, hd);
        auto run = [&](AttnKind kind) {
            auto fn = [&]() { attention_forward_cuda(d_out, d_stats, d_qkv, scratch, B, T, NH, hd, kind, o.p); };
            fn();
            cudaCheck(cudaDeviceSynchronize());
            return dev_time_ms(fn);
        };
        float softmax_ms = run(ATTN_SOFTMAX);
#ifdef ATTN_DEV_CUDNN
        DevCudnnResult cudnn = dev_cudnn_forward(d_qkv, d_out, d_stats, B, T, NH, hd);
        float lssar_ms = 0;
#endif
        for (AttnKind kind : all_kinds()) {
            bool wanted = false;
            for (AttnKind k : o.kinds) wanted |= k == kind;
            if (!wanted && kind != ATTN_SOFTMAX) continue;
            float ms = kind == ATTN_SOFTMAX ? softmax_ms : run(kind);
            printf("%6d %3d  %-13s %9.3f %8.1f %10.2f\n", T, B, attn_kind_name(kind), ms, flops / ms * 1e-9,
                   ms / softmax_ms);
#ifdef ATTN_DEV_CUDNN
            if (kind == ATTN_LSSAR) lssar_ms = ms;
#endif
        }
#ifdef ATTN_DEV_CUDNN
        if (cudnn.timed) {
            printf("%6d %3d  %-13s %9.3f %8.1f %10.2f\n", T, B, "cudnn", cudnn.ms, flops / cudnn.ms * 1e-9,
                   cudnn.ms / softmax_ms);
        }
        printf("cudnn  T=%d: %s\n", T, cudnn.note.c_str());
        printf("ratios T=%d forward: softmax/cuDNN %s  lssar/softmax %s\n", T,
               dev_ratio(softmax_ms, cudnn.timed ? cudnn.ms : 0).c_str(), dev_ratio(lssar_ms, softmax_ms).c_str());
#endif
    }
}

int main(int argc, char** argv) {
    DevOptions o = dev_parse_args(argc, argv, "attention_forward");
    if (o.check) validate_forward(o);
    if (o.bench) bench_forward(o);
#ifdef ATTN_DEV_CUDNN
    cudnn_attention_free();
    if (dev_cudnn_check_failed()) return EXIT_FAILURE;
#endif
    return 0;
}
#endif
