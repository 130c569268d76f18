// The trainer: command line, training loop, evaluation and sampling during training, checkpoints.
// One source for every back end, chosen at build time (train.mk sets the macros):
//   make train_gpt2cpu ATTN=lssar   g++, CPU back end (model/backend_cpu.h)     -> ./train_gpt2cpu_lssar
//   make train_gpt2cu ATTN=lssar    nvcc, CUDA back end (model/gpt2_cuda.cuh)   -> ./train_gpt2cu_lssar
// The attention variant is fixed at build time (ATTN_NAME) and recorded in every checkpoint.
// The CUDA back end trains data-parallel over several processes (runtime/distributed.h):
//   scripts/launch.sh -n 8 ./train_gpt2cu_lssar ...   (or srun); the CPU back end is one process.
// The back-end interface the loop is written against is listed at the top of model/backend_cpu.h.
// Flags follow llm.c's train_gpt2.cu where the meaning is the same; -h lists them all.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/dataloader.h"
#include "dataloader/text_codec.h"
#include "eval/mc_eval.h"
#include "eval/sample.h"
#include "model/gpt2_descriptor.h"
#include "model/rand.h"
#include "runtime/backend.h"
#include "runtime/checkpoint.h"
#include "runtime/cli.h"
#include "runtime/fs.h"
#include "runtime/guard.h"
#include "runtime/logger.h"
#include "runtime/memory.h"
#include "runtime/mfu.h"
#include "runtime/run_checkpoint.h"
#include "runtime/run_dir.h"
#include "runtime/schedule.h"
#include "runtime/train_options.h"
#ifdef TRAIN_BACKEND_CPU
#include "runtime/distributed_single.h"
typedef SingleProcess<Model> Distributed;
#else
#include "runtime/distributed.h"
#endif

// ----------------------------------------------------------------------------
struct Trainer {
    TrainOptions opt;
    GPT2Config config;
    Distributed dist;  // this process's rank; rank 0 alone prints, logs, samples and writes checkpoints
    Model* model = nullptr;
    DataLoader train_loader, val_loader;
    bool have_val = false;
    std::optional<TextCodec> codec;  // the samples' text: GPT-2 BPE or bytes (none: token ids)
    TrainState state;
    Rng rng{0};
    int grad_accum = 1, max_steps = 0;
    std::string last_checkpoint;  // the newest written or resumed from
    BlowUpCheck blow_up;          // the loss check before each checkpoint
    RunIdentity run_id;           // seed and training data: with the config, what makes a checkpoint ours
    Checkpoint init_ck;           // -e CHECKPOINT: the weights that start the run
    bool from_checkpoint = false;
    JsonlLog log;
    std::vector<int> inputs, targets;
    McTrainerEval mc;  // -f: multiple-choice eval files

    bool is_main() const { return dist.config.rank == 0; }
    int rank() const { return dist.config.rank; }
    int world() const { return dist.config.world; }

    // The mean of x over the ranks (exchanged as a float); with one rank x itself, as it was.
    double mean_over_ranks(double x) { return world() > 1 ? dist.average((float)x) : x; }

    // The mean loss of the first -m validation batches, over every rank: printed and logged.
    void validate_and_log(int step) {
        val_loader.reset();
        int steps = (int)std::min<int64_t>(opt.val_steps, val_loader.batches_per_epoch);
        double sum = 0;
        for (int i = 0; i < steps; i++) {
            val_loader.next_batch(inputs.data(), targets.data());
            sum += model->forward(inputs.data(), targets.data(), opt.B, opt.T);
        }
        float val = (float)mean_over_ranks(sum / steps);
        printf("val loss %.6f\n", val);
        log.line("{\"step\":" + std::to_string(step) + ",\"val_loss\":" + json_number(val) + "}");
    }

