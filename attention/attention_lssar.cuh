// LSSA and LSSAR attention (doc/attention.md, section 'The CUDA kernels'): causal, flash-style,
// O(T) memory, tensor cores.
// One kernel family for both: REWEIGHT = false is LSSA (stage 1), true is LSSAR (stage 2 on).
// CPU twin: attention/attention_cpu.h. Test: test/test_attention_cuda.cu.
//
// Shapes (C = NH * HD):
//   qkv    (B, T, 3, NH, HD) bf16, RoPE applied to q and k
//   out    (B, T, NH, HD)    bf16
//   stats  (B, NH, T, 3)     fp32, saved for the backward: LSSA (S1, 0, 0), LSSAR (S1, m, Z)
//   scales (B, NH, 4, T)     fp32 scratch: q_mul, q_fac, k_mul, k_fac of every row (below)
//   rowd   (B, NH, T, 2)     fp32 scratch of the backward: (D2, D1) of every row
//   dqh, dkh (B, T, NH, HD)  fp32 scratch of the backward: gradients of the normalised q and k
//
// The L2 normalisation without rounding q/|q| to bf16: a row x is loaded to shared memory as
// x * mul, with mul a power of two that brings its largest element into [0.5, 1) (exact in
// bf16, and it keeps q.k far from fp32 overflow and underflow for huge or tiny norms); the
// mma gives (mul_q q).(mul_k k) in fp32, and the fp32 factors fac = 1/|mul x| (1/(mul eps)
// when |x| <= eps) finish the cosine: s = lam * fac_q * fac_k * acc.
//
// Forward, one block per (query tile, head); one warp per 16 query rows:
//   LSSA:  a single pass over the key tiles: S1 += softplus(s), acc += a V; y = acc / S1.
//   LSSAR: pass 1 over the key tiles gives S1 and the largest score s*, so m = n
//          (softplus(s*)/S1) - o; pass 2 gives u = (relu(n a/S1 - o)/m)^p, Z += u,
//          acc += u V; y = acc / Z. A degenerate row (m <= 0, Z == 0, or all scores equal
//          with o = 1) gives y = 0 and is saved with Z = 0.
// Backward: LSSA takes D1 = D2 = dy.y per row (attention_rowdot_kernel); LSSAR makes one more
// pass over the keys for D2 = sum_j W dW and D1 = sum_j A dA (lssar_d1_kernel). Then one block
// per (key tile, head) walks the query tiles from the diagonal down and accumulates dV and
// dK-hat in registers while dQ-hat goes to fp32 atomics; lssa_normgrad_kernel maps dq-hat and
// dk-hat through the normalisation to dq and dk.
// Memory beyond q, k, v, out: stats (3 floats per row) between forward and backward; the
// scratch (scales, rowd, dqh, dkh) lives only during one call.
#pragma once

#include <cmath>
#include "attention/tile.cuh"

constexpr float LSSA_EPS = 1e-12f;  // eps of the q/k L2 normalisation (doc/attention.md, section 'LSSA')

// softplus(s) and sigmoid(s) from one exponential: e = exp(-|s|).
__device__ __forceinline__ float softplus_from(float s, float e) { return fmaxf(s, 0.0f) + log1pf(e); }
__device__ __forceinline__ float sigmoid_from(float s, float e) { return (s >= 0.0f ? 1.0f : e) / (1.0f + e); }

// x^p for x in [0, 1]: repeated squaring when p is an integer (p_int >= 0), else exp2(p log2 x).
__device__ __forceinline__ float pow_p_dev(float x, float p, int p_int) {
    if (p_int >= 0) {
        float result = 1.0f;
        for (int n = p_int; n > 0; n >>= 1) {
            if (n & 1) { result *= x; }
            x *= x;
        }
        return result;
    }
    return x > 0.0f ? exp2f(p * log2f(x)) : 0.0f;
}

// lam_t = ln(hd) ln(n_t)
__device__ __forceinline__ float lssa_lam(int t, int hd) { return logf((float)hd) * logf((float)(t + 1)); }

// ----------------------------------------------------------------------------
// Kernels

// scales (B, NH, 4, T) from qkv: one warp per (b, t, h) row, for q and for k.
template <int HD>
__global__ void lssa_scales_kernel(float* scales, const floatX* qkv, int B, int T, int NH) {
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
        }
    }
}

