// Tile-level helpers of the attention kernels, so that a kernel reads as its algorithm:
// load a tile of rows to shared memory, S = Q K^T and O += P V on tensor cores, reduce rows.
//
// One warp owns 16 rows of a tile and computes with mma.m16n8k16 (bf16 in, fp32 accumulate).
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4*g + c:
//   FragA  m16 x k16 A operand, row-major: x[0] rows g, k 2c..2c+1 | x[1] row g+8, same k
//                                          x[2] row g, k 8+2c..     | x[3] row g+8, k 8+2c..
//   FragB  k16 x n8 B operand:             x[0] k 2c..2c+1, col g   | x[1] k 8+2c.., col g
//   FragC  m16 x n8 fp32 accumulator:      x[0..1] row g, cols 2c, 2c+1 | x[2..3] row g+8
// so a lane's accumulator element i sits at row g + 8*(i/2), column 2c + i%2 (frag_row/frag_col).
// A row of a FragC is spread over the 4 lanes of a quad (same g): quad_sum / quad_max reduce it.
// The accumulators of two neighbouring n8 tiles are exactly the A fragment of the next mma
// (frag_a_from_acc, with pack_bf16x2 of simt/mma.cuh), which is how P never leaves
// registers between QK^T and PV.
#pragma once

#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"
#include "simt/cp_async.cuh"
#include "simt/mma.cuh"

// Geometry of the attention tiles for head size HD: query and key tiles have ROWS rows each
// (one warp per 16 rows), stored in shared memory with a row pitch of LD elements. The 8
// elements of padding shift consecutive rows by 16 bytes, so the 8 row addresses of one
// ldmatrix fall in different bank groups.
template <int HD>
struct AttnTile {
    static_assert(HD == 32 || HD == 64 || HD == 128, "attention kernels support head sizes 32, 64 and 128");
    // rows of a query or key tile; 32 at hd 128 so that every kernel's tiles fit in 48 KiB of
    // static shared memory
    static constexpr int ROWS = HD == 128 ? 32 : 64;
    static constexpr int WARPS = ROWS / 16;
    static constexpr int THREADS = WARPS * 32;
    static constexpr int LD = HD + 8;                 // shared row pitch of a (ROWS, HD) tile
    static constexpr int LDS = ROWS + 8;              // shared row pitch of a (ROWS, ROWS) tile
    static constexpr int KSTEPS = HD / 16;            // k16 steps over the head dimension
    static constexpr int HTILES = HD / 8;             // n8 tiles over the head dimension
    static constexpr int RTILES = ROWS / 8;           // n8 tiles over the keys (or queries) of a tile
};

// Fully unrolled loops keep fragment arrays in registers (nvcc); g++ ignores it.
#if defined(__CUDACC__)
#define ATTN_UNROLL _Pragma("unroll")
#else
#define ATTN_UNROLL
#endif

