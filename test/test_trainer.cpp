// The trainer on the CPU back end, run as a program (./train_gpt2cpu_lssar, and the loss-versus-
// length tool build/loss_vs_length_cpu_lssar) on tiny shards written here:
// - resume exactness: a run stopped (-xi) or killed mid-way and resumed (-y 1) ends with the
//   same checkpoint, byte for byte, as the uninterrupted run, and logs the same losses;
// - checkpoints of another variant or config, with a wrong magic, truncated or corrupt, refused
//   by every tool with the file and the mismatch named;
// - the guard: non-finite losses skip the update, are logged, and stop the run;
// - a failed checkpoint write (file size limit: what a full disk looks like to write()) leaves the
//   previous checkpoint intact;
// - bad flags refused, naming the flag and the value.
// Everything the runs compare is bitwise (same binary, same thread count: the CPU back end is
// deterministic); the one tolerance (loss versus length) is stated where it is used.
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <chrono>
#include <cstddef>
#include <cmath>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "dataloader/shard.h"
#include "eval/loss_vs_length.h"
#include "model/backend_cpu.h"
#include "runtime/checkpoint.h"
#include "runtime/logger.h"
#include "runtime/mfu.h"
#include "model/rand.h"
#include "runtime/rendezvous.h"
#include "runtime/schedule.h"
#include "runtime/run_dir.h"

static const char* TRAINER = "./train_gpt2cpu_lssar";
static const char* SSMAX_TRAINER = "./train_gpt2cpu_ssmax";  // ssmax: s learned per layer and head
static const char* SOFTMAX_TRAINER = "./train_gpt2cpu_softmax";
static const char* EMU_TRAINER = "./build/train_gpt2cu_emu_lssar";  // the CUDA back end, emulated
static const char* LVL_TOOL = "./build/loss_vs_length_cpu_lssar -pr ref";  // the reference path, against the fp32 model
static const int VOCAB = 512;

// ----------------------------------------------------------------------------
// helpers

// The shards every test trains on: a noisy periodic sequence, so the loss falls.
static const std::string& data_dir() {
    static TempDir dir;
    static bool written = false;
    if (!written) {
        Rng rng(7);
        for (const char* split : {"train", "val"}) {
            std::vector<uint16_t> tokens(split[0] == 't' ? 12000 : 3000);
            for (size_t i = 0; i < tokens.size(); i++)
                tokens[i] = rng.uniform() < 0.1 ? (uint16_t)(rng.next_u64() % VOCAB) : (uint16_t)((i * 7 + i / 13) % 500);
            write_shard(dir.path + "/" + split + "_000000.bin", tokens.data(), tokens.size());
        }
        // the trainer's children: no busy-waiting OpenMP threads next to OpenBLAS's
        setenv("OMP_WAIT_POLICY", "passive", 1);
        written = true;
    }
    return dir.path;
}

// the common flags of a tiny run: 2 layers, 32 channels, vocab 512, B 4, T 16
static std::string tiny_run(const std::string& out_dir, const std::string& extra, const char* trainer = TRAINER) {
    const std::string& d = data_dir();
    return std::string(trainer) + " -i " + d + "/train_*.bin -j " + d + "/val_*.bin -e d2c32h2v512 -b 4 -t 16 " +
           "-d 128 -l 3e-3 -u 3 -q 0.1 -c 0.1 -v 4 -m 2 -s 5 -g 4 -gk 8 -o " + out_dir + " " + extra;
}


static bool exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// ----------------------------------------------------------------------------

TEST_CASE("a run stopped with -xi and resumed with -y 1 ends bit for bit where the uninterrupted run does") {
    TempDir a, b;
    Result ra = run(tiny_run(a.path, "-x 12 -n 6"));
    INFO(ra.output);
    REQUIRE(ra.code == 0);
    REQUIRE(exists(a.path + "/ckpt_00000012.bin"));

    Result rb1 = run(tiny_run(b.path, "-x 12 -n 6 -xi 5"));
    INFO(rb1.output);
    REQUIRE(rb1.code == 0);
    CHECK(exists(b.path + "/ckpt_00000005.bin"));
    CHECK(!exists(b.path + "/ckpt_00000006.bin"));
    Result rb2 = run(tiny_run(b.path, "-x 12 -n 6 -y 1"));
    INFO(rb2.output);
    REQUIRE(rb2.code == 0);
    CHECK(rb2.output.find("resumed from " + b.path + "/ckpt_00000005.bin at step 5") != std::string::npos);

    // model, AdamW moments, loader position, rng (sampling ran at step 5 and 10), step: all equal
    std::string ck_a = read_file(a.path + "/ckpt_00000012.bin"), ck_b = read_file(b.path + "/ckpt_00000012.bin");
    REQUIRE(ck_a.size() > CHECKPOINT_HEADER_BYTES);
    CHECK(ck_a == ck_b);
    std::string opt_a = read_file(optimizer_shard_path(a.path, 12, 0, 1));
    REQUIRE(opt_a.size() > OPTIMIZER_SHARD_HEADER_BYTES);
    CHECK(opt_a == read_file(optimizer_shard_path(b.path, 12, 0, 1)));
    CHECK(read_file(a.path + "/ckpt_00000006.bin") == read_file(b.path + "/ckpt_00000006.bin"));
    // the logs: every training loss and gradient norm (printed with 9 digits) and validation loss
    std::vector<std::string> la = loss_records(a.path + "/log.jsonl"), lb = loss_records(b.path + "/log.jsonl");
    CHECK(la.size() == 12 + 4);  // 12 steps, validation at 0, 4, 8, 12
    CHECK(la == lb);
    // the checkpoint holds the step and the loader position
    Checkpoint ck;
    checkpoint_read(a.path + "/ckpt_00000012.bin", ck);
    CHECK(ck.train.step == 12);
    CHECK(ck.train.has_loader == 1);
}

TEST_CASE("the CUDA back end (emulated) resumes bit for bit too") {
    // One emulator thread runs the blocks in a fixed order, so the attention backward's fp32
    // atomics add in a fixed order; the resumed run restores the bf16 weights exactly as the last
    // update's stochastic rounding left them.
    setenv("SIMT_THREADS", "1", 1);
    const std::string d = data_dir();
    auto emu_run = [&](const std::string& out, const std::string& extra) {
        return run(std::string(EMU_TRAINER) + " -i " + d + "/train_*.bin -j '' -e d2c64h2v512 -b 4 -t 16 -l 3e-3 " +
                   "-u 2 -c 0.1 -v 0 -s 0 -x 6 -n 3 -o " + out + " " + extra);
    };
    TempDir a, b;
    Result ra = emu_run(a.path, "");
    INFO(ra.output);
    REQUIRE(ra.code == 0);
    Result rb1 = emu_run(b.path, "-xi 3");
    INFO(rb1.output);
    REQUIRE(rb1.code == 0);
    Result rb2 = emu_run(b.path, "-y 1");
    INFO(rb2.output);
    REQUIRE(rb2.code == 0);
    CHECK(rb2.output.find("resumed from " + b.path + "/ckpt_00000003.bin at step 3") != std::string::npos);
    std::string ck_a = read_file(a.path + "/ckpt_00000006.bin"), ck_b = read_file(b.path + "/ckpt_00000006.bin");
    REQUIRE(ck_a.size() > CHECKPOINT_HEADER_BYTES);
    CHECK(ck_a == ck_b);
    std::string opt_a = read_file(optimizer_shard_path(a.path, 6, 0, 1));
    REQUIRE(opt_a.size() > OPTIMIZER_SHARD_HEADER_BYTES);
    CHECK(opt_a == read_file(optimizer_shard_path(b.path, 6, 0, 1)));
    CHECK(loss_records(a.path + "/log.jsonl") == loss_records(b.path + "/log.jsonl"));
    unsetenv("SIMT_THREADS");
}

