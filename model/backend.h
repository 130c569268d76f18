// The model type of a program built for either back end, and the attention variant it is built
// for: the CPU back end with -DTRAIN_BACKEND_CPU (g++), else the CUDA back end (nvcc, or g++ with
// the SIMT emulator). make sets ATTN_NAME from ATTN=<variant> (attention/attention.mk).
#pragma once

#ifdef TRAIN_BACKEND_CPU
#include "model/backend_cpu.h"
typedef ModelCPU Model;
#else
#include "model/gpt2_cuda.cuh"
typedef GPT2Cuda Model;
#endif

#ifndef ATTN_NAME
#error "build with -DATTN_NAME='\"softmax\"' (or another variant of attention/attention_kind.h); make sets it from ATTN=..."
#endif
