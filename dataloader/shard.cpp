// Token shard reader and writer (format in shard.h).
#include "dataloader/shard.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <sys/stat.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards hold little-endian uint16 tokens");

static int32_t read_le32(const uint8_t* p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char* format, ...) {
    char buf[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(buf, sizeof(buf), format, args);
    va_end(args);
    return buf;
}

std::string check_shard_header(const uint8_t* header, uint64_t file_bytes, const std::string& name,
                               int64_t* ntok) {
    const char* f = name.c_str();
    if (file_bytes < SHARD_HEADER_BYTES)
        return fmt("%s: file has %llu bytes, shorter than the %zu-byte shard header (truncated at offset %llu); "
                   "write it again with build/tokenize or scripts/fineweb.py",
                   f, (unsigned long long)file_bytes, SHARD_HEADER_BYTES, (unsigned long long)file_bytes);
    int32_t magic = read_le32(header), version = read_le32(header + 4), count = read_le32(header + 8);
    if (magic != SHARD_MAGIC)
        return fmt("%s: offset 0: magic number %d is not %d, so this is not a token shard (llm.c .bin format); "
                   "pass shards written by build/tokenize or scripts/fineweb.py",
                   f, magic, SHARD_MAGIC);
    if (version != SHARD_VERSION)
        return fmt("%s: offset 4: shard version %d, only version %d (uint16 tokens) is supported; "
                   "write the shard again with build/tokenize or scripts/fineweb.py",
                   f, version, SHARD_VERSION);
    if (count < 0)
        return fmt("%s: offset 8: token count %d is negative; the header is corrupt, write the shard again", f, count);
    uint64_t expected = SHARD_HEADER_BYTES + 2 * (uint64_t)count;
    if (file_bytes < expected)
        return fmt("%s: truncated at offset %llu: the header (offset 8) says %d tokens, which need %llu bytes, "
                   "but the file has %llu; write the shard again (an interrupted copy or download?)",
                   f, (unsigned long long)file_bytes, count, (unsigned long long)expected,
                   (unsigned long long)file_bytes);
    if (file_bytes > expected)
        return fmt("%s: the header (offset 8) says %d tokens, so the file should end at offset %llu, "
                   "but it has %llu bytes; the count disagrees with the file size, write the shard again",
                   f, count, (unsigned long long)expected, (unsigned long long)file_bytes);
    *ntok = count;
    return "";
}

std::string check_shard_tokens(const uint16_t* tokens, size_t n, size_t first, int vocab_size,
                               const std::string& name) {
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= vocab_size)
            return fmt("%s: offset %llu (token %llu): token id %d >= vocab size %d; the shard was written "
                       "for another vocabulary, or pass the vocab size it was written for",
                       name.c_str(), (unsigned long long)(SHARD_HEADER_BYTES + 2 * (first + i)),
                       (unsigned long long)(first + i), tokens[i], vocab_size);
    return "";
}

std::string parse_shard(const uint8_t* data, size_t n, const std::string& name, int vocab_size,
                        std::vector<uint16_t>* tokens) {
    int64_t ntok = 0;
    std::string err = check_shard_header(data, n, name, &ntok);
    if (!err.empty()) return err;
    tokens->resize(ntok);
    if (ntok > 0) memcpy(tokens->data(), data + SHARD_HEADER_BYTES, 2 * (size_t)ntok);
    return check_shard_tokens(tokens->data(), ntok, 0, vocab_size, name);
}

// Opens path and checks its header; returns the open file, positioned after the header.
static FILE* open_shard(const std::string& path, int64_t* ntok) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(path + ": cannot open token shard (" + strerror(errno) + ")");
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        throw std::runtime_error(path + ": not a regular file; pass a token shard (.bin)");
    }
    uint8_t header[SHARD_HEADER_BYTES] = {};
    size_t got = fread(header, 1, SHARD_HEADER_BYTES, f);
    std::string err = check_shard_header(header, got < SHARD_HEADER_BYTES ? got : (uint64_t)st.st_size, path, ntok);
    if (!err.empty()) {
        fclose(f);
        throw std::runtime_error(err);
    }
    return f;
}

int64_t read_shard_header(const std::string& path) {
    int64_t ntok = 0;
    fclose(open_shard(path, &ntok));
    return ntok;
}

std::vector<uint16_t> read_shard(const std::string& path, int vocab_size) {
    int64_t ntok = 0;
    FILE* f = open_shard(path, &ntok);
    std::vector<uint16_t> tokens(ntok);
    size_t got = fread(tokens.data(), 2, ntok, f);
    fclose(f);
    if ((int64_t)got != ntok)
        throw std::runtime_error(fmt("%s: truncated at offset %llu while reading %lld tokens (did the file change?)",
                                     path.c_str(), (unsigned long long)(SHARD_HEADER_BYTES + 2 * got),
                                     (long long)ntok));
    std::string err = check_shard_tokens(tokens.data(), ntok, 0, vocab_size, path);
    if (!err.empty()) throw std::runtime_error(err);
    return tokens;
}

void write_shard(const std::string& path, const uint16_t* tokens, size_t n) {
    if ((int64_t)n > SHARD_MAX_TOKENS)
        throw std::runtime_error(fmt("%s: %zu tokens do not fit one shard (at most %lld); write more shards",
                                     path.c_str(), n, (long long)SHARD_MAX_TOKENS));
    int32_t header[SHARD_HEADER_INTS] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)n};
    std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) throw std::runtime_error(tmp + ": cannot create (" + strerror(errno) + "); check the output folder");
    bool ok = fwrite(header, sizeof(header), 1, f) == 1 && (n == 0 || fwrite(tokens, 2, n, f) == n);
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        std::string why = strerror(errno);
        remove(tmp.c_str());
        throw std::runtime_error(path + ": cannot write token shard (" + why + "); check free disk space");
    }
}
