// Attention maps of a checkpoint on one text (method: eval/attention_maps.h), CPU back end.
//   build/attention_maps_cpu_lssar -e out/ckpt_00001000.bin -j "data/kjv/kjv_val_*.bin" -T 1024 -o maps/lssar
//   build/attention_maps_cpu_lssar -e out/ckpt_00001000.bin -text "In the beginning" -layer 0 -head 3 -o maps/x
//   build/attention_maps_cpu_lssar -e out/ckpt_00001000.bin -p 3 -T 1024 -o maps/lssar_at_p3   (p = 15 trained)
// Built per attention variant like the trainer (make attention_maps_cpu ATTN=...), and refuses a
// checkpoint of another variant. Prints mean entropy / effective span / max weight per layer and head
// and by position; writes PREFIX_L<l>_H<h>.csv (the weights) and PREFIX_stats.csv (per row).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dataloader/text_codec.h"
#include "eval/attention_maps.h"
#include "eval/loss_vs_length.h"
#include "runtime/backend.h"
#include "runtime/cli.h"
#include "runtime/checkpoint.h"

#ifndef TRAIN_BACKEND_CPU
#error "attention_maps reads the CPU back end's saved q and k: build with -DTRAIN_BACKEND_CPU (eval/eval.mk does)"
#endif

static FILE* open_for_writing(const std::string& path) {
    FILE* f = fopen(path.c_str(), "w");
    if (!f) cli_fail("cannot write " + path + " (" + strerror(errno) + "); check that the folder of -o exists");
    return f;
}
static void close_written(FILE* f, const std::string& path) {
    if (fclose(f) != 0) cli_fail("writing " + path + " failed (" + strerror(errno) + ")");
}

// The rows a weights CSV holds: all T, or max_rows evenly spaced from 0 to T-1 (a T x T text file
// of 16K rows would be gigabytes).
static std::vector<int> sampled_rows(int T, int max_rows) {
    std::vector<int> rows;
    if (T <= max_rows) {
        for (int t = 0; t < T; t++) rows.push_back(t);
    } else {
        for (int k = 0; k < max_rows; k++)
            rows.push_back(max_rows == 1 ? T - 1 : (int)((long long)k * (T - 1) / (max_rows - 1)));
    }
    return rows;
}

// PREFIX_L<l>_H<h>.csv: a header "row,0,1,...,T-1", then per chosen row its index and T weights.
static void write_map_csv(const std::string& path, const std::vector<float>& W, int T, int max_rows) {
    FILE* f = open_for_writing(path);
    fprintf(f, "row");
    for (int j = 0; j < T; j++) fprintf(f, ",%d", j);
    fprintf(f, "\n");
    for (int t : sampled_rows(T, max_rows)) {
        fprintf(f, "%d", t);
        const float* w = &W[(size_t)t * T];
        for (int j = 0; j < T; j++) {
            if (w[j] == 0) fprintf(f, ",0");  // most of the file: keep it short
            else fprintf(f, ",%.6g", w[j]);
        }
        fprintf(f, "\n");
    }
    close_written(f, path);
}

// rows of PREFIX_stats.csv; a degenerate row's statistics are nan
static void write_stats_rows(FILE* f, int layer, int head, const std::vector<AttnRowStats>& rows) {
    for (int t = 0; t < (int)rows.size(); t++) {
        const AttnRowStats& r = rows[t];
        if (!r.valid) { fprintf(f, "%d,%d,%d,nan,nan,nan,nan,nan\n", layer, head, t); continue; }
        fprintf(f, "%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g\n", layer, head, t, r.entropy, r.span, r.max_weight,
                r.self_weight, r.distance);
    }
}

// The tokens to run on: the -text text, or the first T tokens of the shards.
static std::vector<int> input_tokens(const std::string& text, bool have_text, const std::string& shards, int T,
                                     const Checkpoint& ck, const std::string& ckpt_path) {
    if (have_text) {
        if (text.empty()) cli_fail("-text: the text is empty; give at least one word, e.g. -text \"In the beginning\"");
        std::vector<int> ids;
        try {  // GPT-2 BPE (a missing vocabulary file is named with its install script) or bytes
            TextCodec::for_vocab(ck.config.vocab_size).encode(text, ids);
        } catch (const std::invalid_argument& e) {
            cli_fail(ckpt_path + ": " + e.what() + "; give tokens of its own vocabulary with -j SHARDS instead of -text");
        }
        return ids;
    }
    std::vector<int> span = read_token_span(shards, (size_t)T, ck.config.vocab_size);
    if (span.empty()) cli_fail("the shards '" + shards + "' hold no tokens; give shards with tokens, or text with -text");
    if ((int)span.size() < T)
        cli_fail("the shards '" + shards + "' hold " + std::to_string(span.size()) + " tokens, fewer than -T " +
             std::to_string(T) + " (use -T " + std::to_string(span.size()) + " or less)");
    return span;
}