// A bf16 tile of N elements in shared memory, 16-byte aligned as ldmatrix and the 128-bit
// stores of load_tile need: declared as int4 and used through an sptr<floatX>.
#define SHARED_TILE(name, N)                       \
    SHARED_ARRAY(int4, name##_storage, (N) / 8);   \
    const sptr<floatX> name = sptr_cast<floatX>(name##_storage)

struct FragA { uint32_t x[4]; };
struct FragB { uint32_t x[2]; };
struct FragC { float x[4]; };

__device__ __forceinline__ int frag_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
__device__ __forceinline__ int frag_col(int lane, int i) { return 2 * (lane % 4) + (i % 2); }

__device__ __forceinline__ void frag_zero(FragC& c) {
    ATTN_UNROLL
    for (int i = 0; i < 4; i++) { c.x[i] = 0.0f; }
}

// The A fragment (m16 x k16) made of the accumulators of n8 tiles c0 (k 0..7) and c1 (k 8..15).
__device__ __forceinline__ FragA frag_a_from_acc(const FragC& c0, const FragC& c1) {
    FragA a;
    a.x[0] = pack_bf16x2(c0.x[0], c0.x[1]);
    a.x[1] = pack_bf16x2(c0.x[2], c0.x[3]);
    a.x[2] = pack_bf16x2(c1.x[0], c1.x[1]);
    a.x[3] = pack_bf16x2(c1.x[2], c1.x[3]);
    return a;
}

// A fragment of rows row0..row0+15, columns col0..col0+15 of a row-major shared tile.
__device__ __forceinline__ void load_frag_a(FragA& a, sptr<floatX> tile, int ld, int row0, int col0) {
    int lane = threadIdx.x % 32;
    ldmatrix_x4(a.x, tile + (size_t)(row0 + lane % 16) * ld + col0 + (lane / 16) * 8);
}

// B fragments (k16 x n8 each), two per ldmatrix.x4 (half the shared-memory instructions of two
// x2): from a tile stored [n][k] (row n holds the k values: K for Q K^T), b[0], b[1] for k steps
// k0 and k0+16 of the n8 tile n0;
__device__ __forceinline__ void load_frag_b_x2k(FragB (&b)[2], sptr<floatX> tile, int ld, int n0, int k0) {
    int lane = threadIdx.x % 32;
    uint32_t r[4];
    ldmatrix_x4(r, tile + (size_t)(n0 + lane % 8) * ld + k0 + (lane / 8) * 8);
    b[0].x[0] = r[0], b[0].x[1] = r[1], b[1].x[0] = r[2], b[1].x[1] = r[3];
}
// from a tile stored [k][n] (row k holds the n values: V for P V), b[0], b[1] for the n8 tiles n0
// and n0+8 of the k16 step k0,
// or for k steps k0 and k0+16 of the n8 tile n0 (two_k).
__device__ __forceinline__ void load_frag_b_trans_x2(FragB (&b)[2], sptr<floatX> tile, int ld, int k0, int n0,
                                                     bool two_k) {
    int lane = threadIdx.x % 32;
    uint32_t r[4];
    int row = k0 + lane % 16 + (two_k ? (lane / 16) * 16 : 0), col = n0 + (two_k ? 0 : (lane / 16) * 8);
    ldmatrix_x4_trans(r, tile + (size_t)row * ld + col);
    b[0].x[0] = r[0], b[0].x[1] = r[1], b[1].x[0] = r[2], b[1].x[1] = r[3];
}

__device__ __forceinline__ void mma(FragC& c, const FragA& a, const FragB& b) {
    mma_m16n8k16_bf16(c.x, a.x, b.x, c.x);
}

// ----------------------------------------------------------------------------
// Tile products of one warp (16 rows). NB = number of n8 tiles of the result.

// S (16 x 8*NB) = A (16 x 16*KS, fragments in registers) . B^T, B stored [n][k] in shared
// with rows n0.. : S = Q K^T with K's rows as B.
template <int NB, int KS>
__device__ __forceinline__ void warp_mma_abt(FragC (&s)[NB], const FragA (&a)[KS], sptr<floatX> b, int ld) {
    static_assert(KS % 2 == 0, "B fragments are loaded two k steps at a time");
    ATTN_UNROLL
    for (int nt = 0; nt < NB; nt++) {
        frag_zero(s[nt]);
        ATTN_UNROLL
        for (int kk = 0; kk < KS; kk += 2) {
            FragB bf[2];
            load_frag_b_x2k(bf, b, ld, nt * 8, kk * 16);
            mma(s[nt], a[kk], bf[0]);
            mma(s[nt], a[kk + 1], bf[1]);
        }
    }
}

// O (16 x 8*NB) += P (16 x 16*KS, fragments in registers) . B, B stored [k][n] in shared:
// O += P V with V's rows as B.
template <int NB, int KS>
__device__ __forceinline__ void warp_mma_ab(FragC (&o)[NB], const FragA (&p)[KS], sptr<floatX> b, int ld) {
    static_assert(NB % 2 == 0, "B fragments are loaded two n8 tiles at a time");
    ATTN_UNROLL
    for (int kk = 0; kk < KS; kk++) {
        ATTN_UNROLL
        for (int nt = 0; nt < NB; nt += 2) {
            FragB bf[2];
            load_frag_b_trans_x2(bf, b, ld, kk * 16, nt * 8, false);
            mma(o[nt], p[kk], bf[0]);
            mma(o[nt + 1], p[kk], bf[1]);
        }
    }
}

// One n8 column tile of the above: o (16 x 8) += P . B[:, n0..n0+7]. Lets a caller finish
// (and store) one column tile before the next, with one accumulator live instead of NB.
template <int KS>
__device__ __forceinline__ void warp_mma_ab_ntile(FragC& o, const FragA (&p)[KS], sptr<floatX> b, int ld, int n0) {
    static_assert(KS % 2 == 0, "B fragments are loaded two k steps at a time");
    ATTN_UNROLL
    for (int kk = 0; kk < KS; kk += 2) {
        FragB bf[2];
        load_frag_b_trans_x2(bf, b, ld, kk * 16, n0, true);
        mma(o, p[kk], bf[0]);
        mma(o, p[kk + 1], bf[1]);
    }
}

// The A fragments of a 16 x 8*NB accumulator tile (NB even), rounded to bf16.
template <int NB>
__device__ __forceinline__ void frags_a_from_acc(FragA (&a)[NB / 2], const FragC (&c)[NB]) {
    ATTN_UNROLL
    for (int kk = 0; kk < NB / 2; kk++) { a[kk] = frag_a_from_acc(c[2 * kk], c[2 * kk + 1]); }
}

// A fragments of 16 rows (row0..) x 16*KS columns of a row-major shared tile.
template <int KS>
__device__ __forceinline__ void load_frags_a(FragA (&a)[KS], sptr<floatX> tile, int ld, int row0) {
    ATTN_UNROLL
    for (int kk = 0; kk < KS; kk++) { load_frag_a(a[kk], tile, ld, row0, kk * 16); }
}

// The forward's output rows of the warp, row[0..1] of its fragment rows: acc (16 x 8 HTILES)
// scaled per row by inv, stored as bf16 into out_rows (row stride C); rows >= T are not written.
template <int HTILES>
__device__ __forceinline__ void warp_store_rows_scaled(floatX* out_rows, int C, const int (&row)[2], int T,
                                                       const FragC (&acc)[HTILES], const float (&inv)[2], int lane) {
    ATTN_UNROLL
    for (int nt = 0; nt < HTILES; nt++) {
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            if (row[r] >= T) { continue; }
            floatX* y = out_rows + (size_t)row[r] * C + nt * 8 + frag_col(lane, 2 * r);
            y[0] = (floatX)(acc[nt].x[2 * r] * inv[r]);
            y[1] = (floatX)(acc[nt].x[2 * r + 1] * inv[r]);
        }
    }
}

// dst[0], dst[1] += a, b (dst 8-byte aligned): one vector reduction (red.global.add.v2.f32) on
// sm_90 and in the emulator (which faults, as sm_90 does, where dst is not 8-byte aligned), two
// scalar atomics on older GPUs.
__device__ __forceinline__ void atomic_add2(float* dst, float a, float b) {
#if defined(SIMT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
    atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
#else
    atomicAdd(dst, a);
    atomicAdd(dst + 1, b);
#endif
}

// The backward's end of a key tile, shared by every variant: dQ of the warp's 16 query rows
// (q0 + 16 warp ..) += dS (those rows of the (16 RT) x (16 RT) tile in shared) . K, one n8
// column tile at a time, accumulated into fp32 dq_rows (row stride C) with atomics, since every
// key tile adds to the same rows.
template <int RT, int HTILES>
__device__ __forceinline__ void warp_accumulate_dq(float* dq_rows, int C, int T, int q0, sptr<floatX> sdS, int lds,
                                                   sptr<floatX> sK, int ld, int warp, int lane) {
    FragA sf[RT / 2];
    load_frags_a(sf, sdS, lds, warp * 16);
    ATTN_UNROLL
    for (int nt = 0; nt < HTILES; nt++) {  // one n8 column of dQ at a time (registers)
        FragC dq;
        frag_zero(dq);
        warp_mma_ab_ntile(dq, sf, sK, ld, nt * 8);
        ATTN_UNROLL
        for (int r = 0; r < 2; r++) {  // elements 2r, 2r+1: two neighbouring columns of one row
            int t = q0 + warp * 16 + frag_row(lane, 2 * r);
            if (t < T) { atomic_add2(dq_rows + (size_t)t * C + nt * 8 + frag_col(lane, 0), dq.x[2 * r], dq.x[2 * r + 1]); }
        }
    }
}

// The warp's finished key rows key[0..1]: dk (fp32 for the normalisation's pass, or bf16 straight
// into dqkv; row stride dk_stride) and dv (bf16, row stride 3C), each times unscale (attn_bwd_unscale).
template <int HTILES, class DK>
__device__ __forceinline__ void warp_store_dk_dv(DK* dk_rows, int dk_stride, int C, floatX* dv_rows, const int (&key)[2], int T,
                                                 const FragC (&dk_acc)[HTILES], const FragC (&dv_acc)[HTILES],
                                                 int lane, float unscale) {
    ATTN_UNROLL
    for (int nt = 0; nt < HTILES; nt++) {
        ATTN_UNROLL
        for (int i = 0; i < 4; i++) {
            int j = key[i / 2];
            if (j >= T) { continue; }
            int col = nt * 8 + frag_col(lane, i);
            dk_rows[(size_t)j * dk_stride + col] = (DK)(dk_acc[nt].x[i] * unscale);
            dv_rows[(size_t)j * 3 * C + col] = (floatX)(dv_acc[nt].x[i] * unscale);
        }
    }
}

// ----------------------------------------------------------------------------
// Row reductions over the 4 lanes of a quad (the lanes that share a fragment row).

__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffff, v, 1);
    v += __shfl_xor_sync(0xffffffff, v, 2);
    return v;
}
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 1));
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 2));
    return v;
}

