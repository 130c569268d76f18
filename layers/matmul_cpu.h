// The CPU reference lives in namespace ref.
// CPU reference: matmul with bias, nn.Linear's convention.
// inp (N,C), w (OC,C), bias (OC) or null, out (N,OC) = inp @ w^T + bias
// The products go through BLAS (link $(BLAS_LDLIBS)), in float or double.
#pragma once
#include <cblas.h>

namespace ref {

inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                      int lda, const double* B, int ldb, double beta, double* C, int ldc) {
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void matmul_forward(T* out, const T* inp, const T* w, const T* bias, int N, int C, int OC) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = bias ? bias[o] : T(0);
    }
    blas_gemm(CblasNoTrans, CblasTrans, N, OC, C, T(1), inp, C, w, C, T(1), out, OC);
}

// dbias (OC) += column sums of dout (N,OC)
template <class T>
void matmul_bias_backward(T* dbias, const T* dout, int N, int OC) {
#pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        T sum = 0;
        for (int n = 0; n < N; n++) sum += dout[(size_t)n * OC + o];
        dbias[o] += sum;
    }
}

// dinp (N,C) += dout @ w;  dw (OC,C) += dout^T @ inp;  dbias (OC) += column sums of dout
template <class T>
void matmul_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N, int C, int OC) {
    blas_gemm(CblasNoTrans, CblasNoTrans, N, C, OC, T(1), dout, OC, w, C, T(1), dinp, C);
    blas_gemm(CblasTrans, CblasNoTrans, OC, C, N, T(1), dout, OC, inp, C, T(1), dw, C);
    if (dbias) matmul_bias_backward(dbias, dout, N, OC);
}

}  // namespace ref
