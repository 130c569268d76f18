// The trainer: command line, training loop, logging, checkpoints, sampling.
// One source for every back end, chosen at build time (the Makefile sets the macros):
//   make train_gpt2cpu ATTN=lssar   g++, CPU back end (model/backend_cpu.h)     -> ./train_gpt2cpu_lssar
//   make train_gpt2cu ATTN=lssar    nvcc, CUDA back end (model/gpt2_cuda.cuh)   -> ./train_gpt2cu_lssar
// The attention variant is fixed at build time (ATTN_NAME) and recorded in every checkpoint.
// The CUDA back end trains data-parallel over several processes (model/distributed.h):
//   scripts/launch.sh -n 8 ./train_gpt2cu_lssar ...   (or srun); the CPU back end is one process.
// The back-end interface the loop is written against is listed at the top of model/backend_cpu.h.
// Flags follow llm.c's train_gpt2.cu where the meaning is the same; -h lists them all.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "model/backend.h"
#ifndef TRAIN_BACKEND_CPU
#include "model/distributed.h"
#endif
#include "dataloader/dataloader.h"
#include "dataloader/tokenizer.h"
#include "eval/sample.h"
#include "model/checkpoint.h"
#include "model/rand.h"

#ifdef TRAIN_BACKEND_CPU
// The CPU back end trains in one process: model/distributed.h's calls in their one-rank form, so
// that the training loop is the same for both back ends.
struct DistConfig {
    int rank = 0, world = 1;
};

static DistConfig dist_config_from_env() {
    for (const char* name : {"WORLD_SIZE", "SLURM_NTASKS"}) {
        const char* v = getenv(name);
        if (v != nullptr && *v != 0 && strcmp(v, "1") != 0)
            throw std::runtime_error(std::string(name) + "=" + v + ": the CPU trainer runs as one process; train "
                                     "data-parallel with the CUDA build (make train_gpt2cu), or unset " + name);
    }
    return DistConfig();
}

struct Distributed {
    DistConfig config;
    bool zero1 = false;
    void init(const DistConfig& c) { config = c; }
    void attach(Model&, bool) {}
    void overlap_reduce(Model&) {}
    void reduce_grads(Model&) {}
    double grad_norm(Model& model) { return model.grad_norm(); }
    float average(float x) { return x; }
    void update(Model& model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                int step) {
        model.update(lr, beta1, beta2, eps, weight_decay, grad_scale, step);
    }
    void gather_params(Model& model, std::vector<float>& out) { model.get_params(out); }
    OptimizerShard optimizer_shard(Model& model) {
        OptimizerShard s;
        s.num_parameters = s.end = model.num_parameters;
        model.get_optimizer(s.m, s.v);
        return s;
    }
    void restore_optimizer(Model& model, const OptimizerShard& s, int) { model.set_optimizer(s.m, s.v); }
    bool any(bool flag) { return flag; }
    void finish() {}
};
#endif

// ----------------------------------------------------------------------------
// command line

struct Options {
    std::string train_pattern = "data/kjv/kjv_train_*.bin";  // -i
    std::string val_pattern = "data/kjv/kjv_val_*.bin";      // -j
    std::string out_dir;                                     // -o
    std::string model = "d12";                               // -e
    int B = 4, T = 1024;                                     // -b, -t
    long long total_batch = -1;                              // -d
    float lr = 3e-4f;                                        // -l
    std::string schedule = "cosine";                         // -k
    int warmup = 0;                                          // -u
    float final_frac = 1.0f;                                 // -q
    float weight_decay = 0.0f;                               // -c
    float clip = 1.0f;                                       // -gc
    int max_steps = -1;                                      // -x
    int steps_this_run = 0;                                  // -xi
    int val_every = 20, val_steps = 20;                      // -v, -m
    int sample_every = 20, gen_tokens = 64, top_k = 40;      // -s, -g, -gk
    float temperature = 1.0f;                                // -gt
    std::string prompt;                                      // -gp
    int ckpt_every = 0, ckpt_keep = 0, resume = 0;           // -n, -nk, -y
    long long seed = 1337;                                   // -rs
    float p = 15.0f;                                         // -p
    bool p_given = false;
    float rope_base = 10000.0f;                              // -rb
    bool rope_given = false;
    int max_skips = 5;                                       // -sk
    float spike_z = 0.0f;                                    // -sl
    int zero1 = 0;                                           // -z
};

