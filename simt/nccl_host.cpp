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
//
// Ranks in other processes. The clique always lives in the process that called
// ncclGetUniqueId: that call also opens a listening TCP socket on 127.0.0.1
// (once per process, served by a background "hub" thread) and writes its port,
// the pid and a random nonce into the id. A rank in another process connects
// to it; the hub starts a proxy thread that joins the clique as that rank and,
// for every collective the remote rank sends (descriptor and send data), runs
// post/compute/finish for it and sends back the rank's output. The reductions
// themselves are the clique's, so the results are those of thread ranks, bit
// for bit. The proxy answers inside its compute step, before it marks itself
// computed: the other ranks' finish waits for that, so the hub's process
// cannot return from (and exit after) a collective whose answer is not yet in
// the socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <atomic>
#include <thread>
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
    int first_rank;  // the rank whose post set the descriptor above
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
    std::shared_ptr<Clique> clique;  // null for a rank in another process than the clique
    int rank;
    int nranks;
    uint64_t next_seq = 0;
    std::string last_error;
    // a remote rank: its connection to the hub of the process that made the id
    int fd = -1;
    int hub_pid = 0;
    int hub_port = 0;
    bool lost = false;     // the connection failed: every later collective fails at once
    std::string lost_why;
    bool nonblocking = false;  // ncclCommInitRankConfig with blocking = 0
    int pending = 0;           // polls of ncclCommGetAsyncError that still answer ncclInProgress
    ncclComm(std::shared_ptr<Clique> c, int rank_, int nranks_) : clique(std::move(c)), rank(rank_), nranks(nranks_) {}
};

