// NCCL subset on the host: see nccl_host.h for the semantics.
//
// A clique holds what the ranks of one communicator share. Each collective a
// rank issues gets the rank's next sequence number; the k-th collective of
// every rank meets in the clique's Op number k, in three steps:
//   post     - the rank registers its send/recv buffers (and checks that its
//              arguments agree with the other ranks');
//   compute  - once all ranks posted, the rank computes its own output from
//              all send buffers into a private buffer;
//   finish   - once all ranks computed (nobody reads a send buffer any more),
//              the rank copies its output into recvbuff. In-place calls are
//              therefore safe.
// Outside a group the three steps run back to back; inside ncclGroupStart/End
// post runs at the call and compute/finish at ncclGroupEnd, for all the
// group's collectives step by step, so one thread can drive several ranks.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <atomic>
#include <vector>
#include <unistd.h>

#include "nccl_host.h"

namespace {

typedef std::chrono::steady_clock Clock;

enum Kind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST };

const char* kind_name(Kind kind) {
    switch (kind) {
        case ALL_REDUCE: return "ncclAllReduce";
        case REDUCE_SCATTER: return "ncclReduceScatter";
        case ALL_GATHER: return "ncclAllGather";
        case BROADCAST: return "ncclBroadcast";
    }
    return "?";
}

const char* type_name(ncclDataType_t t) {
    switch (t) {
        case ncclInt32: return "ncclInt32";
        case ncclInt64: return "ncclInt64";
        case ncclFloat32: return "ncclFloat32";
        case ncclFloat64: return "ncclFloat64";
        case ncclBfloat16: return "ncclBfloat16";
        default: return "an unsupported ncclDataType_t";
    }
}

const char* op_name(ncclRedOp_t op) {
    switch (op) {
        case ncclSum: return "ncclSum";
        case ncclProd: return "ncclProd";
        case ncclMax: return "ncclMax";
        case ncclMin: return "ncclMin";
        case ncclAvg: return "ncclAvg";
        default: return "an unsupported ncclRedOp_t";
    }
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
        case ncclInt32: case ncclFloat32: return 4;
        case ncclInt64: case ncclFloat64: return 8;
        case ncclBfloat16: return 2;
        default: return 0;
    }
}

// One collective as seen by all ranks.
struct Op {
    Kind kind;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    std::vector<const void*> send;
    std::vector<char> posted;    // [nranks]
    std::vector<char> computed;  // [nranks]
    int n_posted = 0, n_computed = 0, n_finished = 0;
};

struct Clique {
    int nranks;
    std::vector<char> joined;  // ranks that called ncclCommInitRank
    int n_joined = 0;
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, Op> ops;  // by sequence number
    bool broken = false;         // a rank failed: every later collective fails
    std::string broken_why;
    explicit Clique(int n) : nranks(n), joined(n, 0) {}
};

}  // namespace

struct ncclComm {
    std::shared_ptr<Clique> clique;
    int rank;
    uint64_t next_seq = 0;
    std::string last_error;
};

