// What the command lines of the trainer and the evaluation tools share: an error that ends the
// program, "-flag value" pairs, number flags checked against their range, the checkpoint of this
// binary's variant, and the re-weighting power to evaluate it at.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/checkpoint.h"

// Prints "error: msg" and exits with `status` (1 unless told).
[[noreturn]] inline void cli_fail(const std::string& msg, int status = 1) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    exit(status);
}

// "flag value: what: " (what may be null), the start of a flag's error message
inline std::string cli_flag_prefix(const char* flag, const char* s, const char* what) {
    return std::string(flag) + " " + s + ": " + (what != nullptr ? std::string(what) + ": " : "");
}

// The integer s given to flag (what it sets: `what`), which must lie in [lo, hi]; anything else
// ends the program naming the flag, the value and the range.
inline long long cli_parse_int(const char* flag, const char* s, long long lo, long long hi, const char* what = nullptr) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == 0 || *end != 0 || errno != 0 || v < lo || v > hi)
        cli_fail(cli_flag_prefix(flag, s, what) + "expected an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
    return v;
}

// The finite number s given to flag, which must lie in [lo, hi], as cli_parse_int.
inline float cli_parse_float(const char* flag, const char* s, double lo, double hi, const char* what = nullptr) {
    char* end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || errno != 0 || !(v >= lo && v <= hi)) {
        char range[96];
        snprintf(range, sizeof range, ": expected a number in [%.9g, %.9g]", lo, hi);
        cli_fail(cli_flag_prefix(flag, s, what) + (range + 2));
    }
    return (float)v;
}

// The comma-separated integers s given to flag (what they are: `what`), each in [lo, hi], at most
// max_count of them, e.g. "1,2,4": anything else (empty, an empty item, a non-number, out of range,
// too many) ends the program naming the flag, the value, the rule and an example.
inline std::vector<long long> cli_parse_int_list(const char* flag, const char* s, long long lo, long long hi,
                                                 size_t max_count, const char* what, const char* example) {
    std::vector<long long> values;
    std::string text = s;
    auto fail = [&](const std::string& why) {
        cli_fail(std::string(flag) + " '" + text + "': " + why + "; expected " + what + ", comma separated, each in [" +
                 std::to_string(lo) + ", " + std::to_string(hi) + "], at most " + std::to_string(max_count) +
                 " (e.g. " + example + ")");
    };
    if (text.empty()) fail("empty list");
    size_t start = 0;
    while (true) {
        size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        char* end;
        errno = 0;
        long long v = item.empty() ? 0 : strtoll(item.c_str(), &end, 10);
        if (item.empty()) fail("empty item");
        if (*end != 0 || errno != 0 || !isdigit((unsigned char)item.back()) || (!isdigit((unsigned char)item[0]) && item[0] != '-'))
            fail("'" + item + "' is not an integer");
        if (v < lo || v > hi) fail(item + " is out of range");
        values.push_back(v);
        if (values.size() > max_count) fail("more than " + std::to_string(max_count) + " values");
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return values;
}

// The next "-flag value" pair of argv at *i (start at 1): true with flag and val set, *i moved on;
// false once argv is done. "-h" (or "--help") prints usage and exits 0; a word that is not a flag, or a flag
// without its value, ends the program naming it. known: the tool's flags, space separated (e.g.
// "-e -j -o"), so that an unknown flag as the last word is reported as unknown, not as lacking a value.
inline bool cli_next_flag(int argc, char** argv, int* i, void (*usage)(const char*), std::string* flag,
                          const char** val, const char* known = nullptr) {
    if (*i >= argc) return false;
    if (strcmp(argv[*i], "-h") == 0 || strcmp(argv[*i], "--help") == 0) {
        usage(argv[0]);
        exit(0);
    }
    if (argv[*i][0] != '-')
        cli_fail(std::string("unexpected argument '") + argv[*i] + "' (flags take the form -x value; -h lists them)");
    if (*i + 1 >= argc) {
        std::string padded = std::string(" ") + (known ? known : "") + " ";
        if (known && padded.find(std::string(" ") + argv[*i] + " ") == std::string::npos)
            cli_fail(std::string("unknown flag ") + argv[*i] + " (-h lists the flags)");
        cli_fail(std::string(argv[*i]) + ": missing value (-h lists the flags)");
    }
    *flag = argv[*i];
    *val = argv[*i + 1];
    *i += 2;
    return true;
}

// The checkpoint at path; one made for another attention variant than attn_name (this binary's)
// ends the program with checkpoint_config_mismatch's message. RoPE has no length limit, so the
// tools may run it at other lengths than it was trained at. Read errors throw, as checkpoint_read.
inline Checkpoint cli_read_checkpoint(const std::string& path, const char* attn_name) {
    Checkpoint ck;
    checkpoint_read(path, ck);
    GPT2Config want = ck.config;
    attn_kind_from_name(attn_name, &want.attn);
    std::string mismatch = checkpoint_config_mismatch(path, ck.config, want, false);
    if (!mismatch.empty()) cli_fail(mismatch);
    return ck;
}

// Why -p p_text cannot evaluate a checkpoint of variant kind (empty if it can): P < 1, not a
// number, or a variant without re-weighting (p is not part of it).
inline std::string cli_p_override_error(AttnKind kind, const std::string& path, const std::string& p_text,
                                        double* p) {
    char* end;
    *p = strtod(p_text.c_str(), &end);
    if (p_text.empty() || *end != 0 || !std::isfinite(*p))
        return "-p " + p_text + ": expected a number >= 1 (the re-weighting power)";
    if (!attn_reweights(kind))
        return "-p " + p_text + ": checkpoint " + path + " is " + attn_kind_name(kind) +
               ", which has no re-weighting: p does not apply (leave -p out)";
    if (!(*p >= 1))
        return "-p " + p_text + ": the re-weighting power must be >= 1 (relu(x)^p with p < 1 is not "
               "differentiable at x = 0)";
    return "";
}

// The re-weighting power to evaluate a checkpoint at (-p P): a checkpoint trained at one p may be
// evaluated at another. An empty p_text keeps the checkpoint's p; bad input ends the program.
inline void cli_override_p(Checkpoint& ck, const std::string& path, const std::string& p_text) {
    if (p_text.empty()) return;
    if (ck.config.learn_p)
        cli_fail("-p " + p_text + ": checkpoint " + path + " learned its p per layer and head (" +
                 learned_p_summary(learned_p_values(ck.config, ck.params.data())) + "); leave -p out");
    double p;
    std::string err = cli_p_override_error(ck.config.attn, path, p_text, &p);
    if (!err.empty()) cli_fail(err);
    if ((float)p != ck.config.p) printf("evaluating at p %g (the checkpoint was trained at p %g)\n", p, ck.config.p);
    ck.config.p = (float)p;
}

// The learned p values of a checkpoint, one line per layer (nothing without learn_p).
inline void cli_print_learned_p(const Checkpoint& ck) {
    std::vector<double> p = learned_p_values(ck.config, ck.params.data());
    if (p.empty()) return;
    printf("learned p (%s), per layer, heads 0..%d:\n", learned_p_summary(p).c_str(), ck.config.num_heads - 1);
    for (int l = 0; l < ck.config.num_layers; l++) {
        printf("  layer %2d:", l);
        for (int h = 0; h < ck.config.num_heads; h++) printf(" %.4g", p[(size_t)l * ck.config.num_heads + h]);
        printf("\n");
    }
}

