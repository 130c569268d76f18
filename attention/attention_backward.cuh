// The attention family's backward kernels (doc/attention.md, section 'Backward'), templated on the variant K like
// the forward (attention/attention_forward.cuh). CPU twin: attention/attention_cpu.h.
//
//   rowd     (B, NH, T, 2)     fp32: (D2, D1) of every row
//   dqh, dkh (B, T, NH, HD)    fp32: gradients of the (normalised, for cos_len) q and k
//
// D2 = sum_j W dW and D1 = sum_j A dA per row: for l1 without re-weighting both are dy . y
// (attention_rowdot_kernel); with re-weighting one more pass over the keys gives them from the
// unrounded weights (attention_rowd_kernel); none and mean need neither. Then one block per
// (key tile, head) walks the query tiles from the diagonal down and accumulates dV and dK in
// registers while dQ goes to fp32 atomics; attn_normgrad_kernel maps dq-hat and dk-hat
// through the normalisation (cos_len) or scales dq by the row's factor and casts it (dot scores,
// whose dk the main pass writes). ssmax's dL/ds per head comes from dq-hat before that
// (attn_ssmax_ds_kernel).
#pragma once

#include <type_traits>
#include "attention/attention_common.cuh"

// What the backward knows of query row t (one per row of a query tile, in shared memory).
// A row past T is dead: its weights and score gradients come out 0 without a mask.
struct AttnRowInfo {
    float score_scale;  // the factor on q~ . k~ in score units (attn_score_unit): lam fac_q (cos_len) or
                        // attn_row_factor (dot scores: 1/sqrt(hd), log-length scaled, ssmax's s ln(n_t) / sqrt(hd))
    float scale;        // the same in natural units: the factor on ds for dK
    float dq_scale;     // lam or attn_row_factor: the factor on ds for dQ, times k_fac; used for cos_len only
                        // (dot scores' dQ takes its factor in attn_normgrad_kernel)
    float bias;         // the score's bias, in score units
    float norm;         // l1: lse in log2 units (exp; as saved, less the shift without re-weighting:
                        // attn_bwd_shifts) or 1/S1 (0 for a row with S1 = 0); mean: 1/n
                        // (n = attn_len_n: n_t, or the constant attn_len > 0)
    float n, o;         // visible keys, the re-weighting's bias
    float inv_m, inv_Z;  // re-weighting: 1/m, 1/Z (0: the row passes no gradient)
    float D2, D1;
};
// The main backward's shared copy of a row's AttnRowInfo. The re-weighting variants read 10 of its
// 11 fields per element: padded to 48 bytes they are three 16-byte loads (44 bytes take 4- and
// 8-byte ones). The others read 5 and keep 44 bytes (padded, softmax's backward spills at sm_90).
struct AttnRowInfoPadded : AttnRowInfo { float pad; };
template <bool PADDED> using AttnRowSlot = std::conditional_t<PADDED, AttnRowInfoPadded, AttnRowInfo>;
template <bool PADDED> __device__ __forceinline__ AttnRowSlot<PADDED> attn_row_slot(const AttnRowInfo& ri) {
    if constexpr (PADDED) { return AttnRowInfoPadded{ri, 0.0f}; }
    else { return ri; }
}

// A = the normalised phi of score sv, and phi'(sv) normalised the same way (dA/ds; exp: A):
// 2^(s - lse), phi/S1, phi, phi/n (norm = 1/S1, 1/n; exp: lse, in the main backward less its shift).
template <AttnKind K>
__device__ __forceinline__ float attn_A_dev(float sv, float norm, float n, float* dA_ds) {
    using V = AttnTraits<K>;
    if constexpr (V::phi == ATTN_PHI_EXP) {
        float A = exp2f(sv - norm);
        *dA_ds = A;
        return A;
    } else {
        float dphi, phi = attn_phi_dphi_dev<K>(sv, 0.0f, &dphi);
        float f = V::norm == ATTN_NORM_NONE ? 1.0f : norm;
        *dA_ds = dphi * f;
        return phi * f;
    }
}

