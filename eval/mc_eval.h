// Zero-shot multiple-choice scoring (HellaSwag, ARC-Easy, PIQA, SciQ, the KJV cloze) of a model
// on an eval file (eval/mc_file.h), for the tool eval/mc_eval.cu and for the trainer.
//
// Each completion is scored by the cross-entropy of its tokens given the context: the row
// context + completion is fed to the model and the loss is read at the positions whose next token
// is a completion token (position len(context) - 1 + i predicts completion token i), as llm.c's
// hellaswag.py and its EvalLoader do. Per completion:
//   sum_loss   the summed loss of its tokens (= -log p(completion | context))
//   mean_loss  sum_loss / its number of tokens
// acc counts the examples whose lowest sum_loss is the label's, acc_norm those whose lowest
// mean_loss is (llm.c's choice, the number it reports as HellaSwag accuracy); ties go to the
// lower index. lm-evaluation-harness defines acc the same way (highest log-likelihood) but its
// acc_norm divides the log-likelihood by the completion's length in characters, not tokens, so
// acc matches it and acc_norm is close to it, not equal.
//
// All completions of an example go through one forward, one row each, and several examples share
// a forward when the rows allow: mc_score packs the examples into forwards of B rows (B >= the
// file's largest number of completions); unused rows and positions hold token 0 and are never
// read, and a causal model's scores of a row do not depend on what follows it. The tool runs one
// example per forward at about its own length; the trainer packs its own (B, T) batch, so that
// the model keeps its activations.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/mc_file.h"

struct McExampleScore {
    int index = 0, label = 0;
    int pred = 0, pred_norm = 0;              // argmin of sum_loss, of mean_loss
    std::vector<double> sum_loss, mean_loss;  // (number of completions)
};

// The 95% Wilson score interval of a proportion k/n (better than the normal one near 0 and 1).
inline void mc_wilson95(int k, int n, double* lo, double* hi) {
    if (n <= 0) { *lo = 0; *hi = 1; return; }
    const double z = 1.959963984540054;
    double p = (double)k / n, z2n = z * z / n;
    double center = (p + z2n / 2) / (1 + z2n);
    double half = z / (1 + z2n) * std::sqrt(p * (1 - p) / n + z2n / (4.0 * n));
    *lo = std::max(0.0, center - half);
    *hi = std::min(1.0, center + half);
}

struct McResult {
    int examples = 0, correct = 0, correct_norm = 0;
    double chance = 0;  // mean over the examples of 1 / number of completions
    std::vector<McExampleScore> per_example;
    double acc() const { return examples ? (double)correct / examples : 0.0; }
    double acc_norm() const { return examples ? (double)correct_norm / examples : 0.0; }
};

inline int mc_argmin(const std::vector<double>& v) {
    return (int)(std::min_element(v.begin(), v.end()) - v.begin());
}

// Fills inputs/targets (B*T, zeros outside the rows) for examples [first, first+count) of ex, one
// row per completion from row 0 on; mask[b*T + t] = 1 where the loss is read.
inline void mc_fill_rows(const std::vector<const McExample*>& ex, int B, int T, std::vector<int>& inputs,
                         std::vector<int>& targets, std::vector<char>& mask) {
    inputs.assign((size_t)B * T, 0);
    targets.assign((size_t)B * T, 0);
    mask.assign((size_t)B * T, 0);
    int row = 0;
    for (const McExample* e : ex) {
        int nc = (int)e->completions.size(), ctx = (int)e->context.size();
        if (row + nc > B || e->longest_row() > T)
            throw std::logic_error("mc_fill_rows: example " + std::to_string(e->index) + " does not fit (B, T) = (" +
                                   std::to_string(B) + ", " + std::to_string(T) + ")");
        for (int c = 0; c < nc; c++, row++) {
            const std::vector<int>& comp = e->completions[c];
            int* in = inputs.data() + (size_t)row * T;
            std::copy(e->context.begin(), e->context.end(), in);
            std::copy(comp.begin(), comp.end(), in + ctx);
            for (size_t i = 0; i < comp.size(); i++) {
                targets[(size_t)row * T + ctx - 1 + i] = comp[i];
                mask[(size_t)row * T + ctx - 1 + i] = 1;
            }
        }
    }
}

