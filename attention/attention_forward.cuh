// The attention family's forward kernel (doc/attention.md, sections 'The CUDA kernels' and
// 'The attention family'): causal, flash-style, O(T) memory, tensor cores for Q K^T and P V.
// One kernel, templated on the variant K (score, phi, normalisation, re-weighting:
// attention/attention_kind.h). CPU twin: attention/attention_cpu.h.
// Test: test/test_attention_cuda.cu.
//
// Shapes (C = NH * HD):
//   qkv    (B, T, 3, NH, HD) bf16, RoPE applied to q and k
//   out    (B, T, NH, HD)    bf16
//   stats  (B, NH, T, 3)     fp32, saved for the backward, as the CPU reference's but lse in
//                            log2 units: l1: (lse log2 e, m, Z) for exp, (S1, m, Z) otherwise;
//                            none, mean: 0
//   scales (B, NH, 4, T)     fp32 (cos_len only): q_mul, q_fac, k_mul, k_fac, then kfm (B, NH, T):
//                            k_fac k_mul (attention_common.cuh)
//
// One block per (query tile, head); one warp per 16 query rows.
//   without re-weighting: one pass over the key tiles, acc += phi V (exp: the online softmax,
//     running max and rescaled sum), y = acc / S1 (l1), acc (none) or acc / n (mean; n and the
//     dot_logn bias's n are attn_len_n(t, attn_len): n_t, or the constant attn_len > 0);
//   with re-weighting: pass 1 gives S1 and the largest score s*, so m = n (phi(s*)/S1) - o;
//     pass 2 gives u = (relu(n phi/S1 - o)/m)^p, Z += u, acc += u V; y = acc / Z (LSSAR in terms
//     of the unscaled score t: attn_fwd_softplus_t). A degenerate
//     row (m <= 0, Z == 0, S1 == 0, or every phi equal with o = 1) gives y = 0, saved with Z = 0.
// Key and value tiles are double-buffered and copied asynchronously (cp.async, attn_fwd_tiles):
// tile kt+1 is in flight while tile kt is computed, in both passes; one barrier per tile.
#pragma once

#include "attention/attention_common.cuh"

// The lane's two rows (t = q0 + 16 warp + g, + 8) as the forward sees them.
struct AttnFwdRows {
    int row[2];
    float scale[2], bias[2];  // the score's factor (times fac_q for cos_len) and bias, in score units
    float n[2], o[2];         // visible keys, the re-weighting's bias
};

// LSSAR (softplus of the cos_len score, re-weighted) works in the forward with t = k_fac (q~ . k~),
// the score before the row's factor rs = lam fac_q >= 0 (s = rs t; rs = 0 on row 0 and past T):
//   softplus(s) = rs max(t, 0) + log1p(e),   e = exp(-|s|) = 2^(|t| (-rs log2 e)),
// so pass 1 sums max(t, 0) and log1p(e) apart (S1 = rs sum max(t, 0) + sum log1p(e)), and pass 2
// forms x' = x S1 / n = softplus(s) - o S1 / n as rs max(t, 0) + e P(e) - o': no product rs t per
// element, and P keeps its constant coefficients (no per-row copy in registers). Since
// (x / m)^p = (x' / m')^p with m' = m S1 / n, the power is taken of x' (pow_rel_max with m').
// Since rs >= 0, the largest and smallest t are those of s.
template <AttnKind K> __host__ __device__ constexpr bool attn_fwd_softplus_t() {
    return AttnTraits<K>::reweight && AttnTraits<K>::cos_len && AttnTraits<K>::phi == ATTN_PHI_SOFTPLUS;
}
// The key factors are read 16 bytes for two n8 tiles (attn_scores' PAIRED) but by LSSA at hd 128,
// which spills with them at its register limit (sm_90).
template <int HD, AttnKind K> __host__ __device__ constexpr bool attn_fwd_paired_fac() {
    return !(HD == 128 && K == ATTN_LSSA);
}
struct SoftplusXRow {  // one row's constants of x'(t)
    float neg_rs_log2e, rs, o_scaled;  // -rs log2 e, rs, o S1 / n
};
__device__ __forceinline__ float attn_softplus_x(float t, const SoftplusXRow& r) {
    float e = exp2f(fabsf(t) * r.neg_rs_log2e);
    return fmaf(e, log1p_poly(e), fmaf(fmaxf(t, 0.0f), r.rs, -r.o_scaled));
}
// softplus(rs t) as pass 1 sums it
__device__ __forceinline__ float attn_softplus_t(float t, float rs) {
    float e = exp2f(fabsf(t) * (-rs * ATTN_LOG2E));
    return fmaf(e, log1p_poly(e), fmaxf(t, 0.0f) * rs);
}

