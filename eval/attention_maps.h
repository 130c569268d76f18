// Attention maps: the attention weights of one layer and head of the CPU model after a forward on
// (1, T) tokens, and per-row statistics of how sharp they are.
//
// The weights are recomputed from the post-RoPE q, k the forward saved (acts.qkvr) with the same
// functions the forward runs (attention_prepare + attention_row_weights of attention/attention_cpu.h
// on the reference path; on the CPU back end's fast path, ModelCPU with -pr fp32 or bf16, the tiled
// attention's own row code, attention_map_fast of attention/attention_fast_cpu.h), so a map is exactly
// the matrix the forward multiplied v by.
//
// Per row t (weights w[0..t], the row's query attending to keys 0..t):
//   entropy   H_t = -sum_j w_j log w_j            (0 log 0 = 0)
//   span      exp(H_t)                            keys an equally spread row of that entropy covers
//   max       max_j w_j
//   self      w_t                                 the weight on the row's own token
//   distance  sum_j w_j (t - j)                   mean distance attended back
// A degenerate LSSAR row (all weights 0, no output: attention_row_weights returns false) has no
// statistics; it is marked invalid and left out of every mean, and its count is reported.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention_cpu.h"
#include "model/backend_cpu.h"

struct AttnRowStats {
    bool valid;  // false for a degenerate row (all weights 0)
    double entropy, span, max_weight, self_weight, distance;
};

// Statistics of one row w[0..t]. Sums in double: the entropy of a row of thousands of tiny
// weights would lose digits in float.
template <class F> AttnRowStats attention_row_stats(const F* w, int t) {
    AttnRowStats r{false, 0, 0, 0, 0, 0};
    double sum = 0;
    for (int j = 0; j <= t; j++) sum += (double)w[j];
    if (!(sum > 0)) return r;
    r.valid = true;
    for (int j = 0; j <= t; j++) {
        double wj = (double)w[j];
        if (wj > 0) r.entropy -= wj * std::log(wj);
        r.max_weight = std::max(r.max_weight, wj);
        r.distance += wj * (double)(t - j);
    }
    r.span = std::exp(r.entropy);
    r.self_weight = (double)w[t];
    return r;
}

// The weights of one layer and head of the last forward, which must have been on B = 1.
// W: (T, T) row-major, row t holds w[0..t] and zeros above the diagonal.
// valid: (T) 1 for a row with weights, 0 for a degenerate LSSAR row.
// The layer's slice of the saved post-RoPE qkv ((1, T, 3, NH, hd), the input of its attention) and
// the head's parameter (p, ssmax's s), after checking the last forward and the indices.
template <class F>
const F* attention_map_input(const GPT2<F>& gpt, int layer, int head, double* p) {
    const GPT2Config& c = gpt.config;
    if (gpt.B != 1 || gpt.T <= 0)
        throw std::logic_error("attention_map: needs a forward on one sequence (B = 1), the last had B = " +
                               std::to_string(gpt.B) + ", T = " + std::to_string(gpt.T));
    if (layer < 0 || layer >= c.num_layers || head < 0 || head >= c.num_heads)
        throw std::out_of_range("attention_map: layer " + std::to_string(layer) + " / head " + std::to_string(head) +
                                " outside the model's " + std::to_string(c.num_layers) + " layers x " +
                                std::to_string(c.num_heads) + " heads");
    int NH = c.num_heads;
    size_t k = (size_t)layer * NH + head;  // the head parameter: learned p, ssmax's s, or the config's p
    *p = c.learn_p                                     ? learned_p((double)gpt.params[gpt.param_offsets[P_PTHETA] + k])
         : attn_head_param(c.attn) == ATTN_HEAD_S ? (double)gpt.params[gpt.param_offsets[P_SSMAX_S] + k]
                                                  : c.p;
    return gpt.acts.qkvr + (size_t)layer * gpt.T * 3 * c.channels;  // qkvr (L, 1, T, 3C)
}

