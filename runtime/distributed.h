// Data parallelism across GPUs and nodes with NCCL: one process per GPU, each with its own copy of
// the model (model/gpt2_cuda.cuh) and its own rows of every batch (dataloader/dataloader.h with
// this rank and world). No MPI: the ranks find each other through a file or a TCP port
// (runtime/rendezvous.h).
//
//   DistConfig cfg = dist_config_from_env();   // RANK/WORLD_SIZE/LOCAL_RANK or SLURM_*, DIST_*
//   Distributed dist;
//   dist.init(cfg);                           // cudaSetDevice(local_rank), NCCL communicator
//   GPT2Cuda model(config); model.init(seed);
//   dist.attach(model, zero1);                // ZeRO-1 padding; every rank gets rank 0's weights
//   loader.init(pattern, B, T, cfg.rank, cfg.world, ...);
//   each step: forward/backward over the micro-batches (loss_scale 1/accumulation), with
//     dist.overlap_reduce(model) before the last backward, then
//     dist.reduce_grads(model);               // gradient of the mean loss over every rank's rows
//     double norm = dist.grad_norm(model);    // its global norm (the same on every rank)
//     dist.update(model, lr, ..., grad_scale, step);
//     float mean_loss = dist.average(loss);   // for the log
//   checkpoint (every rank): dist.optimizer_shard(model) -> its own optimizer file;
//     dist.gather_params(model, params) -> rank 0 writes the model file (runtime/checkpoint.h)
//   resume: model.set_params(params, step); dist.attach(...); dist.restore_optimizer(model, shard, step)
//   dist.finish();
//
// Environment (dist_config_from_env):
//   RANK, WORLD_SIZE, LOCAL_RANK        (scripts/launch.sh, torchrun) or
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (srun); both sets may be given if they agree
//   DIST_RUN_ID   names this run's rendezvous file (default SLURM_JOB_ID.SLURM_STEP_ID); required
//                 when WORLD_SIZE > 1; scripts/launch.sh makes a fresh one per launch
//   DIST_ID_DIR   a directory every rank can read (default /tmp: one node; a shared file system
//                 across nodes)
//   DIST_RENDEZVOUS  tcp://HOST:PORT (or HOST:PORT): rank 0 serves the id on PORT of HOST instead
//                 of writing the file (nodes without a shared file system)
//   DIST_TIMEOUT_S  seconds a rank waits for the rendezvous and for a collective (default 600)
//
// Rendezvous (runtime/rendezvous.h): rank 0 draws the NCCL unique id and hands it to the others
// through DIST_ID_DIR/nccl_id_<run id>.bin or over DIST_RENDEZVOUS, every wait at most
// DIST_TIMEOUT_S; the run id (and world size) in the file or the handshake keeps a leftover of an
// earlier or concurrent run from being taken for this run's id. The file is removed once the
// communicator is up.
//
// Overlap: without ZeRO-1, overlap_reduce() has the last micro-step's backward hand each layer's
// gradients, as soon as they are complete, to an all-reduce on a communication stream, so the
// traffic of layers L-1..1 hides behind the backward of the layers below; reduce_grads() then
// adds wte and the final layernorm and waits. The average of each element is the same as one
// all-reduce of the whole buffer. ZeRO-1's reduce-scatter keeps one call after the backward: its
// shards are contiguous ranges of the whole buffer, which cut across the layers.
//
// Gradients are reduced in bf16, as they are stored (llm.c's choice): half the traffic of fp32,
// and NCCL adds in fp32 and rounds each partial sum once to bf16, so a ring over n GPUs adds at
// most n-1 roundings of 2^-9, the order of those already in each rank's bf16 gradient.
//
// ZeRO-1 (attach(model, true)): rank r owns the parameters [r S, (r+1) S) (S = model.shard_size,
// param_shard_range). reduce_grads reduce-scatters the gradients (each rank gets the average of
// its shard only), grad_norm all-reduces the shards' squared norms, update runs AdamW on the shard
// alone and all-gathers the bf16 weights. A rank keeps the fp32 master weights and AdamW moments
// of its shard only (model.shard_optimizer, model/optimizer_state.cuh): 12 bytes per parameter become 12/W, 1.3 GB of the 1.5 GB
// of GPT-2 124M on 8 GPUs. A checkpoint gathers the master weights for rank 0's model file once.
//
// Checkpoints (runtime/checkpoint.h): every rank writes the moments of its shard of the same
// partition (param_shard_range, with or without ZeRO-1) to its own file; rank 0 writes the fp32
// weights. A resume reads them back on as many ranks; without ZeRO-1 the ranks then broadcast
// their shards' moments to each other.
//
// Timeouts: a rank that dies or stops calling collectives must not hang the others. The
// communicator is non-blocking (ncclCommInitRankConfig, blocking = 0) and every collective is
// waited for by polling the stream and ncclCommGetAsyncError for at most DIST_TIMEOUT_S; past it,
// the communicator is aborted and the call throws. The emulator's host NCCL (simt/nccl_host.h)
// models the non-blocking states; its collectives themselves give up after SIMT_NCCL_TIMEOUT_S.
// Every error throws std::runtime_error
// with the rank and the fix; the trainer prints it and exits non-zero, and scripts/launch.sh then
// stops the other ranks.
// Test: test/test_distributed.cu. Include this file in one translation unit (as gpt2_cuda.cuh).
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "layers/cuda_common.cuh"
#include "layers/global_norm.cuh"
#include "layers/nccl_common.cuh"
#include "runtime/checkpoint.h"
#include "model/gpt2_cuda.cuh"
#include "runtime/rendezvous.h"

