// The whole GPT-2 + RoPE model on the CPU reference (float64) against finite differences:
// every parameter gradient of a tiny model, for every attention variant and p in {1, 3, 15}, learned
// p, ssmax's s, and the length terms (attn_len) below, at and beyond their length.
// Plus config validation and input checks.
// Tolerance: relative error < 1e-6 per element (see gradcheck.h for the metric and the step).
#include <doctest/doctest.h>

#include "model/gpt2_cpu.h"
#include "test/gradcheck.h"
#include "test/lssar_kink.h"
#include "test/test_variants.h"

constexpr double TOL = 1e-6;
// The finite differences probe parameters at 3e-4 of their scale and up to twice that: a score
// or x must stay this far from a kink so that the stencil never crosses it.
constexpr double KINK_MIN = 2e-3;

static GPT2Config tiny_config(AttnKind kind, float p, int learn_p = 0, int attn_len = 0) {
    GPT2Config c;
    c.max_seq_len = 16;
    c.vocab_size = 37;
    c.padded_vocab_size = 40;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 16;
    c.attn = kind;
    c.p = p;
    c.learn_p = learn_p;
    c.attn_len = attn_len;
    return c;
}

// Moves every parameter off GPT-2's special initial point (zero biases, unit layernorm weights)
// so that no gradient vanishes by symmetry.
static void perturb_parameters(GPT2<double>& model, uint64_t seed) {
    Rng rng(seed);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        double* p = model.param(i);
        for (size_t k = 0; k < model.param_sizes[i]; k++) p[k] += 0.1 * rng.normal();
    }
    // the padded vocabulary rows stay what they are for the model: never used by the loss
}

// The smallest distance from an attention kink over the layers (the re-weighting's relu at
// x = 0, a relu phi at s = 0), after a forward.
static double model_kink_distance(GPT2<double>& model, AttnKind kind, int B, int T) {
    size_t per_layer = (size_t)B * T * 3 * model.config.channels;
    double dist = 1e300;
    for (int l = 0; l < model.config.num_layers; l++)
        dist = std::min(dist, attn_kink_distance(model.acts.qkvr + l * per_layer, B, T, model.config.num_heads,
                                                 model.config.channels / model.config.num_heads, kind));
    return dist;
}

static void check_model_gradients(AttnKind kind, float p, int learn_p = 0, int attn_len = 0) {
    GPT2<double> model(tiny_config(kind, p, learn_p, attn_len));
    int B = 2, T = 9;
    std::vector<int> inputs(B * T), targets(B * T);
    // finite differences are valid only away from the kinks of every layer's attention: the
    // first parameter seed whose forward keeps KINK_MIN from them
    double dist = 0;
    for (uint64_t seed = 43; seed < 343 && !(dist > KINK_MIN); seed++) {
        model.init(42);
        perturb_parameters(model, seed);
        Rng rng(44);
        for (int i = 0; i < B * T; i++) {
            inputs[i] = (int)(rng.next_u64() % model.config.vocab_size);
            targets[i] = (int)(rng.next_u64() % model.config.vocab_size);
        }
        model.forward(inputs.data(), targets.data(), B, T);
        dist = model_kink_distance(model, kind, B, T);
    }
    INFO(std::string(attn_kind_name(kind)) << " kink distance " << dist);
    REQUIRE(dist > KINK_MIN);
    // relu's unnormalised rows (A = relu(s) / n) make the parameter gradients ~1e-5 against a
    // loss of ~3.6: the rounding of the difference quotient (~1e-16 |f| / h) is then ~1e-6 of
    // them at h = 3e-4. A 3x larger step keeps it below; the stencil (2h) still stays inside
    // KINK_MIN of every score.
    double step = attn_variant(kind).phi == ATTN_PHI_RELU && !attn_reweights(kind) ? 1e-3 : 3e-4;
    model.zero_grad();
    model.backward();
    std::vector<double> analytic = model.grads;
    auto loss = [&] { return model.forward(inputs.data(), targets.data(), B, T); };
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        GradCheckResult r = check_gradient(loss, model.param(i), analytic.data() + model.param_offsets[i],
                                           model.param_sizes[i], step);
        INFO(std::string(attn_kind_name(kind)) << " p=" << p << " d" << std::string(param_tensor_name(i)) << ": " << describe(r));
        CHECK(r.max_rel_err < TOL);
    }
}

