// The host NCCL (simt/nccl_host.h) with ranks in separate processes, as scripts/launch.sh
// starts them: this binary runs itself again (`--rank-process ...`) as the other ranks, which
// join through the TCP hub of the process that made the unique id.
// - every collective the project uses gives, in each process, exactly the bytes it gives with
//   the ranks as threads of one process (the same clique computes both), for 2 and 3 ranks, and
//   when the id's maker takes no part;
// - a rank whose process exits makes the others fail at once, naming it; the death of the id's
//   process makes a remote rank fail at once; mismatched collectives are named on both sides;
//   a wrong nonce, a rank given twice and an id whose process has exited are refused with a
//   message.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include "test/temp_dir.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "layers/cuda_common.cuh"
#include "runtime/nccl_common.cuh"

extern char** environ;

typedef std::chrono::steady_clock Clock;

static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ----------------------------------------------------------------------------
// the collectives every rank runs

// Deterministic values per (collective, rank): random mantissas and exponents 2^-4..2^4, so
// that the order of a sum changes its rounding and an order other than the contract's shows.
static std::vector<float> floats(int which, int rank, size_t n) {
    uint64_t state = 0x9e3779b97f4a7c15ull * (uint64_t)(which * 64 + rank + 1);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        state += 0x9e3779b97f4a7c15ull;  // splitmix64
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        float unit = (float)(z >> 40) / (float)(1ull << 24) * 2.0f - 1.0f;  // [-1, 1)
        v[i] = ldexpf(unit, (int)((z >> 8) % 9) - 4);
    }
    return v;
}

static std::vector<uint16_t> bf16s(int which, int rank, size_t n) {
    std::vector<float> f = floats(which, rank, n);
    std::vector<uint16_t> v(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        v[i] = (uint16_t)(u >> 16);  // a bf16 value (truncated: any value will do)
    }
    return v;
}

// cudaMalloc/cudaMemcpy must work in the test and in the rank processes (no doctest there)
static void cuda_must(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(e));
    abort();
}

