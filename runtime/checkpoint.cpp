// Checkpoint I/O (format: runtime/checkpoint.h).
#include "runtime/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

static std::string sys_error(const std::string& what, const std::string& path) {
    return "checkpoint " + path + ": " + what + " failed (" + strerror(errno) + ")";
}

uint64_t checkpoint_checksum(const void* data, size_t bytes, uint64_t h) {
    const uint8_t* p = (const uint8_t*)data;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + i * 8, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (size_t i = words * 8; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void config_to_header(CheckpointHeader& h, const GPT2Config& c) {
    h.max_seq_len = c.max_seq_len;
    h.vocab_size = c.vocab_size;
    h.padded_vocab_size = c.padded_vocab_size;
    h.num_layers = c.num_layers;
    h.num_heads = c.num_heads;
    h.channels = c.channels;
    h.attn = (int32_t)c.attn;
    h.p = c.p;
    h.rope_base = c.rope_base;
    h.learn_p = c.learn_p;
    h.attn_len = c.attn_len;
}

static GPT2Config config_from_header(const CheckpointHeader& h) {
    GPT2Config c;
    c.max_seq_len = h.max_seq_len;
    c.vocab_size = h.vocab_size;
    c.padded_vocab_size = h.padded_vocab_size;
    c.num_layers = h.num_layers;
    c.num_heads = h.num_heads;
    c.channels = h.channels;
    c.attn = (AttnKind)h.attn;
    c.p = h.p;
    c.rope_base = h.rope_base;
    c.learn_p = h.learn_p;
    c.attn_len = h.attn_len;
    return c;
}

// writes all n bytes or throws
static void write_all(int fd, const void* data, size_t n, const std::string& tmp) {
    const char* p = (const char*)data;
    while (n > 0) {
        ssize_t w = write(fd, p, std::min(n, (size_t)1 << 30));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            throw std::runtime_error(sys_error("writing", tmp));
        }
        p += w;
        n -= (size_t)w;
    }
}

// a piece of a file's contents
struct Bytes {
    const void* data;
    size_t size;
};

// Writes the pieces to path atomically: path.tmp, fsync, rename, fsync of the directory.
static void write_file_atomic(const std::string& path, const std::vector<Bytes>& pieces) {
    std::string tmp = path + ".tmp";
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error(sys_error("creating", tmp));
    try {
        for (const Bytes& b : pieces) write_all(fd, b.data, b.size, tmp);
        if (fsync(fd) != 0) throw std::runtime_error(sys_error("fsync of", tmp));
    } catch (...) {
        close(fd);
        unlink(tmp.c_str());
        throw;
    }
    if (close(fd) != 0) {
        std::string msg = sys_error("closing", tmp);
        unlink(tmp.c_str());
        throw std::runtime_error(msg);
    }
    if (rename(tmp.c_str(), path.c_str()) != 0) {
        std::string msg = sys_error("renaming " + tmp + " to " + path, path);
        unlink(tmp.c_str());
        throw std::runtime_error(msg);
    }
    // make the rename itself durable
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

// "" if a header of `version` is intact, else what is wrong. Version 3: the checksum of the bytes
// before its last 8 matches. Version 2 has no checksum: its identity slots [identity_offset,
// bytes) must be zero, as version 2 wrote them (so a version 3 header whose version byte changed
// to 2 is refused too).
static std::string header_integrity_error(uint32_t version, const void* header, size_t bytes, size_t identity_offset,
                                          uint64_t stored_checksum) {
    if (version == CHECKPOINT_VERSION) {
        if (checkpoint_checksum(header, bytes - 8) != stored_checksum)
            return "header checksum mismatch: the header is corrupt (step, data position, rng or config changed)";
        return "";
    }
    if (version == CHECKPOINT_OLDEST_VERSION) {
        const uint8_t* p = (const uint8_t*)header;
        for (size_t i = identity_offset; i < bytes; i++)
            if (p[i] != 0) return "corrupt version 2 header: nonzero byte at offset " + std::to_string(i);
        return "";
    }
    return "version " + std::to_string(version) + ", this build reads versions " +
           std::to_string(CHECKPOINT_OLDEST_VERSION) + " and " + std::to_string(CHECKPOINT_VERSION);
}

// size of the file at path; throws if it cannot be opened
static uint64_t file_size(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw std::runtime_error(sys_error("opening", path));
    return (uint64_t)st.st_size;
}

// reads count floats at byte offset of path into out, or throws
static void read_floats(const std::string& path, uint64_t offset, float* out, size_t count) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(sys_error("opening", path));
    bool ok = fseek(f, (long)offset, SEEK_SET) == 0 && fread(out, sizeof(float), count, f) == count;
    fclose(f);
    if (!ok) throw std::runtime_error("checkpoint " + path + ": truncated while reading (the file changed?)");
}

void checkpoint_write(const std::string& path, const Checkpoint& ck) {
    std::string err = gpt2_config_error(ck.config);
    if (!err.empty()) throw std::invalid_argument("checkpoint " + path + ": " + err);
    if (ck.world_size < 1)
        throw std::invalid_argument("checkpoint " + path + ": world size " + std::to_string(ck.world_size) + " < 1");
    size_t n = ck.params.size();
    CheckpointHeader h;
    memset((void*)&h, 0, sizeof h);
    h.magic = CHECKPOINT_MAGIC;
    h.version = CHECKPOINT_VERSION;
    config_to_header(h, ck.config);
    h.world_size = ck.world_size;
    h.num_parameters = n;
    h.train = ck.train;
    h.norm_stats = ck.train.norm;
    h.run_seed = ck.run.seed;
    h.data_fingerprint = ck.run.data_fingerprint;
    h.payload_checksum = checkpoint_checksum(ck.params.data(), n * sizeof(float));
    h.header_checksum = checkpoint_checksum(&h, offsetof(CheckpointHeader, header_checksum));
    write_file_atomic(path, {{&h, sizeof h}, {ck.params.data(), n * sizeof(float)}});
}

CheckpointHeader checkpoint_read_header(const std::string& path, GPT2Config* config) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(sys_error("opening", path));
    CheckpointHeader h;
    memset((void*)&h, 0, sizeof h);
    size_t got = fread(&h, 1, sizeof h, f);
    struct stat st;
    int rc = fstat(fileno(f), &st);
    fclose(f);
    if (rc != 0) throw std::runtime_error(sys_error("stat", path));
    if (S_ISDIR(st.st_mode))
        throw std::runtime_error("checkpoint " + path + ": is a directory, not a checkpoint file (give a ckpt_<step>.bin in it)");
    if (got >= 4 && h.magic != CHECKPOINT_MAGIC) {
        char msg[160];
        snprintf(msg, sizeof msg, "bad magic 0x%08x (expected 0x%08x): not a checkpoint of this trainer", h.magic,
                 CHECKPOINT_MAGIC);
        throw std::runtime_error("checkpoint " + path + ": " + msg);
    }
    if (got < sizeof h)
        throw std::runtime_error("checkpoint " + path + ": truncated: " + std::to_string(st.st_size) +
                                 " bytes, shorter than the " + std::to_string(sizeof h) + "-byte header");
    std::string header_error = header_integrity_error(h.version, &h, sizeof h,
                                                      offsetof(CheckpointHeader, run_seed), h.header_checksum);
    if (!header_error.empty()) throw std::runtime_error("checkpoint " + path + ": " + header_error);
    GPT2Config c = config_from_header(h);
    std::string err = gpt2_config_error(c);
    if (!err.empty()) throw std::runtime_error("checkpoint " + path + ": corrupt header: " + err);
    if (h.world_size < 1)
        throw std::runtime_error("checkpoint " + path + ": corrupt header: world size " + std::to_string(h.world_size));
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    gpt2_param_sizes(sizes, c);
    for (size_t s : sizes) n += s;
    if (h.num_parameters != n)
        throw std::runtime_error("checkpoint " + path + ": corrupt header: " + std::to_string(h.num_parameters) +
                                 " parameters, its config has " + std::to_string(n));
    uint64_t expected = sizeof h + n * sizeof(float);
    if ((uint64_t)st.st_size != expected)
        throw std::runtime_error("checkpoint " + path + ": " +
                                 ((uint64_t)st.st_size < expected ? "truncated: " : "trailing bytes: ") +
                                 std::to_string(st.st_size) + " bytes, expected " + std::to_string(expected) +
                                 " for " + std::to_string(n) + " parameters");
    if (config) *config = c;
    return h;
}

