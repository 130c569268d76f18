// Passkey retrieval (Mohtashami & Jaggi 2023): can the model find a 5-digit key hidden in a long
// stretch of repeated filler text and repeat it when asked?
//
// A prompt of L tokens (GPT-2 BPE), built in tokens:
//   instruction   "There is an important info hidden inside a lot of irrelevant text. Find it and
//                  memorize it. I will quiz you about the important information there."
//   fillers       " The grass is green. The sky is blue. The sun is yellow. Here we go. There and
//                  back again." repeated, as many times as fit
//   needle        " The pass key is 68231. Remember it. 68231 is the pass key." between two
//                  filler repetitions, at a depth in [0, 1] (0: right after the instruction,
//                  1: right before the question)
//   question      " What is the pass key? The pass key is"
//   answer        " 68231"
// instruction + fillers + needle + question + answer <= L, within one filler of L. Every part
// starts at a boundary of GPT-2's pre-tokeniser (a space-led word after a '.', '?' or a word), so
// the concatenated token lists are exactly the encoding of the concatenated text.
//
// Scoring, one forward pass per trial: the model reads prompt + answer and the trial is correct
// iff at every answer position the argmax of the logits (first vocab_size entries, ties to the
// lower id, as eval/sample.h's greedy sampling) is the next answer token. That is exactly "greedy
// decoding after the prompt reproduces the key": up to the first wrong prediction, greedy decoding
// would have fed itself exactly these answer tokens, so it sees the same inputs and makes the same
// predictions, and at the first wrong one it leaves the key.
// Every trial of a length runs at (B, T) = (1, L): the tokens after the answer are EOT padding the
// causal model never lets earlier positions see, and a fixed shape keeps the back end from
// reallocating its activations for every trial.
// Trials draw the key (uniform in [10000, 99999]) and the depth (uniform in (0, 1)) from
// Rng(seed), restarted for every length, so every length asks the same keys at the same depths.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/text_codec.h"
#include "model/rand.h"

constexpr int PASSKEY_MIN_KEY = 10000, PASSKEY_MAX_KEY = 99999;
constexpr int PASSKEY_DEPTH_BUCKETS = 4;  // accuracy per quarter of depth

inline const char* passkey_instruction_text() {
    return "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
           "I will quiz you about the important information there.";
}
inline const char* passkey_filler_text() {
    return " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
}
inline const char* passkey_question_text() { return " What is the pass key? The pass key is"; }
inline std::string passkey_needle_text(int key) {
    std::string k = std::to_string(key);
    return " The pass key is " + k + ". Remember it. " + k + " is the pass key.";
}
inline std::string passkey_answer_text(int key) { return " " + std::to_string(key); }

// The key-independent parts, encoded once.
struct PasskeyParts {
    TextCodec codec;  // GPT-2 BPE or bytes: the model's vocabulary
    std::vector<int> instruction, filler, question;
    int max_needle_answer = 0;  // the most tokens needle + answer take over all 5-digit keys
};

inline PasskeyParts passkey_parts(const TextCodec& codec) {
    PasskeyParts p;
    p.codec = codec;
    codec.encode(passkey_instruction_text(), p.instruction);
    codec.encode(passkey_filler_text(), p.filler);
    codec.encode(passkey_question_text(), p.question);
    // the key's digits split into a key-dependent number of tokens, three times over (twice in
    // the needle, once as the answer): the shortest usable length is set by the longest
    BpeCache cache;
    std::vector<int> ids;
    for (int key = PASSKEY_MIN_KEY; key <= PASSKEY_MAX_KEY; key++) {
        ids.clear();
        codec.encode(passkey_needle_text(key) + passkey_answer_text(key), ids, &cache);
        p.max_needle_answer = std::max(p.max_needle_answer, (int)ids.size());
    }
    return p;
}
inline PasskeyParts passkey_parts(const GPT2Tokenizer& tok) { return passkey_parts(TextCodec::bpe(tok)); }