// ----------------------------------------------------------------------------
// Block-wide copies between global memory and shared tiles.

// The 8 bf16 of a 16-byte chunk, each times mul (four bf16x2 multiplies).
__device__ __forceinline__ int4 scale_chunk_bf16x2(int4 bits, __nv_bfloat162 mul) {
    uint32_t pairs[4] = {(uint32_t)bits.x, (uint32_t)bits.y, (uint32_t)bits.z, (uint32_t)bits.w};
    ATTN_UNROLL
    for (int e = 0; e < 4; e++) {
        __nv_bfloat162 pair;
        memcpy(&pair, &pairs[e], 4);
        pair = __hmul2(pair, mul);
        memcpy(&pairs[e], &pair, 4);
    }
    return make_int4((int)pairs[0], (int)pairs[1], (int)pairs[2], (int)pairs[3]);
}

// Copies rows row0..row0+ROWS-1 of a strided (rows, HD) bf16 matrix into a shared tile of
// pitch LD, 16 bytes per thread and step; rows >= num_rows are filled with zeros.
// SCALED: row r is multiplied by row_mul[r] (a power of two: exact in bf16, one bf16x2 multiply
// per pair, unless a product falls below bf16's smallest normal).
// src + r*stride must be 16-byte aligned. Every thread of the block must call it.
// Only the forward's query tile (once per block) still goes through it; every other tile is
// copied with load_tile_async, its powers of two folded into the scores' factors or applied in
// shared memory after the copy (scale_tile_async_rows).
template <int ROWS, int HD, int LD, bool SCALED = false>
__device__ __forceinline__ void load_tile(sptr<floatX> dst, const floatX* src, size_t stride, int row0,
                                          int num_rows, const float* row_mul = nullptr) {
    constexpr int CHUNKS = HD / 8;  // 16-byte chunks per row
    for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += blockDim.x) {
        int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
        int row = row0 + r;
        int4 bits = make_int4(0, 0, 0, 0);
        if (row < num_rows) {
            x128 v = load128(src + (size_t)row * stride + c);
            memcpy(&bits, &v, sizeof(bits));
            if constexpr (SCALED) {
                bits = scale_chunk_bf16x2(bits, __float2bfloat162_rn(row_mul[row]));
            }
        }
        *sptr_cast<int4>(dst + (size_t)r * LD + c) = bits;
    }
}