    void sample(int step) {
        int eot = config.vocab_size > GPT2Tokenizer::EOT ? GPT2Tokenizer::EOT : 0;
        print_sample(*model, codec ? &*codec : nullptr, opt.prompt, eot, step, opt.gen_tokens, opt.B, opt.T, opt.top_k,
                     opt.temperature, rng);
    }

    // Before step's checkpoint: runtime/guard.h's BlowUpCheck on the step's last micro-batch, the
    // same decision on every rank.
    void check_update_before_checkpoint(int step, const StepResult& r) {
        double after = model->forward(inputs.data(), targets.data(), opt.B, opt.T);
        if (!dist.any(blow_up.blew_up(r.last_micro_loss, after))) {
            blow_up.passed(after);
            return;
        }
        char what[256];
        snprintf(what, sizeof what,
                 "step %d: the update blew up (the loss of its last micro-batch: %.6g before the update, %.6g after "
                 "it, lr %.3g); its checkpoint is not written; stopping. ",
                 step, r.last_micro_loss, after, r.lr);
        log.line("{\"step\":" + std::to_string(step) + ",\"stopped\":\"update blew up\"}");
        cli_fail(what + recovery_advice(last_checkpoint), 2);
    }

    // Every rank calls this (runtime/run_checkpoint.h: shards first, the model file last).
    void save_checkpoint(int step) {
        state.step = step;
        state.rng_state = rng.state;
        state.has_loader = 1;
        state.loader = train_loader.state();
        last_checkpoint = save_run_checkpoint(dist, *model, opt.out_dir, step, config, run_id, state, last_checkpoint);
        if (is_main()) {
            checkpoint_keep_last(opt.out_dir, opt.ckpt_keep);
            printf("wrote %s\n", last_checkpoint.c_str());
        }
    }

    // ------------------------------------------------------------------------
    // setup

    // The ranks, and the gradient accumulation that makes -d tokens per step.
    void setup_batch() {
        DistConfig dc = dist_config_from_env();
        long long rows = (long long)opt.B * opt.T * dc.world;  // tokens of one micro-step, all ranks
        if (opt.total_batch == -1) opt.total_batch = rows;
        if (opt.total_batch % rows != 0) {
            std::string ranks = dc.world > 1 ? ", " + std::to_string(dc.world) + " ranks" : "";
            cli_fail("-d " + std::to_string(opt.total_batch) + ": total batch size must be a multiple of B*T" +
                     (dc.world > 1 ? "*ranks" : "") + " = " + std::to_string(rows) + " (-b " + std::to_string(opt.B) +
                     " -t " + std::to_string(opt.T) + ranks + ")");
        }
        grad_accum = (int)(opt.total_batch / rows);
        dist.init(dc);  // before the model: selects this rank's GPU
        if (!is_main() && freopen("/dev/null", "w", stdout) == nullptr) cli_fail("cannot redirect stdout to /dev/null");
        if (dc.world > 1)
            printf("data parallel: %d ranks, run %s, met through %s (ranks from %s%s)\n", dc.world, dc.run_id.c_str(),
                   dc.rendezvous.empty() ? nccl_rendezvous_file(dc).c_str() : dc.rendezvous.c_str(),
                   dc.launcher.c_str(), dc.rendezvous_from.empty() ? "" : ("; endpoint from " + dc.rendezvous_from).c_str());
    }

    // The config from -e: a descriptor, or a checkpoint whose weights start the run (read here).
    void configure_model() {
        attn_kind_from_name(ATTN_NAME, &config.attn);
        config.max_seq_len = opt.T;
        config.p = opt.p;
        config.rope_base = opt.rope_base;
        config.learn_p = opt.learn_p;
        config.attn_len = opt.train_len ? opt.T : 0;
        std::string error;
        from_checkpoint = !gpt2_parse_descriptor(opt.model, &config, &error);
        if (!error.empty()) cli_fail("-e " + opt.model + ": " + error);
        if (from_checkpoint) {
            error = read_init_checkpoint(opt.model, config, opt.p_given, opt.rope_given, &init_ck);
            if (!error.empty()) cli_fail(error);
            config = init_ck.config;
            config.max_seq_len = opt.T;
        } else {
            std::string err = gpt2_config_error(config);
            if (!err.empty()) cli_fail("-e " + opt.model + ": " + err);
        }
    }

