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
//     dist.update(model, {.lr = lr, ..., .grad_scale = grad_scale, .step = step});
//     float mean_loss = dist.average(loss);   // for the log
//   checkpoint (every rank): dist.optimizer_shard(model) -> its own optimizer file;
//     dist.gather_params(model, params) -> rank 0 writes the model file (runtime/checkpoint.h)
//   resume: model.set_params(params, step); dist.attach(...); dist.restore_optimizer(model, shard, step)
//   dist.finish();
//
// Environment (dist_config_from_env): the rank, world size and local rank from any launcher,
//   RANK, WORLD_SIZE, LOCAL_RANK (+ LOCAL_WORLD_SIZE)   scripts/launch.sh, torchrun
//   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (+ _LOCAL_SIZE)  Open MPI's mpirun
//   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (+ MPI_LOCALNRANKS)   MPICH's mpiexec (hydra)
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID                 srun
//   (several sets may be given if they agree; no MPI library is linked: mpirun only starts the
//   processes), and
//   DIST_RUN_ID   names this run's rendezvous file; required when WORLD_SIZE > 1, except where the
//                 launcher gives one (dist_default_run_id: torchrun's TORCHELASTIC_RUN_ID, Open
//                 MPI's PMIx namespace, Slurm's job and step, one node's launcher process);
//                 scripts/launch.sh makes a fresh one per launch
//   DIST_ID_DIR   a directory every rank can read (default /tmp: one node; a shared file system
//                 across nodes)
//   DIST_RENDEZVOUS  tcp://HOST:PORT (or HOST:PORT): rank 0 serves the id on PORT of HOST instead
//                 of writing the file (nodes without a shared file system). Under torchrun over
//                 several nodes it defaults to MASTER_ADDR:MASTER_PORT (MASTER_PORT + 1 where
//                 torchrun's agent keeps its own store on MASTER_PORT). Ranks on several nodes (a
//                 launcher's local size below the world size) without either are refused: a file
//                 in one node's /tmp cannot reach the others.
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
#include <cctype>
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
#include "runtime/nccl_common.cuh"
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
    std::string launcher;    // whose variables gave the rank ("" for one process), as printed
    std::string rendezvous_from;  // where the rendezvous endpoint came from, when not DIST_RENDEZVOUS
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
                   "value on every rank (scripts/launch.sh does; mpirun -x DIST_RUN_ID=ID, mpiexec -genv "
                   "DIST_RUN_ID ID), or run under Slurm (SLURM_JOB_ID), torchrun or Open MPI";
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

