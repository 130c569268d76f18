// Global gradient norm (squared sum), deterministic two-stage reduction.  ./global_norm [version]
//   1: product kernels (layers/global_norm.cuh): 128-bit packs, fixed 256 slots, one aggregation block
//   2: scalar bf16 loads into the same slots (how much the packs buy)
#include "dev/dev_common.h"
#include "layers/global_norm.cuh"
#include "layers/global_norm_cpu.h"

// partials (gridDim.x) = per-block sums of squares of values (count), scalar loads
__global__ void global_norm_scalar_kernel(float* partials, const floatX* values, size_t count) {
    float acc = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        float x = (float)values[i];
        acc += x * x;
    }
    float total = block_sum(acc);
    if (threadIdx.x == 0) { partials[blockIdx.x] = total; }
}

void run(int version, float* out, float* partials, const floatX* values, size_t count) {
    if (version == 1) {
        global_norm_squared(partials, values, count, true, 0);
    } else {
        cuda_launch(global_norm_scalar_kernel, dim3(GLOBAL_NORM_BLOCKS), dim3(512), 0, 0, partials, values, count);
        cudaCheck(cudaGetLastError());
    }
    global_norm_aggregate(out, partials, 0);
}

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    size_t n = DEV_EMULATED ? 40003 : 124475904;
    std::vector<float> x = dev_random(n, 1, 0.01f);
    floatX* d_x = dev_upload_bf16(x);
    float *d_partials = dev_malloc<float>(GLOBAL_NORM_BLOCKS), *d_out = dev_malloc<float>(1);
    run(version, d_out, d_partials, d_x, n);
    std::vector<double> ref = {ref::global_norm_squared(x.data(), n)};
    // fp32 tree sums of positive terms: relative error far below 1e-5
    validate_result("norm^2", dev_download(d_out, 1), ref, 1e-5, 0.0);
    float first = dev_download(d_out, 1)[0];
    run(version, d_out, d_partials, d_x, n);
    if (dev_download(d_out, 1)[0] != first) { printf("NOT DETERMINISTIC\n"); return 1; }
    benchmark_report("global norm", 2.0 * n, [&] { run(version, d_out, d_partials, d_x, n); });
    return 0;
}
