// Rung 2 of the correctness ladder: the CPU reference against an independent PyTorch
// implementation (test/gpt2_torch.py, float64 autograd): logits, loss, every parameter gradient,
// and 3 AdamW steps, for every attention variant, with the CPU reference run in float64 and in
// float32. float64 follows PyTorch's whole run; float32 is checked step by step against the float64
// step from its own state, each parameter within a bound derived from its gradient's float32 error
// and AdamW's sensitivity at that gradient's size (adamw_sensitivity), so that no bound depends on
// which BLAS kernel rounded the gradient. Also ssmax (its s per layer and head) and log-length
// scaling (softmax, softmax_rw with attn_len below T).
// Each run regenerates the PyTorch debug states with /usr/bin/python3; where PyTorch is missing,
// the stored copies in test/data/ are used, and the test says which.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "model/gpt2_cpu.h"
#include "test/adamw_bound.h"
#include "test/test_variants.h"

constexpr int STATE_MAGIC = 20241129;
constexpr int STATE_VERSION = 2;  // 2 adds attn_len, the header's 13th int (version 1: 12, attn_len 0)

struct TorchState {
    GPT2Config config;
    int B = 0, T = 0, steps = 0;
    double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
    std::vector<int> inputs, targets;
    std::vector<double> params, logits, grads, step_losses, params_after;
    double loss = 0;
};

static void read_exact(FILE* f, void* dst, size_t bytes, const std::string& path) {
    if (fread(dst, 1, bytes, f) != bytes) FAIL("truncated debug state " << path);
}

static TorchState load_state(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    REQUIRE_MESSAGE(f != nullptr, "cannot open " << path);
    int h[13] = {};
    double d[7];
    read_exact(f, h, 12 * sizeof(int), path);
    REQUIRE_MESSAGE(h[0] == STATE_MAGIC, path << ": bad magic " << h[0]);
    REQUIRE_MESSAGE((h[1] == 1 || h[1] == STATE_VERSION), path << ": version " << h[1] << ", expected 1 or " << STATE_VERSION);
    if (h[1] == 2) read_exact(f, &h[12], sizeof(int), path);
    read_exact(f, d, sizeof d, path);
    TorchState s;
    GPT2Config& c = s.config;
    c.num_layers = h[2];
    c.num_heads = h[3];
    c.channels = h[4];
    c.vocab_size = h[5];
    c.padded_vocab_size = h[6];
    c.attn = (AttnKind)h[7];
    s.B = h[8];
    s.T = h[9];
    s.steps = h[10];
    c.max_seq_len = s.T;
    c.attn_len = h[12];
    c.p = (float)d[0];
    c.rope_base = (float)d[1];
    s.lr = d[2];
    s.beta1 = d[3];
    s.beta2 = d[4];
    s.eps = d[5];
    s.weight_decay = d[6];
    size_t np = (size_t)h[11], BT = (size_t)s.B * s.T;
    s.inputs.resize(BT);
    s.targets.resize(BT);
    s.params.resize(np);
    s.logits.resize(BT * c.padded_vocab_size);
    s.grads.resize(np);
    s.step_losses.resize(s.steps);
    s.params_after.resize(np);
    read_exact(f, s.inputs.data(), BT * sizeof(int), path);
    read_exact(f, s.targets.data(), BT * sizeof(int), path);
    read_exact(f, s.params.data(), np * sizeof(double), path);
    read_exact(f, s.logits.data(), s.logits.size() * sizeof(double), path);
    read_exact(f, &s.loss, sizeof(double), path);
    read_exact(f, s.grads.data(), np * sizeof(double), path);
    read_exact(f, s.step_losses.data(), s.steps * sizeof(double), path);
    read_exact(f, s.params_after.data(), np * sizeof(double), path);
    fclose(f);
    return s;
}

// Regenerates the state with PyTorch; falls back to the stored copy. Returns the path used.
// attn_len > 0: the state of that attn_len, named torch_state_<attn>_len<attn_len>.
static std::string torch_state(const char* attn, const char* p, int attn_len = 0) {
    std::string name = std::string("torch_state_") + attn + (attn_len ? "_len" + std::to_string(attn_len) : "");
    std::string fresh = "build/" + name + ".bin";
    std::string cmd = std::string("/usr/bin/python3 test/gpt2_torch.py --attn ") + attn + " --p " + p +
                      " --attn-len " + std::to_string(attn_len) + " --out " + fresh + " > build/" + name + ".log 2>&1";
    if (system(cmd.c_str()) == 0) {
        MESSAGE("PyTorch regenerated " << fresh);
        return fresh;
    }
    std::string stored = "test/data/" + name + ".bin";
    MESSAGE("PyTorch not available (/usr/bin/python3 -c 'import torch' failed): using the stored copy " << stored);
    return stored;
}

