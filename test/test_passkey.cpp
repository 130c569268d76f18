// Passkey retrieval (eval/passkey.h and the tool build/passkey_cpu_lssar):
// - prompt construction: length within one filler of L, the needle where its depth says, the
//   token lists exactly the GPT-2 encoding of the prompt's text;
// - the one-pass teacher-forced verdict against step-by-step greedy generation (eval/sample.h's
//   generate) with a small random model;
// - scoring with mock models whose answers are known (always right, always wrong through a tie,
//   right only for needles in the last quarter, judged from the decoded text);
// - the tool end to end on a checkpoint of the small model, and its refusals.
// Built for each back end (below); needs the GPT-2 vocabulary (scripts/install_gpt2_vocab.sh; the
// test script installs it).
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "eval/passkey.h"
#include "eval/sample.h"
#include "runtime/checkpoint.h"
#include "test/passkey_parts.h"

// One source, three builds: the CPU back end (build/test_passkey, with build/passkey_cpu_lssar),
// the CUDA back end under the SIMT emulator (build/test_passkey_cu_emu, with
// build/passkey_cu_emu_lssar) and the CUDA back end on a GPU (build/test_passkey_gpu, nvcc, with
// build/passkey_cu_lssar).
#if defined(SIMT) || defined(__CUDACC__)
#include "model/gpt2_cuda.cuh"
typedef GPT2Cuda RealModel;
#ifdef SIMT
static const char* TOOL = "./build/passkey_cu_emu_lssar";
#else
static const char* TOOL = "./build/passkey_cu_lssar";
#endif
#else
#include "model/backend_cpu.h"
typedef ModelCPU RealModel;
static const char* TOOL = "./build/passkey_cpu_lssar -pr ref";  // the reference path, against the fp32 model
#endif

// ----------------------------------------------------------------------------
// helpers

static std::string decode(const std::vector<int>& ids) { return tokenizer().decode(ids.data(), ids.size()); }

static size_t count_occurrences(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
    return n;
}

// the small model of the tests: GPT-2's vocabulary, 1 layer, 64 channels, 2 heads (head dim 32,
// the smallest the CUDA attention kernels take)
static GPT2Config small_config(AttnKind attn = ATTN_LSSAR, int vocab = 50257, int padded = 50304) {
    GPT2Config c;
    c.max_seq_len = 128;  // shorter than the lengths asked: RoPE evaluates beyond it
    c.vocab_size = vocab;
    c.padded_vocab_size = padded;
    c.num_layers = 1;
    c.num_heads = 2;
    c.channels = 64;
    c.attn = attn;
    return c;
}


static std::string write_checkpoint(const std::string& dir, const std::string& name, const GPT2Config& c,
                                    uint64_t seed) {
    Checkpoint ck;
    ck.config = c;
    ck.world_size = 1;
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    gpt2_param_sizes(sizes, c);
    for (size_t s : sizes) n += s;
    ck.params.resize(n);
    gpt2_init_params(ck.params.data(), c, seed);
    std::string path = dir + "/" + name;
    checkpoint_write(path, ck);
    return path;
}

// ----------------------------------------------------------------------------
// (a) prompt construction

