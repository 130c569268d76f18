// The bf16 path's tests run where the CPU has it: have_bf16() says so once (the cpuid and oneDNN
// line of cpu_bf16_support) and is false elsewhere, where each test returns at once.
#pragma once

#include <cstdio>

#include "layers/bf16_cpu.h"

inline bool have_bf16() {
    static CpuBf16Support s = cpu_bf16_support();
    static bool said = false;
    if (!said) {
        printf("%s\n", s.message.c_str());
        said = true;
    }
    return s.usable;
}
