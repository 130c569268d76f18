// Host cuBLASLt and NCCL (simt/) against independent references:
// cuBLASLt vs a plain triple loop in double; NCCL vs a serial reduction over the
// ranks' data, with ranks as std::threads.
// Under nvcc the same file tests the real cuBLASLt on a GPU (build/test_vendor_host_gpu),
// so the host implementation's semantics are checked against the library it stands for;
// the cases about the host implementation itself (refusals, threads, NCCL ranks as
// threads of one process) are skipped there.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <omp.h>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "layers/cublas_common.cuh"
#include "runtime/nccl_common.cuh"

#if defined(__CUDACC__)
static const bool ON_GPU = true;
#else
static const bool ON_GPU = false;
#endif

// ----------------------------------------------------------------------------
// bf16 in the test: bits -> value is exact by definition; value -> bits rounds
// to nearest even through frexp/nearbyint (independent of the library's bit trick)

static double bf16_value(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double round_bf16(double x) {  // finite, normal range
    if (x == 0.0) return x;
    int e;
    double f = std::frexp(x, &e);              // x = f * 2^e, 0.5 <= |f| < 1
    double q = std::nearbyint(std::ldexp(f, 8));  // 8 significant bits, ties to even
    return std::ldexp(q, e - 8);
}

static uint16_t bf16_bits(double x) {
    float f = (float)round_bf16(x);
    uint32_t u;
    memcpy(&u, &f, 4);
    REQUIRE((u & 0xffffu) == 0u);
    return (uint16_t)(u >> 16);
}

static const double U32 = 1.0 / (1 << 24);  // fp32 unit roundoff
static const double UBF = 1.0 / (1 << 8);   // bf16 unit roundoff
// A GPU's cuBLASLt may evaluate GELU's tanh with the hardware's tanh.approx.f32, whose relative
// error the PTX ISA documents as at most 2^-10.987; the host library's tanh is exact (to fp32)
static const double TANH_REL = ON_GPU ? std::pow(2.0, -10.987) : 0.0;

static double gelu_tanh(double x) { return std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)); }

static double gelu_ref(double x) {
    const double s = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x) {
    const double s = std::sqrt(2.0 / M_PI);
    double t = std::tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

// ----------------------------------------------------------------------------
// device memory: the host libraries accept only cudaMalloc'd buffers, as a GPU would;
// managed memory is such a buffer that the test also reads and writes directly

template <class T>
struct DeviceVec {
    T* ptr = nullptr;
    size_t n = 0;
    explicit DeviceVec(size_t count = 0, T fill = T()) : n(count) {
        if (n) REQUIRE(cudaMallocManaged((void**)&ptr, n * sizeof(T)) == cudaSuccess);
        for (size_t i = 0; i < n; i++) ptr[i] = fill;
    }
    DeviceVec(const std::vector<T>& v) : DeviceVec(v.size()) { std::copy(v.begin(), v.end(), ptr); }
    DeviceVec(const DeviceVec& o) : DeviceVec(o.n) { std::copy(o.ptr, o.ptr + n, ptr); }
    DeviceVec(DeviceVec&& o) noexcept : ptr(o.ptr), n(o.n) { o.ptr = nullptr; o.n = 0; }
    DeviceVec& operator=(DeviceVec o) { std::swap(ptr, o.ptr); std::swap(n, o.n); return *this; }
    ~DeviceVec() { if (ptr) cudaFree(ptr); }
    T* data() { return ptr; }
    const T* data() const { return ptr; }
    size_t size() const { return n; }
    T& operator[](size_t i) { return ptr[i]; }
    const T& operator[](size_t i) const { return ptr[i]; }
    T* begin() { return ptr; }
    T* end() { return ptr + n; }
};

// ----------------------------------------------------------------------------
// a column-major matrix (possibly batched) in either type, padding filled with NaN

struct Mat {
    cudaDataType type;
    int64_t rows, cols, ld, stride;
    int batch;
    DeviceVec<uint8_t> bytes;

    Mat(cudaDataType t, int64_t r, int64_t c, int64_t ld_, int b = 1, int64_t stride_extra = 0)
        : type(t), rows(r), cols(c), ld(ld_), stride(ld_ * c + stride_extra), batch(b) {
        bytes = DeviceVec<uint8_t>((size_t)(stride * b) * esize());
        for (int64_t i = 0; i < stride * b; i++) set_raw(i, NAN);
    }
    size_t esize() const { return type == CUDA_R_32F ? 4 : 2; }
    int64_t index(int b, int64_t i, int64_t j) const { return b * stride + i + j * ld; }
    void set_raw(int64_t idx, double v) {
        if (type == CUDA_R_32F) {
            float f = (float)v;
            memcpy(&bytes[idx * 4], &f, 4);
        } else {
            uint16_t h = std::isnan(v) ? (uint16_t)0x7fc0 : bf16_bits(v);
            memcpy(&bytes[idx * 2], &h, 2);
        }
    }
    double get_raw(int64_t idx) const {
        if (type == CUDA_R_32F) {
            float f;
            memcpy(&f, &bytes[idx * 4], 4);
            return f;
        }
        uint16_t h;
        memcpy(&h, &bytes[idx * 2], 2);
        return bf16_value(h);
    }
    double get(int b, int64_t i, int64_t j) const { return get_raw(index(b, i, j)); }
    void set(int b, int64_t i, int64_t j, double v) { set_raw(index(b, i, j), v); }
    void fill_random(std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
        std::uniform_real_distribution<double> dist(lo, hi);
        for (int b = 0; b < batch; b++)
            for (int64_t j = 0; j < cols; j++)
                for (int64_t i = 0; i < rows; i++) set(b, i, j, type == CUDA_R_32F ? (double)(float)dist(rng) : round_bf16(dist(rng)));
    }
    void* data() { return bytes.data(); }
};

// ----------------------------------------------------------------------------
// one cublasLtMatmul, described like a call site would

struct Case {
    int64_t m = 8, n = 8, k = 8;
    bool transa = false, transb = false;
    int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
    int batch = 1;
    float alpha = 1.0f, beta = 0.0f;
    cudaDataType ab = CUDA_R_32F, cd = CUDA_R_32F;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    int64_t aux_ld_pad = 8;  // aux ld = m rounded up to 8 + this
    bool in_place = false;   // C == D
};

struct Run {
    cublasStatus_t layout_status = CUBLAS_STATUS_SUCCESS, heuristic_status = CUBLAS_STATUS_NOT_SUPPORTED,
                   matmul_status = CUBLAS_STATUS_NOT_SUPPORTED;
    int returned = 0;
    bool refused() const {
        return layout_status != CUBLAS_STATUS_SUCCESS || heuristic_status != CUBLAS_STATUS_SUCCESS || returned == 0 ||
               matmul_status != CUBLAS_STATUS_SUCCESS;
    }
};

// Sets the descriptor attributes a call site sets and runs heuristic + matmul.
static Run run_matmul(const Case& c, Mat& A, Mat& B, Mat& C, Mat& D, void* bias, void* aux, int64_t aux_ld,
                      int64_t bias_batch_stride = 0) {
    cublasLtHandle_t handle;
    REQUIRE(cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t desc;
    REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    cublasOperation_t opa = c.transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = c.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)) == CUBLAS_STATUS_SUCCESS);
    cublasLtEpilogue_t epi = c.epilogue;
    REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)) == CUBLAS_STATUS_SUCCESS);
    if (bias) {
        REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) == CUBLAS_STATUS_SUCCESS);
        cudaDataType_t bias_type = c.cd;
        REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)) == CUBLAS_STATUS_SUCCESS);
        REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_batch_stride,
                                               sizeof(bias_batch_stride)) == CUBLAS_STATUS_SUCCESS);
    }
    if (aux) {
        REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)) == CUBLAS_STATUS_SUCCESS);
        REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)) == CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatrixLayout_t la, lb, lc, ld;
    Mat* mats[4] = {&A, &B, &C, &D};
    cublasLtMatrixLayout_t* layouts[4] = {&la, &lb, &lc, &ld};
    Run run;
    for (int i = 0; i < 4; i++) {
        Mat& M = *mats[i];
        // a GPU's library may refuse a layout of 0 rows or columns (k = 0: undocumented); the caller decides
        run.layout_status = cublasLtMatrixLayoutCreate(layouts[i], M.type, M.rows, M.cols, M.ld);
        if (run.layout_status != CUBLAS_STATUS_SUCCESS) {
            INFO("cublasLtMatrixLayoutCreate(" << M.rows << " x " << M.cols << ", ld " << M.ld
                 << "): " << cublasLtGetStatusName(run.layout_status));
            REQUIRE((ON_GPU && c.k == 0));
            for (int j = 0; j < i; j++) cublasLtMatrixLayoutDestroy(*layouts[j]);
            cublasLtMatmulDescDestroy(desc);
            cublasLtDestroy(handle);
            return run;
        }
        if (M.batch > 1) {
            int32_t count = M.batch;
            int64_t stride = M.stride;
            REQUIRE(cublasLtMatrixLayoutSetAttribute(*layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)) == CUBLAS_STATUS_SUCCESS);
            REQUIRE(cublasLtMatrixLayoutSetAttribute(*layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)) == CUBLAS_STATUS_SUCCESS);
        }
    }
    cublasLtMatmulPreference_t pref;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    uint64_t workspace_bytes = 1 << 20;
    REQUIRE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                 sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t heuristic;
    run.heuristic_status = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, ld, pref, 1, &heuristic, &run.returned);
    DeviceVec<uint8_t> workspace(workspace_bytes);
    void* c_ptr = c.in_place ? D.data() : C.data();
    run.matmul_status = cublasLtMatmul(handle, desc, &c.alpha, A.data(), la, B.data(), lb, &c.beta, c_ptr,
                                       c.in_place ? ld : lc, D.data(), ld, run.returned ? &heuristic.algo : nullptr,
                                       workspace.data(), workspace.size(), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; i < 4; i++) cublasLtMatrixLayoutDestroy(*layouts[i]);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
    return run;
}

