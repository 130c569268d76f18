// The build's list of attention variants (the Makefile's ATTN_VARIANTS, passed in as
// MAKE_ATTN_VARIANTS; `make -s print-variants` prints it) names the variants of
// attention/attention_kind.h's ATTN_VARIANT_TABLE, in the table's order: every program the build
// makes per variant exists for each variant the code knows, and for no other.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>
#include "attention/attention_kind.h"

#ifndef MAKE_ATTN_VARIANTS
#error "build with make build/test_variant_list: test/test.mk passes the Makefile's ATTN_VARIANTS"
#endif

TEST_CASE("the Makefile's variant list is ATTN_VARIANT_TABLE's names, in order") {
    std::vector<std::string> from_make;
    std::istringstream words(MAKE_ATTN_VARIANTS);
    for (std::string w; words >> w;) { from_make.push_back(w); }
    std::vector<std::string> from_table;
    for (int i = 0; i < ATTN_NUM_KINDS; i++) { from_table.push_back(ATTN_VARIANT_TABLE[i].name); }
    CHECK(from_make.size() == from_table.size());
    for (size_t i = 0; i < from_make.size() && i < from_table.size(); i++) {
        CHECK_MESSAGE(from_make[i] == from_table[i], "variant ", i, ": make has ", from_make[i], ", the table ",
                      from_table[i]);
    }
}
