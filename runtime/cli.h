// What the command lines of the trainer and the evaluation tools share: an error that ends the
// program, number flags checked against their range, the flag table every program's command line
// is made from (CliTable: parser, known flags and usage text from one list), the checkpoint of
// this binary's variant, and the re-weighting power to evaluate it at.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint.h"

// Prints "error: msg" and exits with `status` (1 unless told).
[[noreturn]] inline void cli_fail(const std::string& msg, int status = 1) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    exit(status);
}

// "flag value: why (what)", a bad value's message: the flag, the value, the rule, and what the flag
// sets (what may be null)
inline std::string cli_bad_value(const char* flag, const char* s, const std::string& why, const char* what) {
    return std::string(flag) + " " + s + ": " + why + (what != nullptr && *what ? std::string(" (") + what + ")" : "");
}

// The integer s given to flag (what it sets: `what`), which must lie in [lo, hi]; anything else
// ends the program naming the flag, the value and the range.
inline long long cli_parse_int(const char* flag, const char* s, long long lo, long long hi, const char* what = nullptr) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == 0 || *end != 0 || errno != 0 || v < lo || v > hi)
        cli_fail(cli_bad_value(flag, s, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                               what));
    return v;
}

// The finite number s given to flag, which must lie in [lo, hi], as cli_parse_int.
inline float cli_parse_float(const char* flag, const char* s, double lo, double hi, const char* what = nullptr) {
    char* end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || errno != 0 || !(v >= lo && v <= hi)) {
        char range[96];
        snprintf(range, sizeof range, "expected a number in [%.9g, %.9g]", lo, hi);
        cli_fail(cli_bad_value(flag, s, range, what));
    }
    return (float)v;
}

