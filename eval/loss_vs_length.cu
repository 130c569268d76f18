// Loss versus length of one checkpoint or several (seeds), method and statistics in
// eval/loss_vs_length.h:
//   ./loss_vs_length_cpu_lssar -e out/s1/ckpt_00001200.bin,out/s2/ckpt_00001200.bin
//       -j "data/kjv_bytes/kjv_val_*.bin" -o lvl.csv -ob buckets.csv -ow windows.csv -ot tokens.bin
//       [-vs softmax_tokens.bin]
// Built per attention variant like the trainer (make loss_vs_length_cpu ATTN=...), and refuses a
// checkpoint of another variant (but for -rw: runtime/cli.h). Prints, per checkpoint and
// across them, the window mean at every length, the mean beyond the training length, the paired
// difference against 1x, the loss per position bucket, and with -vs the paired difference against
// another model's token losses (paired with it by seed); writes them as CSV (-o, -ob), the windows
// scored (-ow) and the token losses (-ot).
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
    std::string ckpt_paths, val_pattern = "data/kjv/kjv_val_*.bin", csv_path, buckets_path, tokens_path, vs_path,
        windows_path, p_text, rw_text, window_rule = "stride";
    std::string precision = CLI_DEFAULT_PRECISION;
    std::vector<long long> multiples = {1, 2, 4, 8, 16};
    int T_train = 0, tokens_per_forward = 4096, log_len = 0;
    long long max_tokens = 0, bootstrap_seed = 1337, window_seed = 1;
};

// The fewest windows of the longest length a block-bootstrap interval rests on without a warning
// (eval/extrapolation_report.py's MIN_WINDOWS).
constexpr int LVL_MIN_WINDOWS = 50;

static CliTable lvl_flags(LvlOptions& o) {
    CliTable t("-e CHECKPOINT[,CHECKPOINT...] [options]",
               std::string("Validation loss of a checkpoint at several sequence lengths, the same tokens scored at every\n"
                           "length (W windows of the longest length spread over the whole validation split, each cut into\n"
                           "the windows of every shorter length, every position scored): the\n"
                           "window mean, the mean over the positions at or beyond the training length, their paired\n"
                           "difference against 1x (95% block-bootstrap interval over windows), the loss per position\n"
                           "bucket. Several checkpoints (one per seed): each, and their mean with a 95% t-interval.\n"
                           "Attention variant of this binary: ") + ATTN_NAME + ".");
    t.text("-e", &o.ckpt_paths, "<paths>", "checkpoints, comma separated (required; several: one per seed)")
     .text("-p", &o.p_text, "<float>", CLI_P_HELP)
     .text("-rw", &o.rw_text, "<p>", CLI_REWEIGHT_HELP)
     .integer("-ls", &o.log_len, 0, 1, (std::string(CLI_LOG_LEN_HELP) + "; L: -t (default {})").c_str())
     .choice("-pr", &o.precision, CLI_PRECISIONS, CLI_PRECISION_HELP)
     .text("-j", &o.val_pattern, "<glob>", "validation shards")
     .integer("-t", &o.T_train, 1, 1000000000, "training length the multiples refer to (default: the checkpoint's "
              "max length)")
     .int_list("-l", &o.multiples, 1, 1 << 24, 32, "1,2,4,8,16", "lengths as multiples of -t, comma separated")
     .integer("-n", &o.max_tokens, 1, 1000000000, "most tokens to score (default 64 x the longest length, 64 windows; fewer if "
              "the shards hold fewer)")
     .choice("-w", &o.window_rule, {"stride", "sample", "first"}, "where the windows start: a fixed stride over "
             "the whole validation split, a seeded sample of non-overlapping starts over it (-ws), or the split's "
             "first N tokens")
     .integer("-ws", &o.window_seed, 0, (1LL << 62), "seed of -w sample's window starts")
     .integer("-f", &o.tokens_per_forward, 1, 1000000000, "tokens per forward pass: windows are batched up to this")
     .integer("-bs", &o.bootstrap_seed, 0, (1LL << 62), "seed of the block bootstrap's resampling")
     .text("-o", &o.csv_path, "<path>", "CSV, a row per length: length,loss,tokens and the statistics (default: none)")
     .text("-ob", &o.buckets_path, "<path>", "CSV of the loss per position bucket, a row per checkpoint, length and "
           "bucket (default: none)")
     .text("-ow", &o.windows_path, "<path>", "CSV of the windows scored, a row per window: its start token in the "
           "split and the document it starts in (default: none)")
     .text("-ot", &o.tokens_path, "<path>", "every token's loss at every length, for -vs of another model's run "
           "(default: none)")
     .text("-vs", &o.vs_path, "<path>", "another model's -ot file (the same windows, tokens, -t and lengths, or refused): "
           "the paired difference, this model minus that one; several checkpoints on both sides pair by their seed "
           "(default: none)");
    return t;
}

