// Rendezvous: how the ranks of a data-parallel run get the 128-byte id that rank 0 drew (the NCCL
// unique id) before any communicator exists. No MPI, no CUDA, no NCCL here: the id is 128 opaque
// bytes. Two ways, chosen by runtime/distributed.h (DIST_RENDEZVOUS set: TCP; else the file):
//
//   file  rank 0 writes <DIST_ID_DIR>/nccl_id_<run id>.bin (to a temporary name, fsync, rename, so
//         nobody reads half a file); the others poll for it every 20 ms, at most timeout_s, and read
//         it. DIST_ID_DIR is a directory every rank can read (/tmp: one node; a shared file system
//         across nodes). Rank 0 removes it once the communicator is up (every rank has read it).
//   tcp   DIST_RENDEZVOUS=tcp://HOST:PORT (or HOST:PORT): rank 0 listens on PORT, the others
//         connect to HOST:PORT (retrying every 50 ms while rank 0 is not listening yet) and each
//         receives the id. Rank 0 returns, and closes the port, once all world-1 ranks hold it.
//
//   RendezvousRun run{rank, world, run_id, timeout_s};
//   RendezvousId id = rendezvous_exchange(run, endpoint, id_dir, drawn);  // rank 0 passes its id
//   ... form the communicator with id ...
//   rendezvous_finish(run, endpoint, id_dir);                           // rank 0: removes the file
//
// A leftover of an earlier or concurrent run is never taken for this run's id. The file carries the
// run id in its name, and again with the world size in its content (a reader refuses a file whose
// content is another run's or world's). Over TCP every rank's hello carries the run id, the world
// size and its rank; rank 0 answers a hello of another run or world, or of a rank it already
// served, with a refusal that holds no id, and keeps waiting for the right ranks; the refused rank
// throws an error naming both runs. Anything else (a hello with a wrong magic) is closed unanswered.
//
// TCP messages (integers big-endian, run ids 0-padded to 128 bytes):
//   rank r -> rank 0   hello  "RDVHELLO", world u32, rank u32, run id[128]                 144 bytes
//   rank 0 -> rank r   reply  "RDVREPLY", status u32, world u32, run id[128], id[128]      272 bytes
//                      status 0 accepted (the id is valid), 1 another run or world, 2 this rank
//                      was already served, 3 rank out of [1, world); world and run id are
//                      rank 0's own (for the refused rank's message), the id is zero unless accepted
//   rank r -> rank 0   ack    'A' once it holds the id: rank 0 counts a rank as served only then
// Rank 0 binds INADDR_ANY (every IPv4 interface), not HOST's address: HOST tells the other ranks
// where to find rank 0, and a host name often resolves on its own node to a loopback alias
// (127.0.1.1 on Debian), so a socket bound to it would be unreachable from the other nodes. The
// price: the port is taken on every interface of rank 0's node. IPv4 only.
//
// Every wait is bounded by timeout_s (rank 0: for all the ranks; the others: to connect and to
// receive), through poll() with a deadline; past it, a std::runtime_error names the endpoint, the
// ranks still missing (rank 0) and the fix. Host name resolution (getaddrinfo) is bounded by the
// system resolver's own timeout, not by timeout_s.
// Test: test/test_rendezvous.cpp.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

struct RendezvousId {
    char bytes[128];  // the NCCL unique id (sizeof(ncclUniqueId) == 128), opaque here
};

struct RendezvousRun {
    int rank = 0;
    int world = 1;
    std::string run_id;      // the same on every rank of a run, fresh per run; 1 to 127 bytes
    double timeout_s = 600;  // bound on every wait (DIST_TIMEOUT_S)
};

struct RendezvousEndpoint {
    std::string host;  // where the other ranks find rank 0: an IPv4 address or a host name
    int port = 0;      // 1..65535 (0 only through rendezvous_tcp_listen, for tests)
};

using RendezvousClock = std::chrono::steady_clock;

inline RendezvousClock::time_point rendezvous_deadline(double timeout_s) {
    return RendezvousClock::now() +
           std::chrono::duration_cast<RendezvousClock::duration>(std::chrono::duration<double>(timeout_s));
}

inline std::string rendezvous_seconds(double s) {
    char buf[32];
    snprintf(buf, sizeof buf, "%g", s);
    return buf;
}

