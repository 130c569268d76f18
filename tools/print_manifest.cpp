// The manifest: the attention variants (attention/attention_kind.h's ATTN_VARIANTS), the parameter
// tensors (model/gpt2_config.h's GPT2_PARAM_TENSORS) and the activations (model/gpt2_sizes.h's
// GPT2_ACTIVATIONS) as JSON, for the scripts in other languages: the PyTorch test model, the
// export and the shell scripts read it (build/manifest.json, `make -s print-manifest`) instead of
// keeping copies. A shape is a list of expressions in the variables of "shape_vars"; a per-layer
// tensor's shape is one layer's slice (the buffer stacks L of them).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/gpt2_sizes.h"

static const char* score_name(AttnScore s) {
    switch (s) {
    case ATTN_SCORE_DOT: return "dot";
    case ATTN_SCORE_DOT_LOGN: return "dot_logn";
    case ATTN_SCORE_COS_LEN: return "cos_len";
    case ATTN_SCORE_SSMAX: return "ssmax";
    }
    return "?";
}
static const char* phi_name(AttnPhi p) {
    switch (p) {
    case ATTN_PHI_EXP: return "exp";
    case ATTN_PHI_SOFTPLUS: return "softplus";
    case ATTN_PHI_SIGMOID: return "sigmoid";
    case ATTN_PHI_RELU: return "relu";
    }
    return "?";
}
static const char* norm_name(AttnNorm n) {
    switch (n) {
    case ATTN_NORM_L1: return "l1";
    case ATTN_NORM_NONE: return "none";
    case ATTN_NORM_MEAN: return "mean";
    }
    return "?";
}
static const char* head_param_name(AttnHeadParam h) {
    switch (h) {
    case ATTN_HEAD_NONE: return "none";
    case ATTN_HEAD_P: return "p";
    case ATTN_HEAD_S: return "s";
    }
    return "?";
}
static const char* init_name(ParamInit i) {
    switch (i) {
    case INIT_ZEROS: return "zeros";
    case INIT_ONES: return "ones";
    case INIT_WTE: return "wte";
    case INIT_NORMAL: return "normal";
    case INIT_RESIDUAL: return "residual";
    case INIT_THETA0: return "theta0";
    case INIT_SSMAX_S0: return "ssmax_s0";
    }
    return "?";
}

// "(3 * C, C)" -> ["3 * C", "C"]
static std::string shape_json(const char* shape) {
    std::string s(shape), out = "[", dim;
    if (!s.empty() && s.front() == '(') s = s.substr(1, s.size() - 2);
    auto flush = [&] {
        size_t a = dim.find_first_not_of(' '), b = dim.find_last_not_of(' ');
        out += (out.size() > 1 ? ", \"" : "\"") + dim.substr(a, b - a + 1) + "\"";
        dim.clear();
    };
    for (char ch : s) {
        if (ch == ',') flush();
        else dim += ch;
    }
    flush();
    return out + "]";
}

// the shortest decimal that reads back as x
static std::string shortest(double x) {
    char buf[32];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, x);
        if (strtod(buf, nullptr) == x) break;
    }
    return buf;
}

static const char* json_bool(bool b) { return b ? "true" : "false"; }

int main() {
    printf("{\n  \"format\": \"lssar.cu manifest 1\",\n");
    printf("  \"constants\": {\"SSMAX_S0\": %s, \"ATTN_P_INT_MAX\": %d},\n", shortest(SSMAX_S0).c_str(), ATTN_P_INT_MAX);
    printf("  \"shape_vars\": {\"B\": \"batch\", \"T\": \"time\", \"C\": \"channels\", \"NH\": \"heads\", "
           "\"Vp\": \"padded vocabulary\", \"NHP\": \"NH with learned p, else 0\", \"NHS\": \"NH for ssmax, else 0\"},\n");
    printf("  \"variants\": [\n");
    for (int i = 0; i < ATTN_NUM_KINDS; i++) {
        const AttnVariant& v = ATTN_VARIANT_TABLE[i];
        printf("    {\"kind\": %d, \"name\": \"%s\", \"score\": \"%s\", \"phi\": \"%s\", \"norm\": \"%s\", "
               "\"reweight\": %s, \"head_param\": \"%s\", \"has_len\": %s, \"log_len_scaling\": %s, \"test_p\": %g}%s\n",
               (int)v.kind, v.name, score_name(v.score), phi_name(v.phi), norm_name(v.norm), json_bool(v.reweight),
               head_param_name(attn_head_param(v.kind)), json_bool(attn_has_len(v.kind)),
               json_bool(attn_log_scales(v.kind)), (double)v.test_p, i + 1 < ATTN_NUM_KINDS ? "," : "");
    }
    printf("  ],\n  \"params\": [\n");
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const ParamTensorInfo& p = PARAM_TENSOR_TABLE[i];
        printf("    {\"name\": \"%s\", \"torch_name\": \"%s\", \"per_layer\": %s, \"shape\": %s, \"decays\": %s, "
               "\"init\": \"%s\"}%s\n",
               p.name, p.torch_name, json_bool(p.per_layer), shape_json(p.shape).c_str(), json_bool(p.decays),
               init_name(p.init), i + 1 < NUM_PARAM_TENSORS ? "," : "");
    }
    printf("  ],\n  \"activations\": [\n");
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
        const ActivationInfo& a = ACTIVATION_TABLE[i];
        printf("    {\"name\": \"%s\", \"per_layer\": %s, \"shape\": %s, \"cuda_type\": \"%s\", \"on_cuda\": %s}%s\n",
               a.name, json_bool(a.per_layer), shape_json(a.shape).c_str(), a.cuda_type, json_bool(a.on_cuda),
               i + 1 < NUM_ACTIVATION_TENSORS ? "," : "");
    }
    printf("  ]\n}\n");
    return 0;
}
