// The fast CPU path's layers (declared in layers/fast_cpu.h), Highway code compiled once per ISA
// target (this file includes itself through hwy/foreach_target.h) and dispatched at run time. The
// formulas are the references' (layers/layernorm_cpu.h, gelu_cpu.h, rope_cpu.h, classifier_cpu.h,
// adamw_cpu.h) in fp32. Every loop is parallel over fixed chunks, so the bits do not depend on the
// number of threads; within a vector, lanes hold consecutive elements of a row.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "layers/fast_cpu.h"
#include "layers/gelu_cpu.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/layers_fast_cpu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

// Column sums in parallel with the same bits for any number of threads: rows go in fixed chunks of
// COLSUM_ROWS, each chunk sums its rows in order into its own row of partial (chunks, OC), and the
// chunks' rows are then added in chunk order.
#ifndef LAYERS_FAST_CPU_COMMON
#define LAYERS_FAST_CPU_COMMON
namespace fastcpu {
constexpr int COLSUM_ROWS = 32;
inline int colsum_chunks(int N) { return (N + COLSUM_ROWS - 1) / COLSUM_ROWS; }
inline float* colsum_partial(std::vector<float>& partial, int N, int OC) {
    size_t n = (size_t)colsum_chunks(N) * OC;
    if (partial.size() < n) partial.resize(n);
    return partial.data();
}
inline bf16 round_bf16(float x) { return float_to_bf16(x); }
inline float widen_bf16(bf16 h) { return bf16_to_float(h); }
}  // namespace fastcpu
#endif

HWY_BEFORE_NAMESPACE();
namespace fastcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DH = hn::Rebind<uint16_t, DF>;  // as many u16 lanes as DF has floats

// ------------------------------------------------------------------------------------------------
// Stores of a vector of floats as X: float as is, bf16 rounded to nearest even (NaN quiet). n < Lanes:
// the first n lanes only.
HWY_INLINE hn::Vec<DH> bf16_bits(VF x) {
    const DF d;
    const DU du;
    auto bits = hn::BitCast(du, x);
    auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
    auto rounded = hn::Add(bits, hn::Add(lsb, hn::Set(du, 0x7fffu)));
    rounded = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), hn::Or(bits, hn::Set(du, 0x400000u)), rounded);
    (void)d;
    return hn::DemoteTo(DH(), hn::BitCast(hn::RebindToSigned<DF>(), hn::ShiftRight<16>(rounded)));  // < 2^16: no saturation
}
HWY_INLINE void store_x(float* out, VF x) { hn::StoreU(x, DF(), out); }
HWY_INLINE void store_x(bf16* out, VF x) { hn::StoreU(bf16_bits(x), DH(), out); }
// n < Lanes only in a row's tail: whole vectors go through plain loads and stores (AVX2's masked
// vmaskmovps, a store above all, costs several times a plain one on AMD Zen)
HWY_INLINE void store_x_n(float* out, VF x, size_t n) {
    if (n >= hn::Lanes(DF())) hn::StoreU(x, DF(), out);
    else hn::BlendedStore(x, hn::FirstN(DF(), n), DF(), out);
}
HWY_INLINE void store_x_n(bf16* out, VF x, size_t n) {
    HWY_ALIGN bf16 tmp[hn::MaxLanes(DH())];
    hn::StoreU(bf16_bits(x), DH(), tmp);
    std::copy(tmp, tmp + n, out);
}
HWY_INLINE VF load_n(const float* p, size_t n) {
    return n >= hn::Lanes(DF()) ? hn::LoadU(DF(), p) : hn::MaskedLoad(hn::FirstN(DF(), n), DF(), p);
}
HWY_INLINE VF load_bf16(const bf16* p) {
    const DU du;
    return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(DH(), p))));
}
HWY_INLINE float sum_lanes(VF v) { return hn::GetLane(hn::SumOfLanes(DF(), v)); }
HWY_INLINE float max_lanes(VF v) { return hn::GetLane(hn::MaxOfLanes(DF(), v)); }

