// Multiple-choice evaluation (eval/mc_file.h, eval/mc_eval.h, the tools build/mc_eval_*_lssar,
// the trainer's -f, scripts/prepare_mc.py):
// - the format: a file computed by hand, written alike by the C++ and the Python writer and read
//   back; every malformed case refused with the file, the example, the byte offset and the fix;
// - scoring reads the loss where each completion token is predicted (against log-softmax of the
//   logits of each row alone), whatever the packing of examples into rows and their lengths;
// - a planted file (true ending = the real next tokens of the validation text, distractors =
//   random ids): near 100% after 40 training steps (trainer's log and the tool alike), near 0%
//   with the labels rotated, near chance for the untrained model;
// - the emulated CUDA tool and an independent PyTorch model (test/gpt2_torch.py, float64) score
//   the same file as the CPU tool: same predictions, losses within the precision's tolerance;
// - the tool's refusals, and the preparation script's unit tests (test/test_prepare_mc.py).
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "eval/mc_eval.h"
#include "model/backend_cpu.h"
#include "runtime/checkpoint.h"
#include "model/rand.h"

static const char* CPU_TOOL = "./build/mc_eval_cpu_lssar -pr ref";  // the reference path, against PyTorch
static const char* EMU_TOOL = "./build/mc_eval_cu_emu_lssar";  // the CUDA back end, emulated
static const char* SOFTMAX_TOOL = "./build/mc_eval_cpu_softmax -pr ref";
static const char* TRAINER = "./train_gpt2cpu_lssar";
static const int VOCAB = 512;

// ----------------------------------------------------------------------------
// helpers

