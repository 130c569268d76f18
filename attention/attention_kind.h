// The attention family: every variant is a score, a positivity phi, a normalisation and an
// optional re-weighting stage (doc/attention.md, section 'The attention family'). One line of
// ATTN_VARIANTS per variant (below).
//
//   score   dot       s = q.k / sqrt(hd)
//           dot_logn  s = q.k / sqrt(hd) - ln(n_t)            (the sigmoid attention's bias)
//           cos_len   s = ln(hd) ln(n_t) q/|q| . k/|k|        (LSSA's length-scaled cosine)
//           ssmax     s = s_h ln(n_t) q.k / sqrt(hd)          (scalable softmax; s_h learned per layer, head)
//   phi     exp, softplus, sigmoid, relu
//   norm    l1        A = phi / sum_j phi (exp: max-shifted, the usual softmax)
//           none      A = phi
//           mean      A = phi / n_t
//   rw(p)   x = n_t A - o_t, W = relu(x)^p / sum_j relu(x)^p (max-normalised), o_t = [t >= 3]
// n_t = t + 1 is the number of keys row t sees. The length of dot_logn's bias and of mean's scale
// is n_t, or with attn_len = L > 0 (the trainer's -tl 1: the training length) the constant L
// (attn_len_n below; doc/attention.md, section 'Choices the cited papers leave open'). For dot
// scores with exp (softmax, softmax_rw) attn_len = L > 1 is log-length scaling: the scores of row t
// are multiplied by max(1, ln(n_t) / ln(L)) (attn_log_len_factor), 1 within the training length.
// A variant's head parameter (attn_head_param) is one scalar per layer and head: re-weighting's p,
// ssmax's s; the attention functions take it as p (one for every head) or p_head[h].
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

enum AttnScore { ATTN_SCORE_DOT, ATTN_SCORE_DOT_LOGN, ATTN_SCORE_COS_LEN, ATTN_SCORE_SSMAX };
enum AttnPhi { ATTN_PHI_EXP, ATTN_PHI_SOFTPLUS, ATTN_PHI_SIGMOID, ATTN_PHI_RELU };
enum AttnNorm { ATTN_NORM_L1, ATTN_NORM_NONE, ATTN_NORM_MEAN };

// The variants, one line each: X(kind, name, score, phi, norm, reweight, test_p). The kind's number
// is the line's position, stored in checkpoints: never reorder, only append. name is make's ATTN=
// value (the Makefile reads the names from these lines). test_p: the re-weighting's p the tests of
// every variant use (1 without re-weighting; p = 3 where p = 15's amplification of float32 rounding
// would leave the float32 comparisons nothing to check). Everything else derives from this list:
// AttnKind, ATTN_VARIANT_TABLE, the build's variants, the manifest (tools/print_manifest.cpp, read
// by the Python and shell scripts) and the tests of every variant.
#define ATTN_VARIANTS(X)                                                \
    X(ATTN_SOFTMAX, "softmax", DOT, EXP, L1, false, 1)                  \
    X(ATTN_LSSA, "lssa", COS_LEN, SOFTPLUS, L1, false, 1)               \
    X(ATTN_LSSAR, "lssar", COS_LEN, SOFTPLUS, L1, true, 15)             \
    X(ATTN_SIGMOID, "sigmoid", DOT_LOGN, SIGMOID, NONE, false, 1)       \
    X(ATTN_RELU, "relu", DOT, RELU, MEAN, false, 1)                     \
    X(ATTN_SOFTMAX_RW, "softmax_rw", DOT, EXP, L1, true, 3)             \
    X(ATTN_SIGMOID_L1_RW, "sigmoid_l1_rw", COS_LEN, SIGMOID, L1, true, 15) \
    X(ATTN_RELU_L1_RW, "relu_l1_rw", COS_LEN, RELU, L1, true, 3)        \
    X(ATTN_SSMAX, "ssmax", SSMAX, EXP, L1, false, 1)                    \
    ATTN_EXTRA_VARIANTS(X)

// More variants appended by a build (-D'ATTN_EXTRA_VARIANTS(X)=X(...)'): the test of a variant
// added by one line (test/test.mk, scratch_variant) uses it; nothing else does.
#ifndef ATTN_EXTRA_VARIANTS
#define ATTN_EXTRA_VARIANTS(X)
#endif

enum AttnKind {
#define ATTN_KIND_ENUM(kind, ...) kind,
    ATTN_VARIANTS(ATTN_KIND_ENUM)
#undef ATTN_KIND_ENUM
    ATTN_NUM_KINDS
};

