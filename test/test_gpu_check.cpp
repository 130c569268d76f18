// The prepared GPU check (scripts/gpu_check.sh) without a GPU: its plan (the steps' budgets against
// the total, the binaries make gpu-check-build puts in the folder, the test filters against the
// test sources), the size check of what a device run carries, and the accounting of a run: a
// stub nvidia-smi and stub binaries (shell scripts) stand in for the GPU and the prebuilt folder,
// so that steps pass, fail, are cut by the clock, are not reached, or are skipped (compute-
// sanitizer refusing the device, one GPU for the data-parallel step); a missing prebuilt folder is
// refused at once, compute-sanitizer is found inside a folder of that name, and a step's cut stops
// a process in a process group of its own (the trainer under the trainer step's inner timeout).
#include <doctest/doctest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "test/run_command.h"
#include "test/temp_dir.h"

namespace {

// The binaries make gpu-check-build copies into the folder: GPU_CHECK_TESTS and GPU_CHECK_TOOLS of
// scripts/scripts.mk (their file names), and the shard writer.
std::vector<std::string> folder_binaries() {
    std::string mk = read_file("scripts/scripts.mk");
    REQUIRE(!mk.empty());
    std::vector<std::string> names{"write_random_shard"};
    for (const char* var : {"GPU_CHECK_TESTS :=", "GPU_CHECK_TOOLS :="}) {
        size_t at = mk.find(var);
        REQUIRE(at != std::string::npos);
        std::string value;
        for (size_t i = at + strlen(var); i < mk.size(); i++) {  // the value, with its continuation lines
            if (mk[i] == '\\' && i + 1 < mk.size() && mk[i + 1] == '\n') { i++; continue; }
            if (mk[i] == '\n') break;
            value += mk[i];
        }
        std::istringstream words(value);
        for (std::string w; words >> w;) names.push_back(w.substr(w.rfind('/') + 1));
    }
    return names;
}

void write_script(const std::string& path, const std::string& body) {
    write_file(path, "#!/bin/bash\n" + body);
    REQUIRE(chmod(path.c_str(), 0755) == 0);
}

// A prebuilt folder of stubs: tests print doctest's last line, the trainers step lines, and the
// stub named by fail exits 2, the one named by slow sleeps 60 s first.
void write_stub_folder(const std::string& dir, const std::string& fail = "", const std::string& slow = "") {
    for (const std::string& b : folder_binaries()) {
        std::string body;
        // STUB_PID_FILE: a trainer writes its pid there first (it runs under the step's inner timeout)
        if (b.rfind("train_gpt2cu_", 0) == 0) body += "[ -n \"${STUB_PID_FILE:-}\" ] && echo $$ > \"$STUB_PID_FILE\"\n";
        if (b == fail) body += "echo 'ERROR: the stub fails'; exit 2\n";
        if (b == slow) body += "sleep 60\n";
        if (b.rfind("train_gpt2cu_", 0) == 0) {
            body += "for s in 1 2 3 4 5 6 7 8; do echo \"step  $s/20 | loss 10.9 | norm 1.2 | lr 3.00e-04 | 61.2 ms | "
                    "267712 tok/s | MFU 38.1% | ETA 0m02s\"; done\n";
        } else if (b.rfind("gradcheck_cu_", 0) == 0) {  // the precision it was asked for, as the tool prints it
            body += "case \" $* \" in *' -f 64 '*) f=64 ;; *) f=32 ;; esac\n"
                    "echo \"gradcheck: stub attention; CPU in float$f\"\n";
        } else if (b == "write_random_shard") {
            body += "echo x > \"$1\"\n";
        } else {
            body += "echo '[doctest] test cases: 3 | 3 passed | 0 failed | 0 skipped'\n";
        }
        write_script(dir + "/" + b, body);
    }
}

// compute-sanitizer's answer to --version
const std::string SANITIZER_VERSION =
    "[ \"$1\" = --version ] && { echo 'NVIDIA (R) Compute Sanitizer'; echo 'Version 2025.3.0.0 (stub)'; exit 0; }\n";

// A PATH folder with a stub nvidia-smi (one H200) and a compute-sanitizer that refuses the device.
void write_stub_tools(const std::string& dir) {
    write_script(dir + "/nvidia-smi", "if [ \"$1\" = -L ]; then echo 'GPU 0: NVIDIA H200 (UUID: GPU-stub)'; "
                                      "else echo 'NVIDIA H200, 0.0, 143771 MiB, 1980 MHz'; fi\n");
    write_script(dir + "/compute-sanitizer", SANITIZER_VERSION +
                 "echo '========= Error: Device not supported. Please refer to the documentation'; exit 1\n");
}

int count_files(const std::string& dir) {
    Result r = run("find '" + dir + "' -type f | wc -l");
    return std::stoi(r.output);
}

}  // namespace

