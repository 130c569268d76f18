// The checkpoints of a training run, over every rank: the two-phase commit that writes them and
// the lookup that resumes from the newest (file formats: runtime/checkpoint.h).
//   save: each rank writes its optimizer shard; the ranks agree that every shard was written;
//         then rank 0 writes the model file, which completes the checkpoint. A failure on any rank
//         stops every rank with the file named, and the previous checkpoint stays intact.
//   resume: the newest model file of the directory, checked against the run's config, identity
//         (seed, training data) and number of ranks, and this rank's optimizer shard that goes with
//         it; a corrupt one is refused with the way back to the one before.
// Dist is runtime/distributed.h's Distributed or runtime/distributed_single.h's SingleProcess.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/dataloader.h"
#include "runtime/checkpoint.h"
#include "runtime/fs.h"

// Writes step's checkpoint into dir (every rank calls it); `state` is the trainer's state at that
// step (step, rng and loader filled in by the caller). `previous` names the last checkpoint written
// or resumed from, for the message. Returns the model file's path; throws on any rank's failure.
template <class Dist, class Model>
std::string save_run_checkpoint(Dist& dist, Model& model, const std::string& dir, int64_t step,
                                const GPT2Config& config, const RunIdentity& run, const TrainState& state,
                                const std::string& previous) {
    std::string path = checkpoint_path(dir, step);
    std::string kept = previous.empty() ? "No earlier checkpoint of this run." : "The previous checkpoint " + previous + " is intact.";
    OptimizerShard shard = dist.optimizer_shard(model);
    shard.step = step;
    shard.run = run;
    std::string shard_path = optimizer_shard_path(dir, step, dist.config.rank, dist.config.world);
    std::string error;
    try {
        optimizer_shard_write(shard_path, shard);
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (dist.any(!error.empty())) {
        remove(shard_path.c_str());
        throw std::runtime_error((error.empty() ? "another rank could not write its optimizer shard of step " +
                                                      std::to_string(step) : error) + "; stopping. " + kept);
    }
    std::vector<float> params;
    dist.gather_params(model, params);  // every rank: under ZeRO-1 a collective
    if (dist.config.rank == 0) {
        Checkpoint ck;
        ck.config = config;
        ck.world_size = dist.config.world;
        ck.run = run;
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
        throw std::runtime_error((error.empty() ? "rank 0 could not write " + path : error) + "; stopping. " + kept);
    }
    return path;
}

struct ResumePoint {
    std::string path;      // the model file
    Checkpoint checkpoint;
    OptimizerShard shard;  // this rank's
};

// How to go back from the newest checkpoint of dir (at steps.back()), which cannot be resumed.
inline std::string resume_fallback_advice(const std::string& dir, const std::vector<int64_t>& steps) {
    char newest[64];
    snprintf(newest, sizeof newest, "/ckpt_%08lld*", (long long)steps.back());
    if (steps.size() < 2)
        return ". It is the only checkpoint in " + dir + ": start over with -ow 1 (removes it), or give another -o";
    return ". To resume from the previous checkpoint " + checkpoint_path(dir, steps[steps.size() - 2]) +
           ", move this one and its optimizer shards out of the directory (mv " + dir + newest +
           " <elsewhere>/), then run again with -y 1";
}

// "" if checkpoint `path` (of identity `have`) is this run's (`want`), else why not and the fix.
inline std::string run_identity_mismatch(const std::string& path, const RunIdentity& have, const RunIdentity& want) {
    if (!have.known() || have == want) return "";  // version 2 files carry no identity
    std::string what = have.seed != want.seed ? "seed " + std::to_string(have.seed) + " (this run's -rs is " +
                                                    std::to_string(want.seed) + ")"
                                              : std::string("other training data (-i: shard names or sizes differ)");
    return "-y 1: checkpoint " + path + " belongs to another run: it was trained with " + what +
           ". Resume it with its own -rs and -i, start over in this directory with -ow 1, or give another -o";
}

// The newest checkpoint in dir that this run (config, identity, rank of world) can continue from,
// into *out; false if dir holds none. A checkpoint of another config, run or number of ranks,
// without the loader's position, or corrupt, is refused with the fix (throws).
inline bool find_resume_point(const std::string& dir, const GPT2Config& config, const RunIdentity& run, int rank,
                              int world, size_t num_parameters, ResumePoint* out) {
    std::vector<int64_t> steps = checkpoint_steps(dir);
    if (steps.empty()) return false;
    out->path = checkpoint_path(dir, steps.back());
    const std::string& path = out->path;
    Checkpoint& ck = out->checkpoint;
    try {
        checkpoint_read(path, ck);
    } catch (const std::exception& e) {
        throw std::runtime_error(e.what() + resume_fallback_advice(dir, steps));
    }
    std::string mismatch = checkpoint_config_mismatch(path, ck.config, config);
    if (!mismatch.empty()) throw std::runtime_error(mismatch + " (the run in " + dir + " was started with other flags)");
    mismatch = run_identity_mismatch(path, ck.run, run);
    if (!mismatch.empty()) throw std::runtime_error(mismatch);
    if (!ck.train.has_loader) throw std::runtime_error("checkpoint " + path + " holds no data loader position: cannot resume");
    // the batch split and the rows each rank reads depend on the number of ranks
    if (ck.world_size != world)
        throw std::runtime_error("-y 1: " + path + " was trained on " + std::to_string(ck.world_size) +
                                 " rank(s), this launch has " + std::to_string(world) + ": resume with " +
                                 std::to_string(ck.world_size) + ", or start a new run from its weights (-e " + path + ")");
    try {
        optimizer_shard_read(optimizer_shard_path(dir, ck.train.step, rank, world), out->shard, ck.train.step, rank,
                             world, num_parameters);
    } catch (const std::exception& e) {
        throw std::runtime_error(e.what() + resume_fallback_advice(dir, steps));
    }
    return true;
}

// -e CHECKPOINT: the checkpoint whose weights start a new run, into *out; "" if it suits the run
// (`asked`: this binary's variant, learned p (-pl), attn_len (-tl), and p and the RoPE base where
// the flags gave them), else the
// refusal. The run takes the checkpoint's config (its length aside).
inline std::string read_init_checkpoint(const std::string& path, const GPT2Config& asked, bool p_given, bool rope_given,
                                        Checkpoint* out) {
    if (!path_exists(path)) return "-e " + path + ": neither a depth descriptor (like d12 or d4c256h4) nor a checkpoint file";
    checkpoint_read(path, *out);
    GPT2Config want = out->config;
    want.attn = asked.attn;
    if (p_given) want.p = asked.p;
    if (rope_given) want.rope_base = asked.rope_base;
    want.learn_p = asked.learn_p;
    want.attn_len = asked.attn_len;
    return checkpoint_config_mismatch(path, out->config, want, false);
}
