/*
cuDNN's fused flash attention (scaled dot-product attention: causal, bf16 in and out, fp32 stats) as
the baseline of the attention dev benchmarks (dev/attention_forward.cu, dev/attention_backward.cu).
Built only when the build defines ATTN_DEV_CUDNN (dev/dev.mk does so where cuDNN's header
and library are installed). Written against cuDNN's backend graph API (cudnn_graph.h) alone: the
graphs below are the node patterns cuDNN's SDPA engines recognise.

The same tensors as the project's attention (attention/attention.cuh), described as strided views,
so neither side copies anything (C = NH * hd):
  qkv    (B, T, 3, NH, hd) bf16  q, k, v as (b, h, s, d) views: strides (3 T C, hd, 3 C, 1),
                                 offsets 0, C, 2 C; k enters the graphs transposed, (b, h, d, s)
  out    (B, T, NH, hd)    bf16  (b, h, s, d): strides (T C, hd, C, 1)
  stats  (B, NH, T, 1)     fp32  log sum_j exp(s_tj) of each row: the project's stats[..., 0] times
                                 ln 2 (the project's kernels save it in log2 units)
  dout   (B, T, NH, hd)    bf16  as out
  dqkv   (B, T, 3, NH, hd) bf16  written (=), as attention_backward_cuda
Scores s = q.k / sqrt(hd), as the project's softmax kernel; RoPE is already in qkv for both. That
is the one variant these graphs compute (cudnn_attention_computes): one scale for every score, so
neither ssmax (s_h ln(n_t) per row and head) nor log-length scaling (attn_len > 1: a factor per row
beyond L) fits them; those, like every other variant, run on the family's kernels
(attention/attention.cuh).

Forward graph, 14 nodes (S is (B, NH, T, T), row values (B, NH, T, 1), all fp32 unless said):
  S = Q K^T;  S1 = S * scale;  row, col = GEN_INDEX(S1) on axes 2, 3;  keep = row >= col;
  S2 = keep ? S1 : -inf;  M = max_j S2;  E = exp(S2 - M);  Z = sum_j E;  stats = M + log Z;
  P = E / Z (bf16);  O = P V
Backward graph, 22 nodes (the forward's recomputation, then the four matmuls of the gradients):
  D = sum_d dO * O (a workspace tensor);  S = Q K^T;  S1 = S * scale;  S2 = S1 - stats;
  the causal mask on S2 as above;  P = exp(S3);  dV = P^T dO (P^T a bf16 reshape);
  dP = dO V^T;  dS = (dP - D) * P * scale;  dK = dS^T Q (bf16 reshape);
  dQacc = dS K (fp32 workspace; K from K^T by a reshape);  dQ = identity(dQacc) (bf16)

Plans are cached by (direction, B, T, NH, hd); a variant pack is rebuilt only when the pointers
change, so a timed call is one cudnnBackendExecute. Any cuDNN error makes the launcher return false
with cudnn_attention_error() naming the step; nothing here exits.
*/
#pragma once
#ifdef ATTN_DEV_CUDNN

#include <cudnn.h>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>
#include "attention/attention_kind.h"
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// ----------------------------------------------------------------------------
// errors: every backend call names its step

inline std::string& cudnn_attention_error_message() {
    static std::string message;
    return message;
}
// The last failure of a launcher: the step, cuDNN's status and its last error string.
inline const std::string& cudnn_attention_error() { return cudnn_attention_error_message(); }

inline bool cudnn_attn_check(cudnnStatus_t status, const std::string& step) {
    if (status == CUDNN_STATUS_SUCCESS) return true;
    char detail[1024] = "";
    cudnnGetLastErrorString(detail, sizeof(detail));
    std::string why = detail;  // one line, at most 300 characters: it ends up in a table row
    for (char& c : why) c = (c == '\n' || c == '\r') ? ' ' : c;
    if (why.size() > 300) why = why.substr(0, 300) + "...";
    cudnn_attention_error_message() = step + ": " + cudnnGetErrorString(status) +
                                      (why.empty() ? std::string() : " (" + why + ")");
    return false;
}

// ----------------------------------------------------------------------------
// graph construction: a builder that owns every descriptor it creates and stops at the first error

typedef std::array<int64_t, 4> Dims4;

