// write_random_shard PATH N: a token shard (dataloader/shard.h) of N random GPT-2 token ids
// (xorshift64, fixed seed), for speed runs and launch recordings that need no real text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "dataloader/shard.h"

int main(int argc, char** argv) {
    if (argc != 3 || strtoull(argv[2], nullptr, 10) == 0) {
        fprintf(stderr, "usage: write_random_shard PATH N   (N > 0 tokens)\n");
        return 2;
    }
    std::vector<uint16_t> tokens(strtoull(argv[2], nullptr, 10));
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (uint16_t& t : tokens) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        t = (uint16_t)(x % 50257);
    }
    write_shard(argv[1], tokens.data(), tokens.size());
    return 0;
}
