// The CPU back end's fast path (model/gpt2_cpu_fast.h) in both numerics against the reference
// (model/gpt2_cpu.h), on every ISA target this build holds that the CPU runs (Highway's dispatch,
// layers/fast_cpu.h; a failure names the target):
// - its layers (bf16 rounding, layernorm, RoPE, GELU, classifier, AdamW, the column sums, the
//   matmuls: oneDNN's bf16 and its exact emulation, OpenBLAS's sgemm) against the float64 reference
//   on shapes that are no multiple of any vector width (its attention: test/test_attention_fast_cpu.cpp);
// - the whole model over 10 AdamW steps (softmax, LSSA, LSSAR, learned p), fp32 and bf16 numerics:
//   losses, every parameter gradient, the gradient norm, as the CUDA back end is checked
//   (test/test_model_cuda.cu);
// - exact resume in both numerics: a run stopped and resumed from its checkpoint files ends bit for
//   bit where the uninterrupted one does, the bf16 weights rebuilt as the last update rounded them;
// - the trainer's -pr flag: what auto picks and says, and the bf16 numerics without bf16 matmuls
//   (ONEDNN_MAX_CPU_ISA) computed exactly through sgemm.
#include <doctest/doctest.h>
#include <omp.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <tuple>
#include <sstream>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "layers/classifier_cpu.h"
#include "layers/gelu_cpu.h"
#include "layers/layernorm_cpu.h"
#include "layers/rope_cpu.h"
#include "model/backend_cpu.h"
#include "runtime/checkpoint.h"
#include "model/rand.h"
#include "test/adamw_bound.h"
#include "test/fast_targets.h"

static std::vector<float> randn(size_t n, uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<float> x(n);
    for (float& v : x) v = (float)(scale * rng.normal());
    return x;
}
static std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
static float widen(float x) { return x; }
static float widen(bf16 x) { return bf16_to_float(x); }

// bf16 keeps 8 significant bits (7 stored): round to nearest even errs by at most half a unit
// of the last place, 2^-8 relative to the value's power of two, so <= 2^-8 relative. The fp32
// numerics store outputs as computed: their rounding is the arithmetic's (the ARITH terms below).
constexpr double BF16_ROUND = 1.0 / 256;
template <class X> constexpr double out_round() { return sizeof(X) == 2 ? BF16_ROUND : 0.0; }

// ----------------------------------------------------------------------------
// layers

TEST_CASE("bf16 rounding: nearest, ties to even, NaN stays NaN; the vector and scalar conversions agree") {
    // the reference: of the two bf16 values around x (truncation and the next one up in
    // magnitude), the nearer, by exact double arithmetic; on a tie the one with an even last bit
    auto nearest = [](float x) -> uint16_t {
        uint32_t bits;
        memcpy(&bits, &x, 4);
        uint16_t lo = (uint16_t)(bits >> 16), hi = (uint16_t)(lo + 1);
        double dl = std::fabs((double)x - bf16_to_float(lo)), dh = std::fabs((double)x - bf16_to_float(hi));
        if (dl != dh) return dl < dh ? lo : hi;
        return (lo & 1) ? hi : lo;
    };
    Rng rng(3);
    std::vector<float> x(4099);
    for (size_t i = 0; i < x.size(); i++) {
        uint32_t bits = (uint32_t)rng.next_u64();
        if (i % 3 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exact ties
        bits &= 0xfeffffffu;                                   // finite: exponent below 255
        memcpy(&x[i], &bits, 4);
    }
    for_each_fast_target([&](const std::string&) {
        std::vector<bf16> v(x.size());
        fast_round_bf16(v.data(), x.data(), x.size());
        std::vector<float> back(x.size());
        fast_widen_bf16(back.data(), v.data(), v.size());
        for (size_t i = 0; i < x.size(); i++) {
            CHECK(back[i] == bf16_to_float(v[i]));
            if (!std::isfinite(bf16_to_float(nearest(x[i])))) continue;  // rounds past the largest bf16
            CHECK(v[i] == nearest(x[i]));
            CHECK(float_to_bf16(x[i]) == v[i]);
        }
        bf16 out[3];
        float in[3] = {std::nanf(""), INFINITY, -INFINITY};
        fast_round_bf16(out, in, 3);
        CHECK(std::isnan(bf16_to_float(out[0])));
        CHECK(bf16_to_float(out[1]) == INFINITY);
        CHECK(bf16_to_float(out[2]) == -INFINITY);
    });
    float ties[2] = {1.00390625f, 1.01171875f};  // 1 + 2^-8 (to 1), 1 + 3 * 2^-8 (up)
    CHECK(bf16_to_float(float_to_bf16(ties[0])) == 1.0f);
    CHECK(bf16_to_float(float_to_bf16(ties[1])) == 1.015625f);
}

template <class X> static void check_layernorm() {
    const int N = 37, C = 72;  // C = 4.5 AVX-512 vectors, 9 AVX2 ones, 18 SSE ones (and odd N)
    std::vector<float> x = randn(N * C, 1, 2.0), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
    for (int i = 0; i < N * C; i++) x[i] += 0.5f * (i % C);  // rows with a mean and a spread
    std::vector<double> xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy);
    std::vector<double> out_ref(N * C), mean_ref(N), rstd_ref(N), dx_ref(N * C, 0.1), dw_ref(C, 0.2), db_ref(C, 0.3);
    ref::layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), xd.data(), wd.data(), bd.data(), N, C);
    ref::layernorm_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dyd.data(), xd.data(), wd.data(),
                            mean_ref.data(), rstd_ref.data(), N, C);
    std::vector<X> out(N * C);
    std::vector<float> mean(N), rstd(N), dx(N * C, 0.1f), dw(C, 0.2f), db(C, 0.3f), scratch;
    fast_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    fast_layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                            C, scratch);
    // forward: the output's rounding (bf16: 2^-8 relative) plus fp32 arithmetic (1e-5 absolute for
    // outputs of order |w| |norm| + |b| ~ 5: sums of C = 72 terms at 2^-24 each)
    for (int i = 0; i < N * C; i++)
        CHECK(std::fabs(widen(out[i]) - out_ref[i]) <= out_round<X>() * std::fabs(out_ref[i]) + 1e-5);
    for (int n = 0; n < N; n++) {
        CHECK(std::fabs(mean[n] - mean_ref[n]) <= 1e-5 * (1 + std::fabs(mean_ref[n])));
        CHECK(std::fabs(rstd[n] - rstd_ref[n]) <= 1e-5 * rstd_ref[n]);
    }
    // backward: all fp32: sums of C (or N) terms of order 1 each, relative 1e-5 of the terms' scale
    double dx_scale = 0, dw_scale = 0;
    for (double v : dx_ref) dx_scale = std::max(dx_scale, std::fabs(v));
    for (double v : dw_ref) dw_scale = std::max(dw_scale, std::fabs(v));
    for (int i = 0; i < N * C; i++) CHECK(std::fabs(dx[i] - dx_ref[i]) <= 1e-5 * dx_scale);
    for (int i = 0; i < C; i++) {
        CHECK(std::fabs(dw[i] - dw_ref[i]) <= 1e-5 * dw_scale);
        CHECK(std::fabs(db[i] - db_ref[i]) <= 1e-5 * dw_scale);
    }
}
TEST_CASE("layernorm: forward (fp32 and bf16 out) and backward against the float64 reference") {
    for_each_fast_target([](const std::string&) {
        check_layernorm<float>();
        check_layernorm<bf16>();
    });
}