template <class T>
struct Dev {  // a cudaMalloc buffer
    T* p = nullptr;
    size_t n;
    explicit Dev(size_t count) : n(count) { cuda_must(cudaMalloc((void**)&p, n * sizeof(T)), "cudaMalloc"); }
    explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
        cuda_must(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    ~Dev() { cudaFree(p); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;
};

struct SuiteResult {
    ncclResult_t result = ncclSuccess;
    std::string error;          // which collective failed, and ncclGetLastError
    std::vector<char> outputs;  // every collective's output, concatenated
};

template <class T>
static void append(SuiteResult& s, const T* device, size_t n) {
    size_t at = s.outputs.size();
    s.outputs.resize(at + n * sizeof(T));
    cuda_must(cudaMemcpy(s.outputs.data() + at, device, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
}

// AllReduce (sum, avg; fp32, bf16; in place too), ReduceScatter, AllGather, Broadcast (in a group).
static SuiteResult run_suite(ncclComm_t comm, int rank, int nranks) {
    SuiteResult s;
    auto ok = [&](ncclResult_t r, const char* what) {
        if (r == ncclSuccess) return true;
        s.result = r;
        s.error = std::string(what) + ": " + ncclGetLastError(comm);
        return false;
    };
    const size_t n = (size_t)nranks;
    {
        Dev<float> in(floats(1, rank, 1000)), out(1000);
        if (!ok(ncclAllReduce(in.p, out.p, 1000, ncclFloat32, ncclSum, comm, 0), "AllReduce fp32 sum")) return s;
        append(s, out.p, 1000);
    }
    {
        Dev<float> x(floats(2, rank, 1000));
        if (!ok(ncclAllReduce(x.p, x.p, 1000, ncclFloat32, ncclAvg, comm, 0), "AllReduce fp32 avg")) return s;
        append(s, x.p, 1000);
    }
    {
        Dev<uint16_t> in(bf16s(3, rank, 777)), out(777);
        if (!ok(ncclAllReduce(in.p, out.p, 777, ncclBfloat16, ncclSum, comm, 0), "AllReduce bf16 sum")) return s;
        append(s, out.p, 777);
    }
    {
        Dev<uint16_t> x(bf16s(4, rank, 777));
        if (!ok(ncclAllReduce(x.p, x.p, 777, ncclBfloat16, ncclAvg, comm, 0), "AllReduce bf16 avg")) return s;
        append(s, x.p, 777);
    }
    {
        Dev<float> in(floats(5, rank, n * 300)), out(300);
        if (!ok(ncclReduceScatter(in.p, out.p, 300, ncclFloat32, ncclSum, comm, 0), "ReduceScatter fp32 sum")) return s;
        append(s, out.p, 300);
    }
    {
        Dev<uint16_t> x(bf16s(6, rank, n * 200));
        if (!ok(ncclReduceScatter(x.p, x.p + rank * 200, 200, ncclBfloat16, ncclAvg, comm, 0), "ReduceScatter bf16 avg"))
            return s;
        append(s, x.p + rank * 200, 200);
    }
    {
        Dev<float> in(floats(7, rank, 250)), out(n * 250);
        if (!ok(ncclAllGather(in.p, out.p, 250, ncclFloat32, comm, 0), "AllGather fp32")) return s;
        append(s, out.p, n * 250);
    }
    {
        Dev<uint16_t> x(bf16s(8, rank, n * 150));
        if (!ok(ncclAllGather(x.p + rank * 150, x.p, 150, ncclBfloat16, comm, 0), "AllGather bf16 in place")) return s;
        append(s, x.p, n * 150);
    }
    {
        // the two broadcasts in one group: a thread rank completes them at ncclGroupEnd, a rank in
        // another process runs each at its call
        Dev<float> in(floats(9, rank, 500)), out(500);
        Dev<uint16_t> x(bf16s(10, rank, 400));
        if (!ok(ncclGroupStart(), "ncclGroupStart")) return s;
        ncclResult_t r1 = ncclBroadcast(in.p, out.p, 500, ncclFloat32, nranks - 1, comm, 0);
        ncclResult_t r2 = ncclBroadcast(x.p, x.p, 400, ncclBfloat16, 0, comm, 0);
        ncclResult_t r3 = ncclGroupEnd();
        if (!ok(r1, "Broadcast fp32") || !ok(r2, "Broadcast bf16 in place") || !ok(r3, "ncclGroupEnd")) return s;
        append(s, out.p, 500);
        append(s, x.p, 400);
    }
    return s;
}

// ----------------------------------------------------------------------------
// the unique id on a command line, result files

static std::string id_to_hex(const ncclUniqueId& id) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned char b = (unsigned char)id.internal[i];
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

static ncclUniqueId id_from_hex(const std::string& s) {
    ncclUniqueId id{};
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES && 2 * i + 1 < (int)s.size(); i++)
        id.internal[i] = (char)std::stoi(s.substr(2 * i, 2), nullptr, 16);
    return id;
}

// Bytes that differ between two outputs (all of the longer one's excess too).
static size_t bytes_differing(const std::string& a, const std::vector<char>& b) {
    size_t n = std::min(a.size(), b.size()), differ = std::max(a.size(), b.size()) - n;
    for (size_t i = 0; i < n; i++) differ += a[i] != b[i];
    return differ;
}

// writes path through a temporary name (no REQUIRE: rank processes call it, not the test)
static void publish_file(const std::string& path, const std::string& bytes) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f << bytes;
    }
    rename(tmp.c_str(), path.c_str());  // whole or absent for a reader that polls
}

// A collective's outcome as a rank process reports it: result, seconds, message.
struct Outcome {
    int result = -1;
    double seconds = -1;
    std::string message;
};

static std::string outcome_text(ncclResult_t r, double seconds, const std::string& message) {
    std::ostringstream s;
    s << (int)r << "\n" << seconds << "\n" << message;
    return s.str();
}

static Outcome parse_outcome(const std::string& text) {
    Outcome o;
    std::istringstream s(text);
    s >> o.result >> o.seconds;
    std::getline(s, o.message);
    std::getline(s, o.message, '\0');
    return o;
}

// ----------------------------------------------------------------------------
// a rank process: `--rank-process mode id nranks rank file`

static int rank_process(const std::string& mode, const std::string& hex, int nranks, int rank, const std::string& file) {
    cudaSetDevice(rank);
    ncclUniqueId id{};
    if (mode == "id") {  // makes an id and exits: nobody can join it
        ncclGetUniqueId(&id);
        publish_file(file, id_to_hex(id));
        return 0;
    }
    if (mode == "hub") {
        // makes the id (so hosts the hub) and is rank 0: one collective, then dies
        ncclGetUniqueId(&id);
        publish_file(file, id_to_hex(id));
    } else {
        id = id_from_hex(hex);
    }
    ncclComm_t comm = nullptr;
    auto t0 = Clock::now();
    ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
    if (mode == "init") {  // reports the join and leaves
        publish_file(file, outcome_text(r, seconds_since(t0), ncclGetLastError(nullptr)));
        if (r == ncclSuccess) ncclCommDestroy(comm);
        return 0;
    }
    if (r != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank failed: %s\n", rank, ncclGetLastError(nullptr));
        return 1;
    }
    if (mode == "suite") {
        SuiteResult s = run_suite(comm, rank, nranks);
        if (s.result != ncclSuccess) {
            fprintf(stderr, "rank %d: %s\n", rank, s.error.c_str());
            return 1;
        }
        publish_file(file, std::string(s.outputs.begin(), s.outputs.end()));
        ncclCommDestroy(comm);
        return 0;
    }
    if (mode == "abort") {  // breaks the communicator for the others
        ncclCommAbort(comm);
        return 0;
    }
    Dev<float> x(std::vector<float>(8, 1.0f));
    if (mode == "mismatch") {  // 16 elements where the others reduce 8
        Dev<float> y(16);
        t0 = Clock::now();
        r = ncclAllReduce(y.p, y.p, 16, ncclFloat32, ncclSum, comm, 0);
        publish_file(file, outcome_text(r, seconds_since(t0), ncclGetLastError(comm)));
        ncclCommDestroy(comm);
        return 0;
    }
    // one collective that every rank takes part in
    if (ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0) != ncclSuccess) {
        fprintf(stderr, "rank %d: first collective failed: %s\n", rank, ncclGetLastError(comm));
        return 1;
    }
    if (mode == "die" || mode == "hub") _exit(0);  // as a crash: no ncclCommDestroy
    if (mode == "survive") {  // the second collective, which a dead rank misses
        t0 = Clock::now();
        r = ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0);
        publish_file(file, outcome_text(r, seconds_since(t0), ncclGetLastError(comm)));
        ncclCommDestroy(comm);
        return 0;
    }
    fprintf(stderr, "unknown rank process mode '%s'\n", mode.c_str());
    return 2;
}

