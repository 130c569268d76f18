// Shared between the emulator's runtime (simt_runtime.cpp) and executor (simt_exec.cpp).
#pragma once

#include "simt.h"

#include <atomic>
#include <mutex>
#include <string>

namespace simt { namespace detail {

// One kernel launch, shared by the host threads that run its blocks.
struct LaunchState {
    const char* name;
    dim3 grid, block;
    size_t dyn_smem;
    size_t total_limit;  // static + dynamic shared bytes allowed
    FnRef body;

    std::atomic<bool> aborted{false};     // a block failed: skip the rest
    std::atomic<bool> race_found{false};  // report the first race only
    std::atomic<size_t> static_bytes{0};
    std::mutex mu;
    cudaError_t err = cudaSuccess;
    std::string report;
    bool is_race = false;

    void record(cudaError_t code, const std::string& msg, bool race) {
        std::lock_guard<std::mutex> lock(mu);
        if (race) race_found = true;
        else aborted = true;
        if (err != cudaSuccess && !(is_race && !race)) return;  // keep the first, but a hard failure outranks a race
        err = code;
        report = msg;
        is_race = race;
    }
    void note_static(size_t bytes) {
        size_t cur = static_bytes.load();
        while (bytes > cur && !static_bytes.compare_exchange_weak(cur, bytes)) {
        }
    }
};

void run_blocks(LaunchState& L);
extern std::atomic<uint64_t> g_spin_limit;
size_t stack_kib();
int block_threads();
void add_stats(uint64_t blocks, uint64_t switches);

}}  // namespace simt::detail
