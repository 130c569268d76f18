// The CPU back end trains in one process: runtime/distributed.h's interface in its one-rank form,
// so that the training loop is the same for both back ends.
#pragma once

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/adamw_step.h"
#include "runtime/checkpoint.h"

struct DistConfig {
    int rank = 0, world = 1;
    std::string run_id, rendezvous, launcher, rendezvous_from;
};

// One process; a launcher's world size above 1 is refused (the CPU back end has no collectives).
inline DistConfig dist_config_from_env() {
    for (const char* name : {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
        const char* v = getenv(name);
        if (v != nullptr && *v != 0 && strcmp(v, "1") != 0)
            throw std::runtime_error(std::string(name) + "=" + v + ": the CPU trainer runs as one process; train "
                                     "data-parallel with the CUDA build (make train_gpt2cu), or unset " + name);
    }
    return DistConfig();
}

inline std::string nccl_rendezvous_file(const DistConfig&) { return ""; }

template <class Model> struct SingleProcess {
    DistConfig config;
    bool zero1 = false;
    void init(const DistConfig& c) { config = c; }
    void attach(Model&, bool) {}
    void overlap_reduce(Model&) {}
    void reduce_grads(Model&) {}
    double grad_norm(Model& model) { return model.grad_norm(); }
    float average(float x) { return x; }
    void update(Model& model, const AdamWStep& s) { model.update(s); }
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
