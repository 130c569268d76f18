// build/passkey_mix: the passkey training mix (eval/passkey_mix.h) of a corpus's token shards.
//   build/passkey_mix -i data/kjv/kjv_train_000000.bin -j data/kjv/kjv_val_000000.bin -o data/passkey_mix/kjv -t 128 -f 0.75
// writes PREFIX_train_000000.bin (the mix), PREFIX_val_000000.bin (the validation shard, unchanged,
// checked to hold no needle) and PREFIX_needles.csv (window,key,needle_pos,question_pos,distance).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dataloader/shard.h"
#include "runtime/cli.h"
#include "eval/passkey_mix.h"

// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
static CliTable mix_flags(PasskeyMixOptions& o, std::string& train_path, std::string& val_path, std::string& prefix) {
    CliTable t("-i TRAIN_SHARD -j VAL_SHARD -o PREFIX [options]",
               "Cuts the training shard into windows of T tokens and puts a passkey prompt (eval/passkey.h's\n"
               "instruction, needle, question and answer, the shard's own text as filler, the needle at a random\n"
               "depth) into a fraction of them. The evaluation's keys are held out; the validation shard is\n"
               "copied unchanged and must hold no needle.");
    t.text("-i", &train_path, "<path>", "training shard (required)")
     .text("-j", &val_path, "<path>", "validation shard (required)")
     .text("-o", &prefix, "<prefix>", "output prefix: PREFIX_train_000000.bin, PREFIX_val_000000.bin, "
           "PREFIX_needles.csv")
     .integer("-t", &o.T, 1, 1 << 20, "training length T, the trainer's -t")
     .custom("-f", "<float>", "fraction of windows with a needle, in [0, 1]", "1.5",
             [&o](const char* v) {  // a double: the fraction is kept exactly as written, not rounded to float
                 char* end;
                 errno = 0;
                 o.fraction = strtod(v, &end);
                 if (*v == 0 || *end != 0 || errno != 0 || !(o.fraction >= 0.0 && o.fraction <= 1.0))
                     cli_fail(std::string("-f ") + v + ": expected a fraction of windows in [0, 1], e.g. 0.5");
             },
             cli_number(o.fraction))
     .integer("-pm", &o.prompts_max, 1, 16, "prompts per needle window: uniform in [1, pm], as many as fit T")
     .integer("-rs", &o.seed, 0, 1LL << 62, "seed of the mix")
     .integer("-hs", &o.holdout_seed, 0, 1LL << 62, "seed of the evaluation whose keys are held out: "
              "passkey_cpu_<attn> -rs")
     .integer("-hn", &o.holdout_trials, 0, 80000, "its trials per length (-n) at most");
    t.epilogue = "Needs the GPT-2 vocabulary (bash scripts/install_gpt2_vocab.sh, or GPT2_VOCAB_DIR=DIR).";
    return t;
}

static void write_needles_csv(const std::string& path, const PasskeyMix& mix) {
    FILE* f = fopen(path.c_str(), "w");
    if (!f) cli_fail("cannot write " + path + " (" + strerror(errno) + ")");
    fprintf(f, "window,key,needle_pos,question_pos,distance\n");
    for (const PasskeyMixNeedle& nd : mix.needles)
        fprintf(f, "%lld,%d,%d,%d,%d\n", (long long)nd.window, nd.key, nd.needle_pos, nd.question_pos,
                nd.question_pos - nd.needle_pos);
    if (fclose(f) != 0) cli_fail("writing " + path + " failed (" + strerror(errno) + ")");
}

// A shard that already holds a passkey needle is not a plain corpus: the mix would not know its keys.
static void refuse_needles(const PasskeyParts& parts, const std::vector<uint16_t>& tokens, const std::string& path,
                           const char* flag) {
    std::vector<int64_t> at = passkey_find_needles(parts, tokens.data(), (int64_t)tokens.size(), true);
    if (!at.empty())
        cli_fail(std::string(flag) + " " + path + ": holds passkey text (\" The pass key is\") at token " +
                 std::to_string(at[0]) + " (" + std::to_string(at.size()) +
                 " in all); give the plain corpus's shard, not a mix");
}

int main(int argc, char** argv) {
    PasskeyMixOptions o;
    std::string train_path, val_path, prefix;
    CliTable flags = mix_flags(o, train_path, val_path, prefix);
    flags.parse(argc, argv);
    if (train_path.empty() || val_path.empty() || prefix.empty()) {
        flags.print_usage(stderr, argv[0]);
        cli_fail("-i, -j and -o are required");
    }
    try {
        GPT2Tokenizer tok;
        tok.load(GPT2Tokenizer::default_dir());
        PasskeyParts parts = passkey_parts(tok);
        std::vector<uint16_t> train = read_shard(train_path, GPT2Tokenizer::VOCAB_SIZE);
        std::vector<uint16_t> valid = read_shard(val_path, GPT2Tokenizer::VOCAB_SIZE);
        refuse_needles(parts, train, train_path, "-i");
        refuse_needles(parts, valid, val_path, "-j");
        PasskeyMix mix = passkey_mix_build(parts, train.data(), (int64_t)train.size(), o);
        if (mix.windows == 0)
            cli_fail("-i " + train_path + ": " + std::to_string(train.size()) + " tokens, fewer than one window of " +
                     std::to_string(o.T));
        write_shard(prefix + "_train_000000.bin", mix.tokens.data(), mix.tokens.size());
        write_shard(prefix + "_val_000000.bin", valid.data(), valid.size());
        write_needles_csv(prefix + "_needles.csv", mix);
        double mean_distance = 0;
        int64_t needle_windows = 0;
        for (size_t k = 0; k < mix.needles.size(); k++) {
            mean_distance += mix.needles[k].question_pos - mix.needles[k].needle_pos;
            needle_windows += k == 0 || mix.needles[k].window != mix.needles[k - 1].window;
        }
        if (!mix.needles.empty()) mean_distance /= mix.needles.size();
        printf("passkey mix of %s at T %d, seed %llu: %lld windows, %lld with a needle (%.1f%%, asked %.1f%%), "
               "%zu prompts (up to %d per window), needle-to-question distance %.1f tokens on average; "
               "%lld of %zu corpus tokens used; %d evaluation trials' keys held out (seed %llu)\n",
               train_path.c_str(), o.T, (unsigned long long)o.seed, (long long)mix.windows, (long long)needle_windows,
               100.0 * needle_windows / mix.windows, 100.0 * o.fraction, mix.needles.size(), o.prompts_max, mean_distance,
               (long long)mix.corpus_used, train.size(), o.holdout_trials, (unsigned long long)o.holdout_seed);
        printf("wrote %s_train_000000.bin, %s_val_000000.bin (%s unchanged: %zu tokens, no needle), "
               "%s_needles.csv\n",
               prefix.c_str(), prefix.c_str(), val_path.c_str(), valid.size(), prefix.c_str());
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
