// Checkpoints: model, optimizer, data loader and trainer state, as a set of files per step.
//
// A checkpoint of step s in a run's directory:
//   ckpt_<s>.bin                the model file, written by rank 0:
//     bytes [0, 1024)           CheckpointHeader (below), little-endian, zero padded
//     then num_parameters fp32 weights (layout of model/gpt2_config.h), nothing after them
//   ckpt_<s>_adamw_<r>of<W>.bin one per rank r of the W that trained the run, written by that rank:
//     bytes [0, 256)            OptimizerShardHeader
//     then AdamW's fp32 m, then its fp32 v, of the parameters [begin, end) of shard r
//                               (param_shard_range: the shards of ZeRO-1), nothing after them
//
// The model file's header holds the model config (every tool compares it with what it was built
// or asked for), the number of ranks W, the step, the trainer's rng and guard state, the training
// data loader's position, the run's identity (seed and training data fingerprint: with the config,
// what makes a checkpoint this run's), a checksum of the weights and, in its last 8 bytes, a
// checksum of the header itself; evaluation reads the model file alone. So any changed byte of a
// file, header or payload, is refused (FNV-1a over 8-byte words: one changed word always changes
// the sum). Version 2 files (no identity, no header checksum) are still read; their identity slots
// and header checksum must be zero, as version 2 wrote them.
// Each rank writes its shard first and rank 0 writes the model file last, once every shard is
// written, so a model file stands for a complete set (checkpoint_steps lists model files).
// Files are written to "<path>.tmp" and renamed, every write checked, so a crash or a full disk
// never leaves a half file under a checkpoint's name. Every error throws std::runtime_error
// naming the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataloader/dataloader.h"
#include "model/gpt2_config.h"

constexpr uint32_t CHECKPOINT_MAGIC = 0x52415353;  // "SSAR" in the file's first four bytes
constexpr uint32_t CHECKPOINT_VERSION = 3;
constexpr uint32_t CHECKPOINT_OLDEST_VERSION = 2;  // still read: no run identity, no header checksum
constexpr size_t CHECKPOINT_HEADER_BYTES = 1024;

// What the trainer needs beyond weights and moments to continue exactly where it stopped: the
// part the header has held since version 3 (TrainStateStored, its layout fixed), and the gradient
// norm guard's statistics (-sg), stored after the run's identity (zero in older files: none seen).
struct TrainStateStored {
    int64_t step = 0;               // optimizer steps completed (skipped ones included)
    uint64_t rng_state = 0;         // the sampling rng (model/rand.h)
    int32_t consecutive_skips = 0;  // updates skipped in a row by the loss / grad-norm guard
    int32_t total_skips = 0;
    double loss_ema = 0;            // the spike guard's running mean and variance of the loss
    double loss_emvar = 0;
    int64_t loss_count = 0;         // losses seen by the spike guard
    int32_t has_loader = 0;         // 1 if `loader` below holds the training loader's position
    int32_t pad_ = 0;
    DataLoaderState loader{};
};
struct RunningStats {  // runtime/guard.h's running mean and variance of a value
    double mean = 0, var = 0;
    int64_t count = 0;
};
struct TrainState : TrainStateStored {
    RunningStats norm;  // the gradient-norm spike guard's (-sg)
};

struct CheckpointHeader {
    uint32_t magic;
    uint32_t version;
    // the model config
    int32_t max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
    int32_t attn;  // AttnKind (ssmax: the weights end with s per (layer, head), model/gpt2_config.h)
    float p, rope_base;
    int32_t world_size;  // ranks that trained the run: one optimizer shard file each
    uint64_t num_parameters;
    uint64_t payload_checksum;  // checkpoint_checksum of the weights as stored
    TrainStateStored train;
    uint64_t run_seed;          // the run's identity (version 3): its -rs seed
    uint64_t data_fingerprint;  // and its training shards (run_data_fingerprint, runtime/run_dir.h)
    int32_t learn_p;            // 1: the weights end with learned p's theta per (layer, head) (0 in older files)
    int32_t attn_len;           // GPT2Config::attn_len (0 in older files: the row's n_t)
    RunningStats norm_stats;    // TrainState::norm (zero in older files)
    uint8_t pad1_[CHECKPOINT_HEADER_BYTES - 64 - sizeof(TrainStateStored) - 28 - 4 - sizeof(RunningStats)];
    uint64_t header_checksum;   // checkpoint_checksum of the 1016 bytes before it (version 3)
};
static_assert(sizeof(CheckpointHeader) == CHECKPOINT_HEADER_BYTES, "checkpoint header must be 1024 bytes");
static_assert(offsetof(CheckpointHeader, header_checksum) == CHECKPOINT_HEADER_BYTES - 8, "header checksum last");

