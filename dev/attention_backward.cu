/*
Attention backward kernels (attention/attention.cuh): validation of dq, dk, dv against the CPU
reference and a benchmark of backward and forward+backward, with the project's softmax kernel
as the baseline in the same run.

Compile:  make build/attention_backward
Run:      ./build/attention_backward [variant] [-p P] [-hd HD] [-nh NH] [-tokens N] [-check | -bench] [-T t1,t2,..]
  (options as dev/attention_forward.cu, whose helpers this file includes)

FLOP/s count the nominal causal work of softmax attention: forward 2 B NH T^2 hd, backward 2.5x
that (five matmuls instead of two), for every variant, so ratios between variants are time ratios.

Where cuDNN is installed (ATTN_DEV_CUDNN) the benchmark adds cuDNN's flash attention as a row
"cudnn" (its dq, dk, dv checked against the softmax kernel's before it is timed) and a line of
forward+backward ratios per T: softmax/cuDNN and lssar/softmax.
*/
#define ATTN_DEV_NO_MAIN
#include "dev/attention_forward.cu"

static void validate_backward(const DevOptions& o) {
    const int B = 1, NH = 2, T = 300, hd = o.hd, C = NH * hd;
    DevAttnBuffers buf(B, T, NH, hd, 1, 3);
    const std::vector<float>&qkv = buf.qkv, &dout = buf.dout;
    floatX *d_qkv = buf.d_qkv, *d_dout = buf.d_dout, *d_out = buf.d_out, *d_dqkv = buf.d_dqkv;
    float* d_stats = buf.d_stats;
    void* scratch = buf.scratch;
    std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end());
    for (AttnKind kind : o.kinds) {
        std::vector<double> dqkv_ref(qkv.size(), 0.0);
        ref::attention_backward(dqkv_ref.data(), dout_d.data(), qkv_d.data(), B, T, NH, hd, kind, (double)o.p);
        attention_forward_cuda(d_out, d_stats, d_qkv, scratch, B, T, NH, hd, kind, o.p);
        attention_backward_cuda(d_dqkv, d_dout, d_qkv, d_out, d_stats, scratch, B, T, NH, hd, kind, o.p);
        cudaCheck(cudaDeviceSynchronize());
        std::vector<float> dqkv = dev_download_bf16(d_dqkv, qkv.size());
        // per part q, k, v: max|d - ref| / max|ref|; bf16 score gradients: a few 2^-8
        // (test/test_attention_cuda.cu holds the exact bounds)
        const char* names[3] = {"dq", "dk", "dv"};
        bool ok = true;
        printf("validate %-13s hd=%d T=%d p=%g:", attn_kind_name(kind), hd, T, o.p);
        for (int part = 0; part < 3; part++) {
            std::vector<float> a;
            std::vector<double> r;
            for (int bt = 0; bt < B * T; bt++)
                for (int c = 0; c < C; c++) {
                    a.push_back(dqkv[((size_t)bt * 3 + part) * C + c]);
                    r.push_back(dqkv_ref[((size_t)bt * 3 + part) * C + c]);
                }
            double err = dev_rel_err(a, r);
            ok &= err <= 1.0 / 32;
            printf("  %s %.2e", names[part], err);
        }
        printf("  %s\n", ok ? "OK" : "FAIL");
        if (!ok) exit(EXIT_FAILURE);
    }
}

#ifdef ATTN_DEV_CUDNN
// cuDNN forward + backward at this shape: dq, dk, dv checked against the softmax kernel's (still in
// d_dqkv from its timing runs), then the backward and forward+backward timed.
static DevCudnnResult dev_cudnn_backward(const floatX* d_qkv, const floatX* d_dout, const floatX* d_dqkv, int B,
                                         int T, int NH, int hd) {
    DevCudnnResult r;
    size_t rows = (size_t)B * NH * T, C = (size_t)NH * hd;
    floatX *c_out, *c_dqkv;
    float* c_stats;
    cudaCheck(cudaMalloc(&c_out, (size_t)B * T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&c_dqkv, (size_t)B * T * 3 * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&c_stats, rows * sizeof(float)));
    auto fwd = [&]() { return cudnn_attention_forward(c_out, c_stats, d_qkv, B, T, NH, hd); };
    auto bwd = [&]() { return cudnn_attention_backward(c_dqkv, d_dout, d_qkv, c_out, c_stats, B, T, NH, hd); };
    if (!fwd() || !bwd()) {
        r.note = "not run: " + cudnn_attention_error();
    } else {
        cudaCheck(cudaDeviceSynchronize());
        size_t n = (size_t)B * T * 3 * C;
        std::vector<float> dqkv = dev_download_bf16(c_dqkv, n), ref = dev_download_bf16(d_dqkv, n);
        // each kernel is within 1/32 of max|d| of the exact gradient (bf16 P and dS operands; the
        // bound dev -check and test/test_attention_cuda.cu hold the softmax kernel to), so the two
        // differ by at most 2/32; a wrong scale, mask or D is off by O(1)
        const char* names[3] = {"dq", "dk", "dv"};
        bool ok = true;
        std::string note = "check vs softmax kernel:";
        for (int part = 0; part < 3; part++) {
            double err = dev_part_rel_err(dqkv, ref, B * T, (int)C, part);
            ok &= err <= 2.0 / 32;
            char buf[48];
            snprintf(buf, sizeof(buf), " %s %.2e", names[part], err);
            note += buf;
        }
        r.note = note + " (<= 6.25e-02) " + (ok ? "OK" : "FAIL") + "; forward " +
                 cudnn_attention_plan_info(false, B, T, NH, hd) + "; backward " +
                 cudnn_attention_plan_info(true, B, T, NH, hd);
        if (ok) {
            r.ms = dev_time_ms([&]() { bwd(); });
            r.total_ms = dev_time_ms([&]() { fwd(); bwd(); });
            r.timed = true;
        } else {
            dev_cudnn_check_failed() = true;
        }
    }
    for (void* p : {(void*)c_out, (void*)c_dqkv, (void*)c_stats}) cudaCheck(cudaFree(p));
    return r;
}
#endif

