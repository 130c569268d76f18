// The model type of a program built for either back end, and the attention variant it is built
// for: the CPU back end with -DTRAIN_BACKEND_CPU (g++), else the CUDA back end (nvcc, or g++ with
// the SIMT emulator). make sets ATTN_NAME from ATTN=softmax|lssa|lssar.
#pragma once

#include <stdexcept>
#include <string>

// select_precision(model, "fp32" | "bf16" | "auto"): the arithmetic, and a line saying what runs
// (the CPU back end's two paths, model/backend_cpu.h); throws std::invalid_argument if the back end
// has no such path.
#ifdef TRAIN_BACKEND_CPU
#include "model/backend_cpu.h"
typedef ModelCPU Model;
inline std::string select_precision(ModelCPU& model, const std::string& name) { return model.select_precision(name); }
#else
#include "model/gpt2_cuda.cuh"
typedef GPT2Cuda Model;
inline std::string select_precision(GPT2Cuda&, const std::string& name) {
    if (name == "fp32") throw std::invalid_argument("the CUDA back end trains in bf16 mixed precision only (bf16 or auto)");
    return "bf16 mixed precision (CUDA back end)";
}
#endif

#ifndef ATTN_NAME
#error "build with -DATTN_NAME='\"softmax\"' (or lssa, lssar); make sets it from ATTN=..."
#endif
