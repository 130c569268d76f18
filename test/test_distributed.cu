// Data parallelism (runtime/distributed.h), rung 5 of the correctness ladder: 2 ranks with batch B
// each train like 1 rank with batch 2B on the same rows, with and without ZeRO-1, softmax and
// LSSAR; a dead rank makes the other fail instead of hanging; the rendezvous file; and
// scripts/launch.sh. Ranks are threads of this process, each on its own emulated device
// (cudaSetDevice(rank)) with its own GPT2Cuda, talking through the host NCCL
// (simt/nccl_host.h). Under nvcc the same file runs on a machine with 2 GPUs and real NCCL.
//
// What must match, and how closely. Every operation of the forward and backward works on one row
// of the batch at a time except the final reductions over rows of the parameter gradients (and
// the loss mean). So rank r's per-position losses are those of rows [rB, rB+B) of the 2B run,
// and its backward, whose loss scale 1/(BT) is twice the 2B run's 1/(2BT) (a power of two: exact
// in bf16), gives per-row gradients exactly twice as large. What differs is only where the row
// sums are rounded: the 2B run rounds each parameter's gradient sum g* once to bf16 (g1), while
// rank r rounds its half sum (gA, gB) and the all-reduce rounds their average (g2). With u = 2^-8,
// the relative error of a round to nearest bf16 (8 significant bits):
//     |g2 - g1| <= u (|g1| + |g2| + (|gA| + |gB|) / 2)                                    (*)
// and twice that for the fp32 sums in a different order and the tied wte, whose gradient is
// rounded twice (lm head, then encoder). Elements whose halves cancel (|gA| + |gB| >> |g*|) may
// differ by far more than u relative, so (*) is per element, not relative to g*. A missing or
// wrong reduce (a rank keeping its own gradient, a sum instead of the mean, a wrong shard) is off
// by |gA - gB| / 2 or more, hundreds of u.
// After the first update the two runs' weights differ where a gradient was near its noise (AdamW's
// first step is lr sign(g): a noise-level g may flip it), so later steps are compared statistically
// (losses, and the weights' difference against their total change), with the first update compared
// exactly on the elements whose gradient is clear of (*).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "runtime/checkpoint.h"
#include "runtime/distributed.h"
#include "model/gpt2_cuda.cuh"
#include "test/tiny_gpt2_cuda.h"

constexpr double U_BF16 = 1.0 / 256;       // 2^-8: relative error of rounding to nearest bf16
constexpr double NOISE_FACTOR = 2;         // (*) times this: reordered fp32 sums, wte's two roundings
constexpr float LR = 1e-3f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f, WEIGHT_DECAY = 0.1f;
constexpr int STEPS = 3;
// What holds only under the emulator, whose host cuBLASLt sums every product in one fixed order:
// the 1-rank 2B run and each rank's B run compute a row's activations bit for bit alike. A GPU's
// cuBLASLt picks its kernel by shape (split-K and tile orders differ between 2B and B rows), so
// there each row's bf16 activations and gradient contributions may differ by bf16 roundings:
//   step-1 loss: within LOSS_RTOL_GPU relative (a few 2^-8 steps of the logits, averaged over
//   the 2BT positions; the mean loss of a random model is ~ln V)
//   gradients: the whole tensor's relative L2 difference within GRAD_RTOL_GPU (a few roundings; a
//   missing or wrong reduce is off by ~|gA - gB| / |gA + gB|, >= 30%), per element only reported
#if defined(__CUDACC__)
constexpr bool ROWS_BITWISE = false;
#else
constexpr bool ROWS_BITWISE = true;
#endif
constexpr double LOSS_RTOL_GPU = 2 * U_BF16;
constexpr double GRAD_RTOL_GPU = 8 * U_BF16;

// test/tiny_gpt2_cuda.h's model, as in test/test_model_cuda.cu
static GPT2Config tiny_config(AttnKind kind, float p) { return tiny_cuda_config(kind, p, 16); }

static std::string fresh_dir() {
    char templ[] = "/tmp/test_distributed_XXXXXX";
    char* dir = mkdtemp(templ);
    REQUIRE(dir != nullptr);
    return dir;
}

static std::string fresh_run_id() {
    static std::atomic<int> counter{0};
    return "test" + std::to_string((long)getpid()) + "_" + std::to_string(counter++);
}

// What one rank saw in a run of STEPS steps.
struct RankLog {
    std::string error;                      // an exception's message, or empty
    std::vector<float> losses;              // (STEPS) mean over all ranks' rows (dist.average)
    std::vector<double> norms;              // (STEPS) global gradient norm
    std::vector<float> local_grads;         // (N) step 1, this rank's gradient before the reduce
    std::vector<float> reduced_grads;       // (N) step 1, after the reduce (valid on [shard_begin, shard_end))
    size_t shard_begin = 0, shard_end = 0;
    std::vector<float> master_after_1;      // (N) fp32 weights after update 1 (gathered)
    std::vector<float> master_final;        // (N) after STEPS updates (gathered)
    std::vector<float> bf16_final;          // (N) the bf16 weights the kernels read
};

