// Loss versus length: the mean validation loss of a model at several sequence lengths, with the
// same tokens scored at every length.
//
// How: one span of N+1 consecutive validation tokens, N a multiple of every length L. At length
// L the span is cut into N/L windows; window w reads inputs span[wL, wL+L) and scores every one
// of its L positions against targets span[wL+1, wL+L+1). So at every length each of the N target
// tokens is scored exactly once, and the loss at L is the mean over positions 0..L-1 of a
// context window (as a model evaluated at length L sees them), not only the positions beyond
// the training length.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <glob.h>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "model/rand.h"

struct LengthLoss {
    int length;      // L
    double loss;     // mean loss over the N scored tokens
    int64_t tokens;  // N
};

// The first n tokens of the shards matching pattern (sorted names, concatenated), or fewer if
// they hold fewer. Throws naming the pattern when nothing matches.
inline std::vector<int> read_token_span(const std::string& pattern, size_t n, int vocab_size) {
    glob_t g;
    std::vector<std::string> files;
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) files.push_back(g.gl_pathv[i]);
    globfree(&g);
    if (files.empty())
        throw std::runtime_error("no shard matches '" + pattern +
                                 "'; check the path (scripts/prepare_kjv.sh writes data/kjv/kjv_val_*.bin)");
    std::vector<int> span;
    for (const std::string& f : files) {
        if (span.size() >= n) break;
        std::vector<uint16_t> tokens = read_shard(f, vocab_size);
        size_t take = std::min(tokens.size(), n - span.size());
        span.insert(span.end(), tokens.begin(), tokens.begin() + take);
    }
    return span;
}

// The largest N <= available - 1 and <= max_tokens that is a multiple of every length; 0 if none.
inline int64_t scored_token_count(const std::vector<int>& lengths, int64_t available, int64_t max_tokens) {
    int64_t l = 1;
    for (int L : lengths) l = std::lcm(l, (int64_t)L);
    int64_t n = std::min(available - 1, max_tokens);
    return n < l ? 0 : n / l * l;
}

// The loss of every scored token at each length: loss[k][i] is the loss of target token i
// (span[i + 1]) in the evaluation at lengths[k], i in [0, N). tokens_per_forward: windows are
// batched B = max(1, tokens_per_forward / L) at a time.
struct TokenLosses {
    std::vector<int> lengths;
    int64_t N = 0;
    std::vector<std::vector<float>> loss;  // (lengths, N)
};

template <class Model>
TokenLosses score_tokens(Model& model, const std::vector<int>& span, int64_t N, const std::vector<int>& lengths,
                         int tokens_per_forward) {
    TokenLosses out;
    out.lengths = lengths;
    out.N = N;
    for (int L : lengths) {
        if (L <= 0 || N % L != 0 || (int64_t)span.size() < N + 1)
            throw std::invalid_argument("loss_vs_length: length " + std::to_string(L) + " does not divide N = " +
                                        std::to_string(N) + " or the span is shorter than N + 1");
        int64_t windows = N / L;
        int B = (int)std::max<int64_t>(1, std::min<int64_t>(windows, tokens_per_forward / L));
        std::vector<int> inputs((size_t)B * L), targets((size_t)B * L);
        std::vector<float> loss((size_t)N);
        for (int64_t w0 = 0; w0 < windows; w0 += B) {
            int b_now = (int)std::min<int64_t>(B, windows - w0);
            for (int b = 0; b < b_now; b++) {
                const int* start = span.data() + (w0 + b) * L;
                std::copy(start, start + L, inputs.begin() + (size_t)b * L);
                std::copy(start + 1, start + L + 1, targets.begin() + (size_t)b * L);
            }
            model.forward(inputs.data(), targets.data(), b_now, L);
            model.losses(loss.data() + w0 * L);
        }
        out.loss.push_back(std::move(loss));
    }
    return out;
}

// Mean loss at each length over span[0, N] (N + 1 tokens, N a multiple of every length).
inline std::vector<LengthLoss> mean_losses(const TokenLosses& t) {
    std::vector<LengthLoss> out;
    for (size_t k = 0; k < t.lengths.size(); k++) {
        double sum = 0;
        for (float l : t.loss[k]) sum += l;
        out.push_back({t.lengths[k], sum / (double)t.N, t.N});
    }
    return out;
}

template <class Model>
std::vector<LengthLoss> loss_vs_length(Model& model, const std::vector<int>& span, int64_t N,
                                       const std::vector<int>& lengths, int tokens_per_forward) {
    return mean_losses(score_tokens(model, span, N, lengths, tokens_per_forward));
}

// ---------------------------------------------------------------------------------------------
// What can see a degradation beyond the training length T_train:
// - the loss per position bucket: positions [0,1), [1,2), [2,4), ... [2^k, min(2^(k+1), L)) of the
//   windows of length L, so the context-starved first positions do not hide the last ones;
// - the mean over the positions at or beyond T_train only (window positions p >= T_train);
// - for those tokens, the paired difference against the 1x evaluation (the same target token
//   scored in a window of length T_train, where it sits at position p mod T_train): how much
//   more the longer context costs the same token;
// each with a 95% interval by block bootstrap over the windows of length L (the windows are
// resampled with replacement, their tokens kept together, since neighbouring tokens' losses are
// correlated), percentiles of BOOTSTRAP_REPLICATES replicates from a seeded generator.