// hp: the head parameter (ssmax's s; re-weighting's p is not part of the score)
template <AttnKind K, int HD>
__device__ __forceinline__ AttnRowInfo attn_row_info(int t, int T, const float* st, const float* rd, const float* sc,
                                                     int attn_len, float hp) {
    using V = AttnTraits<K>;
    AttnRowInfo ri{};
    ri.n = 1.0f;  // a dead row: A = 0 (exp: 2^(0 - inf); l1: 1/S1 = 0; mean: relu(0)/1), dA = 0 from dy = 0
    if (t >= T) {
        ri.norm = V::phi == ATTN_PHI_EXP ? INFINITY : 0.0f;
        return ri;
    }
    float factor = attn_row_factor<K, HD>(t, attn_len, hp);
    ri.scale = factor * (sc ? sc[T + t] : 1.0f);
    ri.score_scale = ri.scale * attn_score_unit<K>();
    ri.dq_scale = factor;
    ri.bias = attn_row_bias<K>(t, attn_len) * attn_score_unit<K>();
    ri.n = (float)(t + 1);
    if (V::norm == ATTN_NORM_MEAN) { ri.norm = 1.0f / (float)attn_len_n_dev(t, attn_len); }
    // exp: saved in log2 units; without re-weighting, less the backward's shift (rd[0]: attn_bwd_norm_kernel)
    else if (attn_bwd_shifts<K>()) { ri.norm = rd[0]; }
    else { ri.norm = V::phi == ATTN_PHI_EXP ? st[0] : st[0] > 0.0f ? 1.0f / st[0] : 0.0f; }
    ri.o = t < 3 ? 0.0f : 1.0f;
    bool live = V::reweight && st[1] > 0.0f && st[2] > 0.0f;
    ri.inv_m = live ? 1.0f / st[1] : 0.0f;
    ri.inv_Z = live ? 1.0f / st[2] : 0.0f;
    ri.D2 = rd[0];
    ri.D1 = rd[1];
    return ri;
}

