// The attention kernels (attention/attention.cuh) against the CPU reference (attention/attention_cpu.h,
// float64), for every variant of the family: forward output and stats, dq, dk, dv; with learned p
// (a p per head) also dL/dp of every head, with ssmax's s per head dL/ds; log-length scaling of
// softmax and softmax_rw (attn_len).
// Built twice from this file: with g++ on the SIMT emulator (make test) and with nvcc (make cuda,
// run on a GPU by scripts/gpu_check_attention.sh).
//
// Every input is rounded to bf16 first and the reference runs in float64 on exactly those values,
// so the differences come only from what the kernels round: the attention weights (P, A or W) and
// the score gradients cast to bf16 for the tensor-core products (relative error <= u = 2^-8 each,
// round to nearest), the bf16 outputs (u), the bf16 output y inside D = dy . y (u), and fp32
// accumulation (~1e-6 relative, negligible next to u). Tolerances are stated per quantity below.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>
#include "attention/attention.cuh"
#include "attention/attention_cpu.h"
#include "test/test_variants.h"

namespace {

const double U = 1.0 / 256;  // unit roundoff of bf16: 8 significant bits, |round(x) - x| <= 2^-8 |x|

float round_bf16(float x) { return (float)(floatX)x; }

enum class Inputs {
    Random,      // q, k, v, dout ~ N(0, 1)
    OneHot,      // one key aligned with every query, the rest orthogonal: one-hot W rows, uniform early rows
    ZeroQuery,   // random, with some all-zero queries (degenerate LSSAR rows from t = 3 on)
    Norms,       // random directions with huge (1e30), tiny (< eps) and small (> eps) q and k norms
    Aligned,     // keys share a direction and queries point away: x reaches ~1000 at T = 2048
                 // (doc/attention.md, section 'Numerics')
    Scaled,      // random, every q times q_scale: dot scores up to ~5 q_scale (cosine scores unchanged)
};

struct Problem {
    int B, T, NH, hd;
    std::vector<float> qkv, dout;  // bf16 values
    std::vector<int> uniform_rows; // rows t whose scores are all exactly equal (A uniform); dout = 0
                                   // on those with t >= 3, the degenerate LSSAR rows
    int attn_len = 0;              // sigmoid, relu: the constant length of the bias and scale (0: n_t)
};

Problem make_problem(int B, int T, int NH, int hd, Inputs kind, unsigned seed, float q_scale = 1.0f) {
    Problem pr{B, T, NH, hd, {}, {}, {}};
    int C = NH * hd;
    pr.qkv.resize((size_t)B * T * 3 * C);
    pr.dout.resize((size_t)B * T * C);
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& x : pr.qkv) x = normal(gen);
    for (auto& x : pr.dout) x = normal(gen);
    auto at = [&](int b, int t, int part, int h) { return &pr.qkv[((size_t)(b * T + t) * 3 + part) * C + h * hd]; };
    if (kind == Inputs::OneHot) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    float* q = at(b, t, 0, h);
                    float* k = at(b, t, 1, h);
                    for (int i = 0; i < hd; i++) q[i] = k[i] = 0.0f;
                    q[0] = 1.5f;
                    if (t == 5 || t == 40) k[0] = 0.75f; else k[1] = 2.0f;
                }
        pr.uniform_rows = {0, 1, 2, 3, 4};  // before key 5 every score is 0
    } else if (kind == Inputs::ZeroQuery) {
        pr.uniform_rows = {1, 4, 10, 17, 63, 64, 100};
        for (int t : pr.uniform_rows) {
            if (t >= T) continue;
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++) {
                    float* q = at(b, t, 0, h);
                    for (int i = 0; i < hd; i++) q[i] = 0.0f;
                }
        }
    } else if (kind == Inputs::Norms) {
        // |q| ~ 8 for N(0, 1) entries at hd = 64: 1e-13 q is below eps (q/eps is used, |q/eps| ~ 0.8);
        // no query is so tiny that its scores are all ~0 (a near-uniform row is ill-posed:
        // doc/attention.md, section 'Degenerate rows')
        const float q_scale[5] = {1e30f, 1e-8f, 1.0f, 1e-13f, 3e5f};
        const float k_scale[5] = {1e-30f, 1e25f, 1e-13f, 1.0f, 1e-8f};
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    float* q = at(b, t, 0, h);
                    float* k = at(b, t, 1, h);
                    for (int i = 0; i < hd; i++) { q[i] *= q_scale[t % 5]; k[i] *= k_scale[t % 5]; }
                }
    } else if (kind == Inputs::Aligned) {
        std::vector<float> d(hd);
        for (auto& x : d) x = normal(gen);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    float* q = at(b, t, 0, h);
                    float* k = at(b, t, 1, h);
                    for (int i = 0; i < hd; i++) { q[i] = -d[i] + 0.05f * q[i]; k[i] = d[i] + k[i]; }
                }
    } else if (kind == Inputs::Scaled) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    float* q = at(b, t, 0, h);
                    for (int i = 0; i < hd; i++) q[i] *= q_scale;
                }
    }
    for (int t : pr.uniform_rows) {
        if (t < 3 || t >= T) continue;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < C; i++) pr.dout[(size_t)(b * T + t) * C + i] = 0.0f;
    }
    for (auto& x : pr.qkv) x = round_bf16(x);
    for (auto& x : pr.dout) x = round_bf16(x);
    return pr;
}

struct Result {
    std::vector<float> out, stats, dqkv;
    std::vector<float> dp;  // (NH) with learned p
};

// Learned p: the p of every head (p_head), the scalar p then unused; the backward's dL/dp of
// every head returned. Empty: one p for every head.
using HeadPowers = std::vector<float>;