    // Refuses a run that cannot fit, before allocating: the estimate against what this rank has.
    void check_memory() {
        MemoryEstimate need = backend_training_memory(config, opt.B, opt.T);
        std::string where;
        double available = backend_memory_available(&where);
        std::string err = memory_shortfall(need, available, "-e " + opt.model + " -b " + std::to_string(opt.B) +
                                                                " -t " + std::to_string(opt.T), where);
        if (!err.empty()) cli_fail(err);
    }

    void build_model() {
        check_memory();
        try {
            model = new Model(config);
        } catch (const std::invalid_argument& e) {
            cli_fail("-e " + opt.model + ": " + e.what());
        } catch (const std::bad_alloc&) {
            cli_fail("-e " + opt.model + ": out of memory allocating the model (" +
                     format_bytes(backend_training_memory(config, opt.B, opt.T).state_bytes) + ")");
        }
#ifdef TRAIN_BACKEND_CPU
        const char* default_precision = "ref";  // one command, the same numerics on every CPU
#else
        const char* default_precision = "bf16";
#endif
        cli_select_precision(*model, opt.precision.empty() ? default_precision : opt.precision);
        if (opt.precision.empty() && std::string(default_precision) == "ref")  // nobody on the slow path unaware
            printf("  the trainer's default; -pr auto runs the fast path, the faster of its fp32 and bf16 on this CPU\n");
        set_p_lr_scale(*model, opt.p_lr_scale);  // learned p's theta (-plr)
        rng = Rng((uint64_t)opt.seed);
        if (from_checkpoint) model->set_params(init_ck.params);
        else model->init((uint64_t)opt.seed);
        init_ck.params = std::vector<float>();
        inputs.resize((size_t)opt.B * opt.T), targets.resize(inputs.size());
    }

    // The loaders (before the model and the batch are allocated: too little data is refused first).
    void setup_data() {
        try {
            train_loader.init(opt.train_pattern, opt.B, opt.T, rank(), world(), (uint64_t)opt.seed, true, config.vocab_size);
        } catch (const std::exception& e) {
            cli_fail("-i " + opt.train_pattern + " (the training shards): " + e.what());
        }
        run_id.seed = (uint64_t)opt.seed;
        run_id.data_fingerprint = run_data_fingerprint(train_loader.files, train_loader.shard_tokens);
        if (opt.val_every > 0 && !opt.val_pattern.empty()) {
            try {
                val_loader.init(opt.val_pattern, opt.B, opt.T, rank(), world(), (uint64_t)opt.seed, false, config.vocab_size);
            } catch (const std::exception& e) {
                cli_fail("-j " + opt.val_pattern + " (the validation shards): " + std::string(e.what()) +
                         "; -j \"\" trains without validation");
            }
            have_val = true;
        }
        mc.init(opt.mc_files, opt.mc_every > 0 ? opt.mc_every : opt.val_every, opt.mc_max, config.vocab_size, opt.T,
                rank(), world());
        max_steps = opt.max_steps >= 0 ? opt.max_steps : (int)(train_loader.batches_per_epoch / grad_accum);
        if (max_steps == 0 && opt.max_steps < 0)
            cli_fail("-i " + opt.train_pattern + ": one epoch (" + std::to_string(train_loader.batches_per_epoch) +
                     " batches) is less than one step of " + std::to_string(grad_accum) +
                     " micro-batches; lower -d or pass -x");
        opt.schedule.max_steps = max_steps;
    }

