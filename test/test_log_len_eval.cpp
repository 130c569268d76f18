// Log-length scaling at evaluation (-ls 1, runtime/cli.h): a softmax checkpoint trained without it
// (attn_len 0) run by loss_vs_length, passkey, attention_maps and sample with attn_len set to its
// training length L:
// - within L nothing changes: every token loss at length L is the plain run's, bit for bit (row t's
//   factor max(1, ln(t + 1) / ln(L)) is exactly 1 there, and the CPU back end is deterministic);
// - beyond L the token losses differ from the plain run's;
// - the header and the CSVs say that it was on, with L;
// - a variant without dot scores and exp (lssar), and a checkpoint that already has attn_len > 0
//   (trained with -tl 1), are refused with the reason.
// The model is byte-level (vocabulary 256) with sharpened attention (larger qkv weights), so that
// scaling the scores moves the losses.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "eval/loss_vs_length.h"
#include "model/gpt2_config.h"
#include "model/gpt2_descriptor.h"
#include "model/gpt2_layout.h"
#include "model/rand.h"
#include "runtime/checkpoint.h"
#include "test/run_command.h"
#include "test/temp_dir.h"

static const char* LVL_SOFTMAX = "./build/loss_vs_length_cpu_softmax";
static const char* LVL_LSSAR = "./build/loss_vs_length_cpu_lssar";
static const char* PASSKEY_SOFTMAX = "./build/passkey_cpu_softmax";
static const char* MAPS_SOFTMAX = "./build/attention_maps_cpu_softmax";
static const char* MAPS_LSSAR = "./build/attention_maps_cpu_lssar";
static const char* SAMPLE_SOFTMAX = "./build/sample_cpu_softmax";
static const int T_TRAIN = 64;

static bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// a run that failed with an error naming every needle, and scored nothing
static void check_refused(const Result& r, const std::vector<std::string>& needles) {
    INFO(r.output);
    CHECK(r.code != 0);
    CHECK(contains(r.output, "error:"));
    CHECK(!contains(r.output, "val loss"));
    for (const std::string& s : needles) CHECK_MESSAGE(contains(r.output, s), "missing: " << s);
}

struct Fixture {
    TempDir dir{"log_len_eval"};
    std::string softmax, softmax_tl, lssar, shard;
    Fixture() {
        GPT2Config c;
        std::string err;
        REQUIRE(gpt2_parse_descriptor("d2c64h2v256", &c, &err));
        c.max_seq_len = T_TRAIN;
        c.attn = ATTN_SOFTMAX;
        Checkpoint ck;
        ck.config = c;
        GPT2ParamLayout layout(c);
        ck.params.resize(layout.num_parameters);
        gpt2_init_params(ck.params.data(), c, 7);
        Rng rng(8);  // qkv weights of std ~0.3: scores of several units, attention far from uniform
        for (size_t k = 0; k < layout.param_sizes[P_QKVW]; k++)
            ck.params[layout.param_offsets[P_QKVW] + k] += (float)(0.3 * rng.normal());
        softmax = write(ck, "softmax.bin");
        ck.config.attn_len = T_TRAIN;
        softmax_tl = write(ck, "softmax_tl.bin");
        ck.config.attn_len = 0;
        ck.config.attn = ATTN_LSSAR;
        lssar = write(ck, "lssar.bin");
        std::string text;
        while (text.size() < 6000) text += "In the beginning God created the heaven and the earth. And the earth was without form. ";
        std::vector<uint16_t> bytes(text.begin(), text.end());
        shard = dir.path + "/val_000000.bin";
        write_shard(shard, bytes.data(), bytes.size());
    }
    std::string write(const Checkpoint& ck, const char* name) {
        std::string path = dir.path + "/" + name;
        checkpoint_write(path, ck);
        return path;
    }
};

static Fixture& fixture() {
    static Fixture f;
    return f;
}

// loss_vs_length on `ckpt` at multiples `lengths` of T_TRAIN, the token losses to <out>.tok and the
// CSV to <out>.csv
static Result score(const char* tool, const std::string& ckpt, const std::string& lengths, const std::string& out,
                    const std::string& extra) {
    Fixture& f = fixture();
    return run(std::string(tool) + " -pr ref -e " + ckpt + " -j " + f.shard + " -l " + lengths + " -n 1024 -ot " +
               f.dir.path + "/" + out + ".tok -o " + f.dir.path + "/" + out + ".csv " + extra);
}

static std::vector<TokenLosses> token_losses(const std::string& out) {
    ScoredSpan span;
    return read_token_losses(fixture().dir.path + "/" + out + ".tok", &span);
}