TEST_CASE("RoPE: forward and backward against the float64 reference, hd 36 (a tail of 4 channels), in place too") {
    const int B = 2, T = 19, NH = 3, hd = 36, C = NH * hd;
    std::vector<float> x = randn((size_t)B * T * 3 * C, 21);
    std::vector<double> xd = to_double(x), y_ref(xd.size()), dx_ref(xd.size());
    ref::rope_forward(y_ref.data(), xd.data(), B, T, NH, hd, 10000.0);
    ref::rope_backward(dx_ref.data(), xd.data(), B, T, NH, hd, 10000.0);
    for_each_fast_target([&](const std::string&) {
        RopeTableFast table;
        table.ensure(T, hd, 10000.0);
        std::vector<float> y(x.size()), dx = x;
        fast_rope_rotate(y.data(), x.data(), B, T, NH, hd, table.cs.data(), 1.0f);
        fast_rope_rotate(dx.data(), dx.data(), B, T, NH, hd, table.cs.data(), -1.0f);  // in place
        // each output is x0 c - x1 s or x0 s + x1 c with c, s rounded to float (2^-24 relative each), one
        // product and one FMA rounded: within 4 2^-24 (|x0| + |x1|) of the exact rotation
        for (size_t i = 0; i < x.size(); i++) {
            size_t pair = i & ~(size_t)1;
            double mag = std::fabs(xd[pair]) + std::fabs(xd[pair + 1]);
            CHECK(std::fabs(y[i] - y_ref[i]) <= 4 * std::ldexp(mag, -24));
            CHECK(std::fabs(dx[i] - dx_ref[i]) <= 4 * std::ldexp(mag, -24));
        }
    });
}

template <class X> static void check_gelu() {
    const int N = 29, OC = 40;
    std::vector<float> x = randn(N * OC, 5, 3.0), dy = randn(N * OC, 6);
    x[0] = 0.0f, x[1] = 1e-4f, x[2] = -12.0f, x[3] = 12.0f;  // around 0, and saturated tanh
    std::vector<double> xd = to_double(x), dyd = to_double(dy), y_ref(N * OC), dx_ref(N * OC, 0.0);
    ref::gelu_forward(y_ref.data(), xd.data(), N * OC);
    ref::gelu_backward(dx_ref.data(), xd.data(), dyd.data(), N * OC);
    std::vector<X> y(N * OC), dx(N * OC);
    std::vector<float> dbias(OC, 0.5f), scratch;
    fast_gelu_forward(y.data(), x.data(), N * OC);
    fast_gelu_backward(dx.data(), dbias.data(), x.data(), dy.data(), N, OC, scratch);
    // the output's rounding, plus tanh's fp32 error (Highway's Tanh: 4 ulp, under 1e-6 absolute) times
    // |x|/2 <= 6 and the polynomial's few roundings
    for (int i = 0; i < N * OC; i++) {
        CHECK(std::fabs(widen(y[i]) - y_ref[i]) <= out_round<X>() * std::fabs(y_ref[i]) + 6e-6);
        CHECK(std::fabs(widen(dx[i]) - dx_ref[i]) <= out_round<X>() * std::fabs(dx_ref[i]) + 6e-6 * std::fabs(dy[i]));
    }
    for (int o = 0; o < OC; o++) {
        double s = 0.5;
        for (int n = 0; n < N; n++) s += dx_ref[(size_t)n * OC + o];
        CHECK(std::fabs(dbias[o] - s) <= 1e-4);
    }
}
TEST_CASE("GELU: forward (fp32 and bf16 out), backward (dinp in fp32 and bf16, fp32 bias sums) against the reference") {
    for_each_fast_target([](const std::string&) {
        check_gelu<float>();
        check_gelu<bf16>();
    });
}

