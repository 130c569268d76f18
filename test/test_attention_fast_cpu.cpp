// The fast CPU path's attention (attention/attention_fast_cpu.h) against the float64 reference
// (attention/attention_cpu.h), every variant of attention/attention_kind.h, on EVERY Highway target
// the CPU runs (fast_cpu_targets(): AVX3, AVX2, SSE4 and SSSE3 on an AVX-512 machine, SSSE3 being
// Highway's static target under x86-64-v2, which lacks the AES and CLMUL its SSE4 requires; each
// forced in turn) and in both numerics, and on the AVX3 target of a CPU with AVX512-BF16 the bf16
// numerics both with vdpbf16ps and with its exact emulation (fast_cpu_allow_bf16_dot(false)). A
// failure names the configuration ("AVX2 fp32", "AVX3 bf16 +BF16", ...):
// - its vector functions (ln, ln(1 + x)) against libm;
// - forward (outputs, saved stats), backward (dq, dk, dv) and the head parameter's dL/dp (learned p,
//   ssmax's s), on shapes that are not multiples of the vectors nor of the 8-row blocks, within
//   bounds derived from the roundings of each numerics (below); log-length scaling beyond the
//   training length, and softmax's bits within it;
// - the reference's edge cases (test_attention_cpu.cpp): row 0, one-hot rows, tied keys, degenerate
//   zero-query rows, relu rows without a positive score, saturated sigmoids, huge and tiny norms,
//   norms whose squares overflow float32, and LSSAR at T = 4096 with keys sharing a direction (x in
//   the thousands) and at T = 2048 with nearly identical keys (x ~ 1e-3), on every target too (the
//   references are computed once per input: a configuration costs its kernel run only);
// - the same bits for any number of threads, and attention maps whose rows are the forward's weights.
//
// Tolerances. Both numerics evaluate scores, phi, the row sums, the re-weighting and dW = dy . v in
// fp32, as the reference does in its float32 build. The other products (weights and v for y, ds
// and ke for dq, ds and qe for dk, weights and dy for dv) differ by numerics:
//   bf16: both operands rounded to bf16 (relative error <= u = 2^-8 each), their product exact in
//         fp32, a sum of n of them in fp32 within n 2^-23 of the sum of their magnitudes (acc(n):
//         one rounding per term, with a factor 2 for vdpbf16ps's two additions per instruction);
//   fp32: the operands are the fp32 values themselves (u = 0: no rounding beyond what the fp32 part
//         below measures), each FMA rounds once: a sum of n terms within n 2^-24 of their magnitudes.
// Each check allows that part, derived from those roundings on the float64 reference's own values,
// to first order:
//   y_ti:   (2u + acc(t+1)) sum_j |W_tj v_ji|        dv_ji: (2u + acc(T)) sum_t |W_tj dy_ti|
//   dq-hat_t: sum_j |c_t| (2u + acc(t+1)) |ds_tj| |ke_j|, and dk-hat_j the same over t with |qe_t|
//   (and acc(T)),
//   compared as the L2 norm of each row, divided by max(|q_t|, eps) for cos_len scores (the
//   normalisation's Jacobian has norm 1/|q|): an absolute bound, which holds where ds K cancels
//   (nearly identical keys) and the relative error of dq is large;
// plus the fp32 part: 4 times the float32 reference's own largest error on the same inputs (the
// same arithmetic in another order: it measures how the inputs condition fp32), and 1e-6 of the
// output's scale. In the fp32 numerics that part is nearly the whole bound of y, dq, dk and dv, and
// the kernel's exp and ln polynomials (within 2 ulp) err by more than libm's, which the reference
// calls, with lam and p amplifying both alike: the kernel's largest error is up to 5.5 times the
// reference's here (6.3 with the reference built at -O1, other FMA contractions), so the fp32
// numerics take 8 times, still orders of magnitude below what one bf16 rounding of an operand
// (2^-8) would add. dL/dp comes from fp32 values only, in either numerics: the fp32 part, and the
// error of the kernel's fp32 sums of each row's sum_j W dW ln(x/m) and sum_j W ln(x/m) (the
// reference adds them in double): at most (t+1) 2^-24 times each sum's magnitudes. ssmax's dL/ds =
// sum_t ln(n_t) / sqrt(hd) sum_j ds_tj d_tj (d_tj = qe_t . ke_j), summed in double by both: the fp32
// part, and to first order the errors of its fp32 inputs and products, each operation rounding once:
//   d_tj:  hd 2^-24 sum_i |qe_ti ke_ji| (e_d, the fp32 dot product, in either numerics);
//   A_tj:  A_tj (r_j + max_k r_k + 2^-23), r_j = |c_t| e_d + 2^-24 (|s_tj| + |s_tj - max_k s_tk|) +
//          2^-23 (the score's FMA, the shift, the exp polynomial's 2 ulp; S1 in double; 1/S1 and A);
//   ds_tj = A_tj (dW_tj - D1): the error of A times |dW_tj - D1|, A_tj times the errors of dW_tj
//          and of D1 = sum_k A_tk dW_tk (its t+1 fp32 terms and their inputs), and 3 2^-24 |ds_tj|;
//   and 2^-24 |ds_tj d_tj| for each product.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "attention/attention_cpu.h"
#include "attention/attention_fast_cpu.h"
#include "layers/fast_cpu.h"
#include "test/gradcheck.h"
#include "test/test_variants.h"

// attention/attention_fast_cpu.cpp: ln(x) or ln(1 + x) of n floats (a multiple of 16) on the
// dispatched target, the kernels' own vector functions
void attention_fast_log_for_test(float* out, const float* in, int n, bool plus1);


// ----------------------------------------------------------------------------
// the configurations: target x numerics (x the bf16 dot on AVX3)

struct Config {
    int64_t target;
    FastNumerics num;
    bool dot;  // bf16 on AVX3 with AVX512-BF16: vdpbf16ps (true) or its emulation
    std::string name;
};

// every target the CPU runs, best first
static std::vector<Config> configs() {
    std::vector<Config> out;
    for (int64_t t : fast_cpu_targets()) {
        std::string name = fast_cpu_target_name(t);
        out.push_back({t, FastNumerics::fp32, false, name + " fp32"});
        bool avx3 = name == "AVX3";
        if (avx3 && fast_cpu_has_bf16_dot()) out.push_back({t, FastNumerics::bf16, true, name + " bf16 +BF16"});
        out.push_back({t, FastNumerics::bf16, false, name + " bf16" + (avx3 && fast_cpu_has_bf16_dot() ? " emulated" : "")});
    }
    return out;
}

// the configuration in force while it lives (the best target and the dot again after)
struct UseConfig {
    explicit UseConfig(const Config& c) {
        REQUIRE(fast_cpu_force_target(c.target));
        fast_cpu_allow_bf16_dot(c.dot);
        if (c.num == FastNumerics::bf16) REQUIRE(fast_cpu_uses_bf16_dot() == c.dot);
    }
    ~UseConfig() {
        fast_cpu_force_target(0);
        fast_cpu_allow_bf16_dot(true);
    }
};