TEST_CASE("a killed run resumes from its newest checkpoint and ends bit for bit where the uninterrupted run does") {
    TempDir ref, killed;
    const std::string flags = "-x 200 -n 10 -nk 3 -v 0 -s 0";
    Result rr = run(tiny_run(ref.path, flags));
    INFO(rr.output);
    REQUIRE(rr.code == 0);

    // Start the run with its output in a one-page pipe. After "wrote .../ckpt_00000010.bin" this
    // side stops reading, so the child blocks on a full pipe long before step 200, and is killed.
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    REQUIRE(fcntl(fds[0], F_SETPIPE_SZ, 4096) >= 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        std::string cmd = tiny_run(killed.path, flags);
        execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
        _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    char line[1024];
    bool saw = false;
    while (!saw && fgets(line, sizeof line, out))
        saw = strstr(line, "ckpt_00000010.bin") != nullptr;
    REQUIRE(saw);
    usleep(20000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    fclose(out);
    REQUIRE(WIFSIGNALED(status));
    std::vector<int64_t> steps = checkpoint_steps(killed.path);
    REQUIRE(!steps.empty());
    REQUIRE(steps.back() < 200);  // killed mid-way
    CHECK(steps.size() <= 3);     // -nk 3

    Result rk = run(tiny_run(killed.path, flags + " -y 1"));
    INFO(rk.output);
    REQUIRE(rk.code == 0);
    CHECK(rk.output.find("resumed from " + checkpoint_path(killed.path, steps.back())) != std::string::npos);
    std::string ck_ref = read_file(ref.path + "/ckpt_00000200.bin");
    REQUIRE(ck_ref.size() > CHECKPOINT_HEADER_BYTES);
    CHECK(ck_ref == read_file(killed.path + "/ckpt_00000200.bin"));
    CHECK(read_file(optimizer_shard_path(ref.path, 200, 0, 1)) == read_file(optimizer_shard_path(killed.path, 200, 0, 1)));
    CHECK(loss_records(ref.path + "/log.jsonl") == loss_records(killed.path + "/log.jsonl"));
    CHECK(checkpoint_steps(ref.path) == std::vector<int64_t>{180, 190, 200});
    // -nk 3 removed the older model files and their optimizer shards
    CHECK(!exists(optimizer_shard_path(ref.path, 170, 0, 1)));
    CHECK(exists(optimizer_shard_path(ref.path, 180, 0, 1)));
}

// ----------------------------------------------------------------------------

struct GoodCheckpoint {
    TempDir dir;
    std::string path;
    GoodCheckpoint() {
        Result r = run(tiny_run(dir.path, "-x 2 -n 2 -v 0 -s 0"));
        INFO(r.output);
        REQUIRE(r.code == 0);
        path = dir.path + "/ckpt_00000002.bin";
        REQUIRE(exists(path));
    }
};

static void check_refused(const Result& r, const std::vector<std::string>& needles) {
    INFO(r.output);
    CHECK(r.code != 0);
    CHECK(r.output.find("error:") != std::string::npos);
    CHECK(r.output.find("step 1/") == std::string::npos);  // nothing trained
    for (const std::string& s : needles) CHECK_MESSAGE(r.output.find(s) != std::string::npos, "missing: " << s);
}

TEST_CASE("checkpoints of another variant or config, with a wrong magic, truncated or corrupt are refused") {
    GoodCheckpoint good;
    TempDir work;
    std::string bytes = read_file(good.path);
    const std::string d = data_dir();
    auto start_from = [&](const std::string& ckpt, const std::string& extra = "") {
        return run(std::string(TRAINER) + " -i " + d + "/train_*.bin -j '' -b 4 -t 16 -x 1 -v 0 -s 0 -e " + ckpt +
                   " " + extra);
    };
    // the good one is accepted
    Result ok = start_from(good.path);
    INFO(ok.output);
    REQUIRE(ok.code == 0);

    SUBCASE("wrong magic") {
        std::string bad = work.path + "/magic.bin", b = bytes;
        memcpy(&b[0], "GPT2", 4);
        write_file(bad, b);
        check_refused(start_from(bad), {bad, "bad magic"});
        check_refused(run(std::string(LVL_TOOL) + " -e " + bad), {bad, "bad magic"});
    }
    SUBCASE("wrong version") {
        std::string bad = work.path + "/version.bin", b = bytes;
        uint32_t v = 99;
        memcpy(&b[4], &v, 4);
        write_file(bad, b);
        check_refused(start_from(bad), {bad, "version 99"});
    }
    SUBCASE("truncated") {
        std::string bad = work.path + "/truncated.bin";
        write_file(bad, bytes.substr(0, bytes.size() - 100));
        check_refused(start_from(bad), {bad, "truncated", std::to_string(bytes.size() - 100)});
        write_file(bad, bytes.substr(0, 100));
        check_refused(start_from(bad), {bad, "truncated"});
        check_refused(run(std::string(LVL_TOOL) + " -e " + bad), {bad, "truncated"});
    }
    SUBCASE("corrupt weights (checksum)") {
        std::string bad = work.path + "/flipped.bin", b = bytes;
        b[CHECKPOINT_HEADER_BYTES + 1000] ^= 0x10;
        write_file(bad, b);
        check_refused(start_from(bad), {bad, "checksum"});
    }
    SUBCASE("another attention variant") {
        Checkpoint ck;
        checkpoint_read(good.path, ck);
        ck.config.attn = ATTN_SOFTMAX;
        std::string bad = work.path + "/softmax.bin";
        checkpoint_write(bad, ck);
        check_refused(start_from(bad), {bad, "made for attention softmax", "built for lssar", "ATTN=softmax"});
        check_refused(run(std::string(LVL_TOOL) + " -e " + bad), {bad, "made for attention softmax"});
    }
    SUBCASE("another p or RoPE base than asked for") {
        check_refused(start_from(good.path, "-p 3"), {good.path, "p = 15", "p = 3"});
        check_refused(start_from(good.path, "-rb 500"), {good.path, "rope_base = 10000", "500"});
        // evaluation at another p: the tools take -p >= 1 (and refuse less)
        check_refused(run(std::string(LVL_TOOL) + " -e " + good.path + " -p 0.5"), {"-p 0.5", ">= 1"});
    }
    SUBCASE("resuming into a run of another config") {
        // the output dir holds a d2c32h2 checkpoint; this run asks for 64 channels, or another T
        std::string dir = work.path + "/run";
        mkdir(dir.c_str(), 0755);
        write_file(dir + "/ckpt_00000002.bin", bytes);
        write_file(optimizer_shard_path(dir, 2, 0, 1), read_file(optimizer_shard_path(good.dir.path, 2, 0, 1)));
        auto resume = [&](const std::string& model, int T) {
            return run(std::string(TRAINER) + " -i " + d + "/train_*.bin -j '' -b 4 -t " + std::to_string(T) +
                       " -x 4 -v 0 -s 0 -y 1 -o " + dir + " -e " + model);
        };
        check_refused(resume("d2c64h2v512", 16), {dir + "/ckpt_00000002.bin", "channels = 32", "asks for 64"});
        check_refused(resume("d3c32h2v512", 16), {"num_layers = 2", "asks for 3"});
        check_refused(resume("d2c32h2v1024", 16), {"vocab_size = 512", "asks for 1024"});
        check_refused(resume("d2c32h2v512", 32), {"max_seq_len = 16", "asks for 32"});
        Result same = resume("d2c32h2v512", 16);
        INFO(same.output);
        CHECK(same.code == 0);
        CHECK(same.output.find("resumed from") != std::string::npos);
    }
}

TEST_CASE("a resume refuses another number of ranks and a missing, foreign or corrupt optimizer shard") {
    GoodCheckpoint good;
    TempDir work;
    const std::string d = data_dir();
    std::string model_bytes = read_file(good.path), shard_bytes = read_file(optimizer_shard_path(good.dir.path, 2, 0, 1));
    // a run dir holding the good checkpoint's model file and the given shard files
    auto run_dir = [&](const std::string& name, const std::string& model, const std::vector<std::pair<std::string, std::string>>& shards) {
        std::string dir = work.path + "/" + name;
        mkdir(dir.c_str(), 0755);
        write_file(dir + "/ckpt_00000002.bin", model);
        for (auto& [file, bytes] : shards) write_file(dir + "/" + file, bytes);
        return dir;
    };
    auto resume = [&](const std::string& dir) {
        return run(std::string(TRAINER) + " -i " + d + "/train_*.bin -j '' -b 4 -t 16 -x 4 -v 0 -s 0 -y 1 -o " + dir +
                   " -e d2c32h2v512");
    };
    const std::string shard_name = "ckpt_00000002_adamw_0of1.bin";

    SUBCASE("trained on 2 ranks") {
        Checkpoint ck;
        checkpoint_read(good.path, ck);
        ck.world_size = 2;
        std::string two = work.path + "/two.bin";
        checkpoint_write(two, ck);
        std::string dir = run_dir("two", read_file(two), {{shard_name, shard_bytes}});
        check_refused(resume(dir), {dir + "/ckpt_00000002.bin", "trained on 2 rank(s), this launch has 1",
                                    "resume with 2"});
    }
    SUBCASE("missing shard") {
        std::string dir = run_dir("missing", model_bytes, {});
        check_refused(resume(dir), {dir + "/" + shard_name, "incomplete checkpoint"});
    }
    SUBCASE("a shard of another step") {
        Checkpoint ck;
        checkpoint_read(good.path, ck);
        OptimizerShard s;
        optimizer_shard_read(optimizer_shard_path(good.dir.path, 2, 0, 1), s, 2, 0, 1, ck.params.size());
        s.step = 1;
        std::string other = work.path + "/step1.bin";
        optimizer_shard_write(other, s);
        std::string dir = run_dir("step", model_bytes, {{shard_name, read_file(other)}});
        check_refused(resume(dir), {dir + "/" + shard_name, "holds step 1", "expected step 2"});
    }
    SUBCASE("truncated or corrupt shard") {
        std::string dir = run_dir("truncated", model_bytes, {{shard_name, shard_bytes.substr(0, shard_bytes.size() - 8)}});
        check_refused(resume(dir), {dir + "/" + shard_name, "truncated"});
        std::string flipped = shard_bytes;
        flipped[OPTIMIZER_SHARD_HEADER_BYTES + 100] ^= 0x10;
        dir = run_dir("corrupt", model_bytes, {{shard_name, flipped}});
        check_refused(resume(dir), {dir + "/" + shard_name, "checksum"});
    }
}

// ----------------------------------------------------------------------------

TEST_CASE("the guard skips non-finite updates, logs them, and stops; without a checkpoint it does not advise resuming") {
    // lr 1e30 and no checkpoints: step 1 is finite and its update throws the weights to ~1e30, so
    // every later forward overflows (logits ~1e60 in float) and gives a NaN loss.
    TempDir dir;
    Result r = run(tiny_run(dir.path, "-x 20 -sk 3 -v 0 -s 0 -l 1e30 -u 0"));
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("3 consecutive updates skipped (last: non-finite loss at step 4)") != std::string::npos);
    CHECK(r.output.find("No checkpoint of this run was written: start it again with a lower learning rate") !=
          std::string::npos);
    CHECK(r.output.find("-y 1") == std::string::npos);
    CHECK(checkpoint_steps(dir.path).empty());
    std::string log = read_file(dir.path + "/log.jsonl");
    for (int step = 2; step <= 4; step++) {
        std::string rec = "{\"step\":" + std::to_string(step) + ",\"loss\":null,\"grad_norm\":null";
        CHECK_MESSAGE(log.find(rec) != std::string::npos, rec);
    }
    CHECK(log.find("\"skipped\":\"non-finite loss\"") != std::string::npos);
    CHECK(log.find("{\"step\":4,\"stopped\":\"non-finite loss\"}") != std::string::npos);
    CHECK(log.find("{\"step\":5,") == std::string::npos);
}

TEST_CASE("an update that blows up the weights never becomes a checkpoint, and the advice printed works") {
    // Steps 1-4 at lr 3e-3 (checkpoints 2 and 4), then resumed at lr 1e30 without clipping: the
    // loss of step 5 is computed before its update and is finite, the update throws the weights to
    // ~1e30. Its checkpoint must not be written; the advice names ckpt_4, and following it (a lower
    // lr, -y 1) continues to the end with finite losses.
    TempDir dir;
    Result r1 = run(tiny_run(dir.path, "-x 8 -n 2 -xi 4 -v 0 -s 0"));
    INFO(r1.output);
    REQUIRE(r1.code == 0);
    Result blow = run(tiny_run(dir.path, "-x 8 -n 1 -v 0 -s 0 -y 1 -l 1e30 -u 0 -gc 0"));
    INFO(blow.output);
    CHECK(blow.code == 2);
    std::string ckpt4 = dir.path + "/ckpt_00000004.bin";
    CHECK(blow.output.find("step 5: the update blew up") != std::string::npos);
    CHECK(blow.output.find("The last good checkpoint is " + ckpt4 + ": lower the learning rate (-l)") != std::string::npos);
    CHECK(checkpoint_steps(dir.path) == std::vector<int64_t>{2, 4});
    CHECK(!exists(optimizer_shard_path(dir.path, 5, 0, 1)));
    CHECK(read_file(dir.path + "/log.jsonl").find("{\"step\":5,\"stopped\":\"update blew up\"}") != std::string::npos);
    Result advice = run(tiny_run(dir.path, "-x 8 -n 2 -v 0 -s 0 -y 1 -l 1e-3"));
    INFO(advice.output);
    CHECK(advice.code == 0);
    CHECK(advice.output.find("resumed from " + ckpt4 + " at step 4") != std::string::npos);
    Checkpoint ck;
    checkpoint_read(dir.path + "/ckpt_00000008.bin", ck);
    double max_abs = 0;
    for (float w : ck.params) max_abs = std::max(max_abs, (double)std::fabs(w));
    CHECK(max_abs < 100);  // GPT-2's initialisation and 8 steps at lr <= 3e-3: |w| stays O(1)
}

// The first step a spike guard on `key` ("loss" or "grad_norm") at threshold z must skip, from
// the values of a run without the guard: the guard's rule (runtime/guard.h), written again here,
// gives each value's distance above its running mean in running standard deviations (exact
// mean/variance for the first 20 values, then exponential with weight 1/20). Sets z to half the
// largest distance seen after 20 values (as printed with 6 decimals); 0 if none rises above.
static int first_spike(const std::string& log_path, const std::string& key, std::string* z) {
    std::vector<std::pair<int, double>> z_of_step;  // (step, z) for the values after the first 20
    double mean = 0, var = 0, z_max = 0;
    long count = 0;
    std::istringstream in(read_file(log_path));
    std::string rec;
    while (std::getline(in, rec)) {
        int step;
        size_t at = rec.find("\"" + key + "\":");
        if (sscanf(rec.c_str(), "{\"step\":%d,", &step) != 1 || rec.find(",\"loss\":") == std::string::npos ||
            at == std::string::npos)
            continue;  // not a step record
        double x = atof(rec.c_str() + at + key.size() + 3);
        if (count >= 20 && var > 0) {
            double zs = (x - mean) / std::sqrt(var);
            z_of_step.push_back({step, zs});
            z_max = std::max(z_max, zs);
        }
        count++;
        double w = std::max(1.0 / count, 0.05), delta = x - mean;
        mean += w * delta;
        var = (1 - w) * (var + w * delta * delta);
    }
    if (!(z_max > 0)) return 0;
    char buf[32];
    snprintf(buf, sizeof buf, "%.6f", z_max / 2);
    *z = buf;
    for (auto& [step, zs] : z_of_step)
        if (zs > atof(buf)) return step;
    return 0;
}

TEST_CASE("the spike guards skip the first loss (-sl) or gradient norm (-sg) that many standard deviations above its running mean") {
    // With the threshold at half the largest distance seen after 20 values, the guard must skip
    // first at the first step beyond it; until that step the two runs are identical. A learning
    // rate of 1e-9 keeps the model still, so the values scatter around a level mean (a falling
    // loss never rises above it).
    TempDir control;
    Result c = run(tiny_run(control.path, "-x 40 -sk 100 -v 0 -s 0 -l 1e-9 -u 0 -n 40"));
    REQUIRE(c.code == 0);
    CHECK(read_file(control.path + "/log.jsonl").find("skipped") == std::string::npos);
    struct Guard { const char *flag, *key, *reason; };
    for (const Guard& g : {Guard{"-sl", "loss", "loss spike ("}, Guard{"-sg", "grad_norm", "gradient norm spike ("}}) {
        CAPTURE(g.flag);
        std::string z;
        int predicted = first_spike(control.path + "/log.jsonl", g.key, &z);
        REQUIRE_MESSAGE(predicted > 0, "no " << g.key << " after the first 20 rises above half the largest distance");
        TempDir dir;
        Result r = run(tiny_run(dir.path, std::string("-x 40 -sk 100 -v 0 -s 0 -l 1e-9 -u 0 ") + g.flag + " " + z));
        INFO(r.output);
        REQUIRE(r.code == 0);
        std::string log = read_file(dir.path + "/log.jsonl");
        size_t first = log.find(std::string("\"skipped\":\"") + g.reason);
        REQUIRE(first != std::string::npos);
        size_t rec = log.rfind("{\"step\":", first);
        CHECK(std::atoi(log.c_str() + rec + 8) == predicted);
        CHECK(log.find(std::string(g.flag == std::string("-sl") ? "\"skip_loss_z\":" : "\"skip_grad_norm_z\":") + z.substr(0, 4)) !=
              std::string::npos);  // the threshold in the header record
    }
    // the gradient norm guard's statistics go into the checkpoint and come back (a resume guards alike)
    Checkpoint ck;
    checkpoint_read(control.path + "/ckpt_00000040.bin", ck);
    CHECK(ck.train.norm.count == 40);
    CHECK(ck.train.norm.mean > 0);
    ck.train.norm = {1.5, 0.25, 33};
    checkpoint_write(control.path + "/copy.bin", ck);
    Checkpoint back;
    checkpoint_read(control.path + "/copy.bin", back);
    CHECK(back.train.norm.mean == 1.5);
    CHECK(back.train.norm.var == 0.25);
    CHECK(back.train.norm.count == 33);
}

TEST_CASE("MFU: the dense bf16 peaks of the GPUs researchers have; an unknown GPU prints n/a, never 0% or less") {
    // the vendors' dense figures (runtime/mfu.h cites each); a name is matched as a whole word
    struct Gpu { const char* name; double peak; };
    for (const Gpu& g : {Gpu{"NVIDIA H100 80GB HBM3", 989e12}, Gpu{"NVIDIA H100 PCIe", 756e12},
                         Gpu{"NVIDIA H200", 989e12}, Gpu{"NVIDIA A100-SXM4-80GB", 312e12},
                         Gpu{"NVIDIA L4", 121e12}, Gpu{"NVIDIA L40S", 362e12},
                         Gpu{"NVIDIA GeForce RTX 4090", 165.2e12}, Gpu{"NVIDIA RTX 6000 Ada Generation", 364.2e12},
                         Gpu{"NVIDIA B200", 2250e12}, Gpu{"NVIDIA A10", 125e12},
                         Gpu{"NVIDIA A10G", 0}, Gpu{"NVIDIA GeForce RTX 3060", 0}, Gpu{"Tesla T4", 0}}) {
        CAPTURE(g.name);
        CHECK(peak_flops_of(g.name) == g.peak);
    }
    StepResult r;
    r.loss = 5, r.norm = 1, r.lr = 1e-3f, r.ms = 100;
    std::string unknown = step_line(3, 10, r, 1000, step_mfu(1e12, 0.1, 0), 5);
    CHECK(unknown.find("| MFU n/a |") != std::string::npos);
    CHECK(std::string(MFU_UNKNOWN) == "MFU n/a (add its peak to runtime/mfu.h)");
    std::string known = step_line(3, 10, r, 1000, step_mfu(1e12, 0.1, 165.2e12), 5);
    CHECK(known.find("| MFU 6.1% |") != std::string::npos);  // 1e13 of 165.2e12 FLOP/s
    std::string none = step_line(3, 10, r, 1000, step_mfu(1e12, 0.1, -1), 5);  // no GPU: no MFU at all
    CHECK(none.find("MFU") == std::string::npos);
}

TEST_CASE("-k wsd: warmup, the learning rate held, then linear to -q over the last -cd of the steps") {
    // the schedule: lr 1, warmup 2, 10 steps, final 0.1, cooldown 0.5 = steps 6..10
    LrSchedule k;
    k.lr = 1, k.kind = "wsd", k.warmup = 2, k.final_frac = 0.1f, k.cooldown_frac = 0.5f, k.max_steps = 10;
    const double want[] = {0.5, 1, 1, 1, 1, 0.82, 0.64, 0.46, 0.28, 0.1};
    for (int step = 1; step <= 10; step++) CHECK(k.at(step) == doctest::Approx(want[step - 1]).epsilon(1e-6));
    // a cooldown of every step after the warmup is the linear schedule
    LrSchedule lin = k;
    lin.kind = "linear";
    k.cooldown_frac = 1;
    for (int step = 1; step <= 10; step++) CHECK(k.at(step) == doctest::Approx(lin.at(step)).epsilon(1e-6));
    // the trainer logs it: the rates of every step (float, 1e-6 relative), the schedule in the header
    TempDir dir;
    Result r = run(tiny_run(dir.path, "-x 10 -v 0 -s 0 -l 1e-3 -u 2 -q 0.1 -k wsd -cd 0.5"));
    INFO(r.output);
    REQUIRE(r.code == 0);
    std::string log = read_file(dir.path + "/log.jsonl");
    CHECK(log.find("\"lr_schedule\":\"wsd\",\"warmup\":2,\"final_lr_frac\":0.100000001,\"cooldown_frac\":0.5,"
                   "\"cooldown_start\":5") != std::string::npos);
    std::istringstream in(log);
    std::string rec;
    int steps = 0;
    while (std::getline(in, rec)) {
        int step;
        size_t at = rec.find("\"lr\":");
        if (sscanf(rec.c_str(), "{\"step\":%d,", &step) != 1 || rec.find(",\"loss\":") == std::string::npos) continue;
        CHECK(atof(rec.c_str() + at + 5) == doctest::Approx(1e-3 * want[step - 1]).epsilon(1e-6));
        steps++;
    }
    CHECK(steps == 10);
    // -cd belongs to wsd
    Result bad = run(tiny_run(dir.path, "-x 10 -k cosine -cd 0.3"));
    CHECK(bad.code == 1);
    CHECK(bad.output.find("-cd 0.3: the cooldown fraction is -k wsd's") != std::string::npos);
}

TEST_CASE("a failed checkpoint write leaves the previous checkpoint intact") {
    GoodCheckpoint good;
    std::string before = read_file(good.path);

    SUBCASE("checkpoint_write under a file size limit") {
        Checkpoint ck;
        checkpoint_read(good.path, ck);
        ck.train.step = 99;
        // write() fails with EFBIG past the limit, as it fails with ENOSPC on a full disk
        struct rlimit old;
        REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = old;
        small.rlim_cur = 64 * 1024;
        REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
        bool threw = false;
        std::string msg;
        try {
            checkpoint_write(good.path, ck);
        } catch (const std::runtime_error& e) {
            threw = true;
            msg = e.what();
        }
        REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
        signal(SIGXFSZ, SIG_DFL);
        CHECK(threw);
        CHECK(msg.find(good.path + ".tmp") != std::string::npos);
        CHECK(read_file(good.path) == before);
        CHECK(!exists(good.path + ".tmp"));
    }
    SUBCASE("the trainer stops with a clear message and the previous checkpoint intact") {
        // resume the run (its ckpt_2) with a file size limit: the write of ckpt_4 fails
        std::string cmd = "trap '' XFSZ; ulimit -f 64; exec " + tiny_run(good.dir.path, "-x 6 -n 2 -v 0 -s 0 -y 1");
        Result r = run("bash -c \"" + cmd + "\"");
        INFO(r.output);
        CHECK(r.code == 1);
        CHECK(r.output.find("resumed from " + good.path) != std::string::npos);
        // the optimizer shard, written first, is the write that fails
        std::string shard4 = optimizer_shard_path(good.dir.path, 4, 0, 1);
        CHECK(r.output.find(shard4 + ".tmp") != std::string::npos);
        CHECK(r.output.find("The previous checkpoint " + good.path + " is intact") != std::string::npos);
        CHECK(read_file(good.path) == before);
        CHECK(checkpoint_steps(good.dir.path) == std::vector<int64_t>{2});
        CHECK(!exists(shard4 + ".tmp"));
        CHECK(!exists(shard4));
        CHECK(!exists(good.dir.path + "/ckpt_00000004.bin"));
    }
}

// ----------------------------------------------------------------------------

TEST_CASE("learned p (-pl 1): logged every step, saved, printed by the evaluation tools, -p refused there") {
    TempDir work;
    std::string dir = work.path + "/run";
    Result r = run(tiny_run(dir, "-x 2 -n 2 -pl 1 -p 3"));
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("p learned per layer and head from 3") != std::string::npos);
    CHECK(r.output.find("| p mean ") != std::string::npos);
    std::string log = read_file(dir + "/log.jsonl");
    CHECK(log.find("\"p\":[") != std::string::npos);
    Checkpoint ck;
    checkpoint_read(dir + "/ckpt_00000002.bin", ck);
    CHECK(ck.config.learn_p == 1);
    std::vector<double> p = learned_p_values(ck.config, ck.params.data());
    REQUIRE(p.size() == 4);  // 2 layers x 2 heads
    for (double v : p) CHECK(v != 3.0);  // trained: moved away from the start
    Result eval = run(std::string(LVL_TOOL) + " -e " + dir + "/ckpt_00000002.bin -j '" + data_dir() +
                      "/val_*.bin' -t 16 -l 1 -n 64");
    INFO(eval.output);
    CHECK(eval.code == 0);
    CHECK(eval.output.find("learned p (p mean") != std::string::npos);
    check_refused(run(std::string(LVL_TOOL) + " -e " + dir + "/ckpt_00000002.bin -p 15"), {"-p 15", "learned its p"});

    // -plr: theta's learning rate is -plr times -l. 0 keeps p where it started, to the bit; AdamW
    // moves theta by about the learning rate per step whatever its gradient's size, so 30 times the
    // learning rate moves p about 30 times as far in the same 2 steps
    std::vector<double> moved[2];
    const char* scales[2] = {"0", "30"};
    for (int k = 0; k < 2; k++) {
        std::string dir_k = work.path + "/plr" + scales[k];
        Result rk = run(tiny_run(dir_k, std::string("-x 2 -n 2 -pl 1 -p 3 -plr ") + scales[k]));
        INFO(rk.output);
        REQUIRE(rk.code == 0);
        Checkpoint ck_k;
        checkpoint_read(dir_k + "/ckpt_00000002.bin", ck_k);
        moved[k] = learned_p_values(ck_k.config, ck_k.params.data());
        REQUIRE(moved[k].size() == 4);
    }
    for (size_t i = 0; i < 4; i++) {
        CHECK(moved[0][i] == learned_p((double)(float)learned_p_theta0(3.0)));  // the start, as stored (float theta)
        double ratio = std::fabs(moved[1][i] - 3.0) / std::fabs(p[i] - 3.0);
        CAPTURE(ratio);
        CHECK(ratio > 10);
        CHECK(ratio < 60);
    }
}