    // -y 1: model, optimizer, loader, rng and step from the newest checkpoint of -o, if any; then
    // every rank takes rank 0's weights (and, resuming, its own optimizer shard).
    bool resume_and_attach() {
        ResumePoint point;
        bool resumed = opt.resume &&
                       find_resume_point(opt.out_dir, config, run_id, rank(), world(), model->num_parameters, &point);
        if (resumed) {
            const TrainState& t = point.checkpoint.train;
            // the last update applied: skipped steps leave the weights of the one before
            model->set_params(point.checkpoint.params, (int)(t.step - t.consecutive_skips));
            train_loader.restore(t.loader);
            state = t;
            rng.state = state.rng_state;
            last_checkpoint = point.path;
            printf("resumed from %s at step %lld\n", point.path.c_str(), (long long)state.step);
        } else if (opt.resume) {
            printf("no checkpoint in %s: starting from scratch\n", opt.out_dir.c_str());
        }
        dist.attach(*model, opt.zero1);
        if (resumed) dist.restore_optimizer(*model, point.shard, (int)(state.step - state.consecutive_skips));
        return resumed;
    }

    void setup_output(bool resumed) {
        if (opt.out_dir.empty() || !is_main()) return;
        log.open(opt.out_dir + "/log.jsonl", resumed ? state.step : -1);
        if (!resumed)
            log.line(run_header_record(world(), opt.total_batch, opt.B, opt.T, attn_kind_name(config.attn), config.p,
                                       schedule_and_guards_record()));
    }

    // ,"lr":..,"lr_schedule":"wsd",...: the header record's schedule, p warmup and attn_len where set, and
    // guard thresholds
    std::string schedule_and_guards_record() const {
        const LrSchedule& k = opt.schedule;
        std::string rec = ",\"lr\":" + json_number(k.lr) + ",\"lr_schedule\":\"" + k.kind + "\",\"warmup\":" +
                          std::to_string(k.warmup) + ",\"final_lr_frac\":" + json_number(k.final_frac);
        if (k.kind == "wsd")
            rec += ",\"cooldown_frac\":" + json_number(k.cooldown_frac) + ",\"cooldown_start\":" +
                   std::to_string(k.cooldown_start());
        if (opt.p_warmup > 0) rec += ",\"p_warmup\":" + std::to_string(opt.p_warmup);
        if (config.attn_len > 0) rec += ",\"attn_len\":" + std::to_string(config.attn_len);
        return rec + ",\"skip_loss_z\":" + json_number(opt.guard.spike_z) + ",\"skip_grad_norm_z\":" +
               json_number(opt.guard.norm_z);
    }

    // The samples' text: bytes for a byte-level model (vocabulary 256), GPT-2 BPE for a GPT-2 one
    // (without its files, token ids); a prompt needs one of them.
    void load_tokenizer() {
        bool text_vocab = config.vocab_size == TextCodec::BYTE_VOCAB || config.vocab_size == GPT2Tokenizer::VOCAB_SIZE;
        if (!opt.prompt.empty() && !text_vocab)
            cli_fail("-gp: a prompt needs the GPT-2 vocabulary (50257 tokens) or bytes (256), this model has " +
                     std::to_string(config.vocab_size));
        if (opt.sample_every <= 0 || !text_vocab) return;
        try {
            codec = TextCodec::for_vocab(config.vocab_size);
        } catch (const std::exception& e) {
            if (!opt.prompt.empty()) cli_fail(std::string("-gp needs the GPT-2 tokenizer: ") + e.what());
            if (is_main()) fprintf(stderr, "warning: no tokenizer, samples are printed as token ids (%s)\n", e.what());
        }
    }