// Every variant of the table at its test p (ssmax: s of every (layer, head) is a parameter tensor,
// dssmax_s, checked with the others).
TEST_CASE("whole model gradients, every variant") {
    for (AttnKind kind : test_kinds()) check_model_gradients(kind, attn_variant(kind).test_p);
}
// Each variant with a length in its definition at attn_len 5 of T = 9: the training-length
// constant of sigmoid and relu (rows below, at and above it), log-length scaling of softmax and
// softmax_rw (rows within it unscaled, rows beyond it scaled).
TEST_CASE("whole model gradients, every variant with a length, at attn_len 5") {
    for (AttnKind kind : test_kinds())
        if (attn_has_len(kind)) check_model_gradients(kind, attn_variant(kind).test_p, 0, 5);
}
// LSSAR at more p: 1 and 3 (15 is its test p)
TEST_CASE("whole model gradients, lssar p=1") { check_model_gradients(ATTN_LSSAR, 1); }
TEST_CASE("whole model gradients, lssar p=3") { check_model_gradients(ATTN_LSSAR, 3); }
// learned p: theta of every (layer, head) is a parameter tensor, checked with the others
TEST_CASE("whole model gradients, lssar with learned p from 3") { check_model_gradients(ATTN_LSSAR, 3, 1); }
TEST_CASE("whole model gradients, softmax_rw with learned p from 15") { check_model_gradients(ATTN_SOFTMAX_RW, 15, 1); }

TEST_CASE("learned p starts at -p, one theta per layer and head") {
    GPT2<float> model(tiny_config(ATTN_LSSAR, 15, 1));
    model.init(3);
    REQUIRE(model.param_sizes[P_PTHETA] == 4);  // 2 layers x 2 heads
    std::vector<double> p = learned_p_values(model.config, model.params.data());
    REQUIRE(p.size() == 4);
    for (double v : p) CHECK(v == doctest::Approx(15.0).epsilon(1e-6));
    CHECK(learned_p(learned_p_theta0(1.5)) == doctest::Approx(1.5).epsilon(1e-12));
    CHECK(learned_p(learned_p_theta0(40.0)) == doctest::Approx(40.0).epsilon(1e-12));
    GPT2<float> fixed(tiny_config(ATTN_LSSAR, 15, 0));
    CHECK(fixed.param_sizes[P_PTHETA] == 0);
    CHECK(fixed.num_parameters + 4 == model.num_parameters);
}

TEST_CASE("ssmax's s starts at SSMAX_S0, one per layer and head, and moves the loss") {
    GPT2<double> model(tiny_config(ATTN_SSMAX, 0));
    model.init(3);
    REQUIRE(model.param_sizes[P_SSMAX_S] == 4);  // 2 layers x 2 heads
    std::vector<float> params(model.params.begin(), model.params.end());
    std::vector<double> s = ssmax_s_values(model.config, params.data());
    REQUIRE(s.size() == 4);
    for (double v : s) CHECK(v == (double)(float)SSMAX_S0);
    CHECK(model.param_sizes[P_PTHETA] == 0);
    GPT2<double> softmax(tiny_config(ATTN_SOFTMAX, 0));
    CHECK(softmax.param_sizes[P_SSMAX_S] == 0);
    CHECK(softmax.num_parameters + 4 == model.num_parameters);
    // every s reaches the loss: a nonzero gradient for each (layer, head)
    int B = 1, T = 8;
    std::vector<int> inputs(B * T), targets(B * T);
    for (int i = 0; i < B * T; i++) inputs[i] = (3 * i + 1) % 37, targets[i] = (5 * i + 2) % 37;
    perturb_parameters(model, 5);
    model.forward(inputs.data(), targets.data(), B, T);
    model.zero_grad();
    model.backward();
    for (int k = 0; k < 4; k++) CHECK(model.grad(P_SSMAX_S)[k] != 0.0);
    CHECK(ssmax_s_summary({0.5, 0.25, 1.0}) == "s mean 0.5833 min 0.25 max 1");
}