static std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        size_t comma = s.find(',', start);
        std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty()) cli_fail("-e '" + s + "': an empty checkpoint path; give paths separated by commas");
        out.push_back(item);
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

// "[lo, hi]" of an interval, or "" where there is none
static std::string interval_text(const Interval& r) {
    if (std::isnan(r.lo)) return "";
    char buf[64];
    snprintf(buf, sizeof buf, "[%+.4f, %+.4f]", r.lo, r.hi);
    return buf;
}
static std::string value_text(double x, bool sign = false) {
    if (std::isnan(x)) return "-";
    char buf[32];
    snprintf(buf, sizeof buf, sign ? "%+.4f" : "%.4f", x);
    return buf;
}

// One checkpoint's table: every length's window mean, beyond-T mean and paired difference against 1x.
static void print_stats(const std::vector<LengthStats>& s, int T_train) {
    printf("%8s %7s %9s %10s %22s %9s %22s\n", "length", "x train", "val loss", "beyond-T", "95% CI (bootstrap)",
           "vs 1x", "95% CI (bootstrap)");
    for (const LengthStats& r : s)
        printf("%8d %7.3g %9.4f %10s %22s %9s %22s\n", r.length, (double)r.length / T_train, r.loss,
               value_text(r.beyond.mean).c_str(), interval_text(r.beyond).c_str(),
               value_text(r.paired.mean, true).c_str(), interval_text(r.paired).c_str());
}

// Position buckets (rows) at every length (columns), the mean over the checkpoints.
static void print_buckets(const std::vector<std::vector<LengthStats>>& per_ckpt) {
    const std::vector<LengthStats>& first = per_ckpt[0];
    printf("loss per position bucket (mean over %zu checkpoint%s):\n%14s", per_ckpt.size(), per_ckpt.size() > 1 ? "s" : "",
           "positions");
    for (const LengthStats& r : first) printf(" %9d", r.length);
    printf("\n");
    const std::vector<BucketLoss>& longest = first.back().buckets;
    for (size_t b = 0; b < longest.size(); b++) {
        char name[32];
        snprintf(name, sizeof name, "[%d, %d)", longest[b].lo, longest[b].hi);
        printf("%14s", name);
        for (size_t k = 0; k < first.size(); k++) {
            if (b >= first[k].buckets.size() || first[k].buckets[b].hi != longest[b].hi) { printf(" %9s", ""); continue; }
            double m = 0;
            for (const auto& s : per_ckpt) m += s[k].buckets[b].loss / (double)per_ckpt.size();
            printf(" %9.4f", m);
        }
        printf("\n");
    }
}

static FILE* open_output(const std::string& path, const char* flag) {
    if (path.empty()) return nullptr;
    FILE* f = fopen((path + ".tmp").c_str(), "w");
    if (!f) cli_fail(std::string(flag) + " " + path + ": cannot write " + path + ".tmp (" + strerror(errno) + ")");
    return f;
}
static void close_output(FILE* f, const std::string& path) {
    if (!f) return;
    if (fclose(f) != 0 || rename((path + ".tmp").c_str(), path.c_str()) != 0)
        cli_fail("writing " + path + " failed (" + strerror(errno) + ")");
    printf("wrote %s\n", path.c_str());
}

