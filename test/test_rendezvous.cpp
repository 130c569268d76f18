// The rendezvous of a data-parallel run (runtime/rendezvous.h), on the host: the endpoint parser; the
// file (writer then readers, a reader before the writer, another run's or world's file, a missing
// file); TCP between threads and between fork()ed processes on 127.0.0.1 (world 3, every rank gets
// rank 0's exact bytes, ranks that connect before rank 0 listens, another run's rank and a duplicate
// rank refused while the right ranks get the id, a rank that never connects, rank 0 absent).
// Ports: a test that can let rank 0 listen first takes a port the kernel picks (listen on port 0);
// one whose ranks must connect before rank 0 listens, or find nobody there, holds a reserved port
// (PortReservation), so that parallel runs of this test, or other programs, cannot collide with it.
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/rendezvous.h"
#include "test/temp_dir.h"

// A wait that must expire gets SHORT_TIMEOUT_S; one that must not, LONG_TIMEOUT_S (a failure then
// shows as an error, not a hang). An expired wait must end in [timeout, timeout + LATE_S]: the code
// overshoots its deadline by at most one 20 ms file poll or one poll()/sleep rounded up to 1 ms; the
// rest of LATE_S is for a thread scheduled late on a busy machine (2 cores shared with builds).
constexpr double SHORT_TIMEOUT_S = 1.0;
constexpr double LONG_TIMEOUT_S = 10.0;
constexpr double LATE_S = 0.5;

// 128 bytes that differ with the seed, zero bytes included (the id is binary, not a string).
static RendezvousId id_of(unsigned seed) {
    RendezvousId id;
    for (int i = 0; i < 128; i++) id.bytes[i] = (char)((i * 37 + seed * 101) & 0xff);
    return id;
}

static bool same(const RendezvousId& a, const RendezvousId& b) { return memcmp(a.bytes, b.bytes, 128) == 0; }

static std::string fresh_run_id() {
    static std::atomic<int> counter{0};
    return "rdv" + std::to_string((long)getpid()) + "_" + std::to_string(counter++);
}

static RendezvousRun run_of(int rank, int world, const std::string& run_id, double timeout_s) {
    RendezvousRun run;
    run.rank = rank;
    run.world = world;
    run.run_id = run_id;
    run.timeout_s = timeout_s;
    return run;
}

static double seconds_since(RendezvousClock::time_point start) {
    return std::chrono::duration<double>(RendezvousClock::now() - start).count();
}

// What a call did: its exception's message ("" if none) and how long it took.
struct Outcome {
    std::string error;
    double seconds = 0;
};

static Outcome outcome_of(const std::function<void()>& f) {
    Outcome o;
    auto start = RendezvousClock::now();
    try {
        f();
    } catch (const std::exception& e) {
        o.error = e.what();
    }
    o.seconds = seconds_since(start);
    return o;
}

static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A port held for the test: a socket bound to a port the kernel picks, with SO_REUSEADDR, never
// listening. Connections to it are refused; Linux lets rank 0's socket (SO_REUSEADDR too) bind it
// and listen; nobody else gets it (the kernel never picks a bound port for a bind to port 0 or for
// a connection's own port; an explicit bind without SO_REUSEADDR fails).
struct PortReservation {
    RendezvousSocket sock;
    int port = 0;
    PortReservation() : sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        REQUIRE(sock.fd >= 0);
        int one = 1;
        REQUIRE(setsockopt(sock.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
        addr.sin_port = 0;
        REQUIRE(bind(sock.fd, (sockaddr*)&addr, sizeof addr) == 0);
        port = rendezvous_tcp_port(sock);
    }
};

// A blocking socket connected to 127.0.0.1:port, or an empty one if nothing listens there (on the
// loopback, a refusal comes at once).
static RendezvousSocket connect_loopback(int port) {
    RendezvousSocket s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(s.fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)port);
    if (connect(s.fd, (sockaddr*)&addr, sizeof addr) != 0) s.reset();
    return s;
}

static bool someone_listens(int port) { return connect_loopback(port).fd >= 0; }

// A thread joined when it goes out of scope: a failed REQUIRE then waits for it (at most its
// timeout) instead of ending the program with the thread still running.
struct JoiningThread {
    std::thread thread;
    template <class F>
    explicit JoiningThread(F f) : thread(f) {}
    ~JoiningThread() { join(); }
    void join() {
        if (thread.joinable()) thread.join();
    }
};