// The smallest L that holds instruction + needle + question + answer for every key (no filler).
inline int passkey_min_length(const PasskeyParts& p) {
    return (int)(p.instruction.size() + p.question.size()) + p.max_needle_answer;
}

struct PasskeyPrompt {
    std::vector<int> tokens;  // instruction, fillers, needle, fillers, question (the answer not included)
    std::vector<int> answer;  // " <key>"
    int key = 0;
    int needle_pos = 0;       // index in tokens of the needle's first token
    int needle_len = 0;
    int fillers = 0;          // filler repetitions in the prompt
    int fillers_before = 0;   // of them before the needle
    double depth = 0;         // fillers_before / fillers: the depth the needle was placed at (0 if no filler)
};

// The prompt of total length (tokens + answer) <= L, as many fillers as fit, the needle after
// round(depth * fillers) of them. Throws if L cannot hold instruction + needle + question + answer.
inline PasskeyPrompt passkey_prompt(const PasskeyParts& p, int key, double depth, int L) {
    if (key < PASSKEY_MIN_KEY || key > PASSKEY_MAX_KEY || !(depth >= 0.0 && depth <= 1.0))
        throw std::invalid_argument("passkey_prompt: key " + std::to_string(key) + " or depth " +
                                    std::to_string(depth) + " out of range");
    PasskeyPrompt r;
    r.key = key;
    std::vector<int> needle;
    p.codec.encode(passkey_needle_text(key), needle);
    p.codec.encode(passkey_answer_text(key), r.answer);
    int fixed = (int)(p.instruction.size() + needle.size() + p.question.size() + r.answer.size());
    if (fixed > L)
        throw std::invalid_argument("length " + std::to_string(L) + " is too short for the passkey prompt: "
                                    "instruction + needle + question + answer take " + std::to_string(fixed) +
                                    " tokens");
    r.fillers = (L - fixed) / (int)p.filler.size();
    r.fillers_before = (int)(depth * r.fillers + 0.5);
    r.depth = r.fillers > 0 ? (double)r.fillers_before / r.fillers : 0.0;
    r.needle_len = (int)needle.size();
    r.tokens = p.instruction;
    for (int i = 0; i < r.fillers_before; i++) r.tokens.insert(r.tokens.end(), p.filler.begin(), p.filler.end());
    r.needle_pos = (int)r.tokens.size();
    r.tokens.insert(r.tokens.end(), needle.begin(), needle.end());
    for (int i = r.fillers_before; i < r.fillers; i++) r.tokens.insert(r.tokens.end(), p.filler.begin(), p.filler.end());
    r.tokens.insert(r.tokens.end(), p.question.begin(), p.question.end());
    return r;
}

