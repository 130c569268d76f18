// Tests that run the project's programs: a shell command's exit code and its output, and the
// records of a trainer's log.jsonl.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include <doctest/doctest.h>
#include "test/temp_dir.h"

struct Result {
    int code;            // exit status, or 128 + the signal that ended it
    std::string output;  // stdout and stderr
};

// Runs cmd (a complete shell command, redirections included) with sh: its exit status, or 128 +
// the signal that ended it, and its stdout.
inline Result run_shell(const std::string& cmd) {
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// What runs a project program that a test starts: TEST_EXEC_WRAPPER's words before it (e.g.
// "qemu-x86_64 -cpu EPYC-Milan": scripts/test_cpu_model.sh runs the tests and the programs they
// start under another processor's CPUID), nothing by default.
inline std::string exec_wrapper() {
    const char* w = getenv("TEST_EXEC_WRAPPER");
    return w && *w ? std::string(w) + " " : std::string();
}

// Runs cmd with sh, stderr merged into stdout.
inline Result run(const std::string& cmd) { return run_shell(cmd + " 2>&1"); }

// Runs cmd with sh, its stdout and its stderr kept apart (for a program whose stdout is its output).
struct SplitResult {
    int code;
    std::string out, err;
};
inline SplitResult run_split(const std::string& cmd) {
    TempDir dir("run");
    std::string err_path = dir.path + "/stderr";
    Result r = run_shell(cmd + " 2>" + err_path);
    return {r.code, r.output, read_file(err_path)};
}

// "step,loss,grad_norm" of every training record of a log.jsonl, and every validation record
// whole (timings differ between runs, so they are cut off)
inline std::vector<std::string> loss_records(const std::string& log_path) {
    std::vector<std::string> out;
    std::istringstream in(read_file(log_path));
    std::string line;
    while (std::getline(in, line)) {
        size_t lr = line.find(",\"lr\"");
        if (line.find("\"loss\"") != std::string::npos && lr != std::string::npos) out.push_back(line.substr(0, lr));
        if (line.find("val_loss") != std::string::npos) out.push_back(line);
    }
    return out;
}
