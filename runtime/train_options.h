// The trainer's command line (train_gpt2.cu): its options with their defaults, -h, and the parser,
// which refuses a bad value naming the flag, the value and the range (runtime/cli.h).
#pragma once

#include <string>

#include "runtime/backend.h"
#include "runtime/cli.h"
#include "runtime/guard.h"
#include "runtime/schedule.h"

struct TrainOptions {
    std::string train_pattern = "data/kjv/kjv_train_*.bin";  // -i
    std::string val_pattern = "data/kjv/kjv_val_*.bin";      // -j
    std::string out_dir;                                     // -o
    std::string model = "d12";                               // -e
    int B = 4, T = 1024;                                     // -b, -t
    long long total_batch = -1;                              // -d
    LrSchedule schedule;                                     // -l, -k, -u, -q, -cd (max_steps set by the run)
    float weight_decay = 0.0f;                               // -c
    float clip = 1.0f;                                       // -gc
    int max_steps = -1;                                      // -x
    int steps_this_run = 0;                                  // -xi
    int val_every = 20, val_steps = 20;                      // -v, -m
    int sample_every = 20, gen_tokens = 64, top_k = 40;      // -s, -g, -gk
    float temperature = 1.0f;                                // -gt
    std::string prompt;                                      // -gp
    int ckpt_every = 0, ckpt_keep = 0, resume = 0;           // -n, -nk, -y
    int overwrite = 0;                                       // -ow
    long long seed = 1337;                                   // -rs
    float p = 15.0f;                                         // -p
    bool p_given = false;
    int learn_p = 0;                                         // -pl
    float p_lr_scale = 1.0f;                                 // -plr
    int p_warmup = 0;                                        // -pw
    float rope_base = 10000.0f;                              // -rb
    bool rope_given = false;
    int train_len = 0;                                       // -tl (1: attn_len = -t)
    int max_skips = 5;                                       // -sk
    UpdateGuard guard;                                       // -sl, -sg
    int zero1 = 0;                                           // -z
    std::string mc_files;                                    // -f
    int mc_every = 0, mc_max = 0;                            // -fv, -fn
    std::string precision;                                   // -pr ("": the back end's default)
    int hellaswag = 0;                                       // -h 0|1 (llm.c's switch: -f HELLASWAG_FILE)
};

// The file llm.c's -h 1 evaluates (scripts/prepare_mc.py hellaswag writes it)
inline const char* HELLASWAG_FILE = "data/mc/hellaswag_val.bin";

