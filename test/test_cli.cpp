// The command lines of the trainer and every tool, as their users type them:
// - every program's flag table (runtime/cli.h's CliTable, printed by --flags) against what the
//   program does: -h lists every flag, every flag as the last word is "missing value" (not
//   "unknown"), a value the table refuses is refused naming the flag and the value, and an
//   unknown flag is called unknown;
// - llm.c's letters in the trainer: -h alone prints help and -h 0|1 is llm.c's HellaSwag switch;
//   -f and -pr with llm.c's integer values, and llm.c's flags that do not exist here, are refused
//   naming llm.c's meaning.
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "eval/mc_file.h"
#include "layers/matmul_fast_cpu.h"
#include "model/rand.h"

static const char* TRAINER = "./train_gpt2cpu_lssar";

// Every program built from a flag table: test/test.mk's CLI_TABLE_PROGRAMS (paths from the
// repository root, separated by spaces), which it builds before this test and passes here.
#ifndef CLI_TABLE_PROGRAMS
#error "build with make build/test_cli: test/test.mk passes its CLI_TABLE_PROGRAMS"
#endif
static std::vector<std::string> programs_of(const char* list) {
    std::vector<std::string> programs;
    std::istringstream words(list);
    for (std::string w; words >> w;) programs.push_back(w[0] == '/' ? w : "./" + w);
    return programs;
}
static const std::vector<std::string> PROGRAMS = programs_of(CLI_TABLE_PROGRAMS);

struct TableRow {
    std::string name, kind, bad_value;
};

// The program's table, from --flags: "name<TAB>kind<TAB>bad value" per line.
static std::vector<TableRow> table_of(const std::string& program) {
    Result r = run(program + " --flags");
    REQUIRE_MESSAGE(r.code == 0, program << ": " << r.output);
    std::vector<TableRow> rows;
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
        TableRow row;
        size_t a = line.find('\t'), b = line.find('\t', a + 1);
        REQUIRE_MESSAGE((a != std::string::npos && b != std::string::npos), program << ": --flags line '" << line << "'");
        row.name = line.substr(0, a);
        row.kind = line.substr(a + 1, b - a - 1);
        row.bad_value = line.substr(b + 1);
        rows.push_back(row);
    }
    return rows;
}

static bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST_CASE("every flag of every program's table: listed by -h, refused without its value or with a bad one, by name") {
    int flags_checked = 0;
    // the list from test.mk, as read: it names the trainer (an empty or misread list fails here)
    REQUIRE(std::find(PROGRAMS.begin(), PROGRAMS.end(), std::string(TRAINER)) != PROGRAMS.end());
    for (const std::string& program : PROGRAMS) {
        CAPTURE(program);
        std::vector<TableRow> rows = table_of(program);
        CHECK(rows.size() >= 3);
        Result help = run(program + " -h");
        CHECK(help.code == 0);
        CHECK(contains(help.output, "Usage: " + program));
        CHECK(run(program + " --help").output == help.output);
        for (const TableRow& row : rows) {
            CAPTURE(row.name);
            CHECK_MESSAGE(contains(help.output, "\n  " + row.name + " <"), "-h does not list " << row.name);
            if (row.name == "-h") continue;  // the trainer's -h 0|1: alone it prints the help (below)
            Result missing = run(program + " " + row.name);
            CHECK(missing.code == 1);
            CHECK_MESSAGE(contains(missing.output, "error: " + row.name + ": missing value"), missing.output);
            if (!row.bad_value.empty()) {
                Result bad = run(program + " " + row.name + " '" + row.bad_value + "'");
                CHECK(bad.code == 1);
                CHECK_MESSAGE((contains(bad.output, "error: " + row.name + " " + row.bad_value + ":") ||
                               contains(bad.output, "error: " + row.name + " '" + row.bad_value + "':")),
                              bad.output);
            } else {
                CHECK(row.kind == "text");  // only free text has no value to refuse
            }
            flags_checked++;
        }
        Result unknown = run(program + " --no-such-flag");  // as the last word: unknown, not lacking a value
        CHECK(unknown.code == 1);
        CHECK(contains(unknown.output, "unknown flag --no-such-flag"));
        Result stray = run(program + " stray");
        CHECK(stray.code == 1);
        CHECK(contains(stray.output, "unexpected argument 'stray'"));
    }
    MESSAGE(flags_checked << " flags of " << PROGRAMS.size() << " programs checked");
    // the flags every tool running a model shares
    for (const std::string& program : PROGRAMS) {
        if (contains(program, "gradcheck") || contains(program, "passkey_mix")) continue;
        CAPTURE(program);
        bool has_pr = false;
        for (const TableRow& row : table_of(program)) has_pr |= row.name == "-pr";
        CHECK(has_pr);
    }
}

