// Passkey retrieval accuracy of a checkpoint at several lengths (method: eval/passkey.h).
//   build/passkey_cpu_lssar -e out/ckpt_00001000.bin -l 1024,2048,4096 -n 100 -o passkey.csv
// Built per attention variant like the trainer (make passkey_cpu ATTN=..., make passkey_cu ATTN=...),
// and refuses a checkpoint of another variant. Prints a table and writes a CSV:
// length,accuracy,trials,log_len_scaling (the L of log-length scaling, -ls 1; 0 off).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "eval/passkey.h"
#include "runtime/cli.h"
#include "runtime/checkpoint.h"

// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
struct PasskeyOptions {
    std::string ckpt_path, csv_path, trials_path, p_text, rw_text;
    std::string precision = CLI_DEFAULT_PRECISION;
    std::vector<long long> lengths = {1024, 1536, 2048, 4096, 8192};
    int trials = 100, log_len = 0;
    uint64_t seed = 1337;
};

static CliTable passkey_flags(PasskeyOptions& o) {
    CliTable t("-e CHECKPOINT [options]",
               std::string("Passkey retrieval: the share of prompts of each length (instruction, repeated filler text "
                           "with a\n5-digit key hidden at a random depth, question) whose key the model reproduces by "
                           "greedy decoding.\nEvery length asks the same keys at the same depths. Attention variant of "
                           "this binary: ") + ATTN_NAME + ".");
    t.text("-e", &o.ckpt_path, "<path>", "checkpoint (required)")
     .text("-p", &o.p_text, "<float>", CLI_P_HELP)
     .text("-rw", &o.rw_text, "<p>", CLI_REWEIGHT_HELP)
     .integer("-ls", &o.log_len, 0, 1, (std::string(CLI_LOG_LEN_HELP) + "; L: the checkpoint's training "
              "length (default {})").c_str())
     .choice("-pr", &o.precision, CLI_PRECISIONS, CLI_PRECISION_HELP)
     .int_list("-l", &o.lengths, 1, 1 << 24, 64, "1024,2048,4096", "prompt lengths in tokens, comma separated")
     .integer("-n", &o.trials, 1, 1000000, "trials per length")
     .integer("-rs", &o.seed, 0, 1LL << 62, "seed of the keys and depths")
     .text("-o", &o.csv_path, "<path>", "CSV output (columns length,accuracy,trials,log_len_scaling; default: none)")
     .text("-ot", &o.trials_path, "<path>", "CSV of every trial (columns length,trial,key,depth,distance,correct; "
           "distance: tokens from the needle's first token to the question; default: none)");
    t.epilogue = "Needs the GPT-2 vocabulary (bash scripts/install_gpt2_vocab.sh, or GPT2_VOCAB_DIR=DIR).";
    return t;
}

// log_len: the L of log-length scaling, 0 off (a column of every row)
static void write_csv(const std::string& path, const std::vector<PasskeyResult>& results, int log_len) {
    FILE* f = fopen(path.c_str(), "w");
    if (!f) cli_fail("cannot write " + path + " (" + strerror(errno) + ")");
    fprintf(f, "length,accuracy,trials,log_len_scaling\n");
    for (const PasskeyResult& r : results) fprintf(f, "%d,%.6f,%d,%d\n", r.length, r.accuracy, r.trials, log_len);
    if (fclose(f) != 0) cli_fail("writing " + path + " failed (" + strerror(errno) + ")");
    printf("wrote %s\n", path.c_str());
}

static void write_trials_csv(const std::string& path, const std::vector<PasskeyResult>& results) {
    FILE* f = fopen(path.c_str(), "w");
    if (!f) cli_fail("cannot write " + path + " (" + strerror(errno) + ")");
    fprintf(f, "length,trial,key,depth,distance,correct\n");
    for (const PasskeyResult& r : results)
        for (size_t i = 0; i < r.per_trial.size(); i++) {
            const PasskeyTrial& t = r.per_trial[i];
            fprintf(f, "%d,%zu,%d,%.6f,%d,%d\n", r.length, i, t.key, t.depth, t.distance, t.correct ? 1 : 0);
        }
    if (fclose(f) != 0) cli_fail("writing " + path + " failed (" + strerror(errno) + ")");
    printf("wrote %s\n", path.c_str());
}