// Key tile kt of this head into shared memory: sK the keys times k_mul (k~), key_fac their k_fac
// (0 for keys past T). The block's threads share the loads; the caller synchronises.
template <int ROWS, int HD, int LD>
__device__ __forceinline__ void load_lssa_key_tile(sptr<floatX> sK, sptr<float> key_fac, const floatX* k_base, int C,
                                                   int kt, int T, const float* sc) {
    load_tile<ROWS, HD, LD>(sK, k_base, 3 * C, kt * ROWS, T, sc + 2 * T);
    for (int j = threadIdx.x; j < ROWS; j += blockDim.x) {
        key_fac[j] = kt * ROWS + j < T ? sc[3 * T + kt * ROWS + j] : 0.0f;
    }
}

// The scores of one warp's 16 query rows against a key tile in shared memory:
// s = lam_t fac_q(t) fac_k(j) (q~ . k~) with q~ = mul q, k~ = mul k as loaded.
// row_scale[i] = lam fac_q of the lane's rows (i = 0: row g, 1: row g+8); key_fac in shared.
template <int HD>
__device__ __forceinline__ void lssa_scores(FragC (&s)[AttnTile<HD>::RTILES], const FragA (&qf)[AttnTile<HD>::KSTEPS],
                                            sptr<floatX> sK, sptr<float> key_fac, const float (&row_scale)[2]) {
    using Tile = AttnTile<HD>;
    int lane = threadIdx.x % 32;
    warp_mma_abt(s, qf, sK, Tile::LD);
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::RTILES; nt++) {
        ATTN_UNROLL
        for (int i = 0; i < 4; i++) { s[nt].x[i] *= row_scale[i / 2] * key_fac[nt * 8 + frag_col(lane, i)]; }
    }
}