// A tiny corpus and a HellaSwag-format file of its tokens, in a folder laid out as the trainer's
// working directory: data/mc/hellaswag_val.bin where llm.c's -h 1 looks.
struct HellaswagRun {
    TempDir dir{"cli"};
    HellaswagRun() {
        Rng rng(3);
        std::vector<uint16_t> tokens(4000);
        for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (uint16_t)((i * 7 + rng.next_u64() % 3) % 500);
        write_shard(dir.path + "/train_000000.bin", tokens.data(), tokens.size());
        std::vector<McExample> ex(4);
        for (int i = 0; i < 4; i++) {
            ex[i].context = {1 + i, 2, 3};
            ex[i].label = i % 4;
            for (int c = 0; c < 4; c++) ex[i].completions.push_back({10 + c, 20 + i});
        }
        REQUIRE(system(("mkdir -p " + dir.path + "/data/mc").c_str()) == 0);
        mc_write(dir.path + "/data/mc/hellaswag_val.bin", ex);
    }
    // the trainer run from the folder (absolute binary path), 1 step of a tiny model
    std::string trainer(const std::string& extra) const {
        char cwd[4096];
        REQUIRE(getcwd(cwd, sizeof cwd) != nullptr);
        return "cd " + dir.path + " && OMP_WAIT_POLICY=passive " + cwd + "/" + TRAINER +
               " -i train_*.bin -j '' -e d2c32h2v512 -b 4 -t 16 -x 1 -s 0 -v 0 " + extra;
    }
};

TEST_CASE("llm.c's letters: -h 0|1 is the HellaSwag switch, -h alone the help; -f, -pr and llm.c-only flags refused") {
    HellaswagRun h;
    SUBCASE("-h alone, as the last word or before another flag, prints the help and exits 0") {
        for (const std::string& args : {std::string("-h"), std::string("-b 4 -h"), std::string("-h -b 4")}) {
            Result r = run(std::string(TRAINER) + " " + args);
            CHECK(r.code == 0);
            CHECK(contains(r.output, "Usage: "));
            CHECK(contains(r.output, "HellaSwag switch (llm.c's)"));
        }
    }
    SUBCASE("-h 1 evaluates data/mc/hellaswag_val.bin during training, -h 0 nothing, -h 2 is refused") {
        Result r1 = run(h.trainer("-h 1"));
        INFO(r1.output);
        CHECK(r1.code == 0);
        CHECK(contains(r1.output, "hellaswag_val acc "));
        Result r0 = run(h.trainer("-h 0"));
        CHECK(r0.code == 0);
        CHECK(!contains(r0.output, "hellaswag_val"));
        CHECK(contains(r0.output, "step 1/1"));
        Result r2 = run(h.trainer("-h 2"));
        CHECK(r2.code == 1);
        CHECK(contains(r2.output, "-h 2: expected an integer in [0, 1] (HellaSwag switch)"));
    }
    SUBCASE("-h 1 without the file is refused, naming it and the script that makes it") {
        REQUIRE(remove((h.dir.path + "/data/mc/hellaswag_val.bin").c_str()) == 0);
        Result r = run(h.trainer("-h 1"));
        CHECK(r.code == 1);
        CHECK(contains(r.output, "data/mc/hellaswag_val.bin is missing"));
        CHECK(contains(r.output, "scripts/prepare_mc.py hellaswag"));
        CHECK(!contains(r.output, "step 1"));
    }
    SUBCASE("llm.c's -f 0|1 (TF32) and -pr <rank> are refused naming llm.c's meaning and this project's flag") {
        Result f = run(std::string(TRAINER) + " -f 1");
        CHECK(f.code == 1);
        CHECK(contains(f.output, "-f 1: llm.c's -f is the TF32 switch"));
        CHECK(contains(f.output, "multiple-choice eval files"));
        Result pr = run(std::string(TRAINER) + " -pr 3");
        CHECK(pr.code == 1);
        CHECK(contains(pr.output, "-pr 3: llm.c's -pr is the process rank"));
        CHECK(contains(pr.output, "ref, fp32, bf16 or auto"));
        // this project's values are taken
        Result ok = run(h.trainer("-pr fp32 -f data/mc/hellaswag_val.bin"));
        CHECK(ok.code == 0);
        CHECK(contains(ok.output, "precision: fp32 on the fast path"));
    }
    SUBCASE("llm.c's flags that do not exist here are refused naming what they were") {
        for (const char* flag : {"-pn", "-pg", "-pm", "-ps", "-pp", "-nm", "-lg", "-a", "-w", "-ge", "-r"}) {
            CAPTURE(flag);
            Result r = run(std::string(TRAINER) + " " + flag + " 1");
            CHECK(r.code == 1);
            CHECK(contains(r.output, std::string(flag) + ": llm.c's " + flag + " is "));
        }
    }
}

// Reads a .npy of float32 (hidden_states' output): the values after the header.
static std::vector<float> npy_floats(const std::string& path) {
    std::string bytes = read_file(path);
    REQUIRE(bytes.size() > 10);
    size_t header = 10 + (unsigned char)bytes[8] + 256 * (unsigned char)bytes[9];
    std::vector<float> v((bytes.size() - header) / 4);
    memcpy(v.data(), bytes.data() + header, v.size() * 4);
    return v;
}

