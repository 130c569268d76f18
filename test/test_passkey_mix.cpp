// The passkey training mix (eval/passkey_mix.h, build/passkey_mix):
// - one seed, one mix (byte for byte), another seed another;
// - every needle window laid out as eval/passkey.h's prompt, judged from its decoded text, the answer
//   inside the window, the filler the corpus's tokens in order; plain windows the corpus itself;
// - the share of needle windows near the fraction asked; no held-out key among the training keys;
// - the tool end to end: the validation shard copied unchanged with no needle in any of its
//   windows, the needles CSV matching the stream, refusals (a mix given as corpus, a too short T).
// Needs the GPT-2 vocabulary (scripts/install_gpt2_vocab.sh).
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "eval/passkey_mix.h"
#include "test/passkey_parts.h"

// A corpus of n random ids below 50000 (so no needle can occur in it by chance: checked below).
static std::vector<uint16_t> random_corpus(int64_t n, uint64_t seed) {
    std::vector<uint16_t> c(n);
    Rng rng(seed);
    for (auto& t : c) t = (uint16_t)(rng.next_u64() % 50000);
    return c;
}

static std::string decode(const uint16_t* ids, size_t n) {
    std::vector<int> v(ids, ids + n);
    return tokenizer().decode(v.data(), v.size());
}

static std::vector<int> encode(const std::string& s) {
    std::vector<int> ids;
    tokenizer().encode(s, ids, nullptr);
    return ids;
}

static bool starts_with(const uint16_t* at, const std::vector<int>& ids) {
    for (size_t i = 0; i < ids.size(); i++)
        if (at[i] != ids[i]) return false;
    return true;
}

TEST_CASE("one seed gives one mix, byte for byte; another seed another") {
    std::vector<uint16_t> corpus = random_corpus(60000, 7);
    PasskeyMixOptions o;
    o.T = 128, o.fraction = 0.5, o.seed = 3;
    PasskeyMix a = passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o);
    PasskeyMix b = passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o);
    CHECK(a.tokens == b.tokens);
    REQUIRE(a.needles.size() == b.needles.size());
    for (size_t i = 0; i < a.needles.size(); i++) CHECK(a.needles[i].key == b.needles[i].key);
    o.seed = 4;
    PasskeyMix c = passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o);
    CHECK(a.tokens != c.tokens);
}

TEST_CASE("needle windows hold the prompt with the corpus as filler; plain windows are the corpus in order") {
    const int T = 128;
    std::vector<uint16_t> corpus = random_corpus(80000, 11);
    REQUIRE(passkey_find_needles(parts(), corpus.data(), (int64_t)corpus.size(), true).empty());
    PasskeyMixOptions o;
    o.T = T, o.fraction = 0.4, o.seed = 5;
    PasskeyMix mix = passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o);
    REQUIRE(mix.windows > 500);
    CHECK(mix.tokens.size() == (size_t)(mix.windows * T + 1));
    std::vector<int> instruction = encode(passkey_instruction_text()), question = encode(passkey_question_text());
    std::vector<uint16_t> filler;  // the corpus tokens of every window, in stream order
    size_t next_needle = 0;
    int min_distance = T, max_distance = 0;
    for (int64_t w = 0; w < mix.windows; w++) {
        const uint16_t* win = mix.tokens.data() + w * T;
        bool is_needle = next_needle < mix.needles.size() && mix.needles[next_needle].window == w;
        // the scan finds a needle in this window exactly when the mix says it put one there
        CHECK(passkey_find_needles(parts(), win, T).size() == (is_needle ? 1u : 0u));
        CHECK(passkey_find_needles(parts(), win, T, true).size() == (is_needle ? 2u : 0u));  // and the question
        if (!is_needle) {
            filler.insert(filler.end(), win, win + T);
            continue;
        }
        const PasskeyMixNeedle& nd = mix.needles[next_needle++];
        CAPTURE(w);
        std::vector<int> needle = encode(passkey_needle_text(nd.key)), answer = encode(passkey_answer_text(nd.key));
        REQUIRE(starts_with(win, instruction));
        REQUIRE(starts_with(win + nd.needle_pos, needle));
        REQUIRE(starts_with(win + nd.question_pos, question));
        // the answer ends the window: every answer token is a target of the window's inputs
        CHECK(nd.question_pos + question.size() + answer.size() == (size_t)T);
        CHECK(starts_with(win + nd.question_pos + question.size(), answer));
        std::string text = decode(win, T);
        CHECK(text.rfind(passkey_instruction_text(), 0) == 0);
        CHECK(text.find(passkey_needle_text(nd.key)) != std::string::npos);
        CHECK(text.size() >= std::string(passkey_question_text()).size());
        CHECK(text.substr(text.size() - std::string(passkey_question_text()).size() - 6) ==
              passkey_question_text() + passkey_answer_text(nd.key));
        filler.insert(filler.end(), win + instruction.size(), win + nd.needle_pos);
        filler.insert(filler.end(), win + nd.needle_pos + needle.size(), win + nd.question_pos);
        min_distance = std::min(min_distance, nd.question_pos - nd.needle_pos);
        max_distance = std::max(max_distance, nd.question_pos - nd.needle_pos);
    }
    CHECK(next_needle == mix.needles.size());
    REQUIRE(filler.size() == (size_t)mix.corpus_used);
    CHECK(std::equal(filler.begin(), filler.end(), corpus.begin()));
    CHECK(mix.tokens.back() == GPT2Tokenizer::EOT);
    // depths spread over the window: needles right before the question and as far as T allows
    CHECK(min_distance <= 25);
    CHECK(max_distance >= T - (int)(instruction.size() + question.size()) - 30);
    // share of needle windows: binomial, 5 standard deviations
    double n = (double)mix.windows, share = mix.needles.size() / n;
    CHECK(std::fabs(share - 0.4) < 5 * std::sqrt(0.4 * 0.6 / n));
}