static_assert(sizeof(ncclUniqueId) == sizeof(RendezvousId), "the rendezvous carries an NCCL unique id");

struct DistConfig {
    int rank = 0;
    int world = 1;
    int local_rank = 0;      // the GPU of this node: cudaSetDevice(local_rank)
    std::string run_id;      // names the rendezvous file; [A-Za-z0-9._-], at most 100 characters
    std::string id_dir = "/tmp";
    std::string rendezvous;  // DIST_RENDEZVOUS: "tcp://HOST:PORT" or "HOST:PORT"; empty: the file in id_dir
    double timeout_s = 600;  // rendezvous and collective watchdog
    bool communicator_for_one = false;  // a communicator even for world 1 (tests: NCCL on one GPU)
};

// Empty if the config is consistent, else a message naming the value and the fix.
inline std::string dist_config_error(const DistConfig& c) {
    if (c.world < 1) return "world size " + std::to_string(c.world) + " must be >= 1";
    if (c.rank < 0 || c.rank >= c.world) {
        return "rank " + std::to_string(c.rank) + " is not in [0, world size " + std::to_string(c.world) + ")";
    }
    if (c.local_rank < 0 || c.local_rank > c.rank) {
        return "local rank " + std::to_string(c.local_rank) + " must be in [0, rank " + std::to_string(c.rank) +
               "] (the GPU index on this node)";
    }
    if (!(c.timeout_s > 0)) return "timeout " + std::to_string(c.timeout_s) + " s must be > 0";
    if (c.world > 1) {
        if (c.run_id.empty()) {
            return "world size " + std::to_string(c.world) + " needs a run id: set DIST_RUN_ID to the same fresh "
                   "value on every rank (scripts/launch.sh does), or run under Slurm (SLURM_JOB_ID)";
        }
        if (c.run_id.size() > 100 || c.run_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                                  "0123456789._-") != std::string::npos) {
            return "run id '" + c.run_id + "' must be 1 to 100 characters of [A-Za-z0-9._-] (it names a file)";
        }
        if (c.id_dir.empty()) return "the rendezvous directory (DIST_ID_DIR) is empty";
        if (!c.rendezvous.empty()) {
            try {
                parse_rendezvous_endpoint(c.rendezvous);
            } catch (const std::exception& e) {
                return e.what();
            }
        }
    }
    return "";
}