constexpr int BOOTSTRAP_REPLICATES = 2000;

struct Interval {
    double mean = NAN, lo = NAN, hi = NAN;  // the statistic and its 95% interval (NaN: none)
};

// Position buckets of a window of length L: [0,1), [1,2), [2,4), ... up to L.
inline std::vector<std::pair<int, int>> position_buckets(int L) {
    std::vector<std::pair<int, int>> b;
    for (int lo = 0; lo < L; lo = lo == 0 ? 1 : 2 * lo) b.push_back({lo, std::min(lo == 0 ? 1 : 2 * lo, L)});
    return b;
}

// Per window w of length L, the sum and the count of value(i) over its tokens i = wL + p with
// p >= first; then the mean over all windows and its block-bootstrap interval (seeded).
template <class Value>
Interval window_bootstrap(int64_t N, int L, int first, Value value, uint64_t seed) {
    int64_t windows = N / L;
    std::vector<double> sum((size_t)windows, 0.0);
    double total = 0;
    for (int64_t w = 0; w < windows; w++) {
        for (int p = first; p < L; p++) sum[(size_t)w] += value(w * L + p);
        total += sum[(size_t)w];
    }
    Interval r;
    int64_t per_window = L - first;
    if (windows == 0 || per_window <= 0) return r;
    r.mean = total / (double)(windows * per_window);
    if (windows < 2) return r;
    Rng rng(seed);
    std::vector<double> means(BOOTSTRAP_REPLICATES);
    for (double& m : means) {
        double s = 0;
        for (int64_t k = 0; k < windows; k++) s += sum[(size_t)(rng.next_u64() % (uint64_t)windows)];
        m = s / (double)(windows * per_window);
    }
    std::sort(means.begin(), means.end());
    r.lo = means[(size_t)(0.025 * (BOOTSTRAP_REPLICATES - 1) + 0.5)];
    r.hi = means[(size_t)(0.975 * (BOOTSTRAP_REPLICATES - 1) + 0.5)];
    return r;
}

struct BucketLoss {
    int lo, hi;      // positions [lo, hi) of the windows
    double loss;     // mean loss there
    int64_t tokens;  // how many tokens that is
};

struct LengthStats {
    int length;
    double loss;                     // window mean (every position)
    std::vector<BucketLoss> buckets;
    int64_t beyond_tokens = 0;       // positions >= T_train, over all windows
    Interval beyond;                 // their mean loss
    Interval paired;                 // their loss minus the same tokens' loss at 1x (T_train)
};

// Every statistic above for one model's token losses; the 1x evaluation is the length equal to
// T_train among t.lengths (none: no paired difference).
inline std::vector<LengthStats> length_stats(const TokenLosses& t, int T_train, uint64_t seed) {
    int k1 = -1;
    for (size_t k = 0; k < t.lengths.size(); k++)
        if (t.lengths[k] == T_train) k1 = (int)k;
    std::vector<LengthStats> out;
    std::vector<LengthLoss> means = mean_losses(t);
    for (size_t k = 0; k < t.lengths.size(); k++) {
        int L = t.lengths[k];
        const std::vector<float>& loss = t.loss[k];
        LengthStats s;
        s.length = L;
        s.loss = means[k].loss;
        for (auto [lo, hi] : position_buckets(L)) {
            double sum = 0;
            int64_t n = 0;
            for (int64_t w = 0; w < t.N / L; w++)
                for (int p = lo; p < hi; p++) sum += loss[(size_t)(w * L + p)], n++;
            s.buckets.push_back({lo, hi, sum / (double)n, n});
        }
        if (L > T_train) {
            s.beyond_tokens = t.N / L * (L - T_train);
            s.beyond = window_bootstrap(t.N, L, T_train, [&](int64_t i) { return (double)loss[(size_t)i]; }, seed);
            if (k1 >= 0) {
                const std::vector<float>& at1 = t.loss[(size_t)k1];
                s.paired = window_bootstrap(
                    t.N, L, T_train, [&](int64_t i) { return (double)loss[(size_t)i] - (double)at1[(size_t)i]; }, seed);
            }
        }
        out.push_back(std::move(s));
    }
    return out;
}

// The paired difference of two models' token losses (this minus other) at each length, over
// every position and over the positions beyond T_train, with block-bootstrap intervals. Each
// model's loss of a token is its mean over that model's checkpoints (seeds).
struct PairedLength {
    int length;
    Interval all, beyond;
};

inline std::vector<float> mean_over_checkpoints(const std::vector<TokenLosses>& runs, size_t k) {
    std::vector<float> m(runs[0].loss[k].size(), 0.0f);
    for (const TokenLosses& r : runs)
        for (size_t i = 0; i < m.size(); i++) m[i] += r.loss[k][i] / (float)runs.size();
    return m;
}