static void print_head_table(const std::vector<AttnSummary>& heads, const std::vector<int>& layers,
                             const std::vector<int>& head_ids) {
    printf("%5s %4s %7s %6s %9s %10s %9s %9s %10s\n", "layer", "head", "rows", "degen", "entropy", "eff. span",
           "max w", "self w", "distance");
    size_t i = 0;
    for (int l : layers)
        for (int h : head_ids) {
            const AttnSummary& s = heads[i++];
            printf("%5d %4d %7d %6d %9.4f %10.3f %9.4f %9.4f %10.3f\n", l, h, s.rows, s.degenerate, s.entropy,
                   s.span, s.max_weight, s.self_weight, s.distance);
        }
}

// Means over the heads chosen of each layer's head means.
static void print_layer_table(const std::vector<AttnSummary>& heads, const std::vector<int>& layers,
                              int heads_per_layer) {
    printf("per layer, mean over the heads shown:\n%5s %9s %10s %9s %9s %10s\n", "layer", "entropy", "eff. span",
           "max w", "self w", "distance");
    for (size_t li = 0; li < layers.size(); li++) {
        AttnSummary m;
        int n = 0;
        for (int h = 0; h < heads_per_layer; h++) {
            const AttnSummary& s = heads[li * heads_per_layer + h];
            if (s.rows == 0) continue;  // every row degenerate: no statistics
            m.entropy += s.entropy;
            m.span += s.span;
            m.max_weight += s.max_weight;
            m.self_weight += s.self_weight;
            m.distance += s.distance;
            n++;
        }
        if (n == 0) { printf("%5d %9s\n", layers[li], "-"); continue; }
        printf("%5d %9.4f %10.3f %9.4f %9.4f %10.3f\n", layers[li], m.entropy / n, m.span / n, m.max_weight / n,
               m.self_weight / n, m.distance / n);
    }
}

// Mean entropy of each layer (over the heads chosen) by position bucket.
static void print_bucket_table(const std::vector<std::vector<AttnSummary>>& buckets, const std::vector<int>& layers,
                               int heads_per_layer, int T) {
    int nb = position_bucket_count(T);
    printf("mean entropy by row position (rows [a,b), mean over the heads shown):\n%5s", "layer");
    for (int b = 0; b < nb; b++) {
        char label[32];
        snprintf(label, sizeof label, "[%d,%d)", position_bucket_begin(b), std::min(T, position_bucket_begin(b + 1)));
        printf(" %12s", label);
    }
    printf("\n");
    for (size_t li = 0; li < layers.size(); li++) {
        printf("%5d", layers[li]);
        for (int b = 0; b < nb; b++) {
            double sum = 0;
            int n = 0;
            for (int h = 0; h < heads_per_layer; h++) {
                const AttnSummary& s = buckets[li * heads_per_layer + h][b];
                if (s.rows > 0) { sum += s.entropy; n++; }
            }
            if (n == 0) printf(" %12s", "-");
            else printf(" %12.4f", sum / n);
        }
        printf("\n");
    }
}

// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it); bad
// input ends the program.
struct MapsOptions {
    std::string ckpt_path, text, shards = "data/kjv/kjv_val_*.bin", prefix, p_text, rw_text;
    std::string precision = CLI_DEFAULT_PRECISION;
    bool have_text = false;
    int T = 0, max_rows = 1024, log_len = 0;
    long long layer = -1, head = -1;  // -1: all
};

static CliTable maps_flags(MapsOptions& o) {
    CliTable t("-e CHECKPOINT [options]",
               std::string("Attention weights of a checkpoint on one text, per layer and head, and how sharp they "
                           "are:\nper row t the entropy H, the effective span exp(H), the largest weight, the weight on "
                           "token t\nand the mean distance attended back. Attention variant of this binary: ") +
                   ATTN_NAME + ".");
    t.text("-e", &o.ckpt_path, "<path>", "checkpoint (required)")
     .text("-p", &o.p_text, "<float>", CLI_P_HELP)
     .text("-rw", &o.rw_text, "<p>", CLI_REWEIGHT_HELP)
     .integer("-ls", &o.log_len, 0, 1, (std::string(CLI_LOG_LEN_HELP) + "; L: the checkpoint's training "
              "length (default {})").c_str())
     .choice("-pr", &o.precision, CLI_PRECISIONS, CLI_PRECISION_HELP)
     .text("-text", &o.text, "<text>", "the text, as the checkpoint's tokens: GPT-2 BPE, or bytes for a byte-level model (vocabulary 256)")
     .text("-j", &o.shards, "<glob>", "or: validation shards, the first -T tokens")
     .integer("-T", &o.T, 1, 1 << 20, "tokens read from -j (default: the checkpoint's max length)")
     .integer("-layer", &o.layer, 0, 1 << 20, "one layer (default: all)")
     .integer("-head", &o.head, 0, 1 << 20, "one head (default: all)")
     .text("-o", &o.prefix, "<prefix>", "write PREFIX_L<l>_H<h>.csv per layer and head chosen (row,then T weights; "
           "zeros above the diagonal) and PREFIX_stats.csv (layer,head,row,entropy,span,max,self,distance)")
     .integer("-rows", &o.max_rows, 1, 1 << 20, "most rows in a weights CSV: above it, that many rows evenly spaced");
    t.epilogue = "-text of a GPT-2 vocabulary checkpoint needs the GPT-2 vocabulary files (bash scripts/install_gpt2_vocab.sh, or GPT2_VOCAB_DIR=DIR).";
    return t;
}