void checkpoint_read(const std::string& path, Checkpoint& ck) {
    CheckpointHeader h = checkpoint_read_header(path, &ck.config);
    static_cast<TrainStateStored&>(ck.train) = h.train;
    ck.train.norm = h.norm_stats;
    ck.run.seed = h.run_seed;
    ck.run.data_fingerprint = h.data_fingerprint;
    ck.world_size = h.world_size;
    size_t n = h.num_parameters;
    ck.params.resize(n);
    read_floats(path, sizeof h, ck.params.data(), n);
    if (checkpoint_checksum(ck.params.data(), n * sizeof(float)) != h.payload_checksum)
        throw std::runtime_error("checkpoint " + path + ": checksum mismatch: the weights are corrupt");
}

// ----------------------------------------------------------------------------
// optimizer shards

std::string optimizer_shard_path(const std::string& dir, int64_t step, int rank, int world) {
    char name[96];
    snprintf(name, sizeof name, "/ckpt_%08lld_adamw_%dof%d.bin", (long long)step, rank, world);
    return dir + name;
}

void optimizer_shard_write(const std::string& path, const OptimizerShard& s) {
    size_t len = s.end - s.begin;
    if (s.begin > s.end || s.end > s.num_parameters || s.m.size() != len || s.v.size() != len)
        throw std::invalid_argument("optimizer shard " + path + ": m and v must hold the parameters [begin, end)");
    OptimizerShardHeader h;
    memset((void*)&h, 0, sizeof h);
    h.magic = OPTIMIZER_SHARD_MAGIC;
    h.version = CHECKPOINT_VERSION;
    h.step = s.step;
    h.rank = s.rank;
    h.world_size = s.world_size;
    h.num_parameters = s.num_parameters;
    h.begin = s.begin;
    h.end = s.end;
    h.run_seed = s.run.seed;
    h.data_fingerprint = s.run.data_fingerprint;
    uint64_t sum = checkpoint_checksum(s.m.data(), len * sizeof(float));
    h.payload_checksum = checkpoint_checksum(s.v.data(), len * sizeof(float), sum);
    h.header_checksum = checkpoint_checksum(&h, offsetof(OptimizerShardHeader, header_checksum));
    write_file_atomic(path, {{&h, sizeof h}, {s.m.data(), len * sizeof(float)}, {s.v.data(), len * sizeof(float)}});
}

