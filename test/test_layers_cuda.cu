// Every non-attention CUDA layer kernel (layers/*.cuh) against its CPU reference (layers/*_cpu.h),
// rung 3 of the correctness ladder. Runs emulated (g++ + simt/) and, unchanged, on a GPU (nvcc).
// The references run in double on the same bf16-rounded inputs the kernels see, so the only
// differences are the kernels' fp32 arithmetic and the rounding of their bf16 outputs.
// Shapes are deliberately not multiples of block or tile sizes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "layers/adamw.cuh"
#include "layers/classifier.cuh"
#include "layers/encoder.cuh"
#include "layers/gelu.cuh"
#include "layers/global_norm.cuh"
#include "layers/layernorm.cuh"
#include "layers/matmul.cuh"
#include "layers/residual.cuh"
#include "layers/rope.cuh"

#include "layers/adamw_cpu.h"
#include "layers/classifier_cpu.h"
#include "layers/encoder_cpu.h"
#include "layers/gelu_cpu.h"
#include "layers/global_norm_cpu.h"
#include "layers/layernorm_cpu.h"
#include "layers/matmul_cpu.h"
#include "layers/residual_cpu.h"
#include "layers/rope_cpu.h"

// Tolerances. A bf16 output rounded to nearest is within 2^-9 (0.2%) of its fp32 value; the GPU
// build's fast-math intrinsics (__expf, tanh.approx, rsqrt) add up to ~2^-11 relative, and fused
// paths store one or two bf16 intermediates. 1e-2 relative (about five bf16 ulps) covers that with
// margin; any indexing or formula error is O(1). Where a result cancels (sums of signed terms)
// its fp32 rounding is relative to the terms, not the result, hence an absolute term scaled by
// the largest reference value.
constexpr double BF16_RTOL = 1e-2;
constexpr double CANCEL_ATOL = 1e-3;  // times max |reference|

#if defined(__CUDACC__)
static const bool ON_GPU = true;
#else
static const bool ON_GPU = false;
#endif

// ----------------------------------------------------------------------------
// helpers

static float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

// n values normal(mean, std), rounded to bf16 so host and device see the same numbers
static std::vector<float> random_bf16(size_t n, std::mt19937& gen, float std = 1.0f, float mean = 0.0f) {
    std::normal_distribution<float> dist(mean, std);
    std::vector<float> x(n);
    for (auto& v : x) { v = round_bf16(dist(gen)); }
    return x;
}

static std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

template <class T>
struct DeviceBuffer {
    T* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) {
        cudaCheck(cudaMalloc((void**)&ptr, count * sizeof(T)));
        cudaCheck(cudaMemset(ptr, 0, count * sizeof(T)));
    }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// floatX buffer holding x (exact: x is already bf16-rounded)