// The re-weighting's extra backward pass: D2 and D1 of every row, in fp32 from the unrounded
// weights. With r = x/m and c = p r^(p-1) / (m Z) for x > 0 (else 0), dx = c (dW - D2) and
// dA = n dx, so
//   D2 = sum_j W_j dW_j = sum_j r_j^p dW_j / Z
//   D1 = sum_j A_j dA_j = n (sum_j A_j c_j dW_j - D2 sum_j A_j c_j)
// and one pass over the keys gives all three sums (D2 is not taken from the bf16 output y,
// whose rounding the difference dW - D2 would amplify). Same grid as the forward.
// Learned p (LEARN_P; p_head (NH) the heads' p): the same pass gives the row's dL/dp
// (doc/attention.md, section 'Learned p'), with ln W_j = p ln r_j - ln Z and sum_j W_j = 1:
//   dL/dp = sum_j dW_j W_j (ln r_j - sum_k W_k ln r_k) = (sum_j u_j ln r_j dW_j - D2 sum_j u_j ln r_j) / Z
// (u = r^p; degenerate rows and x <= 0 add nothing), summed over the warp's rows and added to
// dp_head[h] by one fp32 atomic per warp.
// Blocks per SM asked of ptxas (0: none, ptxas chooses; 1 would let it take up to 255 registers):
// chosen so that no variant spills at sm_90. 0 at hd 32 and 64, where ptxas stays without a spill on
// its own and a bound spills; 6 (12 warps, <= 168 registers) at hd 128, but 0 for sigmoid_l1_rw with
// learned p, which spills there at 6 (scripts/kernel_stats.sh prints the figures;
// doc/performance.md, section 'Launch bounds and spills').
template <int HD, AttnKind K, bool LEARN_P> constexpr int attn_rowd_min_blocks() {
    if (HD != 128) { return 0; }
    return K == ATTN_SIGMOID_L1_RW && LEARN_P ? 0 : 6;
}
template <int HD, AttnKind K, bool LEARN_P>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS, (attn_rowd_min_blocks<HD, K, LEARN_P>()))
attention_rowd_kernel(float* rowd, float* dp_head, const floatX* dout, const floatX* qkv, const float* stats,
                      const float* scales, int T, int NH, float p, const float* p_head, int attn_len) {
    static_assert(AttnTraits<K>::reweight, "the D1 pass is the re-weighting variants' (attention_rowdot_kernel otherwise)");
    using Tile = AttnTile<HD>;
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, RT = Tile::RTILES;
    constexpr int TILE = ROWS * LD, KFAC = AttnTraits<K>::cos_len ? ROWS : 0;  // one buffer of sK/sV, key_fac
    // two buffers: key tile kt+1 lands while tile kt is read; key_fac's two (2 KFAC floats) behind
    // them, as in the forward
    SHARED_TILE(sK, 2 * TILE + (AttnTraits<K>::cos_len ? 4 * KFAC : 0));
    SHARED_TILE(sV, 2 * TILE);
    // Q and dO are read only into the warps' fragments, before the first barrier of
    // attn_fwd_tiles, and the second buffers are first written after it
    const sptr<floatX> sQ = sK + TILE, sdO = sV + TILE;
    const sptr<float> key_fac = sptr_cast<float>(sK + 2 * TILE);

    const AttnHead hp = attn_head<K, HD>(qkv, scales, T, NH);
    const int C = hp.C, bh = hp.bh;
    const floatX *q_base = hp.q, *k_base = hp.k, *v_base = hp.v;
    const float* sc = hp.sc;
    const floatX* do_base = dout + hp.rows_offset;
    int qt = gridDim.x - 1 - blockIdx.x;
    int q0 = qt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    attn_head_p(p_head, hp.h, &p);

    // Q, dO (one group), then key tile 0 (the next), all asynchronous; cos_len: Q scaled by q_mul
    // in shared memory once it has landed, K's k_mul in key_fac's k_fac k_mul (attn_fwd_issue_key_tile)
    load_tile_async<ROWS, HD, LD, Tile::THREADS>(sQ, q_base, 3 * C, q0, T);
    load_tile_async<ROWS, HD, LD, Tile::THREADS>(sdO, do_base, C, q0, T);
    cp_async_commit();
    auto load_kv = [&](int kt, int buf) {
        attn_fwd_issue_key_tile<K, HD, false>(sK + buf * TILE, key_fac + buf * KFAC, k_base, C, kt, T, hp.kfm);
        load_tile_async<ROWS, HD, LD, Tile::THREADS>(sV + buf * TILE, v_base, 3 * C, kt * ROWS, T);
    };
    int stage = 0;  // key tiles loaded so far (attn_fwd_tiles)
    load_kv(0, 0);
    cp_async_commit();
    cp_async_wait<1>();  // Q and dO
    if constexpr (AttnTraits<K>::cos_len) { scale_tile_async_rows<ROWS, HD, LD, Tile::THREADS>(sQ, q0, T, sc); }
    __syncthreads();
    FragA qf[Tile::KSTEPS], dof[Tile::KSTEPS];
    load_frags_a(qf, sQ, LD, warp * 16);
    load_frags_a(dof, sdO, LD, warp * 16);

    int row[2];
    float row_scale[2], row_bias[2], zero[2] = {0.0f, 0.0f};
    AttnRowInfo ri[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        row[r] = q0 + warp * 16 + lane / 4 + 8 * r;
        int t = min(row[r], T - 1);
        const float* st = stats + ((size_t)bh * T + t) * 3;
        ri[r] = attn_row_info<K, HD>(row[r], T, st, zero, sc, attn_len, p);  // (attn_len: softmax_rw's log-length scaling)
        row_scale[r] = ri[r].score_scale;
        row_bias[r] = ri[r].bias;
    }

    // per lane: sum r^p dW, sum A r^(p-1) dW, sum A r^(p-1); learned p: sum r^p ln r dW, sum r^p ln r
    float sum_udw[2] = {0.0f, 0.0f}, sum_acdw[2] = {0.0f, 0.0f}, sum_ac[2] = {0.0f, 0.0f};
    float sum_uldw[2] = {0.0f, 0.0f}, sum_ul[2] = {0.0f, 0.0f};
    auto step = [&](int kt, int buf, auto masked) {  // masked: the diagonal tile
        sptr<floatX> sKb = sK + buf * TILE, sVb = sV + buf * TILE;
        FragC s[RT], dw[RT];
        attn_scores<K, HD, false>(s, qf, sKb, key_fac + buf * KFAC, row_scale, row_bias);
        warp_mma_abt(dw, dof, sVb, LD);  // dW = dy . v
        // x/m = min(relu(x) / m, 1) (0 where x <= 0, and in a row passing no gradient: 1/m = 0)
        // and A, computed for every element without a branch; the diagonal tile zeroes both on
        // masked keys (whose A, unnormalised there, may overflow). The next loop's select makes
        // every term of an element with x/m = 0 zero.
        FragC xm[RT], A[RT];
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                float dA_ds, a = attn_A_dev<K>(s[nt].x[i], ri[r].norm, ri[r].n, &dA_ds);
                float x = ri[r].n * a - ri[r].o;
                xm[nt].x[i] = fminf(fmaxf(x, 0.0f) * ri[r].inv_m, 1.0f);
                A[nt].x[i] = a;
                if (decltype(masked)::value && kt * ROWS + nt * 8 + frag_col(lane, i) > row[r]) {
                    xm[nt].x[i] = A[nt].x[i] = 0.0f;
                }
            }
        }
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                // (x/m)^(p-1) = 2^((p-1) log2 (x/m)); the elements with x/m = 0 get rp1 = 0 from the
                // select (log2 0 = -inf: 0 for p > 1, NaN at p = 1) and add nothing (their A is finite)
                float xv = xm[nt].x[i], log2_xm = log2f(xv);
                float rp1 = xv > 0.0f ? exp2f((p - 1.0f) * log2_xm) : 0.0f;
                sum_udw[r] += rp1 * xv * dw[nt].x[i];
                sum_acdw[r] += A[nt].x[i] * rp1 * dw[nt].x[i];
                sum_ac[r] += A[nt].x[i] * rp1;
                if constexpr (LEARN_P) {  // u ln r; 0 where x <= 0
                    float ul = xv > 0.0f ? rp1 * xv * (log2_xm * ATTN_LN2) : 0.0f;
                    sum_uldw[r] += ul * dw[nt].x[i];
                    sum_ul[r] += ul;
                }
            }
        }
    };
    attn_fwd_tiles(qt, stage, load_kv, step, [](int) {});
    float dp = 0.0f;  // learned p: dL/dp of the lane's rows (every lane of a quad holds the quad's)
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        float D2 = quad_sum(sum_udw[r]) * ri[r].inv_Z;
        float c = ri[r].n * p * ri[r].inv_m * ri[r].inv_Z;  // n p / (m Z)
        float D1 = c * (quad_sum(sum_acdw[r]) - D2 * quad_sum(sum_ac[r]));
        if (lane % 4 == 0 && row[r] < T) {
            rowd[((size_t)bh * T + row[r]) * 2] = D2;
            rowd[((size_t)bh * T + row[r]) * 2 + 1] = D1;
        }
        if constexpr (LEARN_P) { dp += (quad_sum(sum_uldw[r]) - D2 * quad_sum(sum_ul[r])) * ri[r].inv_Z; }
    }
    if constexpr (LEARN_P) {
        dp = warp_sum(lane % 4 == 0 ? dp : 0.0f);  // the warp's 16 rows, each once
        if (lane == 0 && dp != 0.0f) { atomicAdd(dp_head + hp.h, dp); }
    }
}