// Reference value of alpha * op(A) op(B) + beta * C (+ bias) in double, and the
// sum of magnitudes of its terms (what fp32 rounding errors scale with).
struct Ref {
    double value, magnitude;
};

static Ref ref_element(const Case& c, const Mat& A, const Mat& B, const Mat& C, int b, int64_t i, int64_t j,
                       const std::vector<double>* bias) {
    double s = 0, mag = 0;
    for (int64_t kk = 0; kk < c.k; kk++) {
        double a = c.transa ? A.get(b, kk, i) : A.get(b, i, kk);
        double x = c.transb ? B.get(b, j, kk) : B.get(b, kk, j);
        s += a * x;
        mag += std::fabs(a * x);
    }
    Ref r{c.alpha * s, std::fabs(c.alpha) * mag};
    if (c.beta != 0.0f) {
        r.value += c.beta * C.get(b, i, j);
        r.magnitude += std::fabs(c.beta * C.get(b, i, j));
    }
    if (bias) {
        r.value += (*bias)[i];
        r.magnitude += std::fabs((*bias)[i]);
    }
    return r;
}

// fp32 accumulation of k products plus alpha, beta and bias: at most k + 4 roundings of
// partial sums bounded by the magnitude (the classic gamma_{k+4} bound of a dot product).
static double fp32_bound(const Case& c, const Ref& r) { return (c.k + 4) * U32 * r.magnitude * 1.01; }

static Mat make_A(const Case& c, std::mt19937& rng) {
    Mat A(c.ab, c.transa ? c.k : c.m, c.transa ? c.m : c.k, (c.transa ? c.k : c.m) + c.lda_pad, c.batch, 5);
    A.fill_random(rng);
    return A;
}
static Mat make_B(const Case& c, std::mt19937& rng) {
    Mat B(c.ab, c.transb ? c.n : c.k, c.transb ? c.k : c.n, (c.transb ? c.n : c.k) + c.ldb_pad, c.batch, 3);
    B.fill_random(rng);
    return B;
}

// Checks a DEFAULT-epilogue matmul (any transposes, lds, batches, alpha/beta, types).
static void check_plain(const Case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    Mat A = make_A(c, rng), B = make_B(c, rng);
    Mat C(c.cd, c.m, c.n, c.m + c.ldc_pad, c.batch, 7), D(c.cd, c.m, c.n, c.m + c.ldc_pad, c.batch, 7);
    if (c.beta != 0.0f) C.fill_random(rng);  // with beta == 0, C stays NaN: it must not be read
    if (c.in_place) D = C;
    Mat C_orig = C;
    if (c.in_place) C_orig = D;
    Run run = run_matmul(c, A, B, C, D, nullptr, nullptr, 0);
    if (ON_GPU && c.k == 0 && run.refused()) {
        // BLAS defines D = beta C at k = 0; cuBLASLt does not document k = 0, and layers/matmul.cuh
        // never calls it so: on a GPU a refusal is the other answer accepted
        MESSAGE("k = 0: cuBLASLt refused the call (layout " << cublasLtGetStatusName(run.layout_status) << ", heuristic "
                << cublasLtGetStatusName(run.heuristic_status) << ", matmul " << cublasLtGetStatusName(run.matmul_status)
                << "); accepted: its behaviour at k = 0 is not documented and the project never calls it with k = 0");
        return;
    }
    if (ON_GPU && c.k == 0) MESSAGE("k = 0: cuBLASLt ran it; D must then be BLAS's beta C");
    REQUIRE(run.heuristic_status == CUBLAS_STATUS_SUCCESS);
    REQUIRE(run.returned == 1);
    REQUIRE(run.matmul_status == CUBLAS_STATUS_SUCCESS);
    int bad = 0;
    for (int b = 0; b < c.batch; b++) {
        for (int64_t j = 0; j < c.n; j++) {
            for (int64_t i = 0; i < D.ld; i++) {
                double got = D.get(b, i, j);
                if (i >= c.m) {  // padding rows of D are never written
                    if (!std::isnan(got)) bad++;
                    continue;
                }
                Ref r = ref_element(c, A, B, C_orig, b, i, j, nullptr);
                // fp32 accumulation bound; a bf16 output adds one rounding of at most UBF relative
                double tol = fp32_bound(c, r) + (c.cd == CUDA_R_16BF ? UBF * (std::fabs(r.value) + fp32_bound(c, r)) : 0.0);
                if (!(std::fabs(got - r.value) <= tol)) {
                    if (bad++ < 5) MESSAGE("b=" << b << " i=" << i << " j=" << j << " got " << got << " want " << r.value << " tol " << tol);
                }
            }
        }
    }
    CHECK(bad == 0);
}

