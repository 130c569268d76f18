// Loss versus length of a checkpoint (method: eval/loss_vs_length.h).
//   ./loss_vs_length_cpu_lssar -e out/ckpt_00001000.bin -j "data/kjv/kjv_val_*.bin" -o lvl.csv
// Built per attention variant like the trainer (make loss_vs_length_cpu ATTN=...), and refuses a
// checkpoint of another variant. Prints a table and writes a CSV: length,loss,tokens.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "eval/loss_vs_length.h"
#include "runtime/cli.h"
#include "runtime/checkpoint.h"

// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
struct LvlOptions {
    std::string ckpt_path, val_pattern = "data/kjv/kjv_val_*.bin", csv_path, p_text;
    std::string precision = CLI_DEFAULT_PRECISION;
    std::vector<long long> multiples = {1, 2, 4, 8, 16};
    int T_train = 0, tokens_per_forward = 4096;
    long long max_tokens = 0;
};

static CliTable lvl_flags(LvlOptions& o) {
    CliTable t("-e CHECKPOINT [options]",
               std::string("Mean validation loss of a checkpoint at several sequence lengths, the same tokens scored at\n"
                           "every length (each length cuts one span of N tokens into windows and scores every position).\n"
                           "Attention variant of this binary: ") + ATTN_NAME + ".");
    t.text("-e", &o.ckpt_path, "<path>", "checkpoint (required)")
     .text("-p", &o.p_text, "<float>", "re-weighting power to evaluate at instead of the checkpoint's (>= 1; variants "
           "with re-weighting only)")
     .choice("-pr", &o.precision, {"fp32", "bf16", "auto"}, CLI_PRECISION_HELP)
     .text("-j", &o.val_pattern, "<glob>", "validation shards")
     .integer("-t", &o.T_train, 1, 1000000000, "training length the multiples refer to (default: the checkpoint's "
              "max length)")
     .int_list("-l", &o.multiples, 1, 1 << 24, 32, "1,2,4,8,16", "lengths as multiples of -t, comma separated")
     .integer("-n", &o.max_tokens, 1, 1000000000, "most tokens to score (default 16 x the longest length; fewer if "
              "the shards hold fewer)")
     .integer("-f", &o.tokens_per_forward, 1, 1000000000, "tokens per forward pass: windows are batched up to this")
     .text("-o", &o.csv_path, "<path>", "CSV output (columns length,loss,tokens; default: none)");
    return t;
}

int main(int argc, char** argv) {
    LvlOptions o;
    CliTable flags = lvl_flags(o);
    flags.parse(argc, argv);
    if (o.ckpt_path.empty()) { flags.print_usage(stderr, argv[0]); cli_fail("-e CHECKPOINT is required"); }
    const std::string &ckpt_path = o.ckpt_path, &val_pattern = o.val_pattern, &csv_path = o.csv_path;
    const std::vector<long long>& multiples = o.multiples;
    const int tokens_per_forward = o.tokens_per_forward;
    int T_train = o.T_train;
    long long max_tokens = o.max_tokens;
    try {
        Checkpoint ck = cli_read_checkpoint(ckpt_path, ATTN_NAME);
        cli_print_learned_p(ck);
        cli_override_p(ck, ckpt_path, o.p_text);
        if (T_train == 0) T_train = ck.config.max_seq_len;
        std::vector<int> lengths;
        int64_t lcm = 1;  // N is a multiple of every length
        for (long long m : multiples) {
            if (m * T_train > (1 << 24))
                cli_fail("-l: " + std::to_string(m) + " x -t " + std::to_string(T_train) + " = " +
                         std::to_string(m * T_train) + " tokens exceeds the longest length scored, 16777216");
            lengths.push_back((int)(m * T_train));
            lcm = std::lcm(lcm, m * T_train);
            if (lcm > (1LL << 40)) cli_fail("-l: the lengths have no common multiple below 2^40 tokens; use fewer or rounder ones");
        }
        int longest = *std::max_element(lengths.begin(), lengths.end());
        if (max_tokens == 0) max_tokens = 16LL * longest;
        FILE* csv = nullptr;  // opened before scoring, so that an unwritable -o fails at once
        if (!csv_path.empty() && (csv = fopen((csv_path + ".tmp").c_str(), "w")) == nullptr)
            cli_fail("-o " + csv_path + ": cannot write " + csv_path + ".tmp (" + strerror(errno) + ")");
        std::vector<int> span = read_token_span(val_pattern, (size_t)max_tokens + 1, ck.config.vocab_size);
        int64_t N = scored_token_count(lengths, (int64_t)span.size(), max_tokens);
        if (N == 0) {
            if (csv) fclose(csv), remove((csv_path + ".tmp").c_str());
            if ((long long)span.size() == max_tokens + 1)  // -n, not the shards, is the limit
                cli_fail("-n " + std::to_string(max_tokens) + ": fewer tokens than the " + std::to_string(lcm) +
                         " the lengths need (a multiple of every length); raise -n to at least " + std::to_string(lcm));
            cli_fail("the shards '" + val_pattern + "' hold " + std::to_string(span.size()) + " tokens, fewer than the " +
                     std::to_string(lcm + 1) + " the lengths need (a multiple of every length, + 1)");
        }

        GPT2Config config = ck.config;
        config.max_seq_len = std::max(longest, config.max_seq_len);
        Model model(config);
        cli_select_precision(model, o.precision);
        model.set_params(ck.params);
        printf("checkpoint %s: %s, p %g, step %lld, %d layers, %d heads, %d channels\n", ckpt_path.c_str(),
               attn_kind_name(config.attn), config.p, (long long)ck.train.step, config.num_layers,
               config.num_heads, config.channels);
        printf("scoring the same %lld tokens of %s at every length (training length %d)\n", (long long)N,
               val_pattern.c_str(), T_train);
        std::vector<LengthLoss> result = loss_vs_length(model, span, N, lengths, tokens_per_forward);
        printf("%8s %8s %10s %10s\n", "length", "x train", "val loss", "tokens");
        for (const LengthLoss& r : result)
            printf("%8d %8.3g %10.4f %10lld\n", r.length, (double)r.length / T_train, r.loss, (long long)r.tokens);
        if (csv) {
            fprintf(csv, "length,loss,tokens\n");
            for (const LengthLoss& r : result) fprintf(csv, "%d,%.6f,%lld\n", r.length, r.loss, (long long)r.tokens);
            if (fclose(csv) != 0 || rename((csv_path + ".tmp").c_str(), csv_path.c_str()) != 0)
                cli_fail("writing " + csv_path + " failed (" + strerror(errno) + ")");
            printf("wrote %s\n", csv_path.c_str());
        }
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
