// The fast CPU path's attention, per Highway target (attention/attention_fast_cpu.h: the interface;
// attention/attention_fast_cpu.cpp compiles this once for every target and dispatches). The
// algorithm (doc/attention.md, section 'Attention on the CPU fast path'), written once for every vector width: a block of R query rows
// of one head takes its scores against every key it sees at once, then each row's statistics (the
// reference's passes: max, S1, m, Z; S1 and Z summed in double), then its weights, then the
// products with V. The backward recomputes a block's weights with the forward's own code (the same
// bits), then ds row by row, and accumulates dK and dV per head (heads in parallel: every sum has
// one order for any number of threads).
//
// Keys are padded to Tp (a multiple of 32) and channels to hdp (a multiple of 16), multiples of
// every target's lanes (4, 8, 16 floats), so that the products run over whole vectors.
//
// Numerics (a template parameter NM of the block code):
//   NUM_FP32      every product in fp32 FMAs;
//   NUM_BF16      the operands of W V, ds K, ds^T Q and W^T dy rounded to bf16 (nearest even) and
//                 kept as floats: the products of two bf16 are exact in fp32, so the fp32 FMAs of
//                 the fp32 numerics compute them exactly (any CPU);
//   NUM_BF16_DOT  the same roundings, the products on bf16 pairs with AVX512-BF16's vdpbf16ps
//                 (the AVX3 target on a CPU that has it: two products per lane and instruction).
// Scores, dW = dy v^T, the row statistics, the re-weighting and dL/dp are fp32 in every numerics.
//
// A row's score scale (ssmax's s_h ln(n_t) / sqrt(hd), log-length scaling's factor) is the
// reference's attn_score_scale in fp32: within the training length log-length scaling leaves the
// scale softmax's, so those rows are softmax's bit for bit.

// ----------------------------------------------------------------------------
// What every target shares (compiled once)
#ifndef ATTENTION_FAST_CPU_SHARED_H_
#define ATTENTION_FAST_CPU_SHARED_H_

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "attention/attention_cpu.h"
#include "attention/attention_fast_cpu.h"

namespace attn_fast {

constexpr int ROWS = 8;           // R: query rows per block
constexpr int PREFETCH_ROWS = 8;  // how far ahead the row loops fetch a head's rows of qkv, dout, dqkv

enum NumMode { NUM_FP32 = 0, NUM_BF16 = 1, NUM_BF16_DOT = 2 };

template <class T> struct Align64Alloc {  // vectors of 64-byte aligned storage
    typedef T value_type;
    Align64Alloc() = default;
    template <class U> Align64Alloc(const Align64Alloc<U>&) {}
    T* allocate(size_t n) { return (T*)::operator new(n * sizeof(T), std::align_val_t(64)); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    template <class U> bool operator==(const Align64Alloc<U>&) const { return true; }
    template <class U> bool operator!=(const Align64Alloc<U>&) const { return false; }
};
typedef std::vector<float, Align64Alloc<float>> Buf;
typedef std::vector<uint32_t, Align64Alloc<uint32_t>> Words;  // pairs of bf16, the first in the low half
template <class V> inline typename V::value_type* sized(V& v, size_t n) {  // grows, never shrinks
    if (v.size() < n) v.resize(n);
    return v.data();
}

struct HeadShape {
    int T, NH, hd;
    int Tp;        // rows (keys) padded: padded_keys(T)
    int hdp;       // channels padded to a multiple of 16
    int attn_len;  // sigmoid's bias and relu's scale: 0 for n_t, L for the constant; softmax and
                   // softmax_rw: L > 1 scales by max(1, ln(n_t) / ln(L)) (attention/attention_cpu.h)
    HeadShape(int T_, int NH_, int hd_, int attn_len_ = 0)
        : T(T_), NH(NH_), hd(hd_), Tp(padded_keys(T_)), hdp((hd_ + 15) / 16 * 16), attn_len(attn_len_) {}
    // T rounded up to a multiple of 32, plus 32 where that is a multiple of 256. Tp is also the row
    // stride of keT and of a block's scores and weights: a stride of a multiple of 1 KiB would put
    // the rows that one tile of the products reads in a few of L1's 64 sets (at T 2048, all 64 rows
    // of keT in one 8-way set), and every load would miss L1.
    static int padded_keys(int T) {
        const int t = (T + 31) / 32 * 32;
        return t % 256 == 0 ? t + 32 : t;
    }
    size_t rows() const { return (size_t)Tp * hdp; }  // a (Tp, hdp) operand; also (hdp, Tp) transposed
};

// r^p for r in (0, 1]: repeated squaring for integer p in [0, ATTN_P_INT_MAX] (as the reference's
// pow_p), exp(p ln r) otherwise
struct Power {
    double p;
    bool integer;
    explicit Power(double p_) : p(p_), integer(p_ == std::floor(p_) && p_ >= 0 && p_ <= ATTN_P_INT_MAX) {}
};

struct Row {
    float S1 = 1, inv_S1 = 1;  // l1: the row sum of phi, and its reciprocal for the backward
    float m = 0;               // re-weighting: the largest x
    float Z = 0;               // re-weighting: sum of u = (x/m)^p
    bool live = true;          // false: a degenerate row (W = 0, no output, no gradient)
};

// One thread's scratch, kept between calls: a row block's scores (or phi'), phi, weights and
// gradients (R, Tp), their bf16 forms, and in the backward one head's operands.
struct Scratch {
    Buf s, a, w, g, y;           // (R, Tp) x 4, (R, hdp)
    Buf wb, gb, qb, dyb;         // NUM_BF16: w and g rounded (R, Tp), the block's qe and dy rows (R, hdp)
    Words w_keys, g_keys;        // NUM_BF16_DOT: (R, Tp/2) pairs along the keys of w and g
    Words w_rows, g_rows;        //   (R/2, Tp): pairs along the rows of w and g
    Words q_rows, dy_rows;       //   (R/2, hdp): pairs along the rows of the block's qe and dy
    Buf qe, ke, keT, vT, dy, dqe, dke, dv, keb;  // a head's (Tp, hdp) operands (keT, vT: (hdp, Tp)); keb: ke rounded
    Words ke_keys;                               // NUM_BF16_DOT: (Tp/2, hdp) ke in pairs along the keys
    std::vector<float> qn, kn;                   // (T)
    void size_block(const HeadShape& sh) {
        size_t n = (size_t)ROWS * sh.Tp, nh = (size_t)ROWS * sh.hdp;
        for (Buf* b : {&s, &a, &w, &g, &wb, &gb}) sized(*b, n);
        for (Buf* b : {&y, &qb, &dyb}) sized(*b, nh);
        for (Words* b : {&w_keys, &g_keys, &w_rows, &g_rows}) sized(*b, n / 2);
        sized(q_rows, nh / 2), sized(dy_rows, nh / 2);
    }
    void size_head(const HeadShape& sh) {
        size_t n = sh.rows();
        for (Buf* b : {&qe, &ke, &keT, &vT, &dy, &dqe, &dke, &dv, &keb}) sized(*b, n);
        sized(ke_keys, n / 2);
        sized(qn, (size_t)sh.T), sized(kn, (size_t)sh.T);
    }
};

}  // namespace attn_fast

// What the layer keeps between calls: the forward's operands of every head, each thread's scratch.
struct AttentionFast::Impl {
    attn_fast::Buf qe, keT, v;  // (B NH) heads of (Tp, hdp), (hdp, Tp) and (Tp, hdp) (NUM_BF16_DOT: v as
                                // (Tp/2, hdp) words of pairs along the keys, in v's storage)
    std::vector<attn_fast::Scratch> threads;
    attn_fast::Scratch& mine() { return threads[omp_get_thread_num()]; }
    void size_threads() {
        if (threads.size() < (size_t)omp_get_max_threads()) threads.resize(omp_get_max_threads());
    }
};

#endif  // ATTENTION_FAST_CPU_SHARED_H_

// ----------------------------------------------------------------------------
// Per target
#if defined(ATTENTION_FAST_CPU_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTENTION_FAST_CPU_INL_H_
#undef ATTENTION_FAST_CPU_INL_H_
#else
#define ATTENTION_FAST_CPU_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attn_fast {
namespace HWY_NAMESPACE {
namespace attn_fast_impl {

namespace hn = hwy::HWY_NAMESPACE;

typedef hn::ScalableTag<float> DF;
typedef hn::Vec<DF> VF;
typedef hn::RebindToSigned<DF> DI;
typedef hn::RebindToUnsigned<DF> DU;
typedef hn::Rebind<double, hn::Half<DF>> DD;  // half as many lanes of double
typedef hn::Vec<DD> VD;

// rows of the register tiles of the products: AVX-512 and NEON have 32 vector registers, AVX2,
// SSE4 and SSSE3 16
#if HWY_TARGET == HWY_AVX3 || HWY_ARCH_ARM
constexpr int TILE_ROWS = 8;
#else
constexpr int TILE_ROWS = 4;
#endif

// ----------------------------------------------------------------------------
// vector functions

HWY_INLINE hn::Mask<DF> lanes(DF d, int j, int n) { return hn::FirstN(d, (size_t)std::max(n - j, 0)); }
HWY_INLINE VF load_z(DF d, hn::Mask<DF> m, const float* p) { return hn::IfThenElseZero(m, hn::LoadU(d, p)); }

// The row functions below evaluate U independent vectors side by side, each step for all U before
// the next. exp's and ln's polynomials are chains of dependent operations (some 40 for softplus);
// written one vector at a time, a row pass waits on their latency, since the out-of-order window
// holds little more than one vector's chain. U chains interleaved in the instruction stream keep
// the FMA units busy. Every vector goes through the same operations whatever U is: the same bits.
#define ATTN_EACH _Pragma("GCC unroll 8") for (int u = 0; u < U; u++)

// vectors per step of the row passes: 32 floats (AVX-512: 2, AVX2: 4, 128-bit targets: 4)
constexpr int ROW_U = std::min(4, std::max(1, 32 / (int)hn::MaxLanes(DF())));

// f(std::integral_constant<int, U>(), j) for the vectors at j of [0, n16): steps of ROW_U vectors,
// then single ones (n16 a multiple of 16 floats, N the lanes)
template <class F>
HWY_INLINE void row_steps(int n16, int N, F&& f) {
    int j = 0;
    for (; j + ROW_U * N <= n16; j += ROW_U * N) f(std::integral_constant<int, ROW_U>(), j);
    for (; j < n16; j += N) f(std::integral_constant<int, 1>(), j);
}

// exp(x): 2^k * p(r) with x = k ln2 + r, |r| <= ln2/2, p a degree-6 polynomial (Cephes' expf
// coefficients): within 2 ulp of std::exp for x in [-87, 88]; below
// -87 it returns 0, above 88 +inf. 2^k (k in [-126, 128]) is applied as two exact factors.
template <int U>
HWY_INLINE void exp_vu(DF d, VF* x) {  // x[u] = exp(x[u])
    const DI di;
    const VF lo = hn::Set(d, -87.3f), hi = hn::Set(d, 88.7f);
    hn::Mask<DF> under[U], over[U];
    VF k[U], r[U], p[U];
    ATTN_EACH {
        under[u] = hn::Lt(x[u], lo), over[u] = hn::Gt(x[u], hi);
        x[u] = hn::Min(hn::Max(x[u], lo), hi);
    }
    ATTN_EACH k[u] = hn::Round(hn::Mul(x[u], hn::Set(d, 1.44269504088896341f)));
    ATTN_EACH r[u] = hn::NegMulAdd(k[u], hn::Set(d, 0.693359375f), x[u]);  // r = x - k ln2 in two parts
    ATTN_EACH r[u] = hn::NegMulAdd(k[u], hn::Set(d, -2.12194440e-4f), r[u]);
    ATTN_EACH p[u] = hn::MulAdd(hn::Set(d, 1.9875691500e-4f), r[u], hn::Set(d, 1.3981999507e-3f));
    ATTN_EACH p[u] = hn::MulAdd(p[u], r[u], hn::Set(d, 8.3334519073e-3f));
    ATTN_EACH p[u] = hn::MulAdd(p[u], r[u], hn::Set(d, 4.1665795894e-2f));
    ATTN_EACH p[u] = hn::MulAdd(p[u], r[u], hn::Set(d, 1.6666665459e-1f));
    ATTN_EACH p[u] = hn::MulAdd(p[u], r[u], hn::Set(d, 5.0000001201e-1f));
    ATTN_EACH p[u] = hn::MulAdd(p[u], hn::Mul(r[u], r[u]), hn::Add(r[u], hn::Set(d, 1.0f)));
    ATTN_EACH {
        const auto ki = hn::ConvertTo(di, k[u]);
        const auto k1 = hn::ShiftRight<1>(ki), k2 = hn::Sub(ki, k1);
        const VF f1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k1, hn::Set(di, 127))));
        const VF f2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k2, hn::Set(di, 127))));
        x[u] = hn::Mul(hn::Mul(p[u], f1), f2);
    }
    ATTN_EACH x[u] = hn::IfThenElse(over[u], hn::Set(d, HUGE_VALF), hn::IfThenZeroElse(under[u], x[u]));
}
HWY_INLINE VF exp_v(DF d, VF x) {
    exp_vu<1>(d, &x);
    return x;
}