TEST_CASE("ssmax: s logged every step, saved in the weights, moved by training, resumed bit for bit") {
    TempDir a, b;
    Result ra = run(tiny_run(a.path, "-x 8 -n 4", SSMAX_TRAINER));
    INFO(ra.output);
    REQUIRE(ra.code == 0);
    CHECK(ra.output.find("ssmax attention s learned per layer and head from 0.43") != std::string::npos);
    CHECK(ra.output.find("| s mean ") != std::string::npos);
    CHECK(read_file(a.path + "/log.jsonl").find("\"s\":[") != std::string::npos);
    Checkpoint ck;
    checkpoint_read(a.path + "/ckpt_00000008.bin", ck);
    REQUIRE(ck.config.attn == ATTN_SSMAX);
    std::vector<double> s = ssmax_s_values(ck.config, ck.params.data());
    REQUIRE(s.size() == 4);  // 2 layers x 2 heads
    for (double v : s) CHECK(v != (double)(float)SSMAX_S0);  // trained: moved away from the start
    // stopped at 3 and resumed: the same weights (s among them), AdamW moments and losses, to the bit
    Result rb1 = run(tiny_run(b.path, "-x 8 -n 4 -xi 3", SSMAX_TRAINER));
    INFO(rb1.output);
    REQUIRE(rb1.code == 0);
    Result rb2 = run(tiny_run(b.path, "-x 8 -n 4 -y 1", SSMAX_TRAINER));
    INFO(rb2.output);
    REQUIRE(rb2.code == 0);
    CHECK(rb2.output.find("resumed from " + b.path + "/ckpt_00000003.bin at step 3") != std::string::npos);
    CHECK(read_file(a.path + "/ckpt_00000008.bin") == read_file(b.path + "/ckpt_00000008.bin"));
    CHECK(read_file(optimizer_shard_path(a.path, 8, 0, 1)) == read_file(optimizer_shard_path(b.path, 8, 0, 1)));
    CHECK(loss_records(a.path + "/log.jsonl") == loss_records(b.path + "/log.jsonl"));
    // -pl 1 is learned p, which ssmax does not have
    check_refused(run(tiny_run(a.path + "/pl", "-x 1 -pl 1 -p 3", SSMAX_TRAINER)), {"-pl 1"});
}