template <class X> static void check_classifier() {
    const int N = 7, V = 1003, Vp = 1024;
    std::vector<float> logits = randn((size_t)N * Vp, 7, 4.0);
    std::vector<int> targets = {0, 5, 1002, 17, 500, 999, 3};
    std::vector<double> ld = to_double(logits), loss_ref(N), dl_ref((size_t)N * Vp);
    ref::fused_classifier(loss_ref.data(), dl_ref.data(), ld.data(), targets.data(), 1.0, N, V, Vp);
    std::vector<float> losses(N), scratch;
    std::vector<X> dl((size_t)N * Vp);
    for (X& v : dl) memset(&v, 0x7f, sizeof(X));  // every element must be written
    fast_classifier(losses.data(), dl.data(), logits.data(), targets.data(), N, V, Vp, scratch);
    for (int n = 0; n < N; n++) {
        CHECK(std::fabs(losses[n] - loss_ref[n]) <= 1e-5 * (1 + loss_ref[n]));  // fp32 log-sum-exp
        for (int j = 0; j < Vp; j++) {
            double ref = dl_ref[(size_t)n * Vp + j], got = widen(dl[(size_t)n * Vp + j]);
            // the output's rounding, and exp's (Highway's Exp: 1 ulp) and the division's in fp32
            if (j >= V) CHECK(got == 0.0);
            else CHECK(std::fabs(got - ref) <= out_round<X>() * std::fabs(ref) + 4 * 6e-8 * std::fabs(ref) + 1e-7);
        }
    }
}
TEST_CASE("classifier: losses and dlogits = softmax - onehot (fp32 and bf16) against the reference, padded columns 0") {
    for_each_fast_target([](const std::string&) {
        check_classifier<float>();
        check_classifier<bf16>();
    });
}

TEST_CASE("AdamW: the reference formula with the gradient scale fused, and the bf16 copy of the new weights") {
    const size_t n = 1000;  // no multiple of 16
    for_each_fast_target([&](const std::string&) {
        for (int with_bf16 = 0; with_bf16 < 2; with_bf16++) {
            std::vector<float> p = randn(n, 8), g = randn(n, 9, 0.1), m = randn(n, 10, 0.01), v(n);
            for (size_t i = 0; i < n; i++) v[i] = 1e-4f * (1 + (float)(i % 7));
            std::vector<float> p_ref = p, g_ref = g, m_ref = m, v_ref = v, m0 = m, g0 = g;
            for (float& x : g_ref) x *= 0.7f;
            ref::adamw_update(p_ref.data(), g_ref.data(), m_ref.data(), v_ref.data(), n,
                              {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 3});
            std::vector<bf16> p_bf(n);
            fast_adamw(p.data(), with_bf16 ? p_bf.data() : nullptr, g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f,
                       1e-8f, 0.1f, 0.7f, 3);
            CHECK(g == g0);  // the scale is applied on the fly
            for (size_t i = 0; i < n; i++) {
                // the same fp32 operations, which the compiler may contract into FMAs in the
                // reference: a few ulp of the terms (a moment can cancel far below its terms; a step
                // is <= ~lr)
                double gi = 0.7 * g[i];
                CHECK(std::fabs(m[i] - m_ref[i]) <= 1e-6 * (0.9 * std::fabs(m0[i]) + 0.1 * std::fabs(gi)));
                CHECK(std::fabs(v[i] - v_ref[i]) <= 1e-6 * v_ref[i]);
                CHECK(std::fabs(p[i] - p_ref[i]) <= 1e-6 * (std::fabs(p_ref[i]) + 1e-3));
                if (with_bf16) CHECK(p_bf[i] == float_to_bf16(p[i]));
            }
        }
        // the gradient norm's sum of squares in double
        std::vector<float> x = randn(200003, 17);
        double s = 0;
        for (float f : x) s += (double)f * f;
        CHECK(std::fabs(fast_sum_squares(x.data(), x.size()) - s) <= 1e-12 * s);
    });
}

// A matmul's products and sums against float64 on the same operands: the products of bf16 (or of
// fp32) operands in fp32 carry at most 2^-24 of each product (none for bf16 x bf16: 16 significant
// bits), the sums of K terms K * 2^-24 of the sum of |terms| at most.
static void check_sum(double got, double ref, double abs_sum, int K) {
    CHECK(std::fabs(got - ref) <= (K + 1) * 6e-8 * abs_sum + 1e-7);
}
template <class X, class MM> static void check_matmul(MM& mm, const std::vector<float>& inp, const std::vector<float>& w,
                                                       const std::vector<float>& dout, int N, int C, int OC) {
    auto as_x = [](const std::vector<float>& x) {
        std::vector<X> y(x.size());
        if constexpr (sizeof(X) == 2) fast_round_bf16(y.data(), x.data(), x.size());
        else y = x;
        return y;
    };
    std::vector<float> bias = randn(OC, 14), dw0 = randn(OC * C, 15);
    std::vector<X> inp_x = as_x(inp), w_x = as_x(w), dout_x = as_x(dout);
    const float alpha = 0.25f;
    std::vector<float> out(N * OC), dinp(N * C, 99.0f), dw = dw0;
    mm.forward(out.data(), inp_x.data(), w_x.data(), bias.data(), N, C, OC);
    mm.backward(dinp.data(), dw.data(), dout_x.data(), inp_x.data(), w_x.data(), N, C, OC, alpha);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias[o], a = std::fabs(bias[o]);
            for (int c = 0; c < C; c++) s += (double)inp[n * C + c] * w[o * C + c], a += std::fabs((double)inp[n * C + c] * w[o * C + c]);
            check_sum(out[n * OC + o], s, a, C);
        }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0, a = 0;
            for (int o = 0; o < OC; o++) s += (double)dout[n * OC + o] * w[o * C + c], a += std::fabs((double)dout[n * OC + o] * w[o * C + c]);
            check_sum(dinp[n * C + c], alpha * s, alpha * a, OC);  // overwritten, not accumulated
        }
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) {
            double s = 0, a = 0;
            for (int n = 0; n < N; n++) s += (double)dout[n * OC + o] * inp[n * C + c], a += std::fabs((double)dout[n * OC + o] * inp[n * C + c]);
            check_sum(dw[o * C + c], dw0[o * C + c] + alpha * s, std::fabs(dw0[o * C + c]) + alpha * a, N);  // accumulated
        }
}

