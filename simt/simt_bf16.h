// The host model of cuda_bf16.h and the CUDA vector types (float4, uint4, ...),
// bit-exact where CUDA defines the result (round-to-nearest-even, NaN kept).
#pragma once

#include <cstdint>
#include <cstring>
#include <cmath>

#include "simt_ftz.h"

// ----------------------------------------------------------------------------
// vector types, with CUDA's sizes and alignments

#define SIMT_VEC2(T, name, al) struct alignas(al) name { T x, y; };
#define SIMT_VEC3(T, name) struct name { T x, y, z; };
#define SIMT_VEC4(T, name, al) struct alignas(al) name { T x, y, z, w; };
SIMT_VEC2(float, float2, 8)
SIMT_VEC3(float, float3)
SIMT_VEC4(float, float4, 16)
SIMT_VEC2(double, double2, 16)
SIMT_VEC2(int, int2, 8)
SIMT_VEC3(int, int3)
SIMT_VEC4(int, int4, 16)
SIMT_VEC2(unsigned int, uint2, 8)
SIMT_VEC3(unsigned int, uint3)
SIMT_VEC4(unsigned int, uint4, 16)
SIMT_VEC2(short, short2, 4)
SIMT_VEC2(unsigned short, ushort2, 4)
SIMT_VEC4(short, short4, 8)
SIMT_VEC4(unsigned short, ushort4, 8)
SIMT_VEC4(signed char, char4, 4)
SIMT_VEC4(unsigned char, uchar4, 4)
SIMT_VEC2(long long, longlong2, 16)
SIMT_VEC2(unsigned long long, ulonglong2, 16)
#undef SIMT_VEC2
#undef SIMT_VEC3
#undef SIMT_VEC4

inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int3 make_int3(int x, int y, int z) { return {x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline short2 make_short2(short x, short y) { return {x, y}; }
inline ushort2 make_ushort2(unsigned short x, unsigned short y) { return {x, y}; }
inline char4 make_char4(signed char x, signed char y, signed char z, signed char w) { return {x, y, z, w}; }
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { return {x, y, z, w}; }

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ----------------------------------------------------------------------------
// bfloat16

namespace simt {
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
// float -> bf16 bits, round to nearest even; a NaN stays a (quiet) NaN with its sign
inline uint16_t f32_to_bf16_rn(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
// float -> bf16 bits, round toward zero
inline uint16_t f32_to_bf16_rz(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }
// double -> bf16 bits, rounded once: round-to-odd into float (24 >= 8+2 bits) keeps
// the final round-to-nearest-even exact
inline uint16_t f64_to_bf16_rn(double v) {
    float f = (float)v;
    if ((double)f != v && std::isfinite(f)) {
        if (std::fabs((double)f) > std::fabs(v)) f = std::nextafter(f, 0.0f);
        f = bits_f32(f32_bits(f) | 1u);
    }
    return f32_to_bf16_rn(f);
}
}  // namespace simt

struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };

struct alignas(2) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(simt::f32_to_bf16_rn(f)) {}
    __nv_bfloat16(double f) : __x(simt::f64_to_bf16_rn(f)) {}
    __nv_bfloat16(int i) : __x(simt::f32_to_bf16_rn((float)i)) {}
    __nv_bfloat16(unsigned int i) : __x(simt::f32_to_bf16_rn((float)i)) {}
    __nv_bfloat16(long long i) : __x(simt::f32_to_bf16_rn((float)i)) {}
    operator float() const { return simt::bf16_to_f32(__x); }
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};

struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};

inline __nv_bfloat16 __bf16_from_bits(unsigned short b) { return __nv_bfloat16(__nv_bfloat16_raw{b}); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __bf16_from_bits(simt::f32_to_bf16_rn(f)); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __bf16_from_bits(simt::f64_to_bf16_rn(d)); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) { return __bf16_from_bits(simt::f32_to_bf16_rz(f)); }
inline float __bfloat162float(__nv_bfloat16 h) { return simt::bf16_to_f32(h.__x); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __bf16_from_bits(b); }
inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
inline __nv_bfloat16 __short_as_bfloat16(short b) { return __bf16_from_bits((unsigned short)b); }

inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return {__float2bfloat16(lo), __float2bfloat16(hi)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return {__float2bfloat16(f), __float2bfloat16(f)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return {lo, hi}; }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) { return {h, h}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
inline __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return {a.x, b.x}; }
inline __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return {a.y, b.y}; }
inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __float2bfloat16((float)i); }  // exact for |i| < 2^24
inline int __bfloat162int_rz(__nv_bfloat16 h) { return (int)__bfloat162float(h); }

// Arithmetic: each op is computed in float and rounded once to bf16. For +,-,*,/ of
// bf16 operands rounding to float first is harmless (24 >= 2*8+2 bits); fma is done in
// double (exact product) and rounded through f64_to_bf16_rn. bf16 instructions keep subnormals
// (fast math's flush-to-zero is fp32's: simt_ftz.h), so they run in the host's mode.
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) {
    simt::KeepSubnormals keep;
    return __float2bfloat16((float)a + (float)b);
}
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) {
    simt::KeepSubnormals keep;
    return __float2bfloat16((float)a - (float)b);
}
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) {
    simt::KeepSubnormals keep;
    return __float2bfloat16((float)a * (float)b);
}
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) {
    simt::KeepSubnormals keep;
    return __float2bfloat16((float)a / (float)b);
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    simt::KeepSubnormals keep;
    return __bf16_from_bits(simt::f64_to_bf16_rn(std::fma((double)(float)a, (double)(float)b, (double)(float)c)));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __bf16_from_bits(a.__x ^ 0x8000u); }
inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __bf16_from_bits(a.__x & 0x7fffu); }
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
    simt::KeepSubnormals keep;
    return __float2bfloat16(std::fmax((float)a, (float)b));
}
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
    simt::KeepSubnormals keep;
    return __float2bfloat16(std::fmin((float)a, (float)b));
}
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hsub(a.x, b.x), __hsub(a.y, b.y)}; }
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }
inline __nv_bfloat16 operator-(__nv_bfloat16 a) { return __hneg(a); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hadd(a, b); }
inline __nv_bfloat16& operator-=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hsub(a, b); }
inline __nv_bfloat16& operator*=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hmul(a, b); }
inline __nv_bfloat16& operator/=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hdiv(a, b); }
inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a == (float)b; }
inline bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a != (float)b; }
inline bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b; }
inline bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a <= (float)b; }
inline bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a > (float)b; }
inline bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a >= (float)b; }
inline __nv_bfloat162 operator+(__nv_bfloat162 a, __nv_bfloat162 b) { return __hadd2(a, b); }
inline __nv_bfloat162 operator-(__nv_bfloat162 a, __nv_bfloat162 b) { return __hsub2(a, b); }
inline __nv_bfloat162 operator*(__nv_bfloat162 a, __nv_bfloat162 b) { return __hmul2(a, b); }
inline bool __hisnan(__nv_bfloat16 a) { return std::isnan((float)a); }
inline bool __hisinf(__nv_bfloat16 a) { return std::isinf((float)a); }

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