namespace {

thread_local std::string thread_last_error;
thread_local bool quiet = false;  // proxy threads: the remote rank prints its own errors

ncclResult_t fail(ncclComm* comm, ncclResult_t result, const std::string& why) {
    if (!quiet) fprintf(stderr, "[nccl host] %s\n", why.c_str());
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
// Returns whether it was whole before.
bool break_clique(Clique& c, const std::string& why) {
    bool was_whole = !c.broken;
    if (!c.broken) {
        c.broken = true;
        c.broken_why = why;
    }
    c.cv.notify_all();
    return was_whole;
}

Clock::time_point deadline_in(double seconds) {
    if (seconds > 1e8) seconds = 1e8;  // ~3 years: keeps the clock arithmetic in range
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string seconds_text(double seconds) {
    char secs[32];
    snprintf(secs, sizeof(secs), "%.3g", seconds);
    return secs;
}

// ---------------------------------------------------------------------------
// registry of cliques being formed by ncclCommInitRank, keyed by unique id

// Allocated once and never freed: the hub's threads may still use them while
// the process exits.
std::mutex& registry_mu = *new std::mutex;
std::condition_variable& registry_cv = *new std::condition_variable;
std::map<std::string, std::shared_ptr<Clique>>& registry = *new std::map<std::string, std::shared_ptr<Clique>>;
std::atomic<uint64_t> unique_id_counter{0};

// The clique's broken state (lock order: registry_mu, then the clique's mutex).
bool is_broken(Clique& c, std::string* why = nullptr) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (why) *why = c.broken_why;
    return c.broken;
}

// Joins rank `rank` to the clique of `key` (the unique id's bytes), waiting until
// all nranks joined (at most SIMT_NCCL_TIMEOUT_S). `where` starts the messages.
ncclResult_t join_clique(const std::string& key, int nranks, int rank, const std::string& where,
                         std::shared_ptr<Clique>* out) {
    double seconds;
    std::string why;
    if (!timeout_seconds(&seconds, &why)) return fail(nullptr, ncclInvalidUsage, where + ": " + why);
    Clock::time_point deadline = deadline_in(seconds);

    std::unique_lock<std::mutex> lock(registry_mu);
    std::shared_ptr<Clique>& slot = registry[key];
    if (!slot) slot = std::make_shared<Clique>(nranks);
    std::shared_ptr<Clique> c = slot;
    if (is_broken(*c, &why)) return fail(nullptr, ncclSystemError, where + ": communicator is broken: " + why);
    if (c->nranks != nranks)
        return fail(nullptr, ncclInvalidArgument, where + ": another rank of this unique id gave nranks " +
                                                      std::to_string(c->nranks));
    if (c->joined[rank])
        return fail(nullptr, ncclInvalidUsage, where + ": rank " + std::to_string(rank) +
                                                   " already joined this unique id (two processes or threads "
                                                   "were given the same rank)");
    c->joined[rank] = 1;
    c->n_joined++;
    registry_cv.notify_all();
    while (c->n_joined < nranks && !is_broken(*c)) {
        if (registry_cv.wait_until(lock, deadline) == std::cv_status::timeout && c->n_joined < nranks) {
            std::string msg = where + ": timed out after " + seconds_text(seconds) + " s waiting for ranks " +
                              rank_list(c->joined) + " to join (SIMT_NCCL_TIMEOUT_S sets the wait)";
            {
                std::lock_guard<std::mutex> clique_lock(c->mu);
                break_clique(*c, msg);
            }
            registry_cv.notify_all();
            return fail(nullptr, ncclSystemError, msg);
        }
    }
    // once all joined, the communicator exists even if a rank already broke it (its collectives fail)
    if (c->n_joined < nranks) {
        is_broken(*c, &why);
        return fail(nullptr, ncclSystemError, where + ": " + why);
    }
    if (registry.count(key) && registry[key] == c) registry.erase(key);  // the id is used up
    *out = c;
    return ncclSuccess;
}

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
// sockets between a remote rank and the hub (non-blocking; every wait is a poll)
//
// Unique id (the first bytes of ncclUniqueId; the rest is 0):
//   IdHeader: "simtNCCL", the creator's pid, the hub's port (0: no hub), a random nonce, a serial.
// A remote rank connects and sends a Hello (the id, nranks, rank); the hub answers with an Answer
// (result, message). Then, per collective, the rank sends a Request and its send data; the hub
// answers with an Answer, its message and the rank's output. MSG_BREAK breaks the clique (an
// invalid argument, ncclCommAbort), MSG_BYE ends the connection (ncclCommDestroy).

const char ID_MAGIC[8] = {'s', 'i', 'm', 't', 'N', 'C', 'C', 'L'};
const char HELLO_MAGIC[8] = {'s', 'i', 'm', 't', 'H', 'E', 'L', 'O'};
const double ANSWER_GRACE_S = 5.0;  // a remote rank waits the timeout plus this for an answer, so
                                    // that the hub's own timeout (which names the missing ranks) comes first

struct IdHeader {
    char magic[8];
    int32_t pid;
    uint16_t port;
    uint16_t unused;
    uint64_t nonce;
    uint64_t serial;
};
static_assert(sizeof(IdHeader) <= NCCL_UNIQUE_ID_BYTES, "the id header fits in ncclUniqueId");

struct Hello {
    char magic[8];
    char id[NCCL_UNIQUE_ID_BYTES];
    int32_t nranks, rank, pid;
};

enum MsgType { MSG_COLLECTIVE = 1, MSG_BREAK = 2, MSG_BYE = 3 };

struct Request {
    int32_t type;  // MsgType
    int32_t kind, datatype, op, root, unused;
    uint64_t count;
    uint64_t data_bytes;  // the send data (MSG_BREAK: the reason's bytes) that follow
};

struct Answer {
    int32_t result;  // ncclResult_t
    uint32_t message_bytes;
    uint64_t data_bytes;  // then the message, then the rank's output
};

enum Io { IO_OK, IO_CLOSED, IO_TIMEOUT, IO_ERROR };

// Waits until fd is ready for `events` (or has hung up); forever if `forever`.
Io wait_fd(int fd, short events, Clock::time_point deadline, bool forever, std::string* why) {
    for (;;) {
        int ms = -1;
        if (!forever) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left < 0) return IO_TIMEOUT;
            ms = (int)std::min<long long>(left + 1, 1000000);
        }
        pollfd pfd{fd, events, 0};
        int n = poll(&pfd, 1, ms);
        if (n > 0) return IO_OK;  // ready, hung up or failed: the read or write says which
        if (n < 0 && errno != EINTR) {
            *why = std::string("poll: ") + strerror(errno);
            return IO_ERROR;
        }
    }
}

// Reads n bytes, waiting at most `seconds` for each piece of progress.
Io read_all(int fd, void* buf, size_t n, double seconds, std::string* why) {
    char* p = (char*)buf;
    while (n > 0) {
        Io io = wait_fd(fd, POLLIN, deadline_in(seconds), false, why);
        if (io == IO_TIMEOUT) *why = "nothing arrived for " + seconds_text(seconds) + " s";
        if (io != IO_OK) return io;
        ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
        if (got == 0) return IO_CLOSED;
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            *why = std::string("recv: ") + strerror(errno);
            return errno == ECONNRESET ? IO_CLOSED : IO_ERROR;
        }
        p += got;
        n -= (size_t)got;
    }
    return IO_OK;
}

