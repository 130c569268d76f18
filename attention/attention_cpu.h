// CPU reference of causal attention in three variants: Softmax, LSSA and LSSAR.
// The specification is doc/attention.md (sections 'Softmax' to 'Backward'); every formula below
// follows it line by line.
// Templated on the float type: float for the CPU back end, double for gradient checks.
//
// qkv  (B, T, 3, NH, hd)  q, k, v of every head, RoPE already applied to q and k
// out  (B, T, NH, hd)
// stats (B, NH, T, 3)     per-row values a kernel saves for its backward:
//                           softmax: (lse, 0, 0)   lse = log sum_j exp(s_tj)
//                           lssa:    (S1, 0, 0)
//                           lssar:   (S1, m, Z)
// The backward recomputes what it needs from qkv (it stores two T x T buffers per head,
// which is fine for the lengths the CPU trains at; the CUDA kernels keep O(T) memory).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

enum AttnKind { ATTN_SOFTMAX = 0, ATTN_LSSA = 1, ATTN_LSSAR = 2 };

inline const char* attn_kind_name(AttnKind kind) {
    switch (kind) {
        case ATTN_SOFTMAX: return "softmax";
        case ATTN_LSSA: return "lssa";
        case ATTN_LSSAR: return "lssar";
    }
    return "unknown";
}

// Returns false for a name that is not a variant.
inline bool attn_kind_from_name(const char* name, AttnKind* kind) {
    for (AttnKind k : {ATTN_SOFTMAX, ATTN_LSSA, ATTN_LSSAR}) {
        if (strcmp(name, attn_kind_name(k)) == 0) { *kind = k; return true; }
    }
    return false;
}

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
    if (p == std::floor(p) && p >= 0 && p <= 1024) return pow_int(x, (int)p);
    return std::pow(x, T(p));
}

// LSSA's per-row scale lam_t = ln(hd) * ln(n_t), n_t = t + 1
template <class T> inline T lssa_scale(int t, int hd) {
    return T(std::log((double)hd) * std::log((double)(t + 1)));
}

// LSSAR's bias o_t: 0 on the first three rows, 1 after
inline int lssar_bias(int t) { return t < 3 ? 0 : 1; }

// |x| without overflow or underflow of the sum of squares: x is scaled by a power of two near
// 1/max|x_i| first (exact), as the CUDA kernels do (attention_lssar.cuh).
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

