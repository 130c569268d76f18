// The attention family's forward kernel (doc/attention.md, sections 'The CUDA kernels' and
// 'The attention family'): causal, flash-style, O(T) memory, tensor cores for Q K^T and P V.
// One kernel, templated on the variant K (score, phi, normalisation, re-weighting:
// attention/attention_kind.h). CPU twin: attention/attention_cpu.h.
// Test: test/test_attention_cuda.cu.
//
// Shapes (C = NH * HD):
//   qkv    (B, T, 3, NH, HD) bf16, RoPE applied to q and k
//   out    (B, T, NH, HD)    bf16
//   stats  (B, NH, T, 3)     fp32, saved for the backward, as the CPU reference's:
//                            l1: (lse, m, Z) for exp, (S1, m, Z) otherwise; none, mean: 0
//   scales (B, NH, 4, T)     fp32 (cos_len only): q_mul, q_fac, k_mul, k_fac (attention_common.cuh)
//
// One block per (query tile, head); one warp per 16 query rows.
//   without re-weighting: one pass over the key tiles, acc += phi V (exp: the online softmax,
//     running max and rescaled sum), y = acc / S1 (l1), acc (none) or acc / n (mean);
//   with re-weighting: pass 1 gives S1 and the largest score s*, so m = n (phi(s*)/S1) - o;
//     pass 2 gives u = (relu(n phi/S1 - o)/m)^p, Z += u, acc += u V; y = acc / Z. A degenerate
//     row (m <= 0, Z == 0, S1 == 0, or every phi equal with o = 1) gives y = 0, saved with Z = 0.
#pragma once

#include "attention/attention_common.cuh"

// Pass 1 of the re-weighting, for the lane's two rows: S1 (exp: of exp(s - smax)), the largest
// and the smallest score. Lanes hold their own running max (exp) and combine them at the end.
template <AttnKind K, int HD>
__device__ __forceinline__ void attn_pass1(float (&S1)[2], float (&smax)[2], float (&smin)[2], const FragA (&qf)[AttnTile<HD>::KSTEPS],
                                           sptr<floatX> sK, sptr<float> key_fac, const floatX* k_base, int C, int qt,
                                           int T, const float* sc, const int (&row)[2], const float (&row_scale)[2],
                                           const float (&row_bias)[2]) {
    using Tile = AttnTile<HD>;
    constexpr bool EXP = AttnTraits<K>::phi == ATTN_PHI_EXP;
    int lane = threadIdx.x % 32;
    for (int r = 0; r < 2; r++) { S1[r] = 0.0f; smax[r] = -INFINITY; smin[r] = INFINITY; }
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();  // the previous key tile has been read
        load_key_tile<K, Tile::ROWS, HD, Tile::LD>(sK, key_fac, k_base, C, kt, T, sc);
        __syncthreads();
        FragC s[Tile::RTILES];
        attn_scores<HD>(s, qf, sK, key_fac, row_scale, row_bias);
        ATTN_UNROLL
        for (int nt = 0; nt < Tile::RTILES; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2, j = kt * Tile::ROWS + nt * 8 + frag_col(lane, i);
                if (j > row[r]) { continue; }
                float sv = s[nt].x[i];
                if (EXP && sv > smax[r]) { S1[r] = S1[r] * expf(smax[r] - sv) + 1.0f; }  // rescale to the new max
                else if (EXP) { S1[r] += expf(sv - smax[r]); }
                else { S1[r] += attn_phi_dev<K>(sv, 0.0f); }
                smax[r] = fmaxf(smax[r], sv);
                smin[r] = fminf(smin[r], sv);
            }
        }
    }
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        float lane_max = smax[r];
        smax[r] = quad_max(smax[r]);
        smin[r] = -quad_max(-smin[r]);
        // exp: every lane's sum to the row's max (a lane with no key: 0 * exp(-inf) = 0)
        S1[r] = quad_sum(EXP ? S1[r] * expf(lane_max - smax[r]) : S1[r]);
    }
}

