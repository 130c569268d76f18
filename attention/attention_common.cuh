// What the attention kernels of the family share (attention/attention_forward.cuh,
// attention/attention_backward.cuh): the variant's parts on the device (score, phi, its
// derivative), the q/k scales of the cos_len score, a key-tile loader, the per-row dot
// D = dy . y, and the map from the normalised vectors' gradients to dq and dk.
// The variant is a template parameter (AttnKind K, attention/attention_kind.h) everywhere.
//
// The L2 normalisation of cos_len without rounding q/|q| to bf16: a row x is loaded to shared
// memory as x * mul, with mul a power of two that brings its largest element into [0.5, 1)
// (exact in bf16, and it keeps q.k far from fp32 overflow and underflow for huge or tiny
// norms); the mma gives (mul_q q).(mul_k k) in fp32, and the fp32 factors fac = 1/|mul x|
// (1/(mul eps) when |x| <= eps) finish the cosine: s = lam * fac_q * fac_k * acc.
// Dot scores load q and k as they are: s = acc times the row's factor (+ bias; attn_row_factor).
//
//   scales (B, NH, 4, T) fp32: q_mul, q_fac, k_mul, k_fac of every row (cos_len only), followed by
//   kfm    (B, NH, T)    fp32: k_fac k_mul of every key row, the key factor of the forward's scores
//   rowd   (B, NH, T, 2) fp32: (D2, D1) of every row (backward)
#pragma once

#include <cmath>
#include "attention/attention_kind.h"
#include "attention/tile.cuh"

constexpr float LSSA_EPS = 1e-12f;  // eps of the q/k L2 normalisation (doc/attention.md, section 'LSSA')


constexpr float ATTN_LOG2E = 1.4426950408889634f, ATTN_LN2 = 0.6931471805599453f;

// log1p(e) for e in [0, 1] as e P(e), P the degree-6 polynomial with P(0) = 1 fitted to log1p(e)/e
// (minimax in relative error, 1.43e-6 in exact arithmetic; evaluated in fp32 the relative error of
// e P(e) is <= 1.54e-6, measured on 2e6 points of [0, 1] and 1e5 from 1e-30 to 1): FMAs only, no
// MUFU, and accurate for tiny e, where log(1 + e) would round 1 + e to 1. The score it is taken of
// carries more: its fp32 dot product of 32-128 bf16 products rounds by ~5e-7 of |q||k| (typical;
// 4e-6 at worst), times lam (up to ~40), so softplus(s) is uncertain by ~1e-5 relative before the
// polynomial (degree 7: 3.6e-7, one FMA more per softplus).
// P(e), Horner from the highest degree (one FMA per degree; the coefficients are immediates)
__device__ __forceinline__ float log1p_poly(float e) {
    float q = fmaf(0.014585055410861969f, e, -0.06784173101186752f);
    q = fmaf(q, e, 0.15101774036884308f);
    q = fmaf(q, e, -0.23610898852348328f);
    q = fmaf(q, e, 0.33140358328819275f);
    q = fmaf(q, e, -0.4999074935913086f);
    return fmaf(q, e, 1.0f);
}
__device__ __forceinline__ float log1p_unit(float e) { return log1p_poly(e) * e; }

// e = exp(-|s|), one exp2 of a folded constant; softplus(s) and sigmoid(s) from it.
__device__ __forceinline__ float exp_neg_abs(float s) { return exp2f(-fabsf(s) * ATTN_LOG2E); }
__device__ __forceinline__ float softplus_from(float s, float e) { return fmaxf(s, 0.0f) + log1p_unit(e); }
__device__ __forceinline__ float sigmoid_from(float s, float e) { return (s >= 0.0f ? 1.0f : e) / (1.0f + e); }

