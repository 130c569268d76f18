// Token shards and the distributed data loader (dataloader/shard.h, dataloader/dataloader.h).
// Shards written by scripts/fineweb.py (Python, llm.c's format) are read here and ours are read
// there; every bad input must give an error that names the file and the offset; the loader's
// order (sharding across ranks, shuffling, epochs, resume) is checked against the rule in
// dataloader.h, recomputed here from the raw token arrays.
#include <doctest/doctest.h>
#include "test/temp_dir.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "dataloader/dataloader.h"
#include "dataloader/shard.h"

// a fresh folder for this test's files, removed when the test ends
static std::string tmp_dir() {
    static TempDir dir("test_shards");
    return dir.path;
}

static std::string path_of(const std::string& name) { return tmp_dir() + "/" + name; }

static void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write((const char*)bytes.data(), bytes.size());
}

static std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

static void put_le32(std::vector<uint8_t>& b, size_t at, int32_t v) {
    for (int k = 0; k < 4; k++) b[at + k] = (uint8_t)((uint32_t)v >> (8 * k));
}

// the message of the std::runtime_error that f throws ("" if none)
template <typename F>
static std::string error_of(F f) {
    try {
        f();
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

static bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

static std::vector<uint16_t> counting_tokens(size_t n, uint16_t first) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(first + i);
    return t;
}

TEST_CASE("shards written by scripts/fineweb.py (llm.c's format) read back exactly, and ours read there") {
    // Python writes tokens i*7919 % 65536 for i < 3000; C++ computes the same list independently
    std::string py_path = path_of("from_python.bin");
    std::string cmd = "/usr/bin/python3 -B -c \"import sys; sys.path.insert(0, 'scripts'); import fineweb; "
                      "fineweb.write_datafile('" + py_path + "', [i * 7919 % 65536 for i in range(3000)])\"";
    REQUIRE_MESSAGE(system(cmd.c_str()) == 0, "needs /usr/bin/python3 with numpy (scripts/install_deps.sh)");
    std::vector<uint16_t> expected(3000);
    for (int i = 0; i < 3000; i++) expected[i] = (uint16_t)(i * 7919 % 65536);
    CHECK(read_shard_header(py_path) == 3000);
    CHECK(read_shard(py_path, 65536) == expected);

    // ours, byte for byte the same file
    std::string cpp_path = path_of("from_cpp.bin");
    write_shard(cpp_path, expected.data(), expected.size());
    CHECK(read_bytes(cpp_path) == read_bytes(py_path));
    // and Python's reader accepts ours
    cmd = "/usr/bin/python3 -B -c \"import sys; sys.path.insert(0, 'scripts'); import fineweb; "
          "t = fineweb.read_datafile('" + cpp_path + "'); "
          "assert list(t) == [i * 7919 % 65536 for i in range(3000)]\"";
    CHECK(system(cmd.c_str()) == 0);

    // an empty shard is valid
    std::string empty = path_of("empty.bin");
    write_shard(empty, nullptr, 0);
    CHECK(read_shard(empty, 50257).empty());
    CHECK(read_bytes(empty).size() == SHARD_HEADER_BYTES);
}

TEST_CASE("every kind of bad shard is an error naming the file and the offset") {
    std::vector<uint16_t> tokens = counting_tokens(100, 1);
    std::string good = path_of("good.bin");
    write_shard(good, tokens.data(), tokens.size());
    std::vector<uint8_t> bytes = read_bytes(good);
    REQUIRE(bytes.size() == SHARD_HEADER_BYTES + 200);

    auto bad_file = [&](const std::string& name, const std::vector<uint8_t>& b) {
        std::string p = path_of(name);
        write_bytes(p, b);
        return p;
    };
    SUBCASE("missing file") {
        std::string p = path_of("does_not_exist.bin");
        std::string e = error_of([&] { read_shard(p, 50257); });
        CHECK(contains(e, p));
        CHECK(contains(e, "cannot open"));
    }
    SUBCASE("wrong magic") {
        std::vector<uint8_t> b = bytes;
        put_le32(b, 0, 20240519);
        std::string p = bad_file("magic.bin", b);
        std::string e = error_of([&] { read_shard(p, 50257); });
        CHECK(contains(e, p + ": offset 0: magic number 20240519"));
    }
    SUBCASE("wrong version") {
        std::vector<uint8_t> b = bytes;
        put_le32(b, 4, 2);
        std::string p = bad_file("version.bin", b);
        CHECK(contains(error_of([&] { read_shard(p, 50257); }), p + ": offset 4: shard version 2"));
    }
    SUBCASE("negative count") {
        std::vector<uint8_t> b = bytes;
        put_le32(b, 8, -3);
        std::string p = bad_file("negative.bin", b);
        CHECK(contains(error_of([&] { read_shard(p, 50257); }), p + ": offset 8: token count -3"));
    }
    SUBCASE("header count larger than the file: truncated") {
        std::vector<uint8_t> b(bytes.begin(), bytes.end() - 7);  // cut inside the tokens
        std::string p = bad_file("truncated.bin", b);
        std::string e = error_of([&] { read_shard(p, 50257); });
        CHECK(contains(e, p + ": truncated at offset " + std::to_string(b.size())));
        CHECK(contains(error_of([&] { read_shard_header(p); }), "truncated"));
    }
    SUBCASE("header count smaller than the file: count disagrees with the size") {
        std::vector<uint8_t> b = bytes;
        put_le32(b, 8, 99);
        std::string p = bad_file("longer.bin", b);
        std::string e = error_of([&] { read_shard(p, 50257); });
        CHECK(contains(e, p + ": the header (offset 8) says 99 tokens, so the file should end at offset " +
                              std::to_string(1024 + 2 * 99) + ", but it has " + std::to_string(1024 + 2 * 100) + " bytes"));
    }
    SUBCASE("file shorter than the header") {
        std::vector<uint8_t> b(bytes.begin(), bytes.begin() + 500);
        std::string p = bad_file("short_header.bin", b);
        CHECK(contains(error_of([&] { read_shard(p, 50257); }), p + ": file has 500 bytes, shorter than the 1024-byte"));
        std::string p0 = bad_file("zero.bin", {});
        CHECK(contains(error_of([&] { read_shard(p0, 50257); }), p0 + ": file has 0 bytes"));
    }
    SUBCASE("token id >= vocab size") {
        std::vector<uint16_t> t = tokens;
        t[37] = 50257;
        std::string p = path_of("bad_token.bin");
        write_shard(p, t.data(), t.size());
        std::string e = error_of([&] { read_shard(p, 50257); });
        CHECK(contains(e, p + ": offset " + std::to_string(1024 + 2 * 37) + " (token 37): token id 50257 >= vocab size 50257"));
        CHECK(error_of([&] { read_shard(p, 50258); }).empty());
    }
    SUBCASE("a folder is not a shard") {
        CHECK(contains(error_of([&] { read_shard(tmp_dir(), 50257); }), tmp_dir()));
    }
}

TEST_CASE("parse_shard: every prefix of a shard, and every corrupted header int, is handled without a crash") {
    std::vector<uint16_t> tokens = counting_tokens(64, 0);
    std::string p = path_of("prefix.bin");
    write_shard(p, tokens.data(), tokens.size());
    std::vector<uint8_t> bytes = read_bytes(p);
    std::vector<uint16_t> out;
    for (size_t n = 0; n <= bytes.size() + 3; n++) {
        std::vector<uint8_t> b(bytes.begin(), bytes.begin() + std::min(n, bytes.size()));
        b.resize(n, 0);
        std::string e = parse_shard(b.data(), b.size(), "prefix.bin", 64, &out);
        if (n == bytes.size()) {
            CHECK(e.empty());
            CHECK(out == tokens);
        } else {
            CHECK(contains(e, "prefix.bin"));  // each other length is an error that names the file
        }
    }
    std::string e = parse_shard(bytes.data(), bytes.size(), "prefix.bin", 63, &out);
    CHECK(contains(e, "offset " + std::to_string(1024 + 2 * 63) + " (token 63): token id 63 >= vocab size 63"));
}

// ----------------------------------------------------------------------------
// the loader

// Three shards whose token at index i is base + i: a window is known by its first token.
struct Corpus {
    std::vector<std::string> paths;
    std::vector<std::vector<uint16_t>> tokens;
    std::string pattern;
    Corpus(const std::string& name, const std::vector<size_t>& sizes) {
        std::string dir = path_of(name);
        REQUIRE(system(("mkdir -p " + dir).c_str()) == 0);
        uint16_t base = 0;
        for (size_t s = 0; s < sizes.size(); s++) {
            char file[64];
            snprintf(file, sizeof(file), "/part_%06zu.bin", s);
            paths.push_back(dir + file);
            tokens.push_back(counting_tokens(sizes[s], base));
            write_shard(paths.back(), tokens.back().data(), sizes[s]);
            base = (uint16_t)(base + sizes[s] + 1000);
        }
        pattern = dir + "/part_*.bin";
    }
};

// one step of a loader: rows as vectors of T+1 tokens (input row, then the last target)
static std::vector<std::vector<int>> step(DataLoader& dl, int B, int T) {
    std::vector<int> in((size_t)B * T), tg((size_t)B * T);
    dl.next_batch(in.data(), tg.data());
    std::vector<std::vector<int>> rows(B);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) rows[b].push_back(in[(size_t)b * T + t]);
        rows[b].push_back(tg[(size_t)b * T + T - 1]);
        for (int t = 0; t + 1 < T; t++) REQUIRE(tg[(size_t)b * T + t] == in[(size_t)b * T + t + 1]);  // targets = inputs shifted
    }
    return rows;
}