// max over i of |a_i - b_i| / max(|b_i|, floor), floor = floor_frac * max |b|
template <class T>
static double max_rel_err(const T* a, const double* b, size_t n, double floor_frac) {
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = std::max(scale, std::fabs(b[i]));
    double floor = std::max(floor_frac * scale, 1e-300), err = 0;
    for (size_t i = 0; i < n; i++) err = std::max(err, std::fabs((double)a[i] - b[i]) / std::max(std::fabs(b[i]), floor));
    return err;
}

struct Tolerances {
    double logits, loss, grads;
};

// The parameters after each AdamW step, bounded from the gradient's error (test/adamw_bound.h).

// The float32 gradient error the gradient check allows (compare below): tol.grads relative to the
// element, or to 1e-3 of its tensor's largest element (max_rel_err's floor), whichever is larger.
constexpr double GRAD_FLOOR = 1e-3;

// The update's own rounding: about ten operations on values of the size of the step, each off by
// half an ulp of F (and lr, beta, eps rounded to F), and the final subtraction rounded to theta's
// ulp: 16 half-ulps of the step plus one of the new value.
template <class F> constexpr double unit_roundoff() { return std::numeric_limits<F>::epsilon() / 2; }

// The bound of each element's AdamW step t (taken from state m, v with gradient g):
// lr sensitivity delta + rounding. The state is the model's own (before the update).
struct StepBound {
    std::vector<double> bound;          // of |theta after - theta after exactly|
    std::vector<double> delta, from_gradient;  // the gradient's bound, and lr delta sensitivity (its part of bound)
    size_t free = 0;                    // elements whose gradient bound reaches 0: their step's sign is not determined
};

template <class F, class G>
static StepBound adamw_step_bound(const GPT2<F>& model, const G& g, double grad_tol, const TorchState& s, int t) {
    StepBound r;
    std::vector<double>& bound = r.bound;
    bound.resize(model.num_parameters);
    r.delta.resize(model.num_parameters);
    r.from_gradient.resize(model.num_parameters);
    const double uF = unit_roundoff<F>();
    for (int ti = 0; ti < NUM_PARAM_TENSORS; ti++) {
        size_t off = model.param_offsets[ti], n = model.param_sizes[ti];
        double gmax = 0;
        for (size_t i = off; i < off + n; i++) gmax = std::max(gmax, std::fabs((double)g[i]));
        double lr = param_tensor_lr(ti, s.lr, model.p_lr_scale), wd = param_tensor_decays(ti) ? s.weight_decay : 0.0;
        for (size_t i = off; i < off + n; i++) {
            double m = model.m.empty() ? 0.0 : (double)model.m[i], v = model.v.empty() ? 0.0 : (double)model.v[i];
            double delta = grad_tol * std::max(std::fabs((double)g[i]), GRAD_FLOOR * gmax);
            if (delta >= std::fabs((double)g[i])) r.free++;
            double sens = adamw_sensitivity(m, v, (double)g[i], delta, s.beta1, s.beta2, s.eps, t);
            double bc1 = 1 - std::pow(s.beta1, t), bc2 = 1 - std::pow(s.beta2, t);
            double gi = (double)g[i];
            double mhat = (s.beta1 * m + (1 - s.beta1) * gi) / bc1;
            double vhat = (s.beta2 * v + (1 - s.beta2) * gi * gi) / bc2;
            double theta = (double)model.params[i];
            double step = lr * (std::fabs(mhat) / (std::sqrt(vhat) + s.eps) + wd * std::fabs(theta));
            r.delta[i] = delta;
            r.from_gradient[i] = lr * delta * sens;
            bound[i] = lr * delta * sens + 16 * uF * step + uF * (std::fabs(theta) + step);
        }
    }
    return r;
}

struct StepCheck {
    size_t violations = 0;  // elements outside their bound
    size_t free = 0;        // elements whose gradient bound reaches 0
    double worst = 0;       // largest error / bound
    size_t worst_index = 0;
};