// Writes n bytes, waiting at most `seconds` for each piece of progress.
Io write_all(int fd, const void* buf, size_t n, double seconds, std::string* why) {
    const char* p = (const char*)buf;
    while (n > 0) {
        Io io = wait_fd(fd, POLLOUT, deadline_in(seconds), false, why);
        if (io == IO_TIMEOUT) *why = "the peer read nothing for " + seconds_text(seconds) + " s";
        if (io != IO_OK) return io;
        ssize_t put = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (put < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            *why = std::string("send: ") + strerror(errno);
            return (errno == EPIPE || errno == ECONNRESET) ? IO_CLOSED : IO_ERROR;
        }
        p += put;
        n -= (size_t)put;
    }
    return IO_OK;
}

Io send_answer(int fd, ncclResult_t result, const std::string& message, const void* data, size_t data_bytes,
               double seconds, std::string* why) {
    Answer a{(int32_t)result, (uint32_t)message.size(), (uint64_t)data_bytes};
    Io io = write_all(fd, &a, sizeof(a), seconds, why);
    if (io == IO_OK) io = write_all(fd, message.data(), message.size(), seconds, why);
    if (io == IO_OK) io = write_all(fd, data, data_bytes, seconds, why);
    return io;
}

// Reads an Answer and its message; the data (a.data_bytes) is left to the caller.
// The first byte may take first_seconds (the hub waits for the other ranks meanwhile).
Io read_answer(int fd, Answer* a, std::string* message, double first_seconds, double seconds, std::string* why) {
    Io io = wait_fd(fd, POLLIN, deadline_in(first_seconds), false, why);
    if (io == IO_TIMEOUT) *why = "no answer within " + seconds_text(first_seconds) + " s";
    if (io == IO_OK) io = read_all(fd, a, sizeof(*a), seconds, why);
    if (io != IO_OK) return io;
    if (a->message_bytes > (1u << 20)) {
        *why = "malformed answer (a message of " + std::to_string(a->message_bytes) + " bytes)";
        return IO_ERROR;
    }
    message->assign(a->message_bytes, '\0');
    return read_all(fd, &(*message)[0], a->message_bytes, seconds, why);
}

