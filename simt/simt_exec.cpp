// SIMT emulator: block execution with fibers, barriers, warp collectives, shared
// memory with race detection, tensor-core fragments. See simt/README.md.
//
// Each host thread that runs blocks owns an Executor: a pool of fibers (one per
// thread of the block, reused across blocks), the block's shared memory and its
// shadow. A fiber runs until it reaches a barrier or warp collective that is not
// complete yet; the last thread to arrive completes it and carries on. Shadow
// entries carry the barrier epoch at which they were made, so nothing is cleared
// between barriers or blocks: an entry from an older epoch is simply stale.
#include "simt.h"
#include "simt_internal.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <omp.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace simt { namespace detail {
namespace ctx = boost::context;

__thread ThreadView* t_thread = nullptr;
__thread BlockView* t_block = nullptr;

static constexpr size_t kStaticLimit = 48 * 1024;     // static shared per kernel (nvcc refuses more)
static constexpr size_t kDefaultLimit = 48 * 1024;    // static + dynamic without the opt-in attribute
static constexpr size_t kOptinLimit = 227 * 1024;     // static + dynamic with it (sm_90)
std::atomic<uint64_t> g_spin_limit{1ull << 30};  // shared accesses in one fiber slice
static constexpr size_t kSmemBuffer = kOptinLimit + 4096;  // + alignment padding

struct KernelAbort {};  // unwinds a fiber whose launch failed

// What the shadow knows of one byte of shared memory in the current barrier epoch:
// its last writer and three of its readers, each with the collective count of that
// thread's warp at the time (for __syncwarp ordering):
//   r1  the most recent reader
//   r2  the most recent reader that is not r1's thread
//   r3  the most recent reader outside r1's warp
// A writer conflicts with an unordered reader if one exists: readers of another warp
// are never ordered (r1 or r3 is one), and of same-warp readers the most recent one of
// another thread (r1 or r2) is the least ordered after a full-warp collective.
struct Access {
    uint32_t epoch, seq;
};
struct Shadow {
    Access w, r1, r2, r3;
    uint16_t w_tid, r1_tid, r2_tid, r3_tid;
    uint8_t w_atomic;
};

enum State : int { kIdle, kRunnable, kWaitBar, kWaitWarp, kDone };

struct AsyncCopy {  // one cp.async not yet performed
    unsigned char* dst;
    const unsigned char* src;
    int bytes, src_bytes;  // bytes past src_bytes are zero-filled
};

struct Slot {
    ThreadView view;
    ctx::fiber fib;    // the suspended fiber (held by the scheduler)
    ctx::fiber sched;  // the scheduler (held by the running fiber)
    int state = kIdle;
    // the thread's cp.async copies in issue order; group_end[g] = copies in groups 0..g (committed)
    std::vector<AsyncCopy> copies;
    std::vector<size_t> group_end;
};

enum CollKind { kSync, kShfl, kVote, kMma, kLdmatrix, kReduce };
static const char* coll_name(int kind) {
    switch (kind) {
        case kSync: return "__syncwarp";
        case kShfl: return "__shfl_*_sync";
        case kVote: return "__ballot/__any/__all_sync";
        case kMma: return "mma_m16n8k16_bf16";
        case kLdmatrix: return "ldmatrix";
        case kReduce: return "__reduce_*_sync";
    }
    return "?";
}

struct LaneIO {  // one lane's part of a warp collective
    uint32_t in[10];
    uint64_t value;
    const unsigned char* addr;
    int mode, arg, width, count;
    bool trans;
    uint32_t out[4];
    uint64_t out_value;
};

struct Group {  // a warp collective waiting for its lanes
    uint32_t mask, arrived;
    int kind;
};

struct Warp {
    uint32_t exist_mask, exited_mask;
    uint32_t seq, last_full_seq;
    bool pair_dirty;
    uint32_t pair[32][32];  // collective count at the last collective that held both lanes
    std::vector<Group> groups;
    LaneIO io[32];
};

struct SharedAlloc {
    const void* site;
    size_t offset, bytes;
    const char* name;
};

struct Executor;
static thread_local Executor* t_exec = nullptr;

struct Executor {
    std::vector<std::unique_ptr<Slot>> slots;
    unsigned char* smem = nullptr;
    Shadow* shadow = nullptr;
    uint32_t epoch_counter = 0;
    size_t stack_bytes;

    // the block being run
    LaunchState* L = nullptr;
    BlockView bv;
    int n = 0, cur = -1, done = 0, bar_arrived = 0, bar_sum = 0, bar_result = 0;
    uint32_t epoch = 0;
    bool aborted = false;
    Warp warps[32];
    std::vector<SharedAlloc> allocs;
    size_t dyn_bytes = 0, static_top = 0, static_used = 0;
    const char* dyn_name = nullptr;
    uint64_t switches = 0;
    uint64_t slice_accesses = 0;  // shared accesses since the running fiber was resumed