static void usage() {
    Options d;
    fprintf(stderr,
        "Usage: ./train_gpt2%s_%s [options]\n"
        "Trains GPT-2 + RoPE with %s attention (fixed at build time: make ... ATTN=<variant>; make ATTN=x lists them).\n"
        "Data and output\n"
        "  -i <glob>    training shards (default %s)\n"
        "  -j <glob>    validation shards (default %s; \"\" = none)\n"
        "  -o <dir>     output dir: log.jsonl and checkpoints: the model ckpt_<step>.bin (rank 0) and the AdamW\n"
        "               moments ckpt_<step>_adamw_<rank>of<ranks>.bin (each rank its own) (default: none)\n"
        "Model\n"
        "  -e <model>   a depth descriptor dL[cC][hH][vV] (L layers, C channels = 64L, H heads = C/64,\n"
        "               V vocab = 50257 by default; e.g. d12, d4c256h4), or a checkpoint to start from\n"
        "               (its weights; fresh optimizer and data order) (default %s)\n"
        "  -p <float>   re-weighting power p >= 1 (default %g; variants with re-weighting only)\n"
        "  -rb <float>  RoPE base (default %g)\n"
        "Batch\n"
        "  -b <int>     micro-batch size B (default %d)\n"
        "  -t <int>     sequence length T (default %d)\n"
        "  -d <int>     total batch size in tokens over all ranks, a multiple of B*T*ranks: gradient\n"
        "               accumulation = d/(B*T*ranks) (default B*T*ranks)\n"
        "Data parallelism (CUDA build; one process per GPU: scripts/launch.sh -n 8 ./train_gpt2cu_...)\n"
        "  environment: RANK, WORLD_SIZE, LOCAL_RANK (or SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), DIST_RUN_ID,\n"
        "  DIST_ID_DIR (the NCCL id's file, default /tmp) or DIST_RENDEZVOUS=tcp://host:port, DIST_TIMEOUT_S\n"
        "  -z <int>     1: ZeRO-1, each rank keeps the optimizer state of its shard of the parameters\n"
        "               (default %d; no effect with one rank)\n"
        "Optimisation (AdamW, betas 0.9 0.95, eps 1e-8)\n"
        "  -l <float>   learning rate (default %g)\n"
        "  -k <name>    schedule after warmup: cosine, linear or constant (default %s)\n"
        "  -u <int>     warmup steps, linear from lr/u (default %d)\n"
        "  -q <float>   final learning rate as a fraction of -l, reached at the last step (default %g)\n"
        "  -c <float>   weight decay, on the matrices only (default %g)\n"
        "  -gc <float>  gradient clipping: the global gradient norm is scaled down to this (default %g; 0 = off)\n"
        "  -x <int>     max steps (default -1: one epoch of the training shards)\n"
        "  -xi <int>    steps to run in this invocation, then checkpoint (with -o) and exit; the schedule\n"
        "               still spans -x, and -y 1 continues (default 0: run to the end)\n"
        "  -rs <int>    random seed: initialisation, data order, sampling (default %lld)\n"
        "Guards\n"
        "  -sk <int>    stop after this many consecutive skipped updates (default %d). An update is skipped\n"
        "               when the loss or the gradient norm is not finite, or is a spike (-sl)\n"
        "  -sl <float>  skip the update when the loss is this many standard deviations above its running\n"
        "               mean (default %g = off)\n"
        "Evaluation and sampling\n"
        "  -v <int>     validation loss every this many steps, and at the end (default %d; 0 = never)\n"
        "  -m <int>     validation batches per evaluation (default %d)\n"
        "  -s <int>     sample every this many steps, and at the end (default %d; 0 = never)\n"
        "  -g <int>     tokens to generate per sample (default %d)\n"
        "  -gk <int>    top-k sampling (default %d; 1 = greedy)\n"
        "  -gt <float>  sampling temperature (default %g)\n"
        "  -gp <text>   prompt to continue (default: none, starts from <|endoftext|>)\n"
        "Checkpoints\n"
        "  -n <int>     checkpoint every this many steps, and at the end (default %d = never; needs -o)\n"
        "  -nk <int>    keep only the newest this many checkpoints (default %d = keep all)\n"
        "  -y <int>     1: resume from the newest checkpoint in -o (model, optimizer, data position, rng,\n"
        "               step), if there is one; with as many ranks as the run had (default %d)\n"
        "  -h           this help\n",
#ifdef TRAIN_BACKEND_CPU
        "cpu",
#else
        "cu",
#endif
        ATTN_NAME, ATTN_NAME, d.train_pattern.c_str(), d.val_pattern.c_str(), d.model.c_str(), d.p, d.rope_base,
        d.B, d.T, d.zero1, d.lr, d.schedule.c_str(), d.warmup, d.final_frac, d.weight_decay, d.clip, d.seed,
        d.max_skips, d.spike_z, d.val_every, d.val_steps, d.sample_every, d.gen_tokens, d.top_k, d.temperature,
        d.ckpt_every, d.ckpt_keep, d.resume);
}