// world ranks, each with rows [r B, r B + B) of the step's world*B rows, from the same init.
static std::vector<RankLog> run_ranks(const GPT2Config& c, int world, int B, int T, bool zero1) {
    std::vector<RankLog> logs(world);
    std::string dir = fresh_dir(), run_id = fresh_run_id();
    auto rank_main = [&](int r) {
        RankLog& log = logs[r];
        try {
            DistConfig cfg;
            cfg.rank = r;
            cfg.world = world;
            cfg.local_rank = r;
            cfg.run_id = run_id;
            cfg.id_dir = dir;
            cfg.timeout_s = 60;
            Distributed dist;
            dist.init(cfg);
            GPT2Cuda model(c);
            model.init(1337);
            dist.attach(model, zero1);
            log.shard_begin = model.optimizer.begin;
            log.shard_end = model.optimizer.end;
            std::vector<int> inputs, targets;
            for (int step = 1; step <= STEPS; step++) {
                TokenBatch batch = make_token_batch(world * B, T, c.vocab_size, 100 + step);
                inputs = batch.inputs;
                targets = batch.targets;
                size_t row0 = (size_t)r * B * T;
                float loss = model.forward(inputs.data() + row0, targets.data() + row0, B, T);
                model.zero_grad();
                model.backward(1.0f);
                if (step == 1) log.local_grads = download_bf16(model.grads_memory, model.num_parameters);
                dist.reduce_grads(model);
                if (step == 1) log.reduced_grads = download_bf16(model.grads_memory, model.num_parameters);
                log.norms.push_back(dist.grad_norm(model));
                dist.update(model, {.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS,
                                    .weight_decay = WEIGHT_DECAY, .grad_scale = 1.0f, .step = step});
                log.losses.push_back(dist.average(loss));
                if (step == 1) dist.gather_params(model, log.master_after_1);
            }
            dist.gather_params(model, log.master_final);
            log.bf16_final = download_bf16(model.params_memory, model.num_parameters);
            dist.finish();
        } catch (const std::exception& e) {
            log.error = e.what();
        }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < world; r++) threads.emplace_back(rank_main, r);
    for (auto& t : threads) t.join();
    rmdir(dir.c_str());  // fails (and the check below says so) if the id file was left behind
    struct stat st;
    CHECK_MESSAGE(stat(dir.c_str(), &st) != 0, "the rendezvous file was not removed from " << dir);
    for (int r = 0; r < world; r++) REQUIRE_MESSAGE(logs[r].error.empty(), "rank " << r << ": " << logs[r].error);
    return logs;
}

static double rms(const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v * v;
    return std::sqrt(s / x.size());
}

