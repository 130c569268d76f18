// Text from a checkpoint, streamed as it is generated (llm.c's sampling, nanoGPT's sample.py).
//   build/sample_cpu_lssar -e out/run/ckpt_00000200.bin -gp "In the beginning" -g 200
//   build/sample_cu_lssar  -e ckpt.bin -gk 1                    greedy
// Built per back end and attention variant like the trainer (make sample_cpu ATTN=..., make
// sample_cu ATTN=...), and refuses a checkpoint of another variant.
//
// Tokens: GPT-2's vocabulary (50257) encodes the prompt and decodes the output with the project's
// tokenizer, the context starting with <|endoftext|> as in the trainer's samples; a vocabulary of
// 256 is bytes (byte 0, which starts every document of the byte-level shards, then the prompt's
// bytes; each token printed as its byte); any other vocabulary takes its prompt as token ids (-gi)
// and prints ids.
//
// No KV cache: every new token runs the model over its whole context again. The context is run at
// the next power of two at or above its length (at least 16, at most -t), the positions past it
// filled and, the model being causal, without effect on the last position's logits; so a token
// costs about one forward of that many tokens, and a sample of N tokens after a prompt of P about
// N forwards of (P + N / 2) tokens, where a cache would cost one of P and N of one. The tool prints
// the tokens per second it reaches. The context holds at most -t tokens (default: the checkpoint's
// training length): a prompt longer than that is refused, and a sample that outgrows it keeps its
// last -t tokens, as nanoGPT does.
//
// Output, as nanoGPT's sample.py: stdout holds the samples alone, each followed by a line of dashes
// (build/sample_cpu_lssar -e CKPT > samples.txt); every diagnostic (the checkpoint, the precision,
// the sampling settings, each sample's tokens per second) goes to stderr.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "dataloader/text_codec.h"
#include "eval/sample.h"
#include "model/rand.h"
#include "runtime/backend.h"
#include "runtime/checkpoint.h"
#include "runtime/cli.h"


// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
struct SampleOptions {
    std::string ckpt_path, prompt, ids_path, p_text;
    std::string precision = CLI_DEFAULT_PRECISION;
    std::vector<long long> prompt_ids;
    bool have_prompt_ids = false;
    int gen_tokens = 256, top_k = 40, samples = 1, context = 0, log_len = 0;
    float temperature = 1.0f;
    long long seed = 1337;
};

static CliTable sample_flags(SampleOptions& o) {
    CliTable t("-e CHECKPOINT [options]",
               std::string("Generates text from a checkpoint, printing each token as it comes: top-k sampling at a "
                           "temperature,\nor greedy (-gk 1). No KV cache: each token is one forward over its context "
                           "(see eval/sample.cu).\nAttention variant of this binary: ") + ATTN_NAME + ".");
    t.text("-e", &o.ckpt_path, "<path>", "checkpoint (required)")
     .text("-gp", &o.prompt, "<text>", "prompt to continue (GPT-2 vocabulary: BPE text after <|endoftext|>; vocabulary "
           "256: its bytes) (default: none)")
     .int_list("-gi", &o.prompt_ids, 0, 1 << 30, 1 << 20, "464,3290", "prompt as token ids, comma separated, any "
               "vocabulary (default: none)")
     .integer("-g", &o.gen_tokens, 1, 1 << 24, "tokens to generate per sample")
     .integer("-gk", &o.top_k, 1, 1 << 20, "top-k sampling (default {}; 1 = greedy)")
     .number("-gt", &o.temperature, 0, 100, "sampling temperature (default {}; 0 = greedy)")
     .integer("-n", &o.samples, 1, 1000000, "samples, one after the other from the same prompt")
     .integer("-rs", &o.seed, 0, 1LL << 62, "random seed of the sampling: the same seed gives the same text")
     .integer("-t", &o.context, 1, 1 << 24, "context length: the most tokens the model sees (default: the "
              "checkpoint's training length); a longer prompt is refused")
     .text("-p", &o.p_text, "<float>", "re-weighting power to run at instead of the checkpoint's (>= 1; variants "
           "with re-weighting only)")
     .integer("-ls", &o.log_len, 0, 1, (std::string(CLI_LOG_LEN_HELP) + "; L: the checkpoint's training "
              "length (default {})").c_str())
     .choice("-pr", &o.precision, CLI_PRECISIONS, CLI_PRECISION_HELP)
     .text("-o", &o.ids_path, "<path>", "token ids of every sample, one line each: the context's ids, \"|\", the "
           "generated ids (default: none)");
    t.epilogue = "The GPT-2 vocabulary needs scripts/install_gpt2_vocab.sh (or GPT2_VOCAB_DIR=DIR).";
    return t;
}

