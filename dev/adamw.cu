// AdamW: fp32 master weights and moments, bf16 params by stochastic rounding.  ./adamw [version]
//   1: product kernel (layers/adamw.cuh) with master weights
//   2: the same kernel without master weights (bf16 params are the weights: less traffic, less precision)
#include "dev/dev_common.h"
#include "layers/adamw.cuh"
#include "layers/adamw_cpu.h"

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    size_t n = DEV_EMULATED ? 3001 : 124475904;  // GPT-2 124M parameter count
    const float lr = 1e-3f;
    AdamWStep s{.lr = lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1};
    std::vector<float> params = dev_random(n, 1, 0.5f), grads = dev_random(n, 2, 0.01f);
    floatX *d_params = dev_upload_bf16(params), *d_grads = dev_upload_bf16(grads);
    float *d_m = dev_malloc<float>(n), *d_v = dev_malloc<float>(n);
    float* d_master = version == 1 ? dev_malloc<float>(n) : nullptr;
    if (d_master) { init_master_weights(d_master, d_params, n, 0); }

    std::vector<float> ref = params, m(n, 0.0f), v(n, 0.0f);
    ref::adamw_update(ref.data(), grads.data(), m.data(), v.data(), n, s);
    adamw_update(d_params, d_master, d_grads, d_m, d_v, n, s, 42u, 0);
    if (d_master) { validate_result("master", dev_download(d_master, n), ref, 1e-6, 1e-4 * lr); }  // fp32 vs fp32
    // stochastic rounding: within one bf16 ulp (2^-7 relative) of the fp32 result
    validate_result("params", dev_download_bf16(d_params, n), ref, 1.0 / 128, 0.0);
    validate_result("m", dev_download(d_m, n), m, 1e-5, 0.0);

    // bytes per parameter: bf16 param r/w, bf16 grad, fp32 m, v r/w, fp32 master r/w
    double bytes = (double)n * (2 + 2 + 2 + 16 + (d_master ? 8 : 0));
    s.step = 2;
    benchmark_report("adamw", bytes, [&] {
        adamw_update(d_params, d_master, d_grads, d_m, d_v, n, s, 43u, 0);
    });
    return 0;
}