static void print_table(const std::vector<PasskeyResult>& results) {
    printf("%8s %9s %7s %10s   correct/trials by depth: %9s %9s %9s %9s\n", "length", "accuracy", "trials",
           "mean depth", "[0,.25)", "[.25,.5)", "[.5,.75)", "[.75,1]");
    for (const PasskeyResult& r : results) {
        printf("%8d %8.1f%% %7d %10.3f   %24s", r.length, 100.0 * r.accuracy, r.trials, r.mean_depth, "");
        for (int b = 0; b < PASSKEY_DEPTH_BUCKETS; b++) {
            if (r.bucket_trials[b] == 0) printf(" %5s    ", "-");
            else printf(" %4d/%-4d", r.bucket_correct[b], r.bucket_trials[b]);  // 9 wide, as the header
        }
        printf("\n");
    }
}

int main(int argc, char** argv) {
    PasskeyOptions o;
    CliTable flags = passkey_flags(o);
    flags.parse(argc, argv);
    if (o.ckpt_path.empty()) { flags.print_usage(stderr, argv[0]); cli_fail("-e CHECKPOINT is required"); }
    const std::string &ckpt_path = o.ckpt_path, &csv_path = o.csv_path, &trials_path = o.trials_path;
    const int trials = o.trials;
    const uint64_t seed = o.seed;
    std::vector<int> lengths(o.lengths.begin(), o.lengths.end());
    try {
        Checkpoint ck = cli_read_eval_checkpoint(ckpt_path, ATTN_NAME, o.p_text, o.rw_text);
        int log_len = cli_apply_log_len(ck, ckpt_path, o.log_len, ck.config.max_seq_len);  // 0: off
        // the prompt's text in the model's tokens: GPT-2 BPE (the tokenizer's own message names a missing
        // file and scripts/install_gpt2_vocab.sh) or bytes; another vocabulary is refused
        TextCodec codec;
        try {
            codec = TextCodec::for_vocab(ck.config.vocab_size);
        } catch (const std::invalid_argument& e) {
            cli_fail(ckpt_path + ": " + e.what() + ", so it has no passkey prompt");
        }
        PasskeyParts parts = passkey_parts(codec);
        printf("prompt text as %s\n", codec.name());
        int min_len = passkey_min_length(parts);
        for (int L : lengths)
            if (L < min_len)
                cli_fail("-l: length " + std::to_string(L) + " is too short for the passkey prompt: instruction + needle + "
                     "question + answer take up to " + std::to_string(min_len) + " tokens (use lengths >= " +
                     std::to_string(min_len) + ")");

        GPT2Config config = ck.config;
        config.max_seq_len = std::max(*std::max_element(lengths.begin(), lengths.end()), config.max_seq_len);
        Model model(config);
        cli_select_precision(model, o.precision);
        model.set_params(ck.params);
        printf("checkpoint %s: %s, p %g, step %lld, %d layers, %d heads, %d channels, trained at length %d%s\n",
               ckpt_path.c_str(), attn_kind_name(config.attn), config.p, (long long)ck.train.step, config.num_layers,
               config.num_heads, config.channels, ck.config.max_seq_len,
               log_len ? (", log-length scaling beyond " + std::to_string(log_len)).c_str() : "");
        printf("passkey retrieval: %d trials per length, seed %llu, one filler = %zu tokens\n", trials,
               (unsigned long long)seed, parts.filler.size());

        std::vector<PasskeyResult> results;
        for (int L : lengths) {
            auto t0 = std::chrono::steady_clock::now();
            results.push_back(passkey_eval_length(model, parts, L, trials, seed, stdout));
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            printf("length %d: accuracy %.1f%% (%d/%d), %.2f trials/s\n", L, 100.0 * results.back().accuracy,
                   results.back().correct, trials, trials / s);
        }
        print_table(results);
        if (!csv_path.empty()) write_csv(csv_path, results, log_len);
        if (!trials_path.empty()) write_trials_csv(trials_path, results);
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