[[noreturn]] static void fail(const std::string& msg, int code = 1) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    exit(code);
}

static long long parse_int(const std::string& flag, const char* s, long long lo, long long hi, const char* what) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == 0 || *end != 0 || errno != 0)
        fail(flag + " " + s + ": " + what + " must be an integer");
    if (v < lo || v > hi)
        fail(flag + " " + s + ": " + what + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
}

static float parse_float(const std::string& flag, const char* s, double lo, double hi, const char* what) {
    char* end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || errno != 0 || !std::isfinite(v)) fail(flag + " " + s + ": " + what + " must be a number");
    if (v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof range, " must be in [%g, %g]", lo, hi);
        fail(flag + " " + s + ": " + what + range);
    }
    return (float)v;
}

static Options parse_args(int argc, char** argv) {
    Options o;
    const long long BIG = 1000000000;
    for (int i = 1; i < argc; i++) {
        std::string flag = argv[i];
        if (flag == "-h" || flag == "--help") {
            usage();
            exit(0);
        }
        if (flag.size() < 2 || flag[0] != '-')
            fail("unexpected argument '" + flag + "': flags take the form -x value (-h lists them)");
        if (i + 1 >= argc) fail(flag + ": missing value (-h lists the flags)");
        const char* v = argv[++i];
        if (flag == "-i") o.train_pattern = v;
        else if (flag == "-j") o.val_pattern = v;
        else if (flag == "-o") o.out_dir = v;
        else if (flag == "-e") o.model = v;
        else if (flag == "-b") o.B = (int)parse_int(flag, v, 1, 1 << 20, "batch size");
        else if (flag == "-t") o.T = (int)parse_int(flag, v, 1, 1 << 20, "sequence length");
        else if (flag == "-d") o.total_batch = parse_int(flag, v, 1, 1LL << 40, "total batch size (tokens)");
        else if (flag == "-l") o.lr = parse_float(flag, v, 0, 3e38, "learning rate");
        else if (flag == "-k") {
            o.schedule = v;
            if (o.schedule != "cosine" && o.schedule != "linear" && o.schedule != "constant")
                fail(flag + " " + v + ": schedule must be cosine, linear or constant");
        }
        else if (flag == "-u") o.warmup = (int)parse_int(flag, v, 0, BIG, "warmup steps");
        else if (flag == "-q") o.final_frac = parse_float(flag, v, 0, 1, "final learning rate fraction");
        else if (flag == "-c") o.weight_decay = parse_float(flag, v, 0, 10, "weight decay");
        else if (flag == "-gc") o.clip = parse_float(flag, v, 0, 1e30, "gradient clipping norm");
        else if (flag == "-x") o.max_steps = (int)parse_int(flag, v, -1, BIG, "max steps");
        else if (flag == "-xi") o.steps_this_run = (int)parse_int(flag, v, 0, BIG, "steps in this invocation");
        else if (flag == "-v") o.val_every = (int)parse_int(flag, v, 0, BIG, "validation interval");
        else if (flag == "-m") o.val_steps = (int)parse_int(flag, v, 1, BIG, "validation batches");
        else if (flag == "-s") o.sample_every = (int)parse_int(flag, v, 0, BIG, "sampling interval");
        else if (flag == "-g") o.gen_tokens = (int)parse_int(flag, v, 1, 1 << 20, "generated tokens");
        else if (flag == "-gk") o.top_k = (int)parse_int(flag, v, 1, 1 << 20, "top-k");
        else if (flag == "-gt") o.temperature = parse_float(flag, v, 0, 100, "temperature");
        else if (flag == "-gp") o.prompt = v;
        else if (flag == "-n") o.ckpt_every = (int)parse_int(flag, v, 0, BIG, "checkpoint interval");
        else if (flag == "-nk") o.ckpt_keep = (int)parse_int(flag, v, 0, BIG, "checkpoints to keep");
        else if (flag == "-y") o.resume = (int)parse_int(flag, v, 0, 1, "resume");
        else if (flag == "-rs") o.seed = parse_int(flag, v, 0, (1LL << 62), "seed");
        else if (flag == "-p") { o.p = parse_float(flag, v, 1, 1e6, "re-weighting power p"); o.p_given = true; }
        else if (flag == "-rb") { o.rope_base = parse_float(flag, v, 1.0001, 1e30, "RoPE base"); o.rope_given = true; }
        else if (flag == "-sk") o.max_skips = (int)parse_int(flag, v, 1, BIG, "consecutive skips");
        else if (flag == "-sl") o.spike_z = parse_float(flag, v, 0, 1e30, "loss spike threshold");
        else if (flag == "-z") o.zero1 = (int)parse_int(flag, v, 0, 1, "ZeRO-1");
        else fail("unknown flag " + flag + " (-h lists the flags)");
    }
    if (o.p_given && !attn_reweights(ATTN_BUILT))
        fail(std::string("-p: ") + ATTN_NAME + " attention has no re-weighting, so p does not apply (leave -p out, "
             "or build a variant with re-weighting: lssar, softmax_rw, sigmoid_l1_rw, relu_l1_rw)");
    if ((o.ckpt_every > 0 || o.resume) && o.out_dir.empty())
        fail(std::string(o.resume ? "-y 1" : "-n " + std::to_string(o.ckpt_every)) + ": checkpoints need an output dir (-o)");
    return o;
}

