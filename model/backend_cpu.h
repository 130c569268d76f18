// The CPU back end of the trainer: GPT2<float> (model/gpt2_cpu.h) behind the back-end
// interface that train_gpt2.cu and eval/ are written against. The CUDA back end
// (model/gpt2_cuda.cuh) provides the same members, so the trainer is one source for both.
//
// Back-end interface (duck-typed; every back end provides exactly these):
//   explicit Model(const GPT2Config&)          throws std::invalid_argument naming the bad field
//   GPT2Config config; size_t num_parameters;
//   void init(uint64_t seed);                   GPT-2 initialisation
//   float forward(const int* inputs, const int* targets, int B, int T, bool backward_follows = false);
//                                               host token ids (B,T); mean loss, or -1 without targets;
//                                               backward_follows: a backward comes next, so the
//                                               classifier may write the dlogits in the forward's pass
//                                               (on CUDA, logits_row is then unavailable)
//   void logits_row(int b, int t, float* out);  logits (Vp) at (b,t) of the last forward
//   void losses(float* out);                    per-position losses (B*T) of the last forward
//   void zero_grad();
//   void backward(float loss_scale);            accumulates the gradient of loss_scale * mean loss
//   double grad_norm();                         global L2 norm of the gradients
//   void update(const AdamWStep& s);            grads *= s.grad_scale, then AdamW step s.step (1-based);
//                                               weight decay on the matrices only; the hyperparameters
//                                               (layers/adamw_step.h) read as float
//   void get_params(std::vector<float>&); void set_params(const std::vector<float>&);
//   void set_params(const std::vector<float>&, int last_update_step);   (resume: the weights as that step left them)
//                                               fp32 (master) weights, layout of model/gpt2_config.h
//   void get_optimizer(std::vector<float>& m, std::vector<float>& v);
//   void set_optimizer(const std::vector<float>& m, const std::vector<float>& v);
//                                               AdamW moments (zeros before the first update)
// Everything here is deterministic for a fixed thread count, so a resumed run repeats the
// uninterrupted one bit for bit.
//
// Precision paths of one graph (model/gpt2_cpu.h), chosen at run time (select_precision, the -pr of
// the trainer and the tools): ref, GPT2<float> itself, the reference (layers/*_cpu.h, namespace ref);
// fp32 and bf16, the fast path (model/gpt2_cpu_fast.h: Highway kernels dispatched to the CPU's best
// ISA target) on the same master weights in fp32 or bf16 numerics; auto, the faster of the two on the
// CPU at hand: bf16 where the CPU has bf16 matmuls (AMX or AVX512-BF16, asked of cpuid and oneDNN),
// else fp32.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt2_cpu.h"
#include "model/gpt2_cpu_fast.h"

struct ModelCPU {
    static constexpr const char* backend_name = "cpu";
    GPT2<float> gpt;
    GPT2Config config;
    size_t num_parameters;
    std::unique_ptr<GPT2Fast<float>> fast32;  // the fast path in fp32 numerics, when chosen
    std::unique_ptr<GPT2Fast<bf16>> fast16;   // the fast path in bf16 numerics, when chosen; both null: ref

    explicit ModelCPU(const GPT2Config& c) : gpt(c), config(c), num_parameters(gpt.num_parameters) {}

    // "ref", "fp32", "bf16" or "auto" (the faster on this CPU). Returns the line saying what runs:
    // the path, the ISA target its kernels dispatch to, and where the matmuls run. Throws on another name.
    std::string select_precision(const std::string& name) {
        if (name != "ref" && name != "fp32" && name != "bf16" && name != "auto")
            throw std::invalid_argument("precision '" + name + "' is not ref, fp32, bf16 or auto");
        fast32.reset();
        fast16.reset();
        if (name == "ref") return "ref (the reference CPU path, layers/*_cpu.h)";
        CpuBf16Matmul mm = cpu_bf16_matmul();
        bool use_bf16 = name == "bf16" || (name == "auto" && mm.hardware);
        std::string line = name == "auto" ? "auto picked " : "";
        if (use_bf16) {
            fast16.reset(new GPT2Fast<bf16>(gpt));
            line += std::string("bf16 on the fast path (kernels: ") + fast_cpu_target() + "; matmuls: " +
                    (mm.hardware ? "oneDNN on " + mm.onednn_isa
                                 : "bf16 products computed exactly through sgemm, this CPU has no bf16 matmuls") +
                    ")";
        } else {
            fast32.reset(new GPT2Fast<float>(gpt));
            line += std::string("fp32 on the fast path (kernels: ") + fast_cpu_target() + "; matmuls: oneDNN fp32" +
                    (name == "auto" ? "; no bf16 matmuls on this CPU: oneDNN runs " + mm.onednn_isa : "") + ")";
        }
        return line;
    }
    const char* precision() const { return fast16 ? "bf16" : fast32 ? "fp32" : "ref"; }