TEST_CASE("softmax -tl 1: log-length scaling beyond -t, so training at -t is the plain run bit for bit; attn_len saved") {
    TempDir a, b;
    Result ra = run(tiny_run(a.path, "-x 4 -n 4", SOFTMAX_TRAINER));
    INFO(ra.output);
    REQUIRE(ra.code == 0);
    Result rb = run(tiny_run(b.path, "-x 4 -n 4 -tl 1", SOFTMAX_TRAINER));
    INFO(rb.output);
    REQUIRE(rb.code == 0);
    CHECK(rb.output.find("(log-length scaling beyond attn_len 16)") != std::string::npos);
    CHECK(loss_records(a.path + "/log.jsonl") == loss_records(b.path + "/log.jsonl"));
    Checkpoint ca, cb;
    checkpoint_read(a.path + "/ckpt_00000004.bin", ca);
    checkpoint_read(b.path + "/ckpt_00000004.bin", cb);
    CHECK(ca.config.attn_len == 0);
    CHECK(cb.config.attn_len == 16);
    CHECK(ca.params == cb.params);
}

// attn_len (-tl 1) in the model file's header: the int32 after learn_p, the slot older files left zero
// (scripts/export.py reads it at byte 188), so they load with attn_len = 0, the row's n_t.
TEST_CASE("attn_len: a checkpoint keeps it, older files read 0, bad values are refused, a resume must match") {
    static_assert(offsetof(CheckpointHeader, attn_len) == offsetof(CheckpointHeader, learn_p) + 4, "after learn_p");
    static_assert(offsetof(CheckpointHeader, attn_len) == 188, "scripts/export.py's OFF_ATTN_LEN");
    TempDir work;
    Checkpoint ck;
    ck.config.max_seq_len = 16;
    ck.config.vocab_size = 37;
    ck.config.padded_vocab_size = 40;
    ck.config.num_layers = 1;
    ck.config.num_heads = 2;
    ck.config.channels = 16;
    ck.config.attn = ATTN_SIGMOID;
    ck.config.attn_len = 16;
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    gpt2_param_sizes(sizes, ck.config);
    for (size_t k : sizes) n += k;
    ck.params.assign(n, 0.25f);
    std::string path = work.path + "/ckpt_00000000.bin";
    checkpoint_write(path, ck);
    Checkpoint back;
    checkpoint_read(path, back);
    CHECK(back.config.attn == ATTN_SIGMOID);
    CHECK(back.config.attn_len == 16);
    CHECK(back.params == ck.params);
    // an older file: the slot is zero (as written before attn_len existed), and that is attn_len 0
    ck.config.attn_len = 0;
    checkpoint_write(path, ck);
    std::string bytes = read_file(path);
    int32_t slot;
    memcpy(&slot, &bytes[offsetof(CheckpointHeader, attn_len)], 4);
    CHECK(slot == 0);
    checkpoint_read(path, back);
    CHECK(back.config.attn_len == 0);
    // a slot holding a bad value (header checksum recomputed): refused as a corrupt header, naming it
    auto with_slot = [&](AttnKind kind, int32_t value) {
        std::string b = bytes;
        int32_t attn = (int32_t)kind;
        memcpy(&b[offsetof(CheckpointHeader, attn)], &attn, 4);
        memcpy(&b[offsetof(CheckpointHeader, attn_len)], &value, 4);
        uint64_t sum = checkpoint_checksum(b.data(), offsetof(CheckpointHeader, header_checksum));
        memcpy(&b[offsetof(CheckpointHeader, header_checksum)], &sum, 8);
        std::string bad = work.path + "/bad.bin";
        write_file(bad, b);
        try {
            Checkpoint c;
            checkpoint_read(bad, c);
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(with_slot(ATTN_RELU, 1024).empty());
    std::string neg = with_slot(ATTN_SIGMOID, -1);
    CHECK(neg.find("corrupt header") != std::string::npos);
    CHECK(neg.find("attn_len = -1") != std::string::npos);
    std::string other = with_slot(ATTN_LSSA, 16);
    CHECK(other.find("attn_len = 16") != std::string::npos);
    CHECK(other.find("softmax, sigmoid, relu, softmax_rw") != std::string::npos);
    // softmax's log-length scaling: any L >= 2 (ln(L) divides), not 1
    CHECK(with_slot(ATTN_SOFTMAX, 16).empty());
    CHECK(with_slot(ATTN_SOFTMAX, 1).find("attn_len = 1: log-length scaling") != std::string::npos);
    // writing one is refused too
    ck.config.attn = ATTN_LSSAR;
    ck.config.attn_len = 16;
    CHECK_THROWS_AS(checkpoint_write(work.path + "/w.bin", ck), std::invalid_argument);
    // a run (resume, -e) asking for another attn_len than the checkpoint's is refused, naming both
    GPT2Config have = back.config, want = back.config;
    have.attn_len = 64;
    std::string mismatch = checkpoint_config_mismatch("c.bin", have, want);
    CHECK(mismatch.find("c.bin") != std::string::npos);
    CHECK(mismatch.find("attn_len = 64") != std::string::npos);
    CHECK(mismatch.find("attn_len = 0") != std::string::npos);
    CHECK(mismatch.find("-tl 1") != std::string::npos);
    CHECK(checkpoint_config_mismatch("c.bin", have, have).empty());
}

TEST_CASE("bad flags are refused, naming the flag and the value") {
    const std::string d = data_dir();
    const std::string base = std::string(TRAINER) + " -i " + d + "/train_*.bin -j '' -e d2c32h2v512 -b 4 -t 16 -x 1 -s 0 ";
    struct Case { std::string args; std::vector<std::string> needles; };
    std::vector<Case> cases = {
        {"-b 0", {"-b 0", "batch size"}},
        {"-b four", {"-b four", "integer"}},
        {"-t -5", {"-t -5", "sequence length"}},
        {"-l fast", {"-l fast", "learning rate", "number"}},
        {"-d 100", {"-d 100", "multiple of B*T = 64"}},
        {"-k step", {"-k step", "cosine, linear, constant or wsd"}},
        {"-q 2", {"-q 2", "final learning rate fraction"}},
        {"-p 0.5", {"-p 0.5", "re-weighting power p"}},
        {"-pl 2", {"-pl 2", "learned p"}},
        {"-pl 1 -p 1", {"-pl 1", "must be > 1"}},
        {"-plr 10", {"-plr 10", "needs -pl 1"}},
        {"-tl 2", {"-tl 2", "training-length constant"}},
        {"-tl 1", {"-tl 1", "lssar attention has no length", "sigmoid, relu"}},
        {"-pl 1 -plr -1", {"-plr -1", "learning-rate multiplier"}},
        {"-y 2", {"-y 2", "resume"}},
        {"-n 5", {"-n 5", "output dir (-o)"}},
        {"-zz 1", {"unknown flag -zz"}},
        {"-b", {"-b: missing value"}},
        {"extra", {"unexpected argument 'extra'"}},
        {"-e d4x", {"-e d4x", "neither a depth descriptor"}},
        {"-e d3c100h3", {"-e d3c100h3", "channels = 100", "num_heads = 3"}},
        {"-e /nonexistent/ckpt.bin", {"-e /nonexistent/ckpt.bin"}},
        {"-i /nonexistent/x_*.bin", {"/nonexistent/x_*.bin"}},
        {"-i " + d + "/nothing_*.bin", {d + "/nothing_*.bin", "no file matches"}},
    };
    for (const Case& c : cases) {
        CAPTURE(c.args);
        check_refused(run(base + c.args), c.needles);
    }
    Result help = run(std::string(TRAINER) + " -h");
    CHECK(help.code == 0);
    for (const char* flag : {"-i", "-j", "-o", "-e", "-b", "-t", "-d", "-l", "-k", "-u", "-q", "-c", "-gc", "-x", "-xi",
                             "-rs", "-sk", "-sl", "-v", "-m", "-s", "-g", "-gk", "-gt", "-gp", "-n", "-nk", "-y", "-ow", "-p", "-pl", "-plr", "-pw", "-rb", "-tl"})
        CHECK_MESSAGE(help.output.find(std::string("\n  ") + flag + " ") != std::string::npos, "undocumented " << flag);
}

// ----------------------------------------------------------------------------

TEST_CASE("loss versus length scores the same tokens at every length, in windows over the whole split") {
    GoodCheckpoint good;
    const std::string d = data_dir();
    std::string csv = good.dir.path + "/lvl.csv";
    std::string windows_csv = good.dir.path + "/windows.csv";
    Result r = run(std::string(LVL_TOOL) + " -e " + good.path + " -j " + d + "/val_*.bin -l 1,2,4 -n 640 -f 64 -o " + csv +
                   " -ow " + windows_csv);
    INFO(r.output);
    REQUIRE(r.code == 0);
    // 10 windows of 64 tokens at a stride of floor(2999 / 10) = 299 over the 3000 validation tokens
    // (one document: this vocabulary has no document-start token)
    CHECK(r.output.find("10 windows of 64 tokens (a stride of 299 tokens), starting in 1 distinct document of the "
                        "split's 1 (3000 tokens)") != std::string::npos);
    std::string expect_windows = "window,start,document\n";
    for (int b = 0; b < 10; b++) expect_windows += std::to_string(b) + "," + std::to_string(299 * b) + ",0\n";
    CHECK(read_file(windows_csv) == expect_windows);
    std::istringstream in(read_file(csv));
    std::string line;
    std::getline(in, line);
    CHECK(line.rfind("length,loss,tokens,", 0) == 0);  // the columns plot_loss_vs_length.py reads come first
    // independently: each window its own forward (B = 1), losses summed in order
    Checkpoint ck;
    checkpoint_read(good.path, ck);
    ModelCPU model(ck.config);
    model.set_params(ck.params);
    std::vector<uint16_t> val = read_shard(d + "/val_000000.bin", VOCAB);
    for (int L : {16, 32, 64}) {
        REQUIRE(std::getline(in, line));
        int length;
        double loss;
        long long tokens;
        REQUIRE(sscanf(line.c_str(), "%d,%lf,%lld", &length, &loss, &tokens) == 3);
        CHECK(length == L);
        CHECK(tokens == 640);
        double sum = 0;
        std::vector<int> x(L), y(L);
        std::vector<float> losses(L);
        for (int w = 0; w < 640 / L; w++) {
            int start = 299 * (w * L / 64) + w * L % 64;  // sub-window w * L % 64 of window w * L / 64
            for (int i = 0; i < L; i++) {
                x[i] = val[start + i];
                y[i] = val[start + i + 1];
            }
            model.forward(x.data(), y.data(), 1, L);
            model.losses(losses.data());
            for (float l : losses) sum += l;
        }
        // float32 model: batching changes the matmul blocking, so per-token losses may differ in
        // their last bits (~1e-6 relative); the CSV prints 6 decimals.
        CHECK(loss == doctest::Approx(sum / 640).epsilon(1e-5));
    }
}

// ----------------------------------------------------------------------------
// several trainer processes (the emulated CUDA back end; the host NCCL joins the processes)

// An emulated trainer on the tiny shards: d2c64h2v512, T 16, no validation or sampling.
static std::string emu_run(const std::string& out_dir, const std::string& extra) {
    const std::string d = data_dir();
    return std::string(EMU_TRAINER) + " -i " + d + "/train_*.bin -j '' -e d2c64h2v512 -t 16 -l 3e-3 -u 2 -c 0.1 " +
           "-v 0 -s 0 -o " + out_dir + " " + extra;
}

static std::string launch2(const std::string& cmd) { return "scripts/launch.sh -n 2 " + cmd; }

// rms(a - b) / rms(b - base)
static double relative_rms(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& base) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += ((double)b[i] - base[i]) * ((double)b[i] - base[i]);
    }
    return std::sqrt(num / den);
}