TEST_CASE("with prompts_max 2 a needle window holds one or two whole prompts back to back, the corpus in order") {
    const int T = 128;
    std::vector<uint16_t> corpus = random_corpus(80000, 13);
    PasskeyMixOptions o;
    o.T = T, o.fraction = 1.0, o.seed = 7, o.prompts_max = 2;
    PasskeyMix mix = passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o);
    REQUIRE(mix.windows > 300);
    CHECK(mix.tokens.size() == (size_t)(mix.windows * T + 1));
    std::vector<int> instruction = encode(passkey_instruction_text()), question = encode(passkey_question_text());
    std::vector<uint16_t> filler;
    size_t k = 0;
    int windows_with[3] = {0, 0, 0};
    for (int64_t w = 0; w < mix.windows; w++) {
        CAPTURE(w);
        const uint16_t* win = mix.tokens.data() + w * T;
        size_t first = k;
        while (k < mix.needles.size() && mix.needles[k].window == w) k++;
        size_t m = k - first;
        REQUIRE((m == 1 || m == 2));  // fraction 1: every window holds a prompt, at most two
        windows_with[m]++;
        CHECK(passkey_find_needles(parts(), win, T).size() == m);
        CHECK(passkey_find_needles(parts(), win, T, true).size() == 2 * m);
        int start = 0;  // each prompt begins where the previous one's answer ended
        for (size_t i = first; i < k; i++) {
            const PasskeyMixNeedle& nd = mix.needles[i];
            std::vector<int> needle = encode(passkey_needle_text(nd.key)), answer = encode(passkey_answer_text(nd.key));
            REQUIRE(starts_with(win + start, instruction));
            REQUIRE(starts_with(win + nd.needle_pos, needle));
            REQUIRE(starts_with(win + nd.question_pos, question));
            REQUIRE(starts_with(win + nd.question_pos + question.size(), answer));
            filler.insert(filler.end(), win + start + instruction.size(), win + nd.needle_pos);
            filler.insert(filler.end(), win + nd.needle_pos + needle.size(), win + nd.question_pos);
            start = nd.question_pos + (int)(question.size() + answer.size());
        }
        CHECK(start == T);  // the last answer ends the window
    }
    CHECK(k == mix.needles.size());
    REQUIRE(filler.size() == (size_t)mix.corpus_used);
    CHECK(std::equal(filler.begin(), filler.end(), corpus.begin()));
    // m uniform in {1, 2} and two prompts fit T = 128: both kinds near half the windows (5 sigma)
    double n = (double)mix.windows;
    CHECK(std::fabs(windows_with[2] / n - 0.5) < 5 * std::sqrt(0.25 / n));
    o.prompts_max = 0;
    CHECK_THROWS_WITH_AS(passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o),
                         doctest::Contains("prompts per needle window 0 not in [1, 16]"), std::invalid_argument);
}