TEST_CASE("the targets: every one the CPU runs is compiled in; forcing one dispatches to it") {
    std::vector<int64_t> t = fast_cpu_targets();
    REQUIRE(!t.empty());
    std::string all;
    for (int64_t x : t) all += std::string(fast_cpu_target_name(x)) + " ";
    MESSAGE("targets: " << all << "(best: " << fast_cpu_target() << "), the CPU's AVX512-BF16: "
                        << fast_cpu_has_bf16_dot() << ", its dot products dispatched: " << fast_cpu_uses_bf16_dot());
    for (int64_t x : t) {
        REQUIRE(fast_cpu_force_target(x));
        CHECK(fast_cpu_target().rfind(fast_cpu_target_name(x), 0) == 0);
        fast_cpu_allow_bf16_dot(false);
        CHECK(fast_cpu_target() == fast_cpu_target_name(x));
        fast_cpu_allow_bf16_dot(true);
    }
    fast_cpu_force_target(0);
    CHECK(fast_cpu_target().rfind(fast_cpu_target_name(t[0]), 0) == 0);
}

// ----------------------------------------------------------------------------

struct AttnShape {
    int B, T, NH, hd;
    int C() const { return NH * hd; }
    size_t qkv_size() const { return (size_t)B * T * 3 * C(); }
    size_t out_size() const { return (size_t)B * T * C(); }
    size_t stats_size() const { return (size_t)B * NH * T * 3; }
    size_t at(int b, int t, int which, int h) const { return ((size_t)(b * T + t) * 3 + which) * C() + h * hd; }
    size_t out_at(int b, int t, int h) const { return (size_t)(b * T + t) * C() + h * hd; }
};

static float bf16_round_f(float x) {  // round to nearest even, as the kernels' conversions
    uint32_t bits;
    memcpy(&bits, &x, 4);
    bits += 0x7fffu + ((bits >> 16) & 1);
    bits &= 0xffff0000u;
    memcpy(&x, &bits, 4);
    return x;
}
// an operand of the numerics' products as the kernel takes it
static double op_round(FastNumerics num, double x) { return num == FastNumerics::bf16 ? bf16_round_f((float)x) : (float)x; }

// the numerics' roundings (the header's formulas): u of each operand, acc per term of a sum
struct Roundings {
    double u, acc;
    double fp32_times;  // the fp32 part of y, dq, dk, dv: times the float32 reference's error
    explicit Roundings(FastNumerics num)
        : u(num == FastNumerics::bf16 ? 1.0 / 256 : 0.0), acc(std::ldexp(1.0, num == FastNumerics::bf16 ? -23 : -24)),
          fp32_times(num == FastNumerics::bf16 ? 4 : 8) {}
    double factor(int n) const { return 2 * u + n * acc; }
};

// the largest error / bound of every check, per numerics (the last test case prints them)
static std::map<std::string, double> worst_ratio;
static void note(const Config& c, const char* what, double ratio) {
    std::string key = std::string(fast_numerics_name(c.num)) + " " + what;
    worst_ratio[key] = std::max(worst_ratio[key], ratio);
}

// ----------------------------------------------------------------------------
// the reference, its float32 build, the kernel, and the bounds

struct Run {  // one implementation's results on one input
    std::vector<double> y, stats, dqkv, dp;
};

// The float64 reference, and the sums the bounds scale by each numerics' roundings
struct Reference : Run {
    std::vector<double> y_sum, dv_sum;  // per element of y (B,T,C): sum_j |W v|; of dv: sum_t |W dy|
    std::vector<double> dq_sum, dk_sum;  // per row (B,T,NH) of dq and dk: the L2 norm of sum |c ds| |k| (|q|)
    std::vector<double> dp_sums;         // per head: the fp32 row sums' error bound
};