// uids of the tensors in the variant pack; virtual tensors count up from CUDNN_UID_VIRTUAL
enum : int64_t {
    CUDNN_UID_Q = 1, CUDNN_UID_K, CUDNN_UID_V, CUDNN_UID_O, CUDNN_UID_STATS, CUDNN_UID_DO, CUDNN_UID_DQ,
    CUDNN_UID_DK, CUDNN_UID_DV, CUDNN_UID_SCALE, CUDNN_UID_NEG_INF, CUDNN_UID_ONE, CUDNN_UID_SOFTMAX_SUM,
    CUDNN_UID_DQ_ACCUM, CUDNN_UID_VIRTUAL = 100
};

struct CudnnGraphBuilder {
    bool ok = true;
    std::vector<cudnnBackendDescriptor_t> owned;  // destroyed by cudnn_graph_release
    std::vector<cudnnBackendDescriptor_t> ops;    // operation nodes in graph order
    std::vector<std::string> op_names;
    int64_t next_virtual_uid = CUDNN_UID_VIRTUAL;
};

inline void cudnn_graph_release(std::vector<cudnnBackendDescriptor_t>& owned) {
    for (size_t i = owned.size(); i-- > 0;) cudnnBackendDestroyDescriptor(owned[i]);
    owned.clear();
}

inline cudnnBackendDescriptor_t cudnn_create(CudnnGraphBuilder& g, cudnnBackendDescriptorType_t type,
                                             const std::string& what) {
    if (!g.ok) return nullptr;
    cudnnBackendDescriptor_t d = nullptr;
    g.ok = cudnn_attn_check(cudnnBackendCreateDescriptor(type, &d), what + ": cudnnBackendCreateDescriptor");
    if (g.ok) g.owned.push_back(d);
    return g.ok ? d : nullptr;
}

inline void cudnn_set_attr(CudnnGraphBuilder& g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                           const char* name_str, cudnnBackendAttributeType_t type, int64_t count, const void* value,
                           const std::string& what) {
    if (!g.ok) return;
    g.ok = cudnn_attn_check(cudnnBackendSetAttribute(d, name, type, count, value),
                            what + ": cudnnBackendSetAttribute(" + name_str + ")");
}
#define CUDNN_SET(g, d, name, type, count, value, what) cudnn_set_attr(g, d, name, #name, type, count, value, what)

inline void cudnn_finalize(CudnnGraphBuilder& g, cudnnBackendDescriptor_t d, const std::string& what) {
    if (!g.ok) return;
    g.ok = cudnn_attn_check(cudnnBackendFinalize(d), what + ": cudnnBackendFinalize");
}

// A tensor: 16-byte aligned, virtual tensors get the next free uid.
inline cudnnBackendDescriptor_t cudnn_tensor(CudnnGraphBuilder& g, const char* name, cudnnDataType_t type,
                                             Dims4 dims, Dims4 strides, int64_t uid, bool is_virtual,
                                             bool by_value = false) {
    std::string what = std::string("tensor ") + name;
    cudnnBackendDescriptor_t t = cudnn_create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t alignment = 16;
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, what);
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), what);
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), what);
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, what);
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, what);
    CUDNN_SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, what);
    cudnn_finalize(g, t, what);
    return t;
}
inline cudnnBackendDescriptor_t cudnn_virtual(CudnnGraphBuilder& g, const char* name, cudnnDataType_t type,
                                              Dims4 dims, Dims4 strides) {
    return cudnn_tensor(g, name, type, dims, strides, g.next_virtual_uid++, true);
}
// an fp32 scalar passed by value (the variant pack points at a host float)
inline cudnnBackendDescriptor_t cudnn_scalar(CudnnGraphBuilder& g, const char* name, int64_t uid) {
    return cudnn_tensor(g, name, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, uid, false, true);
}

inline void cudnn_add_op(CudnnGraphBuilder& g, cudnnBackendDescriptor_t op, const std::string& what) {
    cudnn_finalize(g, op, what);
    if (!g.ok) return;
    g.ops.push_back(op);
    g.op_names.push_back(what);
}

