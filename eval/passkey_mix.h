// The passkey training mix: a corpus (token ids, e.g. the KJV training shard) cut into the
// trainer's windows of T tokens, a stated fraction of them holding a passkey prompt in
// eval/passkey.h's format whose filler is the corpus's own text:
//
//   window k = tokens [k*T, k*T + T) of the output stream (the loader's window adds token k*T + T)
//   plain window    T corpus tokens, in corpus order
//   needle window   instruction, corpus a, needle(key), corpus b, question, answer(key)   = T tokens
//                   a + b = T - (instruction + needle + question + answer), a = round(depth * (a + b))
//   with prompts_max > 1 a needle window holds m prompts back to back, m uniform in [1, prompts_max]
//   (fewer if m prompts do not fit T), each laid out as above; the window's corpus tokens are cut
//   into m shares at uniform random points, and prompt i's share is its a_i + b_i. More prompts per
//   window means more retrieval targets per training token, at shorter needle distances.
//
// so the answer is a target inside the window, and the needle sits at every distance from the
// question the training length allows. The corpus is consumed in order (each token once), plain
// and needle windows alike; the stream ends when the corpus cannot fill the next window.
// Held out from training, so that retrieval is tested on what was never trained on:
//   - the evaluation's keys: the first `holdout_trials` draws of build/passkey_cpu_<attn>'s Rng(seed)
//     (passkey_draw_trial; every length asks these same keys) are never a training key;
//   - the evaluation's filler (" The grass is green. ..."): the filler is corpus text only;
//   - validation: the validation shard is the corpus's own, unchanged, and must hold no needle.
// Every random choice (needle or not, key, depth) comes from Rng(seed): one seed, one stream.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "eval/passkey.h"
#include "model/rand.h"

struct PasskeyMixOptions {
    int T = 128;                    // the training length: window size
    double fraction = 0.5;          // share of windows holding a needle, in [0, 1]
    uint64_t seed = 1;              // the mix's random stream
    uint64_t holdout_seed = 1337;   // build/passkey_cpu_<attn> -rs (its default)
    int holdout_trials = 1000;      // its -n at most: keys of that many trials are held out
    int prompts_max = 1;            // prompts per needle window: uniform in [1, prompts_max]
};

struct PasskeyMixNeedle {
    int64_t window;    // window index in the stream
    int key;
    int needle_pos;    // offset in the window of the needle's first token
    int question_pos;  // offset of the question's first token (the answer follows it)
};

struct PasskeyMix {
    std::vector<uint16_t> tokens;          // windows * T + 1 tokens (the last window's extra token: EOT)
    std::vector<PasskeyMixNeedle> needles; // in window order
    int64_t windows = 0;
    int64_t corpus_used = 0;               // corpus tokens placed in the stream
};

// The evaluation's keys for (seed, trials), as passkey_eval_length draws them.
inline std::unordered_set<int> passkey_holdout_keys(uint64_t seed, int trials) {
    std::unordered_set<int> keys;
    Rng rng(seed);
    for (int i = 0; i < trials; i++) {
        int key;
        double depth;
        passkey_draw_trial(rng, &key, &depth);
        keys.insert(key);
    }
    return keys;
}

// The longest instruction + needle + question + answer over all keys: T must exceed it.
inline int passkey_mix_fixed_tokens(const PasskeyParts& p) { return passkey_min_length(p); }

// One prompt of a needle window: its key, its depth, and the corpus tokens it takes (a + b).
struct PasskeyMixPrompt {
    int key;
    double depth;
    int filler;
};

// Tokens of instruction + needle + question + answer for this key.
inline int passkey_mix_prompt_tokens(const PasskeyParts& p, int key) {
    std::vector<int> needle_answer;
    p.codec.encode(passkey_needle_text(key) + passkey_answer_text(key), needle_answer);
    return (int)(p.instruction.size() + needle_answer.size() + p.question.size());
}

// Appends one prompt (instruction, a, needle, b, question, answer) to window w, its filler taken
// from corpus[*pos, ...).
inline void passkey_mix_prompt(const PasskeyParts& p, const uint16_t* corpus, int64_t* pos,
                               const PasskeyMixPrompt& pr, int64_t window, std::vector<int>* w, PasskeyMix* mix) {
    std::vector<int> needle, answer;
    p.codec.encode(passkey_needle_text(pr.key), needle);
    p.codec.encode(passkey_answer_text(pr.key), answer);
    int before = (int)(pr.depth * pr.filler + 0.5);
    w->insert(w->end(), p.instruction.begin(), p.instruction.end());
    w->insert(w->end(), corpus + *pos, corpus + *pos + before);
    int needle_pos = (int)w->size();
    w->insert(w->end(), needle.begin(), needle.end());
    w->insert(w->end(), corpus + *pos + before, corpus + *pos + pr.filler);
    int question_pos = (int)w->size();
    w->insert(w->end(), p.question.begin(), p.question.end());
    w->insert(w->end(), answer.begin(), answer.end());
    *pos += pr.filler;
    mix->needles.push_back({window, pr.key, needle_pos, question_pos});
}