// y and stats by the reference's row function (attention_row_weights, what attention_forward runs),
// ds by its attn_row_dscores, with the bounds' sums in the same pass; dqkv and dL/dp by
// attention_backward
static Reference reference(const std::vector<double>& qkv, const std::vector<double>& dout, const AttnShape& s,
                           AttnKind kind, double p, const double* p_head, bool backward, int attn_len) {
    Reference ref;
    const int T = s.T, hd = s.hd, NH = s.NH;
    const AttnVariant V = attn_variant(kind);
    ref.y.assign(s.out_size(), 0.0);
    ref.stats.assign(s.stats_size(), 0.0);
    ref.y_sum.assign(s.out_size(), 0.0);
    ref.dv_sum.assign(s.out_size(), 0.0);
    ref.dq_sum.assign((size_t)s.B * T * NH, 0.0);
    ref.dk_sum.assign((size_t)s.B * T * NH, 0.0);
    ref.dp_sums.assign(NH, 0.0);
    std::vector<double> qe, ke, qn, kn, w(T), sc(T), a(T), dW(T), dW_err(T), ds(T), dA(T);
    ref::attention_prepare(qe, ke, qn, kn, qkv.data(), s.B, T, NH, hd, kind);
    std::vector<double> bq((size_t)T * hd), bk((size_t)T * hd);
    for (int b = 0; b < s.B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t head = (size_t)b * NH + h;
            double ph = p_head ? p_head[h] : p;
            const double *qe_h = &qe[head * T * hd], *ke_h = &ke[head * T * hd];
            std::fill(bq.begin(), bq.end(), 0.0);
            std::fill(bk.begin(), bk.end(), 0.0);
            for (int t = 0; t < T; t++) {
                double* st = &ref.stats[(head * T + t) * 3];
                bool live = ref::attention_row_weights(w.data(), sc.data(), a.data(), st, qe_h + (size_t)t * hd, ke_h, t,
                                                       hd, kind, ph, attn_len);
                double* y = &ref.y[s.out_at(b, t, h)];
                double* yb = &ref.y_sum[s.out_at(b, t, h)];
                const double* dy = &dout[s.out_at(b, t, h)];
                for (int j = 0; j <= t; j++) {
                    const double* v = &qkv[s.at(b, j, 2, h)];
                    for (int i = 0; i < hd; i++) y[i] += w[j] * v[i], yb[i] += std::fabs(w[j] * v[i]);
                }
                if (!backward) continue;
                for (int j = 0; j <= t; j++) {
                    const double* v = &qkv[s.at(b, j, 2, h)];
                    double d = 0, mag = 0;
                    for (int i = 0; i < hd; i++) {
                        d += dy[i] * v[i], mag += std::fabs(dy[i] * v[i]);
                        ref.dv_sum[s.out_at(b, j, h) + i] += std::fabs(w[j] * dy[i]);
                    }
                    dW[j] = d;
                    dW_err[j] = hd * std::ldexp(mag, -24);  // dW_j's fp32 dot product of hd terms
                }
                double S1 = 0;
                for (int j = 0; j <= t; j++) S1 += a[j];
                if (!live || (V.norm == ATTN_NORM_L1 && S1 == 0)) continue;  // a degenerate row: no gradient
                attn_dispatch(kind, [&](auto k) {
                    ref::attn_row_dscores<decltype(k)::value>(ds.data(), dA.data(), dW.data(), w.data(), sc.data(),
                                                              a.data(), st, t, ph, attn_len);
                });
                if (V.reweight) {
                    // dL/dp_t = sum_j W_j ln(x_j/m) (dW_j - D2): the fp32 sums of its two terms, and
                    // the errors of its fp32 inputs dW_j and D2 = sum_j W_j dW_j (t+1 terms)
                    double D2 = 0, D2_err = 0, A1 = 0, A2 = 0, AdW = 0, n = t + 1, o = ref::lssar_bias(t);
                    for (int j = 0; j <= t; j++) {
                        D2 += w[j] * dW[j];
                        D2_err += (t + 1) * std::ldexp(std::fabs(w[j] * dW[j]), -24) + w[j] * dW_err[j];
                    }
                    for (int j = 0; j <= t; j++) {
                        double A = V.norm == ATTN_NORM_L1 ? a[j] / S1 : V.norm == ATTN_NORM_MEAN ? a[j] / n : a[j];
                        double x = n * A - o;
                        if (!(x > 0)) continue;
                        double lr = std::log(x / st[1]);
                        A1 += std::fabs(w[j] * dW[j] * lr), A2 += std::fabs(w[j] * lr), AdW += std::fabs(w[j] * lr) * dW_err[j];
                    }
                    ref.dp_sums[h] += (t + 1) * std::ldexp(A1 + std::fabs(D2) * A2, -24) + AdW + A2 * D2_err;
                }
                double c = 0;  // the row's score scale c_t
                attn_dispatch(kind, [&](auto k) {
                    c = std::fabs(ref::attn_score_scale<decltype(k)::value, double>(t, hd, attn_len, ph));
                });
                if (V.score == ATTN_SCORE_SSMAX) {
                    // the header's first-order bound of the row's fp32 terms of dL/ds
                    const double u24 = std::ldexp(1.0, -24);
                    double smax = *std::max_element(sc.begin(), sc.begin() + t + 1), rmax = 0, D1 = 0, D1_err = 0, e = 0;
                    std::vector<double> d(t + 1), e_d(t + 1), r(t + 1);
                    for (int j = 0; j <= t; j++) {
                        double mag = 0;
                        d[j] = 0;
                        for (int i = 0; i < hd; i++) {
                            d[j] += qe_h[(size_t)t * hd + i] * ke_h[(size_t)j * hd + i];
                            mag += std::fabs(qe_h[(size_t)t * hd + i] * ke_h[(size_t)j * hd + i]);
                        }
                        e_d[j] = hd * mag * u24;
                        r[j] = c * e_d[j] + u24 * (std::fabs(sc[j]) + std::fabs(sc[j] - smax)) + 2 * u24;
                        rmax = std::max(rmax, r[j]);
                        D1 += w[j] * dW[j];
                    }
                    for (int j = 0; j <= t; j++)
                        D1_err += (t + 1) * u24 * std::fabs(w[j] * dW[j]) + w[j] * dW_err[j] +
                                  w[j] * (r[j] + rmax + 2 * u24) * std::fabs(dW[j]);
                    for (int j = 0; j <= t; j++) {
                        double e_A = w[j] * (r[j] + rmax + 2 * u24);
                        double e_ds = e_A * std::fabs(dW[j] - D1) + w[j] * (dW_err[j] + D1_err) + 3 * u24 * std::fabs(ds[j]);
                        e += e_ds * std::fabs(d[j]) + std::fabs(ds[j]) * e_d[j] + u24 * std::fabs(ds[j] * d[j]);
                    }
                    ref.dp_sums[h] += e * std::log(t + 1.0) / std::sqrt((double)hd);
                }
                for (int j = 0; j <= t; j++) {
                    double f = c * std::fabs(ds[j]);
                    for (int i = 0; i < hd; i++) {
                        bq[(size_t)t * hd + i] += f * std::fabs(ke_h[(size_t)j * hd + i]);
                        bk[(size_t)j * hd + i] += f * std::fabs(qe_h[(size_t)t * hd + i]);
                    }
                }
            }
            if (!backward) continue;
            for (int t = 0; t < T; t++) {
                double nq = 0, nk = 0;
                for (int i = 0; i < hd; i++)
                    nq += bq[(size_t)t * hd + i] * bq[(size_t)t * hd + i], nk += bk[(size_t)t * hd + i] * bk[(size_t)t * hd + i];
                double sq = 1, sk = 1;
                if (V.score == ATTN_SCORE_COS_LEN) {
                    sq = 1 / std::max(qn[head * T + t], ref::LSSA_NORM_EPS);
                    sk = 1 / std::max(kn[head * T + t], ref::LSSA_NORM_EPS);
                }
                ref.dq_sum[((size_t)b * T + t) * NH + h] = std::sqrt(nq) * sq;
                ref.dk_sum[((size_t)b * T + t) * NH + h] = std::sqrt(nk) * sk;
            }
        }
    }
    if (backward) {
        ref.dqkv.assign(s.qkv_size(), 0.0);
        ref.dp.assign(NH, 0.0);
        ref::attention_backward(ref.dqkv.data(), dout.data(), qkv.data(), s.B, T, NH, hd, kind, p, p_head, ref.dp.data(),
                                attn_len);
    }
    return ref;
}

static std::vector<float> to_float(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }
static std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// The reference's float32 build on the float32 inputs
static Run reference32(const std::vector<float>& qkv, const std::vector<float>& dout, const AttnShape& s, AttnKind kind,
                       double p, const double* p_head, bool backward, int attn_len) {
    std::vector<float> y(s.out_size()), st(s.stats_size()), d(s.qkv_size(), 0.0f);
    Run r;
    r.dp.assign(s.NH, 0.0);
    ref::attention_forward(y.data(), st.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, p_head, attn_len);
    if (backward)
        ref::attention_backward(d.data(), dout.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, p_head, r.dp.data(),
                                attn_len);
    r.y = to_double(y), r.stats = to_double(st), r.dqkv = to_double(d);
    return r;
}

// The kernel on the float32 inputs in the configuration in force (dqkv starts as NaN: the backward
// must write every element)
static Run kernel(FastNumerics num, const std::vector<float>& qkv, const std::vector<float>& dout, const AttnShape& s,
                  AttnKind kind, double p, const double* p_head, bool backward = true, int attn_len = 0) {
    AttentionFast attn;
    std::vector<float> y(s.out_size()), st(s.stats_size()), d(s.qkv_size(), std::nanf(""));
    Run r;
    r.dp.assign(s.NH, 0.0);
    attn.forward(num, y.data(), st.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, p_head, attn_len);
    if (backward)
        attn.backward(num, d.data(), dout.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, p_head, r.dp.data(), attn_len);
    r.y = to_double(y), r.stats = to_double(st), r.dqkv = to_double(d);
    return r;
}

static double max_abs(const std::vector<double>& x) {
    double m = 0;
    for (double v : x) m = std::max(m, std::fabs(v));
    return m;
}
static double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
}

// q, k or v part (which = 0, 1, 2) of a dqkv as its own vector
static std::vector<double> part(const std::vector<double>& dqkv, const AttnShape& s, int which) {
    std::vector<double> out;
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++)
            for (int h = 0; h < s.NH; h++)
                for (int i = 0; i < s.hd; i++) out.push_back(dqkv[s.at(b, t, which, h) + i]);
    return out;
}
static double l2(const double* x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return std::sqrt(s);
}
static double l2_diff(const double* a, const double* b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(s);
}