void set_nodelay(int fd) {  // requests and answers are small, and each waits for the other
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// ---------------------------------------------------------------------------
// the three steps of a collective

struct Pending {
    ncclComm* comm;
    uint64_t seq;
    void* recv;  // null for a proxy: its output goes to the socket
    size_t out_bytes;
    std::vector<char> out;
    std::string what;  // e.g. "ncclAllReduce #3 (count 1024, ncclFloat32) on rank 0 of 4"
    Clock::time_point deadline;
    int reply_fd = -1;  // a proxy: sends the output to its remote rank here, in compute (-1 after it failed)
    double reply_seconds = 0;
    bool answered = false;
};

thread_local int group_depth = 0;
thread_local std::vector<Pending> group_pending;
thread_local ncclResult_t group_result = ncclSuccess;

std::string describe(Kind kind, size_t count, ncclDataType_t type, ncclRedOp_t op, int root) {
    return std::string(kind_name(kind)) + "(count " + std::to_string(count) + ", " + type_name(type) + ", " +
           op_name(op) + ", root " + std::to_string(root) + ")";
}

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
    p->deadline = deadline_in(seconds);

    std::lock_guard<std::mutex> lock(c.mu);
    if (c.broken) return fail(comm, ncclSystemError, p->what + ": communicator is broken: " + c.broken_why);
    Op& o = c.ops[p->seq];
    if (o.n_posted == 0) {
        o.kind = kind; o.count = count; o.type = type; o.op = op; o.root = root;
        o.first_rank = comm->rank;
        o.send.assign(c.nranks, nullptr);
        o.posted.assign(c.nranks, 0);
        o.computed.assign(c.nranks, 0);
    } else if (o.kind != kind || o.count != count || o.type != type || o.op != op || o.root != root) {
        std::string msg = p->what + ": collective #" + std::to_string(p->seq) + " differs between ranks: rank " +
                          std::to_string(comm->rank) + " called " + describe(kind, count, type, op, root) +
                          ", rank " + std::to_string(o.first_rank) + " called " +
                          describe(o.kind, o.count, o.type, o.op, o.root);
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
            std::string msg = p.what + ": timed out after " + seconds_text(seconds) + " s " + step + " ranks " +
                              rank_list(present) +
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

    // a proxy hands the output to its remote rank before the others may finish (see the top)
    if (p.reply_fd >= 0) {
        std::string why;
        Io io = send_answer(p.reply_fd, ncclSuccess, "", p.out.data(), p.out_bytes, p.reply_seconds, &why);
        if (io != IO_OK) {
            std::string msg = p.what + ": rank " + std::to_string(rank) + " closed its connection before it got " +
                              "the result (its process exited or crashed): " + why;
            p.reply_fd = -1;  // gone: nothing more to send
            lock.lock();
            if (break_clique(c, msg)) fprintf(stderr, "[nccl host] %s\n", msg.c_str());
            return fail(p.comm, ncclRemoteError, msg);
        }
        p.answered = true;
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
    if (p.out_bytes && p.recv) memcpy(p.recv, p.out.data(), p.out_bytes);
    if (++o.n_finished == c.nranks) c.ops.erase(p.seq);
    return ncclSuccess;
}

// Elements a rank sends: ncclReduceScatter takes nranks chunks; a non-root rank's
// ncclBroadcast sends nothing.
size_t send_count_of(Kind kind, size_t count, int nranks, int rank, int root) {
    if (kind == REDUCE_SCATTER) return (size_t)nranks * count;
    if (kind == BROADCAST && rank != root) return 0;
    return count;
}

// ---------------------------------------------------------------------------
// a rank in another process than the clique: each collective goes to the hub

// Marks the connection lost and closes it; every later collective fails at once.
void lose_connection(ncclComm* comm, const std::string& why) {
    comm->lost = true;
    comm->lost_why = "lost the connection to the process that made the unique id (pid " +
                     std::to_string(comm->hub_pid) + ", 127.0.0.1:" + std::to_string(comm->hub_port) + "): " + why;
    if (comm->fd >= 0) close(comm->fd);
    comm->fd = -1;
}

ncclResult_t remote_collective(ncclComm* comm, Kind kind, const void* send, void* recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op, int root) {
    uint64_t seq = comm->next_seq++;
    std::string what = std::string(kind_name(kind)) + " #" + std::to_string(seq) + " (count " +
                       std::to_string(count) + ", " + type_name(type) + ") on rank " + std::to_string(comm->rank) +
                       " of " + std::to_string(comm->nranks);
    if (comm->lost) return fail(comm, ncclRemoteError, what + ": " + comm->lost_why);
    double seconds;
    std::string why;
    if (!timeout_seconds(&seconds, &why)) return fail(comm, ncclInvalidUsage, what + ": " + why);

    const size_t bytes = type_size(type);
    const size_t send_bytes = send_count_of(kind, count, comm->nranks, comm->rank, root) * bytes;
    const size_t out_bytes = (kind == ALL_GATHER ? count * comm->nranks : count) * bytes;
    Request q{MSG_COLLECTIVE, (int32_t)kind, (int32_t)type, (int32_t)op, (int32_t)root, 0, (uint64_t)count,
              (uint64_t)send_bytes};
    Io io = write_all(comm->fd, &q, sizeof(q), seconds, &why);
    if (io == IO_OK) io = write_all(comm->fd, send, send_bytes, seconds, &why);
    Answer a;
    std::string message;
    if (io == IO_OK) io = read_answer(comm->fd, &a, &message, seconds + ANSWER_GRACE_S, seconds, &why);
    if (io == IO_CLOSED) why = "it closed the connection (its process exited or crashed)";
    if (io != IO_OK) {
        lose_connection(comm, why);
        return fail(comm, ncclRemoteError, what + ": " + comm->lost_why);
    }
    if (a.result != ncclSuccess) {
        // the hub's own message (it names this rank's collective) and its code
        for (size_t left = a.data_bytes; left > 0 && io == IO_OK;) {  // none is sent; drain to stay in step
            char sink[4096];
            size_t n = std::min(left, sizeof(sink));
            io = read_all(comm->fd, sink, n, seconds, &why);
            left -= n;
        }
        return fail(comm, (ncclResult_t)a.result, message);
    }
    if (a.data_bytes != out_bytes) {
        lose_connection(comm, "the answer carries " + std::to_string(a.data_bytes) + " bytes instead of " +
                                  std::to_string(out_bytes));
        return fail(comm, ncclInternalError, what + ": " + comm->lost_why);
    }
    // straight into recvbuff: the hub holds a copy of the send data, so in place is safe
    io = read_all(comm->fd, recv, out_bytes, seconds, &why);
    if (io == IO_CLOSED) why = "it closed the connection (its process exited or crashed)";
    if (io != IO_OK) {
        lose_connection(comm, why);
        return fail(comm, ncclRemoteError, what + ": " + comm->lost_why);
    }
    return ncclSuccess;
}

// Tells the hub to break the clique (best effort: the connection may be gone).
void remote_break(ncclComm* comm, const std::string& why) {
    if (comm->fd < 0) return;
    std::string ignored;
    Request q{MSG_BREAK, 0, 0, 0, 0, 0, 0, (uint64_t)why.size()};
    if (write_all(comm->fd, &q, sizeof(q), 1.0, &ignored) == IO_OK) write_all(comm->fd, why.data(), why.size(), 1.0, &ignored);
}

ncclResult_t collective(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm* comm) {
    if (!comm) return fail(nullptr, ncclInvalidArgument, std::string(kind_name(kind)) + ": comm is NULL");
    const int nranks = comm->nranks;
    std::string where = std::string(kind_name(kind)) + " on rank " + std::to_string(comm->rank);
    std::string bad;
    if (type_size(type) == 0) bad = "data type " + std::to_string((int)type) + " is not implemented (" +
                                    "use ncclInt32, ncclInt64, ncclFloat32, ncclFloat64 or ncclBfloat16)";
    else if ((kind == ALL_REDUCE || kind == REDUCE_SCATTER) && !(op >= ncclSum && op <= ncclAvg))
        bad = "reduction op " + std::to_string((int)op) + " is not implemented (use ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg)";
    else if (kind == BROADCAST && (root < 0 || root >= nranks))
        bad = "root " + std::to_string(root) + " is not a rank of this " + std::to_string(nranks) + "-rank communicator";
    else {
        // both buffers must lie in cudaMalloc allocations, as on a GPU (NCCL reads device memory);
        // a non-root rank's sendbuff is not read by ncclBroadcast
        size_t bytes = type_size(type);
        size_t send_count = send_count_of(kind, count, nranks, comm->rank, root);
        size_t recv_count = kind == ALL_GATHER ? (size_t)nranks * count : count;
        if (send_count > 0 && !(send && simt::detail::is_device_range(send, send_count * bytes)))
            bad = "sendbuff (" + std::to_string(send_count) + " elements) is not inside one cudaMalloc allocation";
        else if (recv_count > 0 && !(recv && simt::detail::is_device_range(recv, recv_count * bytes)))
            bad = "recvbuff (" + std::to_string(recv_count) + " elements) is not inside one cudaMalloc allocation";
    }
    if (!bad.empty()) {
        std::string msg = where + ": " + bad;
        if (comm->clique) {
            std::lock_guard<std::mutex> lock(comm->clique->mu);
            break_clique(*comm->clique, msg);
        } else {
            remote_break(comm, msg);
        }
        return fail(comm, ncclInvalidArgument, msg);
    }
    if (kind == ALL_GATHER || kind == BROADCAST) op = ncclSum;  // not used; keeps the argument check uniform
    if (kind != BROADCAST) root = 0;

    if (!comm->clique) {
        // a remote rank runs each collective whole, also inside a group: one thread may
        // drive only one remote rank of a clique at a time
        ncclResult_t r = remote_collective(comm, kind, send, recv, count, type, op, root);
        if (group_depth > 0 && r != ncclSuccess && group_result == ncclSuccess) group_result = r;
        return r;
    }
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

// ---------------------------------------------------------------------------
// the hub: the process that made an id serves the ranks of other processes

struct Hub {
    std::mutex mu;
    int pid = 0;      // the process whose thread serves `port` (a forked child starts its own)
    int port = 0;     // 0: no hub (the socket could not be opened; see `error`)
    std::string error;
    std::set<uint64_t> nonces;  // of the ids this process made
};

Hub& hub() {
    static Hub* h = new Hub;  // never freed: the hub's threads outlive main
    return *h;
}

// A remote rank's clique broke or its connection failed: breaks the clique, says so once.
void proxy_lost(Clique& c, const std::string& msg) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (break_clique(c, msg)) fprintf(stderr, "[nccl host] %s\n", msg.c_str());
}

// Serves the collectives of one joined remote rank until it says bye or its connection ends.
void proxy_serve(ncclComm* comm, int fd, double seconds) {
    Clique& c = *comm->clique;
    const std::string who = "rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->nranks);
    for (;;) {
        std::string why;
        Request q;
        // between collectives the rank computes for as long as it likes: no timeout here
        Io io = wait_fd(fd, POLLIN, Clock::now(), true, &why);
        if (io == IO_OK) io = read_all(fd, &q, sizeof(q), seconds, &why);
        if (io == IO_CLOSED) {
            proxy_lost(c, who + " closed its connection: its process exited or crashed without ncclCommDestroy");
            return;
        }
        if (io != IO_OK) {
            proxy_lost(c, who + ": its connection failed: " + why);
            return;
        }
        if (q.type == MSG_BYE) return;
        if (q.type == MSG_BREAK) {
            std::string reason(std::min<uint64_t>(q.data_bytes, 1u << 20), '\0');
            if (read_all(fd, &reason[0], reason.size(), seconds, &why) != IO_OK) reason = who + " broke the clique";
            std::lock_guard<std::mutex> lock(c.mu);
            break_clique(c, reason);
            continue;
        }
        const Kind kind = (Kind)q.kind;
        const ncclDataType_t type = (ncclDataType_t)q.datatype;
        const bool known = q.type == MSG_COLLECTIVE && q.kind >= ALL_REDUCE && q.kind <= BROADCAST &&
                           type_size(type) > 0 && q.op >= ncclSum && q.op <= ncclAvg && q.root >= 0 &&
                           q.root < comm->nranks && q.count <= (1ull << 40) &&
                           q.data_bytes == send_count_of(kind, q.count, comm->nranks, comm->rank, q.root) *
                                               type_size(type);
        if (!known) {
            proxy_lost(c, who + " sent a malformed request (type " + std::to_string(q.type) + ", " +
                              std::to_string(q.data_bytes) + " bytes): a different build of the host NCCL?");
            return;
        }
        std::vector<char> data(q.data_bytes);
        io = read_all(fd, data.data(), data.size(), seconds, &why);
        if (io != IO_OK) {
            proxy_lost(c, who + (io == IO_CLOSED ? " closed its connection" : ": its connection failed") +
                              " in the middle of sending collective #" + std::to_string(comm->next_seq) + ": " + why);
            return;
        }
        Pending p;
        p.reply_fd = fd;
        p.reply_seconds = seconds;
        ncclResult_t r = post(comm, kind, data.empty() ? nullptr : data.data(), nullptr, q.count, type,
                              (ncclRedOp_t)q.op, q.root, &p);
        if (r == ncclSuccess) r = compute(p);  // sends the output on success
        if (r == ncclSuccess) r = finish(p);
        if (!p.answered) {
            if (p.reply_fd < 0) return;  // the output could not be sent: the rank is gone
            if (send_answer(fd, r, comm->last_error, nullptr, 0, seconds, &why) != IO_OK) {
                proxy_lost(c, who + " closed its connection before it got the error of collective #" +
                                  std::to_string(p.seq) + ": " + why);
                return;
            }
        }
    }
}

// One connection: the handshake, then the collectives.
void proxy_main(int fd) {
    quiet = true;
    set_nodelay(fd);
    double seconds = 60;
    std::string why;
    bool timeout_ok = timeout_seconds(&seconds, &why);
    Hello h;
    if (read_all(fd, &h, sizeof(h), seconds, &why) != IO_OK || memcmp(h.magic, HELLO_MAGIC, 8) != 0) {
        close(fd);  // not a rank of the host NCCL
        return;
    }
    std::string where = "ncclCommInitRank(rank " + std::to_string(h.rank) + " of " + std::to_string(h.nranks) +
                        ", process " + std::to_string(h.pid) + ")";
    std::string key(h.id, sizeof(h.id));
    IdHeader id;
    memcpy(&id, h.id, sizeof(id));
    bool issued;
    {
        std::lock_guard<std::mutex> lock(hub().mu);
        issued = hub().nonces.count(id.nonce) > 0;
    }
    std::shared_ptr<Clique> c;
    ncclResult_t r;
    if (!timeout_ok) {
        r = fail(nullptr, ncclInvalidUsage, where + ": in the process that made the unique id: " + why);
    } else if (id.pid != (int32_t)getpid() || !issued) {
        r = fail(nullptr, ncclInvalidArgument,
                 where + ": the unique id does not match any id that process " + std::to_string(getpid()) +
                     " made with ncclGetUniqueId (wrong nonce): a stale or corrupted id?");
    } else if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks) {
        r = fail(nullptr, ncclInvalidArgument, where + ": need nranks >= 1 and 0 <= rank < nranks");
    } else {
        r = join_clique(key, h.nranks, h.rank, where, &c);
    }
    if (send_answer(fd, r, r == ncclSuccess ? std::string() : thread_last_error, nullptr, 0, seconds, &why) != IO_OK) {
        if (c) proxy_lost(*c, "rank " + std::to_string(h.rank) + " closed its connection while joining: " + why);
        close(fd);
        return;
    }
    if (r == ncclSuccess) {
        ncclComm comm(c, h.rank, h.nranks);
        proxy_serve(&comm, fd, seconds);
    }
    close(fd);
}

void hub_main(int listen_fd) {
    for (;;) {
        int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EINTR && errno != ECONNABORTED) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        std::thread(proxy_main, fd).detach();
    }
}