static MapsOptions parse_options(int argc, char** argv) {
    MapsOptions o;
    CliTable flags = maps_flags(o);
    flags.parse(argc, argv);
    o.have_text = flags.given("-text");
    if (o.ckpt_path.empty()) { flags.print_usage(stderr, argv[0]); cli_fail("-e CHECKPOINT is required"); }
    if (o.have_text && (flags.given("-j") || flags.given("-T")))
        cli_fail("-text TEXT and -j/-T read different inputs: give one of them");
    return o;
}

int main(int argc, char** argv) {
    MapsOptions o = parse_options(argc, argv);
    const std::string &ckpt_path = o.ckpt_path, &text = o.text, &shards = o.shards, &prefix = o.prefix;
    const bool have_text = o.have_text;
    const int max_rows = o.max_rows;
    const long long layer = o.layer, head = o.head;
    int T = o.T;
    try {
        Checkpoint ck = cli_read_eval_checkpoint(ckpt_path, ATTN_NAME, o.p_text, o.rw_text);
        int log_len = cli_apply_log_len(ck, ckpt_path, o.log_len, ck.config.max_seq_len);  // 0: off
        const GPT2Config& cc = ck.config;
        if (layer >= cc.num_layers)
            cli_fail("-layer " + std::to_string(layer) + ": the checkpoint has " + std::to_string(cc.num_layers) +
                 " layers (use 0.." + std::to_string(cc.num_layers - 1) + ", or leave -layer out for all)");
        if (head >= cc.num_heads)
            cli_fail("-head " + std::to_string(head) + ": the checkpoint has " + std::to_string(cc.num_heads) +
                 " heads per layer (use 0.." + std::to_string(cc.num_heads - 1) + ", or leave -head out for all)");
        if (T == 0) T = cc.max_seq_len;
        std::vector<int> tokens = input_tokens(text, have_text, shards, T, ck, ckpt_path);
        T = (int)tokens.size();

        GPT2Config config = cc;
        config.max_seq_len = std::max(T, config.max_seq_len);
        Model model(config);
        cli_select_precision(model, o.precision);
        model.set_params(ck.params);
        model.forward(tokens.data(), nullptr, 1, T);
        printf("checkpoint %s: %s, p %g, step %lld, %d layers, %d heads, %d channels, trained at length %d%s\n",
               ckpt_path.c_str(), attn_kind_name(config.attn), config.p, (long long)ck.train.step, config.num_layers,
               config.num_heads, config.channels, cc.max_seq_len,
               log_len ? (", log-length scaling beyond " + std::to_string(log_len)).c_str() : "");
        printf("attention on %d tokens of %s (%.3g x the training length)\n", T,
               have_text ? "the -text text" : shards.c_str(), (double)T / cc.max_seq_len);

        std::vector<int> layers, head_ids;
        for (int l = 0; l < config.num_layers; l++) if (layer < 0 || l == layer) layers.push_back(l);
        for (int h = 0; h < config.num_heads; h++) if (head < 0 || h == head) head_ids.push_back(h);
        FILE* stats_file = nullptr;
        std::string stats_path = prefix + "_stats.csv";
        if (!prefix.empty()) {
            stats_file = open_for_writing(stats_path);
            fprintf(stats_file, "layer,head,row,entropy,span,max,self,distance\n");
        }
        std::vector<AttnSummary> head_summaries;
        std::vector<std::vector<AttnSummary>> bucket_summaries;
        std::vector<float> W;
        std::vector<uint8_t> valid;
        for (int l : layers)
            for (int h : head_ids) {
                attention_map(model, l, h, W, valid);
                std::vector<AttnRowStats> rows = attention_map_stats(W, T);
                head_summaries.push_back(summarize_rows(rows, 0, T));
                bucket_summaries.push_back(summarize_buckets(rows));
                if (!prefix.empty()) {
                    write_map_csv(prefix + "_L" + std::to_string(l) + "_H" + std::to_string(h) + ".csv", W, T, max_rows);
                    write_stats_rows(stats_file, l, h, rows);
                }
            }
        print_head_table(head_summaries, layers, head_ids);
        print_layer_table(head_summaries, layers, (int)head_ids.size());
        print_bucket_table(bucket_summaries, layers, (int)head_ids.size(), T);
        if (stats_file) {
            close_written(stats_file, stats_path);
            printf("wrote %s and %zu weight maps %s_L<l>_H<h>.csv\n", stats_path.c_str(),
                   layers.size() * head_ids.size(), prefix.c_str());
        }
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
