// build/sample_<cpu|cu_emu>_lssar, the sampling tool (eval/sample.cu), on checkpoints the CPU trainer
// makes here in a few seconds:
// - greedy decoding is the argmax of the reference's logits, token by token: the CPU reference in
//   float64 (model/gpt2_cpu.h) run teacher-forced on the tool's own tokens, on the window of the
//   last -t tokens the tool saw, so the context's shape (rounded up to a power of two, filled past
//   its end) and the window's slide are checked too;
// - a fixed seed gives the same text twice, another seed another text;
// - prompts longer than the context, and text prompts of a vocabulary without text, are refused;
// - a byte-level checkpoint (vocabulary 256) prints bytes as text; a GPT-2 vocabulary checkpoint
//   prints what the tokenizer decodes;
// - stdout holds the samples alone (each followed by a line of dashes), the diagnostics are on stderr.
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "dataloader/tokenizer.h"
#include "model/gpt2_cpu.h"
#include "model/rand.h"
#include "runtime/checkpoint.h"

static const char* TRAINER = "./train_gpt2cpu_lssar";
static const char* CPU_TOOL = "./build/sample_cpu_lssar -pr ref";  // the reference path, against float64
static const char* EMU_TOOL = "./build/sample_cu_emu_lssar";
static const int T = 32;  // the checkpoints' training length, the tool's default context

static bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// what the tool prints after each sample on stdout
static const std::string SAMPLE_END = "\n---------------\n";

// Byte-level text (vocabulary 256) and a GPT-2-vocabulary checkpoint, trained briefly.
struct Checkpoints {
    TempDir dir{"sample"};
    std::string bytes, gpt2;
    Checkpoints() {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        std::string text;
        const char* verses[] = {"In the beginning God created the heaven and the earth. ",
                                "And the earth was without form, and void. ", "And God said, Let there be light. "};
        for (int i = 0; i < 300; i++) text += verses[i % 3];
        std::vector<uint16_t> tokens(text.begin(), text.end());
        write_shard(dir.path + "/bytes_000000.bin", tokens.data(), tokens.size());
        Rng rng(5);
        std::vector<uint16_t> ids(4000);
        for (size_t i = 0; i < ids.size(); i++) ids[i] = (uint16_t)(rng.next_u64() % GPT2Tokenizer::VOCAB_SIZE);
        write_shard(dir.path + "/gpt2_000000.bin", ids.data(), ids.size());
        bytes = train("bytes", "d2c64h2v256", 100);
        gpt2 = train("gpt2", "d1c32h1", 1);
    }
    std::string train(const std::string& name, const std::string& model, int steps) {
        std::string out = dir.path + "/" + name;
        Result r = run(std::string(TRAINER) + " -i " + dir.path + "/" + name + "_*.bin -j '' -e " + model +
                       " -b 8 -t " + std::to_string(T) + " -x " + std::to_string(steps) + " -l 3e-3 -u 5 -s 0 -v 0 -n " +
                       std::to_string(steps) + " -o " + out);
        REQUIRE_MESSAGE(r.code == 0, r.output);
        char step[32];
        snprintf(step, sizeof step, "/ckpt_%08d.bin", steps);
        return out + step;
    }
};

static Checkpoints& checkpoints() {
    static Checkpoints c;
    return c;
}

// The ids the tool wrote with -o: per sample, the context's ids and the generated ones.
struct SampleIds {
    std::vector<int> start, generated;
};
static std::vector<SampleIds> read_ids(const std::string& path) {
    std::vector<SampleIds> out;
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) {
        SampleIds s;
        std::istringstream words(line);
        std::string w;
        bool after = false;
        while (words >> w) {
            if (w == "|") after = true;
            else (after ? s.generated : s.start).push_back(std::stoi(w));
        }
        out.push_back(s);
    }
    return out;
}

struct GreedyCheck {
    int checked = 0, near_ties = 0, disagree = 0;
};