// Log-length scaling's factor is exactly 1 within attn_len, so a model at T <= attn_len is the plain
// model bit for bit (loss and every gradient); at T > attn_len the rows beyond it change the loss.
TEST_CASE("log-length scaling: within attn_len softmax and softmax_rw are bit for bit unchanged, beyond it not") {
    for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW}) {
        CAPTURE(attn_kind_name(kind));
        GPT2<float> plain(tiny_config(kind, 3)), scaled(tiny_config(kind, 3, 0, 8));
        plain.init(5);
        Rng rng(9);  // larger qkv weights: attention far from uniform, so that scaling its scores shows
        for (size_t k = 0; k < plain.param_sizes[P_QKVW]; k++) plain.param(P_QKVW)[k] += (float)(0.3 * rng.normal());
        scaled.params = plain.params;
        for (int T : {8, 16}) {
            CAPTURE(T);
            int B = 2;
            std::vector<int> inputs(B * T), targets(B * T);
            for (int i = 0; i < B * T; i++) inputs[i] = (7 * i + 3) % 37, targets[i] = (11 * i + 1) % 37;
            float a = plain.forward(inputs.data(), targets.data(), B, T);
            float b = scaled.forward(inputs.data(), targets.data(), B, T);
            if (T <= 8) {
                CHECK(a == b);
                plain.zero_grad();
                plain.backward();
                scaled.zero_grad();
                scaled.backward();
                CHECK(plain.grads == scaled.grads);
            } else {
                CHECK(a != b);
            }
        }
    }
}

