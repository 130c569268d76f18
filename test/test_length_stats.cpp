// The statistics of eval/loss_vs_length.h against direct computations on small cases: the position
// buckets, the mean beyond the training length, the paired difference against 1x and between two
// models, the block bootstrap (seeded, reproducible, of the width the sampling theory gives), the
// interval across seeds, the windows over a split of several documents (their starts and the
// losses scored in them), the token-loss file with what it scored, and the pairing by seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <set>
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

// A model whose loss of a position is a function of its whole context and its target, exactly
// representable in float: (sum over the context of token * (distance + 1)) mod 997 + 1000 target.
struct ContextModel {
    std::vector<int> in, tg;
    int B = 0, L = 0;
    static float loss_of(const int* context, int n, int target) {
        long long h = 0;
        for (int q = 0; q < n; q++) h += (long long)context[q] * (n - q);
        return (float)(h % 997 + 1000LL * target);
    }
    void forward(const int* inputs, const int* targets, int b, int l) {
        in.assign(inputs, inputs + (size_t)b * l);
        tg.assign(targets, targets + (size_t)b * l);
        B = b, L = l;
    }
    void losses(float* out) const {
        for (int b = 0; b < B; b++)
            for (int p = 0; p < L; p++) out[b * L + p] = loss_of(in.data() + b * L, p + 1, tg[(size_t)(b * L + p)]);
    }
};

// Five documents of 40, 25, 60, 30 and 45 byte tokens, each opening with the document start 0,
// in two shards (the first three documents, then the other two).
struct SyntheticSplit {
    TempDir dir;
    std::vector<int> doc_lengths = {40, 25, 60, 30, 45};
    std::vector<int> tokens;        // all of them, in order
    std::vector<int64_t> doc_begin; // each document's first token
    SyntheticSplit() {
        Rng rng(21);
        std::vector<uint16_t> shard;
        for (size_t d = 0; d < doc_lengths.size(); d++) {
            doc_begin.push_back((int64_t)tokens.size());
            for (int i = 0; i < doc_lengths[d]; i++) tokens.push_back(i == 0 ? 0 : 1 + (int)(rng.next_u64() % 255));
            if (d == 2 || d + 1 == doc_lengths.size()) {
                shard.assign(tokens.begin() + (shard.empty() && d == 2 ? 0 : doc_begin[3]), tokens.end());
                write_shard(dir.path + (d == 2 ? "/val_000000.bin" : "/val_000001.bin"), shard.data(), shard.size());
            }
        }
    }
    int64_t document_of(int64_t i) const {
        int64_t d = 0;
        while (d + 1 < (int64_t)doc_begin.size() && doc_begin[(size_t)d + 1] <= i) d++;
        return d;
    }
};

TEST_CASE("window starts: the first span, a fixed stride over the split, a seeded sample") {
    using V = std::vector<int64_t>;
    CHECK(window_starts(WindowRule::First, 4, 16, 1001, 0) == V{0, 16, 32, 48});
    CHECK(window_starts(WindowRule::Stride, 4, 16, 1001, 0) == V{0, 250, 500, 750});  // floor(1000 / 4)
    CHECK(window_starts(WindowRule::Stride, 3, 16, 49, 0) == V{0, 16, 32});           // no room: contiguous
    CHECK_THROWS_AS(window_starts(WindowRule::Stride, 4, 16, 64, 0), std::invalid_argument);
    V a = window_starts(WindowRule::Sample, 30, 16, 1001, 5), b = window_starts(WindowRule::Sample, 30, 16, 1001, 5),
      c = window_starts(WindowRule::Sample, 30, 16, 1001, 6);
    CHECK(a == b);
    CHECK(a != c);
    // directly: 30 draws in [0, 1000 - 30 * 16], sorted, window w shifted by 16 w
    Rng rng(5);
    V g(30);
    for (int64_t& x : g) x = (int64_t)(rng.next_u64() % (uint64_t)(1000 - 30 * 16 + 1));
    std::sort(g.begin(), g.end());
    for (int w = 0; w < 30; w++) CHECK(a[(size_t)w] == g[(size_t)w] + 16 * w);
    for (const V* s : {&a, &c}) {
        for (size_t w = 1; w < s->size(); w++) CHECK((*s)[w] - (*s)[w - 1] >= 16);  // no overlap
        CHECK(s->front() >= 0);
        CHECK(s->back() + 16 + 1 <= 1001);
    }
    // spread over the split, not bunched at its start
    CHECK(a.back() > 500);
}

