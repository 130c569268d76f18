// Checkpoints: model, optimizer, data loader and trainer state in one file.
//
//   bytes [0, 1024)          CheckpointHeader (below), little-endian, zero padded
//   then num_parameters fp32 parameters   (layout of model/gpt2_config.h)
//   then num_parameters fp32 AdamW m
//   then num_parameters fp32 AdamW v
//   nothing after them
//
// The header holds the model config (every tool compares it with what it was built or asked
// for), the step, the trainer's rng and guard state, the training data loader's position and a
// checksum of the payload. Files are written to "<path>.tmp" and renamed, every write checked,
// so a crash or a full disk never leaves a half checkpoint under a checkpoint's name.
// Every error throws std::runtime_error naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataloader/dataloader.h"
#include "model/gpt2_config.h"

constexpr uint32_t CHECKPOINT_MAGIC = 0x52415353;  // "SSAR" in the file's first four bytes
constexpr uint32_t CHECKPOINT_VERSION = 1;
constexpr size_t CHECKPOINT_HEADER_BYTES = 1024;

// What the trainer needs beyond weights and moments to continue exactly where it stopped.
struct TrainState {
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

struct CheckpointHeader {
    uint32_t magic;
    uint32_t version;
    // the model config
    int32_t max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
    int32_t attn;  // AttnKind
    float p, rope_base;
    uint32_t pad0_;
    uint64_t num_parameters;
    uint64_t payload_checksum;  // checkpoint_checksum of params, m, v as stored
    TrainState train;
    uint8_t pad1_[CHECKPOINT_HEADER_BYTES - 64 - sizeof(TrainState)];
};
static_assert(sizeof(CheckpointHeader) == CHECKPOINT_HEADER_BYTES, "checkpoint header must be 1024 bytes");

struct Checkpoint {
    GPT2Config config;
    TrainState train;
    std::vector<float> params, m, v;  // (num_parameters) each; m, v empty when not loaded
};

// Writes ck to path atomically (path.tmp, fsync, rename). Throws; the previous file at path, if
// any, is untouched when anything fails.
void checkpoint_write(const std::string& path, const Checkpoint& ck);

// Reads the header and checks magic, version, config validity and file size. Throws.
CheckpointHeader checkpoint_read_header(const std::string& path, GPT2Config* config);

// Reads a checkpoint (the moments only when with_optimizer) and verifies the checksum. Throws.
void checkpoint_read(const std::string& path, Checkpoint& ck, bool with_optimizer = true);

// "" if a checkpoint's config `have` can be used where `want` is expected, else a message naming
// the file, the first field that differs, both values and the fix. The attention variant is
// checked first: binaries are built for one (make ... ATTN=...).
// check_max_seq_len: false for tools that evaluate at other lengths (RoPE has no length limit).
std::string checkpoint_config_mismatch(const std::string& path, const GPT2Config& have, const GPT2Config& want,
                                       bool check_max_seq_len = true);

// checkpoint_checksum: 64-bit FNV-1a over 8-byte words (the tail bytewise), on the stored bytes
uint64_t checkpoint_checksum(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull);

// Files "ckpt_%08d.bin" in dir: the name of step `step`, the steps present (ascending, temp
// files ignored), and removal of all but the newest `keep` (keep <= 0: remove none).
std::string checkpoint_path(const std::string& dir, int64_t step);
std::vector<int64_t> checkpoint_steps(const std::string& dir);
void checkpoint_keep_last(const std::string& dir, int keep);
