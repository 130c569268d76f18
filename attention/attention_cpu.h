// The CPU reference lives in namespace ref.
// CPU reference of causal attention, every variant of the family (attention/attention_kind.h):
// score x phi x normalisation x optional re-weighting. The specification is doc/attention.md.
// Templated on the variant (a compile-time constant: attn_dispatch turns a run-time kind into
// one) and on the float type: float for the CPU back end, double for gradient checks.
//
// qkv   (B, T, 3, NH, hd)  q, k, v of every head, RoPE already applied to q and k
// out   (B, T, NH, hd)
// stats (B, NH, T, 3)      per-row values a kernel saves for its backward:
//                            l1 with exp (softmax, softmax_rw):  (lse, m, Z)  lse = log sum_j exp(s_tj)
//                            l1 otherwise (lssa, lssar, ...):    (S1, m, Z)   S1 = sum_j phi(s_tj)
//                            none, mean (sigmoid, relu):         (0, 0, 0)
//                          m, Z: the re-weighting's row maximum and sum (0 without it)
// p: the head parameter (re-weighting's power, ssmax's s), one for every head, or p_head[h] per
// head (learned p, ssmax's learned s); the backward adds dL/dp of every head to dp_head when given.
// attn_len: the n of dot_logn's bias -ln(n) and mean's scale 1/n (sigmoid, relu): 0 for the row's
// n_t = t + 1, L > 0 for the constant L (attn_len_n, attention/attention_kind.h); for softmax and
// softmax_rw, L > 1 is log-length scaling beyond L (attn_log_len_factor).
// The backward recomputes what it needs from qkv (it stores two T x T buffers per head,
// which is fine for the lengths the CPU trains at; the CUDA kernels keep O(T) memory).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention/attention_kind.h"