// u = (max(x, 0) / m)^p as 2^(p log2 max(x, 0) - p log2 m), one log2 and one exp2 for any p >= 1:
// neg_p_log2_m = -p log2 m for m > 0, -inf for a row with no x > 0 (then every u = 0); x <= 0
// gives log2 0 = -inf and u = 0. On the largest key (x = m) u is 2^d with |d| at most half an ulp
// of p log2 m (the rounding of neg_p_log2_m): within 2^-16 of 1 while p log2 m < 512.
__device__ __forceinline__ float pow_rel_max(float x, float p, float neg_p_log2_m) {
    return exp2f(fmaf(log2f(fmaxf(x, 0.0f)), p, neg_p_log2_m));
}

// The head parameter (learned p, ssmax's s): the block's head h takes p_head[h] in place of the
// scalar p (p_head null: the one p of every head, as the launcher passed it).
__device__ __forceinline__ void attn_head_p(const float* p_head, int h, float* p) {
    if (p_head != nullptr) { *p = p_head[h]; }
}

// lam_t = ln(hd) ln(n_t); lam_0 = 0 exactly (fast-math logf(1) need not be 0, and relu_l1_rw's row 0
// is degenerate only if its score is exactly 0)
__device__ __forceinline__ float lssa_lam(int t, int hd) {
    return t == 0 ? 0.0f : logf((float)hd) * logf((float)(t + 1));
}

// The unit the kernels hold scores in: for phi = exp, log2 units (s log2 e, the factor folded
// into the row's scale and bias), so that exp(s - shift) is one exp2 of a difference; otherwise s.
template <AttnKind K> __host__ __device__ constexpr float attn_score_unit() {
    return AttnTraits<K>::phi == ATTN_PHI_EXP ? ATTN_LOG2E : 1.0f;
}

// The score acc * scale of a tensor-core product acc. For exp it is an fp32 product rounded on
// its own (__fmul_rn: never fused with the s - shift that follows into one FMA), in the forward
// and the backward alike: the backward rebuilds 2^(s - lse) from the forward's lse, and at large
// scores, where an ulp of s is many units of that exponent, only the same rounded s in both makes
// s - lse on the row's largest key what the forward summed.
template <AttnKind K> __device__ __forceinline__ float attn_scaled_score(float acc, float scale) {
    if constexpr (AttnTraits<K>::phi == ATTN_PHI_EXP) { return __fmul_rn(acc, scale); }
    else { return acc * scale; }
}

// The main backward takes exp's weights A = 2^(s - lse) 2^32 too large, so that the weights between
// 2^-158 and 2^-126 that fast math's flush-to-zero would make 0 stay normal in P, ds, dV, dK and dQ
// (a key seen only with weights below 2^-126, scores ~87 natural units under its rows' largest,
// would otherwise get dk = 0 where its true dk is ~1e-36: doc/attention.md, section 'Numerics').
// The shift is folded into the lse once per row before the main pass (attn_bwd_norm_kernel writes
// lse - 32 where D2 would stand, which exp without re-weighting does not read), so the loop over
// elements runs the same instructions; the gradients are taken back by 2^-32 (exact, a power of 2)
// where they leave the kernels: dK and dV at their stores, dQ in attn_normgrad_kernel, ssmax's
// dL/ds in attn_ssmax_ds_kernel. lse - 32 is exact in fp32 while |lse| < 2^28; a launch with a
// row at |lse| >= ATTN_BWD_SHIFT_LSE_LIMIT (log2 units: scores of ~1e8 nats, where rows are one-hot
// and nothing is near the flush) shifts no row (shift_off, set by attention_rowdot_kernel): dK and
// dV sum over rows, so every row of a launch must carry the same factor.
// 32: A <= 2^32 and the sums it enters (dV <= 2^32 T |dO|, dK, dQ) stay far from fp32's 3.4e38.
// Only exp without re-weighting: the re-weighting's x = n A - o needs A itself.
constexpr float ATTN_BWD_EXP_SHIFT = 32.0f, ATTN_BWD_SHIFT_LSE_LIMIT = 134217728.0f;  // 2^27
template <AttnKind K> __host__ __device__ constexpr bool attn_bwd_shifts() {
    return AttnTraits<K>::phi == ATTN_PHI_EXP && !AttnTraits<K>::reweight;
}
// The factor that takes the main backward's gradients back: 2^-32 where the launch shifted (its
// shift_off flag 0), else 1
template <AttnKind K> __device__ __forceinline__ float attn_bwd_unscale(const float* shift_off) {
    if constexpr (!attn_bwd_shifts<K>()) { return 1.0f; }
    else { return *shift_off != 0.0f ? 1.0f : 1.0f / 4294967296.0f; }
}
static_assert(ATTN_BWD_EXP_SHIFT == 32.0f, "attn_bwd_unscale's 2^-32 follows the shift");

