// Softmax attention, FlashAttention-2 style: causal, O(T) memory, tensor cores.
// CPU twin: attention/attention_cpu.h. Test: test/test_attention_cuda.cu.
//
// Shapes (C = NH * HD):
//   qkv    (B, T, 3, NH, HD) bf16, RoPE applied to q and k
//   out    (B, T, NH, HD)    bf16
//   stats  (B, NH, T, 3)     fp32, saved for the backward: (lse, 0, 0), lse = log sum_j exp(s_tj)
//   rowd   (B, NH, T, 2)     fp32 scratch of the backward: D = dy . y (twice, as LSSA)
//   dqh, dkh (B, T, NH, HD)  fp32 scratch of the backward: dq and dk before the bf16 cast
//
// Forward: one block per (query tile, head), one warp per 16 query rows; a single pass over
// the key tiles with the online softmax (running max, rescaled sum and output).
// Backward: D = dy . y (attention_rowdot_kernel), then one block per (key tile, head) walks
// the query tiles from the diagonal down: P = exp(s - lse), ds = P (dP - D), dV and dK in
// registers, dQ through fp32 atomics; lssa_normgrad_kernel<HD, false> casts dq and dk.
#pragma once

#include <cmath>
#include "attention/tile.cuh"
#include "attention/attention_lssar.cuh"  // attention_rowdot_kernel, lssa_normgrad_kernel

// grid (ceil(T/ROWS), B*NH), block THREADS.
template <int HD>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
softmax_forward_kernel(floatX* out, float* stats, const floatX* qkv, int T, int NH) {
    using Tile = AttnTile<HD>;
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, RT = Tile::RTILES;
    SHARED_TILE(sQ, ROWS * LD);
    SHARED_TILE(sK, ROWS * LD);
    SHARED_TILE(sV, ROWS * LD);

    int C = NH * HD;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int qt = gridDim.x - 1 - blockIdx.x;  // longest rows first
    int q0 = qt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const floatX* q_base = qkv + (size_t)b * T * 3 * C + h * HD;
    const floatX* k_base = q_base + C;
    const floatX* v_base = q_base + 2 * C;
    const float scale = 1.0f / sqrtf((float)HD);

    load_tile<ROWS, HD, LD>(sQ, q_base, 3 * C, q0, T);
    __syncthreads();
    FragA qf[Tile::KSTEPS];
    load_frags_a(qf, sQ, LD, warp * 16);

    int row[2];
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};  // row_sum: this lane's part
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) { row[r] = q0 + warp * 16 + lane / 4 + 8 * r; }
    FragC acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) { frag_zero(acc[nt]); }

    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();  // the previous K, V tiles have been read
        load_tile<ROWS, HD, LD>(sK, k_base, 3 * C, kt * ROWS, T);
        load_tile<ROWS, HD, LD>(sV, v_base, 3 * C, kt * ROWS, T);
        __syncthreads();
        FragC s[RT];
        warp_mma_abt(s, qf, sK, LD);
        float tile_max[2] = {-INFINITY, -INFINITY};
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int j = kt * ROWS + nt * 8 + frag_col(lane, i);
                s[nt].x[i] = j <= row[i / 2] ? s[nt].x[i] * scale : -INFINITY;
                tile_max[i / 2] = fmaxf(tile_max[i / 2], s[nt].x[i]);
            }
        }
        // key kt*ROWS <= every row of this tile, so every row sees a finite score: new_max is finite
        float correction[2];
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            float new_max = fmaxf(row_max[r], quad_max(tile_max[r]));
            correction[r] = expf(row_max[r] - new_max);
            row_max[r] = new_max;
            row_sum[r] *= correction[r];
        }
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                float pv = expf(s[nt].x[i] - row_max[i / 2]);  // exp(-inf) = 0 on masked keys
                s[nt].x[i] = pv;
                row_sum[i / 2] += pv;
            }
        }
        ATTN_UNROLL
        for (int nt = 0; nt < Tile::HTILES; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) { acc[nt].x[i] *= correction[i / 2]; }
        }
        FragA pf[RT / 2];
        frags_a_from_acc<RT>(pf, s);
        warp_mma_ab(acc, pf, sV, LD);
    }

    float inv[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        row_sum[r] = quad_sum(row_sum[r]);
        inv[r] = 1.0f / row_sum[r];
    }
    warp_store_rows_scaled<Tile::HTILES>(out + (size_t)b * T * C + h * HD, C, row, T, acc, inv, lane);
    if (lane % 4 == 0) {
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            if (row[r] >= T) { continue; }
            float* st = stats + ((size_t)bh * T + row[r]) * 3;
            st[0] = row_max[r] + logf(row_sum[r]);
            st[1] = 0.0f;
            st[2] = 0.0f;
        }
    }
}