// ln(x) for x > 0 (subnormals included): x = 2^e m with m in (sqrt(1/2), sqrt(2)], then Cephes'
// logf polynomial in f = m - 1 and ln 2 in two parts: within 2 ulp of std::log.
template <int U>
HWY_INLINE void log_vu(DF d, VF* x) {  // x[u] = ln(x[u])
    const DI di;
    VF e[U], f[U], y[U];
    ATTN_EACH {
        const auto sub = hn::Lt(x[u], hn::Set(d, 1.17549435e-38f));  // subnormal: scaled by 2^23 first
        const VF xs = hn::IfThenElse(sub, hn::Mul(x[u], hn::Set(d, 8388608.0f)), x[u]);
        const auto bits = hn::BitCast(di, xs);
        e[u] = hn::ConvertTo(d, hn::Sub(hn::ShiftRight<23>(bits), hn::Set(di, 127)));
        e[u] = hn::Sub(e[u], hn::IfThenElseZero(sub, hn::Set(d, 23.0f)));
        f[u] = hn::BitCast(d, hn::Or(hn::And(bits, hn::Set(di, 0x007fffff)), hn::Set(di, 0x3f800000)));  // [1, 2)
    }
    ATTN_EACH {
        const auto big = hn::Gt(f[u], hn::Set(d, 1.41421356f));
        f[u] = hn::Sub(hn::IfThenElse(big, hn::Mul(f[u], hn::Set(d, 0.5f)), f[u]), hn::Set(d, 1.0f));
        e[u] = hn::IfThenElse(big, hn::Add(e[u], hn::Set(d, 1.0f)), e[u]);
    }
    ATTN_EACH y[u] = hn::MulAdd(hn::Set(d, 7.0376836292e-2f), f[u], hn::Set(d, -1.1514610310e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, 1.1676998740e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, -1.2420140846e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, 1.4249322787e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, -1.6668057665e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, 2.0000714765e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, -2.4999993993e-1f));
    ATTN_EACH y[u] = hn::MulAdd(y[u], f[u], hn::Set(d, 3.3333331174e-1f));
    ATTN_EACH {
        const VF z = hn::Mul(f[u], f[u]);
        VF t = hn::Mul(hn::Mul(y[u], f[u]), z);
        t = hn::MulAdd(e[u], hn::Set(d, -2.12194440e-4f), t);
        t = hn::NegMulAdd(z, hn::Set(d, 0.5f), t);
        x[u] = hn::MulAdd(e[u], hn::Set(d, 0.693359375f), hn::Add(f[u], t));
    }
}
HWY_INLINE VF log_v(DF d, VF x) {
    log_vu<1>(d, &x);
    return x;
}

// ln(1 + e) for e >= 0 without losing e's low bits: u = 1 + e rounds, c = e - (u - 1) is what the
// rounding dropped (u - 1 is exact), and ln(1 + e) = ln(u) + c / u to first order in c
template <int U>
HWY_INLINE void log1p_vu(DF d, VF* e) {  // e[u] = ln(1 + e[u])
    const VF one = hn::Set(d, 1.0f);
    VF v[U], c[U];
    ATTN_EACH {
        v[u] = hn::Add(one, e[u]);
        c[u] = hn::Div(hn::Sub(e[u], hn::Sub(v[u], one)), v[u]);
    }
    log_vu<U>(d, v);
    ATTN_EACH e[u] = hn::Add(v[u], c[u]);
}
HWY_INLINE VF log1p_v(DF d, VF e) {
    log1p_vu<1>(d, &e);
    return e;
}

// x^n by repeated squaring, the reference's pow_int (the same multiplications in the same order)
template <int U>
HWY_INLINE void powi_vu(DF d, VF* x, int n) {  // x[u] = x[u]^n
    VF r[U];
    ATTN_EACH r[u] = hn::Set(d, 1.0f);
    while (n > 0) {
        if (n & 1) ATTN_EACH r[u] = hn::Mul(r[u], x[u]);
        ATTN_EACH x[u] = hn::Mul(x[u], x[u]);
        n >>= 1;
    }
    ATTN_EACH x[u] = r[u];
}
template <int U>
HWY_INLINE void pow_vu(DF d, VF* r, const Power& pw) {  // r[u] = r[u]^p
    if (pw.integer) return powi_vu<U>(d, r, (int)pw.p);
    log_vu<U>(d, r);
    ATTN_EACH r[u] = hn::Mul(hn::Set(d, (float)pw.p), r[u]);
    exp_vu<U>(d, r);
}
HWY_INLINE VF pow_v(DF d, VF r, const Power& pw) {
    pow_vu<1>(d, &r, pw);
    return r;
}