// Runs forward and backward of the kernels on the problem.
Result run_gpu(const Problem& pr, AttnKind kind, float p, const HeadPowers& p_head = {}) {
    int B = pr.B, T = pr.T, NH = pr.NH, hd = pr.hd, C = NH * hd;
    size_t n_qkv = pr.qkv.size(), n_out = (size_t)B * T * C, n_stats = (size_t)B * NH * T * 3;
    std::vector<floatX> qkv_h(n_qkv), dout_h(n_out);
    for (size_t i = 0; i < n_qkv; i++) qkv_h[i] = (floatX)pr.qkv[i];
    for (size_t i = 0; i < n_out; i++) dout_h[i] = (floatX)pr.dout[i];
    floatX *qkv, *out, *dout, *dqkv;
    float* stats;
    void* scratch;
    cudaCheck(cudaMalloc(&qkv, n_qkv * sizeof(floatX)));
    cudaCheck(cudaMalloc(&dqkv, n_qkv * sizeof(floatX)));
    cudaCheck(cudaMalloc(&out, n_out * sizeof(floatX)));
    cudaCheck(cudaMalloc(&dout, n_out * sizeof(floatX)));
    cudaCheck(cudaMalloc(&stats, n_stats * sizeof(float)));
    cudaCheck(cudaMalloc(&scratch, attention_scratch_bytes(B, T, NH, hd)));
    cudaCheck(cudaMemcpy(qkv, qkv_h.data(), n_qkv * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dout, dout_h.data(), n_out * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(stats, 0, n_stats * sizeof(float)));
    cudaCheck(cudaMemset(dqkv, 0xff, n_qkv * sizeof(floatX)));  // NaN: every element must be written
    float *p_dev = nullptr, *dp_dev = nullptr;
    if (!p_head.empty()) {
        cudaCheck(cudaMalloc(&p_dev, NH * sizeof(float)));
        cudaCheck(cudaMalloc(&dp_dev, NH * sizeof(float)));
        cudaCheck(cudaMemcpy(p_dev, p_head.data(), NH * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemset(dp_dev, 0, NH * sizeof(float)));
    }

    attention_forward_cuda(out, stats, qkv, scratch, B, T, NH, hd, kind, p, 0, p_dev, pr.attn_len);
    attention_backward_cuda(dqkv, dout, qkv, out, stats, scratch, B, T, NH, hd, kind, p, 0, p_dev, dp_dev, pr.attn_len);
    cudaCheck(cudaDeviceSynchronize());

    Result r;
    std::vector<floatX> out_h(n_out), dqkv_h(n_qkv);
    r.stats.resize(n_stats);
    cudaCheck(cudaMemcpy(out_h.data(), out, n_out * sizeof(floatX), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv_h.data(), dqkv, n_qkv * sizeof(floatX), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(r.stats.data(), stats, n_stats * sizeof(float), cudaMemcpyDeviceToHost));
    r.out.assign(out_h.begin(), out_h.end());
    r.dqkv.assign(dqkv_h.begin(), dqkv_h.end());
    if (!p_head.empty()) {
        r.dp.resize(NH);
        cudaCheck(cudaMemcpy(r.dp.data(), dp_dev, NH * sizeof(float), cudaMemcpyDeviceToHost));
        cudaCheck(cudaFree(p_dev));
        cudaCheck(cudaFree(dp_dev));
    }
    for (void* ptr : {(void*)qkv, (void*)dqkv, (void*)out, (void*)dout, (void*)stats, scratch}) cudaCheck(cudaFree(ptr));
    return r;
}

struct Reference {
    std::vector<double> out, stats, dqkv, dp;
};
Reference run_reference(const Problem& pr, AttnKind kind, double p, const HeadPowers& p_head = {}) {
    int B = pr.B, T = pr.T, NH = pr.NH, hd = pr.hd;
    std::vector<double> qkv(pr.qkv.begin(), pr.qkv.end()), dout(pr.dout.begin(), pr.dout.end());
    Reference ref;
    ref.out.assign(pr.dout.size(), 0.0);
    ref.stats.assign((size_t)B * NH * T * 3, 0.0);
    ref.dqkv.assign(qkv.size(), 0.0);
    std::vector<double> ph(p_head.begin(), p_head.end());
    const double* heads = ph.empty() ? nullptr : ph.data();
    if (heads) ref.dp.assign(NH, 0.0);
    ref::attention_forward(ref.out.data(), ref.stats.data(), qkv.data(), B, T, NH, hd, kind, p, heads, pr.attn_len);
    ref::attention_backward(ref.dqkv.data(), dout.data(), qkv.data(), B, T, NH, hd, kind, p, heads,
                       heads ? ref.dp.data() : nullptr, pr.attn_len);
    return ref;
}

// How large the terms summed into each result row are, from the float64 reference's weights W
// (P, A or W), per row (b, t, h):
//   out_t = sum_j W_tj max|v_j|        dv_j = sum_t W_tj max|dy_t|
//   dq_t  = sum_j c_t g_tj max|ke_j| / |q_t|    dk_j = sum_t c_t g_tj max|qe_t| / |k_j|
// (c_t: 1/sqrt(hd) or lam_t; qe, ke: q, k or their normalised forms; |x| is 1 for softmax and
// max(|x|, eps) for LSSA(R)), where g_tj >= |ds_tj| is ds's formula
// (doc/attention.md, section 'Backward') evaluated on the magnitudes of its terms:
// dW_j -> sum_i |dy_i v_ji|, (dA - D) -> |dA| + |D|. Rounding one factor of every term to bf16
// (relative u) moves a result by at most u times this sum, so the tolerances are relative to it.
// Unlike |result| it does not vanish where large terms cancel (tied keys: dq = 0 exactly from terms
// of size ~10; one-hot rows: ds = 0 exactly from dW - D2).
// Learned p: dL/dp of head h sums, over rows t and keys j, dW_tj W_tj ln r_tj and D2_t W_tj ln r_tj
// (r = x/m, doc/attention.md, section 'Learned p'); their magnitudes, summed per head, scale its
// relative tolerance (dp). The kernels' r comes from fp32 x and m, so ln r carries an absolute
// error of a few 2^-24 (r = 1 exactly in the reference, on the key of the row's largest score,
// is 1 - 2^-23 there): dp_abs = the same sum with 2^-20 in place of |ln r| is allowed on top.
// Flush-to-zero: the kernels are built with fast math (-ftz=true; the emulator does the same), so
// an fp32 value below FLT_MIN = 2^-126 is 0: a weight exp2(s - lse) or phi'(s) below it, a score
// gradient, or its product with the row's factor. A term whose fp32 factor is below
// FLUSH = FLT_MIN / u, where the flush's absolute error (up to FLT_MIN) exceeds u of the factor,
// may be lost whole: the sum of those terms is allowed on top, per row (the *_flush vectors). Only
// rows made of such terms get anything from it; a term scale below FLT_MIN is compared absolutely
// (compare). The backward of exp without re-weighting (softmax, ssmax) holds its weights 2^32 too
// large (attn_bwd_shifts, taken back at the stores; off for a launch whose lse reach 2^27), so there
// the backward's factors flush only below 2^-150: a key seen only with weights between 2^-150 and
// 2^-118 (dot scores of a few hundred: ds ~ 1e-38, dk ~ 1e-36 from a q of 100s) keeps its dk, and
// the forward's out still flushes at 2^-118.
// ssmax: dL/ds of head h sums ln(n_t)/sqrt(hd) ds_tj (q_t . k_j) over rows t and keys j; its term
// scale (dp) is the same sum with g_tj |q_t . k_j| (dp_abs 0: the kernels' dot products are fp32 sums
// of exact products, ~hd 2^-24 relative).
struct TermScales {
    std::vector<double> out, dq, dk, dv, dp, dp_abs;  // (B, T, NH) each; dp, dp_abs (NH)
    std::vector<double> out_flush, dq_flush, dk_flush, dv_flush;  // (B, T, NH): the flushable terms' sums
};
const double FLUSH = FLT_MIN / U;

// g_j (above) for one row t: w, s, a, stats from attention_row_weights; dwm_j = sum_i |dy_i v_ji|.
// Into dA_ds_j the derivative of the normalised phi, the factor of ds the kernels compute first
// (exp: the weight A itself; sigmoid: phi'(s)).
template <AttnKind K>
void ds_magnitudes(double* g, double* dA_ds, const double* dwm, const double* w, const double* s, const double* a,
                   const double stats[3], int t, double p, int attn_len) {
    constexpr AttnVariant V = attn_variant(K);
    double Dm = 0;  // |D2| <= sum_j W_j dwm_j (D2 = dy . y, y = sum_j W_j v_j)
    for (int j = 0; j <= t; j++) Dm += w[j] * dwm[j];
    double S1 = 0, n = t + 1, o = ref::lssar_bias(t), n_norm = attn_len_n(t, attn_len);
    for (int j = 0; j <= t; j++) S1 += a[j];
    if (V.norm != ATTN_NORM_L1) S1 = 1;
    std::vector<double> dAm(t + 1);
    for (int j = 0; j <= t; j++) {
        if (!V.reweight) { dAm[j] = dwm[j]; continue; }
        double m = stats[1], Z = stats[2], x = n * ref::attn_normed<V.norm>(a[j], S1, n_norm) - o;
        bool live = m > 0 && Z > 0 && x > 0;
        dAm[j] = live ? n * p * ref::pow_p(x / m, p - 1) * (dwm[j] + Dm) / (m * Z) : 0.0;
    }
    if (V.norm == ATTN_NORM_L1) {
        if (S1 == 0) {  // degenerate (relu)
            std::fill(g, g + t + 1, 0.0);
            std::fill(dA_ds, dA_ds + t + 1, 0.0);
            return;
        }
        double D1m = 0;
        for (int j = 0; j <= t; j++) D1m += (a[j] / S1) * dAm[j];
        for (int j = 0; j <= t; j++) {
            dA_ds[j] = ref::attn_dphi<V.phi>(s[j], a[j]) / S1;
            g[j] = dA_ds[j] * (dAm[j] + D1m);
        }
    } else {
        for (int j = 0; j <= t; j++) {
            dA_ds[j] = ref::attn_normed<V.norm>(ref::attn_dphi<V.phi>(s[j], a[j]), 1.0, n_norm);
            g[j] = dA_ds[j] * dAm[j];
        }
    }
}

// sum_j (|dW_j| + |D2|) W_j |ln r_j| over the row (w the final weights; learned p's term scale), and
// into *no_log the same sum without |ln r_j|
double dp_magnitude(const double* dwm, const double* w, const double* a, const double stats[3], int t, double* no_log) {
    double S1 = 0, n = t + 1, o = ref::lssar_bias(t), Dm = 0, sum = 0;
    for (int j = 0; j <= t; j++) { S1 += a[j]; Dm += w[j] * dwm[j]; }
    *no_log = 0;
    for (int j = 0; j <= t; j++) {
        double x = n * (a[j] / S1) - o;  // the re-weighting variants normalise with l1
        if (w[j] > 0 && x > 0) {
            sum += w[j] * (dwm[j] + Dm) * std::fabs(std::log(x / stats[1]));
            *no_log += w[j] * (dwm[j] + Dm);
        }
    }
    return sum;
}

// exp without re-weighting: the variants whose backward shifts its weights (attn_bwd_shifts)
bool exp_without_reweighting(AttnKind kind) {
    return attn_variant(kind).phi == ATTN_PHI_EXP && !attn_reweights(kind);
}

// bwd_shift: the backward's factor on exp's weights (2^32 where the launch shifted, else 1)
TermScales term_scales(const Problem& pr, AttnKind kind, double p, const HeadPowers& p_head, double bwd_shift) {
    int B = pr.B, T = pr.T, NH = pr.NH, hd = pr.hd, C = NH * hd;
    std::vector<double> qkv(pr.qkv.begin(), pr.qkv.end());
    std::vector<double> qe, ke, qn, kn;
    ref::attention_prepare(qe, ke, qn, kn, qkv.data(), B, T, NH, hd, kind);
    size_t rows = (size_t)B * T * NH;
    TermScales ts;
    for (auto* v : {&ts.out, &ts.dq, &ts.dk, &ts.dv, &ts.out_flush, &ts.dq_flush, &ts.dk_flush, &ts.dv_flush}) v->assign(rows, 0.0);
    ts.dp.assign(NH, 0.0);
    ts.dp_abs.assign(NH, 0.0);
    auto maxabs = [&](const double* x) { double m = 0; for (int i = 0; i < hd; i++) m = std::max(m, std::fabs(x[i])); return m; };
    auto maxabs_f = [&](const float* x) { double m = 0; for (int i = 0; i < hd; i++) m = std::max(m, (double)std::fabs(x[i])); return m; };
    bool cos_len = attn_variant(kind).score == ATTN_SCORE_COS_LEN;
    auto norm_of = [&](double n) { return cos_len ? std::max(n, ref::LSSA_NORM_EPS) : 1.0; };
    std::vector<double> w(T), s(T), a(T), dwm(T), ds(T), dA_ds(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t head = (size_t)b * NH + h;
            const double* ke_h = &ke[head * T * hd];
            auto row = [&](int t) { return ((size_t)b * T + t) * NH + h; };
            double ph = p_head.empty() ? p : p_head[h];
            for (int t = 0; t < T; t++) {
                const double* qe_t = &qe[(head * T + t) * hd];
                double stats[3];
                ref::attention_row_weights(w.data(), s.data(), a.data(), stats, qe_t, ke_h, t, hd, kind, ph, pr.attn_len);
                const float* dy = &pr.dout[(size_t)(b * T + t) * C + h * hd];
                for (int j = 0; j <= t; j++) {
                    const float* v = &pr.qkv[((size_t)(b * T + j) * 3 + 2) * C + h * hd];
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += std::fabs((double)dy[i] * v[i]);
                    dwm[j] = d;
                }
                double c = 0;
                attn_dispatch(kind, [&](auto k) {
                    ds_magnitudes<decltype(k)::value>(ds.data(), dA_ds.data(), dwm.data(), w.data(), s.data(), a.data(),
                                                      stats, t, ph, pr.attn_len);
                    c = std::fabs(ref::attn_score_scale<decltype(k)::value, double>(t, hd, pr.attn_len, ph));
                });
                if (attn_head_param(kind) == ATTN_HEAD_S) {
                    double len = std::log((double)(t + 1)) / std::sqrt((double)hd);
                    for (int j = 0; j <= t; j++) {
                        double qk = 0;
                        for (int i = 0; i < hd; i++) qk += qe_t[i] * ke_h[(size_t)j * hd + i];
                        ts.dp[h] += len * std::fabs(ds[j]) * std::fabs(qk);
                    }
                }
                if (attn_reweights(kind) && stats[1] > 0 && stats[2] > 0) {
                    double no_log = 0;
                    ts.dp[h] += dp_magnitude(dwm.data(), w.data(), a.data(), stats, t, &no_log);
                    ts.dp_abs[h] += std::ldexp(no_log, -20);
                }
                double dymax = maxabs_f(dy), qemax = maxabs(qe_t), inv_qn = 1.0 / norm_of(qn[head * T + t]);
                for (int j = 0; j <= t; j++) {
                    const float* v = &pr.qkv[((size_t)(b * T + j) * 3 + 2) * C + h * hd];
                    double out_term = w[j] * maxabs_f(v), dv_term = w[j] * dymax;
                    double dq_term = c * std::fabs(ds[j]) * maxabs(ke_h + (size_t)j * hd) * inv_qn;
                    double dk_term = c * std::fabs(ds[j]) * qemax / norm_of(kn[head * T + j]);
                    ts.out[row(t)] += out_term;
                    ts.dv[row(j)] += dv_term;
                    ts.dq[row(t)] += dq_term;
                    ts.dk[row(j)] += dk_term;
                    if (w[j] < FLUSH) ts.out_flush[row(t)] += out_term;  // the forward's weight (P, A or W) flushed
                    if (w[j] * bwd_shift < FLUSH) ts.dv_flush[row(j)] += dv_term;  // the backward's
                    double dA_ds_b = dA_ds[j] * bwd_shift, ds_b = std::fabs(ds[j]) * bwd_shift;
                    if (dA_ds_b < FLUSH || ds_b < FLUSH || c * ds_b < FLUSH) {
                        ts.dq_flush[row(t)] += dq_term;  // phi' (exp: A), ds or c ds flushed
                        ts.dk_flush[row(j)] += dk_term;
                    }
                }
            }
        }
    return ts;
}

// Largest |gpu - ref| over a (B, T, [3,] NH, hd) tensor, less the row's flushable terms (flush:
// TermScales) and FLT_MIN, divided by the term scale of its row (per_row) or by the largest term
// scale of the tensor (otherwise); rel_unflushed is the same without the flushable terms taken off.
// FLT_MIN: a result whose value falls below fp32's smallest normal is flushed to 0 at its last fp32
// operation (the backward's 2^-32 at the stores, the cast), the format's floor under flush-to-zero.
// Where that scale is 0 (a one-key softmax row: dq = dk = 0 from no terms) or below FLT_MIN,
// abs_on_zero holds |gpu - ref|.
struct Err { double rel = 0, rel_unflushed = 0, abs_on_zero = 0; bool finite = true; };
Err compare(const std::vector<float>& gpu, const std::vector<double>& ref, const std::vector<double>& scale,
            const std::vector<double>& flush, const Problem& pr, int part, bool per_row,
            const std::vector<char>* skip_row = nullptr) {
    int B = pr.B, T = pr.T, NH = pr.NH, hd = pr.hd;
    auto index = [&](int b, int t, int h, int i) {
        return part < 0 ? ((size_t)(b * T + t) * NH + h) * hd + i : (((size_t)(b * T + t) * 3 + part) * NH + h) * hd + i;
    };
    double global = *std::max_element(scale.begin(), scale.end());
    Err e;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            if (skip_row && (*skip_row)[t]) continue;
            for (int h = 0; h < NH; h++) {
                double err = 0;
                for (int i = 0; i < hd; i++) {
                    size_t k = index(b, t, h, i);
                    if (!std::isfinite(gpu[k])) e.finite = false;
                    err = std::max(err, std::fabs((double)gpu[k] - ref[k]));
                }
                double den = per_row ? scale[((size_t)b * T + t) * NH + h] : global;
                double lost = flush[((size_t)b * T + t) * NH + h], floor = FLT_MIN;
                // below fp32's smallest normal a term scale is not representable by the kernels
                // (relu_l1_rw: a weight of 1e-264 from a key below eps): compared absolutely
                if (den > FLT_MIN) {
                    e.rel = std::max(e.rel, std::max(0.0, err - lost - floor) / den);
                    e.rel_unflushed = std::max(e.rel_unflushed, std::max(0.0, err - floor) / den);
                } else {
                    e.abs_on_zero = std::max(e.abs_on_zero, err);
                }
            }
        }
    return e;
}

struct Tolerances {
    // relative to the term scales above (measured on these tests: out, dv <= 1.5u; dq, dk <= 0.2u)
    double out = 2 * U;   // W cast to bf16 (u) + y cast to bf16 (u, |y| <= its term scale); fp32 ~1e-6
    double dv = 2 * U;    // same structure: W^T dy with W in bf16, dv cast to bf16
    double dqk = 4 * U;   // ds cast to bf16 (u); D from the bf16 y (u, inside g's |D| term); the cast
                          // of dq/dk (u), whose size the normalisation backward can double
    double stat = 1e-4;   // fp32 sums over <= 2048 keys of fp32 scores: ~T 2^-24 relative worst case
    double dp = 1e-4;     // learned p's dL/dp, relative to its term scale: fp32 sums of terms computed
                          // in fp32 from the unrounded weights (no bf16 rounding enters it)
    double ds = 3 * U;    // ssmax's dL/ds, relative to its term scale: sum_t c_t q_t . dqh_t, dqh the fp32
                          // sum of ds cast to bf16 (u) times k, and ds = A (dW - D) takes D = dy . y from
                          // the bf16 y (u of g's |D| term): 2u to first order, and u more for the product
                          // of the two and the fp32 sums and exp2 (~1e-6 relative)
    bool backward_flush = true;  // false: dq, dk and dv held to their bounds with no flushed term allowed
};

// Checks one variant on one problem; returns the largest m (LSSAR: the largest x of any row) it saved.
// With p_head (learned p), p is passed to the kernels too but every head uses its own.
double check_case(const Problem& pr, AttnKind kind, float p, bool per_row = false, Tolerances tol = {},
                  const HeadPowers& p_head = {}) {
    std::string name = attn_kind_name(kind);
    CAPTURE(name);
    CAPTURE(pr.B);
    CAPTURE(pr.T);
    CAPTURE(pr.NH);
    CAPTURE(pr.hd);
    CAPTURE(p);
    CAPTURE(pr.attn_len);
    std::string heads;
    for (float ph : p_head) heads += " " + std::to_string(ph);
    CAPTURE(heads);
    Result g = run_gpu(pr, kind, p, p_head);
    Reference ref = run_reference(pr, kind, p, p_head);
    int T = pr.T;
    float p_max = p_head.empty() ? p : *std::max_element(p_head.begin(), p_head.end());

    // degenerate re-weighted rows (all scores equal, t >= 3) have y = 0
    // (doc/attention.md, section 'Degenerate rows'); the float64 reference can round m to +1e-16
    // on these exactly-uniform rows, so they are checked against the spec here (their dout is 0,
    // so they pass no gradient in either)
    std::vector<char> skip(T, 0);
    if (attn_reweights(kind)) {
        for (int t : pr.uniform_rows) {
            if (t >= T || t < 3) continue;
            skip[t] = 1;
            for (int b = 0; b < pr.B; b++)
                for (int h = 0; h < pr.NH; h++)
                    for (int i = 0; i < pr.hd; i++) CHECK(g.out[((size_t)(b * T + t) * pr.NH + h) * pr.hd + i] == 0.0f);
        }
    }

    // the backward's shift of exp's weights (attn_bwd_shifts): on unless a row's saved lse reaches
    // ATTN_BWD_SHIFT_LSE_LIMIT in magnitude
    bool shifted = exp_without_reweighting(kind);
    for (size_t r = 0; r < g.stats.size() / 3; r++)
        if (!(std::fabs(g.stats[r * 3]) < ATTN_BWD_SHIFT_LSE_LIMIT)) shifted = false;
    TermScales ts = term_scales(pr, kind, p, p_head, shifted ? 0x1p32 : 1.0);
    Err e_out = compare(g.out, ref.out, ts.out, ts.out_flush, pr, -1, per_row, &skip);
    Err e_dq = compare(g.dqkv, ref.dqkv, ts.dq, ts.dq_flush, pr, 0, per_row);
    Err e_dk = compare(g.dqkv, ref.dqkv, ts.dk, ts.dk_flush, pr, 1, per_row);
    Err e_dv = compare(g.dqkv, ref.dqkv, ts.dv, ts.dv_flush, pr, 2, per_row);
    CHECK(e_out.finite);
    CHECK(e_dq.finite);
    CHECK(e_dk.finite);
    CHECK(e_dv.finite);
    CHECK(e_out.rel <= tol.out);
    auto backward_err = [&](const Err& e) { return tol.backward_flush ? e.rel : e.rel_unflushed; };
    CHECK(backward_err(e_dv) <= tol.dv);
    CHECK(backward_err(e_dq) <= tol.dqk);
    CHECK(backward_err(e_dk) <= tol.dqk);
    // exact zeros of the reference: D = dy . y and dP = dy . v are then the same dot product of
    // bf16 values summed in two fp32 orders, |difference| <= hd 2^-24 sum|dy_i v_i| (~1e-5 here)
    for (const Err* e : {&e_out, &e_dq, &e_dk, &e_dv}) CHECK(e->abs_on_zero <= 1e-4);

    // stats: lse (exp, absolute: it is a log), S1 relative (other l1), 0 (none, mean); under
    // re-weighting m relative to n (m = n A - o) and Z relative, on rows that are not degenerate
    // in either implementation.
    // The kernels save lse in log2 units. Beyond tol.stat an fp32 lse carries the fp32 rounding of
    // the row's largest score, up to hd 2^-24 of sum_i |q_i k_i| (hd <= 128; that sum is a small
    // multiple of |s| on the largest key of these rows): 2^-16 |lse| is allowed on top.
    const AttnVariant& V = attn_variant(kind);
    double e_stat = 0;
    for (int bh = 0; bh < pr.B * pr.NH; bh++)
        for (int t = 0; t < T; t++) {
            const float* s = &g.stats[((size_t)bh * T + t) * 3];
            const double* r = &ref.stats[((size_t)bh * T + t) * 3];
            if (V.phi == ATTN_PHI_EXP && V.norm == ATTN_NORM_L1) {
                double lse = (double)s[0] * M_LN2;
                e_stat = std::max(e_stat, std::max(0.0, std::fabs(lse - r[0]) - std::ldexp(std::fabs(r[0]), -16)));
            } else if (V.norm != ATTN_NORM_L1 || r[0] == 0) {
                e_stat = std::max(e_stat, std::fabs(s[0] - r[0]));
            } else {
                e_stat = std::max(e_stat, std::fabs(s[0] - r[0]) / r[0]);
            }
            if (V.reweight && !skip[t] && s[2] > 0 && r[2] > 0) {
                e_stat = std::max(e_stat, std::fabs(s[1] - r[1]) / (t + 1));
                e_stat = std::max(e_stat, std::fabs(s[2] - r[2]) / r[2] / std::max(1.0f, p_max));
            }
        }
    CHECK(e_stat <= tol.stat);
    double e_dp = 0;  // learned p (ssmax: s): dL/dp of every head against the reference's, as a fraction of its bound
    for (size_t h = 0; h < g.dp.size(); h++) {
        double bound = (attn_head_param(kind) == ATTN_HEAD_S ? tol.ds : tol.dp) * ts.dp[h] + ts.dp_abs[h];
        INFO("head " << h << ": dL/dp cuda " << g.dp[h] << " reference " << ref.dp[h] << " term scale " << ts.dp[h]
                     << " bound " << bound);
        CHECK(std::isfinite(g.dp[h]));
        if (bound > 0) e_dp = std::max(e_dp, std::fabs(g.dp[h] - ref.dp[h]) / bound);
        else CHECK(g.dp[h] == 0.0f);  // no live weight: nothing to add
    }
    CHECK(e_dp <= 1.0);
    char dp_text[64] = "", flush_text[160] = "";
    if (!p_head.empty()) snprintf(dp_text, sizeof dp_text, "  dp err/bound %.3g", e_dp);
    if (e_out.rel_unflushed > e_out.rel || e_dq.rel_unflushed > e_dq.rel || e_dk.rel_unflushed > e_dk.rel ||
        e_dv.rel_unflushed > e_dv.rel)
        snprintf(flush_text, sizeof flush_text, "  (with the flushed terms counted: out %.3g dq %.3g dk %.3g dv %.3g)",
                 e_out.rel_unflushed / U, e_dq.rel_unflushed / U, e_dk.rel_unflushed / U, e_dv.rel_unflushed / U);
    double max_m = 0;
    for (size_t r = 0; r < g.stats.size() / 3; r++) max_m = std::max(max_m, (double)g.stats[r * 3 + 1]);
    MESSAGE(name, " B=", pr.B, " T=", pr.T, " NH=", pr.NH, " hd=", pr.hd, " p=", p, " attn_len=", pr.attn_len,
            "  err/u: out ", e_out.rel / U, " dq ", e_dq.rel / U, " dk ", e_dk.rel / U, " dv ", e_dv.rel / U,
            "  stats ", e_stat, "  max m ", max_m, dp_text, flush_text,
            std::string(exp_without_reweighting(kind) ? (shifted ? "  bwd shift 2^32" : "  bwd shift off") : ""));
    return max_m;
}


// The powers a variant is checked at on random inputs: LSSAR at 1, 3, 15; the other re-weighted
// variants at 3 and 15; ssmax's s (one for every head) at its initial 0.43; p is unused by the others.
std::vector<float> powers(AttnKind kind) {
    if (attn_head_param(kind) == ATTN_HEAD_S) return {(float)SSMAX_S0};
    if (!attn_reweights(kind)) return {1.0f};
    if (kind == ATTN_LSSAR) return {1.0f, 3.0f, 15.0f};
    return {3.0f, 15.0f};
}

}  // namespace

TEST_CASE("attention kernels match the reference on random inputs, every length and head size") {
    const int lengths[] = {1, 2, 3, 4, 17, 64, 130};
    for (int hd : {32, 64}) {
        for (int T : lengths) {
            Problem pr = make_problem(2, T, 2, hd, Inputs::Random, 1000 + T + hd);
            for (AttnKind kind : test_kinds())
                for (float p : powers(kind)) check_case(pr, kind, p);
        }
    }
}

// The training-length constant (attn_len = L > 0, a run-time argument of the same kernels): sigmoid's
// bias -ln(L) and relu's scale 1/L on every row, against the reference with the same L (itself
// checked against float64 formulas in test_attention_cpu.cpp), at lengths below and above L and
// across tiles (T = 130, L = 64: rows before, at and after L; T = 17 with L = 40: every row below;
// T = 130 with L = 5: most rows far above), forward and backward. The tolerances are those of
// every variant: L changes the row's bias or factor, not what the kernels round.
TEST_CASE("attn_len: sigmoid and relu at a constant length, below and above it, forward and backward") {
    struct Case { int T, L; } cases[] = {{130, 64}, {17, 40}, {130, 5}};
    for (int hd : {32, 64}) {
        for (const Case& c : cases) {
            Problem pr = make_problem(2, c.T, 2, hd, Inputs::Random, 3000 + c.T + hd + c.L);
            pr.attn_len = c.L;
            for (AttnKind kind : {ATTN_SIGMOID, ATTN_RELU}) check_case(pr, kind, 1.0f);
        }
    }
    // the constant reaches the kernels: their outputs differ from the per-row n_t's
    Problem pr = make_problem(1, 70, 1, 32, Inputs::Random, 3100);
    for (AttnKind kind : {ATTN_SIGMOID, ATTN_RELU}) {
        Result per_row = run_gpu(pr, kind, 1.0f);
        pr.attn_len = 8;
        Result constant = run_gpu(pr, kind, 1.0f);
        pr.attn_len = 0;
        CHECK(per_row.out != constant.out);
        CHECK(per_row.dqkv != constant.dqkv);
    }
}

TEST_CASE("head size 128 (32-row tiles)") {
    Problem pr = make_problem(1, 70, 2, 128, Inputs::Random, 5);
    for (AttnKind kind : test_kinds()) check_case(pr, kind, 15.0f);
}

TEST_CASE("re-weighting with a non-integer p (the exp2/log2 path)") {
    Problem pr = make_problem(1, 70, 2, 64, Inputs::Random, 7);
    for (AttnKind kind : test_kinds())
        if (attn_reweights(kind)) check_case(pr, kind, 2.5f);
}

TEST_CASE("one-hot and exactly uniform rows") {
    Problem pr = make_problem(1, 66, 2, 32, Inputs::OneHot, 11);
    for (AttnKind kind : test_kinds()) check_case(pr, kind, 15.0f);
}

TEST_CASE("zero queries: degenerate re-weighted rows give y = 0 and no gradient") {
    Problem pr = make_problem(2, 130, 1, 64, Inputs::ZeroQuery, 12);
    for (AttnKind kind : test_kinds()) check_case(pr, kind, 15.0f);
    check_case(pr, ATTN_LSSAR, 3.0f);
}

TEST_CASE("huge and tiny q/k norms (cosine scores are scale-free; below eps q/eps is used)") {
    Problem pr = make_problem(1, 67, 2, 64, Inputs::Norms, 13);
    for (AttnKind kind : test_kinds())
        if (attn_variant(kind).score == ATTN_SCORE_COS_LEN) check_case(pr, kind, 15.0f, /*per_row=*/true);
}

TEST_CASE("keys aligned, queries opposite: large x stays finite") {
    Problem pr = make_problem(1, 130, 2, 64, Inputs::Aligned, 14);
    for (AttnKind kind : test_kinds()) check_case(pr, kind, 15.0f);
}

// Dot scores from ~5 to ~5e15 (q times 1 .. 1e15; cosine scores do not change), each row checked
// against its own term scales (per row: a key seen with small weights only is held to the bound
// of its own terms, not hidden behind the tensor's largest). At 1e2-1e4 (scores of a few hundred
// to tens of thousands, as softmax logits reach in long training) rows are nearly one-hot but keys
// keep weights down to and below fp32's range, which fast math flushes (TermScales: their terms are
// allowed on top, and the figures with them counted are printed); from 1e5 on exp rows are one-hot
// but for near-ties, and the backward rebuilds 2^(s - lse) from the saved lse, which must be as
// exact as the scores themselves (rounded once, in the backward's units) for its weights to keep
// their bf16 bound. Forward and backward of every variant within the bounds of the other tests.
TEST_CASE("every variant at score scales 1 to 1e15: forward and backward of every row within their bf16 bounds of the reference") {
    for (float c : {1.0f, 10.0f, 1e2f, 3e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e8f, 1e10f, 1e12f, 1e15f}) {
        Problem pr = make_problem(1, 40, 2, 32, Inputs::Scaled, 40, c);
        CAPTURE(c);
        for (AttnKind kind : test_kinds()) {
            // cosine scores are those of q/|q|: the same problem at every c (checked at both ends)
            if (attn_variant(kind).score == ATTN_SCORE_COS_LEN && c != 1.0f && c != 1e15f) continue;
            for (float p : attn_reweights(kind) ? std::vector<float>{1.0f, 15.0f} : std::vector<float>{1.0f})
                check_case(pr, kind, p, /*per_row=*/true);
        }
    }
}

// Softmax at the shapes where its dk was found off at moderate scores (T 64, hd 64, two heads,
// N(0, 1) inputs, q times 100-300: largest |score| ~370-1,500), three seeds each, every row
// against its own term scales and with no flushed term allowed in the backward: the keys seen
// only with weights below 2^-126 keep their dk (attn_bwd_shifts; without it dk was 10-58 bf16 units
// of such a key's term scale here). ssmax, the other exp variant without re-weighting, the same.
TEST_CASE("softmax at scores of a few hundred (T 64, hd 64): every key's dk within its bf16 bound, nothing flushed") {
    Tolerances strict;
    strict.backward_flush = false;
    for (float c : {100.0f, 200.0f, 300.0f})
        for (unsigned seed : {1u, 2u, 3u}) {
            Problem pr = make_problem(1, 64, 2, 64, Inputs::Scaled, seed, c);
            CAPTURE(c);
            CAPTURE(seed);
            for (AttnKind kind : test_kinds())
                if (exp_without_reweighting(kind)) check_case(pr, kind, (float)SSMAX_S0, /*per_row=*/true, strict);
        }
}

// An odd B NH T (3 heads, B T = 67): the scratch regions, dQ's fp32 accumulator (dqh) among them,
// still start at multiples of 16 bytes. dqh takes 8-byte vector atomics (atomic_add2), which a GPU
// (and the emulator) refuses at an address that is not a multiple of 8.
TEST_CASE("an odd number of heads and an odd B*T: scratch regions 16-byte aligned, dQ's vector atomics run") {
    const int B = 1, T = 67, NH = 3, hd = 32;
    unsigned char* base;
    cudaCheck(cudaMalloc(&base, attention_scratch_bytes(B, T, NH, hd)));
    AttentionScratch sc = attention_scratch_split(base, B, T, NH, hd);
    const size_t rows = (size_t)B * NH * T;
    for (const float* region : {sc.scales, sc.rowd, sc.dqh, sc.dkh}) CHECK((uintptr_t)region % 16 == 0);
    CHECK((size_t)((unsigned char*)(sc.dkh + rows * hd) - base) <= attention_scratch_bytes(B, T, NH, hd));
    CHECK((size_t)((unsigned char*)(sc.scales + 5 * rows) - base) <= attention_scratch_bytes(B, T, NH, hd, false));
    cudaCheck(cudaFree(base));
    Problem pr = make_problem(B, T, NH, hd, Inputs::Random, 16);
    for (AttnKind kind : test_kinds()) check_case(pr, kind, 15.0f);
}

// One element of the backward (attn_element_grad) from its row data ri, score sv and dW:
// out = P, ds and dA/ds (attn_A_dev).
template <AttnKind K>
__global__ void element_grad_kernel(float* out, float sv, float dW, AttnRowInfo ri, float p) {
    float P, ds, g;
    attn_element_grad<K>(sv, dW, ri, p, &P, &ds);
    attn_A_dev<K>(sv, ri.norm, ri.n, &g);
    out[0] = P;
    out[1] = ds;
    out[2] = g;
}

// An element whose x/m falls below fp32's smallest normal, which fast math flushes to 0 (on the
// GPU, and in the emulator, which models it): relu_l1_rw (phi exact: no rounding in A), row t = 2
// (n = 3, o = 0), A = s / S1 = 2^-100 2^-26 = 2^-126, x = n A = 3 2^-126, and the row's largest
// A one rounding above 1: m = 3 (1 + 2^-22), so x/m ~ (1 - 2^-22) 2^-126, a subnormal, is 0 in
// fp32. At p = 1, log2 0 = -inf times p - 1 = 0 gave NaN; the element counts
// as x <= 0 instead, as the D1 pass counts it (its x is uncertain by far more than m 2^-126).
// With m = 3, x/m is a normal number and the element is live (dA = n p (dW - D2) / (m Z)).
TEST_CASE("backward: an element whose x/m fast math flushes to 0 gives no NaN at p = 1") {
    float* out;
    cudaCheck(cudaMalloc(&out, 3 * sizeof(float)));
    const float s = std::ldexp(1.0f, -100), inv_S1 = std::ldexp(1.0f, -26), dW = 1.25f;
    for (double m : {3.0 * (1 + std::ldexp(1.0, -22)), 3.0}) {
        for (float p : {1.0f, 2.5f}) {
            CAPTURE(m);
            CAPTURE(p);
            AttnRowInfo ri{};
            ri.n = 3.0f, ri.o = 0.0f, ri.norm = inv_S1;
            ri.inv_m = (float)(1.0 / m), ri.inv_Z = 0.5f, ri.D2 = 0.25f, ri.D1 = 0.125f;
            cuda_launch((element_grad_kernel<ATTN_RELU_L1_RW>), 1, 1, 0, 0, out, s, dW, ri, p);
            cudaCheck(cudaGetLastError());
            float r[3];
            cudaCheck(cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost));
            REQUIRE(r[2] == inv_S1);  // dA/ds = phi'(s) / S1, exact
            double x = 3.0 * std::ldexp(1.0, -126), xm = x * ri.inv_m;
            bool live = (float)xm >= FLT_MIN;  // what fp32 gives x/m under flush-to-zero
            CHECK(live == (m == 3.0));
            // live: W = (x/m)^p / Z (below FLT_MIN: 0 in fp32) and ds = dA/ds (dA - D1) with
            // dA = n p (x/m)^(p-1) (dW - D2) / (m Z) (fp32 and the fast-math power: 1e-5 relative);
            // else W = dA = 0
            double dA = live ? 3.0 * p * std::pow(xm, p - 1) * (dW - ri.D2) * ri.inv_m * ri.inv_Z : 0.0;
            double ds = (double)inv_S1 * (dA - ri.D1);
            CHECK(std::isfinite(r[0]));
            CHECK(std::isfinite(r[1]));
            CHECK(std::fabs(r[0]) < FLT_MIN);
            CHECK(std::fabs(r[1] - ds) <= 1e-5 * std::fabs(ds));
        }
    }
    cudaCheck(cudaFree(out));
}

