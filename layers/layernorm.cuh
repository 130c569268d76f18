// LayerNorm over the channels (eps 1e-5), plus the fused residual-add + layernorm forward.
// CPU twin: layers/layernorm_cpu.h, test: test/test_layers_cuda.cu, experiments: dev/layernorm.cu.
// One warp per row, 128-bit packs along C (C a multiple of 8), statistics in fp32.
// The backward is deterministic: dweight/dbias partial sums per block in a fixed order
// (scratch), then a second kernel adds the partials over blocks, also in a fixed order.
#pragma once

#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// ----------------------------------------------------------------------------
// kernels

// Normalises one row held at x (C) into out; writes mean/rstd of the row when non-null.
__device__ inline void layernorm_row(floatX* out, float* mean, float* rstd, const floatX* x, const floatX* weight,
                                     const floatX* bias, int C) {
    int lane = threadIdx.x % 32;
    float sum = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 p = load128(x + c);
        for (int k = 0; k < x128::size; k++) { sum += (float)p[k]; }
    }
    float m = warp_sum(sum) / C;
    float var = 0.0f;  // two passes: no cancellation in E[x^2] - m^2
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 p = load128(x + c);
        for (int k = 0; k < x128::size; k++) { float d = (float)p[k] - m; var += d * d; }
    }
    float s = rsqrtf(warp_sum(var) / C + 1e-5f);
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 p = load128(x + c);
        x128 w = load128(weight + c);
        x128 b = load128(bias + c);
        x128 o;
        for (int k = 0; k < x128::size; k++) { o[k] = (floatX)(((float)p[k] - m) * s * (float)w[k] + (float)b[k]); }
        store128(out + c, o);
    }
    if (lane == 0 && mean != nullptr) { *mean = m; }
    if (lane == 0 && rstd != nullptr) { *rstd = s; }
}

// out, inp (N, C); mean, rstd (N) or null; weight, bias (C). One warp per row.
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                         const floatX* weight, const floatX* bias, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) { return; }  // the whole warp leaves together
    layernorm_row(out + (size_t)row * C, mean ? mean + row : nullptr, rstd ? rstd + row : nullptr,
                  inp + (size_t)row * C, weight, bias, C);
}

// residual = inp1 + inp2 (rounded to floatX), then out = layernorm(residual); all (N, C).
// The warp normalises the rounded residual it has just written: each lane re-reads only the
// elements it wrote itself, so no barrier is needed.
__global__ void fused_residual_layernorm_forward_kernel(floatX* residual, floatX* out, float* mean, float* rstd,
                                                        const floatX* inp1, const floatX* inp2,
                                                        const floatX* weight, const floatX* bias, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) { return; }
    int lane = threadIdx.x % 32;
    size_t offset = (size_t)row * C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 a = load128(inp1 + offset + c);
        x128 b = load128(inp2 + offset + c);
        x128 r;
        for (int k = 0; k < x128::size; k++) { r[k] = (floatX)((float)a[k] + (float)b[k]); }
        store128(residual + offset + c, r);
    }
    layernorm_row(out + offset, mean ? mean + row : nullptr, rstd ? rstd + row : nullptr, residual + offset,
                  weight, bias, C);
}

// The backward's per-warp accumulators hold channel c = 8 * pack + k at k * stride + pack: the
// lanes of a warp, which own consecutive packs, then touch consecutive words (no bank conflicts;
// the plain layout c, with lanes 8 words apart, had 8-way conflicts). stride = C/8 rounded up to
// 4 mod 32, so that the final channel-order read (32 consecutive channels: 4 packs x 8 k) also hits
// 32 distinct banks (where the padded accumulators of one warp fit in LAYERNORM_BACKWARD_SMEM_BYTES:
// with 2 accumulators C up to 5920; beyond, stride = C/8 and that read has conflicts).
constexpr int LAYERNORM_BACKWARD_SMEM_BYTES = 48 * 1024;
inline int layernorm_backward_acc_stride(int C, int accumulators) {
    int padded = C / 8 + ((4 - C / 8) % 32 + 32) % 32;
    return accumulators * 8 * padded * (int)sizeof(float) <= LAYERNORM_BACKWARD_SMEM_BYTES ? padded : C / 8;
}

