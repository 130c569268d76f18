// Distributed data loader over token shards (the order it reads in: dataloader.h).
#include "dataloader/dataloader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <glob.h>
#include <stdexcept>

#include "dataloader/shard.h"

// ----------------------------------------------------------------------------
// deterministic random numbers: splitmix64, the same on every platform and compiler

static uint64_t splitmix64(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// uniform in [0, n), without modulo bias (Lemire's multiply-and-reject)
static uint64_t uniform_below(uint64_t* state, uint64_t n) {
    unsigned __int128 m = (unsigned __int128)splitmix64(state) * n;
    if ((uint64_t)m < n) {
        uint64_t threshold = (0 - n) % n;
        while ((uint64_t)m < threshold) m = (unsigned __int128)splitmix64(state) * n;
    }
    return (uint64_t)(m >> 64);
}

// the rng stream for one (seed, epoch, shard) triple; shard = -1 for the shard order
static uint64_t stream_state(uint64_t seed, uint64_t epoch, int64_t shard) {
    uint64_t s = seed;
    s = splitmix64(&s) ^ epoch;
    s = splitmix64(&s) ^ (uint64_t)(shard + 1);
    return splitmix64(&s);
}

// Fisher-Yates from the back
template <typename I>
static void shuffle_in_place(std::vector<I>& v, uint64_t state) {
    for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[uniform_below(&state, i)]);
}

// ----------------------------------------------------------------------------

static std::string str(int64_t x) { return std::to_string(x); }

void DataLoader::init(const std::string& pattern, int B, int T, int rank, int world, uint64_t seed,
                      bool shuffle, int vocab_size) {
    try {
        open_shards(pattern, B, T, rank, world, seed, shuffle, vocab_size);
    } catch (...) {
        files.clear();  // so next_batch() refuses to run on a half-made loader
        throw;
    }
    reset();
}

void DataLoader::open_shards(const std::string& pattern, int B, int T, int rank, int world, uint64_t seed,
                             bool shuffle, int vocab_size) {
    if (B < 1) throw std::runtime_error("data loader: batch size B = " + str(B) + " must be at least 1");
    if (T < 1) throw std::runtime_error("data loader: sequence length T = " + str(T) + " must be at least 1");
    if (world < 1 || rank < 0 || rank >= world)
        throw std::runtime_error("data loader: rank " + str(rank) + " of world " + str(world) +
                                 " is not valid; need 0 <= rank < world");
    if (vocab_size < 1 || vocab_size > 65536)
        throw std::runtime_error("data loader: vocab size " + str(vocab_size) +
                                 " is not in [1, 65536]; shards hold uint16 token ids");
    if (fp_) fclose(fp_);
    fp_ = nullptr, fp_file_ = -1;
    B_ = B, T_ = T, rank_ = rank, world_ = world, seed_ = seed, shuffle_ = shuffle, vocab_size_ = vocab_size;

    files.clear();
    glob_t g;
    int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) files.push_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc == GLOB_NOMATCH || (rc == 0 && files.empty()))
        throw std::runtime_error("data loader: no file matches '" + pattern +
                                 "'; check the path (scripts/prepare_kjv.sh writes data/kjv/kjv_train_*.bin)");
    if (rc != 0) throw std::runtime_error("data loader: cannot read the folders of '" + pattern + "' (" + strerror(errno) + ")");

    shard_tokens.assign(files.size(), 0);
    shard_windows.assign(files.size(), 0);
    num_tokens = num_windows = 0;
    fingerprint_ = 1469598103934665603ull ^ (uint64_t)T ^ ((uint64_t)shuffle << 40);
    for (size_t f = 0; f < files.size(); f++) {
        int64_t ntok = read_shard_header(files[f]);
        if (ntok < (int64_t)T + 1)
            throw std::runtime_error(files[f] + ": " + str(ntok) + " tokens, fewer than one window of T+1 = " +
                                     str((int64_t)T + 1) + "; use a smaller sequence length or leave this shard out");
        shard_tokens[f] = ntok;
        shard_windows[f] = (ntok - 1) / T;
        num_tokens += ntok;
        num_windows += shard_windows[f];
        uint64_t s = fingerprint_ ^ (uint64_t)ntok;
        fingerprint_ = splitmix64(&s);
    }
    int64_t global_batch = (int64_t)world * B;
    batches_per_epoch = num_windows / global_batch;
    if (batches_per_epoch == 0)
        throw std::runtime_error("data loader: '" + pattern + "' holds " + str(num_windows) + " windows of T+1 = " +
                                 str((int64_t)T + 1) + " tokens, fewer than one step of world*B = " +
                                 str(global_batch) + " windows; use a smaller batch or sequence length, or more data");
    checked_.assign(files.size(), 0);
    buf_.resize((size_t)T + 1);
}

void DataLoader::reset() { start_epoch(0); }

void DataLoader::start_epoch(uint64_t epoch) {
    epoch_ = epoch;
    slot_ = 0, position_ = 0, consumed_ = 0;
    shard_order_.resize(files.size());
    for (size_t i = 0; i < files.size(); i++) shard_order_[i] = (int)i;
    if (shuffle_) shuffle_in_place(shard_order_, stream_state(seed_, epoch_, -1));
    order_slot_ = -1;
}