// One forward over the examples ex (packed as mc_fill_rows) and their scores.
template <class Model>
void mc_score_forward(Model& model, const std::vector<const McExample*>& ex, int B, int T,
                      std::vector<McExampleScore>& out) {
    std::vector<int> inputs, targets;
    std::vector<char> mask;
    mc_fill_rows(ex, B, T, inputs, targets, mask);
    model.forward(inputs.data(), targets.data(), B, T);
    std::vector<float> losses((size_t)B * T);  // (B, T)
    model.losses(losses.data());
    int row = 0;
    for (const McExample* e : ex) {
        McExampleScore s;
        s.index = e->index;
        s.label = e->label;
        for (size_t c = 0; c < e->completions.size(); c++, row++) {
            double sum = 0;
            for (int t = 0; t < T; t++)
                if (mask[(size_t)row * T + t]) sum += losses[(size_t)row * T + t];
            s.sum_loss.push_back(sum);
            s.mean_loss.push_back(sum / e->completions[c].size());
        }
        s.pred = mc_argmin(s.sum_loss);
        s.pred_norm = mc_argmin(s.mean_loss);
        out.push_back(std::move(s));
    }
}

// Scores the examples `which` (indices into file.examples) in forwards of B rows, as many examples
// per forward as fit. t_step 0: every forward has T positions (one shape: the model keeps its
// activations). t_step > 0: examples are grouped by their longest row rounded up to a multiple of
// t_step (at most T), shortest group first, and each group runs at its own length: the positions
// a forward computes are then at most t_step - 1 more than the rows need, and the model changes
// shape once per group. Results are in the order of `which` either way. progress: a line about
// every 5 s (examples, running accuracies, examples/s, ETA) on that stream, or null.
template <class Model>
McResult mc_score(Model& model, const McFile& file, const std::vector<int>& which, int B, int T,
                  FILE* progress = nullptr, int t_step = 0) {
    if (B < file.max_completions || T < file.longest_row)
        throw std::invalid_argument(file.path + ": examples of up to " + std::to_string(file.max_completions) +
                                    " completions and " + std::to_string(file.longest_row) +
                                    " tokens do not fit forwards of (B, T) = (" + std::to_string(B) + ", " +
                                    std::to_string(T) + ")");
    auto length_of = [&](int i) {  // the forward length of example i
        if (t_step <= 0) return T;
        int n = file.examples.at(i).longest_row();
        return std::min(T, (n + t_step - 1) / t_step * t_step);
    };
    std::vector<int> order(which.size());  // positions in `which`, in the order they are scored
    for (size_t k = 0; k < order.size(); k++) order[k] = (int)k;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return length_of(which[a]) < length_of(which[b]); });
    McResult r;
    std::vector<McExampleScore> scored;
    auto t0 = std::chrono::steady_clock::now(), last = t0;
    size_t next = 0;
    while (next < order.size()) {
        std::vector<const McExample*> batch;
        int rows = 0, len = length_of(which[order[next]]);
        while (next < order.size() && length_of(which[order[next]]) == len) {
            const McExample& e = file.examples.at(which[order[next]]);
            if (rows + (int)e.completions.size() > B) break;
            rows += (int)e.completions.size();
            batch.push_back(&e);
            next++;
        }
        mc_score_forward(model, batch, B, len, scored);
        for (size_t i = scored.size() - batch.size(); i < scored.size(); i++) {
            const McExampleScore& s = scored[i];
            r.examples++;
            r.correct += s.pred == s.label;
            r.correct_norm += s.pred_norm == s.label;
            r.chance += 1.0 / s.sum_loss.size();
        }
        auto now = std::chrono::steady_clock::now();
        if (progress && std::chrono::duration<double>(now - last).count() >= 5.0 && next < order.size()) {
            last = now;
            double s = std::chrono::duration<double>(now - t0).count(), rate = r.examples / s;
            fprintf(progress, "examples %d/%zu | acc %.4f | acc_norm %.4f | %.1f examples/s | ETA %.0f s\n", r.examples,
                    which.size(), r.acc(), r.acc_norm(), rate, (which.size() - r.examples) / rate);
            fflush(progress);
        }
    }
    r.per_example.resize(scored.size());
    for (size_t k = 0; k < scored.size(); k++) r.per_example[order[k]] = std::move(scored[k]);
    if (r.examples) r.chance /= r.examples;
    return r;
}