static void upload_bf16(floatX* dst, const std::vector<float>& x) {
    std::vector<floatX> h(x.size());
    for (size_t i = 0; i < x.size(); i++) { h[i] = __float2bfloat16(x[i]); }
    cudaCheck(cudaMemcpy(dst, h.data(), h.size() * sizeof(floatX), cudaMemcpyHostToDevice));
}
static std::vector<float> download_bf16(const floatX* src, size_t n) {
    std::vector<floatX> h(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h.data(), src, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) { x[i] = __bfloat162float(h[i]); }
    return x;
}
template <class T>
static void upload(T* dst, const std::vector<T>& x) {
    cudaCheck(cudaMemcpy(dst, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
static std::vector<T> download(const T* src, size_t n) {
    std::vector<T> x(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(x.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
    return x;
}

static double max_abs(const std::vector<double>& x) {
    double m = 0;
    for (double v : x) { m = std::fmax(m, std::fabs(v)); }
    return m;
}

// Checks |got - ref| <= atol + atol_each[i] + rtol * |ref| elementwise; reports the first offenders.
static void check_close(const char* what, const std::vector<float>& got, const std::vector<double>& ref, double rtol,
                        double atol, const std::vector<double>& atol_each = {}) {
    REQUIRE(got.size() == ref.size());
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double err = std::fabs((double)got[i] - ref[i]);
        double tol = atol + (atol_each.empty() ? 0.0 : atol_each[i]) + rtol * std::fabs(ref[i]);
        worst = std::fmax(worst, err / tol);
        if (!(err <= tol)) {
            if (bad < 5) { MESSAGE(what << "[" << i << "]: got " << got[i] << ", reference " << ref[i]); }
            bad++;
        }
    }
    INFO(what << ": " << bad << " of " << got.size() << " outside tolerance; worst error/tolerance " << worst);
    CHECK(bad == 0);
}

// GELU's tanh: on a GPU (fast math) tanhf is tanh.approx.f32, max relative error 2^-11, i.e. an
// absolute error up to 2^-11 since |tanh| <= 1; allow 2^-10. Where tanh -> -1 (x < -2) the
// result 0.5 x (1 + tanh) cancels, so this error is absolute, scaled by the factor it meets:
//   gelu:  0.5 |x| * err            gelu' * dout:  (0.5 + |x| |du/dx|) * err * |dout|
constexpr double TANH_ERR = 1.0 / 1024;
static std::vector<double> gelu_tolerance(const std::vector<double>& x) {
    std::vector<double> tol(x.size());
    for (size_t i = 0; i < x.size(); i++) { tol[i] = 0.5 * std::fabs(x[i]) * TANH_ERR; }
    return tol;
}
static std::vector<double> gelu_backward_tolerance(const std::vector<double>& x, const std::vector<double>& dout) {
    std::vector<double> tol(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        double du = 0.7978845608028654 * (1.0 + 3 * 0.044715 * x[i] * x[i]);
        tol[i] = (0.5 + std::fabs(x[i]) * du) * TANH_ERR * std::fabs(dout[i]);
    }
    return tol;
}

// ----------------------------------------------------------------------------
// encoder

TEST_CASE("encoder forward gathers wte rows exactly") {
    const int B = 2, T = 7, C = 40, Vp = 64, V = 61;
    std::mt19937 gen(1);
    std::vector<float> wte = random_bf16((size_t)Vp * C, gen);
    std::vector<int> inp(B * T);
    for (auto& t : inp) { t = (int)(gen() % V); }
    DeviceBuffer<floatX> d_wte(wte.size()), d_out((size_t)B * T * C);
    DeviceBuffer<int> d_inp(inp.size());
    upload_bf16(d_wte.ptr, wte);
    upload(d_inp.ptr, inp);
    encoder_forward(d_out.ptr, d_inp.ptr, d_wte.ptr, B, T, C, 0);
    std::vector<double> ref((size_t)B * T * C);
    std::vector<double> wte_d = to_double(wte);
    ref::encoder_forward(ref.data(), inp.data(), wte_d.data(), B, T, C);
    check_close("out", download_bf16(d_out.ptr, ref.size()), ref, 0.0, 0.0);  // a copy: exact
}

TEST_CASE("encoder backward scatter-adds deterministically") {
    const int B = 2, T = 7, C = 72, Vp = 64;
    std::mt19937 gen(2);
    std::vector<int> inp(B * T);
    for (auto& t : inp) { t = (int)(gen() % 5) * 7; }  // few distinct tokens: many repeats per bucket
    inp[3] = Vp - 1;                                       // the last row is reachable too
    std::vector<float> dout = random_bf16((size_t)B * T * C, gen);
    std::vector<float> dwte0 = random_bf16((size_t)Vp * C, gen, 0.1f);  // backward accumulates (+=)
    DeviceBuffer<floatX> d_dwte(dwte0.size()), d_dout(dout.size());
    DeviceBuffer<int> d_work(encoder_backward_workspace_ints(B, T));
    upload_bf16(d_dout.ptr, dout);
    upload_bf16(d_dwte.ptr, dwte0);
    encoder_backward(d_dwte.ptr, d_work.ptr, d_dout.ptr, inp.data(), B, T, C, 0);
    std::vector<float> got = download_bf16(d_dwte.ptr, dwte0.size());

    std::vector<double> ref = to_double(dwte0), dout_d = to_double(dout);
    ref::encoder_backward(ref.data(), dout_d.data(), inp.data(), B, T, C);
    // fp32 sums of a few signed terms, one bf16 rounding: BF16_RTOL, plus cancellation
    check_close("dwte", got, ref, BF16_RTOL, CANCEL_ATOL * max_abs(ref));
    // rows of tokens absent from inp are untouched, bit for bit
    for (int v = 0; v < Vp; v++) {
        bool present = false;
        for (int t : inp) { present |= t == v; }
        if (!present) {
            for (int c = 0; c < C; c++) { REQUIRE(got[(size_t)v * C + c] == dwte0[(size_t)v * C + c]); }
        }
    }
    // determinism: a second run from the same start gives the same bits
    upload_bf16(d_dwte.ptr, dwte0);
    encoder_backward(d_dwte.ptr, d_work.ptr, d_dout.ptr, inp.data(), B, T, C, 0);
    std::vector<float> again = download_bf16(d_dwte.ptr, dwte0.size());
    CHECK(memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0);
}

// ----------------------------------------------------------------------------
// RoPE

static void check_rope(int B, int T, int NH, int hd, unsigned seed) {
    const double base = 10000.0;
    const size_t n = (size_t)B * T * 3 * NH * hd;
    std::mt19937 gen(seed);
    std::vector<float> qkv = random_bf16(n, gen);
    std::vector<float> freqs((size_t)T * hd);
    rope_precompute_freqs(freqs.data(), T, hd, base);
    DeviceBuffer<float> d_freqs(freqs.size());
    DeviceBuffer<floatX> d_inp(n), d_out(n);
    upload(d_freqs.ptr, freqs);
    upload_bf16(d_inp.ptr, qkv);
    std::vector<double> qkv_d = to_double(qkv), ref(n);
    // rotated values are sums of two products with cos/sin: cancellation relative to max |x|
    const double atol = CANCEL_ATOL * max_abs(qkv_d);

    rope_forward(d_out.ptr, d_inp.ptr, d_freqs.ptr, B, T, NH, hd, 0);
    std::vector<float> got = download_bf16(d_out.ptr, n);
    ref::rope_forward(ref.data(), qkv_d.data(), B, T, NH, hd, base);
    check_close("rope forward", got, ref, BF16_RTOL, atol);
    // v is copied exactly
    int C = NH * hd;
    for (int bt = 0; bt < B * T; bt++) {
        for (int i = 2 * C; i < 3 * C; i++) { REQUIRE(got[(size_t)bt * 3 * C + i] == qkv[(size_t)bt * 3 * C + i]); }
    }
    // in place gives the same bits as out of place
    rope_forward(d_inp.ptr, d_inp.ptr, d_freqs.ptr, B, T, NH, hd, 0);
    std::vector<float> inplace = download_bf16(d_inp.ptr, n);
    CHECK(memcmp(inplace.data(), got.data(), n * sizeof(float)) == 0);

    upload_bf16(d_inp.ptr, qkv);  // now as the upstream gradient
    rope_backward(d_out.ptr, d_inp.ptr, d_freqs.ptr, B, T, NH, hd, 0);
    ref::rope_backward(ref.data(), qkv_d.data(), B, T, NH, hd, base);
    check_close("rope backward", download_bf16(d_out.ptr, n), ref, BF16_RTOL, atol);
}

TEST_CASE("rope forward/backward, hd not a multiple of 8") { check_rope(2, 7, 2, 20, 3); }
// RoPE's backward fused with the qkv bias gradient: the rotated-back gradient against the
// reference, the bias gradient against the column sums of that output, and bit for bit what
// rope_backward then matmul_backward's column-sum kernel (the path without epilogues) give.
static void check_rope_backward_bias(int B, int T, int NH, int hd, unsigned seed) {
    cublaslt_setup();
    const int C = NH * hd, BT = B * T;
    const size_t n = (size_t)BT * 3 * C;
    std::mt19937 gen(seed);
    std::vector<float> dqkv = random_bf16(n, gen), db0 = random_bf16(3 * C, gen, 0.1f);
    std::vector<float> freqs((size_t)T * hd);
    rope_precompute_freqs(freqs.data(), T, hd, 10000.0);
    DeviceBuffer<float> d_freqs(freqs.size()), d_scratch(matmul_backward_scratch_floats(3 * C));
    DeviceBuffer<floatX> d_fused(n), d_plain(n), d_db_fused(3 * C), d_db_plain(3 * C);
    upload(d_freqs.ptr, freqs);
    upload_bf16(d_fused.ptr, dqkv); upload_bf16(d_plain.ptr, dqkv);
    upload_bf16(d_db_fused.ptr, db0); upload_bf16(d_db_plain.ptr, db0);
    rope_backward_bias(d_fused.ptr, d_db_fused.ptr, d_scratch.ptr, d_freqs.ptr, B, T, NH, hd, 0);
    std::vector<float> got = download_bf16(d_fused.ptr, n), got_db = download_bf16(d_db_fused.ptr, 3 * C);
    std::vector<double> ref(n), dqkv_d = to_double(dqkv), db_ref = to_double(db0);
    ref::rope_backward(ref.data(), dqkv_d.data(), B, T, NH, hd, 10000.0);
    check_close("rope backward (fused with the bias)", got, ref, BF16_RTOL, CANCEL_ATOL * max_abs(dqkv_d));
    // the bias gradient is that of the bf16 d qkv the kernel wrote (checked just above): its column
    // sums in double, so the tolerance covers the fp32 sum and one bf16 rounding, not the summands'
    for (int bt = 0; bt < BT; bt++) {
        for (int c = 0; c < 3 * C; c++) db_ref[c] += got[(size_t)bt * 3 * C + c];
    }
    check_close("qkv dbias (fused with rope)", got_db, db_ref, BF16_RTOL, CANCEL_ATOL * max_abs(db_ref));
    // the unfused path: rope_backward in place, then matmul_backward's column-sum kernel on its output
    DeviceBuffer<floatX> d_inp((size_t)BT * 8), d_w((size_t)3 * C * 8), d_dinp((size_t)BT * 8), d_dw((size_t)3 * C * 8);
    rope_backward(d_plain.ptr, d_plain.ptr, d_freqs.ptr, B, T, NH, hd, 0);
    matmul_set_bgrad_epilogues(false);
    matmul_backward(d_dinp.ptr, d_dw.ptr, d_scratch.ptr, d_plain.ptr, d_inp.ptr, d_w.ptr, BT, 8, 3 * C, 0,
                    {.dbias = d_db_plain.ptr});
    matmul_set_bgrad_epilogues(true);
    CHECK(download_bf16(d_plain.ptr, n) == got);
    CHECK(download_bf16(d_db_plain.ptr, 3 * C) == got_db);
}

TEST_CASE("rope backward fused with the qkv bias gradient") {
    check_rope_backward_bias(2, 7, 2, 20, 8);     // packs straddling heads; 3C = 120: one column block
    check_rope_backward_bias(3, 50, 6, 64, 9);    // 3C = 1152: several column blocks; 150 rows: 3 row splits
}

// NH * hd a multiple of 8 (what the packs and the model's matmuls need); packs of 8 elements over
// heads of 12 and 20 (a pack straddles two heads), of 2 (four heads per pack), of 8 and 64 (whole
// packs within a head, the table read by 16-byte loads)
TEST_CASE("rope at long positions (angles of hundreds of radians)") { check_rope(1, 301, 2, 12, 4); }
TEST_CASE("rope forward/backward, hd 2: one pack over four heads") { check_rope(2, 5, 4, 2, 5); }
TEST_CASE("rope forward/backward, hd 8 and 64: packs within a head") {
    check_rope(2, 9, 3, 8, 6);
    check_rope(1, 33, 2, 64, 7);
}

// ----------------------------------------------------------------------------
// layernorm

static void check_layernorm_forward(int N, int C, unsigned seed) {
    std::mt19937 gen(seed);
    std::vector<float> inp = random_bf16((size_t)N * C, gen, 1.0f, 3.0f);  // offset mean: two-pass variance
    std::vector<float> w = random_bf16(C, gen, 0.2f, 1.0f), b = random_bf16(C, gen, 0.2f);
    DeviceBuffer<floatX> d_inp(inp.size()), d_out(inp.size()), d_w(C), d_b(C);
    DeviceBuffer<float> d_mean(N), d_rstd(N);
    upload_bf16(d_inp.ptr, inp); upload_bf16(d_w.ptr, w); upload_bf16(d_b.ptr, b);
    layernorm_forward(d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, C, 0);
    std::vector<double> ref(inp.size()), mean(N), rstd(N);
    std::vector<double> inp_d = to_double(inp), w_d = to_double(w), b_d = to_double(b);
    ref::layernorm_forward(ref.data(), mean.data(), rstd.data(), inp_d.data(), w_d.data(), b_d.data(), N, C);
    // out = norm * w + b cancels where norm * w ~ -b: absolute term relative to the output scale
    check_close("layernorm out", download_bf16(d_out.ptr, ref.size()), ref, BF16_RTOL, CANCEL_ATOL * max_abs(ref));
    // fp32 statistics: sums of C terms in fp32 (relative error ~C * 2^-24) and rsqrt (2 ulp on GPU)
    std::vector<float> got_mean = download(d_mean.ptr, N), got_rstd = download(d_rstd.ptr, N);
    check_close("mean", got_mean, mean, 1e-5, 0.0);
    check_close("rstd", got_rstd, rstd, 1e-5, 0.0);
}

TEST_CASE("layernorm forward, C below one warp of packs") { check_layernorm_forward(14, 40, 5); }
TEST_CASE("layernorm forward, C above one warp of packs") { check_layernorm_forward(5, 264, 6); }

TEST_CASE("fused residual + layernorm forward") {
    const int N = 14, C = 72;
    std::mt19937 gen(7);
    std::vector<float> a = random_bf16((size_t)N * C, gen), b = random_bf16((size_t)N * C, gen, 0.5f);
    std::vector<float> w = random_bf16(C, gen, 0.2f, 1.0f), bias = random_bf16(C, gen, 0.2f);
    DeviceBuffer<floatX> d_a(a.size()), d_b(b.size()), d_res(a.size()), d_out(a.size()), d_w(C), d_bias(C);
    DeviceBuffer<float> d_mean(N), d_rstd(N);
    upload_bf16(d_a.ptr, a); upload_bf16(d_b.ptr, b); upload_bf16(d_w.ptr, w); upload_bf16(d_bias.ptr, bias);
    fused_residual_layernorm_forward(d_res.ptr, d_out.ptr, d_mean.ptr, d_rstd.ptr, d_a.ptr, d_b.ptr, d_w.ptr,
                                     d_bias.ptr, N, C, 0);
    // the residual: a + b of two bf16 is exact in fp32, then one rounding, the same on both sides
    std::vector<float> res_ref(a.size());
    for (size_t i = 0; i < a.size(); i++) { res_ref[i] = round_bf16(a[i] + b[i]); }
    std::vector<float> res = download_bf16(d_res.ptr, a.size());
    CHECK(memcmp(res.data(), res_ref.data(), res.size() * sizeof(float)) == 0);
    std::vector<double> ref(a.size()), mean(N), rstd(N);
    std::vector<double> res_d = to_double(res_ref), w_d = to_double(w), bias_d = to_double(bias);
    ref::layernorm_forward(ref.data(), mean.data(), rstd.data(), res_d.data(), w_d.data(), bias_d.data(), N, C);
    check_close("fused layernorm out", download_bf16(d_out.ptr, ref.size()), ref, BF16_RTOL,
                CANCEL_ATOL * max_abs(ref));
    check_close("fused mean", download(d_mean.ptr, N), mean, 1e-5, 1e-6);
    check_close("fused rstd", download(d_rstd.ptr, N), rstd, 1e-5, 0.0);
}

// with_colsum: also dinp_colsum += the column sums of the updated dinp, checked against the column
// sums (double) of the dinp the kernel wrote, itself checked against the reference
static void check_layernorm_backward(int N, int C, unsigned seed, bool with_colsum = false) {
    std::mt19937 gen(seed);
    std::vector<float> inp = random_bf16((size_t)N * C, gen), dout = random_bf16((size_t)N * C, gen);
    std::vector<float> w = random_bf16(C, gen, 0.2f, 1.0f);
    std::vector<float> dinp0 = random_bf16((size_t)N * C, gen, 0.1f);  // all three gradients accumulate (+=)
    std::vector<float> dw0 = random_bf16(C, gen, 0.1f), db0 = random_bf16(C, gen, 0.1f);
    // mean/rstd: the reference's, rounded to fp32 as the forward kernel stores them
    std::vector<double> inp_d = to_double(inp), w_d = to_double(w), dout_d = to_double(dout);
    std::vector<double> out_d(inp.size()), mean_d(N), rstd_d(N);
    ref::layernorm_forward(out_d.data(), mean_d.data(), rstd_d.data(), inp_d.data(), w_d.data(), w_d.data(), N, C);
    std::vector<float> mean(N), rstd(N);
    for (int i = 0; i < N; i++) {
        mean[i] = (float)mean_d[i]; rstd[i] = (float)rstd_d[i];
        mean_d[i] = mean[i]; rstd_d[i] = rstd[i];
    }
    DeviceBuffer<floatX> d_inp(inp.size()), d_dout(dout.size()), d_w(C), d_dinp(inp.size()), d_dw(C), d_db(C);
    DeviceBuffer<float> d_mean(N), d_rstd(N), d_scratch(layernorm_backward_scratch_floats(C));
    upload_bf16(d_inp.ptr, inp); upload_bf16(d_dout.ptr, dout); upload_bf16(d_w.ptr, w);
    upload_bf16(d_dinp.ptr, dinp0); upload_bf16(d_dw.ptr, dw0); upload_bf16(d_db.ptr, db0);
    upload(d_mean.ptr, mean); upload(d_rstd.ptr, rstd);
    std::vector<float> cs0 = random_bf16(C, gen, 0.1f);
    DeviceBuffer<floatX> d_cs(C);
    upload_bf16(d_cs.ptr, cs0);
    floatX* colsum = with_colsum ? d_cs.ptr : nullptr;
    layernorm_backward(d_dinp.ptr, d_dw.ptr, d_db.ptr, d_scratch.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_mean.ptr,
                       d_rstd.ptr, N, C, 0, colsum);
    std::vector<double> dinp = to_double(dinp0), dw = to_double(dw0), db = to_double(db0);
    ref::layernorm_backward(dinp.data(), dw.data(), db.data(), dout_d.data(), inp_d.data(), w_d.data(), mean_d.data(),
                       rstd_d.data(), N, C);
    // all three are differences/sums of signed fp32 terms, then one bf16 rounding
    std::vector<float> got_dinp = download_bf16(d_dinp.ptr, dinp.size());
    check_close("dinp", got_dinp, dinp, BF16_RTOL, CANCEL_ATOL * max_abs(dinp));
    std::vector<float> got_dw = download_bf16(d_dw.ptr, C), got_db = download_bf16(d_db.ptr, C);
    check_close("dweight", got_dw, dw, BF16_RTOL, CANCEL_ATOL * max_abs(dw));
    check_close("dbias", got_db, db, BF16_RTOL, CANCEL_ATOL * max_abs(db));
    std::vector<float> got_cs = download_bf16(d_cs.ptr, C);
    if (with_colsum) {
        std::vector<double> cs = to_double(cs0);
        for (int r = 0; r < N; r++) {
            for (int c = 0; c < C; c++) cs[c] += got_dinp[(size_t)r * C + c];
        }
        check_close("dinp column sums", got_cs, cs, BF16_RTOL, CANCEL_ATOL * max_abs(cs));
    } else {
        CHECK(got_cs == cs0);  // untouched
    }
    // determinism of the two-stage parameter reduction
    upload_bf16(d_dinp.ptr, dinp0); upload_bf16(d_dw.ptr, dw0); upload_bf16(d_db.ptr, db0);
    upload_bf16(d_cs.ptr, cs0);
    layernorm_backward(d_dinp.ptr, d_dw.ptr, d_db.ptr, d_scratch.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_mean.ptr,
                       d_rstd.ptr, N, C, 0, colsum);
    CHECK(download_bf16(d_cs.ptr, C) == got_cs);
    CHECK(download_bf16(d_dw.ptr, C) == got_dw);
    CHECK(download_bf16(d_db.ptr, C) == got_db);
    CHECK(download_bf16(d_dinp.ptr, dinp.size()) == got_dinp);
}

TEST_CASE("layernorm backward, several warps per block") { check_layernorm_backward(14, 40, 8); }
TEST_CASE("layernorm backward, C above one warp of packs") { check_layernorm_backward(19, 264, 9); }
TEST_CASE("layernorm backward, rows beyond the block cap (grid-stride)") { check_layernorm_backward(530, 6144, 10); }
TEST_CASE("layernorm backward with the column sums of dinp (the next matmul's bias gradient)") {
    check_layernorm_backward(14, 40, 11, true);
    check_layernorm_backward(530, 768, 12, true);  // GPT-2's C: 5 warps per block, grid-stride rows
    check_layernorm_backward(70, 6144, 13, true);  // three accumulators do not fit: summed after the pass
}

// ----------------------------------------------------------------------------
// GELU and residual

TEST_CASE("gelu forward/backward with a scalar tail") {
    const int N = 14 * 160 + 5;  // not a multiple of 8
    std::mt19937 gen(11);
    std::vector<float> x = random_bf16(N, gen, 2.0f), dout = random_bf16(N, gen);
    DeviceBuffer<floatX> d_x(N), d_y(N), d_d(N);
    upload_bf16(d_x.ptr, x); upload_bf16(d_d.ptr, dout);
    gelu_forward(d_y.ptr, d_x.ptr, N, 0);
    gelu_backward_inplace(d_d.ptr, d_x.ptr, N, 0);
    std::vector<double> x_d = to_double(x), dout_d = to_double(dout), y(N), dx(N, 0.0);
    ref::gelu_forward(y.data(), x_d.data(), N);
    ref::gelu_backward(dx.data(), x_d.data(), dout_d.data(), N);
    // bf16 rounding (BF16_RTOL) plus the GPU's tanh error where the result cancels
    check_close("gelu", download_bf16(d_y.ptr, N), y, BF16_RTOL, 1e-7, gelu_tolerance(x_d));
    check_close("gelu backward", download_bf16(d_d.ptr, N), dx, BF16_RTOL, 1e-7, gelu_backward_tolerance(x_d, dout_d));
}

TEST_CASE("residual forward with a scalar tail") {
    const int N = 14 * 40 + 3;
    std::mt19937 gen(12);
    std::vector<float> a = random_bf16(N, gen), b = random_bf16(N, gen);
    DeviceBuffer<floatX> d_a(N), d_b(N), d_out(N);
    upload_bf16(d_a.ptr, a); upload_bf16(d_b.ptr, b);
    residual_forward(d_out.ptr, d_a.ptr, d_b.ptr, N, 0);
    std::vector<float> out = download_bf16(d_out.ptr, N);
    // the fp32 sum of two bf16 is exact, so the result is exactly round_bf16(a + b)
    std::vector<double> ref(N), a_d = to_double(a), b_d = to_double(b);
    ref::residual_forward(ref.data(), a_d.data(), b_d.data(), N);
    for (auto& r : ref) { r = round_bf16((float)r); }
    check_close("residual", out, ref, 0.0, 0.0);
}

// ----------------------------------------------------------------------------
// matmul (cuBLASLt with fused epilogues)

// Whether the device's plan table holds a plan for epilogue e for which cuBLASLt found an algorithm.
static bool have_found_plan(MatmulEpilogue e) {
    for (const MatmulPlan& p : cublaslt_current().plans) {
        if (p.key.epilogue == e && p.found) return true;
    }
    return false;
}

// Runs f with the bias gradients from cuBLASLt's epilogues (bgrad) or from the column sums, on a
// fresh plan table, and checks that the epilogues f asks for (dbias: BGRADB, dinp_colsum:
// DGELU_BGRAD) ran exactly when bgrad is set (a silent fallback would leave that path untested).
// On a GPU, cuBLASLt may have no algorithm for them (matmul.cuh then falls back and says so): there
// the check is that no epilogue ran without being asked for, and a fallback is reported.
template <class F>
static void with_bias_grad_path(bool bgrad, bool dbias, bool dinp_colsum, F f) {
    cublaslt_teardown();
    cublaslt_setup();
    matmul_set_bgrad_epilogues(bgrad);
    f();
    matmul_set_bgrad_epilogues(true);
    const MatmulEpilogue epilogues[2] = {EPI_BGRADB, EPI_DGELU_BGRAD};
    const bool asked[2] = {bgrad && dbias, bgrad && dinp_colsum};
    for (int i = 0; i < 2; i++) {
        bool ran = have_found_plan(epilogues[i]);
        CAPTURE(matmul_epilogue_name(epilogues[i]));
        if (ON_GPU && asked[i] && !ran) {
            MESSAGE("cuBLASLt has no algorithm for " << matmul_epilogue_name(epilogues[i])
                    << " here: the column sums gave this bias gradient");
            continue;
        }
        CHECK(ran == asked[i]);
    }
}

// Backward (plain, or with the DGELU epilogue when the input came out of a GELU) of the bias
// gradient path asked for, twice onto the same gradients (dweight, dbias and dinp_colsum accumulate
// (+=), so they must hold their start plus twice the product; dinp is written (=)).
static void check_matmul_backward(int N, int C, int OC, bool with_bias, bool gelu, bool bgrad, std::mt19937& gen,
                                  const std::vector<float>& inp, const std::vector<float>& w) {
    CAPTURE(bgrad);
    std::vector<float> dout = random_bf16((size_t)N * OC, gen);
    std::vector<float> dw0 = random_bf16(w.size(), gen, 0.1f), db0 = random_bf16(OC, gen, 0.1f);
    std::vector<float> dpb0 = random_bf16(C, gen, 0.1f);      // the pre-GELU layer's bias gradient so far
    std::vector<float> inp_pre = random_bf16((size_t)N * C, gen);  // for DGELU: inp taken as gelu(inp_pre)
    DeviceBuffer<floatX> d_dout(dout.size()), d_dinp(inp.size()), d_dw(w.size()), d_db(OC), d_inp_pre(inp.size());
    DeviceBuffer<floatX> d_inp(inp.size()), d_w(w.size()), d_dpb(C);
    DeviceBuffer<float> d_scratch(matmul_backward_scratch_floats(std::max(OC, C)));
    upload_bf16(d_inp.ptr, inp); upload_bf16(d_w.ptr, w);
    upload_bf16(d_dout.ptr, dout); upload_bf16(d_dw.ptr, dw0); upload_bf16(d_db.ptr, db0); upload_bf16(d_dpb.ptr, dpb0);
    upload_bf16(d_inp_pre.ptr, inp_pre);
    upload_bf16(d_dinp.ptr, random_bf16(inp.size(), gen));  // garbage: must be overwritten
    with_bias_grad_path(bgrad, with_bias, gelu, [&] {
        for (int pass = 0; pass < 2; pass++) {
            matmul_backward(d_dinp.ptr, d_dw.ptr, d_scratch.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0,
                            {.dbias = with_bias ? d_db.ptr : nullptr, .pre_gelu = gelu ? d_inp_pre.ptr : nullptr,
                             .dinp_colsum = gelu ? d_dpb.ptr : nullptr});
        }
    });
    std::vector<double> dout_d = to_double(dout), dinp(inp.size(), 0.0), dw = to_double(dw0), db = to_double(db0);
    std::vector<double> inp_d = to_double(inp), w_d = to_double(w);
    for (int pass = 0; pass < 2; pass++) {
        std::fill(dinp.begin(), dinp.end(), 0.0);
        ref::matmul_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout_d.data(), inp_d.data(),
                        w_d.data(), N, C, OC);
    }
    std::vector<double> dinp_gelu_tol;
    if (gelu) {  // dinp_pre = gelu'(inp_pre) * (dout @ w)
        std::vector<double> dpre(inp.size(), 0.0), inp_pre_d = to_double(inp_pre);
        ref::gelu_backward(dpre.data(), inp_pre_d.data(), dinp.data(), N * C);
        dinp_gelu_tol = gelu_backward_tolerance(inp_pre_d, dinp);
        dinp = dpre;
    }
    std::vector<float> got_dinp = download_bf16(d_dinp.ptr, dinp.size());
    check_close("dinp", got_dinp, dinp, BF16_RTOL, CANCEL_ATOL * max_abs(dinp), dinp_gelu_tol);
    check_close("dweight", download_bf16(d_dw.ptr, dw.size()), dw, BF16_RTOL, CANCEL_ATOL * max_abs(dw));
    std::vector<float> got_db = download_bf16(d_db.ptr, OC), got_dpb = download_bf16(d_dpb.ptr, C);
    if (with_bias) {
        check_close("dbias (start + 2 x column sums of dout)", got_db, db, BF16_RTOL, CANCEL_ATOL * max_abs(db));
    } else {
        CHECK(got_db == db0);  // untouched
    }
    if (gelu) {
        // start + twice the column sums of the dinp checked above. The column sums add its bf16
        // values; DGELU_BGRAD adds the fp32 values before their rounding, each within 2^-9 of the
        // bf16 one: 2^-8 * sum |dinp| per pass covers that and the fp32 sum's order (N 2^-24).
        std::vector<double> dpb = to_double(dpb0), rounding(C, 0.0);
        for (int n = 0; n < N; n++) {
            for (int c = 0; c < C; c++) {
                dpb[c] += 2.0 * got_dinp[(size_t)n * C + c];
                rounding[c] += 2.0 * std::ldexp(std::fabs(got_dinp[(size_t)n * C + c]), -8);
            }
        }
        check_close("dinp_colsum (start + 2 x column sums of dinp)", got_dpb, dpb, BF16_RTOL,
                    CANCEL_ATOL * max_abs(dpb), rounding);
    } else {
        CHECK(got_dpb == dpb0);  // untouched
    }
}

// forward with or without bias, with or without the GELU epilogue; then the backward with the bias
// gradients from cuBLASLt's epilogues and from the column sums
static void check_matmul(int N, int C, int OC, bool with_bias, bool gelu, unsigned seed) {
    cublaslt_setup();  // once per process
    std::mt19937 gen(seed);
    std::vector<float> inp = random_bf16((size_t)N * C, gen), w = random_bf16((size_t)OC * C, gen, 0.2f);
    std::vector<float> bias = random_bf16(OC, gen, 0.5f);
    DeviceBuffer<floatX> d_inp(inp.size()), d_w(w.size()), d_bias(OC), d_out((size_t)N * OC), d_pre((size_t)N * OC);
    upload_bf16(d_inp.ptr, inp); upload_bf16(d_w.ptr, w); upload_bf16(d_bias.ptr, bias);
    std::vector<double> inp_d = to_double(inp), w_d = to_double(w), bias_d = to_double(bias);

    matmul_forward(d_out.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0,
                   {.bias = with_bias ? d_bias.ptr : nullptr, .pre_gelu = gelu ? d_pre.ptr : nullptr});
    std::vector<double> pre((size_t)N * OC), out((size_t)N * OC);
    ref::matmul_forward(pre.data(), inp_d.data(), w_d.data(), with_bias ? bias_d.data() : nullptr, N, C, OC);
    // dot products of C signed terms accumulated in fp32, one bf16 rounding: cancellation floor
    double atol = CANCEL_ATOL * max_abs(pre);
    if (gelu) {
        ref::gelu_forward(out.data(), pre.data(), N * OC);
        check_close("pre_gelu", download_bf16(d_pre.ptr, pre.size()), pre, BF16_RTOL, atol);
        check_close("gelu(out)", download_bf16(d_out.ptr, out.size()), out, BF16_RTOL, atol, gelu_tolerance(pre));
    } else {
        check_close("out", download_bf16(d_out.ptr, pre.size()), pre, BF16_RTOL, atol);
    }
    for (bool bgrad : {true, false}) check_matmul_backward(N, C, OC, with_bias, gelu, bgrad, gen, inp, w);
}

TEST_CASE("matmul with bias") { check_matmul(14, 40, 72, true, false, 21); }
TEST_CASE("matmul without bias, N not a multiple of 8") {
    check_matmul(130, 72, 264, false, false, 22);
}
TEST_CASE("matmul bias gradient over several splits and column blocks") { check_matmul(130, 72, 264, true, false, 23); }
TEST_CASE("matmul with fused GELU (forward GELU_AUX_BIAS, backward DGELU_BGRAD)") {
    check_matmul(14, 40, 160, true, true, 24);
    check_matmul(72, 48, 16, false, true, 28);  // C > OC: the pre-GELU bias gradient is the wider one
}

TEST_CASE("matmul bias gradient is deterministic") {
    cublaslt_setup();  // once per process
    const int N = 200, C = 16, OC = 264;
    std::mt19937 gen(25);
    std::vector<float> dout = random_bf16((size_t)N * OC, gen);
    DeviceBuffer<floatX> d_dout(dout.size()), d_inp((size_t)N * C), d_w((size_t)OC * C), d_dinp((size_t)N * C);
    DeviceBuffer<floatX> d_dw((size_t)OC * C), d_db1(OC), d_db2(OC);
    DeviceBuffer<float> d_scratch(matmul_backward_scratch_floats(OC));
    upload_bf16(d_dout.ptr, dout);
    for (bool bgrad : {true, false}) {
        CAPTURE(bgrad);
        cudaCheck(cudaMemset(d_db1.ptr, 0, OC * sizeof(floatX)));
        cudaCheck(cudaMemset(d_db2.ptr, 0, OC * sizeof(floatX)));
        with_bias_grad_path(bgrad, true, false, [&] {
            matmul_backward(d_dinp.ptr, d_dw.ptr, d_scratch.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0,
                            {.dbias = d_db1.ptr});
            matmul_backward(d_dinp.ptr, d_dw.ptr, d_scratch.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0,
                            {.dbias = d_db2.ptr});
        });
        CHECK(download_bf16(d_db1.ptr, OC) == download_bf16(d_db2.ptr, OC));
    }
}

// The plan cache: a miss builds descriptor, layouts and heuristic, a hit reuses them with this
// call's pointers; the same problem gives the same bits either way, also after other shapes and
// after its plan was replaced.
TEST_CASE("matmul plan cache: hits and misses give identical results, pointers set per call") {
    cublaslt_setup();
    CublasLtDevice& lt = cublaslt_current();
    const int N = 24, C = 16, OC = 40;
    std::mt19937 gen(26);
    std::vector<float> inp = random_bf16((size_t)N * C, gen), w = random_bf16((size_t)OC * C, gen, 0.2f);
    std::vector<float> bias1 = random_bf16(OC, gen, 0.5f), bias2 = random_bf16(OC, gen, 0.5f);
    DeviceBuffer<floatX> d_inp(inp.size()), d_w(w.size()), d_b1(OC), d_b2(OC), d_out((size_t)N * OC);
    DeviceBuffer<floatX> d_other((size_t)N * N);
    upload_bf16(d_inp.ptr, inp); upload_bf16(d_w.ptr, w); upload_bf16(d_b1.ptr, bias1); upload_bf16(d_b2.ptr, bias2);
    auto forward = [&](const floatX* bias) {
        matmul_forward(d_out.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0, {.bias = bias});
        return download_bf16(d_out.ptr, (size_t)N * OC);
    };
    size_t misses0 = lt.plan_misses, hits0 = lt.plan_hits;
    std::vector<float> first = forward(d_b1.ptr);
    CHECK(lt.plan_misses == misses0 + 1);
    std::vector<float> again = forward(d_b1.ptr);
    CHECK(lt.plan_hits == hits0 + 1);
    CHECK(lt.plan_misses == misses0 + 1);
    CHECK(memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
    // another problem in between, then a hit with another bias: the new pointer is used
    matmul_forward(d_other.ptr, d_inp.ptr, d_inp.ptr, N, C, N, 0);
    std::vector<float> with_b2 = forward(d_b2.ptr);
    CHECK(lt.plan_hits == hits0 + 2);
    std::vector<double> ref((size_t)N * OC), inp_d = to_double(inp), w_d = to_double(w), b2_d = to_double(bias2);
    ref::matmul_forward(ref.data(), inp_d.data(), w_d.data(), b2_d.data(), N, C, OC);
    check_close("out with the second bias", with_b2, ref, BF16_RTOL, CANCEL_ATOL * max_abs(ref));
    CHECK(forward(d_b1.ptr) == first);
    // a bias aligned to 16 bytes only (a layer's slice of the parameters): the heuristic of its plan
    // saw that pointer, so its algorithm does not assume 256 (the emulated cuBLASLt fails it if so)
    DeviceBuffer<floatX> d_b_16(OC + 8);
    upload_bf16(d_b_16.ptr + 8, bias1);
    REQUIRE(matmul_alignment(d_b_16.ptr + 8) == 16);
    CHECK(forward(d_b_16.ptr + 8) == first);
    // more problems than the table keeps: the oldest plans are replaced, the table stays bounded
    DeviceBuffer<floatX> d_big_in((size_t)(8 + MATMUL_MAX_PLANS) * C), d_big((size_t)(8 + MATMUL_MAX_PLANS) * OC);
    upload_bf16(d_big_in.ptr, random_bf16((size_t)(8 + MATMUL_MAX_PLANS) * C, gen));
    for (int rows = 8; rows < 8 + (int)MATMUL_MAX_PLANS; rows++) {
        matmul_forward(d_big.ptr, d_big_in.ptr, d_w.ptr, rows, C, OC, 0);
    }
    CHECK(lt.plans.size() == MATMUL_MAX_PLANS);
    size_t misses1 = lt.plan_misses;
    CHECK(forward(d_b1.ptr) == first);  // rebuilt after its replacement
    CHECK(lt.plan_misses == misses1 + 1);
}

// alpha scales the backward's products: by 1/2, dinp exactly halves (a power of two commutes with
// the rounding) and dweight accumulates half the product (against the reference)
TEST_CASE("matmul backward with alpha") {
    cublaslt_setup();
    const int N = 16, C = 24, OC = 32;
    std::mt19937 gen(27);
    std::vector<float> inp = random_bf16((size_t)N * C, gen), w = random_bf16((size_t)OC * C, gen, 0.2f);
    std::vector<float> dout = random_bf16((size_t)N * OC, gen), dw0 = random_bf16(w.size(), gen, 0.1f);
    DeviceBuffer<floatX> d_inp(inp.size()), d_w(w.size()), d_dout(dout.size()), d_dinp(inp.size()), d_dw(w.size());
    upload_bf16(d_inp.ptr, inp); upload_bf16(d_w.ptr, w); upload_bf16(d_dout.ptr, dout); upload_bf16(d_dw.ptr, dw0);
    matmul_backward(d_dinp.ptr, d_dw.ptr, nullptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0);
    std::vector<float> dinp1 = download_bf16(d_dinp.ptr, inp.size());
    upload_bf16(d_dw.ptr, dw0);
    matmul_backward(d_dinp.ptr, d_dw.ptr, nullptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, C, OC, 0, {.alpha = 0.5f});
    std::vector<float> dinp_half = download_bf16(d_dinp.ptr, inp.size());
    for (size_t i = 0; i < dinp1.size(); i++) REQUIRE(dinp_half[i] == 0.5f * dinp1[i]);
    std::vector<double> dout_half = to_double(dout), dinp_ref(inp.size(), 0.0), dw_ref = to_double(dw0);
    for (double& x : dout_half) x *= 0.5;
    std::vector<double> inp_d = to_double(inp), w_d = to_double(w);
    ref::matmul_backward(dinp_ref.data(), dw_ref.data(), (double*)nullptr, dout_half.data(), inp_d.data(), w_d.data(), N, C, OC);
    check_close("dweight, alpha 1/2", download_bf16(d_dw.ptr, w.size()), dw_ref, BF16_RTOL,
                CANCEL_ATOL * max_abs(dw_ref));
}

// ----------------------------------------------------------------------------
// fused classifier

static void check_classifier(int N, int V, int Vp, unsigned seed) {
    std::mt19937 gen(seed);
    std::vector<float> logits = random_bf16((size_t)N * Vp, gen, 2.0f);
    for (int n = 0; n < N; n++) {
        for (int j = V; j < Vp; j++) { logits[(size_t)n * Vp + j] = 100.0f; }  // padding must be ignored
    }
    std::vector<int> targets(N);
    for (auto& t : targets) { t = (int)(gen() % V); }
    targets[0] = V - 1;
    const float dloss = 1.0f / N;
    DeviceBuffer<floatX> d_logits(logits.size());
    DeviceBuffer<float> d_losses(N);
    DeviceBuffer<int> d_targets(N);
    upload_bf16(d_logits.ptr, logits);
    upload(d_targets.ptr, targets);
    std::vector<double> logits_d = to_double(logits), losses(N), dlogits(logits.size());
    ref::fused_classifier(losses.data(), dlogits.data(), logits_d.data(), targets.data(), (double)dloss, N, V, Vp);

    // losses only: logits left untouched
    fused_classifier(d_logits.ptr, d_losses.ptr, d_targets.ptr, dloss, N, V, Vp, false, 0);
    // fp32 log-sum-exp of O(1..10) values: absolute error ~1e-6; 1e-4 leaves room for __expf/__logf
    check_close("losses (no grad)", download(d_losses.ptr, N), losses, 0.0, 1e-4);
    CHECK(download_bf16(d_logits.ptr, logits.size()) == logits);

    fused_classifier(d_logits.ptr, d_losses.ptr, d_targets.ptr, dloss, N, V, Vp, true, 0);
    check_close("losses", download(d_losses.ptr, N), losses, 0.0, 1e-4);
    std::vector<float> got = download_bf16(d_logits.ptr, logits.size());
    // (prob - onehot) * dloss: the target column cancels, the rest are relative-accurate
    check_close("dlogits", got, dlogits, BF16_RTOL, CANCEL_ATOL * max_abs(dlogits));
    for (int n = 0; n < N; n++) {
        for (int j = V; j < Vp; j++) { REQUIRE(got[(size_t)n * Vp + j] == 0.0f); }  // exactly zero
    }
}

TEST_CASE("fused classifier, padded vocabulary") { check_classifier(14, 61, 64, 13); }
TEST_CASE("fused classifier, several packs per thread") { check_classifier(2, 10001, 10008, 14); }

// ----------------------------------------------------------------------------
// AdamW

TEST_CASE("adamw with fp32 master weights and stochastic rounding") {
    const size_t n = 1037;
    const float lr = 1e-3f;
    AdamWStep s{.lr = lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1};
    std::mt19937 gen(15);
    std::vector<float> params = random_bf16(n, gen, 0.5f);
    DeviceBuffer<floatX> d_params(n), d_grads(n), d_params2(n);
    DeviceBuffer<float> d_master(n), d_m(n), d_v(n), d_master2(n), d_m2(n), d_v2(n);
    upload_bf16(d_params.ptr, params);
    init_master_weights(d_master.ptr, d_params.ptr, n, 0);
    std::vector<float> ref_p = params, ref_m(n, 0.0f), ref_v(n, 0.0f);
    for (int t = 1; t <= 3; t++) {
        std::vector<float> grads = random_bf16(n, gen, 0.01f);
        upload_bf16(d_grads.ptr, grads);
        s.step = t;
        adamw_update(d_params.ptr, d_master.ptr, d_grads.ptr, d_m.ptr, d_v.ptr, n, s, 1234u + t, 0);
        ref::adamw_update(ref_p.data(), grads.data(), ref_m.data(), ref_v.data(), n, s);
    }
    std::vector<float> master = download(d_master.ptr, n), m = download(d_m.ptr, n), v = download(d_v.ptr, n);
    // fp32 on both sides, same formula: differences are a few fp32 ulps of each term (GPU: fast
    // sqrt/div). m, v: relative 1e-5. params: relative 1e-6 of p plus 1e-4 of the step size lr.
    std::vector<double> ref_m_d = to_double(ref_m), ref_v_d = to_double(ref_v);
    check_close("m", m, ref_m_d, 1e-5, 1e-5 * max_abs(ref_m_d));  // m sums signed gradients: cancels
    check_close("v", v, ref_v_d, 1e-5, 0.0);
    check_close("master", master, to_double(ref_p), 1e-6, 1e-4 * lr);
    // bf16 params: one of the two bf16 neighbours of the master weight (stochastic rounding)
    std::vector<float> p = download_bf16(d_params.ptr, n);
    size_t rounded_up = 0, not_nearest = 0;
    for (size_t i = 0; i < n; i++) {
        float down = bits_float(float_bits(master[i]) & 0xFFFF0000u);  // toward zero
        float up = bits_float((float_bits(master[i]) & 0xFFFF0000u) + 0x10000u);
        bool is_neighbour = p[i] == down || p[i] == up;
        if (!is_neighbour) { MESSAGE("param " << i << " = " << p[i] << " for master " << master[i]); }
        REQUIRE(is_neighbour);
        rounded_up += p[i] == up && up != master[i];
        not_nearest += p[i] != round_bf16(master[i]);
    }
    // random rounding: both directions occur, and not always the nearest (n = 1037 values with
    // uniform-ish fractions: each count is in the hundreds; 50 is far below any plausible outcome)
    CHECK(rounded_up > 50);
    CHECK(not_nearest > 50);

    // determinism: the same seed reproduces the bits; another seed changes some of them
    upload_bf16(d_params2.ptr, params);
    init_master_weights(d_master2.ptr, d_params2.ptr, n, 0);
    std::vector<float> grads = random_bf16(n, gen, 0.01f);
    upload_bf16(d_grads.ptr, grads);
    cudaCheck(cudaMemcpy(d_master2.ptr, d_master.ptr, n * sizeof(float), cudaMemcpyDeviceToDevice));
    cudaCheck(cudaMemcpy(d_m2.ptr, d_m.ptr, n * sizeof(float), cudaMemcpyDeviceToDevice));
    cudaCheck(cudaMemcpy(d_v2.ptr, d_v.ptr, n * sizeof(float), cudaMemcpyDeviceToDevice));
    s.step = 4;
    adamw_update(d_params.ptr, d_master.ptr, d_grads.ptr, d_m.ptr, d_v.ptr, n, s, 99u, 0);
    adamw_update(d_params2.ptr, d_master2.ptr, d_grads.ptr, d_m2.ptr, d_v2.ptr, n, s, 99u, 0);
    std::vector<float> p1 = download_bf16(d_params.ptr, n);
    CHECK(p1 == download_bf16(d_params2.ptr, n));
    cudaCheck(cudaMemcpy(d_master2.ptr, d_master.ptr, n * sizeof(float), cudaMemcpyDeviceToDevice));
    s.step = 5;
    adamw_update(d_params.ptr, d_master.ptr, d_grads.ptr, d_m.ptr, d_v.ptr, n, s, 7u, 0);
    adamw_update(d_params2.ptr, d_master2.ptr, d_grads.ptr, d_m2.ptr, d_v2.ptr, n, s, 8u, 0);
    CHECK(download_bf16(d_params.ptr, n) != download_bf16(d_params2.ptr, n));
}

TEST_CASE("adamw without master weights, with gradient scaling") {
    const size_t n = 300;
    const float scale = 0.5f;
    AdamWStep s{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f, .step = 1};
    std::mt19937 gen(16);
    std::vector<float> params = random_bf16(n, gen), grads = random_bf16(n, gen, 0.1f);
    DeviceBuffer<floatX> d_params(n), d_grads(n);
    DeviceBuffer<float> d_m(n), d_v(n);
    upload_bf16(d_params.ptr, params); upload_bf16(d_grads.ptr, grads);
    AdamWStep scaled_step = s;
    scaled_step.grad_scale = scale;
    adamw_update(d_params.ptr, nullptr, d_grads.ptr, d_m.ptr, d_v.ptr, n, scaled_step, 5u, 0);
    std::vector<float> scaled(n), ref_p = params, ref_m(n, 0.0f), ref_v(n, 0.0f);
    for (size_t i = 0; i < n; i++) { scaled[i] = grads[i] * scale; }
    ref::adamw_update(ref_p.data(), scaled.data(), ref_m.data(), ref_v.data(), n, s);
    // stochastic rounding to bf16: within one bf16 ulp (2^-7 relative) of the fp32 result
    check_close("params", download_bf16(d_params.ptr, n), to_double(ref_p), 1.0 / 128, 0.0);
    check_close("m", download(d_m.ptr, n), to_double(ref_m), 1e-5, 0.0);
}

// ----------------------------------------------------------------------------
// global norm

TEST_CASE("global norm squared over two tensors, deterministic") {
    const size_t n1 = 1037, n2 = 40008;  // n1 not a multiple of 8: scalar tail
    std::mt19937 gen(17);
    std::vector<float> x1 = random_bf16(n1, gen), x2 = random_bf16(n2, gen, 0.1f);
    DeviceBuffer<floatX> d_x1(n1), d_x2(n2);
    DeviceBuffer<float> d_partials(GLOBAL_NORM_BLOCKS), d_out(1);
    upload_bf16(d_x1.ptr, x1); upload_bf16(d_x2.ptr, x2);
    auto run = [&]() {
        global_norm_squared(d_partials.ptr, d_x1.ptr, n1, true, 0);
        global_norm_squared(d_partials.ptr, d_x2.ptr, n2, false, 0);
        global_norm_aggregate(d_out.ptr, d_partials.ptr, 0);
        return download(d_out.ptr, 1)[0];
    };
    float got = run();
    double ref = ref::global_norm_squared(x1.data(), n1) + ref::global_norm_squared(x2.data(), n2);
    // fp32 accumulation of ~4e4 positive terms in a tree: relative error well below 1e-5
    CHECK(std::fabs(got - ref) <= 1e-5 * ref);
    float again = run();
    CHECK(memcmp(&got, &again, sizeof(float)) == 0);
}