// "d12", "d4c256h4", "d2c32h2v512" -> config; false if s is not a descriptor
static bool parse_descriptor(const std::string& s, GPT2Config& c) {
    if (s.size() < 2 || s[0] != 'd') return false;
    long vals[4] = {0, 0, 0, 0};  // d, c, h, v
    const char* keys = "dchv";
    size_t i = 0;
    int last = -1;
    while (i < s.size()) {
        const char* k = strchr(keys, s[i]);
        if (!k || s[i] == 0 || (int)(k - keys) <= last) return false;
        last = (int)(k - keys);
        size_t j = ++i;
        while (j < s.size() && isdigit((unsigned char)s[j])) j++;
        if (j == i || j - i > 9) return false;
        vals[last] = atol(s.substr(i, j - i).c_str());
        i = j;
    }
    c.num_layers = (int)vals[0];
    c.channels = vals[1] ? (int)vals[1] : 64 * c.num_layers;
    c.num_heads = vals[2] ? (int)vals[2] : std::max(1, c.channels / 64);
    c.vocab_size = vals[3] ? (int)vals[3] : 50257;
    c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
    return true;
}

// ----------------------------------------------------------------------------
// learning rate schedule: linear warmup, then cosine / linear decay to lr * final_frac at max_steps

static float learning_rate(const Options& o, int step, int max_steps) {  // step: 1-based
    if (step <= o.warmup) return o.lr * step / o.warmup;
    if (o.schedule == "constant" || max_steps <= o.warmup) return o.lr;
    double progress = (double)(step - o.warmup) / (max_steps - o.warmup);  // (0, 1]
    double min_lr = o.lr * o.final_frac;
    double decay = o.schedule == "cosine" ? 0.5 * (1.0 + cos(M_PI * progress)) : 1.0 - progress;
    return (float)(min_lr + (o.lr - min_lr) * decay);
}

// ----------------------------------------------------------------------------
// logging

static std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", x);
    return buf;
}

// Keeps the records of log.jsonl up to `step`: a resumed run rewrites what came after its checkpoint.
static void truncate_log(const std::string& path, long long step) {
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return;
    std::string kept;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        long long s;
        if (sscanf(line, "{\"step\":%lld", &s) == 1 && s > step) continue;
        kept += line;
    }
    fclose(f);
    f = fopen(path.c_str(), "w");
    if (!f || fwrite(kept.data(), 1, kept.size(), f) != kept.size() || fclose(f) != 0)
        fail("cannot rewrite " + path + " (" + strerror(errno) + ")");
}

static std::string format_duration(double seconds) {
    char buf[32];
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
    return buf;
}

// Dense bf16 tensor-core peak of the GPU, 0 where unknown (then no MFU is printed).
static double peak_flops() {
#ifdef __CUDACC__
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 0;
    std::string name = prop.name;
    if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) return 989e12;
    if (name.find("A100") != std::string::npos) return 312e12;
    if (name.find("L40S") != std::string::npos) return 362e12;
    if (name.find("A10") != std::string::npos) return 125e12;
#endif
    return 0;
}

// ----------------------------------------------------------------------------

struct Trainer {
    Options opt;
    GPT2Config config;
    Distributed dist;  // this process's rank; rank 0 alone prints, logs, samples and writes checkpoints
    Model* model = nullptr;
    DataLoader train_loader, val_loader;
    bool have_val = false;
    GPT2Tokenizer tokenizer;
    bool have_tokenizer = false;
    TrainState state;
    Rng rng{0};
    int grad_accum = 1, max_steps = 0;
    std::string log_path, last_checkpoint;
    FILE* log = nullptr;
    std::vector<int> inputs, targets;