// The greedy token of a logits row: the first maximum among the V real tokens.
inline int passkey_argmax(const float* logits, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

// Back ends that can skip the logits of rows nobody reads (ModelCPU::set_logits_from_row) are told
// to; the others compute them all.
template <class Model>
auto passkey_logits_from(Model& model, size_t row, int) -> decltype(model.set_logits_from_row(row), void()) {
    model.set_logits_from_row(row);
}
template <class Model>
void passkey_logits_from(Model&, size_t, long) {}

// One forward pass over prompt + answer at (1, T) (padded after them with EOT, or the last token
// of a smaller vocabulary: positions after the answer are never read) and the greedy prediction at
// every answer position: predicted[i] is the argmax after prompt + answer[0, i). Returns whether
// predicted == answer, i.e. whether greedy decoding would reproduce the answer.
template <class Model>
bool passkey_greedy_match(Model& model, const std::vector<int>& prompt, const std::vector<int>& answer, int T,
                          std::vector<int>* predicted = nullptr) {
    int n = (int)(prompt.size() + answer.size());
    if (prompt.empty() || answer.empty() || n > T)
        throw std::invalid_argument("passkey_greedy_match: prompt " + std::to_string(prompt.size()) + " + answer " +
                                    std::to_string(answer.size()) + " tokens do not fit T = " + std::to_string(T));
    std::vector<int> inputs(T, std::min(GPT2Tokenizer::EOT, model.config.vocab_size - 1));  // (1, T)
    std::copy(prompt.begin(), prompt.end(), inputs.begin());
    std::copy(answer.begin(), answer.end(), inputs.begin() + prompt.size());
    passkey_logits_from(model, prompt.size() - 1, 0);  // only the answer positions are read
    model.forward(inputs.data(), nullptr, 1, T);
    std::vector<float> logits(model.config.padded_vocab_size);
    if (predicted) predicted->clear();
    bool match = true;
    for (size_t i = 0; i < answer.size(); i++) {
        // position prompt.size() - 1 + i has read the prompt and answer[0, i)
        model.logits_row(0, (int)(prompt.size() - 1 + i), logits.data());
        int next = passkey_argmax(logits.data(), model.config.vocab_size);
        if (predicted) predicted->push_back(next);
        match = match && next == answer[i];
    }
    passkey_logits_from(model, 0, 0);
    return match;
}

struct PasskeyTrial {
    int key;
    double depth;  // as placed (PasskeyPrompt::depth)
    bool correct;
    int distance;  // tokens from the needle's first token to the question's
};

struct PasskeyResult {
    int length = 0;
    int trials = 0, correct = 0;
    double accuracy = 0;    // correct / trials
    double mean_depth = 0;  // over the trials
    int bucket_trials[PASSKEY_DEPTH_BUCKETS] = {}, bucket_correct[PASSKEY_DEPTH_BUCKETS] = {};  // per quarter of depth
    std::vector<PasskeyTrial> per_trial;
};

// The depth quarter of a trial: [0, 0.25), [0.25, 0.5), [0.5, 0.75), [0.75, 1].
inline int passkey_depth_bucket(double depth) {
    return std::min(PASSKEY_DEPTH_BUCKETS - 1, (int)(depth * PASSKEY_DEPTH_BUCKETS));
}

// One trial's key (uniform in [10000, 99999]) and depth (uniform in (0, 1)), in this order. The
// training mix (eval/passkey_mix.h) replays these draws to hold the evaluation's keys out.
inline void passkey_draw_trial(Rng& rng, int* key, double* depth) {
    *key = PASSKEY_MIN_KEY + (int)(rng.next_u64() % (uint64_t)(PASSKEY_MAX_KEY - PASSKEY_MIN_KEY + 1));
    *depth = rng.uniform();
}

// `trials` trials at length L, keys and depths drawn from Rng(seed). progress: a line per trial
// (length, trial i/n, key, depth, verdict, running accuracy), or null for none.
template <class Model>
PasskeyResult passkey_eval_length(Model& model, const PasskeyParts& parts, int L, int trials, uint64_t seed,
                                  FILE* progress) {
    PasskeyResult res;
    res.length = L;
    Rng rng(seed);
    double depth_sum = 0;
    for (int i = 0; i < trials; i++) {
        int key;
        double depth;
        passkey_draw_trial(rng, &key, &depth);
        PasskeyPrompt pr = passkey_prompt(parts, key, depth, L);
        bool ok = passkey_greedy_match(model, pr.tokens, pr.answer, L);
        res.trials++;
        res.correct += ok;
        depth_sum += pr.depth;
        int b = passkey_depth_bucket(pr.depth);
        res.bucket_trials[b]++;
        res.bucket_correct[b] += ok;
        res.per_trial.push_back({key, pr.depth, ok, (int)pr.tokens.size() - (int)parts.question.size() - pr.needle_pos});
        if (progress) {
            fprintf(progress, "length %d trial %d/%d: key %d depth %.2f %s | accuracy %d/%d = %.1f%%\n", L, i + 1,
                    trials, key, pr.depth, ok ? "correct" : "wrong", res.correct, res.trials,
                    100.0 * res.correct / res.trials);
            fflush(progress);
        }
    }
    res.accuracy = trials > 0 ? (double)res.correct / trials : 0.0;
    res.mean_depth = trials > 0 ? depth_sum / trials : 0.0;
    return res;
}