// out (OC) += the sum over chunks of partial (chunks, OC)
HWY_INLINE void colsum_finish(float* out, const float* partial, int chunks, int OC) {
    const DF d;
    const int NL = (int)hn::Lanes(d);
    const int blocks = (OC + NL - 1) / NL;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int o = blk * NL, n = std::min(NL, OC - o);
        VF sum = hn::Zero(d);
        for (int c = 0; c < chunks; c++) sum = hn::Add(sum, load_n(partial + (size_t)c * OC + o, n));
        store_x_n(out + o, hn::Add(load_n(out + o, n), sum), n);
    }
}

// ------------------------------------------------------------------------------------------------
// conversions

// out[i] = convert(in[i]) over [0, n) in parallel chunks of 2^14: whole vectors by vector(out, in),
// the tail by scalar(x)
template <class O, class I, class Vector, class Scalar>
HWY_INLINE void convert_in_chunks(O* out, const I* in, size_t n, Vector vector, Scalar scalar) {
    const size_t NL = hn::Lanes(DF()), chunk = 1 << 14, chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * chunk, end = std::min(n, i + chunk);
        for (; i + NL <= end; i += NL) vector(out + i, in + i);
        for (; i < end; i++) out[i] = scalar(in[i]);
    }
}
void RoundBf16(bf16* out, const float* in, size_t n) {
    convert_in_chunks(out, in, n, [](bf16* o, const float* x) { store_x(o, hn::LoadU(DF(), x)); }, round_bf16);
}
void WidenBf16(float* out, const bf16* in, size_t n) {
    convert_in_chunks(out, in, n, [](float* o, const bf16* x) { hn::StoreU(load_bf16(x), DF(), o); }, widen_bf16);
}

// ------------------------------------------------------------------------------------------------
// layernorm: mean, then the variance of the centred row, then (x - mean) rstd w + b

template <class X>
HWY_INLINE void layernorm_forward(X* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                                  int N, int C) {
    const DF d;
    const int NL = (int)hn::Lanes(d);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        VF s = hn::Zero(d);
        for (int i = 0; i < C; i += NL) s = hn::Add(s, load_n(x + i, std::min(NL, C - i)));
        float m = sum_lanes(s) / C;
        VF vm = hn::Set(d, m), v = hn::Zero(d);
        for (int i = 0; i < C; i += NL) {
            int k = std::min(NL, C - i);
            VF dx = hn::IfThenElseZero(hn::FirstN(d, k), hn::Sub(load_n(x + i, k), vm));
            v = hn::MulAdd(dx, dx, v);
        }
        float rs = 1.0f / std::sqrt(sum_lanes(v) / C + 1e-5f);
        VF vrs = hn::Set(d, rs);
        X* o = out + (size_t)n * C;
        for (int i = 0; i < C; i += NL) {
            int k = std::min(NL, C - i);
            VF y = hn::MulAdd(hn::Mul(hn::Sub(load_n(x + i, k), vm), vrs), load_n(w + i, k), load_n(b + i, k));
            if (k == NL) store_x(o + i, y);
            else store_x_n(o + i, y, k);
        }
        mean[n] = m;
        rstd[n] = rs;
    }
}
void LayernormForwardF32(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                         int C) {
    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}
void LayernormForwardBf16(bf16* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                          int C) {
    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}