// the loss of `step` in a log.jsonl, NaN if absent
static double logged_loss(const std::string& log_path, int step) {
    for (const std::string& rec : loss_records(log_path)) {
        int s;
        double loss;
        if (sscanf(rec.c_str(), "{\"step\":%d,\"loss\":%lf", &s, &loss) == 2 && s == step) return loss;
    }
    return NAN;
}

// the p logged at `step` (-pw or -pl 1: "p":[...]), NaN if absent
static double logged_p(const std::string& log_path, int step) {
    std::istringstream in(read_file(log_path));
    std::string rec;
    while (std::getline(in, rec)) {
        int s;
        size_t at = rec.find("\"p\":[");
        if (sscanf(rec.c_str(), "{\"step\":%d,\"loss\"", &s) == 1 && s == step && at != std::string::npos)
            return atof(rec.c_str() + at + 5);
    }
    return NAN;
}

TEST_CASE("p warmup (-pw): p rises from 1 to -p, step 1 trains at p = 1, the checkpoint records -p") {
    // the schedule itself: 1 at step 1, linear, -p from step N + 1 on; -pw 0 is -p throughout
    CHECK(p_at_step(15, 10, 1) == 1.0f);
    CHECK(p_at_step(15, 10, 6) == 8.0f);
    CHECK(p_at_step(15, 10, 11) == 15.0f);
    CHECK(p_at_step(15, 10, 500) == 15.0f);
    CHECK(p_at_step(15, 0, 1) == 15.0f);
    TempDir work;
    std::string warm = work.path + "/warm", p1 = work.path + "/p1", p3 = work.path + "/p3";
    for (auto [dir, flags] : {std::pair<std::string, std::string>{warm, "-pw 2 -p 3"}, {p1, "-p 1"}, {p3, "-p 3"}}) {
        Result r = run(tiny_run(dir, "-x 4 -n 4 " + flags));
        INFO(r.output);
        REQUIRE(r.code == 0);
        if (dir == warm) {
            CHECK(r.output.find("| p 2\n") != std::string::npos);  // step 2's line
            CHECK(r.output.find("p 3, warmed up from 1 over 2 steps") != std::string::npos);  // the model line
        }
    }
    CHECK(read_file(warm + "/log.jsonl").find("\"p_warmup\":2,") != std::string::npos);  // the header record
    CHECK(read_file(p3 + "/log.jsonl").find("p_warmup") == std::string::npos);
    for (int step = 1; step <= 4; step++) CHECK(logged_p(warm + "/log.jsonl", step) == (step < 3 ? step : 3));
    // step 1's forward ran at p = 1: a fixed p = 1 run's loss to the bit, not a p = 3 run's (same
    // initialisation and batch); step 2 is p = 2 on the weights a p = 1 step left, so neither run's
    double w1 = logged_loss(warm + "/log.jsonl", 1), w2 = logged_loss(warm + "/log.jsonl", 2);
    CHECK(w1 == logged_loss(p1 + "/log.jsonl", 1));
    CHECK(w1 != logged_loss(p3 + "/log.jsonl", 1));
    CHECK(w2 != logged_loss(p1 + "/log.jsonl", 2));
    CHECK(w2 != logged_loss(p3 + "/log.jsonl", 2));
    Checkpoint ck;
    checkpoint_read(warm + "/ckpt_00000004.bin", ck);
    CHECK(ck.config.p == 3.0f);
    // refused: with learned p, and for a variant without re-weighting
    check_refused(run(tiny_run(work.path + "/bad", "-x 1 -pw 2 -pl 1 -p 3")), {"-pw 2", "-pl 1"});
    check_refused(run(tiny_run(work.path + "/bad", "-x 1 -pw -1")), {"-pw -1", "p warmup steps"});
}

TEST_CASE("p warmup (-pw) on the CUDA back end (emulated): p logged per step, step 1 trains at p = 1") {
    TempDir work;
    std::string warm = work.path + "/warm", p1 = work.path + "/p1";
    for (auto [dir, flags] : {std::pair<std::string, std::string>{warm, "-pw 2 -p 3"}, {p1, "-p 1"}}) {
        Result r = run(emu_run(dir, "-b 2 -x 3 -n 3 " + flags));
        INFO(r.output);
        REQUIRE(r.code == 0);
        if (dir == warm) CHECK(r.output.find("| p 2\n") != std::string::npos);  // step 2's line
    }
    for (int step = 1; step <= 3; step++) CHECK(logged_p(warm + "/log.jsonl", step) == step);
    // step 1 at p = 1: the loss of a fixed p = 1 run to the bit (same initialisation and batch);
    // step 2 (p = 2) differs from it
    CHECK(logged_loss(warm + "/log.jsonl", 1) == logged_loss(p1 + "/log.jsonl", 1));
    CHECK(logged_loss(warm + "/log.jsonl", 2) != logged_loss(p1 + "/log.jsonl", 2));
    Checkpoint ck;
    checkpoint_read(warm + "/ckpt_00000003.bin", ck);
    CHECK(ck.config.p == 3.0f);
}

TEST_CASE("a MATMUL_BGRAD other than 0 or 1 is refused, naming the value") {
    TempDir work;
    Result r = run("MATMUL_BGRAD=yes " + emu_run(work.path + "/bad", "-b 2 -x 1 -n 1"));
    INFO(r.output);
    CHECK(r.code != 0);
    CHECK(r.output.find("MATMUL_BGRAD=yes") != std::string::npos);
    CHECK(r.output.find("step 1/") == std::string::npos);  // nothing trained
    Result ok = run("MATMUL_BGRAD=0 " + emu_run(work.path + "/ok", "-b 2 -x 1 -n 1"));
    INFO(ok.output);
    CHECK(ok.code == 0);
    CHECK(ok.output.find("step 1/") != std::string::npos);
}

TEST_CASE("2 trainer processes under scripts/launch.sh train like 1 process with the combined batch") {
    // Rank r reads rows [2r, 2r+2) of the 1-process run's 4 (dataloader.h), so the two runs differ
    // only in where bf16 roundings of the gradient sums fall (test_distributed.cu derives this):
    // the step-1 loss is the same mean (fp32 averaging of the ranks' means: 1e-6 relative), and
    // after 3 steps the weights differ from the 1-process run's by a part of how far they moved
    // (AdamW's early steps flip with the sign of noise-level gradients). The yardstick, measured
    // here: 1 process summing the same rows in 2 micro-steps, which moves the same roundings
    // (0.14 of the change). 2 processes must stay within twice that (measured 0.19); a missing
    // or wrong all-reduce gives 0.83-0.90 (test_distributed).
    TempDir one, two, two_zero1;
    Result r1 = run(emu_run(one.path, "-b 4 -x 3 -n 3"));
    INFO(r1.output);
    REQUIRE(r1.code == 0);
    Checkpoint ck1;
    checkpoint_read(one.path + "/ckpt_00000003.bin", ck1);
    std::vector<float> init(ck1.params.size());
    gpt2_init_params(init.data(), ck1.config, 1337);  // the trainer's default seed (-rs)
    // the same rows as 2 micro-steps of 1 process: the same sums, rounded at other places too
    TempDir accum;
    Result ra = run(emu_run(accum.path, "-b 2 -d 64 -x 3 -n 3"));
    INFO(ra.output);
    REQUIRE(ra.code == 0);
    Checkpoint cka;
    checkpoint_read(accum.path + "/ckpt_00000003.bin", cka);
    double rel_accum = relative_rms(cka.params, ck1.params, init);
    MESSAGE("1 process, 2 micro-steps: weight difference / weight change = " << rel_accum);
    CHECK(rel_accum < 0.3);
    for (const TempDir* dir : {&two, &two_zero1}) {
        bool zero1 = dir == &two_zero1;
        CAPTURE(zero1);
        Result r2 = run(launch2(emu_run(dir->path, std::string("-b 2 -x 3 -n 3") + (zero1 ? " -z 1" : ""))));
        INFO(r2.output);
        REQUIRE(r2.code == 0);
        CHECK(r2.output.find(std::string("[rank 0] batch: B 2 x T 16 x 1 accumulation x 2 ranks") +
                             (zero1 ? " (ZeRO-1)" : "") + " = 64 tokens per step") != std::string::npos);
        CHECK(r2.output.find("[rank 1] step") == std::string::npos);  // rank 0 alone prints
        double l1 = logged_loss(one.path + "/log.jsonl", 1), l2 = logged_loss(dir->path + "/log.jsonl", 1);
        CHECK(std::fabs(l1 - l2) <= 1e-6 * l1);
        Checkpoint ck2;
        checkpoint_read(dir->path + "/ckpt_00000003.bin", ck2);
        CHECK(ck2.world_size == 2);
        double rel = relative_rms(ck2.params, ck1.params, init);
        MESSAGE(std::string(zero1 ? "2 processes (ZeRO-1)" : "2 processes") << ": weight difference / weight change = " << rel);
        CHECK(rel < 2 * rel_accum);
        // each rank wrote the moments of its half
        size_t n = ck2.params.size(), covered = 0;
        for (int r = 0; r < 2; r++) {
            OptimizerShard s;
            optimizer_shard_read(optimizer_shard_path(dir->path, 3, r, 2), s, 3, r, 2, n);
            covered += s.end - s.begin;
            double v_sum = 0;
            for (float v : s.v) v_sum += v;
            CHECK(v_sum > 0);  // moments of trained weights, not zeros
        }
        CHECK(covered == n);
    }
}