static std::string as_string(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// A file from raw uint16 streams, nothing checked: header {magic, version, count, longest} as given
// (longest < 0: the true longest), then the streams as they are.
static std::string raw_file(const std::vector<std::vector<uint16_t>>& streams, int32_t magic = MC_MAGIC,
                            int32_t version = MC_VERSION, int32_t count = -1, int32_t longest = -1) {
    int32_t h[MC_HEADER_INTS] = {};
    int m = 0;
    for (const auto& s : streams) m = std::max(m, (int)s.size() * 2);
    h[0] = magic;
    h[1] = version;
    h[2] = count >= 0 ? count : (int32_t)streams.size();
    h[3] = longest >= 0 ? longest : m;
    std::string out((const char*)h, sizeof h);
    for (const auto& s : streams) out.append((const char*)s.data(), s.size() * 2);
    return out;
}

// An example's stream with its size field filled in: index, label, then the token lists
// (context first), each written as its length and ids.
static std::vector<uint16_t> stream(int index, int label, const std::vector<std::vector<uint16_t>>& lists) {
    std::vector<uint16_t> s = {MC_START, 0, (uint16_t)index, (uint16_t)label, (uint16_t)(lists.size() - 1)};
    for (const auto& l : lists) {
        s.push_back((uint16_t)l.size());
        s.insert(s.end(), l.begin(), l.end());
    }
    s[1] = (uint16_t)(s.size() * 2);
    return s;
}

// mc_read's message for the file holding bytes, or "" if it reads
static std::string read_error(const std::string& dir, const std::string& bytes, int vocab = VOCAB, int max_tokens = 32) {
    std::string path = dir + "/case.bin";
    write_file(path, bytes);
    try {
        mc_read(path, vocab, max_tokens);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

static bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// CSV rows of the tool (and of gpt2_torch.py): index,label,pred,pred_norm,sum_loss_*,mean_loss_*
struct CsvRow {
    int index, label, pred, pred_norm;
    std::vector<double> sums, means;
};

static std::vector<CsvRow> read_csv(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    REQUIRE_MESSAGE(line.rfind("index,label,pred,pred_norm,sum_loss_0", 0) == 0, path << ": header " << line);
    std::vector<CsvRow> rows;
    while (std::getline(f, line)) {
        std::vector<std::string> cells;
        std::stringstream ss(line);
        std::string c;
        while (std::getline(ss, c, ',')) cells.push_back(c);
        REQUIRE(cells.size() >= 8);
        CsvRow r{std::stoi(cells[0]), std::stoi(cells[1]), std::stoi(cells[2]), std::stoi(cells[3]), {}, {}};
        size_t width = (cells.size() - 4) / 2;
        for (size_t i = 0; i < width; i++) {
            if (!cells[4 + i].empty()) r.sums.push_back(std::stod(cells[4 + i]));
            if (!cells[4 + width + i].empty()) r.means.push_back(std::stod(cells[4 + width + i]));
        }
        rows.push_back(r);
    }
    return rows;
}

// "acc_norm 0.9844" -> 0.9844 from a tool's output (the first match of `key` at a line start)
static double printed(const std::string& out, const std::string& key) {
    size_t at = out.find("\n" + key + " ");
    REQUIRE_MESSAGE(at != std::string::npos, "no '" << key << "' in\n" << out);
    return std::stod(out.substr(at + key.size() + 2));
}

// ----------------------------------------------------------------------------
// the format

TEST_CASE("format: a file computed by hand, the C++ and the Python writer, the reader") {
    // two examples: context [1, 2], completions [3] and [4, 5], label 1; context [7],
    // completions [8], [9], [10], label 2
    std::vector<uint16_t> words = {65535, 26, 0, 1, 2, 2, 1, 2, 1, 3, 2, 4, 5,
                                   65535, 26, 1, 2, 3, 1, 7, 1, 8, 1, 9, 1, 10};
    int32_t h[256] = {20240522, 1, 2, 26};
    std::string expected = std::string((const char*)h, sizeof h) + std::string((const char*)words.data(), words.size() * 2);
    std::vector<McExample> ex(2);
    ex[0].label = 1;
    ex[0].context = {1, 2};
    ex[0].completions = {{3}, {4, 5}};
    ex[1].label = 2;
    ex[1].context = {7};
    ex[1].completions = {{8}, {9}, {10}};
    CHECK(as_string(mc_encode(ex)) == expected);

    TempDir dir("mc_format");
    std::string py = dir.path + "/py.bin";
    Result r = run("/usr/bin/python3 -c 'import sys; sys.path.insert(0, \"scripts\"); import mc_evalfile as m; "
                   "m.write_evalfile(\"" + py + "\", [{\"label\": 1, \"ctx_tokens\": [1, 2], \"ending_tokens\": [[3], [4, 5]]}, "
                   "{\"label\": 2, \"ctx_tokens\": [7], \"ending_tokens\": [[8], [9], [10]]}])'");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK(read_file(py) == expected);

    std::string cpp = dir.path + "/cpp.bin";
    mc_write(cpp, ex);
    CHECK(read_file(cpp) == expected);
    McFile f = mc_read(cpp, VOCAB, 8);
    REQUIRE(f.examples.size() == 2);
    CHECK(f.max_completions == 3);
    CHECK(f.longest_row == 4);
    CHECK(f.examples[1].offset == 1024 + 26);
    for (int i = 0; i < 2; i++) {
        CHECK(f.examples[i].index == i);
        CHECK(f.examples[i].label == ex[i].label);
        CHECK(f.examples[i].context == ex[i].context);
        CHECK(f.examples[i].completions == ex[i].completions);
    }
}

TEST_CASE("format: every malformed file is refused with the file, the example, the byte offset and the fix") {
    TempDir dir("mc_bad");
    std::string path = dir.path + "/case.bin";
    std::vector<uint16_t> a = stream(0, 1, {{1, 2}, {3}, {4, 5}}), b = stream(1, 0, {{7}, {8}, {9}});
    std::string good = raw_file({a, b});
    REQUIRE(read_error(dir.path, good) == "");
    const std::string at1 = "example 1 at byte offset " + std::to_string(1024 + a.size() * 2) + ": ";
    struct Case {
        const char* name;
        std::string bytes;
        std::string where;  // "" for header errors
        std::string what;
    };
    auto with_b = [&](std::vector<uint16_t> s) { return raw_file({a, s}); };
    std::vector<uint16_t> b_marker = b, b_index = b, b_big = b, b_small = b, b_odd = b;
    b_marker[0] = 1234;
    b_index[2] = 5;
    b_big[1] += 2;
    b_small[1] -= 2;
    b_odd[1] = 11;
    std::string reserved = good;
    reserved[4 * 7] = 1;
    std::vector<Case> cases = {
        {"truncated header", good.substr(0, 100), "", "less than the 1024-byte header"},
        {"wrong magic", raw_file({a, b}, 1234), "", "magic 1234, expected 20240522"},
        {"a token shard", raw_file({a, b}, 20240520), "", "token shard, not an eval file"},
        {"wrong version", raw_file({a, b}, MC_MAGIC, 2), "", "version 2"},
        {"no examples", raw_file({}, MC_MAGIC, MC_VERSION, 0), "", "0 examples"},
        {"reserved header int", reserved, "", "header int 7 is 1"},
        {"longest example field", raw_file({a, b}, MC_MAGIC, MC_VERSION, -1, 40), "", "longest example is 40 bytes"},
        {"truncated example", good.substr(0, good.size() - 4), at1, "truncated"},
        {"fewer examples than announced", raw_file({a, b}, MC_MAGIC, MC_VERSION, 3),
         "example 2 at byte offset " + std::to_string(good.size()) + ": ", "announces 3 examples"},
        {"trailing bytes", good + std::string(6, '\0'), "", "6 bytes after the last of the 2 examples"},
        {"missing start marker", with_b(b_marker), at1, "missing start marker: found 1234"},
        {"wrong example index", with_b(b_index), at1, "example index field 5, expected 1"},
        {"size field too large", with_b(b_big) + std::string(2, '\0'), at1, "but its fields take 22"},
        {"size field too small", with_b(b_small), at1, "run past its size field"},
        {"odd size field", with_b(b_odd), at1, "size field 11 bytes"},
        {"label out of range", with_b(stream(1, 2, {{7}, {8}, {9}})), at1, "label 2 is not one of its 2 completions"},
        {"zero completions", with_b(stream(1, 0, {{7}})), at1, "0 completions"},
        {"one completion", with_b(stream(1, 0, {{7}, {8}})), at1, "1 completions"},
        {"empty context", with_b(stream(1, 0, {{}, {8}, {9}})), at1, "empty context"},
        {"empty completion", with_b(stream(1, 0, {{7}, {8}, {}})), at1, "empty completion 1"},
        {"token outside the vocabulary", with_b(stream(1, 0, {{7}, {8}, {600}})), at1,
         "completion 1 token 0 (byte offset " + std::to_string(1024 + a.size() * 2 + 20) + ") is id 600, outside the "
         "model's vocabulary of 512"},
        {"the start marker as a token", with_b(stream(1, 0, {{65535}, {8}, {9}})), at1, "is id 65535"},
        {"longer than the model", with_b(stream(1, 0, {std::vector<uint16_t>(30, 7), {8}, {9, 9, 9}})), at1,
         "take 33 tokens, more than the model's maximum length 32"},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        std::string msg = read_error(dir.path, c.bytes);
        CHECK_MESSAGE(contains(msg, path + ": " + c.where), msg);
        CHECK_MESSAGE(contains(msg, c.what), msg);
        // what to do: every message ends with a fix
        CHECK_MESSAGE((contains(msg, "prepare") || contains(msg, "evaluate") || contains(msg, "drop")), msg);
    }
    try {
        mc_read(dir.path + "/missing.bin");
        FAIL("a missing file was read");
    } catch (const std::exception& e) {
        CHECK(contains(e.what(), dir.path + "/missing.bin: cannot open"));
    }
}

// ----------------------------------------------------------------------------
// scoring

static GPT2Config tiny_config() {
    GPT2Config c;
    c.max_seq_len = 32;
    c.vocab_size = VOCAB;
    c.padded_vocab_size = VOCAB;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 64;  // head dim 32, the smallest the CUDA attention kernels take
    c.attn = ATTN_LSSAR;
    c.p = 15;
    return c;
}

TEST_CASE("scoring: the loss of each completion token where it is predicted, however the rows are packed") {
    ModelCPU model(tiny_config());
    model.init(5);
    Rng rng(3);
    std::vector<McExample> ex(5);
    for (int i = 0; i < 5; i++) {
        ex[i].index = i;
        ex[i].context.resize(2 + i * 3);
        for (int& t : ex[i].context) t = (int)(rng.next_u64() % VOCAB);
        ex[i].completions.resize(2 + i % 3);
        for (auto& c : ex[i].completions) {
            c.resize(1 + rng.next_u64() % 6);
            for (int& t : c) t = (int)(rng.next_u64() % VOCAB);
        }
        ex[i].label = i % (int)ex[i].completions.size();
    }
    TempDir dir("mc_score");
    mc_write(dir.path + "/f.bin", ex);
    McFile file = mc_read(dir.path + "/f.bin", VOCAB, 32);
    std::vector<int> all = {0, 1, 2, 3, 4};
    // reference: each row context + completion alone, -log softmax of its logits at the positions
    std::vector<std::vector<double>> ref(5);
    std::vector<float> logits(VOCAB);
    for (int i = 0; i < 5; i++)
        for (const auto& comp : ex[i].completions) {
            std::vector<int> row = ex[i].context;
            row.insert(row.end(), comp.begin(), comp.end());
            model.forward(row.data(), nullptr, 1, (int)row.size());
            double sum = 0;
            for (size_t k = 0; k < comp.size(); k++) {
                model.logits_row(0, (int)(ex[i].context.size() - 1 + k), logits.data());
                double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
                for (float l : logits) z += std::exp((double)l - mx);
                sum += mx + std::log(z) - logits[comp[k]];
            }
            ref[i].push_back(sum);
        }
    // float32 forwards of other shapes: the same sums to rounding (1e-4 of a loss of ~6 per token)
    // one length for all (t_step 0), or groups by length (t_step 4: shortest first, other shapes)
    for (auto [B, t_step] : {std::pair{4, 0}, {9, 0}, {4, 4}, {9, 4}}) {
        INFO("B " << B << ", t_step " << t_step);
        McResult r = mc_score(model, file, all, B, 32, nullptr, t_step);
        REQUIRE(r.per_example.size() == 5);
        int correct = 0, correct_norm = 0;
        for (int i = 0; i < 5; i++) {
            const McExampleScore& s = r.per_example[i];
            CHECK(s.index == i);
            REQUIRE(s.sum_loss.size() == ex[i].completions.size());
            for (size_t c = 0; c < s.sum_loss.size(); c++) {
                CHECK(s.sum_loss[c] == doctest::Approx(ref[i][c]).epsilon(1e-4));
                CHECK(s.mean_loss[c] == doctest::Approx(ref[i][c] / ex[i].completions[c].size()).epsilon(1e-4));
            }
            CHECK(s.pred == mc_argmin(s.sum_loss));
            CHECK(s.pred_norm == mc_argmin(s.mean_loss));
            correct += s.pred == ex[i].label;
            correct_norm += s.pred_norm == ex[i].label;
        }
        CHECK(r.correct == correct);
        CHECK(r.correct_norm == correct_norm);
        CHECK(r.chance == doctest::Approx((1 / 2.0 + 1 / 3.0 + 1 / 4.0 + 1 / 2.0 + 1 / 3.0) / 5));
    }
    CHECK_THROWS_WITH_AS(mc_score(model, file, all, 3, 32), doctest::Contains("do not fit"), std::invalid_argument);
    double lo, hi;
    mc_wilson95(50, 100, &lo, &hi);  // the textbook interval of 50/100: [0.4038, 0.5962]
    CHECK(lo == doctest::Approx(0.4038).epsilon(1e-3));
    CHECK(hi == doctest::Approx(0.5962).epsilon(1e-3));
}

// ----------------------------------------------------------------------------
// the planted file, the trainer, the tools

// Shards of a noisy periodic sequence (the trainer learns it in a few dozen steps), the planted
// file made from the validation split and the same file with its labels rotated.
struct Planted {
    TempDir dir{"mc_planted"};
    std::string planted, rotated, small, train_out;
    std::vector<uint16_t> val;
    Planted() {
        Rng rng(7);
        for (const char* split : {"train", "val"}) {
            std::vector<uint16_t> tokens(split[0] == 't' ? 12000 : 3000);
            for (size_t i = 0; i < tokens.size(); i++)
                tokens[i] = rng.uniform() < 0.1 ? (uint16_t)(rng.next_u64() % VOCAB) : (uint16_t)((i * 7 + i / 13) % 500);
            write_shard(dir.path + "/" + split + "_000000.bin", tokens.data(), tokens.size());
            if (split[0] == 'v') val = tokens;
        }
        // 64 examples: 12 tokens of the validation text, its next 4 tokens as the true ending,
        // three endings of 4 random ids as distractors, the true one at a random position
        std::vector<McExample> ex(64), rot;
        for (int i = 0; i < 64; i++) {
            size_t at = (size_t)i * 40;
            ex[i].context.assign(val.begin() + at, val.begin() + at + 12);
            ex[i].label = (int)(rng.next_u64() % 4);
            for (int c = 0; c < 4; c++) {
                std::vector<int> end(4);
                for (int k = 0; k < 4; k++)
                    end[k] = c == ex[i].label ? val[at + 12 + k] : (int)(rng.next_u64() % VOCAB);
                ex[i].completions.push_back(end);
            }
        }
        rot = ex;
        for (McExample& e : rot) e.label = (e.label + 1) % 4;
        planted = dir.path + "/planted.bin";
        rotated = dir.path + "/rotated.bin";
        small = dir.path + "/small.bin";
        mc_write(planted, ex);
        mc_write(rotated, rot);
        mc_write(small, std::vector<McExample>(ex.begin(), ex.begin() + 8));
        train_out = dir.path + "/run";
        setenv("OMP_WAIT_POLICY", "passive", 1);
    }
};

static Planted& planted() {
    static Planted p;
    return p;
}

static std::string trained_checkpoint() {
    Planted& p = planted();
    std::string ck = p.train_out + "/ckpt_00000040.bin";
    static bool done = false;
    if (!done) {
        Result r = run(std::string(TRAINER) + " -i " + p.dir.path + "/train_*.bin -j " + p.dir.path +
                       "/val_*.bin -e d2c64h2v512 -b 8 -t 32 -x 40 -l 3e-3 -u 5 -v 20 -m 2 -s 0 -n 40 -o " + p.train_out +
                       " -f " + p.planted + "," + p.rotated + " -fv 20");
        REQUIRE_MESSAGE(r.code == 0, r.output);
        std::istringstream lines(r.output);
        std::string line, mc_lines;
        while (std::getline(lines, line))
            if (contains(line, " acc_norm ")) mc_lines += line + "\n";
        MESSAGE("the trainer's multiple-choice lines:\n" << mc_lines);
        done = true;
    }
    return ck;
}

TEST_CASE("planted file: near 100% after 40 steps in the trainer's log and the tool, rotated near 0%, untrained near chance") {
    Planted& p = planted();
    std::string ck = trained_checkpoint();
    std::string log = read_file(p.train_out + "/log.jsonl");
    for (const char* key : {"{\"step\":20,\"mc_planted_acc\":", "{\"step\":40,\"mc_planted_acc\":", "\"mc_rotated_acc_norm\":"})
        CHECK_MESSAGE(contains(log, key), key << " not in\n" << log);
    size_t at = log.rfind("\"mc_planted_acc_norm\":");
    REQUIRE(at != std::string::npos);
    double trainer_acc_norm = std::stod(log.substr(at + 22));
    CHECK(trainer_acc_norm >= 0.9);

    Result r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.planted + " -o " + p.dir.path + "/planted.csv");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    MESSAGE(r.output);
    CHECK(contains(r.output, "examples 64"));
    CHECK(contains(r.output, "95% CI ["));
    CHECK(printed(r.output, "acc") >= 0.9);
    CHECK(printed(r.output, "acc_norm") >= 0.9);
    std::vector<CsvRow> rows = read_csv(p.dir.path + "/planted.csv");
    REQUIRE(rows.size() == 64);
    int correct = 0;
    for (const CsvRow& row : rows) correct += row.pred_norm == row.label;
    CHECK(correct / 64.0 == doctest::Approx(printed(r.output, "acc_norm")).epsilon(1e-4));
    // the trainer packs 2 examples into its 8 rows of 32, the tool one into 4 rows of 16: same verdicts
    CHECK(correct / 64.0 == doctest::Approx(trainer_acc_norm).epsilon(1e-6));

    r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.rotated);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK(printed(r.output, "acc") <= 0.1);
    CHECK(printed(r.output, "acc_norm") <= 0.1);

    // the untrained model of the same config: no better than chance by a wide margin
    Checkpoint init;
    checkpoint_read(ck, init);
    gpt2_init_params(init.params.data(), init.config, 11);
    init.train = TrainState();
    std::string init_path = p.dir.path + "/init.bin";
    checkpoint_write(init_path, init);
    r = run(std::string(CPU_TOOL) + " -e " + init_path + " -f " + p.planted);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    MESSAGE("untrained: acc_norm " << printed(r.output, "acc_norm"));
    CHECK(printed(r.output, "acc_norm") < 0.6);
}

TEST_CASE("the emulated CUDA tool and the PyTorch model score as the CPU tool") {
    Planted& p = planted();
    std::string ck = trained_checkpoint();
    std::string cpu_csv = p.dir.path + "/small_cpu.csv", emu_csv = p.dir.path + "/small_emu.csv",
                torch_csv = p.dir.path + "/small_torch.csv";
    Result r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.small + " -o " + cpu_csv);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    double cpu_acc = printed(r.output, "acc"), cpu_acc_norm = printed(r.output, "acc_norm");
    std::vector<CsvRow> cpu = read_csv(cpu_csv);

    // CUDA back end: bf16 weights and activations, fp32 accumulation. test_model_cuda bounds its
    // losses by 1e-2 relative; a completion's mean loss is such a mean (of 4 tokens), so 1e-2 of it
    // plus 1e-2 absolute for the small losses of the learnt endings.
    r = run(std::string(EMU_TOOL) + " -e " + ck + " -f " + p.small + " -o " + emu_csv);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK(contains(r.output, "cuda back end"));
    std::vector<CsvRow> emu = read_csv(emu_csv);
    REQUIRE(emu.size() == cpu.size());
    double worst = 0;
    for (size_t i = 0; i < cpu.size(); i++) {
        CHECK(emu[i].pred == cpu[i].pred);
        CHECK(emu[i].pred_norm == cpu[i].pred_norm);
        for (size_t c = 0; c < cpu[i].means.size(); c++)
            worst = std::max(worst, std::fabs(emu[i].means[c] - cpu[i].means[c]) / (1e-2 * std::fabs(cpu[i].means[c]) + 1e-2));
    }
    MESSAGE("emulated CUDA vs CPU: largest mean-loss difference / tolerance " << worst);
    CHECK(worst <= 1.0);
    CHECK(printed(r.output, "acc") == cpu_acc);
    CHECK(printed(r.output, "acc_norm") == cpu_acc_norm);

    // PyTorch in float64 against the fp32 CPU model: a summed loss of 4 tokens, each -log softmax
    // of logits computed in fp32 through 2 layers (relative error ~1e-6 per logit, times the
    // logit scale ~10): 1e-4 absolute plus 1e-5 relative covers it with margin.
    r = run("/usr/bin/python3 test/gpt2_torch.py --mc-eval " + ck + " --mc-file " + p.small + " --out " + torch_csv);
    if (r.code != 0 && contains(r.output, "No module named 'torch'")) {
        MESSAGE("PyTorch not available: the comparison with test/gpt2_torch.py is skipped");
        return;
    }
    REQUIRE_MESSAGE(r.code == 0, r.output);
    std::vector<CsvRow> ref = read_csv(torch_csv);
    REQUIRE(ref.size() == cpu.size());
    worst = 0;
    int correct = 0, correct_norm = 0;
    for (size_t i = 0; i < cpu.size(); i++) {
        CHECK(ref[i].pred == cpu[i].pred);
        CHECK(ref[i].pred_norm == cpu[i].pred_norm);
        correct += ref[i].pred == ref[i].label;
        correct_norm += ref[i].pred_norm == ref[i].label;
        for (size_t c = 0; c < cpu[i].sums.size(); c++)
            worst = std::max(worst, std::fabs(cpu[i].sums[c] - ref[i].sums[c]) / (1e-4 + 1e-5 * std::fabs(ref[i].sums[c])));
    }
    MESSAGE("CPU (fp32) vs PyTorch (fp64): largest summed-loss difference / tolerance " << worst);
    CHECK(worst <= 1.0);
    CHECK(correct / (double)cpu.size() == doctest::Approx(cpu_acc).epsilon(1e-9));
    CHECK(correct_norm / (double)cpu.size() == doctest::Approx(cpu_acc_norm).epsilon(1e-9));
}