TEST_CASE("matmuls: oneDNN's fp32, sgemm and the exact emulation of bf16 matmuls: forward with bias, dinp with alpha, dW accumulated") {
    const int N = 45, C = 40, OC = 56;
    auto rounded = [](std::vector<float> x) {
        for (float& v : x) v = bf16_to_float(float_to_bf16(v));
        return x;
    };
    std::vector<float> inp = randn(N * C, 11), w = randn(OC * C, 12), dout = randn(N * OC, 13);
    MatmulF32 onednn;
    check_matmul<float>(onednn, inp, w, dout, N, C, OC);
    MatmulSgemm sgemm;
    check_matmul<float>(sgemm, inp, w, dout, N, C, OC);
    std::vector<float> inp16 = rounded(inp), w16 = rounded(w), dout16 = rounded(dout);
    MatmulBf16 emulated;
    emulated.hardware = false;
    check_matmul<bf16>(emulated, inp16, w16, dout16, N, C, OC);
}

// where the CPU has bf16 matmuls (AMX or AVX512-BF16) only: skipped elsewhere
TEST_CASE("matmuls: oneDNN's bf16 on the CPU's bf16 instructions, the same checks" * doctest::skip(!cpu_bf16_matmul().hardware)) {
    const int N = 45, C = 40, OC = 56;
    auto rounded = [](std::vector<float> x) {
        for (float& v : x) v = bf16_to_float(float_to_bf16(v));
        return x;
    };
    std::vector<float> inp16 = rounded(randn(N * C, 11)), w16 = rounded(randn(OC * C, 12)), dout16 = rounded(randn(N * OC, 13));
    MatmulBf16 native;
    REQUIRE(native.hardware);
    MESSAGE("oneDNN on " << cpu_bf16_matmul().onednn_isa);
    check_matmul<bf16>(native, inp16, w16, dout16, N, C, OC);
}

TEST_CASE("a matmul's dout: its bf16 copy and the bias gradient from the fp32 values; the fp32 column sums") {
    const int N = 45, OC = 56;
    std::vector<float> d = randn(N * OC, 16);
    for_each_fast_target([&](const std::string&) {
        std::vector<float> dbias(OC, 1.0f), dbias32(OC, 1.0f), scratch;
        std::vector<bf16> d_b(N * OC);
        fast_matmul_dout(d_b.data(), dbias.data(), d.data(), N, OC, scratch);
        fast_colsums(dbias32.data(), d.data(), N, OC, scratch);
        for (int i = 0; i < N * OC; i++) CHECK(d_b[i] == float_to_bf16(d[i]));
        for (int o = 0; o < OC; o++) {
            double s = 1.0;
            for (int n = 0; n < N; n++) s += d[n * OC + o];
            CHECK(std::fabs(dbias[o] - s) <= 1e-5 * N);
            CHECK(dbias32[o] == dbias[o]);  // the same sums in the same order
        }
    });
}

TEST_CASE("the layers give the same bits for 1 and 2 threads") {
    const int N = 300, C = 72;  // more rows than a chunk of the column sums
    std::vector<float> x = randn(N * C, 31), w = randn(C, 32), b = randn(C, 33), dy = randn(N * C, 34);
    auto run = [&](int threads) {
        omp_set_num_threads(threads);
        std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f), s;
        std::vector<bf16> g(N * C);
        std::vector<float> gb(C, 0.0f);
        fast_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        fast_layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C, s);
        fast_gelu_backward(g.data(), gb.data(), x.data(), dy.data(), N, C, s);
        std::vector<float> all = out;
        for (auto* v : {&mean, &rstd, &dx, &dw, &db, &gb}) all.insert(all.end(), v->begin(), v->end());
        for (bf16 h : g) all.push_back(bf16_to_float(h));
        all.push_back((float)fast_sum_squares(x.data(), x.size()));
        return all;
    };
    int threads = omp_get_max_threads();
    for_each_fast_target([&](const std::string&) { CHECK(run(1) == run(2)); });
    omp_set_num_threads(threads);
}