// Long sequence, LSSAR p = 15: B*NH = 1, hd = 32 to keep the emulated run short (the kernels'
// work per key is proportional to hd; the numerics of long rows do not depend on it).
TEST_CASE("long sequence T = 2048, LSSAR p = 15") {
    Problem pr = make_problem(1, 2048, 1, 32, Inputs::Aligned, 15);
    double max_x = check_case(pr, ATTN_LSSAR, 15.0f);
    CHECK(max_x > 360);  // relu(x)^15 would overflow fp32 here without the division by m
}

// Learned p: every head its own p (one integer, one real: both pow paths), dL/dp of every head
// against the reference's. The scalar p the kernels also get is 1, which no head uses: a kernel
// that ignored p_head would fail every comparison.
const HeadPowers LEARNED = {3.0f, 14.3f};

TEST_CASE("learned p: a p per head and dL/dp of every head, every re-weighting variant, every length") {
    const int lengths[] = {1, 2, 3, 4, 17, 64, 130};
    for (int hd : {32, 64}) {
        for (int T : lengths) {
            Problem pr = make_problem(2, T, 2, hd, Inputs::Random, 3000 + T + hd);
            for (AttnKind kind : test_kinds())
                if (attn_reweights(kind)) check_case(pr, kind, 1.0f, false, {}, LEARNED);
        }
    }
}