// 2 ranks x B against 1 rank x 2B (the reference, run through Distributed with world 1).
static std::vector<RankLog> check_equivalence(AttnKind kind, float p, const std::vector<RankLog>& ref_logs, bool zero1) {
    auto start = std::chrono::steady_clock::now();
    GPT2Config c = tiny_config(kind, p);
    const int B = 2, T = 16;
    std::vector<RankLog> two = run_ranks(c, 2, B, T, zero1);
    const RankLog& one = ref_logs[0];
    size_t N = one.master_final.size();
    std::string name = std::string(attn_kind_name(kind)) + (zero1 ? ", ZeRO-1" : "");

    // 1. losses of step 1: the same rows through the same weights, per position bitwise alike
    // (emulated); the mean of means differs from the mean over 2B only by fp32 rounding of the
    // means (1e-6). On a GPU: LOSS_RTOL_GPU.
    INFO(name << ": step 1 loss, 1 rank " << one.losses[0] << ", 2 ranks " << two[0].losses[0]);
    CHECK(std::fabs(two[0].losses[0] - one.losses[0]) <= (ROWS_BITWISE ? 1e-6 : LOSS_RTOL_GPU) * one.losses[0]);
    CHECK(two[0].losses == two[1].losses);  // the average is the same on both ranks

    // 2. the reduce itself: rank r's reduced gradient on its part = the average of the two local
    // gradients, rounded once to bf16 (within one bf16 step, 2u relative: nearest here, NCCL's own
    // rounding on a GPU)
    std::vector<float> g2(N), gA = two[0].local_grads, gB = two[1].local_grads;
    size_t bad_reduce = 0;
    for (int r = 0; r < 2; r++) {
        for (size_t i = two[r].shard_begin; i < two[r].shard_end; i++) {
            double mean = 0.5 * ((double)gA[i] + gB[i]);
            g2[i] = two[r].reduced_grads[i];
            bad_reduce += std::fabs(g2[i] - mean) > 2 * U_BF16 * std::fabs(mean);
        }
    }
    if (zero1) {  // the shards cover the model
        CHECK(two[0].shard_begin == 0);
        CHECK(two[0].shard_end == two[1].shard_begin);
        CHECK(two[1].shard_end == N);
    }
    INFO(name << ": reduced gradient elements off the average of the ranks' gradients: " << bad_reduce);
    CHECK(bad_reduce == 0);

    // 3. the averaged gradient against the 2B run's, per element within (*) x NOISE_FACTOR;
    // and the global norm, by the triangle inequality within the norm of those bounds (+ fp32).
    // Except the rows of wte of the step's input tokens: the encoder backward adds its part to
    // the lm head's part already rounded to bf16, and that intermediate, which this test cannot
    // see, may be far larger than the sum (the two parts cancel), so its rounding is not bounded
    // by (*). Those rows are compared as a whole: relative L2 difference within 8u (a few
    // roundings of the row's own size; a missing reduce is off by ~|gA - gB| / |gA + gB|, >= 30%).
    const std::vector<float>& g1 = one.reduced_grads;
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(sizes, c);
    std::vector<char> input_row(c.padded_vocab_size, 0);
    {
        for (int tok : make_token_batch(2 * B, T, c.vocab_size, 101).inputs) input_row[tok] = 1;  // step 1's rows
    }
    std::vector<double> bound(N);
    size_t outside = 0, clear = 0;
    double worst = 0, wte_diff = 0, wte_ref = 0;
    for (size_t i = 0; i < N; i++) {
        bound[i] = NOISE_FACTOR * U_BF16 * (std::fabs(g1[i]) + std::fabs(g2[i]) + 0.5 * (std::fabs(gA[i]) + std::fabs(gB[i])));
        double d = std::fabs((double)g2[i] - g1[i]);
        if (i < sizes[P_WTE] && input_row[i / c.channels]) {  // wte is the first tensor, (Vp, C)
            wte_diff += d * d;
            wte_ref += (double)g1[i] * g1[i];
            bound[i] = 0;  // not clear of the noise for check 4
            continue;
        }
        if (d > bound[i]) outside++;
        if (bound[i] > 0) worst = std::max(worst, d / bound[i]);
    }
    INFO(name << ": gradient elements outside the bf16 bound: " << outside << " of " << N
              << ", largest difference / bound " << worst);
    if (ROWS_BITWISE) {
        CHECK(outside == 0);
    } else {
        double diff = 0, ref = 0;
        for (size_t i = 0; i < N; i++) {
            diff += ((double)g2[i] - g1[i]) * ((double)g2[i] - g1[i]);
            ref += (double)g1[i] * g1[i];
        }
        INFO(name << ": averaged gradient against the 2B run's, relative L2 difference " << std::sqrt(diff / ref));
        CHECK(std::sqrt(diff / ref) <= GRAD_RTOL_GPU);
    }
    double wte_rel = std::sqrt(wte_diff / wte_ref);
    INFO(name << ": wte rows of input tokens: relative L2 difference " << wte_rel);
    CHECK(wte_rel < 8 * U_BF16);
    double norm_bound = rms(bound) * std::sqrt((double)N) + std::sqrt(wte_diff);
    INFO(name << ": grad norm 1 rank " << one.norms[0] << ", 2 ranks " << two[0].norms[0] << ", bound " << norm_bound);
    // (on a GPU: |norm2 - norm1| <= |g2 - g1| <= GRAD_RTOL_GPU |g1|)
    CHECK(std::fabs(two[0].norms[0] - one.norms[0]) <=
          (ROWS_BITWISE ? norm_bound + 1e-5 * one.norms[0] : GRAD_RTOL_GPU * one.norms[0]));
    CHECK(two[0].norms == two[1].norms);

    // 4. update 1 on the elements whose gradient stands clear of (*): |g1| >= 10 x its bound and
    // >= 1e3 eps. AdamW's first step is lr (g / (|g| + eps) + wd p): for such g the two gradients
    // give steps within lr eps / |g| <= 1e-3 lr of each other (plus fp32 rounding of p, 1e-6 |p|).
    std::vector<float> p0;
    {
        GPT2Cuda fresh(c);
        fresh.init(1337);
        fresh.get_params(p0);
    }
    double worst_step = 0;
    for (size_t i = 0; i < N; i++) {
        if (bound[i] == 0 || std::fabs(g1[i]) < std::max(10 * bound[i], 1e3 * EPS)) continue;
        clear++;
        double d = std::fabs((double)two[0].master_after_1[i] - one.master_after_1[i]);
        worst_step = std::max(worst_step, d / (2e-3 * LR + 1e-6 * std::fabs(p0[i])));
    }
    INFO(name << ": update 1 compared on " << clear << " of " << N << " elements, largest difference / tolerance "
              << worst_step);
    CHECK(worst_step <= 1.0);
    CHECK(clear > N / 2);  // most gradients are clear of the bf16 noise

    // 5. the whole run. Ranks hold the same weights, bit for bit (the reduce gives both the same
    // gradient, or the all-gather the same shards). Against the 2B run: the weights moved by
    // ~STEPS lr; the difference comes from the few noise-level elements (< 1 - clear/N of them)
    // whose steps may flip, so its rms must stay well under the rms change: 0.25 of it. (Measured:
    // 0.017 softmax, 0.17 LSSAR p=15, whose weights amplify small differences; without the
    // gradient reduce, 0.83 and 0.90.)
    CHECK(two[0].bf16_final == two[1].bf16_final);
    CHECK(two[0].master_final == two[1].master_final);
    std::vector<double> change(N), gap(N);
    for (size_t i = 0; i < N; i++) {
        change[i] = (double)one.master_final[i] - p0[i];
        gap[i] = (double)two[0].master_final[i] - one.master_final[i];
    }
    double ratio = rms(gap) / rms(change);
    MESSAGE(name << ": after " << STEPS << " steps, rms weight difference / rms weight change " << ratio);
    CHECK(ratio < 0.25);
    // losses of the later steps: weights a fraction `ratio` of a step apart; the loss moves by
    // ~0.1 per step here, so 1e-2 relative is a wide bound that a diverged run still exceeds
    for (int s = 1; s < STEPS; s++) {
        INFO(name << ": step " << s + 1 << " loss, 1 rank " << one.losses[s] << ", 2 ranks " << two[0].losses[s]);
        CHECK(std::fabs(two[0].losses[s] - one.losses[s]) <= 1e-2 * one.losses[s]);
    }
    CHECK(one.losses[STEPS - 1] < one.losses[0] - 0.05f);  // training moved the loss
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE(name << ": 2-rank run and checks in " << seconds << " s");
    return two;
}

