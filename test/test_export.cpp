// scripts/export.py and the module it exports (scripts/modeling_lssar_gpt2.py), against the CPU
// reference (model/gpt2_cpu.h in float64), for every attention variant, for learned p, for ssmax's s,
// for sigmoid and relu with their length terms at a constant and softmax and softmax_rw with
// log-length scaling (attn_len, the trainer's -tl 1):
// - the exported module's logits, loaded from the export directory alone (test/export_check.py), in
//   float64 agree with the reference to 1e-9 of the logits' scale (the same formulas, another
//   order of operations), and in float32 to 1e-5 of that scale or 4 times the C++ float32 back
//   end's own error on the same weights, whichever is larger (float32's 6e-8 per rounding over a
//   few hundred operations per logit, which the re-weighting's power 15 multiplies by 15: the C++
//   back end measures 2e-7 to 5e-6 here, the module the same within a factor of 2);
// - export -> import -> export gives the same files byte for byte, and the imported checkpoint is
//   the original's config, step and weights bit for bit, read by the C++ reader;
// - a corrupt checkpoint, a state_dict missing a tensor or holding one of another shape are
//   refused with the file and the name.
#include <doctest/doctest.h>
#include "test/run_command.h"
#include "test/temp_dir.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/gpt2_cpu.h"
#include "model/rand.h"
#include "runtime/checkpoint.h"
#include "test/test_variants.h"

static const int B = 2, T = 24;

struct ExportCase {
    std::string name;
    AttnKind attn;
    float p;
    bool learn_p;
    int attn_len = 0;  // sigmoid, relu: the constant length (-tl 1); softmax, softmax_rw: log-length scaling
                       // beyond it; 16 of T = 24: rows below and above it
};

static GPT2Config case_config(const ExportCase& c) {
    GPT2Config cfg;
    cfg.max_seq_len = 32, cfg.vocab_size = 61, cfg.padded_vocab_size = 64;
    cfg.num_layers = 2, cfg.num_heads = 2, cfg.channels = 32;
    cfg.attn = c.attn, cfg.p = c.p, cfg.learn_p = c.learn_p, cfg.attn_len = c.attn_len;
    return cfg;
}

// GPT-2's initialisation with every parameter moved (layernorms and biases too), and for learned
// p and ssmax's s a different value per layer and head
static std::vector<float> case_params(const GPT2Config& cfg, uint64_t seed) {
    GPT2<float> m(cfg);
    m.init(seed);
    Rng rng(seed + 1);
    for (float& x : m.params) x += (float)(0.05 * rng.normal());
    if (cfg.learn_p) {
        const double ps[] = {1.5, 3, 7, 15};
        float* theta = m.params.data() + m.param_offsets[P_PTHETA];
        for (int i = 0; i < cfg.num_layers * cfg.num_heads; i++) theta[i] = (float)learned_p_theta0(ps[i % 4]);
    }
    if (attn_head_param(cfg.attn) == ATTN_HEAD_S) {
        const float ss[] = {0.3f, 0.43f, 0.8f, 1.5f};
        float* s = m.params.data() + m.param_offsets[P_SSMAX_S];
        for (int i = 0; i < cfg.num_layers * cfg.num_heads; i++) s[i] = ss[i % 4];
    }
    return m.params;
}

static std::vector<double> read_doubles(const std::string& path) {
    std::string bytes = read_file(path);
    std::vector<double> v(bytes.size() / sizeof(double));
    memcpy(v.data(), bytes.data(), v.size() * sizeof(double));
    return v;
}

// max |a - ref| over the logits, and max |ref|
static void max_errors(const std::vector<double>& a, const std::vector<double>& ref, double* err, double* scale) {
    *err = 0, *scale = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        *err = std::max(*err, std::fabs(a[i] - ref[i]));
        *scale = std::max(*scale, std::fabs(ref[i]));
    }
}