// Every check of the header's tolerances on one kernel run in configuration c
static void check_run(const Run& got, const Reference& ref, const Run& r32, const AttnShape& s, AttnKind kind,
                      const Config& c, bool backward) {
    const Roundings rd(c.num);
    // forward: every element within its bound; the stats in fp32 (x 4 of float32's error)
    double y_scale = max_abs(ref.y), y_fp32 = rd.fp32_times * max_diff(r32.y, ref.y) + 1e-6 * y_scale;
    size_t bad = 0, nonfinite = 0;
    double worst = 0;
    for (size_t i = 0; i < ref.y.size(); i++) {
        int t = (int)(i / s.C()) % s.T;
        nonfinite += !std::isfinite(got.y[i]);
        double err = std::fabs(got.y[i] - ref.y[i]), tol = rd.factor(t + 1) * ref.y_sum[i] + y_fp32;
        bad += !(err <= tol);
        worst = std::max(worst, err / tol);
    }
    note(c, "y", worst);
    CHECK(nonfinite == 0);
    CHECK_MESSAGE(bad == 0, bad << " outputs outside their bound; largest error / bound " << worst);
    double st_tol = 4 * max_diff(r32.stats, ref.stats) + 1e-6 * std::max(1.0, max_abs(ref.stats));
    CHECK(max_diff(got.stats, ref.stats) <= st_tol);
    if (!backward) return;

    // backward: dv per element, dq and dk per row (L2), dL/dp per head
    for (double g : got.dqkv) REQUIRE(std::isfinite(g));
    std::vector<double> dv = part(got.dqkv, s, 2), dv64 = part(ref.dqkv, s, 2), dv32 = part(r32.dqkv, s, 2);
    double dv_fp32 = rd.fp32_times * max_diff(dv32, dv64) + 1e-6 * max_abs(dv64);
    bad = 0, worst = 0;
    for (size_t i = 0; i < dv.size(); i++) {
        double err = std::fabs(dv[i] - dv64[i]), tol = rd.factor(s.T) * ref.dv_sum[i] + dv_fp32;
        bad += !(err <= tol);
        worst = std::max(worst, err / tol);
    }
    note(c, "dv", worst);
    CHECK_MESSAGE(bad == 0, bad << " dv elements outside their bound; largest error / bound " << worst);
    for (int which = 0; which < 2; which++) {
        std::vector<double> d = part(got.dqkv, s, which), d64 = part(ref.dqkv, s, which), d32 = part(r32.dqkv, s, which);
        const std::vector<double>& sum = which == 0 ? ref.dq_sum : ref.dk_sum;
        size_t rows = sum.size();
        double fp32 = 0, scale = 0;
        for (size_t r = 0; r < rows; r++) {
            fp32 = std::max(fp32, l2_diff(&d32[r * s.hd], &d64[r * s.hd], s.hd));
            scale = std::max(scale, l2(&d64[r * s.hd], s.hd));
        }
        fp32 = rd.fp32_times * fp32 + 1e-6 * scale;
        bad = 0, worst = 0;
        for (size_t r = 0; r < rows; r++) {
            int t = (int)(r / s.NH) % s.T;  // rows (B, T, NH)
            double f = which == 0 ? rd.factor(t + 1) : rd.factor(s.T);
            double err = l2_diff(&d[r * s.hd], &d64[r * s.hd], s.hd), tol = f * sum[r] + fp32;
            bad += !(err <= tol);
            worst = std::max(worst, err / tol);
        }
        note(c, which == 0 ? "dq" : "dk", worst);
        CHECK_MESSAGE(bad == 0, (which == 0 ? "dq" : "dk") << ": " << bad << " rows outside their bound; largest error / bound " << worst);
    }
    if (attn_head_param(kind) != ATTN_HEAD_NONE) {
        for (int h = 0; h < s.NH; h++) {
            double tol = ref.dp_sums[h] + 4 * std::fabs(r32.dp[h] - ref.dp[h]) + 1e-6 * std::fabs(ref.dp[h]);
            note(c, attn_head_param(kind) == ATTN_HEAD_S ? "dL/ds" : "dL/dp", std::fabs(got.dp[h] - ref.dp[h]) / tol);
            CHECK_MESSAGE(std::fabs(got.dp[h] - ref.dp[h]) <= tol,
                          "dL/dp head " << h << ": " << got.dp[h] << " against " << ref.dp[h] << ", bound " << tol);
        }
    }
}

// The references once, then every configuration; returns the
// kernel's results per configuration, in configs()'s order, for further checks.
static std::vector<Run> check_against_reference(const std::vector<double>& qkv64, const std::vector<double>& dout64,
                                                const AttnShape& s, AttnKind kind, double p,
                                                const double* p_head = nullptr, bool backward = true, int attn_len = 0) {
    std::vector<float> qkv = to_float(qkv64), dout = to_float(dout64);
    std::vector<double> qkv_in = to_double(qkv), dout_in = to_double(dout);  // what the float32 builds see
    Reference ref = reference(qkv_in, dout_in, s, kind, p, p_head, backward, attn_len);
    Run r32 = reference32(qkv, dout, s, kind, p, p_head, backward, attn_len);
    INFO(std::string(attn_kind_name(kind)) << " p=" << p << " attn_len=" << attn_len << " (B, T, NH, hd) = (" << s.B << ", "
         << s.T << ", " << s.NH << ", " << s.hd << ")");
    std::vector<Run> runs;
    for (const Config& c : configs()) {
        INFO("target and numerics: " << c.name);
        UseConfig use(c);
        runs.push_back(kernel(c.num, qkv, dout, s, kind, p, p_head, backward, attn_len));
        check_run(runs.back(), ref, r32, s, kind, c, backward);
    }
    return runs;
}

static std::vector<double> random_inputs(size_t n, uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    return random_vector(n, rng, scale);
}

// ----------------------------------------------------------------------------
// vector functions

TEST_CASE("ln and ln(1 + x) are within 2 ulp of libm on every target (subnormal to huge arguments, tiny x)") {
    auto ulps = [](float got, double ref) {
        double ulp = std::ldexp(1.0, std::ilogb((float)ref) - 23);  // of the float nearest ref
        return std::fabs(got - ref) / ulp;
    };
    const int n = 20000 * 16;
    std::vector<float> x(n), e(n), y(n), z(n);
    for (int k = 0; k < n; k++) {
        x[k] = std::ldexp(1.0f + (float)(k % 9973) / 9973, k % 280 - 150);  // 2^-150 .. 2^130
        if (!std::isfinite(x[k]) || x[k] == 0) x[k] = 1.5f;
        e[k] = ((k / 16) % 2 == 0) ? (float)k / n : std::ldexp(1.0f, -k % 60);  // [0, 1], tiny
    }
    for (const Config& c : configs()) {
        if (c.num != FastNumerics::fp32) continue;  // one run per target
        INFO("target: " << c.name);
        UseConfig use(c);
        attention_fast_log_for_test(y.data(), x.data(), n, false);
        attention_fast_log_for_test(z.data(), e.data(), n, true);
        double worst_log = 0, worst_log1p = 0;
        for (int k = 0; k < n; k++) {
            if (x[k] != 1.0f) worst_log = std::max(worst_log, ulps(y[k], std::log((double)x[k])));
            if (e[k] > 0) worst_log1p = std::max(worst_log1p, ulps(z[k], std::log1p((double)e[k])));
            else CHECK(z[k] == 0.0f);
        }
        MESSAGE(c.name << ": largest errors ln " << worst_log << " ulp, ln(1 + x) " << worst_log1p << " ulp");
        CHECK(worst_log <= 2.0);
        CHECK(worst_log1p <= 2.0);
    }
}