// Under nvcc the ranks need a GPU each (NCCL refuses two ranks on one device).
static bool have_devices(int n) {
    int count = 0;
    cudaCheck(cudaGetDeviceCount(&count));
    if (count >= n) return true;
    MESSAGE("skipped: needs " << n << " devices, " << count << " present");
    return false;
}

static void equivalence(AttnKind kind, float p) {
    if (!have_devices(2)) return;
    GPT2Config c = tiny_config(kind, p);
    std::vector<RankLog> one = run_ranks(c, 1, 4, 16, false);
    std::vector<RankLog> plain = check_equivalence(kind, p, one, false);
    std::vector<RankLog> zero1 = check_equivalence(kind, p, one, true);
    // ZeRO-1 against plain data parallelism: the host NCCL's reduce-scatter rounds each element
    // as its all-reduce does, so every shard's gradient, and so the fp32 master weights and
    // moments after update 1 (the same AdamW formula on the same values), are equal bit for bit.
    // (Only the bf16 weights may differ: a shard cut through a tensor seeds its stochastic
    // rounding from the cut; see GPT2Cuda::update_range.) On a GPU, NCCL's two collectives may
    // round differently, so there the master weights agree within the AdamW steps of update 1's
    // rounding noise, which the 1-rank comparison above already bounds.
    size_t N = one[0].master_final.size(), grad_mismatches = 0;
    for (int r = 0; r < 2; r++) {
        for (size_t i = zero1[r].shard_begin; i < zero1[r].shard_end; i++) {
            grad_mismatches += zero1[r].reduced_grads[i] != plain[r].reduced_grads[i];
        }
    }
#if !defined(__CUDACC__)
    CHECK(grad_mismatches == 0);
    CHECK(zero1[0].master_after_1 == plain[0].master_after_1);
#endif
    // the shard norms' sum against the whole norm: fp32 sums in another order, 1e-5 relative
    CHECK(std::fabs(zero1[0].norms[0] - plain[0].norms[0]) <= 1e-5 * plain[0].norms[0]);
    MESSAGE(std::string(attn_kind_name(kind)) << ": ZeRO-1 vs plain: " << grad_mismatches << " of " << N
                                 << " reduced gradient elements differ");
}

TEST_CASE("2 ranks x B == 1 rank x 2B, with and without ZeRO-1: softmax") { equivalence(ATTN_SOFTMAX, 0.0f); }
TEST_CASE("2 ranks x B == 1 rank x 2B, with and without ZeRO-1: lssar p=15") { equivalence(ATTN_LSSAR, 15.0f); }

// ----------------------------------------------------------------------------
// checkpoints of a data-parallel run: every rank its optimizer shard, rank 0 the model file

// One training step of rank r of world on its rows of the step's batch (as run_ranks); with
// overlap, the gradients are all-reduced layer by layer during the backward.
static void train_step(Distributed& dist, GPT2Cuda& model, const GPT2Config& c, int r, int world, int B, int T,
                       int step, bool overlap) {
    TokenBatch batch = make_token_batch(world * B, T, c.vocab_size, 100 + step);
    size_t row0 = (size_t)r * B * T;
    model.forward(batch.inputs.data() + row0, batch.targets.data() + row0, B, T);
    model.zero_grad();
    if (overlap) dist.overlap_reduce(model);
    model.backward(1.0f);
    dist.reduce_grads(model);
    dist.grad_norm(model);
    dist.update(model, {.lr = LR, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .weight_decay = WEIGHT_DECAY,
                        .grad_scale = 1.0f, .step = step});
}