// The prompts of one needle window: m keys (none held out) and depths from rng, as many as fit T,
// the window's corpus tokens cut into their shares. Returns the corpus tokens the window takes.
inline int passkey_mix_draw_window(const PasskeyParts& p, Rng& rng, const std::unordered_set<int>& held_out,
                                   const PasskeyMixOptions& o, std::vector<PasskeyMixPrompt>* prompts) {
    int m = o.prompts_max > 1 ? 1 + (int)(rng.uniform() * o.prompts_max) : 1;
    m = std::min(m, o.prompts_max);
    prompts->clear();
    int fixed = 0;
    for (int i = 0; i < m; i++) {
        PasskeyMixPrompt pr{0, 0.0, 0};
        do passkey_draw_trial(rng, &pr.key, &pr.depth);
        while (held_out.count(pr.key));
        int tokens = passkey_mix_prompt_tokens(p, pr.key);
        if (i > 0 && fixed + tokens > o.T) break;  // the first always fits (T exceeds the longest prompt)
        fixed += tokens;
        prompts->push_back(pr);
    }
    int filler = o.T - fixed;
    std::vector<int> cuts{0, filler};
    for (size_t i = 1; i < prompts->size(); i++) cuts.push_back((int)(rng.uniform() * (filler + 1)));
    std::sort(cuts.begin(), cuts.end());
    for (size_t i = 0; i < prompts->size(); i++) (*prompts)[i].filler = std::min(cuts[i + 1], filler) - cuts[i];
    return filler;
}

// The mix of corpus[0, n) (see the top of this file). Throws std::invalid_argument when T cannot
// hold the prompt or the fraction or held-out trials are out of range.
inline PasskeyMix passkey_mix_build(const PasskeyParts& p, const uint16_t* corpus, int64_t n,
                                    const PasskeyMixOptions& o) {
    int fixed = passkey_mix_fixed_tokens(p);
    if (o.T <= fixed)
        throw std::invalid_argument("training length " + std::to_string(o.T) + " cannot hold the passkey prompt: "
                                    "instruction + needle + question + answer take up to " + std::to_string(fixed) +
                                    " tokens; use a length above " + std::to_string(fixed));
    if (!(o.fraction >= 0.0 && o.fraction <= 1.0))
        throw std::invalid_argument("needle fraction " + std::to_string(o.fraction) + " is not in [0, 1]");
    if (o.prompts_max < 1 || o.prompts_max > 16)
        throw std::invalid_argument("prompts per needle window " + std::to_string(o.prompts_max) + " not in [1, 16]");
    if (o.holdout_trials < 0 || o.holdout_trials > 80000)
        throw std::invalid_argument("held-out trials " + std::to_string(o.holdout_trials) +
                                    " not in [0, 80000]: at most 80000 of the 90000 keys can be held out");
    std::unordered_set<int> held_out = passkey_holdout_keys(o.holdout_seed, o.holdout_trials);
    PasskeyMix mix;
    Rng rng(o.seed);
    int64_t pos = 0;
    std::vector<PasskeyMixPrompt> prompts;
    for (;;) {
        bool needle = rng.uniform() < o.fraction;
        int64_t take = needle ? passkey_mix_draw_window(p, rng, held_out, o, &prompts) : o.T;
        if (pos + take > n) break;
        if (needle) {
            std::vector<int> w;
            for (const PasskeyMixPrompt& pr : prompts) passkey_mix_prompt(p, corpus, &pos, pr, mix.windows, &w, &mix);
            mix.tokens.insert(mix.tokens.end(), w.begin(), w.end());
        } else {
            mix.tokens.insert(mix.tokens.end(), corpus + pos, corpus + pos + o.T);
            pos += o.T;
        }
        mix.windows++;
    }
    mix.tokens.push_back((uint16_t)GPT2Tokenizer::EOT);
    mix.corpus_used = pos;
    return mix;
}

// Offsets in tokens[0, n) where a needle (" The pass key is" not right after the question's "?")
// starts; with questions_too, every " The pass key is" (the question's too). A stream that is to
// hold no passkey text (validation, a plain corpus) gives none with questions_too.
inline std::vector<int64_t> passkey_find_needles(const PasskeyParts& p, const uint16_t* tokens, int64_t n,
                                                 bool questions_too = false) {
    std::vector<int> opening, mark;
    p.codec.encode(" The pass key is", opening);
    p.codec.encode("?", mark);
    std::vector<int64_t> at;
    int64_t m = (int64_t)opening.size();
    for (int64_t i = 0; i + m <= n; i++) {
        int64_t j = 0;
        while (j < m && tokens[i + j] == opening[j]) j++;
        if (j < m) continue;
        if (questions_too || i == 0 || tokens[i - 1] != mark[0]) at.push_back(i);
    }
    return at;
}