// How the checkpoint's tokens are written and read: GPT-2 BPE or bytes (dataloader/text_codec.h),
// or, for any other vocabulary, ids.
struct TokenText {
    std::optional<TextCodec> codec;
    // the text printed for token id (the start of a document prints nothing)
    std::string show(int id) const {
        if (!codec) return " " + std::to_string(id);
        if (id == document_start()) return "";
        return codec->decode(&id, 1);
    }
    // the token a document starts with in the training shards: <|endoftext|>, or byte 0
    int document_start() const { return codec && codec->is_bytes() ? BYTE_DOC_START : GPT2Tokenizer::EOT; }
};

// The context a sample starts from: the start of a document (<|endoftext|>, or byte 0 for a
// byte-level model, as the shards of scripts/prepare_kjv.sh write them) and the prompt; token 0 and
// nothing else for any other vocabulary; or the ids of -gi.
static std::vector<int> start_tokens(const SampleOptions& o, const TokenText& text, int vocab_size) {
    std::vector<int> tokens;
    if (o.have_prompt_ids) {
        for (long long id : o.prompt_ids) {
            if (id >= vocab_size)
                cli_fail("-gi: token id " + std::to_string(id) + " is outside the checkpoint's vocabulary of " +
                         std::to_string(vocab_size));
            tokens.push_back((int)id);
        }
        return tokens;
    }
    if (text.codec) {
        tokens.push_back(text.document_start());
        text.codec->encode(o.prompt, tokens);
    } else {
        if (!o.prompt.empty())
            cli_fail("-gp: the checkpoint's vocabulary (" + std::to_string(vocab_size) + " tokens) is neither GPT-2's "
                     "(50257) nor bytes (256), so text has no tokens: give the prompt as ids with -gi");
        tokens.push_back(0);
    }
    return tokens;
}

// The shape a context of len tokens runs at: the next power of two >= len, at least 16, at most context.
static int run_length(int len, int context) {
    int T = 16;
    while (T < len) T *= 2;
    return std::min(T, context);
}

// Appends n_new tokens to tokens, printing each as it comes. The model sees the last `context` tokens.
static void generate_streaming(Model& model, std::vector<int>& tokens, int n_new, int context, int top_k,
                               float temperature, Rng& rng, const TokenText& text) {
    const int V = model.config.vocab_size;
    std::vector<float> logits(model.config.padded_vocab_size);
    std::vector<int> inputs;
    for (int i = 0; i < n_new; i++) {
        int len = std::min((int)tokens.size(), context);
        int T = run_length(len, context);
        inputs.assign(T, tokens.back());  // the positions past the context: any token, the model is causal
        std::copy(tokens.end() - len, tokens.end(), inputs.begin());
#ifdef TRAIN_BACKEND_CPU
        model.set_logits_from_row(len - 1);  // the classifier of the last position alone
#endif
        model.forward(inputs.data(), nullptr, 1, T);
        model.logits_row(0, len - 1, logits.data());
        int next = sample_token(logits.data(), V, top_k, temperature, rng);
        tokens.push_back(next);
        std::string shown = text.show(next);
        fwrite(shown.data(), 1, shown.size(), stdout);
        fflush(stdout);
    }
}

