// Rung 1 of the correctness ladder: every CPU reference layer (float64) against finite
// differences. Each layer's output is reduced to a scalar L = sum(out * R) with a random R;
// the backward is run with dout = R and every gradient element is compared.
// Tolerance: relative error < 1e-6 per element (gradcheck.h explains the metric); float64 finite
// differences of fourth order are accurate to ~1e-9 relative here, so 1e-6 leaves room only for
// real mistakes.
#include <doctest/doctest.h>

#include "layers/classifier_cpu.h"
#include "layers/encoder_cpu.h"
#include "layers/gelu_cpu.h"
#include "layers/global_norm_cpu.h"
#include "layers/layernorm_cpu.h"
#include "layers/matmul_cpu.h"
#include "layers/residual_cpu.h"
#include "layers/rope_cpu.h"
#include "test/gradcheck.h"

constexpr double TOL = 1e-6;

#define CHECK_GRAD(name, f, x, analytic, n)                                   \
    do {                                                                      \
        GradCheckResult r_ = check_gradient(f, x, analytic, n);               \
        INFO(name << ": " << describe(r_));                                   \
        CHECK(r_.max_rel_err < TOL);                                          \
    } while (0)

TEST_CASE("encoder backward matches finite differences") {
    Rng rng(1);
    int B = 2, T = 5, C = 6, Vp = 7;
    std::vector<int> inp = {0, 3, 3, 6, 1, 2, 2, 2, 5, 0};  // repeated ids accumulate
    auto wte = random_vector(Vp * C, rng);
    auto R = random_vector(B * T * C, rng);
    std::vector<double> out(B * T * C), dwte(Vp * C, 0.0);
    ref::encoder_backward(dwte.data(), R.data(), inp.data(), B, T, C);
    auto f = [&] {
        ref::encoder_forward(out.data(), inp.data(), wte.data(), B, T, C);
        return weighted_sum(out.data(), R.data(), out.size());
    };
    CHECK_GRAD("dwte", f, wte.data(), dwte.data(), wte.size());
}

TEST_CASE("rope forward rotates pairs and its backward matches finite differences") {
    Rng rng(2);
    int B = 2, T = 6, NH = 2, hd = 8;
    size_t n = (size_t)B * T * 3 * NH * hd;
    auto inp = random_vector(n, rng);
    auto R = random_vector(n, rng);
    std::vector<double> out(n), dinp(n);
    ref::rope_forward(out.data(), inp.data(), B, T, NH, hd, 10000.0);
    // position 0 is not rotated; v is copied; norms of every pair are preserved
    for (int i = 0; i < 3 * NH * hd; i++) CHECK(out[i] == inp[i]);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < 2 * NH * hd; k += 2) {
                size_t o = (size_t)(b * T + t) * 3 * NH * hd + k;
                CHECK(std::hypot(out[o], out[o + 1]) == doctest::Approx(std::hypot(inp[o], inp[o + 1])).epsilon(1e-14));
            }
    // pair (2i, 2i+1) at position t turns by t * base^(-2i/hd): check one by hand
    {
        int t = 3, i = 1, h = 1;
        size_t o = (size_t)(0 * T + t) * 3 * NH * hd + 1 * NH * hd + h * hd + 2 * i;  // k of head 1
        double angle = t * std::pow(10000.0, -2.0 * i / hd);
        CHECK(out[o] == doctest::Approx(inp[o] * std::cos(angle) - inp[o + 1] * std::sin(angle)).epsilon(1e-14));
        CHECK(out[o + 1] == doctest::Approx(inp[o] * std::sin(angle) + inp[o + 1] * std::cos(angle)).epsilon(1e-14));
    }
    ref::rope_backward(dinp.data(), R.data(), B, T, NH, hd, 10000.0);
    auto f = [&] {
        ref::rope_forward(out.data(), inp.data(), B, T, NH, hd, 10000.0);
        return weighted_sum(out.data(), R.data(), n);
    };
    CHECK_GRAD("dinp", f, inp.data(), dinp.data(), n);
}

TEST_CASE("layernorm backward matches finite differences") {
    Rng rng(3);
    int N = 5, C = 7;
    auto inp = random_vector(N * C, rng, 2.0);
    auto w = random_vector(C, rng);
    auto b = random_vector(C, rng);
    auto R = random_vector(N * C, rng);
    std::vector<double> out(N * C), mean(N), rstd(N), dinp(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
    auto f = [&] {
        ref::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
        return weighted_sum(out.data(), R.data(), out.size());
    };
    f();
    ref::layernorm_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                       N, C);
    CHECK_GRAD("dinp", f, inp.data(), dinp.data(), inp.size());
    CHECK_GRAD("dw", f, w.data(), dw.data(), w.size());
    CHECK_GRAD("db", f, b.data(), db.data(), b.size());
}

