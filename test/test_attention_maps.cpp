// Attention maps (eval/attention_maps.h and the tool build/attention_maps_cpu_lssar):
// (a) every map is causal and its valid rows sum to 1, for each variant;
// (b) the map times the layer's v (from the saved qkvr) is the attention output the forward saved
//     (atty): the maps are what the forward computed;
// (c) the row statistics and their summaries on hand-made rows with closed-form values;
// (d) the tool end to end on a checkpoint and a shard written here: the CSVs' shapes and values,
//     the -text path, -p (another re-weighting power than the checkpoint's), and the refusals.
// Needs the GPT-2 vocabulary for the -text case (scripts/install_gpt2_vocab.sh).
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "dataloader/shard.h"
#include "dataloader/tokenizer.h"
#include "eval/attention_maps.h"
#include "model/backend_cpu.h"
#include "runtime/checkpoint.h"

static const char* TOOL = "./build/attention_maps_cpu_lssar -pr ref";  // the reference path: maps against its forward

// the small model of the tests: 2 layers, 64 channels, 2 heads (head dim 32)
static GPT2Config small_config(AttnKind attn, int vocab = 512, int padded = 512) {
    GPT2Config c;
    c.max_seq_len = 32;
    c.vocab_size = vocab;
    c.padded_vocab_size = padded;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 64;
    c.attn = attn;
    c.p = 15.0f;
    return c;
}

static std::vector<int> random_tokens(int n, int vocab, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> t(n);
    for (int& x : t) x = (int)(rng.next_u64() % (uint64_t)vocab);
    return t;
}


static std::vector<float> init_params(const GPT2Config& c, uint64_t seed) {
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    gpt2_param_sizes(sizes, c);
    for (size_t s : sizes) n += s;
    std::vector<float> params(n);
    gpt2_init_params(params.data(), c, seed);
    return params;
}

static std::string write_checkpoint(const std::string& path, const GPT2Config& c, uint64_t seed) {
    Checkpoint ck;
    ck.config = c;
    ck.world_size = 1;
    ck.params = init_params(c, seed);
    checkpoint_write(path, ck);
    return path;
}

// a CSV as rows of fields (header included)
static std::vector<std::vector<std::string>> read_csv(const std::string& path) {
    std::vector<std::vector<std::string>> rows;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        std::vector<std::string> fields;
        std::stringstream ss(line);
        std::string field;
        while (std::getline(ss, field, ',')) fields.push_back(field);
        rows.push_back(fields);
    }
    return rows;
}

static const AttnKind VARIANTS[] = {ATTN_SOFTMAX, ATTN_LSSA, ATTN_LSSAR, ATTN_SSMAX};

// ----------------------------------------------------------------------------
// (a), (b) the maps of a forward