// ----------------------------------------------------------------------------
// the whole model against the reference
//
// Tolerances. bf16 numerics, as for the CUDA back end (test/test_model_cuda.cu, which derives them):
// bf16 keeps 8 significant bits (up to 2^-8 relative per rounding). This path rounds only the
// matmuls' operands (weights, their input activations, the output gradients), about a dozen roundings
// per layer and direction, each averaging out over the tensor: a gradient tensor differs by ~1%
// relative in L2 (3e-2), the gradient norm and the losses by well under 1% (1e-2). fp32 numerics: the
// same operations as the reference in another order and with other exp/tanh polynomials, each within
// a few 2^-24 of its terms; sums of up to 4C = 288 terms carry at most ~300 2^-24 ~ 2e-5 of their
// terms' scale, a dozen such stages per layer and direction: 1e-4 for losses, norms and gradient
// tensors. LSSAR with p = 15 amplifies a perturbation of its weights many times (near-tied scores
// decide which keys get weight), so a check also passes within SENSITIVITY_FACTOR times the
// difference of a third run: the reference started from the weights as the path's own first rounding
// leaves them (bf16), or (fp32) moved by 2^-14 relative, alternating in sign: the size of the fp32
// numerics' own step-1 gradient differences (measured ~3e-5 for LSSAR; bound 1e-4). A wiring error (a wrong operand, a transpose, a
// missing scale) is O(1), above every bound.
struct Tolerances {
    double loss, grad_norm, grad_tensor;
};
constexpr Tolerances BF16_TOL = {1e-2, 1e-2, 3e-2}, FP32_TOL = {1e-4, 1e-4, 1e-4};
constexpr double SENSITIVITY_FACTOR = 4;
constexpr float FP32_PERTURBATION = 1.0f / 16384;
constexpr float LR = 1e-3f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f, WEIGHT_DECAY = 0.1f;

// L = 2, C = 72 (4.5 vectors), NH = 2 (hd 36), V = 97 padded to 104: nothing a multiple of 16
static GPT2Config tiny_config(AttnKind kind) {
    GPT2Config c;
    c.max_seq_len = 24;
    c.vocab_size = 97;
    c.padded_vocab_size = 104;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 72;
    c.attn = kind;
    c.p = 15.0f;
    return c;
}

// B rows of a learnable stream: next = (5 cur + 3) mod V, with 1 in 8 tokens random
static void token_batch(std::vector<int>& inputs, std::vector<int>& targets, int B, int T, int V, uint64_t seed) {
    Rng rng(seed);
    inputs.clear();
    targets.clear();
    for (int b = 0; b < B; b++) {
        int cur = (int)(rng.next_u64() % V);
        for (int t = 0; t <= T; t++) {
            if (t < T) inputs.push_back(cur);
            if (t > 0) targets.push_back(cur);
            cur = rng.next_u64() % 8 == 0 ? (int)(rng.next_u64() % V) : (5 * cur + 3) % V;
        }
    }
}

static double diff_norm(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return std::sqrt(s);
}

static float train_step(ModelCPU& m, const std::vector<int>& in, const std::vector<int>& tg, int B, int T, int step) {
    m.zero_grad();
    float loss = m.forward(in.data(), tg.data(), B, T);
    m.backward(1.0f);
    double norm = m.grad_norm();
    m.update({.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .weight_decay = WEIGHT_DECAY,
              .grad_scale = norm > 1.0 ? (float)(1.0 / norm) : 1.0f, .step = step});
    return loss;
}

// The reference's and the perturbed reference's 10 steps (index 0 and 1): losses, gradient norms,
// the step-1 gradients and the learned p at the end, computed once per variant and numerics (they
// do not depend on the fast path's target).
struct ReferenceRuns {
    std::vector<float> loss[2];
    std::vector<double> norm[2];
    std::vector<float> grads1[2];
    std::vector<double> p[2];
};
static const ReferenceRuns& reference_runs(AttnKind kind, bool bf16, bool learn_p) {
    static std::map<std::tuple<int, bool, bool>, ReferenceRuns> cache;
    auto key = std::make_tuple((int)kind, bf16, learn_p);
    auto found = cache.find(key);
    if (found != cache.end()) return found->second;
    GPT2Config c = tiny_config(kind);
    c.learn_p = learn_p;
    const int B = 4, T = 24;
    ReferenceRuns r;
    for (int k = 0; k < 2; k++) {
        ModelCPU m(c);
        m.init(42);
        for (size_t i = 0; k == 1 && i < m.gpt.params.size(); i++) {
            float& x = m.gpt.params[i];
            x = bf16 ? bf16_to_float(float_to_bf16(x)) : x * (1.0f + (i % 2 ? 1 : -1) * FP32_PERTURBATION);
        }
        std::vector<int> in, tg;
        for (int step = 1; step <= 10; step++) {
            token_batch(in, tg, B, T, c.vocab_size, 100 + step);
            m.zero_grad();
            r.loss[k].push_back(m.forward(in.data(), tg.data(), B, T));
            m.backward(1.0f);
            double norm = m.grad_norm();
            r.norm[k].push_back(norm);
            if (step == 1) r.grads1[k] = m.gpt.grads;
            m.update({.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .weight_decay = WEIGHT_DECAY,
                      .grad_scale = norm > 1.0 ? (float)(1.0 / norm) : 1.0f, .step = step});
        }
        r.p[k] = model_learned_p(m);
    }
    return cache.emplace(key, r).first->second;
}

