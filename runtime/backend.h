// The back end a program is built for, and the attention variant: the CPU back end with
// -DTRAIN_BACKEND_CPU (g++), else the CUDA back end (nvcc, or g++ with the SIMT emulator).
// train.mk sets ATTN_NAME from the rule's variant (ATTN=<variant>).
//   Model                  the model type (the back-end interface of model/backend_cpu.h)
//   BACKEND_NAME           "cpu" or "cuda", as printed
//   BACKEND_BINARY_NAME    "cpu" or "cu", as in the binaries' names (train_gpt2cpu_lssar)
//   select_precision(model, "ref" | "fp32" | "bf16" | "auto")   the arithmetic (the CPU back end's
//                          paths, model/backend_cpu.h) and a line saying what runs; throws
//                          std::invalid_argument if the back end has no such path
//   set_attention_p(model, p)  the fixed re-weighting power of the next forward (-pw's schedule)
//   set_p_lr_scale(model, s)  learned p's theta trains at s times the learning rate (-plr); the
//                          CUDA back end takes s = 1 alone (train_options.h refuses another)
//   backend_training_memory(config, B, T)  what a training run needs, as this back end states it
//                          (runtime/memory.h): the CPU's lower bound, the CUDA model's own count
#pragma once

#include <stdexcept>
#include <string>

#include "runtime/memory.h"

#ifdef TRAIN_BACKEND_CPU
#include "model/backend_cpu.h"
typedef ModelCPU Model;
#define BACKEND_NAME "cpu"
#define BACKEND_BINARY_NAME "cpu"
inline std::string select_precision(ModelCPU& model, const std::string& name) { return model.select_precision(name); }
inline void set_p_lr_scale(ModelCPU& model, double s) { model.gpt.p_lr_scale = s; }
inline void set_attention_p(ModelCPU& model, float p) { model.gpt.config.p = model.config.p = p; }
inline MemoryEstimate backend_training_memory(const GPT2Config& c, int B, int T) {
    return cpu_training_memory_estimate(c, B, T);
}
#else
#include "model/gpt2_cuda.cuh"
typedef GPT2Cuda Model;
#define BACKEND_NAME "cuda"
#define BACKEND_BINARY_NAME "cu"
inline std::string select_precision(GPT2Cuda&, const std::string& name) {
    if (name == "fp32" || name == "ref")
        throw std::invalid_argument("the CUDA back end runs in bf16 mixed precision only (bf16 or auto; the fp32 paths "
                                    "and the reference are the CPU back end's)");
    return "bf16 mixed precision (CUDA back end)";
}
inline void set_attention_p(GPT2Cuda& model, float p) { model.config.p = p; }
inline MemoryEstimate backend_training_memory(const GPT2Config& c, int B, int T) {
    return gpt2_cuda_training_memory(c, B, T);
}
inline void set_p_lr_scale(GPT2Cuda&, double s) {
    if (s != 1.0) throw std::invalid_argument("-plr: the CUDA back end trains learned p at the learning rate");
}
#endif

#ifndef ATTN_NAME
#error "build with -DATTN_NAME='\"softmax\"' (or another variant); make sets it from ATTN=..."
#endif