// The asynchronous twin of load_tile (without SCALED), for the forward's and attention_rowd_kernel's
// double-buffered key and value tiles and the backward's tiles: issues the copies (cp.async) and
// returns; they land at the cp_async_wait that completes the group the caller commits them into.
// Rows >= num_rows are zero-filled.
// THREADS (the block size) / ROWS threads share a row, each copying every (THREADS/ROWS)-th
// 16-byte chunk of it, neighbours side by side: a warp's step covers whole 32-byte sectors, its
// shared stores meet each bank group equally often (rows 16 bytes apart, LD), and a thread's
// copies differ only by constant offsets from one address, so nothing is held per step (load_tile's
// strided loop with a compile-time trip count made the backward spill; this does not). Every thread
// must call it.
template <int ROWS, int HD, int LD, int THREADS>
__device__ __forceinline__ void load_tile_async(sptr<floatX> dst, const floatX* src, size_t stride, int row0,
                                                int num_rows) {
    constexpr int CHUNKS = HD / 8, PER_ROW = THREADS / ROWS;  // 16-byte chunks of a row, threads on it
    static_assert(THREADS % ROWS == 0 && CHUNKS % PER_ROW == 0, "whole rows per thread group");
    int r = threadIdx.x / PER_ROW, c = (threadIdx.x % PER_ROW) * 8;
    int row = row0 + r;
    bool in = row < num_rows;  // a row past the end reads nothing: any valid address will do
    sptr<floatX> d = dst + (size_t)r * LD + c;
    const floatX* g = src + (size_t)(in ? row : 0) * stride + c;
    ATTN_UNROLL
    for (int step = 0; step < CHUNKS / PER_ROW; step++) { cp_async_16(d + step * PER_ROW * 8, g + step * PER_ROW * 8, in); }
}