TEST_CASE("cublasLt: every transpose combination, non-square, ld > rows, alpha/beta, fp32 and bf16") {
    uint32_t seed = 1;
    for (cudaDataType ab : {CUDA_R_32F, CUDA_R_16BF}) {
        for (cudaDataType cd : {CUDA_R_32F, CUDA_R_16BF}) {
            if (ab == CUDA_R_32F && cd == CUDA_R_16BF) continue;  // not a cuBLASLt combination
            for (int ta = 0; ta < 2; ta++) {
                for (int tb = 0; tb < 2; tb++) {
                    for (float beta : {0.0f, 0.5f}) {
                        Case c;
                        c.m = 37; c.n = 23; c.k = 29;  // not multiples of the 16x6 tile
                        c.transa = ta; c.transb = tb;
                        c.lda_pad = 3; c.ldb_pad = 5; c.ldc_pad = 2;
                        c.alpha = 0.75f; c.beta = beta;
                        c.ab = ab; c.cd = cd;
                        CAPTURE(ab); CAPTURE(cd); CAPTURE(ta); CAPTURE(tb); CAPTURE(beta);
                        check_plain(c, seed++);
                    }
                }
            }
        }
    }
}

TEST_CASE("cublasLt: strided batches, in-place accumulate, several row panels") {
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            Case c;
            c.m = 19; c.n = 13; c.k = 11; c.batch = 3;
            c.transa = ta; c.transb = tb; c.lda_pad = 1; c.ldb_pad = 2; c.ldc_pad = 3;
            c.alpha = -1.25f; c.beta = 1.0f;
            c.ab = CUDA_R_16BF; c.cd = CUDA_R_32F;
            CAPTURE(ta); CAPTURE(tb);
            check_plain(c, 100 + ta * 2 + tb);
        }
    }
    Case c;  // C == D (llm.c's accumulate), bf16
    c.m = 24; c.n = 17; c.k = 40; c.beta = 1.0f; c.in_place = true;
    c.ab = CUDA_R_16BF; c.cd = CUDA_R_16BF;
    check_plain(c, 200);
    Case big;  // more rows than one 128-row panel, long k
    big.m = 261; big.n = 70; big.k = 300; big.transa = true;
    check_plain(big, 201);
    Case empty_k;  // k = 0: D = beta * C
    empty_k.m = 5; empty_k.n = 4; empty_k.k = 0; empty_k.beta = 2.0f; empty_k.ldb_pad = 1;  // ld >= max(1, rows)
    check_plain(empty_k, 202);
}

TEST_CASE("cublasLt: results do not depend on the number of OpenMP threads" * doctest::skip(ON_GPU)) {
    Case c;
    c.m = 70; c.n = 50; c.k = 200; c.transb = true;
    std::mt19937 rng(5);
    Mat A = make_A(c, rng), B = make_B(c, rng), C(c.cd, c.m, c.n, c.m), D1(c.cd, c.m, c.n, c.m), D2 = D1;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    REQUIRE(run_matmul(c, A, B, C, D1, nullptr, nullptr, 0).matmul_status == CUBLAS_STATUS_SUCCESS);
    omp_set_num_threads(threads > 1 ? threads : 2);
    REQUIRE(run_matmul(c, A, B, C, D2, nullptr, nullptr, 0).matmul_status == CUBLAS_STATUS_SUCCESS);
    omp_set_num_threads(threads);
    CHECK(memcmp(D1.data(), D2.data(), D1.bytes.size()) == 0);  // bitwise: fixed summation order
}

TEST_CASE("cublasLt: bf16 output is rounded to nearest even") {
    // k = 1 and alpha = 1: each result is a product of two bf16 values, exact in fp32,
    // so the output must equal the correctly rounded product (ties included: 1/256 of them)
    Case c;
    c.m = 128; c.n = 128; c.k = 1;
    c.ab = CUDA_R_16BF; c.cd = CUDA_R_16BF;
    Mat A(c.ab, 128, 1, 128), B(c.ab, 1, 128, 1), C(c.cd, 128, 128, 128), D(c.cd, 128, 128, 128);
    for (int i = 0; i < 128; i++) A.set(0, i, 0, 1.0 + i / 128.0);
    for (int j = 0; j < 128; j++) B.set(0, 0, j, -(1.0 + j / 128.0) * 4.0);
    Run run = run_matmul(c, A, B, C, D, nullptr, nullptr, 0);
    REQUIRE(run.matmul_status == CUBLAS_STATUS_SUCCESS);
    int bad = 0, ties = 0;
    for (int j = 0; j < 128; j++) {
        for (int i = 0; i < 128; i++) {
            double exact = A.get(0, i, 0) * B.get(0, 0, j);
            if (D.get(0, i, j) != round_bf16(exact)) bad++;
            int e;
            double f = std::frexp(exact, &e);
            if (std::ldexp(f, 8) - std::floor(std::ldexp(f, 8)) == 0.5) ties++;
        }
    }
    CHECK(bad == 0);  // exact: same rounding of the same exact value
    CHECK(ties > 0);
}

// ----------------------------------------------------------------------------
// epilogues