// Every generated token against the argmax of the float64 reference's logits at the last position of
// the window the tool saw (the last `context` tokens before it). Positions whose top two reference
// logits are closer than `tie` are counted as near ties and not compared: there the tool's own
// rounding may pick either.
static GreedyCheck check_greedy(const std::string& ckpt_path, const SampleIds& s, int context, double tie) {
    Checkpoint ck;
    checkpoint_read(ckpt_path, ck);
    GPT2Config c = ck.config;
    c.max_seq_len = std::max(c.max_seq_len, context);
    GPT2<double> ref(c);
    ref.params.assign(ck.params.begin(), ck.params.end());
    std::vector<int> seq = s.start;
    GreedyCheck g;
    const int V = c.vocab_size, Vp = c.padded_vocab_size;
    for (int next : s.generated) {
        int len = std::min((int)seq.size(), context);
        ref.forward(seq.data() + seq.size() - len, nullptr, 1, len);
        const double* row = ref.acts.logits + (size_t)(len - 1) * Vp;
        int best = 0, second = -1;
        for (int v = 1; v < V; v++)
            if (row[v] > row[best]) second = best, best = v;
            else if (second < 0 || row[v] > row[second]) second = v;
        if (row[best] - row[second] < tie) g.near_ties++;
        else {
            g.checked++;
            if (next != best) {
                g.disagree++;
                MESSAGE("position " << seq.size() << ": the tool chose " << next << ", the reference's argmax is " << best
                                    << " (margin " << row[best] - row[second] << ")");
            }
        }
        seq.push_back(next);
    }
    return g;
}

TEST_CASE("greedy sampling is the reference's teacher-forced argmax, token by token, on both back ends") {
    Checkpoints& c = checkpoints();
    TempDir out;
    struct Case {
        std::string tool;
        double tie;  // the tool's logits against float64: fp32 within ~1e-5 of these O(1-10) logits, bf16 (the
                     // CUDA back end's activations, 2^-8 per rounding) within ~0.1: below it a tie is not compared
    };
    for (const Case& k : {Case{CPU_TOOL, 1e-4}, Case{EMU_TOOL, 0.25}}) {
        CAPTURE(k.tool);
        // 40 tokens after byte 0 (a document's start) and a prompt of 12 with a context of 32: the
        // window slides for the last 21
        std::string ids = out.path + "/greedy.txt";
        SplitResult r = run_split(k.tool + " -e " + c.bytes + " -gp 'In the begin' -g 40 -gk 1 -o " + ids);
        INFO("stdout: " << r.out);
        INFO("stderr: " << r.err);
        REQUIRE(r.code == 0);
        // the diagnostics on stderr, none of them on stdout
        for (const char* diagnostic : {"checkpoint ", "precision: ", "sampling: greedy, context 32 tokens (prompt 13)",
                                       "no KV cache", "sample 1: 40 tokens in "}) {
            CAPTURE(diagnostic);
            CHECK(contains(r.err, diagnostic));
            CHECK(!contains(r.out, diagnostic));
        }
        std::vector<SampleIds> samples = read_ids(ids);
        REQUIRE(samples.size() == 1);
        CHECK(samples[0].start == std::vector<int>({0, 'I', 'n', ' ', 't', 'h', 'e', ' ', 'b', 'e', 'g', 'i', 'n'}));
        REQUIRE(samples[0].generated.size() == 40);
        GreedyCheck g = check_greedy(c.bytes, samples[0], T, k.tie);
        MESSAGE(k.tool << ": " << g.checked << " tokens equal to the reference's argmax of " << g.checked + g.disagree
                       << ", " << g.near_ties << " near ties not compared");
        CHECK(g.disagree == 0);
        CHECK(g.checked >= 30);
        // the bytes are printed as text: the prompt, then the generated bytes (byte 0 prints nothing)
        std::string text(samples[0].start.begin() + 1, samples[0].start.end());
        text += std::string(samples[0].generated.begin(), samples[0].generated.end());
        // stdout: the sample and nothing else
        CHECK(r.out == text + SAMPLE_END);
    }
}

