// The fast CPU path's dispatch state (layers/fast_cpu.h): which Highway target runs, and whether the
// bf16 numerics take AVX512-BF16's dot products.
#include "layers/fast_cpu.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

#if HWY_ARCH_X86
#include <cpuid.h>
#endif

namespace {
bool bf16_dot_allowed = true;
int64_t forced_target = 0;  // fast_cpu_force_target's, 0: none
// what HWY_DYNAMIC_DISPATCH picks: the best (lowest bit) of the compiled targets the CPU runs, or the
// forced one. Highway's SupportedTargets() detects the CPU again on every call (cpuid, which a
// virtual machine traps): the CPU's answer is kept.
int64_t dispatched_target() {
    if (forced_target) return forced_target;
    static const int64_t best = [] {
        int64_t t = hwy::SupportedTargets() & HWY_TARGETS;
        return t & -t;
    }();
    return best;
}
}  // namespace

std::string fast_cpu_target() {
    std::string name = hwy::TargetName(dispatched_target());
    if (fast_cpu_uses_bf16_dot()) name += "+BF16";
    return name;
}

std::vector<int64_t> fast_cpu_targets() {
    // Highway's list follows the forced mask: the CPU's own, whatever is forced
    if (forced_target) hwy::SetSupportedTargetsForTest(0);
    std::vector<int64_t> t = hwy::SupportedAndGeneratedTargets();  // lowest bit first: best first
    if (forced_target) hwy::SetSupportedTargetsForTest(forced_target);
    return t;
}

const char* fast_cpu_target_name(int64_t target) { return hwy::TargetName(target); }

bool fast_cpu_force_target(int64_t target) {
    if (target == 0) {
        hwy::SetSupportedTargetsForTest(0);
        forced_target = 0;
        return true;
    }
    bool known = false;
    for (int64_t t : fast_cpu_targets()) known |= t == target;
    if (!known) return false;
    hwy::SetSupportedTargetsForTest(target);
    forced_target = target;
    return true;
}

bool fast_cpu_has_bf16_dot() {
#if HWY_ARCH_X86
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1;
#else
    return false;
#endif
}

bool fast_cpu_uses_bf16_dot() {
#if HWY_ARCH_X86
    static const bool has = fast_cpu_has_bf16_dot();
    return has && bf16_dot_allowed && dispatched_target() <= HWY_AVX3;  // lower bits: better targets
#else
    return false;
#endif
}

void fast_cpu_allow_bf16_dot(bool allow) { bf16_dot_allowed = allow; }
