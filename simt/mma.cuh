// Tensor-core wrappers: mma.sync m16n8k16 (bf16 in, fp32 accumulate) and ldmatrix.
// Under nvcc they are inline PTX (sm_80+); under the SIMT emulator they are warp
// collectives that implement the fragment layouts of the PTX ISA exactly.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// group = lane / 4 and quad = lane % 4, each 32-bit register holding two bf16
// (the lower column/row index in the low half):
//   A (16x16, row-major):  a[r] = A[group + 8*(r&1)][2*quad + 8*(r>>1) + {0,1}]
//   B (16x8, "col"):       b[r] = B[2*quad + 8*r + {0,1}][group]
//   C, D (16x8, fp32):     c[i] = C[group + 8*(i>>1)][2*quad + (i&1)]
// ldmatrix .m8n8 .x1/.x2/.x4: lane 8*i + r passes the address of row r (8 bf16,
// 16-byte aligned) of matrix i; lane l gets r[i] = M_i[l/4][2*(l%4) + {0,1}], or
// with .trans M_i[2*(l%4) + {0,1}][l/4]. For .x1 only lanes 0-7 and for .x2 only
// lanes 0-15 need valid addresses, but every lane of the warp must call.
// So a 16x16 A tile at row-major smem S (row stride ld) loads with
//   ldmatrix_x4(a, S + (lane % 16) * ld + (lane / 16) * 8);
#pragma once

#include "simt/dialect.cuh"

#include <cstring>

// packs two floats as bf16 (round to nearest even): lo in the low 16 bits
__host__ __device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &v, 4);
    return r;
}
__host__ __device__ __forceinline__ float unpack_bf16x2_lo(uint32_t v) {
    uint32_t bits = v << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
__host__ __device__ __forceinline__ float unpack_bf16x2_hi(uint32_t v) {
    uint32_t bits = v & 0xffff0000u;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
__host__ __device__ __forceinline__ float2 unpack_bf16x2(uint32_t v) {
    return make_float2(unpack_bf16x2_lo(v), unpack_bf16x2_hi(v));
}

#if defined(__CUDACC__)

// D = A * B + C for one warp (PTX mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32)
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
#else
    __trap();  // tensor cores need sm_80+
#endif
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const __nv_bfloat16* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_u32(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const __nv_bfloat16* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_u32(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], const __nv_bfloat16* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(smem_u32(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const __nv_bfloat16* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_u32(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(row_addr)));
}

#else  // SIMT emulator: warp collectives (simt/simt_exec.cpp)

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
    float out[4];  // d may alias c
    simt::detail::warp_mma_m16n8k16_bf16(out, a, b, c);
    for (int i = 0; i < 4; i++) d[i] = out[i];
}

namespace simt { namespace detail {
template <int N>
inline void ldmatrix_n(uint32_t (&r)[N], const sptr<const __nv_bfloat16>& row_addr, bool trans) {
    // only lanes whose address is used must point at a whole 16-byte row
    require_device("ldmatrix");
    int lane = t_thread->linear & 31;
    const void* p = nullptr;
    if (lane < 8 * N) p = row_addr.checked(0, 16);
    warp_ldmatrix(r, N, trans, p);
}
}}  // namespace simt::detail

__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], sptr<const __nv_bfloat16> row_addr) {
    simt::detail::ldmatrix_n<1>(r, row_addr, false);
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], sptr<const __nv_bfloat16> row_addr) {
    simt::detail::ldmatrix_n<2>(r, row_addr, false);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], sptr<const __nv_bfloat16> row_addr) {
    simt::detail::ldmatrix_n<4>(r, row_addr, false);
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], sptr<const __nv_bfloat16> row_addr) {
    simt::detail::ldmatrix_n<1>(r, row_addr, true);
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], sptr<const __nv_bfloat16> row_addr) {
    simt::detail::ldmatrix_n<2>(r, row_addr, true);
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], sptr<const __nv_bfloat16> row_addr) {
    simt::detail::ldmatrix_n<4>(r, row_addr, true);
}

#endif