// Throws if the run cannot rendezvous (these are checked earlier by dist_config_error).
inline void rendezvous_check_run(const RendezvousRun& run) {
    if (run.world < 1 || run.rank < 0 || run.rank >= run.world) {
        throw std::runtime_error("rendezvous: rank " + std::to_string(run.rank) + " is not in [0, world size " +
                                 std::to_string(run.world) + ")");
    }
    if (run.run_id.empty() || run.run_id.size() > 127) {
        throw std::runtime_error("rendezvous: run id '" + run.run_id +
                                 "' must be 1 to 127 bytes: set DIST_RUN_ID to the same fresh value on every rank");
    }
    if (!(run.timeout_s > 0)) {
        throw std::runtime_error("rendezvous: timeout " + rendezvous_seconds(run.timeout_s) +
                                 " s must be > 0 (DIST_TIMEOUT_S)");
    }
}

// ----------------------------------------------------------------------------
// the id through a file in a shared directory

// File layout: magic (8 bytes), world (int32, native order), run id (128 bytes, 0-padded), the id
// (128 bytes).
constexpr char RENDEZVOUS_FILE_MAGIC[8] = {'N', 'C', 'C', 'L', 'I', 'D', '0', '1'};
constexpr size_t RENDEZVOUS_FILE_HEADER = 8 + 4 + 128;  // what must match this run's
constexpr size_t RENDEZVOUS_FILE_BYTES = RENDEZVOUS_FILE_HEADER + sizeof(RendezvousId);

inline std::string rendezvous_file_path(const std::string& id_dir, const std::string& run_id) {
    return id_dir + "/nccl_id_" + run_id + ".bin";
}

inline void rendezvous_file_pack(const RendezvousRun& run, const RendezvousId& id, char* buf) {
    memset(buf, 0, RENDEZVOUS_FILE_BYTES);
    memcpy(buf, RENDEZVOUS_FILE_MAGIC, 8);
    int32_t world = run.world;
    memcpy(buf + 8, &world, 4);
    memcpy(buf + 12, run.run_id.data(), std::min<size_t>(run.run_id.size(), 127));
    memcpy(buf + RENDEZVOUS_FILE_HEADER, id.bytes, sizeof id.bytes);
}

// Rank 0: writes the id for this run atomically (temporary file, fsync, rename).
inline void rendezvous_file_write(const std::string& id_dir, const RendezvousRun& run, const RendezvousId& id) {
    rendezvous_check_run(run);
    std::string path = rendezvous_file_path(id_dir, run.run_id);
    std::string tmp = path + ".tmp." + std::to_string((long)getpid());
    char buf[RENDEZVOUS_FILE_BYTES];
    rendezvous_file_pack(run, id, buf);
    FILE* f = fopen(tmp.c_str(), "wb");
    if (f == nullptr) {
        throw std::runtime_error("rendezvous: cannot write " + tmp + ": " + strerror(errno) +
                                 " (DIST_ID_DIR must be a writable directory every rank can read)");
    }
    bool ok = fwrite(buf, 1, sizeof buf, f) == sizeof buf && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        std::string why = strerror(errno);
        remove(tmp.c_str());
        throw std::runtime_error("rendezvous: cannot write " + path + ": " + why);
    }
}