// the CSV's rows as cells; the log_len_scaling column's index in *col
static std::vector<std::vector<std::string>> csv_rows(const std::string& out, size_t* col) {
    std::string text = read_file(fixture().dir.path + "/" + out + ".csv");
    std::vector<std::vector<std::string>> rows;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl - pos);
        std::vector<std::string> cells;
        size_t at = 0;
        while (true) {
            size_t comma = line.find(',', at);
            cells.push_back(line.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
        rows.push_back(cells);
        pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    REQUIRE(!rows.empty());
    *col = rows[0].size();
    for (size_t i = 0; i < rows[0].size(); i++)
        if (rows[0][i] == "log_len_scaling") *col = i;
    REQUIRE(*col < rows[0].size());
    return rows;
}

TEST_CASE("-ls 1 within the training length: every token loss is the plain run's, bit for bit") {
    Fixture& f = fixture();
    Result plain = score(LVL_SOFTMAX, f.softmax, "1", "within_plain", "");
    INFO(plain.output);
    REQUIRE(plain.code == 0);
    Result scaled = score(LVL_SOFTMAX, f.softmax, "1", "within_ls", "-ls 1");
    INFO(scaled.output);
    REQUIRE(scaled.code == 0);
    CHECK(contains(scaled.output, "log-length scaling at evaluation: checkpoint " + f.softmax));
    CHECK(contains(scaled.output, "vocabulary 256, log-length scaling beyond 64"));
    CHECK(!contains(plain.output, "log-length scaling"));
    std::vector<TokenLosses> a = token_losses("within_plain"), b = token_losses("within_ls");
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 1);
    REQUIRE(a[0].loss.size() == 1);
    REQUIRE(a[0].loss[0].size() >= 1000);
    CHECK(a[0].loss == b[0].loss);
    // the CSVs: the same but for the log_len_scaling column, 0 and 64
    size_t col = 0;
    std::vector<std::vector<std::string>> ra = csv_rows("within_plain", &col), rb = csv_rows("within_ls", &col);
    REQUIRE(ra.size() == rb.size());
    REQUIRE(ra.size() == 2);
    CHECK(ra[1][col] == "0");
    CHECK(rb[1][col] == "64");
    ra[1][col] = rb[1][col];
    CHECK(ra == rb);
}

TEST_CASE("-ls 1 beyond the training length: the longer windows' losses change, the training length's do not") {
    Fixture& f = fixture();
    Result plain = score(LVL_SOFTMAX, f.softmax, "1,2", "beyond_plain", "");
    INFO(plain.output);
    REQUIRE(plain.code == 0);
    Result scaled = score(LVL_SOFTMAX, f.softmax, "1,2", "beyond_ls", "-ls 1");
    INFO(scaled.output);
    REQUIRE(scaled.code == 0);
    std::vector<TokenLosses> a = token_losses("beyond_plain"), b = token_losses("beyond_ls");
    REQUIRE(a[0].loss.size() == 2);  // lengths 64 and 128
    CHECK(a[0].loss[0] == b[0].loss[0]);
    // at length 128 the positions 64-127 of every window see scaled scores: their losses differ;
    // positions 0-63 are rows within 64, the plain run's bit for bit
    const std::vector<float>&pa = a[0].loss[1], &pb = b[0].loss[1];
    REQUIRE(pa.size() == pb.size());
    size_t within_equal = 0, within = 0, beyond_differ = 0, beyond = 0;
    double sum_diff = 0;
    for (size_t i = 0; i < pa.size(); i++) {
        bool is_beyond = i % 128 >= 64;
        (is_beyond ? beyond : within)++;
        if (!is_beyond && pa[i] == pb[i]) within_equal++;
        if (is_beyond && pa[i] != pb[i]) beyond_differ++;
        if (is_beyond) sum_diff += std::fabs((double)pa[i] - (double)pb[i]);
    }
    MESSAGE("length 128: " << beyond_differ << " of " << beyond << " token losses beyond 64 differ, mean |difference| "
                           << sum_diff / beyond);
    CHECK(within_equal == within);
    CHECK(beyond_differ > beyond * 9 / 10);
    size_t col = 0;
    std::vector<std::vector<std::string>> rb = csv_rows("beyond_ls", &col);
    REQUIRE(rb.size() == 3);
    CHECK(rb[1][col] == "64");
    CHECK(rb[2][col] == "64");
}