int main(int argc, char** argv) {
    SampleOptions o;
    CliTable flags = sample_flags(o);
    flags.parse(argc, argv);
    o.have_prompt_ids = flags.given("-gi");
    if (o.ckpt_path.empty()) { flags.print_usage(stderr, argv[0]); cli_fail("-e CHECKPOINT is required"); }
    if (o.have_prompt_ids && flags.given("-gp")) cli_fail("-gp TEXT and -gi IDS are two prompts: give one of them");
    try {
        Checkpoint ck = cli_read_checkpoint(o.ckpt_path, ATTN_NAME);
        cli_print_learned_p(ck, stderr);
        cli_override_p(ck, o.ckpt_path, o.p_text, stderr);
        int log_len = cli_apply_log_len(ck, o.ckpt_path, o.log_len, ck.config.max_seq_len, stderr);  // 0: off
        GPT2Config config = ck.config;
        int context = o.context > 0 ? o.context : config.max_seq_len;
        TokenText text;
        if (config.vocab_size == GPT2Tokenizer::VOCAB_SIZE || config.vocab_size == TextCodec::BYTE_VOCAB)
            text.codec = TextCodec::for_vocab(config.vocab_size);  // its message names a missing file and the fix
        std::vector<int> start = start_tokens(o, text, config.vocab_size);
        if ((int)start.size() > context)
            cli_fail("the prompt is " + std::to_string(start.size()) + " tokens, longer than the context of " +
                     std::to_string(context) + (o.context > 0 ? " (-t)" : " (the checkpoint's training length; -t sets another)") +
                     ": shorten it, or raise -t");
        FILE* ids = nullptr;  // opened before generating, so that an unwritable -o fails at once
        if (!o.ids_path.empty() && (ids = fopen(o.ids_path.c_str(), "w")) == nullptr)
            cli_fail("-o " + o.ids_path + ": cannot write it (" + strerror(errno) + ")");

        config.max_seq_len = std::max(config.max_seq_len, context);
        Model model(config);
        cli_select_precision(model, o.precision, stderr);
        model.set_params(ck.params);
        bool greedy = o.top_k <= 1 || o.temperature <= 0;
        fprintf(stderr,
                "checkpoint %s: %s, p %g, step %lld, %d layers, %d heads, %d channels, vocab %d, %s back end%s\n",
                o.ckpt_path.c_str(), attn_kind_name(config.attn), config.p, (long long)ck.train.step,
                config.num_layers, config.num_heads, config.channels, config.vocab_size, BACKEND_NAME,
                log_len ? (", log-length scaling beyond " + std::to_string(log_len)).c_str() : "");
        fprintf(stderr, "sampling: %s, context %d tokens (prompt %zu), %d tokens per sample, seed %lld; no KV cache: "
                "each token is one forward over its context (at most %d tokens)\n",
                greedy ? "greedy" : ("top-k " + std::to_string(o.top_k) + ", temperature " + cli_number(o.temperature)).c_str(),
                context, start.size(), o.gen_tokens, o.seed, context);
        Rng rng((uint64_t)o.seed);
        for (int s = 0; s < o.samples; s++) {
            std::vector<int> tokens = start;
            for (int id : tokens) {
                std::string shown = text.show(id);
                fwrite(shown.data(), 1, shown.size(), stdout);
            }
            fflush(stdout);
            auto t0 = std::chrono::steady_clock::now();
            generate_streaming(model, tokens, o.gen_tokens, context, o.top_k, o.temperature, rng, text);
            double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            printf("\n---------------\n");
            fflush(stdout);
            fprintf(stderr, "sample %d: %d tokens in %.2f s (%.1f tokens/s)\n", s + 1, o.gen_tokens, secs,
                    o.gen_tokens / secs);
            if (ids != nullptr) {
                for (size_t i = 0; i < tokens.size(); i++)
                    fprintf(ids, "%s%d", i == 0 ? "" : i == start.size() ? " | " : " ", tokens[i]);
                fprintf(ids, "\n");
            }
        }
        if (ids != nullptr && fclose(ids) != 0) cli_fail("writing " + o.ids_path + " failed (" + strerror(errno) + ")");
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