static bool has_input_bias(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool has_gelu(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool has_aux_out(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
static bool has_dgelu(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD; }

// rounding of one stored value: none for fp32 outputs (their error is in the fp32 bound), UBF relative for bf16
static double store_tol(cudaDataType t, double value, double err) {
    return t == CUDA_R_16BF ? UBF * (std::fabs(value) + err) : U32 * (std::fabs(value) + err);
}

// What layers/matmul.cuh calls: bf16, the epilogues DEFAULT, BIAS, GELU_AUX(_BIAS), DGELU and the
// bias-gradient ones BGRADB, DGELU_BGRAD, m, n, k multiples of 8, leading dimensions = rows (aux
// too), one batch.
static bool project_uses(const Case& c) {
    const cublasLtEpilogue_t e = c.epilogue;
    bool epilogue = e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
                    e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
                    e == CUBLASLT_EPILOGUE_BGRADB || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    return epilogue && c.ab == CUDA_R_16BF && c.cd == CUDA_R_16BF && c.m % 8 == 0 && c.n % 8 == 0 && c.k % 8 == 0 &&
           c.lda_pad == 0 && c.ldb_pad == 0 && c.ldc_pad == 0 && c.aux_ld_pad == 0 && c.batch == 1;
}
// The bias-gradient epilogues: matmul_backward uses them where cuBLASLt has an algorithm, its own
// column sums where not, so a GPU without them is a slower path, not a failure.
static bool project_falls_back(const Case& c) {
    return c.epilogue == CUBLASLT_EPILOGUE_BGRADB || c.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

static void check_epilogue(const Case& c, uint32_t seed) {
    const cublasLtEpilogue_t e = c.epilogue;
    std::mt19937 rng(seed);
    Mat A = make_A(c, rng), B = make_B(c, rng);
    Mat C(c.cd, c.m, c.n, c.m + c.ldc_pad, c.batch), D(c.cd, c.m, c.n, c.m + c.ldc_pad, c.batch);
    if (c.beta != 0.0f) C.fill_random(rng);
    if (c.in_place) D = C;  // accumulated in place; C keeps the values before
    const int64_t aux_ld = (c.m + 7) / 8 * 8 + c.aux_ld_pad;
    Mat aux(c.cd, c.m, c.n, aux_ld);
    if (has_dgelu(e)) aux.fill_random(rng, -3.0, 3.0);  // pre-GELU values, where gelu' varies most
    // bias: an input of m values per batch, or an output of m (BGRADA, DGELU_BGRAD) or n (BGRADB) values
    const int64_t bias_batch_stride = c.batch > 1 ? c.m + 1 : 0;
    int64_t bias_len = e == CUBLASLT_EPILOGUE_BGRADB ? c.n : c.m;
    // one NaN sentinel after the vector (batch 1), or between the batches' vectors
    Mat bias = c.batch > 1 ? Mat(c.cd, bias_len, 1, bias_len, c.batch, bias_batch_stride - bias_len)
                           : Mat(c.cd, bias_len, 1, bias_len + 1);
    std::vector<std::vector<double>> bias_in(c.batch);
    if (has_input_bias(e)) {
        bias.fill_random(rng);
        for (int b = 0; b < c.batch; b++)
            for (int64_t i = 0; i < c.m; i++) bias_in[b].push_back(bias.get_raw(b * bias_batch_stride + i));
    }
    bool uses_bias = has_input_bias(e) || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB ||
                     e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    bool uses_aux = has_aux_out(e) || has_dgelu(e);
    Run run = run_matmul(c, A, B, C, D, uses_bias ? bias.data() : nullptr, uses_aux ? aux.data() : nullptr, aux_ld,
                         bias_batch_stride);
    // A GPU's cuBLASLt has no kernel for some epilogue, type and leading-dimension combinations (the
    // bias-gradient ones with odd leading dimensions, say); those the project never calls are skipped
    // there, with the reason. The emulated library takes them all.
    bool refused = run.heuristic_status != CUBLAS_STATUS_SUCCESS || run.returned == 0 ||
                   run.matmul_status != CUBLAS_STATUS_SUCCESS;
    if (ON_GPU && refused && (!project_uses(c) || project_falls_back(c))) {
        MESSAGE("SKIPPED on this GPU: cuBLASLt has no algorithm for epilogue " << (int)e << ", type " << (int)c.cd
                << ", m " << c.m << " n " << c.n << " k " << c.k << ", ld pads " << c.lda_pad << "/" << c.ldb_pad << "/"
                << c.ldc_pad << " (heuristic " << cublasLtGetStatusName(run.heuristic_status) << ", matmul "
                << cublasLtGetStatusName(run.matmul_status) << "): "
                << (project_uses(c) ? "layers/matmul.cuh computes this bias gradient with its column sums instead"
                                    : "a combination layers/matmul.cuh never uses"));
        return;
    }
    REQUIRE(run.heuristic_status == CUBLAS_STATUS_SUCCESS);
    REQUIRE(run.matmul_status == CUBLAS_STATUS_SUCCESS);

    int bad = 0;
    auto expect = [&](const char* what, int64_t i, int64_t j, double got, double want, double tol) {
        if (!(std::fabs(got - want) <= tol) && bad++ < 5)
            MESSAGE(what << " i=" << i << " j=" << j << " got " << got << " want " << want << " tol " << tol);
    };
    std::vector<double> row_sum(c.m, 0.0), row_tol(c.m, 0.0), row_mag(c.m, 0.0);
    for (int b = 0; b < c.batch; b++) {
        for (int64_t j = 0; j < c.n; j++) {
            for (int64_t i = 0; i < c.m; i++) {
                Ref r = ref_element(c, A, B, C, b, i, j, has_input_bias(e) ? &bias_in[b] : nullptr);
                const double err = fp32_bound(c, r);
                double want = r.value, tol = err;
                if (has_gelu(e)) {
                    // gelu is 1.13-Lipschitz; its fp32 evaluation adds a few roundings of terms <= 1 + |x|,
                    // and tanh's own error (TANH_REL of |t|) moves 0.5 x (1 + t) by 0.5 |x| that
                    want = gelu_ref(r.value);
                    tol = 1.13 * err + 16 * U32 * (1.0 + std::fabs(r.value)) +
                          0.5 * std::fabs(r.value) * TANH_REL * std::fabs(gelu_tanh(r.value));
                }
                if (has_aux_out(e)) {  // aux holds the pre-GELU value, rounded to the aux type
                    expect("aux", i, j, aux.get(0, i, j), r.value, err + store_tol(c.cd, r.value, err));
                }
                if (has_dgelu(e)) {
                    // gelu'(x) is evaluated in fp32 from terms bounded by (1 + |x|)^3 (about a dozen
                    // roundings, the tanh argument's error amplified by the same factor); |gelu'| <= 1.13
                    // tanh's own error dt (TANH_REL of |t|) moves gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 +
                    // 3c x^2) by |dt| (0.5 + |x| |t| s (1 + 3c x^2))
                    double x = aux.get(0, i, j), g = gelu_grad_ref(x), t = gelu_tanh(x);
                    double dg = TANH_REL * std::fabs(t) *
                                (0.5 + std::fabs(x * t) * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x));
                    want = r.value * g;
                    tol = 1.13 * err + std::fabs(r.value) * (32 * U32 * std::pow(1.0 + std::fabs(x), 3) + dg);
                    row_sum[i] += want;
                    row_tol[i] += tol;
                    row_mag[i] += std::fabs(want);
                }
                expect("D", i, j, D.get(b, i, j), want, tol + store_tol(c.cd, want, tol));
            }
        }
    }
    if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
        for (int64_t i = 0; i < c.m; i++) {  // fp32 sum over n terms of the fp32 outputs above
            double tol = row_tol[i] + (c.n + 1) * U32 * row_mag[i];
            expect("dbias", i, 0, bias.get(0, i, 0), row_sum[i], tol + store_tol(c.cd, row_sum[i], tol));
        }
    }
    if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) {
        for (int64_t v = 0; v < bias_len; v++) {  // sum over k of op(A)'s row v / op(B)'s column v
            double s = 0, mag = 0;
            for (int64_t kk = 0; kk < c.k; kk++) {
                double x = e == CUBLASLT_EPILOGUE_BGRADA ? (c.transa ? A.get(0, kk, v) : A.get(0, v, kk))
                                                         : (c.transb ? B.get(0, v, kk) : B.get(0, kk, v));
                s += x;
                mag += std::fabs(x);
            }
            double tol = (c.k + 1) * U32 * mag;  // fp32 sum of k exact values
            expect("bgrad", v, 0, bias.get(0, v, 0), s, tol + store_tol(c.cd, s, tol));
        }
        CHECK(std::isnan(bias.get_raw(bias_len)));  // nothing written past the vector
    }
    CHECK(bad == 0);
}

TEST_CASE("cublasLt: epilogues bias, gelu, gelu_aux (pre-activation kept), dgelu, bgrad") {
    if (ON_GPU) MESSAGE("GELU tolerances on a GPU include tanh.approx.f32's documented 2^-10.987 relative error "
                        "(PTX ISA): the library may evaluate its tanh so");
    const cublasLtEpilogue_t epilogues[] = {
        CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX,
        CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD,
        CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB};
    uint32_t seed = 300;
    for (cublasLtEpilogue_t e : epilogues) {
        for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF}) {
            for (int trans = 0; trans < 2; trans++) {
                Case c;
                c.m = 21; c.n = 10; c.k = 33;
                c.transa = trans; c.transb = !trans;
                c.lda_pad = 2; c.ldb_pad = 1; c.ldc_pad = 4;
                c.alpha = 1.0f; c.beta = trans ? 0.5f : 0.0f;
                c.ab = t; c.cd = t;
                c.epilogue = e;
                CAPTURE(e); CAPTURE(t); CAPTURE(trans);
                check_epilogue(c, seed++);
            }
        }
    }
    Case batched;  // the BIAS epilogue with a bias per batch
    batched.m = 12; batched.n = 9; batched.k = 7; batched.batch = 3;
    batched.epilogue = CUBLASLT_EPILOGUE_BIAS;
    check_epilogue(batched, seed++);
}