// The final weight P and the score gradient ds of one (query, key) element, from the score sv
// (score units) and the upstream dW = dy . v_j; exp without re-weighting: both 2^32 too large where
// the launch shifts (attn_bwd_shifts).
template <AttnKind K>
__device__ __forceinline__ void attn_element_grad(float sv, float dW, const AttnRowInfo& ri, float p,
                                                  float* P, float* ds) {
    using V = AttnTraits<K>;
    float g, A = attn_A_dev<K>(sv, ri.norm, ri.n, &g);  // g = dA/ds: phi'/S1 (exp: A), phi', phi'/n
    float dA = dW;
    *P = A;
    if constexpr (V::reweight) {
        float x = ri.n * A - ri.o;
        *P = 0.0f;
        dA = 0.0f;
        // live where x/m > 0 (x > 0 and 1/m > 0), as attention_rowd_kernel counts it: an x/m below
        // fp32's smallest normal is 0 under fast math's flush-to-zero, and log2 0 = -inf would give
        // (p - 1) (-inf) = NaN at p = 1 (the kink's noise: x itself is uncertain by ~2^-24)
        float r = x * ri.inv_m;
        if (r > 0.0f) {
            float xm = fminf(r, 1.0f);
            float xp1 = exp2f((p - 1.0f) * log2f(xm));  // (x/m)^(p-1), xm in (0, 1] (pow_rel_max's error)
            *P = xp1 * xm * ri.inv_Z;                         // W = u / Z
            dA = ri.n * p * xp1 * (dW - ri.D2) * ri.inv_m * ri.inv_Z;
        }
    }
    *ds = V::norm == ATTN_NORM_L1 ? g * (dA - ri.D1) : g * dA;
}