// After load_tile_async's copies into dst have landed (cp_async_wait), before the barrier that
// shows them to the block: multiplies the chunks this thread copied of row row0 + r by
// row_mul[row0 + r], a power of two, with bf16x2 multiplies as load_tile's SCALED (the same bits;
// exact unless a product falls below bf16's smallest normal). Rows >= num_rows stay zero.
template <int ROWS, int HD, int LD, int THREADS>
__device__ __forceinline__ void scale_tile_async_rows(sptr<floatX> dst, int row0, int num_rows, const float* row_mul) {
    constexpr int CHUNKS = HD / 8, PER_ROW = THREADS / ROWS;
    int r = threadIdx.x / PER_ROW, c = (threadIdx.x % PER_ROW) * 8;
    if (row0 + r >= num_rows) { return; }
    __nv_bfloat162 mul = __float2bfloat162_rn(row_mul[row0 + r]);
    sptr<floatX> d = dst + (size_t)r * LD + c;
    // more than 4 chunks (hd 128): one in registers at a time, as the backward at its register
    // limit spills when all 8 are (sm_90)
    [[maybe_unused]] constexpr int UNROLL = CHUNKS / PER_ROW > 4 ? 1 : CHUNKS / PER_ROW;  // nvcc only
#if defined(__CUDACC__)
#pragma unroll(UNROLL)
#endif
    for (int step = 0; step < CHUNKS / PER_ROW; step++) {
        int4 bits = *sptr_cast<int4>(d + step * PER_ROW * 8);
        *sptr_cast<int4>(d + step * PER_ROW * 8) = scale_chunk_bf16x2(bits, mul);
    }
}
