// Multiple-choice evaluation files in llm.c's format (llm.c/dev/data/data_common.py's write_evalfile),
// so that files prepared for llm.c (HellaSwag) work here unchanged, and ours there:
//   header   256 int32, little-endian: [0] magic 20240522, [1] version 1, [2] number of examples,
//            [3] the longest example in bytes, [4..255] zero
//   examples one after another, each a stream of uint16:
//            65535 (start marker), the example's size in bytes (marker to last token, inclusive),
//            its index (0, 1, ... in file order), label (the correct completion), number of
//            completions, context length, context tokens, then per completion its length and tokens
// A completion is scored by the loss of its tokens after the context: the last context token
// predicts the first completion token (eval/mc_eval.h), so contexts and completions are non-empty.
//
// mc_read validates every field and refuses a file with the file, the example index, the byte
// offset, what is wrong and what to do. mc_write is the C++ writer (scripts/mc_evalfile.py the
// Python one); both write exactly the bytes llm.c's writer does for the same examples.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

constexpr int32_t MC_MAGIC = 20240522;
constexpr int32_t MC_VERSION = 1;
constexpr int MC_HEADER_INTS = 256;
constexpr uint16_t MC_START = 65535;
constexpr int MC_MAX_EXAMPLES = 65536;  // the index is a uint16
constexpr int MC_MIN_COMPLETIONS = 2;

struct McExample {
    int index = 0, label = 0;
    std::vector<int> context;                   // (context length)
    std::vector<std::vector<int>> completions;  // (number of completions, each its length)
    size_t offset = 0;                          // byte offset of its start marker in the file it was read from

    // context + the longest completion, in tokens: the row length its forward needs
    int longest_row() const {
        size_t m = 0;
        for (const auto& c : completions) m = std::max(m, c.size());
        return (int)(context.size() + m);
    }
};

struct McFile {
    std::string path;
    std::vector<McExample> examples;
    int max_completions = 0;  // over the examples
    int longest_row = 0;      // the largest longest_row() of the examples
};

// What a damaged file's message ends with.
inline std::string mc_damaged_hint() {
    return "the file is damaged or not a multiple-choice eval file in llm.c's format: prepare it again "
           "(scripts/prepare_mc.py)";
}

// The whole file at path; throws naming it when it cannot be opened or read.
inline std::vector<uint8_t> mc_read_bytes(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(path + ": cannot open (" + strerror(errno) + "); check the path, or prepare "
                                     "the file with scripts/prepare_mc.py");
    std::vector<uint8_t> bytes;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    bool read_error = ferror(f);
    fclose(f);
    if (read_error) throw std::runtime_error(path + ": read error (" + strerror(errno) + ")");
    return bytes;
}

// "PATH: WHERE WHAT", the error of every refusal below
inline std::runtime_error mc_error(const std::string& path, const std::string& where, const std::string& what) {
    return std::runtime_error(path + ": " + where + what);
}

// The header's 256 ints (h), checked: magic, version, 1..MC_MAX_EXAMPLES examples, unused ints 0.
inline void mc_read_header(const std::string& path, const std::vector<uint8_t>& bytes, int32_t h[MC_HEADER_INTS]) {
    const size_t header_bytes = MC_HEADER_INTS * 4;
    if (bytes.size() < header_bytes)
        throw mc_error(path, "", "the file has " + std::to_string(bytes.size()) + " bytes, less than the " +
                       std::to_string(header_bytes) + "-byte header: it is truncated; " + mc_damaged_hint());
    memcpy(h, bytes.data(), header_bytes);
    if (h[0] != MC_MAGIC)
        throw mc_error(path, "", "magic " + std::to_string(h[0]) + ", expected " + std::to_string(MC_MAGIC) +
                       (h[0] == 20240520 ? " (this is a token shard, not an eval file: pass a file made by "
                                           "scripts/prepare_mc.py)"
                                         : std::string("; ") + mc_damaged_hint()));
    if (h[1] != MC_VERSION)
        throw mc_error(path, "", "version " + std::to_string(h[1]) + ", this reader knows version " +
                       std::to_string(MC_VERSION) + " (llm.c's); prepare the file again with scripts/prepare_mc.py");
    if (h[2] < 1 || h[2] > MC_MAX_EXAMPLES)
        throw mc_error(path, "", "the header gives " + std::to_string(h[2]) + " examples, expected 1 to " +
                       std::to_string(MC_MAX_EXAMPLES) + "; " + mc_damaged_hint());
    for (int i = 4; i < MC_HEADER_INTS; i++)
        if (h[i] != 0)
            throw mc_error(path, "", "header int " + std::to_string(i) + " is " + std::to_string(h[i]) +
                           ", expected 0 (unused in version 1); " + mc_damaged_hint());
}

// The uint16 fields of one example, bytes [at, end) of the file, read in order; every refusal
// names the file and "example I at byte offset O: ".
struct McFieldReader {
    const std::string& path;
    const std::vector<uint8_t>& bytes;
    std::string where;
    size_t at, end;
    int size;

