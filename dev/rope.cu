// RoPE forward/backward on q and k inside qkv (B,T,3,NH,hd).  ./rope [version]
//   1: product kernel (layers/rope.cuh): four pairs per thread through 128-bit packs, any even hd
//      with NH*hd a multiple of 8 (a pack may span heads), the cos/sin table by 16-byte loads
//      where a pack lies in one head; in place it leaves v alone
//   2: four pairs per thread through 128-bit packs (hd a multiple of 8), scalar table reads, v copied
// Also the backward with the qkv bias gradient: 1 in one pass (rope_backward_bias), 2 as the
// rotation in place then a column-sum pass over dqkv.
#include "dev/dev_common.h"
#include "layers/rope.cuh"
#include "layers/rope_cpu.h"

// out, inp (B, T, 3, NH, hd); freqs_cis (T, hd/2, 2); one thread per 8 channels
__global__ void rope_x128_kernel(floatX* out, const floatX* inp, const float* freqs_cis, int B, int T, int NH,
                                 int hd, float sign) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;  // over (B, T, 3, NH, hd)
    if (idx >= B * T * 3 * NH * hd) { return; }
    int d = idx % hd;
    int qkv = (idx / (hd * NH)) % 3;
    int t = (idx / (hd * NH * 3)) % T;
    x128 x = load128(inp + idx);
    if (qkv < 2) {
        for (int k = 0; k < x128::size; k += 2) {
            int i = (d + k) / 2;
            float c = freqs_cis[((size_t)t * (hd / 2) + i) * 2], s = sign * freqs_cis[((size_t)t * (hd / 2) + i) * 2 + 1];
            float x0 = (float)x[k], x1 = (float)x[k + 1];
            x[k] = (floatX)(x0 * c - x1 * s);
            x[k + 1] = (floatX)(x0 * s + x1 * c);
        }
    }
    store128(out + idx, x);
}

void run(int version, floatX* out, const floatX* inp, const float* freqs, int B, int T, int NH, int hd, bool fwd) {
    if (version == 1) {
        if (fwd) { rope_forward(out, inp, freqs, B, T, NH, hd, 0); } else { rope_backward(out, inp, freqs, B, T, NH, hd, 0); }
    } else {
        CHECK_MULTIPLE_OF(hd, 8);
        int n = B * T * 3 * NH * hd / x128::size;
        cuda_launch(rope_x128_kernel, dim3(ceil_div(n, 256)), dim3(256), 0, 0, out, inp, freqs, B, T, NH, hd,
                    fwd ? 1.0f : -1.0f);
        cudaCheck(cudaGetLastError());
    }
}

// dqkv rotated back in place, dbias (3C) += its column sums
void run_backward_bias(int version, floatX* dqkv, floatX* dbias, float* scratch, const float* freqs, int B, int T,
                       int NH, int hd) {
    if (version == 1) {
        rope_backward_bias(dqkv, dbias, scratch, freqs, B, T, NH, hd, 0);
    } else {
        run(version, dqkv, dqkv, freqs, B, T, NH, hd, false);
        column_sums_accumulate_bf16(dbias, scratch, dqkv, B * T, 3 * NH * hd, 0);
    }
}

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    int B = DEV_EMULATED ? 2 : 8, T = DEV_EMULATED ? 33 : 1024, NH = DEV_EMULATED ? 2 : 12, hd = DEV_EMULATED ? 24 : 64;
    size_t n = (size_t)B * T * 3 * NH * hd;
    std::vector<float> qkv = dev_random(n, 1), freqs((size_t)T * hd);
    rope_precompute_freqs(freqs.data(), T, hd, 10000.0);
    floatX *d_inp = dev_upload_bf16(qkv), *d_out = dev_malloc<floatX>(n);
    float* d_freqs = dev_upload(freqs);
    std::vector<double> qkv_d(qkv.begin(), qkv.end()), fwd(n), bwd(n);
    ref::rope_forward(fwd.data(), qkv_d.data(), B, T, NH, hd, 10000.0);
    ref::rope_backward(bwd.data(), qkv_d.data(), B, T, NH, hd, 10000.0);
    // bf16 outputs: 1e-2 relative plus a cancellation floor relative to the inputs
    run(version, d_out, d_inp, d_freqs, B, T, NH, hd, true);
    validate_result("forward", dev_download_bf16(d_out, n), fwd, 1e-2, 1e-3 * max_abs_of(qkv));
    run(version, d_out, d_inp, d_freqs, B, T, NH, hd, false);
    validate_result("backward", dev_download_bf16(d_out, n), bwd, 1e-2, 1e-3 * max_abs_of(qkv));
    benchmark_report("rope forward", 4.0 * n, [&] { run(version, d_out, d_inp, d_freqs, B, T, NH, hd, true); });
    benchmark_report("rope forward in place", 4.0 * n, [&] { run(version, d_inp, d_inp, d_freqs, B, T, NH, hd, true); });
    // the backward with the bias gradient: d qkv against the reference, the bias against the column
    // sums of the d qkv written (bytes: q, k read and written, v read)
    int C3 = 3 * NH * hd;
    floatX *d_dqkv = dev_upload_bf16(qkv), *d_dbias = dev_malloc<floatX>(C3);
    float* d_scratch = dev_malloc<float>((size_t)COLUMN_SUM_MAX_SPLITS * C3);
    run_backward_bias(version, d_dqkv, d_dbias, d_scratch, d_freqs, B, T, NH, hd);
    std::vector<float> got = dev_download_bf16(d_dqkv, n), dbias(C3, 0.0f);
    validate_result("backward+bias", got, bwd, 1e-2, 1e-3 * max_abs_of(qkv));
    for (size_t i = 0; i < n; i++) dbias[i % C3] += got[i];
    validate_result("qkv dbias", dev_download_bf16(d_dbias, C3), dbias, 1e-2, 1e-3 * max_abs_of(dbias));
    benchmark_report("rope backward + qkv bias", 2.0 * n * 5 / 3, [&] {
        run_backward_bias(version, d_dqkv, d_dbias, d_scratch, d_freqs, B, T, NH, hd);
    });
    return 0;
}
