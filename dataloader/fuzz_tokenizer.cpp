// libFuzzer target: the GPT-2 tokenizer on arbitrary bytes (`make fuzz`). The pieces must tile
// the input, decode(encode(s)) must give s back, and the heap merge must equal the direct loop.
// Loads the vocabulary from GPT2_VOCAB_DIR or third_party/ (scripts/install_gpt2_vocab.sh).
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/tokenizer.h"

static GPT2Tokenizer tok;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    try {
        tok.load(GPT2Tokenizer::default_dir());
    } catch (const std::exception& e) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", e.what());
        exit(1);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text((const char*)data, size);
    std::vector<std::pair<size_t, size_t>> pieces;
    GPT2Tokenizer::pre_tokenize(text, pieces);
    size_t at = 0;
    for (auto [a, b] : pieces) {
        if (a != at || b <= a) abort();
        if (b - a <= 512) {  // the direct loop is quadratic: keep the runs fast
            std::vector<int> simple, heap;
            tok.bpe_simple(text.substr(a, b - a), simple);
            tok.bpe_heap(text.substr(a, b - a), heap);
            if (simple != heap) abort();
        }
        at = b;
    }
    if (at != size) abort();
    std::vector<int> ids;
    tok.encode(text, ids, nullptr);
    if (tok.decode(ids.data(), ids.size()) != text) abort();
    std::vector<BpeCache> caches(1);
    std::vector<int> parallel;
    tok.encode_parallel(text, parallel, caches, 8);
    if (parallel != ids) abort();
    return 0;
}