TEST_CASE("maps are causal, valid rows sum to 1, and W v is the forward's attention output") {
    const int T = 64;
    for (AttnKind attn : VARIANTS) {
        CAPTURE(attn_kind_name(attn));
        GPT2Config c = small_config(attn);
        c.max_seq_len = T;
        ModelCPU model(c);
        model.init(7);
        // ssmax: another s for every (layer, head), so that a map reading another head's s fails
        for (size_t k = 0; k < model.gpt.param_sizes[P_SSMAX_S]; k++) model.gpt.param(P_SSMAX_S)[k] = 0.3f + 0.4f * k;
        std::vector<int> tokens = random_tokens(T, c.vocab_size, 11);
        model.forward(tokens.data(), nullptr, 1, T);
        int C = c.channels, NH = c.num_heads, hd = C / NH;
        int valid_rows = 0;
        for (int l = 0; l < c.num_layers; l++) {
            for (int h = 0; h < NH; h++) {
                CAPTURE(l);
                CAPTURE(h);
                std::vector<float> W;
                std::vector<uint8_t> valid;
                attention_map(model.gpt, l, h, W, valid);
                REQUIRE(W.size() == (size_t)T * T);
                const float* qkvr = model.gpt.acts.qkvr + (size_t)l * T * 3 * C;  // (T, 3C) of layer l
                const float* atty = model.gpt.acts.atty + (size_t)l * T * C;      // (T, C) of layer l
                for (int t = 0; t < T; t++) {
                    const float* w = &W[(size_t)t * T];
                    double sum = 0;
                    for (int j = 0; j <= t; j++) sum += w[j];
                    bool zero_above = true;
                    for (int j = t + 1; j < T; j++) zero_above = zero_above && w[j] == 0.0f;
                    CHECK(zero_above);
                    // a float row normalised by its float sum: each of <= 64 weights is off by at most
                    // one rounding (6e-8 relative), so the sum is within 64 * 6e-8 = 4e-6 of 1
                    if (valid[t]) {
                        valid_rows++;
                        CHECK(std::fabs(sum - 1.0) < 1e-5);
                    } else {
                        CHECK(attn == ATTN_LSSAR);  // only LSSAR has degenerate rows
                        CHECK(sum == 0.0);
                    }
                    // y_t = sum_j W_tj v_j, in double, against the forward's float output. The forward sums
                    // <= 64 float products: its error is within 64 * 6e-8 of sum_j |W_tj v_j|; 1e-5 of it
                    // (plus 1e-7 for rows whose values nearly cancel) bounds that with room.
                    for (int i = 0; i < hd; i++) {
                        double y = 0, mag = 0;
                        for (int j = 0; j <= t; j++) {
                            double v = qkvr[(size_t)j * 3 * C + 2 * C + h * hd + i];
                            y += (double)w[j] * v;
                            mag += std::fabs((double)w[j] * v);
                        }
                        double want = atty[(size_t)t * C + h * hd + i];
                        if (!(std::fabs(y - want) <= 1e-5 * mag + 1e-7)) {
                            CAPTURE(t);
                            CAPTURE(i);
                            CHECK(y == doctest::Approx(want));
                        }
                    }
                }
            }
        }
        CHECK(valid_rows > c.num_layers * NH * T / 2);  // the checks above ran on real rows
    }
}

TEST_CASE("attention_map refuses a batch of several sequences and indices outside the model") {
    GPT2Config c = small_config(ATTN_LSSAR);
    ModelCPU model(c);
    model.init(3);
    std::vector<int> tokens = random_tokens(2 * 16, c.vocab_size, 5);
    std::vector<float> W;
    std::vector<uint8_t> valid;
    model.forward(tokens.data(), nullptr, 2, 16);
    CHECK_THROWS_WITH_AS(attention_map(model.gpt, 0, 0, W, valid), doctest::Contains("B = 1"), std::logic_error);
    model.forward(tokens.data(), nullptr, 1, 16);
    CHECK_THROWS_AS(attention_map(model.gpt, 2, 0, W, valid), std::out_of_range);
    CHECK_THROWS_AS(attention_map(model.gpt, 0, 2, W, valid), std::out_of_range);
    CHECK_THROWS_AS(attention_map(model.gpt, -1, 0, W, valid), std::out_of_range);
}

// ----------------------------------------------------------------------------
// (c) statistics on hand-made rows

