// libFuzzer target: the shard parser and the data loader on arbitrary bytes (`make fuzz`).
// Each input is parsed from memory (parse_shard) and, written to a file, opened by the loader,
// which reads a few batches. Either may reject the input with an error naming the file; neither
// may crash, read out of bounds or return a batch with an id >= the vocab size.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "dataloader/dataloader.h"
#include "dataloader/shard.h"

static std::string shard_path() {
    static std::string path = "/tmp/fuzz_shard_" + std::to_string(getpid()) + ".bin";
    static bool cleanup = (atexit([] { unlink(path.c_str()); }), true);
    (void)cleanup;
    return path;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const int vocab_size = 50257;
    std::vector<uint16_t> tokens;
    std::string err = parse_shard(data, size, "input", vocab_size, &tokens);
    if (err.empty() && size != SHARD_HEADER_BYTES + 2 * tokens.size()) abort();
    for (size_t i = 0; err.empty() && i < tokens.size(); i++)
        if (tokens[i] >= vocab_size) abort();
    if (!err.empty() && err.find("input") == std::string::npos) abort();  // errors name the file

    unlink(shard_path().c_str());  // rewriting a truncated file would flush it to disk on close (ext4)
    FILE* f = fopen(shard_path().c_str(), "wb");
    if (!f) abort();
    fwrite(data, 1, size, f);
    fclose(f);
    const int B = 2, T = 3;
    std::vector<int> in(B * T), tg(B * T);
    try {
        DataLoader dl;
        dl.init(shard_path(), B, T, 0, 1, size, true, vocab_size);
        for (int step = 0; step < 4; step++) {
            dl.next_batch(in.data(), tg.data());
            if (!err.empty()) abort();  // the loader returned a batch from a shard the parser rejected
            for (int i = 0; i < B * T; i++)
                if (in[i] < 0 || in[i] >= vocab_size || tg[i] < 0 || tg[i] >= vocab_size) abort();
        }
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()).find(shard_path()) == std::string::npos) abort();  // errors name the file
    }
    return 0;
}