TEST_CASE("cublasLt: the epilogues layers/matmul.cuh uses, at its shapes, pass everywhere") {
    // forward: transA (weights (OC, C) row-major), BIAS / GELU_AUX_BIAS / GELU_AUX; backward: dinp
    // with DGELU / DGELU_BGRAD, dweight (transB, accumulated in place) with BGRADB
    struct Use { cublasLtEpilogue_t e; bool transa, transb, accumulate; };
    const Use uses[] = {{CUBLASLT_EPILOGUE_BIAS, true, false, false}, {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, true, false, false},
                        {CUBLASLT_EPILOGUE_GELU_AUX, true, false, false}, {CUBLASLT_EPILOGUE_DGELU, false, false, false},
                        {CUBLASLT_EPILOGUE_DGELU_BGRAD, false, false, false},
                        {CUBLASLT_EPILOGUE_BGRADB, false, true, true}};
    uint32_t seed = 400;
    for (const Use& u : uses) {
        Case c;
        c.m = 24; c.n = 16; c.k = 32;
        c.transa = u.transa;
        c.transb = u.transb;
        c.beta = u.accumulate ? 1.0f : 0.0f;
        c.in_place = u.accumulate;
        c.ab = c.cd = CUDA_R_16BF;
        c.aux_ld_pad = 0;
        c.epilogue = u.e;
        REQUIRE(project_uses(c));
        CAPTURE(u.e);
        check_epilogue(c, seed++);
    }
}

// ----------------------------------------------------------------------------
// what is refused

// Runs a small matmul after `adjust` changes its description; returns the matmul status
// and checks that the heuristic agreed (no algorithm) and that D was left alone.
static cublasStatus_t refused(const std::function<void(cublasLtMatmulDesc_t, cublasLtMatrixLayout_t*, float*)>& adjust,
                              cudaDataType ab = CUDA_R_32F, cudaDataType cd = CUDA_R_32F) {
    const int m = 16, n = 8, k = 8;
    DeviceVec<float> A(m * k, 1.0f), B(k * n, 1.0f), C(m * n, 1.0f), D(m * n, 7.0f), bias(m, 1.0f), aux(m * n, 1.0f);
    cublasLtHandle_t handle;
    cublasLtCreate(&handle);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    void* bias_ptr = bias.data();
    void* aux_ptr = aux.data();
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_ptr, sizeof(aux_ptr));
    cublasLtMatrixLayout_t L[4];
    cublasLtMatrixLayoutCreate(&L[0], ab, m, k, m);
    cublasLtMatrixLayoutCreate(&L[1], ab, k, n, k);
    cublasLtMatrixLayoutCreate(&L[2], cd, m, n, m);
    cublasLtMatrixLayoutCreate(&L[3], cd, m, n, m);
    float alpha = 1.0f, beta = 0.0f;
    adjust(desc, L, &alpha);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t heuristic;
    int returned = -1;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle, desc, L[0], L[1], L[2], L[3], pref, 1, &heuristic, &returned);
    cublasStatus_t status = cublasLtMatmul(handle, desc, &alpha, A.data(), L[0], B.data(), L[1], &beta, C.data(), L[2],
                                           D.data(), L[3], nullptr, nullptr, 0, nullptr);
    bool d_untouched = true;
    for (float v : D) d_untouched &= v == 7.0f;
    if (status != CUBLAS_STATUS_SUCCESS) {
        CHECK(d_untouched);
        // the descriptor-only problems are caught by the heuristic already
        if (hs != CUBLAS_STATUS_SUCCESS) CHECK(returned == 0);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    for (auto& l : L) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
    return status;
}

