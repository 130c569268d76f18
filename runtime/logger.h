// The run's log, log.jsonl: one JSON object per line, each starting with "step". A resumed run
// keeps the records up to its checkpoint's step and appends from there.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

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