// Other ranks: waits for this run's file (polling every 20 ms, at most run.timeout_s) and reads it.
// A file under this run's name whose content is another run's or world's is refused.
inline RendezvousId rendezvous_file_read(const std::string& id_dir, const RendezvousRun& run) {
    rendezvous_check_run(run);
    std::string path = rendezvous_file_path(id_dir, run.run_id);
    auto deadline = rendezvous_deadline(run.timeout_s);
    char buf[RENDEZVOUS_FILE_BYTES];
    for (;;) {
        FILE* f = fopen(path.c_str(), "rb");
        if (f != nullptr) {
            size_t got = fread(buf, 1, sizeof buf, f);
            fclose(f);
            char want[RENDEZVOUS_FILE_BYTES];
            rendezvous_file_pack(run, RendezvousId{}, want);
            if (got != sizeof buf || memcmp(buf, want, RENDEZVOUS_FILE_HEADER) != 0) {
                int32_t world = 0;
                if (got >= 12) memcpy(&world, buf + 8, 4);
                throw std::runtime_error("rendezvous: " + path + " is not this run's id file (" +
                                         std::to_string(got) + " bytes, world " + std::to_string(world) +
                                         "; expected " + std::to_string(sizeof buf) + " bytes, world " +
                                         std::to_string(run.world) + ", run id " + run.run_id +
                                         "): remove it, or give this run a fresh DIST_RUN_ID");
            }
            RendezvousId id;
            memcpy(id.bytes, buf + RENDEZVOUS_FILE_HEADER, sizeof id.bytes);
            return id;
        }
        if (RendezvousClock::now() > deadline) {
            throw std::runtime_error("rendezvous: rank " + std::to_string(run.rank) + " waited " +
                                     rendezvous_seconds(run.timeout_s) + " s for " + path +
                                     ", which rank 0 writes: check that rank 0 runs, that every rank has the same "
                                     "DIST_RUN_ID, and that DIST_ID_DIR is a directory they all share "
                                     "(DIST_TIMEOUT_S sets the wait)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// Rank 0, once every rank has read the file (the communicator is up).
inline void rendezvous_file_remove(const std::string& id_dir, const RendezvousRun& run) {
    remove(rendezvous_file_path(id_dir, run.run_id).c_str());
}

// ----------------------------------------------------------------------------
// the endpoint: "tcp://HOST:PORT" or "HOST:PORT"

inline RendezvousEndpoint parse_rendezvous_endpoint(const std::string& value) {
    auto bad = [&](const std::string& why) {
        return std::runtime_error("rendezvous endpoint '" + value + "' (DIST_RENDEZVOUS): " + why +
                                  "; expected tcp://HOST:PORT or HOST:PORT, HOST an IPv4 address or a host name "
                                  "and PORT in 1-65535, e.g. tcp://10.0.0.1:29500");
    };
    std::string rest = value;
    size_t scheme = rest.find("://");
    if (scheme != std::string::npos) {
        if (rest.compare(0, scheme, "tcp") != 0) throw bad("the scheme '" + rest.substr(0, scheme) + "' is not tcp");
        rest = rest.substr(scheme + 3);
    }
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) throw bad("no port");
    RendezvousEndpoint ep;
    ep.host = rest.substr(0, colon);
    std::string port = rest.substr(colon + 1);
    if (ep.host.empty()) throw bad("no host");
    if (ep.host.find_first_of(":[]") != std::string::npos) throw bad("IPv6 addresses are not supported");
    if (ep.host.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_") !=
        std::string::npos) {
        throw bad("the host '" + ep.host + "' has characters of neither an address nor a host name");
    }
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
        throw bad("the port '" + port + "' is not a number");
    }
    ep.port = std::stoi(port);
    if (ep.port < 1 || ep.port > 65535) throw bad("the port " + port + " is not in 1-65535");
    return ep;
}

inline std::string rendezvous_endpoint_name(const RendezvousEndpoint& ep) {
    return ep.host + ":" + std::to_string(ep.port);
}

// ----------------------------------------------------------------------------
// TCP: sockets, waits and the messages

constexpr char RENDEZVOUS_HELLO_MAGIC[8] = {'R', 'D', 'V', 'H', 'E', 'L', 'L', 'O'};
constexpr char RENDEZVOUS_REPLY_MAGIC[8] = {'R', 'D', 'V', 'R', 'E', 'P', 'L', 'Y'};
constexpr char RENDEZVOUS_ACK = 'A';
constexpr size_t RENDEZVOUS_HELLO_BYTES = 8 + 4 + 4 + 128;
constexpr size_t RENDEZVOUS_REPLY_BYTES = 8 + 4 + 4 + 128 + sizeof(RendezvousId);
enum RendezvousStatus : uint32_t {
    RENDEZVOUS_ACCEPTED = 0,
    RENDEZVOUS_OTHER_RUN = 1,   // run id or world size differ from rank 0's
    RENDEZVOUS_DUPLICATE = 2,   // this rank number was already served (or is being served)
    RENDEZVOUS_BAD_RANK = 3,    // rank not in [1, world)
};
constexpr double RENDEZVOUS_RETRY_S = 0.05;  // a rank's pause between attempts to connect

// A socket, closed when it goes out of scope.
struct RendezvousSocket {
    int fd = -1;
    explicit RendezvousSocket(int f = -1) : fd(f) {}
    RendezvousSocket(RendezvousSocket&& o) noexcept : fd(o.fd) { o.fd = -1; }
    RendezvousSocket& operator=(RendezvousSocket&& o) noexcept {
        if (this != &o) {
            reset();
            fd = o.fd;
            o.fd = -1;
        }
        return *this;
    }
    RendezvousSocket(const RendezvousSocket&) = delete;
    RendezvousSocket& operator=(const RendezvousSocket&) = delete;
    ~RendezvousSocket() { reset(); }
    void reset() {
        if (fd >= 0) close(fd);
        fd = -1;
    }
};

// Milliseconds to the deadline for poll(), rounded up so that a wait never ends before it; 0 past it.
inline int rendezvous_ms_left(RendezvousClock::time_point deadline) {
    auto left = deadline - RendezvousClock::now();
    if (left <= RendezvousClock::duration::zero()) return 0;
    long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    return (int)std::min<long long>(ms, INT_MAX);
}

// poll() on fds until one is ready or the deadline passes (retried on EINTR); false at the deadline.
// Past the deadline it still looks once without waiting: an event that came in time (a thread that
// ran late) counts.
inline bool rendezvous_poll(pollfd* fds, size_t n, RendezvousClock::time_point deadline) {
    for (;;) {
        int ms = rendezvous_ms_left(deadline);
        int r = poll(fds, n, ms);
        if (r > 0) return true;
        if (r == 0 && ms == 0) return false;
        if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("rendezvous: poll: ") + strerror(errno));
    }
}

inline bool rendezvous_wait(int fd, short events, RendezvousClock::time_point deadline) {
    pollfd p{fd, events, 0};
    return rendezvous_poll(&p, 1, deadline);
}

// Sends n bytes on a non-blocking socket before the deadline: "" when done, else why not.
inline std::string rendezvous_send_all(int fd, const char* buf, size_t n, RendezvousClock::time_point deadline) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(fd, buf + done, n - done, MSG_NOSIGNAL);  // no SIGPIPE if the peer is gone
        if (w > 0) {
            done += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!rendezvous_wait(fd, POLLOUT, deadline)) return "timed out sending";
        } else {
            return strerror(errno);
        }
    }
    return "";
}

