// SIMT emulator: flush-to-zero of fp32 denormals, as nvcc --use_fast_math compiles device code
// (it implies -ftz=true): every fp32 instruction (add, mul, fma, div, compare, min/max, MUFU)
// reads a subnormal input as 0 and writes a subnormal result as 0 (of the same sign).
// The emulator runs device threads with the x86 MXCSR bits FTZ (results) and DAZ (inputs) set
// (simt_exec.cpp, per fiber: the host code around a launch keeps its own mode), which does the
// same for the fp32 arithmetic g++ compiles; fp64 is affected too, but only below 2^-1022.
// Not fp32 instructions, so unaffected by -ftz: bf16 arithmetic (PTX: subnormals supported) and
// the tensor cores' mma; their emulation runs in the host's mode (KeepSubnormals).
// Hosts without SSE (not x86-64) run device code without the flush.
#pragma once

#include <cfloat>
#include <cmath>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define SIMT_HAVE_MXCSR 1
#else
#define SIMT_HAVE_MXCSR 0
#endif

namespace simt {

constexpr unsigned kMxcsrFtz = 0x8000, kMxcsrDaz = 0x0040;

// the running code flushes fp32 denormals (an emulated GPU thread)
inline bool flushing_denormals() {
#if SIMT_HAVE_MXCSR
    return (_mm_getcsr() & kMxcsrFtz) != 0;
#else
    return false;
#endif
}

// device threads: FTZ and DAZ on (called by each fiber before it runs a kernel body)
inline void enter_device_float_mode() {
#if SIMT_HAVE_MXCSR
    _mm_setcsr(_mm_getcsr() | kMxcsrFtz | kMxcsrDaz);
#endif
}

// r as an fp32 instruction writes it on the device: 0 for a subnormal result while flushing
// (for results made without fp32 arithmetic: bit manipulation, nextafterf)
inline float flush_result(float r) {
    return flushing_denormals() && std::fabs(r) < FLT_MIN ? std::copysign(0.0f, r) : r;
}

// Scope that keeps subnormals (the host's mode) inside a device thread: bf16 arithmetic, mma.
struct KeepSubnormals {
#if SIMT_HAVE_MXCSR
    unsigned saved;
    KeepSubnormals() : saved(_mm_getcsr()) {
        if (saved & (kMxcsrFtz | kMxcsrDaz)) _mm_setcsr(saved & ~(kMxcsrFtz | kMxcsrDaz));
    }
    ~KeepSubnormals() {
        if (saved & (kMxcsrFtz | kMxcsrDaz)) _mm_setcsr(saved);
    }
#else
    KeepSubnormals() {}
#endif
    KeepSubnormals(const KeepSubnormals&) = delete;
    KeepSubnormals& operator=(const KeepSubnormals&) = delete;
};

}  // namespace simt