TEST_CASE("gpu_check --plan: the budgets add up to the total, every binary and test filter exists") {
    TempDir folder("gpu_check_plan");
    write_stub_folder(folder.path);
    Result ok = run("bash scripts/gpu_check.sh --plan --prebuilt " + folder.path);
    INFO(ok.output);
    CHECK(ok.code == 0);
    CHECK(ok.output.find("sum of the budgets: 360 s of TOTAL_S = 360 s") != std::string::npos);
    CHECK(ok.output.find("gpu_check plan: OK") != std::string::npos);
    // the order of value: the trainer first, the sanitizers last
    CHECK(ok.output.find("trainer_speed") < ok.output.find("gradcheck_lssar_d12"));
    CHECK(ok.output.find("test_attention_cuda") < ok.output.find("attention_bench"));
    CHECK(ok.output.find("attention_bench") < ok.output.find("memcheck_attention"));

    Result over = run("TOTAL_S=300 bash scripts/gpu_check.sh --plan --prebuilt " + folder.path);
    CHECK(over.code == 1);
    CHECK(over.output.find("the budgets add up to 360 s, more than TOTAL_S = 300 s") != std::string::npos);

    REQUIRE(remove((folder.path + "/gradcheck_cu_lssar").c_str()) == 0);
    Result missing = run("bash scripts/gpu_check.sh --plan --prebuilt " + folder.path);
    CHECK(missing.code == 1);
    CHECK(missing.output.find("missing in " + folder.path + ": gradcheck_cu_lssar") != std::string::npos);
}

TEST_CASE("gpu_check --carry: the folder and the working tree within 56 MiB, the run command printed") {
    TempDir outside("gpu_check_carry");
    Result refused = run("bash scripts/gpu_check.sh --carry " + outside.path);
    CHECK(refused.code == 1);
    CHECK(refused.output.find("outside the repository") != std::string::npos);

    const std::string dir = "build/test_gpu_check_carry";
    REQUIRE(run("rm -rf " + dir + " && mkdir -p " + dir + " && echo x > " + dir + "/small").code == 0);
    Result fits = run("bash scripts/gpu_check.sh --carry " + dir);
    INFO(fits.output);
    CHECK(fits.code == 0);
    CHECK(fits.output.find("carry [\"" + dir + "\"], timeout_s 420") != std::string::npos);
    CHECK(fits.output.find("bash scripts/gpu_check.sh --prebuilt " + dir + " --out $OUT") != std::string::npos);
    REQUIRE(run("truncate -s 57M " + dir + "/big").code == 0);  // sparse: 57 MiB by size, nothing on disk
    Result over = run("bash scripts/gpu_check.sh --carry " + dir);
    CHECK(over.code == 1);
    CHECK(over.output.find("FAILED") != std::string::npos);
    CHECK(over.output.find(dir + "/big") != std::string::npos);
    run("rm -rf " + dir);
}