TEST_CASE("the prompt fills L to within one filler, its tokens encode exactly its text") {
    const PasskeyParts& p = parts();
    const int F = (int)p.filler.size();
    REQUIRE(F > 10);
    for (int L : {256, 512, 1000, 1024}) {
        for (double depth : {0.0, 0.3, 0.5, 0.77, 1.0}) {
            int key = 10000 + (L * 7919 + (int)(depth * 1000)) % 90000;
            CAPTURE(L);
            CAPTURE(depth);
            CAPTURE(key);
            PasskeyPrompt pr = passkey_prompt(p, key, depth, L);
            int total = (int)(pr.tokens.size() + pr.answer.size());
            CHECK(total <= L);
            CHECK(total > L - F);  // one more filler would not fit
            CHECK(pr.fillers > 0);
            // the text, assembled here from the sentences, is what the tokens spell, and its
            // GPT-2 encoding is exactly prompt + answer (the parts meet at pre-tokeniser boundaries)
            std::string text = passkey_instruction_text();
            for (int i = 0; i < pr.fillers; i++) {
                if (i == pr.fillers_before) text += passkey_needle_text(key);
                text += passkey_filler_text();
            }
            if (pr.fillers_before == pr.fillers) text += passkey_needle_text(key);
            text += passkey_question_text();
            std::vector<int> all = pr.tokens;
            all.insert(all.end(), pr.answer.begin(), pr.answer.end());
            CHECK(decode(all) == text + " " + std::to_string(key));
            std::vector<int> encoded;
            tokenizer().encode(text + " " + std::to_string(key), encoded, nullptr);
            CHECK(encoded == all);
            // the answer and the needle where the prompt says
            CHECK(decode(pr.answer) == " " + std::to_string(key));
            std::vector<int> needle(pr.tokens.begin() + pr.needle_pos, pr.tokens.begin() + pr.needle_pos + pr.needle_len);
            CHECK(decode(needle) == passkey_needle_text(key));
            std::string prompt = decode(pr.tokens);
            CHECK(prompt.rfind(passkey_instruction_text(), 0) == 0);
            CHECK(prompt.size() >= strlen(passkey_question_text()));
            CHECK(prompt.substr(prompt.size() - strlen(passkey_question_text())) == passkey_question_text());
            CHECK(count_occurrences(prompt, passkey_filler_text()) == (size_t)pr.fillers);
            CHECK(count_occurrences(prompt, "The pass key is " + std::to_string(key) + ".") == 1);
            // the needle's position follows the depth: at the ends exactly, in between within one
            // filler (the needle sits between whole fillers, placed at the nearest one)
            int first = (int)p.instruction.size();
            int last = (int)(pr.tokens.size() - p.question.size()) - pr.needle_len;  // right before the question
            if (depth == 0.0) CHECK(pr.needle_pos == first);
            if (depth == 1.0) CHECK(pr.needle_pos == last);
            double want = first + depth * (last - first);
            CHECK(std::fabs(pr.needle_pos - want) <= 0.5 * F);
            CHECK(std::fabs(pr.depth - depth) <= 0.5 / pr.fillers);
        }
    }
}

TEST_CASE("lengths that cannot hold instruction, needle, question and answer are refused") {
    const PasskeyParts& p = parts();
    int min_len = passkey_min_length(p);
    CHECK(min_len > (int)(p.instruction.size() + p.question.size()));
    Rng rng(5);
    for (int i = 0; i < 200; i++) {
        int key = PASSKEY_MIN_KEY + (int)(rng.next_u64() % 90000);
        PasskeyPrompt pr = passkey_prompt(p, key, rng.uniform(), min_len);  // fits every key
        CHECK(pr.tokens.size() + pr.answer.size() <= (size_t)min_len);
    }
    CHECK_THROWS_WITH_AS(passkey_prompt(p, 12345, 0.5, 40), doctest::Contains("too short"), std::invalid_argument);
    CHECK_THROWS_AS(passkey_prompt(p, 123, 0.5, 1024), std::invalid_argument);    // not 5 digits
    CHECK_THROWS_AS(passkey_prompt(p, 12345, 1.5, 1024), std::invalid_argument);  // depth outside [0, 1]
}

// ----------------------------------------------------------------------------
// (b) the one-pass verdict against greedy generation, with a real (random) model

TEST_CASE("one teacher-forced pass agrees with greedy generation") {
    RealModel model(small_config());
    model.init(42);
    const int L = 256;
    Rng draws(9), unused(0);
    for (int trial = 0; trial < 4; trial++) {
        CAPTURE(trial);
        int key = PASSKEY_MIN_KEY + (int)(draws.next_u64() % 90000);
        PasskeyPrompt pr = passkey_prompt(parts(), key, draws.uniform(), L);
        int n = (int)pr.answer.size();
        // what the model generates greedily, one token per forward (eval/sample.h)
        std::vector<int> generated = pr.tokens;
        generate(model, generated, n, 1, L, 1, 1.0f, unused, GPT2Tokenizer::EOT);
        generated.erase(generated.begin(), generated.begin() + pr.tokens.size());
        REQUIRE((int)generated.size() == n);

        std::vector<int> predicted;
        bool verdict = passkey_greedy_match(model, pr.tokens, pr.answer, L, &predicted);
        CHECK(verdict == (generated == pr.answer));
        // the first prediction reads the prompt alone: it is the first generated token
        CHECK(predicted[0] == generated[0]);
        // the model's own greedy output, scored as the answer, is reproduced position by position
        std::vector<int> own;
        CHECK(passkey_greedy_match(model, pr.tokens, generated, L, &own));
        CHECK(own == generated);
        // and any other answer is not: change the last token
        std::vector<int> other = generated;
        other.back() = (other.back() + 1) % model.config.vocab_size;
        CHECK_FALSE(passkey_greedy_match(model, pr.tokens, other, L));
    }
}