// ----------------------------------------------------------------------------
// every variant against the reference

TEST_CASE("every variant against the float64 reference: forward, stats, dq, dk, dv, dL/dp (p, ssmax's s); hd 36 and 64, T not a multiple of 8 or 16") {
    for (AttnShape s : {AttnShape{2, 37, 2, 36}, AttnShape{1, 70, 2, 64}}) {
        std::vector<double> qkv = random_inputs(s.qkv_size(), 11), dout = random_inputs(s.out_size(), 12);
        for (AttnKind kind : test_kinds()) {
            const AttnHeadParam hp = attn_head_param(kind);
            // the re-weighting's p at 1, 3, 15, 2.5; ssmax's s at its initial value, a larger one and 0
            std::vector<double> powers = hp == ATTN_HEAD_P   ? std::vector<double>{1.0, 3.0, 15.0, 2.5}
                                         : hp == ATTN_HEAD_S ? std::vector<double>{SSMAX_S0, 0.9, 0.0}
                                                             : std::vector<double>{15.0};
            for (double p : powers) check_against_reference(qkv, dout, s, kind, p);
            if (hp != ATTN_HEAD_NONE) {
                // learned p: a real and an integer power, one per head; ssmax: two values of s
                std::vector<double> p_head = hp == ATTN_HEAD_P ? std::vector<double>{2.5, 7.0} : std::vector<double>{SSMAX_S0, 0.9};
                for (const Run& r : check_against_reference(qkv, dout, s, kind, 0.0, p_head.data()))
                    for (int h = 0; h < s.NH; h++) CHECK(std::fabs(r.dp[h]) > 0);
            }
        }
    }
}

// ssmax's scores s_h ln(n_t) q_t.k_j / sqrt(hd) are linear in s_h and in q_t, so s_h dL/ds_h =
// sum_t q_t . dL/dq_t over head h's rows: a check of the kernel's dL/ds against its own dq, both
// made from the same fp32 ds, which leaves out what the bound of every variant's check must allow
// for ds itself (its inputs' and the exp's errors) and so resolves far smaller errors. In the fp32
// numerics (bf16 rounds dq's operands by up to 2^-8) the two sides differ by fp32 dot products and
// roundings only, to first order per (t, j): |c_t ds_tj| (hd + t + 8) 2^-24 sum_i |q_ti k_ji| (the
// dot q_t.k_j of dL/ds, hd terms; dq_t's fp32 sum over t + 1 keys; c_t and c_t ds_tj in fp32, and
// the product ds_tj (q_t.k_j), a few roundings). That is below 0.2% of dL/ds on these inputs, where
// the bound of every variant's check (which must count ds's own errors, and sum_j ds_tj = 0 makes
// dL/ds cancel) allows 1% to 8%. dL/ds comes from fp32 values only, computed alike in either
// numerics: the bf16 numerics give the same bits.
TEST_CASE("ssmax: s_h dL/ds_h = sum_t q_t . dL/dq_t on the kernel's own results; dL/ds the same bits in both numerics") {
    for (AttnShape s : {AttnShape{2, 37, 2, 36}, AttnShape{1, 70, 2, 64}}) {
        std::vector<float> qkv = to_float(random_inputs(s.qkv_size(), 35)), dout = to_float(random_inputs(s.out_size(), 36));
        std::vector<double> q64 = to_double(qkv), d64 = to_double(dout), s_head{SSMAX_S0, 0.9}, bound(s.NH, 0.0);
        std::vector<double> w(s.T), sc(s.T), a(s.T), dW(s.T), ds(s.T), dA(s.T);
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++)
                for (int t = 0; t < s.T; t++) {
                    double st[3], c = s_head[h] * std::log(t + 1.0) / std::sqrt((double)s.hd);
                    std::vector<double> q(&q64[s.at(b, t, 0, h)], &q64[s.at(b, t, 0, h)] + s.hd), k((size_t)(t + 1) * s.hd);
                    for (int j = 0; j <= t; j++) {
                        std::copy(&q64[s.at(b, j, 1, h)], &q64[s.at(b, j, 1, h)] + s.hd, &k[(size_t)j * s.hd]);
                        dW[j] = 0;
                        for (int i = 0; i < s.hd; i++) dW[j] += d64[s.out_at(b, t, h) + i] * q64[s.at(b, j, 2, h) + i];
                    }
                    ref::attn_row_weights<ATTN_SSMAX>(w.data(), sc.data(), a.data(), st, q.data(), k.data(), t, s.hd,
                                                      s_head[h], 0);
                    ref::attn_row_dscores<ATTN_SSMAX>(ds.data(), dA.data(), dW.data(), w.data(), sc.data(), a.data(), st, t,
                                                      s_head[h], 0);
                    for (int j = 0; j <= t; j++) {
                        double mag = 0;
                        for (int i = 0; i < s.hd; i++) mag += std::fabs(q[i] * k[(size_t)j * s.hd + i]);
                        bound[h] += std::fabs(c * ds[j]) * (s.hd + t + 8) * std::ldexp(mag, -24);
                    }
                }
        std::map<int64_t, std::vector<double>> fp32_dp;  // per target
        for (const Config& c : configs()) {
            INFO("target and numerics: " << c.name << ", (B, T, NH, hd) = (" << s.B << ", " << s.T << ", " << s.NH << ", "
                                         << s.hd << ")");
            UseConfig use(c);
            Run got = kernel(c.num, qkv, dout, s, ATTN_SSMAX, 0.0, s_head.data());
            if (c.num != FastNumerics::fp32) {
                REQUIRE(fp32_dp.count(c.target));
                CHECK(got.dp == fp32_dp[c.target]);
                continue;
            }
            fp32_dp[c.target] = got.dp;
            for (int h = 0; h < s.NH; h++) {
                double q_dq = 0;
                for (int b = 0; b < s.B; b++)
                    for (int t = 0; t < s.T; t++)
                        for (int i = 0; i < s.hd; i++) q_dq += q64[s.at(b, t, 0, h) + i] * got.dqkv[s.at(b, t, 0, h) + i];
                double err = std::fabs(s_head[h] * got.dp[h] - q_dq);
                note(c, "s dL/ds = q . dq", err / bound[h]);
                CHECK_MESSAGE(err <= bound[h], "head " << h << ": s dL/ds = " << s_head[h] * got.dp[h] << ", q . dq = " << q_dq
                                                       << ", bound " << bound[h]);
                CHECK(bound[h] < 2e-3 * std::fabs(q_dq));  // the check resolves an error of 0.2% of dL/ds
            }
        }
    }
}