    void init(uint64_t seed) {
        gpt.init(seed);
        weights_changed();
    }

    // backward_follows: the hint that a backward comes next (the bf16 path then writes the
    // classifier's gradient in the forward's pass over the logits; the logits are kept either way)
    float forward(const int* inputs, const int* targets, int B, int T, bool backward_follows = false) {
        if (fast16) return fast16->forward(inputs, targets, B, T, backward_follows);
        if (fast32) return fast32->forward(inputs, targets, B, T, backward_follows);
        return gpt.forward(inputs, targets, B, T);
    }

    // A forward without targets then computes only the logits of rows b*T + t >= row (default 0).
    void set_logits_from_row(size_t row) { gpt.logits_from = row; }

    // logits (Vp) of position (b,t) of the last forward
    void logits_row(int b, int t, float* out) {
        check_position(b, t);
        if (!gpt.have_targets && (size_t)b * gpt.T + t < gpt.logits_from)
            throw std::logic_error("logits_row: row " + std::to_string((size_t)b * gpt.T + t) +
                                   " was not computed (set_logits_from_row(" + std::to_string(gpt.logits_from) + "))");
        const float* row = gpt.acts.logits + ((size_t)b * gpt.T + t) * config.padded_vocab_size;
        std::copy(row, row + config.padded_vocab_size, out);
    }

    // losses (B*T) of the last forward, which must have had targets
    void losses(float* out) {
        if (!gpt.have_targets) throw std::logic_error("losses: the last forward had no targets");
        std::copy(gpt.acts.losses, gpt.acts.losses + (size_t)gpt.B * gpt.T, out);
    }

    void zero_grad() { gpt.zero_grad(); }
    void backward(float loss_scale) {
        if (fast16) fast16->backward(loss_scale);
        else if (fast32) fast32->backward(loss_scale);
        else gpt.backward(loss_scale);
    }

    // The sum of squares in fixed chunks, added in chunk order: the same bits for any number of
    // threads (an OpenMP reduction combines partial sums in whatever order threads finish).
    double grad_norm() {
        if (fast16) return fast16->grad_norm();
        if (fast32) return fast32->grad_norm();
        const size_t chunk = 1 << 16;
        size_t n = num_parameters, chunks = (n + chunk - 1) / chunk;
        std::vector<double> partial(chunks);
        const float* g = gpt.grads.data();
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < chunks; c++) {
            double s = 0;
            size_t end = std::min(n, (c + 1) * chunk);
            for (size_t i = c * chunk; i < end; i++) s += (double)g[i] * (double)g[i];
            partial[c] = s;
        }
        double sum = 0;
        for (double s : partial) sum += s;
        return std::sqrt(sum);
    }

    // the hyperparameters read as float on every path (in_float), as the CUDA back end reads them
    void update(const AdamWStep& s) {
        if (fast16) return fast16->update(s);
        if (fast32) return fast32->update(s);
        gpt.update(in_float(s));
    }

    void get_params(std::vector<float>& out) { out = gpt.params; }
    void set_params(const std::vector<float>& in) {
        check_size("set_params", in.size());
        gpt.params = in;
        weights_changed();
    }
    // resume: the fp32 weights are the whole state on the CPU; the bf16 path's weights are their
    // round to nearest even, as the last update left them
    void set_params(const std::vector<float>& in, int /*last_update_step*/) { set_params(in); }
    void get_optimizer(std::vector<float>& m, std::vector<float>& v) {
        if (gpt.m.empty()) {
            m.assign(num_parameters, 0.0f);
            v.assign(num_parameters, 0.0f);
        } else {
            m = gpt.m;
            v = gpt.v;
        }
    }
    void set_optimizer(const std::vector<float>& m, const std::vector<float>& v) {
        check_size("set_optimizer (m)", m.size());
        check_size("set_optimizer (v)", v.size());
        gpt.m = m;
        gpt.v = v;
    }

    // the fast path's StepProfile (null on the reference path)
    StepProfile* profile() { return fast16 ? &fast16->prof : fast32 ? &fast32->prof : nullptr; }

private:
    void weights_changed() {
        if (fast16) fast16->weights_changed();
        if (fast32) fast32->weights_changed();
    }
    void check_size(const char* what, size_t n) const {
        if (n != num_parameters) {
            throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " values for a model of " +
                                        std::to_string(num_parameters) + " parameters");
        }
    }
    void check_position(int b, int t) const {
        if (b < 0 || b >= gpt.B || t < 0 || t >= gpt.T) {
            throw std::out_of_range("logits_row: (b, t) = (" + std::to_string(b) + ", " + std::to_string(t) +
                                    ") outside the last forward's (B, T) = (" + std::to_string(gpt.B) + ", " +
                                    std::to_string(gpt.T) + ")");
        }
    }
};