static void compare_ten_steps(AttnKind kind, const std::string& precision, bool learn_p = false) {
    const bool bf16 = precision == "bf16";
    const Tolerances tol = bf16 ? BF16_TOL : FP32_TOL;
    const ReferenceRuns& r = reference_runs(kind, bf16, learn_p);
    GPT2Config c = tiny_config(kind);
    c.learn_p = learn_p;
    const int B = 4, T = 24;
    ModelCPU fast(c);
    fast.select_precision(precision);
    REQUIRE(fast.precision() == precision);
    fast.init(42);
    std::vector<int> in, tg;
    double worst_loss = 0, worst_grad = 0, smallest_theta_grad = INFINITY, sens = 0;
    for (int step = 1; step <= 10; step++) {
        token_batch(in, tg, B, T, c.vocab_size, 100 + step);
        fast.zero_grad();
        float loss[3] = {r.loss[0][step - 1], r.loss[1][step - 1], fast.forward(in.data(), tg.data(), B, T)};
        fast.backward(1.0f);
        double norm[3] = {r.norm[0][step - 1], r.norm[1][step - 1], fast.grad_norm()};
        // the yardstick: the largest difference the perturbed reference has shown so far (a chaotic
        // divergence does not grow step by step: one step's difference may happen to be small)
        double dloss = std::fabs(loss[2] - loss[0]);
        sens = std::max(sens, (double)std::fabs(loss[1] - loss[0]));
        worst_loss = std::max(worst_loss, dloss / loss[0]);
        INFO(std::string(attn_kind_name(kind)) << " step " << step << ": loss reference " << loss[0] << ", " << precision
                                               << " " << loss[2] << ", perturbed reference " << loss[1]);
        CHECK(dloss <= std::max(tol.loss * loss[0], SENSITIVITY_FACTOR * sens));
        if (step == 1) {  // gradients where both start from the same weights
            CHECK(std::fabs(norm[2] - norm[0]) <=
                  std::max(tol.grad_norm * norm[0], SENSITIVITY_FACTOR * std::fabs(norm[1] - norm[0])));
            if (bf16) CHECK(loss[2] != loss[0]);  // the bf16 numerics really ran
            for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
                size_t off = fast.gpt.param_offsets[i], n = fast.gpt.param_sizes[i];
                if (n == 0) continue;  // a tensor this config has no elements of (ptheta unless p is learned)
                const float* g0 = r.grads1[0].data() + off;
                double ref_norm = std::sqrt(ref::global_norm_squared(g0, n));
                double rel = diff_norm(fast.gpt.grads.data() + off, g0, n) / ref_norm;
                double sensitivity = diff_norm(r.grads1[1].data() + off, g0, n) / ref_norm;
                worst_grad = std::max(worst_grad, rel);
                INFO("d" << std::string(param_tensor_name(i)) << ": relative L2 error " << rel << ", of the perturbed reference "
                         << sensitivity);
                CHECK(ref_norm > 0);
                CHECK(rel < std::max(tol.grad_tensor, SENSITIVITY_FACTOR * sensitivity));
            }
        }
        // the fast path's theta step against AdamW in float64 from its own state and gradient (the
        // clipping scale applied in fp32): a wrong learning rate, bias correction or moment update
        // fails it. Bound: the gradient's scaling rounded (2^-24 relative) through AdamW's
        // sensitivity at that gradient, ~10 roundings of the step (16 half-ulps) and the new
        // theta's own rounding.
        size_t t0 = fast.gpt.param_offsets[P_PTHETA], nt = learn_p ? fast.gpt.param_sizes[P_PTHETA] : 0;
        float scale = norm[2] > 1.0 ? (float)(1.0 / norm[2]) : 1.0f;
        std::vector<double> theta_exact(nt), theta_bound(nt);
        for (size_t i = 0; i < nt; i++) {
            double th = fast.gpt.params[t0 + i], m = fast.gpt.m.empty() ? 0.0 : fast.gpt.m[t0 + i],
                   v = fast.gpt.v.empty() ? 0.0 : fast.gpt.v[t0 + i], g = (double)fast.gpt.grads[t0 + i] * scale;
            double lr = param_tensor_lr(P_PTHETA, LR, fast.gpt.p_lr_scale), u32 = std::ldexp(1.0, -24);
            double sens_g = adamw_sensitivity(m, v, g, u32 * std::fabs(g), BETA1, BETA2, EPS, step);
            theta_exact[i] = adamw_step_exact(th, m, v, g, lr, BETA1, BETA2, EPS, 0.0, step);
            double step_size = std::fabs(theta_exact[i] - th);
            theta_bound[i] = lr * sens_g * u32 * std::fabs(g) + 16 * u32 * step_size + u32 * std::fabs(theta_exact[i]);
            smallest_theta_grad = std::min(smallest_theta_grad, std::fabs(g));
        }
        fast.update({.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .weight_decay = WEIGHT_DECAY,
                     .grad_scale = norm[2] > 1.0 ? (float)(1.0 / norm[2]) : 1.0f, .step = step});
        for (size_t i = 0; i < nt; i++) {
            INFO("step " << step << ", theta " << i << ": " << fast.gpt.params[t0 + i] << " against " << theta_exact[i]);
            CHECK(std::fabs(fast.gpt.params[t0 + i] - theta_exact[i]) <= theta_bound[i]);
        }
    }
    MESSAGE(std::string(attn_kind_name(kind)) << ": " << precision << " on " << fast_cpu_target()
                                              << " vs the reference, largest relative loss difference over 10 steps "
                                              << worst_loss << ", largest relative gradient-tensor difference at step 1 "
                                              << worst_grad);
    // the bf16 weights are the rounding of the master weights the last update left
    if (bf16)
        for (size_t i = 0; i < fast.num_parameters; i += 7)
            CHECK(fast.fast16->params_bf[i] == float_to_bf16(fast.gpt.params[i]));
    // learned p after the 10 steps: each step of theta was checked above; the runs' p differ by how
    // their theta gradients differ relative to those gradients' size, step after step (AdamW steps
    // theta by ~LR whatever the gradient's size), so a bound proportional to the move would hold or
    // not by chance. The yardstick is the perturbed reference's p (the same model started from the
    // perturbed weights), every theta gradient being at least 10 times AdamW's eps: there a relative
    // error r of a gradient moves its first step by at most r eps / |g| <= r / 10 of a step and later
    // ones by about r, never by error / eps as near eps. It catches a p that runs away, the step
    // check a wrong update.
    const std::vector<double>&p_ref = r.p[0], &p_pert = r.p[1];
    std::vector<double> p_fast = model_learned_p(fast);
    REQUIRE(p_fast.size() == p_ref.size());
    double envelope = 0;
    for (size_t h = 0; h < p_ref.size(); h++) envelope = std::max(envelope, std::fabs(p_pert[h] - p_ref[h]));
    if (!p_ref.empty() && smallest_theta_grad < 10 * EPS) {
        // the yardstick's premise does not hold on this run's trajectory: the steps' checks above stand
        MESSAGE("learned p: a theta gradient of " << smallest_theta_grad << " < 10 eps on this trajectory: p after 10 "
                "steps not compared (each of its steps was)");
        return;
    }
    for (size_t h = 0; h < p_ref.size(); h++) {
        CAPTURE(h);
        CHECK(p_ref[h] != 15.0);
        // fp32: the perturbed reference's p may equal the reference's to the last bit; then the
        // yardstick is the float64 AdamW of the steps above, 1e-6 of p
        CHECK(std::fabs(p_fast[h] - p_ref[h]) <= std::max(SENSITIVITY_FACTOR * envelope, bf16 ? 0.0 : 1e-6 * p_ref[h]));
    }
}