// Learned p on the CUDA back end: logged and saved as on the CPU back end; 2 ranks under ZeRO-1
// (theta, the last parameters, in rank 1's optimizer shard: rank 0 logs p from its bf16 copy)
// move p as 1 rank with the combined batch does, within what the same rows summed in 2
// micro-steps of 1 process move it by (the yardstick of the test above, for the p values: AdamW
// steps theta by ~lr whatever the size of its gradient, so noise-level differences in that
// gradient show as differences of a step).
TEST_CASE("learned p on the CUDA back end (emulated): logged, saved, and 2 ranks under ZeRO-1 move p as 1 rank") {
    auto trained_p = [](const std::string& dir) {
        Checkpoint ck;
        checkpoint_read(dir + "/ckpt_00000003.bin", ck);
        CHECK(ck.config.learn_p == 1);
        return learned_p_values(ck.config, ck.params.data());
    };
    TempDir one, accum, two;
    Result r1 = run(emu_run(one.path, "-b 4 -x 3 -n 3 -pl 1 -p 3"));
    INFO(r1.output);
    REQUIRE(r1.code == 0);
    CHECK(r1.output.find("p learned per layer and head from 3") != std::string::npos);
    CHECK(r1.output.find("| p mean ") != std::string::npos);
    CHECK(read_file(one.path + "/log.jsonl").find("\"p\":[") != std::string::npos);
    std::vector<double> p1 = trained_p(one.path);
    REQUIRE(p1.size() == 4);  // 2 layers x 2 heads
    double moved = 0;
    for (double v : p1) moved = std::max(moved, std::fabs(v - 3.0));
    CHECK(moved > 1e-3);  // 3 steps of ~lr 3e-3 sigmoid(theta) each
    Result ra = run(emu_run(accum.path, "-b 2 -d 64 -x 3 -n 3 -pl 1 -p 3"));
    INFO(ra.output);
    REQUIRE(ra.code == 0);
    Result r2 = run(launch2(emu_run(two.path, "-b 2 -x 3 -n 3 -pl 1 -p 3 -z 1")));
    INFO(r2.output);
    REQUIRE(r2.code == 0);
    CHECK(r2.output.find("[rank 0] step 3/3") != std::string::npos);
    CHECK(r2.output.find("| p mean ") != std::string::npos);
    std::vector<double> pa = trained_p(accum.path), p2 = trained_p(two.path);
    double d_accum = 0, d_two = 0;
    for (size_t k = 0; k < p1.size(); k++) {
        d_accum = std::max(d_accum, std::fabs(pa[k] - p1[k]));
        d_two = std::max(d_two, std::fabs(p2[k] - p1[k]));
    }
    MESSAGE("learned p after 3 steps, largest move " << moved << "; largest difference from 1 process: 2 micro-steps "
                                                     << d_accum << ", 2 ranks (ZeRO-1) " << d_two);
    // the yardstick is the same rows summed in another order; the floor, theta's fp32 rounding
    CHECK(d_two <= 2 * d_accum + 1e-6 * 3.0);
}

TEST_CASE("a 2-process run resumes bit for bit on 2 processes and refuses 1") {
    setenv("SIMT_THREADS", "1", 1);  // a fixed order of the attention backward's fp32 atomics
    for (const char* zero1 : {"", " -z 1"}) {
        CAPTURE(zero1);
        TempDir a, b;
        const std::string flags = std::string("-b 2 -x 4 -n 2") + zero1;
        Result ra = run(launch2(emu_run(a.path, flags)));
        INFO(ra.output);
        REQUIRE(ra.code == 0);
        Result rb1 = run(launch2(emu_run(b.path, flags + " -xi 2")));
        INFO(rb1.output);
        REQUIRE(rb1.code == 0);
        Result alone = run(emu_run(b.path, std::string("-b 4 -x 4 -n 2 -y 1") + zero1));
        check_refused(alone, {b.path + "/ckpt_00000002.bin", "trained on 2 rank(s), this launch has 1", "resume with 2"});
        Result rb2 = run(launch2(emu_run(b.path, flags + " -y 1")));
        INFO(rb2.output);
        REQUIRE(rb2.code == 0);
        CHECK(rb2.output.find("[rank 0] resumed from " + b.path + "/ckpt_00000002.bin at step 2") != std::string::npos);
        std::string model_a = read_file(a.path + "/ckpt_00000004.bin");
        REQUIRE(model_a.size() > CHECKPOINT_HEADER_BYTES);
        CHECK(model_a == read_file(b.path + "/ckpt_00000004.bin"));
        for (int r = 0; r < 2; r++)
            CHECK(read_file(optimizer_shard_path(a.path, 4, r, 2)) == read_file(optimizer_shard_path(b.path, 4, r, 2)));
        CHECK(loss_records(a.path + "/log.jsonl") == loss_records(b.path + "/log.jsonl"));
    }
    unsetenv("SIMT_THREADS");
}

// Two trainer ranks started by hand (no launch.sh, which would stop the survivor itself), meeting
// over TCP (DIST_RENDEZVOUS) on a port that was just free. Once rank 0 has printed step 2, rank 1
// gets `sig`; rank 0's output, exit status and seconds from the signal to its exit come back.
struct SignalledRun {
    std::string output;
    int status = 0;
    double seconds = 0;
};

static SignalledRun signal_rank1_mid_run(int sig, const std::string& timeout_s) {
    TempDir out;
    int port = rendezvous_tcp_port(rendezvous_tcp_listen(0));
    std::string env = "WORLD_SIZE=2 DIST_RUN_ID=signaltest DIST_RENDEZVOUS=tcp://127.0.0.1:" + std::to_string(port) +
                      " DIST_TIMEOUT_S=" + timeout_s + " ";  // the emulated trainer's host NCCL follows it
    std::string rank1 = env + "RANK=1 LOCAL_RANK=1 " + emu_run(out.path, "-b 2 -x 100000") + " > /dev/null 2>&1 & echo $!";
    Result started = run(rank1);
    REQUIRE(started.code == 0);
    pid_t pid1 = (pid_t)atol(started.output.c_str());
    REQUIRE(pid1 > 0);
    FILE* rank0 = popen((env + "RANK=0 LOCAL_RANK=0 " + emu_run(out.path, "-b 2 -x 100000") + " 2>&1").c_str(), "r");
    REQUIRE(rank0 != nullptr);
    SignalledRun r;
    char line[1024];
    bool signalled = false;
    auto t_signal = std::chrono::steady_clock::now();
    while (fgets(line, sizeof line, rank0)) {
        r.output += line;
        int step = 0;
        if (!signalled && sscanf(line, "step %d/", &step) == 1 && step >= 2) {
            REQUIRE(kill(pid1, sig) == 0);
            t_signal = std::chrono::steady_clock::now();
            signalled = true;
        }
    }
    r.status = pclose(rank0);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_signal).count();
    kill(pid1, SIGKILL);  // a stopped rank 1 is still there
    REQUIRE(signalled);
    return r;
}

TEST_CASE("trainer processes meet over TCP; one killed mid-run makes the other exit with an error at once") {
    // the closed connection is noticed at once: far within the 30 s watchdog
    SignalledRun r = signal_rank1_mid_run(SIGKILL, "30");
    INFO(r.output);
    CHECK(WIFEXITED(r.status));
    CHECK(WEXITSTATUS(r.status) != 0);
    CHECK(r.seconds < 10);
    CHECK(r.output.find("data parallel: 2 ranks, run signaltest, met through tcp://127.0.0.1:") != std::string::npos);
    CHECK(r.output.find("rank 1 of 2 closed its connection") != std::string::npos);
    CHECK(r.output.find("error:") != std::string::npos);
    MESSAGE("rank 0 exited " << r.seconds << " s after rank 1 was killed");
}

TEST_CASE("a trainer process that stops (SIGSTOP) makes the other exit when DIST_TIMEOUT_S runs out") {
    // rank 1 stays connected but never joins the next collective: only the watchdog can end the
    // wait. DIST_TIMEOUT_S = 2: rank 0 must exit after about 2 s (at least 2, at most 2 + the step
    // rank 0 may still be in and its exit, given 8 s).
    SignalledRun r = signal_rank1_mid_run(SIGSTOP, "2");
    INFO(r.output);
    CHECK(WIFEXITED(r.status));
    CHECK(WEXITSTATUS(r.status) != 0);
    CHECK(r.seconds >= 2);
    CHECK(r.seconds < 10);
    CHECK(r.output.find("timed out after 2 s") != std::string::npos);
    CHECK(r.output.find("error:") != std::string::npos);
    MESSAGE("rank 0 exited " << r.seconds << " s after rank 1 was stopped");
}

TEST_CASE("two launch.sh 'nodes' of one rank each meet over TCP and train exactly like launch.sh -n 2") {
    // scripts/launch.sh --nnodes 2 --node-rank K on one machine stands in for two machines: node 0
    // runs rank 0, node 1 rank 1, both told rank 0's address and the run id. Same ranks, same rows,
    // so with one emulator thread the checkpoint is bit for bit the single launch's.
    setenv("SIMT_THREADS", "1", 1);
    TempDir single, nodes;
    const std::string flags = "-b 2 -x 2 -n 2";
    Result rs = run(launch2(emu_run(single.path, flags)));
    INFO(rs.output);
    REQUIRE(rs.code == 0);
    int port = rendezvous_tcp_port(rendezvous_tcp_listen(0));
    auto node = [&](int k) {
        return "scripts/launch.sh -n 1 --nnodes 2 --node-rank " + std::to_string(k) + " --rendezvous tcp://127.0.0.1:" +
               std::to_string(port) + " --run-id twonodes" + std::to_string(getpid()) + " " + emu_run(nodes.path, flags);
    };
    std::string script = nodes.path + "/two_nodes.sh";
    write_file(script, node(1) + " > " + nodes.path + "/node1.txt 2>&1 &\n" + node(0) + "\nrc0=$?\nwait $!\nrc1=$?\n" +
                           "cat " + nodes.path + "/node1.txt\nexit $((rc0 | rc1))\n");
    Result rn = run("bash " + script);
    INFO(rn.output);
    REQUIRE(rn.code == 0);
    CHECK(rn.output.find("[rank 0] data parallel: 2 ranks, run twonodes") != std::string::npos);
    CHECK(rn.output.find("met through tcp://127.0.0.1:" + std::to_string(port)) != std::string::npos);
    std::string model = read_file(single.path + "/ckpt_00000002.bin");
    REQUIRE(model.size() > CHECKPOINT_HEADER_BYTES);
    CHECK(model == read_file(nodes.path + "/ckpt_00000002.bin"));
    for (int r = 0; r < 2; r++)
        CHECK(read_file(optimizer_shard_path(single.path, 2, r, 2)) == read_file(optimizer_shard_path(nodes.path, 2, r, 2)));
    // a node without the run id is refused before anything starts
    Result bad = run("scripts/launch.sh -n 1 --nnodes 2 --node-rank 1 --rendezvous tcp://127.0.0.1:1 true");
    CHECK(bad.code == 2);
    CHECK(bad.output.find("--nnodes 2 needs --run-id") != std::string::npos);
    unsetenv("SIMT_THREADS");
}