TEST_CASE("gpu_check run on stubs: passed, FAILED, skipped with the reason, one summary and one log archive") {
    TempDir work("gpu_check_run");
    std::string folder = work.path + "/prebuilt", tools = work.path + "/tools", out = work.path + "/out";
    REQUIRE(run("mkdir -p " + folder + " " + tools).code == 0);
    write_stub_folder(folder, "test_layers_cuda_gpu");
    REQUIRE(run("gzip " + folder + "/*").code == 0);  // as make gpu-check-build leaves them
    write_stub_tools(tools);
    // a part of the plan (--only): the trainer, one test, the benchmark, the sanitizers, data parallel
    Result r = run("PATH=" + tools + ":$PATH bash scripts/gpu_check.sh --prebuilt " + folder + " --out " + out +
                   " --only trainer_speed,test_layers_cuda,attention_bench,memcheck_attention,racecheck_model,data_parallel");
    INFO(r.output);
    CHECK(r.code == 1);  // one step failed
    CHECK(r.output.find("trainer_speed: passed") != std::string::npos);
    CHECK(r.output.find("softmax        267712     38.1") != std::string::npos);  // the trainer's figures
    CHECK(r.output.find("test_layers_cuda: FAILED (exit 2)") != std::string::npos);
    // compute-sanitizer refusing the device: skipped with the reason, never FAILED
    CHECK(r.output.find("memcheck_attention: skipped (compute-sanitizer answered 'Device not supported'") !=
          std::string::npos);
    CHECK(r.output.find("racecheck_model: skipped") != std::string::npos);
    CHECK(r.output.find("data_parallel: skipped (1 GPU") != std::string::npos);
    CHECK(r.output.find("fwd+bwd T=16384: lssar/softmax") != std::string::npos);  // the benchmark's lines
    CHECK(r.output.find("gpu_check: 2 passed, 1 failed, 0 cut, 3 skipped (0 not reached)") != std::string::npos);
    // what comes back: the summary, as printed, and the logs in one archive
    std::string summary = read_file(out + "/summary.txt");
    CHECK(summary.find("test_layers_cuda: FAILED (exit 2)") != std::string::npos);
    CHECK(summary.find("gpu_check: 2 passed, 1 failed") != std::string::npos);
    CHECK(r.output.find(summary) != std::string::npos);
    CHECK(count_files(out) == 2);
    Result logs = run("tar -tzf " + out + "/logs.tar.gz");
    CHECK(logs.output.find("test_layers_cuda.log") != std::string::npos);
    CHECK(logs.output.find("trainer/softmax.txt") != std::string::npos);
}

TEST_CASE("gpu_check run on stubs: a step the clock stops is cut, the steps after it not reached") {
    // the first step's shard writer never ends: the clock cuts the step at what TOTAL_S leaves
    TempDir work("gpu_check_cut");
    std::string folder = work.path + "/prebuilt", tools = work.path + "/tools", out = work.path + "/out";
    REQUIRE(run("mkdir -p " + folder + " " + tools).code == 0);
    write_stub_folder(folder, "", "write_random_shard");
    write_stub_tools(tools);
    Result r = run("TOTAL_S=8 PATH=" + tools + ":$PATH bash scripts/gpu_check.sh --prebuilt " + folder + " --out " + out);
    INFO(r.output);
    CHECK(r.code == 0);  // nothing failed: cut and not reached are not failures
    CHECK(r.output.find("trainer_speed: cut at ") != std::string::npos);
    CHECK(r.output.find("gradcheck_lssar_d12: not reached") != std::string::npos);
    CHECK(r.output.find("racecheck_model: not reached") != std::string::npos);
    CHECK(r.output.find("FAILED") == std::string::npos);
    CHECK(r.output.find("gpu_check: 0 passed, 0 failed, 1 cut, 15 skipped (14 not reached)") != std::string::npos);
}

TEST_CASE("gpu_check --prebuilt: a missing or empty folder is refused at once, naming the carry list") {
    TempDir work("gpu_check_missing");
    std::string tools = work.path + "/tools", out = work.path + "/out", gone = work.path + "/not_carried";
    REQUIRE(run("mkdir -p " + tools).code == 0);
    write_stub_tools(tools);
    Result r = run("PATH=" + tools + ":$PATH bash scripts/gpu_check.sh --prebuilt " + gone + " --out " + out);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("--prebuilt " + gone + ": no such folder") != std::string::npos);
    CHECK(r.output.find("carry [\"" + gone + "\"]") != std::string::npos);
    CHECK(r.output.find("running") == std::string::npos);  // no step started
    CHECK(read_file(out + "/summary.txt").find("no such folder") != std::string::npos);
    REQUIRE(run("mkdir -p " + gone).code == 0);
    Result empty = run("PATH=" + tools + ":$PATH bash scripts/gpu_check.sh --prebuilt " + gone + " --out " + out);
    CHECK(empty.code == 2);
    CHECK(empty.output.find("no binaries in it") != std::string::npos);
}