// world ranks train STEPS steps; with save_at > 0 they checkpoint after step save_at as the
// trainer does, drop their models and communicators, and resume from the files on fresh ones.
static std::vector<RankLog> run_with_checkpoint(const GPT2Config& c, int world, bool zero1, int save_at,
                                                bool overlap = false, bool communicator_for_one = false) {
    const int B = 2, T = 16;
    std::vector<RankLog> logs(world);
    std::string dir = fresh_dir(), run_ids[2] = {fresh_run_id(), fresh_run_id()};
    auto rank_main = [&](int r) {
        RankLog& log = logs[r];
        try {
            DistConfig cfg;
            cfg.rank = cfg.local_rank = r;
            cfg.world = world;
            cfg.id_dir = dir;
            cfg.timeout_s = 60;
            cfg.run_id = run_ids[0];
            cfg.communicator_for_one = communicator_for_one;
            auto dist = std::make_unique<Distributed>();
            dist->init(cfg);
            auto model = std::make_unique<GPT2Cuda>(c);
            model->init(1337);
            dist->attach(*model, zero1);
            if (zero1 && world > 1) {  // the optimizer state of this rank's shard only
                CHECK(model->optimizer.slot == model->shard_size);
                CHECK(model->shard_size < model->num_parameters / 2 + 8);
                std::vector<float> whole;
                CHECK_THROWS_AS(model->get_params(whole), std::logic_error);
            }
            int first_steps = save_at > 0 ? save_at : STEPS;
            for (int step = 1; step <= first_steps; step++) train_step(*dist, *model, c, r, world, B, T, step, overlap);
            if (save_at > 0) {
                OptimizerShard shard = dist->optimizer_shard(*model);
                shard.step = save_at;
                optimizer_shard_write(optimizer_shard_path(dir, save_at, r, world), shard);
                std::vector<float> params;
                dist->gather_params(*model, params);
                if (r == 0) {
                    Checkpoint ck;
                    ck.config = c;
                    ck.world_size = world;
                    ck.train.step = save_at;
                    ck.params = params;
                    checkpoint_write(checkpoint_path(dir, save_at), ck);
                }
                dist->average(0.0f);  // the model file is written before anyone reads it
                dist.reset();
                model.reset();
                // resume, as train_gpt2.cu's setup() does
                cfg.run_id = run_ids[1];
                dist = std::make_unique<Distributed>();
                dist->init(cfg);
                model = std::make_unique<GPT2Cuda>(c);
                Checkpoint ck;
                checkpoint_read(checkpoint_path(dir, save_at), ck);
                REQUIRE(ck.world_size == world);
                model->set_params(ck.params, save_at);
                dist->attach(*model, zero1);
                OptimizerShard mine;
                optimizer_shard_read(optimizer_shard_path(dir, save_at, r, world), mine, save_at, r, world,
                                     model->num_parameters);
                dist->restore_optimizer(*model, mine, save_at);
                for (int step = save_at + 1; step <= STEPS; step++) train_step(*dist, *model, c, r, world, B, T, step, overlap);
            }
            dist->gather_params(*model, log.master_final);
            log.bf16_final = download_bf16(model->params_memory, model->num_parameters);
            dist->finish();
        } catch (const std::exception& e) {
            log.error = e.what();
        }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < world; r++) threads.emplace_back(rank_main, r);
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < world; r++) REQUIRE_MESSAGE(logs[r].error.empty(), "rank " << r << ": " << logs[r].error);
    std::string cleanup = "rm -rf " + dir;
    CHECK(system(cleanup.c_str()) == 0);
    return logs;
}

// One rank through a communicator of its own (NCCL with one rank: every collective, the overlap
// and ZeRO-1's calls run, and average nothing) trains as without one. On one GPU this is how the
// real NCCL build is exercised (two ranks need two GPUs). The emulator compares bit for bit (one
// emulator thread: a fixed order of the attention backward's fp32 atomics); a GPU's atomics vary
// from run to run, so there the weights must agree within a small part of how far they moved.
TEST_CASE("one rank with a one-rank NCCL communicator trains as without one (plain, overlapped, ZeRO-1)") {
#if !defined(__CUDACC__)
    simt::set_block_threads(1);
#endif
    GPT2Config c = tiny_config(ATTN_LSSAR, 15.0f);
    std::vector<RankLog> alone = run_with_checkpoint(c, 1, false, 0);
    std::vector<float> init(alone[0].master_final.size());
    gpt2_init_params(init.data(), c, 1337);
    for (int mode = 0; mode < 3; mode++) {  // 0 plain, 1 overlapped all-reduce, 2 ZeRO-1 (one shard)
        CAPTURE(mode);
        std::vector<RankLog> with = run_with_checkpoint(c, 1, mode == 2, 2, mode == 1, true);
#if !defined(__CUDACC__)
        CHECK(with[0].master_final == alone[0].master_final);
        CHECK(with[0].bf16_final == alone[0].bf16_final);
#else
        double diff = 0, moved = 0;
        for (size_t i = 0; i < init.size(); i++) {
            diff += std::pow((double)with[0].master_final[i] - alone[0].master_final[i], 2);
            moved += std::pow((double)alone[0].master_final[i] - init[i], 2);
        }
        MESSAGE("one-rank communicator, mode " << mode << ": weight difference / change " << std::sqrt(diff / moved));
        CHECK(std::sqrt(diff / moved) < 0.25);  // test_distributed's bound for reordered roundings
#endif
    }
#if !defined(__CUDACC__)
    simt::set_block_threads(0);
#endif
}

#if !defined(__CUDACC__)
// Bit for bit needs a fixed order of the attention backward's fp32 atomics: one emulator thread
// per kernel. (On a GPU the atomics' order varies from run to run.)
TEST_CASE("2 ranks resume from their own optimizer shards bit for bit, with and without ZeRO-1") {
    simt::set_block_threads(1);
    GPT2Config c = tiny_config(ATTN_LSSAR, 15.0f);
    for (bool zero1 : {false, true}) {
        CAPTURE(zero1);
        std::vector<RankLog> straight = run_with_checkpoint(c, 2, zero1, 0);
        std::vector<RankLog> resumed = run_with_checkpoint(c, 2, zero1, 2);
        for (int r = 0; r < 2; r++) {
            CHECK(resumed[r].master_final == straight[r].master_final);
            CHECK(resumed[r].bf16_final == straight[r].bf16_final);
        }
        CHECK(straight[0].master_final == straight[1].master_final);
    }
    simt::set_block_threads(0);
}

