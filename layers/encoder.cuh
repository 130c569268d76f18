// Token embedding (no learned positions: RoPE carries position). CPU twin: layers/encoder_cpu.h,
// test: test/test_layers_cuda.cu, experiments: dev/encoder.cu.
// Forward is a gather; backward is a deterministic scatter-add: the host sorts positions into
// one bucket per token id (in increasing position order) and each GPU thread owns one
// (token, 8-channel) slice, summing its bucket serially. No float atomics, so the result is
// bitwise the same on every run.
#pragma once

#include <algorithm>
#include <vector>
#include "layers/cuda_common.cuh"
#include "layers/floatx.cuh"

// ----------------------------------------------------------------------------
// kernels

// out (B*T, C), inp (B*T) token ids, wte (Vp, C); one thread per 8 channels of one position
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, int BT, int C) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= BT * C) { return; }
    int bt = idx / C;
    int c = idx % C;
    store128(out + (size_t)bt * C + c, load128(wte + (size_t)inp[bt] * C + c));
}

// dwte (Vp, C) +=; dout (B*T, C); positions (B*T): positions sorted by token, each bucket's in
// increasing order; buckets (num_buckets, 3): {first index into positions, count, token id}.
// One thread per (bucket, 8 channels).
__global__ void encoder_backward_kernel(floatX* dwte, const floatX* dout, const int* positions, const int* buckets,
                                        int num_buckets, int C) {
    int chunks_per_row = C / x128::size;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= num_buckets * chunks_per_row) { return; }
    const int* bucket = buckets + 3 * (idx / chunks_per_row);
    int c = (idx % chunks_per_row) * x128::size;
    float acc[x128::size] = {};
    for (int i = 0; i < bucket[1]; i++) {
        x128 d = load128(dout + (size_t)positions[bucket[0] + i] * C + c);
        for (int k = 0; k < x128::size; k++) { acc[k] += (float)d[k]; }
    }
    floatX* dst = dwte + (size_t)bucket[2] * C + c;
    x128 g = load128(dst);
    for (int k = 0; k < x128::size; k++) { g[k] = (floatX)((float)g[k] + acc[k]); }
    store128(dst, g);
}

// ----------------------------------------------------------------------------
// launchers

// out (B,T,C), inp (B,T) device token ids, wte (Vp,C); C a multiple of 8
void encoder_forward(floatX* out, const int* inp, const floatX* wte, int B, int T, int C, cudaStream_t stream) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_ALIGNED16(out);
    CHECK_ALIGNED16(wte);
    const int block_size = 256;
    int num_chunks = B * T * C / x128::size;
    cuda_launch(encoder_forward_kernel, dim3(ceil_div(num_chunks, block_size)), dim3(block_size), 0, stream,
                out, inp, wte, B * T, C);
    cudaCheck(cudaGetLastError());
}

// Device scratch the backward needs: 4*B*T ints (sorted positions, then up to B*T buckets).
inline size_t encoder_backward_workspace_ints(int B, int T) { return (size_t)4 * B * T; }

// dwte (Vp,C) += scatter of dout (B,T,C) by token; inp_host (B,T) the same token ids on the host
// (the trainer has them there: the data loader produces them); workspace (4*B*T ints) on the
// device. Deterministic: the summation order of every dwte element is fixed by the tokens alone.
void encoder_backward(floatX* dwte, int* workspace, const floatX* dout, const int* inp_host, int B, int T, int C,
                      cudaStream_t stream) {
    CHECK_MULTIPLE_OF(C, 8);
    CHECK_ALIGNED16(dwte);
    CHECK_ALIGNED16(dout);
    int BT = B * T;
    // stable bucket sort of positions by token id
    std::vector<int> order(BT);
    for (int i = 0; i < BT; i++) { order[i] = i; }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return inp_host[a] < inp_host[b]; });
    std::vector<int> host(4 * (size_t)BT);  // positions (BT), then buckets (num_buckets, 3)
    std::copy(order.begin(), order.end(), host.begin());
    std::vector<int> bucket_starts;
    for (int i = 0; i < BT; i++) {
        if (i == 0 || inp_host[order[i]] != inp_host[order[i - 1]]) { bucket_starts.push_back(i); }
    }
    int num_buckets = (int)bucket_starts.size();
    // largest buckets first, so the longest serial sums start earliest (ties keep token order)
    std::vector<int> by_size(num_buckets);
    for (int b = 0; b < num_buckets; b++) { by_size[b] = b; }
    auto bucket_count = [&](int b) { return (b + 1 < num_buckets ? bucket_starts[b + 1] : BT) - bucket_starts[b]; };
    std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) { return bucket_count(a) > bucket_count(b); });
    int* buckets = host.data() + BT;
    for (int j = 0; j < num_buckets; j++) {
        int b = by_size[j];
        buckets[3 * j + 0] = bucket_starts[b];
        buckets[3 * j + 1] = bucket_count(b);
        buckets[3 * j + 2] = inp_host[order[bucket_starts[b]]];
    }
    // pageable source: the call returns once the data is staged, so the vector may go away
    cudaCheck(cudaMemcpyAsync(workspace, host.data(), (size_t)(BT + 3 * num_buckets) * sizeof(int),
                              cudaMemcpyHostToDevice, stream));
    const int block_size = 256;
    int num_threads = num_buckets * (C / x128::size);
    cuda_launch(encoder_backward_kernel, dim3(ceil_div(num_threads, block_size)), dim3(block_size), 0, stream,
                dwte, dout, (const int*)workspace, (const int*)(workspace + BT), num_buckets, C);
    cudaCheck(cudaGetLastError());
}