static void compare_every_target(AttnKind kind, bool learn_p = false) {
    for_each_fast_target([&](const std::string&) {
        compare_ten_steps(kind, "fp32", learn_p);
        compare_ten_steps(kind, "bf16", learn_p);
    });
}
TEST_CASE("fast path vs reference, 10 AdamW steps, fp32 and bf16 numerics: softmax") { compare_every_target(ATTN_SOFTMAX); }
TEST_CASE("fast path vs reference, 10 AdamW steps, fp32 and bf16 numerics: LSSA") { compare_every_target(ATTN_LSSA); }
TEST_CASE("fast path vs reference, 10 AdamW steps, fp32 and bf16 numerics: LSSAR p = 15") {
    compare_every_target(ATTN_LSSAR);
}
TEST_CASE("fast path vs reference, 10 AdamW steps, fp32 and bf16 numerics: LSSAR with p learned from 15 (dtheta too)") {
    compare_every_target(ATTN_LSSAR, true);
}

// ssmax: every gradient tensor (dssmax_s among them) and the losses as for the other variants.
TEST_CASE("fast path vs reference, 10 AdamW steps, fp32 and bf16 numerics: ssmax (ds too)") {
    compare_every_target(ATTN_SSMAX);
}

// The fast path's graph for ssmax: the s tensor (layers x heads)
// is in its weights, a step runs through forward, backward and update to a finite loss, gradient
// and s, and the AdamW update moves s by at most about the learning rate (AdamW's step bound).
TEST_CASE("fast path, fp32 and bf16: ssmax's s is one weight per layer and head, and a step keeps it finite") {
    for (const char* precision : {"fp32", "bf16"}) {
        CAPTURE(precision);
        GPT2Config c = tiny_config(ATTN_SSMAX);
        ModelCPU fast(c);
        fast.select_precision(precision);
        fast.init(42);
        REQUIRE(fast.gpt.param_sizes[P_SSMAX_S] == (size_t)(c.num_layers * c.num_heads));
        std::vector<int> in, tg;
        token_batch(in, tg, 4, 24, c.vocab_size, 7);
        fast.zero_grad();
        float loss = fast.forward(in.data(), tg.data(), 4, 24);
        fast.backward(1.0f);
        CHECK(std::isfinite(loss));
        CHECK(std::isfinite(fast.grad_norm()));
        fast.update({.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .weight_decay = WEIGHT_DECAY,
                     .grad_scale = 1.0f, .step = 1});
        std::vector<double> s = model_ssmax_s(fast);
        REQUIRE(s.size() == fast.gpt.param_sizes[P_SSMAX_S]);
        for (double v : s) CHECK(std::fabs(v - SSMAX_S0) <= 1.01 * LR);
    }
}