TEST_CASE("learned p: one-hot, zero-query, huge and tiny norms, aligned keys") {
    for (Inputs in : {Inputs::OneHot, Inputs::ZeroQuery, Inputs::Norms, Inputs::Aligned}) {
        Problem pr = make_problem(1, 130, 2, 32, in, 21 + (int)in);
        for (AttnKind kind : {ATTN_LSSAR, ATTN_SOFTMAX_RW})
            if (in != Inputs::Norms || attn_variant(kind).score == ATTN_SCORE_COS_LEN)
                check_case(pr, kind, 1.0f, in == Inputs::Norms, {}, LEARNED);
    }
}

// ssmax: every head its own s (0.43, its initial value, and 0.9), dL/ds of every head against the
// reference's (Tolerances::ds). The scalar the kernels also get is 1, which no head uses: a kernel
// that ignored p_head would fail every comparison.
const HeadPowers SSMAX_HEADS = {0.43f, 0.9f};

TEST_CASE("ssmax: an s per head and dL/ds of every head, every length and head size") {
    const int lengths[] = {1, 2, 3, 4, 17, 64, 130};
    for (int hd : {32, 64}) {
        for (int T : lengths) {
            Problem pr = make_problem(2, T, 2, hd, Inputs::Random, 4000 + T + hd);
            check_case(pr, ATTN_SSMAX, 1.0f, false, {}, SSMAX_HEADS);
        }
    }
    Problem pr = make_problem(1, 70, 2, 128, Inputs::Random, 4005);
    check_case(pr, ATTN_SSMAX, 1.0f, false, {}, SSMAX_HEADS);
}