TEST_CASE("row statistics: uniform, one-hot and two-point rows have their closed-form values") {
    // closed forms in double; the rows are float, so each weight is within 6e-8 relative of the
    // intended value and the statistics within about 1e-6 of the closed forms (n <= 1000 terms)
    for (int n : {1, 2, 5, 64, 1000}) {
        CAPTURE(n);
        int t = n - 1;
        std::vector<float> w(n, 1.0f / n);
        AttnRowStats r = attention_row_stats(w.data(), t);
        CHECK(r.valid);
        CHECK(r.entropy == doctest::Approx(std::log((double)n)).epsilon(1e-6));
        CHECK(r.span == doctest::Approx((double)n).epsilon(1e-5));
        CHECK(r.max_weight == doctest::Approx(1.0 / n).epsilon(1e-6));
        CHECK(r.self_weight == doctest::Approx(1.0 / n).epsilon(1e-6));
        CHECK(r.distance == doctest::Approx((n - 1) / 2.0).epsilon(1e-5));  // mean of 0..n-1
    }
    // one-hot rows: nothing to round
    for (int k : {0, 3, 9}) {
        CAPTURE(k);
        std::vector<float> w(10, 0.0f);
        w[k] = 1.0f;
        AttnRowStats r = attention_row_stats(w.data(), 9);
        CHECK(r.valid);
        CHECK(r.entropy == 0.0);
        CHECK(r.span == 1.0);
        CHECK(r.max_weight == 1.0);
        CHECK(r.self_weight == (k == 9 ? 1.0 : 0.0));
        CHECK(r.distance == (double)(9 - k));
    }
    // two points 1/4, 3/4 (exact in float) at keys 1 and 4 of row 4
    std::vector<float> w = {0, 0.25f, 0, 0, 0.75f};
    AttnRowStats r = attention_row_stats(w.data(), 4);
    double H = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
    CHECK(r.entropy == doctest::Approx(H).epsilon(1e-12));
    CHECK(r.span == doctest::Approx(std::exp(H)).epsilon(1e-12));
    CHECK(r.max_weight == 0.75);
    CHECK(r.self_weight == 0.75);
    CHECK(r.distance == doctest::Approx(0.25 * 3).epsilon(1e-12));
    // a degenerate (all-zero) row has no statistics
    std::vector<float> zeros(6, 0.0f);
    CHECK_FALSE(attention_row_stats(zeros.data(), 5).valid);
}

TEST_CASE("summaries average the valid rows, and buckets are powers of two of t + 1") {
    CHECK(position_bucket(0) == 0);
    CHECK(position_bucket(1) == 1);
    CHECK(position_bucket(2) == 1);
    CHECK(position_bucket(3) == 2);
    CHECK(position_bucket(6) == 2);
    CHECK(position_bucket(7) == 3);
    CHECK(position_bucket(1023) == 10);
    CHECK(position_bucket_count(64) == 7);  // [0,1) [1,3) [3,7) [7,15) [15,31) [31,63) [63,64)
    CHECK(position_bucket_begin(3) == 7);
    // rows: t=0 one-hot (H 0), t=1 uniform (H log 2), t=2 degenerate, t=3 uniform (H log 4)
    const int T = 4;
    std::vector<float> W(T * T, 0.0f);
    W[0] = 1;
    W[1 * T + 0] = W[1 * T + 1] = 0.5f;
    for (int j = 0; j < 4; j++) W[3 * T + j] = 0.25f;
    std::vector<AttnRowStats> rows = attention_map_stats(W, T);
    AttnSummary all = summarize_rows(rows, 0, T);
    CHECK(all.rows == 3);
    CHECK(all.degenerate == 1);
    CHECK(all.entropy == doctest::Approx((0 + std::log(2.0) + std::log(4.0)) / 3).epsilon(1e-12));
    CHECK(all.span == doctest::Approx((1 + 2 + 4) / 3.0).epsilon(1e-12));
    std::vector<AttnSummary> buckets = summarize_buckets(rows);
    REQUIRE(buckets.size() == 3);  // [0,1) [1,3) [3,4)
    CHECK(buckets[0].entropy == 0.0);
    CHECK(buckets[1].rows == 1);
    CHECK(buckets[1].degenerate == 1);
    CHECK(buckets[1].entropy == doctest::Approx(std::log(2.0)).epsilon(1e-12));
    CHECK(buckets[2].entropy == doctest::Approx(std::log(4.0)).epsilon(1e-12));
}

// ----------------------------------------------------------------------------
// (d) the tool end to end