// The trainer's flags: one line each (runtime/cli.h's CliTable makes the parser and -h from it).
inline CliTable train_flags(TrainOptions& o) {
    const long long BIG = 1000000000;
    CliTable t("[options]", std::string("Trains GPT-2 + RoPE with ") + ATTN_NAME +
                                " attention (fixed at build time: make ... ATTN=<variant>; make ATTN=x lists them).\n"
                                "Flags follow llm.c's train_gpt2.cu where the meaning is the same.");
    t.section("Data and output")
     .text("-i", &o.train_pattern, "<glob>", "training shards")
     .text("-j", &o.val_pattern, "<glob>", "validation shards (default {}; \"\" = none)")
     .text("-o", &o.out_dir, "<dir>", "output dir: log.jsonl and checkpoints: the model ckpt_<step>.bin (rank 0) and the "
           "AdamW moments ckpt_<step>_adamw_<rank>of<ranks>.bin (each rank its own) (default: none)")
     .section("Model")
     .text("-e", &o.model, "<model>", "model: a depth descriptor dL[cC][hH][vV] (L layers, C channels = 64L, H heads = "
           "C/64, V vocab = 50257 by default; e.g. d12, d4c256h4), or a checkpoint to start from (its weights; fresh "
           "optimizer and data order)")
     .custom("-p", "<float>", "re-weighting power p >= 1 (variants with re-weighting only)", "0.5",
             [&o](const char* v) { o.p = cli_parse_float("-p", v, 1, 1e6, "re-weighting power p"); o.p_given = true; },
             cli_number(o.p))
     .integer("-pl", &o.learn_p, 0, 1, "learned p: 1 learns p per layer and head, p = 1 + softplus(theta) starting at "
              "-p (> 1), on the CPU and CUDA back ends; the values are logged and saved in checkpoints")
     .number("-plr", &o.p_lr_scale, 0, 1e6, "learned p's learning-rate multiplier: with -pl 1, theta's learning rate "
             "is this times -l (default {}; CPU back end). AdamW moves theta, hence p, by about the learning rate per "
             "step: at -l 2e-3 p moves < 0.5 in 200 steps")
     .integer("-pw", &o.p_warmup, 0, BIG, "p warmup steps: p rises linearly from 1 at step 1 to -p at step N + 1 "
              "(fixed p only; checkpoints record the final p) (default 0: -p from the start)")
     .integer("-tl", &o.train_len, 0, 1, "training-length constant (sigmoid, relu, softmax, softmax_rw): 1 takes the n "
              "of sigmoid's bias -ln(n) and relu's scale 1/n to be the training length -t on every row and at every "
              "evaluation length (the form the paper's ablation rows most likely use: row sums then grow past -t), 0 the "
              "row's visible keys n_t = t + 1 (default {}); for softmax and softmax_rw 1 is log-length scaling: row t's "
              "scores times max(1, ln(t + 1) / ln(-t)), no change while training at -t; saved in checkpoints as attn_len")
     .custom("-rb", "<float>", "RoPE base", "1",
             [&o](const char* v) { o.rope_base = cli_parse_float("-rb", v, 1.0001, 1e30, "RoPE base"); o.rope_given = true; },
             cli_number(o.rope_base))
     .choice("-pr", &o.precision, CLI_PRECISIONS, "arithmetic of the CPU back end: ref (the reference, default), fp32 "
             "or bf16 (the fast path: SIMD kernels dispatched to the CPU's best ISA, fp32 master weights and AdamW; bf16 "
             "matmul operands with fp32 accumulation, on AMX or AVX512-BF16 through oneDNN, computed exactly through "
             "sgemm on other CPUs), auto (the faster of fp32 and bf16 on this CPU). The CUDA back end is bf16 always "
             "(bf16 or auto)")
     .section("Batch")
     .integer("-b", &o.B, 1, 1 << 20, "micro-batch size B")
     .integer("-t", &o.T, 1, 1 << 20, "sequence length T")
     .integer("-d", &o.total_batch, 1, 1LL << 40, "total batch size in tokens over all ranks, a multiple of "
              "B*T*ranks: gradient accumulation = d/(B*T*ranks) (default B*T*ranks)")
     .section("Data parallelism (CUDA build; one process per GPU: mpirun -np 8, torchrun --nproc_per_node 8 --no_python, srun, or "
              "scripts/launch.sh -n 8)")
     .section("  environment: RANK, WORLD_SIZE, LOCAL_RANK (scripts/launch.sh, torchrun), OMPI_COMM_WORLD_RANK/SIZE/"
              "LOCAL_RANK (Open MPI),\n  PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (MPICH), SLURM_PROCID, SLURM_NTASKS, "
              "SLURM_LOCALID (srun); DIST_RUN_ID,\n  DIST_ID_DIR (the NCCL id's file, default /tmp) or "
              "DIST_RENDEZVOUS=tcp://host:port, DIST_TIMEOUT_S")
     .integer("-z", &o.zero1, 0, 1, "ZeRO-1: 1 keeps on each rank the optimizer state of its shard of the parameters "
              "(default {}; no effect with one rank)")
     .section("Optimisation (AdamW, betas 0.9 0.95, eps 1e-8)")
     .number("-l", &o.schedule.lr, 0, 3e38, "learning rate")
     .choice("-k", &o.schedule.kind, LrSchedule::kinds(), "schedule after warmup: cosine or linear decay to -l x -q "
             "at the last step, constant, or wsd (warmup, stable, linear cooldown over the last -cd of the steps)")
     .integer("-u", &o.schedule.warmup, 0, BIG, "warmup steps, linear from lr/u")
     .number("-q", &o.schedule.final_frac, 0, 1, "final learning rate fraction: the rate at the last step is -l times "
             "this")
     .number("-cd", &o.schedule.cooldown_frac, 0, 1, "cooldown fraction of -k wsd: the learning rate stays at -l "
             "after the warmup and falls linearly to -l x -q over this last share of the steps (default {}; llm.c's wsd "
             "falls as 1 - sqrt over the last 0.2)")
     .number("-c", &o.weight_decay, 0, 10, "weight decay, on the matrices only")
     .number("-gc", &o.clip, 0, 1e30, "gradient clipping norm: the global gradient norm is scaled down to this "
             "(default {}; 0 = off)")
     .integer("-x", &o.max_steps, -1, BIG, "max steps (default {}: one epoch of the training shards)")
     .integer("-xi", &o.steps_this_run, 0, BIG, "steps in this invocation, then checkpoint (with -o) and exit; the "
              "schedule still spans -x, and -y 1 continues (default 0: run to the end)")
     .integer("-rs", &o.seed, 0, 1LL << 62, "random seed: initialisation, data order, sampling")
     .section("Guards")
     .integer("-sk", &o.max_skips, 1, BIG, "consecutive skips: stop after this many skipped updates in a row "
              "(default {}). An update is skipped when the loss or the gradient norm is not finite, or is a spike (-sl, -sg)")
     .number("-sl", &o.guard.spike_z, 0, 1e30, "loss spike threshold: skip the update when the loss is this many "
             "standard deviations above its running mean (default {} = off)")
     .number("-sg", &o.guard.norm_z, 0, 1e30, "gradient norm spike threshold (llm.c's -sg): skip the update when "
             "the gradient norm is this many standard deviations above its running mean (default {} = off). The "
             "running means of -sl and -sg: exact over the first 20 accepted steps, then exponential with weight 1/20 "
             "(llm.c's: a window of 128)")
     .section("Evaluation and sampling")
     .integer("-v", &o.val_every, 0, BIG, "validation interval: validation loss every this many steps, and at the end "
              "(default {}; 0 = never)")
     .integer("-m", &o.val_steps, 1, BIG, "validation batches per evaluation")
     .text("-f", &o.mc_files, "<list>", "multiple-choice eval files in llm.c's format, comma separated "
           "(scripts/prepare_mc.py; eval/mc_eval.h): acc and acc_norm every -fv steps and at the end, printed and in "
           "log.jsonl as mc_<file>_acc, mc_<file>_acc_norm (default: none)")
     .integer("-fv", &o.mc_every, 0, BIG, "multiple-choice evaluation interval (default 0: the -v interval)")
     .integer("-fn", &o.mc_max, 0, BIG, "multiple-choice examples per file and evaluation, the first ones "
              "(default 0: all)")
     .integer("-h", &o.hellaswag, 0, 1, std::string(std::string("HellaSwag switch (llm.c's): 1 evaluates ") +
              HELLASWAG_FILE + " as -f does (scripts/prepare_mc.py hellaswag makes it), 0 nothing (default {}). -h "
              "alone, or --help, prints this help").c_str())
     .integer("-s", &o.sample_every, 0, BIG, "sampling interval: sample every this many steps, and at the end "
              "(default {}; 0 = never)")
     .integer("-g", &o.gen_tokens, 1, 1 << 20, "generated tokens per sample")
     .integer("-gk", &o.top_k, 1, 1 << 20, "top-k sampling (default {}; 1 = greedy)")
     .number("-gt", &o.temperature, 0, 100, "sampling temperature")
     .text("-gp", &o.prompt, "<text>", "prompt to continue (default: none, starts from <|endoftext|>)")
     .section("Checkpoints")
     .integer("-n", &o.ckpt_every, 0, BIG, "checkpoint interval: every this many steps, and at the end (default {} = "
              "never; needs -o)")
     .integer("-nk", &o.ckpt_keep, 0, BIG, "checkpoints to keep: only the newest this many (default {} = keep all)")
     .integer("-y", &o.resume, 0, 1, "resume: 1 resumes from the newest checkpoint in -o (model, optimizer, data "
              "position, rng, step), if there is one, and only if it is this run's (config, seed -rs, training data "
              "-i); with as many ranks as the run had")
     .integer("-ow", &o.overwrite, 0, 1, "overwrite: 1 starts over in -o, removing the checkpoints there. Without it a "
              "new run refuses an output dir that holds checkpoints");
    t.llmc("-f", "the TF32 switch (-f 0|1)", "none is needed: the CUDA back end's matmuls are bf16 with fp32 "
           "accumulation, there is no TF32 to switch; -f takes multiple-choice eval files (-f data/mc/hellaswag_val.bin)")
     .llmc("-pr", "the process rank (-pr <int>)", "every rank reads its rank from the launcher's environment (mpirun, "
           "torchrun, srun, scripts/launch.sh); -pr takes the arithmetic, ref, fp32, bf16 or auto")
     .llmc("-pn", "the number of processes", "the launcher's environment gives it (mpirun -np N, torchrun "
           "--nproc_per_node N, scripts/launch.sh -n N)")
     .llmc("-pg", "the GPUs per node", "each process takes the GPU of its local rank (LOCAL_RANK, "
           "OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID)")
     .llmc("-pm", "the NCCL init method (mpi, tcp, fs)", "no MPI is linked: the ranks meet through a file "
           "(DIST_ID_DIR) or over TCP (DIST_RENDEZVOUS=tcp://HOST:PORT, or torchrun's MASTER_ADDR and MASTER_PORT)")
     .llmc("-ps", "the server address of the tcp init method", "set DIST_RENDEZVOUS=tcp://HOST:PORT")
     .llmc("-pp", "the shared directory of the fs init method", "set DIST_ID_DIR=DIR")
     .llmc("-nm", "the interval of major checkpoints (never deleted)", "-n and -nk; keep a checkpoint by copying it")
     .llmc("-lg", "the GPU logging interval", "no such option (nvidia-smi alongside)")
     .llmc("-a", "the overfit-a-single-batch switch", "no such switch (a one-batch shard with -i does it)")
     .llmc("-w", "the fp32 master weights switch", "the fp32 master weights are always kept")
     .llmc("-ge", "the GELU fusion switch", "no such switch")
     .llmc("-r", "the GELU recomputation switch", "no such switch");
    return t;
}