// y = mode(x [, b [, t]]) computed in `precision`; `axis` only for GEN_INDEX.
// BINARY_SELECT: y = t ? x : b.  CMP_GE: y = x >= b.
inline void cudnn_pointwise(CudnnGraphBuilder& g, const char* name, cudnnPointwiseMode_t mode,
                            cudnnDataType_t precision, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                            cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis = -1) {
    std::string what = std::string("pointwise ") + name;
    cudnnBackendDescriptor_t pw = cudnn_create(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    CUDNN_SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    CUDNN_SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision, what);
    if (axis >= 0) CUDNN_SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    cudnn_finalize(g, pw, what);
    cudnnBackendDescriptor_t op = cudnn_create(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    if (b) CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    if (t) CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    cudnn_add_op(g, op, what);
}

// c = a b over the last two dimensions (batched over the first two), fp32 accumulation
inline void cudnn_matmul(CudnnGraphBuilder& g, const char* name, cudnnBackendDescriptor_t a,
                         cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    std::string what = std::string("matmul ") + name;
    cudnnBackendDescriptor_t mm = cudnn_create(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    CUDNN_SET(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, what);
    cudnn_finalize(g, mm, what);
    cudnnBackendDescriptor_t op = cudnn_create(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, what);
    cudnn_add_op(g, op, what);
}

// y = reduce(x) over the dimensions where y has size 1, fp32
inline void cudnn_reduction(CudnnGraphBuilder& g, const char* name, cudnnReduceTensorOp_t reduce,
                            cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    std::string what = std::string("reduction ") + name;
    cudnnBackendDescriptor_t rd = cudnn_create(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    CUDNN_SET(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce, what);
    CUDNN_SET(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, what);
    cudnn_finalize(g, rd, what);
    cudnnBackendDescriptor_t op = cudnn_create(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, what);
    cudnn_add_op(g, op, what);
}

// y = x seen through y's dimensions and strides (the transposes of the backward)
inline void cudnn_reshape(CudnnGraphBuilder& g, const char* name, cudnnBackendDescriptor_t x,
                          cudnnBackendDescriptor_t y) {
    std::string what = std::string("reshape ") + name;
    cudnnBackendDescriptor_t op = cudnn_create(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    CUDNN_SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    cudnn_add_op(g, op, what);
}

// ----------------------------------------------------------------------------
// the two graphs

// Shapes of one attention call, as the views described at the top of this file.
struct CudnnAttnShape {
    int64_t B, T, NH, hd, C;
    Dims4 bhsd() const { return {B, NH, T, hd}; }
    Dims4 bhds() const { return {B, NH, hd, T}; }
    Dims4 qkv_strides() const { return {3 * T * C, hd, 3 * C, 1}; }
    Dims4 qkv_strides_t() const { return {3 * T * C, hd, 1, 3 * C}; }  // (b, h, d, s)
    Dims4 out_strides() const { return {T * C, hd, C, 1}; }
    Dims4 scores() const { return {B, NH, T, T}; }
    Dims4 scores_strides() const { return {NH * T * T, T * T, T, 1}; }
    Dims4 scores_strides_t() const { return {NH * T * T, T * T, 1, T}; }  // the transpose, same memory
    Dims4 rows() const { return {B, NH, T, 1}; }
    Dims4 rows_strides() const { return {NH * T, T, 1, 1}; }
    Dims4 packed_strides() const { return {NH * T * hd, T * hd, hd, 1}; }  // (b, h, s, d) packed
};

// The causal mask: y = (row >= col) ? x : neg_inf, x of the scores' shape.
inline cudnnBackendDescriptor_t cudnn_causal_mask(CudnnGraphBuilder& g, const CudnnAttnShape& s,
                                                  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t neg_inf) {
    cudnnBackendDescriptor_t row = cudnn_virtual(g, "row index", CUDNN_DATA_INT32, s.scores(), s.scores_strides());
    cudnnBackendDescriptor_t col = cudnn_virtual(g, "col index", CUDNN_DATA_INT32, s.scores(), s.scores_strides());
    cudnnBackendDescriptor_t keep = cudnn_virtual(g, "keep", CUDNN_DATA_BOOLEAN, s.scores(), s.scores_strides());
    cudnnBackendDescriptor_t y = cudnn_virtual(g, "masked scores", CUDNN_DATA_FLOAT, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "row = GEN_INDEX(axis 2)", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, x, nullptr, nullptr,
                    row, 2);
    cudnn_pointwise(g, "col = GEN_INDEX(axis 3)", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, x, nullptr, nullptr,
                    col, 3);
    cudnn_pointwise(g, "keep = row >= col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    cudnn_pointwise(g, "masked = keep ? s : -inf", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neg_inf,
                    keep, y);
    return y;
}

inline void cudnn_build_forward_ops(CudnnGraphBuilder& g, const CudnnAttnShape& s) {
    const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    auto Q = cudnn_tensor(g, "Q", bf16, s.bhsd(), s.qkv_strides(), CUDNN_UID_Q, false);
    auto Kt = cudnn_tensor(g, "K^T", bf16, s.bhds(), s.qkv_strides_t(), CUDNN_UID_K, false);
    auto V = cudnn_tensor(g, "V", bf16, s.bhsd(), s.qkv_strides(), CUDNN_UID_V, false);
    auto O = cudnn_tensor(g, "O", bf16, s.bhsd(), s.out_strides(), CUDNN_UID_O, false);
    auto stats = cudnn_tensor(g, "stats", f32, s.rows(), s.rows_strides(), CUDNN_UID_STATS, false);
    auto scale = cudnn_scalar(g, "attn scale", CUDNN_UID_SCALE);
    auto neg_inf = cudnn_scalar(g, "-inf", CUDNN_UID_NEG_INF);

    auto S = cudnn_virtual(g, "S", f32, s.scores(), s.scores_strides());
    cudnn_matmul(g, "S = Q K^T", Q, Kt, S);
    auto S1 = cudnn_virtual(g, "S1", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "S1 = S * scale", CUDNN_POINTWISE_MUL, f32, S, scale, nullptr, S1);
    auto S2 = cudnn_causal_mask(g, s, S1, neg_inf);
    auto M = cudnn_virtual(g, "M", f32, s.rows(), s.rows_strides());
    cudnn_reduction(g, "M = max_j S2", CUDNN_REDUCE_TENSOR_MAX, S2, M);
    auto S3 = cudnn_virtual(g, "S3", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "S3 = S2 - M", CUDNN_POINTWISE_SUB, f32, S2, M, nullptr, S3);
    auto E = cudnn_virtual(g, "E", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "E = exp(S3)", CUDNN_POINTWISE_EXP, f32, S3, nullptr, nullptr, E);
    auto Z = cudnn_virtual(g, "Z", f32, s.rows(), s.rows_strides());
    cudnn_reduction(g, "Z = sum_j E", CUDNN_REDUCE_TENSOR_ADD, E, Z);
    auto logZ = cudnn_virtual(g, "log Z", f32, s.rows(), s.rows_strides());
    cudnn_pointwise(g, "log Z", CUDNN_POINTWISE_LOG, f32, Z, nullptr, nullptr, logZ);
    cudnn_pointwise(g, "stats = M + log Z", CUDNN_POINTWISE_ADD, f32, M, logZ, nullptr, stats);
    auto P = cudnn_virtual(g, "P", bf16, s.scores(), s.scores_strides());  // bf16: the A operand of P V
    cudnn_pointwise(g, "P = E / Z", CUDNN_POINTWISE_DIV, f32, E, Z, nullptr, P);
    cudnn_matmul(g, "O = P V", P, V, O);
}

inline void cudnn_build_backward_ops(CudnnGraphBuilder& g, const CudnnAttnShape& s) {
    const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    auto Q = cudnn_tensor(g, "Q", bf16, s.bhsd(), s.qkv_strides(), CUDNN_UID_Q, false);
    auto Kt = cudnn_tensor(g, "K^T", bf16, s.bhds(), s.qkv_strides_t(), CUDNN_UID_K, false);
    auto Vt = cudnn_tensor(g, "V^T", bf16, s.bhds(), s.qkv_strides_t(), CUDNN_UID_V, false);
    auto O = cudnn_tensor(g, "O", bf16, s.bhsd(), s.out_strides(), CUDNN_UID_O, false);
    auto dO = cudnn_tensor(g, "dO", bf16, s.bhsd(), s.out_strides(), CUDNN_UID_DO, false);
    auto stats = cudnn_tensor(g, "stats", f32, s.rows(), s.rows_strides(), CUDNN_UID_STATS, false);
    auto dQ = cudnn_tensor(g, "dQ", bf16, s.bhsd(), s.qkv_strides(), CUDNN_UID_DQ, false);
    auto dK = cudnn_tensor(g, "dK", bf16, s.bhsd(), s.qkv_strides(), CUDNN_UID_DK, false);
    auto dV = cudnn_tensor(g, "dV", bf16, s.bhsd(), s.qkv_strides(), CUDNN_UID_DV, false);
    auto scale = cudnn_scalar(g, "attn scale", CUDNN_UID_SCALE);
    auto neg_inf = cudnn_scalar(g, "-inf", CUDNN_UID_NEG_INF);
    auto one = cudnn_scalar(g, "one", CUDNN_UID_ONE);
    // workspace tensors the engines expect in memory: D (B, NH, T, 1) and dQ's fp32 accumulator
    auto softmax_sum = cudnn_tensor(g, "D", f32, s.rows(), s.rows_strides(), CUDNN_UID_SOFTMAX_SUM, false);
    auto dQ_accum = cudnn_tensor(g, "dQ accum", f32, s.bhsd(), s.packed_strides(), CUDNN_UID_DQ_ACCUM, false);

    // D = sum_d dO * O
    auto dOO = cudnn_virtual(g, "dO * O", f32, s.bhsd(), s.out_strides());
    cudnn_pointwise(g, "dO * O", CUDNN_POINTWISE_MUL, f32, dO, O, nullptr, dOO);
    auto D0 = cudnn_virtual(g, "sum dO * O", f32, s.rows(), s.rows_strides());
    cudnn_reduction(g, "sum_d dO * O", CUDNN_REDUCE_TENSOR_ADD, dOO, D0);
    cudnn_pointwise(g, "D = sum * 1", CUDNN_POINTWISE_MUL, f32, D0, one, nullptr, softmax_sum);

    // P from the scores and the forward's stats
    auto S = cudnn_virtual(g, "S", f32, s.scores(), s.scores_strides());
    cudnn_matmul(g, "S = Q K^T", Q, Kt, S);
    auto S1 = cudnn_virtual(g, "S1", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "S1 = S * scale", CUDNN_POINTWISE_MUL, f32, S, scale, nullptr, S1);
    auto S2 = cudnn_virtual(g, "S2", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "S2 = S1 - stats", CUDNN_POINTWISE_SUB, f32, S1, stats, nullptr, S2);
    auto S3 = cudnn_causal_mask(g, s, S2, neg_inf);
    auto P = cudnn_virtual(g, "P", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "P = exp(S3)", CUDNN_POINTWISE_EXP, f32, S3, nullptr, nullptr, P);

    // dV = P^T dO
    auto Pt = cudnn_virtual(g, "P^T", bf16, s.scores(), s.scores_strides_t());
    cudnn_reshape(g, "P^T", P, Pt);
    cudnn_matmul(g, "dV = P^T dO", Pt, dO, dV);

    // dS = (dO V^T - D) * P * scale
    auto dP = cudnn_virtual(g, "dP", f32, s.scores(), s.scores_strides());
    cudnn_matmul(g, "dP = dO V^T", dO, Vt, dP);
    auto dP1 = cudnn_virtual(g, "dP - D", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "dP - D", CUDNN_POINTWISE_SUB, f32, dP, softmax_sum, nullptr, dP1);
    auto dS0 = cudnn_virtual(g, "(dP - D) * P", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "(dP - D) * P", CUDNN_POINTWISE_MUL, f32, dP1, P, nullptr, dS0);
    auto dS = cudnn_virtual(g, "dS", f32, s.scores(), s.scores_strides());
    cudnn_pointwise(g, "dS = (dP - D) * P * scale", CUDNN_POINTWISE_MUL, f32, dS0, scale, nullptr, dS);

    // dK = dS^T Q
    auto dSt = cudnn_virtual(g, "dS^T", bf16, s.scores(), s.scores_strides_t());
    cudnn_reshape(g, "dS^T", dS, dSt);
    cudnn_matmul(g, "dK = dS^T Q", dSt, Q, dK);

    // dQ = dS K through the fp32 accumulator
    auto K = cudnn_virtual(g, "K", bf16, s.bhsd(), s.qkv_strides());
    cudnn_reshape(g, "K = (K^T)^T", Kt, K);
    cudnn_matmul(g, "dQacc = dS K", dS, K, dQ_accum);
    cudnn_pointwise(g, "dQ = dQacc", CUDNN_POINTWISE_IDENTITY, f32, dQ_accum, nullptr, nullptr, dQ);
}

// ----------------------------------------------------------------------------
// plans: operation graph -> heuristics -> the first engine config that finalizes

struct CudnnAttnPlan {
    bool ready = false;
    std::string error;  // why the plan could not be built (then it is not retried)
    std::vector<cudnnBackendDescriptor_t> owned;
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t workspace_bytes = 0;
    std::string info;     // engine, heuristics mode and workspace, for the log
    std::vector<std::string> nodes;
    // the backward's workspace tensors
    float* softmax_sum = nullptr;  // (B, NH, T, 1)
    float* dq_accum = nullptr;     // (B, NH, T, hd)
    size_t dq_accum_bytes = 0;
    // values passed by value; the variant pack points at them
    float attn_scale = 0, neg_inf = 0, one = 1;
    cudnnBackendDescriptor_t variant_pack = nullptr;
    std::vector<void*> variant_ptrs;
};

struct CudnnAttnState {
    cudnnHandle_t handle = nullptr;
    std::string handle_error;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    std::map<std::tuple<int, int, int, int, int>, CudnnAttnPlan> plans;  // (backward, B, T, NH, hd)
};
inline CudnnAttnState& cudnn_attn_state() {
    static CudnnAttnState state;
    return state;
}

inline bool cudnn_attn_handle() {
    CudnnAttnState& st = cudnn_attn_state();
    if (st.handle) return true;
    if (!st.handle_error.empty()) { cudnn_attention_error_message() = st.handle_error; return false; }
    size_t version = cudnnGetVersion();
    if (version < 90000) {
        st.handle_error = "cuDNN " + std::to_string(version) + " is older than 9.0, whose graph patterns "
                          "attention/attention_cudnn.h builds; install cuDNN 9";
        cudnn_attention_error_message() = st.handle_error;
        return false;
    }
    if (!cudnn_attn_check(cudnnCreate(&st.handle), "cudnnCreate")) {
        st.handle = nullptr;
        st.handle_error = cudnn_attention_error_message();
        return false;
    }
    return true;
}

// The operation graph of the nodes built so far (nullptr on error). handle may be null: cuDNN then
// finalizes the graph without a GPU, and heuristics need a device description instead
// (test/test_cudnn_graph.cu checks the graphs that way).
inline cudnnBackendDescriptor_t cudnn_attn_operation_graph(CudnnGraphBuilder& g, cudnnHandle_t handle) {
    cudnnBackendDescriptor_t graph = cudnn_create(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    if (handle) CUDNN_SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "operation graph");
    CUDNN_SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)g.ops.size(),
              g.ops.data(), "operation graph");
    cudnn_finalize(g, graph, "operation graph");
    return g.ok ? graph : nullptr;
}

// Operation graph, heuristics (mode A, then the fallback list) and the first plan that finalizes.
inline bool cudnn_attn_make_plan(CudnnAttnPlan& p, CudnnGraphBuilder& g, cudnnHandle_t handle) {
    cudnnBackendDescriptor_t graph = cudnn_attn_operation_graph(g, handle);
    if (!g.ok) return false;

    std::string tried;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        std::string what = mode == CUDNN_HEUR_MODE_A ? "heuristics (mode A)" : "heuristics (fallback)";
        g.ok = true;
        cudnnBackendDescriptor_t heur = cudnn_create(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what);
        CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, what);
        CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, what);
        cudnn_finalize(g, heur, what);
        int64_t count = 0;
        if (g.ok) {
            g.ok = cudnn_attn_check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                                    what + ": cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS) count");
        }
        if (!g.ok) { tried += (tried.empty() ? "" : "; ") + cudnn_attention_error_message(); continue; }
        std::vector<cudnnBackendDescriptor_t> configs;
        for (int64_t i = 0; i < count && g.ok; i++) configs.push_back(cudnn_create(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what));
        int64_t returned = 0;
        if (g.ok && count > 0) {
            g.ok = cudnn_attn_check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                                             configs.data()),
                                    what + ": cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
        }
        if (!g.ok) { tried += (tried.empty() ? "" : "; ") + cudnn_attention_error_message(); continue; }
        tried += (tried.empty() ? "" : "; ") + what + ": " + std::to_string(returned) + " engine configs";
        for (int64_t i = 0; i < returned; i++) {
            std::string plan_what = what + ", config " + std::to_string(i) + ": execution plan";
            g.ok = true;
            cudnnBackendDescriptor_t plan = cudnn_create(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan_what);
            CUDNN_SET(g, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, plan_what);
            CUDNN_SET(g, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                      &configs[i], plan_what);
            cudnn_finalize(g, plan, plan_what);
            if (!g.ok) { tried += " (config " + std::to_string(i) + ": " + cudnn_attention_error_message() + ")"; continue; }
            int64_t n = 0;
            g.ok = cudnn_attn_check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                             CUDNN_TYPE_INT64, 1, &n, &p.workspace_bytes),
                                    plan_what + ": cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)");
            if (!g.ok) return false;
            p.plan = plan;
            // the engine's global index, only for the log
            int64_t engine_index = -1;
            cudnnBackendDescriptor_t engine = nullptr;
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) == CUDNN_STATUS_SUCCESS) {
                g.owned.push_back(engine);
                if (cudnnBackendGetAttribute(configs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                             1, &n, &engine) == CUDNN_STATUS_SUCCESS) {
                    cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                             &engine_index);
                }
            }
            p.info = "engine " + std::to_string(engine_index) + " (" + what + ", config " + std::to_string(i) +
                     "), workspace " + std::to_string(p.workspace_bytes) + " B";
            return true;
        }
    }
    cudnn_attention_error_message() = "no cuDNN engine runs this graph: " + tried;
    g.ok = false;
    return false;
}