// attn_len_n of attention/attention_kind.h on the device (constexpr host functions are not callable
// there): the n of dot_logn's bias and of mean's scale, the row's n_t = t + 1 or the constant attn_len > 0
__device__ __forceinline__ int attn_len_n_dev(int t, int attn_len) { return attn_len > 0 ? attn_len : t + 1; }

// ssmax's factor on q.k without its s: ln(n_t) / sqrt(hd); 0 exactly on row 0 (as lssa_lam: fast-math
// logf(1) need not be 0). dL/ds of the head sums ds_tj (q_t . k_j) times it.
template <int HD> __device__ __forceinline__ float attn_ssmax_len(int t) {
    return t == 0 ? 0.0f : logf((float)(t + 1)) * rsqrtf((float)HD);
}

// The factor on the tensor-core product of row t's scores, natural units: lam_t (cos_len; times
// fac_q by the caller); s_h ln(n_t) / sqrt(hd) (ssmax, hp = the head's s); 1/sqrt(hd) otherwise,
// times max(1, ln(n_t) / ln(attn_len)) under log-length scaling (dot scores with exp, attn_len > 1),
// which is applied beyond attn_len only, so that within it the factor is softmax's bit for bit.
// Row-dependent, so dq takes it per row (attn_normgrad_kernel) and dk per query (AttnRowInfo::scale).
// And the score's bias (-ln n for dot_logn, else 0; n = attn_len_n: the row's n_t, or the constant
// attn_len > 0).
template <AttnKind K, int HD> __device__ __forceinline__ float attn_row_factor(int t, int attn_len, float hp) {
    if constexpr (AttnTraits<K>::cos_len) { return lssa_lam(t, HD); }
    else if constexpr (AttnTraits<K>::ssmax) { return hp * attn_ssmax_len<HD>(t); }
    else {
        float unit = rsqrtf((float)HD);
        if (AttnTraits<K>::log_len && attn_len > 1 && t + 1 > attn_len) {
            // ln(L) as ln(min(L, n_t)), the same value here: written as a function of the row, it is
            // not hoisted out of the backward's loop over query tiles into one more live register
            // (which made softmax's backward spill at hd 64)
            unit *= logf((float)(t + 1)) / logf((float)min(attn_len, t + 1));
        }
        return unit;
    }
}
template <AttnKind K> __device__ __forceinline__ float attn_row_bias(int t, int attn_len) {
    if constexpr (AttnTraits<K>::score == ATTN_SCORE_DOT_LOGN) { return -logf((float)attn_len_n_dev(t, attn_len)); }
    else { return 0.0f; }
}

// phi(s) (exp: 2^(s - shift), s and the row's max in log2 units) and phi'(s) given phi(s).
template <AttnKind K> __device__ __forceinline__ float attn_phi_dev(float s, float shift) {
    constexpr AttnPhi F = AttnTraits<K>::phi;
    if constexpr (F == ATTN_PHI_EXP) { return exp2f(s - shift); }
    else if constexpr (F == ATTN_PHI_SOFTPLUS) { return softplus_from(s, exp_neg_abs(s)); }
    else if constexpr (F == ATTN_PHI_SIGMOID) { return sigmoid_from(s, exp_neg_abs(s)); }
    else { return fmaxf(s, 0.0f); }
}
// phi(s) and phi'(s) together, sharing exp(-|s|) (exp: phi' = phi, by the caller's convention)
template <AttnKind K> __device__ __forceinline__ float attn_phi_dphi_dev(float s, float shift, float* dphi) {
    constexpr AttnPhi F = AttnTraits<K>::phi;
    if constexpr (F == ATTN_PHI_EXP) {
        *dphi = exp2f(s - shift);
        return *dphi;
    } else if constexpr (F == ATTN_PHI_SOFTPLUS) {
        float e = exp_neg_abs(s);
        *dphi = sigmoid_from(s, e);
        return softplus_from(s, e);
    } else if constexpr (F == ATTN_PHI_SIGMOID) {
        float e = exp_neg_abs(s), inv = 1.0f / (1.0f + e);
        float sig = (s >= 0.0f ? 1.0f : e) * inv, sig_neg = (s >= 0.0f ? e : 1.0f) * inv;  // sigmoid(s), sigmoid(-s)
        *dphi = sig * sig_neg;
        return sig;
    } else {
        *dphi = s > 0.0f ? 1.0f : 0.0f;
        return fmaxf(s, 0.0f);
    }
}

