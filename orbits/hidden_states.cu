// Final hidden states of a checkpoint: the output of the final layernorm (the input of the
// logits) at every position of every sequence of a token shard, as a float32 .npy (N, T, C).
//   build/hidden_states_cpu_lssar -e out/ckpt.bin -i probe.bin -t 253 -o hidden.npy
// The shard is cut into consecutive sequences of T tokens (orbits/tokens.py writes one system per
// sequence); each sequence is one forward pass from its first token, so the state at position t
// sees tokens 0..t of its own sequence only. CPU back end, built per attention variant like the
// trainer (make hidden_states_cpu ATTN=...), and refuses a checkpoint of another variant.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cli.h"
#include "runtime/checkpoint.h"
#include "dataloader/shard.h"

// The command line: one line per flag (runtime/cli.h's CliTable makes the parser and -h from it).
struct HiddenOptions {
    std::string ckpt_path, shard_path, out_path, p_text;
    std::string precision = CLI_DEFAULT_PRECISION;
    long long T = 0, max_seqs = 0, B = 16;
};

static CliTable hidden_flags(HiddenOptions& o) {
    CliTable t("-e CHECKPOINT -i SHARD -t T -o OUT.npy [options]",
               std::string("Writes the final layernorm's output (the hidden state the logits are computed from) at "
                           "every\nposition of every sequence of T tokens of SHARD, as a float32 .npy of shape (N, T, "
                           "C).\nAttention variant of this binary: ") + ATTN_NAME + ".");
    t.text("-e", &o.ckpt_path, "<path>", "checkpoint (required)")
     .text("-p", &o.p_text, "<float>", CLI_P_HELP)
     .choice("-pr", &o.precision, CLI_PRECISIONS, std::string(CLI_PRECISION_HELP).append(
             ". On bf16 the states are the bf16 input of the logits' matmul, written as float32").c_str())
     .text("-i", &o.shard_path, "<path>", "token shard; its token count must be a multiple of -t (required)")
     .integer("-t", &o.T, 1, 1 << 20, "sequence length T (required)")
     .text("-o", &o.out_path, "<path>", "output .npy (required)")
     .integer("-n", &o.max_seqs, 1, 1LL << 40, "sequences at most, the first ones (default: all)")
     .integer("-b", &o.B, 1, 4096, "sequences per forward pass");
    return t;
}

// A .npy version 1.0 header for a C-order little-endian float32 array of the given shape.
static std::string npy_header(size_t n, size_t t, size_t c) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ", " +
                       std::to_string(t) + ", " + std::to_string(c) + "), }";
    size_t total = 10 + dict.size() + 1;           // magic, version, length, dict, '\n'
    dict.append((64 - total % 64) % 64, ' ');       // the data starts 64-byte aligned
    dict += '\n';
    std::string h = "\x93NUMPY";
    h += '\x01';
    h += '\x00';
    h += (char)(dict.size() & 0xff);
    h += (char)(dict.size() >> 8);
    return h + dict;
}

// Runs the forward over tokens[0 .. N*T) in batches of B and writes the (N, T, C) states to out.
static void write_hidden_states(ModelCPU& model, const std::vector<uint16_t>& tokens, size_t N, int T, int B,
                                FILE* out, const std::string& out_path) {
    const int C = model.config.channels;
    std::vector<int> inputs;
    std::vector<float> widened;
    for (size_t first = 0; first < N; first += B) {
        int b_now = (int)std::min<size_t>(B, N - first);
        inputs.assign(tokens.begin() + first * T, tokens.begin() + (first + b_now) * T);
        model.forward(inputs.data(), nullptr, b_now, T);
        size_t count = (size_t)b_now * T * C;
        const float* lnf = model.gpt.acts.lnf;     // (b_now, T, C)
        if (model.fast16) {  // the bf16 numerics keep the final layernorm's output in bf16 only
            widened.resize(count);
            fast_widen_bf16(widened.data(), model.fast16->lnf.data(), count);
            lnf = widened.data();
        }
        if (fwrite(lnf, sizeof(float), count, out) != count)
            cli_fail("writing " + out_path + " failed (" + strerror(errno) + ")");
        printf("\r%zu/%zu sequences", first + b_now, N);
        fflush(stdout);
    }
    printf("\n");
}

int main(int argc, char** argv) {
    HiddenOptions o;
    CliTable flags = hidden_flags(o);
    flags.parse(argc, argv);
    if (o.ckpt_path.empty() || o.shard_path.empty() || o.T == 0 || o.out_path.empty()) {
        flags.print_usage(stderr, argv[0]);
        cli_fail("-e, -i, -t and -o are required");
    }
    const std::string &ckpt_path = o.ckpt_path, &shard_path = o.shard_path, &out_path = o.out_path;
    const long long T = o.T, max_seqs = o.max_seqs, B = o.B;
    try {
        Checkpoint ck = cli_read_checkpoint(ckpt_path, ATTN_NAME);
        cli_print_learned_p(ck);
        cli_override_p(ck, ckpt_path, o.p_text);
        std::vector<uint16_t> tokens = read_shard(shard_path, ck.config.vocab_size);
        if (tokens.size() % T != 0)
            cli_fail(shard_path + " holds " + std::to_string(tokens.size()) + " tokens, not a multiple of -t " +
                     std::to_string(T) + ": give the sequence length the shard was written with");
        size_t N = tokens.size() / T;
        if (max_seqs > 0) N = std::min<size_t>(N, (size_t)max_seqs);
        GPT2Config config = ck.config;
        config.max_seq_len = std::max<int>((int)T, config.max_seq_len);
        Model model(config);
        cli_select_precision(model, o.precision);
        model.set_params(ck.params);
        printf("checkpoint %s: %s, %d layers, %d channels, vocab %d; %zu sequences of %lld tokens from %s\n",
               ckpt_path.c_str(), attn_kind_name(config.attn), config.num_layers, config.channels,
               config.vocab_size, N, T, shard_path.c_str());
        std::string tmp = out_path + ".tmp";
        FILE* out = fopen(tmp.c_str(), "wb");
        if (!out) cli_fail("cannot write " + tmp + " (" + strerror(errno) + ")");
        std::string header = npy_header(N, (size_t)T, (size_t)config.channels);
        if (fwrite(header.data(), 1, header.size(), out) != header.size())
            cli_fail("writing " + tmp + " failed (" + strerror(errno) + ")");
        write_hidden_states(model, tokens, N, (int)T, (int)B, out, tmp);
        if (fclose(out) != 0) cli_fail("writing " + tmp + " failed (" + strerror(errno) + ")");
        if (rename(tmp.c_str(), out_path.c_str()) != 0)
            cli_fail("cannot rename " + tmp + " to " + out_path + " (" + strerror(errno) + ")");
        printf("wrote %s: (%zu, %lld, %d) float32\n", out_path.c_str(), N, T, config.channels);
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
    return 0;
}