// What llm.c's launchers give each process, played by scripts (no MPI or PyTorch needed): the
// trainer must take its rank from them and train exactly as under scripts/launch.sh -n 2 (which the
// test above holds against 1 process with the combined batch: 2 processes cannot be bitwise 1, the
// bf16 roundings of the gradient sums fall elsewhere).
//   mpirun -np 2       one node: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE; the ranks meet
//                      through the file in /tmp, the run named after their parent (mpirun)
//   torchrun, 2 nodes  of 1 rank: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE 1, MASTER_ADDR,
//                      MASTER_PORT, TORCHELASTIC_RUN_ID; the test holds MASTER_PORT as torchrun's
//                      agent does (its static rendezvous), so rank 0 serves the id on the port above
TEST_CASE("the trainer under a fake mpirun and a fake torchrun trains bit for bit as under launch.sh -n 2") {
    setenv("SIMT_THREADS", "1", 1);
    TempDir reference, scripts, mpi, torch;
    const std::string flags = "-b 2 -x 2 -n 2";
    Result rr = run(launch2(emu_run(reference.path, flags)));
    INFO(rr.output);
    REQUIRE(rr.code == 0);
    auto same_as_reference = [&](const std::string& dir) {
        std::string model = read_file(reference.path + "/ckpt_00000002.bin");
        REQUIRE(model.size() > CHECKPOINT_HEADER_BYTES);
        CHECK(model == read_file(dir + "/ckpt_00000002.bin"));
        for (int r = 0; r < 2; r++)
            CHECK(read_file(optimizer_shard_path(reference.path, 2, r, 2)) == read_file(optimizer_shard_path(dir, 2, r, 2)));
    };
    // every rank in the background, each with its variables; the outputs in rank order, then the worst status
    auto launcher = [&](const std::string& name, const std::string& vars) {
        std::string path = scripts.path + "/" + name;
        write_file(path, "n=$1; shift\nfor r in $(seq 0 $((n - 1))); do\n  " + vars + " \"$@\" > " + scripts.path +
                             "/" + name + ".$r.txt 2>&1 &\ndone\nrc=0\nfor p in $(jobs -p); do wait $p || rc=1; done\n"
                             "cat " + scripts.path + "/" + name + ".*.txt\nexit $rc\n");
        return "bash " + path + " 2 ";
    };
    {  // mpirun -np 2
        std::string mpirun = launcher("mpirun", "OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n "
                                                "OMPI_COMM_WORLD_LOCAL_RANK=$r OMPI_COMM_WORLD_LOCAL_SIZE=$n");
        Result r = run(mpirun + emu_run(mpi.path, flags));
        INFO(r.output);
        REQUIRE(r.code == 0);
        CHECK(r.output.find("data parallel: 2 ranks, run mpirun_") != std::string::npos);
        CHECK(r.output.find("met through /tmp/nccl_id_mpirun_") != std::string::npos);
        CHECK(r.output.find("(ranks from Open MPI's mpirun)") != std::string::npos);
        same_as_reference(mpi.path);
        // the CPU trainer is one process: under mpirun it refuses instead of training twice
        Result cpu = run(mpirun + std::string(TRAINER) + " -x 1");
        CHECK(cpu.code != 0);
        CHECK(cpu.output.find("OMPI_COMM_WORLD_SIZE=2: the CPU trainer runs as one process") != std::string::npos);
    }
    {  // torchrun over 2 nodes of 1 rank, MASTER_PORT held by its agent
        RendezvousSocket agent_store;  // a listening port whose next one is free
        int port = 0;
        for (int attempt = 0; attempt < 20 && port == 0; attempt++) {
            agent_store = rendezvous_tcp_listen(0);
            int p = rendezvous_tcp_port(agent_store);
            try {
                if (p < 65535) rendezvous_tcp_listen(p + 1), port = p;
            } catch (const std::exception&) {
            }
        }
        REQUIRE(port != 0);
        std::string torchrun = launcher("torchrun", "RANK=$r WORLD_SIZE=$n LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$r "
                                                    "TORCHELASTIC_RUN_ID=none TORCHELASTIC_RESTART_COUNT=0 "
                                                    "TORCHELASTIC_USE_AGENT_STORE=True MASTER_ADDR=127.0.0.1 "
                                                    "MASTER_PORT=" + std::to_string(port));
        Result r = run(torchrun + emu_run(torch.path, flags));
        INFO(r.output);
        REQUIRE(r.code == 0);
        CHECK(r.output.find("met through tcp://127.0.0.1:" + std::to_string(port + 1)) != std::string::npos);
        CHECK(r.output.find("ranks from torchrun") != std::string::npos);
        same_as_reference(torch.path);
    }
    unsetenv("SIMT_THREADS");
}

TEST_CASE("a rank that cannot write its optimizer shard stops every rank, and no model file claims the step") {
    // A directory where rank 1's temporary shard file must go makes its write fail (EISDIR); the
    // ranks agree on it before rank 0 writes the model file, so all of them stop, naming it, and
    // the step's checkpoint is never listed.
    // (The ranks are started by hand: launch.sh would stop rank 0 itself once rank 1 has failed.)
    TempDir out;
    std::string blocker = optimizer_shard_path(out.path, 2, 1, 2) + ".tmp";
    REQUIRE(mkdir(blocker.c_str(), 0755) == 0);
    int port = rendezvous_tcp_port(rendezvous_tcp_listen(0));
    std::string env = "WORLD_SIZE=2 DIST_RUN_ID=shardfail DIST_TIMEOUT_S=30 DIST_RENDEZVOUS=tcp://127.0.0.1:" +
                      std::to_string(port) + " ";
    std::string script = out.path + "/two_ranks.sh", log1 = out.path + "/rank1.txt";
    write_file(script, env + "RANK=1 LOCAL_RANK=1 " + emu_run(out.path, "-b 2 -x 4 -n 2") + " > " + log1 +
                           " 2>&1 &\n" + env + "RANK=0 LOCAL_RANK=0 " + emu_run(out.path, "-b 2 -x 4 -n 2") +
                           "\nrc0=$?\nwait $!\nrc1=$?\necho \"rank 1 said:\"\ncat " + log1 +
                           "\n[ $rc0 != 0 ] && [ $rc1 != 0 ]\n");
    Result r = run("bash " + script);
    INFO(r.output);
    CHECK(r.code == 0);  // both ranks exited non-zero
    CHECK(r.output.find("error: checkpoint " + blocker) != std::string::npos);
    CHECK(r.output.find("error: another rank could not write its optimizer shard of step 2") != std::string::npos);
    CHECK(r.output.find("No earlier checkpoint of this run.") != std::string::npos);
    CHECK(checkpoint_steps(out.path).empty());
    CHECK(!exists(optimizer_shard_path(out.path, 2, 0, 2)));  // rank 0 took its own shard back
    rmdir(blocker.c_str());
}

// ----------------------------------------------------------------------------
// the run directory: ownership, the lock, orphans; checksummed headers; the messages that must say
// exactly what is wrong

TEST_CASE("a run directory belongs to one run: a new run refuses it, -y 1 resumes only its own run, -ow 1 starts over") {
    TempDir dir, other_data;
    Result r = run(tiny_run(dir.path, "-x 4 -n 2 -v 0 -s 0"));
    INFO(r.output);
    REQUIRE(r.code == 0);
    std::string ck2 = dir.path + "/ckpt_00000002.bin", ck4 = dir.path + "/ckpt_00000004.bin";
    // a new run (no -y) in it: refused, naming the checkpoints and the flags
    Result fresh = run(tiny_run(dir.path, "-x 4 -n 2 -v 0 -s 0 -l 1e-3"));
    check_refused(fresh, {"-o " + dir.path + " holds checkpoints", ck2, ck4, "-y 1", "-ow 1"});
    CHECK(read_file(ck4).size() > CHECKPOINT_HEADER_BYTES);
    // -y 1 of another run: another seed, other training data
    check_refused(run(tiny_run(dir.path, "-x 6 -n 2 -v 0 -s 0 -y 1 -rs 7")),
                  {"checkpoint " + ck4 + " belongs to another run", "seed 1337", "-rs is 7"});
    std::vector<uint16_t> tokens(11000);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (uint16_t)(i % 500);
    write_shard(other_data.path + "/train_000000.bin", tokens.data(), tokens.size());
    std::string cmd = tiny_run(dir.path, "-x 6 -n 2 -v 0 -s 0 -y 1");
    cmd.replace(cmd.find(data_dir() + "/train_*.bin"), (data_dir() + "/train_*.bin").size(), other_data.path + "/train_*.bin");
    check_refused(run(cmd), {ck4 + " belongs to another run", "other training data"});
    // its own run resumes
    Result own = run(tiny_run(dir.path, "-x 6 -n 2 -v 0 -s 0 -y 1"));
    INFO(own.output);
    CHECK(own.code == 0);
    CHECK(own.output.find("resumed from " + ck4) != std::string::npos);
    // -ow 1: starts over, the old checkpoints gone
    Result over = run(tiny_run(dir.path, "-x 2 -n 2 -v 0 -s 0 -ow 1 -rs 7"));
    INFO(over.output);
    CHECK(over.code == 0);
    CHECK(checkpoint_steps(dir.path) == std::vector<int64_t>{2});
    Checkpoint ck;
    checkpoint_read(ck2, ck);
    CHECK(ck.run.seed == 7);
    check_refused(run(tiny_run(dir.path, "-x 2 -y 1 -ow 1")), {"-y 1 -ow 1"});
}