template <class P, class Q>
static StepCheck within_bounds(const P& after, const Q& expected, const std::vector<double>& bound) {
    StepCheck c;
    for (size_t i = 0; i < bound.size(); i++) {
        double ratio = std::fabs((double)after[i] - (double)expected[i]) / bound[i];
        if (!(ratio <= 1)) c.violations++;
        if (!(ratio <= c.worst)) c.worst = ratio, c.worst_index = i;
    }
    return c;
}

static std::string element_name(const GPT2ParamLayout& layout, size_t i) {
    int t = 0;
    while (t + 1 < NUM_PARAM_TENSORS && layout.param_offsets[t + 1] <= i) t++;
    return std::string(param_tensor_name(t)) + "[" + std::to_string(i - layout.param_offsets[t]) + "]";
}

// One AdamW step of a float32 model checked against the float64 reference step from the same
// state: the float64 model at the float32 model's parameters gives the exact gradient g, the
// float32 gradient must be within the gradient tolerance of it (checked by the caller), and the
// float32 step within adamw_step_bound of the float64 step taken with g. perturb, if given, alters
// the float32 gradient before the update (the test that the bound catches a wrong gradient).
template <class Perturb>
static StepCheck check_float32_step(GPT2<float>& model, GPT2<double>& ref, const TorchState& s, double grad_tol, int t,
                                    Perturb perturb) {
    const std::vector<double>& g = ref.grads;
    StepBound b = adamw_step_bound(model, g, grad_tol, s, t);
    for (size_t i = 0; i < model.num_parameters; i++) ref.params[i] = model.params[i];
    ref.m.assign(model.m.begin(), model.m.end());
    ref.v.assign(model.v.begin(), model.v.end());
    perturb(model, g);
    ref.update({.lr = s.lr, .beta1 = s.beta1, .beta2 = s.beta2, .eps = s.eps, .weight_decay = s.weight_decay,
                .step = t});
    model.update({.lr = s.lr, .beta1 = s.beta1, .beta2 = s.beta2, .eps = s.eps,
                  .weight_decay = s.weight_decay, .step = t});
    StepCheck c = within_bounds(model.params, ref.params, b.bound);
    c.free = b.free;
    return c;
}

// The float64 model's gradient at the float32 model's parameters.
static void reference_gradient(GPT2<double>& ref, const GPT2<float>& model, const TorchState& s) {
    for (size_t i = 0; i < model.num_parameters; i++) ref.params[i] = model.params[i];
    ref.forward(s.inputs.data(), s.targets.data(), s.B, s.T);
    ref.zero_grad();
    ref.backward();
}

static void no_perturbation(GPT2<float>&, const std::vector<double>&) {}

template <class F>
static void check_gradients(const GPT2<F>& model, const double* expected, double grad_tol, const std::string& label) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = model.param_offsets[i], n = model.param_sizes[i];
        double e = max_rel_err(model.grads.data() + off, expected + off, n, GRAD_FLOOR);
        INFO(label << ": d" << std::string(param_tensor_name(i)) << " rel err " << e);
        CHECK(e < grad_tol);
    }
}

// logits, loss and every parameter gradient at PyTorch's parameters
template <class F>
static void compare_first_step(GPT2<F>& model, const TorchState& s, const Tolerances& tol, const std::string& label) {
    REQUIRE(model.num_parameters == s.params.size());
    for (size_t i = 0; i < s.params.size(); i++) model.params[i] = (F)s.params[i];
    F loss = model.forward(s.inputs.data(), s.targets.data(), s.B, s.T);
    double e_logits = max_rel_err(model.acts.logits, s.logits.data(), s.logits.size(), 1e-3);
    double e_loss = std::fabs((double)loss - s.loss) / s.loss;
    MESSAGE(label << ": logits rel err " << e_logits << ", loss " << (double)loss << " vs " << s.loss);
    CHECK(e_logits < tol.logits);
    CHECK(e_loss < tol.loss);
    model.zero_grad();
    model.backward();
    check_gradients(model, s.grads.data(), tol.grads, label);
}