// ----------------------------------------------------------------------------
// starting and waiting for rank processes

struct Child {
    pid_t pid = -1;
    std::string log;  // its stdout and stderr
};

static Child spawn_rank(const std::string& dir, const std::string& mode, const std::string& hex, int nranks, int rank,
                        const std::string& file) {
    Child c;
    c.log = dir + "/" + mode + "_rank" + std::to_string(rank) + ".log";
    std::vector<std::string> args = {"/proc/self/exe", "--rank-process", mode, hex.empty() ? "-" : hex,
                                     std::to_string(nranks), std::to_string(rank), file};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    int err = posix_spawn(&c.pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(err == 0);
    return c;
}

// Its exit code (128 + signal if killed); kills it after `seconds` (a hang).
static int wait_rank(Child& c, double seconds = 15) {
    auto t0 = Clock::now();
    int status = 0;
    for (;;) {
        pid_t got = waitpid(c.pid, &status, WNOHANG);
        if (got == c.pid) break;
        if (seconds_since(t0) > seconds) {
            kill(c.pid, SIGKILL);
            waitpid(c.pid, &status, 0);
            fprintf(stderr, "rank process %d still ran after %g s: killed\n", (int)c.pid, seconds);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define CHECK_EXITS_0(child)                                                        \
    do {                                                                            \
        int code_ = wait_rank(child);                                               \
        CHECK_MESSAGE(code_ == 0, "rank process log:\n" << read_file((child).log)); \
    } while (0)

// Every rank as a thread of this process: the reference.
static std::vector<SuiteResult> suite_with_threads(int nranks) {
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    std::vector<SuiteResult> results(nranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; r++) {
        threads.emplace_back([&, r] {
            cudaSetDevice(r);
            ncclComm_t comm = nullptr;
            results[r].result = ncclCommInitRank(&comm, nranks, id, r);
            if (results[r].result == ncclSuccess) results[r] = run_suite(comm, r, nranks);
            ncclCommDestroy(comm);
        });
    }
    for (auto& t : threads) t.join();
    return results;
}

// ----------------------------------------------------------------------------
// tests

TEST_CASE("ranks in 2 and 3 processes get exactly the bytes that thread ranks get") {
    for (int nranks : {2, 3}) {
        auto t0 = Clock::now();
        TempDir dir("nccl_processes");
        ncclUniqueId id;
        REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
        // rank 0 is a thread of this process (which made the id); the others are processes
        std::vector<Child> children;
        for (int r = 1; r < nranks; r++)
            children.push_back(spawn_rank(dir.path, "suite", id_to_hex(id), nranks, r, dir.path + "/out" + std::to_string(r)));
        SuiteResult rank0;
        std::thread t([&] {
            ncclComm_t comm = nullptr;
            rank0.result = ncclCommInitRank(&comm, nranks, id, 0);
            if (rank0.result == ncclSuccess) rank0 = run_suite(comm, 0, nranks);
            ncclCommDestroy(comm);
        });
        t.join();
        for (auto& c : children) CHECK_EXITS_0(c);
        double processes_s = seconds_since(t0);

        std::vector<SuiteResult> threads = suite_with_threads(nranks);
        INFO(nranks << " ranks; rank 0: " << rank0.error);
        REQUIRE(rank0.result == ncclSuccess);
        for (int r = 0; r < nranks; r++) REQUIRE(threads[r].result == ncclSuccess);
        REQUIRE(threads[0].outputs.size() > 0);
        CHECK(bytes_differing(std::string(rank0.outputs.begin(), rank0.outputs.end()), threads[0].outputs) == 0);
        for (int r = 1; r < nranks; r++) {
            INFO("rank " << r << " of " << nranks << ": " << threads[r].outputs.size() << " bytes");
            CHECK(bytes_differing(read_file(dir.path + "/out" + std::to_string(r)), threads[r].outputs) == 0);
        }
        // an independent check of the contract on the first collective (fp32 sum in rank order):
        // bitwise, since it prescribes the order
        std::vector<float> first(1000);
        memcpy(first.data(), rank0.outputs.data(), 1000 * sizeof(float));
        size_t wrong = 0;
        for (size_t i = 0; i < 1000; i++) {
            float sum = floats(1, 0, 1000)[i];
            for (int r = 1; r < nranks; r++) sum += floats(1, r, 1000)[i];
            wrong += memcmp(&sum, &first[i], 4) != 0;
        }
        CHECK(wrong == 0);
        MESSAGE(nranks << " ranks in processes: collectives in " << processes_s << " s");
    }
}

TEST_CASE("every rank a process, the id's maker taking no part") {
    TempDir dir("nccl_processes");
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    std::vector<Child> children;
    for (int r = 0; r < 2; r++)
        children.push_back(spawn_rank(dir.path, "suite", id_to_hex(id), 2, r, dir.path + "/out" + std::to_string(r)));
    for (auto& c : children) CHECK_EXITS_0(c);
    std::vector<SuiteResult> threads = suite_with_threads(2);
    for (int r = 0; r < 2; r++) {
        INFO("rank " << r << ": " << threads[r].outputs.size() << " bytes");
        REQUIRE(threads[r].result == ncclSuccess);
        CHECK(bytes_differing(read_file(dir.path + "/out" + std::to_string(r)), threads[r].outputs) == 0);
    }
}

TEST_CASE("a rank whose process exits makes the others fail at once, naming it") {
    TempDir dir("nccl_processes");
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    // rank 0: this process; rank 1: a process that survives; rank 2: one that exits after collective #0
    Child survivor = spawn_rank(dir.path, "survive", id_to_hex(id), 3, 1, dir.path + "/survivor");
    Child dying = spawn_rank(dir.path, "die", id_to_hex(id), 3, 2, "-");
    ncclComm_t comm = nullptr;
    REQUIRE(ncclCommInitRank(&comm, 3, id, 0) == ncclSuccess);
    Dev<float> x(std::vector<float>(8, 1.0f));
    REQUIRE(ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0) == ncclSuccess);
    auto t0 = Clock::now();
    ncclResult_t second = ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0);
    double seconds = seconds_since(t0);
    std::string message = ncclGetLastError(comm);
    ncclCommDestroy(comm);
    CHECK_EXITS_0(dying);
    CHECK_EXITS_0(survivor);
    Outcome other = parse_outcome(read_file(dir.path + "/survivor"));

    MESSAGE("rank 0 failed after " << seconds << " s: " << message);
    MESSAGE("rank 1 failed after " << other.seconds << " s: " << other.message);
    CHECK(second == ncclSystemError);
    CHECK(message.find("rank 2 of 3 closed its connection") != std::string::npos);
    CHECK(seconds < 2.0);  // the timeout is 4 s (main): this was the closed connection, noticed at once
    CHECK(other.result == ncclSystemError);
    CHECK(other.message.find("rank 2 of 3 closed its connection") != std::string::npos);
    CHECK(other.message.find("on rank 1 of 3") != std::string::npos);
    CHECK(other.seconds >= 0);
    CHECK(other.seconds < 2.0);
}

TEST_CASE("the death of the process that made the id makes a remote rank fail at once") {
    TempDir dir("nccl_processes");
    Child hub = spawn_rank(dir.path, "hub", "", 2, 0, dir.path + "/id");
    // this process is rank 1 of the child's communicator
    std::string hex;
    auto t_wait = Clock::now();
    while ((hex = read_file(dir.path + "/id")).empty() && seconds_since(t_wait) < 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(hex.size() == 2 * NCCL_UNIQUE_ID_BYTES);
    ncclComm_t comm = nullptr;
    REQUIRE(ncclCommInitRank(&comm, 2, id_from_hex(hex), 1) == ncclSuccess);
    int count = 0, rank = -1;
    CHECK(ncclCommCount(comm, &count) == ncclSuccess);
    CHECK(ncclCommUserRank(comm, &rank) == ncclSuccess);
    CHECK(count == 2);
    CHECK(rank == 1);
    Dev<float> x(std::vector<float>(8, 1.0f));
    REQUIRE(ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0) == ncclSuccess);
    std::vector<float> host(8);
    REQUIRE(cudaMemcpy(host.data(), x.p, 8 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host[7] == 2.0f);  // 1 + 1, exact
    auto t0 = Clock::now();
    ncclResult_t second = ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0);
    double seconds = seconds_since(t0);
    std::string message = ncclGetLastError(comm);
    auto t1 = Clock::now();
    ncclResult_t third = ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0);
    double third_seconds = seconds_since(t1);
    ncclResult_t async = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess);
    ncclCommDestroy(comm);
    CHECK_EXITS_0(hub);

    MESSAGE("rank 1 failed after " << seconds << " s: " << message);
    CHECK(second == ncclRemoteError);
    CHECK(message.find("ncclAllReduce #1") != std::string::npos);
    CHECK(message.find("on rank 1 of 2") != std::string::npos);
    CHECK(message.find("lost the connection to the process that made the unique id (pid " +
                       std::to_string(hub.pid)) != std::string::npos);
    CHECK(seconds < 2.0);  // the timeout is 4 s (main): this was the lost connection, noticed at once
    CHECK(third == ncclRemoteError);
    CHECK(third_seconds < 0.5);  // no second wait: the connection is known lost
    CHECK(async == ncclRemoteError);
}