TEST_CASE("ssmax: one-hot, zero-query and aligned inputs, an s per head") {
    for (Inputs in : {Inputs::OneHot, Inputs::ZeroQuery, Inputs::Aligned}) {
        Problem pr = make_problem(1, 130, 2, 32, in, 41 + (int)in);
        check_case(pr, ATTN_SSMAX, 1.0f, false, {}, SSMAX_HEADS);
    }
}

// Log-length scaling (attn_len = L > 1, softmax and softmax_rw, a run-time argument of the same
// kernels): row t's scores times max(1, ln(n_t) / ln(L)). Beyond L against the reference with the
// same L, at the tolerances of every variant (the factor changes the row's scale, not what the
// kernels round): T = 130 with L = 64 (rows before, at and after L, across tiles), L = 5 (most rows
// far above), L = 2 (the smallest L); learned p of softmax_rw too. Within L (T <= L) the factor is 1
// exactly and the kernels must give attn_len = 0's bits, forward and backward; beyond it they
// differ. dq and dL/dp are sums of fp32 atomics from several blocks, whose order a GPU does not
// fix (two runs of attn_len = 0 may differ in their last bits there): the emulator runs the blocks
// one at a time for this comparison, in one order, and on a GPU those two are not compared.
TEST_CASE("attn_len: log-length scaling of softmax and softmax_rw beyond L; within L the bits of attn_len = 0") {
    struct Case { int T, L; } cases[] = {{130, 64}, {130, 5}, {70, 2}};
    for (int hd : {32, 64}) {
        for (const Case& c : cases) {
            Problem pr = make_problem(2, c.T, 2, hd, Inputs::Random, 5000 + c.T + hd + c.L);
            pr.attn_len = c.L;
            check_case(pr, ATTN_SOFTMAX, 1.0f);
            check_case(pr, ATTN_SOFTMAX_RW, 15.0f);
        }
    }
    Problem big = make_problem(1, 70, 2, 128, Inputs::Random, 5100);
    big.attn_len = 20;
    check_case(big, ATTN_SOFTMAX, 1.0f);
    check_case(big, ATTN_SOFTMAX_RW, 3.0f, false, {}, LEARNED);

    for (int T : {17, 64, 130}) {
        for (int hd : {32, 64}) {
            Problem pr = make_problem(1, T, 2, hd, Inputs::Random, 5200 + T + hd);
            for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW}) {
                CAPTURE(attn_kind_name(kind));
                CAPTURE(T);
                CAPTURE(hd);
                HeadPowers heads = kind == ATTN_SOFTMAX_RW ? LEARNED : HeadPowers{};
#ifdef SIMT_EMULATOR
                simt::set_block_threads(1);
#endif
                pr.attn_len = 0;
                Result plain = run_gpu(pr, kind, 15.0f, heads);
                pr.attn_len = T;  // every row within L
                Result within = run_gpu(pr, kind, 15.0f, heads);
#ifdef SIMT_EMULATOR
                simt::set_block_threads(0);
                CHECK(plain.dqkv == within.dqkv);
                CHECK(plain.dp == within.dp);
#else
                for (int part : {1, 2}) {  // dk, dv: each written by one block
                    bool same = true;
                    for (int bt = 0; bt < pr.B * T; bt++)
                        for (int i = 0; i < pr.NH * hd; i++) {
                            size_t k = ((size_t)bt * 3 + part) * pr.NH * hd + i;
                            same &= plain.dqkv[k] == within.dqkv[k];
                        }
                    CHECK(same);
                }
#endif
                CHECK(plain.out == within.out);
                CHECK(plain.stats == within.stats);
                pr.attn_len = 8;  // rows 8.. beyond L
                Result beyond = run_gpu(pr, kind, 15.0f, heads);
                CHECK(plain.out != beyond.out);
                CHECK(plain.dqkv != beyond.dqkv);
            }
        }
    }
}

// A variant added to the list takes the kernels' default launch bounds, which no one measured:
// named here until scripts/kernel_stats.sh has been run for it.
TEST_CASE("every variant's launch bounds were measured") {
    for (const AttnVariant& v : ATTN_VARIANT_TABLE)
        CHECK_MESSAGE(v.kind < ATTN_LAUNCH_BOUNDS_MEASURED, v.name,
                      ": its kernels take the default launch bounds, which no one has measured: run "
                      "scripts/kernel_stats.sh (registers and spills at sm_90), tune attn_fwd_min_blocks "
                      "(attention/attention_forward.cuh) and attn_rowd_min_blocks (attention/attention_backward.cuh) "
                      "if it spills, then raise ATTN_LAUNCH_BOUNDS_MEASURED");
}
