// SIMT emulator: the single-precision math of device code as nvcc --use_fast_math compiles it.
// With fast math, nvcc turns expf, logf, exp2f, log2f, powf into the intrinsics __expf, __logf, ...
// (MUFU.EX2 / MUFU.LG2 with an fp32 scaling multiply) and rsqrtf into MUFU.RSQ; their results are
// not correctly rounded. Here each is computed as the hardware does (the scaling product rounded to
// fp32 first, which is where __expf's error grows with |x|), the MUFU step correctly rounded and
// then moved by a deterministic k in [-bound, bound] ulps (a hash of the input picks k), with the
// bounds of the CUDA C++ Programming Guide's accuracy tables:
//   exp2f (ex2.approx)   2 ulp; modelled as 1, since __expf(x) = ex2(fl(x log2 e)) is documented at
//                        2 + floor(1.173 |x|) ulp, which leaves the MUFU step 1 for small |x|
//   log2f (lg2.approx)   2^-22 absolute for x in [0.5, 2], else 2 ulp; modelled as 1 there, which
//                        __logf's 3 ulp (after the fp32 multiply by ln 2) leaves it
//   __logf(x) = fl(lg2(x) ln 2)  (documented: 2^-21.41 absolute in [0.5, 2], else 3 ulp)
//   __powf(x, y) = ex2(fl(y lg2(x)))
//   __fdividef(x, y)     2 ulp for |y| in [2^-126, 2^126]; 0 for 2^126 < |y| < 2^128
//   rsqrtf               2 ulp
// In host code (the CPU reference, which shares the translation unit) the names keep their exact
// libm meaning: the model applies only on an emulated GPU thread. The '/' operator (2 ulp under
// -prec-div=false) is not modelled. Denormals: device threads run with fast math's flush-to-zero
// (simt_ftz.h), so a subnormal input of these functions counts as 0 and a subnormal result is 0
// (ex2.approx.ftz, lg2.approx.ftz: log2 of a subnormal is -inf).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "simt_ftz.h"

namespace simt { namespace fastmath {

inline bool on_device();  // defined in simt.h: an emulated GPU thread is running

inline uint32_t float_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
inline float bits_float(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

// k in [-bound, bound] from the input bits (splitmix-style hash): the same input, the same error
inline int ulp_offset(uint32_t a, uint32_t b, int bound) {
    uint64_t z = ((uint64_t)a << 32 | b) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int)(z % (uint64_t)(2 * bound + 1)) - bound;
}

// r moved by k ulps (toward +inf for k > 0), staying finite and of the same sign; a subnormal
// result flushed on a device thread (the MUFU result of a .ftz instruction)
inline float move_ulps(float r, int k) {
    if (k == 0 || r == 0.0f || !std::isfinite(r)) return r;
    for (; k > 0; k--) r = nextafterf(r, INFINITY);
    for (; k < 0; k++) r = nextafterf(r, -INFINITY);
    return flush_result(r);
}

inline float ex2(float y) {  // MUFU.EX2
    float r = (float)exp2((double)y);
    return move_ulps(r, ulp_offset(float_bits(y), 0xE2u, 1));
}
inline float lg2(float x) {  // MUFU.LG2
    float r = (float)log2((double)x);
    if (!(x > 0.0f) || !std::isfinite(r)) return r;
    if (x >= 0.5f && x <= 2.0f) {  // absolute error up to 2^-22 (3 x 2^-24, plus r's own rounding)
        int k = ulp_offset(float_bits(x), 0x16u, 3);
        return r + (float)k * 0x1p-24f;
    }
    return move_ulps(r, ulp_offset(float_bits(x), 0x16u, 1));
}
inline float expf_(float x) { return ex2(x * 1.4426950408889634f); }
inline float exp2f_(float x) { return ex2(x); }
inline float log2f_(float x) { return lg2(x); }
inline float logf_(float x) { return lg2(x) * 0.6931471805599453f; }
inline float powf_(float x, float y) { return ex2(y * lg2(x)); }
inline float fdividef_(float a, float b) {
    float mb = fabsf(b);
    if (mb > 0x1p126f && mb < INFINITY) return std::isinf(a) ? NAN : 0.0f;
    return move_ulps(a / b, ulp_offset(float_bits(a), float_bits(b), 2));
}
inline float rsqrtf_(float x) { return move_ulps((float)(1.0 / sqrt((double)x)), ulp_offset(float_bits(x), 0x5Fu, 2)); }

// the names device code calls: the model on a GPU thread, libm in host code
inline float dev_expf(float x) { return on_device() ? expf_(x) : ::expf(x); }
inline float dev_exp2f(float x) { return on_device() ? exp2f_(x) : ::exp2f(x); }
inline float dev_logf(float x) { return on_device() ? logf_(x) : ::logf(x); }
inline float dev_log2f(float x) { return on_device() ? log2f_(x) : ::log2f(x); }
inline float dev_powf(float x, float y) { return on_device() ? powf_(x, y) : ::powf(x, y); }
inline float dev_rsqrtf(float x) { return on_device() ? rsqrtf_(x) : 1.0f / sqrtf(x); }

}}  // namespace simt::fastmath