inline TrainOptions train_parse_args(int argc, char** argv) {
    TrainOptions o;
    CliTable t = train_flags(o);
    t.parse(argc, argv);
    std::string plr_text = t.given("-plr") ? cli_number(o.p_lr_scale) : "";  // -plr as given
    if (o.hellaswag) {
        FILE* f = fopen(HELLASWAG_FILE, "rb");
        if (f == nullptr)
            cli_fail(std::string("-h 1 (llm.c's HellaSwag evaluation during training): ") + HELLASWAG_FILE +
                     " is missing; make it with `make build/tokenize && /usr/bin/python3 scripts/prepare_mc.py "
                     "hellaswag`, or train without it (-h 0)");
        fclose(f);
        if (("," + o.mc_files + ",").find(std::string(",") + HELLASWAG_FILE + ",") == std::string::npos)
            o.mc_files += (o.mc_files.empty() ? "" : ",") + std::string(HELLASWAG_FILE);
    }
    if (t.given("-cd") && o.schedule.kind != "wsd")
        cli_fail("-cd " + cli_number(o.schedule.cooldown_frac) + ": the cooldown fraction is -k wsd's; -k " +
                 o.schedule.kind + " decays over every step after the warmup");
    if (o.learn_p && !attn_reweights(ATTN_BUILT))
        cli_fail(std::string("-pl 1: ") + ATTN_NAME + " attention has no re-weighting, so there is no p to learn" +
                 (attn_head_param(ATTN_BUILT) == ATTN_HEAD_S ? " (ssmax learns its s per layer and head without a flag)" : ""));
    if (!plr_text.empty() && !o.learn_p)
        cli_fail("-plr " + plr_text + ": the learning-rate multiplier of learned p needs -pl 1");
#ifndef TRAIN_BACKEND_CPU
    if (o.p_lr_scale != 1.0f)
        cli_fail("-plr " + plr_text + ": the CUDA back end trains learned p at the learning rate (-plr 1); "
                 "the multiplier is the CPU back end's (train_gpt2cpu_" + ATTN_NAME + ")");
#endif
    if (o.learn_p && !(o.p > 1))
        cli_fail("-pl 1 with -p " + std::to_string(o.p) + ": learned p = 1 + softplus(theta) starts at -p, which "
                 "must be > 1 (p = 1 would need theta = -inf)");
    if (o.p_warmup > 0 && !attn_reweights(ATTN_BUILT))
        cli_fail(std::string("-pw ") + std::to_string(o.p_warmup) + ": " + ATTN_NAME +
                 " attention has no re-weighting, so there is no p to warm up");
    if (o.p_warmup > 0 && o.learn_p)
        cli_fail("-pw " + std::to_string(o.p_warmup) + " with -pl 1: learned p follows its gradient, not a "
                 "schedule (use one of them)");
    if (o.train_len && !attn_has_len(ATTN_BUILT))
        cli_fail(std::string("-tl 1: ") + ATTN_NAME + " attention has no length in its definition; the training-length "
                 "constant is defined for " + attn_len_kind_list() + " only (their -ln(n) bias, 1/n scale and "
                 "log-length scaling)");
    if (o.p_given && !attn_reweights(ATTN_BUILT))
        cli_fail(std::string("-p: ") + ATTN_NAME + " attention has no re-weighting, so p does not apply (leave -p "
                 "out, or build a variant with re-weighting: " + attn_reweight_kind_list() + ")");
    if (o.resume && o.overwrite) cli_fail("-y 1 -ow 1: resume the run in -o, or start over there (removing it), not both");
    if ((o.ckpt_every > 0 || o.resume) && o.out_dir.empty())
        cli_fail(std::string(o.resume ? "-y 1" : "-n " + std::to_string(o.ckpt_every)) +
                 ": checkpoints need an output dir (-o)");
    return o;
}