    Executor() {
        void* m = nullptr;
        if (posix_memalign(&m, 256, kSmemBuffer) != 0) abort();
        smem = (unsigned char*)m;
        shadow = (Shadow*)calloc(kSmemBuffer, sizeof(Shadow));
        if (!shadow) abort();
        stack_bytes = stack_kib() * 1024;
        for (Warp& w : warps) w.pair_dirty = true;
    }

    // A fresh barrier epoch. When the counter would wrap, the shadow is cleared so that
    // no entry from long ago can pass for a current one.
    uint32_t next_epoch() {
        if (epoch_counter == UINT32_MAX) {
            memset((void*)shadow, 0, kSmemBuffer * sizeof(Shadow));
            epoch_counter = 0;
        }
        return ++epoch_counter;
    }

    Slot& slot(int i) {
        while ((int)slots.size() <= i) slots.emplace_back(new Slot());
        Slot& s = *slots[i];
        if (!s.fib) {
            s.fib = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(stack_bytes),
                               [this, i](ctx::fiber&& sched) -> ctx::fiber { return fiber_main(i, std::move(sched)); });
        }
        return s;
    }

    ctx::fiber fiber_main(int i, ctx::fiber&& sched) {
        Slot* s = slots[i].get();
        s->sched = std::move(sched);
        for (;;) {
            enter_device_float_mode();  // fast math's flush-to-zero (simt_ftz.h); the scheduler keeps its mode
            try {
                L->body.call(L->body.obj);
            } catch (KernelAbort&) {
            }
            s->state = kDone;
            s->sched = std::move(s->sched).resume();
        }
    }

    void yield() {
        Slot& s = *slots[cur];
        s.sched = std::move(s.sched).resume();
    }

    uint3 tid3(int linear) const {
        unsigned bx = bv.block_dim.x, by = bv.block_dim.y;
        return uint3{linear % bx, (linear / bx) % by, linear / (bx * by)};
    }
    std::string thread_str(int linear) const {
        uint3 t = tid3(linear);
        char buf[96];
        snprintf(buf, sizeof buf, "(%u,%u,%u)", t.x, t.y, t.z);
        return buf;
    }
    std::string where() const {
        char buf[128];
        snprintf(buf, sizeof buf, " in kernel '%s', block (%u,%u,%u)", L->name, bv.block_idx.x, bv.block_idx.y,
                 bv.block_idx.z);
        return buf;
    }

    // Records the failure and stops the block; inside a fiber, the caller then throws KernelAbort.
    void fail(cudaError_t code, const std::string& msg, bool race = false) {
        L->record(code, msg, race);
        if (!race) aborted = true;
    }

    void run_block(LaunchState& launch, uint64_t b) {
        L = &launch;
        unsigned gx = L->grid.x, gy = L->grid.y;
        bv.block_idx = uint3{(unsigned)(b % gx), (unsigned)((b / gx) % gy), (unsigned)(b / ((uint64_t)gx * gy))};
        bv.block_dim = L->block;
        bv.grid_dim = L->grid;
        n = (int)(L->block.x * L->block.y * L->block.z);
        done = bar_arrived = bar_sum = 0;
        aborted = false;
        epoch = next_epoch();
        allocs.clear();
        dyn_bytes = L->dyn_smem;
        dyn_name = nullptr;
        static_top = (dyn_bytes + 15) & ~(size_t)15;
        static_used = 0;
        memset(smem, 0xff, dyn_bytes);  // shared memory starts as garbage (NaN as float and bf16)
        int nwarps = (n + 31) / 32;
        for (int w = 0; w < nwarps; w++) {
            Warp& W = warps[w];
            int lanes = std::min(32, n - 32 * w);
            W.exist_mask = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
            W.exited_mask = 0;
            W.seq = W.last_full_seq = 0;
            if (W.pair_dirty) memset(W.pair, 0, sizeof W.pair), W.pair_dirty = false;
            W.groups.clear();
        }
        for (int i = 0; i < n; i++) {
            Slot& s = slot(i);
            s.copies.clear();  // copies a block left pending at its exit are never performed
            s.group_end.clear();
            s.state = kRunnable;
            s.view.linear = i;
            s.view.thread_idx = tid3(i);
        }

        ThreadView* saved_thread = t_thread;
        BlockView* saved_block = t_block;
        Executor* saved_exec = t_exec;
        t_exec = this;
        t_block = &bv;
        int remaining = n;
        while (remaining > 0 && !aborted) {
            bool progress = false;
            for (int i = 0; i < n && !aborted; i++) {
                Slot& s = *slots[i];
                if (s.state != kRunnable) continue;
                progress = true;
                cur = i;
                t_thread = &s.view;
                slice_accesses = 0;
                s.fib = std::move(s.fib).resume();
                switches++;
                t_thread = nullptr;
                if (s.state == kDone && !aborted) {
                    remaining--;
                    on_exit(i);
                }
            }
            if (!progress && !aborted) deadlock();
        }
        cur = -1;
        if (aborted) {
            // unwind the fibers stopped inside the kernel; they are made anew on next use
            for (int i = 0; i < n; i++) {
                Slot& s = *slots[i];
                if (s.state == kWaitBar || s.state == kWaitWarp || s.state == kRunnable) s.fib = ctx::fiber();
            }
        }
        for (int i = 0; i < n; i++) slots[i]->state = kIdle;
        t_thread = saved_thread;
        t_block = saved_block;
        t_exec = saved_exec;
        L = nullptr;
    }

    void on_exit(int i) {
        done++;
        Warp& W = warps[i >> 5];
        uint32_t bit = 1u << (i & 31);
        W.exited_mask |= bit;
        // a collective waits only for the non-exited lanes of its mask (PTX: "all non-exited
        // threads in membermask"): one waiting for this lane may be complete now
        for (size_t k = 0; k < W.groups.size() && !aborted; k++) {
            Group& g = W.groups[k];
            if (!(g.mask & bit)) continue;
            g.mask &= ~bit;
            if (g.arrived == g.mask) {
                Group done_group = g;
                W.groups.erase(W.groups.begin() + k);
                complete(W, i >> 5, done_group);
                k = (size_t)-1;  // the list changed: look again from the start
            }
        }
        if (!aborted && bar_arrived > 0 && bar_arrived + done == n) barrier_with_exited();
    }

    void barrier_with_exited() {
        int example_exited = -1, example_waiting = -1;
        for (int i = 0; i < n; i++) {
            int st = slots[i]->state;
            if (st == kDone && example_exited < 0) example_exited = i;
            if (st == kWaitBar && example_waiting < 0) example_waiting = i;
        }
        if (example_waiting < 0) example_waiting = cur;
        fail(cudaErrorLaunchFailure,
             "deadlock: " + std::to_string(bar_arrived) + " threads wait at __syncthreads (e.g. thread " +
                 thread_str(example_waiting) + ") but " + std::to_string(done) + " threads have exited (e.g. thread " +
                 thread_str(example_exited) + ")" + where());
    }

    void deadlock() {
        std::string msg = "deadlock: no thread can proceed" + where() + ":";
        int shown = 0;
        for (int i = 0; i < n && shown < 8; i++) {
            int st = slots[i]->state;
            if (st == kWaitBar) {
                msg += " thread " + thread_str(i) + " waits at __syncthreads;";
                shown++;
            } else if (st == kWaitWarp) {
                const Warp& W = warps[i >> 5];
                for (const Group& g : W.groups)
                    if (g.mask & (1u << (i & 31))) {
                        msg += " thread " + thread_str(i) + " waits in " + coll_name(g.kind) + " (mask " + hex(g.mask) +
                               ", lanes arrived " + hex(g.arrived) + ");";
                        break;
                    }
                shown++;
            }
        }
        fail(cudaErrorLaunchFailure, msg);
    }

    static std::string hex(uint32_t v) {
        char buf[16];
        snprintf(buf, sizeof buf, "0x%08x", v);
        return buf;
    }

    // ---- asynchronous copies (PTX cp.async): a copy is performed only when cp.async.wait_group
    // completes its group, so shared memory read before the wait holds what was there before
    // (0xff bytes in a fresh block). __syncthreads does not complete copies (nor does the hardware's
    // barrier wait for them), and copies still pending when the thread exits are dropped.

    void cp_async(void* dst, const void* src, int bytes, int src_bytes) {
        Slot& s = *slots[cur];
        if ((uintptr_t)src % bytes != 0) {
            char buf[96];
            snprintf(buf, sizeof buf, "misaligned %d-byte cp.async source %p", bytes, src);
            fail(cudaErrorMisalignedAddress, std::string(buf) + " by thread " + thread_str(cur) + where());
            throw KernelAbort{};
        }
        // the destination counts as written from the issue on: a reader that is not ordered
        // before the issue races with the copy, wherever it lands
        check_access(dst, bytes, bytes, kWrite, cur);
        if (aborted) throw KernelAbort{};
        s.copies.push_back(AsyncCopy{(unsigned char*)dst, (const unsigned char*)src, bytes, src_bytes});
    }

    void cp_async_commit() {  // closes a group, empty if no copy was issued since the last one
        Slot& s = *slots[cur];
        s.group_end.push_back(s.copies.size());
    }

    // completes every committed group but the newest `pending` ones (cp.async.wait_group N);
    // uncommitted copies stay queued
    void cp_async_wait(int pending) {
        Slot& s = *slots[cur];
        int groups = (int)s.group_end.size();
        if (groups <= pending) return;
        size_t upto = s.group_end[groups - pending - 1];
        for (size_t k = 0; k < upto; k++) {
            const AsyncCopy& c = s.copies[k];
            check_access(c.dst, c.bytes, c.bytes, kWrite, cur);  // the write lands now
            if (aborted) throw KernelAbort{};
            if (c.src_bytes > 0) memcpy(c.dst, c.src, c.src_bytes);
            memset(c.dst + c.src_bytes, 0, c.bytes - c.src_bytes);
        }
        s.copies.erase(s.copies.begin(), s.copies.begin() + upto);
        s.group_end.erase(s.group_end.begin(), s.group_end.begin() + (groups - pending));
        for (size_t& e : s.group_end) e -= upto;
    }

    // ---- barriers

    void syncthreads(int pred) {
        bar_arrived++;
        bar_sum += pred;
        if (bar_arrived + done == n) {
            if (done > 0) {
                barrier_with_exited();
                throw KernelAbort{};
            }
            epoch = next_epoch();
            slice_accesses = 0;
            bar_result = bar_sum;
            bar_arrived = bar_sum = 0;
            for (int i = 0; i < n; i++)
                if (slots[i]->state == kWaitBar) slots[i]->state = kRunnable;
            return;
        }
        slots[cur]->state = kWaitBar;
        yield();
        if (aborted) throw KernelAbort{};
    }

    // ---- warp collectives

    // Joins the collective `kind` over `mask` for the running lane, whose inputs are
    // already in warps[w].io[lane]; returns once every lane of the mask has joined.
    void warp_collective(int kind, uint32_t mask) {
        int tid = cur, lane = tid & 31;
        Warp& W = warps[tid >> 5];
        uint32_t bit = 1u << lane;
        if (!(mask & bit)) {
            fail(cudaErrorIllegalInstruction, std::string(coll_name(kind)) + " called by thread " + thread_str(tid) +
                                                  " with mask " + hex(mask) + " that does not name its own lane " +
                                                  std::to_string(lane) + where());
            throw KernelAbort{};
        }
        uint32_t m = mask & W.exist_mask & ~W.exited_mask;  // exited lanes are not waited for
        Group* g = nullptr;
        for (Group& x : W.groups)
            if (x.mask == m && !(x.arrived & bit)) {
                g = &x;
                break;
            }
        if (g && g->kind != kind) {
            fail(cudaErrorLaunchFailure, "lanes of one warp meet at different collectives: thread " + thread_str(tid) +
                                             " at " + coll_name(kind) + ", lanes " + hex(g->arrived) + " at " +
                                             coll_name(g->kind) + " (mask " + hex(m) + ")" + where());
            throw KernelAbort{};
        }
        if (!g) {
            W.groups.push_back(Group{m, 0, kind});
            g = &W.groups.back();
        }
        g->arrived |= bit;
        if (g->arrived == m) {
            Group done_group = *g;
            W.groups.erase(W.groups.begin() + (g - W.groups.data()));
            if (!complete(W, tid >> 5, done_group)) throw KernelAbort{};
            return;
        }
        slots[tid]->state = kWaitWarp;
        yield();
        if (aborted) throw KernelAbort{};
    }

    // Computes the results of a collective whose lanes have all arrived and wakes them;
    // false if it failed the launch.
    bool complete(Warp& W, int warp, const Group& g) {
        switch (g.kind) {
            case kShfl: complete_shfl(W, g.mask); break;
            case kVote: complete_vote(W, g.mask); break;
            case kMma: complete_mma(W, g.mask); break;
            case kLdmatrix: complete_ldmatrix(W, warp, g.mask); break;
            case kReduce: complete_reduce(W, g.mask); break;
            default: break;
        }
        if (aborted) return false;
        // the collective orders every access of its lanes before it against every one after it
        W.seq++;
        slice_accesses = 0;
        if (g.mask == W.exist_mask && W.exited_mask == 0) {
            W.last_full_seq = W.seq;
        } else {
            W.pair_dirty = true;
            for (uint32_t a = g.mask; a; a &= a - 1)
                for (uint32_t b = g.mask; b; b &= b - 1) W.pair[__builtin_ctz(a)][__builtin_ctz(b)] = W.seq;
        }
        for (uint32_t a = g.mask; a; a &= a - 1) {
            Slot& s = *slots[warp * 32 + __builtin_ctz(a)];
            if (s.state == kWaitWarp) s.state = kRunnable;
        }
        return true;
    }

    void complete_shfl(Warp& W, uint32_t m) {
        for (uint32_t a = m; a; a &= a - 1) {
            int lane = __builtin_ctz(a);
            LaneIO& io = W.io[lane];
            int width = io.width;
            if (width < 1 || width > 32 || (width & (width - 1))) {
                fail(cudaErrorIllegalInstruction, "__shfl_*_sync width " + std::to_string(width) +
                                                      " is not a power of two in [1, 32]" + where());
                return;
            }
            // PTX shfl.sync: segmask and clamp derived from width as CUDA's intrinsics do
            int segmask = 32 - width;
            int min_lane = lane & segmask;
            int max_lane = min_lane | (31 & ~segmask);
            int j = lane;
            bool ok;
            switch (io.mode) {
                case kShflUp: j = lane - io.arg; ok = j >= min_lane; break;
                case kShflDown: j = lane + io.arg; ok = j <= max_lane; break;
                case kShflXor: j = lane ^ (io.arg & 31); ok = j <= max_lane; break;
                default: j = min_lane | (io.arg & ~segmask & 31); ok = j <= max_lane; break;
            }
            if (!ok) j = lane;
            // a source lane outside the mask gives an undefined value: make it conspicuous
            uint64_t poison = io.count == 2 ? 0x7fbaull : 0x7fbadbad7fbadbadull;  // NaN as bf16 / float / double
            io.out_value = (m >> j & 1) ? W.io[j].value : poison;
        }
    }

    void complete_vote(Warp& W, uint32_t m) {
        uint32_t ballot = 0;
        for (uint32_t a = m; a; a &= a - 1)
            if (W.io[__builtin_ctz(a)].in[0]) ballot |= 1u << __builtin_ctz(a);
        for (uint32_t a = m; a; a &= a - 1) {
            LaneIO& io = W.io[__builtin_ctz(a)];
            io.out[0] = io.mode == 0 ? ballot : io.mode == 1 ? (ballot != 0) : (ballot == m);
        }
    }

    void complete_reduce(Warp& W, uint32_t m) {
        int op = W.io[__builtin_ctz(m)].mode;
        for (uint32_t a = m; a; a &= a - 1)
            if (W.io[__builtin_ctz(a)].mode != op) {
                fail(cudaErrorIllegalInstruction, "lanes of one warp call different __reduce_*_sync" + where());
                return;
            }
        uint32_t acc = W.io[__builtin_ctz(m)].in[0];
        for (uint32_t a = m & (m - 1); a; a &= a - 1) {
            uint32_t v = W.io[__builtin_ctz(a)].in[0];
            switch (op) {
                case kRedAdd: acc += v; break;
                case kRedMinS: acc = (int32_t)v < (int32_t)acc ? v : acc; break;
                case kRedMaxS: acc = (int32_t)v > (int32_t)acc ? v : acc; break;
                case kRedMinU: acc = v < acc ? v : acc; break;
                case kRedMaxU: acc = v > acc ? v : acc; break;
                case kRedAnd: acc &= v; break;
                case kRedOr: acc |= v; break;
                default: acc ^= v; break;
            }
        }
        for (uint32_t a = m; a; a &= a - 1) W.io[__builtin_ctz(a)].out[0] = acc;
    }

    // mma.m16n8k16.row.col.f32.bf16.bf16.f32, fragment layouts of the PTX ISA:
    //   group = lane / 4, quad = lane % 4
    //   A (16x16): a[r] holds A[row][col], A[row][col+1] (low half first) with
    //              row = group + 8*(r & 1), col = 2*quad + 8*(r >> 1)
    //   B (16x8):  b[r] holds B[k][n], B[k+1][n] with k = 2*quad + 8*r, n = group
    //   C, D (16x8 f32): c[i] is C[group + 8*(i >> 1)][2*quad + (i & 1)]
    void complete_mma(Warp& W, uint32_t m) {
        if (m != 0xffffffffu) {
            fail(cudaErrorIllegalInstruction, "mma_m16n8k16_bf16 needs all 32 lanes of the warp (mask " + hex(m) + ")" + where());
            return;
        }
        KeepSubnormals keep;  // not an fp32 instruction: -ftz does not apply
        float A[16][16], Bt[8][16], C[16][8];  // Bt[n][k] = B[k][n]
        for (int lane = 0; lane < 32; lane++) {
            const LaneIO& io = W.io[lane];
            int group = lane >> 2, quad = lane & 3;
            for (int r = 0; r < 4; r++) {
                int row = group + 8 * (r & 1), col = 2 * quad + 8 * (r >> 1);
                A[row][col] = bf16_to_f32((uint16_t)(io.in[r] & 0xffff));
                A[row][col + 1] = bf16_to_f32((uint16_t)(io.in[r] >> 16));
            }
            for (int r = 0; r < 2; r++) {
                int k = 2 * quad + 8 * r;
                Bt[group][k] = bf16_to_f32((uint16_t)(io.in[4 + r] & 0xffff));
                Bt[group][k + 1] = bf16_to_f32((uint16_t)(io.in[4 + r] >> 16));
            }
            for (int i = 0; i < 4; i++) C[group + 8 * (i >> 1)][2 * quad + (i & 1)] = bits_f32(io.in[6 + i]);
        }
        for (int lane = 0; lane < 32; lane++) {
            LaneIO& io = W.io[lane];
            int group = lane >> 2, quad = lane & 3;
            for (int i = 0; i < 4; i++) {
                int row = group + 8 * (i >> 1), col = 2 * quad + (i & 1);
                float acc = C[row][col];
                for (int k = 0; k < 16; k++) acc += A[row][k] * Bt[col][k];  // bf16*bf16 is exact in fp32
                io.out[i] = f32_bits(acc);
            }
        }
    }

    // ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16: lane 8*i + r gives the
    // address of row r of matrix i; lane l receives in r[i] the elements
    // (row l/4, cols 2*(l%4), +1), or with .trans (rows 2*(l%4), +1; col l/4).
    void complete_ldmatrix(Warp& W, int warp, uint32_t m) {
        if (m != 0xffffffffu) {
            fail(cudaErrorIllegalInstruction, "ldmatrix needs all 32 lanes of the warp (mask " + hex(m) + ")" + where());
            return;
        }
        int count = W.io[0].count;
        bool trans = W.io[0].trans;
        for (int lane = 1; lane < 32; lane++)
            if (W.io[lane].count != count || W.io[lane].trans != trans) {
                fail(cudaErrorIllegalInstruction, "lanes of one warp call different ldmatrix forms" + where());
                return;
            }
        uint16_t M[4][8][8];
        for (int i = 0; i < count; i++)
            for (int r = 0; r < 8; r++) {
                int src_lane = 8 * i + r;
                const unsigned char* p = W.io[src_lane].addr;
                check_access(p, 16, 16, kRead, warp * 32 + src_lane);
                if (aborted) return;
                memcpy(M[i][r], p, 16);
            }
        for (int lane = 0; lane < 32; lane++) {
            int g = lane >> 2, q = lane & 3;
            for (int i = 0; i < count; i++) {
                uint16_t lo = trans ? M[i][2 * q][g] : M[i][g][2 * q];
                uint16_t hi = trans ? M[i][2 * q + 1][g] : M[i][g][2 * q + 1];
                W.io[lane].out[i] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
        }
    }

    // ---- shared memory tracking

    const char* region_name(size_t off, size_t* rel) const {
        for (const SharedAlloc& a : allocs)
            if (off >= a.offset && off < a.offset + a.bytes) {
                *rel = off - a.offset;
                return a.name;
            }
        *rel = off;
        return off < dyn_bytes ? (dyn_name ? dyn_name : "dynamic shared memory") : "unallocated shared memory";
    }

    bool ordered(int a, uint32_t a_seq, int b) const {
        if ((a >> 5) != (b >> 5)) return false;
        const Warp& W = warps[a >> 5];
        return W.last_full_seq > a_seq || (W.pair_dirty && W.pair[a & 31][b & 31] > a_seq);
    }

    void race(size_t off, const char* first_kind, int first, const char* second_kind, int second) {
        size_t rel;
        const char* name = region_name(off, &rel);
        char buf[768];
        snprintf(buf, sizeof buf,
                 "shared memory race%s: byte offset %zu of shared memory ('%s' + %zu bytes) was %s by thread %s and "
                 "then %s by thread %s with no __syncthreads between them%s",
                 where().c_str(), off, name, rel, first_kind, thread_str(first).c_str(), second_kind,
                 thread_str(second).c_str(),
                 (first >> 5) == (second >> 5) ? " (same warp: nor a __syncwarp or warp collective of both lanes)" : "");
        fail(cudaErrorLaunchFailure, buf, /*race=*/true);
    }

    void check_access(const void* p, size_t bytes, size_t align, AccessKind kind, int tid) {
        const unsigned char* q = (const unsigned char*)p;
        if (q < smem || q + bytes > smem + kSmemBuffer) {
            fail(cudaErrorIllegalAddress, "shared memory access outside the block's shared memory by thread " +
                                              thread_str(tid) + where());
            return;
        }
        if ((uintptr_t)q % align != 0) {
            char buf[64];
            snprintf(buf, sizeof buf, "%zu-byte access at shared offset %zu", bytes, (size_t)(q - smem));
            fail(cudaErrorMisalignedAddress, std::string("misaligned ") + buf + " by thread " + thread_str(tid) + where());
            return;
        }
        if (++slice_accesses > g_spin_limit.load(std::memory_order_relaxed)) {
            fail(cudaErrorLaunchFailure, "thread " + thread_str(tid) + " made " + std::to_string(slice_accesses - 1) +
                                             " shared memory accesses without reaching a barrier or collective: a "
                                             "spin-wait on shared memory never ends here (fibers are not preempted)" +
                                             where());
            return;
        }
        if (L->race_found.load(std::memory_order_relaxed)) return;
        size_t off = (size_t)(q - smem);
        uint32_t E = epoch;
        uint32_t seq = warps[tid >> 5].seq;
        for (size_t b = off; b < off + bytes; b++) {
            Shadow& s = shadow[b];
            if (kind == kRead) {
                if (s.w.epoch == E && s.w_tid != tid && !ordered(s.w_tid, s.w.seq, tid)) {
                    race(b, s.w_atomic ? "atomically written" : "written", s.w_tid, "read", tid);
                    return;
                }
                if (s.r1.epoch == E && s.r1_tid != tid) {
                    if ((s.r1_tid >> 5) != (tid >> 5)) s.r3 = s.r1, s.r3_tid = s.r1_tid;
                    s.r2 = s.r1, s.r2_tid = s.r1_tid;
                }
                s.r1 = Access{E, seq};
                s.r1_tid = (uint16_t)tid;
            } else {
                bool atomic = kind == kAtomic;
                const char* what = atomic ? "atomically written" : "written";
                if (s.w.epoch == E && s.w_tid != tid && !(atomic && s.w_atomic) && !ordered(s.w_tid, s.w.seq, tid)) {
                    race(b, s.w_atomic ? "atomically written" : "written", s.w_tid, what, tid);
                    return;
                }
                const Access* readers[3] = {&s.r1, &s.r2, &s.r3};
                const uint16_t reader_tids[3] = {s.r1_tid, s.r2_tid, s.r3_tid};
                for (int k = 0; k < 3; k++) {
                    if (readers[k]->epoch == E && reader_tids[k] != tid && !ordered(reader_tids[k], readers[k]->seq, tid)) {
                        race(b, "read", reader_tids[k], what, tid);
                        return;
                    }
                }
                s.w = Access{E, seq};
                s.w_tid = (uint16_t)tid;
                s.w_atomic = atomic;
            }
        }
    }

    unsigned char* static_alloc(const void* site, size_t bytes, size_t align, const char* name) {
        for (const SharedAlloc& a : allocs)
            if (a.site == site) return smem + a.offset;
        // arrays start 16-byte aligned here (so any vector cast of them is aligned), but
        // count against the limits by their own sizes, as nvcc would pack them
        size_t al = std::max<size_t>(align, 16);
        size_t off = (static_top + al - 1) / al * al;
        size_t static_bytes = static_used + bytes;
        if (static_bytes > kStaticLimit) {
            fail(cudaErrorInvalidValue, "static shared memory of kernel '" + std::string(L->name) + "' reaches " +
                                            std::to_string(static_bytes) + " bytes at SHARED_ARRAY '" + name +
                                            "': more than 48 KiB (nvcc refuses it; use DYNAMIC_SHARED)");
            return nullptr;
        }
        if (static_bytes + dyn_bytes > L->total_limit) {
            fail(cudaErrorInvalidValue,
                 "kernel '" + std::string(L->name) + "': static shared memory (" + std::to_string(static_bytes) +
                     " bytes so far) + dynamic (" + std::to_string(dyn_bytes) + ") exceeds the limit of " +
                     std::to_string(L->total_limit) + " bytes" +
                     (L->total_limit == kDefaultLimit ? " (raise it with cudaFuncSetAttribute(kernel, "
                                                        "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))"
                                                      : ""));
            return nullptr;
        }
        memset(smem + off, 0xff, bytes);
        if (off + bytes > kSmemBuffer) {
            fail(cudaErrorInvalidValue, "too many SHARED_ARRAYs for the emulator's shared memory buffer");
            return nullptr;
        }
        allocs.push_back(SharedAlloc{site, off, bytes, name});
        static_top = off + bytes;
        static_used += bytes;
        L->note_static(static_bytes);
        return smem + off;
    }
};