// dnorm = dy w; dx += rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)); dw += norm dy, db += dy
void LayernormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                       const float* mean, const float* rstd, int N, int C, std::vector<float>* partial) {
    const DF d;
    const int NL = (int)hn::Lanes(d);
    const int chunks = colsum_chunks(N);
    float* part = colsum_partial(*partial, N, 2 * C);  // per chunk: dw (C), then db (C)
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < chunks; ch++) {
        float* pw = part + (size_t)ch * 2 * C;
        float* pb = pw + C;
        std::fill(pw, pw + 2 * C, 0.0f);
        for (int n = ch * COLSUM_ROWS; n < std::min(N, (ch + 1) * COLSUM_ROWS); n++) {
            const float* dy = dout + (size_t)n * C;
            const float* x = inp + (size_t)n * C;
            VF vm = hn::Set(d, mean[n]), vrs = hn::Set(d, rstd[n]);
            VF sd = hn::Zero(d), sdn = hn::Zero(d);
            for (int i = 0; i < C; i += NL) {
                int k = std::min(NL, C - i);
                VF norm = hn::IfThenElseZero(hn::FirstN(d, k), hn::Mul(hn::Sub(load_n(x + i, k), vm), vrs));
                VF dyv = load_n(dy + i, k);
                VF dnorm = hn::Mul(load_n(w + i, k), dyv);
                sd = hn::Add(sd, dnorm);
                sdn = hn::MulAdd(dnorm, norm, sdn);
                store_x_n(pw + i, hn::MulAdd(norm, dyv, load_n(pw + i, k)), k);
                store_x_n(pb + i, hn::Add(load_n(pb + i, k), dyv), k);
            }
            VF dnorm_mean = hn::Set(d, sum_lanes(sd) / C), dnorm_norm_mean = hn::Set(d, sum_lanes(sdn) / C);
            float* dx = dinp + (size_t)n * C;
            for (int i = 0; i < C; i += NL) {
                int k = std::min(NL, C - i);
                VF norm = hn::Mul(hn::Sub(load_n(x + i, k), vm), vrs);
                VF dnorm = hn::Mul(load_n(w + i, k), load_n(dy + i, k));
                VF g = hn::Sub(hn::Sub(dnorm, dnorm_mean), hn::Mul(norm, dnorm_norm_mean));
                store_x_n(dx + i, hn::MulAdd(vrs, g, load_n(dx + i, k)), k);
            }
        }
    }
    std::vector<float> sums(2 * (size_t)C, 0.0f);
    colsum_finish(sums.data(), part, chunks, 2 * C);
    for (int i = 0; i < C; i++) dw[i] += sums[i], db[i] += sums[C + i];
}

// ------------------------------------------------------------------------------------------------
// GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)

HWY_INLINE VF gelu_tanh(VF x) {
    const DF d;
    VF x3 = hn::Mul(hn::Mul(x, x), x);
    VF u = hn::Mul(hn::Set(d, ref::gelu_scale<float>()), hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
    return hn::Tanh(d, u);
}

template <class X> HWY_INLINE void gelu_forward(X* out, const float* inp, size_t N) {
    const DF d;
    const size_t NL = hn::Lanes(d), vectors = (N + NL - 1) / NL;
#pragma omp parallel for schedule(static)
    for (size_t v = 0; v < vectors; v++) {
        size_t i = v * NL, k = std::min(NL, N - i);
        VF x = load_n(inp + i, k);
        VF y = hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.0f), gelu_tanh(x)));
        if (k == NL) store_x(out + i, y);
        else store_x_n(out + i, y, k);
    }
}
void GeluForwardF32(float* out, const float* inp, size_t N) { gelu_forward(out, inp, N); }
void GeluForwardBf16(bf16* out, const float* inp, size_t N) { gelu_forward(out, inp, N); }

// d = gelu'(x) dout = (0.5 (1 + th) + 0.5 x (1 - th^2) du/dx) dout, written in X; dbias += its fp32 column sums
template <class X>
HWY_INLINE void gelu_backward(X* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                              std::vector<float>* partial) {
    const DF d;
    const int NL = (int)hn::Lanes(d);
    const int chunks = colsum_chunks(N);
    float* part = colsum_partial(*partial, N, OC);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < chunks; c++) {
        float* ps = part + (size_t)c * OC;
        std::fill(ps, ps + OC, 0.0f);
        const VF half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
        for (int n = c * COLSUM_ROWS; n < std::min(N, (c + 1) * COLSUM_ROWS); n++) {
            for (int o = 0; o < OC; o += NL) {
                int k = std::min(NL, OC - o);
                size_t at = (size_t)n * OC + o;
                VF x = load_n(inp + at, k);
                VF th = gelu_tanh(x);
                VF sech2 = hn::NegMulAdd(th, th, one);
                VF du = hn::Mul(hn::Set(d, ref::gelu_scale<float>()),
                                hn::MulAdd(hn::Set(d, 3 * 0.044715f), hn::Mul(x, x), one));
                VF grad = hn::MulAdd(hn::Mul(half, x), hn::Mul(sech2, du), hn::Mul(half, hn::Add(one, th)));
                VF g = hn::Mul(grad, load_n(dout + at, k));
                store_x_n(ps + o, hn::Add(load_n(ps + o, k), g), k);
                if (k == NL) store_x(dinp + at, g);
                else store_x_n(dinp + at, g, k);
            }
        }
    }
    colsum_finish(dbias, part, chunks, OC);
}
void GeluBackwardF32(float* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                     std::vector<float>* partial) {
    gelu_backward(dinp, dbias, inp, dout, N, OC, partial);
}
void GeluBackwardBf16(bf16* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                      std::vector<float>* partial) {
    gelu_backward(dinp, dbias, inp, dout, N, OC, partial);
}