// What makes a checkpoint one run's (with the model config): a new run refuses a directory holding
// another's, and -y 1 resumes only its own (runtime/run_dir.h). Zero: unknown (version 2 files).
struct RunIdentity {
    uint64_t seed = 0, data_fingerprint = 0;
    bool operator==(const RunIdentity& o) const { return seed == o.seed && data_fingerprint == o.data_fingerprint; }
    bool known() const { return seed != 0 || data_fingerprint != 0; }
};

struct Checkpoint {
    GPT2Config config;
    TrainState train;
    RunIdentity run;
    int world_size = 1;         // optimizer shard files that go with it
    std::vector<float> params;  // (num_parameters)
};

// Writes ck's model file to path atomically (path.tmp, fsync, rename). Throws; the previous file
// at path, if any, is untouched when anything fails.
void checkpoint_write(const std::string& path, const Checkpoint& ck);

// Reads the header and checks magic, version, config validity and file size. Throws.
CheckpointHeader checkpoint_read_header(const std::string& path, GPT2Config* config);

// Reads a model file and verifies the checksum. Throws.
void checkpoint_read(const std::string& path, Checkpoint& ck);

// One rank's AdamW moments: m and v of the parameters [begin, end).
constexpr uint32_t OPTIMIZER_SHARD_MAGIC = 0x4d414441;  // "ADAM"
constexpr size_t OPTIMIZER_SHARD_HEADER_BYTES = 256;

struct OptimizerShardHeader {
    uint32_t magic;
    uint32_t version;          // CHECKPOINT_VERSION
    int64_t step;              // the model file's step
    int32_t rank, world_size;
    uint64_t num_parameters;
    uint64_t begin, end;       // param_shard_range(num_parameters, world_size, rank)
    uint64_t payload_checksum; // checkpoint_checksum of m then v as stored
    uint64_t run_seed, data_fingerprint;  // the run's identity (version 3)
    uint8_t pad_[OPTIMIZER_SHARD_HEADER_BYTES - 56 - 24];
    uint64_t header_checksum;  // checkpoint_checksum of the 248 bytes before it (version 3)
};
static_assert(sizeof(OptimizerShardHeader) == OPTIMIZER_SHARD_HEADER_BYTES, "shard header must be 256 bytes");
static_assert(offsetof(OptimizerShardHeader, header_checksum) == OPTIMIZER_SHARD_HEADER_BYTES - 8, "checksum last");

struct OptimizerShard {
    int64_t step = 0;
    RunIdentity run;
    int rank = 0, world_size = 1;
    size_t num_parameters = 0, begin = 0, end = 0;
    std::vector<float> m, v;  // (end - begin) each
};

// "<dir>/ckpt_<step>_adamw_<rank>of<world>.bin"
std::string optimizer_shard_path(const std::string& dir, int64_t step, int rank, int world);

// Writes a shard atomically, as checkpoint_write. Throws.
void optimizer_shard_write(const std::string& path, const OptimizerShard& shard);

// Reads the shard that must go with a model file of num_parameters at step, for rank of world;
// a file of another step, rank, world or size, a truncated or corrupt one is refused. Throws.
void optimizer_shard_read(const std::string& path, OptimizerShard& shard, int64_t step, int rank, int world,
                          size_t num_parameters);

// The header of a shard alone, checked (magic, version, header checksum); throws. For the cleanup
// of orphan shards, whose model file is gone.
OptimizerShardHeader optimizer_shard_read_header(const std::string& path);

// "" if a checkpoint's config `have` can be used where `want` is expected, else a message naming
// the file, the first field that differs, both values and the fix. The attention variant is
// checked first: binaries are built for one (make ... ATTN=...).
// check_max_seq_len: false for tools that evaluate at other lengths (RoPE has no length limit).
std::string checkpoint_config_mismatch(const std::string& path, const GPT2Config& have, const GPT2Config& want,
                                       bool check_max_seq_len = true);

// checkpoint_checksum: 64-bit FNV-1a over 8-byte words (the tail bytewise), on the stored bytes
uint64_t checkpoint_checksum(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull);

// Model files "ckpt_%08d.bin" in dir: the name of step `step`, the steps present (ascending,
// temp and shard files ignored), and removal of all but the newest `keep` checkpoints, model
// file first, then its optimizer shards (keep <= 0: remove none).
std::string checkpoint_path(const std::string& dir, int64_t step);
std::vector<int64_t> checkpoint_steps(const std::string& dir);
void checkpoint_keep_last(const std::string& dir, int keep);