OptimizerShardHeader optimizer_shard_read_header(const std::string& path) {
    const std::string where = "optimizer shard " + path + ": ";
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(sys_error("opening", path));
    OptimizerShardHeader h;
    memset((void*)&h, 0, sizeof h);
    size_t got = fread(&h, 1, sizeof h, f);
    fclose(f);
    if (got >= 4 && h.magic != OPTIMIZER_SHARD_MAGIC) throw std::runtime_error(where + "bad magic: not an optimizer shard");
    if (got < sizeof h) throw std::runtime_error(where + "truncated: shorter than its 256-byte header");
    std::string error = header_integrity_error(h.version, &h, sizeof h, offsetof(OptimizerShardHeader, run_seed),
                                               h.header_checksum);
    if (!error.empty()) throw std::runtime_error(where + error);
    return h;
}

void optimizer_shard_read(const std::string& path, OptimizerShard& s, int64_t step, int rank, int world,
                          size_t num_parameters) {
    const std::string where = "optimizer shard " + path + ": ";
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) {
        throw std::runtime_error(sys_error("opening", path) + "; rank " + std::to_string(rank) +
                                 " writes it with the model file of step " + std::to_string(step) +
                                 ": an incomplete checkpoint (remove it to resume from the one before)");
    }
    fclose(f);
    OptimizerShardHeader h = optimizer_shard_read_header(path);
    size_t begin, end;
    param_shard_range(num_parameters, world, rank, &begin, &end);
    if (h.step != step || h.rank != rank || h.world_size != world || h.num_parameters != num_parameters ||
        h.begin != begin || h.end != end) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "holds step %lld, rank %d of %d, parameters [%llu, %llu) of %llu; expected step %lld, rank %d of %d, "
                 "[%zu, %zu) of %zu (a file of another run or step?)",
                 (long long)h.step, h.rank, h.world_size, (unsigned long long)h.begin, (unsigned long long)h.end,
                 (unsigned long long)h.num_parameters, (long long)step, rank, world, begin, end, num_parameters);
        throw std::runtime_error(where + msg);
    }
    size_t len = end - begin;
    uint64_t expected = sizeof h + 2 * len * sizeof(float), size = file_size(path);
    if (size != expected)
        throw std::runtime_error(where + (size < expected ? "truncated: " : "trailing bytes: ") +
                                 std::to_string(size) + " bytes, expected " + std::to_string(expected));
    s.step = step;
    s.run.seed = h.run_seed;
    s.run.data_fingerprint = h.data_fingerprint;
    s.rank = rank;
    s.world_size = world;
    s.num_parameters = num_parameters;
    s.begin = begin;
    s.end = end;
    s.m.resize(len);
    s.v.resize(len);
    read_floats(path, sizeof h, s.m.data(), len);
    read_floats(path, sizeof h + len * sizeof(float), s.v.data(), len);
    uint64_t sum = checkpoint_checksum(s.m.data(), len * sizeof(float));
    if (checkpoint_checksum(s.v.data(), len * sizeof(float), sum) != h.payload_checksum)
        throw std::runtime_error(where + "checksum mismatch: the moments are corrupt");
}