// Forward. grid (ceil(T/ROWS), B*NH), block THREADS. p_int = p when p is a small integer, else -1.
template <int HD, bool REWEIGHT>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
lssar_forward_kernel(floatX* out, float* stats, const floatX* qkv, const float* scales, int T, int NH,
                     float p, int p_int) {
    using Tile = AttnTile<HD>;
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
    const float* sc = scales + (size_t)bh * 4 * T;  // q_mul, q_fac, k_mul, k_fac planes of this head

    load_tile<ROWS, HD, LD>(sQ, q_base, 3 * C, q0, T, sc);
    __syncthreads();
    FragA qf[Tile::KSTEPS];
    load_frags_a(qf, sQ, LD, warp * 16);

    // this lane's two rows: t = q0 + warp*16 + g (+8)
    int row[2];
    float row_scale[2], n[2], o[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        row[r] = q0 + warp * 16 + lane / 4 + 8 * r;
        row_scale[r] = row[r] < T ? lssa_lam(row[r], HD) * sc[T + row[r]] : 0.0f;
        n[r] = (float)(row[r] + 1);
        o[r] = row[r] < 3 ? 0.0f : 1.0f;
    }

    float S1[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
    bool uniform[2] = {false, false};  // every score of the row equal: A is exactly uniform
    if (REWEIGHT) {  // pass 1: S1 and the largest score of every row
        float smax[2] = {-INFINITY, -INFINITY}, smin[2] = {INFINITY, INFINITY};
        for (int kt = 0; kt <= qt; kt++) {
            __syncthreads();  // the previous key tile has been read
            load_lssa_key_tile<ROWS, HD, LD>(sK, key_fac, k_base, C, kt, T, sc);
            __syncthreads();
            FragC s[RT];
            lssa_scores<HD>(s, qf, sK, key_fac, row_scale);
            ATTN_UNROLL
            for (int nt = 0; nt < RT; nt++) {
                ATTN_UNROLL
                for (int i = 0; i < 4; i++) {
                    int j = kt * ROWS + nt * 8 + frag_col(lane, i);
                    if (j <= row[i / 2]) {
                        float sv = s[nt].x[i];
                        S1[i / 2] += softplus_from(sv, expf(-fabsf(sv)));
                        smax[i / 2] = fmaxf(smax[i / 2], sv);
                        smin[i / 2] = fminf(smin[i / 2], sv);
                    }
                }
            }
        }
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            S1[r] = quad_sum(S1[r]);
            smax[r] = quad_max(smax[r]);
            smin[r] = -quad_max(-smin[r]);
            uniform[r] = smax[r] == smin[r];
            // the same operations as x = n (a / S1) - o, on the largest a: m is the largest x
            m[r] = n[r] * (softplus_from(smax[r], expf(-fabsf(smax[r]))) / S1[r]) - o[r];
        }
    }

    // pass 2 (LSSA's only pass): weights w (a for LSSA, u for LSSAR), their sum, acc += w V
    float wsum[2] = {0.0f, 0.0f};
    FragC acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) { frag_zero(acc[nt]); }
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();
        load_lssa_key_tile<ROWS, HD, LD>(sK, key_fac, k_base, C, kt, T, sc);
        load_tile<ROWS, HD, LD>(sV, v_base, 3 * C, kt * ROWS, T);
        __syncthreads();
        FragC s[RT];
        lssa_scores<HD>(s, qf, sK, key_fac, row_scale);
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                int j = kt * ROWS + nt * 8 + frag_col(lane, i);
                float sv = s[nt].x[i];
                float w = 0.0f;
                if (j <= row[r]) {
                    float a = softplus_from(sv, expf(-fabsf(sv)));
                    if (!REWEIGHT) {
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

    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        wsum[r] = quad_sum(wsum[r]);
        if (!REWEIGHT) { S1[r] = wsum[r]; }
    }
    // y = acc / S1 (LSSA) or acc / Z (LSSAR). A degenerate LSSAR row (m <= 0, Z == 0, or all
    // scores equal with o = 1, where x = 0 exactly and only rounding could make m > 0) gives
    // y = 0 and is saved with Z = 0, so that its backward passes no gradient.
    float inv[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        bool degenerate = REWEIGHT && (!(m[r] > 0.0f) || wsum[r] == 0.0f || (uniform[r] && o[r] == 1.0f));
        if (degenerate) { wsum[r] = 0.0f; }
        inv[r] = degenerate ? 0.0f : 1.0f / wsum[r];
    }
    warp_store_rows_scaled<Tile::HTILES>(out + (size_t)b * T * C + h * HD, C, row, T, acc, inv, lane);
    if (lane % 4 == 0) {
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            if (row[r] >= T) { continue; }
            float* st = stats + ((size_t)bh * T + row[r]) * 3;
            st[0] = S1[r];
            st[1] = REWEIGHT ? m[r] : 0.0f;
            st[2] = REWEIGHT ? wsum[r] : 0.0f;
        }
    }
}

// rowd (B, NH, T, 2): D2 = dy . y, and D1 = D2 for LSSA. One warp per (b, t, h) row.
// Also used by the softmax backward (D = dy . y).
template <int HD>
__global__ void attention_rowdot_kernel(float* rowd, const floatX* dout, const floatX* out, int B, int T, int NH) {
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
    }
}

