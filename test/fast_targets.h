// Runs a test body once per ISA target of the CPU fast path (layers/fast_cpu.h): every target this
// build holds that the CPU runs, best first, and on an AVX512-BF16 CPU the best target once more with
// the bf16 dot products turned off (the exact emulation every other CPU runs). The target's name is
// in every failure's context. Include after <doctest/doctest.h>.
#pragma once

#include <cstdio>
#include <string>

#include "layers/fast_cpu.h"

// every target's name, for the test's log
inline std::string fast_target_list() {
    std::string s;
    for (int64_t t : fast_cpu_targets()) s += (s.empty() ? "" : ", ") + std::string(fast_cpu_target_name(t));
    // (the dispatched target, not the CPU: FAST_CPU_MAX_TARGET=AVX2 on an AVX512-BF16 CPU runs no dot)
    if (fast_cpu_uses_bf16_dot()) s += " (the best also with AVX512-BF16's dot products)";
    return s;
}

template <class F> void for_each_fast_target(F&& body) {
    static bool said = false;
    if (!said) {
        MESSAGE("fast path targets run here: " << fast_target_list());
        said = true;
    }
    struct Restore {
        ~Restore() {
            fast_cpu_force_target(0);
            fast_cpu_allow_bf16_dot(true);
        }
    } restore;
    auto run = [&] {
        const std::string target = fast_cpu_target();
        INFO("fast path target " << target);
        body(target);
    };
    for (int64_t t : fast_cpu_targets()) {
        REQUIRE(fast_cpu_force_target(t));
        fast_cpu_allow_bf16_dot(true);
        run();
        if (fast_cpu_uses_bf16_dot()) {  // and the exact emulation on the same target
            fast_cpu_allow_bf16_dot(false);
            run();
        }
    }
}