// The rendezvous file of this run (when DIST_RENDEZVOUS is not set).
inline std::string nccl_rendezvous_file(const DistConfig& c) { return rendezvous_file_path(c.id_dir, c.run_id); }

// *out = the integer in environment variable `name`; false if it is unset or empty.
inline bool dist_env_int(const char* name, int* out) {
    const char* s = getenv(name);
    if (s == nullptr || *s == '\0') return false;
    char* end = nullptr;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX) {
        throw std::runtime_error(std::string("environment: ") + name + "='" + s + "' is not an integer");
    }
    *out = (int)v;
    return true;
}

// The config from the environment (see the top of this file); a process with none of it is rank 0
// of 1. Throws std::runtime_error on missing or inconsistent values.
inline DistConfig dist_config_from_env() {
    DistConfig c;
    int rank = 0, world = 1, local = 0, s_rank = 0, s_world = 1, s_local = 0;
    bool has_rank = dist_env_int("RANK", &rank), has_world = dist_env_int("WORLD_SIZE", &world);
    bool has_local = dist_env_int("LOCAL_RANK", &local);
    bool has_s_rank = dist_env_int("SLURM_PROCID", &s_rank), has_s_world = dist_env_int("SLURM_NTASKS", &s_world);
    bool has_s_local = dist_env_int("SLURM_LOCALID", &s_local);
    if (has_rank || has_world || has_local) {
        if (!(has_rank && has_world && has_local)) {
            throw std::runtime_error("environment: RANK, WORLD_SIZE and LOCAL_RANK go together (set all three, or "
                                     "none for one process); scripts/launch.sh sets them");
        }
        if ((has_s_rank && s_rank != rank) || (has_s_world && s_world != world) || (has_s_local && s_local != local)) {
            throw std::runtime_error("environment: RANK/WORLD_SIZE/LOCAL_RANK = " + std::to_string(rank) + "/" +
                                     std::to_string(world) + "/" + std::to_string(local) +
                                     " disagree with SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID = " +
                                     std::to_string(s_rank) + "/" + std::to_string(s_world) + "/" +
                                     std::to_string(s_local) + ": unset one set");
        }
        c.rank = rank; c.world = world; c.local_rank = local;
    } else if (has_s_rank || has_s_world) {
        if (!(has_s_rank && has_s_world && has_s_local)) {
            throw std::runtime_error("environment: SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID go together "
                                     "(launch the ranks with srun)");
        }
        c.rank = s_rank; c.world = s_world; c.local_rank = s_local;
    }
    const char* run_id = getenv("DIST_RUN_ID");
    const char* job = getenv("SLURM_JOB_ID");
    if (run_id != nullptr && *run_id != '\0') {
        c.run_id = run_id;
    } else if (job != nullptr && *job != '\0') {
        const char* step = getenv("SLURM_STEP_ID");
        c.run_id = std::string("slurm") + job + "." + (step != nullptr && *step != '\0' ? step : "0");
    }
    const char* dir = getenv("DIST_ID_DIR");
    if (dir != nullptr && *dir != '\0') c.id_dir = dir;
    const char* endpoint = getenv("DIST_RENDEZVOUS");
    if (endpoint != nullptr && *endpoint != '\0') c.rendezvous = endpoint;
    const char* timeout = getenv("DIST_TIMEOUT_S");
    if (timeout != nullptr && *timeout != '\0') {
        char* end = nullptr;
        c.timeout_s = strtod(timeout, &end);
        if (*end != '\0' || !(c.timeout_s > 0)) {
            throw std::runtime_error(std::string("environment: DIST_TIMEOUT_S='") + timeout +
                                     "' is not a positive number of seconds");
        }
    }
    std::string err = dist_config_error(c);
    if (!err.empty()) throw std::runtime_error("environment: " + err);
#if !defined(__CUDACC__)
    // the emulator's host NCCL has its own watchdog: one setting, DIST_TIMEOUT_S, covers both
    if (timeout != nullptr && *timeout != '\0') setenv("SIMT_NCCL_TIMEOUT_S", timeout, 0);
#endif
    return c;
}