// ------------------------------------------------------------------------------------------------
// a matmul's output gradient: the bf16 copy (dout_x, or none) and the column sums (dbias, or none)

void MatmulDout(bf16* dout_x, float* dbias, const float* dout, int N, int OC, std::vector<float>* partial) {
    const DF d;
    const int NL = (int)hn::Lanes(d);
    const int chunks = colsum_chunks(N);
    float* part = dbias ? colsum_partial(*partial, N, OC) : nullptr;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < chunks; c++) {
        int n1 = std::min(N, (c + 1) * COLSUM_ROWS);
        for (int o = 0; o < OC; o += NL) {  // the chunk's rows stay in cache across its column blocks
            int k = std::min(NL, OC - o);
            VF sum = hn::Zero(d);
            for (int n = c * COLSUM_ROWS; n < n1; n++) {
                VF x = load_n(dout + (size_t)n * OC + o, k);
                sum = hn::Add(sum, x);
                if (dout_x) {
                    if (k == NL) store_x(dout_x + (size_t)n * OC + o, x);
                    else store_x_n(dout_x + (size_t)n * OC + o, x, k);
                }
            }
            if (part) store_x_n(part + (size_t)c * OC + o, sum, k);
        }
    }
    if (dbias) colsum_finish(dbias, part, chunks, OC);
}

// ------------------------------------------------------------------------------------------------
// RoPE: y = x cos + swap(x) sin on the interleaved pairs, swap exchanging each pair's elements; the
// table's sines carry the sign of the pair's first element (-s, +s)

void RopeRotate(float* out, const float* inp, int B, int T, int NH, int hd, const float* table, float sign) {
    const DF d;
    const int NL = (int)hn::Lanes(d), C = NH * hd;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * 3 * C;
        float* y = out + (size_t)bt * 3 * C;
        const float* cs = table + (size_t)(bt % T) * 2 * hd;
        const VF vsign = hn::Set(d, sign);
        for (int h = 0; h < 2 * NH; h++) {  // q, then k
            const float* xh = x + h * hd;
            float* yh = y + h * hd;
            for (int i = 0; i < hd; i += NL) {
                int k = std::min(NL, hd - i);
                VF xv = load_n(xh + i, k);
                VF sw = hn::Reverse2(d, xv);
                VF s = hn::Mul(vsign, load_n(cs + hd + i, k));
                store_x_n(yh + i, hn::MulAdd(sw, s, hn::Mul(xv, load_n(cs + i, k))), k);
            }
        }
        if (y != x) std::copy(x + 2 * C, x + 3 * C, y + 2 * C);
    }
}

// ------------------------------------------------------------------------------------------------
// fused classifier: loss = log(sum exp(x - max)) + max - x[target]; dlogits = softmax - onehot