// The cached plan of one direction and shape, built on first use; nullptr (and the error set) if
// cuDNN cannot run it.
inline CudnnAttnPlan* cudnn_attn_plan(bool backward, int B, int T, int NH, int hd) {
    if (!cudnn_attn_handle()) return nullptr;
    CudnnAttnState& st = cudnn_attn_state();
    auto key = std::make_tuple((int)backward, B, T, NH, hd);
    auto found = st.plans.find(key);
    if (found != st.plans.end()) {
        if (found->second.ready) return &found->second;
        cudnn_attention_error_message() = found->second.error;
        return nullptr;
    }
    CudnnAttnPlan& p = st.plans[key];
    CudnnAttnShape s{B, T, NH, hd, (int64_t)NH * hd};
    CudnnGraphBuilder g;
    if (backward) cudnn_build_backward_ops(g, s);
    else cudnn_build_forward_ops(g, s);
    bool ok = g.ok && cudnn_attn_make_plan(p, g, st.handle);
    p.owned = g.owned;
    p.nodes = g.op_names;
    if (ok && backward) {
        p.dq_accum_bytes = sizeof(float) * (size_t)B * NH * T * hd;
        ok = cudaMalloc(&p.softmax_sum, sizeof(float) * (size_t)B * NH * T) == cudaSuccess &&
             cudaMalloc(&p.dq_accum, p.dq_accum_bytes) == cudaSuccess;
        if (!ok) cudnn_attention_error_message() = "cudaMalloc of the backward's D and dQ accumulator failed";
    }
    if (ok && (size_t)p.workspace_bytes > st.workspace_bytes) {
        if (st.workspace) cudaCheck(cudaFree(st.workspace));
        st.workspace = nullptr;
        ok = cudaMalloc(&st.workspace, p.workspace_bytes) == cudaSuccess;
        st.workspace_bytes = ok ? p.workspace_bytes : 0;
        if (!ok) cudnn_attention_error_message() = "cudaMalloc of " + std::to_string(p.workspace_bytes) +
                                                   " bytes of cuDNN workspace failed";
    }
    if (!ok) {
        p.error = cudnn_attention_error_message();
        return nullptr;
    }
    // scale and mask value as the project's softmax kernel: scores / sqrt(hd), masked scores -> -inf
    // (cuDNN before 9.10 takes the lowest finite float instead)
    p.attn_scale = 1.0f / sqrtf((float)hd);
    p.neg_inf = cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest()
                                          : -std::numeric_limits<float>::infinity();
    p.ready = true;
    return &p;
}