// Receives n bytes on a non-blocking socket before the deadline: "" when done, else why not.
inline std::string rendezvous_recv_all(int fd, char* buf, size_t n, RendezvousClock::time_point deadline) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = recv(fd, buf + done, n - done, 0);
        if (r > 0) {
            done += (size_t)r;
        } else if (r == 0) {
            return "rank 0 closed the connection before answering";
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!rendezvous_wait(fd, POLLIN, deadline)) return "timed out waiting for rank 0's answer";
        } else {
            return strerror(errno);
        }
    }
    return "";
}

inline void rendezvous_put_u32(char* p, uint32_t v) {
    v = htonl(v);
    memcpy(p, &v, 4);
}

inline uint32_t rendezvous_get_u32(const char* p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

// The run id as the messages carry it: 128 bytes, 0-padded.
inline void rendezvous_put_run_id(char* p, const std::string& run_id) {
    memset(p, 0, 128);
    memcpy(p, run_id.data(), std::min<size_t>(run_id.size(), 127));
}

inline std::string rendezvous_get_run_id(const char* p) { return std::string(p, strnlen(p, 127)); }

// hello: "RDVHELLO", world u32, rank u32, run id[128]
inline void rendezvous_pack_hello(const RendezvousRun& run, char* buf) {
    memcpy(buf, RENDEZVOUS_HELLO_MAGIC, 8);
    rendezvous_put_u32(buf + 8, (uint32_t)run.world);
    rendezvous_put_u32(buf + 12, (uint32_t)run.rank);
    rendezvous_put_run_id(buf + 16, run.run_id);
}

// reply: "RDVREPLY", status u32, world u32, run id[128], id[128] (zero unless accepted)
inline void rendezvous_pack_reply(const RendezvousRun& run, uint32_t status, const RendezvousId& id, char* buf) {
    memcpy(buf, RENDEZVOUS_REPLY_MAGIC, 8);
    rendezvous_put_u32(buf + 8, status);
    rendezvous_put_u32(buf + 12, (uint32_t)run.world);
    rendezvous_put_run_id(buf + 16, run.run_id);
    memset(buf + 144, 0, sizeof id.bytes);
    if (status == RENDEZVOUS_ACCEPTED) memcpy(buf + 144, id.bytes, sizeof id.bytes);
}

// ----------------------------------------------------------------------------
// TCP, rank 0: listen, then answer every hello until all other ranks hold the id

// A non-blocking socket listening on `port` of every IPv4 interface (port 0: a free port the kernel
// picks, see rendezvous_tcp_port; for tests).
inline RendezvousSocket rendezvous_tcp_listen(int port) {
    if (port < 0 || port > 65535) {
        throw std::runtime_error("rendezvous: port " + std::to_string(port) + " is not in 1-65535 (DIST_RENDEZVOUS)");
    }
    RendezvousSocket s(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.fd < 0) throw std::runtime_error(std::string("rendezvous: rank 0 cannot open a socket: ") + strerror(errno));
    int one = 1;  // a port left in TIME_WAIT by an earlier run can be bound at once
    setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons((uint16_t)port);
    if (bind(s.fd, (sockaddr*)&addr, sizeof addr) != 0 || listen(s.fd, SOMAXCONN) != 0) {
        throw std::runtime_error("rendezvous: rank 0 cannot listen on port " + std::to_string(port) + ": " +
                                 strerror(errno) + " (another run or program may hold it: pick another port in "
                                 "DIST_RENDEZVOUS=tcp://HOST:PORT)");
    }
    return s;
}

// The port a socket is bound to.
inline int rendezvous_tcp_port(const RendezvousSocket& s) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (getsockname(s.fd, (sockaddr*)&addr, &len) != 0) {
        throw std::runtime_error(std::string("rendezvous: getsockname: ") + strerror(errno));
    }
    return ntohs(addr.sin_port);
}