// The vectors a variant takes dot products of: q, k for softmax; q/|q|, k/|k| for LSSA(R).
// qe, ke (B, NH, T, hd) contiguous per head; norms of q and k in qn, kn (B, NH, T).
template <class T>
void attention_prepare(std::vector<T>& qe, std::vector<T>& ke, std::vector<T>& qn, std::vector<T>& kn,
                       const T* qkv, int B, int T_, int NH, int hd, AttnKind kind) {
    int C = NH * hd;
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
                if (kind != ATTN_SOFTMAX) {
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

// One row t of one head: the attention weights w[0..t] and the row's stats.
// s: scratch of length t+1 (scores), a: scratch (softplus values).
// Returns false for a degenerate LSSAR row (w = 0, no output, no gradient).
template <class T>
bool attention_row_weights(T* w, T* s, T* a, T stats[3], const T* qe_t, const T* ke, int t, int hd,
                           AttnKind kind, double p) {
    T scale = kind == ATTN_SOFTMAX ? T(1) / std::sqrt(T(hd)) : lssa_scale<T>(t, hd);
    for (int j = 0; j <= t; j++) {
        T dot = 0;
        for (int i = 0; i < hd; i++) dot += qe_t[i] * ke[(size_t)j * hd + i];
        s[j] = scale * dot;
    }
    stats[0] = stats[1] = stats[2] = 0;
    if (kind == ATTN_SOFTMAX) {
        T smax = s[0];
        for (int j = 1; j <= t; j++) smax = std::max(smax, s[j]);
        T sum = 0;
        for (int j = 0; j <= t; j++) { w[j] = std::exp(s[j] - smax); sum += w[j]; }
        for (int j = 0; j <= t; j++) w[j] /= sum;
        stats[0] = smax + std::log(sum);
        return true;
    }
    // stage 1 (LSSA): A = softplus(s) / S1. Row sums accumulate in double: when A is nearly
    // uniform, x = n A - 1 cancels and a float32 sum over thousands of keys would shift every x.
    double S1_acc = 0;
    T amax = 0;
    for (int j = 0; j <= t; j++) {
        a[j] = softplus_exact(s[j]);
        S1_acc += a[j];
        amax = std::max(amax, a[j]);
    }
    T S1 = T(S1_acc);
    stats[0] = S1;
    for (int j = 0; j <= t; j++) w[j] = a[j] / S1;
    if (kind == ATTN_LSSA) return true;
    // stage 2 (re-weighting), max-normalised: x = n*A - o, u = (relu(x)/m)^p, W = u / Z.
    // m uses the same operations as x on the largest a, so it equals the largest computed x.
    // Degenerate row: every x <= 0, which happens exactly when A is uniform (all scores equal)
    // and o = 1. Rounding in S1 can leave m at +1e-16 there, so equal scores decide, not m alone.
    T n = T(t + 1), o = T(lssar_bias(t));
    T m = n * (amax / S1) - o;
    stats[1] = m;
    bool uniform = o == 1 && std::all_of(s, s + t + 1, [&](T sj) { return sj == s[0]; });
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

template <class T>
void attention_forward(T* out, T* stats, const T* qkv, int B, int T_, int NH, int hd, AttnKind kind, double p) {
    int C = NH * hd;
    std::vector<T> qe, ke, qn, kn;
    attention_prepare(qe, ke, qn, kn, qkv, B, T_, NH, hd, kind);
#pragma omp parallel
    {
        std::vector<T> w(T_), s(T_), a(T_);
#pragma omp for collapse(3) schedule(dynamic, 8)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T_; t++) {
                    size_t head = (size_t)b * NH + h;
                    T row_stats[3];
                    attention_row_weights(w.data(), s.data(), a.data(), row_stats,
                                          &qe[(head * T_ + t) * hd], &ke[head * T_ * hd], t, hd, kind, p);
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

// d(score) of one row from dW (= dy . v_j), following doc/attention.md, section 'Backward'.
// w: the row's final weights; s, a: its scores and softplus values; stats as in the forward.
// Writes ds[0..t] (the gradient with respect to s_tj); dA is scratch of length t+1.
template <class T>
void attention_row_dscores(T* ds, T* dA, const T* dW, const T* w, const T* s, const T* a, const T stats[3], int t,
                           AttnKind kind, double p) {
    // D = sum_j w_j dW_j  (= dy . y)
    T D = 0;
    for (int j = 0; j <= t; j++) D += w[j] * dW[j];
    if (kind == ATTN_SOFTMAX) {
        for (int j = 0; j <= t; j++) ds[j] = w[j] * (dW[j] - D);
        return;
    }
    T S1 = stats[0];
    if (kind == ATTN_LSSA) {
        for (int j = 0; j <= t; j++) dA[j] = dW[j];
    } else {
        // dx_j = p * (x_j/m)^(p-1) * (dW_j - D2) / (m Z) for x_j > 0, else 0; dA = n dx
        T m = stats[1], Z = stats[2], n = T(t + 1), o = T(lssar_bias(t));
        bool degenerate = !(m > 0) || Z == 0;  // as marked by attention_row_weights
        for (int j = 0; j <= t; j++) {
            T x = n * (a[j] / S1) - o;
            T dx = 0;
            if (!degenerate && x > 0) dx = T(p) * pow_p(x / m, p - 1) * (dW[j] - D) / (m * Z);
            dA[j] = n * dx;
        }
    }
    // D1 = sum_j A_j dA_j ; ds = sigmoid(s) (dA - D1) / S1
    T D1 = 0;
    for (int j = 0; j <= t; j++) D1 += (a[j] / S1) * dA[j];
    for (int j = 0; j <= t; j++) ds[j] = sigmoid_stable(s[j]) * (dA[j] - D1) / S1;
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

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, int B, int T_, int NH, int hd, AttnKind kind,
                        double p) {
    int C = NH * hd;
    std::vector<T> qe, ke, qn, kn;
    attention_prepare(qe, ke, qn, kn, qkv, B, T_, NH, hd, kind);
    size_t TT = (size_t)T_ * T_;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t head = (size_t)b * NH + h;
            const T* qe_h = &qe[head * T_ * hd];
            const T* ke_h = &ke[head * T_ * hd];
            // (T, T) buffers of this head: final weights W and c_t * ds (row-scaled score gradient)
            std::vector<T> W(TT, T(0)), dS(TT, T(0));
#pragma omp parallel
            {
                std::vector<T> s(T_), a(T_), dW(T_), dA(T_), dqe(hd), dke(hd);
#pragma omp for schedule(dynamic, 8)
                for (int t = 0; t < T_; t++) {
                    T* w = &W[(size_t)t * T_];
                    T stats[3];
                    attention_row_weights(w, s.data(), a.data(), stats, qe_h + (size_t)t * hd, ke_h, t, hd, kind, p);
                    const T* dy = dout + (size_t)(b * T_ + t) * C + h * hd;
                    for (int j = 0; j <= t; j++) {
                        const T* v = qkv + ((size_t)(b * T_ + j) * 3 + 2) * C + h * hd;
                        T d = 0;
                        for (int i = 0; i < hd; i++) d += dy[i] * v[i];
                        dW[j] = d;
                    }
                    T* ds = &dS[(size_t)t * T_];
                    attention_row_dscores(ds, dA.data(), dW.data(), w, s.data(), a.data(), stats, t, kind, p);
                    T scale = kind == ATTN_SOFTMAX ? T(1) / std::sqrt(T(hd)) : lssa_scale<T>(t, hd);
                    for (int j = 0; j <= t; j++) ds[j] *= scale;
                    // dq_t: d(qe_t) = sum_j ds_tj ke_j, then through the normalisation
                    std::fill(dqe.begin(), dqe.end(), T(0));
                    for (int j = 0; j <= t; j++)
                        for (int i = 0; i < hd; i++) dqe[i] += ds[j] * ke_h[(size_t)j * hd + i];
                    T* dq = dqkv + ((size_t)(b * T_ + t) * 3 + 0) * C + h * hd;
                    if (kind == ATTN_SOFTMAX) {
                        for (int i = 0; i < hd; i++) dq[i] += dqe[i];
                    } else {
                        l2norm_backward(dq, dqe.data(), qe_h + (size_t)t * hd, qn[head * T_ + t], hd);
                    }
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
                    if (kind == ATTN_SOFTMAX) {
                        for (int i = 0; i < hd; i++) dk[i] += dke[i];
                    } else {
                        l2norm_backward(dk, dke.data(), ke_h + (size_t)j * hd, kn[head * T_ + j], hd);
                    }
                }
            }
        }
    }
}
