// LayerNorm forward/backward and the fused residual + layernorm forward.  ./layernorm [version]
//   1: product kernels (layers/layernorm.cuh): a warp per row, 128-bit packs; the backward's
//      accumulators in the bank-conflict-free layout, also summing the columns of dinp (the next
//      matmul's bias gradient) in the same pass
//   2: forward with a block of 128 threads per row (shared-memory reduction); the backward with
//      the accumulators at channel c (lanes 8 words apart: 8-way bank conflicts), the dinp column
//      sums by a second pass over dinp
#include <algorithm>

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

// The backward with the plain accumulator layout (channel c at c): version 2's. Shared (warps, 2, C).
__global__ void layernorm_backward_plain_kernel(floatX* dinp, float* scratch, const floatX* dout, const floatX* inp,
                                                const floatX* weight, const float* mean, const float* rstd, int N,
                                                int C) {
    DYNAMIC_SHARED(float, shared);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    sptr<float> dweight_acc = shared + (size_t)warp * 2 * C;
    sptr<float> dbias_acc = dweight_acc + C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        for (int k = 0; k < x128::size; k++) { dweight_acc[c + k] = 0.0f; dbias_acc[c + k] = 0.0f; }
    }
    for (int row = blockIdx.x * num_warps + warp; row < N; row += gridDim.x * num_warps) {
        const floatX *dy = dout + (size_t)row * C, *x = inp + (size_t)row * C;
        floatX* dx = dinp + (size_t)row * C;
        float m = mean[row], s = rstd[row], dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
        for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
            x128 dy128 = load128(dy + c), x128v = load128(x + c), w128 = load128(weight + c);
            for (int k = 0; k < x128::size; k++) {
                float norm = ((float)x128v[k] - m) * s, dnorm = (float)w128[k] * (float)dy128[k];
                dnorm_sum += dnorm;
                dnorm_norm_sum += dnorm * norm;
                dweight_acc[c + k] += norm * (float)dy128[k];
                dbias_acc[c + k] += (float)dy128[k];
            }
        }
        float dnorm_mean = warp_sum(dnorm_sum) / C, dnorm_norm_mean = warp_sum(dnorm_norm_sum) / C;
        for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
            x128 dy128 = load128(dy + c), x128v = load128(x + c), w128 = load128(weight + c), dx128 = load128(dx + c);
            for (int k = 0; k < x128::size; k++) {
                float norm = ((float)x128v[k] - m) * s, dnorm = (float)w128[k] * (float)dy128[k];
                dx128[k] = (floatX)((float)dx128[k] + s * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
            }
            store128(dx + c, dx128);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        float sum = 0.0f;
        for (int w = 0; w < num_warps; w++) { sum += shared[(size_t)w * 2 * C + c]; }
        scratch[(size_t)blockIdx.x * 2 * C + c] = sum;
    }
}

// dinp +=, dw, db, dcolsum (column sums of the updated dinp) +=
void run_backward(int version, floatX* dinp, floatX* dw, floatX* db, floatX* dcolsum, float* scratch,
                  const floatX* dout, const floatX* inp, const floatX* w, const float* mean, const float* rstd, int N,
                  int C) {
    if (version == 1) {
        layernorm_backward(dinp, dw, db, scratch, dout, inp, w, mean, rstd, N, C, 0, dcolsum);
        return;
    }
    int warps = std::min(8, LAYERNORM_BACKWARD_SMEM_BYTES / (2 * C * (int)sizeof(float)));
    int blocks = std::min(LAYERNORM_BACKWARD_MAX_BLOCKS, ceil_div(N, warps));
    cuda_launch(layernorm_backward_plain_kernel, dim3(blocks), dim3(32 * warps), (size_t)warps * 2 * C * sizeof(float),
                0, dinp, scratch, dout, inp, w, mean, rstd, N, C);
    cudaCheck(cudaGetLastError());
    column_sum_accumulate(dw, scratch, blocks, C, 2 * C, 0);
    column_sum_accumulate(db, scratch + C, blocks, C, 2 * C, 0);
    column_sums_accumulate_bf16(dcolsum, scratch, dinp, N, C, 0);
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
    floatX* d_dcs = dev_malloc<floatX>(C);
    float *d_mean = dev_malloc<float>(N), *d_rstd = dev_malloc<float>(N);
    float* d_scratch = dev_malloc<float>(layernorm_backward_scratch_floats(C));

    std::vector<float> out((size_t)N * C), mean(N), rstd(N), dinp((size_t)N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    ref::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    ref::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                       N, C);
    run_forward(version, d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C);
    run_backward(version, d_dinp, d_dw, d_db, d_dcs, d_scratch, d_dout, d_inp, d_w, d_mean, d_rstd, N, C);
    // bf16 outputs 1e-2 relative plus a cancellation floor; fp32 statistics 1e-5 (float reference)
    validate_result("out", dev_download_bf16(d_out, out.size()), out, 1e-2, 1e-3 * max_abs_of(out));
    validate_result("mean", dev_download(d_mean, N), mean, 1e-5, 1e-6);
    validate_result("rstd", dev_download(d_rstd, N), rstd, 1e-5, 0.0);
    validate_result("dinp", dev_download_bf16(d_dinp, dinp.size()), dinp, 1e-2, 1e-3 * max_abs_of(dinp));
    validate_result("dweight", dev_download_bf16(d_dw, C), dw, 1e-2, 1e-3 * max_abs_of(dw));
    validate_result("dbias", dev_download_bf16(d_db, C), db, 1e-2, 1e-3 * max_abs_of(db));
    std::vector<float> got_dinp = dev_download_bf16(d_dinp, dinp.size()), dcs(C, 0.0f);  // sums of what was written
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < C; c++) dcs[c] += got_dinp[(size_t)r * C + c];
    }
    validate_result("dinp colsum", dev_download_bf16(d_dcs, C), dcs, 1e-2, 1e-3 * max_abs_of(dcs));

    double bytes = (double)N * C * 2 * 2;  // read inp, write out (bf16)
    benchmark_report("layernorm forward", bytes, [&] { run_forward(version, d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C); });
    benchmark_report("fused residual+ln", bytes * 2, [&] {
        fused_residual_layernorm_forward(d_dinp, d_out, d_mean, d_rstd, d_inp, d_dout, d_w, d_b, N, C, 0);
    });
    // read dout, inp, dinp; write dinp (and the column sums: version 2 reads dinp again)
    benchmark_report("layernorm backward + dinp colsum", bytes * 2, [&] {
        run_backward(version, d_dinp, d_dw, d_db, d_dcs, d_scratch, d_dout, d_inp, d_w, d_mean, d_rstd, N, C);
    });
    return 0;
}
