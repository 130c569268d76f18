// The variants a test's loops over every variant run: each line of attention_kind.h's
// ATTN_VARIANTS, or those named in the environment's TEST_VARIANTS (comma-separated names), e.g.
// TEST_VARIANTS=lssar while working on one variant; test_scratch_variant sets it to its variant.
// A name that is not a variant stops the test program, naming it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention/attention_kind.h"

inline const std::vector<AttnKind>& test_kinds() {
    static const std::vector<AttnKind> kinds = [] {
        std::vector<AttnKind> out;
        const char* env = getenv("TEST_VARIANTS");
        if (env == nullptr || *env == 0) return std::vector<AttnKind>(ATTN_ALL_KINDS, ATTN_ALL_KINDS + ATTN_NUM_KINDS);
        std::string names(env);
        for (size_t at = 0; at <= names.size();) {
            size_t end = names.find(',', at);
            if (end == std::string::npos) end = names.size();
            std::string name = names.substr(at, end - at);
            AttnKind kind;
            if (!attn_kind_from_name(name.c_str(), &kind)) {
                fprintf(stderr, "TEST_VARIANTS=%s: '%s' is not a variant (%s)\n", env, name.c_str(),
                        attn_kind_list().c_str());
                exit(2);
            }
            out.push_back(kind);
            at = end + 1;
        }
        return out;
    }();
    return kinds;
}

// The same as the table's rows.
inline std::vector<AttnVariant> test_variants() {
    std::vector<AttnVariant> out;
    for (AttnKind kind : test_kinds()) out.push_back(attn_variant(kind));
    return out;
}