// One connection to rank 0: its hello, rank 0's reply, then (if accepted) the rank's ack.
struct RendezvousPeer {
    enum Stage { HELLO, REPLY, ACK, DONE };
    RendezvousSocket sock;
    Stage stage = HELLO;
    char in[RENDEZVOUS_HELLO_BYTES];   // the hello, then the ack
    size_t got = 0;
    char out[RENDEZVOUS_REPLY_BYTES];  // the reply
    size_t sent = 0;
    int rank = -1;                     // set once accepted: this rank is being served
};

// Rank 0's view of rank r: not seen, accepted and being sent the id, or holding it (acked).
enum RendezvousRankState { RENDEZVOUS_RANK_MISSING, RENDEZVOUS_RANK_SERVING, RENDEZVOUS_RANK_SERVED };

// The status rank 0 answers to a hello (whose magic is right).
inline uint32_t rendezvous_judge_hello(const RendezvousRun& run, const char* hello,
                                       const std::vector<RendezvousRankState>& ranks, int* rank) {
    char want[128];
    rendezvous_put_run_id(want, run.run_id);
    uint32_t world = rendezvous_get_u32(hello + 8), r = rendezvous_get_u32(hello + 12);
    if (world != (uint32_t)run.world || memcmp(hello + 16, want, 128) != 0) return RENDEZVOUS_OTHER_RUN;
    if (r < 1 || r >= (uint32_t)run.world) return RENDEZVOUS_BAD_RANK;
    if (ranks[r] != RENDEZVOUS_RANK_MISSING) return RENDEZVOUS_DUPLICATE;
    *rank = (int)r;
    return RENDEZVOUS_ACCEPTED;
}

