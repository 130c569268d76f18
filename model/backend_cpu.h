// The CPU back end of the trainer: GPT2<float> (model/gpt2_cpu.h) behind the back-end
// interface that train_gpt2.cu and eval/ are written against. The CUDA back end
// (model/gpt2_cuda.cuh) provides the same members, so the trainer is one source for both.
//
// Back-end interface (duck-typed; every back end provides exactly these):
//   explicit Model(const GPT2Config&)          throws std::invalid_argument naming the bad field
//   GPT2Config config; size_t num_parameters;
//   void init(uint64_t seed);                   GPT-2 initialisation
//   float forward(const int* inputs, const int* targets, int B, int T);
//                                               host token ids (B,T); mean loss, or -1 without targets
//   void logits_row(int b, int t, float* out);  logits (Vp) at (b,t) of the last forward
//   void losses(float* out);                    per-position losses (B*T) of the last forward
//   void zero_grad();
//   void backward(float loss_scale);            accumulates the gradient of loss_scale * mean loss
//   double grad_norm();                         global L2 norm of the gradients
//   void update(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
//               int step);                      grads *= grad_scale, then AdamW step `step` (1-based);
//                                               weight decay on the matrices only
//   void get_params(std::vector<float>&); void set_params(const std::vector<float>&);
//   void set_params(const std::vector<float>&, int last_update_step);   (resume: the weights as that step left them)
//                                               fp32 (master) weights, layout of model/gpt2_config.h
//   void get_optimizer(std::vector<float>& m, std::vector<float>& v);
//   void set_optimizer(const std::vector<float>& m, const std::vector<float>& v);
//                                               AdamW moments (zeros before the first update)
// Everything here is deterministic for a fixed thread count, so a resumed run repeats the
// uninterrupted one bit for bit.
//
// Two precision paths of one graph (model/gpt2_cpu.h), chosen at run time (select_precision, the
// trainer's -pr): fp32, GPT2<float> itself, the reference (the default); bf16, model/gpt2_cpu_bf16.h
// on the same master weights, where the CPU has bf16 matmuls (AMX or AVX512-BF16, asked of cpuid
// and oneDNN), else it says so and stays fp32.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt2_cpu.h"
#include "model/gpt2_cpu_bf16.h"

struct ModelCPU {
    static constexpr const char* backend_name = "cpu";
    GPT2<float> gpt;
    GPT2Config config;
    size_t num_parameters;
    std::unique_ptr<GPT2Bf16> bf16;  // the bf16 path, when chosen; null: fp32

    explicit ModelCPU(const GPT2Config& c) : gpt(c), config(c), num_parameters(gpt.num_parameters) {}

    // "fp32", "bf16" or "auto" (bf16 where the CPU has it). Returns the line saying what runs;
    // bf16 without the hardware falls back to fp32 and says why. Throws on another name.
    std::string select_precision(const std::string& name) {
        if (name != "fp32" && name != "bf16" && name != "auto")
            throw std::invalid_argument("precision '" + name + "' is not fp32, bf16 or auto");
        bf16.reset();
        if (name == "fp32") return "fp32 (the reference CPU path)";
        CpuBf16Support s = cpu_bf16_support();
        if (!s.usable) return s.message;
        bf16.reset(new GPT2Bf16(gpt));
        return s.message;
    }
    const char* precision() const { return bf16 ? "bf16" : "fp32"; }

    void init(uint64_t seed) {
        gpt.init(seed);
        if (bf16) bf16->weights_changed();
    }

    // backward_follows: the hint that a backward comes next (the bf16 path then writes the
    // classifier's gradient in the forward's pass over the logits; the logits are kept either way)
    float forward(const int* inputs, const int* targets, int B, int T, bool backward_follows = false) {
        return bf16 ? bf16->forward(inputs, targets, B, T, backward_follows) : gpt.forward(inputs, targets, B, T);
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
        if (bf16) bf16->backward(loss_scale);
        else gpt.backward(loss_scale);
    }

    // The sum of squares in fixed chunks, added in chunk order: the same bits for any number of
    // threads (an OpenMP reduction combines partial sums in whatever order threads finish).
    double grad_norm() {
        if (bf16) return bf16->grad_norm();
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

    void update(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int step) {
        if (bf16) return bf16->update(lr, beta1, beta2, eps, weight_decay, grad_scale, step);
        gpt.update(lr, beta1, beta2, eps, weight_decay, step, grad_scale);
    }

    void get_params(std::vector<float>& out) { out = gpt.params; }
    void set_params(const std::vector<float>& in) {
        check_size("set_params", in.size());
        gpt.params = in;
        if (bf16) bf16->weights_changed();
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

private:
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
