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
    LrSchedule schedule;                                     // -l, -k, -u, -q (max_steps set by the run)
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
    int max_skips = 5;                                       // -sk
    UpdateGuard guard;                                       // -sl
    int zero1 = 0;                                           // -z
    std::string mc_files;                                    // -f
    int mc_every = 0, mc_max = 0;                            // -fv, -fn
    std::string precision;                                   // -pr ("": the back end's default)
};

inline void train_usage(const char*) {
    TrainOptions d;
    printf(
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
        "  -pl <0|1>    1: learn p per layer and head, p = 1 + softplus(theta) starting at -p (> 1), on the\n"
        "               CPU and CUDA back ends; the values are logged and saved in checkpoints (default 0)\n"
        "  -plr <float> with -pl 1: theta's learning rate is this times -l (default %g; CPU back end). AdamW\n"
        "               moves theta, hence p, by about the learning rate per step: at -l 2e-3 p moves\n"
        "               < 0.5 in 200 steps\n"
        "  -pw <int>    p warmup: p rises linearly from 1 at step 1 to -p at step N + 1 (fixed p only;\n"
        "               checkpoints record the final p) (default 0: -p from the start)\n"
        "  -rb <float>  RoPE base (default %g)\n"
        "  -pr <name>   CPU back end's arithmetic: fp32 (the reference, default), bf16 (bf16 matmuls with\n"
        "               fp32 accumulation, fp32 master weights and AdamW, on AMX or AVX512-BF16 through\n"
        "               oneDNN; where the CPU has neither it says so and runs fp32), auto (bf16 where the\n"
        "               CPU has it: the fastest). The CUDA back end is bf16 always (bf16 or auto)\n"
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
        "  -f <list>    multiple-choice eval files in llm.c's format, comma separated (scripts/prepare_mc.py;\n"
        "               eval/mc_eval.h): acc and acc_norm every -fv steps and at the end, printed and in\n"
        "               log.jsonl as mc_<file>_acc, mc_<file>_acc_norm (default: none)\n"
        "  -fv <int>    multiple-choice evaluation every this many steps (default 0: the -v interval)\n"
        "  -fn <int>    examples per file and evaluation, the first ones (default 0: all)\n"
        "  -s <int>     sample every this many steps, and at the end (default %d; 0 = never)\n"
        "  -g <int>     tokens to generate per sample (default %d)\n"
        "  -gk <int>    top-k sampling (default %d; 1 = greedy)\n"
        "  -gt <float>  sampling temperature (default %g)\n"
        "  -gp <text>   prompt to continue (default: none, starts from <|endoftext|>)\n"
        "Checkpoints\n"
        "  -n <int>     checkpoint every this many steps, and at the end (default %d = never; needs -o)\n"
        "  -nk <int>    keep only the newest this many checkpoints (default %d = keep all)\n"
        "  -y <int>     1: resume from the newest checkpoint in -o (model, optimizer, data position, rng,\n"
        "               step), if there is one, and only if it is this run's (config, seed -rs, training data -i);\n"
        "               with as many ranks as the run had (default %d)\n"
        "  -ow <int>    1: start over in -o, removing the checkpoints there. Without it a new run refuses an\n"
        "               output dir that holds checkpoints (default 0)\n"
        "  -h           this help\n",
        BACKEND_BINARY_NAME, ATTN_NAME, ATTN_NAME, d.train_pattern.c_str(), d.val_pattern.c_str(), d.model.c_str(),
        d.p, d.p_lr_scale, d.rope_base, d.B, d.T, d.zero1, d.schedule.lr, d.schedule.kind.c_str(), d.schedule.warmup,
        d.schedule.final_frac, d.weight_decay, d.clip, d.seed, d.max_skips, d.guard.spike_z, d.val_every,
        d.val_steps, d.sample_every, d.gen_tokens, d.top_k, d.temperature, d.ckpt_every, d.ckpt_keep, d.resume);
}

