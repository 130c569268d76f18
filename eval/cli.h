// What the evaluation tools' command lines share: an error that ends the program, and integer
// flags checked against their range.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

// Prints "error: msg" and exits with status 1.
[[noreturn]] inline void cli_fail(const std::string& msg) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    exit(1);
}

// The integer s given to flag, which must lie in [lo, hi]; anything else ends the program naming
// the flag, the value and the range.
inline long long cli_parse_int(const char* flag, const char* s, long long lo, long long hi) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == 0 || *end != 0 || errno != 0 || v < lo || v > hi)
        cli_fail(std::string(flag) + " " + s + ": expected an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
    return v;
}