// ----------------------------------------------------------------------------
// (c) scoring with mock models

// The back-end interface eval/passkey.h uses, with known answers. The correct next token at
// position t is the input at t + 1 (the scorer feeds the answer after the prompt).
//   RIGHT:        the correct token ties for the maximum with the highest real id (ties go to
//                 the lower id, the correct one); the padded columns hold a larger value, which
//                 must be ignored
//   WRONG:        the correct token ties with the id below it, which wins the tie
//   LAST_QUARTER: RIGHT if the needle is in the last quarter of the fillers, else WRONG; the
//                 depth is read from the decoded text (fillers before the needle / all fillers)
struct MockModel {
    enum Mode { RIGHT, WRONG, LAST_QUARTER } mode;
    GPT2Config config = small_config();
    std::vector<int> inputs;
    bool right_now = false;  // the verdict of the last forward's prompt

    explicit MockModel(Mode m) : mode(m) {}

    float forward(const int* in, const int* targets, int B, int T) {
        REQUIRE(B == 1);
        REQUIRE(targets == nullptr);
        inputs.assign(in, in + T);
        right_now = mode == RIGHT;
        if (mode == LAST_QUARTER) {
            std::string text = decode(inputs);
            size_t needle = text.find(" The pass key is ");
            REQUIRE(needle != std::string::npos);
            size_t before = count_occurrences(text.substr(0, needle), passkey_filler_text());
            size_t all = count_occurrences(text, passkey_filler_text());
            REQUIRE(all > 0);
            right_now = (double)before / (double)all >= 0.75;
        }
        return -1.0f;
    }

    void logits_row(int b, int t, float* out) {
        REQUIRE(b == 0);
        REQUIRE(t + 1 < (int)inputs.size());
        int V = config.vocab_size, correct = inputs[t + 1];
        REQUIRE(correct > 0);
        REQUIRE(correct < V - 1);
        std::fill(out, out + config.padded_vocab_size, 0.0f);
        out[V] = 5.0f;  // a padded column: not a token
        out[correct] = 1.0f;
        out[right_now ? V - 1 : correct - 1] = 1.0f;
    }
};

TEST_CASE("mock models: always right, always wrong, right in the last quarter") {
    const int L = 512, trials = 40;
    const uint64_t seed = 3;
    MockModel right(MockModel::RIGHT), wrong(MockModel::WRONG), last(MockModel::LAST_QUARTER);
    PasskeyResult r = passkey_eval_length(right, parts(), L, trials, seed, nullptr);
    CHECK(r.length == L);
    CHECK(r.trials == trials);
    CHECK(r.correct == trials);
    CHECK(r.accuracy == 1.0);
    PasskeyResult w = passkey_eval_length(wrong, parts(), L, trials, seed, nullptr);
    CHECK(w.correct == 0);
    CHECK(w.accuracy == 0.0);

    PasskeyResult q = passkey_eval_length(last, parts(), L, trials, seed, nullptr);
    // the draws, replayed: the key, then the depth, uniform, per trial; the placed depth is the
    // drawn one rounded to a whole number of fillers (at L = 512: about 22 fillers)
    Rng rng(seed);
    int deep = 0;
    double depth_sum = 0;
    REQUIRE(q.per_trial.size() == (size_t)trials);
    for (int i = 0; i < trials; i++) {
        int key = PASSKEY_MIN_KEY + (int)(rng.next_u64() % 90000);
        double drawn = rng.uniform();
        CHECK(q.per_trial[i].key == key);
        PasskeyPrompt pr = passkey_prompt(parts(), key, drawn, L);
        CHECK(std::fabs(q.per_trial[i].depth - drawn) <= 0.5 / pr.fillers);
        deep += q.per_trial[i].depth >= 0.75;
        depth_sum += q.per_trial[i].depth;
    }
    REQUIRE(deep > 0);       // the check below says something only if both verdicts occur
    REQUIRE(deep < trials);
    CHECK(q.correct == deep);
    CHECK(q.accuracy == doctest::Approx((double)deep / trials));
    CHECK(q.mean_depth == doctest::Approx(depth_sum / trials).epsilon(1e-12));  // the same sum, in order
    CHECK(q.bucket_trials[0] + q.bucket_trials[1] + q.bucket_trials[2] + q.bucket_trials[3] == trials);
    CHECK(q.bucket_correct[0] + q.bucket_correct[1] + q.bucket_correct[2] == 0);
    CHECK(q.bucket_correct[3] == q.bucket_trials[3]);
    CHECK(q.bucket_trials[3] == deep);
}