    int u16(size_t i) const { return (int)(bytes[i] | (bytes[i + 1] << 8)); }
    std::runtime_error fail(const std::string& what) const { return mc_error(path, where, what); }

    // the next field, or a refusal naming the field that overruns the size
    int next(const char* field) {
        if (at + 2 > end)
            throw fail(std::string("its fields run past its size field (") + std::to_string(size) + " bytes) at the " +
                       field + ": the size field or the counts are wrong; " + mc_damaged_hint());
        int v = u16(at);
        at += 2;
        return v;
    }

    // a token list: its length, then its ids, each checked against the vocabulary (vocab_size > 0)
    void tokens(std::vector<int>& out, const std::string& what, int vocab_size) {
        int len = next((what + " length").c_str());
        if (len == 0)
            throw fail("empty " + what + ": contexts and completions need at least one token (the last "
                       "context token predicts the first completion token); drop the example when preparing");
        for (int k = 0; k < len; k++) {
            size_t tok_at = at;
            int id = next((what + " tokens").c_str());
            if (id == MC_START || (vocab_size > 0 && id >= vocab_size))
                throw fail(what + " token " + std::to_string(k) + " (byte offset " + std::to_string(tok_at) +
                           ") is id " + std::to_string(id) + ", outside the model's vocabulary of " +
                           std::to_string(vocab_size > 0 ? vocab_size : MC_START) +
                           " tokens: prepare the file with the tokenizer the model was trained with");
            out.push_back(id);
        }
    }
};

// The start marker and size field of example i at byte offset off (of `examples` the header
// announces): the reader of its fields.
inline McFieldReader mc_example_fields(const std::string& path, const std::vector<uint8_t>& bytes, int i, size_t off,
                                       int examples) {
    McFieldReader r{path, bytes, "example " + std::to_string(i) + " at byte offset " + std::to_string(off) + ": ",
                    off, off, 0};
    if (off >= bytes.size())
        throw r.fail("the header announces " + std::to_string(examples) + " examples but the file ends after " +
                     std::to_string(i) + " (" + std::to_string(bytes.size()) + " bytes): it is truncated; " +
                     mc_damaged_hint());
    if (bytes.size() - off < 4)
        throw r.fail("the file ends inside the example's first fields: it is truncated; " + mc_damaged_hint());
    if (r.u16(off) != MC_START)
        throw r.fail("missing start marker: found " + std::to_string(r.u16(off)) + " where 65535 must begin "
                     "an example (the previous example's size field is wrong, or the file is not an eval file); " +
                     mc_damaged_hint());
    r.size = r.u16(off + 2);
    if (r.size < 12 || r.size % 2 != 0)
        throw r.fail("size field " + std::to_string(r.size) + " bytes: an example takes an even number of "
                     "at least 12 bytes (6 fields); " + mc_damaged_hint());
    if (off + r.size > bytes.size())
        throw r.fail("its size field says " + std::to_string(r.size) + " bytes, but the file ends " +
                     std::to_string(bytes.size() - off) + " bytes after its start: it is truncated; " +
                     mc_damaged_hint());
    r.at = off + 4;
    r.end = off + r.size;
    return r;
}

// Example i at byte offset off, validated (mc_read's rules); r.end is where the next begins.
inline McExample mc_read_example(McFieldReader& r, int i, size_t off, int vocab_size, int max_tokens) {
    McExample ex;
    ex.offset = off;
    ex.index = r.next("example index");
    if (ex.index != i)
        throw r.fail("example index field " + std::to_string(ex.index) + ", expected " + std::to_string(i) +
                     " (examples are numbered in file order); " + mc_damaged_hint());
    ex.label = r.next("label");
    int num_completions = r.next("number of completions");
    if (num_completions < MC_MIN_COMPLETIONS)
        throw r.fail(std::to_string(num_completions) + " completions: a multiple-choice example needs at "
                     "least " + std::to_string(MC_MIN_COMPLETIONS) + "; drop it when preparing the file");
    if (ex.label >= num_completions)
        throw r.fail("label " + std::to_string(ex.label) + " is not one of its " + std::to_string(num_completions) +
                     " completions (0 to " + std::to_string(num_completions - 1) + "); " + mc_damaged_hint());
    r.tokens(ex.context, "context", vocab_size);
    ex.completions.resize(num_completions);
    for (int c = 0; c < num_completions; c++) r.tokens(ex.completions[c], "completion " + std::to_string(c), vocab_size);
    if (r.at != r.end)
        throw r.fail("its size field says " + std::to_string(r.size) + " bytes, but its fields take " +
                     std::to_string(r.at - off) + "; " + mc_damaged_hint());
    if (max_tokens > 0 && ex.longest_row() > max_tokens)
        throw r.fail("context + longest completion take " + std::to_string(ex.longest_row()) +
                     " tokens, more than the model's maximum length " + std::to_string(max_tokens) +
                     ": evaluate a model trained at length >= " + std::to_string(ex.longest_row()) +
                     ", or prepare the file without such examples (scripts/prepare_mc.py --max-tokens " +
                     std::to_string(max_tokens) + ")");
    return ex;
}