HWY_INLINE VD sum_d(VD acc, VF x) {  // acc + the lanes of x, in double
    const hn::Half<DF> dh;
    const DD dd;
    acc = hn::Add(acc, hn::PromoteTo(dd, hn::LowerHalf(dh, x)));
    return hn::Add(acc, hn::PromoteTo(dd, hn::UpperHalf(dh, x)));
}
HWY_INLINE double reduce_d(VD acc) { return hn::GetLane(hn::SumOfLanes(DD(), acc)); }
HWY_INLINE float reduce_add(VF v) { return hn::GetLane(hn::SumOfLanes(DF(), v)); }
HWY_INLINE float reduce_max(VF v) { return hn::GetLane(hn::MaxOfLanes(DF(), v)); }
HWY_INLINE float reduce_min(VF v) { return hn::GetLane(hn::MinOfLanes(DF(), v)); }

// bf16(x) as a float (round to nearest even, what vcvtneps2bf16 does); NaN stays NaN
HWY_INLINE VF round_bf16(DF d, VF x) {
    const DU du;
    const auto b = hn::BitCast(du, x);
    auto r = hn::Add(hn::Add(b, hn::Set(du, 0x7fffu)), hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u)));
    r = hn::And(r, hn::Set(du, 0xffff0000u));
    return hn::IfThenElse(hn::IsNaN(x), x, hn::BitCast(d, r));
}

// n <= Lanes floats from / to memory that may end right after them (rows of qkv, out, dqkv): whole
// vectors where they fit, through a stack copy otherwise (no access past p + n, no write to a
// neighbour's floats that another thread owns)
HWY_INLINE VF load_n(DF d, const float* p, int n) {
    const int N = (int)hn::Lanes(d);
    if (n >= N) return hn::LoadU(d, p);
    HWY_ALIGN float buf[hn::MaxLanes(DF())] = {};
    for (int i = 0; i < n; i++) buf[i] = p[i];
    return hn::Load(d, buf);
}
HWY_INLINE void store_n(DF d, VF v, float* p, int n) {
    const int N = (int)hn::Lanes(d);
    if (n >= N) return hn::StoreU(v, d, p);
    HWY_ALIGN float buf[hn::MaxLanes(DF())];
    hn::Store(v, d, buf);
    for (int i = 0; i < n; i++) p[i] = buf[i];
}

// phi(s) of a variant and, for the backward, its derivative phi'(s) (exp: not needed, phi' = phi);
// softplus and sigmoid from one e = exp(-|s|): softplus = max(s, 0) + ln(1 + e),
// sigmoid = (s >= 0 ? 1 : e) / (1 + e), sigmoid' = e / (1 + e)^2 (doc/attention.md, 'Softplus')
template <AttnPhi F, int U>
HWY_INLINE void phi_vu(DF d, VF* s, VF* dphi) {  // s[u] = phi(s[u]); dphi (or null): phi'(s[u])
    const VF zero = hn::Zero(d), one = hn::Set(d, 1.0f);
    if constexpr (F == ATTN_PHI_EXP) {
        exp_vu<U>(d, s);
    } else if constexpr (F == ATTN_PHI_RELU) {
        ATTN_EACH {
            if (dphi) dphi[u] = hn::IfThenElseZero(hn::Gt(s[u], zero), one);
            s[u] = hn::Max(s[u], zero);
        }
    } else {
        VF e[U];
        ATTN_EACH e[u] = hn::Sub(zero, hn::Abs(s[u]));
        exp_vu<U>(d, e);
        if (dphi) {
            ATTN_EACH {
                const VF ope = hn::Add(one, e[u]);
                if constexpr (F == ATTN_PHI_SOFTPLUS) dphi[u] = hn::Div(hn::IfThenElse(hn::Ge(s[u], zero), one, e[u]), ope);
                else dphi[u] = hn::Div(e[u], hn::Mul(ope, ope));
            }
        }
        if constexpr (F == ATTN_PHI_SOFTPLUS) {
            log1p_vu<U>(d, e);
            ATTN_EACH s[u] = hn::Add(hn::Max(s[u], zero), e[u]);
        } else {
            ATTN_EACH s[u] = hn::Div(hn::IfThenElse(hn::Ge(s[u], zero), one, e[u]), hn::Add(one, e[u]));
        }
    }
}

// ----------------------------------------------------------------------------
// One row t of a row block. Its n = t + 1 visible keys are j < n; the block's products run over
// nkp >= n keys (a multiple of 16), so every row leaves its weights and gradients zero on [n, nkp).

// A = the normalised phi: a / S1 (l1), a (none), a / n (mean; n = attn_len_n), divided as the
// reference divides (a row's only key gets exactly 1, tied keys exactly equal shares)
template <AttnNorm Nm>
HWY_INLINE VF normed_v(VF a, VF S1, VF vn) {
    if constexpr (Nm == ATTN_NORM_L1) return hn::Div(a, S1);
    else if constexpr (Nm == ATTN_NORM_MEAN) return hn::Div(a, vn);
    else return a;
}
// the re-weighting's x = n A - o: one function for every x and for m, so that m is bitwise the
// largest computed x (doc/attention.md, 'Stable evaluation of the re-weighting')
template <AttnNorm Nm>
HWY_INLINE VF x_v(VF a, VF S1, VF vn, VF vo, VF vn_norm) {
    return hn::MulSub(vn, normed_v<Nm>(a, S1, vn_norm), vo);
}

// Weights of row t from its raw dot products, as attn_row_weights of the reference.
// s: in, the dots qe_t . ke_j; out, the scores s_tj (exp variants; ssmax keeps the dots, which its
// dL/ds takes) or, with dphi, phi'(s_tj).
// a: out, phi(s_tj) (exp: shifted by the row's largest score). w: out, the final weights.
// stats: the reference's three saved values. pw: the head parameter (re-weighting's power; ssmax's
// s is pw.p). Returns false for a degenerate row.
template <AttnKind K>
HWY_NOINLINE bool row_forward(float* s, float* a, float* w, float stats[3], Row& row, int t, int nkp, int hd,
                              const Power& pw, int attn_len, bool dphi) {
    using Tr = AttnTraits<K>;
    static_assert(Tr::phi != ATTN_PHI_EXP || Tr::norm == ATTN_NORM_L1, "exp needs l1 (the max shift cancels)");
    const DF d;
    const int N = (int)hn::Lanes(d);
    const int n = t + 1, n16 = (n + 15) / 16 * 16;
    const VF scale = hn::Set(d, ref::attn_score_scale<K, float>(t, hd, attn_len, pw.p)),
             bias = hn::Set(d, ref::attn_score_bias<K, float>(t, attn_len));
    VD S1_acc = hn::Zero(DD());
    VF amax = hn::Set(d, -HUGE_VALF), amin = hn::Set(d, HUGE_VALF);
    float smax = 0;
    if constexpr (Tr::phi == ATTN_PHI_EXP) {  // the shift first: the largest score
        VF vmax = hn::Set(d, -HUGE_VALF);
        for (int j = 0; j < n16; j += N) {
            const auto k = lanes(d, j, n);
            const VF sv = hn::MulAdd(scale, load_z(d, k, s + j), bias);
            if constexpr (!Tr::ssmax) hn::StoreU(sv, d, s + j);
            vmax = hn::IfThenElse(k, hn::Max(vmax, sv), vmax);
        }
        smax = reduce_max(vmax);
    }
    row_steps(n16, N, [&](auto steps, int j) {
        constexpr int U = decltype(steps)::value;
        hn::Mask<DF> k[U];
        VF sv[U], dv[U];
        ATTN_EACH {
            k[u] = lanes(d, j + u * N, n);
            sv[u] = load_z(d, k[u], s + j + u * N);
            if constexpr (Tr::ssmax) sv[u] = hn::Sub(hn::MulAdd(scale, sv[u], bias), hn::Set(d, smax));  // the same score again
            else if constexpr (Tr::phi == ATTN_PHI_EXP) sv[u] = hn::Sub(sv[u], hn::Set(d, smax));
            else sv[u] = hn::MulAdd(scale, sv[u], bias);
        }
        phi_vu<Tr::phi, U>(d, sv, dphi ? dv : nullptr);
        ATTN_EACH {
            if constexpr (Tr::phi != ATTN_PHI_EXP) {
                if (dphi) hn::StoreU(dv[u], d, s + j + u * N);
            }
            const VF av = hn::IfThenElseZero(k[u], sv[u]);
            hn::StoreU(av, d, a + j + u * N);
            S1_acc = sum_d(S1_acc, av);
            amax = hn::IfThenElse(k[u], hn::Max(amax, av), amax);
            amin = hn::IfThenElse(k[u], hn::Min(amin, av), amin);
        }
    });
    stats[0] = stats[1] = stats[2] = 0;
    row = Row();
    for (int j = n16; j < nkp; j += N) hn::StoreU(hn::Zero(d), d, w + j);
    auto clear = [&] {
        row.live = false;
        for (int j = 0; j < n16; j += N) hn::StoreU(hn::Zero(d), d, w + j);
    };
    const float S1 = (float)reduce_d(S1_acc);
    const float nf = (float)n, o = (float)ref::lssar_bias(t);
    if constexpr (Tr::norm == ATTN_NORM_L1) {
        if (S1 == 0) {  // relu: no key has a positive score
            clear();
            return false;
        }
        row.S1 = S1;
        row.inv_S1 = 1.0f / S1;
        stats[0] = Tr::phi == ATTN_PHI_EXP ? smax + std::log(S1) : S1;
    }
    const VF vS1 = hn::Set(d, row.S1), vn = hn::Set(d, nf), vn_norm = hn::Set(d, (float)attn_len_n(t, attn_len));
    if constexpr (!Tr::reweight) {
        for (int j = 0; j < n16; j += N) hn::StoreU(normed_v<Tr::norm>(hn::LoadU(d, a + j), vS1, vn_norm), d, w + j);
        return true;
    } else {
        // x = n A - o; m: the same operations on the largest a, so that m is the largest computed x
        const VF vo = hn::Set(d, o);
        const float a_max = reduce_max(amax), a_min = reduce_min(amin);
        const float m = hn::GetLane(x_v<Tr::norm>(hn::Set(d, a_max), vS1, vn, vo, vn_norm));
        stats[1] = m;
        const bool uniform = o == 1 && a_min == a_max;
        if (!(m > 0) || uniform) {
            clear();
            return false;  // Z = 0 in stats marks the row
        }
        row.m = m;
        const VF vm = hn::Set(d, m), one = hn::Set(d, 1.0f), zero = hn::Zero(d);
        VD Z_acc = hn::Zero(DD());
        row_steps(n16, N, [&](auto steps, int j) {
            constexpr int U = decltype(steps)::value;
            hn::Mask<DF> pos[U];
            VF r[U];
            ATTN_EACH {
                const VF x = x_v<Tr::norm>(hn::LoadU(d, a + j + u * N), vS1, vn, vo, vn_norm);
                pos[u] = hn::And(hn::Gt(x, zero), lanes(d, j + u * N, n));
                r[u] = hn::IfThenElse(pos[u], hn::Div(x, vm), one);  // <= 1: m is the largest x
            }
            pow_vu<U>(d, r, pw);
            ATTN_EACH {
                const VF uv = hn::IfThenElseZero(pos[u], r[u]);
                hn::StoreU(uv, d, w + j + u * N);
                Z_acc = sum_d(Z_acc, uv);
            }
        });
        const float Z = (float)reduce_d(Z_acc);
        if (Z == 0) {  // rounding left m > 0 while every x <= 0: degenerate too
            clear();
            return false;
        }
        stats[2] = Z;
        row.Z = Z;
        const VF vZ = hn::Set(d, Z);
        for (int j = 0; j < n16; j += N) hn::StoreU(hn::Div(hn::LoadU(d, w + j), vZ), d, w + j);
        return true;
    }
}

