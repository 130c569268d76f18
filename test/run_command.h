// Tests that run the project's programs: a shell command's exit code and its output.
#pragma once

#include <cstdio>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>

struct Result {
    int code;            // exit status, or 128 + the signal that ended it
    std::string output;  // stdout and stderr
};

// Runs cmd with sh, stderr merged into stdout.
inline Result run(const std::string& cmd) {
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}