// ----------------------------------------------------------------------------
// the communicator and the collectives of a training step

struct Distributed {
    DistConfig config;
    ncclComm_t comm = nullptr;   // null when world = 1 (unless communicator_for_one)
    bool zero1 = false;          // this rank's optimizer state is its shard (model.optimizer's range)
    float* scalar = nullptr;     // (1) device: average()'s value
    cudaStream_t comm_stream = nullptr;  // the overlapped all-reduces (with a communicator)
    cudaEvent_t grads_ready = nullptr;   // recorded on the model's stream when a layer's gradients are done
    bool overlapping = false;            // this step's layers are being all-reduced during the backward

    Distributed() = default;
    Distributed(const Distributed&) = delete;
    Distributed& operator=(const Distributed&) = delete;
    ~Distributed() { finish(); }

    // Selects this rank's GPU and, with world > 1 (or communicator_for_one), forms the communicator (rendezvous through
    // config.id_dir). Call before constructing the model.
    void init(const DistConfig& c) {
        std::string err = dist_config_error(c);
        if (!err.empty()) throw std::runtime_error("distributed: " + err);
        config = c;
        cudaCheck(cudaSetDevice(c.local_rank));
        cudaCheck(cudaMalloc(&scalar, sizeof(float)));
        if (c.world == 1 && !c.communicator_for_one) return;
        ncclUniqueId id;
        RendezvousId drawn{};
        if (c.rank == 0) {
            check(ncclGetUniqueId(&id), "ncclGetUniqueId");
            memcpy(drawn.bytes, &id, sizeof id);
        }
        RendezvousRun run{c.rank, c.world, c.run_id, c.timeout_s};
        RendezvousId got = rendezvous_exchange(run, c.rendezvous, c.id_dir, drawn);
        memcpy(&id, got.bytes, sizeof id);
        ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
        nccl_config.blocking = 0;  // calls return at once; wait_async() bounds the wait
        ncclResult_t r = ncclCommInitRankConfig(&comm, c.world, id, c.rank, &nccl_config);
        if (r != ncclSuccess && r != ncclInProgress) fail("ncclCommInitRankConfig", r);
        wait_async("ncclCommInitRankConfig");
        rendezvous_finish(run, c.rendezvous, c.id_dir);  // every rank has joined, so has read the file
        // non-blocking: the legacy default stream, the model's, must not wait for it
        cudaCheck(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&grads_ready, cudaEventDisableTiming));
    }

    // Prepares the model for this run: ZeRO-1's equal shards, and rank 0's weights on every rank
    // (they start alike only if every rank drew the same initialisation or read the same file).
    void attach(GPT2Cuda& model, bool use_zero1) {
        zero1 = use_zero1 && comm != nullptr;
        if (comm == nullptr) return;
        check(ncclBroadcast(model.optimizer.master, model.optimizer.master, model.num_parameters, ncclFloat32, 0, comm,
                            model.stream), "ncclBroadcast(master weights)");
        check(ncclBroadcast(model.params_memory, model.params_memory, model.num_parameters, ncclBfloat16, 0, comm,
                            model.stream), "ncclBroadcast(params)");
        wait_stream(model.stream, "ncclBroadcast(weights)");
        if (zero1) model.shard_optimizer(config.world, config.rank);
    }

    // After the last backward of a step. Each rank holds the gradient of the mean loss over its
    // rows; afterwards it holds the average over the ranks, the gradient of the mean over all
    // rows (all of it, or under ZeRO-1 its shard).
    void reduce_grads(GPT2Cuda& model) {
        if (comm == nullptr) return;
        if (overlapping) {  // the layers are on their way: add wte and lnf, then wait for all
            model.on_layer_backward = nullptr;
            overlapping = false;
            all_reduce_after_backward(model, [](int i) { return !param_tensor_per_layer(i); }, 0);
            wait_stream(comm_stream, "ncclAllReduce(grads)");
            return;
        }
        if (zero1) {
            // in place: rank r's shard of the padded buffer receives the reduced shard
            check(ncclReduceScatter(model.grads_memory, model.grads_memory + (size_t)config.rank * model.shard_size,
                                    model.shard_size, ncclBfloat16, ncclAvg, comm, model.stream),
                  "ncclReduceScatter(grads)");
            wait_stream(model.stream, "ncclReduceScatter(grads)");
        } else {
            check(ncclAllReduce(model.grads_memory, model.grads_memory, model.num_parameters, ncclBfloat16, ncclAvg,
                                comm, model.stream), "ncclAllReduce(grads)");
            wait_stream(model.stream, "ncclAllReduce(grads)");
        }
    }

    // Before the last backward of a step, without ZeRO-1: its layers' gradients are all-reduced
    // on comm_stream as the backward completes them (see the top of this file).
    void overlap_reduce(GPT2Cuda& model) {
        if (comm == nullptr || zero1) return;
        overlapping = true;
        model.on_layer_backward = [this, &model](int layer) {
            all_reduce_after_backward(model, param_tensor_per_layer, layer);
        };
    }

    // On comm_stream, once the model's stream has got this far: the average over the ranks of
    // layer `layer`'s slice of every tensor for which take(tensor) holds (a tensor with no layers:
    // all of it).
    template <class Take> void all_reduce_after_backward(GPT2Cuda& model, Take take, int layer) {
        cudaCheck(cudaEventRecord(grads_ready, model.stream));
        cudaCheck(cudaStreamWaitEvent(comm_stream, grads_ready, 0));
        check(ncclGroupStart(), "ncclGroupStart");
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            if (!take(i)) continue;
            size_t n = model.param_sizes[i], offset = 0;
            if (param_tensor_per_layer(i)) {
                n /= model.config.num_layers;
                offset = (size_t)layer * n;
            }
            floatX* g = model.grad(i) + offset;
            check(ncclAllReduce(g, g, n, ncclBfloat16, ncclAvg, comm, comm_stream), "ncclAllReduce(grads)");
        }
        check(ncclGroupEnd(), "ncclGroupEnd(grads)");
    }

    // Norm of the averaged gradient (after reduce_grads), the same on every rank.
    double grad_norm(GPT2Cuda& model) {
        if (!zero1) return model.grad_norm();
        // this shard's squared norm (the padding is 0), then the sum over the shards
        float* partials = model.norm_partials;
        float* squared = model.norm_partials + GLOBAL_NORM_BLOCKS;
        global_norm_squared(partials, model.grads_memory + (size_t)config.rank * model.shard_size, model.shard_size,
                            true, model.stream);
        global_norm_aggregate(squared, partials, model.stream);
        check(ncclAllReduce(squared, squared, 1, ncclFloat32, ncclSum, comm, model.stream),
              "ncclAllReduce(grad norm)");
        wait_stream(model.stream, "ncclAllReduce(grad norm)");
        float host = 0;
        cudaCheck(cudaMemcpy(&host, squared, sizeof(float), cudaMemcpyDeviceToHost));
        return std::sqrt((double)host);
    }

    // AdamW (model.update's arguments). Under ZeRO-1: this rank's shard, then the bf16 weights of
    // every shard to every rank.
    void update(GPT2Cuda& model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                int step) {
        if (!zero1) {
            model.update(lr, beta1, beta2, eps, weight_decay, grad_scale, step);
            return;
        }
        model.update(lr, beta1, beta2, eps, weight_decay, grad_scale, step);  // this rank's shard
        check(ncclAllGather(model.params_memory + (size_t)config.rank * model.shard_size, model.params_memory,
                            model.shard_size, ncclBfloat16, comm, model.stream), "ncclAllGather(params)");
        wait_stream(model.stream, "ncclAllGather(params)");
    }

    // The fp32 weights of every parameter into out (every rank calls it: under ZeRO-1 the shards'
    // master weights are all-gathered through a temporary buffer).
    void gather_params(GPT2Cuda& model, std::vector<float>& out) {
        if (!zero1) {
            model.get_params(out);
            return;
        }
        float* whole = nullptr;
        cudaCheck(cudaMalloc(&whole, model.shard_size * config.world * sizeof(float)));
        check(ncclAllGather(model.optimizer.master, whole, model.shard_size, ncclFloat32, comm, model.stream),
              "ncclAllGather(master weights)");
        wait_stream(model.stream, "ncclAllGather(master weights)");
        out.resize(model.num_parameters);
        cudaCheck(cudaMemcpy(out.data(), whole, model.num_parameters * sizeof(float), cudaMemcpyDeviceToHost));
        cudaCheck(cudaFree(whole));
    }

    // This rank's part of a checkpoint's optimizer state: the moments of its shard of
    // param_shard_range(num_parameters, world, rank) (step left to the caller).
    OptimizerShard optimizer_shard(GPT2Cuda& model) {
        OptimizerShard s;
        s.rank = config.rank;
        s.world_size = config.world;
        s.num_parameters = model.num_parameters;
        param_shard_range(model.num_parameters, config.world, config.rank, &s.begin, &s.end);
        model.get_optimizer(s.m, s.v);  // the shard under ZeRO-1, else every parameter
        if (!zero1) {
            s.m = std::vector<float>(s.m.begin() + s.begin, s.m.begin() + s.end);
            s.v = std::vector<float>(s.v.begin() + s.begin, s.v.begin() + s.end);
        }
        return s;
    }

    // Resume, after attach(): this rank's optimizer shard (optimizer_shard_read) into the model.
    // Without ZeRO-1 every rank needs every moment: each broadcasts its shard to the others. Under
    // ZeRO-1 the bf16 weights are rounded again as the shard's last update rounded them
    // (model.round_params) and gathered.
    void restore_optimizer(GPT2Cuda& model, const OptimizerShard& s, int last_update_step) {
        if (zero1) {
            model.set_optimizer(s.m, s.v);
            model.round_params(last_update_step);
            check(ncclAllGather(model.params_memory + (size_t)config.rank * model.shard_size, model.params_memory,
                                model.shard_size, ncclBfloat16, comm, model.stream), "ncclAllGather(params)");
            wait_stream(model.stream, "ncclAllGather(params)");
            return;
        }
        std::vector<float> m(model.num_parameters, 0.0f), v(model.num_parameters, 0.0f);
        std::copy(s.m.begin(), s.m.end(), m.begin() + s.begin);
        std::copy(s.v.begin(), s.v.end(), v.begin() + s.begin);
        model.set_optimizer(m, v);
        if (comm == nullptr) return;
        for (int r = 0; r < config.world; r++) {
            size_t begin, end;
            param_shard_range(model.num_parameters, config.world, r, &begin, &end);
            for (float* b : {model.optimizer.m, model.optimizer.v})
                check(ncclBroadcast(b + begin, b + begin, end - begin, ncclFloat32, r, comm, model.stream),
                      "ncclBroadcast(optimizer shard)");
        }
        wait_stream(model.stream, "ncclBroadcast(optimizer shards)");
    }

    // true on every rank if flag is true on any (e.g. a failed write, so that all ranks stop together)
    bool any(bool flag) { return comm == nullptr ? flag : average(flag ? 1.0f : 0.0f) > 0.0f; }

    // The mean of x over the ranks (e.g. the step's loss, for the log).
    float average(float x) {
        if (comm == nullptr) return x;
        cudaCheck(cudaMemcpy(scalar, &x, sizeof(float), cudaMemcpyHostToDevice));
        check(ncclAllReduce(scalar, scalar, 1, ncclFloat32, ncclAvg, comm, 0), "ncclAllReduce(average)");
        wait_stream(0, "ncclAllReduce(average)");
        cudaCheck(cudaMemcpy(&x, scalar, sizeof(float), cudaMemcpyDeviceToHost));
        return x;
    }

    // Releases the communicator (after the last collective of every rank) and the scalar.
    void finish() {
        if (comm != nullptr) {
            // a non-blocking communicator is finalized first: flushes its work, at most timeout_s
            if (ncclCommFinalize(comm) == ncclInProgress) {
                auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config.timeout_s);
                ncclResult_t state = ncclInProgress;
                while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
                    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
                }
            }
            ncclCommDestroy(comm);
        }
        comm = nullptr;
        if (scalar != nullptr) cudaFree(scalar);
        scalar = nullptr;
        if (comm_stream != nullptr) cudaStreamDestroy(comm_stream);
        comm_stream = nullptr;
        if (grads_ready != nullptr) cudaEventDestroy(grads_ready);
        grads_ready = nullptr;
    }

    // ------------------------------------------------------------------------
    // errors and waits

    [[noreturn]] void fail(const std::string& what, ncclResult_t r, const std::string& detail = "") {
        std::string last = ncclGetLastError(comm);
        if (comm != nullptr) ncclCommAbort(comm);  // a broken communicator: release the others' waits
        comm = nullptr;
        throw std::runtime_error("rank " + std::to_string(config.rank) + " of " + std::to_string(config.world) +
                                 ": " + what + ": " + ncclGetErrorString(r) + (detail.empty() ? "" : ": " + detail) +
                                 (last.empty() ? "" : " (" + last + ")"));
    }

    void check(ncclResult_t r, const char* what) {
        if (r == ncclSuccess) return;
        if (r == ncclInProgress) {  // a non-blocking communicator: the call is being enqueued
            wait_async(what);
            return;
        }
        fail(what, r);
    }

    // Until the communicator's pending call is enqueued (non-blocking NCCL), at most timeout_s.
    void wait_async(const char* what) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config.timeout_s);
        for (;;) {
            ncclResult_t state = ncclSuccess;
            ncclResult_t r = ncclCommGetAsyncError(comm, &state);
            if (r != ncclSuccess) fail(what, r, "ncclCommGetAsyncError failed");
            if (state == ncclSuccess) return;
            if (state != ncclInProgress) fail(what, state);
            if (std::chrono::steady_clock::now() > deadline) fail(what, ncclSystemError, timeout_message());
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    // Until the stream has run the collective just issued, at most timeout_s: a rank that never
    // joins it makes this throw instead of hanging.
    void wait_stream(cudaStream_t stream, const char* what) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config.timeout_s);
        for (;;) {
            cudaError_t q = cudaStreamQuery(stream);
            if (q == cudaSuccess) return;
            if (q != cudaErrorNotReady) cudaCheck(q);
            ncclResult_t state = ncclSuccess;
            ncclCommGetAsyncError(comm, &state);
            if (state != ncclSuccess && state != ncclInProgress) fail(what, state);
            if (std::chrono::steady_clock::now() > deadline) fail(what, ncclSystemError, timeout_message());
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    std::string timeout_message() const {
        char secs[32];
        snprintf(secs, sizeof secs, "%g", config.timeout_s);
        return std::string("timed out after ") + secs + " s (a rank died or stopped calling collectives; "
               "DIST_TIMEOUT_S sets the wait)";
    }
};
