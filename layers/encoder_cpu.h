// The CPU reference lives in namespace ref.
// CPU reference: token embedding (no learned positions: RoPE carries position).
// inp (B,T) token ids, wte (Vp,C), out (B,T,C)
#pragma once

namespace ref {

template <class T>
void encoder_forward(T* out, const int* inp, const T* wte, int B, int T_, int C) {
#pragma omp parallel for
    for (int bt = 0; bt < B * T_; bt++) {
        const T* row = wte + (size_t)inp[bt] * C;
        T* o = out + (size_t)bt * C;
        for (int i = 0; i < C; i++) o[i] = row[i];
    }
}

// dwte (Vp,C) += scatter of dout (B,T,C) by token id; serial over positions, so the
// summation order is fixed and the result deterministic.
template <class T>
void encoder_backward(T* dwte, const T* dout, const int* inp, int B, int T_, int C) {
#pragma omp parallel for
    for (int i = 0; i < C; i++) {
        for (int bt = 0; bt < B * T_; bt++) dwte[(size_t)inp[bt] * C + i] += dout[(size_t)bt * C + i];
    }
}

}  // namespace ref