// float64: the whole run against PyTorch's. Both take the same steps in float64; their gradients
// differ by rounding (~1e-15 relative), far inside TOL64's gradient tolerance at every step, so
// each element's error after the steps is within the sum of its per-step bounds.
static void compare_float64(const TorchState& s, const Tolerances& tol, const std::string& label) {
    GPT2<double> model(s.config);
    compare_first_step(model, s, tol, label);
    std::vector<double> bound(model.num_parameters, 0.0);
    for (int step = 1; step <= s.steps; step++) {
        if (step > 1) {
            double l = model.forward(s.inputs.data(), s.targets.data(), s.B, s.T);
            INFO(label << ": loss at step " << step);
            CHECK(std::fabs(l - s.step_losses[step - 1]) / s.step_losses[step - 1] < tol.loss);
            model.zero_grad();
            model.backward();
        }
        StepBound b = adamw_step_bound(model, model.grads, tol.grads, s, step);
        for (size_t i = 0; i < bound.size(); i++) bound[i] += b.bound[i];
        model.update({.lr = s.lr, .beta1 = s.beta1, .beta2 = s.beta2, .eps = s.eps,
                      .weight_decay = s.weight_decay, .step = step});
    }
    StepCheck c = within_bounds(model.params, s.params_after, bound);
    MESSAGE(label << ": after " << s.steps << " AdamW steps, largest error / bound " << c.worst << " ("
                  << element_name(model, c.worst_index) << ")");
    CHECK(c.violations == 0);
}

// float32: each step against the float64 step from the float32 model's own state (a float32 run
// drifts from the float64 one, and a model with a large p turns that drift into gradient changes
// far beyond float32's rounding: the run's conditioning, not the arithmetic's precision). The loss
// of every step still follows PyTorch's run within tol.loss.
static void compare_float32(const TorchState& s, const Tolerances& tol, const std::string& label) {
    GPT2<float> model(s.config);
    GPT2<double> ref(s.config);
    compare_first_step(model, s, tol, label);
    double loss_err = 0;
    for (int step = 1; step <= s.steps; step++) {
        if (step > 1) {
            float l = model.forward(s.inputs.data(), s.targets.data(), s.B, s.T);
            double e = std::fabs((double)l - s.step_losses[step - 1]) / s.step_losses[step - 1];
            loss_err = std::max(loss_err, e);
            INFO(label << ": loss at step " << step << ": " << (double)l << " vs " << s.step_losses[step - 1]);
            CHECK(e < tol.loss);
            model.zero_grad();
            model.backward();
        }
        reference_gradient(ref, model, s);
        check_gradients(model, ref.grads.data(), tol.grads, label + " at step " + std::to_string(step));
        StepCheck c = check_float32_step(model, ref, s, tol.grads, step, no_perturbation);
        MESSAGE(label << ": AdamW step " << step << ", largest error / bound " << c.worst << " ("
                      << element_name(model, c.worst_index) << "); " << c.free << " of " << model.num_parameters
                      << " elements have a gradient within its bound of 0");
        CHECK(c.violations == 0);
    }
    MESSAGE(label << ": loss at steps 2-" << s.steps << " within " << loss_err << " of PyTorch's run (relative)");
}

// float64: the two implementations differ only in operation order, ~1e-15 per operation through a
// few hundred operations: 1e-10 leaves margin. float32 (eps 6e-8): every value carries an absolute
// error of a few eps times the scale of the terms summed into it, ~1e-7 of its tensor's largest
// value; the relative metric's floor (1e-3 of the largest) turns that into up to ~1e-4 for logits.
// A gradient element sums B*T products whose scale is the tensor's, so cancellation leaves small
// elements with that absolute error: 1e-2 at the floor is 1e-5 of the tensor's largest element,
// ~170 eps (measured up to 13 eps of the largest, in every variant without re-weighting).
static const Tolerances TOL64 = {1e-10, 1e-12, 1e-8};
static const Tolerances TOL32 = {1e-3, 1e-6, 1e-2};

// The re-weighting raises x = n A - o to the power p: a relative error e of x becomes p e in the
// weights and in every gradient downstream, so the float32 gradient tolerance is p times the
// others'. sigmoid_l1_rw: sigmoid maps the scores into (sigma(-lam), sigma(lam)), so A is much
// closer to uniform than with softplus and x = n A - 1 cancels more: float32's ~1e-7 relative error
// in A becomes ~1e-5 in x, which p = 15 multiplies (measured 1.14e-3 for the logits): 3e-3.
static Tolerances float32_tolerances(const char* attn, double p) {
    AttnKind kind = ATTN_NUM_KINDS;
    REQUIRE(attn_kind_from_name(attn, &kind));
    Tolerances t = TOL32;
    if (attn_reweights(kind)) t.grads *= p;
    if (kind == ATTN_SIGMOID_L1_RW) t.logits = 3e-3;
    return t;
}

extern "C" char* openblas_get_corename(void);