TEST_CASE("the tools' -pr: auto by default on the CPU (the faster fast-path numerics), the trainer's ref (said), ref and fp32 refused on CUDA") {
    HellaswagRun h;
    Result train = run(h.trainer("-e d2c64h2v512 -t 32 -x 2 -n 2 -o run"));
    INFO(train.output);
    REQUIRE(train.code == 0);
    // the trainer's default is the reference path, and it says so
    CHECK(contains(train.output, "precision: ref (the reference CPU path"));
    CHECK(contains(train.output, "the trainer's default; -pr auto runs the fast path"));
    const std::string ckpt = h.dir.path + "/run/ckpt_00000002.bin", shard = h.dir.path + "/train_000000.bin";
    // hidden states on both CPU paths: bf16 rounds the matmuls' inputs (2^-9 relative each), so the
    // states, O(1) after the final layernorm, agree within a few percent (rms), and are not fp32's
    std::vector<float> states[2];
    for (int bf16 = 0; bf16 < 2; bf16++) {
        std::string out = h.dir.path + (bf16 ? "/bf16.npy" : "/fp32.npy");
        Result r = run("./build/hidden_states_cpu_lssar -e " + ckpt + " -i " + shard + " -t 40 -n 4 -o " + out +
                       (bf16 ? " -pr bf16" : " -pr ref"));
        INFO(r.output);
        REQUIRE(r.code == 0);
        CHECK(contains(r.output, bf16 ? "precision: bf16 on the fast path" : "precision: ref (the reference CPU path"));
        states[bf16] = npy_floats(out);
    }
    REQUIRE(states[0].size() == (size_t)4 * 40 * 64);
    REQUIRE(states[1].size() == states[0].size());
    double d = 0, n = 0;
    for (size_t i = 0; i < states[0].size(); i++) {
        d += (states[1][i] - states[0][i]) * (states[1][i] - states[0][i]);
        n += states[0][i] * states[0][i];
    }
    MESSAGE("hidden states, bf16 path against fp32: relative rms difference " << std::sqrt(d / n));
    CHECK(std::sqrt(d / n) < 0.05);
    Result lvl = run("./build/loss_vs_length_cpu_lssar -e " + ckpt + " -j " + shard + " -l 1 -n 64");  // the default
    CHECK(lvl.code == 0);
    CHECK(contains(lvl.output, std::string("precision: auto picked ") + (cpu_bf16_matmul().hardware ? "bf16" : "fp32")));
    // the CUDA back end has no fp32 path: refused, as the trainer's -pr fp32 there
    for (const char* pr : {"fp32", "ref"}) {
        Result cu = run("./build/sample_cu_emu_lssar -e " + ckpt + " -g 1 -pr " + pr);
        CHECK(cu.code == 1);
        CHECK(contains(cu.output, std::string("-pr ") + pr + ": the CUDA back end runs in bf16 mixed precision only"));
    }
    Result cu_default = run("./build/sample_cu_emu_lssar -e " + ckpt + " -g 1 -gi 1");
    CHECK(cu_default.code == 0);
    CHECK(contains(cu_default.output, "precision: bf16 mixed precision (CUDA back end)"));
}

// build/bench_attention_cpu (tools/bench_attention_cpu.cpp): a line for every target it lists, in
// both numerics, for every variant asked; shapes and variants it cannot take refused by name
TEST_CASE("bench_attention_cpu: every target it lists in fp32 and bf16; bad shapes and variants refused") {
    Result r = run("./build/bench_attention_cpu -s 2x24 -r 1 -a softmax,lssar");
    INFO(r.output);
    REQUIRE(r.code == 0);
    std::istringstream in(r.output);
    std::string first;
    std::getline(in, first);
    REQUIRE(first.rfind("cpu targets: ", 0) == 0);
    std::istringstream names(first.substr(13, first.find(';') - 13));
    std::vector<std::string> targets;
    for (std::string t; names >> t;) targets.push_back(t);
    REQUIRE(!targets.empty());
    for (const char* kind : {"softmax", "lssar"}) {
        const size_t at = r.output.find(std::string(kind) + " B 2 T 24: reference forward ");
        REQUIRE(at != std::string::npos);
        const size_t next = r.output.find(" B 2 T 24: reference forward ", at + strlen(kind) + 1);  // the next variant's
        const std::string block = r.output.substr(at, next == std::string::npos ? std::string::npos : next - at);
        for (const std::string& t : targets)
            for (const char* num : {"fp32", "bf16"}) {
                std::string label = t;
                label.resize(std::max<size_t>(label.size(), 6), ' ');
                const std::string what = std::string(kind) + " " + t + " " + num;
                CHECK_MESSAGE(contains(block, "  " + label + " " + num), what);
            }
    }
    Result bad_shape = run("./build/bench_attention_cpu -s 2x");
    CHECK(bad_shape.code == 1);
    CHECK(contains(bad_shape.output, "-s 2x: expected BxT shapes"));
    Result bad_kind = run("./build/bench_attention_cpu -a softmax,nope");
    CHECK(bad_kind.code == 1);
    CHECK(contains(bad_kind.output, "'nope' is not a variant"));
    Result unknown = run("./build/bench_attention_cpu -x 1");
    CHECK(unknown.code == 1);
    CHECK(contains(unknown.output, "unknown flag -x"));
}