TEST_CASE("the output dir is locked: a second trainer is refused with the holder's pid; a killed holder does not block") {
    TempDir dir;
    int pipe_fd[2];
    REQUIRE(pipe(pipe_fd) == 0);
    pid_t holder = fork();
    REQUIRE(holder >= 0);
    if (holder == 0) {  // a process that holds the lock, as a running trainer does
        std::string err = run_dir_lock(dir.path);
        if (write(pipe_fd[1], err.empty() ? "1" : "0", 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    REQUIRE(read(pipe_fd[0], &ok, 1) == 1);
    REQUIRE(ok == '1');
    Result second = run(tiny_run(dir.path, "-x 2 -n 2 -v 0 -s 0"));
    check_refused(second, {"another trainer (pid " + std::to_string(holder) + ")", dir.path + "/trainer.lock"});
    CHECK(checkpoint_steps(dir.path).empty());
    kill(holder, SIGKILL);  // the kernel drops its lock; the lock file stays, naming a dead pid
    waitpid(holder, nullptr, 0);
    REQUIRE(exists(dir.path + "/trainer.lock"));
    Result after = run(tiny_run(dir.path, "-x 2 -n 2 -v 0 -s 0"));
    INFO(after.output);
    CHECK(after.code == 0);
    CHECK(checkpoint_steps(dir.path) == std::vector<int64_t>{2});
    close(pipe_fd[0]);
    close(pipe_fd[1]);
}

TEST_CASE("orphan optimizer shards of this run and temp files are removed on start; another run's are left") {
    TempDir dir;
    Result r = run(tiny_run(dir.path, "-x 6 -n 2 -xi 4 -v 0 -s 0"));
    INFO(r.output);
    REQUIRE(r.code == 0);
    // a kill during -nk's cleanup: ckpt_2's model file removed, its shard not; a kill while writing
    // step 6: its shard written, its model file not, and a temp file
    std::string orphan2 = optimizer_shard_path(dir.path, 2, 0, 1), orphan6 = optimizer_shard_path(dir.path, 6, 0, 1);
    REQUIRE(unlink((dir.path + "/ckpt_00000002.bin").c_str()) == 0);
    write_file(orphan6, read_file(optimizer_shard_path(dir.path, 4, 0, 1)));
    write_file(dir.path + "/ckpt_00000006.bin.tmp", "partial");
    // and an orphan of another run (another seed in its header)
    OptimizerShard foreign;
    foreign.step = 3;
    foreign.run.seed = 99;
    foreign.num_parameters = 4;
    foreign.end = 4;
    foreign.m.assign(4, 0.0f);
    foreign.v.assign(4, 0.0f);
    std::string foreign_path = optimizer_shard_path(dir.path, 3, 0, 1);
    optimizer_shard_write(foreign_path, foreign);
    Result resumed = run(tiny_run(dir.path, "-x 6 -n 2 -v 0 -s 0 -y 1"));
    INFO(resumed.output);
    CHECK(resumed.code == 0);
    CHECK(resumed.output.find("removed " + orphan2) != std::string::npos);
    CHECK(!exists(orphan2));
    CHECK(!exists(dir.path + "/ckpt_00000006.bin.tmp"));
    CHECK(exists(foreign_path));
    CHECK(resumed.output.find("orphan optimizer shard " + foreign_path + " of another run") != std::string::npos);
    CHECK(checkpoint_steps(dir.path) == std::vector<int64_t>{4, 6});
    CHECK(exists(orphan6));  // rewritten by this run's step 6
}

// the byte at offset of path, xor-ed with mask (in place)
static void flip_byte(const std::string& path, size_t offset, uint8_t mask) {
    int fd = open(path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t b;
    REQUIRE(pread(fd, &b, 1, (off_t)offset) == 1);
    b ^= mask;
    REQUIRE(pwrite(fd, &b, 1, (off_t)offset) == 1);
    close(fd);
}

TEST_CASE("any flipped byte of a checkpoint's header, model file or optimizer shard, is refused; version 2 files still load") {
    GoodCheckpoint good;
    TempDir work;
    std::string model = work.path + "/ckpt_00000002.bin", shard = optimizer_shard_path(work.path, 2, 0, 1);
    write_file(model, read_file(good.path));
    write_file(shard, read_file(optimizer_shard_path(good.dir.path, 2, 0, 1)));
    Checkpoint ck;
    OptimizerShard os;
    checkpoint_read(model, ck);
    optimizer_shard_read(shard, os, 2, 0, 1, ck.params.size());
    auto model_refused = [&]() {
        try { Checkpoint c; checkpoint_read(model, c); } catch (const std::runtime_error&) { return true; }
        return false;
    };
    auto shard_refused = [&]() {
        try { OptimizerShard s; optimizer_shard_read(shard, s, 2, 0, 1, ck.params.size()); } catch (const std::runtime_error&) { return true; }
        return false;
    };
    // every byte of both headers, each of two bit patterns (lowest bit, all bits), one at a time
    int accepted = 0;
    for (uint8_t mask : {0x01, 0xff}) {
        for (size_t i = 0; i < CHECKPOINT_HEADER_BYTES; i++) {
            flip_byte(model, i, mask);
            if (!model_refused() && accepted++ < 5) MESSAGE("model file header byte " << i << " flipped was accepted");
            flip_byte(model, i, mask);
        }
        for (size_t i = 0; i < OPTIMIZER_SHARD_HEADER_BYTES; i++) {
            flip_byte(shard, i, mask);
            if (!shard_refused() && accepted++ < 5) MESSAGE("shard header byte " << i << " flipped was accepted");
            flip_byte(shard, i, mask);
        }
    }
    CHECK(accepted == 0);
    // the payloads: 400 bytes spread over each (every byte would take minutes; the checksum, FNV-1a
    // over 8-byte words, changes for any changed word: every step of it is a bijection)
    size_t model_payload = ck.params.size() * 4, shard_payload = 2 * os.m.size() * 4;
    for (int k = 0; k < 400; k++) {
        size_t i = CHECKPOINT_HEADER_BYTES + (size_t)k * (model_payload - 1) / 399;
        flip_byte(model, i, 0x01);
        if (!model_refused()) { accepted++; MESSAGE("model payload byte " << i); }
        flip_byte(model, i, 0x01);
        size_t j = OPTIMIZER_SHARD_HEADER_BYTES + (size_t)k * (shard_payload - 1) / 399;
        flip_byte(shard, j, 0x01);
        if (!shard_refused()) { accepted++; MESSAGE("shard payload byte " << j); }
        flip_byte(shard, j, 0x01);
    }
    CHECK(accepted == 0);
    CHECK(!model_refused());
    CHECK(!shard_refused());
    // version 2 (no identity, no header checksum, zeros there) still loads, with the same weights;
    // a version 3 header with its version changed to 2 does not
    std::string v2 = read_file(model);
    uint32_t two = 2;
    memcpy(&v2[4], &two, 4);
    std::string v3_as_v2 = v2;
    memset(&v2[offsetof(CheckpointHeader, run_seed)], 0, CHECKPOINT_HEADER_BYTES - offsetof(CheckpointHeader, run_seed));
    write_file(model, v2);
    Checkpoint old;
    checkpoint_read(model, old);
    CHECK(old.params == ck.params);
    CHECK(old.train.step == 2);
    CHECK(!old.run.known());
    write_file(model, v3_as_v2);
    CHECK(model_refused());
}

TEST_CASE("messages say exactly what is wrong: values, flags, the file, the way back") {
    GoodCheckpoint good;
    TempDir work;
    const std::string d = data_dir();
    const std::string base = std::string(TRAINER) + " -i " + d + "/train_*.bin -j '' -b 4 -t 16 -x 1 -v 0 -s 0 ";
    SUBCASE("values that differ past %g's 6 digits are printed exactly") {
        check_refused(run(base + "-e " + good.path + " -p 15.000001"), {"p = 15, this run asks for p = 15.000001"});
        check_refused(run(base + "-e " + good.path + " -rb 10000.001"), {"rope_base = 10000, this run asks for 10000.001"});
    }
    SUBCASE("a directory given as a checkpoint") {
        check_refused(run(base + "-e " + good.dir.path), {good.dir.path + ": is a directory, not a checkpoint file"});
        check_refused(run(std::string(LVL_TOOL) + " -e " + good.dir.path), {"is a directory"});
    }
    SUBCASE("a failed rename names its target") {
        std::string target = work.path + "/ckpt_00000009.bin";
        REQUIRE(system(("mkdir -p " + target + "/x").c_str()) == 0);  // a non-empty folder: rename fails
        Checkpoint ck;
        checkpoint_read(good.path, ck);
        std::string msg;
        try { checkpoint_write(target, ck); } catch (const std::runtime_error& e) { msg = e.what(); }
        CHECK(msg.find("renaming " + target + ".tmp to " + target + " failed") != std::string::npos);
        CHECK(!exists(target + ".tmp"));
    }
    SUBCASE("an unknown flag as the last argument is an unknown flag") {
        check_refused(run(base + "-e d2c32h2v512 --foo"), {"unknown flag --foo"});
        check_refused(run(base + "-e d2c32h2v512 -b"), {"-b: missing value"});
        check_refused(run(std::string(LVL_TOOL) + " -e " + good.path + " --foo"), {"unknown flag --foo"});
    }
    SUBCASE("explicit zero fields of -e are refused, not defaulted") {
        check_refused(run(base + "-e d2c32h0v512"), {"-e d2c32h0v512", "heads (h) = 0"});
        check_refused(run(base + "-e d2c32h2v0"), {"vocabulary (v) = 0"});
        check_refused(run(base + "-e d2c0"), {"channels (c) = 0"});
        check_refused(run(base + "-e d40000000"), {"layers (d) = 40000000", "[1, 1024]"});
    }
    SUBCASE("a -j glob matching nothing names -j and the validation set") {
        check_refused(run(std::string(TRAINER) + " -i " + d + "/train_*.bin -j " + d + "/nothing_*.bin -e d2c32h2v512 "
                          "-b 4 -t 16 -x 1 -s 0"),
                      {"-j " + d + "/nothing_*.bin (the validation shards)"});
    }
    SUBCASE("a run that cannot fit in memory is refused before allocating, with the sizes") {
        check_refused(run(base + "-e d200"), {"-e d200 -b 4 -t 16: the run needs at least", "TiB", "available",
                                             "MemAvailable"});
        // the CUDA back end names what it allocates, by its own count (bf16 activations)
        check_refused(run(std::string(EMU_TRAINER) + " -i " + d + "/train_*.bin -j '' -e d200 -b 4 -t 16 -x 1 -s 0"),
                      {"-e d200 -b 4 -t 16: the run allocates", "fp32 master weights and AdamW moments",
                       "bf16 activations and gradient buffers of one micro-batch: ", "available"});
        // -b 1048576 x -t 1024 is 4 GiB of token ids per buffer: the data is checked first, under a
        // 4 GiB address-space limit that the old order (allocate, then check) would hit
        Result r = run("bash -c 'ulimit -v 4000000; exec " + std::string(TRAINER) + " -i " + d +
                       "/train_*.bin -j \"\" -e d2c32h2v512 -b 1048576 -t 1024 -x 1 -v 0 -s 0'");
        check_refused(r, {"(the training shards)", "fewer than one step of world*B = 1048576 windows"});
        CHECK(r.output.find("bad_alloc") == std::string::npos);
    }
    SUBCASE("a corrupt newest checkpoint on resume: how to fall back to the previous one") {
        std::string dir = work.path + "/run";
        Result r = run(tiny_run(dir, "-x 4 -n 2 -v 0 -s 0"));
        REQUIRE(r.code == 0);
        flip_byte(dir + "/ckpt_00000004.bin", CHECKPOINT_HEADER_BYTES + 5, 0x40);
        check_refused(run(tiny_run(dir, "-x 6 -n 2 -v 0 -s 0 -y 1")),
                      {dir + "/ckpt_00000004.bin", "checksum", "previous checkpoint " + dir + "/ckpt_00000002.bin",
                       "mv " + dir + "/ckpt_00000004*"});
        REQUIRE(system(("mkdir " + work.path + "/aside && mv " + dir + "/ckpt_00000004* " + work.path + "/aside/").c_str()) == 0);
        Result back = run(tiny_run(dir, "-x 6 -n 2 -v 0 -s 0 -y 1"));
        INFO(back.output);
        CHECK(back.code == 0);
        CHECK(back.output.find("resumed from " + dir + "/ckpt_00000002.bin") != std::string::npos);
    }
}

TEST_CASE("loss_vs_length: list flags refuse empty, malformed and huge values; -n and -o are checked exactly") {
    GoodCheckpoint good;
    const std::string d = data_dir();
    const std::string tool = std::string(LVL_TOOL) + " -e " + good.path + " -j " + d + "/val_*.bin ";
    for (const char* bad : {"''", "','", "1,,2", "1,", "a", "2x", "-1", "0", "99999999999999999999", "1,2,3,4,5,6,7,8,9,10,"
                            "11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33"}) {
        CAPTURE(bad);
        check_refused(run(tool + "-l " + bad), {"-l '"});
    }
    check_refused(run(tool + "-l 2000000"), {"-l: 2000000 x -t 16", "exceeds"});
    // -n 5: fewer tokens than the lengths need; the message is about -n, not the shards' size
    Result n5 = run(tool + "-l 1,2 -n 5");
    check_refused(n5, {"-n 5: fewer tokens than the 32 the lengths need", "raise -n to at least 32"});
    CHECK(n5.output.find("hold 6 tokens") == std::string::npos);
    // -o unwritable: refused before scoring
    Result o = run(tool + "-l 1,2 -o /nonexistent/lvl.csv");
    check_refused(o, {"-o /nonexistent/lvl.csv", "cannot write"});
    CHECK(o.output.find("scoring") == std::string::npos);
}