int main(int argc, char** argv) {
    LvlOptions o;
    CliTable flags = lvl_flags(o);
    flags.parse(argc, argv);
    if (o.ckpt_paths.empty()) { flags.print_usage(stderr, argv[0]); cli_fail("-e CHECKPOINT is required"); }
    const std::string &val_pattern = o.val_pattern, &csv_path = o.csv_path;
    std::vector<std::string> ckpt_paths = split_commas(o.ckpt_paths);
    int T_train = o.T_train;
    long long max_tokens = o.max_tokens;
    const uint64_t seed = (uint64_t)o.bootstrap_seed;
    try {
        std::vector<Checkpoint> cks;
        for (const std::string& path : ckpt_paths) cks.push_back(cli_read_eval_checkpoint(path, ATTN_NAME, o.p_text, o.rw_text));
        for (size_t i = 1; i < cks.size(); i++) {
            std::string mismatch = checkpoint_config_mismatch(ckpt_paths[i], cks[i].config, cks[0].config, false);
            if (!mismatch.empty()) cli_fail("-e: the checkpoints are of different models: " + mismatch);
        }
        if (T_train == 0) T_train = cks[0].config.max_seq_len;
        int log_len = 0;  // the L of log-length scaling (-ls 1, or trained with -tl 1), 0: off
        for (size_t c = 0; c < cks.size(); c++) log_len = cli_apply_log_len(cks[c], ckpt_paths[c], o.log_len, T_train);
        std::vector<int> lengths;
        int64_t lcm = 1;  // N is a multiple of every length
        for (long long m : o.multiples) {
            if (m * T_train > (1 << 24))
                cli_fail("-l: " + std::to_string(m) + " x -t " + std::to_string(T_train) + " = " +
                         std::to_string(m * T_train) + " tokens exceeds the longest length scored, 16777216");
            lengths.push_back((int)(m * T_train));
            lcm = std::lcm(lcm, m * T_train);
            if (lcm > (1LL << 40)) cli_fail("-l: the lengths have no common multiple below 2^40 tokens; use fewer or rounder ones");
        }
        int longest = *std::max_element(lengths.begin(), lengths.end());
        if (max_tokens == 0) max_tokens = 64LL * longest;
        std::vector<TokenLosses> other;
        ScoredSpan other_span;
        if (!o.vs_path.empty()) {
            other = read_token_losses(o.vs_path, &other_span);
            if (other_span.lengths != lengths || other_span.T_train != T_train)
                cli_fail("-vs " + o.vs_path + ": scored at lengths " + join_ints(other_span.lengths) + " for training "
                         "length " + std::to_string(other_span.T_train) + ", this run" +
                         (o.tokens_path.empty() ? "" : " (-ot " + o.tokens_path + ")") + " at " + join_ints(lengths) + " for " +
                         std::to_string(T_train) + "; score both models with the same -t and -l");
        }
        // opened before scoring, so that an unwritable output fails at once
        FILE* csv = open_output(csv_path, "-o");
        FILE* buckets_csv = open_output(o.buckets_path, "-ob");
        FILE* windows_csv = open_output(o.windows_path, "-ow");
        std::vector<int> split = read_token_span(val_pattern, SIZE_MAX, cks[0].config.vocab_size);
        int64_t Lb = window_length(lengths);
        int64_t N = scored_token_count(lengths, (int64_t)split.size(), max_tokens);
        if (N == 0) {
            if (csv) fclose(csv), remove((csv_path + ".tmp").c_str());
            if (buckets_csv) fclose(buckets_csv), remove((o.buckets_path + ".tmp").c_str());
            if (windows_csv) fclose(windows_csv), remove((o.windows_path + ".tmp").c_str());
            if ((long long)split.size() > max_tokens)  // -n, not the shards, is the limit
                cli_fail("-n " + std::to_string(max_tokens) + ": fewer tokens than the " + std::to_string(lcm) +
                         " the lengths need (a multiple of every length); raise -n to at least " + std::to_string(lcm));
            cli_fail("the shards '" + val_pattern + "' hold " + std::to_string(split.size()) + " tokens, fewer than the " +
                     std::to_string(lcm + 1) + " the lengths need (a multiple of every length, + 1)");
        }
        WindowRule rule = o.window_rule == "first" ? WindowRule::First
                          : o.window_rule == "sample" ? WindowRule::Sample : WindowRule::Stride;
        EvalWindows windows = make_windows(
            split, Lb, window_starts(rule, N / Lb, Lb, (int64_t)split.size(), (uint64_t)o.window_seed),
            document_start_token(cks[0].config.vocab_size));
        split = {};
        ScoredSpan here = scored_span(windows, T_train, lengths, val_pattern);
        if (!other.empty()) {
            std::string mismatch = span_mismatch(other_span, here);
            if (!mismatch.empty())
                cli_fail("-vs " + o.vs_path + " scored other tokens than this run" +
                         (o.tokens_path.empty() ? "" : " (-ot " + o.tokens_path + ")") + " on " + val_pattern + ": " +
                         mismatch + "; score both models with the same -j, -t, -l, -n, -w and -ws");
        }

        std::string rule_text = rule == WindowRule::Sample ? "sampled with seed " + std::to_string(o.window_seed)
                                : rule == WindowRule::Stride
                                    ? "a stride of " + std::to_string((windows.split_tokens - 1) / (int64_t)windows.starts.size()) +
                                          " tokens"
                                    : "the split's first " + std::to_string(N + 1) + " tokens";
        printf("scoring the same %lld tokens of %s at every length (training length %d): %zu window%s of %lld tokens "
               "(%s), starting in %lld distinct document%s of the split's %lld (%lld tokens)\n",
               (long long)N, val_pattern.c_str(), T_train, windows.starts.size(), windows.starts.size() == 1 ? "" : "s", (long long)Lb, rule_text.c_str(),
               (long long)windows.distinct_documents(), windows.distinct_documents() == 1 ? "" : "s",
               (long long)windows.split_documents,
               (long long)windows.split_tokens);
        if (windows.starts.size() < (size_t)LVL_MIN_WINDOWS) {
            // the block bootstrap's percentile interval under-covers over few windows (test_stats_tools
            // simulates its coverage at 16, 50 and 64)
            char warning[320];
            snprintf(warning, sizeof warning, "WARNING: %zu windows of the longest length, fewer than %d: its "
                     "block-bootstrap intervals cover less than 95%%; score at least %lld tokens (-n) for intervals "
                     "to rely on", windows.starts.size(), LVL_MIN_WINDOWS, (long long)LVL_MIN_WINDOWS * Lb);
            printf("%s\n", warning);
            fprintf(stderr, "%s\n", warning);
        }
        std::vector<TokenLosses> runs;
        std::vector<std::vector<LengthStats>> stats;
        for (size_t c = 0; c < cks.size(); c++) {
            GPT2Config config = cks[c].config;
            config.max_seq_len = std::max(longest, config.max_seq_len);
            Model model(config);
            cli_select_precision(model, o.precision);
            model.set_params(cks[c].params);
            printf("checkpoint %s: %s, p %g, step %lld, %d layers, %d heads, %d channels, vocabulary %d%s\n",
                   ckpt_paths[c].c_str(), attn_kind_name(config.attn), config.p, (long long)cks[c].train.step,
                   config.num_layers, config.num_heads, config.channels, config.vocab_size,
                   log_len ? (", log-length scaling beyond " + std::to_string(log_len)).c_str() : "");
            runs.push_back(score_tokens(model, windows, lengths, o.tokens_per_forward));
            runs.back().seed = cks[c].run.seed;
            runs.back().checkpoint = ckpt_paths[c];
            stats.push_back(length_stats(runs.back(), T_train, seed));
            print_stats(stats.back(), T_train);
        }
        // across the checkpoints: mean and 95% t-interval of each statistic
        std::vector<Interval> loss_s(lengths.size()), beyond_s(lengths.size()), paired_s(lengths.size());
        for (size_t k = 0; k < lengths.size(); k++) {
            std::vector<double> l, b, d;
            for (const auto& s : stats) l.push_back(s[k].loss), b.push_back(s[k].beyond.mean), d.push_back(s[k].paired.mean);
            loss_s[k] = across_seeds(l);
            beyond_s[k] = across_seeds(b);
            paired_s[k] = across_seeds(d);
        }
        if (cks.size() > 1) {
            printf("across the %zu checkpoints (mean, 95%% t-interval over checkpoints):\n%8s %7s %9s %22s %10s %22s %9s "
                   "%22s\n", cks.size(), "length", "x train", "val loss", "95% CI", "beyond-T", "95% CI", "vs 1x", "95% CI");
            for (size_t k = 0; k < lengths.size(); k++)
                printf("%8d %7.3g %9.4f %22s %10s %22s %9s %22s\n", lengths[k], (double)lengths[k] / T_train,
                       loss_s[k].mean, interval_text(loss_s[k]).c_str(), value_text(beyond_s[k].mean).c_str(),
                       interval_text(beyond_s[k]).c_str(), value_text(paired_s[k].mean, true).c_str(),
                       interval_text(paired_s[k]).c_str());
        }
        print_buckets(stats);
        // against another model's token losses
        std::vector<PairedLength> vs;
        std::vector<Interval> vs_seeds(lengths.size()), vs_seeds_beyond(lengths.size());
        if (!other.empty()) {
            vs = paired_difference(runs, other, T_train, seed);
            bool seed_pairs = other.size() == runs.size() && runs.size() > 1;
            std::vector<size_t> pair;
            if (seed_pairs) {
                try {
                    pair = pair_by_seed(runs, other);
                    for (size_t c = 0; c < runs.size(); c++)
                        printf("pair: %s with %s (seed %llu)\n", ckpt_paths[c].c_str(), other[pair[c]].checkpoint.c_str(),
                               (unsigned long long)runs[c].seed);
                } catch (const std::invalid_argument& e) {
                    printf("no interval over checkpoint pairs: %s\n", e.what());
                    seed_pairs = false;
                }
            }
            for (size_t k = 0; seed_pairs && k < lengths.size(); k++) {
                std::vector<double> d, db;
                for (size_t c = 0; c < runs.size(); c++) {
                    std::vector<PairedLength> one = paired_difference({runs[c]}, {other[pair[c]]}, T_train, seed);
                    d.push_back(one[k].all.mean);
                    db.push_back(one[k].beyond.mean);
                }
                vs_seeds[k] = across_seeds(d);
                vs_seeds_beyond[k] = across_seeds(db);
            }
            printf("paired difference against %s (%zu checkpoint%s): this model's loss minus that one's, token by token\n"
                   "(each model's mean over its checkpoints; 95%% intervals by block bootstrap over windows%s):\n",
                   o.vs_path.c_str(), other.size(), other.size() > 1 ? "s" : "",
                   seed_pairs ? ", and a t-interval over the checkpoint pairs" : "");
            printf("%8s %7s %9s %22s %10s %22s%s\n", "length", "x train", "all", "95% CI", "beyond-T", "95% CI",
                   seed_pairs ? "   over pairs (all / beyond-T)" : "");
            for (size_t k = 0; k < lengths.size(); k++) {
                printf("%8d %7.3g %+9.4f %22s %10s %22s", lengths[k], (double)lengths[k] / T_train, vs[k].all.mean,
                       interval_text(vs[k].all).c_str(), value_text(vs[k].beyond.mean, true).c_str(),
                       interval_text(vs[k].beyond).c_str());
                if (seed_pairs)
                    printf("   %s / %s", interval_text(vs_seeds[k]).c_str(), interval_text(vs_seeds_beyond[k]).c_str());
                printf("\n");
            }
        }
        if (csv) {
            fprintf(csv, "length,loss,tokens,checkpoints,loss_lo,loss_hi,beyond_loss,beyond_lo,beyond_hi,beyond_tokens,"
                         "paired_1x,paired_1x_lo,paired_1x_hi,interval,vs_all,vs_all_lo,vs_all_hi,vs_beyond,vs_beyond_lo,"
                         "vs_beyond_hi,vs_pairs_lo,vs_pairs_hi,vs_beyond_pairs_lo,vs_beyond_pairs_hi,windows,documents,window_rule,"
                         "log_len_scaling\n");
            bool one = cks.size() == 1;
            for (size_t k = 0; k < lengths.size(); k++) {
                const LengthStats& s0 = stats[0][k];
                Interval b = one ? s0.beyond : beyond_s[k], d = one ? s0.paired : paired_s[k];
                PairedLength v = vs.empty() ? PairedLength{lengths[k], {}, {}} : vs[k];
                fprintf(csv, "%d,%.6f,%lld,%zu,%.6f,%.6f,%.6f,%.6f,%.6f,%lld,%.6f,%.6f,%.6f,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,"
                             "%.6f,%.6f,%.6f,%.6f,%zu,%lld,%s,%d\n",
                        lengths[k], loss_s[k].mean, (long long)N, cks.size(), loss_s[k].lo, loss_s[k].hi, b.mean, b.lo,
                        b.hi, (long long)s0.beyond_tokens, d.mean, d.lo, d.hi, one ? "bootstrap" : "seeds", v.all.mean,
                        v.all.lo, v.all.hi, v.beyond.mean, v.beyond.lo, v.beyond.hi, vs_seeds[k].lo, vs_seeds[k].hi,
                        vs_seeds_beyond[k].lo, vs_seeds_beyond[k].hi, windows.starts.size(),
                        (long long)windows.distinct_documents(), o.window_rule.c_str(), log_len);
            }
            close_output(csv, csv_path);
        }
        if (buckets_csv) {
            fprintf(buckets_csv, "checkpoint,length,bucket_lo,bucket_hi,loss,tokens\n");
            for (size_t c = 0; c < stats.size(); c++)
                for (const LengthStats& s : stats[c])
                    for (const BucketLoss& b : s.buckets)
                        fprintf(buckets_csv, "%zu,%d,%d,%d,%.6f,%lld\n", c, s.length, b.lo, b.hi, b.loss, (long long)b.tokens);
            close_output(buckets_csv, o.buckets_path);
        }
        if (windows_csv) {
            fprintf(windows_csv, "window,start,document\n");
            for (size_t w = 0; w < windows.starts.size(); w++)
                fprintf(windows_csv, "%zu,%lld,%lld\n", w, (long long)windows.starts[w], (long long)windows.documents[w]);
            close_output(windows_csv, o.windows_path);
        }
        if (!o.tokens_path.empty()) {
            write_token_losses(o.tokens_path, runs, here);
            printf("wrote %s\n", o.tokens_path.c_str());
        }
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
