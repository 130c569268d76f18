// Re-weighting at evaluation (doc/attention.md, section 'Re-weighting at evaluation'): the
// evaluation tools built for lssar, given an lssa checkpoint and -rw P, print and write exactly
// what they do for an lssar checkpoint at p = P holding the same weights (loss_vs_length, passkey,
// mc_eval, attention_maps), the power matters, and every use the re-weighting is not defined for
// is refused with its reason. The model is byte-level (vocabulary 256), so the passkey prompt and
// -text run as bytes too.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "eval/mc_file.h"
#include "model/gpt2_config.h"
#include "model/gpt2_descriptor.h"
#include "model/gpt2_layout.h"
#include "runtime/checkpoint.h"
#include "test/run_command.h"
#include "test/temp_dir.h"

static bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Fixture {
    TempDir dir{"reweight_eval"};
    std::string lssa, lssar, lssar_p3, softmax, shard, mc;
    Fixture() {
        GPT2Config c;
        std::string err;
        REQUIRE(gpt2_parse_descriptor("d2c128h2v256", &c, &err));
        c.max_seq_len = 64;
        c.attn = ATTN_LSSA;
        c.p = 15;
        Checkpoint ck;
        ck.config = c;
        ck.params.resize(GPT2ParamLayout(c).num_parameters);
        gpt2_init_params(ck.params.data(), c, 7);
        lssa = write(ck, "lssa.bin");
        ck.config.attn = ATTN_LSSAR;
        lssar = write(ck, "lssar.bin");
        ck.config.p = 3;
        lssar_p3 = write(ck, "lssar_p3.bin");
        ck.config.attn = ATTN_SOFTMAX;
        softmax = write(ck, "softmax.bin");
        // validation bytes: a repeated sentence
        std::string text;
        while (text.size() < 5000) text += "In the beginning God created the heaven and the earth. ";
        std::vector<uint16_t> bytes(text.begin(), text.end());
        shard = dir.path + "/val_000000.bin";
        write_shard(shard, bytes.data(), bytes.size());
        // two multiple-choice examples in bytes
        std::vector<McExample> ex(2);
        for (int i = 0; i < 2; i++) {
            ex[i].index = i;
            ex[i].label = i;
            for (char ch : std::string("And God said, Let there be")) ex[i].context.push_back((unsigned char)ch);
            ex[i].completions = {{' ', 'l', 'i', 'g', 'h', 't'}, {' ', 'd', 'a', 'r', 'k'}};
        }
        mc = dir.path + "/mc.bin";
        mc_write(mc, ex);
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

// A tool's printed results: its output without the lines naming the checkpoint or a file written
// and without timings (what two runs on the same model print the same).
static std::string results(const std::string& out) {
    std::string kept;
    size_t pos = 0;
    while (pos < out.size()) {
        size_t nl = out.find('\n', pos);
        std::string line = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? out.size() : nl + 1;
        if (contains(line, "checkpoint") || contains(line, "re-weighting at evaluation") || contains(line, "wrote") ||
            contains(line, "/s") || contains(line, " ms") || contains(line, " s,") || contains(line, " s)"))
            continue;
        kept += line + "\n";
    }
    return kept;
}

// Runs `tool ARGS -e lssa.bin -rw 15 -o a` and `tool ARGS -e lssar.bin -o b`: the same printed
// results, the same output files (a + each of suffixes); with -rw 3 the files differ (unless
// power_shows is false).
static void same_as_lssar(const std::string& tool, const std::string& args, const std::vector<std::string>& suffixes,
                          bool power_shows = true) {
    Fixture& f = fixture();
    std::string fa = f.dir.path + "/a", fb = f.dir.path + "/b", fc = f.dir.path + "/c";
    auto out = [&](const std::string& file) { return " -o " + file; };
    Result a = run(tool + " " + args + " -e " + f.lssa + " -rw 15" + out(fa));
    REQUIRE_MESSAGE(a.code == 0, a.output);
    CHECK_MESSAGE(contains(a.output, "(lssa, trained without re-weighting) evaluated as lssar at p 15"), a.output);
    Result b = run(tool + " " + args + " -e " + f.lssar + out(fb));
    REQUIRE_MESSAGE(b.code == 0, b.output);
    CHECK(results(a.output) == results(b.output));
    Result c = run(tool + " " + args + " -e " + f.lssa + " -rw 3" + out(fc));
    REQUIRE_MESSAGE(c.code == 0, c.output);
    for (const std::string& s : suffixes) {
        CAPTURE(s);
        CHECK(read_file(fa + s) == read_file(fb + s));
        CHECK(!read_file(fa + s).empty());
        if (power_shows) CHECK(read_file(fc + s) != read_file(fa + s));
    }
}

TEST_CASE("loss_vs_length -rw: an lssa checkpoint scores as the lssar one with its weights") {
    same_as_lssar("./build/loss_vs_length_cpu_lssar", "-j " + fixture().shard + " -t 64 -l 1,2,4 -n 1024", {""});
}

TEST_CASE("passkey -rw: the same verdicts, in bytes") {
    Result r = run("./build/passkey_cpu_lssar -e " + fixture().lssar + " -l 320 -n 3");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK_MESSAGE(contains(r.output, "prompt text as bytes"), r.output);
    // an untrained model retrieves no key at either power: the verdicts cannot show p
    same_as_lssar("./build/passkey_cpu_lssar", "-l 320,400 -n 4", {""}, false);
}

TEST_CASE("mc_eval -rw: the same per-example losses") {
    same_as_lssar("./build/mc_eval_cpu_lssar", "-f " + fixture().mc, {""});
}

TEST_CASE("attention_maps -rw: the same maps, of a -text in bytes") {
    same_as_lssar("./build/attention_maps_cpu_lssar", "-text 'Let there be light' -layer 0 -head 1",
                  {"_L0_H1.csv", "_stats.csv"});
}

TEST_CASE("-rw is refused where re-weighting at evaluation is not defined, naming why") {
    Fixture& f = fixture();
    const std::string lvl = "./build/loss_vs_length_cpu_lssar -j " + f.shard + " -t 64 -l 1 -n 128";
    Result r = run(lvl + " -e " + f.lssar + " -rw 15");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "is lssar; -rw evaluates a lssa checkpoint"), r.output);
    CHECK_MESSAGE(contains(r.output, "leave -rw out"), r.output);
    r = run(lvl + " -e " + f.softmax + " -rw 15");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "is softmax; -rw evaluates a lssa checkpoint"), r.output);
    r = run(lvl + " -e " + f.lssa + " -rw 15 -p 3");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "-rw gives the power; leave -p out"), r.output);
    r = run(lvl + " -e " + f.lssa + " -rw 0.5");
    CHECK(r.code == 1);
    CHECK_MESSAGE(contains(r.output, "-rw 0.5: the re-weighting power must be >= 1"), r.output);
}
