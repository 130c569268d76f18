// Zero-shot multiple-choice accuracy of a checkpoint on an eval file in llm.c's format
// (eval/mc_file.h; scripts/prepare_mc.py makes HellaSwag, ARC-Easy, PIQA, SciQ and the KJV cloze).
//   build/mc_eval_cpu_lssar -e out/run/ckpt_00000200.bin -f data/mc/kjv_cloze.bin -o per_example.csv
// Built per attention variant like the trainer (make mc_eval_cpu ATTN=..., make mc_eval_cu ATTN=...),
// and refuses a checkpoint of another variant. Scoring: eval/mc_eval.h, one forward per example.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cli.h"
#include "eval/mc_eval.h"
#include "runtime/checkpoint.h"


// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
struct McOptions {
    std::string ckpt_path, file_path, csv_path, p_text, rw_text;
    std::string precision = CLI_DEFAULT_PRECISION;
    int max_examples = 0;
};

static CliTable mc_flags(McOptions& o) {
    CliTable t("-e CHECKPOINT -f FILE.bin [options]",
               std::string("Zero-shot multiple-choice accuracy. Every completion of an example is scored, in one "
                           "forward, by\nthe cross-entropy of its tokens after the context: summed (acc: the lowest sum "
                           "wins) and per token\n(acc_norm: the lowest mean wins, llm.c's HellaSwag number). "
                           "lm-evaluation-harness's acc is the same;\nits acc_norm divides the log-likelihood by the "
                           "completion's length in characters instead of tokens.\nPrints both with their 95% (Wilson) "
                           "confidence intervals. Attention variant of this binary: ") + ATTN_NAME + ".");
    t.text("-e", &o.ckpt_path, "<path>", "checkpoint (required)")
     .text("-p", &o.p_text, "<float>", CLI_P_HELP)
     .text("-rw", &o.rw_text, "<p>", CLI_REWEIGHT_HELP)
     .choice("-pr", &o.precision, CLI_PRECISIONS, CLI_PRECISION_HELP)
     .text("-f", &o.file_path, "<path>", "eval file in llm.c's format, e.g. data/mc/hellaswag_val.bin (required; "
           "scripts/prepare_mc.py TASK writes them)")
     .integer("-n", &o.max_examples, 0, MC_MAX_EXAMPLES, "examples to score, the first ones (default 0 = all)")
     .text("-o", &o.csv_path, "<path>", "per-example CSV: index,label,pred,pred_norm then sum_loss_i and mean_loss_i "
           "for each completion i (default: none)");
    return t;
}

static void write_csv(const std::string& path, const McResult& r, int max_completions) {
    FILE* f = fopen(path.c_str(), "w");
    if (!f) cli_fail("-o: cannot write " + path + " (" + strerror(errno) + ")");
    fprintf(f, "index,label,pred,pred_norm");
    for (int c = 0; c < max_completions; c++) fprintf(f, ",sum_loss_%d", c);
    for (int c = 0; c < max_completions; c++) fprintf(f, ",mean_loss_%d", c);
    fprintf(f, "\n");
    for (const McExampleScore& s : r.per_example) {
        fprintf(f, "%d,%d,%d,%d", s.index, s.label, s.pred, s.pred_norm);
        for (int pass = 0; pass < 2; pass++) {  // the sums, then the means; empty cells past its completions
            const std::vector<double>& v = pass == 0 ? s.sum_loss : s.mean_loss;
            for (int c = 0; c < max_completions; c++)
                if (c < (int)v.size()) fprintf(f, ",%.9g", v[c]);
                else fprintf(f, ",");
        }
        fprintf(f, "\n");
    }
    if (fclose(f) != 0) cli_fail("writing " + path + " failed (" + strerror(errno) + ")");
    printf("wrote %s\n", path.c_str());
}

static void print_result(const McResult& r, double seconds) {
    double lo, hi, lo_n, hi_n;
    mc_wilson95(r.correct, r.examples, &lo, &hi);
    mc_wilson95(r.correct_norm, r.examples, &lo_n, &hi_n);
    printf("examples %d | %.1f s, %.1f examples/s\n", r.examples, seconds, r.examples / seconds);
    printf("acc      %.4f  (%d/%d)  95%% CI [%.4f, %.4f]\n", r.acc(), r.correct, r.examples, lo, hi);
    printf("acc_norm %.4f  (%d/%d)  95%% CI [%.4f, %.4f]\n", r.acc_norm(), r.correct_norm, r.examples, lo_n, hi_n);
    printf("chance   %.4f\n", r.chance);
}

int main(int argc, char** argv) {
    McOptions o;
    CliTable flags = mc_flags(o);
    flags.parse(argc, argv);
    if (o.ckpt_path.empty() || o.file_path.empty()) {
        flags.print_usage(stderr, argv[0]);
        cli_fail(o.ckpt_path.empty() ? "-e CHECKPOINT is required" : "-f FILE.bin is required");
    }
    const std::string &ckpt_path = o.ckpt_path, &file_path = o.file_path, &csv_path = o.csv_path;
    const int max_examples = o.max_examples;
    try {
        Checkpoint ck = cli_read_eval_checkpoint(ckpt_path, ATTN_NAME, o.p_text, o.rw_text);
        const GPT2Config& config = ck.config;
        McFile file = mc_read(file_path, config.vocab_size, config.max_seq_len);
        int total = (int)file.examples.size();
        if (max_examples > 0) total = std::min(total, max_examples);
        std::vector<int> which(total);
        for (int i = 0; i < total; i++) which[i] = i;
        Model model(config);
        cli_select_precision(model, o.precision);
        model.set_params(ck.params);
        printf("checkpoint %s: %s, p %g, step %lld, %d layers, %d heads, %d channels, max length %d, %s back end\n",
               ckpt_path.c_str(), attn_kind_name(config.attn), config.p, (long long)ck.train.step, config.num_layers,
               config.num_heads, config.channels, config.max_seq_len, BACKEND_NAME);
        printf("eval file %s: %d examples (scoring %d), up to %d completions, longest row %d tokens\n",
               file_path.c_str(), (int)file.examples.size(), total, file.max_completions, file.longest_row);
        auto t0 = std::chrono::steady_clock::now();
        // one example per forward, its completions the rows, at its longest row rounded up to 16
        McResult r = mc_score(model, file, which, file.max_completions, file.longest_row, stdout, 16);
        print_result(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (!csv_path.empty()) write_csv(csv_path, r, file.max_completions);
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