// moves the stream position forward by n windows (n may cross shards; never past the epoch's end)
void DataLoader::advance(int64_t n) {
    consumed_ += n;
    position_ += n;
    while (slot_ < files.size() && (int64_t)position_ >= shard_windows[shard_order_[slot_]]) {
        position_ -= shard_windows[shard_order_[slot_]];
        slot_++;
    }
}

// Opens files[file] as the current file (one is kept open).
FILE* DataLoader::open_file(int file) {
    if (fp_file_ == file) return fp_;
    if (fp_) fclose(fp_);
    fp_ = fopen(files[file].c_str(), "rb");
    fp_file_ = fp_ ? file : -1;
    if (!fp_) throw std::runtime_error(files[file] + ": cannot open token shard (" + strerror(errno) + ")");
    return fp_;
}

// Reads count tokens from token index `first` of files[file] into dst; throws on a short read.
void DataLoader::read_tokens(int file, int64_t first, size_t count, uint16_t* dst) {
    FILE* f = open_file(file);
    uint64_t offset = SHARD_HEADER_BYTES + 2 * (uint64_t)first;
    size_t got = 0;
    if (fseeko(f, (off_t)offset, SEEK_SET) == 0) got = fread(dst, 2, count, f);
    if (got != count)
        throw std::runtime_error(files[file] + ": truncated at offset " + str(offset + 2 * got) +
                                 ": the file changed after the loader checked its size; write it again");
}

// Checks every token id of a shard against the vocab size, once per process, before a step
// uses the shard, so a bad id is reported with its offset instead of reaching the model.
void DataLoader::check_tokens(int file) {
    std::vector<uint16_t> chunk((size_t)std::min<int64_t>(1 << 20, shard_tokens[file]));
    for (int64_t first = 0; first < shard_tokens[file]; first += chunk.size()) {
        size_t n = (size_t)std::min<int64_t>(chunk.size(), shard_tokens[file] - first);
        read_tokens(file, first, n, chunk.data());
        std::string err = check_shard_tokens(chunk.data(), n, first, vocab_size_, files[file]);
        if (!err.empty()) throw std::runtime_error(err);
    }
    checked_[file] = 1;
}

DataLoader::~DataLoader() {
    if (fp_) fclose(fp_);
}

void DataLoader::read_window(int* input_row, int* target_row) {
    int file = shard_order_[slot_];
    if (!checked_[file]) check_tokens(file);
    if (order_slot_ != (int)slot_) {
        window_order_.resize(shard_windows[file]);
        for (size_t i = 0; i < window_order_.size(); i++) window_order_[i] = (uint32_t)i;
        if (shuffle_) shuffle_in_place(window_order_, stream_state(seed_, epoch_, file));
        order_slot_ = (int)slot_;
    }
    int64_t window = window_order_[position_];
    read_tokens(file, window * T_, buf_.size(), buf_.data());
    for (int t = 0; t < T_; t++) {
        input_row[t] = buf_[t];
        target_row[t] = buf_[t + 1];
    }
}

void DataLoader::next_batch(int* inputs, int* targets) {
    if (files.empty()) throw std::runtime_error("data loader: next_batch() before a successful init()");
    int64_t global_batch = (int64_t)world_ * B_;
    if (num_windows - consumed_ < global_batch) start_epoch(epoch_ + 1);
    advance((int64_t)rank_ * B_);
    for (int b = 0; b < B_; b++) {
        read_window(inputs + (size_t)b * T_, targets + (size_t)b * T_);
        advance(1);
    }
    advance((int64_t)(world_ - 1 - rank_) * B_);
}

DataLoaderState DataLoader::state() const {
    DataLoaderState s;
    memset(&s, 0, sizeof(s));
    s.magic = DATALOADER_STATE_MAGIC;
    s.version = DATALOADER_STATE_VERSION;
    s.seed = seed_;
    s.epoch = epoch_;
    s.shard = slot_;
    s.position = position_;
    s.fingerprint = fingerprint_;
    return s;
}

void DataLoader::restore(const DataLoaderState& s) {
    if (s.magic != DATALOADER_STATE_MAGIC || s.version != DATALOADER_STATE_VERSION)
        throw std::runtime_error("data loader state: magic/version " + str(s.magic) + "/" + str(s.version) +
                                 " is not " + str(DATALOADER_STATE_MAGIC) + "/" + str(DATALOADER_STATE_VERSION) +
                                 "; the checkpoint is corrupt or from another program");
    if (s.fingerprint != fingerprint_)
        throw std::runtime_error("data loader state: saved for other shards, another sequence length or shuffle "
                                 "setting than these (" + str((int64_t)files.size()) + " files, " + str(num_tokens) +
                                 " tokens, T = " + str(T_) + "); resume with the same data and -t, or start fresh");
    if (s.seed != seed_)
        throw std::runtime_error("data loader state: saved with seed " + std::to_string(s.seed) + ", but this run uses " +
                                 std::to_string(seed_) + "; resume with the same seed");
    start_epoch(s.epoch);
    if (s.shard > files.size() || (s.shard < files.size() && (int64_t)s.position >= shard_windows[shard_order_[s.shard]]) ||
        (s.shard == files.size() && s.position != 0))
        throw std::runtime_error("data loader state: position (shard slot " + str(s.shard) + ", window " +
                                 str(s.position) + ") is outside these shards; the checkpoint is corrupt");
    for (uint64_t i = 0; i < s.shard; i++) consumed_ += shard_windows[shard_order_[i]];
    consumed_ += s.position;
    slot_ = s.shard;
    position_ = s.position;
}