// Backward: one block per (key tile, head), one warp per 16 keys, with the warp's keys as rows:
//   S^T = K Q^T, dP^T = V dO^T, P = exp(s - lse), ds = P (dP - D) / sqrt(hd)
//   dV += P^T dO, dK += ds^T Q (registers); dQ += ds K through shared memory and fp32 atomics.
// grid (ceil(T/ROWS), B*NH), block THREADS; dqh must be zero on entry.
template <int HD>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
softmax_backward_kernel(floatX* dqkv, float* dqh, float* dkh, const floatX* dout, const floatX* qkv,
                        const float* stats, const float* rowd, int T, int NH) {
    using Tile = AttnTile<HD>;
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, LDS = Tile::LDS, RT = Tile::RTILES;
    SHARED_TILE(sK, ROWS * LD);
    SHARED_TILE(sQ, ROWS * LD);
    SHARED_TILE(sdO, ROWS * LD);
    SHARED_TILE(sdS, ROWS * LDS);  // (query, key): ds / sqrt(hd), the A operand of dQ
    SHARED_ARRAY(float, row_lse, ROWS);
    SHARED_ARRAY(float, row_D, ROWS);

    int C = NH * HD;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int kt = blockIdx.x;
    int k0 = kt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const floatX* q_base = qkv + (size_t)b * T * 3 * C + h * HD;
    const floatX* k_base = q_base + C;
    const floatX* v_base = q_base + 2 * C;
    const floatX* do_base = dout + (size_t)b * T * C + h * HD;
    const float scale = 1.0f / sqrtf((float)HD);

    load_tile<ROWS, HD, LD>(sK, k_base, 3 * C, k0, T);
    load_tile<ROWS, HD, LD>(sQ, v_base, 3 * C, k0, T);  // V, only to read its fragments
    __syncthreads();
    FragA kf[Tile::KSTEPS], vf[Tile::KSTEPS];
    load_frags_a(kf, sK, LD, warp * 16);
    load_frags_a(vf, sQ, LD, warp * 16);
    int key[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) { key[r] = k0 + warp * 16 + lane / 4 + 8 * r; }

    FragC dk_acc[Tile::HTILES], dv_acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) {
        frag_zero(dk_acc[nt]);
        frag_zero(dv_acc[nt]);
    }

    int num_qt = ceil_div(T, ROWS);
    for (int qt = kt; qt < num_qt; qt++) {
        int q0 = qt * ROWS;
        __syncthreads();  // the previous query tile has been read
        load_tile<ROWS, HD, LD>(sQ, q_base, 3 * C, q0, T);
        load_tile<ROWS, HD, LD>(sdO, do_base, C, q0, T);
        for (int i = threadIdx.x; i < ROWS; i += blockDim.x) {
            int t = q0 + i;
            row_lse[i] = t < T ? stats[((size_t)bh * T + t) * 3] : 0.0f;
            row_D[i] = t < T ? rowd[((size_t)bh * T + t) * 2] : 0.0f;
        }
        __syncthreads();

        FragC s[RT], dp[RT];
        warp_mma_abt(s, kf, sQ, LD);    // s^T (keys x queries), before scaling
        warp_mma_abt(dp, vf, sdO, LD);  // dP^T = v . dy
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int tl = nt * 8 + frag_col(lane, i);
                int t = q0 + tl;
                float P = 0.0f, ds = 0.0f;
                if (key[i / 2] <= t && t < T) {
                    P = expf(s[nt].x[i] * scale - row_lse[tl]);
                    ds = P * (dp[nt].x[i] - row_D[tl]) * scale;
                }
                s[nt].x[i] = P;
                dp[nt].x[i] = ds;
                sdS[tl * LDS + warp * 16 + frag_row(lane, i)] = (floatX)ds;
            }
        }
        FragA pf[RT / 2], dsf[RT / 2];
        frags_a_from_acc<RT>(pf, s);
        frags_a_from_acc<RT>(dsf, dp);
        warp_mma_ab(dv_acc, pf, sdO, LD);  // dV += P^T dO
        warp_mma_ab(dk_acc, dsf, sQ, LD);  // dK += ds^T Q
        __syncthreads();                   // sdS complete

        warp_accumulate_dq<RT, Tile::HTILES>(dqh + (size_t)b * T * C + h * HD, C, T, q0, sdS, LDS, sK, LD, warp,
                                             lane);
    }

    warp_store_dk_dv<Tile::HTILES>(dkh + (size_t)b * T * C + h * HD, C, dqkv + ((size_t)b * T * 3 + 2) * C + h * HD,
                                   key, T, dk_acc, dv_acc, lane);
}
