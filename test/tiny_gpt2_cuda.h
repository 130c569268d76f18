// The tiny GPT-2 that the CUDA back end's tests train (test_model_cuda, test_distributed), its data
// and the host copy of its bf16 buffers.
#pragma once

#include <vector>

#include "model/gpt2_cuda.cuh"
#include "model/rand.h"

// L = 2, C = 64, NH = 2 (hd = 32, the smallest head size of the CUDA attention kernels); V = 97 is
// not a multiple of 8, so the padded columns and rows (to 104) are exercised.
inline GPT2Config tiny_cuda_config(AttnKind kind, float p, int max_seq_len) {
    GPT2Config c;
    c.max_seq_len = max_seq_len;
    c.vocab_size = 97;
    c.padded_vocab_size = 104;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 64;
    c.attn = kind;
    c.p = p;
    return c;
}

// B rows of a learnable token stream: mostly next = (5 cur + 3) mod V, with 1 in 8 tokens random.
struct TokenBatch {
    std::vector<int> inputs, targets;  // (B,T) each
};
inline TokenBatch make_token_batch(int B, int T, int V, uint64_t seed) {
    Rng rng(seed);
    TokenBatch batch;
    for (int b = 0; b < B; b++) {
        int cur = (int)(rng.next_u64() % V);
        std::vector<int> seq(T + 1);
        for (int t = 0; t <= T; t++) {
            seq[t] = cur;
            cur = rng.next_u64() % 8 == 0 ? (int)(rng.next_u64() % V) : (5 * cur + 3) % V;
        }
        batch.inputs.insert(batch.inputs.end(), seq.begin(), seq.end() - 1);
        batch.targets.insert(batch.targets.end(), seq.begin() + 1, seq.end());
    }
    return batch;
}

// host copy of n device bf16 values, as floats
inline std::vector<float> download_bf16(const floatX* device, size_t n) {
    std::vector<floatX> bits(n);
    cudaCheck(cudaMemcpy(bits.data(), device, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(bits[i]);
    return out;
}