TEST_CASE("cublasLt: unsupported or inconsistent problems return an error status" * doctest::skip(ON_GPU)) {
    auto none = [](cublasLtMatmulDesc_t, cublasLtMatrixLayout_t*, float*) {};
    CHECK(refused(none) == CUBLAS_STATUS_SUCCESS);  // the baseline itself runs
    CHECK(refused(none, CUDA_R_32F, CUDA_R_16BF) == CUBLAS_STATUS_NOT_SUPPORTED);   // fp32 A/B, bf16 D
    CHECK(refused(none, CUDA_R_16F, CUDA_R_16F) == CUBLAS_STATUS_NOT_SUPPORTED);    // fp16 is not implemented
    CHECK(refused([](cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t*, float*) {
              int32_t t = CUBLAS_COMPUTE_32F_FAST_TF32;
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &t, sizeof(t));
          }) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(refused([](cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t*, float*) {
              cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_RELU_BIAS;
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
          }) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(refused([](cublasLtMatmulDesc_t, cublasLtMatrixLayout_t* L, float*) {
              int32_t order = CUBLASLT_ORDER_ROW;
              cublasLtMatrixLayoutSetAttribute(L[0], CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order));
          }) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(refused([](cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t*, float*) {  // aux ld must be a multiple of 8
              cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_AUX;
              int64_t ld = 20;
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
          }) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(refused([](cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t*, float*) {  // bias of another type than D
              cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
              cudaDataType_t t = CUDA_R_16BF;
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t));
          }) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(refused([](cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t*, float* alpha) {  // bgrad scaling is undocumented
              cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BGRADB;
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
              *alpha = 2.0f;
          }) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(refused([](cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t* L, float*) {  // batched aux epilogue
              cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_AUX;
              int64_t ld = 16;
              int32_t count = 2;
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
              for (int i = 0; i < 4; i++) cublasLtMatrixLayoutSetAttribute(L[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
          }) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(refused([](cublasLtMatmulDesc_t, cublasLtMatrixLayout_t* L, float*) {  // op(B) rows != op(A) columns
              uint64_t rows = 9;
              cublasLtMatrixLayoutSetAttribute(L[1], CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows));
              int64_t ld = 9;
              cublasLtMatrixLayoutSetAttribute(L[1], CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld));
          }) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(refused([](cublasLtMatmulDesc_t, cublasLtMatrixLayout_t* L, float*) {  // ld < rows
              int64_t ld = 15;
              cublasLtMatrixLayoutSetAttribute(L[3], CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld));
          }) == CUBLAS_STATUS_INVALID_VALUE);

    // an attribute of the wrong size is refused at once, as cuBLASLt does
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int64_t wide = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulDescDestroy(desc);
    CHECK(cublasLtMatmul(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                         nullptr, nullptr, nullptr, nullptr, 0, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_CASE("cublas: Sgemm and GemmStridedBatchedEx") {
    std::mt19937 rng(7);
    Case c;
    c.m = 9; c.n = 7; c.k = 5; c.transa = true; c.lda_pad = 2; c.ldb_pad = 1; c.ldc_pad = 3;
    c.alpha = 1.5f; c.beta = -0.5f;
    Mat A = make_A(c, rng), B = make_B(c, rng), C(c.cd, c.m, c.n, c.m + c.ldc_pad);
    C.fill_random(rng);
    Mat C0 = C;
    cublasHandle_t handle;
    REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasSetStream(handle, nullptr) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, c.m, c.n, c.k, &c.alpha, (const float*)A.data(), A.ld,
                        (const float*)B.data(), B.ld, &c.beta, (float*)C.data(), C.ld) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    for (int64_t j = 0; j < c.n; j++)
        for (int64_t i = 0; i < c.m; i++) {
            Ref r = ref_element(c, A, B, C0, 0, i, j, nullptr);
            CHECK(std::fabs(C.get(0, i, j) - r.value) <= fp32_bound(c, r));  // fp32 accumulation bound
        }

    Case cb;
    cb.m = 6; cb.n = 5; cb.k = 4; cb.transb = true; cb.batch = 2; cb.ab = CUDA_R_16BF; cb.cd = CUDA_R_16BF;
    Mat Ab = make_A(cb, rng), Bb = make_B(cb, rng), Cb(cb.cd, cb.m, cb.n, cb.m, cb.batch, 1), Cb0 = Cb;
    REQUIRE(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, cb.m, cb.n, cb.k, &cb.alpha, Ab.data(),
                                       CUDA_R_16BF, Ab.ld, Ab.stride, Bb.data(), CUDA_R_16BF, Bb.ld, Bb.stride, &cb.beta,
                                       Cb.data(), CUDA_R_16BF, Cb.ld, Cb.stride, cb.batch, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    for (int b = 0; b < cb.batch; b++)
        for (int64_t j = 0; j < cb.n; j++)
            for (int64_t i = 0; i < cb.m; i++) {
                Ref r = ref_element(cb, Ab, Bb, Cb0, b, i, j, nullptr);
                double tol = fp32_bound(cb, r) + UBF * (std::fabs(r.value) + fp32_bound(cb, r));  // + bf16 output rounding
                CHECK(std::fabs(Cb.get(b, i, j) - r.value) <= tol);
            }
    CHECK(cublasDestroy(handle) == CUBLAS_STATUS_SUCCESS);
}

// ----------------------------------------------------------------------------
// NCCL: a non-blocking communicator of one rank (runtime/distributed.h's path), here and on one GPU

// Polls ncclCommGetAsyncError until the communicator's last call is no longer in progress (at most
// 10 s); returns its state and counts the polls that said ncclInProgress.
static ncclResult_t wait_comm(ncclComm_t comm, int* in_progress) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    ncclResult_t state = ncclInProgress;
    while (std::chrono::steady_clock::now() < deadline) {
        REQUIRE(ncclCommGetAsyncError(comm, &state) == ncclSuccess);
        if (state != ncclInProgress) return state;
        (*in_progress)++;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return state;
}

TEST_CASE("nccl: a non-blocking one-rank communicator: init, all-reduce, finalize through ncclInProgress") {
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    int in_progress = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
    REQUIRE((r == ncclSuccess || r == ncclInProgress));  // NCCL may answer either
    REQUIRE(wait_comm(comm, &in_progress) == ncclSuccess);
    DeviceVec<float> x(1000, 0.5f);
    r = ncclAllReduce(x.data(), x.data(), 1000, ncclFloat32, ncclSum, comm, nullptr);
    REQUIRE((r == ncclSuccess || r == ncclInProgress));
    REQUIRE(wait_comm(comm, &in_progress) == ncclSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    for (float v : x) CHECK(v == 0.5f);  // the sum over one rank
    r = ncclCommFinalize(comm);
    REQUIRE((r == ncclSuccess || r == ncclInProgress));
    CHECK(wait_comm(comm, &in_progress) == ncclSuccess);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
#if !defined(__CUDACC__)
    CHECK(in_progress == 3);  // the host NCCL answers each call "in progress" once
#endif
}

#if !defined(__CUDACC__)
TEST_CASE("nccl host: a call on a non-blocking communicator before the last one completed is refused") {
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    REQUIRE(ncclCommInitRankConfig(&comm, 1, id, 0, &config) == ncclInProgress);
    CHECK(ncclCommFinalize(comm) == ncclInvalidUsage);  // not polled yet
    ncclConfig_t bad;
    memset(&bad, 0, sizeof bad);
    ncclComm_t other = nullptr;
    CHECK(ncclCommInitRankConfig(&other, 1, id, 0, &bad) == ncclInvalidArgument);  // no NCCL_CONFIG_INITIALIZER
    ncclCommDestroy(comm);
}
#endif

// ----------------------------------------------------------------------------
// NCCL: ranks as threads

// Runs body(rank, comm) on nranks threads that joined one communicator.
static void with_ranks(int nranks, const std::function<void(int, ncclComm_t)>& body) {
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    std::vector<ncclResult_t> init(nranks);
    std::vector<ncclComm_t> comms(nranks, nullptr);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; r++) {
        threads.emplace_back([&, r] {
            init[r] = ncclCommInitRank(&comms[r], nranks, id, r);
            if (init[r] == ncclSuccess) body(r, comms[r]);
        });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < nranks; r++) {
        CHECK(init[r] == ncclSuccess);
        ncclCommDestroy(comms[r]);
    }
}

static DeviceVec<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    DeviceVec<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

TEST_CASE("nccl: all-reduce sum, avg, max in fp32, bf16, int32, fp64 match the serial reduction" * doctest::skip(ON_GPU)) {
    for (int nranks : {2, 3, 4}) {
        const size_t count = 1000;
        std::vector<DeviceVec<float>> data(nranks);
        for (int r = 0; r < nranks; r++) data[r] = random_floats(count, 10 + r);
        // references: fp32 accumulation in rank order, as the contract says, so comparisons are exact
        std::vector<float> sum(count), avg(count), mx(count);
        for (size_t e = 0; e < count; e++) {
            float s = data[0][e], m = data[0][e];
            for (int r = 1; r < nranks; r++) { s += data[r][e]; m = std::max(m, data[r][e]); }
            sum[e] = s; avg[e] = s / (float)nranks; mx[e] = m;
        }
        std::vector<int> mismatches(nranks, 0);
        with_ranks(nranks, [&](int rank, ncclComm_t comm) {
            int count_out = 0, rank_out = -1;
            ncclCommCount(comm, &count_out);
            ncclCommUserRank(comm, &rank_out);
            if (count_out != nranks || rank_out != rank) mismatches[rank]++;
            DeviceVec<float> out(count);
            if (ncclAllReduce(data[rank].data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < count; e++) mismatches[rank] += out[e] != sum[e];
            DeviceVec<float> inplace = data[rank];
            if (ncclAllReduce(inplace.data(), inplace.data(), count, ncclFloat32, ncclAvg, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < count; e++) mismatches[rank] += inplace[e] != avg[e];
            if (ncclAllReduce(data[rank].data(), out.data(), count, ncclFloat32, ncclMax, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < count; e++) mismatches[rank] += out[e] != mx[e];

            // bf16: the inputs are bf16 values; fp32 sum in rank order, rounded once to bf16
            DeviceVec<uint16_t> in16(count), out16(count);
            for (size_t e = 0; e < count; e++) in16[e] = bf16_bits(data[rank][e]);
            for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
                if (ncclAllReduce(in16.data(), out16.data(), count, ncclBfloat16, op, comm, nullptr) != ncclSuccess) mismatches[rank]++;
                for (size_t e = 0; e < count; e++) {
                    float s = (float)round_bf16(data[0][e]);
                    for (int r = 1; r < nranks; r++) s += (float)round_bf16(data[r][e]);
                    if (op == ncclAvg) s /= (float)nranks;
                    mismatches[rank] += out16[e] != bf16_bits(s);
                }
            }
            DeviceVec<int32_t> in32(count), out32(count);
            for (size_t e = 0; e < count; e++) in32[e] = (int32_t)(e * 7) - 100 * rank;
            if (ncclAllReduce(in32.data(), out32.data(), count, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < count; e++) mismatches[rank] += out32[e] != (int32_t)(e * 7 * nranks) - 100 * nranks * (nranks - 1) / 2;
            DeviceVec<double> in64(count, 0.25 * (rank + 1)), out64(count);
            if (ncclAllReduce(in64.data(), out64.data(), count, ncclFloat64, ncclSum, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < count; e++) mismatches[rank] += out64[e] != 0.25 * nranks * (nranks + 1) / 2;  // exact in binary
        });
        for (int r = 0; r < nranks; r++) CHECK(mismatches[r] == 0);
    }
}

TEST_CASE("nccl: reduce-scatter, all-gather, broadcast (also in place) match the serial result" * doctest::skip(ON_GPU)) {
    for (int nranks : {2, 3, 4}) {
        const size_t chunk = 257;
        std::vector<DeviceVec<float>> data(nranks);
        for (int r = 0; r < nranks; r++) data[r] = random_floats(chunk * nranks, 50 + r);
        std::vector<int> mismatches(nranks, 0);
        with_ranks(nranks, [&](int rank, ncclComm_t comm) {
            // reduce-scatter: rank r gets chunk r of the sum
            DeviceVec<float> out(chunk);
            if (ncclReduceScatter(data[rank].data(), out.data(), chunk, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < chunk; e++) {
                float s = data[0][rank * chunk + e];
                for (int r = 1; r < nranks; r++) s += data[r][rank * chunk + e];
                mismatches[rank] += out[e] != s;
            }
            DeviceVec<float> inplace = data[rank];  // in place: recvbuff = sendbuff + rank * chunk
            if (ncclReduceScatter(inplace.data(), inplace.data() + rank * chunk, chunk, ncclFloat32, ncclAvg, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < chunk; e++) {
                float s = data[0][rank * chunk + e];
                for (int r = 1; r < nranks; r++) s += data[r][rank * chunk + e];
                mismatches[rank] += inplace[rank * chunk + e] != s / (float)nranks;
            }
            // all-gather: everyone gets every rank's first chunk, in rank order
            DeviceVec<float> gathered(chunk * nranks);
            if (ncclAllGather(data[rank].data(), gathered.data(), chunk, ncclFloat32, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (int r = 0; r < nranks; r++)
                for (size_t e = 0; e < chunk; e++) mismatches[rank] += gathered[r * chunk + e] != data[r][e];
            DeviceVec<float> ag(chunk * nranks, NAN);  // in place: sendbuff = recvbuff + rank * chunk
            memcpy(ag.data() + rank * chunk, data[rank].data(), chunk * sizeof(float));
            if (ncclAllGather(ag.data() + rank * chunk, ag.data(), chunk, ncclFloat32, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (int r = 0; r < nranks; r++)
                for (size_t e = 0; e < chunk; e++) mismatches[rank] += ag[r * chunk + e] != data[r][e];
            // broadcast from the last rank, in place
            const int root = nranks - 1;
            DeviceVec<float> b = rank == root ? data[rank] : DeviceVec<float>(chunk * nranks, NAN);
            if (ncclBroadcast(b.data(), b.data(), chunk * nranks, ncclFloat32, root, comm, nullptr) != ncclSuccess) mismatches[rank]++;
            for (size_t e = 0; e < chunk * nranks; e++) mismatches[rank] += b[e] != data[root][e];
        });
        for (int r = 0; r < nranks; r++) CHECK(mismatches[r] == 0);
    }
}

TEST_CASE("nccl: one thread drives all ranks of ncclCommInitAll inside a group" * doctest::skip(ON_GPU)) {
    const int nranks = 3;
    const size_t count = 64;
    std::vector<ncclComm_t> comms(nranks);
    REQUIRE(ncclCommInitAll(comms.data(), nranks, nullptr) == ncclSuccess);
    std::vector<DeviceVec<float>> data(nranks), out(nranks, DeviceVec<float>(count));
    for (int r = 0; r < nranks; r++) data[r] = random_floats(count, 80 + r);
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < nranks; r++)
        REQUIRE(ncclAllReduce(data[r].data(), out[r].data(), count, ncclFloat32, ncclSum, comms[r], nullptr) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    int mismatches = 0;
    for (int r = 0; r < nranks; r++)
        for (size_t e = 0; e < count; e++) mismatches += out[r][e] != data[0][e] + data[1][e] + data[2][e];
    CHECK(mismatches == 0);
    for (auto c : comms) ncclCommDestroy(c);
}

TEST_CASE("nccl: several collectives in one group per rank thread" * doctest::skip(ON_GPU)) {
    const int nranks = 2;
    const size_t count = 33;
    std::vector<DeviceVec<float>> a(nranks), b(nranks);
    for (int r = 0; r < nranks; r++) { a[r] = random_floats(count, 90 + r); b[r] = random_floats(count * nranks, 95 + r); }
    std::vector<int> mismatches(nranks, 0);
    with_ranks(nranks, [&](int rank, ncclComm_t comm) {
        DeviceVec<float> sum(count), gathered(count * nranks * nranks);
        ncclResult_t r1 = ncclGroupStart();
        ncclResult_t r2 = ncclAllReduce(a[rank].data(), sum.data(), count, ncclFloat32, ncclSum, comm, nullptr);
        ncclResult_t r3 = ncclAllGather(b[rank].data(), gathered.data(), count * nranks, ncclFloat32, comm, nullptr);
        ncclResult_t r4 = ncclGroupEnd();
        mismatches[rank] += (r1 != ncclSuccess) + (r2 != ncclSuccess) + (r3 != ncclSuccess) + (r4 != ncclSuccess);
        for (size_t e = 0; e < count; e++) mismatches[rank] += sum[e] != a[0][e] + a[1][e];
        for (int r = 0; r < nranks; r++)
            for (size_t e = 0; e < count * nranks; e++) mismatches[rank] += gathered[r * count * nranks + e] != b[r][e];
    });
    for (int r = 0; r < nranks; r++) CHECK(mismatches[r] == 0);
}

TEST_CASE("nccl: a missing rank makes the others fail within the timeout, naming it" * doctest::skip(ON_GPU)) {
    setenv("SIMT_NCCL_TIMEOUT_S", "0.5", 1);
    // rank 2 never joins: the others' ncclCommInitRank fails
    {
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        std::vector<ncclResult_t> result(2);
        std::vector<std::string> message(2);
        std::vector<std::thread> threads;
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < 2; r++) {
            threads.emplace_back([&, r] {
                ncclComm_t comm = nullptr;
                result[r] = ncclCommInitRank(&comm, 3, id, r);
                message[r] = ncclGetLastError(nullptr);
            });
        }
        for (auto& t : threads) t.join();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK(seconds < 5.0);  // 0.5 s timeout, generous margin for a loaded machine
        for (int r = 0; r < 2; r++) {
            CHECK(result[r] == ncclSystemError);
            CHECK(message[r].find("ranks 2") != std::string::npos);
        }
    }
    // rank 2 joins, then dies (takes part in nothing): ranks 0 and 1 fail, and the
    // communicator stays broken, so their next collective fails at once
    {
        std::vector<ncclResult_t> first(2), second(2);
        std::vector<std::string> message(2), second_message(2);
        std::vector<double> second_seconds(2);
        auto t0 = std::chrono::steady_clock::now();
        with_ranks(3, [&](int rank, ncclComm_t comm) {
            if (rank == 2) return;
            DeviceVec<float> x(1, 1.0f), y(1);
            first[rank] = ncclAllReduce(x.data(), y.data(), 1, ncclFloat32, ncclSum, comm, nullptr);
            message[rank] = ncclGetLastError(comm);
            auto t1 = std::chrono::steady_clock::now();
            second[rank] = ncclAllReduce(x.data(), y.data(), 1, ncclFloat32, ncclSum, comm, nullptr);
            second_message[rank] = ncclGetLastError(comm);
            second_seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        });
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK(seconds < 5.0);  // 0.5 s timeout, generous margin for a loaded machine
        for (int r = 0; r < 2; r++) {
            CHECK(first[r] == ncclSystemError);
            CHECK(message[r].find("ncclAllReduce") != std::string::npos);
            CHECK(message[r].find("ranks 2") != std::string::npos);
            CHECK(second[r] == ncclSystemError);
            CHECK(second_message[r].find("broken") != std::string::npos);
            CHECK(second_seconds[r] < 0.4);  // no second wait for the timeout
        }
    }
    // ranks that disagree on the count get ncclInvalidUsage
    {
        std::vector<ncclResult_t> result(2);
        with_ranks(2, [&](int rank, ncclComm_t comm) {
            DeviceVec<float> x(2, 1.0f), y(2);
            result[rank] = ncclAllReduce(x.data(), y.data(), rank + 1, ncclFloat32, ncclSum, comm, nullptr);
        });
        CHECK((result[0] == ncclInvalidUsage || result[1] == ncclInvalidUsage));
        CHECK(result[0] != ncclSuccess);
        CHECK(result[1] != ncclSuccess);
    }
    // a malformed timeout is reported, not guessed
    setenv("SIMT_NCCL_TIMEOUT_S", "soon", 1);
    {
        ncclComm_t comms[2];
        REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
        DeviceVec<float> x(1, 1.0f), y(1);
        CHECK(ncclAllReduce(x.data(), y.data(), 1, ncclFloat32, ncclSum, comms[0], nullptr) == ncclInvalidUsage);
        CHECK(std::string(ncclGetLastError(comms[0])).find("SIMT_NCCL_TIMEOUT_S") != std::string::npos);
        ncclCommDestroy(comms[0]);
        ncclCommDestroy(comms[1]);
    }
    unsetenv("SIMT_NCCL_TIMEOUT_S");
}

// The BIAS_POINTER and EPILOGUE_AUX_POINTER on the descriptor when the heuristic runs set the alignment
// its algorithm assumes (cuBLASLt documents that the heuristic depends on their values): a call with
// a pointer aligned to less than that fails without writing D, one with the same alignment runs.
// heuristic_offset / call_offset: bf16 elements past a 256-byte aligned buffer (-1: NULL).
static cublasStatus_t run_with_epilogue_pointer(cublasLtEpilogue_t e, int heuristic_offset, int call_offset) {
    const int m = 16, n = 8, k = 8;
    Case c;
    c.m = m; c.n = n; c.k = k;
    c.ab = c.cd = CUDA_R_16BF;
    std::mt19937 rng(500);
    Mat A = make_A(c, rng), B = make_B(c, rng), D(CUDA_R_16BF, m, n, m);
    Mat vec(CUDA_R_16BF, (int64_t)m * n + 16, 1, (int64_t)m * n + 16);  // the bias, or the aux matrix
    vec.fill_random(rng);
    auto at = [&](int offset) { return offset < 0 ? nullptr : (void*)((uint16_t*)vec.data() + offset); };
    cublasLtHandle_t handle;
    cublasLtCreate(&handle);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
    const bool aux = e == CUBLASLT_EPILOGUE_GELU_AUX;
    const cublasLtMatmulDescAttributes_t attr = aux ? CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
                                                    : CUBLASLT_MATMUL_DESC_BIAS_POINTER;
    int64_t aux_ld = m;
    if (aux) cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    void* p = at(heuristic_offset);
    cublasLtMatmulDescSetAttribute(desc, attr, &p, sizeof(p));
    cublasLtMatmulHeuristicResult_t heuristic;
    int returned = 0;
    REQUIRE(cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, &heuristic, &returned) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(returned == 1);
    p = at(call_offset);
    cublasLtMatmulDescSetAttribute(desc, attr, &p, sizeof(p));
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t status = cublasLtMatmul(handle, desc, &alpha, A.data(), la, B.data(), lb, &beta, D.data(), ld,
                                           D.data(), ld, &heuristic.algo, nullptr, 0, nullptr);
    if (status != CUBLAS_STATUS_SUCCESS) CHECK(std::isnan(D.get(0, 0, 0)));  // D untouched
    cublasLtMatmulPreferenceDestroy(pref);
    for (auto l : {la, lb, ld}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
    return status;
}

TEST_CASE("cublasLt host: the bias and aux alignments the heuristic saw bind the call" * doctest::skip(ON_GPU)) {
    for (cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_BGRADB, CUBLASLT_EPILOGUE_GELU_AUX}) {
        CAPTURE((int)e);
        CHECK(run_with_epilogue_pointer(e, 0, 0) == CUBLAS_STATUS_SUCCESS);
        CHECK(run_with_epilogue_pointer(e, 8, 8) == CUBLAS_STATUS_SUCCESS);    // 16 bytes both times
        CHECK(run_with_epilogue_pointer(e, 0, 8) == CUBLAS_STATUS_EXECUTION_FAILED);   // 256 assumed, 16 given
        CHECK(run_with_epilogue_pointer(e, -1, 8) == CUBLAS_STATUS_EXECUTION_FAILED);  // NULL: 256 assumed
        CHECK(run_with_epilogue_pointer(e, 8, 0) == CUBLAS_STATUS_SUCCESS);    // better aligned than assumed
    }
}

TEST_CASE("host pointers and buffers too small for their layout are refused, as on a GPU" * doctest::skip(ON_GPU)) {
    // cuBLASLt: a host A; then a batch stride that runs past D's allocation
    const int m = 8, n = 8, k = 8;
    std::vector<float> host_A(m * k, 1.0f);
    DeviceVec<float> A(m * k, 1.0f), B(k * n, 1.0f), D(2 * m * n, 7.0f);
    cublasLtHandle_t handle;
    cublasLtCreate(&handle);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    float alpha = 1.0f, beta = 0.0f;
    CHECK(cublasLtMatmul(handle, desc, &alpha, A.data(), la, B.data(), lb, &beta, D.data(), ld, D.data(), ld, nullptr,
                         nullptr, 0, nullptr) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmul(handle, desc, &alpha, host_A.data(), la, B.data(), lb, &beta, D.data(), ld, D.data(), ld,
                         nullptr, nullptr, 0, nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    int32_t count = 2;
    int64_t stride = m * n + 1;  // the second batch would end one element past D
    for (auto l : {la, lb, ld}) {
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    }
    cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    CHECK(cublasLtMatmul(handle, desc, &alpha, A.data(), la, B.data(), lb, &beta, D.data(), ld, D.data(), ld, nullptr,
                         nullptr, 0, nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    stride = m * n;  // exactly fits
    cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    CHECK(cublasLtMatmul(handle, desc, &alpha, A.data(), la, B.data(), lb, &beta, D.data(), ld, D.data(), ld, nullptr,
                         nullptr, 0, nullptr) == CUBLAS_STATUS_SUCCESS);
    for (auto l : {la, lb, ld}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);

    // NCCL: a host recvbuff, and a reduce-scatter sendbuff of one chunk instead of nranks chunks
    ncclComm_t comms[2];
    REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
    DeviceVec<float> x(4, 1.0f);
    std::vector<float> host_y(4);
    CHECK(ncclAllReduce(x.data(), host_y.data(), 4, ncclFloat32, ncclSum, comms[0], nullptr) == ncclInvalidArgument);
    CHECK(std::string(ncclGetLastError(comms[0])).find("recvbuff") != std::string::npos);
    ncclCommDestroy(comms[0]);
    ncclCommDestroy(comms[1]);
    REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
    DeviceVec<float> y(4);
    CHECK(ncclReduceScatter(x.data(), y.data(), 4, ncclFloat32, ncclSum, comms[1], nullptr) == ncclInvalidArgument);
    CHECK(std::string(ncclGetLastError(comms[1])).find("sendbuff (8 elements)") != std::string::npos);
    ncclCommDestroy(comms[0]);
    ncclCommDestroy(comms[1]);
}