TEST_CASE("-p evaluates the p = 15 checkpoint at p = 3: as the same weights saved at p = 3") {
    Planted& p = planted();
    std::string ck = trained_checkpoint();
    Checkpoint at3;
    checkpoint_read(ck, at3);
    REQUIRE(at3.config.p == 15.0f);
    at3.config.p = 3.0f;
    std::string at3_path = p.dir.path + "/at_p3.bin";
    checkpoint_write(at3_path, at3);
    std::string csv15 = p.dir.path + "/p15.csv", csv_flag = p.dir.path + "/p3_flag.csv",
                csv_saved = p.dir.path + "/p3_saved.csv";
    Result r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.small + " -o " + csv15);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.small + " -p 3 -o " + csv_flag);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK_MESSAGE(contains(r.output, "evaluating at p 3 (the checkpoint was trained at p 15)"), r.output);
    CHECK_MESSAGE(contains(r.output, "lssar, p 3,"), r.output);
    r = run(std::string(CPU_TOOL) + " -e " + at3_path + " -f " + p.small + " -o " + csv_saved);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    std::vector<CsvRow> p15 = read_csv(csv15), flag = read_csv(csv_flag), saved = read_csv(csv_saved);
    REQUIRE(flag.size() == saved.size());
    REQUIRE(flag.size() == p15.size());
    double moved = 0;
    for (size_t i = 0; i < flag.size(); i++)
        for (size_t c = 0; c < flag[i].sums.size(); c++) {
            CHECK(flag[i].sums[c] == saved[i].sums[c]);  // the same model: the same bits
            moved = std::max(moved, std::fabs(flag[i].sums[c] - p15[i].sums[c]));
        }
    CHECK(moved > 1e-3);  // and not the p = 15 model
    r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.small + " -p 0.5");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "-p 0.5: the re-weighting power must be >= 1"), r.output);
}