TEST_CASE("loader without shuffling reads the shards' windows in order, as llm.c does on one rank") {
    Corpus c("ordered", {1000, 333, 2001});
    const int B = 4, T = 16;
    DataLoader dl;
    dl.init(c.pattern, B, T, 0, 1, 1234, false, 50257);
    CHECK(dl.files == c.paths);
    CHECK(dl.num_tokens == 1000 + 333 + 2001);
    CHECK(dl.num_windows == 999 / 16 + 332 / 16 + 2000 / 16);
    CHECK(dl.batches_per_epoch == dl.num_windows / B);
    // the expected stream, straight from the arrays: window k of shard s is tokens [k*T, k*T+T]
    std::vector<std::vector<int>> stream;
    for (auto& t : c.tokens)
        for (size_t k = 0; (k + 1) * T < t.size(); k++) stream.emplace_back(t.begin() + k * T, t.begin() + k * T + T + 1);
    REQUIRE((int64_t)stream.size() == dl.num_windows);
    for (int epoch = 0; epoch < 2; epoch++)
        for (int64_t s = 0; s < dl.batches_per_epoch; s++) {
            auto rows = step(dl, B, T);
            for (int b = 0; b < B; b++) REQUIRE(rows[b] == stream[s * B + b]);
        }
    CHECK(dl.epoch() == 1);
}