// Reads and validates path. vocab_size > 0: every token id must be below it; max_tokens > 0:
// context + completion of every example must fit in it (the model's maximum length). Throws
// std::runtime_error "PATH: example I at byte offset O: what is wrong; what to do".
inline McFile mc_read(const std::string& path, int vocab_size = 0, int max_tokens = 0) {
    std::vector<uint8_t> bytes = mc_read_bytes(path);
    int32_t h[MC_HEADER_INTS];
    mc_read_header(path, bytes, h);
    McFile file;
    file.path = path;
    size_t off = MC_HEADER_INTS * 4;
    int longest_bytes = 0;
    for (int i = 0; i < h[2]; i++) {
        McFieldReader r = mc_example_fields(path, bytes, i, off, h[2]);
        McExample ex = mc_read_example(r, i, off, vocab_size, max_tokens);
        longest_bytes = std::max(longest_bytes, r.size);
        file.max_completions = std::max(file.max_completions, (int)ex.completions.size());
        file.longest_row = std::max(file.longest_row, ex.longest_row());
        file.examples.push_back(std::move(ex));
        off = r.end;
    }
    if (off != bytes.size())
        throw mc_error(path, "", std::to_string(bytes.size() - off) + " bytes after the last of the " +
                       std::to_string(h[2]) + " examples the header announces (byte offset " + std::to_string(off) +
                       "); " + mc_damaged_hint());
    if (h[3] != longest_bytes)
        throw mc_error(path, "", "the header's longest example is " + std::to_string(h[3]) + " bytes, the examples' is " +
                       std::to_string(longest_bytes) + "; " + mc_damaged_hint());
    return file;
}

// The bytes of an eval file holding examples (their index fields are their positions; the
// offsets are ignored). Throws std::invalid_argument naming the example that cannot be written.
inline std::vector<uint8_t> mc_encode(const std::vector<McExample>& examples) {
    if (examples.empty() || examples.size() > (size_t)MC_MAX_EXAMPLES)
        throw std::invalid_argument("mc_encode: " + std::to_string(examples.size()) + " examples, expected 1 to " +
                                    std::to_string(MC_MAX_EXAMPLES));
    std::vector<uint16_t> stream;
    int longest_bytes = 0;
    for (size_t i = 0; i < examples.size(); i++) {
        const McExample& ex = examples[i];
        std::string what = "mc_encode: example " + std::to_string(i) + ": ";
        int nc = (int)ex.completions.size();
        if (nc < MC_MIN_COMPLETIONS || ex.label < 0 || ex.label >= nc)
            throw std::invalid_argument(what + "label " + std::to_string(ex.label) + " of " + std::to_string(nc) +
                                        " completions (need >= 2 completions and a label among them)");
        size_t start = stream.size();
        stream.insert(stream.end(), {MC_START, 0, (uint16_t)i, (uint16_t)ex.label, (uint16_t)nc});
        auto put = [&](const std::vector<int>& toks) {
            if (toks.empty() || toks.size() >= MC_START) throw std::invalid_argument(what + "a token list of length " + std::to_string(toks.size()));
            stream.push_back((uint16_t)toks.size());
            for (int t : toks) {
                if (t < 0 || t >= MC_START) throw std::invalid_argument(what + "token id " + std::to_string(t));
                stream.push_back((uint16_t)t);
            }
        };
        put(ex.context);
        for (const auto& c : ex.completions) put(c);
        size_t nbytes = (stream.size() - start) * 2;
        if (nbytes >= 65536)
            throw std::invalid_argument(what + std::to_string(nbytes) + " bytes, the size field holds at most 65535");
        stream[start + 1] = (uint16_t)nbytes;
        longest_bytes = std::max(longest_bytes, (int)nbytes);
    }
    int32_t h[MC_HEADER_INTS] = {MC_MAGIC, MC_VERSION, (int32_t)examples.size(), longest_bytes};
    std::vector<uint8_t> bytes(sizeof h + stream.size() * 2);
    memcpy(bytes.data(), h, sizeof h);
    memcpy(bytes.data() + sizeof h, stream.data(), stream.size() * 2);
    return bytes;
}

// Writes examples to path through path.tmp and a rename, so no half file ever has the name. Throws.
inline void mc_write(const std::string& path, const std::vector<McExample>& examples) {
    std::vector<uint8_t> bytes = mc_encode(examples);
    std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + tmp + " (" + strerror(errno) + ")");
    bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        remove(tmp.c_str());
        throw std::runtime_error("writing " + path + " failed (" + strerror(errno) + ")");
    }
}