    void print_summary() {
        std::string p = attn_head_param(config.attn) == ATTN_HEAD_S ? " s learned per layer and head from " +
                                                                         json_number(SSMAX_S0)
                        : !attn_reweights(config.attn) ? ""
                        : config.learn_p ? " p learned per layer and head from " + json_number(config.p)
                                         : " p " + json_number(config.p);
        if (opt.p_warmup > 0) p += ", warmed up from 1 over " + std::to_string(opt.p_warmup) + " steps";
        if (config.attn_len > 0)
            p += attn_log_scales(config.attn) ? " (log-length scaling beyond attn_len " + std::to_string(config.attn_len) + ")"
                                              : " (length terms at the constant attn_len " + std::to_string(config.attn_len) + ")";
        printf("model: %s attention%s, %d layers, %d heads, %d channels, vocab %d (padded %d), %zu parameters, %s back end\n",
               attn_kind_name(config.attn), p.c_str(), config.num_layers, config.num_heads, config.channels,
               config.vocab_size, config.padded_vocab_size, model->num_parameters, BACKEND_NAME);
        std::string ranks = world() > 1 ? " x " + std::to_string(world()) + " ranks" + (dist.zero1 ? " (ZeRO-1)" : "") : "";
        printf("batch: B %d x T %d x %d accumulation%s = %lld tokens per step; %d steps; train %lld tokens (%s)\n",
               opt.B, opt.T, grad_accum, ranks.c_str(), opt.total_batch, max_steps, (long long)train_loader.num_tokens,
               opt.train_pattern.c_str());
        const LrSchedule& k = opt.schedule;
        std::string shape = k.kind == "constant" ? "constant"
                            : k.kind == "wsd"    ? "held to step " + std::to_string(k.cooldown_start()) + ", then linear"
                                                 : k.kind;
        printf("learning rate: %g, warmup %d steps, %s%s\n", k.lr, k.warmup, shape.c_str(),
               k.kind == "constant" ? "" : (" to " + cli_number(k.lr * k.final_frac) + " at step " + std::to_string(max_steps)).c_str());
    }

    // -o: created, locked for this process (rank 0), owned by this run, its orphans removed.
    void claim_output_dir() {
        if (opt.out_dir.empty()) return;
        std::string err = make_dirs(opt.out_dir);
        if (!err.empty()) cli_fail("-o " + opt.out_dir + ": " + err);
        if (!is_main()) return;
        err = run_dir_claim(opt.out_dir, opt.overwrite, opt.resume, run_id);
        if (!err.empty()) cli_fail(err);
    }

    void setup() {
        setup_batch();
        configure_model();
        setup_data();
        build_model();
        claim_output_dir();
        bool resumed = resume_and_attach();
        setup_output(resumed);
        load_tokenizer();
        print_summary();
    }

    // ------------------------------------------------------------------------
    // the loop