TEST_CASE("the tool writes the maps and the statistics of a checkpoint on shard tokens") {
    TempDir dir("attention_maps");
    GPT2Config c = small_config(ATTN_LSSAR);
    std::string ckpt = write_checkpoint(dir.path + "/lssar.bin", c, 21);
    std::vector<int> tokens = random_tokens(100, c.vocab_size, 13);
    std::vector<uint16_t> tokens16(tokens.begin(), tokens.end());
    write_shard(dir.path + "/val_000000.bin", tokens16.data(), tokens16.size());
    std::string shards = "'" + dir.path + "/val_*.bin'";
    std::string prefix = dir.path + "/m";

    // default -T: the checkpoint's max length (32); all layers and heads
    Result r = run(std::string(TOOL) + " -e " + ckpt + " -j " + shards + " -o " + prefix);
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("eff. span") != std::string::npos);
    const int T = c.max_seq_len;
    std::vector<float> params = init_params(c, 21);
    ModelCPU model(c);
    model.set_params(params);
    model.forward(tokens.data(), nullptr, 1, T);  // the first T tokens, as the tool reads them
    for (int l = 0; l < 2; l++) {
        for (int h = 0; h < 2; h++) {
            CAPTURE(l);
            CAPTURE(h);
            auto csv = read_csv(prefix + "_L" + std::to_string(l) + "_H" + std::to_string(h) + ".csv");
            REQUIRE(csv.size() == (size_t)T + 1);  // header + T rows
            std::vector<float> W;
            std::vector<uint8_t> valid;
            attention_map(model.gpt, l, h, W, valid);
            bool values_match = true;
            for (int t = 0; t < T; t++) {
                REQUIRE(csv[t + 1].size() == (size_t)T + 1);  // row index + T weights
                CHECK(std::stoi(csv[t + 1][0]) == t);
                // written with 6 significant digits: within 5e-6 relative of the float
                for (int j = 0; j < T; j++) {
                    double got = std::stod(csv[t + 1][j + 1]), want = W[(size_t)t * T + j];
                    values_match = values_match && std::fabs(got - want) <= 5e-6 * std::fabs(want);
                }
            }
            CHECK(values_match);
        }
    }
    auto stats = read_csv(prefix + "_stats.csv");
    REQUIRE(stats.size() == 1 + 2 * 2 * (size_t)T);
    CHECK(stats[0] == std::vector<std::string>{"layer", "head", "row", "entropy", "span", "max", "self", "distance"});
    for (size_t i = 1; i < stats.size(); i++) CHECK(stats[i].size() == 8);

    // one layer and head, longer than the training length, rows sampled
    r = run(std::string(TOOL) + " -e " + ckpt + " -j " + shards + " -T 80 -layer 1 -head 0 -rows 10 -o " + dir.path + "/s");
    INFO(r.output);
    REQUIRE(r.code == 0);
    auto csv = read_csv(dir.path + "/s_L1_H0.csv");
    REQUIRE(csv.size() == 11);
    CHECK(csv[0].size() == 81);
    CHECK(csv[1][0] == "0");
    CHECK(csv[10][0] == "79");  // first and last rows always in
    CHECK(read_csv(dir.path + "/s_stats.csv").size() == 81);
    CHECK_FALSE(std::ifstream(dir.path + "/s_L0_H0.csv").good());
}

TEST_CASE("the tool reads -text with a GPT-2 vocabulary checkpoint") {
    TempDir dir("attention_maps");
    GPT2Config c = small_config(ATTN_LSSAR, 50257, 50304);
    std::string ckpt = write_checkpoint(dir.path + "/gpt2vocab.bin", c, 5);
    std::string text = "In the beginning God created the heaven and the earth.";
    GPT2Tokenizer tok;
    tok.load(GPT2Tokenizer::default_dir());
    std::vector<int> ids;
    tok.encode(text, ids, nullptr);
    Result r = run(std::string(TOOL) + " -e " + ckpt + " -text '" + text + "' -layer 0 -head 1 -o " + dir.path + "/p");
    INFO(r.output);
    REQUIRE(r.code == 0);
    auto csv = read_csv(dir.path + "/p_L0_H1.csv");
    REQUIRE(csv.size() == ids.size() + 1);
    CHECK(csv[0].size() == ids.size() + 1);
    // the empty text
    r = run(std::string(TOOL) + " -e " + ckpt + " -text ''");
    CHECK(r.code != 0);
    CHECK(r.output.find("the text is empty") != std::string::npos);
}