namespace ref {

constexpr double LSSA_NORM_EPS = 1e-12;  // eps of the q/k L2 normalisation

// softplus without a threshold: exact for every s (doc/attention.md, section 'Softplus')
template <class T> inline T softplus_exact(T s) {
    return std::max(s, T(0)) + std::log1p(std::exp(-std::fabs(s)));
}
template <class T> inline T sigmoid_stable(T s) {
    if (s >= 0) return T(1) / (T(1) + std::exp(-s));
    T e = std::exp(s);
    return e / (T(1) + e);
}

// x^n for integer n >= 0 by repeated squaring
template <class T> inline T pow_int(T x, int n) {
    T result = 1;
    while (n > 0) {
        if (n & 1) result *= x;
        x *= x;
        n >>= 1;
    }
    return result;
}
// x^p for x >= 0, with the repeated-squaring path for integer p (x^0 = 1, also for x = 0)
template <class T> inline T pow_p(T x, double p) {
    if (p == std::floor(p) && p >= 0 && p <= ATTN_P_INT_MAX) return pow_int(x, (int)p);
    return std::pow(x, T(p));
}

// LSSA's per-row scale lam_t = ln(hd) * ln(n_t), n_t = t + 1
template <class T> inline T lssa_scale(int t, int hd) {
    return T(std::log((double)hd) * std::log((double)(t + 1)));
}

// The re-weighting's bias o_t: 0 on the first three rows, 1 after
inline int lssar_bias(int t) { return t < 3 ? 0 : 1; }

// |x| without overflow or underflow of the sum of squares: x is scaled by a power of two near
// 1/max|x_i| first (exact), as the CUDA kernels do (attention_common.cuh).
template <class T> inline T l2_norm_rescaled(const T* x, int n) {
    T amax = 0;
    for (int i = 0; i < n; i++) amax = std::max(amax, std::fabs(x[i]));
    if (!(amax > 0) || !std::isfinite(amax)) return amax > 0 ? amax : T(0);
    int e;
    std::frexp(amax, &e);
    T sum2 = 0;
    for (int i = 0; i < n; i++) {
        T xs = std::ldexp(x[i], -e);
        sum2 += xs * xs;
    }
    return std::ldexp(std::sqrt(sum2), e);
}

// ----------------------------------------------------------------------------
// The parts of a variant, one function each.

// s_tj = attn_score_scale * (qe_t . ke_j) + attn_score_bias (qe, ke as attention_prepare makes them).
// hp: the head parameter (ssmax's s). Log-length scaling (attn_len > 1, dot scores with exp) multiplies
// by attn_log_len_factor beyond attn_len only, so within it the scale is softmax's, bit for bit.
template <AttnKind K, class T> inline T attn_score_scale(int t, int hd, int attn_len, double hp) {
    T unit = T(1) / std::sqrt(T(hd));
    if constexpr (attn_variant(K).score == ATTN_SCORE_COS_LEN) return lssa_scale<T>(t, hd);
    else if constexpr (AttnTraits<K>::ssmax) return T(hp) * T(std::log((double)(t + 1))) * unit;
    else if constexpr (AttnTraits<K>::log_len) {
        double f = attn_log_len_factor(t, attn_len);
        return f == 1.0 ? unit : T(f) * unit;
    } else return unit;
}
template <AttnKind K, class T> inline T attn_score_bias(int t, int attn_len) {
    if constexpr (attn_variant(K).score == ATTN_SCORE_DOT_LOGN) return -T(std::log((double)attn_len_n(t, attn_len)));
    else return T(0);
}

// phi(s) and its derivative (given phi(s)); exp is evaluated at s - max_j s (l1 cancels the shift)
template <AttnPhi F, class T> inline T attn_phi(T s) {
    if constexpr (F == ATTN_PHI_EXP) return std::exp(s);
    else if constexpr (F == ATTN_PHI_SOFTPLUS) return softplus_exact(s);
    else if constexpr (F == ATTN_PHI_SIGMOID) return sigmoid_stable(s);
    else return std::max(s, T(0));
}
template <AttnPhi F, class T> inline T attn_dphi(T s, T phi) {
    if constexpr (F == ATTN_PHI_EXP) return phi;
    else if constexpr (F == ATTN_PHI_SOFTPLUS) return sigmoid_stable(s);
    else if constexpr (F == ATTN_PHI_SIGMOID) return sigmoid_stable(s) * sigmoid_stable(-s);
    else return s > 0 ? T(1) : T(0);
}

// A = the normalised phi: phi / S1 (l1), phi (none), phi / n (mean; n = attn_len_n)
template <AttnNorm N, class T> inline T attn_normed(T a, T S1, T n) {
    if constexpr (N == ATTN_NORM_L1) return a / S1;
    else if constexpr (N == ATTN_NORM_NONE) return a;
    else return a / n;
}

// The vectors a variant takes dot products of: q, k for dot scores; q/|q|, k/|k| for cos_len.
// qe, ke (B, NH, T, hd) contiguous per head; norms of q and k in qn, kn (B, NH, T).
template <class T>
void attention_prepare(std::vector<T>& qe, std::vector<T>& ke, std::vector<T>& qn, std::vector<T>& kn,
                       const T* qkv, int B, int T_, int NH, int hd, AttnKind kind) {
    int C = NH * hd;
    bool normalise = attn_variant(kind).score == ATTN_SCORE_COS_LEN;
    qe.resize((size_t)B * NH * T_ * hd);
    ke.resize(qe.size());
    qn.resize((size_t)B * NH * T_);
    kn.resize(qn.size());
#pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T_; t++) {
                const T* q = qkv + ((size_t)(b * T_ + t) * 3 + 0) * C + h * hd;
                const T* k = qkv + ((size_t)(b * T_ + t) * 3 + 1) * C + h * hd;
                size_t row = ((size_t)b * NH + h) * T_ + t;
                qn[row] = l2_norm_rescaled(q, hd);
                kn[row] = l2_norm_rescaled(k, hd);
                T qs = 1, ks = 1;
                if (normalise) {
                    qs = T(1) / std::max(qn[row], T(LSSA_NORM_EPS));
                    ks = T(1) / std::max(kn[row], T(LSSA_NORM_EPS));
                }
                for (int i = 0; i < hd; i++) {
                    qe[row * hd + i] = q[i] * qs;
                    ke[row * hd + i] = k[i] * ks;
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// One row t of one head.

// Stage 2 (re-weighting), max-normalised: x = n A - o, u = (relu(x)/m)^p, W = u / Z, with A in
// w on entry and W on return. m uses the same operations as x on the largest phi (phi is
// increasing: it comes from the largest score), so it equals the largest computed x.
// Degenerate row: every x <= 0, which happens exactly when A is uniform (every phi equal, as
// computed: saturated sigmoids count) and o = 1. Rounding in S1 can leave m at +1e-16 there, so
// equal phi decide, not m alone.
template <AttnKind K, class T>
bool attn_row_reweight(T* w, const T* a, T amax, T S1, T stats[3], int t, double p, int attn_len) {
    constexpr AttnNorm N = attn_variant(K).norm;
    T n = T(t + 1), o = T(lssar_bias(t)), n_norm = T(attn_len_n(t, attn_len));
    T m = n * attn_normed<N>(amax, S1, n_norm) - o;
    stats[1] = m;
    bool uniform = o == 1 && std::all_of(a, a + t + 1, [&](T aj) { return aj == a[0]; });
    if (!(m > 0) || uniform) {
        for (int j = 0; j <= t; j++) w[j] = 0;
        return false;  // Z = 0 in stats marks the row for the backward
    }
    double Z_acc = 0;
    for (int j = 0; j <= t; j++) {
        T x = n * w[j] - o;
        w[j] = x > 0 ? pow_p(x / m, p) : T(0);
        Z_acc += w[j];
    }
    T Z = T(Z_acc);
    stats[2] = Z;
    if (Z == 0) {  // rounding left m > 0 while every x <= 0: degenerate too
        for (int j = 0; j <= t; j++) w[j] = 0;
        return false;
    }
    for (int j = 0; j <= t; j++) w[j] /= Z;
    return true;
}

// The attention weights w[0..t] of row t and the row's stats. s: scratch of length t+1
// (scores), a: scratch (phi values). Returns false for a degenerate row (w = 0, no output, no
// gradient): every x <= 0 under re-weighting, or phi = 0 on every key under l1 (relu).
template <AttnKind K, class T>
bool attn_row_weights(T* w, T* s, T* a, T stats[3], const T* qe_t, const T* ke, int t, int hd, double p,
                      int attn_len) {
    constexpr AttnVariant V = attn_variant(K);
    static_assert(V.phi != ATTN_PHI_EXP || V.norm == ATTN_NORM_L1, "exp needs l1 (the max shift cancels)");
    T scale = attn_score_scale<K, T>(t, hd, attn_len, p), bias = attn_score_bias<K, T>(t, attn_len);
    for (int j = 0; j <= t; j++) {
        T dot = 0;
        for (int i = 0; i < hd; i++) dot += qe_t[i] * ke[(size_t)j * hd + i];
        s[j] = scale * dot + bias;
    }
    stats[0] = stats[1] = stats[2] = 0;
    T smax = *std::max_element(s, s + t + 1);
    T shift = V.phi == ATTN_PHI_EXP ? smax : T(0);
    // Row sums accumulate in double: when A is nearly uniform, x = n A - 1 cancels and a float32
    // sum over thousands of keys would shift every x.
    double S1_acc = 0;
    T amax = 0;
    for (int j = 0; j <= t; j++) {
        a[j] = attn_phi<V.phi>(s[j] - shift);
        S1_acc += a[j];
        amax = std::max(amax, a[j]);
    }
    T S1 = T(S1_acc), n_norm = T(attn_len_n(t, attn_len));
    if (V.norm == ATTN_NORM_L1) {
        if (S1 == 0) {  // relu: no key has a positive score
            for (int j = 0; j <= t; j++) w[j] = 0;
            return false;
        }
        stats[0] = V.phi == ATTN_PHI_EXP ? smax + std::log(S1) : S1;
    }
    for (int j = 0; j <= t; j++) w[j] = attn_normed<V.norm>(a[j], S1, n_norm);
    if constexpr (V.reweight) return attn_row_reweight<K>(w, a, amax, S1, stats, t, p, attn_len);
    return true;
}

// d(score) of one row from dW (= dy . v_j), following doc/attention.md, section 'Backward'.
// w: the row's final weights; s, a: its scores and phi values; stats as in the forward.
// Writes ds[0..t] (the gradient with respect to s_tj); dA is scratch of length t+1.
// Under re-weighting, returns dL/dp of the row: sum_j dW_j W_j (ln(x_j/m) - sum_k W_k ln(x_k/m)).
template <AttnKind K, class T>
double attn_row_dscores(T* ds, T* dA, const T* dW, const T* w, const T* s, const T* a, const T stats[3], int t,
                        double p, int attn_len) {
    constexpr AttnVariant V = attn_variant(K);
    T n = T(t + 1), n_norm = T(attn_len_n(t, attn_len)), S1 = 1;
    if constexpr (V.norm == ATTN_NORM_L1) {  // the forward's sum, in the same order
        double S1_acc = 0;
        for (int j = 0; j <= t; j++) S1_acc += a[j];
        S1 = T(S1_acc);
        if (S1 == 0) {  // degenerate (relu): no gradient
            std::fill(ds, ds + t + 1, T(0));
            return 0;
        }
    }
    // D2 = sum_j w_j dW_j  (= dy . y)
    T D2 = 0;
    for (int j = 0; j <= t; j++) D2 += w[j] * dW[j];
    double dp = 0;
    if constexpr (V.reweight) {
        // dx_j = p (x_j/m)^(p-1) (dW_j - D2) / (m Z) for x_j > 0, else 0; dA = n dx
        T m = stats[1], Z = stats[2], o = T(lssar_bias(t));
        bool degenerate = !(m > 0) || Z == 0;  // as marked by attn_row_weights
        double sum_wlog = 0, sum_wdwlog = 0;
        for (int j = 0; j <= t; j++) {
            T x = n * attn_normed<V.norm>(a[j], S1, n_norm) - o;
            T dx = 0;
            if (!degenerate && x > 0) {
                dx = T(p) * pow_p(x / m, p - 1) * (dW[j] - D2) / (m * Z);
                double lx = std::log((double)(x / m));
                sum_wlog += w[j] * lx;
                sum_wdwlog += w[j] * dW[j] * lx;
            }
            dA[j] = n * dx;
        }
        dp = sum_wdwlog - D2 * sum_wlog;
    } else {
        for (int j = 0; j <= t; j++) dA[j] = dW[j];
    }
    if constexpr (V.norm == ATTN_NORM_L1) {
        // D1 = sum_j A_j dA_j ; ds = phi'(s) (dA - D1) / S1
        T D1 = 0;
        for (int j = 0; j <= t; j++) D1 += (a[j] / S1) * dA[j];
        for (int j = 0; j <= t; j++) ds[j] = attn_dphi<V.phi>(s[j], a[j]) * (dA[j] - D1) / S1;
    } else {
        for (int j = 0; j <= t; j++) ds[j] = attn_normed<V.norm>(attn_dphi<V.phi>(s[j], a[j]), T(1), n_norm) * dA[j];
    }
    return dp;
}

// Maps the gradient of a normalised vector (q/|q| or k/|k|) back to the raw vector.
template <class T> inline void l2norm_backward(T* dx, const T* dxh, const T* xh, T norm, int hd) {
    if (norm > T(LSSA_NORM_EPS)) {
        T dot = 0;
        for (int i = 0; i < hd; i++) dot += xh[i] * dxh[i];
        for (int i = 0; i < hd; i++) dx[i] += (dxh[i] - xh[i] * dot) / norm;
    } else {
        for (int i = 0; i < hd; i++) dx[i] += dxh[i] / T(LSSA_NORM_EPS);
    }
}

// ----------------------------------------------------------------------------
// The layer.

template <AttnKind K, class T>
void attention_forward_k(T* out, T* stats, const T* qkv, int B, int T_, int NH, int hd, double p,
                         const double* p_head, int attn_len) {
    int C = NH * hd;
    std::vector<T> qe, ke, qn, kn;
    attention_prepare(qe, ke, qn, kn, qkv, B, T_, NH, hd, K);
#pragma omp parallel
    {
        std::vector<T> w(T_), s(T_), a(T_);
#pragma omp for collapse(3) schedule(dynamic, 8)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T_; t++) {
                    size_t head = (size_t)b * NH + h;
                    T row_stats[3];
                    attn_row_weights<K>(w.data(), s.data(), a.data(), row_stats, &qe[(head * T_ + t) * hd],
                                        &ke[head * T_ * hd], t, hd, p_head ? p_head[h] : p, attn_len);
                    T* y = out + (size_t)(b * T_ + t) * C + h * hd;
                    for (int i = 0; i < hd; i++) y[i] = 0;
                    for (int j = 0; j <= t; j++) {
                        const T* v = qkv + ((size_t)(b * T_ + j) * 3 + 2) * C + h * hd;
                        for (int i = 0; i < hd; i++) y[i] += w[j] * v[i];
                    }
                    if (stats) {
                        for (int c = 0; c < 3; c++) stats[(head * T_ + t) * 3 + c] = row_stats[c];
                    }
                }
            }
        }
    }
}

