// The run's log, log.jsonl: one JSON object per line, each starting with "step". A resumed run
// keeps the records up to its checkpoint's step and appends from there.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

// x as a JSON number: 9 significant digits (floats round-trip), null if not finite
inline std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", x);
    return buf;
}

// "1h02m" or "3m07s"
inline std::string format_duration(double seconds) {
    char buf[32];
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
    return buf;
}

// What one optimizer step measured.
struct StepResult {
    double loss = 0, norm = 0, ms = 0;
    double last_micro_loss = 0;  // this rank's loss of the last micro-batch, before the update
    float lr = 0;
    bool applied = true;         // false: the guard skipped the update, for skip_reason
    std::string skip_reason;
};

// "step  5/200 | loss ... | norm ... | lr ... | ms | tok/s[ | MFU x% or n/a] | ETA[ | extra][ | SKIPPED: why]"
// mfu: runtime/mfu.h's step_mfu (NaN: a GPU of unknown peak; < 0: no GPU, nothing printed)
inline std::string step_line(int step, int max_steps, const StepResult& r, double tok_s, double mfu, double eta_s,
                             const std::string& extra = "") {
    char mfu_text[32] = "";
    if (std::isnan(mfu)) snprintf(mfu_text, sizeof mfu_text, " | MFU n/a");
    else if (mfu > 0) snprintf(mfu_text, sizeof mfu_text, " | MFU %.1f%%", 100.0 * mfu);
    std::string skipped = (extra.empty() ? "" : " | " + extra) + (r.applied ? "" : " | SKIPPED: " + r.skip_reason);
    char head[256];
    snprintf(head, sizeof head, "step %*d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s%s | ETA ",
             (int)std::to_string(max_steps).size(), step, max_steps, r.loss, r.norm, r.lr, r.ms, tok_s, mfu_text);
    return head + format_duration(eta_s) + skipped;
}

inline void print_step_line(int step, int max_steps, const StepResult& r, double tok_s, double mfu, double eta_s,
                            const std::string& extra = "") {
    printf("%s\n", step_line(step, max_steps, r, tok_s, mfu, eta_s, extra).c_str());
    fflush(stdout);
}

// The step's record of log.jsonl; p_values: the learned p per layer and head, if any; s_values:
// ssmax's s per layer and head, if any.
inline std::string step_record(int step, const StepResult& r, double tok_s, const std::vector<double>& p_values = {},
                               const std::vector<double>& s_values = {}) {
    std::string rec = "{\"step\":" + std::to_string(step) + ",\"loss\":" + json_number(r.loss) +
                      ",\"grad_norm\":" + json_number(r.norm) + ",\"lr\":" + json_number(r.lr) +
                      ",\"ms\":" + json_number(r.ms) + ",\"tokens_per_s\":" + json_number(tok_s);
    if (!r.applied) rec += ",\"skipped\":\"" + r.skip_reason + "\"";
    for (size_t i = 0; i < p_values.size(); i++) rec += (i ? "," : ",\"p\":[") + json_number(p_values[i]);
    if (!p_values.empty()) rec += "]";
    for (size_t i = 0; i < s_values.size(); i++) rec += (i ? "," : ",\"s\":[") + json_number(s_values[i]);
    if (!s_values.empty()) rec += "]";
    return rec + "}";
}

// The first record of a run's log: what eval/plot_training.py needs to put tokens on an axis, and
// `extra` (more "key":value pairs, each with its leading comma: the schedule and the guards).
inline std::string run_header_record(int world, long long tokens_per_step, int B, int T, const char* attn, double p,
                                     const std::string& extra = "") {
    return "{\"step\":0,\"world_size\":" + std::to_string(world) + ",\"tokens_per_step\":" +
           std::to_string(tokens_per_step) + ",\"B\":" + std::to_string(B) + ",\"T\":" + std::to_string(T) +
           ",\"attn\":\"" + attn + "\",\"p\":" + json_number(p) + extra + "}";
}

struct JsonlLog {
    std::string path;
    FILE* file = nullptr;

    JsonlLog() = default;
    JsonlLog(const JsonlLog&) = delete;
    JsonlLog& operator=(const JsonlLog&) = delete;
    ~JsonlLog() { close(); }

    // A new log at path, or, resuming from `resumed_step` (>= 0), the old one cut after that step.
    void open(const std::string& p, long long resumed_step) {
        path = p;
        if (resumed_step >= 0) truncate_after(resumed_step);
        file = fopen(path.c_str(), resumed_step >= 0 ? "a" : "w");
        if (!file) throw std::runtime_error("cannot open " + path + " (" + strerror(errno) + ")");
    }

    // Appends one record (a JSON object) and flushes it: a crash loses no line written.
    void line(const std::string& json) {
        if (!file) return;
        if (fprintf(file, "%s\n", json.c_str()) < 0 || fflush(file) != 0)
            throw std::runtime_error("writing " + path + " failed (" + strerror(errno) + ")");
    }

    void close() {
        if (file) fclose(file);
        file = nullptr;
    }

  private:
    void truncate_after(long long step) {
        FILE* f = fopen(path.c_str(), "r");
        if (!f) return;
        std::string kept;
        char buf[4096];
        while (fgets(buf, sizeof buf, f)) {
            long long s;
            if (sscanf(buf, "{\"step\":%lld", &s) == 1 && s > step) continue;
            kept += buf;
        }
        fclose(f);
        f = fopen(path.c_str(), "w");
        if (!f || fwrite(kept.data(), 1, kept.size(), f) != kept.size() || fclose(f) != 0)
            throw std::runtime_error("cannot rewrite " + path + " (" + strerror(errno) + ")");
    }
};