// LSSAR's extra backward pass: D2 and D1 of every row, in fp32 from the unrounded weights.
// With r = x/m and c = p r^(p-1) / (m Z) for x > 0 (else 0), dx = c (dW - D2) and dA = n dx, so
//   D2 = sum_j W_j dW_j = sum_j r_j^p dW_j / Z
//   D1 = sum_j A_j dA_j = n (sum_j A_j c_j dW_j - D2 sum_j A_j c_j)
// and one pass over the keys gives all three sums (D2 is not taken from the bf16 output y,
// whose rounding the difference dW - D2 would amplify). Same grid as the forward.
template <int HD>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
lssar_d1_kernel(float* rowd, const floatX* dout, const floatX* qkv, const float* stats, const float* scales,
                int T, int NH, float p, int p_int) {
    using Tile = AttnTile<HD>;
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, RT = Tile::RTILES;
    SHARED_TILE(sQ, ROWS * LD);
    SHARED_TILE(sdO, ROWS * LD);
    SHARED_TILE(sK, ROWS * LD);
    SHARED_TILE(sV, ROWS * LD);
    SHARED_ARRAY(float, key_fac, ROWS);

    int C = NH * HD;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int qt = gridDim.x - 1 - blockIdx.x;
    int q0 = qt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const floatX* q_base = qkv + (size_t)b * T * 3 * C + h * HD;
    const floatX* k_base = q_base + C;
    const floatX* v_base = q_base + 2 * C;
    const floatX* do_base = dout + (size_t)b * T * C + h * HD;
    const float* sc = scales + (size_t)bh * 4 * T;

    load_tile<ROWS, HD, LD>(sQ, q_base, 3 * C, q0, T, sc);
    load_tile<ROWS, HD, LD>(sdO, do_base, C, q0, T);
    __syncthreads();
    FragA qf[Tile::KSTEPS], dof[Tile::KSTEPS];
    load_frags_a(qf, sQ, LD, warp * 16);
    load_frags_a(dof, sdO, LD, warp * 16);

    int row[2];
    float row_scale[2], n[2], o[2], S1[2], inv_m[2], inv_Z[2];
    bool live[2];  // not degenerate and inside the sequence
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        row[r] = q0 + warp * 16 + lane / 4 + 8 * r;
        bool in = row[r] < T;
        row_scale[r] = in ? lssa_lam(row[r], HD) * sc[T + row[r]] : 0.0f;
        n[r] = (float)(row[r] + 1);
        o[r] = row[r] < 3 ? 0.0f : 1.0f;
        const float* st = stats + ((size_t)bh * T + (in ? row[r] : 0)) * 3;
        S1[r] = st[0];
        live[r] = in && st[1] > 0.0f && st[2] > 0.0f;
        inv_m[r] = live[r] ? 1.0f / st[1] : 0.0f;
        inv_Z[r] = live[r] ? 1.0f / st[2] : 0.0f;
    }

    // per lane: sum r^p dW, sum A r^(p-1) dW, sum A r^(p-1)
    float sum_udw[2] = {0.0f, 0.0f}, sum_acdw[2] = {0.0f, 0.0f}, sum_ac[2] = {0.0f, 0.0f};
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();
        load_lssa_key_tile<ROWS, HD, LD>(sK, key_fac, k_base, C, kt, T, sc);
        load_tile<ROWS, HD, LD>(sV, v_base, 3 * C, kt * ROWS, T);
        __syncthreads();
        FragC s[RT], dw[RT];
        lssa_scores<HD>(s, qf, sK, key_fac, row_scale);
        warp_mma_abt(dw, dof, sV, LD);  // dW = dy . v
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                int j = kt * ROWS + nt * 8 + frag_col(lane, i);
                if (!live[r] || j > row[r]) { continue; }
                float sv = s[nt].x[i];
                float A = softplus_from(sv, expf(-fabsf(sv))) / S1[r];
                float x = n[r] * A - o[r];
                if (x > 0.0f) {
                    float xm = x * inv_m[r];
                    float rp1 = pow_p_dev(xm, p - 1.0f, p_int - 1);  // (x/m)^(p-1)
                    sum_udw[r] += rp1 * xm * dw[nt].x[i];
                    sum_acdw[r] += A * rp1 * dw[nt].x[i];
                    sum_ac[r] += A * rp1;
                }
            }
        }
    }
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        float D2 = quad_sum(sum_udw[r]) * inv_Z[r];
        float c = n[r] * p * inv_m[r] * inv_Z[r];  // n p / (m Z)
        float D1 = c * (quad_sum(sum_acdw[r]) - D2 * quad_sum(sum_ac[r]));
        if (lane % 4 == 0 && row[r] < T) {
            rowd[((size_t)bh * T + row[r]) * 2] = D2;
            rowd[((size_t)bh * T + row[r]) * 2 + 1] = D1;
        }
    }
}