template <class X>
HWY_INLINE void classifier_row(float* loss, X* dl, const float* x, float* e, int target, int V, int Vp) {
    const DF d;
    const int NL = (int)hn::Lanes(d);
    VF vmax = hn::Set(d, -HUGE_VALF);
    for (int j = 0; j < V; j += NL) {
        int k = std::min(NL, V - j);
        vmax = hn::Max(vmax, hn::IfThenElse(hn::FirstN(d, k), load_n(x + j, k), hn::Set(d, -HUGE_VALF)));
    }
    const float xmax = max_lanes(vmax);
    const VF vxmax = hn::Set(d, xmax);
    VF vsum = hn::Zero(d);
    for (int j = 0; j < V; j += NL) {
        int k = std::min(NL, V - j);
        VF ex = hn::IfThenElseZero(hn::FirstN(d, k), hn::Exp(d, hn::Sub(load_n(x + j, k), vxmax)));
        store_x_n(e + j, ex, k);
        vsum = hn::Add(vsum, ex);
    }
    const float sum = sum_lanes(vsum);
    *loss = std::log(sum) + xmax - x[target];
    if (!dl) return;
    const VF inv = hn::Set(d, 1.0f / sum);
    for (int j = 0; j < V; j += NL) {
        int k = std::min(NL, V - j);
        VF p = hn::Mul(load_n(e + j, k), inv);
        if (k == NL) store_x(dl + j, p);
        else store_x_n(dl + j, p, k);
    }
    for (int j = V; j < Vp; j++) dl[j] = 0;
    float dt = e[target] / sum - 1.0f;
    if constexpr (sizeof(X) == 2) dl[target] = round_bf16(dt);
    else dl[target] = dt;
}
template <class X>
HWY_INLINE void classifier(float* losses, X* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                           std::vector<float>* scratch) {
    scratch->resize((size_t)omp_get_max_threads() * Vp);
    float* s = scratch->data();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float* e = s + (size_t)omp_get_thread_num() * Vp;
        classifier_row(losses + n, dlogits ? dlogits + (size_t)n * Vp : (X*)nullptr, logits + (size_t)n * Vp, e,
                       targets[n], V, Vp);
    }
}
void ClassifierF32(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                   std::vector<float>* scratch) {
    classifier(losses, dlogits, logits, targets, N, V, Vp, scratch);
}
void ClassifierBf16(float* losses, bf16* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                    std::vector<float>* scratch) {
    classifier(losses, dlogits, logits, targets, N, V, Vp, scratch);
}

// ------------------------------------------------------------------------------------------------
// AdamW: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2, p -= lr (mhat / (sqrt(vhat) + eps) + wd p)

void Adamw(float* params, bf16* params_bf, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const DF d;
    const size_t NL = hn::Lanes(d), vectors = (n + NL - 1) / NL;
    const float bc1 = 1.0f - std::pow(beta1, (float)t), bc2 = 1.0f - std::pow(beta2, (float)t);
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < vectors; q++) {
        const VF b1 = hn::Set(d, beta1), b2 = hn::Set(d, beta2), one_b1 = hn::Set(d, 1.0f - beta1),
                 one_b2 = hn::Set(d, 1.0f - beta2), vbc1 = hn::Set(d, bc1), vbc2 = hn::Set(d, bc2),
                 veps = hn::Set(d, eps), vlr = hn::Set(d, lr), vwd = hn::Set(d, weight_decay),
                 vscale = hn::Set(d, grad_scale);
        size_t i = q * NL, k = std::min(NL, n - i);
        VF g = hn::Mul(load_n(grads + i, k), vscale);
        VF mi = hn::Add(hn::Mul(b1, load_n(m + i, k)), hn::Mul(one_b1, g));
        VF vi = hn::Add(hn::Mul(b2, load_n(v + i, k)), hn::Mul(hn::Mul(one_b2, g), g));
        VF mhat = hn::Div(mi, vbc1), vhat = hn::Div(vi, vbc2);
        VF p = load_n(params + i, k);
        VF step = hn::Add(hn::Div(mhat, hn::Add(hn::Sqrt(vhat), veps)), hn::Mul(vwd, p));
        p = hn::Sub(p, hn::Mul(vlr, step));
        store_x_n(m + i, mi, k);
        store_x_n(v + i, vi, k);
        store_x_n(params + i, p, k);
        if (params_bf) store_x_n(params_bf + i, p, k);
    }
}

// in fixed chunks added in chunk order
double SumSquares(const float* x, size_t n) {
    const DF d;
    const hn::Repartition<double, DF> dd;
    const hn::Half<DF> dh;
    const size_t NL = hn::Lanes(d), chunk = 1 << 16, chunks = (n + chunk - 1) / chunk;
    std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * chunk, end = std::min(n, i + chunk);
        auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
        for (; i + NL <= end; i += NL) {
            VF f = hn::LoadU(d, x + i);
            auto lo = hn::PromoteTo(dd, hn::LowerHalf(dh, f)), hi = hn::PromoteTo(dd, hn::UpperHalf(dh, f));
            s0 = hn::MulAdd(lo, lo, s0);
            s1 = hn::MulAdd(hi, hi, s1);
        }
        double s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
        for (; i < end; i++) s += (double)x[i] * x[i];
        partial[c] = s;
    }
    double sum = 0;
    for (double s : partial) sum += s;
    return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace fastcpu