// Pass 1 of the re-weighting over one key tile's scores s (keys j0..): S1 (exp: of 2^(s - smax)),
// the largest and the smallest score. Lanes hold their own running max (exp) and combine them at
// the end. MASK: the diagonal tile, where keys past the row are masked.
// attn_fwd_softplus_t: s holds t, S1 the sum of log1p(e) and S1_relu that of max(t, 0).
template <AttnKind K, int RT, bool MASK>
__device__ __forceinline__ void attn_pass1_tile(float (&S1)[2], float (&S1_relu)[2], float (&smax)[2], float (&smin)[2],
                                                const FragC (&s)[RT], int j0, const int (&row)[2],
                                                const float (&neg_rs_log2e)[2], int lane) {
    constexpr bool EXP = AttnTraits<K>::phi == ATTN_PHI_EXP;
    ATTN_UNROLL
    for (int nt = 0; nt < RT; nt++) {
        ATTN_UNROLL
        for (int i = 0; i < 4; i++) {
            int r = i / 2;
            if (MASK && j0 + nt * 8 + frag_col(lane, i) > row[r]) { continue; }
            float sv = s[nt].x[i];
            if constexpr (attn_fwd_softplus_t<K>()) {
                float e = exp2f(fabsf(sv) * neg_rs_log2e[r]);
                S1[r] = fmaf(e, log1p_poly(e), S1[r]);
                S1_relu[r] += fmaxf(sv, 0.0f);
            } else if (EXP && sv > smax[r]) {  // rescale to the new max
                S1[r] = S1[r] * exp2f(smax[r] - sv) + 1.0f;
            } else if (EXP) {
                S1[r] += exp2f(sv - smax[r]);
            } else {
                S1[r] += attn_phi_dev<K>(sv, 0.0f);
            }
            smax[r] = fmaxf(smax[r], sv);
            smin[r] = fminf(smin[r], sv);
        }
    }
}

// Pass 1 of the re-weighting, for the lane's two rows: S1, the largest and the smallest score.
// sK, key_fac: the two buffers, tile and kfac elements apart; load_k: that of attn_fwd_tiles;
// load_next issues pass 2's first tile during pass 1's last.
template <AttnKind K, int HD, class LoadK, class LoadNext>
__device__ __forceinline__ void attn_pass1(float (&S1)[2], float (&smax)[2], float (&smin)[2], const FragA (&qf)[AttnTile<HD>::KSTEPS],
                                           sptr<floatX> sK, int tile, sptr<float> key_fac, int kfac, int qt,
                                           int& stage, LoadK load_k, LoadNext load_next,
                                           const AttnFwdRows& rows) {
    using Tile = AttnTile<HD>;
    constexpr bool EXP = AttnTraits<K>::phi == ATTN_PHI_EXP;
    constexpr bool T_FORM = attn_fwd_softplus_t<K>(), PAIRED = attn_fwd_paired_fac<HD, K>();
    int lane = threadIdx.x % 32;
    float S1_relu[2], neg_rs_log2e[2];
    const float ones[2] = {1.0f, 1.0f}, (&score_scale)[2] = T_FORM ? ones : rows.scale;  // T_FORM: t
    for (int r = 0; r < 2; r++) {
        S1[r] = S1_relu[r] = 0.0f;
        smax[r] = -INFINITY;
        smin[r] = INFINITY;
        neg_rs_log2e[r] = -rows.scale[r] * ATTN_LOG2E;
    }
    auto step = [&](int kt, int buf, auto masked) {
        FragC s[Tile::RTILES];
        attn_scores<K, HD, PAIRED>(s, qf, sK + buf * tile, key_fac + buf * kfac, score_scale, rows.bias);
        attn_pass1_tile<K, Tile::RTILES, decltype(masked)::value>(S1, S1_relu, smax, smin, s, kt * Tile::ROWS, rows.row,
                                                                  neg_rs_log2e, lane);
    };
    attn_fwd_tiles(qt, stage, load_k, step, load_next);
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        float lane_max = smax[r];
        smax[r] = quad_max(smax[r]);
        smin[r] = -quad_max(-smin[r]);
        // exp: every lane's sum to the row's max (a lane with no key: 0 * 2^-inf = 0)
        S1[r] = quad_sum(EXP ? S1[r] * exp2f(lane_max - smax[r]) : S1[r]);
        if (T_FORM) { S1[r] = fmaf(rows.scale[r], quad_sum(S1_relu[r]), S1[r]); }
    }
}

