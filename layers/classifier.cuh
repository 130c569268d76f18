// Fused classifier: softmax + cross-entropy + its gradient in one pass over the logits, writing
// dlogits in place of logits (the (B*T, Vp) logits are the largest activation: no second buffer).
// CPU twin: layers/classifier_cpu.h, test: test/test_layers_cuda.cu, experiments: dev/classifier.cu.
// Only the first V of Vp columns take part; the padded columns get exactly zero gradient.
#pragma once

#include <cmath>
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// ----------------------------------------------------------------------------
// kernel

// logits (N, Vp): in: logits, out (when write_dlogits): dlogits = (softmax - onehot(target)) * dloss
// for j < V and 0 for V <= j < Vp; losses (N) fp32 = -log softmax[target]; targets (N) in [0, V).
// One block per row; thread i handles the 8-wide packs i, i + blockDim.x, ...
__global__ void fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V,
                                        int Vp, bool write_dlogits) {
    int row = blockIdx.x;
    floatX* x = logits + (size_t)row * Vp;
    int target = targets[row];
    // read before the barriers below: afterwards some thread may overwrite x[target] with its gradient
    float target_logit = (float)x[target];
    // pass 1: online max and sum of exp over this thread's columns
    float thread_max = -INFINITY, thread_sum = 0.0f;
    for (int c = threadIdx.x * x128::size; c < V; c += blockDim.x * x128::size) {
        x128 p = load128(x + c);
        for (int k = 0; k < x128::size && c + k < V; k++) {
            float v = (float)p[k];
            if (v > thread_max) {
                thread_sum = thread_sum * expf(thread_max - v) + 1.0f;
                thread_max = v;
            } else {
                thread_sum += expf(v - thread_max);
            }
        }
    }
    float row_max = block_max(thread_max);
    float row_sum = block_sum(thread_max == -INFINITY ? 0.0f : thread_sum * expf(thread_max - row_max));
    if (threadIdx.x == 0) { losses[row] = logf(row_sum) + row_max - target_logit; }
    if (!write_dlogits) { return; }
    // pass 2: gradient, in place
    float inv_sum = 1.0f / row_sum;
    for (int c = threadIdx.x * x128::size; c < Vp; c += blockDim.x * x128::size) {
        x128 p = load128(x + c);
        for (int k = 0; k < x128::size; k++) {
            int j = c + k;
            float prob = expf((float)p[k] - row_max) * inv_sum;
            float grad = (prob - (j == target ? 1.0f : 0.0f)) * dloss;
            p[k] = (floatX)(j < V ? grad : 0.0f);
        }
        store128(x + c, p);
    }
}

// ----------------------------------------------------------------------------
// launcher

// logits (N,Vp): replaced by dlogits when write_dlogits; losses (N) fp32 (written =);
// targets (N) device ints in [0,V); dloss = d(total loss)/d(losses[i]), e.g. 1/(B*T*grad_accum);
// Vp a multiple of 8
void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp,
                      bool write_dlogits, cudaStream_t stream) {
    CHECK_MULTIPLE_OF(Vp, 8);
    CHECK_ALIGNED16(logits);
    if (V > Vp) {
        fprintf(stderr, "[ERROR] fused_classifier: V = %d exceeds the padded vocabulary Vp = %d\n", V, Vp);
        exit(EXIT_FAILURE);
    }
    const int block_size = 1024;
    cuda_launch(fused_classifier_kernel, dim3(N), dim3(block_size), 0, stream,
                logits, losses, targets, dloss, V, Vp, write_dlogits);
    cudaCheck(cudaGetLastError());
}
