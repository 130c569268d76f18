// Sampling: greedy or top-k generation from a prompt, with any back end (model/backend_cpu.h
// lists the interface). Generation runs the model at its training shape (B,T) so that no back end
// reallocates its activations: row 0 holds the context, the other rows are filler, and the
// causal model makes row 0's logits independent of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dataloader/text_codec.h"
#include "model/rand.h"

// The next token from logits (only the first V of them are real tokens).
// top_k <= 1 or temperature <= 0: greedy (the first maximum). Else: softmax(logits / temperature)
// restricted to the top_k largest, sampled with rng.
inline int sample_token(const float* logits, int V, int top_k, float temperature, Rng& rng) {
    if (top_k <= 1 || temperature <= 0.0f) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    int k = std::min(top_k, V);
    std::vector<int> idx(V);
    for (int i = 0; i < V; i++) idx[i] = i;
    // ties broken by index, so the result does not depend on the sort's implementation
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    std::vector<double> prob(k);
    double top = logits[idx[0]], sum = 0;
    for (int i = 0; i < k; i++) {
        prob[i] = std::exp(((double)logits[idx[i]] - top) / temperature);
        sum += prob[i];
    }
    double u = rng.uniform() * sum, acc = 0;
    for (int i = 0; i < k; i++) {
        acc += prob[i];
        if (u < acc) return idx[i];
    }
    return idx[k - 1];
}

// Appends n_new tokens to `tokens` (the prompt; it must not be empty). The context is the last T
// tokens. B, T: the shape the model runs at; fill: the token of the unused positions.
template <class Model>
void generate(Model& model, std::vector<int>& tokens, int n_new, int B, int T, int top_k, float temperature,
              Rng& rng, int fill) {
    int V = model.config.vocab_size;
    std::vector<int> inputs((size_t)B * T, fill);
    std::vector<float> logits(model.config.padded_vocab_size);
    for (int i = 0; i < n_new; i++) {
        int len = std::min((int)tokens.size(), T);
        std::copy(tokens.end() - len, tokens.end(), inputs.begin());
        model.forward(inputs.data(), nullptr, B, T);
        model.logits_row(0, len - 1, logits.data());
        tokens.push_back(sample_token(logits.data(), V, top_k, temperature, rng));
    }
}

// "---- sample at step N", the prompt and n_new sampled tokens as text (GPT-2 BPE or bytes: their
// ids where there is no codec), "----". The context starts with eot, then the prompt's tokens; eot also fills the
// unused positions.
template <class Model>
void print_sample(Model& model, const TextCodec* codec, const std::string& prompt, int eot, int step, int n_new, int B,
                  int T, int top_k, float temperature, Rng& rng) {
    std::vector<int> tokens = {eot};
    if (!prompt.empty()) codec->encode(prompt, tokens);
    size_t prompt_len = tokens.size();
    generate(model, tokens, n_new, B, T, top_k, temperature, rng, eot);
    printf("---- sample at step %d\n", step);
    if (codec != nullptr) {
        printf("%s%s\n", prompt.c_str(), codec->decode(tokens.data() + prompt_len, tokens.size() - prompt_len).c_str());
    } else {
        for (size_t i = prompt_len; i < tokens.size(); i++) printf("%d ", tokens[i]);
        printf("\n");
    }
    printf("----\n");
}