// ----------------------------------------------------------------------------
// Kernels and tile helpers

// scales (B, NH, 4, T) and kfm (B, NH, T) behind it from qkv: one warp per (b, t, h) row, for q
// and for k.
template <int HD>
__global__ void attn_row_scales_kernel(float* scales, const floatX* qkv, int B, int T, int NH) {
    int warps_per_block = blockDim.x / 32;
    int row = blockIdx.x * warps_per_block + threadIdx.x / 32;  // (b, t, h) flattened
    int lane = threadIdx.x % 32;
    if (row >= B * T * NH) { return; }
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    int C = NH * HD;
    for (int part = 0; part < 2; part++) {  // 0: q, 1: k
        const floatX* x = qkv + ((size_t)(b * T + t) * 3 + part) * C + h * HD;
        float amax = 0.0f;
        for (int i = lane; i < HD; i += 32) { amax = fmaxf(amax, fabsf((float)x[i])); }
        amax = warp_max(amax);
        int e = 0;
        if (amax > 0.0f) { frexpf(amax, &e); }
        // mul = 2^-e stays a normal fp32 number (fast-math flushes subnormals to 0): e <= 126;
        // and 2^100 is plenty for rows that small, which are far below eps anyway: e >= -100
        e = min(max(e, -100), 126);
        float mul = ldexpf(1.0f, -e);
        float sum2 = 0.0f;
        for (int i = lane; i < HD; i += 32) {
            float xs = (float)x[i] * mul;
            sum2 += xs * xs;
        }
        float norm_scaled = sqrtf(warp_sum(sum2));  // |mul x|
        // |x| = norm_scaled / mul <= eps  <=>  norm_scaled <= eps * mul
        float fac = norm_scaled > LSSA_EPS * mul ? 1.0f / norm_scaled : 1.0f / (mul * LSSA_EPS);
        if (lane == 0) {
            float* sc = scales + ((size_t)b * NH + h) * 4 * T;
            sc[(2 * part) * T + t] = mul;
            sc[(2 * part + 1) * T + t] = fac;
            if (part == 1) { scales[(size_t)B * NH * 4 * T + ((size_t)b * NH + h) * T + t] = fac * mul; }
        }
    }
}

// The head of a block (grid.y = b NH + h) and where its rows are, as every attention kernel needs
// them: q, k, v of row t at q + 3C t, k + 3C t, v + 3C t; a (B, T, NH, HD) tensor's row t at
// rows + b T C + h HD + C t.
struct AttnHead {
    int C, bh, b, h;
    const floatX *q, *k, *v;
    const float* sc;   // q_mul, q_fac, k_mul, k_fac of the head's rows (cos_len), else nullptr
    const float* kfm;  // k_fac k_mul of the head's keys (cos_len), else nullptr
    size_t rows_offset;  // b T C + h HD
};
template <AttnKind K, int HD>
__device__ __forceinline__ AttnHead attn_head(const floatX* qkv, const float* scales, int T, int NH) {
    AttnHead hp;
    hp.C = NH * HD;
    hp.bh = blockIdx.y;
    hp.b = hp.bh / NH;
    hp.h = hp.bh % NH;
    hp.q = qkv + (size_t)hp.b * T * 3 * hp.C + hp.h * HD;
    hp.k = hp.q + hp.C;
    hp.v = hp.q + 2 * hp.C;
    hp.sc = AttnTraits<K>::cos_len ? scales + (size_t)hp.bh * 4 * T : nullptr;
    hp.kfm = AttnTraits<K>::cos_len ? scales + ((size_t)gridDim.y * 4 + hp.bh) * T : nullptr;  // grid.y = B NH
    hp.rows_offset = (size_t)hp.b * T * hp.C + hp.h * HD;
    return hp;
}