// The score gradient of row t, as attn_row_dscores of the reference (doc/attention.md, 'Backward').
// g: in, dW_tj = dy_t . v_j; out, c_t ds_tj (c_t the score's scale), zero on [n, nkp).
// dphi, a, w, row: what row_forward left (dphi: phi'(s); for exp the scores, unused; ssmax's dots).
// Returns the row's dL/dp (re-weighting's p, ssmax's s) when want_dp, else 0.
template <AttnKind K>
HWY_NOINLINE double row_backward(float* g, const float* dphi, const float* a, const float* w, const Row& row, int t,
                                 int nkp, int hd, const Power& pw, int attn_len, bool want_dp) {
    using Tr = AttnTraits<K>;
    const DF d;
    const int N = (int)hn::Lanes(d);
    const int n = t + 1, n16 = (n + 15) / 16 * 16;
    const VF zero = hn::Zero(d);
    if (!row.live) {
        for (int j = 0; j < nkp; j += N) hn::StoreU(zero, d, g + j);
        return 0;
    }
    for (int j = n16; j < nkp; j += N) hn::StoreU(zero, d, g + j);
    const VF vn = hn::Set(d, (float)n), vS1 = hn::Set(d, row.S1), inv_S1 = hn::Set(d, row.inv_S1);
    const VF vn_norm = hn::Set(d, (float)attn_len_n(t, attn_len));
    double dp = 0;
    if constexpr (Tr::reweight) {
        // D2 = sum_j W_j dW_j; dx_j = p (x_j/m)^(p-1) (dW_j - D2) / (m Z) for x_j > 0; dA = n dx
        VF acc = zero;
        for (int j = 0; j < n16; j += N) acc = hn::MulAdd(hn::LoadU(d, w + j), load_z(d, lanes(d, j, n), g + j), acc);
        const float d2 = reduce_add(acc);
        const VF D2 = hn::Set(d, d2);
        const VF vo = hn::Set(d, (float)ref::lssar_bias(t)), vm = hn::Set(d, row.m), one = hn::Set(d, 1.0f);
        const VF coef = hn::Set(d, (float)pw.p * (1.0f / (row.m * row.Z)));
        const Power pw1(pw.p - 1);
        VF swl = zero, swdwl = zero;
        for (int j = 0; j < n16; j += N) {
            // the forward's x and x/m, bit for bit: the same keys have x > 0
            const VF x = x_v<Tr::norm>(hn::LoadU(d, a + j), vS1, vn, vo, vn_norm);
            const auto k = lanes(d, j, n);
            const auto pos = hn::And(hn::Gt(x, zero), k);
            const VF r = hn::IfThenElse(pos, hn::Div(x, vm), one);
            const VF dW = load_z(d, k, g + j);
            const VF dx = hn::Mul(hn::Mul(coef, pow_v(d, r, pw1)), hn::Sub(dW, D2));
            hn::StoreU(hn::IfThenElseZero(pos, hn::Mul(vn, dx)), d, g + j);  // dA
            if (want_dp) {
                const VF lr = hn::IfThenElseZero(pos, log_v(d, r));
                const VF wl = hn::Mul(hn::LoadU(d, w + j), lr);
                swl = hn::Add(swl, wl);
                swdwl = hn::MulAdd(wl, dW, swdwl);
            }
        }
        if (want_dp) dp = (double)reduce_add(swdwl) - (double)d2 * reduce_add(swl);
    }
    const VF scale = hn::Set(d, ref::attn_score_scale<K, float>(t, hd, attn_len, pw.p));
    if constexpr (Tr::ssmax) {
        // ds = phi'(s) (dA - D1) / S1 in the reference's order, then dL/ds_h of the row:
        // ln(n_t) / sqrt(hd) sum_j ds_tj (qe_t . ke_j), summed in double as S1; then c_t ds
        VF acc = zero;
        for (int j = 0; j < n16; j += N)
            acc = hn::MulAdd(hn::Mul(hn::LoadU(d, a + j), inv_S1), load_z(d, lanes(d, j, n), g + j), acc);
        const VF D1 = hn::Set(d, reduce_add(acc));
        VD dsum = hn::Zero(DD());
        for (int j = 0; j < n16; j += N) {
            const auto k = lanes(d, j, n);
            const VF dA = load_z(d, k, g + j);
            const VF ds = hn::IfThenElseZero(k, hn::Mul(hn::Mul(hn::LoadU(d, a + j), hn::Sub(dA, D1)), inv_S1));
            if (want_dp) dsum = sum_d(dsum, hn::Mul(ds, load_z(d, k, dphi + j)));
            hn::StoreU(hn::Mul(ds, scale), d, g + j);
        }
        if (want_dp) dp = reduce_d(dsum) * std::log((double)n) / std::sqrt((double)hd);
    } else if constexpr (Tr::norm == ATTN_NORM_L1) {
        // D1 = sum_j A_j dA_j; ds = phi'(s) (dA - D1) / S1
        VF acc = zero;
        for (int j = 0; j < n16; j += N)
            acc = hn::MulAdd(hn::Mul(hn::LoadU(d, a + j), inv_S1), load_z(d, lanes(d, j, n), g + j), acc);
        const VF D1 = hn::Set(d, reduce_add(acc));
        const VF f = hn::Mul(inv_S1, scale);
        for (int j = 0; j < n16; j += N) {
            const auto k = lanes(d, j, n);
            VF dv;  // phi'(s): exp's is phi itself
            if constexpr (Tr::phi == ATTN_PHI_EXP) dv = hn::LoadU(d, a + j);
            else dv = load_z(d, k, dphi + j);
            const VF dA = load_z(d, k, g + j);
            hn::StoreU(hn::IfThenElseZero(k, hn::Mul(hn::Mul(dv, hn::Sub(dA, D1)), f)), d, g + j);
        }
    } else {
        // ds = c phi'(s) dA, c = 1 (none) or 1/n (mean; n = attn_len_n)
        for (int j = 0; j < n16; j += N) {
            const auto k = lanes(d, j, n);
            VF dv = load_z(d, k, dphi + j);
            if constexpr (Tr::norm == ATTN_NORM_MEAN) dv = hn::Div(dv, vn_norm);
            hn::StoreU(hn::IfThenElseZero(k, hn::Mul(hn::Mul(dv, load_z(d, k, g + j)), scale)), d, g + j);
        }
    }
    return dp;
}

