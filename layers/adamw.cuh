// AdamW with bias correction and decoupled weight decay: fp32 master weights and moments,
// bf16 parameters written by deterministic stochastic rounding (seeded hash of the index).
// CPU twin: layers/adamw_cpu.h, test: test/test_layers_cuda.cu, experiments: dev/adamw.cu.
#pragma once

#include <cmath>
#include "layers/adamw_step.h"
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// ----------------------------------------------------------------------------
// kernel

// params (n) floatX; master (n) fp32 or null (then the bf16 params are the weights read);
// grads (n) floatX; m, v (n) fp32. grad_scale multiplies the gradient (e.g. clipping).
// One thread per element.
__global__ void adamw_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                             float lr, float beta1, float beta2, float beta1_correction, float beta2_correction,
                             float eps, float weight_decay, float grad_scale, unsigned int seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float g = grad_scale * (float)grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / beta1_correction;
    float vhat = vi / beta2_correction;
    float p = master != nullptr ? master[i] : (float)params[i];
    p -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p);
    params[i] = stochastic_round_bf16(p, hash_index_seed((unsigned int)i, seed));
    if (master != nullptr) { master[i] = p; }
}

// The bf16 params an AdamW step with this seed leaves for these master weights: what a resumed
// run restores, so that it continues bit for bit. params (n) floatX, master (n) fp32.
__global__ void params_from_master_kernel(floatX* params, const float* master, size_t n, unsigned int seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { params[i] = stochastic_round_bf16(master[i], hash_index_seed((unsigned int)i, seed)); }
}

// Copies bf16 params into fp32 master weights (once, at the start of training). master, params (n)
__global__ void init_master_weights_kernel(float* master, const floatX* params, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { master[i] = (float)params[i]; }
}

// ----------------------------------------------------------------------------
// launchers

// One AdamW step on one tensor. params, grads (n) floatX; master (n) fp32 or null; m, v (n) fp32;
// s the step (its hyperparameters read as float); seed: fresh per step and tensor, for the
// stochastic rounding.
void adamw_update(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                  const AdamWStep& s, unsigned int seed, cudaStream_t stream) {
    float lr = (float)s.lr, beta1 = (float)s.beta1, beta2 = (float)s.beta2, eps = (float)s.eps,
          weight_decay = (float)s.weight_decay, grad_scale = (float)s.grad_scale;
    float beta1_correction = 1.0f - powf(beta1, (float)s.step);
    float beta2_correction = 1.0f - powf(beta2, (float)s.step);
    const int block_size = 512;
    cuda_launch(adamw_kernel, dim3((unsigned int)((n + block_size - 1) / block_size)), dim3(block_size), 0, stream,
                params, master, grads, m, v, n, lr, beta1, beta2, beta1_correction, beta2_correction, eps,
                weight_decay, grad_scale, seed);
    cudaCheck(cudaGetLastError());
}

// params (n) floatX = master (n) fp32 rounded as adamw_update(..., seed, stream) rounds them
void params_from_master(floatX* params, const float* master, size_t n, unsigned int seed, cudaStream_t stream) {
    const int block_size = 512;
    cuda_launch(params_from_master_kernel, dim3((unsigned int)((n + block_size - 1) / block_size)), dim3(block_size),
                0, stream, params, master, n, seed);
    cudaCheck(cudaGetLastError());
}

// master (n) fp32 = params (n) floatX
void init_master_weights(float* master, const floatX* params, size_t n, cudaStream_t stream) {
    const int block_size = 512;
    cuda_launch(init_master_weights_kernel, dim3((unsigned int)((n + block_size - 1) / block_size)),
                dim3(block_size), 0, stream, master, params, n);
    cudaCheck(cudaGetLastError());
}