static void check_variant(const char* attn, const char* p, int attn_len = 0) {
    std::string path = torch_state(attn, p, attn_len);
    TorchState s = load_state(path);
    REQUIRE(s.config.attn_len == attn_len);
    MESSAGE("OpenBLAS kernel: " << std::string(openblas_get_corename()));
    compare_float64(s, TOL64, std::string(attn) + " float64");
    compare_float32(s, float32_tolerances(attn, atof(p)), std::string(attn) + " float32");
}

// Every variant of the table at its test p (ssmax: s per (layer, head) a parameter tensor, its
// gradient and AdamW steps with the others); each variant with log-length scaling at attn_len 8 of
// T = 16 as well: rows 8-15 scaled, rows 0-7 as softmax's.
static std::string p_text(float p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%g", p);
    return buf;
}
TEST_CASE("CPU reference matches PyTorch: every variant") {
    for (const AttnVariant& v : test_variants()) {
        CAPTURE(v.name);
        check_variant(v.name, p_text(v.test_p).c_str());
    }
}
TEST_CASE("CPU reference matches PyTorch: log-length scaling with attn_len 8") {
    for (const AttnVariant& v : test_variants()) {
        if (!attn_log_scales(v.kind)) continue;
        CAPTURE(v.name);
        check_variant(v.name, p_text(v.test_p).c_str(), 8);
    }
}

// The bound is not so loose that a wrong gradient passes: one AdamW step of the float32 softmax
// model with its gradient altered before the update.
TEST_CASE("the after-AdamW bound fails for a float32 gradient outside its tolerance") {
    TorchState s = load_state(torch_state("softmax", "1"));
    const Tolerances tol = float32_tolerances("softmax", 1);
    // step 1 from PyTorch's parameters, the float32 gradient altered by `perturb`
    auto first_step = [&](auto perturb) {
        GPT2<float> model(s.config);
        GPT2<double> ref(s.config);
        for (size_t i = 0; i < s.params.size(); i++) model.params[i] = (float)s.params[i];
        model.forward(s.inputs.data(), s.targets.data(), s.B, s.T);
        model.zero_grad();
        model.backward();
        reference_gradient(ref, model, s);
        return check_float32_step(model, ref, s, tol.grads, 1, perturb);
    };
    // the element where the gradient's part of the bound is largest against the rounding's, among
    // those whose gradient is at least 8 times its bound (the step's sign is determined)
    GPT2<float> probe(s.config);
    for (size_t i = 0; i < s.params.size(); i++) probe.params[i] = (float)s.params[i];
    StepBound b = adamw_step_bound(probe, s.grads, tol.grads, s, 1);
    size_t k = 0, big = 0;
    double best = -1;
    for (size_t i = 0; i < b.bound.size(); i++) {
        double share = b.from_gradient[i] / (b.bound[i] - b.from_gradient[i]);
        if (8 * b.delta[i] <= std::fabs(s.grads[i]) && share > best) best = share, k = i;
        if (std::fabs(s.grads[i]) > std::fabs(s.grads[big])) big = i;
    }
    MESSAGE("element " << element_name(probe, k) << ": gradient " << s.grads[k] << ", its bound " << b.delta[k]
                       << ", step bound " << b.bound[k] << " (" << b.from_gradient[k] << " from the gradient)");
    auto sign = [](double x) { return x < 0 ? -1.0 : 1.0; };

    // within the gradient's tolerance: passes
    StepCheck within = first_step([&](GPT2<float>& m, const std::vector<double>& g) {
        m.grads[k] = (float)(g[k] - 0.5 * b.delta[k] * sign(g[k]));
    });
    CHECK(within.violations == 0);
    // 4 times the tolerance, toward 0: that element fails
    StepCheck outside = first_step([&](GPT2<float>& m, const std::vector<double>& g) {
        m.grads[k] = (float)(g[k] - 4 * b.delta[k] * sign(g[k]));
    });
    CHECK(outside.violations == 1);
    CHECK(outside.worst_index == k);
    // the largest gradient's sign flipped: its step reverses
    StepCheck flipped = first_step([&](GPT2<float>& m, const std::vector<double>&) { m.grads[big] = -m.grads[big]; });
    CHECK(flipped.violations == 1);
    CHECK(flipped.worst_index == big);
    MESSAGE("error / bound: within the tolerance " << within.worst << ", 4x outside it " << outside.worst
                                                  << ", the largest gradient flipped " << flipped.worst);
}