// Opens the hub's socket and starts its thread, once per process; returns its port (0 if none).
int start_hub(std::string* error) {
    Hub& h = hub();
    std::lock_guard<std::mutex> lock(h.mu);
    if (h.pid == (int)getpid()) {
        *error = h.error;
        return h.port;
    }
    h.pid = (int)getpid();
    h.port = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;  // any free port
    socklen_t len = sizeof(addr);
    if (fd < 0 || bind(fd, (sockaddr*)&addr, sizeof(addr)) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (sockaddr*)&addr, &len) != 0) {
        h.error = std::string("cannot listen on 127.0.0.1: ") + strerror(errno);
        if (fd >= 0) close(fd);
    } else {
        h.port = ntohs(addr.sin_port);
        std::thread(hub_main, fd).detach();
    }
    *error = h.error;
    return h.port;
}

// Connects a rank of another process to the hub named in the id and joins it.
ncclResult_t remote_init(ncclComm_t* comm, int nranks, const ncclUniqueId& commId, int rank, const IdHeader& id,
                         const std::string& where) {
    std::string tail = " (pid " + std::to_string(id.pid) + ", 127.0.0.1:" + std::to_string(id.port) + ")";
    if (id.port == 0)
        return fail(nullptr, ncclSystemError, where + ": the process that made the unique id" + tail +
                                                  " could not open its socket, so only its own threads can join");
    double seconds;
    std::string why;
    if (!timeout_seconds(&seconds, &why)) return fail(nullptr, ncclInvalidUsage, where + ": " + why);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return fail(nullptr, ncclSystemError, where + ": socket: " + strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(id.port);
    int err = 0;
    if (connect(fd, (sockaddr*)&addr, sizeof(addr)) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            Io io = wait_fd(fd, POLLOUT, deadline_in(seconds), false, &why);
            socklen_t len = sizeof(err);
            if (io == IO_TIMEOUT) err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
    }
    if (err != 0) {
        close(fd);
        return fail(nullptr, ncclSystemError, where + ": cannot reach the process that made the unique id" + tail +
                                                  ": " + strerror(err) + " (it has exited, or runs on another "
                                                  "machine: the host NCCL joins processes of one machine only)");
    }
    set_nodelay(fd);
    Hello h{};
    memcpy(h.magic, HELLO_MAGIC, 8);
    memcpy(h.id, commId.internal, sizeof(h.id));
    h.nranks = nranks;
    h.rank = rank;
    h.pid = (int32_t)getpid();
    Answer a;
    std::string message;
    Io io = write_all(fd, &h, sizeof(h), seconds, &why);
    if (io == IO_OK) io = read_answer(fd, &a, &message, seconds + ANSWER_GRACE_S, seconds, &why);
    if (io == IO_CLOSED) why = "it closed the connection (its process exited or crashed)";
    if (io != IO_OK) {
        close(fd);
        return fail(nullptr, ncclRemoteError, where + ": lost the connection to the process that made the unique id" +
                                                  tail + ": " + why);
    }
    if (a.result != ncclSuccess) {
        close(fd);
        return fail(nullptr, (ncclResult_t)a.result, message);
    }
    ncclComm* c = new ncclComm(nullptr, rank, nranks);
    c->fd = fd;
    c->hub_pid = id.pid;
    c->hub_port = id.port;
    *comm = c;
    return ncclSuccess;
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
    std::string error;
    IdHeader id{};
    memcpy(id.magic, ID_MAGIC, 8);
    id.pid = (int32_t)getpid();
    id.port = (uint16_t)start_hub(&error);  // 0 (no hub): only threads of this process can join
    std::random_device random;
    id.nonce = ((uint64_t)random() << 32 | random()) ^ (uint64_t)Clock::now().time_since_epoch().count();
    id.serial = unique_id_counter.fetch_add(1);
    {
        std::lock_guard<std::mutex> lock(hub().mu);
        hub().nonces.insert(id.nonce);
    }
    memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
    memcpy(uniqueId->internal, &id, sizeof(id));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    std::string where = "ncclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")";
    if (!comm) return fail(nullptr, ncclInvalidArgument, where + ": comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(nullptr, ncclInvalidArgument, where + ": need nranks >= 1 and 0 <= rank < nranks");
    // an id this process made: its own registry; one from another process: through its hub
    // (an id of unknown layout, e.g. filled by hand, is taken as this process's)
    IdHeader id;
    memcpy(&id, commId.internal, sizeof(id));
    bool ours = memcmp(id.magic, ID_MAGIC, 8) != 0;
    if (!ours && id.pid == (int32_t)getpid()) {
        std::lock_guard<std::mutex> lock(hub().mu);
        ours = hub().nonces.count(id.nonce) > 0;
    }
    if (!ours) return remote_init(comm, nranks, commId, rank, id, where);
    std::shared_ptr<Clique> c;
    ncclResult_t r = join_clique(std::string(commId.internal, sizeof(commId.internal)), nranks, rank, where, &c);
    if (r != ncclSuccess) return r;
    *comm = new ncclComm(c, rank, nranks);
    return ncclSuccess;
}

// A call on a non-blocking communicator that succeeded answers ncclInProgress, and the next poll too.
static ncclResult_t nonblocking_result(ncclComm* comm, ncclResult_t r) {
    if (r != ncclSuccess || !comm || !comm->nonblocking) return r;
    comm->pending = 1;
    return ncclInProgress;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
    if (config && (config->size != sizeof(ncclConfig_t) || config->magic != 0xcafebeef))
        return fail(nullptr, ncclInvalidArgument, "ncclCommInitRankConfig: config was not set up with NCCL_CONFIG_INITIALIZER");
    ncclResult_t r = ncclCommInitRank(comm, nranks, commId, rank);
    if (r != ncclSuccess) return r;
    (*comm)->nonblocking = config && config->blocking == 0;
    return nonblocking_result(*comm, r);
}

// Flushes the communicator's work (done here at every call) before ncclCommDestroy.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!comm) return fail(nullptr, ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
    if (comm->pending > 0)
        return fail(comm, ncclInvalidUsage, "ncclCommFinalize: the communicator's last call is still in progress "
                                            "(poll ncclCommGetAsyncError until it is not ncclInProgress first)");
    return nonblocking_result(comm, ncclSuccess);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
    if (!comm || ndev < 1) return fail(nullptr, ncclInvalidArgument, "ncclCommInitAll: need comm != NULL and ndev >= 1");
    std::shared_ptr<Clique> c = std::make_shared<Clique>(ndev);
    c->joined.assign(ndev, 1);
    c->n_joined = ndev;
    for (int r = 0; r < ndev; r++) comm[r] = new ncclComm(c, r, ndev);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm && comm->fd >= 0) {
        // a remote rank says bye, so that its hub does not take the closing for a crash
        std::string ignored;
        Request q{MSG_BYE, 0, 0, 0, 0, 0, 0, 0};
        write_all(comm->fd, &q, sizeof(q), 1.0, &ignored);
        close(comm->fd);
    }
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm) {
        std::string why = "rank " + std::to_string(comm->rank) + " called ncclCommAbort";
        if (comm->clique) {
            std::lock_guard<std::mutex> lock(comm->clique->mu);
            break_clique(*comm->clique, why);
        } else if (comm->fd >= 0) {
            remote_break(comm, why);
            close(comm->fd);
        }
    }
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (!comm || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (!comm || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    if (!comm || !asyncError) return ncclInvalidArgument;
    if (comm->pending > 0) {  // a non-blocking call, not yet reported complete
        comm->pending--;
        *asyncError = ncclInProgress;
        return ncclSuccess;
    }
    if (!comm->clique) {  // a remote rank knows of its own failures only
        *asyncError = comm->lost ? ncclRemoteError : ncclSuccess;
        return ncclSuccess;
    }
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
    return group_depth > 0 ? collective(ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm) : nonblocking_result(comm, collective(ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return group_depth > 0 ? collective(REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm) : nonblocking_result(comm, collective(REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return group_depth > 0 ? collective(ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm) : nonblocking_result(comm, collective(ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return group_depth > 0 ? collective(BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm) : nonblocking_result(comm, collective(BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm));
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
    // a group on non-blocking communicators ends in progress on each of them
    bool nonblocking = false;
    for (Pending& p : group_pending) {
        if (result == ncclSuccess && p.comm && p.comm->nonblocking) {
            p.comm->pending = 1;
            nonblocking = true;
        }
    }
    group_pending.clear();
    group_result = ncclSuccess;
    return result == ncclSuccess && nonblocking ? ncclInProgress : result;
}