TEST_CASE("windows over a split of several documents: every document, and the losses of those windows") {
    SyntheticSplit sp;
    std::vector<int> split = read_token_span(sp.dir.path + "/val_*.bin", SIZE_MAX, 256);
    REQUIRE(split == sp.tokens);  // 200 tokens, both shards
    const std::vector<int> lengths = {4, 8};  // T_train 4: 1x and 2x
    const int64_t Lb = 8;
    CHECK(window_length(lengths) == Lb);
    CHECK(window_length({4, 6}) == 12);
    // 20 windows of 8: N = 160 (-n 160), stride floor(199 / 20) = 9
    int64_t N = scored_token_count(lengths, (int64_t)split.size(), 160);
    REQUIRE(N == 160);
    std::vector<int64_t> expect_starts;
    for (int w = 0; w < 20; w++) expect_starts.push_back(9 * w);
    for (WindowRule rule : {WindowRule::Stride, WindowRule::Sample, WindowRule::First}) {
        std::string rule_name = window_rule_name(rule);
        CAPTURE(rule_name);
        EvalWindows win = make_windows(split, Lb, window_starts(rule, N / Lb, Lb, (int64_t)split.size(), 3),
                                       document_start_token(256));
        REQUIRE(win.N() == N);
        CHECK(win.split_tokens == 200);
        CHECK(win.split_documents == 5);
        if (rule == WindowRule::Stride) CHECK(win.starts == expect_starts);
        if (rule == WindowRule::First) CHECK(win.starts.back() == 19 * 8);
        // the document of every start, directly from the documents' offsets
        std::set<int64_t> docs;
        for (size_t w = 0; w < win.starts.size(); w++) {
            CHECK(win.documents[w] == sp.document_of(win.starts[w]));
            docs.insert(win.documents[w]);
        }
        CHECK(win.distinct_documents() == (int64_t)docs.size());
        if (rule != WindowRule::First) CHECK(docs.size() == 5);  // the stride and the sample reach every document
        // the loss of every token at every length, directly: window b, sub-window j of length L,
        // position p: context split[s + jL, s + jL + p], target split[s + jL + p + 1]
        ContextModel model;
        for (int tpf : {8, 24, 1000}) {  // windows batched 1, 3 (across windows of Lb) and all at a time
            TokenLosses t = score_tokens(model, win, lengths, tpf);
            REQUIRE(t.loss.size() == 2);
            for (size_t k = 0; k < lengths.size(); k++) {
                int L = lengths[k];
                double sum = 0;
                for (size_t b = 0; b < win.starts.size(); b++)
                    for (int j = 0; j < Lb / L; j++)
                        for (int p = 0; p < L; p++) {
                            int64_t s = win.starts[b] + (int64_t)j * L;
                            float want = ContextModel::loss_of(split.data() + s, p + 1, split[(size_t)(s + p + 1)]);
                            size_t i = b * Lb + (size_t)(j * L + p);
                            CHECK(t.loss[k][i] == want);
                            sum += want;
                        }
                CHECK(mean_losses(t)[k].loss == doctest::Approx(sum / (double)N).epsilon(1e-12));
            }
            // pairing against 1x: the same target at both lengths (loss / 1000), and the 1x context
            // of a token at 2x position p >= 4 is the strict suffix split[s + 4, s + p] of its 2x context
            for (int64_t i = 0; i < N; i++) {
                CHECK((int)t.loss[0][(size_t)i] / 1000 == (int)t.loss[1][(size_t)i] / 1000);
                int64_t s = win.starts[(size_t)(i / 8)], p = i % 8;
                if (p >= 4)
                    CHECK(t.loss[0][(size_t)i] ==
                          ContextModel::loss_of(split.data() + s + 4, (int)p - 3, split[(size_t)(s + p + 1)]));
            }
        }
    }
    // the first-span windows equal the contiguous evaluation of the first N + 1 tokens
    ContextModel model;
    std::vector<int> head(split.begin(), split.begin() + N + 1);
    EvalWindows first = make_windows(split, Lb, window_starts(WindowRule::First, N / Lb, Lb, 200, 0), 0);
    CHECK(score_tokens(model, head, N, lengths, 16).loss == score_tokens(model, first, lengths, 16).loss);
}

static ScoredSpan some_span(uint64_t token_hash = 99) {
    return {8, {8, 16, 32}, 64, 32, {0, 100}, token_hash, "data/x_val_*.bin"};
}