// Executors are never destroyed (fibers must not be torn down at thread exit): a thread that
// ends hands its executor, fibers and stacks to the next new thread, so that programs starting
// many short-lived threads (one per emulated rank, say) keep a bounded number of stack mappings.
static std::mutex g_spare_mutex;
static std::vector<Executor*> g_spare_executors;

struct ExecutorLease {
    Executor* e = nullptr;
    ~ExecutorLease() {
        if (!e) return;
        std::lock_guard<std::mutex> lock(g_spare_mutex);
        g_spare_executors.push_back(e);
    }
};

static Executor& executor() {
    static thread_local ExecutorLease lease;
    if (!lease.e) {
        std::lock_guard<std::mutex> lock(g_spare_mutex);
        if (!g_spare_executors.empty()) {
            lease.e = g_spare_executors.back();
            g_spare_executors.pop_back();
        }
    }
    if (!lease.e) lease.e = new Executor();
    return *lease.e;
}

// Executor of the running kernel thread; fails (and aborts the process) in host code.
static Executor& running(const char* what) {
    if (!t_exec || !t_thread) {
        fprintf(stderr, "[simt] %s called outside a kernel\n", what);
        abort();
    }
    return *t_exec;
}

// ----------------------------------------------------------------------------
// entry points of simt.h

