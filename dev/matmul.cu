// Matmul forward/backward through cuBLASLt with fused epilogues, and the bias-gradient kernels.
//   ./matmul [version]
//   1: product (layers/matmul.cuh): forward GELU_AUX_BIAS in one call; backward DGELU fused into dinp,
//      the bias gradients from the GEMMs' epilogues (fcproj's: BGRADB, fc's: DGELU_BGRAD)
//   2: unfused: forward with BIAS then gelu_forward; backward plain dinp then gelu_backward_inplace,
//      the bias gradients from the column-sum kernels
#include "dev/dev_common.h"
#include "layers/gelu.cuh"
#include "layers/gelu_cpu.h"
#include "layers/matmul.cuh"
#include "layers/matmul_cpu.h"

// The fc layer of a block: out = gelu(inp @ w^T + b), pre = inp @ w^T + b
void run_forward(int version, floatX* out, floatX* pre, const floatX* inp, const floatX* w, const floatX* b, int N,
                 int C, int OC) {
    if (version == 1) {
        matmul_forward(out, inp, w, N, C, OC, 0, {.bias = b, .pre_gelu = pre});
    } else {
        matmul_forward(pre, inp, w, N, C, OC, 0, {.bias = b});
        gelu_forward(out, pre, N * OC, 0);
    }
}
// The fcproj layer's backward: its input came out of gelu(pre): dpre = gelu'(pre) * (dout @ w),
// dpb (C) += column sums of dpre (the fc layer's bias gradient)
void run_backward(int version, floatX* dpre, floatX* dw, floatX* db, floatX* dpb, float* scratch, const floatX* dout,
                  const floatX* inp, const floatX* w, const floatX* pre, int N, int C, int OC) {
    if (version == 1) {
        matmul_backward(dpre, dw, scratch, dout, inp, w, N, C, OC, 0,
                        {.dbias = db, .pre_gelu = pre, .dinp_colsum = dpb});
    } else {
        matmul_backward(dpre, dw, scratch, dout, inp, w, N, C, OC, 0, {.dbias = db});
        gelu_backward_inplace(dpre, pre, N * C, 0);
        column_sums_accumulate_bf16(dpb, scratch, dpre, N, C, 0);
    }
}

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    cublaslt_setup();
    matmul_set_bgrad_epilogues(version == 1);
    // GPT-2 124M fc (C -> 4C) and fcproj (4C -> C); emulated: small, N not a multiple of 8
    int N = DEV_EMULATED ? 14 : 8 * 1024, C = DEV_EMULATED ? 40 : 768, OC = 4 * C;
    std::vector<float> inp = dev_random((size_t)N * C, 1), w = dev_random((size_t)OC * C, 2, 0.05f);
    std::vector<float> b = dev_random(OC, 3, 0.5f), dout = dev_random((size_t)N * C, 4);
    std::vector<float> w2 = dev_random((size_t)C * OC, 5, 0.05f);
    floatX *d_inp = dev_upload_bf16(inp), *d_w = dev_upload_bf16(w), *d_b = dev_upload_bf16(b);
    floatX *d_dout = dev_upload_bf16(dout), *d_w2 = dev_upload_bf16(w2);
    floatX *d_out = dev_malloc<floatX>((size_t)N * OC), *d_pre = dev_malloc<floatX>((size_t)N * OC);
    floatX *d_dpre = dev_malloc<floatX>((size_t)N * OC), *d_dw2 = dev_malloc<floatX>((size_t)C * OC);
    floatX *d_db2 = dev_malloc<floatX>(C), *d_db1 = dev_malloc<floatX>(OC);
    float* d_scratch = dev_malloc<float>(matmul_backward_scratch_floats(OC));

    // reference: forward fc, then fcproj's backward with gelu'(pre) (all in float)
    std::vector<float> pre((size_t)N * OC), out((size_t)N * OC), act((size_t)N * OC);
    ref::matmul_forward(pre.data(), inp.data(), w.data(), b.data(), N, C, OC);
    ref::gelu_forward(out.data(), pre.data(), N * OC);
    run_forward(version, d_out, d_pre, d_inp, d_w, d_b, N, C, OC);
    // bf16 outputs: 1e-2 relative plus a cancellation floor (dot products of signed terms)
    validate_result("pre_gelu", dev_download_bf16(d_pre, pre.size()), pre, 1e-2, 1e-3 * max_abs_of(pre));
    validate_result("out", dev_download_bf16(d_out, out.size()), out, 1e-2, 1e-3 * max_abs_of(out));
    // fcproj: inp = the GPU's gelu output (bf16), pre = the GPU's pre-activation
    std::vector<float> act_gpu = dev_download_bf16(d_out, out.size()), pre_gpu = dev_download_bf16(d_pre, pre.size());
    std::vector<float> dact((size_t)N * OC, 0.0f), dpre((size_t)N * OC, 0.0f), dw2((size_t)C * OC, 0.0f), db2(C, 0.0f);
    ref::matmul_backward(dact.data(), dw2.data(), db2.data(), dout.data(), act_gpu.data(), w2.data(), N, OC, C);
    ref::gelu_backward(dpre.data(), pre_gpu.data(), dact.data(), N * OC);
    run_backward(version, d_dpre, d_dw2, d_db2, d_db1, d_scratch, d_dout, d_out, d_w2, d_pre, N, OC, C);
    std::vector<float> db1(OC, 0.0f);  // fc's bias gradient: the column sums of dpre
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) db1[o] += dpre[(size_t)n * OC + o];
    }
    // dpre also carries the GPU's approximate tanh in gelu' (see dev/gelu.cu): 1e-2 of the largest value
    validate_result("dpre", dev_download_bf16(d_dpre, dpre.size()), dpre, 1e-2, 1e-2 * max_abs_of(dpre));
    validate_result("dweight", dev_download_bf16(d_dw2, dw2.size()), dw2, 1e-2, 1e-3 * max_abs_of(dw2));
    validate_result("dbias", dev_download_bf16(d_db2, C), db2, 1e-2, 1e-3 * max_abs_of(db2));
    // a sum of N dpre values, each within the 1e-2 * max |dpre| above
    validate_result("dbias fc", dev_download_bf16(d_db1, OC), db1, 1e-2, 1e-2 * N * max_abs_of(dpre));

    if (!DEV_EMULATED) {
        double flops = 2.0 * N * C * OC;
        float ms = benchmark_ms(20, [&] { run_forward(version, d_out, d_pre, d_inp, d_w, d_b, N, C, OC); });
        printf("forward  %8.4f ms  %7.1f TFLOP/s\n", ms, flops / ms / 1e9);
        ms = benchmark_ms(20, [&] {
            run_backward(version, d_dpre, d_dw2, d_db2, d_db1, d_scratch, d_dout, d_out, d_w2, d_pre, N, OC, C);
        });
        printf("backward %8.4f ms  %7.1f TFLOP/s\n", ms, 2 * flops / ms / 1e9);
    }
    return 0;
}