TEST_CASE("initialisation follows GPT-2") {
    GPT2Config c = tiny_config(ATTN_LSSAR, 15);
    c.num_layers = 4;
    c.channels = 64;
    c.num_heads = 4;
    GPT2<double> model(c);
    model.init(1);
    auto stddev = [&](int i) {
        double s = 0;
        size_t n = model.param_sizes[i];
        if (i == P_WTE) n = (size_t)c.vocab_size * c.channels;
        for (size_t k = 0; k < n; k++) s += model.param(i)[k] * model.param(i)[k];
        return std::sqrt(s / n);
    };
    // sample standard deviations of 4k-65k normal draws: within 5% of the target
    CHECK(stddev(P_QKVW) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stddev(P_FCW) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stddev(P_WTE) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stddev(P_ATTPROJW) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
    CHECK(stddev(P_FCPROJW) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
    for (int i : {P_QKVB, P_ATTPROJB, P_FCB, P_FCPROJB, P_LN1B, P_LN2B, P_LNFB}) CHECK(stddev(i) == 0.0);
    for (int i : {P_LN1W, P_LN2W, P_LNFW})
        for (size_t k = 0; k < model.param_sizes[i]; k++) CHECK(model.param(i)[k] == 1.0);
    for (size_t k = (size_t)c.vocab_size * c.channels; k < model.param_sizes[P_WTE]; k++)
        CHECK(model.param(P_WTE)[k] == 0.0);
}

TEST_CASE("invalid configs are rejected with a message naming the field") {
    struct Case {
        const char* field;
        void (*edit)(GPT2Config&);
    };
    Case cases[] = {
        {"channels", [](GPT2Config& c) { c.channels = 18; c.num_heads = 4; }},
        {"head dim", [](GPT2Config& c) { c.channels = 15; c.num_heads = 5; }},
        {"p", [](GPT2Config& c) { c.p = 0.5f; }},
        {"num_layers", [](GPT2Config& c) { c.num_layers = 0; }},
        {"channels", [](GPT2Config& c) { c.channels = 0; }},
        {"vocab_size", [](GPT2Config& c) { c.vocab_size = 0; }},
        {"padded_vocab_size", [](GPT2Config& c) { c.padded_vocab_size = 10; }},
        {"max_seq_len", [](GPT2Config& c) { c.max_seq_len = -1; }},
        {"rope_base", [](GPT2Config& c) { c.rope_base = 0.0f; }},
        {"attn", [](GPT2Config& c) { c.attn = (AttnKind)ATTN_NUM_KINDS; }},
        {"learn_p", [](GPT2Config& c) { c.attn = ATTN_LSSA; c.learn_p = 1; }},
        {"learn_p", [](GPT2Config& c) { c.p = 1.0f; c.learn_p = 1; }},
        {"p", [](GPT2Config& c) { c.attn = ATTN_SIGMOID_L1_RW; c.p = 0.9f; }},
        {"attn_len = 16 is defined for softmax, sigmoid, relu, softmax_rw only", [](GPT2Config& c) { c.attn_len = 16; }},
        {"attn_len = 16 is defined for softmax, sigmoid, relu, softmax_rw only",
         [](GPT2Config& c) { c.attn = ATTN_SSMAX; c.attn_len = 16; }},
        {"attn_len = 1: log-length scaling divides by ln(attn_len)", [](GPT2Config& c) { c.attn = ATTN_SOFTMAX; c.attn_len = 1; }},
        {"attn_len = 1: log-length scaling divides by ln(attn_len)", [](GPT2Config& c) { c.attn = ATTN_SOFTMAX_RW; c.attn_len = 1; }},
        {"attn_len = -1 must be >= 0", [](GPT2Config& c) { c.attn = ATTN_SIGMOID; c.attn_len = -1; }},
        {"attn_len = -16 must be >= 0", [](GPT2Config& c) { c.attn = ATTN_RELU; c.attn_len = -16; }},
    };
    for (const Case& k : cases) {
        GPT2Config c = tiny_config(ATTN_LSSAR, 15);
        k.edit(c);
        std::string err = gpt2_config_error(c);
        INFO("field " << k.field << ": " << err);
        CHECK(err.find(k.field) != std::string::npos);
        CHECK_THROWS_AS(GPT2<float>{c}, std::invalid_argument);
    }
    for (AttnKind kind : {ATTN_SOFTMAX, ATTN_LSSA, ATTN_SIGMOID, ATTN_RELU, ATTN_SSMAX}) {
        GPT2Config ok = tiny_config(kind, 0.0f);  // p is not used without re-weighting
        CHECK(gpt2_config_error(ok).empty());
    }
    for (AttnKind kind : {ATTN_SIGMOID, ATTN_RELU})
        for (int attn_len : {1, 16, 1024}) CHECK(gpt2_config_error(tiny_config(kind, 0.0f, 0, attn_len)).empty());
    for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW})
        for (int attn_len : {2, 16, 1024}) CHECK(gpt2_config_error(tiny_config(kind, 1.0f, 0, attn_len)).empty());
}

TEST_CASE("token ids out of range are refused") {
    GPT2<float> model(tiny_config(ATTN_LSSAR, 15));
    model.init(1);
    std::vector<int> inputs(4, 1), targets(4, 2);
    inputs[2] = 37;  // == vocab_size: a padded row, not a token
    CHECK_THROWS_AS(model.forward(inputs.data(), targets.data(), 1, 4), std::out_of_range);
    inputs[2] = 1;
    targets[3] = -1;
    CHECK_THROWS_AS(model.forward(inputs.data(), targets.data(), 1, 4), std::out_of_range);
}