// ----------------------------------------------------------------------------
// The products: register-blocked micro-kernels with the output's columns (keys or channels) in the
// lanes, fp32 FMAs.
//
// C (M, ncols) = A (M, K) B (K, ncols), or C += A B for C's rows below add_rows (a multiple of
// TILE_ROWS: the rows of dk and dv that an earlier block reached); A's element (i, k) at
// A[i ai + k ak] (broadcast), B's row k at B + k ldb; M a multiple of TILE_ROWS, ncols of the
// lanes. Scores (A = qe rows, B = ke^T), dW (A = dy rows, B = v^T), outputs (A = weights, B = v
// rows), dq-hat (A = ds, B = ke rows); dk-hat (A = ds^T, B = qe rows) and dv (A = W^T, B = dy
// rows) with K = R and add_rows = the block's first row.
template <int MR, int NV>
HWY_INLINE void gemm_tile(float* C, size_t ldc, const float* A, size_t ai, size_t ak, const float* B, size_t ldb,
                          int K, bool add) {
    const DF d;
    const size_t N = hn::Lanes(d);
    VF acc[MR][NV];
    #pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 16
        for (int q = 0; q < NV; q++) acc[r][q] = add ? hn::LoadU(d, C + r * ldc + q * N) : hn::Zero(d);
    for (int k = 0; k < K; k++) {
        VF b[NV];
        #pragma GCC unroll 16
        for (int q = 0; q < NV; q++) b[q] = hn::LoadU(d, B + (size_t)k * ldb + q * N);
        const float* ak_ = A + (size_t)k * ak;
        #pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const VF av = hn::Set(d, ak_[r * ai]);
            #pragma GCC unroll 16
            for (int q = 0; q < NV; q++) acc[r][q] = hn::MulAdd(av, b[q], acc[r][q]);
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 16
        for (int q = 0; q < NV; q++) hn::StoreU(acc[r][q], d, C + r * ldc + q * N);
}
HWY_NOINLINE void gemm(float* C, size_t ldc, const float* A, size_t ai, size_t ak, const float* B, size_t ldb, int M,
                       int K, int ncols, int add_rows) {
    constexpr int MR = TILE_ROWS;
    const int N = (int)hn::Lanes(DF());
    for (int i = 0; i < M; i += MR) {
        const bool add = i < add_rows;
        float* Ci = C + (size_t)i * ldc;
        const float* Ai = A + (size_t)i * ai;
        int j = 0;
        for (; j + 2 * N <= ncols; j += 2 * N) gemm_tile<MR, 2>(Ci + j, ldc, Ai, ai, ak, B + j, ldb, K, add);
        for (; j < ncols; j += N) gemm_tile<MR, 1>(Ci + j, ldc, Ai, ai, ak, B + j, ldb, K, add);
    }
}

// X (nrows, ncols; X row r at X + r ldx) rounded to bf16, kept as floats, into out (row r at out + r ldo)
HWY_NOINLINE void round_rows(float* out, size_t ldo, const float* X, size_t ldx, int nrows, int ncols) {
    const DF d;
    const int N = (int)hn::Lanes(d);
    for (int r = 0; r < nrows; r++)
        for (int c = 0; c < ncols; c += N)
            hn::StoreU(round_bf16(d, hn::LoadU(d, X + r * ldx + c)), d, out + r * ldo + c);
}

#if HWY_TARGET == HWY_AVX3
// NUM_BF16_DOT: AVX512-BF16's dot products on pairs of bf16 (the bf16 path's kernels). Operands are
// 32-bit words holding two bf16, the first in the low half: a pair of consecutive keys (along the
// sum) for one channel, or of two consecutive rows. Highway 1.0.3 has no bf16 dot of its own: these
// take the instructions directly, with their own target attribute (called only where
// fast_cpu_uses_bf16_dot() said yes).
#define ATTN_FAST_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

// Y (R, hdp) = P (R, nk) . M (nk, hdp) with bf16 pairs along the keys: outputs (P = weights,
// M = v) and dq-hat (P = ds, M = ke). Pw: row r at Pw + r ldp, word j2 = (P[r][2j2], P[r][2j2+1]);
// Mw (nk2, hdp): word [j2][c] = (M[2j2][c], M[2j2+1][c]); hdp a multiple of 16.
template <int NC>  // 16-channel chunks per pass
ATTN_FAST_BF16_TARGET inline void dot_rows_chunk(float* Y, int ldy, const uint32_t* Pw, int ldp, const uint32_t* Mw,
                                                 int ldm, int nk2, int c) {
    constexpr int R = ROWS;
    __m512 acc[R][NC];
    #pragma GCC unroll 16
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 16
        for (int q = 0; q < NC; q++) acc[r][q] = _mm512_setzero_ps();
    for (int j2 = 0; j2 < nk2; j2++) {
        __m512bh mv[NC];
        #pragma GCC unroll 16
        for (int q = 0; q < NC; q++) mv[q] = (__m512bh)_mm512_loadu_si512(Mw + (size_t)j2 * ldm + c + 16 * q);
        #pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            __m512bh pv = (__m512bh)_mm512_set1_epi32((int)Pw[(size_t)r * ldp + j2]);
            #pragma GCC unroll 16
            for (int q = 0; q < NC; q++) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], pv, mv[q]);
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 16
        for (int q = 0; q < NC; q++) _mm512_storeu_ps(Y + (size_t)r * ldy + c + 16 * q, acc[r][q]);
}
ATTN_FAST_BF16_TARGET HWY_NOINLINE void dot_rows(float* Y, int ldy, const uint32_t* Pw, int ldp, const uint32_t* Mw,
                                                 int ldm, int nk2, int hdp) {
    int c = 0;
    for (; c + 32 <= hdp; c += 32) dot_rows_chunk<2>(Y, ldy, Pw, ldp, Mw, ldm, nk2, c);
    if (c < hdp) dot_rows_chunk<1>(Y, ldy, Pw, ldp, Mw, ldm, nk2, c);
}

// D (nk8, hdp) += P (R, nk8)^T . M (R, hdp) with bf16 pairs along the block's rows: dk-hat
// (P = ds, M = qe rows) and dv (P = weights, M = dy rows). Xw (R/2, ldx): word [r2][j] =
// (P[2r2][j], P[2r2+1][j]), zero past the keys; Mw (R/2, hdp): word [r2][c] = (M[2r2][c],
// M[2r2+1][c]). nk8 a multiple of 8; rows of D from j_new (a multiple of 8) on are written, not
// added to (the first block that reaches a key: D needs no clearing).
template <int NC>
ATTN_FAST_BF16_TARGET inline void dot_cols_chunk(float* D, int ldd, const uint32_t* Xw, int ldx, const uint32_t* Mw,
                                                 int ldm, int nk8, int j_new, int c) {
    constexpr int R2 = ROWS / 2, J = 8;
    __m512bh mv[R2][NC];
    #pragma GCC unroll 16
    for (int r2 = 0; r2 < R2; r2++)
        #pragma GCC unroll 16
        for (int q = 0; q < NC; q++) mv[r2][q] = (__m512bh)_mm512_loadu_si512(Mw + (size_t)r2 * ldm + c + 16 * q);
    for (int j = 0; j < nk8; j += J) {
        __m512 acc[J][NC];
        #pragma GCC unroll 16
        for (int jj = 0; jj < J; jj++)
            #pragma GCC unroll 16
            for (int q = 0; q < NC; q++)
                acc[jj][q] = j >= j_new ? _mm512_setzero_ps() : _mm512_loadu_ps(D + (size_t)(j + jj) * ldd + c + 16 * q);
        #pragma GCC unroll 16
        for (int r2 = 0; r2 < R2; r2++) {
            #pragma GCC unroll 16
            for (int jj = 0; jj < J; jj++) {
                __m512bh xv = (__m512bh)_mm512_set1_epi32((int)Xw[(size_t)r2 * ldx + j + jj]);
                #pragma GCC unroll 16
                for (int q = 0; q < NC; q++) acc[jj][q] = _mm512_dpbf16_ps(acc[jj][q], xv, mv[r2][q]);
            }
        }
        #pragma GCC unroll 16
        for (int jj = 0; jj < J; jj++)
            #pragma GCC unroll 16
            for (int q = 0; q < NC; q++) _mm512_storeu_ps(D + (size_t)(j + jj) * ldd + c + 16 * q, acc[jj][q]);
    }
}
ATTN_FAST_BF16_TARGET HWY_NOINLINE void dot_cols(float* D, int ldd, const uint32_t* Xw, int ldx, const uint32_t* Mw,
                                                 int ldm, int nk8, int j_new, int hdp) {
    int c = 0;
    for (; c + 32 <= hdp; c += 32) dot_cols_chunk<2>(D, ldd, Xw, ldx, Mw, ldm, nk8, j_new, c);
    if (c < hdp) dot_cols_chunk<1>(D, ldd, Xw, ldx, Mw, ldm, nk8, j_new, c);
}

// 16 words from two rows of 16 floats: (bf16(lo), bf16(hi)), rounded to nearest even
ATTN_FAST_BF16_TARGET inline __m512i pair16(__m512 lo, __m512 hi) {
    __m512i l = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(lo));
    __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(hi));
    return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}