// Executes the plan with these tensors (uid, pointer), rebuilding the variant pack when they change.
inline bool cudnn_attn_execute(CudnnAttnPlan& p, const std::vector<std::pair<int64_t, void*>>& tensors,
                               cudaStream_t stream) {
    CudnnAttnState& st = cudnn_attn_state();
    std::vector<int64_t> uids;
    std::vector<void*> ptrs;
    for (auto& t : tensors) {
        uids.push_back(t.first);
        ptrs.push_back(t.second);
    }
    ptrs.push_back(st.workspace);  // compared too: a larger plan may have moved the workspace
    if (!p.variant_pack || ptrs != p.variant_ptrs) {
        if (p.variant_pack) cudnnBackendDestroyDescriptor(p.variant_pack);
        p.variant_pack = nullptr;
        p.variant_ptrs.clear();
        CudnnGraphBuilder g;
        cudnnBackendDescriptor_t vp = cudnn_create(g, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
        CUDNN_SET(g, vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(), uids.data(),
                  "variant pack");
        CUDNN_SET(g, vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, (int64_t)uids.size(),
                  ptrs.data(), "variant pack");
        CUDNN_SET(g, vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &st.workspace, "variant pack");
        cudnn_finalize(g, vp, "variant pack");
        if (!g.ok) { cudnn_graph_release(g.owned); return false; }
        p.variant_pack = vp;
        p.variant_ptrs = ptrs;
    }
    if (!cudnn_attn_check(cudnnSetStream(st.handle, stream), "cudnnSetStream")) return false;
    return cudnn_attn_check(cudnnBackendExecute(st.handle, p.plan, p.variant_pack), "cudnnBackendExecute");
}

// ----------------------------------------------------------------------------
// launchers: false (with cudnn_attention_error()) where cuDNN cannot run the call

// Whether the graphs compute variant kind at attn_len: softmax without log-length scaling only
// (one scale for every score, the graphs' scalar attn_scale; a per-row factor has no node here).
inline bool cudnn_attention_computes(AttnKind kind, int attn_len) { return kind == ATTN_SOFTMAX && attn_len == 0; }

// out (B, T, NH, hd), stats (B, NH, T) = cuDNN's causal flash attention of qkv (B, T, 3, NH, hd).
inline bool cudnn_attention_forward(floatX* out, float* stats, const floatX* qkv, int B, int T, int NH, int hd,
                                    cudaStream_t stream = 0) {
    CudnnAttnPlan* p = cudnn_attn_plan(false, B, T, NH, hd);
    if (!p) return false;
    size_t C = (size_t)NH * hd;
    floatX* q = const_cast<floatX*>(qkv);
    return cudnn_attn_execute(*p, {{CUDNN_UID_Q, q}, {CUDNN_UID_K, q + C}, {CUDNN_UID_V, q + 2 * C},
                                   {CUDNN_UID_O, out}, {CUDNN_UID_STATS, stats},
                                   {CUDNN_UID_SCALE, &p->attn_scale}, {CUDNN_UID_NEG_INF, &p->neg_inf}},
                              stream);
}

// dqkv (B, T, 3, NH, hd) = gradient of cuDNN's attention from dout, with out and stats of
// cudnn_attention_forward.
inline bool cudnn_attention_backward(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                     const float* stats, int B, int T, int NH, int hd, cudaStream_t stream = 0) {
    CudnnAttnPlan* p = cudnn_attn_plan(true, B, T, NH, hd);
    if (!p) return false;
    if (cudnnGetVersion() < 90600) {  // before 9.6 the engines expect a zeroed dQ accumulator
        cudaCheck(cudaMemsetAsync(p->dq_accum, 0, p->dq_accum_bytes, stream));
    }
    size_t C = (size_t)NH * hd;
    floatX* q = const_cast<floatX*>(qkv);
    return cudnn_attn_execute(*p, {{CUDNN_UID_Q, q}, {CUDNN_UID_K, q + C}, {CUDNN_UID_V, q + 2 * C},
                                   {CUDNN_UID_O, const_cast<floatX*>(out)}, {CUDNN_UID_DO, const_cast<floatX*>(dout)},
                                   {CUDNN_UID_STATS, const_cast<float*>(stats)}, {CUDNN_UID_DQ, dqkv},
                                   {CUDNN_UID_DK, dqkv + C}, {CUDNN_UID_DV, dqkv + 2 * C},
                                   {CUDNN_UID_SCALE, &p->attn_scale}, {CUDNN_UID_NEG_INF, &p->neg_inf},
                                   {CUDNN_UID_ONE, &p->one}, {CUDNN_UID_SOFTMAX_SUM, p->softmax_sum},
                                   {CUDNN_UID_DQ_ACCUM, p->dq_accum}},
                              stream);
}

// The engine, heuristics mode and workspace of the cached plan of this call ("" if none), for the log.
inline std::string cudnn_attention_plan_info(bool backward, int B, int T, int NH, int hd) {
    auto& plans = cudnn_attn_state().plans;
    auto found = plans.find(std::make_tuple((int)backward, B, T, NH, hd));
    return found != plans.end() && found->second.ready ? found->second.info : std::string();
}

// Frees every plan, buffer and the handle.
inline void cudnn_attention_free() {
    CudnnAttnState& st = cudnn_attn_state();
    for (auto& entry : st.plans) {
        CudnnAttnPlan& p = entry.second;
        if (p.variant_pack) cudnnBackendDestroyDescriptor(p.variant_pack);
        cudnn_graph_release(p.owned);
        if (p.softmax_sum) cudaCheck(cudaFree(p.softmax_sum));
        if (p.dq_accum) cudaCheck(cudaFree(p.dq_accum));
    }
    st.plans.clear();
    if (st.workspace) cudaCheck(cudaFree(st.workspace));
    st.workspace = nullptr;
    st.workspace_bytes = 0;
    if (st.handle) cudnnDestroy(st.handle);
    st.handle = nullptr;
}

#endif  // ATTN_DEV_CUDNN
