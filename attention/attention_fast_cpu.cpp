// The fast CPU path's attention (attention/attention_fast_cpu.h): attention/attention_fast_cpu-inl.h
// compiled once for every Highway target of the build, and the class's members dispatching to the
// best target the CPU runs (layers/fast_cpu.h: fast_cpu_force_target, the bf16 dot's switch).
// Compiled without ATTN_NAME: every variant is here (attn_dispatch).

// aarch64: NEON only (the kernels keep register tiles in arrays, which SVE's sizeless vectors forbid)
#if defined(__aarch64__) && !defined(HWY_DISABLED_TARGETS)
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/attention_fast_cpu-inl.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "attention/attention_fast_cpu-inl.h"

#if HWY_ONCE
namespace attn_fast {
HWY_EXPORT(AttentionFastForward);
HWY_EXPORT(AttentionFastBackward);
HWY_EXPORT(AttentionFastMap);
HWY_EXPORT(AttentionFastLog);
// HWY_DYNAMIC_DISPATCH names the tables unqualified: the calls live in their namespace
template <class... A> void dispatch_forward(A&&... a) { HWY_DYNAMIC_DISPATCH(AttentionFastForward)(a...); }
template <class... A> void dispatch_backward(A&&... a) { HWY_DYNAMIC_DISPATCH(AttentionFastBackward)(a...); }
template <class... A> void dispatch_map(A&&... a) { HWY_DYNAMIC_DISPATCH(AttentionFastMap)(a...); }
template <class... A> void dispatch_log(A&&... a) { HWY_DYNAMIC_DISPATCH(AttentionFastLog)(a...); }
}  // namespace attn_fast

namespace {
int fast_mode(FastNumerics num) {
    if (num == FastNumerics::fp32) return attn_fast::NUM_FP32;
    return fast_cpu_uses_bf16_dot() ? attn_fast::NUM_BF16_DOT : attn_fast::NUM_BF16;
}
}  // namespace

AttentionFast::AttentionFast() : impl(new Impl) {}
AttentionFast::~AttentionFast() = default;

void AttentionFast::forward(FastNumerics num, float* out, float* stats, const float* qkv, int B, int T, int NH, int hd,
                            AttnKind kind, double p, const double* p_head, int attn_len) {
    ref::attention_check_len(kind, attn_len, "AttentionFast::forward");
    attn_fast::dispatch_forward(*impl, out, stats, qkv, B, T, NH, hd, kind, fast_mode(num), p, p_head,
                                                    attn_len);
}

void AttentionFast::backward(FastNumerics num, float* dqkv, const float* dout, const float* qkv, int B, int T, int NH,
                             int hd, AttnKind kind, double p, const double* p_head, double* dp_head, int attn_len) {
    ref::attention_check_len(kind, attn_len, "AttentionFast::backward");
    attn_fast::dispatch_backward(*impl, dqkv, dout, qkv, B, T, NH, hd, kind, fast_mode(num), p,
                                                     p_head, dp_head, attn_len);
}

void attention_map_fast(FastNumerics num, std::vector<float>& W, std::vector<uint8_t>& valid, const float* qkv, int T,
                        int NH, int hd, int h, AttnKind kind, double p, int attn_len) {
    // the weights are fp32 in both numerics
    ref::attention_check_len(kind, attn_len, "attention_map_fast");
    attn_fast::dispatch_map(W, valid, qkv, T, NH, hd, h, kind, p, attn_len);
}

// The tests' view of the vector functions (test/test_attention_fast_cpu.cpp declares it): ln(x)
// or ln(1 + x) of n floats (a multiple of 16) on the dispatched target
void attention_fast_log_for_test(float* out, const float* in, int n, bool plus1) {
    attn_fast::dispatch_log(out, in, n, plus1);
}
#endif  // HWY_ONCE