    void log_line(const std::string& json) {
        if (!log) return;
        if (fprintf(log, "%s\n", json.c_str()) < 0 || fflush(log) != 0)
            fail("writing " + log_path + " failed (" + strerror(errno) + ")");
    }

    float validate() {
        val_loader.reset();
        int steps = (int)std::min<int64_t>(opt.val_steps, val_loader.batches_per_epoch);
        double sum = 0;
        for (int i = 0; i < steps; i++) {
            val_loader.next_batch(inputs.data(), targets.data());
            sum += model->forward(inputs.data(), targets.data(), opt.B, opt.T);
        }
        return (float)mean_over_ranks(sum / steps);
    }

    bool is_main() const { return dist.config.rank == 0; }

    // The mean of x over the ranks (exchanged as a float); with one rank x itself, as it was.
    double mean_over_ranks(double x) { return dist.config.world > 1 ? dist.average((float)x) : x; }

    void sample(int step) {
        // <|endoftext|> starts the context and fills the unused positions (token 0 for a smaller vocabulary)
        int eot = config.vocab_size > GPT2Tokenizer::EOT ? GPT2Tokenizer::EOT : 0;
        std::vector<int> tokens = {eot};
        if (!opt.prompt.empty()) tokenizer.encode(opt.prompt, tokens, nullptr);
        size_t prompt_len = tokens.size();
        generate(*model, tokens, opt.gen_tokens, opt.B, opt.T, opt.top_k, opt.temperature, rng, eot);
        printf("---- sample at step %d\n", step);
        if (have_tokenizer) {
            printf("%s%s\n", opt.prompt.c_str(), tokenizer.decode(tokens.data() + prompt_len, tokens.size() - prompt_len).c_str());
        } else {
            for (size_t i = prompt_len; i < tokens.size(); i++) printf("%d ", tokens[i]);
            printf("\n");
        }
        printf("----\n");
    }

    // Every rank calls this: each writes its optimizer shard; once all are written, rank 0 writes
    // the model file, which completes the checkpoint (model/checkpoint.h).
    void save_checkpoint(int step) {
        std::string path = checkpoint_path(opt.out_dir, step);
        std::string kept = last_checkpoint.empty() ? "No earlier checkpoint of this run."
                                                   : "The previous checkpoint " + last_checkpoint + " is intact.";
        OptimizerShard shard = dist.optimizer_shard(*model);
        shard.step = step;
        std::string shard_path = optimizer_shard_path(opt.out_dir, step, dist.config.rank, dist.config.world);
        std::string error;
        try {
            optimizer_shard_write(shard_path, shard);
        } catch (const std::exception& e) {
            error = e.what();
        }
        if (dist.any(!error.empty())) {
            remove(shard_path.c_str());
            fail((error.empty() ? "another rank could not write its optimizer shard of step " + std::to_string(step)
                                : error) + "; stopping. " + kept);
        }
        std::vector<float> params;
        dist.gather_params(*model, params);
        if (is_main()) {
            Checkpoint ck;
            ck.config = config;
            ck.world_size = dist.config.world;
            state.step = step;
            state.rng_state = rng.state;
            state.has_loader = 1;
            state.loader = train_loader.state();
            ck.train = state;
            ck.params.swap(params);
            try {
                checkpoint_write(path, ck);
            } catch (const std::exception& e) {
                error = e.what();
            }
        }
        if (dist.any(!error.empty())) {
            remove(shard_path.c_str());
            fail((error.empty() ? "rank 0 could not write " + path : error) + "; stopping. " + kept);
        }
        last_checkpoint = path;
        if (is_main()) {
            checkpoint_keep_last(opt.out_dir, opt.ckpt_keep);
            printf("wrote %s\n", path.c_str());
        }
    }

    // false if the update must be skipped (reason set)
    bool guard(double loss, double norm, std::string& reason) {
        if (!std::isfinite(loss)) { reason = "non-finite loss"; return false; }
        if (!std::isfinite(norm)) { reason = "non-finite gradient norm"; return false; }
        if (opt.spike_z > 0 && state.loss_count >= 20) {
            double sd = std::sqrt(state.loss_emvar);
            if (sd > 0 && (loss - state.loss_ema) / sd > opt.spike_z) {
                char buf[96];
                snprintf(buf, sizeof buf, "loss spike (%.2f standard deviations above the running mean)",
                         (loss - state.loss_ema) / sd);
                reason = buf;
                return false;
            }
        }
        // running mean and variance: exact for the first 20 losses, then exponential (weight 1/20)
        state.loss_count++;
        double a = std::max(1.0 / state.loss_count, 0.05), delta = loss - state.loss_ema;
        state.loss_ema += a * delta;
        state.loss_emvar = (1 - a) * (state.loss_emvar + a * delta * delta);
        return true;
    }

