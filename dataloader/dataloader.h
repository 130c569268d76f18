// Distributed data loader over token shards (format: dataloader/shard.h).
//
//   DataLoader loader;
//   loader.init("data/kjv/kjv_train_*.bin", B, T, rank, world, seed, shuffle, vocab_size);
//   loader.next_batch(inputs, targets);        // int inputs (B,T), targets (B,T)
//   DataLoaderState s = loader.state();        // POD: store it in a checkpoint
//   loader.restore(s);                         // resume: the same windows an uninterrupted run reads
//   loader.reset();                            // back to the start of epoch 0
//   loader.num_tokens, loader.num_windows, loader.batches_per_epoch, loader.epoch()
// Every error (missing or empty glob, bad header, truncated shard, a shard shorter than one
// window, a token id >= vocab_size, a state from another data set) throws std::runtime_error
// with a message naming the file, the offset or value, and the fix.
//
// What it reads. A window is T+1 consecutive tokens of one shard; window k of a shard holds
// tokens [k*T, k*T+T], so consecutive windows share one token and a shard of n tokens has
// (n-1)/T windows. A batch row is one window: inputs = its first T tokens, targets = its last T.
//
// The order. Each epoch is one stream of windows: the shards in an order (sorted file names,
// or a permutation when shuffle is on), and inside each shard its windows in an order
// (ascending, or a permutation). The permutations of epoch e are drawn from (seed, e, shard),
// so every epoch is reshuffled and every rank computes the same stream. Step k takes the next
// world*B windows of the stream; rank r reads the B windows [r*B, r*B+B) of those. So ranks
// never read the same window in an epoch, and world=2 with batch B reads the same rows as
// world=1 with batch 2B. When fewer than world*B windows are left, the epoch ends and they are
// skipped. With shuffle off the rows are contiguous text: in step k rank r reads from token
// (k*world*B + r*B)*T of the stream on, as llm.c's loader does inside a shard.
//
// The state is the stream position (epoch, shard slot, window position) plus the seed the
// permutations derive from; it is the same on every rank, and B and world may differ on resume.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

constexpr uint32_t DATALOADER_STATE_MAGIC = 0x44415441;  // "DATA"
constexpr uint32_t DATALOADER_STATE_VERSION = 1;

struct DataLoaderState {
    uint32_t magic;         // DATALOADER_STATE_MAGIC
    uint32_t version;       // DATALOADER_STATE_VERSION
    uint64_t seed;          // the shuffling rng: epoch e's permutations are drawn from (seed, e, shard)
    uint64_t epoch;         // epochs completed
    uint64_t shard;         // slot in this epoch's shard order
    uint64_t position;      // next window within that shard's window order
    uint64_t fingerprint;   // T, shuffle and every shard's token count: refuses another data set
};
static_assert(std::is_trivially_copyable<DataLoaderState>::value && sizeof(DataLoaderState) == 48,
              "DataLoaderState is stored in checkpoints as raw bytes");

class DataLoader {
public:
    DataLoader() = default;
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;
    ~DataLoader();
    // pattern: a glob of shards; B rows of T tokens; this is rank `rank` of `world`;
    // vocab_size: every token id must be below it (checked once per shard, when first read).
    void init(const std::string& pattern, int B, int T, int rank, int world, uint64_t seed,
              bool shuffle, int vocab_size);
    void next_batch(int* inputs, int* targets);   // inputs (B,T), targets (B,T)
    void reset();
    DataLoaderState state() const;
    void restore(const DataLoaderState& s);
    uint64_t epoch() const { return epoch_; }

    std::vector<std::string> files;   // sorted glob matches
    std::vector<int64_t> shard_tokens; // tokens per file
    std::vector<int64_t> shard_windows;// windows per file
    int64_t num_tokens = 0;           // all shards together
    int64_t num_windows = 0;          // all shards together
    int64_t batches_per_epoch = 0;    // steps of world*B windows in one epoch

private:
    int B_ = 0, T_ = 0, rank_ = 0, world_ = 1, vocab_size_ = 0;
    uint64_t seed_ = 0, fingerprint_ = 0;
    bool shuffle_ = false;
    uint64_t epoch_ = 0, slot_ = 0, position_ = 0;  // the stream position
    int64_t consumed_ = 0;                          // windows of this epoch before the position
    std::vector<int> shard_order_;                  // this epoch's file index for each slot
    std::vector<char> checked_;                     // file's token ids checked against vocab_size
    int order_slot_ = -1;                           // slot whose window order is held below
    std::vector<uint32_t> window_order_;
    std::vector<uint16_t> buf_;                     // one window (T+1)
    FILE* fp_ = nullptr;                            // the open shard
    int fp_file_ = -1;                              // its file index

    void open_shards(const std::string& pattern, int B, int T, int rank, int world, uint64_t seed, bool shuffle,
                     int vocab_size);
    void start_epoch(uint64_t epoch);
    void advance(int64_t windows);
    void read_window(int* input_row, int* target_row);
    void check_tokens(int file);
    FILE* open_file(int file);
    void read_tokens(int file, int64_t first, size_t count, uint16_t* dst);
};