// ----------------------------------------------------------------------------
// (d) the tool

static std::vector<std::vector<std::string>> read_csv(const std::string& path) {
    std::ifstream f(path);
    std::vector<std::vector<std::string>> rows;
    std::string line;
    while (std::getline(f, line)) {
        std::vector<std::string> cells;
        std::stringstream ss(line);
        std::string cell;
        while (std::getline(ss, cell, ',')) cells.push_back(cell);
        rows.push_back(cells);
    }
    return rows;
}

#if !defined(SIMT) && !defined(__CUDACC__)
TEST_CASE("CPU back end: logits from a row on equal those of the full forward; rows before it are refused") {
    GPT2Config c = small_config();
    RealModel model(c);
    model.init(5);
    const int T = 96, from = 90;
    std::vector<int> ids(T);
    for (int t = 0; t < T; t++) ids[t] = (t * 7919) % 50257;
    model.forward(ids.data(), nullptr, 1, T);
    std::vector<std::vector<float>> full(T - from, std::vector<float>(c.padded_vocab_size));
    for (int t = from; t < T; t++) model.logits_row(0, t, full[t - from].data());
    model.set_logits_from_row(from);
    model.forward(ids.data(), nullptr, 1, T);
    std::vector<float> row(c.padded_vocab_size);
    for (int t = from; t < T; t++) {
        model.logits_row(0, t, row.data());
        // the same dot products; BLAS may block a matmul of fewer rows differently: fp32 rounding
        for (int v = 0; v < c.vocab_size; v++) REQUIRE(row[v] == doctest::Approx(full[t - from][v]).epsilon(1e-5));
    }
    CHECK_THROWS_AS(model.logits_row(0, from - 1, row.data()), std::logic_error);
    model.set_logits_from_row(0);
}
#endif