// Each element's average is the same whether its layer is reduced alone during the backward or
// the whole buffer after it. (The overlap hook is called: without it the gradients would not be
// averaged at all, and the weights would differ between the ranks.)
TEST_CASE("the all-reduce overlapped with the backward gives the same weights bit for bit") {
    simt::set_block_threads(1);
    GPT2Config c = tiny_config(ATTN_SOFTMAX, 0.0f);
    std::vector<RankLog> after = run_with_checkpoint(c, 2, false, 0, false);
    std::vector<RankLog> during = run_with_checkpoint(c, 2, false, 0, true);
    for (int r = 0; r < 2; r++) {
        CHECK(during[r].master_final == after[r].master_final);
        CHECK(during[r].bf16_final == after[r].bf16_final);
    }
    CHECK(during[0].master_final == during[1].master_final);
    simt::set_block_threads(0);
}
#endif

TEST_CASE("a rank that stops calling collectives makes the other fail, not hang") {
#if !defined(__CUDACC__)
    setenv("SIMT_NCCL_TIMEOUT_S", "1", 1);  // the host NCCL's own wait (before the rank threads start)
#endif
    if (!have_devices(2)) return;
    GPT2Config c = tiny_config(ATTN_SOFTMAX, 0.0f);
    std::string dir = fresh_dir(), run_id = fresh_run_id();
    std::string error0;
    double seconds0 = 0;
    std::atomic<bool> rank1_done{false};
    auto rank_main = [&](int r) {
        DistConfig cfg;
        cfg.rank = r;
        cfg.world = 2;
        cfg.local_rank = r;
        cfg.run_id = run_id;
        cfg.id_dir = dir;
        cfg.timeout_s = 1;
        Distributed dist;
        dist.init(cfg);
        if (r == 1) {  // dies after joining: never reaches the gradient reduce
            rank1_done = true;
            return;
        }
        GPT2Cuda model(c);
        model.init(1);
        std::vector<int> tokens(16, 3);
        model.forward(tokens.data(), tokens.data(), 1, 16);
        model.zero_grad();
        model.backward(1.0f);
        auto start = std::chrono::steady_clock::now();
        try {
            dist.reduce_grads(model);
        } catch (const std::exception& e) {
            error0 = e.what();
        }
        seconds0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::thread t0(rank_main, 0), t1(rank_main, 1);
    t0.join();
    t1.join();
#if !defined(__CUDACC__)
    unsetenv("SIMT_NCCL_TIMEOUT_S");
#endif
    rmdir(dir.c_str());
    MESSAGE("rank 0 gave up after " << seconds0 << " s: " << error0);
    CHECK(rank1_done);
    CHECK(error0.find("rank 0 of 2") != std::string::npos);
    CHECK(error0.find("AllReduce") != std::string::npos);
    CHECK(error0.find("timed out") != std::string::npos);
    CHECK(seconds0 < 10);  // the timeout is 1 s; a hang would never return
}

// ----------------------------------------------------------------------------
// rendezvous

static DistConfig rendezvous_config(int rank, const std::string& dir, const std::string& run_id, double timeout) {
    DistConfig c;
    c.rank = rank;
    c.world = 2;
    c.local_rank = rank;
    c.run_id = run_id;
    c.id_dir = dir;
    c.timeout_s = timeout;
    return c;
}

static std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "no error";
}

// Two ranks form their communicator through the given rendezvous (runtime/rendezvous.h, tested on
// its own in test/test_rendezvous.cpp) and average a value; a file of an earlier run (another run
// id) lies in the directory and must not be read.
static void check_two_ranks_meet(const std::string& endpoint) {
    if (!have_devices(2)) return;
    std::string dir = fresh_dir(), run_id = fresh_run_id(), stale_id = fresh_run_id();
    RendezvousId stale;
    memset(stale.bytes, 0x5a, sizeof stale.bytes);
    rendezvous_file_write(dir, RendezvousRun{0, 2, stale_id, 1}, stale);
    std::string errors[2];
    std::thread ranks[2];
    for (int r = 0; r < 2; r++) {
        ranks[r] = std::thread([&, r] {
            errors[r] = error_of([&] {
                DistConfig c = rendezvous_config(r, dir, run_id, 10);
                c.rendezvous = endpoint;
                Distributed dist;
                dist.init(c);
                CHECK(dist.average(r == 0 ? 1.0f : 3.0f) == 2.0f);
            });
        });
    }
    for (auto& t : ranks) t.join();
    CHECK(errors[0] == "no error");
    CHECK(errors[1] == "no error");
    rendezvous_file_remove(dir, RendezvousRun{0, 2, stale_id, 1});
    CHECK(rmdir(dir.c_str()) == 0);  // this run's file was removed, and no temporary file was left
}

TEST_CASE("rendezvous: two ranks meet through the directory, or over TCP (DIST_RENDEZVOUS)") {
    check_two_ranks_meet("");
    int port = rendezvous_tcp_port(rendezvous_tcp_listen(0));  // a port that was just free
    check_two_ranks_meet("tcp://127.0.0.1:" + std::to_string(port));
}