// dinp (N, C) +=; scratch (gridDim.x, parts, C) = this block's partial {dweight, dbias[, dinp sum]}:
// parts = 3 also sums the columns of the updated dinp (the bias gradient of the matmul whose output
// gradient dinp is); dout, inp (N, C); weight (C); mean, rstd (N);
// stride = layernorm_backward_acc_stride(C, parts).
// Dynamic shared memory: (blockDim.x/32, parts, 8, stride) floats, one set of accumulators per warp
// in the layout above; lane l owns the same channels in every phase, so they need no atomics.
__global__ void layernorm_backward_kernel(floatX* dinp, float* scratch, const floatX* dout, const floatX* inp,
                                          const floatX* weight, const float* mean, const float* rstd, int N, int C,
                                          int stride, int parts) {
    DYNAMIC_SHARED(float, shared);
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    int num_warps = blockDim.x / 32;
    int acc_floats = x128::size * stride;  // one accumulator
    sptr<float> dweight_acc = shared + (size_t)warp * parts * acc_floats;
    sptr<float> dbias_acc = dweight_acc + acc_floats;
    sptr<float> dinp_acc = dbias_acc + acc_floats;  // parts == 3 only
    for (int i = lane; i < parts * acc_floats; i += 32) { dweight_acc[i] = 0.0f; }
    __syncwarp();  // the lanes zeroed words that other lanes accumulate into
    for (int row = blockIdx.x * num_warps + warp; row < N; row += gridDim.x * num_warps) {
        const floatX* dy = dout + (size_t)row * C;
        const floatX* x = inp + (size_t)row * C;
        floatX* dx = dinp + (size_t)row * C;
        float m = mean[row];
        float s = rstd[row];
        // dnorm = w * dy;  dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
        float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
        for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
            x128 dy128 = load128(dy + c);
            x128 x128v = load128(x + c);
            x128 w128 = load128(weight + c);
            int pack = c / x128::size;
            for (int k = 0; k < x128::size; k++) {
                float norm = ((float)x128v[k] - m) * s;
                float dnorm = (float)w128[k] * (float)dy128[k];
                dnorm_sum += dnorm;
                dnorm_norm_sum += dnorm * norm;
                dweight_acc[k * stride + pack] += norm * (float)dy128[k];
                dbias_acc[k * stride + pack] += (float)dy128[k];
            }
        }
        float dnorm_mean = warp_sum(dnorm_sum) / C;
        float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / C;
        for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
            x128 dy128 = load128(dy + c);
            x128 x128v = load128(x + c);
            x128 w128 = load128(weight + c);
            x128 dx128 = load128(dx + c);
            for (int k = 0; k < x128::size; k++) {
                float norm = ((float)x128v[k] - m) * s;
                float dnorm = (float)w128[k] * (float)dy128[k];
                dx128[k] = (floatX)((float)dx128[k] + s * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
            }
            store128(dx + c, dx128);
            if (parts == 3) {
                int pack = c / x128::size;
                for (int k = 0; k < x128::size; k++) { dinp_acc[k * stride + pack] += (float)dx128[k]; }
            }
        }
    }
    __syncthreads();
    // this block's partials in channel order: the warps' accumulators added in warp order
    float* block_partial = scratch + (size_t)blockIdx.x * parts * C;
    for (int i = threadIdx.x; i < parts * C; i += blockDim.x) {
        int part = i / C, c = i % C;  // part 0: dweight, 1: dbias, 2: dinp
        int at = part * acc_floats + (c % x128::size) * stride + c / x128::size;
        float sum = 0.0f;
        for (int w = 0; w < num_warps; w++) { sum += shared[(size_t)w * parts * acc_floats + at]; }
        block_partial[i] = sum;
    }
}

// ----------------------------------------------------------------------------
// launchers

// out, inp (N,C); mean, rstd (N) fp32 or null; weight, bias (C); N = B*T, C a multiple of 8
void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                       const floatX* bias, int N, int C, cudaStream_t stream) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_ALIGNED16(out); CHECK_ALIGNED16(inp); CHECK_ALIGNED16(weight); CHECK_ALIGNED16(bias);
    const int block_size = 256;
    int rows_per_block = block_size / 32;
    cuda_launch(layernorm_forward_kernel, dim3(ceil_div(N, rows_per_block)), dim3(block_size), 0, stream,
                out, mean, rstd, inp, weight, bias, N, C);
    cudaCheck(cudaGetLastError());
}