TEST_CASE("a fixed seed gives the same text twice; another seed another text") {
    Checkpoints& c = checkpoints();
    auto sample = [&](int seed) {
        SplitResult r = run_split(std::string(CPU_TOOL) + " -e " + c.bytes + " -gp 'And God' -g 48 -gk 40 -gt 1 -n 2" +
                                  " -rs " + std::to_string(seed));
        REQUIRE_MESSAGE(r.code == 0, r.err);
        return r.out;  // the two samples, without the timings (stderr)
    };
    std::string a = sample(7), b = sample(7), other = sample(8);
    CHECK(a == b);
    CHECK(a != other);
    // the two samples of one run differ (the rng goes on); each starts with the prompt (byte 0 prints nothing)
    size_t first_end = a.find(SAMPLE_END);
    REQUIRE(first_end != std::string::npos);
    std::string first = a.substr(0, first_end), second = a.substr(first_end + SAMPLE_END.size());
    REQUIRE(second.size() >= SAMPLE_END.size());
    CHECK(second.substr(second.size() - SAMPLE_END.size()) == SAMPLE_END);
    second.resize(second.size() - SAMPLE_END.size());
    CHECK(first.substr(0, 7) == "And God");
    CHECK(second.substr(0, 7) == "And God");
    CHECK(first != second);
}

TEST_CASE("refusals: a prompt longer than the context, text for a vocabulary without text, ids outside it") {
    Checkpoints& c = checkpoints();
    SplitResult refused = run_split(std::string(CPU_TOOL) + " -e " + c.bytes + " -gp '" + std::string(32, 'a') + "'");
    CHECK(refused.code == 1);
    CHECK(contains(refused.err, "the prompt is 33 tokens, longer than the context of 32"));  // byte 0 and 32 bytes
    CHECK(refused.out.empty());  // no sample begun
    Result r = run(std::string(CPU_TOOL) + " -e " + c.bytes + " -gp 'aaaa' -t 3");
    CHECK(r.code == 1);
    CHECK(contains(r.output, "longer than the context of 3 (-t)"));
    r = run(std::string(CPU_TOOL) + " -e " + c.bytes + " -gi 65,300");
    CHECK(r.code == 1);
    CHECK(contains(r.output, "-gi: token id 300 is outside the checkpoint's vocabulary of 256"));
    r = run(std::string(CPU_TOOL) + " -e " + c.bytes + " -gi 65 -gp A");
    CHECK(r.code == 1);
    CHECK(contains(r.output, "two prompts"));
    // a context longer than the training length is allowed (RoPE has no length limit)
    r = run(std::string(CPU_TOOL) + " -e " + c.bytes + " -gp '" + std::string(33, 'a') + "' -t 64 -g 2");
    CHECK(r.code == 0);
}

TEST_CASE("a GPT-2 vocabulary checkpoint: the prompt is BPE-encoded after <|endoftext|>, the output decoded") {
    Checkpoints& c = checkpoints();
    TempDir out;
    std::string ids = out.path + "/ids.txt";
    SplitResult r = run_split(std::string(CPU_TOOL) + " -e " + c.gpt2 + " -gp 'Hello world' -g 6 -o " + ids);
    INFO(r.err);
    REQUIRE(r.code == 0);
    GPT2Tokenizer tok;
    tok.load(GPT2Tokenizer::default_dir());
    std::vector<int> want = {GPT2Tokenizer::EOT};
    tok.encode("Hello world", want, nullptr);
    std::vector<SampleIds> samples = read_ids(ids);
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].start == want);
    REQUIRE(samples[0].generated.size() == 6);
    std::string text = "Hello world" + tok.decode(samples[0].generated.data(), 6);
    CHECK(r.out == text + SAMPLE_END);
}