namespace {

thread_local std::string thread_last_error;

ncclResult_t fail(ncclComm* comm, ncclResult_t result, const std::string& why) {
    fprintf(stderr, "[nccl host] %s\n", why.c_str());
    thread_last_error = why;
    if (comm) comm->last_error = why;
    return result;
}

// Reads SIMT_NCCL_TIMEOUT_S (seconds, default 60).
bool timeout_seconds(double* seconds, std::string* why) {
    const char* env = getenv("SIMT_NCCL_TIMEOUT_S");
    *seconds = 60.0;
    if (!env || !*env) return true;
    char* end = nullptr;
    double v = strtod(env, &end);
    if (end == env || *end != '\0' || !(v > 0.0)) {
        *why = std::string("SIMT_NCCL_TIMEOUT_S='") + env +
               "' is not a positive number of seconds: set it to e.g. 60, or unset it";
        return false;
    }
    *seconds = v;
    return true;
}

std::string rank_list(const std::vector<char>& present) {
    std::string s;
    for (size_t r = 0; r < present.size(); r++) {
        if (present[r]) continue;
        if (!s.empty()) s += ", ";
        s += std::to_string(r);
    }
    return s;
}

// Marks the clique broken (caller holds its mutex) and wakes every waiter.
void break_clique(Clique& c, const std::string& why) {
    if (!c.broken) {
        c.broken = true;
        c.broken_why = why;
    }
    c.cv.notify_all();
}

// ---------------------------------------------------------------------------
// registry of cliques being formed by ncclCommInitRank, keyed by unique id

std::mutex registry_mu;
std::condition_variable registry_cv;
std::map<std::string, std::shared_ptr<Clique>> registry;
std::atomic<uint64_t> unique_id_counter{0};

// ---------------------------------------------------------------------------
// reductions: rank 0's value first, then rank 1's, ...

inline float bf16_to_float(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

inline uint16_t float_to_bf16(float f) {  // nearest, ties to even
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

template <class Storage, class Acc>
struct Plain {
    static Acc load(const void* p, size_t i) { return (Acc)((const Storage*)p)[i]; }
    static void store(void* p, size_t i, Acc v) { ((Storage*)p)[i] = (Storage)v; }
};

struct Bf16 {
    static float load(const void* p, size_t i) { return bf16_to_float(((const uint16_t*)p)[i]); }
    static void store(void* p, size_t i, float v) { ((uint16_t*)p)[i] = float_to_bf16(v); }
};

// out[e] = reduce over r of src[r][offset + e], e < count
template <class IO, class Acc>
void reduce_typed(ncclRedOp_t op, const std::vector<const void*>& src, size_t offset, size_t count, void* out) {
    const int nranks = (int)src.size();
    for (size_t e = 0; e < count; e++) {
        Acc acc = IO::load(src[0], offset + e);
        for (int r = 1; r < nranks; r++) {
            Acc v = IO::load(src[r], offset + e);
            switch (op) {
                case ncclSum: case ncclAvg: acc = acc + v; break;
                case ncclProd: acc = acc * v; break;
                case ncclMax: acc = v > acc ? v : acc; break;
                case ncclMin: acc = v < acc ? v : acc; break;
                default: break;
            }
        }
        if (op == ncclAvg) acc = acc / (Acc)nranks;
        IO::store(out, e, acc);
    }
}

void reduce(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& src, size_t offset, size_t count,
            void* out) {
    switch (type) {
        case ncclInt32: reduce_typed<Plain<int32_t, int64_t>, int64_t>(op, src, offset, count, out); break;
        case ncclInt64: reduce_typed<Plain<int64_t, int64_t>, int64_t>(op, src, offset, count, out); break;
        case ncclFloat32: reduce_typed<Plain<float, float>, float>(op, src, offset, count, out); break;
        case ncclFloat64: reduce_typed<Plain<double, double>, double>(op, src, offset, count, out); break;
        case ncclBfloat16: reduce_typed<Bf16, float>(op, src, offset, count, out); break;
        default: break;
    }
}

// ---------------------------------------------------------------------------
// the three steps of a collective

struct Pending {
    ncclComm* comm;
    uint64_t seq;
    void* recv;
    size_t out_bytes;
    std::vector<char> out;
    std::string what;  // e.g. "ncclAllReduce #3 (count 1024, ncclFloat32) on rank 0 of 4"
    Clock::time_point deadline;
};

thread_local int group_depth = 0;
thread_local std::vector<Pending> group_pending;
thread_local ncclResult_t group_result = ncclSuccess;

ncclResult_t post(ncclComm* comm, Kind kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                  ncclRedOp_t op, int root, Pending* p) {
    Clique& c = *comm->clique;
    p->comm = comm;
    p->seq = comm->next_seq++;
    p->recv = recv;
    p->what = std::string(kind_name(kind)) + " #" + std::to_string(p->seq) + " (count " + std::to_string(count) +
              ", " + type_name(type) + ") on rank " + std::to_string(comm->rank) + " of " + std::to_string(c.nranks);
    size_t out_count = kind == ALL_GATHER ? count * c.nranks : count;
    p->out_bytes = out_count * type_size(type);

    double seconds;
    std::string why;
    if (!timeout_seconds(&seconds, &why)) return fail(comm, ncclInvalidUsage, p->what + ": " + why);
    p->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));

    std::lock_guard<std::mutex> lock(c.mu);
    if (c.broken) return fail(comm, ncclSystemError, p->what + ": communicator is broken: " + c.broken_why);
    Op& o = c.ops[p->seq];
    if (o.n_posted == 0) {
        o.kind = kind; o.count = count; o.type = type; o.op = op; o.root = root;
        o.send.assign(c.nranks, nullptr);
        o.posted.assign(c.nranks, 0);
        o.computed.assign(c.nranks, 0);
    } else if (o.kind != kind || o.count != count || o.type != type || o.op != op || o.root != root) {
        std::string msg = p->what + ": arguments differ from another rank's collective #" + std::to_string(p->seq) +
                          " (" + kind_name(o.kind) + ", count " + std::to_string(o.count) + ", " +
                          type_name(o.type) + ", " + op_name(o.op) + ", root " + std::to_string(o.root) + ")";
        break_clique(c, msg);
        return fail(comm, ncclInvalidUsage, msg);
    }
    o.send[comm->rank] = send;
    o.posted[comm->rank] = 1;
    o.n_posted++;
    c.cv.notify_all();
    return ncclSuccess;
}

// Waits (lock held) until ready() or the clique breaks or the deadline passes.
template <class Ready>
ncclResult_t wait_for(Clique& c, std::unique_lock<std::mutex>& lock, Pending& p, Ready ready, const char* step,
                      const std::vector<char>& present) {
    while (!ready() && !c.broken) {
        if (c.cv.wait_until(lock, p.deadline) == std::cv_status::timeout && !ready() && !c.broken) {
            double seconds = 0;
            std::string ignored;
            timeout_seconds(&seconds, &ignored);
            char secs[32];
            snprintf(secs, sizeof(secs), "%.3g", seconds);
            std::string msg = p.what + ": timed out after " + secs + " s " + step + " ranks " + rank_list(present) +
                              " (a rank died or skipped this collective; SIMT_NCCL_TIMEOUT_S sets the wait)";
            break_clique(c, msg);
            return fail(p.comm, ncclSystemError, msg);
        }
    }
    if (!ready()) return fail(p.comm, ncclSystemError, p.what + ": communicator is broken: " + c.broken_why);
    return ncclSuccess;
}

ncclResult_t compute(Pending& p) {
    Clique& c = *p.comm->clique;
    std::unique_lock<std::mutex> lock(c.mu);
    Op& o = c.ops[p.seq];
    ncclResult_t r = wait_for(c, lock, p, [&] { return o.n_posted == c.nranks; }, "waiting for", o.posted);
    if (r != ncclSuccess) return r;
    lock.unlock();

    // the send buffers stay valid until every rank has computed
    const int rank = p.comm->rank;
    const size_t bytes = o.count * type_size(o.type);
    p.out.resize(p.out_bytes);
    switch (o.kind) {
        case ALL_REDUCE: reduce(o.type, o.op, o.send, 0, o.count, p.out.data()); break;
        case REDUCE_SCATTER: reduce(o.type, o.op, o.send, (size_t)rank * o.count, o.count, p.out.data()); break;
        case ALL_GATHER:
            for (int i = 0; i < c.nranks; i++) memcpy(p.out.data() + i * bytes, o.send[i], bytes);
            break;
        case BROADCAST: memcpy(p.out.data(), o.send[o.root], bytes); break;
    }

    lock.lock();
    o.computed[rank] = 1;
    o.n_computed++;
    c.cv.notify_all();
    return ncclSuccess;
}

ncclResult_t finish(Pending& p) {
    Clique& c = *p.comm->clique;
    std::unique_lock<std::mutex> lock(c.mu);
    Op& o = c.ops[p.seq];
    ncclResult_t r = wait_for(c, lock, p, [&] { return o.n_computed == c.nranks; }, "waiting for the reads of",
                              o.computed);
    if (r != ncclSuccess) return r;
    if (p.out_bytes) memcpy(p.recv, p.out.data(), p.out_bytes);
    if (++o.n_finished == c.nranks) c.ops.erase(p.seq);
    return ncclSuccess;
}

ncclResult_t collective(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm* comm) {
    if (!comm || !comm->clique) return fail(nullptr, ncclInvalidArgument, std::string(kind_name(kind)) + ": comm is NULL");
    Clique& c = *comm->clique;
    std::string where = std::string(kind_name(kind)) + " on rank " + std::to_string(comm->rank);
    std::string bad;
    if (type_size(type) == 0) bad = "data type " + std::to_string((int)type) + " is not implemented (" +
                                    "use ncclInt32, ncclInt64, ncclFloat32, ncclFloat64 or ncclBfloat16)";
    else if ((kind == ALL_REDUCE || kind == REDUCE_SCATTER) && !(op >= ncclSum && op <= ncclAvg))
        bad = "reduction op " + std::to_string((int)op) + " is not implemented (use ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg)";
    else if (kind == BROADCAST && (root < 0 || root >= c.nranks))
        bad = "root " + std::to_string(root) + " is not a rank of this " + std::to_string(c.nranks) + "-rank communicator";
    else {
        // both buffers must lie in cudaMalloc allocations, as on a GPU (NCCL reads device memory);
        // a non-root rank's sendbuff is not read by ncclBroadcast
        size_t n = (size_t)c.nranks, bytes = type_size(type);
        size_t send_count = kind == REDUCE_SCATTER ? n * count : (kind == BROADCAST && comm->rank != root) ? 0 : count;
        size_t recv_count = kind == ALL_GATHER ? n * count : count;
        if (send_count > 0 && !(send && simt::detail::is_device_range(send, send_count * bytes)))
            bad = "sendbuff (" + std::to_string(send_count) + " elements) is not inside one cudaMalloc allocation";
        else if (recv_count > 0 && !(recv && simt::detail::is_device_range(recv, recv_count * bytes)))
            bad = "recvbuff (" + std::to_string(recv_count) + " elements) is not inside one cudaMalloc allocation";
    }
    if (!bad.empty()) {
        std::string msg = where + ": " + bad;
        { std::lock_guard<std::mutex> lock(c.mu); break_clique(c, msg); }
        return fail(comm, ncclInvalidArgument, msg);
    }
    if (kind == ALL_GATHER || kind == BROADCAST) op = ncclSum;  // not used; keeps the argument check uniform
    if (kind != BROADCAST) root = 0;

    Pending p;
    ncclResult_t r = post(comm, kind, send, recv, count, type, op, root, &p);
    if (group_depth > 0) {
        if (r == ncclSuccess) group_pending.push_back(std::move(p));
        else if (group_result == ncclSuccess) group_result = r;
        return r;
    }
    if (r == ncclSuccess) r = compute(p);
    if (r == ncclSuccess) r = finish(p);
    return r;
}

}  // namespace