inline TrainOptions train_parse_args(int argc, char** argv) {
    TrainOptions o;
    const long long BIG = 1000000000;
    std::string flag;
    const char* v;
    std::string plr_text;  // -plr as given
    const char* known = "-i -j -o -e -b -t -d -l -k -u -q -c -gc -x -xi -v -m -s -g -gk -gt -gp -n -nk -y -ow -rs -p -rb "
                        "-sk -sl -z -pl -plr -pw";
    for (int i = 1; cli_next_flag(argc, argv, &i, train_usage, &flag, &v, known);) {
        const char* f = flag.c_str();
        if (flag == "-i") o.train_pattern = v;
        else if (flag == "-j") o.val_pattern = v;
        else if (flag == "-o") o.out_dir = v;
        else if (flag == "-e") o.model = v;
        else if (flag == "-b") o.B = (int)cli_parse_int(f, v, 1, 1 << 20, "batch size");
        else if (flag == "-t") o.T = (int)cli_parse_int(f, v, 1, 1 << 20, "sequence length");
        else if (flag == "-d") o.total_batch = cli_parse_int(f, v, 1, 1LL << 40, "total batch size (tokens)");
        else if (flag == "-l") o.schedule.lr = cli_parse_float(f, v, 0, 3e38, "learning rate");
        else if (flag == "-k") {
            o.schedule.kind = v;
            if (!LrSchedule::known(v)) cli_fail(flag + " " + v + ": schedule must be cosine, linear or constant");
        }
        else if (flag == "-u") o.schedule.warmup = (int)cli_parse_int(f, v, 0, BIG, "warmup steps");
        else if (flag == "-q") o.schedule.final_frac = cli_parse_float(f, v, 0, 1, "final learning rate fraction");
        else if (flag == "-c") o.weight_decay = cli_parse_float(f, v, 0, 10, "weight decay");
        else if (flag == "-gc") o.clip = cli_parse_float(f, v, 0, 1e30, "gradient clipping norm");
        else if (flag == "-x") o.max_steps = (int)cli_parse_int(f, v, -1, BIG, "max steps");
        else if (flag == "-xi") o.steps_this_run = (int)cli_parse_int(f, v, 0, BIG, "steps in this invocation");
        else if (flag == "-v") o.val_every = (int)cli_parse_int(f, v, 0, BIG, "validation interval");
        else if (flag == "-m") o.val_steps = (int)cli_parse_int(f, v, 1, BIG, "validation batches");
        else if (flag == "-s") o.sample_every = (int)cli_parse_int(f, v, 0, BIG, "sampling interval");
        else if (flag == "-g") o.gen_tokens = (int)cli_parse_int(f, v, 1, 1 << 20, "generated tokens");
        else if (flag == "-gk") o.top_k = (int)cli_parse_int(f, v, 1, 1 << 20, "top-k");
        else if (flag == "-gt") o.temperature = cli_parse_float(f, v, 0, 100, "temperature");
        else if (flag == "-gp") o.prompt = v;
        else if (flag == "-n") o.ckpt_every = (int)cli_parse_int(f, v, 0, BIG, "checkpoint interval");
        else if (flag == "-nk") o.ckpt_keep = (int)cli_parse_int(f, v, 0, BIG, "checkpoints to keep");
        else if (flag == "-y") o.resume = (int)cli_parse_int(f, v, 0, 1, "resume");
        else if (flag == "-ow") o.overwrite = (int)cli_parse_int(f, v, 0, 1, "overwrite");
        else if (flag == "-rs") o.seed = cli_parse_int(f, v, 0, (1LL << 62), "seed");
        else if (flag == "-p") { o.p = cli_parse_float(f, v, 1, 1e6, "re-weighting power p"); o.p_given = true; }
        else if (flag == "-pl") o.learn_p = (int)cli_parse_int(f, v, 0, 1, "learned p");
        else if (flag == "-plr") {
            o.p_lr_scale = cli_parse_float(f, v, 0, 1e6, "learned p's learning-rate multiplier");
            plr_text = v;
        }
        else if (flag == "-pw") o.p_warmup = (int)cli_parse_int(f, v, 0, BIG, "p warmup steps");
        else if (flag == "-rb") { o.rope_base = cli_parse_float(f, v, 1.0001, 1e30, "RoPE base"); o.rope_given = true; }
        else if (flag == "-sk") o.max_skips = (int)cli_parse_int(f, v, 1, BIG, "consecutive skips");
        else if (flag == "-sl") o.guard.spike_z = cli_parse_float(f, v, 0, 1e30, "loss spike threshold");
        else if (flag == "-z") o.zero1 = (int)cli_parse_int(f, v, 0, 1, "ZeRO-1");
        else if (flag == "-f") o.mc_files = v;
        else if (flag == "-fv") o.mc_every = (int)cli_parse_int(f, v, 0, BIG, "multiple-choice evaluation interval");
        else if (flag == "-fn") o.mc_max = (int)cli_parse_int(f, v, 0, BIG, "multiple-choice examples");
        else if (flag == "-pr") {
            o.precision = v;
            if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "auto")
                cli_fail(flag + " " + v + ": precision must be fp32, bf16 or auto");
        }
        else cli_fail("unknown flag " + flag + " (-h lists the flags)");
    }
    if (o.learn_p && !attn_reweights(ATTN_BUILT))
        cli_fail(std::string("-pl 1: ") + ATTN_NAME + " attention has no re-weighting, so there is no p to learn");
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
    if (o.p_given && !attn_reweights(ATTN_BUILT))
        cli_fail(std::string("-p: ") + ATTN_NAME + " attention has no re-weighting, so p does not apply (leave -p "
                 "out, or build a variant with re-weighting: lssar, softmax_rw, sigmoid_l1_rw, relu_l1_rw)");
    if (o.resume && o.overwrite) cli_fail("-y 1 -ow 1: resume the run in -o, or start over there (removing it), not both");
    if ((o.ckpt_every > 0 || o.resume) && o.out_dir.empty())
        cli_fail(std::string(o.resume ? "-y 1" : "-n " + std::to_string(o.ckpt_every)) +
                 ": checkpoints need an output dir (-o)");
    return o;
}