TEST_CASE("the tool scores a checkpoint at several lengths and writes the CSV") {
    TempDir dir("passkey");
    GPT2Config c = small_config();
    std::string ck = write_checkpoint(dir.path, "ckpt_00000000.bin", c, 42);
    std::string csv = dir.path + "/passkey.csv";
    std::string trials_csv = dir.path + "/trials.csv";
    Result r = run(std::string(TOOL) + " -e " + ck + " -l 256,512 -n 5 -rs 11 -o " + csv + " -ot " + trials_csv);
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("length 512 trial 5/5") != std::string::npos);
    std::vector<std::vector<std::string>> rows = read_csv(csv);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0] == std::vector<std::string>{"length", "accuracy", "trials", "log_len_scaling"});
    // the same model and draws in this process give the same accuracies (the CPU back end is
    // deterministic for a fixed thread count: the verdicts are bitwise the same)
    RealModel model(c);
    model.init(42);
    int lengths[2] = {256, 512};
    for (int i = 0; i < 2; i++) {
        REQUIRE(rows[i + 1].size() == 4);
        CHECK(rows[i + 1][3] == "0");  // log-length scaling off
        CHECK(std::stoi(rows[i + 1][0]) == lengths[i]);
        CHECK(std::stoi(rows[i + 1][2]) == 5);
        PasskeyResult want = passkey_eval_length(model, parts(), lengths[i], 5, 11, nullptr);
        CHECK(std::stod(rows[i + 1][1]) == doctest::Approx(want.accuracy).epsilon(1e-6));  // CSV keeps 6 decimals
    }
    // -ot: one row per trial, its key, depth, verdict, and the needle's distance to the question
    std::vector<std::vector<std::string>> trials = read_csv(trials_csv);
    REQUIRE(trials.size() == 11);
    CHECK(trials[0] == std::vector<std::string>{"length", "trial", "key", "depth", "distance", "correct"});
    for (int i = 0; i < 10; i++) {
        const std::vector<std::string>& t = trials[i + 1];
        REQUIRE(t.size() == 6);
        int L = lengths[i / 5];
        PasskeyResult want = passkey_eval_length(model, parts(), L, 5, 11, nullptr);
        const PasskeyTrial& w = want.per_trial[i % 5];
        CHECK(std::stoi(t[0]) == L);
        CHECK(std::stoi(t[1]) == i % 5);
        CHECK(std::stoi(t[2]) == w.key);
        CHECK(std::stod(t[3]) == doctest::Approx(w.depth).epsilon(1e-5));
        CHECK(std::stoi(t[5]) == (w.correct ? 1 : 0));
        // the distance: from the needle's first token to the question, which ends the prompt
        PasskeyPrompt pr = passkey_prompt(parts(), w.key, w.depth, L);
        int question_at = (int)(pr.tokens.size() - parts().question.size());
        CHECK(std::equal(parts().question.begin(), parts().question.end(), pr.tokens.begin() + question_at));
        CHECK(std::stoi(t[4]) == question_at - pr.needle_pos);
    }
}

TEST_CASE("the tool refuses other vocabularies, other attention, short lengths, a missing tokenizer") {
    TempDir dir("passkey");
    std::string small_vocab = write_checkpoint(dir.path, "v512.bin", small_config(ATTN_LSSAR, 512, 512), 1);
    Result r = run(std::string(TOOL) + " -e " + small_vocab + " -l 256 -n 1");
    CHECK(r.code != 0);
    CHECK(r.output.find("a vocabulary of 512 tokens is neither bytes (256) nor GPT-2 BPE (50257)") != std::string::npos);
    CHECK(r.output.find("so it has no passkey prompt") != std::string::npos);

    std::string softmax = write_checkpoint(dir.path, "softmax.bin", small_config(ATTN_SOFTMAX), 1);
    r = run(std::string(TOOL) + " -e " + softmax + " -l 256 -n 1");
    CHECK(r.code != 0);
    CHECK(r.output.find("made for attention softmax") != std::string::npos);

    std::string lssar = write_checkpoint(dir.path, "lssar.bin", small_config(), 1);
    r = run(std::string(TOOL) + " -e " + lssar + " -l 256,60 -n 1");
    CHECK(r.code != 0);
    CHECK(r.output.find("length 60 is too short") != std::string::npos);

    r = run("GPT2_VOCAB_DIR=" + dir.path + "/no_vocab " + TOOL + " -e " + lssar + " -l 256 -n 1");
    CHECK(r.code != 0);
    CHECK(r.output.find("bash scripts/install_gpt2_vocab.sh") != std::string::npos);

    r = run(std::string(TOOL) + " -l 256");
    CHECK(r.code != 0);
    CHECK(r.output.find("-e CHECKPOINT is required") != std::string::npos);

    // -l: empty, malformed, huge and too many values, each refused naming -l (runtime/cli.h's parser)
    std::string many = "256";
    for (int i = 0; i < 64; i++) many += ",256";
    for (std::string bad : std::vector<std::string>{"''", "','", "256,,512", "256,", "x", "256x", "-256", "0", "99999999999999999999",
                            "16777217", many}) {
        CAPTURE(bad);
        r = run(std::string(TOOL) + " -e " + lssar + " -n 1 -l " + bad);
        CHECK(r.code == 1);
        CHECK(r.output.find("error: -l '") != std::string::npos);
    }
    r = run(std::string(TOOL) + " -e " + lssar + " -n 1 --foo");
    CHECK(r.output.find("unknown flag --foo") != std::string::npos);
}