std::string checkpoint_config_mismatch(const std::string& path, const GPT2Config& have, const GPT2Config& want,
                                       bool check_max_seq_len) {
    char msg[512];
    if (have.attn != want.attn) {
        snprintf(msg, sizeof msg,
                 "checkpoint %s was made for attention %s, this binary is built for %s "
                 "(use the binary built with make ... ATTN=%s)",
                 path.c_str(), attn_kind_name(have.attn), attn_kind_name(want.attn), attn_kind_name(have.attn));
        return msg;
    }
    struct Field { const char* name; long long have, want; } ints[] = {
        {"num_layers", have.num_layers, want.num_layers},
        {"num_heads", have.num_heads, want.num_heads},
        {"channels", have.channels, want.channels},
        {"vocab_size", have.vocab_size, want.vocab_size},
        {"padded_vocab_size", have.padded_vocab_size, want.padded_vocab_size},
        {"max_seq_len", have.max_seq_len, check_max_seq_len ? want.max_seq_len : have.max_seq_len},
    };
    for (const Field& f : ints) {
        if (f.have != f.want) {
            snprintf(msg, sizeof msg, "checkpoint %s has %s = %lld, this run asks for %lld", path.c_str(), f.name,
                     f.have, f.want);
            return msg;
        }
    }
    if (have.learn_p != want.learn_p) {
        snprintf(msg, sizeof msg, "checkpoint %s has %s p, this run asks for %s p (-pl %d)", path.c_str(),
                 have.learn_p ? "learned" : "fixed", want.learn_p ? "learned" : "fixed", want.learn_p);
        return msg;
    }
    if (have.attn_len != want.attn_len) {
        snprintf(msg, sizeof msg, "checkpoint %s has attn_len = %d, this run asks for attn_len = %d (the n of %s's "
                 "length term: 0 the row's n_t, L > 0 the constant L; the trainer's -tl 1 sets the training length)",
                 path.c_str(), have.attn_len, want.attn_len, attn_kind_name(have.attn));
        return msg;
    }
    if (attn_reweights(have.attn) && !have.learn_p && have.p != want.p) {
        snprintf(msg, sizeof msg, "checkpoint %s has %s p = %.9g, this run asks for p = %.9g (the values differ)",
                 path.c_str(), attn_kind_name(have.attn), have.p, want.p);
        return msg;
    }
    if (have.rope_base != want.rope_base) {
        snprintf(msg, sizeof msg, "checkpoint %s has rope_base = %.9g, this run asks for %.9g (the values differ)", path.c_str(),
                 have.rope_base, want.rope_base);
        return msg;
    }
    return "";
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
    char name[64];
    snprintf(name, sizeof name, "/ckpt_%08lld.bin", (long long)step);
    return dir + name;
}

std::vector<int64_t> checkpoint_steps(const std::string& dir) {
    std::vector<int64_t> steps;
    DIR* d = opendir(dir.c_str());
    if (!d) return steps;
    while (struct dirent* e = readdir(d)) {
        long long step;
        int len = 0;
        if (sscanf(e->d_name, "ckpt_%8lld.bin%n", &step, &len) == 1 && len == (int)strlen(e->d_name) &&
            strlen(e->d_name) == 17)
            steps.push_back(step);
    }
    closedir(d);
    std::sort(steps.begin(), steps.end());
    return steps;
}

void checkpoint_keep_last(const std::string& dir, int keep) {
    if (keep <= 0) return;
    std::vector<int64_t> steps = checkpoint_steps(dir);
    for (size_t i = 0; i + keep < steps.size(); i++) {
        std::vector<std::string> paths = {checkpoint_path(dir, steps[i])};  // the model file first
        char prefix[64];
        snprintf(prefix, sizeof prefix, "ckpt_%08lld_adamw_", (long long)steps[i]);
        if (DIR* d = opendir(dir.c_str())) {
            while (struct dirent* e = readdir(d))
                if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) paths.push_back(dir + "/" + e->d_name);
            closedir(d);
        }
        for (const std::string& path : paths)
            if (unlink(path.c_str()) != 0) fprintf(stderr, "warning: cannot remove old %s (%s)\n", path.c_str(), strerror(errno));
    }
}