void device_fail(cudaError_t code, const std::string& what) {
    Executor& e = running("device_fail");
    e.fail(code, what + e.where());
    throw KernelAbort{};
}

void require_device(const char* what) { running(what); }

void misaligned_global(const void* p, size_t bytes, const char* what) {
    Executor& e = running(what);
    char buf[192];
    snprintf(buf, sizeof buf, "misaligned %s: %zu-byte access at global address %p (%zu bytes past a multiple of %zu)",
             what, bytes, p, (size_t)((uintptr_t)p % bytes), bytes);
    e.fail(cudaErrorMisalignedAddress, std::string(buf) + " by thread " + e.thread_str(e.cur) + e.where());
    throw KernelAbort{};
}

void set_epoch_counter(uint32_t value) { executor().epoch_counter = value; }

void shared_access(const void* p, size_t bytes, size_t align, AccessKind kind) {
    Executor& e = running("a shared memory access");
    e.check_access(p, bytes, align, kind, e.cur);
    if (e.aborted) throw KernelAbort{};
}

unsigned char* static_shared(const void* site, size_t bytes, size_t align, const char* name) {
    Executor& e = running("SHARED_ARRAY");
    unsigned char* p = e.static_alloc(site, bytes, align, name);
    if (!p) throw KernelAbort{};
    return p;
}