TEST_CASE("collectives that differ between processes fail on both, naming both") {
    TempDir dir("nccl_processes");
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    Child other = spawn_rank(dir.path, "mismatch", id_to_hex(id), 2, 1, dir.path + "/other");
    ncclComm_t comm = nullptr;
    REQUIRE(ncclCommInitRank(&comm, 2, id, 0) == ncclSuccess);
    Dev<float> x(std::vector<float>(8, 1.0f));
    auto t0 = Clock::now();
    ncclResult_t r = ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0);
    double seconds = seconds_since(t0);
    std::string message = ncclGetLastError(comm);
    ncclCommDestroy(comm);
    CHECK_EXITS_0(other);
    Outcome o = parse_outcome(read_file(dir.path + "/other"));

    MESSAGE("rank 0: " << message);
    MESSAGE("rank 1: " << o.message);
    CHECK(r != ncclSuccess);
    CHECK(o.result != ncclSuccess);
    CHECK((r == ncclInvalidUsage || o.result == ncclInvalidUsage));  // the second to post sees the mismatch
    for (const std::string& m : {message, o.message}) {
        CHECK(m.find("rank 0 called ncclAllReduce(count 8, ncclFloat32, ncclSum") != std::string::npos);
        CHECK(m.find("rank 1 called ncclAllReduce(count 16, ncclFloat32, ncclSum") != std::string::npos);
    }
    CHECK(seconds < 2.0);  // found when both posted, not by the timeout
    CHECK(o.seconds < 2.0);
}