TEST_CASE("matmul backward matches finite differences, with and without bias") {
    Rng rng(4);
    int N = 6, C = 5, OC = 7;
    auto inp = random_vector(N * C, rng);
    auto w = random_vector(OC * C, rng);
    auto bias = random_vector(OC, rng);
    auto R = random_vector(N * OC, rng);
    for (bool with_bias : {true, false}) {
        std::vector<double> out(N * OC), dinp(N * C, 0.0), dw(OC * C, 0.0), dbias(OC, 0.0);
        const double* bp = with_bias ? bias.data() : nullptr;
        auto f = [&] {
            ref::matmul_forward(out.data(), inp.data(), w.data(), bp, N, C, OC);
            return weighted_sum(out.data(), R.data(), out.size());
        };
        ref::matmul_backward(dinp.data(), dw.data(), with_bias ? dbias.data() : nullptr, R.data(), inp.data(), w.data(),
                        N, C, OC);
        CHECK_GRAD("dinp", f, inp.data(), dinp.data(), inp.size());
        CHECK_GRAD("dw", f, w.data(), dw.data(), w.size());
        if (with_bias) CHECK_GRAD("dbias", f, bias.data(), dbias.data(), bias.size());
    }
}

TEST_CASE("gelu backward matches finite differences") {
    Rng rng(5);
    int N = 40;
    auto inp = random_vector(N, rng, 3.0);
    auto R = random_vector(N, rng);
    std::vector<double> out(N), dinp(N, 0.0);
    ref::gelu_backward(dinp.data(), inp.data(), R.data(), N);
    auto f = [&] {
        ref::gelu_forward(out.data(), inp.data(), N);
        return weighted_sum(out.data(), R.data(), N);
    };
    CHECK_GRAD("dinp", f, inp.data(), dinp.data(), N);
}

TEST_CASE("residual backward matches finite differences") {
    Rng rng(6);
    int N = 12;
    auto a = random_vector(N, rng), b = random_vector(N, rng), R = random_vector(N, rng);
    std::vector<double> out(N), da(N, 0.0), db(N, 0.0);
    ref::residual_backward(da.data(), db.data(), R.data(), N);
    auto f = [&] {
        ref::residual_forward(out.data(), a.data(), b.data(), N);
        return weighted_sum(out.data(), R.data(), N);
    };
    CHECK_GRAD("da", f, a.data(), da.data(), N);
    CHECK_GRAD("db", f, b.data(), db.data(), N);
}

TEST_CASE("fused classifier: loss and gradient, padded columns ignored") {
    Rng rng(7);
    int N = 4, V = 9, Vp = 12;
    auto logits = random_vector(N * Vp, rng, 2.0);
    for (int n = 0; n < N; n++)
        for (int j = V; j < Vp; j++) logits[n * Vp + j] = 100.0;  // padded columns must not matter
    std::vector<int> targets = {0, 8, 3, 3};
    std::vector<double> losses(N), dlogits(N * Vp, -1.0);
    double dloss = 1.0 / N;
    ref::fused_classifier(losses.data(), dlogits.data(), logits.data(), targets.data(), dloss, N, V, Vp);
    for (int n = 0; n < N; n++) {
        double sum = 0;  // independent: plain log-sum-exp in long double
        for (int j = 0; j < V; j++) sum += std::exp((long double)logits[n * Vp + j]);
        CHECK(losses[n] == doctest::Approx((double)(std::log((long double)sum) - logits[n * Vp + targets[n]])).epsilon(1e-13));
        for (int j = V; j < Vp; j++) CHECK(dlogits[n * Vp + j] == 0.0);
    }
    auto f = [&] {
        ref::fused_classifier(losses.data(), (double*)nullptr, logits.data(), targets.data(), 0.0, N, V, Vp);
        double s = 0;
        for (double l : losses) s += l * dloss;
        return s;
    };
    CHECK_GRAD("dlogits", f, logits.data(), dlogits.data(), logits.size());
}

TEST_CASE("global norm squared equals the plain sum of squares") {
    Rng rng(8);
    auto x = random_vector(1001, rng);
    double expect = 0;
    for (double v : x) expect += v * v;
    CHECK(ref::global_norm_squared(x.data(), x.size()) == doctest::Approx(expect).epsilon(1e-13));
}