unsigned char* dynamic_shared(size_t align, const char* name, size_t* bytes) {
    Executor& e = running("DYNAMIC_SHARED");
    if (name && !e.dyn_name) e.dyn_name = name;
    *bytes = e.dyn_bytes;
    return e.smem;
}

unsigned char* block_shared(size_t* bytes) {
    Executor& e = running("a shared memory address");
    *bytes = e.static_top;
    return e.smem;
}

void sptr_out_of_bounds(const char* name, const void* p, ptrdiff_t i, size_t elem, size_t bytes, const void* lo,
                        const void* hi) {
    Executor& e = running("a shared memory access");
    char buf[512];
    if (p == nullptr) {
        snprintf(buf, sizeof buf, "null shared pointer dereferenced by thread %s", e.thread_str(e.cur).c_str());
    } else {
        ptrdiff_t first = ((const unsigned char*)p - (const unsigned char*)lo) / (ptrdiff_t)elem + i;
        snprintf(buf, sizeof buf,
                 "out-of-bounds shared memory access by thread %s: element %td (%zu bytes) of '%s', which holds %zu "
                 "elements of %zu bytes",
                 e.thread_str(e.cur).c_str(), first, bytes, name ? name : "?",
                 (size_t)((const unsigned char*)hi - (const unsigned char*)lo) / elem, elem);
    }
    e.fail(cudaErrorIllegalAddress, buf + e.where());
    throw KernelAbort{};
}

