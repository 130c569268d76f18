// The fast CPU path's dispatch state (layers/fast_cpu.h): which Highway target runs, and whether the
// bf16 numerics take AVX512-BF16's dot products.
#include "layers/fast_cpu.h"

#include <strings.h>

#include <cstdio>
#include <cstdlib>

#include <hwy/highway.h>
#include <hwy/targets.h>

#if HWY_ARCH_X86
#include <cpuid.h>
#endif

namespace {
bool bf16_dot_allowed = true;

// FAST_CPU_MAX_TARGET=<name> (environment): the best target dispatched to, as ONEDNN_MAX_CPU_ISA caps
// oneDNN (the AVX2 code measured on an AVX-512 machine, say). The mask of the targets allowed; 0: all.
int64_t max_target_mask() {
    static const int64_t mask = [] {
        const char* name = getenv("FAST_CPU_MAX_TARGET");
        if (!name || !*name) return (int64_t)0;
        std::string known;
        for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
            if (strcasecmp(name, hwy::TargetName(t)) == 0) return hwy::SupportedTargets() & ~(t - 1);
            known += (known.empty() ? "" : ", ") + std::string(hwy::TargetName(t));
        }
        fprintf(stderr, "error: FAST_CPU_MAX_TARGET=%s is not a target of this build that this CPU runs (%s)\n", name,
                known.c_str());
        exit(2);
    }();
    return mask;
}
// applied before any kernel is dispatched
const bool max_target_applied = [] {
    if (max_target_mask()) hwy::SetSupportedTargetsForTest(max_target_mask());
    return true;
}();
}  // namespace

namespace {
int64_t forced_target = 0;  // fast_cpu_force_target's, 0: none
// what HWY_DYNAMIC_DISPATCH picks: the best (lowest bit) of the compiled targets the CPU runs (under
// FAST_CPU_MAX_TARGET), or the forced one. Highway's SupportedTargets() detects the CPU again on every
// call (cpuid, which a virtual machine traps): the CPU's answer is kept.
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
    // Highway's list follows the forced mask: the CPU's own (under FAST_CPU_MAX_TARGET), whatever is forced
    if (forced_target) hwy::SetSupportedTargetsForTest(max_target_mask());
    std::vector<int64_t> t = hwy::SupportedAndGeneratedTargets();  // lowest bit first: best first
    if (forced_target) hwy::SetSupportedTargetsForTest(forced_target);
    return t;
}

const char* fast_cpu_target_name(int64_t target) { return hwy::TargetName(target); }

bool fast_cpu_force_target(int64_t target) {
    if (target == 0) {
        hwy::SetSupportedTargetsForTest(max_target_mask());  // what may run, not what an earlier call left
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