TEST_CASE("ncclCommAbort in a rank process breaks the communicator of the others") {
    TempDir dir("nccl_processes");
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    Child other = spawn_rank(dir.path, "abort", id_to_hex(id), 2, 1, "-");
    ncclComm_t comm = nullptr;
    REQUIRE(ncclCommInitRank(&comm, 2, id, 0) == ncclSuccess);
    CHECK_EXITS_0(other);  // it has aborted
    Dev<float> x(std::vector<float>(8, 1.0f));
    auto t0 = Clock::now();
    ncclResult_t r = ncclAllReduce(x.p, x.p, 8, ncclFloat32, ncclSum, comm, 0);
    double seconds = seconds_since(t0);
    std::string message = ncclGetLastError(comm);
    ncclCommDestroy(comm);
    CHECK(r == ncclSystemError);
    CHECK(message.find("rank 1 called ncclCommAbort") != std::string::npos);
    CHECK(seconds < 2.0);  // the timeout is 4 s (main): the abort was known at the call
}

TEST_CASE("an id whose process has exited is refused, with a message") {
    TempDir dir("nccl_processes");
    Child maker = spawn_rank(dir.path, "id", "", 2, 0, dir.path + "/id");
    CHECK_EXITS_0(maker);
    std::string hex = read_file(dir.path + "/id");
    REQUIRE(hex.size() == 2 * NCCL_UNIQUE_ID_BYTES);
    ncclComm_t comm = nullptr;
    auto t0 = Clock::now();
    CHECK(ncclCommInitRank(&comm, 2, id_from_hex(hex), 1) == ncclSystemError);
    std::string message = ncclGetLastError(nullptr);
    MESSAGE(message);
    CHECK(message.find("cannot reach the process that made the unique id (pid " + std::to_string(maker.pid)) !=
          std::string::npos);
    CHECK(seconds_since(t0) < 2.0);  // the timeout is 4 s (main): refused at once
    CHECK(comm == nullptr);
}