TEST_CASE("the exported PyTorch module matches the CPU reference for every variant and learned p; the round trip is exact") {
    TempDir dir("export");
    // every variant of the table at its test p; learned p from 15 for each with re-weighting; each
    // with a length in its definition at attn_len 16 (sigmoid, relu: the constant length; softmax,
    // softmax_rw: log-length scaling beyond it)
    std::vector<ExportCase> cases;
    for (const AttnVariant& v : test_variants()) cases.push_back({v.name, v.kind, v.test_p, false});
    for (const AttnVariant& v : test_variants())
        if (attn_head_param(v.kind) == ATTN_HEAD_P) cases.push_back({std::string(v.name) + "_pl", v.kind, 15, true});
    for (const AttnVariant& v : test_variants())
        if (attn_has_len(v.kind)) cases.push_back({std::string(v.name) + "_tl", v.kind, v.test_p, false, 16});
    Rng rng(11);
    std::vector<int> tokens(B * T);
    for (int& t : tokens) t = (int)(rng.next_u64() % 61);
    std::vector<int32_t> tokens32(tokens.begin(), tokens.end());
    write_file(dir.path + "/tokens.bin", std::string((const char*)tokens32.data(), tokens32.size() * 4));
    std::string names;
    for (size_t i = 0; i < cases.size(); i++) {
        Checkpoint ck;
        ck.config = case_config(cases[i]);
        ck.params = case_params(ck.config, 100 + i);
        ck.train.step = 7;
        checkpoint_write(dir.path + "/" + cases[i].name + ".bin", ck);
        names += " " + cases[i].name;
    }
    Result py = run("/usr/bin/python3 test/export_check.py " + dir.path + " " + std::to_string(B) + " " +
                    std::to_string(T) + names);
    INFO(py.output);
    REQUIRE(py.code == 0);
    for (size_t i = 0; i < cases.size(); i++) {
        const ExportCase& c = cases[i];
        CAPTURE(c.name);
        GPT2Config cfg = case_config(c);
        std::vector<float> params = case_params(cfg, 100 + i);
        GPT2<double> ref(cfg);
        ref.params.assign(params.begin(), params.end());
        ref.forward(tokens.data(), nullptr, B, T);
        GPT2<float> f32(cfg);
        f32.params = params;
        f32.forward(tokens.data(), nullptr, B, T);
        const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
        std::vector<double> ref_logits, cpp32;
        for (int r = 0; r < B * T; r++)
            for (int v = 0; v < V; v++) {
                ref_logits.push_back(ref.acts.logits[(size_t)r * Vp + v]);
                cpp32.push_back(f32.acts.logits[(size_t)r * Vp + v]);
            }
        std::vector<double> mod32 = read_doubles(dir.path + "/" + c.name + "_logits32.bin");
        std::vector<double> mod64 = read_doubles(dir.path + "/" + c.name + "_logits64.bin");
        REQUIRE(mod32.size() == ref_logits.size());
        REQUIRE(mod64.size() == ref_logits.size());
        double e64, e32, ecpp, scale;
        max_errors(mod64, ref_logits, &e64, &scale);
        max_errors(mod32, ref_logits, &e32, &scale);
        max_errors(cpp32, ref_logits, &ecpp, &scale);
        MESSAGE(c.name << ": max |logit error| / max |logit| (" << scale << "): module float64 " << e64 / scale
                       << ", module float32 " << e32 / scale << ", C++ float32 back end " << ecpp / scale);
        CHECK(e64 <= 1e-9 * scale);
        CHECK(e32 <= std::max(1e-5 * scale, 4 * ecpp));
        CHECK(scale > 0.1);  // logits of a model, not zeros

        // export -> import -> export: the same files; the imported checkpoint is the original
        for (const char* file : {"config.json", "pytorch_model.bin", "modeling_lssar_gpt2.py"}) {
            std::string a = read_file(dir.path + "/" + c.name + "_export/" + file);
            CHECK_MESSAGE(a.size() > 100, file);
            CHECK_MESSAGE(a == read_file(dir.path + "/" + c.name + "_export2/" + file), file << " differs");
        }
        Checkpoint back;
        checkpoint_read(dir.path + "/" + c.name + "_imported.bin", back);
        CHECK(back.params == params);
        CHECK(back.train.step == 7);
        CHECK(checkpoint_config_mismatch("imported", back.config, cfg, true).empty());
        CHECK(back.config.learn_p == cfg.learn_p);
        CHECK(back.config.attn_len == cfg.attn_len);
    }
    std::string corrupt = read_file(dir.path + "/refused_corrupt.txt");
    CHECK(corrupt.find("exit 1") == 0);
    CHECK(corrupt.find("corrupt.bin: checksum mismatch: the weights are corrupt") != std::string::npos);
    std::string missing = read_file(dir.path + "/refused_missing.txt");
    CHECK(missing.find("exit 1") == 0);
    CHECK(missing.find("missing.pt: no tensor 'transformer.h.1.mlp.c_fc.bias'") != std::string::npos);
    std::string shape = read_file(dir.path + "/refused_shape.txt");
    CHECK(shape.find("exit 1") == 0);
    CHECK(shape.find("'transformer.h.0.attn.c_proj.weight' has shape (3, 3), the config needs (32, 32)") !=
          std::string::npos);
}
