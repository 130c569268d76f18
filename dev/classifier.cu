// Fused classifier: softmax + cross-entropy + gradient in one pass, dlogits in place.  ./classifier [version]
//   1: product kernel (layers/classifier.cuh): one block of 1024 per row, online max/sum, 128-bit packs
//   2: the same with 256-thread blocks (more blocks in flight per SM)
#include "dev/dev_common.h"
#include "layers/classifier.cuh"
#include "layers/classifier_cpu.h"

void run(int version, floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp) {
    if (version == 1) {
        fused_classifier(logits, losses, targets, dloss, N, V, Vp, true, 0);
    } else {
        cuda_launch(fused_classifier_kernel, dim3(N), dim3(256), 0, 0, logits, losses, targets, dloss, V, Vp, true);
        cudaCheck(cudaGetLastError());
    }
}

int main(int argc, char** argv) {
    int version = dev_version(argc, argv, 2);
    int N = DEV_EMULATED ? 3 : 8 * 1024, V = DEV_EMULATED ? 9001 : 50257, Vp = DEV_EMULATED ? 9008 : 50304;
    std::vector<float> logits = dev_random((size_t)N * Vp, 1, 2.0f);
    std::mt19937 gen(2);
    std::vector<int> targets(N);
    for (auto& t : targets) { t = (int)(gen() % V); }
    float dloss = 1.0f / N;
    floatX* d_logits = dev_upload_bf16(logits);
    float* d_losses = dev_malloc<float>(N);
    int* d_targets = dev_upload(targets);
    std::vector<double> logits_d(logits.begin(), logits.end()), losses(N), dlogits(logits.size());
    ref::fused_classifier(losses.data(), dlogits.data(), logits_d.data(), targets.data(), (double)dloss, N, V, Vp);
    run(version, d_logits, d_losses, d_targets, dloss, N, V, Vp);
    // fp32 log-sum-exp: 1e-4 absolute; bf16 dlogits: 1e-2 relative plus a floor for the target column
    validate_result("losses", dev_download(d_losses, N), losses, 0.0, 1e-4);
    validate_result("dlogits", dev_download_bf16(d_logits, logits.size()), dlogits, 1e-2, 1e-3 * max_abs_of(dlogits));
    // read logits twice (the second read mostly from L2), write dlogits once
    benchmark_report("fused classifier", (double)N * Vp * 2 * 2,
                     [&] { run(version, d_logits, d_losses, d_targets, dloss, N, V, Vp); });
    return 0;
}