TEST_CASE("-ls 1 is refused for lssar and for a checkpoint that already has attn_len, naming the reason") {
    Fixture& f = fixture();
    check_refused(score(LVL_LSSAR, f.lssar, "1", "refused_lssar", "-ls 1"),
                  {"-ls 1: checkpoint " + f.lssar + " is lssar", "defined for softmax, softmax_rw only"});
    check_refused(score(LVL_SOFTMAX, f.softmax_tl, "1", "refused_tl", "-ls 1"),
                  {"with attn_len = 64 (trained with -tl 1)", "already on"});
    // that checkpoint without -ls: the header and the CSV say log-length scaling is on, from its attn_len
    Result tl = score(LVL_SOFTMAX, f.softmax_tl, "1", "tl", "");
    INFO(tl.output);
    REQUIRE(tl.code == 0);
    CHECK(contains(tl.output, "log-length scaling beyond 64"));
    size_t col = 0;
    CHECK(csv_rows("tl", &col)[1][col] == "64");
    Result help = run(std::string(LVL_SOFTMAX) + " -h");
    CHECK(contains(help.output, "-ls <0|1>"));
    CHECK(contains(help.output, "log-length scaling"));
}

TEST_CASE("passkey -ls 1: the header and the CSV say it is on, with the training length; refused where it is not defined") {
    Fixture& f = fixture();
    std::string csv = f.dir.path + "/passkey.csv";
    Result r = run(std::string(PASSKEY_SOFTMAX) + " -pr ref -e " + f.softmax + " -l 256 -n 2 -ls 1 -o " + csv);
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(contains(r.output, "trained at length 64, log-length scaling beyond 64"));
    std::string text = read_file(csv);
    CHECK(contains(text, "length,accuracy,trials,log_len_scaling\n"));
    CHECK(contains(text, ",2,64\n"));
    check_refused(run(std::string(PASSKEY_SOFTMAX) + " -pr ref -e " + f.softmax_tl + " -l 256 -n 2 -ls 1"),
                  {"-ls 1", "already on"});
    Result help = run(std::string(PASSKEY_SOFTMAX) + " -h");
    CHECK(contains(help.output, "-ls <0|1>"));
}

// the lines of a text file
static std::vector<std::string> lines_of(const std::string& path) {
    std::vector<std::string> lines;
    std::string text = read_file(path);
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        lines.push_back(text.substr(pos, nl - pos));
        pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    return lines;
}

TEST_CASE("attention_maps -ls 1: the rows within the training length are the plain maps' to the bit, the rows beyond differ") {
    Fixture& f = fixture();
    std::string plain = f.dir.path + "/maps_plain", scaled = f.dir.path + "/maps_ls";
    std::string common = std::string(MAPS_SOFTMAX) + " -pr ref -e " + f.softmax + " -j " + f.shard +
                         " -T 128 -layer 1 -head 0 -o ";
    Result a = run(common + plain);
    INFO(a.output);
    REQUIRE(a.code == 0);
    Result b = run(common + scaled + " -ls 1");
    INFO(b.output);
    REQUIRE(b.code == 0);
    CHECK(contains(b.output, "trained at length 64, log-length scaling beyond 64"));
    std::vector<std::string> la = lines_of(plain + "_L1_H0.csv"), lb = lines_of(scaled + "_L1_H0.csv");
    REQUIRE(la.size() == 129);  // the header, then rows 0..127
    REQUIRE(lb.size() == la.size());
    int within_equal = 0, beyond_differ = 0;
    for (int t = 0; t < 128; t++) {
        if (t < 64) within_equal += la[1 + t] == lb[1 + t];
        else beyond_differ += la[1 + t] != lb[1 + t];
    }
    CHECK(within_equal == 64);
    CHECK(beyond_differ == 64);
    check_refused(run(std::string(MAPS_LSSAR) + " -pr ref -e " + f.lssar + " -j " + f.shard + " -ls 1"),
                  {"-ls 1: checkpoint " + f.lssar + " is lssar", "defined for softmax, softmax_rw only"});
}

TEST_CASE("sample -ls 1 within the training length: the same greedy tokens as without it") {
    Fixture& f = fixture();
    std::string common = std::string(SAMPLE_SOFTMAX) + " -pr ref -e " + f.softmax + " -gi 73,110,32,116,104,101 -gk 1 -g 40 -o ";
    Result a = run(common + f.dir.path + "/sample_plain.txt");
    INFO(a.output);
    REQUIRE(a.code == 0);
    Result b = run(common + f.dir.path + "/sample_ls.txt -ls 1");
    INFO(b.output);
    REQUIRE(b.code == 0);
    CHECK(contains(b.output, "log-length scaling beyond 64"));
    std::string ids = read_file(f.dir.path + "/sample_plain.txt");
    CHECK(ids.size() > 40);
    CHECK(ids == read_file(f.dir.path + "/sample_ls.txt"));
    Result help = run(std::string(SAMPLE_SOFTMAX) + " -h");
    CHECK(contains(help.output, "-ls <0|1>"));
}
