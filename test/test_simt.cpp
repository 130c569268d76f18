// Tests of the SIMT emulator (simt/), the tensor-core wrappers (simt/mma.cuh) and cp.async
// (simt/cp_async.cuh).
// The same file builds with nvcc and runs unchanged on a GPU, except the checks of
// what only the emulator reports (races, deadlocks, bad shared accesses), which are
// skipped under __CUDACC__.
#include <doctest/doctest.h>

#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"
#include "simt/cp_async.cuh"
#include "simt/mma.cuh"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__CUDACC__)
#define EMULATED 0
#else
#define EMULATED 1
#endif

// ----------------------------------------------------------------------------
// helpers

template <class T> struct DeviceBuffer {  // cudaMalloc'd array of n T
    T* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) { cudaCheck(cudaMalloc(&ptr, n * sizeof(T))); }
    DeviceBuffer(const std::vector<T>& h) : DeviceBuffer(h.size()) { upload(h); }
    ~DeviceBuffer() { cudaFree(ptr); }
    void upload(const std::vector<T>& h) { cudaCheck(cudaMemcpy(ptr, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
    std::vector<T> download() const {
        std::vector<T> h(n);
        cudaCheck(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
};

static uint16_t bf16_bits(__nv_bfloat16 h) {
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bf16_bits_to_float(uint16_t b) { return bits_to_float((uint32_t)b << 16); }
static uint32_t pack_bits(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

// random bf16 values in [-2, 2]
static std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = bf16_bits(__float2bfloat16(u(rng)));
    return v;
}

#if EMULATED
// Runs a launch expected to fail in the emulator; returns its report.
struct QuietReports {
    QuietReports() { simt::set_print_reports(false); }
    ~QuietReports() { simt::set_print_reports(true); }
};
#endif

// ----------------------------------------------------------------------------
// indices, launch shapes

__global__ void write_indices(int* out) {
    int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    int thread = tx + blockDim.x * (ty + blockDim.y * tz);
    int block = bx + gridDim.x * (by + gridDim.y * bz);
    int threads = blockDim.x * blockDim.y * blockDim.z;
    int* o = out + 8 * (block * threads + thread);
    o[0] = tx, o[1] = ty, o[2] = tz, o[3] = bx, o[4] = by, o[5] = bz;
    o[6] = blockDim.x * 100 + blockDim.y * 10 + blockDim.z;
    o[7] = gridDim.x * 100 + gridDim.y * 10 + gridDim.z;
}

TEST_CASE("threadIdx, blockIdx, blockDim and gridDim of a 3-D launch") {
    dim3 grid(3, 2, 2), block(4, 3, 2);
    int threads = 24, blocks = 12;
    DeviceBuffer<int> out(8 * threads * blocks);
    cuda_launch(write_indices, grid, block, 0, 0, out.ptr);
    cudaCheck(cudaGetLastError());
    auto h = out.download();
    for (int bz = 0; bz < 2; bz++)
        for (int by = 0; by < 2; by++)
            for (int bx = 0; bx < 3; bx++)
                for (int tz = 0; tz < 2; tz++)
                    for (int ty = 0; ty < 3; ty++)
                        for (int tx = 0; tx < 4; tx++) {
                            int b = bx + 3 * (by + 2 * bz), t = tx + 4 * (ty + 3 * tz);
                            const int* o = &h[8 * (b * threads + t)];
                            CHECK(o[0] == tx);
                            CHECK(o[1] == ty);
                            CHECK(o[2] == tz);
                            CHECK(o[3] == bx);
                            CHECK(o[4] == by);
                            CHECK(o[5] == bz);
                            CHECK(o[6] == 432);
                            CHECK(o[7] == 322);
                        }
}

// ----------------------------------------------------------------------------
// block reduction: correct, and with one __syncthreads missing

// out[b] = sum of in[b*blockDim.x .. +blockDim.x); blockDim.x a power of two <= 1024
__global__ void block_sum(float* out, const float* in) {
    SHARED_ARRAY(float, partial, 1024);
    int t = threadIdx.x;
    partial[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

// the same without the barrier after the first store
__global__ void block_sum_missing_barrier(float* out, const float* in) {
    SHARED_ARRAY(float, partial, 1024);
    int t = threadIdx.x;
    partial[t] = in[blockIdx.x * blockDim.x + t];
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

static std::vector<float> small_integers(size_t n) {  // sums of these are exact in fp32
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)((i * 7919) % 13) - 6.0f;
    return v;
}

TEST_CASE("block reduction with barriers is exact, for 32..1024 threads") {
    for (int threads : {32, 256, 1024}) {
        int blocks = 5;
        auto h = small_integers((size_t)threads * blocks);
        DeviceBuffer<float> in(h), out(blocks);
        cuda_launch(block_sum, blocks, threads, 0, 0, out.ptr, in.ptr);
        cudaCheck(cudaGetLastError());
        auto got = out.download();
        for (int b = 0; b < blocks; b++) {
            double ref = 0;
            for (int i = 0; i < threads; i++) ref += h[(size_t)b * threads + i];
            CHECK(got[b] == ref);  // integers: every partial sum is exact in fp32
        }
#if EMULATED
        CHECK(simt::last_race_report() == "");
#endif
    }
}

#if EMULATED
TEST_CASE("a reduction missing one __syncthreads is reported as a race") {
    QuietReports quiet;
    auto h = small_integers(256 * 3);
    DeviceBuffer<float> in(h), out(3);
    cuda_launch(block_sum_missing_barrier, 3, 256, 0, 0, out.ptr, in.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    CHECK(r.find("block_sum_missing_barrier") != std::string::npos);
    // thread 0 reads partial[128] (byte 512) before thread 128 stores it
    CHECK(r.find("byte offset 512") != std::string::npos);
    CHECK(r.find("'partial' + 512") != std::string::npos);
    CHECK(r.find("read by thread (0,0,0)") != std::string::npos);
    CHECK(r.find("written by thread (128,0,0)") != std::string::npos);
    CHECK(r.find("block (") != std::string::npos);
    CHECK(simt::last_error_report() == r);
    CHECK(cudaGetLastError() == cudaSuccess);  // cleared by the previous call

    // the same launch with the barrier passes, and clears the report
    cuda_launch(block_sum, 3, 256, 0, 0, out.ptr, in.ptr);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(simt::last_race_report() == "");
}
#endif

// ----------------------------------------------------------------------------
// warp-level exchange through shared memory

// out[lane] = in[(lane + 1) % 32], through shared memory
__global__ void warp_rotate(float* out, const float* in, int use_syncwarp) {
    SHARED_ARRAY(float, buf, 32);
    int lane = threadIdx.x;
    buf[lane] = in[lane];
    if (use_syncwarp) __syncwarp();
    out[lane] = buf[(lane + 1) % 32];
}

TEST_CASE("warp exchange through shared memory with __syncwarp") {
    std::vector<float> h(32);
    for (int i = 0; i < 32; i++) h[i] = (float)(i * 3 + 1);
    DeviceBuffer<float> in(h), out(32);
    cuda_launch(warp_rotate, 1, 32, 0, 0, out.ptr, in.ptr, 1);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    for (int i = 0; i < 32; i++) CHECK(got[i] == h[(i + 1) % 32]);
}

#if EMULATED
TEST_CASE("warp exchange without __syncwarp is reported as a race") {
    QuietReports quiet;
    std::vector<float> h(32, 1.0f);
    DeviceBuffer<float> in(h), out(32);
    cuda_launch(warp_rotate, 1, 32, 0, 0, out.ptr, in.ptr, 0);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    CHECK(r.find("warp_rotate") != std::string::npos);
    // lane 0 reads buf[1] (byte 4) before lane 1 writes it
    CHECK(r.find("byte offset 4 ") != std::string::npos);
    CHECK(r.find("read by thread (0,0,0)") != std::string::npos);
    CHECK(r.find("written by thread (1,0,0)") != std::string::npos);
    CHECK(r.find("same warp") != std::string::npos);
}

// lanes 0..15 and 16..31 each sync only their half: exchange inside a half is ordered,
// across halves it is not
__global__ void half_warp_exchange(float* out, int cross) {
    SHARED_ARRAY(float, buf, 32);
    int lane = threadIdx.x;
    buf[lane] = (float)lane;
    __syncwarp(lane < 16 ? 0x0000ffffu : 0xffff0000u);
    int src = cross ? (lane + 16) % 32 : (lane & 16) | ((lane + 1) & 15);
    out[lane] = buf[src];
}

TEST_CASE("a partial __syncwarp orders only the lanes it names") {
    QuietReports quiet;
    DeviceBuffer<float> out(32);
    cuda_launch(half_warp_exchange, 1, 32, 0, 0, out.ptr, 0);
    CHECK(cudaGetLastError() == cudaSuccess);
    auto got = out.download();
    for (int i = 0; i < 32; i++) CHECK(got[i] == (float)((i & 16) | ((i + 1) & 15)));
    cuda_launch(half_warp_exchange, 1, 32, 0, 0, out.ptr, 1);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(simt::last_race_report().find("half_warp_exchange") != std::string::npos);
}

// every thread of two warps writes its slot, then reads a slot of the other warp:
// __syncwarp is not enough across warps
__global__ void cross_warp_syncwarp(float* out) {
    SHARED_ARRAY(float, buf, 64);
    int t = threadIdx.x;
    buf[t] = (float)t;
    __syncwarp();
    out[t] = buf[(t + 32) % 64];
}

TEST_CASE("__syncwarp does not order threads of different warps") {
    QuietReports quiet;
    DeviceBuffer<float> out(64);
    cuda_launch(cross_warp_syncwarp, 1, 64, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    // warp 0 runs first: its last lane completes the __syncwarp and reads buf[63] at once,
    // before thread 63 of warp 1 has stored it
    CHECK(r.find("byte offset 252 ") != std::string::npos);
    CHECK(r.find("read by thread (31,0,0) and then written by thread (63,0,0)") != std::string::npos);
}

// a (8,4,2) block: thread (x,y,z) stores slot x+8y+32z, then reads the slot of (x,y,1-z)
__global__ void race_3d(float* out, int sync) {
    SHARED_ARRAY(float, buf, 64);
    int t = threadIdx.x + 8 * threadIdx.y + 32 * threadIdx.z;
    buf[t] = (float)t;
    if (sync) __syncthreads();
    out[t] = buf[threadIdx.x + 8 * threadIdx.y + 32 * (1 - threadIdx.z)];
}

TEST_CASE("race reports name threads by (x,y,z) and the block") {
    QuietReports quiet;
    DeviceBuffer<float> out(64);
    cuda_launch(race_3d, dim3(1, 2, 1), dim3(8, 4, 2), 0, 0, out.ptr, 1);
    CHECK(cudaGetLastError() == cudaSuccess);
    simt::set_block_threads(1);  // blocks in order: block (0,0,0) reports first
    cuda_launch(race_3d, dim3(1, 2, 1), dim3(8, 4, 2), 0, 0, out.ptr, 0);
    simt::set_block_threads(0);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    // thread (0,0,0) reads slot 32 (byte 128) before thread (0,0,1) stores it
    CHECK(r.find("block (0,0,0)") != std::string::npos);
    CHECK(r.find("byte offset 128 ") != std::string::npos);
    CHECK(r.find("read by thread (0,0,0) and then written by thread (0,0,1)") != std::string::npos);
}

// every thread reads x; warp 0 then syncs and its lane 31 overwrites x: ordered after
// warp 0's reads, not after warp 1's
__global__ void overwrite_after_syncwarp(float* out) {
    SHARED_ARRAY(float, x, 1);
    if (threadIdx.x == 0) x[0] = 1.0f;
    __syncthreads();
    float v = x[0];
    if (threadIdx.x < 32) {
        __syncwarp();
        if (threadIdx.x == 31) x[0] = 2.0f;
    }
    out[threadIdx.x] = v;
}

TEST_CASE("a write is checked against readers of other warps behind many same-warp readers") {
    QuietReports quiet;
    DeviceBuffer<float> out(64);
    cuda_launch(overwrite_after_syncwarp, 1, 32, 0, 0, out.ptr);  // one warp: ordered
    CHECK(cudaGetLastError() == cudaSuccess);
    // two warps: thread 63, last at the barrier, reads first; then lanes 0..31 read and
    // sync, and lane 31 writes while thread 63's read is unordered with it
    cuda_launch(overwrite_after_syncwarp, 1, 64, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    CHECK(r.find("read by thread (63,0,0) and then written by thread (31,0,0)") != std::string::npos);
}

TEST_CASE("barrier epochs wrap around without false or missed races") {
    QuietReports quiet;
    simt::set_block_threads(1);  // blocks run on this host thread, whose counter is set
    auto h = small_integers(256);
    DeviceBuffer<float> in(h), out(1);
    float ref = 0;
    for (float x : h) ref += x;
    simt::detail::set_epoch_counter(UINT32_MAX - 3);  // wraps inside the next launch
    cuda_launch(block_sum, 1, 256, 0, 0, out.ptr, in.ptr);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(out.download()[0] == ref);
    simt::detail::set_epoch_counter(UINT32_MAX - 1);
    cuda_launch(block_sum_missing_barrier, 1, 256, 0, 0, out.ptr, in.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(simt::last_race_report().find("block_sum_missing_barrier") != std::string::npos);
    simt::set_block_threads(0);
}

// write-after-write by two threads, and atomics that must not count as a race
__global__ void shared_counters(int* out, int plain) {
    SHARED_ARRAY(int, count, 4);
    int t = threadIdx.x;
    if (t < 4) count[t] = 0;
    __syncthreads();
    if (plain) count[t % 4] = t;       // racy plain stores
    else atomicAdd(&count[t % 4], 1);  // atomics do not race with each other
    __syncthreads();
    if (t < 4) out[t] = count[t];
}

TEST_CASE("shared atomics do not race; plain writes of one byte by two threads do") {
    QuietReports quiet;
    DeviceBuffer<int> out(4);
    cuda_launch(shared_counters, 1, 128, 0, 0, out.ptr, 0);
    CHECK(cudaGetLastError() == cudaSuccess);
    for (int v : out.download()) CHECK(v == 32);
    cuda_launch(shared_counters, 1, 128, 0, 0, out.ptr, 1);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    // the last thread at the barrier (127) goes on first and stores count[3]; then thread 3
    CHECK(r.find("written by thread (127,0,0) and then written by thread (3,0,0)") != std::string::npos);
}

// a thread reads its own writes, and others' writes made before a barrier or (same
// warp) before a __syncwarp: never a race
__global__ void no_false_positives(float* out) {
    SHARED_ARRAY(float, a, 256);
    SHARED_ARRAY(float, b, 256);
    int t = threadIdx.x;
    a[t] = (float)t;
    a[t] += 1.0f;  // same thread read-modify-write
    b[t] = a[t] * 2.0f;
    __syncthreads();
    float s = a[255 - t] + b[(t + 1) % 256];  // many readers of bytes written before the barrier
    __syncthreads();
    a[(t + 7) % 256] = s;  // writes over bytes read in the previous interval
    __syncwarp();
    int writer = (t & ~31) | ((t + 3) & 31);  // a lane of the same warp
    float w = a[(writer + 7) % 256];
    __syncthreads();
    out[t] = a[t] + w;
}

TEST_CASE("accesses ordered by barriers or __syncwarp are not reported") {
    DeviceBuffer<float> out(256);
    cuda_launch(no_false_positives, 1, 256, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(simt::last_error_report() == "");
    auto s = [](int u) { return (float)(255 - u + 1) + 2.0f * (float)((u + 1) % 256 + 1); };
    auto got = out.download();
    for (int t = 0; t < 256; t++) {
        int writer = (t & ~31) | ((t + 3) & 31);
        CHECK(got[t] == s((t + 256 - 7) % 256) + s(writer));  // small integers: exact
    }
}
#endif

#if EMULATED
// lanes 0..15 shuffle down by 8 among themselves: lanes 8..15 read lanes 16..23, outside
// the mask, whose value is undefined on a GPU; the emulator returns poison bits
__global__ void shfl_outside_mask(unsigned* out) {
    int lane = threadIdx.x;
    if (lane < 16) out[lane] = __shfl_down_sync(0x0000ffffu, (unsigned)lane, 8);
}

TEST_CASE("a shuffle from a lane outside the mask gives poison bits") {
    DeviceBuffer<unsigned> out(16);
    cuda_launch(shfl_outside_mask, 1, 32, 0, 0, out.ptr);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    for (int i = 0; i < 8; i++) CHECK(got[i] == (unsigned)(i + 8));
    for (int i = 8; i < 16; i++) CHECK(got[i] == 0x7fbadbadu);
}
#endif

// ----------------------------------------------------------------------------
// deadlocks

#if EMULATED
__global__ void exit_before_barrier(float* out) {
    if (threadIdx.x >= 16) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void unequal_barrier_counts(float* out) {
    int rounds = threadIdx.x < 32 ? 2 : 1;
    for (int i = 0; i < rounds; i++) __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void mma_with_exited_lane(float* out) {
    if (threadIdx.x == 5) return;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0}, d[4];
    mma_m16n8k16_bf16(d, a, b, c);
    out[threadIdx.x] = d[0];
}
__global__ void shfl_and_syncwarp_meet(float* out) {
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    else __syncwarp();
    out[threadIdx.x] = v;
}

// thread 1 spins on a flag that thread 0 sets: on a GPU the scheduler interleaves them;
// here thread 1, the last at the barrier, runs on first and fibers are not preempted,
// so the emulator must stop the spin and say why
__global__ void spin_on_flag(int* out) {
    SHARED_ARRAY(int, flag, 1);
    if (threadIdx.x == 0) flag[0] = 0;
    __syncthreads();
    if (threadIdx.x == 1) {
        while (atomicAdd(&flag[0], 0) == 0) {
        }
    } else {
        atomicExch(&flag[0], 1);
    }
    out[threadIdx.x] = 1;
}

TEST_CASE("a spin-wait on shared memory is reported") {
    QuietReports quiet;
    simt::set_spin_limit(100000);
    DeviceBuffer<int> out(2);
    cuda_launch(spin_on_flag, 1, 2, 0, 0, out.ptr);
    simt::set_spin_limit(0);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(simt::last_error_report().find("spin-wait") != std::string::npos);
}

TEST_CASE("deadlocks are reported, not hung") {
    QuietReports quiet;
    DeviceBuffer<float> out(64);
    cuda_launch(exit_before_barrier, 2, 64, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(simt::last_error_report().find("deadlock") != std::string::npos);
    CHECK(simt::last_error_report().find("exit_before_barrier") != std::string::npos);
    CHECK(simt::last_race_report() == "");

    cuda_launch(unequal_barrier_counts, 1, 64, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(simt::last_error_report().find("deadlock") != std::string::npos);

    cuda_launch(mma_with_exited_lane, 1, 32, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorIllegalInstruction);
    CHECK(simt::last_error_report().find("all 32 lanes") != std::string::npos);

    cuda_launch(shfl_and_syncwarp_meet, 1, 32, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(simt::last_error_report().find("different collectives") != std::string::npos);

    // the emulator is usable after each of these
    cuda_launch(warp_rotate, 1, 32, 0, 0, out.ptr, out.ptr + 32, 1);
    CHECK(cudaGetLastError() == cudaSuccess);
}
#endif

// ----------------------------------------------------------------------------
// warp collectives

// out[lane*8 + k] for k: idx(src), up(d), down(d), xor(m), each with `width`;
// ballot of (v > 0), any, all; 64-bit and bf16x2 shuffles
__global__ void warp_ops(float* out, unsigned* votes, double* out64, __nv_bfloat162* out_bf, const float* in,
                         int src, int delta, int lane_mask, int width) {
    int lane = threadIdx.x;
    float v = in[lane];
    out[lane * 4 + 0] = __shfl_sync(0xffffffffu, v, src, width);
    out[lane * 4 + 1] = __shfl_up_sync(0xffffffffu, v, delta, width);
    out[lane * 4 + 2] = __shfl_down_sync(0xffffffffu, v, delta, width);
    out[lane * 4 + 3] = __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
    votes[lane * 3 + 0] = __ballot_sync(0xffffffffu, v > 0.0f);
    votes[lane * 3 + 1] = __any_sync(0xffffffffu, v > 100.0f);
    votes[lane * 3 + 2] = __all_sync(0xffffffffu, v > -100.0f);
    double d = (double)v * 1e10;
    out64[lane] = __shfl_xor_sync(0xffffffffu, d, 1);
    __nv_bfloat162 h = __floats2bfloat162_rn(v, -v);
    out_bf[lane] = __shfl_down_sync(0xffffffffu, h, 1);
}

TEST_CASE("warp shuffles, votes: CUDA semantics for every width") {
    std::vector<float> h(32);
    for (int i = 0; i < 32; i++) h[i] = (float)((i * 37) % 32) - 10.0f;
    DeviceBuffer<float> in(h), out(32 * 4);
    DeviceBuffer<unsigned> votes(32 * 3);
    DeviceBuffer<double> out64(32);
    DeviceBuffer<__nv_bfloat162> out_bf(32);
    for (int width : {32, 16, 8, 4, 2, 1}) {
        for (int trial = 0; trial < 3; trial++) {
            int src = (trial * 13 + 5) % 32, delta = 1 + trial * 3, lane_mask = (trial * 7 + 1) % 32;
            cuda_launch(warp_ops, 1, 32, 0, 0, out.ptr, votes.ptr, out64.ptr, out_bf.ptr, in.ptr, src, delta,
                        lane_mask, width);
            cudaCheck(cudaGetLastError());
            auto got = out.download();
            for (int lane = 0; lane < 32; lane++) {
                // CUDA Programming Guide, warp shuffle functions: lanes form groups of `width`
                int base = lane / width * width;
                int idx_src = base + src % width;
                int up_src = lane - delta >= base ? lane - delta : lane;
                int down_src = lane + delta < base + width ? lane + delta : lane;
                int xor_src = (lane ^ lane_mask) < base + width ? (lane ^ lane_mask) : lane;
                INFO("width " << width << " lane " << lane);
                CHECK(got[lane * 4 + 0] == h[idx_src]);
                CHECK(got[lane * 4 + 1] == h[up_src]);
                CHECK(got[lane * 4 + 2] == h[down_src]);
                CHECK(got[lane * 4 + 3] == h[xor_src]);
            }
        }
    }
    unsigned ballot = 0;
    for (int i = 0; i < 32; i++) ballot |= (h[i] > 0.0f ? 1u : 0u) << i;
    auto v = votes.download();
    auto d = out64.download();
    auto b = out_bf.download();
    for (int lane = 0; lane < 32; lane++) {
        CHECK(v[lane * 3 + 0] == ballot);
        CHECK(v[lane * 3 + 1] == 0u);
        CHECK(v[lane * 3 + 2] != 0u);
        CHECK(d[lane] == (double)h[lane ^ 1] * 1e10);
        int s = lane + 1 < 32 ? lane + 1 : lane;
        CHECK(__low2float(b[lane]) == h[s]);  // small integers: exact in bf16
        CHECK(__high2float(b[lane]) == -h[s]);
    }
}

// a 48-thread block: the second warp has 16 lanes and reduces with a 16-lane mask
__global__ void partial_warp_sum(float* out, const float* in) {
    int t = threadIdx.x;
    unsigned mask = t < 32 ? 0xffffffffu : 0x0000ffffu;
    int width = t < 32 ? 32 : 16;
    float v = in[t];
    for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o, width);
    out[t] = v;
}

TEST_CASE("collectives of a partial last warp") {
    auto h = small_integers(48);
    DeviceBuffer<float> in(h), out(48);
    cuda_launch(partial_warp_sum, 1, 48, 0, 0, out.ptr, in.ptr);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    float s0 = 0, s1 = 0;
    for (int i = 0; i < 32; i++) s0 += h[i];
    for (int i = 32; i < 48; i++) s1 += h[i];
    for (int i = 0; i < 48; i++) CHECK(got[i] == (i < 32 ? s0 : s1));
}

// lanes outside [lo, hi) exit; the others vote and sum over the full mask, which waits
// only for the lanes that have not exited (CUDA: "all non-exited threads named in mask").
// Here lanes below lo exit before the others arrive, lanes from hi on after them.
__global__ void sum_after_exit(int* out, const int* in, int lo, int hi) {
    int lane = threadIdx.x;
    if (lane < lo || lane >= hi) return;
    unsigned voters = __ballot_sync(0xffffffffu, 1);
    int total = __reduce_add_sync(0xffffffffu, in[lane]);
    out[lane] = total;
    out[32 + lane] = __popc(voters);
}

TEST_CASE("collectives wait only for lanes that have not exited") {
    std::vector<int> h(32);
    for (int i = 0; i < 32; i++) h[i] = i * i - 50;
    DeviceBuffer<int> in(h), out(64);
    int ranges[4][2] = {{0, 32}, {0, 16}, {16, 32}, {5, 27}};
    for (auto& r : ranges) {
        cuda_launch(sum_after_exit, 1, 32, 0, 0, out.ptr, in.ptr, r[0], r[1]);
        cudaCheck(cudaGetLastError());
        auto got = out.download();
        int ref = 0;
        for (int i = r[0]; i < r[1]; i++) ref += h[i];
        for (int i = r[0]; i < r[1]; i++) {
            CHECK(got[i] == ref);
            CHECK(got[32 + i] == r[1] - r[0]);
        }
    }
}

__global__ void barrier_counts(int* out) {
    int t = threadIdx.x;
    out[t * 3 + 0] = __syncthreads_count(t % 3 == 0);
    out[t * 3 + 1] = __syncthreads_and(t < 1000);
    out[t * 3 + 2] = __syncthreads_or(t == 77);
}

TEST_CASE("__syncthreads_count / _and / _or") {
    DeviceBuffer<int> out(3 * 200);
    cuda_launch(barrier_counts, 1, 200, 0, 0, out.ptr);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    for (int t = 0; t < 200; t++) {
        CHECK(got[t * 3 + 0] == 67);  // 0, 3, ..., 198
        CHECK(got[t * 3 + 1] != 0);
        CHECK(got[t * 3 + 2] != 0);
    }
}

__global__ void warp_reductions(int* out, const int* in) {
    int t = threadIdx.x;
    unsigned mask = t < 32 ? 0xffffffffu : 0x00000fffu;  // second warp: 12 lanes
    int v = in[t];
    out[t * 6 + 0] = __reduce_add_sync(mask, v);
    out[t * 6 + 1] = __reduce_min_sync(mask, v);
    out[t * 6 + 2] = __reduce_max_sync(mask, v);
    out[t * 6 + 3] = (int)__reduce_max_sync(mask, (unsigned)v);
    out[t * 6 + 4] = (int)__reduce_or_sync(mask, (unsigned)v);
    out[t * 6 + 5] = (int)__reduce_xor_sync(mask, (unsigned)v);
}

TEST_CASE("__reduce_*_sync over full and partial warps") {
    std::vector<int> h(44);
    for (int i = 0; i < 44; i++) h[i] = (i * 7919) % 201 - 100;
    DeviceBuffer<int> in(h), out(44 * 6);
    cuda_launch(warp_reductions, 1, 44, 0, 0, out.ptr, in.ptr);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    for (int t = 0; t < 44; t++) {
        int lo = t < 32 ? 0 : 32, hi = t < 32 ? 32 : 44;
        int sum = 0, mn = h[lo], mx = h[lo];
        unsigned umx = (unsigned)h[lo], orv = 0, xorv = 0;
        for (int i = lo; i < hi; i++) {
            sum += h[i], mn = std::min(mn, h[i]), mx = std::max(mx, h[i]);
            umx = std::max(umx, (unsigned)h[i]), orv |= (unsigned)h[i], xorv ^= (unsigned)h[i];
        }
        CHECK(got[t * 6 + 0] == sum);
        CHECK(got[t * 6 + 1] == mn);
        CHECK(got[t * 6 + 2] == mx);
        CHECK((unsigned)got[t * 6 + 3] == umx);
        CHECK((unsigned)got[t * 6 + 4] == orv);
        CHECK((unsigned)got[t * 6 + 5] == xorv);
    }
}

// ----------------------------------------------------------------------------
// atomics on global memory from many blocks

__global__ void global_atomics(float* fsum, int* isum, unsigned* usum, unsigned long long* llsum, int* imax,
                               unsigned* umax, int* cas_count) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(fsum, 1.0f);
    atomicAdd(isum, g % 5 - 2);
    atomicAdd(usum, 3u);
    atomicAdd(llsum, (unsigned long long)g << 33);
    atomicMax(imax, (g * 7919) % 10007 - 5000);
    atomicMax(umax, (unsigned)((g * 104729) % 65521));
    int old = *cas_count, assumed;  // increment through a CAS loop
    do {
        assumed = old;
        old = atomicCAS(cas_count, assumed, assumed + 1);
    } while (old != assumed);
}

TEST_CASE("global atomics are atomic across blocks") {
    int blocks = 64, threads = 128, n = blocks * threads;
    DeviceBuffer<float> fsum(1);
    DeviceBuffer<int> isum(1), imax(1), cas_count(1);
    DeviceBuffer<unsigned> usum(1), umax(1);
    DeviceBuffer<unsigned long long> llsum(1);
    cudaCheck(cudaMemset(fsum.ptr, 0, 4));
    cudaCheck(cudaMemset(isum.ptr, 0, 4));
    cudaCheck(cudaMemset(usum.ptr, 0, 4));
    cudaCheck(cudaMemset(llsum.ptr, 0, 8));
    cudaCheck(cudaMemset(cas_count.ptr, 0, 4));
    imax.upload({-100000});
    umax.upload({0u});
    cuda_launch(global_atomics, blocks, threads, 0, 0, fsum.ptr, isum.ptr, usum.ptr, llsum.ptr, imax.ptr, umax.ptr,
                cas_count.ptr);
    cudaCheck(cudaGetLastError());
    long long isum_ref = 0, imax_ref = -100000;
    unsigned long long ll_ref = 0;
    unsigned umax_ref = 0;
    for (int g = 0; g < n; g++) {
        isum_ref += g % 5 - 2;
        ll_ref += (unsigned long long)g << 33;
        imax_ref = std::max<long long>(imax_ref, (g * 7919) % 10007 - 5000);
        umax_ref = std::max<unsigned>(umax_ref, (unsigned)((g * 104729) % 65521));
    }
    CHECK(fsum.download()[0] == (float)n);  // n < 2^24: every partial count is exact
    CHECK(isum.download()[0] == isum_ref);
    CHECK(usum.download()[0] == 3u * n);
    CHECK(llsum.download()[0] == ll_ref);
    CHECK(imax.download()[0] == imax_ref);
    CHECK(umax.download()[0] == umax_ref);
    CHECK(cas_count.download()[0] == n);
}

// ----------------------------------------------------------------------------
// shared memory layout: static arrays and dynamic memory are distinct

// fills two static arrays and the dynamic memory with patterns, then checks them all
__global__ void shared_layout(int* errors, int dyn_floats) {
    SHARED_ARRAY(int, a, 100);
    SHARED_ARRAY(float4, b, 33);
    DYNAMIC_SHARED(float, dyn);
    int t = threadIdx.x, n = blockDim.x;
    for (int i = t; i < 100; i += n) a[i] = 1000 + i;
    for (int i = t; i < 33; i += n) b[i] = make_float4((float)i, -1.0f, 2.0f * i, 7.0f);
    for (int i = t; i < dyn_floats; i += n) dyn[i] = 0.5f * i;
    __syncthreads();
    int bad = 0;
    for (int i = t; i < 100; i += n) bad += a[i] != 1000 + i;
    sptr<const float4> b4 = b;
    for (int i = t; i < 33; i += n) {
        float4 v = b4[i];
        bad += v.x != (float)i || v.y != -1.0f || v.z != 2.0f * i || v.w != 7.0f;
    }
    sptr<float2> d2 = sptr_cast<float2>(dyn);  // reinterpret the dynamic memory
    for (int i = t; i < dyn_floats / 2; i += n) {
        float2 v = d2[i];
        bad += v.x != 0.5f * (2 * i) || v.y != 0.5f * (2 * i + 1);
    }
    atomicAdd(errors, bad);
}

TEST_CASE("SHARED_ARRAYs and dynamic shared memory do not overlap") {
    DeviceBuffer<int> errors(1);
    cudaCheck(cudaMemset(errors.ptr, 0, 4));
    cuda_launch(shared_layout, 4, 64, 1000 * sizeof(float), 0, errors.ptr, 1000);
    cudaCheck(cudaGetLastError());
    CHECK(errors.download()[0] == 0);
}

// bf16 tile in dynamic shared memory, moved as __nv_bfloat162 and uint4 elements
__global__ void shared_vectors(__nv_bfloat16* out, const __nv_bfloat16* in, int n) {
    DYNAMIC_SHARED(__nv_bfloat16, tile);
    int t = threadIdx.x;
    sptr<uint4> t16 = sptr_cast<uint4>(tile);
    const uint4* in16 = reinterpret_cast<const uint4*>(in);
    for (int i = t; i < n / 8; i += blockDim.x) t16[i] = in16[i];
    __syncthreads();
    sptr<__nv_bfloat162> t2 = sptr_cast<__nv_bfloat162>(tile);
    for (int i = t; i < n / 2; i += blockDim.x) {
        __nv_bfloat162 v = t2[i];
        out[2 * i] = v.y;  // swap the halves
        out[2 * i + 1] = v.x;
    }
    __syncthreads();
    sptr<const __nv_bfloat16> ct = tile;
    if (t == 0) {
        sptr<const __nv_bfloat16> p = ct + 3;
        p++;
        out[0] = *(p - 1);  // element 3, through pointer arithmetic
    }
}

TEST_CASE("whole-element float4/uint4/bfloat162 access through sptr") {
    int n = 256;
    std::vector<__nv_bfloat16> h(n);
    for (int i = 0; i < n; i++) h[i] = __float2bfloat16((float)(i - 100));
    DeviceBuffer<__nv_bfloat16> in(h), out(n);
    cuda_launch(shared_vectors, 1, 64, n * 2, 0, out.ptr, in.ptr, n);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    CHECK(__bfloat162float(got[0]) == __bfloat162float(h[3]));
    for (int i = 1; i < n; i++) CHECK(__bfloat162float(got[i]) == __bfloat162float(h[i ^ 1]));
}

// ----------------------------------------------------------------------------
// launch limits

__global__ void write_linear_index(float* out) {
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[t] = (float)t;
}
__global__ void touch_dynamic(float* out) {
    DYNAMIC_SHARED(float, dyn);
    dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x];
}
__global__ void touch_dynamic_optin(float* out) {
    DYNAMIC_SHARED(float, dyn);
    dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x];
}

TEST_CASE("launch limits are enforced the CUDA way") {
#if EMULATED
    QuietReports quiet;
#endif
    DeviceBuffer<float> out(1024);
    cuda_launch(touch_dynamic, 1, 1025, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    cuda_launch(touch_dynamic, 1, dim3(1, 1, 65), 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    cuda_launch(touch_dynamic, dim3(1, 65536, 1), 32, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    cuda_launch(write_linear_index, 1, dim3(32, 32, 1), 0, 0, out.ptr);  // exactly 1024: fine
    CHECK(cudaGetLastError() == cudaSuccess);

    // dynamic shared memory: 48 KiB by default, more only after opting in
    cuda_launch(touch_dynamic, 1, 32, 48 * 1024, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaSuccess);
    cuda_launch(touch_dynamic, 1, 32, 48 * 1024 + 16, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaFuncSetAttribute(touch_dynamic_optin, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024) ==
          cudaSuccess);
    cuda_launch(touch_dynamic_optin, 1, 32, 100 * 1024, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaSuccess);
    auto got = out.download();
    for (int i = 0; i < 32; i++) CHECK(got[i] == (float)((i + 1) % 32));
    cuda_launch(touch_dynamic_optin, 1, 32, 100 * 1024 + 16, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaFuncSetAttribute(touch_dynamic_optin, cudaFuncAttributeMaxDynamicSharedMemorySize, 240 * 1024) ==
          cudaErrorInvalidValue);
    cudaGetLastError();
}

#if EMULATED
__global__ void big_static(float* out) {
    SHARED_ARRAY(float, big, 10000);  // 40000 bytes
    DYNAMIC_SHARED(float, dyn);
    big[threadIdx.x] = 1.0f;
    dyn[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = big[threadIdx.x] + dyn[threadIdx.x];
}
__global__ void too_big_static(float* out) {
    SHARED_ARRAY(float, a, 8192);  // 32 KiB
    SHARED_ARRAY(float, b, 8192);  // 32 KiB more: nvcc refuses 64 KiB of static shared memory
    a[threadIdx.x] = 1.0f;
    b[threadIdx.x] = 1.0f;
    out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}

TEST_CASE("static shared memory counts against the limits") {
    QuietReports quiet;
    DeviceBuffer<float> out(32);
    cuda_launch(big_static, 1, 32, 8 * 1024, 0, out.ptr);  // 40000 + 8192 <= 48 KiB
    CHECK(cudaGetLastError() == cudaSuccess);
    cuda_launch(big_static, 1, 32, 9 * 1024, 0, out.ptr);  // 40000 + 9216 > 48 KiB
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(simt::last_error_report().find("big_static") != std::string::npos);
    cuda_launch(too_big_static, 1, 32, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(simt::last_error_report().find("48 KiB") != std::string::npos);
    cudaFuncAttributes attr;
    cudaCheck(cudaFuncGetAttributes(&attr, big_static));
    CHECK(attr.sharedSizeBytes == 40000);
}
#endif

TEST_CASE("device properties: an sm_90 device") {
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, 0));
    CHECK(p.warpSize == 32);
    CHECK(p.maxThreadsPerBlock == 1024);
    CHECK(p.sharedMemPerBlock == 48 * 1024);
    int v = 0;
    cudaCheck(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    CHECK(v >= 8);
#if EMULATED
    CHECK(p.major == 9);
    CHECK(p.minor == 0);
    CHECK(p.multiProcessorCount == 132);
    CHECK(p.sharedMemPerBlockOptin == 227 * 1024);
    CHECK(p.regsPerBlock == 65536);
    cudaCheck(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    CHECK(v == 227 * 1024);
    cudaCheck(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    CHECK(v == 132);
#endif
}

TEST_CASE("host threads launch at the same time, each on its own stream") {
    // (NCCL ranks run as host threads: launches must not share state)
    const int ranks = 3, rounds = 20;
    std::vector<int> failures(ranks, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; r++)
        threads.emplace_back([r, &failures]() {
            int devices = 0;
            cudaCheck(cudaGetDeviceCount(&devices));
            cudaCheck(cudaSetDevice(r % devices));  // one device per rank where there are enough
            cudaStream_t s;
            cudaCheck(cudaStreamCreate(&s));
            int blocks = 4, n = 256 * blocks;
            std::vector<float> h(n);
            for (int i = 0; i < n; i++) h[i] = (float)((i * (r + 3)) % 17) - 8.0f;
            DeviceBuffer<float> in(h), out(blocks);
            for (int round = 0; round < rounds; round++) {
                cuda_launch(block_sum, blocks, 256, 0, s, out.ptr, in.ptr);
                if (cudaGetLastError() != cudaSuccess) failures[r]++;
                std::vector<float> got(blocks);
                cudaCheck(cudaMemcpyAsync(got.data(), out.ptr, blocks * 4, cudaMemcpyDeviceToHost, s));
                cudaCheck(cudaStreamSynchronize(s));
                for (int b = 0; b < blocks; b++) {
                    float ref = 0;  // integers: exact
                    for (int i = 0; i < 256; i++) ref += h[b * 256 + i];
                    if (got[b] != ref) failures[r]++;
                }
            }
            cudaCheck(cudaStreamDestroy(s));
        });
    for (auto& t : threads) t.join();
    for (int r = 0; r < ranks; r++) CHECK(failures[r] == 0);
}

TEST_CASE("streams and events keep order") {
    cudaStream_t s;
    cudaEvent_t start, stop;
    cudaCheck(cudaStreamCreate(&s));
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    auto h = small_integers(512);
    std::vector<float> back(512);
    DeviceBuffer<float> in(512), out(2);
    cudaCheck(cudaEventRecord(start, s));
    cudaCheck(cudaMemcpyAsync(in.ptr, h.data(), 512 * 4, cudaMemcpyHostToDevice, s));
    cuda_launch(block_sum, 2, 256, 0, s, out.ptr, in.ptr);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaMemcpyAsync(back.data(), out.ptr, 2 * 4, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaEventRecord(stop, s));
    cudaCheck(cudaStreamWaitEvent(0, stop, 0));
    cudaCheck(cudaStreamSynchronize(s));
    float ms = -1;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    CHECK(ms >= 0.0f);
    float s0 = 0, s1 = 0;
    for (int i = 0; i < 256; i++) s0 += h[i], s1 += h[256 + i];
    CHECK(back[0] == s0);
    CHECK(back[1] == s1);
    // stream-ordered allocation
    float* tmp = nullptr;
    cudaCheck(cudaMallocAsync(&tmp, 256 * sizeof(float), s));
    cudaCheck(cudaMemcpyAsync(tmp, in.ptr, 256 * sizeof(float), cudaMemcpyDeviceToDevice, s));
    cuda_launch(block_sum, 1, 256, 0, s, out.ptr, tmp);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaFreeAsync(tmp, s));
    cudaCheck(cudaMemcpyAsync(back.data(), out.ptr, 4, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    CHECK(back[0] == s0);
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    cudaCheck(cudaStreamDestroy(s));
}

// ----------------------------------------------------------------------------
// bad accesses (emulator only: a GPU would fault or silently corrupt)

#if EMULATED
__global__ void out_of_bounds(float* out, int index) {
    SHARED_ARRAY(float, small, 8);
    small[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = small[index];
}
__global__ void misaligned(float* out) {
    SHARED_ARRAY(float, buf, 16);
    sptr<float4> p = sptr_cast<float4>(buf + 1);  // 4-byte offset: not 16-byte aligned
    p[0] = make_float4(1, 2, 3, 4);
    out[0] = buf[0];
}

__global__ void write_at(float* out, int index) { out[index] = 1.0f; }

TEST_CASE("writes just outside a cudaMalloc buffer are caught by its guard zones") {
    QuietReports quiet;
    DeviceBuffer<float> buf(10);
    cuda_launch(write_at, 1, 1, 0, 0, buf.ptr, 9);
    CHECK(cudaGetLastError() == cudaSuccess);
    cuda_launch(write_at, 1, 1, 0, 0, buf.ptr, 10);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    CHECK(simt::last_error_report().find("bytes 40..43 relative to the 40-byte allocation") != std::string::npos);
    cuda_launch(write_at, 1, 1, 0, 0, buf.ptr, -1);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    CHECK(simt::last_error_report().find("bytes -4..-1") != std::string::npos);
    cuda_launch(write_at, 1, 1, 0, 0, buf.ptr, 0);  // the zones were restored: reported once
    CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("out-of-bounds, misaligned shared access and host pointers fail the launch") {
    QuietReports quiet;
    DeviceBuffer<float> out(8);
    cuda_launch(out_of_bounds, 1, 8, 0, 0, out.ptr, 7);
    CHECK(cudaGetLastError() == cudaSuccess);
    cuda_launch(out_of_bounds, 1, 8, 0, 0, out.ptr, 8);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    CHECK(simt::last_error_report().find("'small'") != std::string::npos);
    cuda_launch(misaligned, 1, 1, 0, 0, out.ptr);
    CHECK(cudaGetLastError() == cudaErrorMisalignedAddress);
    std::vector<float> host(8);
    cuda_launch(out_of_bounds, 1, 8, 0, 0, host.data(), 0);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(simt::last_error_report().find("not device memory") != std::string::npos);
    CHECK(cudaMemcpy(host.data(), host.data(), 32, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    cudaGetLastError();
}

// vector accesses to global memory at base + offset floats: a 128-bit load and store (load128,
// store128) and the float2 / float4 atomics of sm_90
__global__ void vector_access(float* base, int offset, int what) {
    float* p = base + offset;
    if (what == 0) { f128 v = load128(p); base[0] = v[0] + v[3]; }
    if (what == 1) { store128(p, f128::zeros()); }
    if (what == 2) { atomicAdd(reinterpret_cast<float2*>(p), make_float2(1.0f, 2.0f)); }
    if (what == 3) { atomicAdd(reinterpret_cast<float4*>(p), make_float4(1.0f, 2.0f, 3.0f, 4.0f)); }
}

TEST_CASE("vector loads, stores and atomics at an address not a multiple of their size fail, as on the GPU") {
    QuietReports quiet;
    DeviceBuffer<float> buf(64);
    cudaCheck(cudaMemset(buf.ptr, 0, 64 * sizeof(float)));
    const char* names[4] = {"128-bit load (load128)", "128-bit store (store128)", "atomicAdd(float2*)",
                            "atomicAdd(float4*)"};
    const int size_floats[4] = {4, 4, 2, 4};
    for (int what = 0; what < 4; what++) {
        CAPTURE(what);
        cuda_launch(vector_access, 1, 1, 0, 0, buf.ptr, 8, what);  // 32 bytes: aligned for every size
        CHECK(cudaGetLastError() == cudaSuccess);
        for (int offset = 9; offset < 8 + size_floats[what]; offset++) {  // 4, 8, 12 bytes off
            CAPTURE(offset);
            cuda_launch(vector_access, 1, 1, 0, 0, buf.ptr, offset, what);
            CHECK(cudaGetLastError() == cudaErrorMisalignedAddress);
            std::string r = simt::last_error_report();
            INFO(r);
            CHECK(r.find(std::string("misaligned ") + names[what]) != std::string::npos);
            CHECK(r.find("by thread (0,0,0) in kernel 'vector_access'") != std::string::npos);
        }
    }
    // the aligned atomics added each element once
    std::vector<float> h = buf.download();
    CHECK(h[8] == 2.0f);
    CHECK(h[9] == 4.0f);
    CHECK(h[10] == 3.0f);
    CHECK(h[11] == 4.0f);
}
#endif

// ----------------------------------------------------------------------------
// flush-to-zero: --use_fast_math implies -ftz=true, so fp32 instructions of device code read a
// subnormal input as 0 and write a subnormal result as 0; bf16 arithmetic keeps subnormals (not
// an fp32 instruction), and atom.add.f32 flushes always. The emulator models it (simt/simt_ftz.h)
// on its device threads only: the host code around a launch keeps subnormals.

__global__ void flush_to_zero_kernel(float* out, __nv_bfloat16* out_bf16, const float* in, float one) {
    float tiny = in[0], small = in[1], sub = in[2];  // 2^-100, 2^-30, 2^-130 (subnormal)
    out[0] = tiny * small;                          // 2^-130: a subnormal result
    out[1] = sub * one;                             // a subnormal input
    out[2] = log2f(sub);                            // log2 of a subnormal (lg2.approx.ftz): -inf
    out[3] = exp2f(-130.0f * one);                  // ex2.approx.ftz of a subnormal result
    out[4] = fmaf(tiny, small, 0.0f);
    atomicAdd(&out[5], sub);                        // atom.add.f32
    out_bf16[0] = __hmul(__float2bfloat16(tiny), __float2bfloat16(small));  // bf16: kept, 2^-130
    out_bf16[1] = __hadd(__ushort_as_bfloat16(0x0008), __float2bfloat16(0.0f));  // 8 2^-133 = 2^-130 in, kept
}

TEST_CASE("flush-to-zero of fast math: fp32 subnormals are 0 on the device, bf16 keeps them, the host too") {
    const float tiny = std::ldexp(1.0f, -100), small = std::ldexp(1.0f, -30), sub = std::ldexp(1.0f, -130);
    REQUIRE(sub > 0.0f);  // the host keeps subnormals
    DeviceBuffer<float> in(std::vector<float>{tiny, small, sub}), out(6);
    DeviceBuffer<__nv_bfloat16> out_bf16(2);
    cudaCheck(cudaMemset(out.ptr, 0, 6 * sizeof(float)));
    cuda_launch(flush_to_zero_kernel, 1, 1, 0, 0, out.ptr, out_bf16.ptr, in.ptr, 1.0f);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> r = out.download();
    CHECK(r[0] == 0.0f);
    CHECK(r[1] == 0.0f);
    CHECK(r[2] == -INFINITY);
    CHECK(r[3] == 0.0f);
    CHECK(r[4] == 0.0f);
    CHECK(r[5] == 0.0f);
    std::vector<__nv_bfloat16> b = out_bf16.download();
    CHECK((float)b[0] == sub);
    CHECK((float)b[1] == sub);
    // after the launch the host still computes subnormals (volatile: computed at run time)
    volatile float a = tiny, c = small;
    CHECK(a * c == sub);
}

// ----------------------------------------------------------------------------
// bf16 conversions

// value of a bf16 bit pattern, with 0x7f80 (inf) standing for 2^128 when rounding
static double bf16_candidate(uint16_t b) {
    if ((b & 0x7fff) == 0x7f80) return (b & 0x8000) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
    return (double)bf16_bits_to_float(b);
}

TEST_CASE("__float2bfloat16 rounds to nearest even and keeps NaN") {
    std::mt19937 rng(42);
    std::uniform_int_distribution<uint32_t> bits;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = bits(rng);
        if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
        float f = bits_to_float(u);
        uint16_t b = bf16_bits(__float2bfloat16(f));
        if (std::isnan(f)) {
            CHECK(std::isnan(bf16_bits_to_float(b)));
            continue;
        }
        if (std::isinf(f)) {
            CHECK(bf16_bits_to_float(b) == f);
            continue;
        }
        // the two candidates around f (truncation and one ulp away from zero)
        uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
        double d_lo = std::fabs((double)f - bf16_candidate(lo)), d_hi = std::fabs((double)f - bf16_candidate(hi));
        uint16_t want = d_lo < d_hi ? lo : d_hi < d_lo ? hi : ((lo & 1) ? hi : lo);
        INFO("f = " << f << " bits " << u);
        REQUIRE(b == want);
        CHECK(bf16_bits(__float2bfloat16_rn(f)) == want);
    }
    CHECK(__bfloat162float(__float2bfloat16(1.0f)) == 1.0f);
    float2 two = __bfloat1622float2(__floats2bfloat162_rn(0.5f, -3.0f));
    CHECK(two.x == 0.5f);
    CHECK(two.y == -3.0f);
    __nv_bfloat162 p = __floats2bfloat162_rn(1.25f, 2.5f);
    CHECK(__low2float(p) == 1.25f);
    CHECK(__high2float(p) == 2.5f);
}

__global__ void bf16_arith(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b,
                           const __nv_bfloat16* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[3 * i + 0] = __hadd(a[i], b[i]);
    out[3 * i + 1] = __hmul(a[i], b[i]);
    out[3 * i + 2] = __hfma(a[i], b[i], c[i]);
}

// v rounded to the nearest bf16, ties to even mantissa (v finite, normal range)
static float round_to_bf16_ref(double v) {
    if (v == 0) return 0.0f;
    double ulp = std::ldexp(1.0, (int)std::floor(std::log2(std::fabs(v))) - 7);
    double lo = std::floor(v / ulp) * ulp, hi = lo + ulp;
    double d_lo = v - lo, d_hi = hi - v;
    double r = d_lo < d_hi ? lo : d_hi < d_lo ? hi : (std::fmod(lo / ulp, 2.0) == 0 ? lo : hi);
    return (float)r;
}

TEST_CASE("bf16 add, mul and fma round once to nearest even") {
    // operands in [1/16, 16) with random signs: every exact result fits in a double
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> mag(-4.0f, 4.0f);
    std::uniform_int_distribution<int> sign(0, 1);
    int n = 4096;
    std::vector<__nv_bfloat16> a(n), b(n), c(n);
    auto draw = [&]() { return __float2bfloat16((sign(rng) ? -1.0f : 1.0f) * std::exp2(mag(rng))); };
    for (int i = 0; i < n; i++) a[i] = draw(), b[i] = draw(), c[i] = draw();
    DeviceBuffer<__nv_bfloat16> da(a), db(b), dc(c), out(3 * n);
    cuda_launch(bf16_arith, n / 128, 128, 0, 0, out.ptr, da.ptr, db.ptr, dc.ptr, n);
    cudaCheck(cudaGetLastError());
    auto got = out.download();
    for (int i = 0; i < n; i++) {
        double x = __bfloat162float(a[i]), y = __bfloat162float(b[i]), z = __bfloat162float(c[i]);
        INFO("a " << x << " b " << y << " c " << z);
        CHECK(__bfloat162float(got[3 * i + 0]) == round_to_bf16_ref(x + y));
        CHECK(__bfloat162float(got[3 * i + 1]) == round_to_bf16_ref(x * y));
        CHECK(__bfloat162float(got[3 * i + 2]) == round_to_bf16_ref(x * y + z));
    }
}

TEST_CASE("pack_bf16x2 / unpack_bf16x2") {
    uint32_t v = pack_bf16x2(1.5f, -2.0f);
    CHECK((v & 0xffff) == bf16_bits(__float2bfloat16(1.5f)));
    CHECK((v >> 16) == bf16_bits(__float2bfloat16(-2.0f)));
    CHECK(unpack_bf16x2_lo(v) == 1.5f);
    CHECK(unpack_bf16x2_hi(v) == -2.0f);
    float2 f = unpack_bf16x2(pack_bf16x2(3.0f, 1.0f / 3.0f));
    CHECK(f.x == 3.0f);
    CHECK(f.y == bf16_bits_to_float(bf16_bits(__float2bfloat16(1.0f / 3.0f))));
}

// ----------------------------------------------------------------------------
// ldmatrix: every lane's registers against the PTX ISA layout

// mats: 4 matrices of 8x8 bf16, stored row r of matrix i at row (i*8 + r) of a
// [32][24] bf16 smem tile (row stride 48 bytes keeps 16-byte alignment).
// out[lane*4 + i] = register i of lane after ldmatrix of form `form`.
__global__ void ldmatrix_forms(uint32_t* out, const uint16_t* mats, int form) {
    SHARED_ARRAY(__nv_bfloat16, tile, 32 * 24);
    int lane = threadIdx.x;
    for (int i = lane; i < 32 * 8; i += 32) {
        int row = i / 8, col = i % 8;
        tile[row * 24 + col] = __ushort_as_bfloat16(mats[i]);
    }
    __syncwarp();
    sptr<const __nv_bfloat16> row_addr = tile + lane * 24;  // lane 8*i + r -> row r of matrix i
    uint32_t r[4] = {0, 0, 0, 0};
    switch (form) {
        case 0: { uint32_t x[1]; ldmatrix_x1(x, row_addr); r[0] = x[0]; } break;
        case 1: { uint32_t x[2]; ldmatrix_x2(x, row_addr); r[0] = x[0], r[1] = x[1]; } break;
        case 2: ldmatrix_x4(r, row_addr); break;
        case 3: { uint32_t x[1]; ldmatrix_x1_trans(x, row_addr); r[0] = x[0]; } break;
        case 4: { uint32_t x[2]; ldmatrix_x2_trans(x, row_addr); r[0] = x[0], r[1] = x[1]; } break;
        case 5: ldmatrix_x4_trans(r, row_addr); break;
    }
    for (int i = 0; i < 4; i++) out[lane * 4 + i] = r[i];
}

TEST_CASE("ldmatrix x1/x2/x4 with and without .trans: PTX fragment layout") {
    std::mt19937 rng(7);
    auto mats = random_bf16(32 * 8, rng);  // mats[(i*8 + row)*8 + col]
    DeviceBuffer<uint16_t> d_mats(mats);
    DeviceBuffer<uint32_t> out(32 * 4);
    for (int form = 0; form < 6; form++) {
        int count = form % 3 == 0 ? 1 : form % 3 == 1 ? 2 : 4;
        bool trans = form >= 3;
        cuda_launch(ldmatrix_forms, 1, 32, 0, 0, out.ptr, d_mats.ptr, form);
        cudaCheck(cudaGetLastError());
        auto got = out.download();
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < count; i++) {
                // PTX ISA, ldmatrix: thread l holds row l/4, elements 2*(l%4) and +1 of each
                // 8x8 matrix; .trans holds the same positions of the transposed matrix
                int g = lane / 4, q = lane % 4;
                auto m = [&](int row, int col) { return mats[(i * 8 + row) * 8 + col]; };
                uint32_t want = trans ? pack_bits(m(2 * q, g), m(2 * q + 1, g)) : pack_bits(m(g, 2 * q), m(g, 2 * q + 1));
                INFO("form " << form << " lane " << lane << " reg " << i);
                CHECK(got[lane * 4 + i] == want);
            }
    }
}

// ----------------------------------------------------------------------------
// mma: fragments built on the host from the PTX ISA layout

// PTX ISA "Matrix Fragments for mma.m16n8k16" (bf16): with g = lane/4, q = lane%4,
// element j (0..7) of A is A[g + 8*((j/2)%2)][2*q + (j%2) + 8*(j/4)] (a0..a7, two per register),
// element j (0..3) of B is B[2*q + (j%2) + 8*(j/2)][g] (b0..b3),
// element j (0..3) of C/D is C[g + 8*(j/2)][2*q + (j%2)] (c0..c3).
static void a_elem(int lane, int j, int* row, int* col) {
    *row = lane / 4 + 8 * ((j / 2) % 2);
    *col = 2 * (lane % 4) + (j % 2) + 8 * (j / 4);
}
static void b_elem(int lane, int j, int* k, int* n) {
    *k = 2 * (lane % 4) + (j % 2) + 8 * (j / 2);
    *n = lane / 4;
}
static void c_elem(int lane, int j, int* row, int* col) {
    *row = lane / 4 + 8 * (j / 2);
    *col = 2 * (lane % 4) + (j % 2);
}

// One mma problem per warp: frags[warp] holds, per lane, a[4], b[2], c[4] (c as float bits).
// d[warp][lane][4] = D fragment.
__global__ void mma_from_fragments(float* d, const uint32_t* frags) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    const uint32_t* f = frags + ((size_t)warp * 32 + lane) * 10;
    uint32_t a[4] = {f[0], f[1], f[2], f[3]};
    uint32_t b[2] = {f[4], f[5]};
    float c[4] = {__uint_as_float(f[6]), __uint_as_float(f[7]), __uint_as_float(f[8]), __uint_as_float(f[9])};
    float out[4];
    mma_m16n8k16_bf16(out, a, b, c);
    for (int i = 0; i < 4; i++) d[((size_t)warp * 32 + lane) * 4 + i] = out[i];
}

struct MmaProblem {
    uint16_t A[16][16], B[16][8];  // bf16 bits
    float C[16][8];
};

static void pack_fragments(const MmaProblem& p, uint32_t* f /* [32][10] */) {
    for (int lane = 0; lane < 32; lane++) {
        uint32_t* fl = f + lane * 10;
        for (int r = 0; r < 4; r++) {
            int row0, col0, row1, col1;
            a_elem(lane, 2 * r, &row0, &col0);
            a_elem(lane, 2 * r + 1, &row1, &col1);
            fl[r] = pack_bits(p.A[row0][col0], p.A[row1][col1]);
        }
        for (int r = 0; r < 2; r++) {
            int k0, n0, k1, n1;
            b_elem(lane, 2 * r, &k0, &n0);
            b_elem(lane, 2 * r + 1, &k1, &n1);
            fl[4 + r] = pack_bits(p.B[k0][n0], p.B[k1][n1]);
        }
        for (int j = 0; j < 4; j++) {
            int row, col;
            c_elem(lane, j, &row, &col);
            fl[6 + j] = float_to_bits(p.C[row][col]);
        }
    }
}

// D fragments of `problems` through the device
static std::vector<float> run_mma(const std::vector<MmaProblem>& problems) {
    size_t warps = problems.size();
    std::vector<uint32_t> frags(warps * 32 * 10);
    for (size_t w = 0; w < warps; w++) pack_fragments(problems[w], &frags[w * 320]);
    DeviceBuffer<uint32_t> d_frags(frags);
    DeviceBuffer<float> d(warps * 32 * 4);
    int warps_per_block = 4;
    cuda_launch(mma_from_fragments, (int)(warps / warps_per_block), 32 * warps_per_block, 0, 0, d.ptr, d_frags.ptr);
    cudaCheck(cudaGetLastError());
    return d.download();
}

TEST_CASE("mma m16n8k16 bf16 on random tiles equals a plain matrix multiply") {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    std::vector<MmaProblem> problems(8);
    for (auto& p : problems) {
        auto a = random_bf16(256, rng), b = random_bf16(128, rng);
        memcpy(p.A, a.data(), sizeof p.A);
        memcpy(p.B, b.data(), sizeof p.B);
        for (auto& row : p.C)
            for (float& x : row) x = u(rng);
    }
    auto d = run_mma(problems);
    for (size_t w = 0; w < problems.size(); w++) {
        const MmaProblem& p = problems[w];
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 4; j++) {
                int row, col;
                c_elem(lane, j, &row, &col);
                double ref = p.C[row][col], mag = std::fabs(ref);
                for (int k = 0; k < 16; k++) {
                    double t = (double)bf16_bits_to_float(p.A[row][k]) * bf16_bits_to_float(p.B[k][col]);
                    ref += t;
                    mag += std::fabs(t);
                }
                // products are exact; each of the 16 fp32 additions loses at most 1 ulp of the
                // running magnitude (2^-23 relative: tensor cores may truncate rather than
                // round), so |error| <= 17 * 2^-23 * sum|terms| (< 2.1e-6 * mag)
                INFO("warp " << w << " lane " << lane << " c" << j);
                CHECK(std::fabs(d[(w * 32 + lane) * 4 + j] - ref) <= 2.1e-6 * mag);
            }
    }
}

TEST_CASE("mma fragments: PTX lane->element mapping of A (a0..a7), B (b0..b3), C (c0..c3)") {
    // One-hot problems: a single 1 in A (with B[k][n] = 1 + k + 16n, exact in bf16) puts row
    // k of B into row m of D; a single 1 in B (with A[m][k] = 1 + m + 16k) puts column k
    // of A into column n of D; a single value in C comes out at the same place of D.
    // All values are small integers, so D is exact.
    std::vector<MmaProblem> problems;
    std::vector<int> kind, pos;
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 16; k++) {
            MmaProblem p{};
            p.A[m][k] = bf16_bits(__float2bfloat16(1.0f));
            for (int kk = 0; kk < 16; kk++)
                for (int n = 0; n < 8; n++) p.B[kk][n] = bf16_bits(__float2bfloat16((float)(1 + kk + 16 * n)));
            problems.push_back(p), kind.push_back(0), pos.push_back(m * 16 + k);
        }
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) {
            MmaProblem p{};
            p.B[k][n] = bf16_bits(__float2bfloat16(1.0f));
            for (int m = 0; m < 16; m++)
                for (int kk = 0; kk < 16; kk++) p.A[m][kk] = bf16_bits(__float2bfloat16((float)(1 + m + 16 * kk)));
            problems.push_back(p), kind.push_back(1), pos.push_back(k * 8 + n);
        }
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            MmaProblem p{};
            p.C[m][n] = 3.0f + m * 8 + n;
            problems.push_back(p), kind.push_back(2), pos.push_back(m * 8 + n);
        }
    while (problems.size() % 4) problems.push_back(MmaProblem{}), kind.push_back(3), pos.push_back(0);
    auto d = run_mma(problems);
    for (size_t w = 0; w < problems.size(); w++)
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 4; j++) {
                int row, col;
                c_elem(lane, j, &row, &col);
                float want = 0;
                if (kind[w] == 0 && row == pos[w] / 16) want = (float)(1 + pos[w] % 16 + 16 * col);
                if (kind[w] == 1 && col == pos[w] % 8) want = (float)(1 + row + 16 * (pos[w] / 8));
                if (kind[w] == 2 && row * 8 + col == pos[w]) want = 3.0f + pos[w];
                INFO("problem " << w << " kind " << kind[w] << " lane " << lane << " c" << j);
                CHECK(d[(w * 32 + lane) * 4 + j] == want);
            }
}

// ----------------------------------------------------------------------------
// ldmatrix + mma: D (16x16) = A (16x16) * B (16x16) from shared memory, with B loaded
// five ways: x4.trans from B (k-major), x2.trans per n-half, x2 from B^T, x1 per register
// from B^T, x1.trans per register from B

// A row-major [16][16]; B row-major [16][16] (k, n); Bt = B^T row-major (n, k).
// d row-major [16][16] fp32.
__global__ void tile_matmul(float* d, const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* Bt,
                            int b_form) {
    SHARED_ARRAY(__nv_bfloat16, sA, 16 * 24);  // padded rows: 48 bytes
    SHARED_ARRAY(__nv_bfloat16, sB, 16 * 24);
    SHARED_ARRAY(__nv_bfloat16, sBt, 16 * 24);
    int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) {
        int r = i / 16, c = i % 16;
        sA[r * 24 + c] = A[i];
        sB[r * 24 + c] = B[i];
        sBt[r * 24 + c] = Bt[i];
    }
    __syncwarp();
    uint32_t a[4];
    ldmatrix_x4(a, sA + (lane % 16) * 24 + (lane / 16) * 8);
    uint32_t b[2][2];  // [n-half][register]
    if (b_form == 0) {
        // matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
        uint32_t r[4];
        ldmatrix_x4_trans(r, sB + (lane % 16) * 24 + (lane / 16) * 8);
        b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
    } else if (b_form == 1) {
        for (int h = 0; h < 2; h++) {
            uint32_t r[2];
            ldmatrix_x2_trans(r, sB + (lane % 16) * 24 + h * 8);
            b[h][0] = r[0], b[h][1] = r[1];
        }
    } else if (b_form == 2) {
        for (int h = 0; h < 2; h++) {  // B^T rows n = 8h..8h+7, k halves as two matrices
            uint32_t r[2];
            ldmatrix_x2(r, sBt + (h * 8 + lane % 8) * 24 + ((lane / 8) % 2) * 8);
            b[h][0] = r[0], b[h][1] = r[1];
        }
    } else if (b_form == 3) {
        for (int h = 0; h < 2; h++)
            for (int kh = 0; kh < 2; kh++) {
                uint32_t r[1];
                ldmatrix_x1(r, sBt + (h * 8 + lane % 8) * 24 + kh * 8);
                b[h][kh] = r[0];
            }
    } else {
        for (int h = 0; h < 2; h++)
            for (int kh = 0; kh < 2; kh++) {  // the 8x8 block (k 8kh.., n 8h..) of B, transposed
                uint32_t r[1];
                ldmatrix_x1_trans(r, sB + (kh * 8 + lane % 8) * 24 + h * 8);
                b[h][kh] = r[0];
            }
    }
    for (int h = 0; h < 2; h++) {
        float c[4] = {0, 0, 0, 0}, out[4];
        mma_m16n8k16_bf16(out, a, b[h], c);
        int g = lane / 4, q = lane % 4;
        d[g * 16 + h * 8 + 2 * q] = out[0];
        d[g * 16 + h * 8 + 2 * q + 1] = out[1];
        d[(g + 8) * 16 + h * 8 + 2 * q] = out[2];
        d[(g + 8) * 16 + h * 8 + 2 * q + 1] = out[3];
    }
}

// A through ldmatrix_x4_trans from A^T, and through two x2 loads
__global__ void tile_matmul_a_forms(float* d, const __nv_bfloat16* At, const __nv_bfloat16* A,
                                    const __nv_bfloat16* Bt, int a_form) {
    SHARED_ARRAY(__nv_bfloat16, sAt, 16 * 24);
    SHARED_ARRAY(__nv_bfloat16, sA, 16 * 24);
    SHARED_ARRAY(__nv_bfloat16, sBt, 8 * 24);
    int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) {
        sAt[(i / 16) * 24 + i % 16] = At[i];
        sA[(i / 16) * 24 + i % 16] = A[i];
    }
    for (int i = lane; i < 128; i += 32) sBt[(i / 16) * 24 + i % 16] = Bt[i];
    __syncwarp();
    uint32_t a[4];
    if (a_form == 0) {
        // A^T row-major (k, m): the transposed 8x8 blocks (k 0-7, m 0-7) -> a0a1, (k 0-7, m 8-15) -> a2a3,
        // (k 8-15, m 0-7) -> a4a5, (k 8-15, m 8-15) -> a6a7
        int mat = lane / 8, r = lane % 8;
        int k0 = (mat / 2) * 8, m0 = (mat % 2) * 8;
        ldmatrix_x4_trans(a, sAt + (k0 + r) * 24 + m0);
    } else {
        uint32_t lo[2], hi[2];
        ldmatrix_x2(lo, sA + (lane % 16) * 24);      // k 0-7: rows 0-7 then 8-15
        ldmatrix_x2(hi, sA + (lane % 16) * 24 + 8);  // k 8-15
        a[0] = lo[0], a[1] = lo[1], a[2] = hi[0], a[3] = hi[1];
    }
    uint32_t b[2];
    ldmatrix_x2(b, sBt + (lane % 8) * 24 + ((lane / 8) % 2) * 8);
    float c[4] = {0, 0, 0, 0}, out[4];
    mma_m16n8k16_bf16(out, a, b, c);
    int g = lane / 4, q = lane % 4;
    d[g * 8 + 2 * q] = out[0];
    d[g * 8 + 2 * q + 1] = out[1];
    d[(g + 8) * 8 + 2 * q] = out[2];
    d[(g + 8) * 8 + 2 * q + 1] = out[3];
}

TEST_CASE("ldmatrix + mma: tile products for every ldmatrix form") {
    std::mt19937 rng(99);
    auto a_bits = random_bf16(256, rng), b_bits = random_bf16(256, rng);
    std::vector<__nv_bfloat16> A(256), B(256), Bt(256), At(256);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            A[r * 16 + c] = __ushort_as_bfloat16(a_bits[r * 16 + c]);
            B[r * 16 + c] = __ushort_as_bfloat16(b_bits[r * 16 + c]);
            At[c * 16 + r] = A[r * 16 + c];
            Bt[c * 16 + r] = B[r * 16 + c];
        }
    // reference D = A * B in double; same tolerance argument as the random mma test
    auto check_product = [&](const std::vector<float>& d, int ncols) {
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < ncols; n++) {
                double ref = 0, mag = 0;
                for (int k = 0; k < 16; k++) {
                    double t = (double)__bfloat162float(A[m * 16 + k]) * __bfloat162float(B[k * 16 + n]);
                    ref += t;
                    mag += std::fabs(t);
                }
                INFO("m " << m << " n " << n);
                CHECK(std::fabs(d[m * ncols + n] - ref) <= 2.1e-6 * mag);
            }
    };
    DeviceBuffer<__nv_bfloat16> dA(A), dB(B), dBt(Bt), dAt(At);
    DeviceBuffer<float> d(256);
    for (int b_form = 0; b_form < 5; b_form++) {
        INFO("b_form " << b_form);
        cuda_launch(tile_matmul, 1, 32, 0, 0, d.ptr, dA.ptr, dB.ptr, dBt.ptr, b_form);
        cudaCheck(cudaGetLastError());
        check_product(d.download(), 16);
    }
    // B^T rows 0-7 only (n 0..7) for the A forms
    DeviceBuffer<float> d8(128);
    for (int a_form = 0; a_form < 2; a_form++) {
        INFO("a_form " << a_form);
        cuda_launch(tile_matmul_a_forms, 1, 32, 0, 0, d8.ptr, dAt.ptr, dA.ptr, dBt.ptr, a_form);
        cudaCheck(cudaGetLastError());
        check_product(d8.download(), 8);
    }
}

#if EMULATED
// ldmatrix reads shared memory: rows stored by other lanes need a __syncwarp first
__global__ void ldmatrix_race(uint32_t* out, int sync) {
    SHARED_ARRAY(__nv_bfloat16, tile, 8 * 8);
    int lane = threadIdx.x;
    if (lane < 8)  // lane r stores row (r + 1) % 8
        for (int c = 0; c < 8; c++) tile[((lane + 1) % 8) * 8 + c] = __float2bfloat16((float)c);
    if (sync) __syncwarp();
    uint32_t r[1];
    ldmatrix_x1(r, tile + (lane % 8) * 8);  // lane r gives the address of row r
    out[lane] = r[0];
}

TEST_CASE("ldmatrix takes part in race detection") {
    QuietReports quiet;
    DeviceBuffer<uint32_t> out(32);
    cuda_launch(ldmatrix_race, 1, 32, 0, 0, out.ptr, 1);
    CHECK(cudaGetLastError() == cudaSuccess);
    cuda_launch(ldmatrix_race, 1, 32, 0, 0, out.ptr, 0);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    // row 0 (bytes 0..15) written by lane 7, read through the address of lane 0
    CHECK(r.find("byte offset 0 ") != std::string::npos);
    CHECK(r.find("written by thread (7,0,0) and then read by thread (0,0,0)") != std::string::npos);
}
#endif

// ----------------------------------------------------------------------------
// cp.async: per-thread groups, completed by cp.async.wait_group

// One warp; lane l copies 16 bytes (in[4l..4l+3]) per group into its slot of a shared buffer and
// records, as bit patterns, what its slots hold at each point (out: 6 snapshots of 4 words):
//   0: A, B issued and committed, no wait     1: A after wait_group 1 (B the newest, pending)
//   2: B after wait_group 1                   3: B after wait_group 0, 4: C (zero-filled) then
//   5: D issued but not committed, after wait_group 0 and a __syncthreads, 6: D after commit + wait
__global__ void cp_async_groups(uint32_t* out, const uint32_t* in) {
    SHARED_ARRAY(uint4, buf, 4 * 32);  // slots A, B, C, D of the 32 lanes
    int lane = threadIdx.x;
    auto slot = [&](int g) { return buf + g * 32 + lane; };
    auto snap = [&](int k, int g) {
        uint4 v = slot(g)[0];
        uint32_t* o = out + (k * 32 + lane) * 4;
        o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
    };
    const uint4* src = reinterpret_cast<const uint4*>(in);
    cp_async_16(slot(0), src + lane, true);
    cp_async_commit();
    cp_async_16(slot(1), src + 32 + lane, true);
    cp_async_commit();
    snap(0, 0);
    cp_async_wait<1>();
    snap(1, 0);
    snap(2, 1);
    cp_async_wait<0>();
    snap(3, 1);
    cp_async_16(slot(2), src + 64 + lane, false);  // zero-fill: nothing read
    cp_async_commit();
    cp_async_wait<0>();
    snap(4, 2);
    cp_async_16(slot(3), src + 96 + lane, true);
    cp_async_wait<0>();  // D is in no group yet
    __syncthreads();     // nor does a barrier complete it
    snap(5, 3);
    cp_async_commit();
    cp_async_wait<0>();
    snap(6, 3);
}

TEST_CASE("cp.async: copies land at the wait_group that completes their group; zero-fill") {
    std::vector<uint32_t> h(4 * 32 * 4);
    for (size_t i = 0; i < h.size(); i++) h[i] = 0x01000000u * (uint32_t)(i / 128 + 1) + (uint32_t)i;
    DeviceBuffer<uint32_t> in(h), out(7 * 32 * 4);
    cuda_launch(cp_async_groups, 1, 32, 0, 0, out.ptr, in.ptr);
    cudaCheck(cudaGetLastError());
    std::vector<uint32_t> got = out.download();
    auto word = [&](int k, int lane, int e) { return got[(k * 32 + lane) * 4 + e]; };
    auto want = [&](int g, int lane, int e) { return h[g * 128 + lane * 4 + e]; };
    for (int lane = 0; lane < 32; lane++) {
        for (int e = 0; e < 4; e++) {
            CHECK(word(1, lane, e) == want(0, lane, e));  // A complete after wait_group 1
            CHECK(word(3, lane, e) == want(1, lane, e));  // B after wait_group 0
            CHECK(word(4, lane, e) == 0u);                // zero-filled
            CHECK(word(6, lane, e) == want(3, lane, e));  // D once committed and waited for
#if EMULATED
            // the model performs a copy only at the wait that completes its group (a GPU may
            // land it any time before): before it, the slot holds fresh shared memory's 0xff bytes
            CHECK(word(0, lane, e) == 0xffffffffu);  // no wait yet
            CHECK(word(2, lane, e) == 0xffffffffu);  // B, the newest group, left pending by wait_group 1
            CHECK(word(5, lane, e) == 0xffffffffu);  // uncommitted: neither wait_group 0 nor __syncthreads
#endif
        }
    }
}

#if EMULATED
// Lane l reads lane (l+1)'s slot after its own wait: without a __syncthreads the copy of the
// other lane is not ordered before the read (a race); with one (sync = 1) it is.
__global__ void cp_async_neighbour(uint32_t* out, const uint32_t* in, int sync) {
    SHARED_ARRAY(uint32_t, buf, 32);
    int lane = threadIdx.x;
    cp_async_4(buf + lane, in + lane, true);
    cp_async_commit();
    cp_async_wait<0>();
    if (sync) __syncthreads();
    out[lane] = buf[(lane + 1) % 32];
}

// a copy whose destination another thread may still be reading: lane 0 reads buf[1], lane 1 issues
// its copy into buf[1] with no barrier between, and waits for it only after one. The copy may land
// any time after its issue, so the race is with the issue, not the wait.
__global__ void cp_async_overwrite(uint32_t* out, const uint32_t* in) {
    SHARED_ARRAY(uint32_t, buf, 32);
    int lane = threadIdx.x;
    buf[lane] = 7u;
    __syncthreads();
    if (lane == 0) out[0] = buf[1];
    cp_async_4(buf + lane, in + lane, true);  // no barrier between lane 0's read and lane 1's copy
    cp_async_commit();
    __syncthreads();
    cp_async_wait<0>();
}

__global__ void cp_async_misaligned(uint32_t* out, const uint32_t* in) {
    SHARED_ARRAY(uint4, buf, 1);
    cp_async_16(buf + 0, reinterpret_cast<const uint4*>(in + 1), true);  // 4-byte aligned source
    cp_async_commit();
    cp_async_wait<0>();
    out[0] = 0;
}

TEST_CASE("cp.async takes part in race detection and checks alignment") {
    QuietReports quiet;
    std::vector<uint32_t> h(32);
    for (int i = 0; i < 32; i++) h[i] = 100u + i;
    DeviceBuffer<uint32_t> in(h), out(32);
    cuda_launch(cp_async_neighbour, 1, 32, 0, 0, out.ptr, in.ptr, 1);
    CHECK(cudaGetLastError() == cudaSuccess);
    std::vector<uint32_t> got = out.download();
    for (int i = 0; i < 32; i++) CHECK(got[i] == h[(i + 1) % 32]);

    cuda_launch(cp_async_neighbour, 1, 32, 0, 0, out.ptr, in.ptr, 0);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    std::string r = simt::last_race_report();
    INFO(r);
    // lane 0 reads buf[1] (byte 4), which lane 1's copy writes (threads run in order here: lane 0
    // reads before lane 1 issues)
    CHECK(r.find("byte offset 4 ") != std::string::npos);
    CHECK(r.find("read by thread (0,0,0) and then written by thread (1,0,0)") != std::string::npos);

    cuda_launch(cp_async_overwrite, 1, 32, 0, 0, out.ptr, in.ptr);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    r = simt::last_race_report();
    INFO(r);
    CHECK(r.find("read by thread (0,0,0) and then written by thread (1,0,0)") != std::string::npos);

    cuda_launch(cp_async_misaligned, 1, 1, 0, 0, out.ptr, in.ptr);
    CHECK(cudaGetLastError() == cudaErrorMisalignedAddress);
    CHECK(simt::last_error_report().find("misaligned 16-byte cp.async source") != std::string::npos);
}
#endif

// ----------------------------------------------------------------------------
// fast math: nvcc --use_fast_math makes expf, logf, exp2f, log2f, powf the intrinsics __expf, ...,
// which are not correctly rounded; the emulator models them (simt/simt_fastmath.h). On a GPU
// this checks the hardware against the same documented bounds (CUDA C++ Programming Guide,
// intrinsic functions), under the emulator it checks the model, and that the model is on.

__global__ void fast_math_kernel(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    out[6 * i + 0] = expf(v);
    out[6 * i + 1] = exp2f(v);
    out[6 * i + 2] = logf(fabsf(v) + 0.25f);
    out[6 * i + 3] = log2f(fabsf(v) + 0.25f);
    out[6 * i + 4] = __fdividef(v, 1.75f);
    out[6 * i + 5] = rsqrtf(fabsf(v) + 0.25f);
}

// floats between got and the correctly rounded want (the guide's ulp error)
static double ulps_off(float got, double want) {
    float w = (float)want;
    int steps = 0;
    while (got != w && steps < 1000) { w = nextafterf(w, got); steps++; }
    return steps;
}

TEST_CASE("fast-math expf, exp2f, logf, log2f, __fdividef, rsqrtf within their documented error") {
    const int n = 4096;
    std::vector<float> x(n);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-20.0f, 20.0f);
    for (float& v : x) v = u(rng);
    DeviceBuffer<float> in(x), out(6 * (size_t)n);
    cuda_launch(fast_math_kernel, ceil_div(n, 256), 256, 0, 0, out.ptr, in.ptr, n);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> r = out.download();
    int inexact = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        double v = x[i], a = std::fabs(x[i]) + 0.25f;  // a: the same fp32 sum as the kernel's
        double want[6] = {std::exp(v), std::exp2(v), std::log(a), std::log2(a), v / 1.75, 1.0 / std::sqrt(a)};
        // ulp bounds: __expf 2 + floor(1.173 |x|) (documented 2 + floor(|1.16 x|) in older guides),
        // exp2f 2, __fdividef 2, rsqrtf 2; __logf and __log2f: absolute 2^-21.41 and 2^-22 on
        // [0.5, 2], else 3 and 2 ulp
        double ulp_bound[6] = {2 + std::floor(1.173 * std::fabs(v)), 2, 3, 2, 2, 2};
        double abs_bound[6] = {0, 0, std::ldexp(1.0, -21) * 0.75, std::ldexp(1.0, -22), 0, 0};
        for (int f = 0; f < 6; f++) {
            float got = r[6 * i + f];
            bool near_one = (f == 2 || f == 3) && a >= 0.5 && a <= 2.0;
            bool ok = near_one ? std::fabs(got - want[f]) <= abs_bound[f] : ulps_off(got, want[f]) <= ulp_bound[f];
            if (!ok && bad++ < 5) MESSAGE("function " << f << " x " << v << " got " << got << " want " << want[f]);
            inexact += got != (float)want[f];
        }
    }
    CHECK(bad == 0);
    MESSAGE("fast-math results not correctly rounded: " << inexact << " of " << 6 * n);
    CHECK(inexact > n);  // the intrinsics (and their model) are not correctly rounded
}
