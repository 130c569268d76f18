// The back end a program is built for, and the attention variant: the CPU back end with
// -DTRAIN_BACKEND_CPU (g++), else the CUDA back end (nvcc, or g++ with the SIMT emulator).
// train.mk sets ATTN_NAME from the rule's variant (ATTN=<variant>).
//   Model                  the model type (the back-end interface of model/backend_cpu.h)
//   BACKEND_NAME           "cpu" or "cuda", as printed
//   BACKEND_BINARY_NAME    "cpu" or "cu", as in the binaries' names (train_gpt2cpu_lssar)
#pragma once

#ifdef TRAIN_BACKEND_CPU
#include "model/backend_cpu.h"
typedef ModelCPU Model;
#define BACKEND_NAME "cpu"
#define BACKEND_BINARY_NAME "cpu"
#else
#include "model/gpt2_cuda.cuh"
typedef GPT2Cuda Model;
#define BACKEND_NAME "cuda"
#define BACKEND_BINARY_NAME "cu"
#endif

#ifndef ATTN_NAME
#error "build with -DATTN_NAME='\"softmax\"' (or another variant); make sets it from ATTN=..."
#endif