void syncthreads() { running("__syncthreads").syncthreads(0); }

int syncthreads_count(int pred) {
    Executor& e = running("__syncthreads_count");
    e.syncthreads(pred != 0);
    return e.bar_result;
}

void syncwarp(unsigned mask) {
    Executor& e = running("__syncwarp");
    e.warp_collective(kSync, mask);
}

unsigned activemask() {
    Executor& e = running("__activemask");
    const Warp& W = e.warps[e.cur >> 5];
    return W.exist_mask & ~W.exited_mask;
}

uint64_t shfl(unsigned mask, uint64_t value, int mode, int arg, int width, int bytes) {
    Executor& e = running("__shfl_sync");
    LaneIO& io = e.warps[e.cur >> 5].io[e.cur & 31];
    io.value = value;
    io.mode = mode;
    io.arg = arg;
    io.width = width;
    io.count = bytes;
    e.warp_collective(kShfl, mask);
    return e.warps[e.cur >> 5].io[e.cur & 31].out_value;
}

unsigned vote(unsigned mask, int pred, int mode) {
    Executor& e = running("__ballot_sync");
    LaneIO& io = e.warps[e.cur >> 5].io[e.cur & 31];
    io.in[0] = pred != 0;
    io.mode = mode;
    e.warp_collective(kVote, mask);
    return e.warps[e.cur >> 5].io[e.cur & 31].out[0];
}