TEST_CASE("the tool's refusals") {
    Planted& p = planted();
    std::string ck = trained_checkpoint();
    Result r = run(std::string(SOFTMAX_TOOL) + " -e " + ck + " -f " + p.planted);
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "lssar"), r.output);
    r = run(std::string(CPU_TOOL) + " -e " + ck);
    CHECK(r.code == 1);
    CHECK(contains(r.output, "-f FILE.bin is required"));
    // a file of the GPT-2 vocabulary for this 512-token model, an example longer than its 32 tokens
    std::vector<McExample> ex(1);
    ex[0].context = {1, 2, 3};
    ex[0].completions = {{4}, {50000}};
    mc_write(p.dir.path + "/vocab.bin", ex);
    r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.dir.path + "/vocab.bin");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "example 0 at byte offset 1024: completion 1 token 0"), r.output);
    ex[0].completions = {{4}, std::vector<int>(30, 5)};
    mc_write(p.dir.path + "/long.bin", ex);
    r = run(std::string(CPU_TOOL) + " -e " + ck + " -f " + p.dir.path + "/long.bin");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "33 tokens, more than the model's maximum length 32"), r.output);
    // the trainer refuses a bad file at the start
    r = run(std::string(TRAINER) + " -i " + p.dir.path + "/train_*.bin -j '' -e d2c64h2v512 -b 8 -t 32 -x 1 -s 0 -f " +
            p.dir.path + "/long.bin");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "long.bin: example 0 at byte offset 1024"), r.output);
}

TEST_CASE("scripts/prepare_mc.py: each task's conversion on hand-written records (test/test_prepare_mc.py)") {
    Result r = run("/usr/bin/python3 test/test_prepare_mc.py");
    MESSAGE(r.output);
    CHECK(r.code == 0);
}