// Takes every pending connection off the listening socket.
inline void rendezvous_accept_all(int listen_fd, std::vector<RendezvousPeer>& peers) {
    for (;;) {
        int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            peers.emplace_back();
            peers.back().sock = RendezvousSocket(fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        throw std::runtime_error(std::string("rendezvous: rank 0 cannot accept a connection: ") + strerror(errno));
    }
}

// Moves one connection on as far as its socket allows without blocking. A connection that breaks
// or misbehaves is closed (stage DONE); a rank whose connection breaks before its ack is missing again.
inline void rendezvous_step_peer(RendezvousPeer& p, const RendezvousRun& run, const RendezvousId& id,
                                 std::vector<RendezvousRankState>& ranks) {
    for (;;) {
        size_t want = p.stage == RendezvousPeer::HELLO ? RENDEZVOUS_HELLO_BYTES : 1;
        if (p.stage == RendezvousPeer::HELLO || p.stage == RendezvousPeer::ACK) {
            ssize_t r = recv(p.sock.fd, p.in + p.got, want - p.got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (r <= 0) break;  // closed or broken
            p.got += (size_t)r;
            if (p.got < want) continue;
            if (p.stage == RendezvousPeer::ACK) {
                if (p.in[0] != RENDEZVOUS_ACK) break;
                ranks[p.rank] = RENDEZVOUS_RANK_SERVED;
                p.stage = RendezvousPeer::DONE;
                p.sock.reset();
                return;
            }
            if (memcmp(p.in, RENDEZVOUS_HELLO_MAGIC, 8) != 0) break;  // not a rank of any run: no answer
            uint32_t status = rendezvous_judge_hello(run, p.in, ranks, &p.rank);
            if (status == RENDEZVOUS_ACCEPTED) ranks[p.rank] = RENDEZVOUS_RANK_SERVING;
            rendezvous_pack_reply(run, status, id, p.out);
            p.stage = RendezvousPeer::REPLY;
        } else if (p.stage == RendezvousPeer::REPLY) {
            ssize_t w = send(p.sock.fd, p.out + p.sent, RENDEZVOUS_REPLY_BYTES - p.sent, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (w < 0) break;
            p.sent += (size_t)w;
            if (p.sent < RENDEZVOUS_REPLY_BYTES) continue;
            if (p.rank < 0) break;  // a refusal, sent in full: close
            p.stage = RendezvousPeer::ACK;
            p.got = 0;
        } else {
            return;
        }
    }
    if (p.rank >= 0 && ranks[p.rank] == RENDEZVOUS_RANK_SERVING) ranks[p.rank] = RENDEZVOUS_RANK_MISSING;
    p.stage = RendezvousPeer::DONE;
    p.sock.reset();
}

// "2, 5, 7" (the first 16, then how many more).
inline std::string rendezvous_missing_ranks(const std::vector<RendezvousRankState>& ranks) {
    std::string list;
    int listed = 0, more = 0;
    for (size_t r = 1; r < ranks.size(); r++) {
        if (ranks[r] == RENDEZVOUS_RANK_SERVED) continue;
        if (listed == 16) {
            more++;
            continue;
        }
        list += (listed++ ? ", " : "") + std::to_string(r);
    }
    if (more > 0) list += " and " + std::to_string(more) + " more";
    return list;
}

inline std::runtime_error rendezvous_serve_timeout(const RendezvousEndpoint& ep, const RendezvousRun& run,
                                                   const std::vector<RendezvousRankState>& ranks) {
    std::string at = rendezvous_endpoint_name(ep);
    return std::runtime_error("rendezvous: rank 0 at " + at + " (run " + run.run_id + ", world " +
                              std::to_string(run.world) + ") waited " + rendezvous_seconds(run.timeout_s) +
                              " s; ranks still missing: " + rendezvous_missing_ranks(ranks) +
                              ". Start them with the same DIST_RUN_ID and DIST_RENDEZVOUS=tcp://" + at +
                              ", check that " + at + " is reachable from their nodes (an address of rank 0's node "
                              "that they can route to, no firewall on the port), or raise DIST_TIMEOUT_S");
}

// Rank 0, on a socket from rendezvous_tcp_listen (closed on return): gives `id` to ranks
// 1..world-1 of this run and returns once each has acknowledged it. ep names the endpoint in errors.
inline void rendezvous_tcp_serve_on(RendezvousSocket listener, const RendezvousEndpoint& ep,
                                    const RendezvousRun& run, const RendezvousId& id) {
    rendezvous_check_run(run);
    auto deadline = rendezvous_deadline(run.timeout_s);
    std::vector<RendezvousRankState> ranks(run.world, RENDEZVOUS_RANK_MISSING);
    ranks[0] = RENDEZVOUS_RANK_SERVED;
    std::vector<RendezvousPeer> peers;
    std::vector<pollfd> fds;
    while (std::count(ranks.begin(), ranks.end(), RENDEZVOUS_RANK_SERVED) < run.world) {
        if (RendezvousClock::now() >= deadline) throw rendezvous_serve_timeout(ep, run, ranks);
        fds.assign(1, pollfd{listener.fd, POLLIN, 0});
        for (const RendezvousPeer& p : peers) {
            fds.push_back(pollfd{p.sock.fd, (short)(p.stage == RendezvousPeer::REPLY ? POLLOUT : POLLIN), 0});
        }
        if (!rendezvous_poll(fds.data(), fds.size(), deadline)) throw rendezvous_serve_timeout(ep, run, ranks);
        for (size_t i = 0; i < peers.size(); i++) {
            if (fds[i + 1].revents != 0) rendezvous_step_peer(peers[i], run, id, ranks);
        }
        peers.erase(std::remove_if(peers.begin(), peers.end(),
                                   [](const RendezvousPeer& p) { return p.stage == RendezvousPeer::DONE; }),
                    peers.end());
        if (fds[0].revents != 0) rendezvous_accept_all(listener.fd, peers);
    }
}

// Rank 0: listens on ep.port (every interface) and serves the id, see rendezvous_tcp_serve_on.
inline void rendezvous_tcp_serve(const RendezvousEndpoint& ep, const RendezvousRun& run, const RendezvousId& id) {
    rendezvous_check_run(run);
    rendezvous_tcp_serve_on(rendezvous_tcp_listen(ep.port), ep, run, id);
}

// ----------------------------------------------------------------------------
// TCP, ranks 1..world-1: connect (retrying), hello, the reply, ack

// HOST:PORT as an IPv4 socket address; a temporary resolver failure is retried until the deadline.
inline sockaddr_in rendezvous_resolve(const RendezvousEndpoint& ep, RendezvousClock::time_point deadline) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    std::string port = std::to_string(ep.port);
    for (;;) {
        addrinfo* found = nullptr;
        int r = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &found);
        if (r == 0) {
            sockaddr_in addr;
            memcpy(&addr, found->ai_addr, sizeof addr);
            freeaddrinfo(found);
            return addr;
        }
        if (r != EAI_AGAIN || rendezvous_ms_left(deadline) == 0) {
            throw std::runtime_error("rendezvous: cannot resolve the host '" + ep.host + "' of " +
                                     rendezvous_endpoint_name(ep) + " (" + gai_strerror(r) +
                                     "): give DIST_RENDEZVOUS rank 0's IPv4 address or a host name every node "
                                     "resolves");
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(RENDEZVOUS_RETRY_S));
    }
}

// A TCP connection to addr before the deadline, or an empty socket and *why.
inline RendezvousSocket rendezvous_connect(const sockaddr_in& addr, RendezvousClock::time_point deadline,
                                           std::string* why) {
    RendezvousSocket s(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.fd < 0) {
        *why = std::string("cannot open a socket: ") + strerror(errno);
        return RendezvousSocket();
    }
    if (connect(s.fd, (const sockaddr*)&addr, sizeof addr) != 0) {
        if (errno != EINPROGRESS && errno != EINTR) {  // after EINTR the connection goes on, as after EINPROGRESS
            *why = strerror(errno);
            return RendezvousSocket();
        }
        if (!rendezvous_wait(s.fd, POLLOUT, deadline)) {
            *why = "timed out connecting";
            return RendezvousSocket();
        }
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            *why = strerror(err);
            return RendezvousSocket();
        }
    }
    // with nothing listening on a local port, a connect may pick that same port as its own and
    // connect to itself (TCP simultaneous open); that is no rank 0, and it would hold rank 0's port
    sockaddr_in self{}, peer{};
    socklen_t len_self = sizeof self, len_peer = sizeof peer;
    getsockname(s.fd, (sockaddr*)&self, &len_self);
    getpeername(s.fd, (sockaddr*)&peer, &len_peer);
    if (self.sin_port == peer.sin_port && self.sin_addr.s_addr == peer.sin_addr.s_addr) {
        *why = "Connection refused (connected to itself)";
        return RendezvousSocket();
    }
    return s;
}