// Main backward: one block per (key tile, head), one warp per 16 keys; walks the query tiles
// from the diagonal down. Per query tile, with the warp's keys as rows (transposed scores):
//   S^T = K~ Q~^T, dW^T = V dO^T   -> A (or W), ds elementwise
//   dV  += P^T dO,  dK~ += (lam fac_q ds)^T Q~   (registers)
//   dQ~ += (lam fac_k ds) K~  through shared memory and fp32 atomics into dqh
// dkh and dqh are the gradients of the normalised k and q (before lssa_normgrad_kernel).
// grid (ceil(T/ROWS), B*NH), block THREADS; dqh must be zero on entry.
template <int HD, bool REWEIGHT>
__global__ void __launch_bounds__(AttnTile<HD>::THREADS)
lssar_backward_kernel(floatX* dqkv, float* dqh, float* dkh, const floatX* dout, const floatX* qkv,
                      const float* stats, const float* rowd, const float* scales, int T, int NH, float p,
                      int p_int) {
    using Tile = AttnTile<HD>;
    constexpr int ROWS = Tile::ROWS, LD = Tile::LD, LDS = Tile::LDS, RT = Tile::RTILES;
    SHARED_TILE(sK, ROWS * LD);
    SHARED_TILE(sQ, ROWS * LD);
    SHARED_TILE(sdO, ROWS * LD);
    SHARED_TILE(sdS, ROWS * LDS);  // (query, key): lam fac_k ds, the A operand of dQ
    constexpr int RI = 9;          // row_info entries per query row, see below
    SHARED_ARRAY(float, row_info, ROWS * RI);

    int C = NH * HD;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int kt = blockIdx.x;
    int k0 = kt * ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const floatX* q_base = qkv + (size_t)b * T * 3 * C + h * HD;
    const floatX* k_base = q_base + C;
    const floatX* v_base = q_base + 2 * C;
    const floatX* do_base = dout + (size_t)b * T * C + h * HD;
    const float* sc = scales + (size_t)bh * 4 * T;

    // the warp's 16 keys as A fragments: K~ (kept in sK for dQ) and V (through sQ)
    load_tile<ROWS, HD, LD>(sK, k_base, 3 * C, k0, T, sc + 2 * T);
    load_tile<ROWS, HD, LD>(sQ, v_base, 3 * C, k0, T);
    __syncthreads();
    FragA kf[Tile::KSTEPS], vf[Tile::KSTEPS];
    load_frags_a(kf, sK, LD, warp * 16);
    load_frags_a(vf, sQ, LD, warp * 16);
    int key[2];
    float kfac[2];
    ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        key[r] = k0 + warp * 16 + lane / 4 + 8 * r;
        kfac[r] = key[r] < T ? sc[3 * T + key[r]] : 0.0f;
    }

    FragC dk_acc[Tile::HTILES], dv_acc[Tile::HTILES];
    ATTN_UNROLL
    for (int nt = 0; nt < Tile::HTILES; nt++) {
        frag_zero(dk_acc[nt]);
        frag_zero(dv_acc[nt]);
    }

    int num_qt = ceil_div(T, ROWS);
    for (int qt = kt; qt < num_qt; qt++) {
        int q0 = qt * ROWS;
        __syncthreads();  // sQ, sdO, sdS, row_info of the previous tile have been read
        load_tile<ROWS, HD, LD>(sQ, q_base, 3 * C, q0, T, sc);
        load_tile<ROWS, HD, LD>(sdO, do_base, C, q0, T);
        // row_info: 0 lam fac_q, 1 lam, 2 1/S1, 3 n, 4 o, 5 1/m (0: the row passes no gradient), 6 1/Z, 7 D2, 8 D1
        for (int i = threadIdx.x; i < ROWS; i += blockDim.x) {
            int t = q0 + i;
            sptr<float> ri = row_info + i * RI;
            if (t < T) {
                const float* st = stats + ((size_t)bh * T + t) * 3;
                float lam = lssa_lam(t, HD);
                bool live = !REWEIGHT || (st[1] > 0.0f && st[2] > 0.0f);
                ri[0] = lam * sc[T + t];
                ri[1] = lam;
                ri[2] = 1.0f / st[0];
                ri[3] = (float)(t + 1);
                ri[4] = t < 3 ? 0.0f : 1.0f;
                ri[5] = REWEIGHT && live ? 1.0f / st[1] : 0.0f;
                ri[6] = REWEIGHT && live ? 1.0f / st[2] : 0.0f;
                ri[7] = rowd[((size_t)bh * T + t) * 2];
                ri[8] = rowd[((size_t)bh * T + t) * 2 + 1];
            } else {
                ATTN_UNROLL
                for (int c = 0; c < RI; c++) { ri[c] = 0.0f; }
            }
        }
        __syncthreads();

        FragC s[RT], dw[RT];
        warp_mma_abt(s, kf, sQ, LD);   // s^T (keys x queries), before scaling
        warp_mma_abt(dw, vf, sdO, LD); // dW^T = v . dy
        FragC dsk[RT];                  // lam fac_q ds : for dK
        ATTN_UNROLL
        for (int nt = 0; nt < RT; nt++) {
            ATTN_UNROLL
            for (int i = 0; i < 4; i++) {
                int r = i / 2;
                int tl = nt * 8 + frag_col(lane, i);  // query within the tile
                int t = q0 + tl;
                sptr<float> ri = row_info + tl * RI;
                float P = 0.0f, ds = 0.0f;
                if (key[r] <= t && t < T) {
                    float sv = s[nt].x[i] * ri[0] * kfac[r];
                    float e = expf(-fabsf(sv));
                    float inv_S1 = ri[2];
                    float A = softplus_from(sv, e) * inv_S1;
                    float dA;
                    if (!REWEIGHT) {
                        P = A;
                        dA = dw[nt].x[i];
                    } else {
                        float nn = ri[3], x = nn * A - ri[4];
                        dA = 0.0f;
                        if (x > 0.0f && ri[5] > 0.0f) {
                            float xm = x * ri[5];
                            float xp1 = pow_p_dev(xm, p - 1.0f, p_int - 1);  // (x/m)^(p-1)
                            P = xp1 * xm * ri[6];                             // W = u / Z
                            dA = nn * p * xp1 * (dw[nt].x[i] - ri[7]) * ri[5] * ri[6];
                        }
                    }
                    ds = sigmoid_from(sv, e) * (dA - ri[8]) * inv_S1;
                }
                s[nt].x[i] = P;
                dsk[nt].x[i] = ds * ri[0];
                // (query, key) element of lam fac_k ds for dQ
                int kl = warp * 16 + frag_row(lane, i);
                sdS[tl * LDS + kl] = (floatX)(ds * ri[1] * kfac[r]);
            }
        }
        FragA pf[RT / 2], dsf[RT / 2];
        frags_a_from_acc<RT>(pf, s);
        frags_a_from_acc<RT>(dsf, dsk);
        warp_mma_ab(dv_acc, pf, sdO, LD);  // dV += P^T dO
        warp_mma_ab(dk_acc, dsf, sQ, LD);  // dK~ += ds^T Q~
        __syncthreads();                   // sdS complete

        // dQ~ of the warp's 16 queries += dS (16 x ROWS keys) K~
        warp_accumulate_dq<RT, Tile::HTILES>(dqh + (size_t)b * T * C + h * HD, C, T, q0, sdS, LDS, sK, LD, warp,
                                             lane);
    }

    // dk-hat (fp32, finished by lssa_normgrad_kernel) and dv (bf16) of the warp's keys
    warp_store_dk_dv<Tile::HTILES>(dkh + (size_t)b * T * C + h * HD, C, dqkv + ((size_t)b * T * 3 + 2) * C + h * HD,
                                   key, T, dk_acc, dv_acc, lane);
}

