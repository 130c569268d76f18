// The statistics of eval/loss_vs_length.h against direct computations on small cases: the position
// buckets, the mean beyond the training length, the paired difference against 1x and between two
// models, the block bootstrap (seeded, reproducible, of the width the sampling theory gives), the
// interval across seeds, and the token-loss file.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <unistd.h>
#include <vector>

#include "eval/loss_vs_length.h"
#include "model/rand.h"
#include "test/temp_dir.h"

// Token losses at lengths 8, 16, 32 over N = 64 tokens, a different value for every (length, token).
static TokenLosses synthetic(uint64_t seed, int64_t N = 64, std::vector<int> lengths = {8, 16, 32}) {
    TokenLosses t;
    t.lengths = lengths;
    t.N = N;
    Rng rng(seed);
    for (size_t k = 0; k < lengths.size(); k++) {
        std::vector<float> l((size_t)N);
        for (float& x : l) x = (float)(1 + rng.uniform() + 0.1 * k);
        t.loss.push_back(l);
    }
    return t;
}

TEST_CASE("position buckets double from 1 and stop at the length") {
    using B = std::vector<std::pair<int, int>>;
    CHECK(position_buckets(1) == B{{0, 1}});
    CHECK(position_buckets(8) == B{{0, 1}, {1, 2}, {2, 4}, {4, 8}});
    CHECK(position_buckets(48) == B{{0, 1}, {1, 2}, {2, 4}, {4, 8}, {8, 16}, {16, 32}, {32, 48}});
}

TEST_CASE("window mean, buckets, the mean beyond T_train and the paired difference against 1x, directly") {
    TokenLosses t = synthetic(7);
    const int T_train = 8;
    std::vector<LengthStats> s = length_stats(t, T_train, 1234);
    REQUIRE(s.size() == 3);
    for (size_t k = 0; k < 3; k++) {
        int L = t.lengths[k];
        CAPTURE(L);
        double all = 0;
        for (float x : t.loss[k]) all += x;
        CHECK(s[k].loss == doctest::Approx(all / 64).epsilon(1e-12));
        // buckets: every token at window position p in [lo, hi)
        for (const BucketLoss& b : s[k].buckets) {
            double sum = 0;
            int n = 0;
            for (int i = 0; i < 64; i++)
                if (i % L >= b.lo && i % L < b.hi) sum += t.loss[k][i], n++;
            CHECK(b.tokens == n);
            CHECK(b.loss == doctest::Approx(sum / n).epsilon(1e-12));
        }
        if (L == T_train) {
            CHECK(s[k].beyond_tokens == 0);
            CHECK(std::isnan(s[k].beyond.mean));
            CHECK(std::isnan(s[k].paired.mean));
            continue;
        }
        double beyond = 0, paired = 0;
        int n = 0;
        for (int i = 0; i < 64; i++) {
            if (i % L < T_train) continue;
            beyond += t.loss[k][i];
            paired += t.loss[k][i] - t.loss[0][i];  // lengths[0] == T_train: the 1x evaluation
            n++;
        }
        CHECK(s[k].beyond_tokens == n);
        CHECK(n == 64 / L * (L - T_train));
        CHECK(s[k].beyond.mean == doctest::Approx(beyond / n).epsilon(1e-12));
        CHECK(s[k].paired.mean == doctest::Approx(paired / n).epsilon(1e-12));
        CHECK(s[k].beyond.lo <= s[k].beyond.mean);
        CHECK(s[k].beyond.mean <= s[k].beyond.hi);
        CHECK(s[k].paired.lo <= s[k].paired.hi);
    }
    // L = 32: 2 windows, each of 24 beyond tokens: the bootstrap draws from the 2 window means only,
    // so both ends of the interval are a mean of two draws of them
    const LengthStats& l32 = s[2];
    double w0 = 0, w1 = 0;
    for (int p = 8; p < 32; p++) w0 += t.loss[2][p], w1 += t.loss[2][32 + p];
    std::vector<double> possible = {w0 / 24, (w0 + w1) / 48, w1 / 24};
    auto one_of = [&](double x) {
        for (double v : possible)
            if (std::fabs(x - v) < 1e-12) return true;
        return false;
    };
    CHECK(one_of(l32.beyond.lo));
    CHECK(one_of(l32.beyond.hi));
}