// Buffers of the backward's query tiles (Q, dO, row data): two, so that tile qt+1 lands while tile
// qt is computed, except at hd 128, where a block would then take 57,600 bytes and the 4 blocks
// (8 warps) that 255 registers allow no longer fit an SM's 228 KiB; one there (issued at the tile's
// start, all copies before the one wait). LSSA takes one at every head size: with two it spills at
// hd 64 (sm_90), with one it does not.
template <int HD, AttnKind K> __host__ __device__ constexpr int attn_bwd_query_buffers() {
    return HD == 128 || K == ATTN_LSSA ? 1 : 2;
}
// Dynamic shared memory of attention_backward_kernel: the buffers of Q and dO.
template <int HD, AttnKind K> __host__ __device__ constexpr size_t attn_bwd_dynamic_smem() {
    return 2 * attn_bwd_query_buffers<HD, K>() * sizeof(floatX) * AttnTile<HD>::ROWS * AttnTile<HD>::LD;
}

// Main backward: one block per (key tile, head), one warp per 16 keys; walks the query tiles
// from the diagonal down. Per query tile, with the warp's keys as rows (transposed scores):
//   S^T = K~ Q~^T, dW^T = V dO^T   -> P (the final weights), ds elementwise
//   dV  += P^T dO,  dK~ += (scale ds)^T Q~   (registers)
//   dQ~ += (dq_scale k_fac ds) K~  through shared memory and fp32 atomics into dqh
// (dot scores: k_fac = 1 and dQ = ds K, taken times the row's factor (attn_row_factor) by
// attn_normgrad_kernel; keys past T occur on the diagonal tile alone, masked there)
// grid (ceil(T/ROWS), B*NH), block THREADS, attn_bwd_dynamic_smem<HD, K>() bytes of dynamic shared
// memory; dqh must be zero on entry. p_head: as the forward's. shift_off: exp without re-weighting,
// the flag attention_rowdot_kernel left (attn_bwd_shifts); rowd[0] then holds the shifted lse.
// 8 warps per SM (up to 255 registers): at 12 (minBlocks 12 / WARPS: <= 168 registers) every
// variant spills at hd 64 at sm_90 (the figures per variant and head size:
// doc/performance.md, section 'Launch bounds and spills'). The D1 pass, attention_rowd_kernel,
// runs at 12 warps per SM at hd 64 (attn_rowd_min_blocks).
template <int HD, AttnKind K>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
attention_backward_kernel(floatX* dqkv, float* dqh, float* dkh, const floatX* dout, const floatX* qkv,
                          const float* stats, const float* rowd, const float* scales, int T, int NH, float p,
                          const float* p_head, int attn_len, const float* shift_off) {
    using Tile = AttnTile<HD>;
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, LDS = Tile::LDS, RT = Tile::RTILES;
    SHARED_TILE(sK, ROWS * LD);
    SHARED_TILE(sV, ROWS * LD);
    SHARED_TILE(sdS, ROWS * LDS);  // (query, key): dq_scale k_fac ds, the A operand of dQ
    constexpr int BUFS = attn_bwd_query_buffers<HD, K>();
    using RowSlot = AttnRowSlot<AttnTraits<K>::reweight>;
    SHARED_ARRAY(RowSlot, row_info, BUFS * ROWS);  // BUFS buffers, as Q and dO
    // Q and dO in BUFS buffers each: past 48 KiB of static shared memory with two, so dynamic
    // (attn_bwd_dynamic_smem bytes)
    constexpr int TILE = ROWS * LD;
    DYNAMIC_SHARED(floatX, sQ);
    const sptr<floatX> sdO = sQ + BUFS * TILE;

    const AttnHead hp = attn_head<K, HD>(qkv, scales, T, NH);
    const int C = hp.C, bh = hp.bh;
    const floatX *q_base = hp.q, *k_base = hp.k, *v_base = hp.v;
    const float* sc = hp.sc;
    const floatX* do_base = dout + hp.rows_offset;
    int kt = blockIdx.x;
    int k0 = kt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if constexpr (AttnTraits<K>::reweight) { attn_head_p(p_head, hp.h, &p); }

    // the block's keys K~ (also the B operand of dQ) and values, read as the warp's A fragments
    // on every query tile (fewer live registers than holding them), copied asynchronously with
    // the first query tile. cos_len: K and Q are scaled by k_mul, q_mul in shared memory once
    // their copies have landed (folding both into the scores' factors would overflow q . k for
    // huge norms)
    load_tile_async<ROWS, HD, LD, Tile::THREADS>(sK, k_base, 3 * C, k0, T);
    load_tile_async<ROWS, HD, LD, Tile::THREADS>(sV, v_base, 3 * C, k0, T);
    int key[2];
    float kfac[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        key[r] = k0 + warp * 16 + lane / 4 + 8 * r;
        kfac[r] = key[r] >= T ? 0.0f : sc ? sc[3 * T + key[r]] : 1.0f;
    }
    // query tile qt into buffer buf: Q, dO in flight (one group), row_info written; every thread calls it
    auto issue_query_tile = [&](int qt, int buf) {
        int q0 = qt * ROWS;
        load_tile_async<ROWS, HD, LD, Tile::THREADS>(sQ + buf * TILE, q_base, 3 * C, q0, T);
        load_tile_async<ROWS, HD, LD, Tile::THREADS>(sdO + buf * TILE, do_base, C, q0, T);
        cp_async_commit();
        static_assert(Tile::THREADS >= ROWS, "one query row per thread");
        int i = threadIdx.x, t = min(q0 + i, T - 1);
        if (i < ROWS) {
            // ssmax's s read here, at each tile, not held through the loop (a register more spills at hd 64)
            float s_h = AttnTraits<K>::ssmax && p_head != nullptr ? p_head[hp.h] : p;
            row_info[buf * ROWS + i] = attn_row_slot<AttnTraits<K>::reweight>(attn_row_info<K, HD>(
                q0 + i, T, stats + ((size_t)bh * T + t) * 3, rowd + ((size_t)bh * T + t) * 2, sc, attn_len, s_h));
        }
    };
    const int num_qt = ceil_div(T, ROWS);
    if constexpr (BUFS == 2) { issue_query_tile(kt, 0); }  // with K and V
    else { cp_async_commit(); }                             // K and V (tile() issues every query tile)
    if constexpr (AttnTraits<K>::cos_len) {
        cp_async_wait<0>();
        scale_tile_async_rows<ROWS, HD, LD, Tile::THREADS>(sK, k0, T, sc + 2 * T);
    }

    FragC dk_acc[Tile::HTILES], dv_acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) {
        frag_zero(dk_acc[nt]);
        frag_zero(dv_acc[nt]);
    }

    // query tile qt; masked: the diagonal tile (qt = kt), where keys past the query are masked.
    // Below it every key is visible and dead rows (past T) give P = ds = 0 without a mask.
    // Double-buffered: tile qt sits in buffer (qt - kt) % 2; after the barrier that shows it to
    // the block (and frees the other buffer, of tile qt-1), tile qt+1 is issued into the other
    // and lands while tile qt is computed. Single-buffered (hd 128): tile qt is issued at its
    // start, its buffers free since the barrier that completed the previous tile's sdS.
    auto tile = [&](int qt, auto masked) {
        int q0 = qt * ROWS, buf = BUFS == 2 ? (qt - kt) & 1 : 0;
        if constexpr (BUFS == 1) { issue_query_tile(qt, 0); }
        cp_async_wait<0>();  // this thread's copies of tile qt (and, first, of K and V)
        if constexpr (AttnTraits<K>::cos_len) {
            scale_tile_async_rows<ROWS, HD, LD, Tile::THREADS>(sQ + buf * TILE, q0, T, sc);
        }
        __syncthreads();     // everyone's copies and row_info; tile qt-1 and its sdS have been read
        if constexpr (BUFS == 2) {
            if (qt + 1 < num_qt) { issue_query_tile(qt + 1, 1 - buf); }
        }
        const sptr<floatX> sQb = sQ + buf * TILE, sdOb = sdO + buf * TILE;
        const sptr<RowSlot> row_info_b = row_info + buf * ROWS;
        FragC s[RT], dw[RT];
        {
            FragA kf[Tile::KSTEPS];
            load_frags_a(kf, sK, LD, warp * 16);
            warp_mma_abt(s, kf, sQb, LD);  // s^T (keys x queries), before scaling
        }
        {
            FragA vf[Tile::KSTEPS];
            load_frags_a(vf, sV, LD, warp * 16);
            warp_mma_abt(dw, vf, sdOb, LD);  // dW^T = v . dy
        }
        FragC dsk[RT];                  // scale ds : for dK
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                int tl = nt * 8 + frag_col(lane, i);  // query within the tile
                int t = q0 + tl;
                AttnRowInfo ri = row_info_b[tl];
                float P = 0.0f, ds = 0.0f;
                if (!decltype(masked)::value || (key[r] <= t && t < T)) {
                    float sv = attn_scaled_score<K>(s[nt].x[i], ri.score_scale);  // the forward's s
                    if constexpr (AttnTraits<K>::cos_len) { sv *= kfac[r]; }
                    if constexpr (AttnTraits<K>::score == ATTN_SCORE_DOT_LOGN) { sv += ri.bias; }
                    attn_element_grad<K>(sv, dw[nt].x[i], ri, p, &P, &ds);
                }
                s[nt].x[i] = P;
                dsk[nt].x[i] = ds * ri.scale;
                // (query, key) element of dq_scale k_fac ds for dQ (dot scores: ds, the row's
                // factor applied by attn_normgrad_kernel)
                sdS[tl * LDS + warp * 16 + frag_row(lane, i)] =
                    (floatX)(AttnTraits<K>::cos_len ? ds * ri.dq_scale * kfac[r] : ds);
            }
        }
        FragA pf[RT / 2], dsf[RT / 2];
        frags_a_from_acc<RT>(pf, s);
        frags_a_from_acc<RT>(dsf, dsk);
        warp_mma_ab(dv_acc, pf, sdOb, LD);  // dV += P^T dO
        warp_mma_ab(dk_acc, dsf, sQb, LD);  // dK~ += ds^T Q~
        __syncthreads();                   // sdS complete

        // dQ~ of the warp's 16 queries += dS (16 x ROWS keys) K~
        warp_accumulate_dq<RT, Tile::HTILES>(dqh + hp.rows_offset, C, T, q0, sdS, LDS, sK, LD, warp,
                                             lane);
    };
    tile(kt, std::true_type{});
    for (int qt = kt + 1; qt < num_qt; qt++) { tile(qt, std::false_type{}); }

    // dv (bf16) and dk of the warp's keys, taken back by attn_bwd_unscale: fp32 into dkh for cos_len
    // (finished by attn_normgrad_kernel), bf16 straight into dqkv for dot scores
    floatX* dk_rows = dqkv + ((size_t)hp.b * T * 3 + 1) * C + hp.h * HD;  // (B, T, 3, NH, HD): k, then v
    const float unscale = attn_bwd_unscale<K>(shift_off);
    floatX* dv_rows = dk_rows + C;
    if constexpr (AttnTraits<K>::cos_len) {
        warp_store_dk_dv<Tile::HTILES>(dkh + hp.rows_offset, C, C, dv_rows, key, T, dk_acc, dv_acc, lane,
                                       unscale);
    } else {
        warp_store_dk_dv<Tile::HTILES>(dk_rows, 3 * C, C, dv_rows, key, T, dk_acc, dv_acc, lane,
                                       unscale);
    }
}