// dq_t (row pass) of one head: recomputes row t's weights into W, its scaled score gradient
// into dS, and adds the row's dL/dp to *dp.
template <AttnKind K, class T>
void attn_backward_row(T* W, T* dS, T* dq, double* dp, const T* dy, const T* qkv, const T* qe_h, const T* ke_h,
                       T q_norm, int b, int h, int t, int T_, int NH, int hd, double p, int attn_len, std::vector<T>& s,
                       std::vector<T>& a, std::vector<T>& dW, std::vector<T>& dA, std::vector<T>& dqe) {
    int C = NH * hd;
    T stats[3];
    attn_row_weights<K>(W, s.data(), a.data(), stats, qe_h + (size_t)t * hd, ke_h, t, hd, p, attn_len);
    for (int j = 0; j <= t; j++) {
        const T* v = qkv + ((size_t)(b * T_ + j) * 3 + 2) * C + h * hd;
        T d = 0;
        for (int i = 0; i < hd; i++) d += dy[i] * v[i];
        dW[j] = d;
    }
    *dp += attn_row_dscores<K>(dS, dA.data(), dW.data(), W, s.data(), a.data(), stats, t, p, attn_len);
    if constexpr (AttnTraits<K>::ssmax) {
        // dL/ds_h of the row: sum_j ds_tj ln(n_t) (q_t . k_j) / sqrt(hd)
        double dsum = 0;
        for (int j = 0; j <= t; j++) {
            T dot = 0;
            for (int i = 0; i < hd; i++) dot += qe_h[(size_t)t * hd + i] * ke_h[(size_t)j * hd + i];
            dsum += (double)dS[j] * (double)dot;
        }
        *dp += dsum * std::log((double)(t + 1)) / std::sqrt((double)hd);
    }
    T scale = attn_score_scale<K, T>(t, hd, attn_len, p);
    for (int j = 0; j <= t; j++) dS[j] *= scale;
    // dq_t: d(qe_t) = sum_j ds_tj ke_j, then through the normalisation
    std::fill(dqe.begin(), dqe.end(), T(0));
    for (int j = 0; j <= t; j++)
        for (int i = 0; i < hd; i++) dqe[i] += dS[j] * ke_h[(size_t)j * hd + i];
    if (attn_variant(K).score != ATTN_SCORE_COS_LEN) {
        for (int i = 0; i < hd; i++) dq[i] += dqe[i];
    } else {
        l2norm_backward(dq, dqe.data(), qe_h + (size_t)t * hd, q_norm, hd);
    }
}