// Key tile kt into one of two buffers, asynchronously (it lands at the wait of attn_fwd_tiles;
// the forward and attention_rowd_kernel). cos_len: the keys are copied as they are, with their
// k_fac k_mul (k_mul a power of two) into key_fac. Scaling the score by k_fac k_mul instead of
// the key rows by k_mul gives the same scores bit for bit: products by a power of two are exact,
// in bf16 and in the fp32 accumulation of the mma alike, unless they leave the normal range
// (below 2^-126 or overflowing).
// key_fac (ROWS for cos_len, zeros past T) in the order attn_scores reads it (attn_key_fac_slot):
// PAIRED, the four factors a lane needs from two n8 tiles side by side (one 16-byte read); else
// in key order (two 4-byte reads per n8 tile, which hold fewer registers at once: the kernels
// at their register limit take that).
template <bool PAIRED> __host__ __device__ constexpr int attn_key_fac_slot(int j) {  // key j of the tile
    // n-tile pair j / 16, lane quad column (j % 8) / 2, n-tile j / 8 of the pair, column parity
    return PAIRED ? (j / 16) * 16 + ((j % 8) / 2) * 4 + ((j / 8) % 2) * 2 + j % 2 : j;
}
template <AttnKind K, int HD, bool PAIRED>
__device__ __forceinline__ void attn_fwd_issue_key_tile(sptr<floatX> sK, sptr<float> key_fac, const floatX* k_base,
                                                        int C, int kt, int T, const float* kfm) {
    using Tile = AttnTile<HD>;
    load_tile_async<Tile::ROWS, HD, Tile::LD, Tile::THREADS>(sK, k_base, 3 * C, kt * Tile::ROWS, T);
    if constexpr (AttnTraits<K>::cos_len) {
        static_assert(Tile::THREADS >= Tile::ROWS, "one key per thread");
        int j = threadIdx.x, key = kt * Tile::ROWS + j;
        if (j < Tile::ROWS) {
            bool in = key < T;
            cp_async_4(key_fac + attn_key_fac_slot<PAIRED>(j), kfm + (in ? key : 0), in);
        }
    }
}

// A loop of the forward (and of attention_rowd_kernel) over the key tiles 0..qt (the last,
// diagonal one masked), double-buffered: tile kt+1's copies are in flight while tile kt is
// computed. stage counts the tiles loaded so far by both passes; a tile sits in buffer stage % 2.
// load(kt, buf) issues a tile's copies; step(kt, buf, masked) computes a tile; load_after(buf)
// issues the tile that follows tile qt (the next pass's first) or nothing.
// The caller has issued and committed tile 0 into buffer stage % 2. One barrier per tile.
template <class Load, class Step, class After>
__device__ __forceinline__ void attn_fwd_tiles(int qt, int& stage, Load load, Step step, After load_after) {
    auto next = [&]() {
        cp_async_wait<0>();  // this thread's copies of tile kt: the only group in flight
        // every thread's copies of tile kt have landed, and every thread is done with tile kt-1,
        // whose buffer the next copies overwrite
        __syncthreads();
        return stage++ % 2;
    };
    for (int kt = 0; kt < qt; kt++) {  // below the diagonal: no mask
        int buf = next();
        load(kt + 1, stage % 2);
        cp_async_commit();
        step(kt, buf, std::false_type{});
    }
    int buf = next();
    load_after(stage % 2);
    cp_async_commit();
    step(qt, buf, std::true_type{});
}

