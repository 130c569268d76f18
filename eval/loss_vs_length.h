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
#include <cstdint>
#include <cstdio>
#include <glob.h>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/shard.h"

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

// Mean loss at each length over span[0, N] (N + 1 tokens, N a multiple of every length).
// tokens_per_forward: windows are batched B = max(1, tokens_per_forward / L) at a time.
template <class Model>
std::vector<LengthLoss> loss_vs_length(Model& model, const std::vector<int>& span, int64_t N,
                                       const std::vector<int>& lengths, int tokens_per_forward) {
    std::vector<LengthLoss> out;
    for (int L : lengths) {
        if (L <= 0 || N % L != 0 || (int64_t)span.size() < N + 1)
            throw std::invalid_argument("loss_vs_length: length " + std::to_string(L) + " does not divide N = " +
                                        std::to_string(N) + " or the span is shorter than N + 1");
        int64_t windows = N / L;
        int B = (int)std::max<int64_t>(1, std::min<int64_t>(windows, tokens_per_forward / L));
        std::vector<int> inputs((size_t)B * L), targets((size_t)B * L);
        std::vector<float> losses((size_t)B * L);
        double sum = 0;
        for (int64_t w0 = 0; w0 < windows; w0 += B) {
            int b_now = (int)std::min<int64_t>(B, windows - w0);
            for (int b = 0; b < b_now; b++) {
                const int* start = span.data() + (w0 + b) * L;
                std::copy(start, start + L, inputs.begin() + (size_t)b * L);
                std::copy(start + 1, start + L + 1, targets.begin() + (size_t)b * L);
            }
            model.forward(inputs.data(), targets.data(), b_now, L);
            model.losses(losses.data());
            for (size_t i = 0; i < (size_t)b_now * L; i++) sum += losses[i];
        }
        out.push_back({L, sum / (double)N, N});
    }
    return out;
}
