// Helpers shared by the dev/ kernel experiments: random bf16 data, device copies, validation
// against a CPU reference, timing and effective bandwidth.
// Built with nvcc (GPU: validate, then benchmark) or with g++ and the SIMT emulator
// (validate on small shapes; no timing, emulated time means nothing).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "layers/floatx.cuh"

#if defined(__CUDACC__)
constexpr bool DEV_EMULATED = false;
#else
constexpr bool DEV_EMULATED = true;
#endif

// Kernel version from argv[1] (default 1 = the product kernel); exits on an unknown one.
inline int dev_version(int argc, char** argv, int num_versions) {
    int v = argc > 1 ? atoi(argv[1]) : 1;
    if (v < 1 || v > num_versions) {
        fprintf(stderr, "usage: %s [version 1..%d]   (1 = the product kernel)\n", argv[0], num_versions);
        exit(EXIT_FAILURE);
    }
    printf("kernel version %d%s\n", v, DEV_EMULATED ? " (emulated: validation only)" : "");
    return v;
}

// n values normal(mean, std), rounded to bf16 so the CPU reference sees what the GPU sees
inline std::vector<float> dev_random(size_t n, unsigned seed, float std = 1.0f, float mean = 0.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(mean, std);
    std::vector<float> x(n);
    for (auto& v : x) { v = __bfloat162float(__float2bfloat16(dist(gen))); }
    return x;
}

template <class T>
inline T* dev_malloc(size_t n) {
    T* p;
    cudaCheck(cudaMalloc((void**)&p, n * sizeof(T)));
    cudaCheck(cudaMemset(p, 0, n * sizeof(T)));
    return p;
}
inline floatX* dev_upload_bf16(const std::vector<float>& x) {
    std::vector<floatX> h(x.size());
    for (size_t i = 0; i < x.size(); i++) { h[i] = __float2bfloat16(x[i]); }
    floatX* d = dev_malloc<floatX>(x.size());
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    return d;
}
template <class T>
inline T* dev_upload(const std::vector<T>& x) {
    T* d = dev_malloc<T>(x.size());
    cudaCheck(cudaMemcpy(d, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
inline std::vector<float> dev_download_bf16(const floatX* d, size_t n) {
    std::vector<floatX> h(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) { x[i] = __bfloat162float(h[i]); }
    return x;
}
inline std::vector<float> dev_download(const float* d, size_t n) {
    std::vector<float> x(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(x.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return x;
}

// Every element within atol + atol_each[i] + rtol * |ref|, or the program exits with the first offenders.
template <class R>
inline void validate_result(const char* name, const std::vector<float>& got, const std::vector<R>& ref, double rtol,
                            double atol, const std::vector<double>& atol_each = {}) {
    size_t bad = 0;
    double max_err = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double err = std::fabs((double)got[i] - (double)ref[i]);
        max_err = std::fmax(max_err, err);
        double tol = atol + (atol_each.empty() ? 0.0 : atol_each[i]) + rtol * std::fabs((double)ref[i]);
        if (!(err <= tol)) {
            if (bad < 5) { printf("  %s[%zu]: got %g, reference %g\n", name, i, got[i], (double)ref[i]); }
            bad++;
        }
    }
    printf("%-12s max abs error %.3g, %zu of %zu outside tolerance\n", name, max_err, bad, got.size());
    if (bad > 0) {
        printf("VALIDATION FAILED\n");
        exit(EXIT_FAILURE);
    }
}

// Largest |x|, for absolute tolerances of results that cancel.
template <class R>
inline double max_abs_of(const std::vector<R>& x) {
    double m = 0;
    for (auto v : x) { m = std::fmax(m, std::fabs((double)v)); }
    return m;
}

// Average milliseconds per call of launch() (one warm-up, then `repeats` timed calls).
template <class F>
inline float benchmark_ms(int repeats, F launch) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    launch();
    cudaCheck(cudaEventRecord(start));
    for (int i = 0; i < repeats; i++) { launch(); }
    cudaCheck(cudaEventRecord(stop));
    cudaCheck(cudaEventSynchronize(stop));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    return ms / repeats;
}

// Times launch() and prints time and effective bandwidth for `bytes` moved per call; no-op emulated.
template <class F>
inline void benchmark_report(const char* name, double bytes, F launch) {
    if (DEV_EMULATED) { return; }
    float ms = benchmark_ms(100, launch);
    printf("%-24s %9.4f ms  %8.1f GB/s\n", name, ms, bytes / ms / 1e6);
}