// the first tokens of the rows that `world` ranks read in `steps` steps, in global stream order
static std::vector<int> global_rows(const Corpus& c, int world, int B, int T, uint64_t seed, int steps) {
    std::vector<std::unique_ptr<DataLoader>> ranks;
    for (int r = 0; r < world; r++) {
        ranks.emplace_back(new DataLoader);
        ranks[r]->init(c.pattern, B, T, r, world, seed, true, 50257);
    }
    std::vector<int> firsts;
    for (int s = 0; s < steps; s++)
        for (int r = 0; r < world; r++)
            for (auto& row : step(*ranks[r], B, T)) firsts.push_back(row[0]);
    return firsts;
}

TEST_CASE("loader with shuffling: ranks read disjoint windows, each epoch reshuffled, 2 ranks x B == 1 rank x 2B") {
    Corpus c("shuffled", {1000, 333, 2001});
    const int B = 4, T = 16;
    DataLoader probe;
    probe.init(c.pattern, B, T, 0, 1, 7, true, 50257);
    const int64_t windows = probe.num_windows;  // 62 + 20 + 125 = 207

    // first token -> (shard, window) of every valid window
    std::map<int, std::vector<int>> window_of;
    for (size_t s = 0; s < c.tokens.size(); s++)
        for (size_t k = 0; (k + 1) * T < c.tokens[s].size(); k++)
            window_of[c.tokens[s][k * T]] = std::vector<int>(c.tokens[s].begin() + k * T, c.tokens[s].begin() + k * T + T + 1);

    for (int world : {1, 3}) {
        CAPTURE(world);
        int64_t per_epoch = windows / (world * B);
        auto firsts = global_rows(c, world, B, T, 7, (int)(2 * per_epoch));
        for (int epoch = 0; epoch < 2; epoch++) {
            std::set<int> seen;
            for (int64_t i = 0; i < per_epoch * world * B; i++) {
                int f = firsts[epoch * per_epoch * world * B + i];
                CHECK(window_of.count(f) == 1);  // a real window
                CHECK(seen.insert(f).second);     // never twice in an epoch, across all ranks
            }
            CHECK((int64_t)seen.size() == per_epoch * world * B);
        }
        // reshuffled: epoch 1 is not epoch 0 again
        std::vector<int> e0(firsts.begin(), firsts.begin() + per_epoch * world * B);
        std::vector<int> e1(firsts.begin() + per_epoch * world * B, firsts.end());
        CHECK(e0 != e1);
        // shuffled: not the sorted order
        CHECK(!std::is_sorted(e0.begin(), e0.end()));
        // inside every shard too, the window order of epoch 1 is not that of epoch 0
        for (size_t sh = 0; sh < c.tokens.size(); sh++) {
            auto in_shard = [&](int first) { return first >= c.tokens[sh].front() && first <= c.tokens[sh].back(); };
            std::vector<int> o0, o1;
            std::copy_if(e0.begin(), e0.end(), std::back_inserter(o0), in_shard);
            std::copy_if(e1.begin(), e1.end(), std::back_inserter(o1), in_shard);
            CHECK(o0.size() > 10);
            CHECK(o0 != o1);
        }
    }
    // the rows of each window are the window's tokens (not just its first token)
    {
        DataLoader dl;
        dl.init(c.pattern, B, T, 1, 2, 7, true, 50257);
        for (int s = 0; s < 40; s++)
            for (auto& row : step(dl, B, T)) CHECK(row == window_of[row[0]]);
    }
    // 2 ranks with B == 1 rank with 2B, over more than one epoch
    int steps = (int)(windows / (2 * B)) + 5;
    CHECK(global_rows(c, 2, B, T, 7, steps) == global_rows(c, 1, 2 * B, T, 7, steps));
    // the same seed gives the same order, another seed another
    CHECK(global_rows(c, 1, B, T, 7, 10) == global_rows(c, 1, B, T, 7, 10));
    CHECK(global_rows(c, 1, B, T, 7, 10) != global_rows(c, 1, B, T, 8, 10));
}

