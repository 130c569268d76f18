// The CPU reference lives in namespace ref.
// CPU reference: fused softmax + cross-entropy over the first V of Vp logit columns
// (the padded columns V..Vp-1 take no part and get exactly zero gradient).
// logits (N,Vp), targets (N) in [0,V), losses (N), dlogits (N,Vp) or null; dlogits may alias logits.
// dloss is d(total loss)/d(losses[i]), e.g. 1/N for a mean.
#pragma once
#include <cmath>

namespace ref {

template <class T>
void fused_classifier(T* losses, T* dlogits, const T* logits, const int* targets, T dloss, int N, int V, int Vp) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = logits + (size_t)n * Vp;
        T* d = dlogits ? dlogits + (size_t)n * Vp : nullptr;
        int target = targets[n];
        T x_target = x[target];  // read before d (which may alias x) is written
        T xmax = x[0];
        for (int j = 1; j < V; j++) xmax = x[j] > xmax ? x[j] : xmax;
        // one exp per logit: with a gradient to write, exp(x - max) is kept in d and scaled below
        T sum = 0;
        if (d) {
            for (int j = 0; j < V; j++) {
                T e = std::exp(x[j] - xmax);
                d[j] = e;
                sum += e;
            }
        } else {
            for (int j = 0; j < V; j++) sum += std::exp(x[j] - xmax);
        }
        losses[n] = std::log(sum) + xmax - x_target;
        if (d) {
            // d = (softmax - onehot) * dloss
            T scale = dloss / sum;
            for (int j = 0; j < V; j++) d[j] *= scale;
            d[target] -= dloss;
            for (int j = V; j < Vp; j++) d[j] = 0;
        }
    }
}

}  // namespace ref