// Log-length scaling (attn_len = L > 1: softmax and softmax_rw's scores times max(1, ln(n_t) / ln(L))),
// L = 16 and the smallest, 2, inside T = 37 and T = 70, against the float64 reference within the
// same bounds as every variant (the factor changes the row's scale c_t, which the bounds take, not
// the roundings they count); learned p with it. Within L the kernel computes softmax's scale and
// then the same operations: the rows with n_t <= L of the output, the stats and dq equal the
// kernel's own results without attn_len bit for bit (dk and dv sum over later rows too), and every
// result of T <= L does, on every target and numerics.
TEST_CASE("log-length scaling: softmax and softmax_rw beyond L against the float64 reference; softmax's bits within L") {
    for (AttnShape s : {AttnShape{2, 37, 2, 36}, AttnShape{1, 70, 2, 64}}) {
        std::vector<double> qkv = random_inputs(s.qkv_size(), 33), dout = random_inputs(s.out_size(), 34);
        std::vector<float> q32 = to_float(qkv), d32 = to_float(dout);
        std::vector<Config> cs = configs();
        for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW}) {
            for (double p : kind == ATTN_SOFTMAX ? std::vector<double>{0.0} : std::vector<double>{3.0, 2.5}) {
                for (int L : {16, 2}) {
                    std::vector<Run> with = check_against_reference(qkv, dout, s, kind, p, nullptr, true, L);
                    for (size_t i = 0; i < cs.size(); i++) {
                        INFO("target and numerics: " << cs[i].name << ", " << attn_kind_name(kind) << " p=" << p << " L=" << L);
                        UseConfig use(cs[i]);
                        Run per_row = kernel(cs[i].num, q32, d32, s, kind, p, nullptr, true, 0);
                        size_t same = 0, differ = 0;
                        for (int b = 0; b < s.B; b++)
                            for (int t = 0; t < s.T; t++)
                                for (int h = 0; h < s.NH; h++) {
                                    size_t o = s.out_at(b, t, h), q = s.at(b, t, 0, h), st = (((size_t)b * s.NH + h) * s.T + t) * 3;
                                    bool eq = std::equal(&with[i].y[o], &with[i].y[o] + s.hd, &per_row.y[o]) &&
                                              std::equal(&with[i].dqkv[q], &with[i].dqkv[q] + s.hd, &per_row.dqkv[q]) &&
                                              std::equal(&with[i].stats[st], &with[i].stats[st] + 3, &per_row.stats[st]);
                                    if (t + 1 <= L) CHECK(eq);
                                    same += eq, differ += !eq;
                                }
                        CHECK(same == (size_t)s.B * s.NH * L);
                        CHECK(differ == (size_t)s.B * s.NH * (s.T - L));  // beyond L the scores are scaled
                        for (int within : {s.T, 1024}) {  // T <= L: softmax's results, all of them
                            Run r = kernel(cs[i].num, q32, d32, s, kind, p, nullptr, true, within);
                            CHECK(r.y == per_row.y);
                            CHECK(r.stats == per_row.stats);
                            CHECK(r.dqkv == per_row.dqkv);
                        }
                    }
                }
            }
        }
        std::vector<double> p_head{2.5, 7.0};
        for (const Run& r : check_against_reference(qkv, dout, s, ATTN_SOFTMAX_RW, 0.0, p_head.data(), true, 16))
            CHECK(std::fabs(r.dp[0]) > 0);
    }
}

// The training-length constant (attn_len = L): sigmoid's bias -ln(L) and relu's scale 1/L on every
// row, with L = 16 inside T = 37 and T = 70 (rows below, at and above L), within the same bounds as
// every variant (the constant changes a row's factor, not the roundings the bounds count). The maps
// take it too: their rows are the forward's weights, the reference's within fp32.
TEST_CASE("attn_len: sigmoid and relu at a constant length against the float64 reference, forward and backward; maps") {
    const int L = 16;
    for (AttnShape s : {AttnShape{2, 37, 2, 36}, AttnShape{1, 70, 2, 64}}) {
        std::vector<double> qkv = random_inputs(s.qkv_size(), 31), dout = random_inputs(s.out_size(), 32);
        for (AttnKind kind : {ATTN_SIGMOID, ATTN_RELU}) {
            std::vector<Run> with = check_against_reference(qkv, dout, s, kind, 0.0, nullptr, true, L);
            std::vector<double> qe, ke, qn, kn, w(s.T), sc(s.T), a(s.T);
            std::vector<float> q32 = to_float(qkv);
            std::vector<double> in = to_double(q32);
            ref::attention_prepare(qe, ke, qn, kn, in.data(), 1, s.T, s.NH, s.hd, kind);
            std::vector<Config> cs = configs();
            for (size_t i = 0; i < cs.size(); i++) {
                INFO("target and numerics: " << cs[i].name);
                UseConfig use(cs[i]);
                Run per_row = kernel(cs[i].num, to_float(qkv), to_float(dout), s, kind, 0.0, nullptr, true, 0);
                CHECK(with[i].y != per_row.y);  // the constant is not n_t
                std::vector<float> W;
                std::vector<uint8_t> valid;
                attention_map_fast(cs[i].num, W, valid, q32.data(), s.T, s.NH, s.hd, 1, kind, 0.0, L);
                double worst = 0;
                for (int t = 0; t < s.T; t++) {
                    double st[3];
                    ref::attention_row_weights(w.data(), sc.data(), a.data(), st, &qe[((size_t)s.T + t) * s.hd],
                                               &ke[(size_t)s.T * s.hd], t, s.hd, kind, 0.0, L);
                    // fp32 scores of hd products of size ~1 (error ~hd 2^-24 |q||k| / sqrt(hd)), then
                    // phi and one division: 1e-5 absolute is far above that, and far below the weights (~0.1)
                    for (int j = 0; j <= t; j++) worst = std::max(worst, std::fabs(W[(size_t)t * s.T + j] - w[j]));
                }
                CAPTURE(worst);
                CHECK(worst < 1e-5);
            }
        }
    }
}

TEST_CASE("a wiring error is caught: the bounds are far below an O(1) change of the inputs' roles") {
    // the kernel on q and k exchanged against the reference on the original: every bound must fail
    AttnShape s{1, 21, 1, 36};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 31), swapped = qkv;
    for (int t = 0; t < s.T; t++)
        for (int i = 0; i < s.hd; i++) std::swap(swapped[s.at(0, t, 0, 0) + i], swapped[s.at(0, t, 1, 0) + i]);
    std::vector<float> in = to_float(swapped), dout = to_float(random_inputs(s.out_size(), 32));
    Reference ref = reference(to_double(to_float(qkv)), to_double(dout), s, ATTN_LSSAR, 15.0, nullptr, false, 0);
    for (const Config& c : configs()) {
        INFO("target and numerics: " << c.name);
        UseConfig use(c);
        Run got = kernel(c.num, in, dout, s, ATTN_LSSAR, 15.0, nullptr, false);
        const Roundings rd(c.num);
        size_t outside = 0;
        for (size_t i = 0; i < ref.y.size(); i++)
            outside += std::fabs(got.y[i] - ref.y[i]) > rd.factor(s.T) * ref.y_sum[i] + 1e-5;
        CHECK(outside > ref.y.size() / 2);
    }
}

// ----------------------------------------------------------------------------
// the reference's edge cases