// Forward. grid (ceil(T/ROWS), B*NH), block THREADS. p_int = p when p is a small integer, else -1.
// p_head (NH): learned p per head in place of p, or null.
template <int HD, AttnKind K>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
attention_forward_kernel(floatX* out, float* stats, const floatX* qkv, const float* scales, int T, int NH, float p,
                         int p_int, const float* p_head) {
    using Tile = AttnTile<HD>;
    using V = AttnTraits<K>;
    constexpr bool RW = V::reweight, EXP = V::phi == ATTN_PHI_EXP, ONLINE = EXP && !RW;
    static_assert(!EXP || V::norm == ATTN_NORM_L1, "exp needs l1");
    static_assert(!RW || V::norm == ATTN_NORM_L1, "the kernels re-weight l1-normalised rows");
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, RT = Tile::RTILES;
    SHARED_TILE(sQ, ROWS * LD);
    SHARED_TILE(sK, ROWS * LD);
    SHARED_TILE(sV, ROWS * LD);
    SHARED_ARRAY(float, key_fac, ROWS);

    int C = NH * HD;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int qt = gridDim.x - 1 - blockIdx.x;  // longest rows first
    int q0 = qt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const floatX* q_base = qkv + (size_t)b * T * 3 * C + h * HD;
    const floatX* k_base = q_base + C;
    const floatX* v_base = q_base + 2 * C;
    const float* sc = AttnTraits<K>::cos_len ? scales + (size_t)bh * 4 * T : nullptr;  // q_mul, q_fac, k_mul, k_fac
    if constexpr (RW) { attn_head_p(p_head, h, &p, &p_int); }

    load_tile<ROWS, HD, LD>(sQ, q_base, 3 * C, q0, T, sc);
    __syncthreads();
    FragA qf[Tile::KSTEPS];
    load_frags_a(qf, sQ, LD, warp * 16);

    // this lane's two rows: t = q0 + warp*16 + g (+8)
    int row[2];
    float row_scale[2], row_bias[2], n[2], o[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        row[r] = q0 + warp * 16 + lane / 4 + 8 * r;
        bool in = row[r] < T;
        row_scale[r] = in ? attn_row_factor<K, HD>(row[r]) * (sc ? sc[T + row[r]] : 1.0f) : 0.0f;
        row_bias[r] = in ? attn_row_bias<K>(row[r]) : 0.0f;
        n[r] = (float)(row[r] + 1);
        o[r] = row[r] < 3 ? 0.0f : 1.0f;
    }

    float S1[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f}, shift[2] = {0.0f, 0.0f};
    bool uniform[2] = {false, false};  // every phi of the row equal: A is exactly uniform
    if constexpr (RW) {
        float smax[2], smin[2];
        attn_pass1<K, HD>(S1, smax, smin, qf, sK, key_fac, k_base, C, qt, T, sc, row, row_scale, row_bias);
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            shift[r] = EXP ? smax[r] : 0.0f;
            // phi is non-decreasing: every phi of the row equal as computed iff phi(min) = phi(max)
            uniform[r] = attn_phi_dev<K>(smin[r], shift[r]) == attn_phi_dev<K>(smax[r], shift[r]);
            // the same operations as x = n (phi / S1) - o, on the largest phi: m is the largest x
            m[r] = S1[r] > 0.0f ? n[r] * (attn_phi_dev<K>(smax[r], shift[r]) / S1[r]) - o[r] : 0.0f;
        }
    }

    // the only pass (pass 2 under re-weighting): weights w, their sum, acc += w V
    float wsum[2] = {0.0f, 0.0f}, row_max[2] = {-INFINITY, -INFINITY};
    FragC acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) { frag_zero(acc[nt]); }
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();
        load_key_tile<K, ROWS, HD, LD>(sK, key_fac, k_base, C, kt, T, sc);
        load_tile<ROWS, HD, LD>(sV, v_base, 3 * C, kt * ROWS, T);
        __syncthreads();
        FragC s[RT];
        attn_scores<HD>(s, qf, sK, key_fac, row_scale, row_bias);
        if constexpr (ONLINE) {  // softmax: the new running max, and the rescaling of what came before
            float tile_max[2] = {-INFINITY, -INFINITY};
            ATTN_UNROLL
            for (int nt = 0; nt < RT; nt++) {
                ATTN_UNROLL
                for (int i = 0; i < 4; i++) {
                    int j = kt * ROWS + nt * 8 + frag_col(lane, i);
                    if (j <= row[i / 2]) { tile_max[i / 2] = fmaxf(tile_max[i / 2], s[nt].x[i]); }
                }
            }
            // key kt*ROWS <= every row of this tile, so every row sees a finite score
            ATTN_UNROLL
            for (int r = 0; r < 2; r++) {
                float new_max = fmaxf(row_max[r], quad_max(tile_max[r]));
                float correction = expf(row_max[r] - new_max);
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
                int j = kt * ROWS + nt * 8 + frag_col(lane, i);
                float w = 0.0f;
                if (j <= row[r]) {
                    float a = attn_phi_dev<K>(s[nt].x[i], shift[r]);
                    if (!RW) {
                        w = a;
                    } else if (m[r] > 0.0f) {
                        float x = n[r] * (a / S1[r]) - o[r];
                        w = x > 0.0f ? pow_p_dev(x / m[r], p, p_int) : 0.0f;
                    }
                }
                s[nt].x[i] = w;
                wsum[r] += w;
            }
        }
        FragA wf[RT / 2];
        frags_a_from_acc<RT>(wf, s);
        warp_mma_ab(acc, wf, sV, LD);
    }

    // y = acc / S1 (l1), acc / Z (re-weighting), acc (none), acc / n (mean)
    float inv[2], st0[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        wsum[r] = quad_sum(wsum[r]);
        bool degenerate = RW && (!(m[r] > 0.0f) || wsum[r] == 0.0f || (uniform[r] && o[r] == 1.0f));
        if (degenerate) { wsum[r] = 0.0f; }
        if (V::norm == ATTN_NORM_L1) { inv[r] = wsum[r] > 0.0f ? 1.0f / wsum[r] : 0.0f; }
        else { inv[r] = V::norm == ATTN_NORM_MEAN ? 1.0f / n[r] : 1.0f; }
        float S1_row = RW ? S1[r] : wsum[r];
        st0[r] = V::norm != ATTN_NORM_L1 ? 0.0f : EXP ? (RW ? shift[r] : row_max[r]) + logf(S1_row) : S1_row;
    }
    warp_store_rows_scaled<Tile::HTILES>(out + (size_t)b * T * C + h * HD, C, row, T, acc, inv, lane);
    if (lane % 4 == 0) {
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            if (row[r] >= T) { continue; }
            float* st = stats + ((size_t)bh * T + row[r]) * 3;
            st[0] = st0[r];
            st[1] = RW ? m[r] : 0.0f;
            st[2] = RW ? wsum[r] : 0.0f;
        }
    }
}
