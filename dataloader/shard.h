// Token shards: llm.c's .bin format, so shards written by llm.c's FineWeb script work unchanged.
//
//   bytes [0, 1024)     header: 256 little-endian int32
//                         [0] = 20240520 (magic), [1] = 1 (version), [2] = token count, the rest 0
//   bytes [1024, end)   token count little-endian uint16 token ids; nothing after them
//
// Every check returns (or throws) a message that names the file, the byte offset and the fix.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

constexpr int32_t SHARD_MAGIC = 20240520;
constexpr int32_t SHARD_VERSION = 1;
constexpr size_t SHARD_HEADER_INTS = 256;
constexpr size_t SHARD_HEADER_BYTES = SHARD_HEADER_INTS * sizeof(int32_t);
constexpr int64_t SHARD_MAX_TOKENS = INT32_MAX;  // the count field is an int32

// Checks a header (the first min(file_bytes, 1024) bytes of the file) against the file's size.
// Returns "" and sets *ntok, or an error naming `name` and the offset.
std::string check_shard_header(const uint8_t* header, uint64_t file_bytes, const std::string& name,
                               int64_t* ntok);

// Checks tokens[0..n), the tokens from index `first` of shard `name`, against vocab_size.
// Returns "" or an error naming the byte offset of the first id >= vocab_size.
std::string check_shard_tokens(const uint16_t* tokens, size_t n, size_t first, int vocab_size,
                               const std::string& name);

// Parses a whole shard held in memory (data, n bytes): header, size, token ids < vocab_size.
// Returns "" and fills *tokens, or an error. Never reads outside data[0..n).
std::string parse_shard(const uint8_t* data, size_t n, const std::string& name, int vocab_size,
                        std::vector<uint16_t>* tokens);

// Reads and checks a shard's header; returns its token count. Throws std::runtime_error.
int64_t read_shard_header(const std::string& path);

// Reads and checks a whole shard. Throws std::runtime_error.
std::vector<uint16_t> read_shard(const std::string& path, int vocab_size);

// Writes tokens[0..n) as a shard: to path + ".tmp", then renamed, so a crash never leaves a
// half shard under the final name. Throws std::runtime_error.
void write_shard(const std::string& path, const uint16_t* tokens, size_t n);