TEST_CASE("the block bootstrap is seeded, reproducible, and as wide as the sampling theory says") {
    // 400 windows of 16 tokens, each window's tokens sharing one N(0, 1) draw: the window means are
    // iid N(0, 1), so the mean's 95% interval is +-1.96 / sqrt(400) = +-0.098
    const int W = 400, L = 16;
    Rng rng(99);
    std::vector<double> v((size_t)W * L);
    for (int w = 0; w < W; w++) {
        double x = rng.normal();
        for (int p = 0; p < L; p++) v[(size_t)w * L + p] = x;
    }
    auto value = [&](int64_t i) { return v[(size_t)i]; };
    Interval a = window_bootstrap(W * L, L, 0, value, 5), b = window_bootstrap(W * L, L, 0, value, 5),
             c = window_bootstrap(W * L, L, 0, value, 6);
    CHECK(a.lo == b.lo);
    CHECK(a.hi == b.hi);
    CHECK((a.lo != c.lo || a.hi != c.hi));
    double half = (a.hi - a.lo) / 2;
    MESSAGE("bootstrap half-width " << half << " against 1.96 sd / sqrt(W) = " << 1.96 / std::sqrt((double)W));
    // the sample's own standard deviation sets the width; 2,000 replicates put the percentiles
    // within ~5% of it, the sample sd within ~4% of 1 (sd/sqrt(2(W-1))): 15% covers both
    CHECK(half == doctest::Approx(1.96 / std::sqrt((double)W)).epsilon(0.15));
    // a constant difference has a zero-width interval
    Interval k = window_bootstrap(W * L, L, 3, [](int64_t) { return 0.25; }, 5);
    CHECK(k.mean == 0.25);
    CHECK(k.lo == 0.25);
    CHECK(k.hi == 0.25);
}

TEST_CASE("paired difference of two models: the mean over their checkpoints, token by token") {
    std::vector<TokenLosses> a = {synthetic(1), synthetic(2)}, b = {synthetic(3)};
    std::vector<PairedLength> d = paired_difference(a, b, 8, 11);
    REQUIRE(d.size() == 3);
    for (size_t k = 0; k < 3; k++) {
        int L = a[0].lengths[k];
        double all = 0, beyond = 0;
        int n = 0;
        for (int i = 0; i < 64; i++) {
            double x = ((double)a[0].loss[k][i] + a[1].loss[k][i]) / 2 - b[0].loss[k][i];
            all += x;
            if (i % L >= 8) beyond += x, n++;
        }
        CHECK(d[k].all.mean == doctest::Approx(all / 64).epsilon(1e-6));
        if (L > 8) CHECK(d[k].beyond.mean == doctest::Approx(beyond / n).epsilon(1e-6));
        else CHECK(std::isnan(d[k].beyond.mean));
    }
    std::vector<TokenLosses> other = {synthetic(4, 64, {8, 16})};
    CHECK_THROWS_AS(paired_difference(a, other, 8, 11), std::invalid_argument);
}

TEST_CASE("across seeds: mean and Student's t interval") {
    Interval r = across_seeds({1, 2, 3});
    CHECK(r.mean == doctest::Approx(2));
    CHECK(r.hi - r.mean == doctest::Approx(4.303 / std::sqrt(3.0)).epsilon(1e-4));  // sd 1, t(2) 4.303
    CHECK(std::isnan(across_seeds({5}).lo));
    CHECK(student_t975(1) == doctest::Approx(12.706));
    CHECK(student_t975(30) == doctest::Approx(2.042).epsilon(0.005));
}

TEST_CASE("token losses round-trip through their file; a damaged file is refused") {
    TempDir dir;
    std::vector<TokenLosses> runs = {synthetic(1), synthetic(2)};
    std::string path = dir.path + "/t.bin";
    write_token_losses(path, runs, 8);
    int T = 0;
    std::vector<TokenLosses> back = read_token_losses(path, &T);
    CHECK(T == 8);
    REQUIRE(back.size() == 2);
    CHECK(back[1].lengths == runs[1].lengths);
    CHECK(back[1].loss == runs[1].loss);
    // truncated
    FILE* f = fopen(path.c_str(), "r+b");
    REQUIRE(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    REQUIRE(truncate(path.c_str(), size - 4) == 0);
    CHECK_THROWS_WITH_AS(read_token_losses(path, &T), doctest::Contains("truncated"), std::runtime_error);
    CHECK_THROWS_WITH_AS(read_token_losses(dir.path + "/none.bin", &T), doctest::Contains("cannot open"),
                         std::runtime_error);
}