// out (npairs, ldo words): word [p][c] = (X[2p][c], X[2p+1][c]) for c < ncols (a multiple of 16);
// X row r at X + r ldx
ATTN_FAST_BF16_TARGET HWY_NOINLINE void pair_rows(uint32_t* out, size_t ldo, const float* X, size_t ldx, int npairs,
                                                  int ncols) {
    for (int p = 0; p < npairs; p++)
        for (int c = 0; c < ncols; c += 16)
            _mm512_storeu_si512(out + (size_t)p * ldo + c, pair16(_mm512_loadu_ps(X + (size_t)2 * p * ldx + c),
                                                                  _mm512_loadu_ps(X + (size_t)(2 * p + 1) * ldx + c)));
}
// out row r (ncols bf16, i.e. ncols/2 words of pairs along the row) = bf16(X row r); ncols a
// multiple of 16, X zero past its data
ATTN_FAST_BF16_TARGET HWY_NOINLINE void bf16_rows(uint32_t* out, size_t ldo, const float* X, size_t ldx, int nrows,
                                                  int ncols) {
    for (int r = 0; r < nrows; r++)
        for (int c = 0; c < ncols; c += 16)
            _mm256_storeu_si256((__m256i*)((uint16_t*)(out + (size_t)r * ldo) + c),
                                (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(X + (size_t)r * ldx + c)));
}
#endif  // HWY_TARGET == HWY_AVX3

// ----------------------------------------------------------------------------
// One head's operands, laid out for the products: rows padded to Tp, channels to hdp, padding zero.

// |x| of one row of n <= hdp floats as the reference's l2_norm_rescaled: x scaled by the power of
// two that brings its largest element into [0.5, 1) before the sum of squares (no overflow or
// underflow), the scale undone on the root. Scaling by a power of two is exact and commutes with
// every operation of the sum, so where the unscaled sum of squares lies well inside fp32's range it
// is that result already: only rows outside that range take the scaled path.
HWY_INLINE float norm_row(const float* x, int n) {
    const DF d;
    const int N = (int)hn::Lanes(d);
    VF sum2 = hn::Zero(d);
    for (int i = 0; i < n; i += N) {
        const VF xv = load_n(d, x + i, n - i);
        sum2 = hn::MulAdd(xv, xv, sum2);
    }
    const float s2 = reduce_add(sum2);
    if (s2 > 0x1p-60f && s2 < 0x1p60f) return std::sqrt(s2);
    VF amax = hn::Zero(d);
    for (int i = 0; i < n; i += N) amax = hn::Max(amax, hn::Abs(load_n(d, x + i, n - i)));
    const float am = reduce_max(amax);
    if (!(am > 0) || !std::isfinite(am)) return am > 0 ? am : 0.0f;
    int e;
    std::frexp(am, &e);  // am = f 2^e with f in [0.5, 1)
    // x 2^-e in two exact factors (2^-e itself may lie outside fp32's normal range)
    const int e1 = -e / 2, e2 = -e - e1;
    const VF f1 = hn::Set(d, std::ldexp(1.0f, e1)), f2 = hn::Set(d, std::ldexp(1.0f, e2));
    sum2 = hn::Zero(d);
    for (int i = 0; i < n; i += N) {
        const VF xs = hn::Mul(hn::Mul(load_n(d, x + i, n - i), f1), f2);
        sum2 = hn::MulAdd(xs, xs, sum2);
    }
    return std::ldexp(std::sqrt(reduce_add(sum2)), e);
}

// rows (Tp, hdp) of one head from x (row t at x[t * stride], hd floats): q or k as the scores take
// them (normalise: x / max(|x|, eps), as the reference's attention_prepare), v, or dy; norms[t] = |x_t|
// when given. Padding zero.
HWY_NOINLINE void load_rows(float* rows, float* norms, const float* x, size_t stride, const HeadShape& sh,
                            bool normalise) {
    const DF d;
    const int N = (int)hn::Lanes(d);
    for (int t = 0; t < sh.T; t++) {
        const float* xt = x + (size_t)t * stride;
        if (t + PREFETCH_ROWS < sh.T)  // rows lie pages apart: no hardware prefetcher follows them
            for (int i = 0; i < sh.hd; i += 16) hwy::Prefetch(xt + PREFETCH_ROWS * stride + i);
        float scale = 1.0f;
        if (normalise || norms) {
            const float nrm = norm_row(xt, sh.hd);
            if (norms) norms[t] = nrm;
            if (normalise) scale = 1.0f / std::max(nrm, (float)ref::LSSA_NORM_EPS);
        }
        const VF vs = hn::Set(d, scale);
        for (int i = 0; i < sh.hdp; i += N)
            hn::StoreU(hn::Mul(load_n(d, xt + i, std::max(sh.hd - i, 0)), vs), d, rows + (size_t)t * sh.hdp + i);
    }
    std::fill(rows + (size_t)sh.T * sh.hdp, rows + (size_t)sh.Tp * sh.hdp, 0.0f);
}

#if HWY_TARGET == HWY_AVX3
// dst (16 rows, stride ldd) = the transpose of src (16 rows, stride lds)
HWY_INLINE void transpose16(float* dst, size_t ldd, const float* src, size_t lds) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: (a0 b0 a1 b1), (a2 b2 a3 b3)
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {  // per lane L, r[i + c]: column 4L + c of rows i..i+3
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (int c = 0; c < 4; c++) {  // columns c, c + 4, c + 8, c + 12
        __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 v2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), v3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        _mm512_storeu_ps(dst + c * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(dst + (c + 8) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xdd));
        _mm512_storeu_ps(dst + (c + 4) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(dst + (c + 12) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xdd));
    }
}
#else
// dst (16 rows, stride ldd) = the transpose of src (16 rows, stride lds): 4 x 4 blocks of 128-bit
// vectors, transposed by interleaving (every target's 128-bit operations)
HWY_INLINE void transpose16(float* dst, size_t ldd, const float* src, size_t lds) {
    const hn::Full128<float> d4;
    for (int bi = 0; bi < 16; bi += 4)
        for (int bj = 0; bj < 16; bj += 4) {
            const float* s = src + bi * lds + bj;
            auto r0 = hn::LoadU(d4, s), r1 = hn::LoadU(d4, s + lds), r2 = hn::LoadU(d4, s + 2 * lds),
                 r3 = hn::LoadU(d4, s + 3 * lds);
            auto t0 = hn::InterleaveLower(d4, r0, r1), t1 = hn::InterleaveUpper(d4, r0, r1);  // a0 b0 a1 b1, a2 b2 a3 b3
            auto t2 = hn::InterleaveLower(d4, r2, r3), t3 = hn::InterleaveUpper(d4, r2, r3);  // c0 d0 c1 d1, c2 d2 c3 d3
            float* o = dst + bj * ldd + bi;
            hn::StoreU(hn::ConcatLowerLower(d4, t2, t0), d4, o);            // a0 b0 c0 d0
            hn::StoreU(hn::ConcatUpperUpper(d4, t2, t0), d4, o + ldd);      // a1 b1 c1 d1
            hn::StoreU(hn::ConcatLowerLower(d4, t3, t1), d4, o + 2 * ldd);  // a2 b2 c2 d2
            hn::StoreU(hn::ConcatUpperUpper(d4, t3, t1), d4, o + 3 * ldd);  // a3 b3 c3 d3
        }
}
#endif

// rowsT (ncols, nrows) = the transpose of rows (nrows, ncols), both multiples of 16
HWY_NOINLINE void transpose(float* rowsT, const float* rows, int nrows, int ncols) {
    for (int t = 0; t < nrows; t += 16)
        for (int i = 0; i < ncols; i += 16) transpose16(rowsT + (size_t)i * nrows + t, nrows, rows + (size_t)t * ncols + i, ncols);
}

// The weights of rows [t0, t0 + R) of one head (rows past T: zero) into sc.w (R, Tp), stats
// (3 per row, or null) and rows (per row, or null); returns nkp, the keys the block's products run
// over (a multiple of 16, weights zero past each row's keys). qe (Tp, hdp) as load_rows makes it,
// keT (hdp, Tp) its keys' transpose. dphi: the scores' buffer gets phi' (backward).
template <AttnKind K>
HWY_NOINLINE int block_weights(Scratch& sc, Row* rows, float* stats, const float* qe, const float* keT, int t0,
                               const HeadShape& sh, const Power& pw, bool dphi) {
    constexpr int R = ROWS;
    const int nrows = std::min(R, sh.T - t0), nk = t0 + nrows, nkp = (nk + 15) / 16 * 16;
    gemm(sc.s.data(), sh.Tp, qe + (size_t)t0 * sh.hdp, sh.hdp, 1, keT, sh.Tp, R, sh.hd, nkp, 0);
    for (int r = 0; r < R; r++) {
        const size_t o = (size_t)r * sh.Tp;
        if (r >= nrows) {
            std::fill(sc.w.begin() + o, sc.w.begin() + o + nkp, 0.0f);
            if (rows) rows[r].live = false;
            continue;
        }
        float st[3];
        Row row;
        row_forward<K>(&sc.s[o], &sc.a[o], &sc.w[o], st, row, t0 + r, nkp, sh.hd, pw, sh.attn_len, dphi);
        if (stats)
            for (int c = 0; c < 3; c++) stats[(size_t)r * 3 + c] = st[c];
        if (rows) rows[r] = row;
    }
    return nkp;
}