TEST_CASE("no training key is one of the evaluation's held-out keys") {
    // holding out 60000 trials' keys (about half of the 90000) makes a leak show at once: without
    // the hold-out about half of the training keys would be among them
    std::vector<uint16_t> corpus = random_corpus(40000, 13);
    PasskeyMixOptions o;
    o.T = 128, o.fraction = 1.0, o.seed = 9, o.holdout_seed = 1337, o.holdout_trials = 60000;
    PasskeyMix mix = passkey_mix_build(parts(), corpus.data(), (int64_t)corpus.size(), o);
    REQUIRE(mix.needles.size() > 300);
    // the evaluation's keys, drawn here as passkey_eval_length documents its draws
    std::vector<char> held(100000, 0);
    Rng rng(1337);
    for (int i = 0; i < 60000; i++) {
        int key = 10000 + (int)(rng.next_u64() % 90000);
        rng.uniform();  // the depth
        held[key] = 1;
    }
    int leaked = 0;
    for (const PasskeyMixNeedle& nd : mix.needles) leaked += held[nd.key];
    CHECK(leaked == 0);
}

TEST_CASE("a length that cannot hold the prompt and a bad fraction are refused with the numbers") {
    std::vector<uint16_t> corpus = random_corpus(1000, 1);
    PasskeyMixOptions o;
    o.T = 40;
    CHECK_THROWS_WITH_AS(passkey_mix_build(parts(), corpus.data(), 1000, o),
                         doctest::Contains("training length 40 cannot hold the passkey prompt"), std::invalid_argument);
    o.T = 128, o.fraction = 1.5;
    CHECK_THROWS_AS(passkey_mix_build(parts(), corpus.data(), 1000, o), std::invalid_argument);
}

static std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

TEST_CASE("build/passkey_mix: validation copied with no needle, CSV as the stream, deterministic, refusals") {
    TempDir dir("passkey_mix");
    std::vector<uint16_t> train = random_corpus(30000, 21), val = random_corpus(3000, 22);
    write_shard(dir.path + "/c_train.bin", train.data(), train.size());
    write_shard(dir.path + "/c_val.bin", val.data(), val.size());
    std::string cmd = "./build/passkey_mix -i " + dir.path + "/c_train.bin -j " + dir.path + "/c_val.bin -t 128 -f 0.5 ";
    Result r = run(cmd + "-o " + dir.path + "/m");
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("with a needle") != std::string::npos);
    std::vector<uint16_t> mtrain = read_shard(dir.path + "/m_train_000000.bin", 50257);
    std::vector<uint16_t> mval = read_shard(dir.path + "/m_val_000000.bin", 50257);
    CHECK(mval == val);
    // every validation window the loader could read at T = 128 (and any other offset): no needle
    CHECK(passkey_find_needles(parts(), mval.data(), (int64_t)mval.size(), true).empty());
    std::vector<int64_t> at = passkey_find_needles(parts(), mtrain.data(), (int64_t)mtrain.size());
    REQUIRE(!at.empty());
    // the CSV names each needle's window and offset
    std::istringstream csv(read_text(dir.path + "/m_needles.csv"));
    std::string line;
    std::getline(csv, line);
    CHECK(line == "window,key,needle_pos,question_pos,distance");
    size_t rows = 0;
    while (std::getline(csv, line)) {
        long long window;
        int key, needle_pos, question_pos, distance;
        REQUIRE(sscanf(line.c_str(), "%lld,%d,%d,%d,%d", &window, &key, &needle_pos, &question_pos, &distance) == 5);
        REQUIRE(rows < at.size());
        CHECK(at[rows] == window * 128 + needle_pos);
        CHECK(distance == question_pos - needle_pos);
        std::string text = decode(mtrain.data() + window * 128 + needle_pos, 12);
        CHECK(text.find(std::to_string(key)) != std::string::npos);
        rows++;
    }
    CHECK(rows == at.size());
    // the same flags again: the same bytes
    REQUIRE(run(cmd + "-o " + dir.path + "/again").code == 0);
    CHECK(read_shard(dir.path + "/again_train_000000.bin", 50257) == mtrain);
    // a mix given as the corpus is refused, naming the file and the offset
    Result twice = run("./build/passkey_mix -i " + dir.path + "/m_train_000000.bin -j " + dir.path +
                       "/c_val.bin -o " + dir.path + "/x");
    CHECK(twice.code != 0);
    CHECK(twice.output.find("m_train_000000.bin: holds passkey text") != std::string::npos);
    Result shortT = run(cmd.substr(0, cmd.find("-t 128")) + "-t 40 -o " + dir.path + "/y");
    CHECK(shortT.code != 0);
    CHECK(shortT.output.find("training length 40 cannot hold the passkey prompt") != std::string::npos);
    Result badf = run(cmd.substr(0, cmd.find("-f 0.5")) + "-f 2 -o " + dir.path + "/z");
    CHECK(badf.code != 0);
    CHECK(badf.output.find("-f 2: expected a fraction") != std::string::npos);
}