TEST_CASE("loader state: a resumed run reads exactly the windows of an uninterrupted run") {
    Corpus c("resume", {1000, 333, 2001});
    const int B = 3, T = 8, world = 2;
    for (int rank = 0; rank < world; rank++)
        for (int stop : {0, 1, 17, 68, 69, 70, 100, 140}) {  // 415 windows: an epoch is 69 steps of 6
            CAPTURE(rank);
            CAPTURE(stop);
            DataLoader full;
            full.init(c.pattern, B, T, rank, world, 99, true, 50257);
            for (int s = 0; s < stop; s++) step(full, B, T);
            DataLoaderState saved = full.state();
            // a fresh loader, as a resumed run creates it
            DataLoader resumed;
            resumed.init(c.pattern, B, T, rank, world, 99, true, 50257);
            step(resumed, B, T);  // it may have read something before restoring
            resumed.restore(saved);
            for (int s = 0; s < 50; s++) REQUIRE(step(full, B, T) == step(resumed, B, T));
            CHECK(full.epoch() == resumed.epoch());
        }
    // reset() starts over
    DataLoader a, b;
    a.init(c.pattern, B, T, 0, 1, 5, true, 50257);
    b.init(c.pattern, B, T, 0, 1, 5, true, 50257);
    auto first = step(a, B, T);
    for (int s = 0; s < 300; s++) step(a, B, T);
    a.reset();
    CHECK(step(a, B, T) == first);
    CHECK(step(b, B, T) == first);
}