// residual = inp1 + inp2; out = layernorm(residual). residual, out, inp1, inp2 (N,C);
// mean, rstd (N) or null; weight, bias (C)
void fused_residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* inp1,
                                      const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C,
                                      cudaStream_t stream) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_ALIGNED16(residual); CHECK_ALIGNED16(out); CHECK_ALIGNED16(inp1); CHECK_ALIGNED16(inp2);
    CHECK_ALIGNED16(weight); CHECK_ALIGNED16(bias);
    const int block_size = 256;
    int rows_per_block = block_size / 32;
    cuda_launch(fused_residual_layernorm_forward_kernel, dim3(ceil_div(N, rows_per_block)), dim3(block_size), 0,
                stream, residual, out, mean, rstd, inp1, inp2, weight, bias, N, C);
    cudaCheck(cudaGetLastError());
}

// The backward's block count is capped so that its scratch stays small.
constexpr int LAYERNORM_BACKWARD_MAX_BLOCKS = 512;

// Floats of fp32 scratch layernorm_backward needs for C channels.
inline size_t layernorm_backward_scratch_floats(int C) {
    return (size_t)LAYERNORM_BACKWARD_MAX_BLOCKS * 3 * C;  // >= COLUMN_SUM_MAX_SPLITS * C too
}

// dinp (N,C) +=, dweight, dbias (C) +=; dout, inp (N,C); weight (C); mean, rstd (N);
// dinp_colsum (C) or null: += the column sums of dinp after the update, from the same pass (the
// bias gradient of the matmul whose output gradient dinp is: it need not read dinp again);
// scratch: layernorm_backward_scratch_floats(C) floats on the device
void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                        const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int N, int C,
                        cudaStream_t stream, floatX* dinp_colsum = nullptr) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_ALIGNED16(dinp); CHECK_ALIGNED16(dout); CHECK_ALIGNED16(inp); CHECK_ALIGNED16(weight);
    // as many warps per block (up to 8) as fit their accumulators in 48 KiB of shared memory
    // the dinp column sums in the same pass where three accumulators per warp fit (C <= 4096), else after it
    bool fused_colsum = dinp_colsum != nullptr && 3 * C * (int)sizeof(float) <= LAYERNORM_BACKWARD_SMEM_BYTES;
    int parts = fused_colsum ? 3 : 2;
    int stride = layernorm_backward_acc_stride(C, parts);
    size_t warp_bytes = (size_t)parts * x128::size * stride * sizeof(float);
    int warps_per_block = (int)(LAYERNORM_BACKWARD_SMEM_BYTES / warp_bytes);
    if (warps_per_block < 1) {
        fprintf(stderr, "[ERROR] layernorm_backward: C = %d is too large (max %d)\n", C,
                LAYERNORM_BACKWARD_SMEM_BYTES / (2 * (int)sizeof(float)));
        exit(EXIT_FAILURE);
    }
    warps_per_block = warps_per_block > 8 ? 8 : warps_per_block;
    int num_blocks = ceil_div(N, warps_per_block);
    num_blocks = num_blocks > LAYERNORM_BACKWARD_MAX_BLOCKS ? LAYERNORM_BACKWARD_MAX_BLOCKS : num_blocks;
    size_t smem = (size_t)warps_per_block * warp_bytes;
    cuda_launch(layernorm_backward_kernel, dim3(num_blocks), dim3(32 * warps_per_block), smem, stream,
                dinp, scratch, dout, inp, weight, mean, rstd, N, C, stride, parts);
    cudaCheck(cudaGetLastError());
    // dweight, dbias[, dinp_colsum] (C) += the blocks' partials, added in block order
    column_sum_accumulate(dweight, scratch, num_blocks, C, parts * C, stream);
    column_sum_accumulate(dbias, scratch + C, num_blocks, C, parts * C, stream);
    if (fused_colsum) column_sum_accumulate(dinp_colsum, scratch + 2 * C, num_blocks, C, parts * C, stream);
    if (dinp_colsum != nullptr && !fused_colsum) column_sums_accumulate_bf16(dinp_colsum, scratch, dinp, N, C, stream);
}