TEST_CASE("gpu_check: compute-sanitizer found inside a folder of its name, checked with --version; a folder "
          "without it is not taken") {
    TempDir work("gpu_check_sanitizer");
    std::string folder = work.path + "/prebuilt", tools = work.path + "/tools", out = work.path + "/out";
    std::string opt = work.path + "/opt/nvidia";
    REQUIRE(run("mkdir -p " + folder + " " + tools + " " + opt + "/a/compute-sanitizer " + opt +
                "/b/compute-sanitizer").code == 0);
    write_stub_folder(folder);
    write_stub_tools(tools);
    REQUIRE(remove((tools + "/compute-sanitizer").c_str()) == 0);  // not in PATH
    // a/compute-sanitizer/ holds only documentation; b/compute-sanitizer/compute-sanitizer is the executable
    write_file(opt + "/a/compute-sanitizer/README", "docs\n");
    write_script(opt + "/b/compute-sanitizer/compute-sanitizer",
                 SANITIZER_VERSION + "echo '========= ERROR SUMMARY: 0 errors'; exit 0\n");
    const std::string env = "PATH=" + tools + ":/usr/bin:/bin SANITIZER_GLOBS='" + opt + "/*/compute-sanitizer' ";
    Result r = run(env + "bash scripts/gpu_check.sh --prebuilt " + folder + " --out " + out +
                   " --only gradcheck_softmax_d12,memcheck_attention");
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("compute-sanitizer: " + opt + "/b/compute-sanitizer/compute-sanitizer (Version 2025.3.0.0") !=
          std::string::npos);
    CHECK(r.output.find("memcheck_attention: passed") != std::string::npos);
    CHECK(r.output.find("ERROR SUMMARY: 0 errors") != std::string::npos);
    // the gradient check runs in float64 whatever the memory, and the summary says so
    CHECK(r.output.find("CPU in float64") != std::string::npos);
    CHECK(r.output.find("gradcheck_softmax_d12: passed") != std::string::npos);
    // only the folder without the executable: not found, skipped with the places searched (never 127)
    REQUIRE(run("rm -rf " + opt + "/b").code == 0);
    Result none = run(env + "bash scripts/gpu_check.sh --prebuilt " + folder + " --out " + out +
                      " --only memcheck_attention");
    INFO(none.output);
    CHECK(none.code == 0);
    CHECK(none.output.find("memcheck_attention: skipped (compute-sanitizer not found (PATH, " + opt) != std::string::npos);
    CHECK(none.output.find("FAILED") == std::string::npos);
}

TEST_CASE("gpu_check: a cut step's processes are all stopped, also one in a process group of its own") {
    // the trainer step runs the trainer under an inner timeout (a process group of its own, 30 s);
    // the stub trainer sleeps, so the clock (TOTAL_S = 6) cuts the step: the trainer must be gone
    TempDir work("gpu_check_tree");
    std::string folder = work.path + "/prebuilt", tools = work.path + "/tools", out = work.path + "/out";
    std::string pid_file = work.path + "/trainer.pid";
    REQUIRE(run("mkdir -p " + folder + " " + tools).code == 0);
    write_stub_folder(folder, "", "train_gpt2cu_softmax");
    write_stub_tools(tools);
    Result r = run("TOTAL_S=6 STUB_PID_FILE=" + pid_file + " PATH=" + tools + ":$PATH bash scripts/gpu_check.sh --prebuilt " +
                   folder + " --out " + out + " --only trainer_speed");
    INFO(r.output);
    CHECK(r.output.find("trainer_speed: cut at ") != std::string::npos);
    std::string pid = read_file(pid_file);
    REQUIRE(!pid.empty());
    pid.erase(pid.find_last_not_of("\n") + 1);
    CAPTURE(pid);
    // no process with that pid is left running (a zombie would have state Z)
    Result alive = run("s=$(cat /proc/" + pid + "/stat 2>/dev/null | sed 's/.*) \\(.\\).*/\\1/'); "
                       "[ -n \"$s\" ] && [ \"$s\" != Z ] && echo alive || echo gone");
    CHECK(alive.output.find("gone") != std::string::npos);
}