template <class F>
void attention_map(const GPT2<F>& gpt, int layer, int head, std::vector<F>& W, std::vector<uint8_t>& valid) {
    const GPT2Config& c = gpt.config;
    double p;
    const F* qkv = attention_map_input(gpt, layer, head, &p);
    int T = gpt.T, NH = c.num_heads, C = c.channels, hd = C / NH;
    std::vector<F> qe, ke, qn, kn;  // (1, NH, T, hd), (1, NH, T)
    ref::attention_prepare(qe, ke, qn, kn, qkv, 1, T, NH, hd, c.attn);
    W.assign((size_t)T * T, F(0));
    valid.assign(T, 0);
    const F* qe_h = &qe[(size_t)head * T * hd];
    const F* ke_h = &ke[(size_t)head * T * hd];
#pragma omp parallel
    {
        std::vector<F> s(T), a(T);
#pragma omp for schedule(dynamic, 8)
        for (int t = 0; t < T; t++) {
            F row_stats[3];
            bool ok = ref::attention_row_weights(&W[(size_t)t * T], s.data(), a.data(), row_stats, qe_h + (size_t)t * hd,
                                            ke_h, t, hd, c.attn, p, c.attn_len);
            valid[t] = ok ? 1 : 0;
        }
    }
}

// The map of the path the model runs: the reference's rows on the reference path, the fast path's
// tiled attention's rows in its numerics (the weights its forward multiplied v by).
inline void attention_map(const ModelCPU& model, int layer, int head, std::vector<float>& W, std::vector<uint8_t>& valid) {
    if (!model.fast16 && !model.fast32) return attention_map(model.gpt, layer, head, W, valid);
    const GPT2Config& c = model.config;
    double p;
    const float* qkv = attention_map_input(model.gpt, layer, head, &p);
    attention_map_fast(model.fast16 ? FastNumerics::bf16 : FastNumerics::fp32, W, valid, qkv, model.gpt.T, c.num_heads,
                       c.channels / c.num_heads, head, c.attn, p, c.attn_len);
}

// Statistics of every row of a map W (T, T).
template <class F> std::vector<AttnRowStats> attention_map_stats(const std::vector<F>& W, int T) {
    std::vector<AttnRowStats> rows(T);
    for (int t = 0; t < T; t++) rows[t] = attention_row_stats(&W[(size_t)t * T], t);
    return rows;
}

// Means of the statistics over the valid rows among rows[begin, end).
struct AttnSummary {
    int rows = 0;        // valid rows averaged
    int degenerate = 0;  // rows left out
    double entropy = 0, span = 0, max_weight = 0, self_weight = 0, distance = 0;
};

inline AttnSummary summarize_rows(const std::vector<AttnRowStats>& rows, int begin, int end) {
    AttnSummary s;
    for (int t = begin; t < end && t < (int)rows.size(); t++) {
        const AttnRowStats& r = rows[t];
        if (!r.valid) { s.degenerate++; continue; }
        s.rows++;
        s.entropy += r.entropy;
        s.span += r.span;
        s.max_weight += r.max_weight;
        s.self_weight += r.self_weight;
        s.distance += r.distance;
    }
    if (s.rows > 0) {
        s.entropy /= s.rows;
        s.span /= s.rows;
        s.max_weight /= s.rows;
        s.self_weight /= s.rows;
        s.distance /= s.rows;
    }
    return s;
}

// Position buckets by powers of two: bucket b holds rows t with 2^b <= t + 1 < 2^(b+1), i.e. rows
// [0,1), [1,3), [3,7), ... so rows of 1x and 16x a training length fall in comparable buckets.
inline int position_bucket(int t) {
    int b = 0;
    while ((2LL << b) <= (long long)t + 1) b++;
    return b;
}
inline int position_bucket_begin(int b) { return (1 << b) - 1; }
inline int position_bucket_count(int T) { return T <= 0 ? 0 : position_bucket(T - 1) + 1; }

// Summary of each bucket of rows [0, T).
inline std::vector<AttnSummary> summarize_buckets(const std::vector<AttnRowStats>& rows) {
    int T = (int)rows.size();
    std::vector<AttnSummary> out;
    for (int b = 0; b < position_bucket_count(T); b++)
        out.push_back(summarize_rows(rows, position_bucket_begin(b), position_bucket_begin(b + 1)));
    return out;
}