// dq and dk from the gradients of the normalised vectors
// (doc/attention.md, section 'Through the normalisation of q and k'):
//   dx = (dxh - xh (xh . dxh)) / |x|  when |x| > eps,  dx = dxh / eps  otherwise.
// With NORMALISED = false (softmax) dx = dxh. One warp per (b, t, h) row; writes q and k of dqkv.
template <int HD, bool NORMALISED>
__global__ void lssa_normgrad_kernel(floatX* dqkv, const float* dqh, const float* dkh, const floatX* qkv,
                                     const float* scales, int B, int T, int NH) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // (b, t, h)
    int lane = threadIdx.x % 32;
    if (row >= B * T * NH) { return; }
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    int C = NH * HD;
    constexpr int PER_LANE = (HD + 31) / 32;
    for (int part = 0; part < 2; part++) {  // 0: q, 1: k
        const float* dxh = (part == 0 ? dqh : dkh) + (size_t)row * HD;
        const floatX* x = qkv + ((size_t)(b * T + t) * 3 + part) * C + h * HD;
        floatX* dx = dqkv + ((size_t)(b * T + t) * 3 + part) * C + h * HD;
        if (!NORMALISED) {
            for (int i = lane; i < HD; i += 32) { dx[i] = (floatX)dxh[i]; }
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
            g[k] = i < HD ? dxh[i] : 0.0f;
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