    // Forward and backward over the micro-batches, the gradient over every rank, the guard, the update.
    StepResult train_step(int step) {
        auto t0 = std::chrono::steady_clock::now();
        StepResult r;
        model->zero_grad();
        for (int micro = 0; micro < grad_accum; micro++) {
            train_loader.next_batch(inputs.data(), targets.data());
            r.last_micro_loss = model->forward(inputs.data(), targets.data(), opt.B, opt.T, true);
            r.loss += r.last_micro_loss;
            if (micro == grad_accum - 1) dist.overlap_reduce(*model);  // all-reduce during the last backward
            model->backward(1.0f / grad_accum);
        }
        // the same loss and norm on every rank, hence the same guard and clipping decisions
        r.loss = mean_over_ranks(r.loss / grad_accum);
        dist.reduce_grads(*model);
        r.norm = dist.grad_norm(*model);
        r.lr = opt.schedule.at(step);
        r.applied = opt.guard.accept(r.loss, r.norm, state, r.skip_reason);
        if (r.applied) {
            float scale = opt.clip > 0 && r.norm > opt.clip ? (float)(opt.clip / r.norm) : 1.0f;
            dist.update(*model, {.lr = r.lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                 .weight_decay = opt.weight_decay, .grad_scale = scale, .step = step});
            state.consecutive_skips = 0;
        } else {
            state.consecutive_skips++;
            state.total_skips++;
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return r;
    }

    // The step line (loss, norm, lr, time, tokens/s, MFU on a known GPU, ETA) and its log record.
    void report_step(int step, const StepResult& r, double mfu, double eta_s) {
        double tok_s = opt.total_batch / (r.ms / 1000.0);
        std::vector<double> p_values = opt.p_warmup ? std::vector<double>{model->config.p} : model_learned_p(*model);
        std::vector<double> s_values = model_ssmax_s(*model);
        std::string head_params = !p_values.empty() ? learned_p_summary(p_values) : ssmax_s_summary(s_values);
        print_step_line(step, max_steps, r, tok_s, mfu, eta_s, head_params);
        log.line(step_record(step, r, tok_s, p_values, s_values));
    }

    // Too many skipped updates in a row: stop, naming the checkpoint to go back to.
    void stop_if_stuck(int step, const StepResult& r) {
        if (r.applied || state.consecutive_skips < opt.max_skips) return;
        std::string msg = std::to_string(state.consecutive_skips) + " consecutive updates skipped (last: " +
                          r.skip_reason + " at step " + std::to_string(step) + "); stopping. " + recovery_advice(last_checkpoint);
        log.line("{\"step\":" + std::to_string(step) + ",\"stopped\":\"" + r.skip_reason + "\"}");
        cli_fail(msg, 2);
    }

    int run() {
        int start = (int)state.step;
        int end = opt.steps_this_run > 0 ? std::min(max_steps, start + opt.steps_this_run) : max_steps;
        double flops_per_step = training_flops_per_token(model->num_parameters, config, opt.T) * opt.total_batch;
        std::string gpu;
        double peak = device_peak_flops(&gpu);
        if (peak == 0) printf("%s: no dense bf16 peak is known for %s\n", MFU_UNKNOWN, gpu.c_str());
        if (peak > 0) peak *= world();  // every rank's GPU alike
        if (have_val && start == 0) validate_and_log(0);
        double time_sum = 0;
        int timed = 0;
        for (int step = start + 1; step <= end; step++) {
            if (opt.p_warmup > 0) set_attention_p(*model, p_at_step(config.p, opt.p_warmup, step));  // -pw
            StepResult r = train_step(step);
            if (step > start + 1 || end - start == 1) { time_sum += r.ms; timed++; }  // the first step warms up
            double mfu = step_mfu(flops_per_step, r.ms / 1000.0, peak);
            report_step(step, r, mfu, timed > 0 ? time_sum / timed * (end - step) / 1000.0 : 0);
            stop_if_stuck(step, r);
            bool last = step == max_steps;
            bool stop_here = step == end && end < max_steps;
            bool checkpoint_here = !opt.out_dir.empty() && r.applied &&
                                   ((opt.ckpt_every > 0 && (step % opt.ckpt_every == 0 || last)) || stop_here);
            if (checkpoint_here) check_update_before_checkpoint(step, r);  // on the step's own batch
            if (have_val && (step % opt.val_every == 0 || last)) validate_and_log(step);
            if (mc.due(step, last))
                log.line("{\"step\":" + std::to_string(step) + mc.run(*model, dist, opt.B, opt.T, step) + "}");
            if (is_main() && opt.sample_every > 0 && (step % opt.sample_every == 0 || last)) sample(step);
            if (checkpoint_here) save_checkpoint(step);
        }
        if (end < max_steps) printf("stopped after step %d of %d (-xi); continue with -y 1\n", end, max_steps);
        if (state.total_skips > 0) printf("%d updates were skipped by the guard\n", state.total_skips);
        log.close();
        dist.finish();
        return 0;
    }
};

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, so that scripts/launch.sh's rank prefixes apply
    Trainer trainer;
    trainer.opt = train_parse_args(argc, argv);
    try {
        trainer.setup();
        return trainer.run();
    } catch (const std::exception& e) {
        cli_fail(e.what());
    }
}