template <AttnKind K, class T>
void attention_backward_k(T* dqkv, const T* dout, const T* qkv, int B, int T_, int NH, int hd, double p,
                          const double* p_head, double* dp_head, int attn_len) {
    int C = NH * hd;
    std::vector<T> qe, ke, qn, kn;
    attention_prepare(qe, ke, qn, kn, qkv, B, T_, NH, hd, K);
    size_t TT = (size_t)T_ * T_;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t head = (size_t)b * NH + h;
            const T* qe_h = &qe[head * T_ * hd];
            const T* ke_h = &ke[head * T_ * hd];
            double p_h = p_head ? p_head[h] : p, dp = 0;
            // (T, T) buffers of this head: final weights W and c_t * ds (row-scaled score gradient)
            std::vector<T> W(TT, T(0)), dS(TT, T(0));
#pragma omp parallel reduction(+ : dp)
            {
                std::vector<T> s(T_), a(T_), dW(T_), dA(T_), dqe(hd), dke(hd);
#pragma omp for schedule(dynamic, 8)
                for (int t = 0; t < T_; t++) {
                    const T* dy = dout + (size_t)(b * T_ + t) * C + h * hd;
                    T* dq = dqkv + ((size_t)(b * T_ + t) * 3 + 0) * C + h * hd;
                    attn_backward_row<K>(&W[(size_t)t * T_], &dS[(size_t)t * T_], dq, &dp, dy, qkv, qe_h, ke_h,
                                         qn[head * T_ + t], b, h, t, T_, NH, hd, p_h, attn_len, s, a, dW, dA, dqe);
                }
#pragma omp for schedule(dynamic, 8)
                for (int j = 0; j < T_; j++) {
                    // dk_j = sum_t ds_tj qe_t (through the normalisation), dv_j = sum_t W_tj dy_t
                    std::fill(dke.begin(), dke.end(), T(0));
                    T* dv = dqkv + ((size_t)(b * T_ + j) * 3 + 2) * C + h * hd;
                    for (int t = j; t < T_; t++) {
                        T ds = dS[(size_t)t * T_ + j], w = W[(size_t)t * T_ + j];
                        const T* dy = dout + (size_t)(b * T_ + t) * C + h * hd;
                        for (int i = 0; i < hd; i++) {
                            dke[i] += ds * qe_h[(size_t)t * hd + i];
                            dv[i] += w * dy[i];
                        }
                    }
                    T* dk = dqkv + ((size_t)(b * T_ + j) * 3 + 1) * C + h * hd;
                    if (attn_variant(K).score != ATTN_SCORE_COS_LEN) {
                        for (int i = 0; i < hd; i++) dk[i] += dke[i];
                    } else {
                        l2norm_backward(dk, dke.data(), ke_h + (size_t)j * hd, kn[head * T_ + j], hd);
                    }
                }
            }
            if (dp_head) dp_head[h] += dp;
        }
    }
}