// ssmax's dL/ds of head h (dp_head[h] +=) from the main backward's dqh, the gradient of q before the
// row's factor (dqh_t = sum_j ds_tj k_j):
//   dL/ds_h = sum_t ln(n_t)/sqrt(hd) sum_j ds_tj (q_t . k_j) = sum_t ln(n_t)/sqrt(hd) (q_t . dqh_t)
// Here and not in the main backward, where a per-lane sum over every element held through its loop
// over the query tiles spilled at hd 64 (sm_90) and softmax's does not; dqh carries ds as rounded to
// bf16 for the dQ product (learned p's dL/dp takes the unrounded weights of its row pass, which
// ssmax has no need of).
// grid (ceil(T / ATTN_SSMAX_DS_ROWS), B NH), ATTN_SSMAX_DS_WARPS warps: each warp ATTN_SSMAX_DS_ROWS /
// ATTN_SSMAX_DS_WARPS rows, one fp32 atomic per block.
constexpr int ATTN_SSMAX_DS_WARPS = 8, ATTN_SSMAX_DS_ROWS = 64;
template <int HD>
__global__ void attn_ssmax_ds_kernel(float* dp_head, const float* dqh, const floatX* qkv, int T, int NH,
                                     const float* shift_off) {
    constexpr int PER_WARP = ATTN_SSMAX_DS_ROWS / ATTN_SSMAX_DS_WARPS;
    SHARED_ARRAY(float, warp_sums, ATTN_SSMAX_DS_WARPS);
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float sum = 0.0f;
    for (int r = 0; r < PER_WARP; r++) {
        int t = blockIdx.x * ATTN_SSMAX_DS_ROWS + warp * PER_WARP + r;
        if (t >= T) { break; }
        const floatX* q = qkv + (size_t)(b * T + t) * 3 * C + h * HD;
        const float* g = dqh + (size_t)(b * T + t) * C + h * HD;
        float d = 0.0f;
        for (int i = lane; i < HD; i += 32) { d += (float)q[i] * g[i]; }
        sum = fmaf(attn_ssmax_len<HD>(t), d, sum);
    }
    sum = warp_sum(sum);
    if (lane == 0) { warp_sums[warp] = sum; }
    __syncthreads();
    if (threadIdx.x == 0) {
        float block_sum = 0.0f;
        for (int w = 0; w < ATTN_SSMAX_DS_WARPS; w++) { block_sum += warp_sums[w]; }
        block_sum *= attn_bwd_unscale<ATTN_SSMAX>(shift_off);  // dqh carries the main backward's shift
        if (block_sum != 0.0f) { atomicAdd(dp_head + h, block_sum); }
    }
}