static std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    REQUIRE(d != nullptr);
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    return names;
}

// ----------------------------------------------------------------------------
// child processes

struct Child {
    pid_t pid;
    int fd;  // the read end of the pipe the child reports on
};

// Runs f in a fork()ed process; it reports "ok:" + f's result, or "error:" + its exception's message.
static Child spawn(const std::function<std::string()>& f) {
    int p[2];
    REQUIRE(pipe(p) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        std::string report;
        try {
            report = "ok:" + f();
        } catch (const std::exception& e) {
            report = std::string("error:") + e.what();
        }
        size_t done = 0;
        while (done < report.size()) {
            ssize_t w = write(p[1], report.data() + done, report.size() - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) _exit(2);
            done += (size_t)w;
        }
        _exit(0);  // no doctest teardown in the child
    }
    close(p[1]);
    return Child{pid, p[0]};
}

// The child's report, waiting at most `seconds` (then it is killed and the report says so).
static std::string collect(Child c, double seconds) {
    auto deadline = rendezvous_deadline(seconds);
    std::string report;
    char buf[4096];
    bool hung = false;
    for (;;) {
        if (!rendezvous_wait(c.fd, POLLIN, deadline)) {
            hung = true;
            break;
        }
        ssize_t r = read(c.fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        report.append(buf, (size_t)r);
    }
    close(c.fd);
    if (hung) kill(c.pid, SIGKILL);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (hung) return "error:the child did not finish within " + rendezvous_seconds(seconds) + " s";
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "error:the child crashed";
    return report;
}

static std::string id_text(const RendezvousId& id) { return std::string(id.bytes, 128); }

// ----------------------------------------------------------------------------
// the endpoint

TEST_CASE("endpoint: tcp://HOST:PORT and HOST:PORT; a malformed one is named with the expected form") {
    RendezvousEndpoint ep = parse_rendezvous_endpoint("tcp://10.0.0.1:29500");
    CHECK(ep.host == "10.0.0.1");
    CHECK(ep.port == 29500);
    ep = parse_rendezvous_endpoint("node-07.cluster:1");
    CHECK(ep.host == "node-07.cluster");
    CHECK(ep.port == 1);
    ep = parse_rendezvous_endpoint("localhost:65535");
    CHECK(ep.host == "localhost");
    CHECK(ep.port == 65535);

    struct Bad {
        const char* value;
        const char* why;
    };
    const Bad bad[] = {
        {"host", "no port"},
        {"host:0", "not in 1-65535"},
        {"host:70000", "not in 1-65535"},
        {"host:99999999", "not a number"},
        {"tcp://:x", "no host"},
        {":29500", "no host"},
        {"host:", "not a number"},
        {"host:x", "not a number"},
        {"host:-1", "not a number"},
        {"host:29500/", "not a number"},
        {"udp://host:29500", "scheme"},
        {"[::1]:29500", "IPv6"},
        {"ho st:29500", "host 'ho st'"},
        {"", "no port"},
    };
    for (const Bad& b : bad) {
        std::string err = outcome_of([&] { parse_rendezvous_endpoint(b.value); }).error;
        INFO(b.value, " -> ", err);
        CHECK(has(err, std::string("'") + b.value + "'"));
        CHECK(has(err, b.why));
        CHECK(has(err, "tcp://HOST:PORT"));
        CHECK(has(err, "1-65535"));
    }
}

// ----------------------------------------------------------------------------
// the file

TEST_CASE("file: a reader before the writer, readers after it; another run's file is ignored") {
    TempDir dir("test_rendezvous");
    std::string run_id = fresh_run_id(), stale_run = fresh_run_id();
    // an earlier run's file (another run id), written first: it must not be read
    RendezvousId stale = id_of(1), sent = id_of(2);
    rendezvous_file_write(dir.path, run_of(0, 3, stale_run, 1), stale);

    RendezvousId early{};
    Outcome early_outcome;
    std::atomic<bool> started{false};
    std::thread reader([&] {  // starts before the writer: it must wait for the file
        auto start = RendezvousClock::now();
        started = true;
        early_outcome = outcome_of(
            [&] { early = rendezvous_file_read(dir.path, run_of(1, 3, run_id, LONG_TIMEOUT_S)); });
        early_outcome.seconds = seconds_since(start);
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rendezvous_file_write(dir.path, run_of(0, 3, run_id, LONG_TIMEOUT_S), sent);
    reader.join();
    CHECK(early_outcome.error == "");
    CHECK(early_outcome.seconds >= 0.2);  // it waited for the writer (who wrote 0.2 s after it started)
    CHECK(same(early, sent));
    CHECK(!same(early, stale));
    RendezvousId late = rendezvous_file_read(dir.path, run_of(2, 3, run_id, LONG_TIMEOUT_S));
    CHECK(same(late, sent));

    // rank 0 removes this run's file; the other run's stays; no temporary file is left behind
    CHECK(files_in(dir.path).size() == 2);
    rendezvous_file_remove(dir.path, run_of(0, 3, run_id, 1));
    std::vector<std::string> left = files_in(dir.path);
    REQUIRE(left.size() == 1);
    CHECK(left[0] == "nccl_id_" + stale_run + ".bin");
}

TEST_CASE("file: another world's or run's content under this run's name is refused; a missing file times out") {
    TempDir dir("test_rendezvous");
    // a reused run id with another world size
    std::string reused = fresh_run_id();
    rendezvous_file_write(dir.path, run_of(0, 4, reused, 1), id_of(3));
    std::string path = rendezvous_file_path(dir.path, reused);
    std::string err = outcome_of([&] { rendezvous_file_read(dir.path, run_of(1, 3, reused, 1)); }).error;
    CHECK(has(err, path + " is not this run's id file"));
    CHECK(has(err, "world 4"));
    CHECK(has(err, "DIST_RUN_ID"));

    // another run's file renamed to this run's name: the run id inside does not match
    std::string other = fresh_run_id(), mine = fresh_run_id();
    rendezvous_file_write(dir.path, run_of(0, 3, other, 1), id_of(4));
    REQUIRE(rename(rendezvous_file_path(dir.path, other).c_str(), rendezvous_file_path(dir.path, mine).c_str()) == 0);
    err = outcome_of([&] { rendezvous_file_read(dir.path, run_of(1, 3, mine, 1)); }).error;
    CHECK(has(err, rendezvous_file_path(dir.path, mine) + " is not this run's id file"));

    // a truncated file
    std::string cut = fresh_run_id();
    FILE* f = fopen(rendezvous_file_path(dir.path, cut).c_str(), "wb");
    REQUIRE(f != nullptr);
    fwrite("NCCLID01", 1, 8, f);
    fclose(f);
    err = outcome_of([&] { rendezvous_file_read(dir.path, run_of(1, 3, cut, 1)); }).error;
    CHECK(has(err, "(8 bytes"));

    // nobody writes this run's file: the wait ends at the timeout with an error naming the file
    std::string lonely = fresh_run_id();
    Outcome o = outcome_of([&] { rendezvous_file_read(dir.path, run_of(2, 3, lonely, SHORT_TIMEOUT_S)); });
    CHECK(has(o.error, "rank 2 waited 1 s for " + rendezvous_file_path(dir.path, lonely)));
    CHECK(has(o.error, "DIST_TIMEOUT_S"));
    CHECK(has(o.error, "DIST_ID_DIR"));
    CHECK(o.seconds >= SHORT_TIMEOUT_S);
    CHECK(o.seconds <= SHORT_TIMEOUT_S + LATE_S);
}

// ----------------------------------------------------------------------------
// TCP

TEST_CASE("tcp, threads: world 3, every rank gets rank 0's exact bytes; rank 0 then closes the port") {
    RendezvousSocket listener = rendezvous_tcp_listen(0);
    int port = rendezvous_tcp_port(listener);
    std::string run_id = fresh_run_id();
    RendezvousId sent = id_of(5), got[3] = {};
    Outcome outcomes[3];
    std::thread rank0([&] {
        outcomes[0] = outcome_of([&] {
            rendezvous_tcp_serve_on(std::move(listener), {"127.0.0.1", port}, run_of(0, 3, run_id, LONG_TIMEOUT_S),
                                    sent);
        });
    });
    // rank 2 finds rank 0 by name, through getaddrinfo
    const char* hosts[3] = {"", "127.0.0.1", "localhost"};
    std::thread ranks[2];
    for (int r = 1; r < 3; r++) {
        ranks[r - 1] = std::thread([&, r] {
            outcomes[r] = outcome_of(
                [&] { got[r] = rendezvous_tcp_fetch({hosts[r], port}, run_of(r, 3, run_id, LONG_TIMEOUT_S)); });
        });
    }
    rank0.join();
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < 3; r++) CHECK_MESSAGE(outcomes[r].error == "", "rank ", r);
    CHECK(same(got[1], sent));
    CHECK(same(got[2], sent));
    CHECK(!someone_listens(port));
}

TEST_CASE("tcp, threads: ranks that connect before rank 0 listens still get the id") {
    PortReservation reserved;
    int port = reserved.port;
    std::string run_id = fresh_run_id();
    RendezvousId sent = id_of(6), got[3] = {};
    Outcome outcomes[3];
    std::atomic<int> started{0};
    std::thread ranks[2];
    for (int r = 1; r < 3; r++) {
        ranks[r - 1] = std::thread([&, r] {
            auto start = RendezvousClock::now();
            started++;
            outcomes[r] = outcome_of(
                [&] { got[r] = rendezvous_tcp_fetch({"127.0.0.1", port}, run_of(r, 3, run_id, LONG_TIMEOUT_S)); });
            outcomes[r].seconds = seconds_since(start);
        });
    }
    while (started < 2) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // several refused attempts each
    outcomes[0] = outcome_of([&] {
        rendezvous_tcp_serve({"127.0.0.1", port}, run_of(0, 3, run_id, LONG_TIMEOUT_S), sent);
    });
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < 3; r++) CHECK_MESSAGE(outcomes[r].error == "", "rank ", r);
    CHECK(outcomes[1].seconds >= 0.3);  // they waited for rank 0 (who listened 0.3 s after they started)
    CHECK(outcomes[2].seconds >= 0.3);
    CHECK(same(got[1], sent));
    CHECK(same(got[2], sent));
    CHECK(!someone_listens(port));
}

TEST_CASE("tcp, processes: world 3 as fork()ed ranks, the others started before rank 0") {
    PortReservation reserved;
    int port = reserved.port;
    std::string run_id = fresh_run_id();
    std::vector<Child> children;
    for (int r = 1; r < 3; r++) {
        children.push_back(spawn([&, r] {
            return id_text(rendezvous_tcp_fetch({"127.0.0.1", port}, run_of(r, 3, run_id, LONG_TIMEOUT_S)));
        }));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // rank 0 draws its id in its own process (from its pid) and reports what it served
    children.insert(children.begin(), spawn([&] {
        RendezvousId drawn = id_of((unsigned)getpid());
        rendezvous_tcp_serve({"127.0.0.1", port}, run_of(0, 3, run_id, LONG_TIMEOUT_S), drawn);
        return id_text(drawn);
    }));
    std::string reports[3];
    for (int r = 0; r < 3; r++) reports[r] = collect(children[r], LONG_TIMEOUT_S + 5);
    for (int r = 0; r < 3; r++) {
        CHECK_MESSAGE(reports[r].size() == 3 + 128, "rank ", r, ": ", reports[r]);
        CHECK_MESSAGE(reports[r].compare(0, 3, "ok:") == 0, "rank ", r, ": ", reports[r]);
    }
    CHECK(reports[1] == reports[0]);
    CHECK(reports[2] == reports[0]);
    CHECK(reports[0] != "ok:" + id_text(id_of((unsigned)getpid())));  // rank 0's own draw, not the parent's
}

TEST_CASE("tcp: another run's rank, another world's and a duplicate rank are refused; the right ranks get the id") {
    RendezvousSocket listener = rendezvous_tcp_listen(0);
    int port = rendezvous_tcp_port(listener);
    RendezvousEndpoint ep{"127.0.0.1", port};
    std::string run_id = fresh_run_id(), other_run = fresh_run_id();
    RendezvousId sent = id_of(7);
    Outcome served;
    std::atomic<bool> rank0_done{false};
    JoiningThread rank0([&] {
        served = outcome_of(
            [&] { rendezvous_tcp_serve_on(std::move(listener), ep, run_of(0, 3, run_id, LONG_TIMEOUT_S), sent); });
        rank0_done = true;
    });

    // a concurrent run cannot take the port
    std::string err = outcome_of([&] { rendezvous_tcp_listen(port); }).error;
    CHECK(has(err, "cannot listen on port " + std::to_string(port)));
    CHECK(has(err, "DIST_RENDEZVOUS"));

    // a rank of another run: refused, told whom it met, and no id
    std::string at = "rank 0 at 127.0.0.1:" + std::to_string(port);
    Outcome o = outcome_of([&] { rendezvous_tcp_fetch(ep, run_of(1, 3, other_run, LONG_TIMEOUT_S)); });
    CHECK(has(o.error, at + " serves run " + run_id + " with world 3; this rank (1) has run " + other_run +
                           ", world 3"));
    CHECK(has(o.error, "DIST_RUN_ID"));
    CHECK(o.seconds < LONG_TIMEOUT_S / 2);  // refused at once, not timed out
    // this run's id with another world size
    o = outcome_of([&] { rendezvous_tcp_fetch(ep, run_of(1, 4, run_id, LONG_TIMEOUT_S)); });
    CHECK(has(o.error, at + " serves run " + run_id + " with world 3; this rank (1) has run " + run_id +
                           ", world 4"));

    // not a hello at all: closed unanswered
    {
        RendezvousSocket raw = connect_loopback(port);
        REQUIRE(raw.fd >= 0);
        char junk[RENDEZVOUS_HELLO_BYTES];
        memset(junk, 'x', sizeof junk);
        REQUIRE(send(raw.fd, junk, sizeof junk, MSG_NOSIGNAL) == (ssize_t)sizeof junk);
        REQUIRE(rendezvous_wait(raw.fd, POLLIN, rendezvous_deadline(LONG_TIMEOUT_S)));
        char c;
        CHECK(recv(raw.fd, &c, 1, 0) == 0);  // end of stream: no answer
    }

    // rank 2's hello in three pieces, the reply read in pieces, then closed without the ack: rank 0
    // must put the pieces together, and count rank 2 as missing again (not served, not a duplicate)
    {
        RendezvousSocket raw = connect_loopback(port);
        REQUIRE(raw.fd >= 0);
        char hello[RENDEZVOUS_HELLO_BYTES], reply[RENDEZVOUS_REPLY_BYTES];
        rendezvous_pack_hello(run_of(2, 3, run_id, 1), hello);
        size_t cuts[4] = {0, 5, 100, sizeof hello};
        for (int i = 0; i < 3; i++) {
            REQUIRE(send(raw.fd, hello + cuts[i], cuts[i + 1] - cuts[i], MSG_NOSIGNAL) ==
                    (ssize_t)(cuts[i + 1] - cuts[i]));
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
        }
        size_t got = 0;
        auto deadline = rendezvous_deadline(LONG_TIMEOUT_S);
        while (got < sizeof reply && rendezvous_wait(raw.fd, POLLIN, deadline)) {
            ssize_t r = recv(raw.fd, reply + got, std::min<size_t>(7, sizeof reply - got), 0);
            if (r <= 0) break;
            got += (size_t)r;
        }
        REQUIRE(got == sizeof reply);
        CHECK(memcmp(reply, "RDVREPLY", 8) == 0);
        CHECK(rendezvous_get_u32(reply + 8) == RENDEZVOUS_ACCEPTED);
        CHECK(memcmp(reply + 144, sent.bytes, 128) == 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(!rank0_done);  // rank 2 never acknowledged the id

    RendezvousId got1{}, got2{};
    o = outcome_of([&] { got1 = rendezvous_tcp_fetch(ep, run_of(1, 3, run_id, LONG_TIMEOUT_S)); });
    CHECK(o.error == "");
    // a second process with rank 1
    o = outcome_of([&] { rendezvous_tcp_fetch(ep, run_of(1, 3, run_id, LONG_TIMEOUT_S)); });
    CHECK(has(o.error, "already given the id to a rank 1"));
    CHECK(has(o.error, "RANK=1"));
    o = outcome_of([&] { got2 = rendezvous_tcp_fetch(ep, run_of(2, 3, run_id, LONG_TIMEOUT_S)); });
    CHECK(o.error == "");
    rank0.join();
    CHECK(served.error == "");
    CHECK(same(got1, sent));
    CHECK(same(got2, sent));
}

TEST_CASE("tcp: a rank that never connects makes rank 0 fail at the timeout, naming it") {
    RendezvousSocket listener = rendezvous_tcp_listen(0);
    int port = rendezvous_tcp_port(listener);
    std::string run_id = fresh_run_id();
    RendezvousId sent = id_of(8), got{};
    Outcome rank1;
    std::thread t([&] {
        rank1 = outcome_of(
            [&] { got = rendezvous_tcp_fetch({"127.0.0.1", port}, run_of(1, 3, run_id, LONG_TIMEOUT_S)); });
    });
    Outcome rank0 = outcome_of([&] {
        rendezvous_tcp_serve_on(std::move(listener), {"127.0.0.1", port}, run_of(0, 3, run_id, SHORT_TIMEOUT_S), sent);
    });
    t.join();
    CHECK(has(rank0.error, "rank 0 at 127.0.0.1:" + std::to_string(port)));
    CHECK(has(rank0.error, "waited 1 s; ranks still missing: 2."));
    CHECK(has(rank0.error, "DIST_RUN_ID"));
    CHECK(has(rank0.error, "DIST_TIMEOUT_S"));
    CHECK(has(rank0.error, "reachable"));
    CHECK(rank0.seconds >= SHORT_TIMEOUT_S);
    CHECK(rank0.seconds <= SHORT_TIMEOUT_S + LATE_S);
    CHECK(rank1.error == "");  // rank 1 came and got the id
    CHECK(same(got, sent));
    CHECK(!someone_listens(port));  // closed on the way out
}

TEST_CASE("tcp: with rank 0 absent the others fail at the timeout, naming host:port (a thread and a process)") {
    PortReservation reserved;  // nobody listens on it
    int port = reserved.port;
    std::string run_id = fresh_run_id();
    RendezvousEndpoint ep{"127.0.0.1", port};
    Child child = spawn([&] {
        auto start = RendezvousClock::now();
        std::string err = outcome_of([&] { rendezvous_tcp_fetch(ep, run_of(2, 3, run_id, SHORT_TIMEOUT_S)); }).error;
        return rendezvous_seconds(seconds_since(start)) + "|" + err;
    });
    Outcome rank1 = outcome_of([&] { rendezvous_tcp_fetch(ep, run_of(1, 3, run_id, SHORT_TIMEOUT_S)); });
    std::string report = collect(child, LONG_TIMEOUT_S);
    REQUIRE(report.compare(0, 3, "ok:") == 0);
    size_t bar = report.find('|');
    REQUIRE(bar != std::string::npos);
    Outcome rank2{report.substr(bar + 1), std::stod(report.substr(3, bar - 3))};
    int rank = 1;
    for (const Outcome& o : {rank1, rank2}) {
        INFO("rank ", rank++, ": ", o.error);
        CHECK(has(o.error, "got no id from rank 0 at 127.0.0.1:" + std::to_string(port) + " within 1 s"));
        CHECK(has(o.error, "Connection refused"));
        CHECK(has(o.error, "DIST_TIMEOUT_S"));
        CHECK(has(o.error, "DIST_RUN_ID"));
        CHECK(o.seconds >= SHORT_TIMEOUT_S);
        CHECK(o.seconds <= SHORT_TIMEOUT_S + LATE_S);
    }
}

// ----------------------------------------------------------------------------
// either way

TEST_CASE("exchange: world 2 through the file and over TCP; world 1 needs neither") {
    TempDir dir("test_rendezvous");
    PortReservation reserved;
    std::string endpoints[2] = {"", "tcp://127.0.0.1:" + std::to_string(reserved.port)};
    for (const std::string& endpoint : endpoints) {
        INFO("endpoint '", endpoint, "'");
        std::string run_id = fresh_run_id();
        RendezvousId result[2];
        Outcome outcomes[2];
        std::thread ranks[2];
        for (int r = 0; r < 2; r++) {
            ranks[r] = std::thread([&, r] {
                outcomes[r] = outcome_of([&] {
                    result[r] = rendezvous_exchange(run_of(r, 2, run_id, LONG_TIMEOUT_S), endpoint, dir.path,
                                                    id_of(10 + r));  // each rank's own draw
                });
            });
        }
        for (std::thread& t : ranks) t.join();
        CHECK(outcomes[0].error == "");
        CHECK(outcomes[1].error == "");
        CHECK(same(result[0], id_of(10)));
        CHECK(same(result[1], id_of(10)));
        rendezvous_finish(run_of(1, 2, run_id, 1), endpoint, dir.path);  // not rank 0: leaves the file
        CHECK(files_in(dir.path).size() == (endpoint.empty() ? 1u : 0u));
        rendezvous_finish(run_of(0, 2, run_id, 1), endpoint, dir.path);
        CHECK(files_in(dir.path).empty());
    }
    RendezvousId alone = rendezvous_exchange(run_of(0, 1, "", 1), "", "/nonexistent", id_of(12));
    CHECK(same(alone, id_of(12)));
}