// x as a flag's value is written: "%g" (15, 0.0003, 1e+30)
inline std::string cli_number(double x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

// The items of a comma-separated list, empty ones kept ("a,,b": "a", "", "b"; "": one empty item)
inline std::vector<std::string> cli_split_commas(const std::string& text) {
    std::vector<std::string> items;
    for (size_t start = 0;;) {
        size_t comma = text.find(',', start);
        items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return items;
        start = comma + 1;
    }
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
    for (const std::string& item : cli_split_commas(text)) {
        char* end;
        errno = 0;
        long long v = item.empty() ? 0 : strtoll(item.c_str(), &end, 10);
        if (item.empty()) fail("empty item");
        if (*end != 0 || errno != 0 || !isdigit((unsigned char)item.back()) || (!isdigit((unsigned char)item[0]) && item[0] != '-'))
            fail("'" + item + "' is not an integer");
        if (v < lo || v > hi) fail(item + " is out of range");
        values.push_back(v);
        if (values.size() > max_count) fail("more than " + std::to_string(max_count) + " values");
    }
    return values;
}

// ----------------------------------------------------------------------------
// The flag table: a program's command line as one list. Each entry is one flag: its name, what its
// value looks like, where the value goes and which values it takes, and its help line. The parser,
// the known flags and the usage text (-h) are all made from the table, so they cannot disagree;
// adding a flag is adding one line. A help line's first clause (up to the first ',', ';', ':' or
// '(') names what the flag sets, and a bad value's message quotes it. A help line without
// "(default" gets "(default V)" appended, V the destination's value when the table is built; "{}"
// in a help line stands for that value instead.
//
//   CliTable t("-e CHECKPOINT [options]", "What the program does.");
//   t.text("-e", &o.ckpt, "<path>", "checkpoint (required)")
//    .integer("-n", &o.trials, 1, 1000000, "trials per length")
//    .choice("-pr", &o.precision, {"ref", "fp32", "bf16", "auto"}, "arithmetic");
//   t.parse(argc, argv);
//
// "-h" or "--help" prints the usage and exits 0; "--flags" prints the table, one flag a line
// ("name<TAB>kind<TAB>a value it refuses"; tests walk it). A word that is not a flag, an unknown
// flag (also as the last word) and a flag without its value end the program naming them.

struct CliFlag {
    std::string name;       // "-b"
    std::string arg;        // "<int>": its value in the usage text
    std::string help;       // the usage text's line (wrapped), the default appended
    std::string kind;       // text, int, number, choice, list, switch, custom
    std::string bad_value;  // a value the parser refuses ("": any text is accepted)
    std::function<void(const char* value)> set;  // parses, refuses a bad value, stores
    bool given = false;
};

// A flag of llm.c's train_gpt2.cu whose letter means something else here, or does not exist here.
struct CliForeignFlag {
    std::string name, meaning, advice;  // "-pr", "the process rank (-pr <int>)", what to do here
    bool exists_here = false;           // true: refused only when its value is an integer (llm.c's)
};

struct CliTable {
    std::string synopsis;  // what follows the program's name on the usage line
    std::string about;     // what the program does (lines)
    std::string epilogue;  // lines after the flags
    std::vector<CliFlag> flags;
    std::vector<std::pair<size_t, std::string>> headings;  // a line printed before flags[first]
    std::vector<CliForeignFlag> foreign;
    bool help_takes_value = false;  // "-h V" is a flag of the table (the trainer's -h 0|1)

    CliTable(std::string synopsis_, std::string about_) : synopsis(std::move(synopsis_)), about(std::move(about_)) {}

    // A line of the usage text before the next flag: a section title, or a note under one.
    CliTable& section(const std::string& line) {
        headings.push_back({flags.size(), line});
        return *this;
    }

    // Any text (a path, a glob, a prompt).
    CliTable& text(const char* name, std::string* dest, const char* arg, const char* help) {
        return add(name, arg, help, "text", "", *dest, [dest](const char* v) { *dest = v; });
    }

    // An integer in [lo, hi].
    template <class I>
    CliTable& integer(const char* name, I* dest, long long lo, long long hi, const char* help) {
        std::string what = help_what(help), flag = name;
        std::string bad = std::to_string(lo - 1);
        return add(name, lo == 0 && hi == 1 ? "<0|1>" : "<int>", help, "int", bad, std::to_string((long long)*dest), [=](const char* v) {
            *dest = (I)cli_parse_int(flag.c_str(), v, lo, hi, what.c_str());
        });
    }

    // A number in [lo, hi].
    CliTable& number(const char* name, float* dest, double lo, double hi, const char* help) {
        std::string what = help_what(help), flag = name;
        char bad[48];
        snprintf(bad, sizeof bad, "%.9g", lo > -1e30 ? lo - 1 : -INFINITY);
        return add(name, "<float>", help, "number", bad, cli_number(*dest), [=](const char* v) {
            *dest = cli_parse_float(flag.c_str(), v, lo, hi, what.c_str());
        });
    }

    // One of the words in `options`.
    CliTable& choice(const char* name, std::string* dest, const std::vector<std::string>& options, const char* help) {
        std::string arg = "<", list;
        for (size_t i = 0; i < options.size(); i++) {
            arg += (i ? "|" : "") + options[i];
            list += (i == 0 ? "" : i + 1 == options.size() ? " or " : ", ") + options[i];
        }
        std::string what = help_what(help), flag = name;
        return add(name, (arg + ">").c_str(), help, "choice", "none_of_these", *dest, [=](const char* v) {
            for (const std::string& o : options)
                if (o == v) { *dest = v; return; }
            cli_fail(cli_bad_value(flag.c_str(), v, "expected " + list, what.c_str()));
        });
    }

    // Comma-separated integers, each in [lo, hi], at most max_count (cli_parse_int_list).
    CliTable& int_list(const char* name, std::vector<long long>* dest, long long lo, long long hi, size_t max_count,
                       const char* example, const char* help) {
        std::string what = help_what(help), flag = name, ex = example, dflt;
        for (size_t i = 0; i < dest->size(); i++) dflt += (i ? "," : "") + std::to_string((*dest)[i]);
        return add(name, "<list>", help, "list", "1,,2", dflt, [=](const char* v) {
            *dest = cli_parse_int_list(flag.c_str(), v, lo, hi, max_count, what.c_str(), ex.c_str());
        });
    }

    // A flag with its own parser: set(value) stores it or ends the program; bad_value is one it refuses.
    CliTable& custom(const char* name, const char* arg, const char* help, const char* bad_value,
                     std::function<void(const char*)> set, const std::string& default_text = "") {
        return add(name, arg, help, "custom", bad_value, default_text, std::move(set));
    }

    // llm.c's flag `name` means `meaning` there: refused with `advice` where it has no counterpart
    // here, and, where the letter exists here with another meaning, when its value is an integer
    // (what llm.c's takes).
    CliTable& llmc(const char* name, const char* meaning, const char* advice) {
        foreign.push_back({name, meaning, advice, find(name) != nullptr});
        return *this;
    }

    CliFlag* find(const std::string& name) {
        for (CliFlag& f : flags)
            if (f.name == name) return &f;
        return nullptr;
    }
    bool given(const std::string& name) {
        CliFlag* f = find(name);
        return f != nullptr && f->given;
    }

    void parse(int argc, char** argv) {
        for (int i = 1; i < argc;) {
            std::string word = argv[i];
            bool help_value = help_takes_value && word == "-h" && i + 1 < argc && argv[i + 1][0] != '-';
            if (word == "--help" || (word == "-h" && !help_value)) {
                print_usage(stdout, argv[0]);
                exit(0);
            }
            if (word == "--flags") {
                for (const CliFlag& f : flags) printf("%s\t%s\t%s\n", f.name.c_str(), f.kind.c_str(), f.bad_value.c_str());
                exit(0);
            }
            if (word.size() < 2 || word[0] != '-')
                cli_fail("unexpected argument '" + word + "' (flags take the form -x value; -h lists them)");
            CliFlag* f = find(word);
            const CliForeignFlag* llmc_flag = foreign_flag(word);
            if (f == nullptr) {
                if (llmc_flag != nullptr) cli_fail(word + ": llm.c's " + word + " is " + llmc_flag->meaning + "; " + llmc_flag->advice);
                cli_fail("unknown flag " + word + " (-h lists the flags)");
            }
            if (i + 1 >= argc) cli_fail(word + ": missing value (-h lists the flags)");
            const char* value = argv[i + 1];
            if (llmc_flag != nullptr && is_integer(value))
                cli_fail(word + " " + value + ": llm.c's " + word + " is " + llmc_flag->meaning + ", not this project's: here " +
                         word + " " + f->arg + " is the " + help_what(f->help) + ". For llm.c's meaning: " +
                         llmc_flag->advice);
            f->set(value);
            f->given = true;
            i += 2;
        }
    }

    void print_usage(FILE* out, const char* argv0) const {
        fprintf(out, "Usage: %s %s\n", argv0, synopsis.c_str());
        if (!about.empty()) fprintf(out, "%s\n", about.c_str());
        size_t h = 0;
        for (size_t i = 0; i <= flags.size(); i++) {
            for (; h < headings.size() && headings[h].first == i; h++) fprintf(out, "%s\n", headings[h].second.c_str());
            if (i == flags.size()) break;
            print_flag(out, flags[i].name + " " + flags[i].arg, flags[i].help);
        }
        if (!help_takes_value) print_flag(out, "-h", "this help (also --help)");
        if (!foreign.empty()) {
            fprintf(out, "llm.c's flags that differ here\n");
            for (const CliForeignFlag& f : foreign)
                print_flag(out, f.name, "llm.c: " + f.meaning + (f.exists_here ? " (an integer value is refused)" : "") +
                                            ". Here: " + f.advice);
        }
        if (!epilogue.empty()) fprintf(out, "%s\n", epilogue.c_str());
    }

private:
    CliTable& add(const char* name, const char* arg, const char* help, const char* kind, const std::string& bad,
                  const std::string& default_text, std::function<void(const char*)> set) {
        if (find(name) != nullptr) throw std::logic_error(std::string("flag table: ") + name + " twice");
        if (std::string(name) == "-h") help_takes_value = true;
        std::string line = help;
        size_t at = line.find("{}");
        if (at != std::string::npos) line.replace(at, 2, default_text);
        else if (line.find("(default") == std::string::npos && !default_text.empty())
            line += " (default " + default_text + ")";
        flags.push_back({name, arg, line, kind, bad, std::move(set), false});
        return *this;
    }

    const CliForeignFlag* foreign_flag(const std::string& name) const {
        for (const CliForeignFlag& f : foreign)
            if (f.name == name) return &f;
        return nullptr;
    }

    static bool is_integer(const char* s) {
        if (*s == '-') s++;
        if (*s == 0) return false;
        for (; *s; s++)
            if (!isdigit((unsigned char)*s)) return false;
        return true;
    }

    // the help's first clause: what the flag sets
    static std::string help_what(const std::string& help) {
        size_t end = help.find_first_of(",;:(\n");
        std::string w = help.substr(0, end);
        while (!w.empty() && w.back() == ' ') w.pop_back();
        return w;
    }

    // "  -name <arg>  help", the help wrapped at 110 columns under itself
    static void print_flag(FILE* out, const std::string& head, const std::string& help) {
        const size_t indent = 15, width = 110;
        std::string line = "  " + head;
        line += line.size() < indent ? std::string(indent - line.size(), ' ') : " ";
        size_t col = line.size();
        bool first_word = true;
        size_t pos = 0;
        while (pos < help.size()) {
            if (help[pos] == '\n') {  // a line break of the help's own
                fprintf(out, "%s\n", line.c_str());
                line = std::string(indent, ' ');
                col = indent, first_word = true, pos++;
                continue;
            }
            size_t end = help.find_first_of(" \n", pos);
            if (end == std::string::npos) end = help.size();
            std::string word = help.substr(pos, end - pos);
            if (!first_word && col + 1 + word.size() > width) {
                fprintf(out, "%s\n", line.c_str());
                line = std::string(indent, ' ');
                col = indent, first_word = true;
            }
            if (!first_word) line += ' ', col++;
            line += word, col += word.size(), first_word = false;
            pos = end < help.size() && help[end] == ' ' ? end + 1 : end;
        }
        fprintf(out, "%s\n", line.c_str());
    }
};

// The -pr of the trainer and the evaluation tools: the arithmetic they run the model in. The CPU back
// end's paths (model/backend_cpu.h): ref, the reference; fp32 and bf16, the fast path's two numerics;
// auto, the faster of those on this CPU. The evaluation tools' default on the CPU is auto; the CUDA
// back end has bf16 alone.
inline const std::vector<std::string> CLI_PRECISIONS = {"ref", "fp32", "bf16", "auto"};
#ifdef TRAIN_BACKEND_CPU
#define CLI_DEFAULT_PRECISION "auto"
#else
#define CLI_DEFAULT_PRECISION "bf16"
#endif
inline const char* CLI_PRECISION_HELP =
    "arithmetic: ref (the CPU back end's reference path), fp32 or bf16 (the CPU fast path's numerics: SIMD kernels "
    "dispatched to the CPU's best ISA; bf16 matmul operands with fp32 accumulation, on AMX or AVX512-BF16 through "
    "oneDNN, computed exactly through sgemm on other CPUs), auto (the faster of fp32 and bf16 on this CPU: bf16 where "
    "it has bf16 matmuls). The CUDA back end is bf16 always (bf16 or auto)";

// Selects the arithmetic `name` of the model (select_precision of runtime/backend.h) and prints
// what runs (on out: the tools whose stdout is their output print it on stderr); a name the back
// end has no path for ends the program naming it.
template <class Model>
void cli_select_precision(Model& model, const std::string& name, FILE* out = stdout) {
    try {
        fprintf(out, "precision: %s\n", select_precision(model, name).c_str());
    } catch (const std::invalid_argument& e) {
        cli_fail("-pr " + name + ": " + e.what());
    }
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
inline void cli_override_p(Checkpoint& ck, const std::string& path, const std::string& p_text, FILE* out = stdout) {
    if (p_text.empty()) return;
    if (ck.config.learn_p)
        cli_fail("-p " + p_text + ": checkpoint " + path + " learned its p per layer and head (" +
                 learned_p_summary(learned_p_values(ck.config, ck.params.data())) + "); leave -p out");
    double p;
    std::string err = cli_p_override_error(ck.config.attn, path, p_text, &p);
    if (!err.empty()) cli_fail(err);
    if ((float)p != ck.config.p)
        fprintf(out, "evaluating at p %g (the checkpoint was trained at p %g)\n", p, ck.config.p);
    ck.config.p = (float)p;
}

// Head parameter values (L, NH), one line per layer, under "<title> (<summary of name>)", on out.
inline void cli_print_head_params(const Checkpoint& ck, const std::vector<double>& v, const char* title,
                                  const char* name, FILE* out = stdout) {
    if (v.empty()) return;
    fprintf(out, "%s (%s), per layer, heads 0..%d:\n", title, head_param_summary(name, v).c_str(),
            ck.config.num_heads - 1);
    for (int l = 0; l < ck.config.num_layers; l++) {
        fprintf(out, "  layer %2d:", l);
        for (int h = 0; h < ck.config.num_heads; h++) fprintf(out, " %.4g", v[(size_t)l * ck.config.num_heads + h]);
        fprintf(out, "\n");
    }
}

// The learned p values of a checkpoint, or ssmax's s, one line per layer (nothing for the others).
inline void cli_print_learned_p(const Checkpoint& ck, FILE* out = stdout) {
    cli_print_head_params(ck, learned_p_values(ck.config, ck.params.data()), "learned p", "p", out);
    cli_print_head_params(ck, ssmax_s_values(ck.config, ck.params.data()), "ssmax's s", "s", out);
}

// ----------------------------------------------------------------------------
// Re-weighting at evaluation (doc/attention.md, section 'Re-weighting at evaluation'): a checkpoint
// trained without re-weighting evaluated by the re-weighting variant with the same parameters
// (the same score, phi and normalisation: lssa -> lssar, softmax -> softmax_rw) at power p, the
// paper's fine-tuning-free use of the re-weighting. The evaluation tools' -rw <p>.
// The evaluation tools' -p <float>: a fixed-p checkpoint evaluated at another p.
constexpr const char* CLI_P_HELP =
    "re-weighting power to evaluate at instead of the checkpoint's (>= 1; variants with re-weighting only)";

constexpr const char* CLI_REWEIGHT_HELP =
    "re-weighting at evaluation: the checkpoint was trained without re-weighting (lssa for an lssar build, softmax "
    "for softmax_rw) and is evaluated with it at this power (>= 1) (default: off)";

// The variant without re-weighting whose parameters `kind` shares (ATTN_NUM_KINDS: none).
inline AttnKind attn_without_reweighting(AttnKind kind) {
    AttnVariant v = attn_variant(kind);
    for (const AttnVariant& w : ATTN_VARIANT_TABLE)
        if (!w.reweight && w.score == v.score && w.phi == v.phi && w.norm == v.norm) return w.kind;
    return ATTN_NUM_KINDS;
}

// "lssa -> lssar, softmax -> softmax_rw": every pair re-weighting at evaluation is defined for
inline std::string attn_reweighting_pairs() {
    std::string s;
    for (const AttnVariant& v : ATTN_VARIANT_TABLE) {
        AttnKind base = v.reweight ? attn_without_reweighting(v.kind) : ATTN_NUM_KINDS;
        if (base != ATTN_NUM_KINDS) s += (s.empty() ? "" : ", ") + std::string(attn_kind_name(base)) + " -> " + v.name;
    }
    return s;
}

// The checkpoint an evaluation tool built for attn_name evaluates: its own variant's (at -p p_text
// if given), or, with -rw rw_text, one of the variant without re-weighting with the same parameters,
// evaluated as attn_name at p = rw_text. Prints the learned p and what is evaluated; refuses, naming
// the reason, where re-weighting at evaluation is not defined.
inline Checkpoint cli_read_eval_checkpoint(const std::string& path, const char* attn_name, const std::string& p_text,
                                           const std::string& rw_text) {
    if (rw_text.empty()) {
        Checkpoint ck = cli_read_checkpoint(path, attn_name);
        cli_print_learned_p(ck);
        cli_override_p(ck, path, p_text);
        return ck;
    }
    AttnKind built = ATTN_NUM_KINDS;
    attn_kind_from_name(attn_name, &built);
    if (!p_text.empty()) cli_fail("-rw " + rw_text + " and -p " + p_text + ": -rw gives the power; leave -p out");
    if (!attn_reweights(built))
        cli_fail("-rw " + rw_text + ": this program is built for " + attn_name +
                 ", which has no re-weighting; re-weighting at evaluation runs on the build of the re-weighting "
                 "variant (" + attn_reweighting_pairs() + ")");
    AttnKind base = attn_without_reweighting(built);
    if (base == ATTN_NUM_KINDS)
        cli_fail("-rw " + rw_text + ": no variant without re-weighting has " + attn_name +
                 "'s score, phi and normalisation, so its parameters are no other variant's and re-weighting at "
                 "evaluation is not defined for it (it is for " + attn_reweighting_pairs() + ")");
    double p;
    std::string err = cli_p_override_error(built, path, rw_text, &p);
    if (!err.empty()) cli_fail("-rw" + err.substr(2));
    Checkpoint ck;
    checkpoint_read(path, ck);
    if (ck.config.attn != base)
        cli_fail("-rw " + rw_text + ": checkpoint " + path + " is " + attn_kind_name(ck.config.attn) + "; -rw evaluates a " +
                 attn_kind_name(base) + " checkpoint (trained without re-weighting) as " + attn_name +
                 (ck.config.attn == built ? std::string(" (for this one, leave -rw out; -p sets its power)") : ""));
    ck = cli_read_checkpoint(path, attn_kind_name(base));  // every other field checked as usual
    ck.config.attn = built;
    ck.config.p = (float)p;
    printf("re-weighting at evaluation: checkpoint %s (%s, trained without re-weighting) evaluated as %s at p %g\n",
           path.c_str(), attn_kind_name(base), attn_name, p);
    return ck;
}

// ----------------------------------------------------------------------------
// Log-length scaling at evaluation (attention/attention_kind.h, attn_log_len_factor): a softmax or
// softmax_rw checkpoint trained with attn_len 0 evaluated with attn_len = its training length L, so
// row t's dot scores are multiplied by max(1, ln(t + 1) / ln(L)): unchanged within L, sharper
// beyond it. The evaluation tools' -ls 1.
constexpr const char* CLI_LOG_LEN_HELP =
    "log-length scaling: 1 multiplies row t's dot scores by max(1, ln(t + 1) / ln(L)), L the training length, "
    "for a softmax or softmax_rw checkpoint trained without it (attn_len 0); unchanged within L";

// "softmax, softmax_rw": the variants log-length scaling is defined for
inline std::string attn_log_scale_kind_list() {
    std::string s;
    for (const AttnVariant& v : ATTN_VARIANT_TABLE)
        if (attn_log_scales(v.kind)) s += (s.empty() ? "" : ", ") + std::string(v.name);
    return s;
}

// "" if -ls 1 applies to checkpoint `path` of config c at training length L, else why not.
inline std::string cli_log_len_error(const GPT2Config& c, const std::string& path, int L) {
    std::string ls = "-ls 1: checkpoint " + path + " is " + attn_kind_name(c.attn);
    if (!attn_log_scales(c.attn))
        return ls + "; log-length scaling multiplies dot scores with exp, so it is defined for " +
               attn_log_scale_kind_list() + " only (leave -ls out)";
    if (c.attn_len > 0)
        return ls + " with attn_len = " + std::to_string(c.attn_len) + " (trained with -tl 1): log-length scaling "
               "beyond " + std::to_string(c.attn_len) + " is already on (leave -ls out)";
    if (L < 2)
        return ls + " at training length " + std::to_string(L) + ": log-length scaling divides by ln(L), which needs "
               "L >= 2";
    return "";
}

// -ls 1 (log_len = 1): sets the checkpoint's attn_len to the training length L, or ends the program
// naming why it does not apply. Returns the L log-length scaling runs at (0: off).
inline int cli_apply_log_len(Checkpoint& ck, const std::string& path, int log_len, int L, FILE* out = stdout) {
    if (!log_len) return attn_log_scales(ck.config.attn) ? ck.config.attn_len : 0;
    std::string err = cli_log_len_error(ck.config, path, L);
    if (!err.empty()) cli_fail(err);
    ck.config.attn_len = L;
    fprintf(out, "log-length scaling at evaluation: checkpoint %s (%s) with row t's scores times max(1, "
            "ln(t + 1) / ln(%d)), %d its training length\n", path.c_str(), attn_kind_name(ck.config.attn), L, L);
    return L;
}