// ----------------------------------------------------------------------------
// The trainer's evaluation: one or more eval files every `every` steps and at the end. With
// several ranks, rank r scores the examples r, r + W, ... and the counts are summed over the
// ranks. train_gpt2.cu calls init() in its setup and run() at the steps due().

struct McTrainerEval {
    std::vector<McFile> files;
    std::vector<std::string> names;  // "data/mc/hellaswag_val.bin" -> "hellaswag_val"
    int every = 0, max_examples = 0, rank = 0, world = 1;

    // list: comma-separated eval files ("" = none). Each is read and checked against the model's
    // vocabulary and maximum length T; a bad file ends the trainer at start with mc_read's message.
    void init(const std::string& list, int every_, int max_examples_, int vocab_size, int T, int rank_, int world_) {
        every = every_;
        max_examples = max_examples_;
        rank = rank_;
        world = world_;
        for (size_t at = 0; at < list.size();) {
            size_t comma = list.find(',', at);
            std::string path = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            at = comma == std::string::npos ? list.size() : comma + 1;
            if (path.empty()) continue;
            files.push_back(mc_read(path, vocab_size, T));
            std::string base = path.substr(path.find_last_of('/') + 1);
            if (base.size() > 4 && base.compare(base.size() - 4, 4, ".bin") == 0) base.resize(base.size() - 4);
            names.push_back(base);
        }
    }

    bool enabled() const { return !files.empty(); }
    bool due(int step, bool last) const { return enabled() && (last || (every > 0 && step % every == 0)); }

    // Scores every file at the trainer's (B, T) (more rows if an example needs them), prints one
    // line per file and returns the JSON fields for log.jsonl (",\"mc_<name>_acc\":..." ...).
    // Dist: the trainer's Distributed (average() over the ranks); every rank calls this.
    template <class Model, class Dist>
    std::string run(Model& model, Dist& dist, int B, int T, int step) {
        std::string json;
        for (size_t f = 0; f < files.size(); f++) {
            const McFile& file = files[f];
            int total = (int)file.examples.size();
            if (max_examples > 0) total = std::min(total, max_examples);
            std::vector<int> mine;
            for (int i = rank; i < total; i += world) mine.push_back(i);
            auto t0 = std::chrono::steady_clock::now();
            McResult r = mc_score(model, file, mine, std::max(B, file.max_completions), T);
            double counts[2] = {(double)r.correct, (double)r.correct_norm};
            if (world > 1)
                for (double& c : counts) c = std::round((double)dist.average((float)c) * world);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            double acc = counts[0] / total, acc_norm = counts[1] / total, chance = r.chance;
            printf("step %d: %s acc %.4f | acc_norm %.4f | %d examples (chance %.4f) | %.1f s\n", step,
                   names[f].c_str(), acc, acc_norm, total, chance, s);
            char buf[256];
            snprintf(buf, sizeof buf, ",\"mc_%s_acc\":%.6f,\"mc_%s_acc_norm\":%.6f,\"mc_%s_examples\":%d",
                     names[f].c_str(), acc, names[f].c_str(), acc_norm, names[f].c_str(), total);
            json += buf;
        }
        fflush(stdout);
        return json;
    }
};
