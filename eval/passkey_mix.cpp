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

static void usage(const char* argv0) {
    PasskeyMixOptions d;
    fprintf(stderr,
            "Usage: %s -i TRAIN_SHARD -j VAL_SHARD -o PREFIX [options]\n"
            "Cuts the training shard into windows of T tokens and puts a passkey prompt (eval/passkey.h's\n"
            "instruction, needle, question and answer, the shard's own text as filler, the needle at a random\n"
            "depth) into a fraction of them. The evaluation's keys are held out; the validation shard is\n"
            "copied unchanged and must hold no needle.\n"
            "  -i <path>    training shard (required)\n"
            "  -j <path>    validation shard (required)\n"
            "  -o <prefix>  output prefix: PREFIX_train_000000.bin, PREFIX_val_000000.bin, PREFIX_needles.csv\n"
            "  -t <int>     training length T, the trainer's -t (default %d)\n"
            "  -f <float>   fraction of windows with a needle, in [0, 1] (default %g)\n"
            "  -pm <int>    prompts per needle window: uniform in [1, pm], as many as fit T (1..16, default %d)\n"
            "  -rs <int>    seed of the mix (default %llu)\n"
            "  -hs <int>    seed of the evaluation whose keys are held out: passkey_cpu_<attn> -rs (default %llu)\n"
            "  -hn <int>    its trials per length (-n) at most (default %d)\n"
            "  -h           this help\n"
            "Needs the GPT-2 vocabulary (bash scripts/install_gpt2_vocab.sh, or GPT2_VOCAB_DIR=DIR).\n",
            argv0, d.T, d.fraction, d.prompts_max, (unsigned long long)d.seed, (unsigned long long)d.holdout_seed,
            d.holdout_trials);
}

static double parse_fraction(const char* s) {
    char* end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || errno != 0 || !(v >= 0.0 && v <= 1.0))
        cli_fail(std::string("-f ") + s + ": expected a fraction of windows in [0, 1], e.g. 0.5");
    return v;
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
    std::string flag;
    const char* val;
    for (int i = 1; cli_next_flag(argc, argv, &i, usage, &flag, &val);) {
        if (flag == "-i") train_path = val;
        else if (flag == "-j") val_path = val;
        else if (flag == "-o") prefix = val;
        else if (flag == "-t") o.T = (int)cli_parse_int("-t", val, 1, 1 << 20);
        else if (flag == "-f") o.fraction = parse_fraction(val);
        else if (flag == "-pm") o.prompts_max = (int)cli_parse_int("-pm", val, 1, 16);
        else if (flag == "-rs") o.seed = (uint64_t)cli_parse_int("-rs", val, 0, 1LL << 62);
        else if (flag == "-hs") o.holdout_seed = (uint64_t)cli_parse_int("-hs", val, 0, 1LL << 62);
        else if (flag == "-hn") o.holdout_trials = (int)cli_parse_int("-hn", val, 0, 80000);
        else cli_fail("unknown flag " + flag + " (-h lists the flags)");
    }
    if (train_path.empty() || val_path.empty() || prefix.empty()) {
        usage(argv[0]);
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