    void setup() {
        DistConfig dc = dist_config_from_env();
        long long rows = (long long)opt.B * opt.T * dc.world;  // tokens of one micro-step, all ranks
        if (opt.total_batch == -1) opt.total_batch = rows;
        if (opt.total_batch % rows != 0) {
            std::string ranks = dc.world > 1 ? ", " + std::to_string(dc.world) + " ranks" : "";
            fail("-d " + std::to_string(opt.total_batch) + ": total batch size must be a multiple of B*T" +
                 (dc.world > 1 ? "*ranks" : "") + " = " + std::to_string(rows) + " (-b " + std::to_string(opt.B) +
                 " -t " + std::to_string(opt.T) + ranks + ")");
        }
        grad_accum = (int)(opt.total_batch / rows);
        dist.init(dc);  // before the model: selects this rank's GPU
        if (!is_main() && freopen("/dev/null", "w", stdout) == nullptr) fail("cannot redirect stdout to /dev/null");
#ifndef TRAIN_BACKEND_CPU
        if (dc.world > 1)
            printf("data parallel: %d ranks, run %s, met through %s\n", dc.world, dc.run_id.c_str(),
                   dc.rendezvous.empty() ? nccl_rendezvous_file(dc).c_str() : dc.rendezvous.c_str());
#endif
        AttnKind attn;
        attn_kind_from_name(ATTN_NAME, &attn);
        config.max_seq_len = opt.T;
        config.attn = attn;
        config.p = opt.p;
        config.rope_base = opt.rope_base;
        Checkpoint init_ck;  // -e CHECKPOINT: its weights
        bool from_checkpoint = !parse_descriptor(opt.model, config);
        if (from_checkpoint) {
            struct stat st;
            if (stat(opt.model.c_str(), &st) != 0)
                fail("-e " + opt.model + ": neither a depth descriptor (like d12 or d4c256h4) nor a checkpoint file");
            checkpoint_read(opt.model, init_ck);
            GPT2Config want = init_ck.config;
            want.attn = attn;
            if (opt.p_given) want.p = opt.p;
            if (opt.rope_given) want.rope_base = opt.rope_base;
            std::string mismatch = checkpoint_config_mismatch(opt.model, init_ck.config, want, false);
            if (!mismatch.empty()) fail(mismatch);
            config = init_ck.config;
            config.max_seq_len = opt.T;
        } else {
            std::string err = gpt2_config_error(config);
            if (!err.empty()) fail("-e " + opt.model + ": " + err);
        }
        try {
            model = new Model(config);
        } catch (const std::invalid_argument& e) {
            fail("-e " + opt.model + ": " + e.what());
        }
        rng = Rng((uint64_t)opt.seed);
        if (from_checkpoint) model->set_params(init_ck.params);
        else model->init((uint64_t)opt.seed);

        inputs.resize((size_t)opt.B * opt.T);
        targets.resize(inputs.size());
        int rank = dist.config.rank, world = dist.config.world;
        train_loader.init(opt.train_pattern, opt.B, opt.T, rank, world, (uint64_t)opt.seed, true, config.vocab_size);
        if (opt.val_every > 0 && !opt.val_pattern.empty()) {
            val_loader.init(opt.val_pattern, opt.B, opt.T, rank, world, (uint64_t)opt.seed, false, config.vocab_size);
            have_val = true;
        }
        max_steps = opt.max_steps >= 0 ? opt.max_steps : (int)(train_loader.batches_per_epoch / grad_accum);
        if (max_steps == 0 && opt.max_steps < 0)
            fail("-i " + opt.train_pattern + ": one epoch (" + std::to_string(train_loader.batches_per_epoch) +
                 " batches) is less than one step of " + std::to_string(grad_accum) +
                 " micro-batches; lower -d or pass -x");

        // resume: everything from the newest checkpoint in the output dir
        if (!opt.out_dir.empty()) {
            for (size_t i = 1; i <= opt.out_dir.size(); i++) {  // mkdir -p
                if (i < opt.out_dir.size() && opt.out_dir[i] != '/') continue;
                std::string prefix = opt.out_dir.substr(0, i);
                if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
                    fail("-o " + opt.out_dir + ": cannot create " + prefix + " (" + strerror(errno) + ")");
            }
            log_path = opt.out_dir + "/log.jsonl";
        }
        bool resumed = false;
        OptimizerShard shard;  // this rank's moments of the checkpoint resumed from
        if (opt.resume) {
            std::vector<int64_t> steps = checkpoint_steps(opt.out_dir);
            if (!steps.empty()) {
                std::string path = checkpoint_path(opt.out_dir, steps.back());
                Checkpoint ck;
                checkpoint_read(path, ck);
                std::string mismatch = checkpoint_config_mismatch(path, ck.config, config);
                if (!mismatch.empty()) fail(mismatch + " (the run in " + opt.out_dir + " was started with other flags)");
                if (!ck.train.has_loader) fail("checkpoint " + path + " holds no data loader position: cannot resume");
                // the batch split and the rows each rank reads depend on the number of ranks
                if (ck.world_size != world)
                    fail("-y 1: " + path + " was trained on " + std::to_string(ck.world_size) + " rank(s), this launch has " +
                         std::to_string(world) + ": resume with " + std::to_string(ck.world_size) +
                         ", or start a new run from its weights (-e " + path + ")");
                optimizer_shard_read(optimizer_shard_path(opt.out_dir, ck.train.step, rank, world), shard,
                                     ck.train.step, rank, world, model->num_parameters);
                // the last update applied: skipped steps leave the weights of the one before
                model->set_params(ck.params, (int)(ck.train.step - ck.train.consecutive_skips));
                train_loader.restore(ck.train.loader);
                state = ck.train;
                rng.state = state.rng_state;
                last_checkpoint = path;
                resumed = true;
                printf("resumed from %s at step %lld\n", path.c_str(), (long long)state.step);
            } else {
                printf("no checkpoint in %s: starting from scratch\n", opt.out_dir.c_str());
            }
        }
        dist.attach(*model, opt.zero1);  // every rank starts from rank 0's weights
        if (resumed) dist.restore_optimizer(*model, shard, (int)(state.step - state.consecutive_skips));
        if (!log_path.empty() && is_main()) {
            if (resumed) truncate_log(log_path, state.step);
            log = fopen(log_path.c_str(), resumed ? "a" : "w");
            if (!log) fail("cannot open " + log_path + " (" + strerror(errno) + ")");
            if (!resumed) log_line("{\"step\":0,\"world_size\":" + std::to_string(world) + "}");
        }
        if (!opt.prompt.empty() && config.vocab_size != GPT2Tokenizer::VOCAB_SIZE)
            fail("-gp: a prompt needs the GPT-2 vocabulary (50257 tokens), this model has " +
                 std::to_string(config.vocab_size));
        if (opt.sample_every > 0) {
            try {
                tokenizer.load(GPT2Tokenizer::default_dir());
                have_tokenizer = true;
            } catch (const std::exception& e) {
                if (!opt.prompt.empty()) fail(std::string("-gp needs the GPT-2 tokenizer: ") + e.what());
                if (is_main())
                    fprintf(stderr, "warning: no tokenizer, samples are printed as token ids (%s)\n", e.what());
            }
        }
        printf("model: %s attention%s, %d layers, %d heads, %d channels, vocab %d (padded %d), %zu parameters, %s back end\n",
               attn_kind_name(config.attn), attn_reweights(config.attn) ? (" p " + json_number(config.p)).c_str() : "",
               config.num_layers, config.num_heads, config.channels, config.vocab_size, config.padded_vocab_size,
               model->num_parameters,
#ifdef TRAIN_BACKEND_CPU
               "cpu"
#else
               "cuda"
#endif
        );
        std::string ranks = world > 1 ? " x " + std::to_string(world) + " ranks" + (dist.zero1 ? " (ZeRO-1)" : "") : "";
        printf("batch: B %d x T %d x %d accumulation%s = %lld tokens per step; %d steps; train %lld tokens (%s)\n",
               opt.B, opt.T, grad_accum, ranks.c_str(), opt.total_batch, max_steps, (long long)train_loader.num_tokens,
               opt.train_pattern.c_str());
    }

