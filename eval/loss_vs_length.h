// Loss versus length: the mean validation loss of a model at several sequence lengths, with the
// same tokens scored at every length.
//
// How: W windows of Lb + 1 consecutive validation tokens, Lb the least common multiple of the
// lengths (the longest length when every length divides it), N = W * Lb scored tokens. A window
// starting at token s is cut, at length L, into Lb/L sub-windows; sub-window j reads inputs
// [s + jL, s + jL + L) and scores every one of its L positions against targets shifted by one.
// So at every length each of the N target tokens is scored exactly once, a window of length L
// lies inside a window of every longer length (the 1x context of a token is a suffix of its
// context at any multiple of T_train), and the loss at L is the mean over positions 0..L-1 of a
// context window (as a model evaluated at length L sees them), not only the positions beyond
// the training length. The window starts are spread over the whole validation split (every
// document of it): a fixed stride, or a seeded sample (window_starts).
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

// The window length Lb: the least common multiple of the lengths.
inline int64_t window_length(const std::vector<int>& lengths) {
    int64_t l = 1;
    for (int L : lengths) l = std::lcm(l, (int64_t)L);
    return l;
}

// How the W window starts are placed over a split of A tokens (each window reads Lb + 1 tokens):
// - First:  s_w = w Lb, the first W Lb + 1 tokens of the split, one contiguous span;
// - Stride: s_w = w * floor((A - 1) / W), a fixed stride over the whole split;
// - Sample: W values g drawn uniformly from [0, A - 1 - W Lb] by a generator seeded with seed,
//           sorted, s_w = g_w + w Lb: non-overlapping windows at random places over the split.
// Windows never overlap (the stride is >= Lb since W Lb <= A - 1).
enum class WindowRule { First, Stride, Sample };

inline const char* window_rule_name(WindowRule r) {
    return r == WindowRule::First ? "first" : r == WindowRule::Stride ? "stride" : "sample";
}

inline std::vector<int64_t> window_starts(WindowRule rule, int64_t W, int64_t Lb, int64_t A, uint64_t seed) {
    if (W < 0 || Lb < 1 || W * Lb > A - 1)
        throw std::invalid_argument("window_starts: " + std::to_string(W) + " windows of " + std::to_string(Lb) +
                                    " tokens do not fit in " + std::to_string(A) + " tokens");
    std::vector<int64_t> s((size_t)W);
    if (rule == WindowRule::First) {
        for (int64_t w = 0; w < W; w++) s[(size_t)w] = w * Lb;
    } else if (rule == WindowRule::Stride) {
        int64_t stride = W ? (A - 1) / W : 0;
        for (int64_t w = 0; w < W; w++) s[(size_t)w] = w * stride;
    } else {
        uint64_t slack = (uint64_t)(A - 1 - W * Lb);
        Rng rng(seed);
        for (int64_t& g : s) g = (int64_t)(rng.next_u64() % (slack + 1));
        std::sort(s.begin(), s.end());
        for (int64_t w = 0; w < W; w++) s[(size_t)w] += w * Lb;
    }
    return s;
}

// The token that starts a document: byte 0 in byte-level shards (vocabulary 256), <|endoftext|>
// (50256) in GPT-2 shards (tools/tokenize.cpp writes one at the start of every document).
inline int document_start_token(int vocab_size) { return vocab_size <= 256 ? 0 : 50256; }

// The document each start lies in: documents are numbered from 0 in the split's order, a new one
// beginning at every document-start token after the split's first token.
inline std::vector<int64_t> start_documents(const std::vector<int>& split, const std::vector<int64_t>& starts,
                                            int doc_start, int64_t* documents = nullptr) {
    std::vector<int64_t> doc(starts.size());
    int64_t d = 0;
    size_t next = 0;
    for (size_t i = 0; i < split.size() && next < starts.size(); i++) {
        if (i > 0 && split[i] == doc_start) d++;
        while (next < starts.size() && (size_t)starts[next] == i) doc[next++] = d;
    }
    if (documents) {
        int64_t total = split.empty() ? 0 : 1;
        for (size_t i = 1; i < split.size(); i++) total += split[i] == doc_start;
        *documents = total;
    }
    return doc;
}