HWY_AFTER_NAMESPACE();

// ------------------------------------------------------------------------------------------------
// the entry points of layers/fast_cpu.h: dispatched to the best target (layers/fast_cpu.cpp)
#if HWY_ONCE
namespace fastcpu {
HWY_EXPORT(RoundBf16);
HWY_EXPORT(WidenBf16);
HWY_EXPORT(LayernormForwardF32);
HWY_EXPORT(LayernormForwardBf16);
HWY_EXPORT(LayernormBackward);
HWY_EXPORT(GeluForwardF32);
HWY_EXPORT(GeluForwardBf16);
HWY_EXPORT(GeluBackwardF32);
HWY_EXPORT(GeluBackwardBf16);
HWY_EXPORT(MatmulDout);
HWY_EXPORT(RopeRotate);
HWY_EXPORT(ClassifierF32);
HWY_EXPORT(ClassifierBf16);
HWY_EXPORT(Adamw);
HWY_EXPORT(SumSquares);
}  // namespace fastcpu

using namespace fastcpu;

void fast_round_bf16(bf16* out, const float* in, size_t n) { HWY_DYNAMIC_DISPATCH(RoundBf16)(out, in, n); }
void fast_widen_bf16(float* out, const bf16* in, size_t n) { HWY_DYNAMIC_DISPATCH(WidenBf16)(out, in, n); }
void fast_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                            int N, int C) {
    HWY_DYNAMIC_DISPATCH(LayernormForwardF32)(out, mean, rstd, inp, w, b, N, C);
}
void fast_layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                            int N, int C) {
    HWY_DYNAMIC_DISPATCH(LayernormForwardBf16)(out, mean, rstd, inp, w, b, N, C);
}
void fast_layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                             const float* mean, const float* rstd, int N, int C, std::vector<float>& partial) {
    HWY_DYNAMIC_DISPATCH(LayernormBackward)(dinp, dw, db, dout, inp, w, mean, rstd, N, C, &partial);
}
void fast_gelu_forward(float* out, const float* inp, size_t N) { HWY_DYNAMIC_DISPATCH(GeluForwardF32)(out, inp, N); }
void fast_gelu_forward(bf16* out, const float* inp, size_t N) { HWY_DYNAMIC_DISPATCH(GeluForwardBf16)(out, inp, N); }
void fast_gelu_backward(float* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                        std::vector<float>& partial) {
    HWY_DYNAMIC_DISPATCH(GeluBackwardF32)(dinp, dbias, inp, dout, N, OC, &partial);
}
void fast_gelu_backward(bf16* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                        std::vector<float>& partial) {
    HWY_DYNAMIC_DISPATCH(GeluBackwardBf16)(dinp, dbias, inp, dout, N, OC, &partial);
}
void fast_matmul_dout(bf16* dout_x, float* dbias, const float* dout, int N, int OC, std::vector<float>& partial) {
    HWY_DYNAMIC_DISPATCH(MatmulDout)(dout_x, dbias, dout, N, OC, &partial);
}
void fast_colsums(float* dbias, const float* dout, int N, int OC, std::vector<float>& partial) {
    HWY_DYNAMIC_DISPATCH(MatmulDout)(nullptr, dbias, dout, N, OC, &partial);
}
void fast_rope_rotate(float* out, const float* inp, int B, int T, int NH, int hd, const float* cs, float sign) {
    HWY_DYNAMIC_DISPATCH(RopeRotate)(out, inp, B, T, NH, hd, cs, sign);
}
void fast_classifier(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                     std::vector<float>& scratch) {
    HWY_DYNAMIC_DISPATCH(ClassifierF32)(losses, dlogits, logits, targets, N, V, Vp, &scratch);
}
void fast_classifier(float* losses, bf16* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                     std::vector<float>& scratch) {
    HWY_DYNAMIC_DISPATCH(ClassifierBf16)(losses, dlogits, logits, targets, N, V, Vp, &scratch);
}
void fast_adamw(float* params, bf16* params_bf, const float* grads, float* m, float* v, size_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    HWY_DYNAMIC_DISPATCH(Adamw)(params, params_bf, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}
double fast_sum_squares(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(SumSquares)(x, n); }
#endif  // HWY_ONCE