// ----------------------------------------------------------------------------
// The layer

// The rows of the block of one head starting at t0: weights, then y = W v, written to out
// (B, T, NH, hd) at this head's rows, and the rows' stats. vh: the head's v as forward_k lays it out.
template <AttnKind K, int NM>
HWY_NOINLINE void forward_block(Scratch& sc, float* out, float* stats, const float* qe, const float* keT,
                                const float* vh, int t0, const HeadShape& sh, int C, const Power& pw) {
    constexpr int R = ROWS;
    float st[3 * R];
    const int nrows = std::min(R, sh.T - t0);
    const int nkp = block_weights<K>(sc, nullptr, st, qe, keT, t0, sh, pw, false);
#if HWY_TARGET == HWY_AVX3
    if constexpr (NM == NUM_BF16_DOT) {
        bf16_rows(sc.w_keys.data(), sh.Tp / 2, sc.w.data(), sh.Tp, R, nkp);
        dot_rows(sc.y.data(), sh.hdp, sc.w_keys.data(), sh.Tp / 2, (const uint32_t*)vh, sh.hdp, nkp / 2, sh.hdp);
    } else
#endif
    {
        const float* W = sc.w.data();
        if constexpr (NM == NUM_BF16) {
            round_rows(sc.wb.data(), sh.Tp, W, sh.Tp, R, nkp);
            W = sc.wb.data();
        }
        gemm(sc.y.data(), sh.hdp, W, sh.Tp, 1, vh, sh.hdp, R, nkp, sh.hdp, 0);
    }
    const DF d;
    const int N = (int)hn::Lanes(d);
    for (int r = 0; r < nrows; r++) {
        float* o = out + (size_t)(t0 + r) * C;
        const float* y = &sc.y[(size_t)r * sh.hdp];
        for (int i = 0; i < sh.hd; i += N) store_n(d, hn::LoadU(d, y + i), o + i, sh.hd - i);
        if (stats)
            for (int c = 0; c < 3; c++) stats[(size_t)(t0 + r) * 3 + c] = st[r * 3 + c];
    }
}

// One head's operands for the forward: qe and keT as the scores take them, v as the numerics' product takes it
template <AttnKind K, int NM>
HWY_NOINLINE void forward_head_prepare(Scratch& sc, float* qe, float* keT, float* vh, const float* x, const HeadShape& sh,
                                       int C) {
    constexpr bool cos_len = AttnTraits<K>::cos_len;
    load_rows(qe, nullptr, x, (size_t)3 * C, sh, cos_len);
    load_rows(sc.ke.data(), nullptr, x + C, (size_t)3 * C, sh, cos_len);
    transpose(keT, sc.ke.data(), sh.Tp, sh.hdp);
#if HWY_TARGET == HWY_AVX3
    if constexpr (NM == NUM_BF16_DOT) {
        load_rows(sc.dv.data(), nullptr, x + 2 * C, (size_t)3 * C, sh, false);  // v, through dv's storage
        pair_rows((uint32_t*)vh, sh.hdp, sc.dv.data(), sh.hdp, sh.Tp / 2, sh.hdp);
        return;
    }
#endif
    load_rows(vh, nullptr, x + 2 * C, (size_t)3 * C, sh, false);
    if constexpr (NM == NUM_BF16) round_rows(vh, sh.hdp, vh, sh.hdp, sh.Tp, sh.hdp);
}

template <AttnKind K, int NM>
void forward_k(AttentionFast::Impl& ws, float* out, float* stats, const float* qkv, int B, int T, int NH, int hd,
               double p, const double* p_head, int attn_len) {
    constexpr int R = ROWS;
    const HeadShape sh(T, NH, hd, attn_len);
    const int C = NH * hd, BH = B * NH, NB = (T + R - 1) / R;
    const size_t per_head = sh.rows();
    sized(ws.qe, (size_t)BH * per_head), sized(ws.keT, (size_t)BH * per_head), sized(ws.v, (size_t)BH * per_head);
    ws.size_threads();
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
        Scratch& sc = ws.mine();
        sc.size_head(sh);
        const int b = bh / NH, h = bh % NH;
        const size_t o = (size_t)bh * per_head;
        forward_head_prepare<K, NM>(sc, &ws.qe[o], &ws.keT[o], &ws.v[o], qkv + (size_t)b * T * 3 * C + h * hd, sh, C);
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int item = 0; item < BH * NB; item++) {
        const int rb = NB - 1 - item / BH, bh = item % BH;  // the longest blocks first
        const int b = bh / NH, h = bh % NH;
        Scratch& sc = ws.mine();
        sc.size_block(sh);
        const size_t o = (size_t)bh * per_head;
        forward_block<K, NM>(sc, out + (size_t)b * T * C + h * hd, stats ? stats + (size_t)bh * T * 3 : nullptr, &ws.qe[o],
                             &ws.keT[o], &ws.v[o], rb * R, sh, C, Power(p_head ? p_head[h] : p));
    }
}

// dx (hd) = dxh mapped back through x -> x / max(|x|, eps) (normalise; xh = x / |x|, as the
// reference's l2norm_backward), or dxh itself
template <bool normalise>
HWY_INLINE void grad_row(float* dx, const float* dxh, const float* xh, float norm, int hd) {
    const DF d;
    const int N = (int)hn::Lanes(d);
    VF dot = hn::Zero(d), inv = hn::Set(d, 1.0f);
    if constexpr (normalise) {
        if (norm > (float)ref::LSSA_NORM_EPS) {
            for (int i = 0; i < hd; i += N) {
                const auto k = lanes(d, i, hd);
                dot = hn::MulAdd(load_z(d, k, xh + i), load_z(d, k, dxh + i), dot);
            }
            dot = hn::Set(d, reduce_add(dot));
            inv = hn::Set(d, 1.0f / norm);
        } else {
            inv = hn::Set(d, (float)(1.0 / ref::LSSA_NORM_EPS));
        }
    }
    for (int i = 0; i < hd; i += N) {
        const auto k = lanes(d, i, hd);
        VF g = load_z(d, k, dxh + i);
        if constexpr (normalise) g = hn::Mul(hn::NegMulAdd(load_z(d, k, xh + i), dot, g), inv);
        store_n(d, g, dx + i, hd - i);
    }
}