static void bench_backward(const DevOptions& o) {
    printf("\nbackward and forward+backward, hd=%d NH=%d, B*T=%d, p=%g  (ms; TFLOP/s at 2.5 resp. 3.5 x 2 B NH T^2 hd)\n",
           o.hd, o.nh, o.tokens, o.p);
    printf("%6s %3s  %-13s %9s %8s %11s %8s %10s\n", "T", "B", "kernel", "bwd ms", "TFLOP/s", "fwd+bwd ms", "TFLOP/s",
           "vs softmax");
    for (int T : o.lengths) {
        int B = std::max(1, o.tokens / T), NH = o.nh, hd = o.hd;
        DevAttnBuffers buf(B, T, NH, hd, 2, 4);
        floatX *d_qkv = buf.d_qkv, *d_dout = buf.d_dout, *d_out = buf.d_out, *d_dqkv = buf.d_dqkv;
        float* d_stats = buf.d_stats;
        void* scratch = buf.scratch;
        double fwd_flops = dev_forward_flops(B, NH, T, hd), bwd_flops = 2.5 * fwd_flops;
        float softmax_total = 0;
#ifdef ATTN_DEV_CUDNN
        DevCudnnResult cudnn;
        float lssar_total = 0;
#endif
        for (AttnKind kind : all_kinds()) {
            bool wanted = kind == ATTN_SOFTMAX;
            for (AttnKind k : o.kinds) wanted |= k == kind;
            if (!wanted) continue;
            auto fwd = [&]() { attention_forward_cuda(d_out, d_stats, d_qkv, scratch, B, T, NH, hd, kind, o.p); };
            auto bwd = [&]() {
                attention_backward_cuda(d_dqkv, d_dout, d_qkv, d_out, d_stats, scratch, B, T, NH, hd, kind, o.p);
            };
            fwd();
            bwd();
            cudaCheck(cudaDeviceSynchronize());
            float bwd_ms = dev_time_ms(bwd);
            float total_ms = dev_time_ms([&]() { fwd(); bwd(); });
            if (kind == ATTN_SOFTMAX) softmax_total = total_ms;
#ifdef ATTN_DEV_CUDNN
            if (cudnn_attention_computes(kind, 0)) cudnn = dev_cudnn_backward(d_qkv, d_dout, d_dqkv, B, T, NH, hd);
            if (kind == ATTN_LSSAR) lssar_total = total_ms;
#endif
            printf("%6d %3d  %-13s %9.3f %8.1f %11.3f %8.1f %10.2f\n", T, B, attn_kind_name(kind), bwd_ms,
                   bwd_flops / bwd_ms * 1e-9, total_ms, (fwd_flops + bwd_flops) / total_ms * 1e-9,
                   total_ms / softmax_total);
        }
#ifdef ATTN_DEV_CUDNN
        if (cudnn.timed) {
            printf("%6d %3d  %-13s %9.3f %8.1f %11.3f %8.1f %10.2f\n", T, B, "cudnn", cudnn.ms,
                   bwd_flops / cudnn.ms * 1e-9, cudnn.total_ms, (fwd_flops + bwd_flops) / cudnn.total_ms * 1e-9,
                   cudnn.total_ms / softmax_total);
        }
        printf("cudnn  T=%d: %s\n", T, cudnn.note.c_str());
        printf("ratios T=%d forward+backward: softmax/cuDNN %s  lssar/softmax %s\n", T,
               dev_ratio(softmax_total, cudnn.timed ? cudnn.total_ms : 0).c_str(),
               dev_ratio(lssar_total, softmax_total).c_str());
#endif
    }
}

int main(int argc, char** argv) {
    DevOptions o = dev_parse_args(argc, argv, "attention_backward");
    if (o.check) validate_backward(o);
    if (o.bench) bench_backward(o);
#ifdef ATTN_DEV_CUDNN
    cudnn_attention_free();
    if (dev_cudnn_check_failed()) return EXIT_FAILURE;
#endif
    return 0;
}