    int run() {
        int start = (int)state.step;
        int end = max_steps;
        if (opt.steps_this_run > 0) end = std::min(end, start + opt.steps_this_run);
        double flops_per_step = (6.0 * model->num_parameters + 6.0 * config.num_layers * config.channels * opt.T) *
                                opt.total_batch;
        double peak = peak_flops() * dist.config.world;  // every rank's GPU alike
        if (have_val && start == 0) {
            float val = validate();
            printf("val loss %.6f\n", val);
            log_line("{\"step\":0,\"val_loss\":" + json_number(val) + "}");
        }
        double time_sum = 0;
        int timed = 0;
        for (int step = start + 1; step <= end; step++) {
            auto t0 = std::chrono::steady_clock::now();
            model->zero_grad();
            double loss = 0;
            for (int micro = 0; micro < grad_accum; micro++) {
                train_loader.next_batch(inputs.data(), targets.data());
                loss += model->forward(inputs.data(), targets.data(), opt.B, opt.T);
                if (micro == grad_accum - 1) dist.overlap_reduce(*model);  // all-reduce during the last backward
                model->backward(1.0f / grad_accum);
            }
            // the same loss and norm on every rank, hence the same guard and clipping decisions
            loss = mean_over_ranks(loss / grad_accum);
            dist.reduce_grads(*model);
            double norm = dist.grad_norm(*model);
            float lr = learning_rate(opt, step, max_steps);
            std::string reason;
            bool ok = guard(loss, norm, reason);
            if (ok) {
                float scale = opt.clip > 0 && norm > opt.clip ? (float)(opt.clip / norm) : 1.0f;
                dist.update(*model, lr, 0.9f, 0.95f, 1e-8f, opt.weight_decay, scale, step);
                state.consecutive_skips = 0;
            } else {
                state.consecutive_skips++;
                state.total_skips++;
            }
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (step > start + 1 || end - start == 1) { time_sum += ms; timed++; }
            double tok_s = opt.total_batch / (ms / 1000.0);
            std::string mfu;
            if (peak > 0) {
                char buf[32];
                snprintf(buf, sizeof buf, " | MFU %.1f%%", 100.0 * flops_per_step / (ms / 1000.0) / peak);
                mfu = buf;
            }
            double eta = timed > 0 ? time_sum / timed * (end - step) / 1000.0 : 0;
            printf("step %*d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s%s | ETA %s%s\n",
                   (int)std::to_string(max_steps).size(), step, max_steps, loss, norm, lr, ms, tok_s, mfu.c_str(),
                   format_duration(eta).c_str(), ok ? "" : (" | SKIPPED: " + reason).c_str());
            fflush(stdout);
            std::string rec = "{\"step\":" + std::to_string(step) + ",\"loss\":" + json_number(loss) +
                              ",\"grad_norm\":" + json_number(norm) + ",\"lr\":" + json_number(lr) +
                              ",\"ms\":" + json_number(ms) + ",\"tokens_per_s\":" + json_number(tok_s);
            if (!ok) rec += ",\"skipped\":\"" + reason + "\"";
            log_line(rec + "}");
            if (!ok && state.consecutive_skips >= opt.max_skips) {
                std::string msg = std::to_string(state.consecutive_skips) + " consecutive updates skipped (last: " +
                                  reason + " at step " + std::to_string(step) + "); stopping. ";
                msg += last_checkpoint.empty() ? "No checkpoint of this run was written."
                                               : "The last good checkpoint is " + last_checkpoint + ".";
                msg += " Lower the learning rate (-l) or clip harder (a lower -gc), then resume from it (-y 1).";
                log_line("{\"step\":" + std::to_string(step) + ",\"stopped\":\"" + reason + "\"}");
                fail(msg, 2);
            }
            bool last = step == max_steps;
            if (have_val && (step % opt.val_every == 0 || last)) {
                float val = validate();
                printf("val loss %.6f\n", val);
                log_line("{\"step\":" + std::to_string(step) + ",\"val_loss\":" + json_number(val) + "}");
            }
            if (is_main() && opt.sample_every > 0 && (step % opt.sample_every == 0 || last)) sample(step);
            bool stop_here = step == end && end < max_steps;
            if (!opt.out_dir.empty() && ok &&
                ((opt.ckpt_every > 0 && (step % opt.ckpt_every == 0 || last)) || stop_here))
                save_checkpoint(step);
        }
        if (end < max_steps) printf("stopped after step %d of %d (-xi); continue with -y 1\n", end, max_steps);
        if (state.total_skips > 0) printf("%d updates were skipped by the guard\n", state.total_skips);
        if (log) fclose(log);
        dist.finish();
        return 0;
    }
};

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, so that scripts/launch.sh's rank prefixes apply
#if !defined(__CUDACC__) && !defined(TRAIN_BACKEND_CPU)
    // the emulator's host NCCL has its own watchdog: one setting, DIST_TIMEOUT_S, covers both
    const char* timeout = getenv("DIST_TIMEOUT_S");
    if (timeout != nullptr && *timeout != '\0') setenv("SIMT_NCCL_TIMEOUT_S", timeout, 0);
#endif
    Trainer trainer;
    trainer.opt = parse_args(argc, argv);
    try {
        trainer.setup();
        return trainer.run();
    } catch (const std::exception& e) {
        fail(e.what());
    }
}