TEST_CASE("row 0 sees only itself: l1 variants give v_0 exactly as the numerics takes it (relu_l1_rw: 0), sigmoid and relu phi(s_00) v_0") {
    AttnShape s{1, 6, 1, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 12), dout = random_inputs(s.out_size(), 13);
    std::vector<Config> cs = configs();
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        std::vector<Run> runs = check_against_reference(qkv, dout, s, kind, 15.0);
        std::vector<float> q32 = to_float(qkv);
        for (size_t c = 0; c < cs.size(); c++) {
            INFO("target and numerics: " << cs[c].name);
            for (int i = 0; i < s.hd; i++) {
                double v0 = op_round(cs[c].num, q32[s.at(0, 0, 2, 0) + i]);
                if (kind == ATTN_RELU_L1_RW) CHECK(runs[c].y[i] == 0.0);  // lam_0 = 0: relu(0) = 0, a degenerate row
                else if (attn_variant(kind).norm == ATTN_NORM_L1) CHECK(runs[c].y[i] == v0);
            }
        }
    }
}

TEST_CASE("one-hot re-weighted rows: the output is that key's v as the numerics takes it, and the row passes no gradient to its query") {
    // row t = 5: key 2 points along q, the others against it, so only x_52 > 0 (as test_attention_cpu)
    AttnShape s{1, 8, 1, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 13), dout = random_inputs(s.out_size(), 14);
    int t = 5;
    for (int i = 0; i < s.hd; i++) {
        double d = i == 0 ? 1.0 : 0.0;
        qkv[s.at(0, t, 0, 0) + i] = 2.0 * d;
        for (int j = 0; j <= t; j++) qkv[s.at(0, j, 1, 0) + i] = (j == 2 ? 3.0 : -1.5) * d + (i == 1 ? 0.01 * j : 0.0);
    }
    std::vector<Config> cs = configs();
    for (AttnKind kind : {ATTN_LSSAR, ATTN_SOFTMAX_RW, ATTN_SIGMOID_L1_RW, ATTN_RELU_L1_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        for (double p : {1.0, 3.0, 15.0}) {
            std::vector<Run> runs = check_against_reference(qkv, dout, s, kind, p);
            std::vector<float> q32 = to_float(qkv);
            for (size_t c = 0; c < cs.size(); c++) {
                INFO("target and numerics: " << cs[c].name);
                for (int i = 0; i < s.hd; i++) {
                    CHECK(runs[c].y[(size_t)t * s.hd + i] == op_round(cs[c].num, q32[s.at(0, 2, 2, 0) + i]));
                    CHECK(runs[c].dqkv[s.at(0, t, 0, 0) + i] == 0.0);  // W is locally constant
                }
            }
        }
    }
}

TEST_CASE("tied keys share their weight exactly; the maps' rows are the weights the forward multiplied v by") {
    AttnShape s{1, 23, 2, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 17), dout = random_inputs(s.out_size(), 18);
    for (int i = 0; i < s.hd; i++) qkv[s.at(0, 4, 1, 1) + i] = qkv[s.at(0, 2, 1, 1) + i];  // k_4 = k_2 in head 1
    std::vector<float> q32 = to_float(qkv);
    std::vector<Config> cs = configs();
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        std::vector<Run> runs = check_against_reference(qkv, dout, s, kind, 3.0);
        std::vector<double> qe, ke, qn, kn, w(s.T), sc(s.T), a(s.T);
        std::vector<double> in = to_double(q32);
        ref::attention_prepare(qe, ke, qn, kn, in.data(), 1, s.T, s.NH, s.hd, kind);
        for (size_t c = 0; c < cs.size(); c++) {
            INFO("target and numerics: " << cs[c].name);
            UseConfig use(cs[c]);
            std::vector<float> W;
            std::vector<uint8_t> valid;
            attention_map_fast(cs[c].num, W, valid, q32.data(), s.T, s.NH, s.hd, 1, kind, 3.0);
            for (int t = 4; t < s.T; t++) CHECK(W[(size_t)t * s.T + 2] == W[(size_t)t * s.T + 4]);
            // y_t of head 1 from the map's row, in double on the operands as the numerics takes them:
            // the forward's output up to its fp32 accumulation (at most two roundings of 2^-24 of the
            // running sum per pair of keys)
            for (int t = 0; t < s.T; t++) {
                double st[3];
                bool live = ref::attention_row_weights(w.data(), sc.data(), a.data(), st, &qe[((size_t)s.T + t) * s.hd],
                                                       &ke[(size_t)s.T * s.hd], t, s.hd, kind, 3.0);
                CHECK(valid[t] == (live ? 1 : 0));
                for (int i = 0; i < s.hd; i++) {
                    double y = 0, mag = 0;
                    for (int j = 0; j <= t; j++) {
                        double term = op_round(cs[c].num, W[(size_t)t * s.T + j]) * op_round(cs[c].num, q32[s.at(0, j, 2, 1) + i]);
                        y += term, mag += std::fabs(term);
                    }
                    CHECK(std::fabs(y - runs[c].y[s.out_at(0, t, 1) + i]) <= (t + 2) * std::ldexp(mag, -24) + 1e-30);
                }
            }
        }
    }
}

TEST_CASE("degenerate zero-query rows: y = 0, Z = 0 in the stats, no gradient, never 0/0") {
    AttnShape s{1, 7, 1, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 14), dout(s.out_size(), 1.0);
    int t = 3;
    for (int i = 0; i < s.hd; i++) qkv[s.at(0, t, 0, 0) + i] = 0.0;
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        for (const Run& r : check_against_reference(qkv, dout, s, kind, 15.0)) {
            bool zero_row = attn_reweights(kind) || attn_variant(kind).phi == ATTN_PHI_RELU;
            if (attn_reweights(kind)) CHECK(r.stats[t * 3 + 2] == 0.0);
            if (zero_row) {
                for (int i = 0; i < s.hd; i++) CHECK(r.y[(size_t)t * s.hd + i] == 0.0);
                for (int i = 0; i < s.hd; i++) CHECK(r.dqkv[s.at(0, t, 0, 0) + i] == 0.0);
            }
        }
    }
}