TEST_CASE("token losses round-trip through their file, with what they scored and the seeds") {
    TempDir dir;
    std::vector<TokenLosses> runs = {synthetic(1), synthetic(2)};
    runs[0].seed = 11, runs[0].checkpoint = "out/s11/ckpt.bin";
    runs[1].seed = 12, runs[1].checkpoint = "out/s12/ckpt.bin";
    std::string path = dir.path + "/t.bin";
    write_token_losses(path, runs, some_span());
    ScoredSpan sp;
    std::vector<TokenLosses> back = read_token_losses(path, &sp);
    CHECK(sp.T_train == 8);
    CHECK(sp.lengths == std::vector<int>{8, 16, 32});
    CHECK(sp.starts == std::vector<int64_t>{0, 100});
    CHECK(sp.block == 32);
    CHECK(sp.token_hash == 99);
    CHECK(sp.shards == "data/x_val_*.bin");
    CHECK(span_mismatch(sp, some_span()) == "");
    REQUIRE(back.size() == 2);
    CHECK(back[1].lengths == runs[1].lengths);
    CHECK(back[1].loss == runs[1].loss);
    CHECK(back[0].seed == 11);
    CHECK(back[1].checkpoint == "out/s12/ckpt.bin");
    // a span that does not hold the runs' tokens is not written
    ScoredSpan wrong = some_span();
    wrong.N = 96;
    CHECK_THROWS_AS(write_token_losses(path, runs, wrong), std::invalid_argument);
    // truncated
    FILE* f = fopen(path.c_str(), "r+b");
    REQUIRE(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    REQUIRE(truncate(path.c_str(), size - 4) == 0);
    CHECK_THROWS_WITH_AS(read_token_losses(path, &sp), doctest::Contains("truncated"), std::runtime_error);
    CHECK_THROWS_WITH_AS(read_token_losses(dir.path + "/none.bin", &sp), doctest::Contains("cannot open"),
                         std::runtime_error);
    // a damaged window start: the fingerprint no longer matches
    write_token_losses(path, runs, some_span());
    f = fopen(path.c_str(), "r+b");
    REQUIRE(f);
    fseek(f, 32 + 3 * 4 + 8, SEEK_SET);  // header, lengths, starts[1]
    int64_t moved = 101;
    fwrite(&moved, sizeof moved, 1, f);
    fclose(f);
    CHECK_THROWS_WITH_AS(read_token_losses(path, &sp), doctest::Contains("fingerprint"), std::runtime_error);
    // a version 1 file: refused, saying how to make a new one
    int32_t v1[8] = {TOKEN_LOSSES_MAGIC, 1, 1, 1, 8, 8, 0, 0};
    f = fopen(path.c_str(), "wb");
    REQUIRE(f);
    fwrite(v1, sizeof v1, 1, f);
    fclose(f);
    CHECK_THROWS_WITH_AS(read_token_losses(path, &sp), doctest::Contains("version 1, this build reads version 2"),
                         std::runtime_error);
    CHECK_THROWS_WITH_AS(read_token_losses(path, &sp), doctest::Contains("regenerate it with this build's loss_vs_length -ot"),
                         std::runtime_error);
}

TEST_CASE("a file that scored other tokens, another T or other lengths is told apart, saying what differs") {
    ScoredSpan here = some_span();
    CHECK(span_mismatch(here, here) == "");
    ScoredSpan tokens = some_span(98);  // the same starts in another split
    tokens.shards = "data/y_val_*.bin";
    CHECK(span_mismatch(tokens, here) == "the windows hold other tokens (shards data/y_val_*.bin there, data/x_val_*.bin here)");
    CHECK(tokens.fingerprint() != here.fingerprint());
    ScoredSpan t = some_span();
    t.T_train = 16;
    CHECK(span_mismatch(t, here) == "training length 16 there, 8 here");
    ScoredSpan l = some_span();
    l.lengths = {8, 16};
    CHECK(span_mismatch(l, here) == "lengths 8,16 there, 8,16,32 here");
    ScoredSpan s = some_span();
    s.starts = {0, 90};
    CHECK(span_mismatch(s, here) == "window starts differ (2 windows there, 2 here, window 1 at token 90 there, 100 here)");
    ScoredSpan n = some_span();
    n.N = 96, n.starts = {0, 100, 200};
    CHECK(span_mismatch(n, here) == "96 tokens scored there, 64 here; window starts differ (3 windows there, 2 here)");
    for (const ScoredSpan* x : {&t, &l, &s, &n}) CHECK(x->fingerprint() != here.fingerprint());
}

TEST_CASE("checkpoints pair with the other model's by seed, not by their order") {
    std::vector<TokenLosses> a = {synthetic(1), synthetic(2)}, b = {synthetic(3), synthetic(4)};
    a[0].seed = 7, a[1].seed = 9, b[0].seed = 9, b[1].seed = 7;  // given in swapped order
    a[0].checkpoint = "a7", a[1].checkpoint = "a9", b[0].checkpoint = "b9", b[1].checkpoint = "b7";
    CHECK(pair_by_seed(a, b) == std::vector<size_t>{1, 0});
    b[1].seed = 0;
    CHECK_THROWS_WITH_AS(pair_by_seed(a, b), doctest::Contains("b7 records no training seed"), std::invalid_argument);
    b[1].seed = 9;
    CHECK_THROWS_WITH_AS(pair_by_seed(a, b), doctest::Contains("b9 and b7 hold the same seed 9"), std::invalid_argument);
    b[1].seed = 8;
    CHECK_THROWS_WITH_AS(pair_by_seed(a, b), doctest::Contains("a7 (seed 7) has no checkpoint of the same seed"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(pair_by_seed(a, {b[0]}), doctest::Contains("2 checkpoints here, 1 there"),
                         std::invalid_argument);
}