// The scores of one warp's 16 query rows against a key tile in shared memory:
// s = row_scale(t) key_fac(j) (q~ . k~) + row_bias(t), q~ and k~ as loaded (key_fac only for
// cos_len: 1 for dot scores). row_scale[i], row_bias[i] of the lane's rows (i = 0: row g, 1: row
// g+8), in score units (attn_score_unit); key_fac in shared, in attn_key_fac_slot<PAIRED> order.
template <AttnKind K, int HD, bool PAIRED>
__device__ __forceinline__ void attn_scores(FragC (&s)[AttnTile<HD>::RTILES], const FragA (&qf)[AttnTile<HD>::KSTEPS],
                                            sptr<floatX> sK, sptr<float> key_fac, const float (&row_scale)[2],
                                            const float (&row_bias)[2]) {
    using Tile = AttnTile<HD>;
    int lane = threadIdx.x % 32;
    warp_mma_abt(s, qf, sK, Tile::LD);
    static_assert(Tile::RTILES % 2 == 0, "key factors are read for two n8 tiles at a time");
    float4 pair = make_float4(1.0f, 1.0f, 1.0f, 1.0f);  // the key factors of n8 tiles nt and nt + 1
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::RTILES; nt++) {
        float kf[2] = {1.0f, 1.0f};
        if (AttnTraits<K>::cos_len && PAIRED) {  // one 16-byte read per two n8 tiles
            if (nt % 2 == 0) { pair = *sptr_cast<float4>(key_fac + attn_key_fac_slot<true>(nt * 8 + frag_col(lane, 0))); }
            kf[0] = nt % 2 ? pair.z : pair.x;
            kf[1] = nt % 2 ? pair.w : pair.y;
        } else if (AttnTraits<K>::cos_len) {
            kf[0] = key_fac[nt * 8 + frag_col(lane, 0)];
            kf[1] = key_fac[nt * 8 + frag_col(lane, 1)];
        }
        ATTN_UNROLL
        for (int i = 0; i < 4; i++) {
            if constexpr (AttnTraits<K>::score == ATTN_SCORE_DOT_LOGN) {
                s[nt].x[i] = attn_scaled_score<K>(s[nt].x[i], row_scale[i / 2]) + row_bias[i / 2];
            } else if constexpr (AttnTraits<K>::cos_len) {
                s[nt].x[i] = s[nt].x[i] * kf[i % 2] * row_scale[i / 2];
            } else {
                s[nt].x[i] = attn_scaled_score<K>(s[nt].x[i], row_scale[i / 2]);
            }
        }
    }
}

// rowd (B, NH, T, 2): D2 = D1 = dy . y (l1 without re-weighting). One warp per (b, t, h) row.
// shift_off (exp without re-weighting; else null): set to 1 where a row's lse (stats (B, NH, T, 3),
// log2 units) is not below ATTN_BWD_SHIFT_LSE_LIMIT in magnitude (attn_bwd_shifts); 0 on entry.
template <int HD>
__global__ void attention_rowdot_kernel(float* rowd, const floatX* dout, const floatX* out, int B, int T, int NH,
                                        const float* stats, float* shift_off) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // (b, t, h)
    int lane = threadIdx.x % 32;
    if (row >= B * T * NH) { return; }
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    const floatX* dy = dout + (size_t)row * HD;
    const floatX* y = out + (size_t)row * HD;
    float d = 0.0f;
    for (int i = lane; i < HD; i += 32) { d += (float)dy[i] * (float)y[i]; }
    d = warp_sum(d);
    if (lane == 0) {
        float* rd = rowd + (((size_t)b * NH + h) * T + t) * 2;
        rd[0] = d;
        rd[1] = d;
        if (shift_off != nullptr && !(fabsf(stats[(((size_t)b * NH + h) * T + t) * 3]) < ATTN_BWD_SHIFT_LSE_LIMIT)) {
            *shift_off = 1.0f;  // every writer writes the same value
        }
    }
}