// The variables a launcher gives each process: its rank, the world size, its local rank (its GPU)
// and, where the launcher says it, the number of ranks on its node. Any of these sets may be given,
// several if they agree.
struct DistLauncher {
    const char* who;  // as printed
    const char *rank, *world, *local, *local_size;  // local_size: null where the launcher has none
};
inline const DistLauncher DIST_LAUNCHERS[] = {
    {"torchrun or scripts/launch.sh", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI's mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH's mpiexec", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

// One launcher's values as found in the environment.
struct DistLaunch {
    const DistLauncher* vars = nullptr;
    int rank = 0, world = 1, local = 0, local_size = 0;
    bool has_local = false, has_local_size = false;
    std::string names() const {
        return std::string(vars->rank) + "/" + vars->world + "/" + vars->local;
    }
    std::string values() const {
        return std::to_string(rank) + "/" + std::to_string(world) + "/" + (has_local ? std::to_string(local) : "-");
    }
};

// The launchers whose variables are set, each checked whole; those that disagree are refused.
inline std::vector<DistLaunch> dist_launches_from_env() {
    std::vector<DistLaunch> found;
    for (const DistLauncher& v : DIST_LAUNCHERS) {
        DistLaunch l;
        l.vars = &v;
        bool has_rank = dist_env_int(v.rank, &l.rank), has_world = dist_env_int(v.world, &l.world);
        l.has_local = dist_env_int(v.local, &l.local);
        l.has_local_size = v.local_size != nullptr && dist_env_int(v.local_size, &l.local_size);
        if (!has_rank && !has_world && !l.has_local) continue;
        if (!has_rank || !has_world)
            throw std::runtime_error(std::string("environment: ") + v.rank + ", " + v.world + " and " + v.local +
                                     " go together (set all three, or none for one process); " + v.who + " sets them");
        found.push_back(l);
    }
    const DistLaunch* with_local = nullptr;
    for (const DistLaunch& l : found)
        if (l.has_local) { with_local = &l; break; }
    if (!found.empty() && with_local == nullptr)
        throw std::runtime_error(std::string("environment: ") + found[0].vars->rank + ", " + found[0].vars->world +
                                 " and " + found[0].vars->local + " go together (set all three, or none for one "
                                 "process); " + found[0].vars->who + " sets them");
    for (const DistLaunch& l : found) {
        const DistLaunch& a = *with_local;
        bool agree = l.rank == a.rank && l.world == a.world && (!l.has_local || l.local == a.local) &&
                     (!l.has_local_size || !a.has_local_size || l.local_size == a.local_size);
        if (!agree)
            throw std::runtime_error("environment: " + a.names() + " = " + a.values() + " (" + a.vars->who +
                                     ") disagree with " + l.names() + " = " + l.values() + " (" + l.vars->who +
                                     "): unset one set");
    }
    return found;
}

// s with every character outside [A-Za-z0-9._-] replaced by '_', at most 100 characters (a run id)
inline std::string dist_run_id_text(const std::string& s) {
    std::string out = s.substr(0, 100);
    for (char& ch : out)
        if (!isalnum((unsigned char)ch) && ch != '.' && ch != '_' && ch != '-') ch = '_';
    return out;
}

inline std::string dist_env(const char* name) {
    const char* v = getenv(name);
    return v != nullptr ? v : "";
}

// The run id when DIST_RUN_ID is not set: one every rank of this launch shares and an earlier
// launch did not have. torchrun: its run id and restart count, and on one node its agent (the
// ranks' parent) and port; Open MPI: its job's PMIx namespace; one node of mpirun or mpiexec: the
// launcher's process on the node (the ranks' parent); Slurm: the job and step. "" where there is
// none (the config then asks for DIST_RUN_ID).
inline std::string dist_default_run_id(const std::vector<DistLaunch>& launches, bool one_node) {
    auto launched_by = [&](const char* rank_var) {
        for (const DistLaunch& l : launches)
            if (strcmp(l.vars->rank, rank_var) == 0) return true;
        return false;
    };
    std::string parent = std::to_string((long long)getppid());
    if (launched_by("RANK") && !dist_env("TORCHELASTIC_RUN_ID").empty()) {
        std::string id = "torchrun_" + dist_env("TORCHELASTIC_RUN_ID") + "_" + dist_env("TORCHELASTIC_RESTART_COUNT");
        if (one_node) id += "_" + dist_env("MASTER_PORT") + "_" + parent;
        return dist_run_id_text(id);
    }
    if (launched_by("OMPI_COMM_WORLD_RANK")) {
        for (const char* job : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
            if (!dist_env(job).empty()) return dist_run_id_text("mpirun_" + dist_env(job));
        if (one_node) return "mpirun_" + parent;
    }
    if (launched_by("PMI_RANK") && one_node) return "mpiexec_" + parent;
    std::string job = dist_env("SLURM_JOB_ID");
    if (!job.empty()) {
        std::string step = dist_env("SLURM_STEP_ID");
        return "slurm" + job + "." + (step.empty() ? "0" : step);
    }
    return "";
}

// The config from the environment (see the top of this file); a process with none of it is rank 0
// of 1. Throws std::runtime_error on missing or inconsistent values.
inline DistConfig dist_config_from_env() {
    DistConfig c;
    std::vector<DistLaunch> launches = dist_launches_from_env();
    int node_ranks = 0;  // ranks on this node, where a launcher says (0: unknown)
    for (const DistLaunch& l : launches) {
        if (l.has_local) c.local_rank = l.local;
        if (l.has_local_size) node_ranks = l.local_size;
        c.rank = l.rank, c.world = l.world;
    }
    if (!launches.empty()) c.launcher = launches[0].vars->who;
    for (const DistLaunch& l : launches)
        if (l.has_local_size) c.launcher = l.vars->who;
    bool several_nodes = node_ranks > 0 && node_ranks < c.world;
    bool torchrun = !dist_env("TORCHELASTIC_RUN_ID").empty();
    if (torchrun) c.launcher = "torchrun";
    c.run_id = dist_env("DIST_RUN_ID");
    if (c.run_id.empty()) c.run_id = dist_default_run_id(launches, node_ranks > 0 && !several_nodes);
    const char* dir = getenv("DIST_ID_DIR");
    bool dir_given = dir != nullptr && *dir != '\0';
    if (dir_given) c.id_dir = dir;
    c.rendezvous = dist_env("DIST_RENDEZVOUS");
    if (c.rendezvous.empty() && torchrun && several_nodes && !dir_given) {
        // torchrun's rank 0 node: MASTER_ADDR; its static rendezvous (TORCHELASTIC_USE_AGENT_STORE=True)
        // keeps its agent's store on MASTER_PORT, so rank 0 serves the id on the port above it
        std::string addr = dist_env("MASTER_ADDR"), port_text = dist_env("MASTER_PORT");
        int port = 0;
        if (addr.empty() || !dist_env_int("MASTER_PORT", &port) || port < 1 || port > 65534)
            throw std::runtime_error("environment: torchrun over several nodes without MASTER_ADDR and MASTER_PORT "
                                     "(MASTER_ADDR='" + addr + "', MASTER_PORT='" + port_text + "'): set "
                                     "DIST_RENDEZVOUS=tcp://HOST:PORT (rank 0's node and a free port)");
        bool agent_store = dist_env("TORCHELASTIC_USE_AGENT_STORE") == "True";
        c.rendezvous = "tcp://" + addr + ":" + std::to_string(agent_store ? port + 1 : port);
        c.rendezvous_from = agent_store ? "torchrun's MASTER_ADDR, MASTER_PORT + 1 (its agent's store holds MASTER_PORT)"
                                        : "torchrun's MASTER_ADDR and MASTER_PORT";
    }
    if (several_nodes && c.rendezvous.empty() && !dir_given)
        throw std::runtime_error("environment: " + std::to_string(c.world) + " ranks on several nodes (" +
                                 std::to_string(node_ranks) + " on this one, " + c.launcher + "): the NCCL id cannot "
                                 "pass through a file in /tmp of one node; set DIST_RENDEZVOUS=tcp://HOST:PORT (rank "
                                 "0's node and a free port) or DIST_ID_DIR to a directory every node shares, on every "
                                 "rank (mpirun -x VAR=value, mpiexec -genv VAR value)");
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

    // AdamW (model.update's step). Under ZeRO-1: this rank's shard, then the bf16 weights of
    // every shard to every rank.
    void update(GPT2Cuda& model, const AdamWStep& s) {
        if (!zero1) {
            model.update(s);
            return;
        }
        model.update(s);  // this rank's shard
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
