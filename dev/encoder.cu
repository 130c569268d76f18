// Token embedding forward (gather) and deterministic backward (host bucket sort + one thread
// per (token, 8 channels)).  ./encoder [version]
//   1: product kernels (layers/encoder.cuh)
//   2: forward with one thread per element (scalar loads); backward as 1
#include "dev/dev_common.h"
#include "layers/encoder.cuh"
#include "layers/encoder_cpu.h"

// out (B*T, C), inp (B*T), wte (Vp, C)
__global__ void encoder_forward_scalar_kernel(floatX* out, const int* inp, const floatX* wte, int BT, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < BT * C) { out[idx] = wte[(size_t)inp[idx / C] * C + idx % C]; }
}

void run_forward(int version, floatX* out, const int* inp, const floatX* wte, int B, int T, int C) {
    if (version == 1) {
        encoder_forward(out, inp, wte, B, T, C, 0);
    } else {
        cuda_launch(encoder_forward_scalar_kernel, dim3(ceil_div(B * T * C, 256)), dim3(256), 0, 0, out, inp, wte,
                    B * T, C);
        cudaCheck(cudaGetLastError());
    }
}

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    int B = DEV_EMULATED ? 2 : 8, T = DEV_EMULATED ? 7 : 1024, C = DEV_EMULATED ? 40 : 768;
    int V = DEV_EMULATED ? 61 : 50257, Vp = DEV_EMULATED ? 64 : 50304;
    std::vector<float> wte = dev_random((size_t)Vp * C, 1), dout = dev_random((size_t)B * T * C, 2);
    // Zipf-like tokens, as in text: a few very frequent ids make the largest buckets
    std::mt19937 gen(3);
    std::vector<int> inp(B * T);
    for (auto& t : inp) { t = (int)(std::pow((double)(gen() % 1000000) / 1e6, 3.0) * V); }
    floatX *d_wte = dev_upload_bf16(wte), *d_dout = dev_upload_bf16(dout);
    floatX *d_out = dev_malloc<floatX>((size_t)B * T * C), *d_dwte = dev_malloc<floatX>((size_t)Vp * C);
    int *d_inp = dev_upload(inp), *d_work = dev_malloc<int>(encoder_backward_workspace_ints(B, T));

    std::vector<float> out((size_t)B * T * C), dwte((size_t)Vp * C, 0.0f);
    ref::encoder_forward(out.data(), inp.data(), wte.data(), B, T, C);
    ref::encoder_backward(dwte.data(), dout.data(), inp.data(), B, T, C);
    run_forward(version, d_out, d_inp, d_wte, B, T, C);
    encoder_backward(d_dwte, d_work, d_dout, inp.data(), B, T, C, 0);
    validate_result("out", dev_download_bf16(d_out, out.size()), out, 0.0, 0.0);  // a copy: exact
    // fp32 sums then one bf16 rounding: 1e-2 relative plus a cancellation floor
    validate_result("dwte", dev_download_bf16(d_dwte, dwte.size()), dwte, 1e-2, 1e-3 * max_abs_of(dwte));

    double bytes = (double)B * T * C * 2 * 2;  // read a row of wte / dout, write one
    benchmark_report("encoder forward", bytes, [&] { run_forward(version, d_out, d_inp, d_wte, B, T, C); });
    benchmark_report("encoder backward (+sort)", bytes,
                     [&] { encoder_backward(d_dwte, d_work, d_dout, inp.data(), B, T, C, 0); });
    return 0;
}
