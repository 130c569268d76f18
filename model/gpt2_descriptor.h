// Model descriptors of the command line: "d12", "d4c256h4", "d2c32h2v512" = dL[cC][hH][vV], with
// L layers, C channels (default 64 L), H heads (default C / 64, at least 1) and a vocabulary of V
// tokens (default GPT-2's 50257; the padded vocabulary is V rounded up to a multiple of 128).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "model/gpt2_config.h"

// false if s is not written as a descriptor (the tools then take it for a checkpoint's path);
// true if it is, with *c's sizes set, or *error naming the field out of range.
inline bool gpt2_parse_descriptor(const std::string& s, GPT2Config* c, std::string* error) {
    if (s.size() < 2 || s[0] != 'd' || !isdigit((unsigned char)s[1])) return false;
    static const char keys[] = "dchv";
    static const char* names[] = {"layers (d)", "channels (c)", "heads (h)", "vocabulary (v)"};
    static const long long limits[] = {1024, 1 << 16, 1 << 12, 1 << 16};  // vocabulary: uint16 tokens in shards
    long long vals[4] = {0, 0, 0, 0};
    bool given[4] = {false, false, false, false};
    int last = -1;
    for (size_t i = 0; i < s.size();) {
        const char* k = strchr(keys, s[i]);
        if (k == nullptr || s[i] == 0 || (int)(k - keys) <= last) return false;
        last = (int)(k - keys);
        size_t j = ++i;
        while (j < s.size() && isdigit((unsigned char)s[j])) j++;
        if (j == i) return false;
        std::string digits = s.substr(i, j - i);
        vals[last] = digits.size() > 12 ? limits[last] + 1 : std::stoll(digits);
        given[last] = true;
        i = j;
    }
    *error = "";
    for (int f = 0; f < 4; f++) {
        if (given[f] && (vals[f] < 1 || vals[f] > limits[f])) {
            *error = "descriptor " + s + ": " + names[f] + " = " + std::to_string(vals[f]) + " must be in [1, " +
                     std::to_string(limits[f]) + "]";
            return true;
        }
    }
    c->num_layers = (int)vals[0];
    long long channels = given[1] ? vals[1] : 64 * vals[0];
    if (channels > limits[1]) {
        *error = "descriptor " + s + ": channels = 64 x layers = " + std::to_string(channels) + " exceed " +
                 std::to_string(limits[1]) + "; give c explicitly";
        return true;
    }
    c->channels = (int)channels;
    c->num_heads = given[2] ? (int)vals[2] : std::max(1, c->channels / 64);
    c->vocab_size = given[3] ? (int)vals[3] : 50257;
    c->padded_vocab_size = (c->vocab_size + 127) / 128 * 128;
    return true;
}