// The error of a rank that rank 0 refused (reply = rank 0's answer).
inline std::runtime_error rendezvous_refusal(const RendezvousEndpoint& ep, const RendezvousRun& run,
                                             const char* reply) {
    uint32_t status = rendezvous_get_u32(reply + 8), world = rendezvous_get_u32(reply + 12);
    std::string served = rendezvous_get_run_id(reply + 16);
    std::string head = "rendezvous: rank 0 at " + rendezvous_endpoint_name(ep) + " serves run " + served +
                       " with world " + std::to_string(world) + "; this rank (" + std::to_string(run.rank) +
                       ") has run " + run.run_id + ", world " + std::to_string(run.world) + ": ";
    if (status == RENDEZVOUS_OTHER_RUN) {
        return std::runtime_error(head + "give every rank of a run the same DIST_RUN_ID and WORLD_SIZE (if rank 0 "
                                  "belongs to another run, give this run another port in DIST_RENDEZVOUS)");
    }
    if (status == RENDEZVOUS_DUPLICATE) {
        return std::runtime_error(head + "it has already given the id to a rank " + std::to_string(run.rank) +
                                  ": two processes have RANK=" + std::to_string(run.rank) +
                                  "; give every process its own rank");
    }
    return std::runtime_error(head + "it refused rank " + std::to_string(run.rank) + " (status " +
                              std::to_string(status) + "): ranks other than 0 must be in [1, world size)");
}