inline std::vector<PairedLength> paired_difference(const std::vector<TokenLosses>& a, const std::vector<TokenLosses>& b,
                                                   int T_train, uint64_t seed) {
    if (a.empty() || b.empty()) throw std::invalid_argument("paired_difference: no checkpoints");
    for (const TokenLosses& r : b)
        if (r.lengths != a[0].lengths || r.N != a[0].N)
            throw std::invalid_argument("paired_difference: the two models were not scored at the same lengths and tokens");
    std::vector<PairedLength> out;
    for (size_t k = 0; k < a[0].lengths.size(); k++) {
        int L = a[0].lengths[k];
        std::vector<float> ma = mean_over_checkpoints(a, k), mb = mean_over_checkpoints(b, k);
        auto diff = [&](int64_t i) { return (double)ma[(size_t)i] - (double)mb[(size_t)i]; };
        PairedLength p{L, window_bootstrap(a[0].N, L, 0, diff, seed), {}};
        if (L > T_train) p.beyond = window_bootstrap(a[0].N, L, T_train, diff, seed);
        out.push_back(p);
    }
    return out;
}

// 97.5% quantile of Student's t with df degrees of freedom (df >= 1), for 95% intervals across seeds.
inline double student_t975(int df) {
    static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                               2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086};
    if (df < 1) return NAN;
    if (df <= 20) return t[df - 1];
    return 1.96 + 2.4 / df;  // within 0.01 of the exact value beyond 20 degrees of freedom
}

// Mean and 95% t-interval of values (one per checkpoint); a single value has no interval.
inline Interval across_seeds(const std::vector<double>& v) {
    Interval r;
    if (v.empty()) return r;
    double mean = 0;
    for (double x : v) mean += x / (double)v.size();
    r.mean = mean;
    if (v.size() < 2) return r;
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    double half = student_t975((int)v.size() - 1) * std::sqrt(ss / (double)(v.size() - 1) / (double)v.size());
    r.lo = mean - half;
    r.hi = mean + half;
    return r;
}

// ---------------------------------------------------------------------------------------------
// Token losses on disk (loss_vs_length -ot, read back by -vs to pair two models on the same
// tokens): int32 header[8] = {TOKEN_LOSSES_MAGIC, version 1, checkpoints C, lengths K, N, T_train,
// 0, 0}, int32 lengths[K], then float32 losses[C][K][N].
constexpr int32_t TOKEN_LOSSES_MAGIC = 20261202;

inline void write_token_losses(const std::string& path, const std::vector<TokenLosses>& runs, int T_train) {
    if (runs.empty() || runs[0].N > INT32_MAX) throw std::invalid_argument("write_token_losses: nothing to write");
    std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + tmp);
    int32_t h[8] = {TOKEN_LOSSES_MAGIC, 1, (int32_t)runs.size(), (int32_t)runs[0].lengths.size(), (int32_t)runs[0].N,
                    T_train, 0, 0};
    bool ok = fwrite(h, sizeof h, 1, f) == 1 &&
              fwrite(runs[0].lengths.data(), sizeof(int32_t), runs[0].lengths.size(), f) == runs[0].lengths.size();
    for (const TokenLosses& r : runs)
        for (const std::vector<float>& l : r.loss) ok = ok && fwrite(l.data(), sizeof(float), l.size(), f) == l.size();
    if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
        remove(tmp.c_str());
        throw std::runtime_error("writing " + path + " failed (disk full?)");
    }
}

// Reads a file of write_token_losses; *T_train gets the training length it was scored for.
inline std::vector<TokenLosses> read_token_losses(const std::string& path, int* T_train) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + path + " (written by loss_vs_length -ot)");
    auto fail = [&](const std::string& why) {
        fclose(f);
        throw std::runtime_error(path + ": " + why + " (expected a file written by loss_vs_length -ot)");
    };
    int32_t h[8];
    if (fread(h, sizeof h, 1, f) != 1) fail("shorter than its header");
    if (h[0] != TOKEN_LOSSES_MAGIC) fail("bad magic " + std::to_string(h[0]));
    if (h[1] != 1) fail("version " + std::to_string(h[1]) + ", this build reads version 1");
    if (h[2] < 1 || h[3] < 1 || h[4] < 1 || h[5] < 1) fail("malformed header");
    std::vector<int> lengths((size_t)h[3]);
    if (fread(lengths.data(), sizeof(int32_t), lengths.size(), f) != lengths.size()) fail("truncated");
    std::vector<TokenLosses> runs((size_t)h[2]);
    for (TokenLosses& r : runs) {
        r.lengths = lengths;
        r.N = h[4];
        r.loss.assign(lengths.size(), std::vector<float>((size_t)h[4]));
        for (std::vector<float>& l : r.loss)
            if (fread(l.data(), sizeof(float), l.size(), f) != l.size()) fail("truncated");
    }
    if (fgetc(f) != EOF) fail("longer than its header says");
    fclose(f);
    *T_train = h[5];
    return runs;
}