static void check_resume(const std::string& precision) {
    GPT2Config c = tiny_config(ATTN_LSSAR);
    const int B = 4, T = 24, STOP = 3, END = 6;
    std::vector<int> in, tg;
    ModelCPU straight(c), first(c);
    straight.select_precision(precision);
    first.select_precision(precision);
    straight.init(5);
    first.init(5);
    std::vector<float> losses_straight, losses_resumed;
    for (int s = 1; s <= END; s++) {
        token_batch(in, tg, B, T, c.vocab_size, s);
        losses_straight.push_back(train_step(straight, in, tg, B, T, s));
        if (s <= STOP) train_step(first, in, tg, B, T, s);
    }
    // the checkpoint files of step STOP, as the trainer writes them
    TempDir dir;
    Checkpoint ck;
    ck.config = c;
    ck.train.step = STOP;
    first.get_params(ck.params);
    checkpoint_write(checkpoint_path(dir.path, STOP), ck);
    OptimizerShard shard;
    shard.step = STOP;
    shard.num_parameters = first.num_parameters;
    shard.end = first.num_parameters;
    first.get_optimizer(shard.m, shard.v);
    optimizer_shard_write(optimizer_shard_path(dir.path, STOP, 0, 1), shard);

    Checkpoint back;
    checkpoint_read(checkpoint_path(dir.path, STOP), back);
    OptimizerShard shard_back;
    optimizer_shard_read(optimizer_shard_path(dir.path, STOP, 0, 1), shard_back, STOP, 0, 1, first.num_parameters);
    ModelCPU resumed(back.config);
    resumed.select_precision(precision);
    resumed.set_params(back.params, STOP);
    resumed.set_optimizer(shard_back.m, shard_back.v);
    if (precision == "bf16") CHECK(resumed.fast16->params_bf == first.fast16->params_bf);  // as the last update rounded them
    for (int s = STOP + 1; s <= END; s++) {
        token_batch(in, tg, B, T, c.vocab_size, s);
        losses_resumed.push_back(train_step(resumed, in, tg, B, T, s));
    }
    for (int s = STOP + 1; s <= END; s++) CHECK(losses_resumed[s - STOP - 1] == losses_straight[s - 1]);
    CHECK(resumed.gpt.params == straight.gpt.params);
    CHECK(resumed.gpt.m == straight.gpt.m);
    CHECK(resumed.gpt.v == straight.gpt.v);
    if (precision == "bf16") CHECK(resumed.fast16->params_bf == straight.fast16->params_bf);
}
TEST_CASE("fast path, fp32 and bf16: stopped after 3 steps, checkpointed to files and resumed, it ends bit for bit as the uninterrupted run") {
    for_each_fast_target([](const std::string&) {
        check_resume("fp32");
        check_resume("bf16");
    });
}

// ----------------------------------------------------------------------------
// the trainer

static const char* TRAINER = "./train_gpt2cpu_lssar";

static std::string tiny_run(const std::string& data, const std::string& out, const std::string& extra) {
    return exec_wrapper() + TRAINER + " -i " + data + "/train_*.bin -j \"\" -e d2c32h2v512 -b 4 -t 16 " +
           "-l 3e-3 -c 0.1 -s 0 -v 0 -x 8 -n 4 -o " + out + " " + extra;
}

TEST_CASE("trainer: -pr fp32 and bf16 train and resume bit for bit (-xi, -y 1); auto says what it picked; without bf16 matmuls bf16 is computed exactly") {
    TempDir data;
    Rng rng(7);
    std::vector<uint16_t> tokens(6000);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = rng.uniform() < 0.1 ? (uint16_t)(rng.next_u64() % 512) : (uint16_t)((i * 7 + i / 13) % 500);
    write_shard(data.path + "/train_000000.bin", tokens.data(), tokens.size());

    std::vector<std::string> la_bf16;
    for (std::string pr : {"fp32", "bf16"}) {
        CAPTURE(pr);
        TempDir a, b;
        Result ra = run(tiny_run(data.path, a.path, "-pr " + pr));
        INFO(ra.output);
        REQUIRE(ra.code == 0);
        CHECK(ra.output.find("precision: " + pr + " on the fast path (kernels: " + fast_cpu_target()) != std::string::npos);
        Result rb1 = run(tiny_run(data.path, b.path, "-pr " + pr + " -xi 3"));
        Result rb2 = run(tiny_run(data.path, b.path, "-pr " + pr + " -y 1"));
        INFO(rb1.output << rb2.output);
        REQUIRE(rb2.code == 0);
        CHECK(read_file(checkpoint_path(a.path, 8)) == read_file(checkpoint_path(b.path, 8)));
        CHECK(read_file(optimizer_shard_path(a.path, 8, 0, 1)) == read_file(optimizer_shard_path(b.path, 8, 0, 1)));
        std::vector<std::string> la = loss_records(a.path + "/log.jsonl"), lb = loss_records(b.path + "/log.jsonl");
        CHECK(la.size() == 8);
        CHECK(la == lb);
        if (pr == "bf16") la_bf16 = la;
    }

    // auto: bf16 where oneDNN has bf16 matmuls, else fp32; either way it says which and why
    TempDir au, nohw, hw32;
    Result rau = run(tiny_run(data.path, au.path, "-pr auto"));
    INFO(rau.output);
    REQUIRE(rau.code == 0);
    CHECK(rau.output.find(std::string("precision: auto picked ") + (cpu_bf16_matmul().hardware ? "bf16" : "fp32")) !=
          std::string::npos);
    CHECK(rau.output.find("error") == std::string::npos);
    // oneDNN held to AVX2: no bf16 matmuls; bf16 then runs the exact emulation (its sums in another
    // order: close to, not the bits of, the hardware run), auto picks fp32
    Result rno = run("ONEDNN_MAX_CPU_ISA=AVX2 " + tiny_run(data.path, nohw.path, "-pr bf16"));
    Result rno32 = run("ONEDNN_MAX_CPU_ISA=AVX2 " + tiny_run(data.path, hw32.path, "-pr auto -x 2"));
    INFO(rno.output << rno32.output);
    REQUIRE(rno.code == 0);
    CHECK(rno.output.find("bf16 products computed exactly through sgemm, this CPU has no bf16 matmuls") != std::string::npos);
    CHECK(rno32.output.find("precision: auto picked fp32 on the fast path") != std::string::npos);
    CHECK(rno32.output.find("no bf16 matmuls on this CPU: oneDNN runs avx2") != std::string::npos);
    std::vector<std::string> lno = loss_records(nohw.path + "/log.jsonl");
    CHECK(lno.size() == 8);
    Result bad = run(tiny_run(data.path, hw32.path, "-pr fp16"));
    CHECK(bad.code != 0);
    CHECK(bad.output.find("-pr fp16: expected ref, fp32, bf16 or auto") != std::string::npos);
}