// One attempt: connect, hello, reply, ack. True with *id on success; false with *why on a failure
// worth retrying (rank 0 not listening yet, a broken connection); throws if rank 0 refused this rank.
inline bool rendezvous_try_fetch(const sockaddr_in& addr, const RendezvousEndpoint& ep, const RendezvousRun& run,
                                 RendezvousClock::time_point deadline, RendezvousId* id, std::string* why) {
    RendezvousSocket s = rendezvous_connect(addr, deadline, why);
    if (s.fd < 0) return false;
    char hello[RENDEZVOUS_HELLO_BYTES], reply[RENDEZVOUS_REPLY_BYTES];
    rendezvous_pack_hello(run, hello);
    *why = rendezvous_send_all(s.fd, hello, sizeof hello, deadline);
    if (!why->empty()) return false;
    *why = rendezvous_recv_all(s.fd, reply, sizeof reply, deadline);
    if (!why->empty()) return false;
    if (memcmp(reply, RENDEZVOUS_REPLY_MAGIC, 8) != 0) {
        throw std::runtime_error("rendezvous: " + rendezvous_endpoint_name(ep) +
                                 " answered, but not as a rank 0 (another program listens on that port?): "
                                 "pick a free port for DIST_RENDEZVOUS");
    }
    if (rendezvous_get_u32(reply + 8) != RENDEZVOUS_ACCEPTED) throw rendezvous_refusal(ep, run, reply);
    memcpy(id->bytes, reply + 144, sizeof id->bytes);
    const char ack = RENDEZVOUS_ACK;
    *why = rendezvous_send_all(s.fd, &ack, 1, deadline);
    return why->empty();
}

// Ranks 1..world-1: rank 0's id, fetched from ep (connecting every 50 ms until rank 0 listens),
// within run.timeout_s in all.
inline RendezvousId rendezvous_tcp_fetch(const RendezvousEndpoint& ep, const RendezvousRun& run) {
    rendezvous_check_run(run);
    if (run.rank == 0) throw std::runtime_error("rendezvous: rank 0 serves the id, it does not fetch it");
    auto deadline = rendezvous_deadline(run.timeout_s);
    sockaddr_in addr = rendezvous_resolve(ep, deadline);
    std::string why;
    for (;;) {
        RendezvousId id;
        if (rendezvous_try_fetch(addr, ep, run, deadline, &id, &why)) return id;
        // pause; if that reaches the deadline, give up now, with the last real attempt's reason
        int ms = rendezvous_ms_left(deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, (int)(RENDEZVOUS_RETRY_S * 1000))));
        if (rendezvous_ms_left(deadline) == 0) {
            std::string at = rendezvous_endpoint_name(ep);
            throw std::runtime_error("rendezvous: rank " + std::to_string(run.rank) + " (run " + run.run_id +
                                     ", world " + std::to_string(run.world) + ") got no id from rank 0 at " + at +
                                     " within " + rendezvous_seconds(run.timeout_s) + " s (last attempt: " + why +
                                     "): check that rank 0 runs and listens on that port, that " + at +
                                     " is reachable from this node (address, firewall), that every rank has the "
                                     "same DIST_RUN_ID, or raise DIST_TIMEOUT_S");
        }
    }
}

// ----------------------------------------------------------------------------
// either way

// Every rank: rank 0 publishes `drawn` and returns it; the others return rank 0's id. endpoint ""
// (DIST_RENDEZVOUS unset): through the file in id_dir; else over TCP (tcp://HOST:PORT or HOST:PORT).
inline RendezvousId rendezvous_exchange(const RendezvousRun& run, const std::string& endpoint,
                                        const std::string& id_dir, const RendezvousId& drawn) {
    if (run.world == 1) return drawn;
    if (endpoint.empty()) {
        if (run.rank != 0) return rendezvous_file_read(id_dir, run);
        rendezvous_file_write(id_dir, run, drawn);
        return drawn;
    }
    RendezvousEndpoint ep = parse_rendezvous_endpoint(endpoint);
    if (run.rank != 0) return rendezvous_tcp_fetch(ep, run);
    rendezvous_tcp_serve(ep, run, drawn);
    return drawn;
}

// Rank 0, once every rank has used the id (the communicator is up): removes the file; nothing is
// left over TCP (rank 0 closed its port when every rank had acknowledged the id).
inline void rendezvous_finish(const RendezvousRun& run, const std::string& endpoint, const std::string& id_dir) {
    if (run.rank == 0 && run.world > 1 && endpoint.empty()) rendezvous_file_remove(id_dir, run);
}