TEST_CASE("config from the environment: torchrun/launch.sh and Slurm names, errors") {
    const char* names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                           "SLURM_JOB_ID", "SLURM_STEP_ID", "DIST_RUN_ID", "DIST_ID_DIR", "DIST_TIMEOUT_S",
                           "DIST_RENDEZVOUS"};
    auto clear = [&] { for (const char* n : names) unsetenv(n); };
    clear();
    DistConfig c = dist_config_from_env();
    CHECK(c.rank == 0);
    CHECK(c.world == 1);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "3", 1);
    setenv("DIST_RUN_ID", "run42", 1);
    setenv("DIST_ID_DIR", "/shared", 1);
    c = dist_config_from_env();
    CHECK(c.rank == 3);
    CHECK(c.world == 8);
    CHECK(c.local_rank == 3);
    CHECK(c.run_id == "run42");
    CHECK(c.id_dir == "/shared");
    setenv("SLURM_PROCID", "4", 1);  // disagrees with RANK
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "3", 1);
    CHECK(error_of([] { dist_config_from_env(); }).find("disagree") != std::string::npos);
    clear();
    setenv("SLURM_PROCID", "9", 1);
    setenv("SLURM_NTASKS", "16", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_JOB_ID", "777", 1);
    c = dist_config_from_env();
    CHECK(c.rank == 9);
    CHECK(c.world == 16);
    CHECK(c.local_rank == 1);
    CHECK(c.run_id == "slurm777.0");
    clear();
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("DIST_RUN_ID", "x", 1);
    CHECK(error_of([] { dist_config_from_env(); }).find("rank 2 is not in [0, world size 2)") != std::string::npos);
    setenv("RANK", "1", 1);
    unsetenv("DIST_RUN_ID");
    CHECK(error_of([] { dist_config_from_env(); }).find("DIST_RUN_ID") != std::string::npos);
    setenv("DIST_RUN_ID", "../etc", 1);
    CHECK(error_of([] { dist_config_from_env(); }).find("[A-Za-z0-9._-]") != std::string::npos);
    setenv("DIST_RUN_ID", "ok", 1);
    setenv("WORLD_SIZE", "two", 1);
    CHECK(error_of([] { dist_config_from_env(); }).find("WORLD_SIZE='two'") != std::string::npos);
    setenv("WORLD_SIZE", "2", 1);
    setenv("DIST_RENDEZVOUS", "tcp://node01:29500", 1);
    c = dist_config_from_env();
    CHECK(c.rendezvous == "tcp://node01:29500");
    setenv("DIST_RENDEZVOUS", "node01", 1);  // no port: refused before anything starts
    CHECK(error_of([] { dist_config_from_env(); }).find("node01") != std::string::npos);
    unsetenv("DIST_RENDEZVOUS");
    unsetenv("WORLD_SIZE");
    CHECK(error_of([] { dist_config_from_env(); }).find("go together") != std::string::npos);
    clear();
}