TEST_CASE("relu rows with no positive score: relu gives y = 0, relu_l1_rw is degenerate (S1 = 0); no gradient") {
    AttnShape s{1, 8, 1, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 18), dout(s.out_size(), 1.0);
    int t = 5;
    for (int j = 0; j <= t; j++)
        for (int i = 0; i < s.hd; i++) qkv[s.at(0, j, 1, 0) + i] = (i == 0 ? 2.0 : 0.0) + 0.2 * qkv[s.at(0, j, 1, 0) + i];
    for (int i = 0; i < s.hd; i++) qkv[s.at(0, t, 0, 0) + i] = i == 0 ? -1.5 : 0.1 * i;
    for (AttnKind kind : {ATTN_RELU, ATTN_RELU_L1_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        for (const Run& r : check_against_reference(qkv, dout, s, kind, 3.0)) {
            for (int i = 0; i < s.hd; i++) CHECK(r.y[(size_t)t * s.hd + i] == 0.0);
            for (int i = 0; i < s.hd; i++) CHECK(r.dqkv[s.at(0, t, 0, 0) + i] == 0.0);
            if (kind == ATTN_RELU_L1_RW) CHECK(r.stats[t * 3 + 0] == 0.0);
        }
    }
}

TEST_CASE("saturated sigmoids (|s| ~ 100 and ~ 20) stay finite and within bounds") {
    AttnShape s{1, 7, 2, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 19), dout = random_inputs(s.out_size(), 20);
    for (int i = 0; i < s.hd; i++) {
        qkv[s.at(0, 4, 0, 0) + i] *= 30.0;
        qkv[s.at(0, 6, 0, 1) + i] *= 8.0;
    }
    check_against_reference(qkv, dout, s, ATTN_SIGMOID, 0.0);
}

TEST_CASE("huge and tiny q/k norms: cos_len variants within bounds of the reference") {
    AttnShape s{1, 7, 2, 8};
    std::vector<double> qkv = random_inputs(s.qkv_size(), 15), dout = random_inputs(s.out_size(), 16);
    for (int i = 0; i < s.hd; i++) {
        qkv[s.at(0, 4, 0, 0) + i] *= 1e6;
        qkv[s.at(0, 2, 1, 0) + i] *= 1e-6;
        qkv[s.at(0, 5, 1, 1) + i] *= 1e8;
        qkv[s.at(0, 6, 0, 1) + i] *= 1e-9;
    }
    for (AttnKind kind : test_kinds())
        if (attn_variant(kind).score == ATTN_SCORE_COS_LEN) check_against_reference(qkv, dout, s, kind, 15.0);
}

TEST_CASE("float32 q and k norms of 2^66 and 2^100 (their squares overflow float32): the same outputs bit for bit, gradients scaled") {
    AttnShape s{1, 7, 2, 8};
    std::vector<float> qkv = to_float(random_inputs(s.qkv_size(), 21)), dout = to_float(random_inputs(s.out_size(), 22));
    const std::vector<size_t> huge_rows = {s.at(0, 4, 0, 0), s.at(0, 2, 1, 0), s.at(0, 5, 1, 1)};  // q, k, k
    for (const Config& c : configs()) {
        INFO("target and numerics: " << c.name);
        UseConfig use(c);
        for (int exponent : {66, 100}) {
            std::vector<float> huge = qkv;
            for (size_t row : huge_rows)
                for (int i = 0; i < s.hd; i++) huge[row + i] = std::ldexp(huge[row + i], exponent);
            for (AttnKind kind : {ATTN_LSSA, ATTN_LSSAR}) {
                CAPTURE(exponent);
                CAPTURE(std::string(attn_kind_name(kind)));
                Run ref = kernel(c.num, qkv, dout, s, kind, 15.0, nullptr), got = kernel(c.num, huge, dout, s, kind, 15.0, nullptr);
                CHECK(got.y == ref.y);
                for (size_t row : huge_rows) {
                    double gmax = 0, err = 0;
                    for (int i = 0; i < s.hd; i++) {
                        gmax = std::max(gmax, std::fabs(ref.dqkv[row + i]));
                        err = std::max(err, std::fabs(std::ldexp(got.dqkv[row + i], exponent) - ref.dqkv[row + i]));
                        got.dqkv[row + i] = ref.dqkv[row + i] = 0;
                    }
                    REQUIRE(gmax > 0);
                    // exact at 2^66; at 2^100 the gradients are ~1e-37, at float32's smallest normals
                    CHECK_MESSAGE(err <= (exponent == 66 ? 0.0 : 1e-2 * gmax), "row " << row << ": " << err << " of " << gmax);
                }
                CHECK(got.dqkv == ref.dqkv);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// LSSAR at long length (doc/attention.md, 'Stable evaluation of the re-weighting'), as
// test_attention_cpu's: x up to thousands (keys sharing a direction, queries pointing away) and
// x ~ 1e-3 (nearly identical keys)

static std::vector<double> shared_direction_keys(int T, int hd, uint64_t seed) {
    Rng rng(seed);
    std::vector<double> qkv((size_t)T * 3 * hd);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hd; i++) {
            double d = i == 0 ? 1.0 : 0.0;
            qkv[(size_t)t * 3 * hd + i] = -d + 0.1 * rng.normal();
            qkv[(size_t)t * 3 * hd + hd + i] = d + 0.1 * rng.normal();
            qkv[(size_t)t * 3 * hd + 2 * hd + i] = rng.normal();
        }
    return qkv;
}
static std::vector<double> nearly_identical_keys(int T, int hd, uint64_t seed) {
    Rng rng(seed);
    std::vector<double> qkv((size_t)T * 3 * hd);
    std::vector<double> dir = random_vector(hd, rng);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hd; i++) {
            qkv[(size_t)t * 3 * hd + i] = rng.normal();
            qkv[(size_t)t * 3 * hd + hd + i] = dir[i] + 1e-4 * rng.normal();
            qkv[(size_t)t * 3 * hd + 2 * hd + i] = rng.normal();
        }
    return qkv;
}

TEST_CASE("LSSAR at long length: keys sharing a direction (forward T = 4096), nearly identical keys (T = 2048); backward at T = 512") {
    for (int which = 0; which < 2; which++) {
        INFO((which == 0 ? "keys sharing a direction" : "nearly identical keys"));
        AttnShape fwd{1, which == 0 ? 4096 : 2048, 1, 64}, bwd{1, 512, 1, 64};
        auto inputs = [&](int T) { return which == 0 ? shared_direction_keys(T, 64, 21) : nearly_identical_keys(T, 64, 22); };
        for (const Run& r : check_against_reference(inputs(fwd.T), std::vector<double>(fwd.out_size(), 0.0), fwd, ATTN_LSSAR,
                                                    15.0, nullptr, false))
            for (double y : r.y) REQUIRE(std::isfinite(y));
        check_against_reference(inputs(bwd.T), random_inputs(bwd.out_size(), 23), bwd, ATTN_LSSAR, 15.0);
    }
}

// ----------------------------------------------------------------------------

TEST_CASE("the same bits for 1 and 2 threads (rows, heads and dL/dp sums have one order), on every target and numerics") {
    AttnShape s{3, 45, 2, 36};
    std::vector<float> qkv = to_float(random_inputs(s.qkv_size(), 41)), dout = to_float(random_inputs(s.out_size(), 42));
    int threads = omp_get_max_threads();
    for (const Config& c : configs()) {
        INFO("target and numerics: " << c.name);
        UseConfig use(c);
        for (AttnKind kind : {ATTN_LSSAR, ATTN_SOFTMAX, ATTN_SSMAX}) {
            INFO(std::string(attn_kind_name(kind)));
            std::vector<double> p_head = kind == ATTN_SSMAX ? std::vector<double>{SSMAX_S0, 0.9} : std::vector<double>{2.5, 9.0};
            omp_set_num_threads(1);
            Run one = kernel(c.num, qkv, dout, s, kind, 0.0, p_head.data());
            omp_set_num_threads(2);
            Run two = kernel(c.num, qkv, dout, s, kind, 0.0, p_head.data());
            omp_set_num_threads(threads);
            CHECK(one.y == two.y);
            CHECK(one.stats == two.stats);
            CHECK(one.dqkv == two.dqkv);
            CHECK(one.dp == two.dp);
        }
    }
}

TEST_CASE("summary: the largest error / bound of every check, per numerics") {
    for (const auto& kv : worst_ratio) MESSAGE(kv.first << ": largest error / bound " << kv.second);
}