struct AttnVariant {
    AttnKind kind;
    const char* name;  // make's ATTN= value
    AttnScore score;
    AttnPhi phi;
    AttnNorm norm;
    bool reweight;
    float test_p;  // the p of the tests of every variant
};

constexpr AttnVariant ATTN_VARIANT_TABLE[ATTN_NUM_KINDS] = {
#define ATTN_VARIANT_ROW(kind, name, score, phi, norm, reweight, test_p) \
    {kind, name, ATTN_SCORE_##score, ATTN_PHI_##phi, ATTN_NORM_##norm, reweight, test_p},
    ATTN_VARIANTS(ATTN_VARIANT_ROW)
#undef ATTN_VARIANT_ROW
};

// Every kind, in order (for loops over the variants).
constexpr AttnKind ATTN_ALL_KINDS[ATTN_NUM_KINDS] = {
#define ATTN_KIND_ITEM(kind, ...) kind,
    ATTN_VARIANTS(ATTN_KIND_ITEM)
#undef ATTN_KIND_ITEM
};

constexpr AttnVariant attn_variant(AttnKind kind) { return ATTN_VARIANT_TABLE[kind]; }
// The parts of variant K as compile-time constants (what the kernels use: scalar constants
// need no storage in device code, unlike the table).
template <AttnKind K> struct AttnTraits {
    static constexpr AttnScore score = ATTN_VARIANT_TABLE[K].score;
    static constexpr AttnPhi phi = ATTN_VARIANT_TABLE[K].phi;
    static constexpr AttnNorm norm = ATTN_VARIANT_TABLE[K].norm;
    static constexpr bool reweight = ATTN_VARIANT_TABLE[K].reweight;
    static constexpr bool cos_len = score == ATTN_SCORE_COS_LEN;
    static constexpr bool ssmax = score == ATTN_SCORE_SSMAX;
    static constexpr bool log_len = score == ATTN_SCORE_DOT && phi == ATTN_PHI_EXP;  // attn_log_scales
};

constexpr bool attn_valid(int kind) { return kind >= 0 && kind < ATTN_NUM_KINDS; }
constexpr bool attn_reweights(AttnKind kind) { return attn_variant(kind).reweight; }

// Log-length scaling (attn_len = L > 1 on dot scores with exp): row t's scores times
// max(1, ln(n_t) / ln(L)).
constexpr bool attn_log_scales(AttnKind kind) {
    return attn_variant(kind).score == ATTN_SCORE_DOT && attn_variant(kind).phi == ATTN_PHI_EXP;
}

// The variants whose definition holds a length, where attn_len applies: dot_logn's bias -ln(n),
// mean's scale 1/n, and log-length scaling's threshold.
constexpr bool attn_has_len(AttnKind kind) {
    return attn_variant(kind).score == ATTN_SCORE_DOT_LOGN || attn_variant(kind).norm == ATTN_NORM_MEAN ||
           attn_log_scales(kind);
}
// That n for row t: n_t = t + 1 (attn_len = 0), or the constant attn_len > 0 (not for log-length
// scaling, whose n is always n_t).
constexpr int attn_len_n(int t, int attn_len) { return attn_len > 0 ? attn_len : t + 1; }
// Log-length scaling's factor on row t's scores, in float64 (the definition; the back ends compute
// it in their own precision): exactly 1 for n_t <= L and for attn_len = 0.
inline double attn_log_len_factor(int t, int attn_len) {
    int n = t + 1;
    return attn_len > 1 && n > attn_len ? std::log((double)n) / std::log((double)attn_len) : 1.0;
}

// The head parameter: re-weighting's p, ssmax's s (learned per layer and head, starting at
// SSMAX_S0); none for the other variants.
enum AttnHeadParam { ATTN_HEAD_NONE, ATTN_HEAD_P, ATTN_HEAD_S };
constexpr AttnHeadParam attn_head_param(AttnKind kind) {
    return attn_variant(kind).reweight ? ATTN_HEAD_P
           : attn_variant(kind).score == ATTN_SCORE_SSMAX ? ATTN_HEAD_S : ATTN_HEAD_NONE;
}
// ssmax's s at initialisation: 0.43, the value in Figure 1 of "Scalable-Softmax Is Superior for
// Attention" (Nakanishi, arXiv 2501.19399v1), the only value of s that paper states.
constexpr double SSMAX_S0 = 0.43;

inline const char* attn_kind_name(AttnKind kind) { return attn_valid(kind) ? attn_variant(kind).name : "unknown"; }

// "softmax, lssa, ..." for error messages.
inline std::string attn_kind_list() {
    std::string s;
    for (const AttnVariant& v : ATTN_VARIANT_TABLE) s += (s.empty() ? "" : ", ") + std::string(v.name);
    return s;
}

// "sigmoid, relu, ...": the variants where attn_len is defined (attn_has_len), for error messages.
inline std::string attn_len_kind_list() {
    std::string s;
    for (const AttnVariant& v : ATTN_VARIANT_TABLE)
        if (attn_has_len(v.kind)) s += (s.empty() ? "" : ", ") + std::string(v.name);
    return s;
}

// "lssar, softmax_rw, ...": the variants with re-weighting, for error messages.
inline std::string attn_reweight_kind_list() {
    std::string s;
    for (const AttnVariant& v : ATTN_VARIANT_TABLE)
        if (v.reweight) s += (s.empty() ? "" : ", ") + std::string(v.name);
    return s;
}

// "" if attn_len suits variant kind, else why not: negative, set on a variant without a length, or
// 1 for log-length scaling (ln(1) = 0 divides).
inline std::string attn_len_error(AttnKind kind, int attn_len) {
    if (attn_len < 0) return "attn_len = " + std::to_string(attn_len) + " must be >= 0 (0: the row's n_t = t + 1)";
    if (attn_len > 0 && !attn_has_len(kind))
        return "attn_len = " + std::to_string(attn_len) + " is defined for " + attn_len_kind_list() + " only (the -ln(n) "
               "bias, the 1/n scale and log-length scaling of dot scores with exp); " + attn_kind_name(kind) +
               " has no length in its definition";
    if (attn_len == 1 && attn_log_scales(kind))
        return "attn_len = 1: log-length scaling divides by ln(attn_len), which must be > 0 (attn_len >= 2)";
    return "";
}

// Returns false for a name that is not a variant.
inline bool attn_kind_from_name(const char* name, AttnKind* kind) {
    for (const AttnVariant& v : ATTN_VARIANT_TABLE) {
        if (strcmp(name, v.name) == 0) { *kind = v.kind; return true; }
    }
    return false;
}

// The same at compile time (ATTN_NUM_KINDS for an unknown name).
constexpr bool attn_names_equal(const char* a, const char* b) {
    return *a == *b && (*a == 0 || attn_names_equal(a + 1, b + 1));
}
constexpr AttnKind attn_kind_named(const char* name, int i = 0) {
    return i == ATTN_NUM_KINDS ? ATTN_NUM_KINDS
           : attn_names_equal(name, ATTN_VARIANT_TABLE[i].name) ? (AttnKind)i
                                                                 : attn_kind_named(name, i + 1);
}

// Integer p up to this takes the CPU reference's repeated-squaring path (the CUDA kernels take
// the general power for every p).
constexpr int ATTN_P_INT_MAX = 64;

// The variant a program is built for: make ATTN=<name> passes -DATTN_NAME='"<name>"'.
// Programs built so hold that one variant's code only (attn_dispatch below); test programs,
// built without it, hold every variant.
#ifdef ATTN_NAME
constexpr AttnKind ATTN_BUILT = attn_kind_named(ATTN_NAME);
static_assert(ATTN_BUILT != ATTN_NUM_KINDS, "ATTN_NAME is not a variant of ATTN_VARIANT_TABLE");
#endif

template <AttnKind K> using AttnKindC = std::integral_constant<AttnKind, K>;

// Calls f(AttnKindC<kind>{}) with the run-time kind as a compile-time constant. In a program
// built for one variant, only that one is instantiated; another kind is a programming error
// (the tools refuse other variants' checkpoints before they get here).
template <class F, int I = 0>
void attn_dispatch(AttnKind kind, F&& f) {
#ifdef ATTN_NAME
    if (kind != ATTN_BUILT) {
        fprintf(stderr, "[ERROR] attention: this program is built for ATTN=%s, asked for %s\n",
                attn_kind_name(ATTN_BUILT), attn_kind_name(kind));
        exit(EXIT_FAILURE);
    }
    f(AttnKindC<ATTN_BUILT>{});
#else
    if constexpr (I < ATTN_NUM_KINDS) {
        if (kind == (AttnKind)I) { f(AttnKindC<(AttnKind)I>{}); return; }
        attn_dispatch<F, I + 1>(kind, std::forward<F>(f));
    } else {
        fprintf(stderr, "[ERROR] attention: unknown variant %d (known: %s)\n", (int)kind, attn_kind_list().c_str());
        exit(EXIT_FAILURE);
    }
#endif
}