unsigned reduce(unsigned mask, unsigned value, int op) {
    Executor& e = running("__reduce_*_sync");
    LaneIO& io = e.warps[e.cur >> 5].io[e.cur & 31];
    io.in[0] = value;
    io.mode = op;
    e.warp_collective(kReduce, mask);
    return io.out[0];
}

void warp_mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
    Executor& e = running("mma_m16n8k16_bf16");
    LaneIO& io = e.warps[e.cur >> 5].io[e.cur & 31];
    for (int i = 0; i < 4; i++) io.in[i] = a[i];
    for (int i = 0; i < 2; i++) io.in[4 + i] = b[i];
    for (int i = 0; i < 4; i++) io.in[6 + i] = f32_bits(c[i]);
    e.warp_collective(kMma, 0xffffffffu);
    for (int i = 0; i < 4; i++) d[i] = bits_f32(io.out[i]);
}

void warp_ldmatrix(uint32_t* r, int count, bool trans, const void* row_addr) {
    Executor& e = running("ldmatrix");
    LaneIO& io = e.warps[e.cur >> 5].io[e.cur & 31];
    io.addr = (const unsigned char*)row_addr;
    io.count = count;
    io.trans = trans;
    e.warp_collective(kLdmatrix, 0xffffffffu);
    for (int i = 0; i < count; i++) r[i] = io.out[i];
}

void cp_async(void* dst, const void* src, int bytes, int src_bytes) { running("cp.async").cp_async(dst, src, bytes, src_bytes); }
void cp_async_commit() { running("cp.async.commit_group").cp_async_commit(); }
void cp_async_wait(int newest_pending) { running("cp.async.wait_group").cp_async_wait(newest_pending); }

// ----------------------------------------------------------------------------
// running the blocks of a launch

void run_blocks(LaunchState& L) {
    uint64_t nblocks = (uint64_t)L.grid.x * L.grid.y * L.grid.z;
    int threads = block_threads();
    if ((uint64_t)threads > nblocks) threads = (int)nblocks;
    uint64_t switches = 0;
#pragma omp parallel num_threads(threads) reduction(+ : switches)
    {
        Executor& e = executor();
        uint64_t before = e.switches;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < (int64_t)nblocks; b++) {
            if (L.aborted.load(std::memory_order_relaxed)) continue;
            e.run_block(L, (uint64_t)b);
        }
        switches += e.switches - before;
    }
    add_stats(nblocks, switches);
}

}}  // namespace simt::detail