TEST_CASE("loader state from another setup is refused with a clear message") {
    Corpus c("state_mismatch", {1000, 333});
    DataLoader dl;
    dl.init(c.pattern, 2, 8, 0, 1, 3, true, 50257);
    step(dl, 2, 8);
    DataLoaderState s = dl.state();
    DataLoader other_seed, other_t, other_data;
    other_seed.init(c.pattern, 2, 8, 0, 1, 4, true, 50257);
    CHECK(contains(error_of([&] { other_seed.restore(s); }), "saved with seed 3, but this run uses 4"));
    other_t.init(c.pattern, 2, 16, 0, 1, 3, true, 50257);
    CHECK(contains(error_of([&] { other_t.restore(s); }), "saved for other shards, another sequence length"));
    Corpus d("state_mismatch_other", {1000, 334});
    other_data.init(d.pattern, 2, 8, 0, 1, 3, true, 50257);
    CHECK(contains(error_of([&] { other_data.restore(s); }), "saved for other shards"));
    DataLoaderState corrupt = s;
    corrupt.magic = 0;
    CHECK(contains(error_of([&] { dl.restore(corrupt); }), "magic/version"));
    corrupt = s;
    corrupt.position = 1u << 30;
    CHECK(contains(error_of([&] { dl.restore(corrupt); }), "outside these shards"));
    // a different B or world is allowed: the position counts windows
    DataLoader other_b;
    other_b.init(c.pattern, 4, 8, 1, 2, 3, true, 50257);
    CHECK(error_of([&] { other_b.restore(s); }).empty());
}

TEST_CASE("loader errors: empty glob, missing file, short shard, too little data, bad token, bad arguments") {
    Corpus c("loader_errors", {1000, 333});
    DataLoader dl;
    std::string none = path_of("nothing_here_*.bin");
    std::string e = error_of([&] { dl.init(none, 2, 8, 0, 1, 0, true, 50257); });
    CHECK(contains(e, "no file matches '" + none + "'"));
    std::string missing = path_of("missing.bin");
    CHECK(contains(error_of([&] { dl.init(missing, 2, 8, 0, 1, 0, true, 50257); }), missing));

    // a shard shorter than one window of T+1
    e = error_of([&] { dl.init(c.pattern, 1, 333, 0, 1, 0, true, 50257); });
    CHECK(contains(e, c.paths[1] + ": 333 tokens, fewer than one window of T+1 = 334"));
    CHECK(error_of([&] { dl.init(c.pattern, 1, 332, 0, 1, 0, true, 50257); }).empty());
    // fewer windows than one step of world*B
    e = error_of([&] { dl.init(c.pattern, 42, 16, 0, 2, 0, true, 50257); });  // 62 + 20 windows < 84
    CHECK(contains(e, "holds 82 windows of T+1 = 17 tokens, fewer than one step of world*B = 84"));
    CHECK(error_of([&] { dl.init(c.pattern, 41, 16, 1, 2, 0, true, 50257); }).empty());
    CHECK(error_of([&] { dl.init(c.pattern, 83, 16, 0, 1, 0, true, 50257); }) != "");
    // a bad header among the shards
    std::vector<uint8_t> b = read_bytes(c.paths[1]);
    put_le32(b, 0, 7);
    write_bytes(c.paths[1], b);
    CHECK(contains(error_of([&] { dl.init(c.pattern, 2, 8, 0, 1, 0, true, 50257); }), c.paths[1] + ": offset 0: magic"));
    std::vector<uint16_t> t = c.tokens[1];
    write_shard(c.paths[1], t.data(), t.size());
    // a token id >= vocab size: next_batch throws before it returns a batch with it
    t[200] = 60000;
    write_shard(c.paths[1], t.data(), t.size());
    DataLoader bad;
    bad.init(c.pattern, 2, 8, 0, 1, 0, false, 50257);
    std::vector<int> in(16), tg(16);
    e = error_of([&] {
        for (int s = 0; s < 100; s++) bad.next_batch(in.data(), tg.data());
    });
    CHECK(contains(e, c.paths[1] + ": offset " + std::to_string(1024 + 400) + " (token 200): token id 60000 >= vocab size 50257"));
    // arguments
    CHECK(contains(error_of([&] { dl.init(c.pattern, 0, 8, 0, 1, 0, true, 50257); }), "batch size B = 0"));
    CHECK(contains(error_of([&] { dl.init(c.pattern, 2, 0, 0, 1, 0, true, 50257); }), "sequence length T = 0"));
    CHECK(contains(error_of([&] { dl.init(c.pattern, 2, 8, 2, 2, 0, true, 50257); }), "rank 2 of world 2"));
    CHECK(contains(error_of([&] { dl.init(c.pattern, 2, 8, 0, 1, 0, true, 70000); }), "vocab size 70000"));
    // after a failed init, next_batch refuses to run
    CHECK(contains(error_of([&] { dl.next_batch(in.data(), tg.data()); }), "before a successful init()"));
}