TEST_CASE("config from the environment: Open MPI's mpirun, MPICH's mpiexec and torchrun") {
    const char* names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                           "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", "DIST_RUN_ID", "DIST_ID_DIR",
                           "DIST_TIMEOUT_S", "DIST_RENDEZVOUS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE",
                           "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_RANK", "PMI_SIZE",
                           "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                           "TORCHELASTIC_USE_AGENT_STORE", "MASTER_ADDR", "MASTER_PORT"};
    auto clear = [&] { for (const char* n : names) unsetenv(n); };
    auto set = [](std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (auto& v : vars) setenv(v.first, v.second, 1);
    };
    const std::string parent = std::to_string((long long)getppid());
    clear();
    SUBCASE("Open MPI on one node: the ranks' parent (mpirun) names the run, or the job's PMIx namespace") {
        set({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
        DistConfig c = dist_config_from_env();
        CHECK(c.rank == 1);
        CHECK(c.world == 4);
        CHECK(c.local_rank == 1);
        CHECK(c.launcher == "Open MPI's mpirun");
        CHECK(c.run_id == "mpirun_" + parent);
        CHECK(c.rendezvous.empty());
        CHECK(c.id_dir == "/tmp");
        setenv("PMIX_NAMESPACE", "prterun-node0-4242@1", 1);
        CHECK(dist_config_from_env().run_id == "mpirun_prterun-node0-4242_1");
        setenv("DIST_RUN_ID", "mine", 1);
        CHECK(dist_config_from_env().run_id == "mine");
        setenv("RANK", "2", 1);  // another launcher's set must agree
        setenv("WORLD_SIZE", "4", 1);
        setenv("LOCAL_RANK", "1", 1);
        std::string err = error_of([] { dist_config_from_env(); });
        CHECK(err.find("disagree") != std::string::npos);
        CHECK(err.find("OMPI_COMM_WORLD_RANK") != std::string::npos);
        setenv("RANK", "1", 1);
        CHECK(dist_config_from_env().rank == 1);
        unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");  // RANK's set gives the local rank
        CHECK(dist_config_from_env().local_rank == 1);
        unsetenv("RANK"), unsetenv("WORLD_SIZE"), unsetenv("LOCAL_RANK");
        CHECK(error_of([] { dist_config_from_env(); }).find("go together") != std::string::npos);
    }
    SUBCASE("ranks on several nodes need DIST_RENDEZVOUS or DIST_ID_DIR, and a run id every node knows") {
        set({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"PMIX_NAMESPACE", "job7"}});
        std::string err = error_of([] { dist_config_from_env(); });
        CHECK(err.find("several nodes") != std::string::npos);
        CHECK(err.find("DIST_RENDEZVOUS") != std::string::npos);
        CHECK(err.find("DIST_ID_DIR") != std::string::npos);
        setenv("DIST_RENDEZVOUS", "tcp://node0:29500", 1);
        DistConfig c = dist_config_from_env();
        CHECK(c.rendezvous == "tcp://node0:29500");
        CHECK(c.run_id == "mpirun_job7");
        unsetenv("DIST_RENDEZVOUS");
        setenv("DIST_ID_DIR", "/shared", 1);
        CHECK(dist_config_from_env().id_dir == "/shared");
        unsetenv("PMIX_NAMESPACE");  // no job id and not one node: only DIST_RUN_ID names the run
        CHECK(error_of([] { dist_config_from_env(); }).find("DIST_RUN_ID") != std::string::npos);
    }
    SUBCASE("MPICH's mpiexec: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID; srun's PMI without a local rank") {
        set({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}});
        DistConfig c = dist_config_from_env();
        CHECK(c.rank == 2);
        CHECK(c.world == 3);
        CHECK(c.local_rank == 2);
        CHECK(c.run_id == "mpiexec_" + parent);
        unsetenv("MPI_LOCALRANKID");
        CHECK(error_of([] { dist_config_from_env(); }).find("MPI_LOCALRANKID go together") != std::string::npos);
        set({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "55"}});
        unsetenv("MPI_LOCALNRANKS");
        c = dist_config_from_env();
        CHECK(c.local_rank == 0);
        CHECK(c.run_id == "slurm55.0");
    }
    SUBCASE("torchrun: one node meets through the file; several nodes over MASTER_ADDR:MASTER_PORT") {
        set({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
             {"TORCHELASTIC_RUN_ID", "none"}, {"TORCHELASTIC_RESTART_COUNT", "0"},
             {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
        DistConfig c = dist_config_from_env();
        CHECK(c.launcher == "torchrun");
        CHECK(c.rendezvous.empty());
        CHECK(c.run_id == "torchrun_none_0_29500_" + parent);
        set({{"RANK", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}});  // 2 nodes of 1
        c = dist_config_from_env();
        CHECK(c.local_rank == 0);
        CHECK(c.rendezvous == "tcp://node0:29501");  // the agent's store holds MASTER_PORT
        CHECK(c.rendezvous_from.find("MASTER_PORT + 1") != std::string::npos);
        CHECK(c.run_id == "torchrun_none_0");
        setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);  // c10d rendezvous: MASTER_PORT is free
        CHECK(dist_config_from_env().rendezvous == "tcp://node0:29500");
        setenv("DIST_RENDEZVOUS", "tcp://elsewhere:1234", 1);
        CHECK(dist_config_from_env().rendezvous == "tcp://elsewhere:1234");
        unsetenv("DIST_RENDEZVOUS");
        unsetenv("MASTER_ADDR");
        CHECK(error_of([] { dist_config_from_env(); }).find("MASTER_ADDR") != std::string::npos);
    }
    clear();
}

// ----------------------------------------------------------------------------
// scripts/launch.sh

static int run_shell(const std::string& command, std::string& output) {
    std::string log = "/tmp/test_distributed_launch_" + std::to_string((long)getpid()) + ".log";
    int status = system((command + " > " + log + " 2>&1").c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    output = ss.str();
    remove(log.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("scripts/launch.sh: N ranks with RANK/WORLD_SIZE/LOCAL_RANK and one run id, output prefixed") {
    std::string out;
    int rc = run_shell("bash scripts/launch.sh -n 2 bash -c 'echo \"hello $RANK of $WORLD_SIZE local $LOCAL_RANK "
                       "run $DIST_RUN_ID\"; echo second line'", out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(out.find("[rank 0] hello 0 of 2 local 0 run ") != std::string::npos);
    CHECK(out.find("[rank 1] hello 1 of 2 local 1 run ") != std::string::npos);
    CHECK(out.find("[rank 0] second line") != std::string::npos);
    CHECK(out.find("[rank 1] second line") != std::string::npos);
    // both ranks got the same, non-empty run id
    auto id_of = [&](const std::string& prefix) {
        size_t at = out.find(prefix);
        if (at == std::string::npos) return std::string("?");
        size_t from = out.find(" run ", at) + 5;
        return out.substr(from, out.find('\n', from) - from);
    };
    CHECK(id_of("[rank 0] hello") == id_of("[rank 1] hello"));
    CHECK(id_of("[rank 0] hello").size() > 4);
    // a second launch draws another run id
    std::string out2;
    run_shell("bash scripts/launch.sh -n 2 bash -c 'echo \"id $DIST_RUN_ID\"'", out2);
    CHECK(out2.find(id_of("[rank 0] hello")) == std::string::npos);
}

TEST_CASE("scripts/launch.sh: a rank that fails stops the others and the launch exits non-zero") {
    std::string out;
    auto start = std::chrono::steady_clock::now();
    int rc = run_shell("bash scripts/launch.sh -n 2 bash -c 'if [ $RANK = 1 ]; then echo dying; exit 3; fi; "
                       "sleep 30; echo survived'", out);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(out);
    CHECK(rc == 3);  // the failing rank's exit code
    CHECK(out.find("[rank 1] dying") != std::string::npos);
    CHECK(out.find("survived") == std::string::npos);
    CHECK(out.find("rank 1 exited with 3") != std::string::npos);
    CHECK(seconds < 20);
    // bad use: a clear message, exit 2
    CHECK(run_shell("bash scripts/launch.sh -n 0 true", out) == 2);
    CHECK(out.find("-n") != std::string::npos);
    CHECK(run_shell("bash scripts/launch.sh -n 2", out) == 2);
}