// 64-bit FNV-1a of a sequence of integers (token ids, starts, lengths).
template <class T>
inline uint64_t fnv1a(const T* v, size_t n, uint64_t h = 14695981039346656037ull) {
    for (size_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)(int64_t)v[i];
        for (int b = 0; b < 8; b++) h = (h ^ ((x >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    return h;
}

// The windows an evaluation scores: tokens holds window b's Lb + 1 tokens at b (Lb + 1).
struct EvalWindows {
    int64_t block = 0;              // Lb
    std::vector<int64_t> starts;    // the offset in the split of each window's first token (ascending)
    std::vector<int64_t> documents; // the document each window starts in
    int64_t split_tokens = 0, split_documents = 0;
    std::vector<int> tokens;        // (W, Lb + 1)
    int64_t N() const { return (int64_t)starts.size() * block; }
    int64_t distinct_documents() const {
        int64_t n = 0;
        for (size_t w = 0; w < documents.size(); w++) n += w == 0 || documents[w] != documents[w - 1];
        return n;
    }
    uint64_t token_hash() const { return fnv1a(tokens.data(), tokens.size()); }
};

inline EvalWindows make_windows(const std::vector<int>& split, int64_t block, const std::vector<int64_t>& starts,
                                int doc_start) {
    EvalWindows e;
    e.block = block;
    e.starts = starts;
    e.split_tokens = (int64_t)split.size();
    e.documents = start_documents(split, starts, doc_start, &e.split_documents);
    for (int64_t s : starts) {
        if (s < 0 || s + block + 1 > (int64_t)split.size())
            throw std::invalid_argument("make_windows: a window at " + std::to_string(s) + " runs past the split");
        e.tokens.insert(e.tokens.end(), split.begin() + s, split.begin() + s + block + 1);
    }
    return e;
}

// The loss of every scored token at each length: loss[k][i] is the loss of scored token i in the
// evaluation at lengths[k], i in [0, N): token i = b Lb + o is window b's target o (the split's
// token starts[b] + o + 1). tokens_per_forward: windows of length L are batched
// B = max(1, tokens_per_forward / L) at a time. seed and checkpoint: whose losses (0: seed unknown).
struct TokenLosses {
    std::vector<int> lengths;
    int64_t N = 0;
    std::vector<std::vector<float>> loss;  // (lengths, N)
    uint64_t seed = 0;
    std::string checkpoint;
};

template <class Model>
TokenLosses score_tokens(Model& model, const EvalWindows& win, const std::vector<int>& lengths, int tokens_per_forward) {
    TokenLosses out;
    out.lengths = lengths;
    int64_t N = out.N = win.N();
    for (int L : lengths) {
        if (L <= 0 || win.block % L != 0)
            throw std::invalid_argument("loss_vs_length: length " + std::to_string(L) + " does not divide the window " +
                                        std::to_string(win.block));
        int64_t windows = N / L;
        int B = (int)std::max<int64_t>(1, std::min<int64_t>(windows, tokens_per_forward / L));
        std::vector<int> inputs((size_t)B * L), targets((size_t)B * L);
        std::vector<float> loss((size_t)N);
        for (int64_t w0 = 0; w0 < windows; w0 += B) {
            int b_now = (int)std::min<int64_t>(B, windows - w0);
            for (int b = 0; b < b_now; b++) {
                int64_t i = (w0 + b) * L;
                const int* start = win.tokens.data() + (i / win.block) * (win.block + 1) + i % win.block;
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

// As above over span[0, N] (N + 1 tokens, N a multiple of every length): the windows of rule First.
template <class Model>
TokenLosses score_tokens(Model& model, const std::vector<int>& span, int64_t N, const std::vector<int>& lengths,
                         int tokens_per_forward) {
    int64_t Lb = window_length(lengths);
    if (N % Lb != 0 || (int64_t)span.size() < N + 1)
        throw std::invalid_argument("loss_vs_length: the lengths do not divide N = " + std::to_string(N) +
                                    " or the span is shorter than N + 1");
    EvalWindows win = make_windows(span, Lb, window_starts(WindowRule::First, N / Lb, Lb, N + 1, 0), -1);
    return score_tokens(model, win, lengths, tokens_per_forward);
}

// Mean loss at each length over the N scored tokens.
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
// What a run scored: -vs pairs two models' token losses only when both scored the same tokens in
// the same windows at the same lengths for the same training length.
struct ScoredSpan {
    int T_train = 0;
    std::vector<int> lengths;
    int64_t N = 0, block = 0;
    std::vector<int64_t> starts;
    uint64_t token_hash = 0;  // EvalWindows::token_hash: the scored windows' tokens
    std::string shards;       // the validation shards' pattern (for messages only)
    uint64_t fingerprint() const {
        int64_t head[3] = {T_train, N, block};
        uint64_t h = fnv1a(head, 3);
        h = fnv1a(lengths.data(), lengths.size(), h);
        h = fnv1a(starts.data(), starts.size(), h);
        return fnv1a(&token_hash, 1, h);
    }
};

inline ScoredSpan scored_span(const EvalWindows& w, int T_train, const std::vector<int>& lengths,
                              const std::string& shards) {
    return {T_train, lengths, w.N(), w.block, w.starts, w.token_hash(), shards};
}

inline std::string join_ints(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

// What differs between two scored spans ("" when nothing does), "there" and "here" named.
inline std::string span_mismatch(const ScoredSpan& there, const ScoredSpan& here) {
    std::vector<std::string> d;
    if (there.T_train != here.T_train)
        d.push_back("training length " + std::to_string(there.T_train) + " there, " + std::to_string(here.T_train) + " here");
    if (there.lengths != here.lengths)
        d.push_back("lengths " + join_ints(there.lengths) + " there, " + join_ints(here.lengths) + " here");
    if (there.N != here.N)
        d.push_back(std::to_string(there.N) + " tokens scored there, " + std::to_string(here.N) + " here");
    if (there.starts != here.starts) {
        size_t w = 0;
        while (w < there.starts.size() && w < here.starts.size() && there.starts[w] == here.starts[w]) w++;
        std::string at = w < there.starts.size() && w < here.starts.size()
                             ? ", window " + std::to_string(w) + " at token " + std::to_string(there.starts[w]) +
                                   " there, " + std::to_string(here.starts[w]) + " here"
                             : "";
        d.push_back("window starts differ (" + std::to_string(there.starts.size()) + " windows there, " +
                    std::to_string(here.starts.size()) + " here" + at + ")");
    }
    if (there.token_hash != here.token_hash)
        d.push_back("the windows hold other tokens (shards " + there.shards + " there, " + here.shards + " here)");
    std::string s;
    for (const std::string& x : d) s += (s.empty() ? "" : "; ") + x;
    return s;
}

// For each run of a, the index of the run of b with the same seed (the checkpoints' training
// seeds). Throws invalid_argument saying why when they cannot be paired that way: a seed unknown
// (0), the same seed twice on one side, or a seed of one side missing from the other.
inline std::vector<size_t> pair_by_seed(const std::vector<TokenLosses>& a, const std::vector<TokenLosses>& b) {
    auto name = [](const TokenLosses& r) { return r.checkpoint.empty() ? std::string("a checkpoint") : r.checkpoint; };
    if (a.size() != b.size())
        throw std::invalid_argument(std::to_string(a.size()) + " checkpoints here, " + std::to_string(b.size()) +
                                    " there: no pairs of seeds");
    for (const std::vector<TokenLosses>* side : {&a, &b})
        for (size_t i = 0; i < side->size(); i++) {
            const TokenLosses& r = (*side)[i];
            if (r.seed == 0)
                throw std::invalid_argument(name(r) + " records no training seed (a checkpoint older than version 3), "
                                            "so the checkpoints cannot be paired by seed");
            for (size_t j = 0; j < i; j++)
                if ((*side)[j].seed == r.seed)
                    throw std::invalid_argument(name((*side)[j]) + " and " + name(r) + " hold the same seed " +
                                                std::to_string(r.seed) + ": the pairing by seed is ambiguous");
        }
    std::vector<size_t> pair(a.size());
    for (size_t i = 0; i < a.size(); i++) {
        size_t j = 0;
        while (j < b.size() && b[j].seed != a[i].seed) j++;
        if (j == b.size())
            throw std::invalid_argument(name(a[i]) + " (seed " + std::to_string(a[i].seed) +
                                        ") has no checkpoint of the same seed on the other side");
        pair[i] = j;
    }
    return pair;
}

// ---------------------------------------------------------------------------------------------
// Token losses on disk (loss_vs_length -ot, read back by -vs to pair two models on the same
// tokens), version 2: int32 header[8] = {TOKEN_LOSSES_MAGIC, 2, checkpoints C, lengths K, N,
// T_train, windows W, window length Lb}, int32 lengths[K], int64 starts[W], uint64 token_hash,
// uint64 fingerprint (ScoredSpan::fingerprint), the shards' pattern (uint32 bytes, then the bytes),
// per checkpoint its seed (uint64, 0: unknown) and path (uint32 bytes, the bytes), then float32
// losses[C][K][N]. Version 1 had neither the windows nor the seeds.
constexpr int32_t TOKEN_LOSSES_MAGIC = 20261202;
constexpr int32_t TOKEN_LOSSES_VERSION = 2;

inline void write_token_losses(const std::string& path, const std::vector<TokenLosses>& runs, const ScoredSpan& span) {
    if (runs.empty() || runs[0].N > INT32_MAX || span.block > INT32_MAX || span.N != runs[0].N ||
        (int64_t)span.starts.size() * span.block != span.N || span.lengths != runs[0].lengths)
        throw std::invalid_argument("write_token_losses: nothing to write, or the span is not the runs'");
    std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + tmp);
    int32_t h[8] = {TOKEN_LOSSES_MAGIC, TOKEN_LOSSES_VERSION, (int32_t)runs.size(), (int32_t)span.lengths.size(),
                    (int32_t)span.N, span.T_train, (int32_t)span.starts.size(), (int32_t)span.block};
    auto put_string = [&](const std::string& s) {
        uint32_t n = (uint32_t)s.size();
        return fwrite(&n, sizeof n, 1, f) == 1 && fwrite(s.data(), 1, s.size(), f) == s.size();
    };
    uint64_t hashes[2] = {span.token_hash, span.fingerprint()};
    bool ok = fwrite(h, sizeof h, 1, f) == 1 &&
              fwrite(span.lengths.data(), sizeof(int32_t), span.lengths.size(), f) == span.lengths.size() &&
              fwrite(span.starts.data(), sizeof(int64_t), span.starts.size(), f) == span.starts.size() &&
              fwrite(hashes, sizeof hashes, 1, f) == 1 && put_string(span.shards);
    for (const TokenLosses& r : runs) ok = ok && fwrite(&r.seed, sizeof r.seed, 1, f) == 1 && put_string(r.checkpoint);
    for (const TokenLosses& r : runs)
        for (const std::vector<float>& l : r.loss) ok = ok && fwrite(l.data(), sizeof(float), l.size(), f) == l.size();
    if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
        remove(tmp.c_str());
        throw std::runtime_error("writing " + path + " failed (disk full?)");
    }
}

// Reads a file of write_token_losses; *span gets what it scored.
inline std::vector<TokenLosses> read_token_losses(const std::string& path, ScoredSpan* span) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + path + " (written by loss_vs_length -ot)");
    auto fail = [&](const std::string& why) {
        fclose(f);
        throw std::runtime_error(path + ": " + why + " (expected a file written by loss_vs_length -ot)");
    };
    auto get_string = [&](std::string* s) {
        uint32_t n = 0;
        if (fread(&n, sizeof n, 1, f) != 1 || n > (1u << 20)) fail("truncated");
        s->resize(n);
        if (n && fread(&(*s)[0], 1, n, f) != n) fail("truncated");
    };
    int32_t h[8];
    if (fread(h, sizeof h, 1, f) != 1) fail("shorter than its header");
    if (h[0] != TOKEN_LOSSES_MAGIC) fail("bad magic " + std::to_string(h[0]));
    if (h[1] != TOKEN_LOSSES_VERSION) {
        fclose(f);
        throw std::runtime_error(path + ": token-loss file version " + std::to_string(h[1]) + ", this build reads version " +
                                 std::to_string(TOKEN_LOSSES_VERSION) + (h[1] < TOKEN_LOSSES_VERSION
                                     ? " (older files record neither the windows scored nor the seeds); regenerate it "
                                       "with this build's loss_vs_length -ot, the same -e, -j, -t, -l and -n"
                                     : ""));
    }
    if (h[2] < 1 || h[3] < 1 || h[4] < 1 || h[5] < 1 || h[6] < 1 || h[7] < 1 || (int64_t)h[6] * h[7] != h[4])
        fail("malformed header");
    ScoredSpan sp;
    sp.T_train = h[5];
    sp.N = h[4];
    sp.block = h[7];
    sp.lengths.resize((size_t)h[3]);
    sp.starts.resize((size_t)h[6]);
    uint64_t hashes[2];
    if (fread(sp.lengths.data(), sizeof(int32_t), sp.lengths.size(), f) != sp.lengths.size() ||
        fread(sp.starts.data(), sizeof(int64_t), sp.starts.size(), f) != sp.starts.size() ||
        fread(hashes, sizeof hashes, 1, f) != 1)
        fail("truncated");
    sp.token_hash = hashes[0];
    get_string(&sp.shards);
    if (sp.fingerprint() != hashes[1]) fail("its fingerprint does not match its header (damaged)");
    std::vector<TokenLosses> runs((size_t)h[2]);
    for (TokenLosses& r : runs) {
        if (fread(&r.seed, sizeof r.seed, 1, f) != 1) fail("truncated");
        get_string(&r.checkpoint);
    }
    for (TokenLosses& r : runs) {
        r.lengths = sp.lengths;
        r.N = h[4];
        r.loss.assign(sp.lengths.size(), std::vector<float>((size_t)h[4]));
        for (std::vector<float>& l : r.loss)
            if (fread(l.data(), sizeof(float), l.size(), f) != l.size()) fail("truncated");
    }
    if (fgetc(f) != EOF) fail("longer than its header says");
    fclose(f);
    *span = sp;
    return runs;
}