TEST_CASE("-p evaluates a checkpoint trained at p = 15 at another p: the maps of the model at that p") {
    TempDir dir("attention_maps");
    GPT2Config c = small_config(ATTN_LSSAR);  // p = 15
    std::string ckpt = write_checkpoint(dir.path + "/lssar.bin", c, 21);
    std::vector<int> tokens = random_tokens(40, c.vocab_size, 13);
    std::vector<uint16_t> tokens16(tokens.begin(), tokens.end());
    write_shard(dir.path + "/val_000000.bin", tokens16.data(), tokens16.size());
    const int T = c.max_seq_len;
    Result r = run(std::string(TOOL) + " -e " + ckpt + " -j '" + dir.path + "/val_*.bin' -p 3 -layer 1 -head 0 -o " +
                   dir.path + "/p3");
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("evaluating at p 3 (the checkpoint was trained at p 15)") != std::string::npos);
    CHECK(r.output.find("lssar, p 3,") != std::string::npos);
    auto csv = read_csv(dir.path + "/p3_L1_H0.csv");
    REQUIRE(csv.size() == (size_t)T + 1);
    std::vector<float> params = init_params(c, 21);
    std::vector<float> W3, W15;
    std::vector<uint8_t> valid;
    for (float p : {3.0f, 15.0f}) {
        GPT2Config cp = c;
        cp.p = p;
        ModelCPU model(cp);
        model.set_params(params);
        model.forward(tokens.data(), nullptr, 1, T);
        attention_map(model.gpt, 1, 0, p == 3.0f ? W3 : W15, valid);
    }
    // 6 significant digits in the CSV: within 5e-6 relative of the p = 3 map, and far from p = 15's
    double err3 = 0, diff15 = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++) {
            double got = std::stod(csv[t + 1][j + 1]), w3 = W3[(size_t)t * T + j];
            err3 = std::max(err3, std::fabs(got - w3) / std::max(std::fabs(w3), 1e-30));
            diff15 = std::max(diff15, std::fabs(got - W15[(size_t)t * T + j]));
        }
    CHECK(err3 <= 5e-6);
    CHECK(diff15 > 1e-2);
}

TEST_CASE("the tool refuses other variants, bad indices, text without GPT-2 vocabulary, short shards") {
    TempDir dir("attention_maps");
    GPT2Config c = small_config(ATTN_LSSAR);
    std::string ckpt = write_checkpoint(dir.path + "/lssar.bin", c, 1);
    std::string softmax = write_checkpoint(dir.path + "/softmax.bin", small_config(ATTN_SOFTMAX), 1);
    std::vector<uint16_t> tokens(40, 7);
    write_shard(dir.path + "/val_000000.bin", tokens.data(), tokens.size());
    std::string j = " -j '" + dir.path + "/val_*.bin'";
    struct Case {
        std::string args, message;
    } cases[] = {
        {" -e " + softmax + j, "made for attention softmax"},
        {" -e " + softmax + j, "ATTN=softmax"},
        {" -e " + ckpt + j + " -layer 2", "-layer 2: the checkpoint has 2 layers"},
        {" -e " + ckpt + j + " -head 7", "-head 7: the checkpoint has 2 heads"},
        {" -e " + ckpt + j + " -layer x", "-layer x: expected an integer"},
        {" -e " + ckpt + " -text 'hello'", "a vocabulary of 512 tokens is neither bytes (256) nor GPT-2 BPE"},
        {" -e " + ckpt + " -text 'hello'" + j, "give one of them"},
        {" -e " + ckpt + j + " -p 0.5", "-p 0.5: the re-weighting power must be >= 1"},
        {" -e " + ckpt + j + " -p x", "-p x: expected a number"},
        {" -e " + ckpt + j + " -p", "-p: missing value"},
        {" -e " + ckpt + j + " -T 41", "fewer than -T 41 (use -T 40 or less)"},
        {" -e " + ckpt + " -j '" + dir.path + "/none_*.bin'", "no shard matches"},
        {j, "-e CHECKPOINT is required"},
        {" -e " + dir.path + "/missing.bin" + j, "missing.bin"},
    };
    for (const Case& k : cases) {
        CAPTURE(k.args);
        Result r = run(std::string(TOOL) + k.args);
        INFO(r.output);
        CHECK(r.code != 0);
        CHECK(r.output.find(k.message) != std::string::npos);
    }
}