// ---------------------------------------------------------------------------
// API

ncclResult_t ncclGetVersion(int* version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
    if (!uniqueId) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
    snprintf(uniqueId->internal, sizeof(uniqueId->internal), "simt-nccl pid %d id %llu t %lld", (int)getpid(),
             (unsigned long long)unique_id_counter.fetch_add(1),
             (long long)Clock::now().time_since_epoch().count());
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    std::string where = "ncclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")";
    if (!comm) return fail(nullptr, ncclInvalidArgument, where + ": comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(nullptr, ncclInvalidArgument, where + ": need nranks >= 1 and 0 <= rank < nranks");
    double seconds;
    std::string why;
    if (!timeout_seconds(&seconds, &why)) return fail(nullptr, ncclInvalidUsage, where + ": " + why);
    Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));

    std::unique_lock<std::mutex> lock(registry_mu);
    std::string key(commId.internal, sizeof(commId.internal));
    std::shared_ptr<Clique>& slot = registry[key];
    if (!slot) slot = std::make_shared<Clique>(nranks);
    std::shared_ptr<Clique> c = slot;
    if (c->broken) return fail(nullptr, ncclSystemError, where + ": communicator is broken: " + c->broken_why);
    if (c->nranks != nranks)
        return fail(nullptr, ncclInvalidArgument, where + ": another rank of this unique id gave nranks " +
                                                      std::to_string(c->nranks));
    if (c->joined[rank]) return fail(nullptr, ncclInvalidUsage, where + ": this rank already joined this unique id");
    c->joined[rank] = 1;
    c->n_joined++;
    registry_cv.notify_all();
    while (c->n_joined < nranks && !c->broken) {
        if (registry_cv.wait_until(lock, deadline) == std::cv_status::timeout && c->n_joined < nranks) {
            char secs[32];
            snprintf(secs, sizeof(secs), "%.3g", seconds);
            std::string msg = where + ": timed out after " + secs + " s waiting for ranks " + rank_list(c->joined) +
                              " to join (SIMT_NCCL_TIMEOUT_S sets the wait)";
            c->broken = true;
            c->broken_why = msg;
            registry_cv.notify_all();
            return fail(nullptr, ncclSystemError, msg);
        }
    }
    if (c->broken) return fail(nullptr, ncclSystemError, where + ": " + c->broken_why);
    if (registry.count(key) && registry[key] == c) registry.erase(key);  // the id is used up
    *comm = new ncclComm{c, rank, 0, std::string()};
    return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
    if (!comm || ndev < 1) return fail(nullptr, ncclInvalidArgument, "ncclCommInitAll: need comm != NULL and ndev >= 1");
    std::shared_ptr<Clique> c = std::make_shared<Clique>(ndev);
    c->joined.assign(ndev, 1);
    c->n_joined = ndev;
    for (int r = 0; r < ndev; r++) comm[r] = new ncclComm{c, r, 0, std::string()};
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm && comm->clique) {
        std::lock_guard<std::mutex> lock(comm->clique->mu);
        break_clique(*comm->clique, "rank " + std::to_string(comm->rank) + " called ncclCommAbort");
    }
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (!comm || !count) return ncclInvalidArgument;
    *count = comm->clique->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (!comm || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    if (!comm || !asyncError) return ncclInvalidArgument;
    std::lock_guard<std::mutex> lock(comm->clique->mu);
    *asyncError = comm->clique->broken ? ncclSystemError : ncclSuccess;
    return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error";
        case ncclSystemError: return "unhandled system error (a rank timed out or the communicator is broken)";
        case ncclInternalError: return "internal error";
        case ncclInvalidArgument: return "invalid argument";
        case ncclInvalidUsage: return "invalid usage";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

const char* ncclGetLastError(ncclComm_t comm) {
    if (comm && !comm->last_error.empty()) return comm->last_error.c_str();
    return thread_last_error.c_str();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return collective(ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return collective(REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm);
}

ncclResult_t ncclGroupStart() {
    if (group_depth++ == 0) {
        group_pending.clear();
        group_result = ncclSuccess;
    }
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (group_depth == 0) return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    // compute every collective of the group before finishing any: the ranks this
    // thread drives must all have read their inputs before outputs are written
    ncclResult_t result = group_result;
    std::vector<char> computed(group_pending.size(), 0);
    for (size_t i = 0; i < group_pending.size(); i++) {
        ncclResult_t r = compute(group_pending[i]);
        computed[i] = r == ncclSuccess;
        if (r != ncclSuccess && result == ncclSuccess) result = r;
    }
    for (size_t i = 0; i < group_pending.size(); i++) {
        if (!computed[i]) continue;
        ncclResult_t r = finish(group_pending[i]);
        if (r != ncclSuccess && result == ncclSuccess) result = r;
    }
    group_pending.clear();
    group_result = ncclSuccess;
    return result;
}
