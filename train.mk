# The trainer (train_gpt2.cu) on each back end and attention variant.
#   make train_gpt2cpu ATTN=lssar   -> ./train_gpt2cpu_lssar          (g++, CPU back end)
#   make train_gpt2cu ATTN=lssar    -> ./train_gpt2cu_lssar           (nvcc, CUDA back end)
#   build/train_gpt2cu_emu_<attn>      the CUDA back end under the SIMT emulator (tests)
# The same three recipes build every program written against runtime/backend.h (eval/eval.mk);
# a rule's stem ($*) is the attention variant. The trainer's tests (test_trainer, test_cli): test/test.mk.
TRAINER_OBJS := $(RUNTIME_OBJS) $(DATALOADER_OBJS) $(FAST_CPU_LIB)   # the fast CPU path's archive last (Makefile)
BUILD_CPU_PROGRAM = $(CXX_HOST) -DTRAIN_BACKEND_CPU -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) \
                    -o $@ $(BLAS_LDLIBS) $(LDLIBS)
BUILD_CU_PROGRAM  = $(NVCC_CUDA) -DATTN_NAME='"$*"' $< $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(NVCC_BLAS_LDLIBS) -lgomp
BUILD_EMU_PROGRAM = $(CXX_EMU) -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) $(EMU_LDLIBS) -o $@

TRAIN_CPU_BINS := $(addprefix train_gpt2cpu_,$(ATTN_VARIANTS))
TRAIN_CU_BINS  := $(addprefix train_gpt2cu_,$(ATTN_VARIANTS))
TRAIN_EMU_BINS := $(addprefix $(BUILD)/train_gpt2cu_emu_,$(ATTN_VARIANTS))

$(TRAIN_CPU_BINS): train_gpt2cpu_%: train_gpt2.cu $(TRAINER_OBJS)
	$(BUILD_CPU_PROGRAM)
$(TRAIN_CU_BINS): train_gpt2cu_%: train_gpt2.cu $(TRAINER_OBJS)
	$(BUILD_CU_PROGRAM)
$(TRAIN_EMU_BINS): $(BUILD)/train_gpt2cu_emu_%: train_gpt2.cu $(TRAINER_OBJS) $(EMU_LIBS) | $(BUILD)
	$(BUILD_EMU_PROGRAM)

.PHONY: train_gpt2cpu train_gpt2cu
train_gpt2cpu: train_gpt2cpu_$(ATTN)
train_gpt2cu: train_gpt2cu_$(ATTN)
CPU_BINS  += train_gpt2cpu_$(ATTN)
CUDA_BINS += train_gpt2cu_$(ATTN)