// One head's backward: dqkv (its q, k, v slices, row t at t 3C) = the gradients; returns the
// head's dL/dp (want_dp: re-weighting's p, ssmax's s). Row blocks in order; dk and dv accumulate
// over them.
template <AttnKind K, int NM>
HWY_NOINLINE double backward_head(Scratch& sc, float* dqkv, const float* dout, const float* qkv, const HeadShape& sh,
                                  int C, const Power& pw, bool want_dp) {
    constexpr int R = ROWS;
    constexpr bool cos_len = AttnTraits<K>::cos_len;
    const int T = sh.T, hd = sh.hd, hdp = sh.hdp, Tp = sh.Tp;
    float *qe = sc.qe.data(), *ke = sc.ke.data(), *dy = sc.dy.data();
    load_rows(qe, cos_len ? sc.qn.data() : nullptr, qkv, (size_t)3 * C, sh, cos_len);
    load_rows(ke, cos_len ? sc.kn.data() : nullptr, qkv + C, (size_t)3 * C, sh, cos_len);
    transpose(sc.keT.data(), ke, Tp, hdp);
#if HWY_TARGET == HWY_AVX3
    if constexpr (NM == NUM_BF16_DOT) pair_rows(sc.ke_keys.data(), hdp, ke, hdp, Tp / 2, hdp);
#endif
    if constexpr (NM == NUM_BF16) round_rows(sc.keb.data(), hdp, ke, hdp, Tp, hdp);
    const float* keB = NM == NUM_BF16 ? sc.keb.data() : ke;  // ds K's keys
    load_rows(sc.dv.data(), nullptr, qkv + 2 * C, (size_t)3 * C, sh, false);  // v, through dv's storage
    transpose(sc.vT.data(), sc.dv.data(), Tp, hdp);
    load_rows(dy, nullptr, dout, (size_t)C, sh, false);
    Row rows[R];
    double dp = 0;
    for (int t0 = 0; t0 < T; t0 += R) {
        const int nrows = std::min(R, T - t0), nk = t0 + nrows, nk8 = (nk + 7) / 8 * 8;
        const int nkp = block_weights<K>(sc, rows, nullptr, qe, sc.keT.data(), t0, sh, pw, true);
        // dW = dy v^T, then c_t ds row by row (zero rows past T)
        gemm(sc.g.data(), Tp, dy + (size_t)t0 * hdp, hdp, 1, sc.vT.data(), Tp, R, hd, nkp, 0);
        for (int r = 0; r < R; r++) {
            const size_t o = (size_t)r * Tp;
            if (r >= nrows) {
                std::fill(sc.g.begin() + o, sc.g.begin() + o + nkp, 0.0f);
                continue;
            }
            dp += row_backward<K>(&sc.g[o], &sc.s[o], &sc.a[o], &sc.w[o], rows[r], t0 + r, nkp, hd, pw, sh.attn_len,
                                  want_dp);
        }
        // dq-hat = ds ke; dk-hat += ds^T qe; dv += W^T dy
        float* dq_rows = &sc.dqe[(size_t)t0 * hdp];
#if HWY_TARGET == HWY_AVX3
        if constexpr (NM == NUM_BF16_DOT) {
            bf16_rows(sc.g_keys.data(), Tp / 2, sc.g.data(), Tp, R, nkp);
            dot_rows(dq_rows, hdp, sc.g_keys.data(), Tp / 2, sc.ke_keys.data(), hdp, nkp / 2, hdp);
            pair_rows(sc.g_rows.data(), Tp, sc.g.data(), Tp, R / 2, nkp);
            pair_rows(sc.w_rows.data(), Tp, sc.w.data(), Tp, R / 2, nkp);
            pair_rows(sc.q_rows.data(), hdp, qe + (size_t)t0 * hdp, hdp, R / 2, hdp);
            pair_rows(sc.dy_rows.data(), hdp, dy + (size_t)t0 * hdp, hdp, R / 2, hdp);
            dot_cols(sc.dke.data(), hdp, sc.g_rows.data(), Tp, sc.q_rows.data(), hdp, nk8, t0, hdp);
            dot_cols(sc.dv.data(), hdp, sc.w_rows.data(), Tp, sc.dy_rows.data(), hdp, nk8, t0, hdp);
        } else
#endif
        {
            const float *G = sc.g.data(), *W = sc.w.data(), *Q = qe + (size_t)t0 * hdp, *DY = dy + (size_t)t0 * hdp;
            if constexpr (NM == NUM_BF16) {
                round_rows(sc.gb.data(), Tp, G, Tp, R, nkp);
                round_rows(sc.wb.data(), Tp, W, Tp, R, nkp);
                round_rows(sc.qb.data(), hdp, Q, hdp, R, hdp);
                round_rows(sc.dyb.data(), hdp, DY, hdp, R, hdp);
                G = sc.gb.data(), W = sc.wb.data(), Q = sc.qb.data(), DY = sc.dyb.data();
            }
            gemm(dq_rows, hdp, G, Tp, 1, keB, hdp, R, nkp, hdp, 0);
            gemm(sc.dke.data(), hdp, G, 1, Tp, Q, hdp, nk8, R, hdp, t0);
            gemm(sc.dv.data(), hdp, W, 1, Tp, DY, hdp, nk8, R, hdp, t0);
        }
    }
    // through the normalisation of q and k (cos_len), into dqkv
    for (int t = 0; t < T; t++) {
        float* dq = dqkv + (size_t)t * 3 * C;
        if (t + PREFETCH_ROWS < T)
            for (int w = 0; w < 3; w++)
                for (int i = 0; i < hd; i += 16) hwy::Prefetch(dq + PREFETCH_ROWS * 3 * C + w * C + i);
        const size_t o = (size_t)t * hdp;
        grad_row<cos_len>(dq, &sc.dqe[o], qe + o, cos_len ? sc.qn[t] : 0.0f, hd);
        grad_row<cos_len>(dq + C, &sc.dke[o], ke + o, cos_len ? sc.kn[t] : 0.0f, hd);
        grad_row<false>(dq + 2 * C, &sc.dv[o], nullptr, 0.0f, hd);
    }
    return dp;
}

template <AttnKind K, int NM>
void backward_k(AttentionFast::Impl& ws, float* dqkv, const float* dout, const float* qkv, int B, int T, int NH, int hd,
                double p, const double* p_head, double* dp_head, int attn_len) {
    const HeadShape sh(T, NH, hd, attn_len);
    const int C = NH * hd, BH = B * NH;
    const bool want_dp = attn_head_param(K) != ATTN_HEAD_NONE && dp_head != nullptr;
    std::vector<double> dp(BH, 0.0);
    ws.size_threads();
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < BH; bh++) {
        Scratch& sc = ws.mine();
        sc.size_block(sh);
        sc.size_head(sh);
        const int b = bh / NH, h = bh % NH;
        const size_t off = (size_t)b * T * 3 * C + h * hd;
        dp[bh] = backward_head<K, NM>(sc, dqkv + off, dout + (size_t)b * T * C + h * hd, qkv + off, sh, C,
                                      Power(p_head ? p_head[h] : p), want_dp);
    }
    if (dp_head)  // heads in order: the same sum for any number of threads
        for (int bh = 0; bh < BH; bh++) dp_head[bh % NH] += dp[bh];
}

template <AttnKind K>
void map_k(std::vector<float>& W, std::vector<uint8_t>& valid, const float* qkv, int T, int NH, int hd, int h, double p,
           int attn_len) {
    constexpr int R = ROWS;
    const HeadShape sh(T, NH, hd, attn_len);
    const int C = NH * hd;
    AttentionFast::Impl ws;
    ws.size_threads();
    Scratch& sc0 = ws.threads[0];
    sc0.size_head(sh);
    load_rows(sc0.qe.data(), nullptr, qkv + h * hd, (size_t)3 * C, sh, AttnTraits<K>::cos_len);
    load_rows(sc0.ke.data(), nullptr, qkv + C + h * hd, (size_t)3 * C, sh, AttnTraits<K>::cos_len);
    transpose(sc0.keT.data(), sc0.ke.data(), sh.Tp, sh.hdp);
    const float *qe = sc0.qe.data(), *keT = sc0.keT.data();
    W.assign((size_t)T * T, 0.0f);
    valid.assign(T, 0);
    const Power pw(p);
#pragma omp parallel for schedule(dynamic, 1)
    for (int t0 = 0; t0 < T; t0 += R) {
        Scratch& sc = ws.mine();
        sc.size_block(sh);
        Row rows[R];
        block_weights<K>(sc, rows, nullptr, qe, keT, t0, sh, pw, false);
        for (int r = 0; r < R && t0 + r < T; r++) {
            const int t = t0 + r;
            std::copy(&sc.w[(size_t)r * sh.Tp], &sc.w[(size_t)r * sh.Tp] + t + 1, &W[(size_t)t * T]);
            valid[t] = rows[r].live ? 1 : 0;
        }
    }
}

// ----------------------------------------------------------------------------
// Entry points of one target (the run-time kind and numerics become compile-time constants)

template <class F> HWY_INLINE void with_mode(int mode, F&& f) {
#if HWY_TARGET == HWY_AVX3
    if (mode == NUM_BF16_DOT) return f(std::integral_constant<int, NUM_BF16_DOT>{});
#endif
    if (mode == NUM_FP32) f(std::integral_constant<int, NUM_FP32>{});
    else f(std::integral_constant<int, NUM_BF16>{});  // NUM_BF16_DOT where the target has no dot: the same numbers
}

}  // namespace attn_fast_impl

void AttentionFastForward(AttentionFast::Impl& ws, float* out, float* stats, const float* qkv, int B, int T, int NH,
                          int hd, AttnKind kind, int mode, double p, const double* p_head, int attn_len) {
    using namespace attn_fast_impl;
    attn_dispatch(kind, [&](auto k) {
        with_mode(mode, [&](auto nm) {
            forward_k<decltype(k)::value, decltype(nm)::value>(ws, out, stats, qkv, B, T, NH, hd, p, p_head, attn_len);
        });
    });
}

void AttentionFastBackward(AttentionFast::Impl& ws, float* dqkv, const float* dout, const float* qkv, int B, int T,
                           int NH, int hd, AttnKind kind, int mode, double p, const double* p_head, double* dp_head,
                           int attn_len) {
    using namespace attn_fast_impl;
    attn_dispatch(kind, [&](auto k) {
        with_mode(mode, [&](auto nm) {
            backward_k<decltype(k)::value, decltype(nm)::value>(ws, dqkv, dout, qkv, B, T, NH, hd, p, p_head, dp_head,
                                                               attn_len);
        });
    });
}

void AttentionFastMap(std::vector<float>& W, std::vector<uint8_t>& valid, const float* qkv, int T, int NH, int hd, int h,
                      AttnKind kind, double p, int attn_len) {
    using namespace attn_fast_impl;
    attn_dispatch(kind, [&](auto k) { map_k<decltype(k)::value>(W, valid, qkv, T, NH, hd, h, p, attn_len); });
}

// the vector functions, for the tests: out[i] = ln(in[i]) or ln(1 + in[i]), n a multiple of 16
void AttentionFastLog(float* out, const float* in, int n, bool plus1) {
    using namespace attn_fast_impl;
    const DF d;
    for (int i = 0; i < n; i += (int)hn::Lanes(d)) {
        const VF x = hn::LoadU(d, in + i);
        hn::StoreU(plus1 ? log1p_v(d, x) : log_v(d, x), d, out + i);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn_fast
HWY_AFTER_NAMESPACE();

#endif  // ATTENTION_FAST_CPU_INL_H_ toggle