TEST_CASE("a wrong nonce and a rank given twice are refused, with a message") {
    TempDir dir("nccl_processes");
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    // the nonce is bytes 16..23 of the id (nccl_host.h): another value is not an id this process made
    ncclUniqueId forged = id;
    forged.internal[16] ^= 0x5a;
    ncclComm_t comm = nullptr;
    auto t0 = Clock::now();
    CHECK(ncclCommInitRank(&comm, 2, forged, 1) == ncclInvalidArgument);
    std::string message = ncclGetLastError(nullptr);
    MESSAGE("forged id: " << message);
    CHECK(message.find("wrong nonce") != std::string::npos);
    CHECK(seconds_since(t0) < 2.0);  // refused at once, not after the timeout
    CHECK(comm == nullptr);

    // rank 0 joins here (and waits for rank 1); a process that also claims rank 0 is refused,
    // then one with rank 1 completes the communicator
    ncclResult_t rank0 = ncclInternalError;
    std::atomic<bool> joining{false};
    std::thread t([&] {
        ncclComm_t c = nullptr;
        joining = true;
        rank0 = ncclCommInitRank(&c, 2, id, 0);
        ncclCommDestroy(c);
    });
    // this thread's rank 0 must be the first (joining takes microseconds; the process starts later still)
    while (!joining) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Child twice = spawn_rank(dir.path, "init", id_to_hex(id), 2, 0, dir.path + "/twice");
    CHECK_EXITS_0(twice);
    Outcome o = parse_outcome(read_file(dir.path + "/twice"));
    Child second = spawn_rank(dir.path, "init", id_to_hex(id), 2, 1, dir.path + "/second");
    CHECK_EXITS_0(second);
    Outcome o2 = parse_outcome(read_file(dir.path + "/second"));
    t.join();

    MESSAGE("rank 0 again: " << o.message);
    CHECK(o.result == ncclInvalidUsage);
    CHECK(o.message.find("rank 0 already joined") != std::string::npos);
    CHECK(o.seconds < 2.0);
    CHECK(o2.result == ncclSuccess);
    CHECK(rank0 == ncclSuccess);
}

int main(int argc, char** argv) {
    // every rank, here and in the processes (which inherit it), waits at most 4 s; a check that
    // a failure came within 2 s so shows it was detected, not timed out. Set once, before any
    // thread: setenv while the hub's threads read the environment would be a race.
    setenv("SIMT_NCCL_TIMEOUT_S", "4", 1);
    if (argc == 7 && std::string(argv[1]) == "--rank-process")
        return rank_process(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), argv[6]);
    doctest::Context context(argc, argv);
    return context.run();
}