// exp without re-weighting (attn_bwd_shifts), after attention_rowdot_kernel: rowd[0] of every row
// (D2, which these variants do not read) = its lse less the backward's shift, ATTN_BWD_EXP_SHIFT
// (exact: |lse| < 2^27), or the lse itself where shift_off is set. One thread per row.
__global__ void attn_bwd_norm_kernel(float* rowd, const float* stats, const float* shift_off, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) { return; }
    rowd[(size_t)r * 2] = stats[(size_t)r * 3] - (*shift_off != 0.0f ? 0.0f : ATTN_BWD_EXP_SHIFT);
}

// dq and dk from the gradients of the normalised vectors
// (doc/attention.md, section 'Through the normalisation of q and k'):
//   dx = (dxh - xh (xh . dxh)) / |x|  when |x| > eps,  dx = dxh / eps  otherwise.
// Dot scores (not cos_len): dx = dxh times the row's factor (attn_row_factor: 1/sqrt(hd), times
// log-length scaling's or ssmax's row factor) for q only (the backward kernel accumulates
// dxh = ds K without the factor, which is one per query row, and writes their dk).
// One warp per (b, t, h) row; writes q (and k) of dqkv. p, p_head, attn_len: as the backward's.
template <int HD, AttnKind K>
__global__ void attn_normgrad_kernel(floatX* dqkv, const float* dqh, const float* dkh, const floatX* qkv,
                                     const float* scales, int B, int T, int NH, float p, const float* p_head,
                                     int attn_len, const float* shift_off) {
    constexpr bool NORMALISED = AttnTraits<K>::cos_len;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // (b, t, h)
    int lane = threadIdx.x % 32;
    if (row >= B * T * NH) { return; }
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    int C = NH * HD;
    if constexpr (AttnTraits<K>::ssmax) { attn_head_p(p_head, h, &p); }
    constexpr int PER_LANE = (HD + 31) / 32;
    for (int part = 0; part < (NORMALISED ? 2 : 1); part++) {  // 0: q, 1: k
        const float* dxh = (part == 0 ? dqh : dkh) + (size_t)row * HD;
        const floatX* x = qkv + ((size_t)(b * T + t) * 3 + part) * C + h * HD;
        floatX* dx = dqkv + ((size_t)(b * T + t) * 3 + part) * C + h * HD;
        if (!NORMALISED) {
            const float dot_scale = attn_row_factor<K, HD>(t, attn_len, p) * attn_bwd_unscale<K>(shift_off);
            for (int i = lane; i < HD; i += 32) { dx[i] = (floatX)(dxh[i] * dot_scale); }
            continue;
        }
        const float* sc = scales + ((size_t)b * NH + h) * 4 * T;
        float mul = sc[(2 * part) * T + t], fac = sc[(2 * part + 1) * T + t];
        // xh = fac * mul * x ; |x| > eps exactly when fac * |mul x| == 1 is the branch taken
        float xh[PER_LANE], g[PER_LANE];
        float sum2 = 0.0f, dot = 0.0f;
        ATTN_UNROLL
        for (int k = 0; k < PER_LANE; k++) {
            int i = lane + 32 * k;
            float xs = i < HD ? (float)x[i] * mul : 0.0f;
            g[k] = i < HD ? dxh[i] * (part == 0 ? attn_bwd_unscale<K>(shift_off) : 1.0f) : 0.0f;  // dkh: at its store
            xh[k] = xs * fac;
            sum2 += xs * xs;
            dot += xh[k] * g[k];
        }
        float norm_scaled = sqrtf(warp_sum(sum2));
        dot = warp_sum(dot);
        bool above_eps = norm_scaled > LSSA_EPS * mul;
        ATTN_UNROLL
        for (int k = 0; k < PER_LANE; k++) {
            int i = lane + 32 * k;
            if (i >= HD) { continue; }
            // 1/|x| = mul / |mul x| = mul * fac ; 1/eps = mul * fac below eps
            float d = above_eps ? (g[k] - xh[k] * dot) * (mul * fac) : g[k] * (mul * fac);
            dx[i] = (floatX)d;
        }
    }
}