// Forward. grid (ceil(T/ROWS), B*NH), block THREADS. The power is 2^(p log2 (x/m)) for every p
// (pow_rel_max), as in the backward kernels.
// Blocks per SM asked of ptxas (attn_fwd_min_blocks): the most warps per SM at which the variant
// does not spill at sm_90 (scripts/kernel_stats.sh prints the figures;
// doc/performance.md, section 'Launch bounds and spills'): 3 (<= 168 registers: 12 warps per SM);
// 4 at hd 32 (<= 128: 16 warps), but 3 for LSSAR and relu_l1_rw, which spill at 128; 6 at hd 128
// (64 threads: <= 168 registers, 12 warps), but 3 for softmax and LSSAR, which spill there; 2 for
// sigmoid_l1_rw, whose two passes spill at 168 registers at hd 64. (Registers are allocated per SM
// sub-partition: more than 168 give 8 warps per SM.)
// Scores are held in score units (attn_score_unit: log2 units for exp); the keys of tiles below
// the diagonal are all visible, so only the diagonal tile (the last one) is masked.
// p_head (NH): the head parameter per head in place of p (learned p, ssmax's s), or null.
// The variants these launch bounds and the backward's (attn_rowd_min_blocks, attention_backward.cuh)
// were measured for: the first ATTN_LAUNCH_BOUNDS_MEASURED lines of the variant list. A variant
// after them takes the defaults, which no one has measured: test_attention_cuda names it until its
// figures are taken (scripts/kernel_stats.sh) and this count is raised.
constexpr int ATTN_LAUNCH_BOUNDS_MEASURED = ATTN_SSMAX + 1;
template <int HD, AttnKind K> constexpr int attn_fwd_min_blocks() {
    if (AttnTraits<K>::reweight && AttnTraits<K>::phi == ATTN_PHI_SIGMOID) { return 2; }
    if (K == ATTN_LSSAR) { return 3; }
    if (HD == 32) { return K == ATTN_RELU_L1_RW ? 3 : 4; }
    return HD == 128 && K != ATTN_SOFTMAX ? 6 : 3;
}
template <int HD, AttnKind K>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS, (attn_fwd_min_blocks<HD, K>()))
attention_forward_kernel(floatX* out, float* stats, const floatX* qkv, const float* scales, int T, int NH, float p,
                         const float* p_head, int attn_len) {
    using Tile = AttnTile<HD>;
    using V = AttnTraits<K>;
    constexpr bool RW = V::reweight, EXP = V::phi == ATTN_PHI_EXP, ONLINE = EXP && !RW;
    static_assert(!EXP || V::norm == ATTN_NORM_L1, "exp needs l1");
    static_assert(!RW || V::norm == ATTN_NORM_L1, "the kernels re-weight l1-normalised rows");
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, RT = Tile::RTILES;
    constexpr int TILE = ROWS * LD, KFAC = V::cos_len ? ROWS : 0;  // one buffer of sK/sV, key_fac
    constexpr bool PAIRED = attn_fwd_paired_fac<HD, K>();
    // two buffers: tile kt+1 lands while tile kt is read; key_fac's two behind them, in the same
    // array (an offset from sK: ptxas recomputed a second array's address on every tile)
    SHARED_TILE(sK, 2 * TILE + (V::cos_len ? 4 * KFAC : 0));
    SHARED_TILE(sV, 2 * TILE);
    // Q is read only into the warps' fragments, before the first barrier of attn_fwd_tiles, and
    // V's second buffer is first written after it
    const sptr<floatX> sQ = sV + TILE;
    const sptr<float> key_fac = sptr_cast<float>(sK + 2 * TILE);

    const AttnHead hp = attn_head<K, HD>(qkv, scales, T, NH);
    const int C = hp.C, bh = hp.bh;
    const floatX *q_base = hp.q, *k_base = hp.k, *v_base = hp.v;
    const float* sc = hp.sc;
    int qt = gridDim.x - 1 - blockIdx.x;  // longest rows first
    int q0 = qt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if constexpr (RW || V::ssmax) { attn_head_p(p_head, hp.h, &p); }

    auto load_k = [&](int kt, int buf) {
        attn_fwd_issue_key_tile<K, HD, PAIRED>(sK + buf * TILE, key_fac + buf * KFAC, k_base, C, kt, T, hp.kfm);
    };
    auto load_kv = [&](int kt, int buf) {
        load_k(kt, buf);
        load_tile_async<ROWS, HD, LD, Tile::THREADS>(sV + buf * TILE, v_base, 3 * C, kt * ROWS, T);
    };
    int stage = 0;  // key tiles loaded so far (attn_fwd_tiles)
    if constexpr (RW) { load_k(0, 0); }  // the first tile is in flight while Q loads
    else { load_kv(0, 0); }
    cp_async_commit();
    load_tile<ROWS, HD, LD, V::cos_len>(sQ, q_base, 3 * C, q0, T, sc);
    __syncthreads();
    FragA qf[Tile::KSTEPS];
    load_frags_a(qf, sQ, LD, warp * 16);

    AttnFwdRows rows;
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        int t = q0 + warp * 16 + lane / 4 + 8 * r;
        bool in = t < T;
        rows.row[r] = t;
        rows.scale[r] = in ? attn_row_factor<K, HD>(t, attn_len, p) * attn_score_unit<K>() * (sc ? sc[T + t] : 1.0f) : 0.0f;
        rows.bias[r] = in ? attn_row_bias<K>(t, attn_len) * attn_score_unit<K>() : 0.0f;
        rows.n[r] = (float)(t + 1);
        rows.o[r] = t < 3 ? 0.0f : 1.0f;
    }

    // re-weighting: n / S1, the largest x (m) and -p log2 m (pow_rel_max; LSSAR: -p log2 m') from pass 1
    float S1[2] = {0.0f, 0.0f}, nS1[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f}, neg_p_log2_m[2] = {0.0f, 0.0f};
    float shift[2] = {0.0f, 0.0f};  // exp: the row's max (re-weighting) or the running max (online)
    bool uniform[2] = {false, false};  // every phi of the row equal: A is exactly uniform
    constexpr bool T_FORM = attn_fwd_softplus_t<K>();  // LSSAR: s holds t, x' = attn_softplus_x(t)
    SoftplusXRow xrow[2];
    if constexpr (RW) {
        float smax[2], smin[2];
        attn_pass1<K, HD>(S1, smax, smin, qf, sK, TILE, key_fac, KFAC, qt, stage, load_k,
                          [&](int buf) { load_kv(0, buf); }, rows);
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            shift[r] = EXP ? smax[r] : 0.0f;
            nS1[r] = S1[r] > 0.0f ? rows.n[r] / S1[r] : 0.0f;
            if constexpr (T_FORM) {
                xrow[r].neg_rs_log2e = -rows.scale[r] * ATTN_LOG2E;
                xrow[r].rs = rows.scale[r];
                xrow[r].o_scaled = nS1[r] > 0.0f ? rows.o[r] / nS1[r] : 0.0f;
                uniform[r] = attn_softplus_t(smin[r], rows.scale[r]) == attn_softplus_t(smax[r], rows.scale[r]);
                // the operations of every x': m' is the largest x' (S1 = 0 leaves no weight: m' = 0)
                float m_scaled = nS1[r] > 0.0f ? attn_softplus_x(smax[r], xrow[r]) : 0.0f;
                neg_p_log2_m[r] = m_scaled > 0.0f ? -p * log2f(m_scaled) : -INFINITY;
                m[r] = m_scaled * nS1[r];  // m itself, for the degenerate-row test and the backward
            } else {
                // phi is non-decreasing: every phi of the row equal as computed iff phi(min) = phi(max)
                uniform[r] = attn_phi_dev<K>(smin[r], shift[r]) == attn_phi_dev<K>(smax[r], shift[r]);
                // the same operations as x = phi (n / S1) - o, on the largest phi: m is the largest x
                m[r] = attn_phi_dev<K>(smax[r], shift[r]) * nS1[r] - rows.o[r];
                neg_p_log2_m[r] = m[r] > 0.0f ? -p * log2f(m[r]) : -INFINITY;
            }
        }
    }

    // the only pass (pass 2 under re-weighting): weights w, their sum, acc += w V
    const float ones[2] = {1.0f, 1.0f}, (&score_scale)[2] = T_FORM ? ones : static_cast<const float(&)[2]>(rows.scale);
    float wsum[2] = {0.0f, 0.0f}, row_max[2] = {-INFINITY, -INFINITY};
    FragC acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) { frag_zero(acc[nt]); }
    auto step = [&](int kt, int buf, auto masked) {
        constexpr bool MASK = decltype(masked)::value;
        int j0 = kt * ROWS;
        FragC s[RT];
        attn_scores<K, HD, PAIRED>(s, qf, sK + buf * TILE, key_fac + buf * KFAC, score_scale, rows.bias);
        if constexpr (ONLINE) {  // softmax: the new running max, and the rescaling of what came before
            float tile_max[2] = {-INFINITY, -INFINITY};
            ATTN_UNROLL
            for (int nt = 0; nt < RT; nt++) {
                ATTN_UNROLL
                for (int i = 0; i < 4; i++) {
                    if (!MASK || j0 + nt * 8 + frag_col(lane, i) <= rows.row[i / 2]) {
                        tile_max[i / 2] = fmaxf(tile_max[i / 2], s[nt].x[i]);
                    }
                }
            }
            // key kt*ROWS <= every row of this tile, so every row sees a finite score
            ATTN_UNROLL
            for (int r = 0; r < 2; r++) {
                float new_max = fmaxf(row_max[r], quad_max(tile_max[r]));
                float correction = exp2f(row_max[r] - new_max);
                row_max[r] = shift[r] = new_max;
                wsum[r] *= correction;
                ATTN_UNROLL
                for (int nt = 0; nt < Tile::HTILES; nt++) {
                    acc[nt].x[2 * r] *= correction;
                    acc[nt].x[2 * r + 1] *= correction;
                }
            }
        }
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                float w = 0.0f;  // the weight: a without re-weighting, u = (relu(x)/m)^p with it
                if (!MASK || j0 + nt * 8 + frag_col(lane, i) <= rows.row[r]) {
                    // m <= 0: no x > 0 (m is the largest x) and neg_p_log2_m = -inf, so u = 0
                    if constexpr (T_FORM) {
                        w = pow_rel_max(attn_softplus_x(s[nt].x[i], xrow[r]), p, neg_p_log2_m[r]);
                    } else {
                        float a = attn_phi_dev<K>(s[nt].x[i], shift[r]);
                        w = RW ? pow_rel_max(a * nS1[r] - rows.o[r], p, neg_p_log2_m[r]) : a;
                    }
                }
                s[nt].x[i] = w;
            }
        }
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) { wsum[i / 2] += s[nt].x[i]; }
        }
        FragA wf[RT / 2];
        frags_a_from_acc<RT>(wf, s);
        warp_mma_ab(acc, wf, sV + buf * TILE, LD);
    };
    attn_fwd_tiles(qt, stage, load_kv, step, [](int) {});

    // y = acc / S1 (l1), acc / Z (re-weighting), acc (none), acc / n (mean)
    float inv[2], st0[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        wsum[r] = quad_sum(wsum[r]);
        bool degenerate = RW && (!(m[r] > 0.0f) || wsum[r] == 0.0f || (uniform[r] && rows.o[r] == 1.0f));
        if (degenerate) { wsum[r] = 0.0f; }
        if (V::norm == ATTN_NORM_L1) { inv[r] = wsum[r] > 0.0f ? 1.0f / wsum[r] : 0.0f; }
        else { inv[r] = V::norm == ATTN_NORM_MEAN ? 1.0f / (float)attn_len_n_dev(rows.row[r], attn_len) : 1.0f; }
        float S1_row = RW ? S1[r] : wsum[r];
        // exp: lse in log2 units, lse log2 e = max + log2 S1 (the max in log2 units), the unit the
        // backward takes 2^(s - lse) in, so lse is rounded once: a conversion to natural units and
        // back would round it twice more, each by up to half an ulp of lse, which at large scores is
        // many units of the exponent of 2^(s - lse)
        st0[r] = V::norm != ATTN_NORM_L1 ? 0.0f : EXP ? (RW ? shift[r] : row_max[r]) + log2f(S1_row) : S1_row;
    }
    warp_store_rows_scaled<Tile::HTILES>(out + hp.rows_offset, C, rows.row, T, acc, inv, lane);
    if (lane % 4 == 0) {
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            if (rows.row[r] >= T) { continue; }
            float* st = stats + ((size_t)bh * T + rows.row[r]) * 3;
            st[0] = st0[r];
            st[1] = RW ? m[r] : 0.0f;
            st[2] = RW ? wsum[r] : 0.0f;
        }
    }
}
