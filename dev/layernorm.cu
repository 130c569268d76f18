// LayerNorm forward/backward and the fused residual + layernorm forward.  ./layernorm [version]
//   1: product kernels (layers/layernorm.cuh): a warp per row, 128-bit packs
//   2: forward with a block of 128 threads per row (shared-memory reduction); backward as 1
#include "dev/dev_common.h"
#include "layers/layernorm.cuh"
#include "layers/layernorm_cpu.h"

// out, inp (N, C); mean, rstd (N); weight, bias (C). One block per row.
__global__ void layernorm_forward_block_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                               const floatX* weight, const floatX* bias, int C) {
    const floatX* x = inp + (size_t)blockIdx.x * C;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) { sum += (float)x[c]; }
    float m = block_sum(sum) / C;
    float var = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) { float d = (float)x[c] - m; var += d * d; }
    float s = rsqrtf(block_sum(var) / C + 1e-5f);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        out[(size_t)blockIdx.x * C + c] = (floatX)(((float)x[c] - m) * s * (float)weight[c] + (float)bias[c]);
    }
    if (threadIdx.x == 0) { mean[blockIdx.x] = m; rstd[blockIdx.x] = s; }
}

void run_forward(int version, floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* w,
                 const floatX* b, int N, int C) {
    if (version == 1) {
        layernorm_forward(out, mean, rstd, inp, w, b, N, C, 0);
    } else {
        cuda_launch(layernorm_forward_block_kernel, dim3(N), dim3(128), 0, 0, out, mean, rstd, inp, w, b, C);
        cudaCheck(cudaGetLastError());
    }
}

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    int N = DEV_EMULATED ? 2 * 7 : 8 * 1024, C = DEV_EMULATED ? 264 : 768;
    std::vector<float> inp = dev_random((size_t)N * C, 1, 1.0f, 2.0f), dout = dev_random((size_t)N * C, 2);
    std::vector<float> w = dev_random(C, 3, 0.2f, 1.0f), b = dev_random(C, 4, 0.2f);
    floatX *d_inp = dev_upload_bf16(inp), *d_dout = dev_upload_bf16(dout), *d_w = dev_upload_bf16(w);
    floatX *d_b = dev_upload_bf16(b), *d_out = dev_malloc<floatX>((size_t)N * C);
    floatX *d_dinp = dev_malloc<floatX>((size_t)N * C), *d_dw = dev_malloc<floatX>(C), *d_db = dev_malloc<floatX>(C);
    float *d_mean = dev_malloc<float>(N), *d_rstd = dev_malloc<float>(N);
    float* d_scratch = dev_malloc<float>(layernorm_backward_scratch_floats(C));

    std::vector<float> out((size_t)N * C), mean(N), rstd(N), dinp((size_t)N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                       N, C);
    run_forward(version, d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C);
    layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, 0);
    // bf16 outputs 1e-2 relative plus a cancellation floor; fp32 statistics 1e-5 (float reference)
    validate_result("out", dev_download_bf16(d_out, out.size()), out, 1e-2, 1e-3 * max_abs_of(out));
    validate_result("mean", dev_download(d_mean, N), mean, 1e-5, 1e-6);
    validate_result("rstd", dev_download(d_rstd, N), rstd, 1e-5, 0.0);
    validate_result("dinp", dev_download_bf16(d_dinp, dinp.size()), dinp, 1e-2, 1e-3 * max_abs_of(dinp));
    validate_result("dweight", dev_download_bf16(d_dw, C), dw, 1e-2, 1e-3 * max_abs_of(dw));
    validate_result("dbias", dev_download_bf16(d_db, C), db, 1e-2, 1e-3 * max_abs_of(db));

    double bytes = (double)N * C * 2 * 2;  // read inp, write out (bf16)
    benchmark_report("layernorm forward", bytes, [&] { run_forward(version, d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C); });
    benchmark_report("fused residual+ln", bytes * 2, [&] {
        fused_residual_layernorm_forward(d_dinp, d_out, d_mean, d_rstd, d_inp, d_dout, d_w, d_b, N, C, 0);
    });
    // read dout, inp, dinp; write dinp
    benchmark_report("layernorm backward", bytes * 2, [&] {
        layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, 0);
    });
    return 0;
}