// ----------------------------------------------------------------------------
// Run-time entry points: the kind becomes a compile-time constant (attn_dispatch).

// attn_len must suit the variant (attn_len_error; the model config refuses a bad one first).
inline void attention_check_len(AttnKind kind, int attn_len, const char* who) {
    std::string err = attn_len_error(kind, attn_len);
    if (!err.empty()) {
        fprintf(stderr, "[ERROR] %s: %s\n", who, err.c_str());
        exit(EXIT_FAILURE);
    }
}

// Returns false for a degenerate row (w = 0).
template <class T>
bool attention_row_weights(T* w, T* s, T* a, T stats[3], const T* qe_t, const T* ke, int t, int hd, AttnKind kind,
                           double p, int attn_len = 0) {
    attention_check_len(kind, attn_len, "attention_row_weights");
    bool live = false;
    attn_dispatch(kind, [&](auto k) {
        live = attn_row_weights<decltype(k)::value>(w, s, a, stats, qe_t, ke, t, hd, p, attn_len);
    });
    return live;
}

template <class T>
void attention_forward(T* out, T* stats, const T* qkv, int B, int T_, int NH, int hd, AttnKind kind, double p,
                       const double* p_head = nullptr, int attn_len = 0) {
    attention_check_len(kind, attn_len, "attention_forward");
    attn_dispatch(kind, [&](auto k) {
        attention_forward_k<decltype(k)::value>(out, stats, qkv, B, T_, NH, hd, p, p_head, attn_len);
    });
}

// dqkv += d(loss)/d(qkv); dp_head[h] += d(loss)/d(p of head h) when given (re-weighting's p, ssmax's s).
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, int B, int T_, int NH, int hd, AttnKind kind,
                        double p, const double* p_head = nullptr, double* dp_head = nullptr, int attn_len = 0) {
    attention_check_len(kind, attn_len, "attention_backward");
    attn_dispatch(kind, [&](auto k) {
        attention_backward_k<decltype(k)::value>(dqkv, dout, qkv, B, T_, NH, hd, p, p_head, dp_head, attn_len);
    });
}

}  // namespace ref
