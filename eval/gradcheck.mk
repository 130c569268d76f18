# The gradient check of the CUDA back end against the CPU reference (eval/gradcheck.cu), per
# attention variant, and its test.
#   make gradcheck_cu ATTN=lssar  -> build/gradcheck_cu_lssar       (nvcc; run it on a GPU)
#   build/gradcheck_cu_emu_<attn>    the same tool under the SIMT emulator
#   build/test_gradcheck             runs build/gradcheck_cu_emu_lssar on a tiny model (make test)
# model/model.mk, read after this fragment, defines the trainer's headers and objects used here,
# hence the second expansion of the prerequisites.
GRADCHECK_VARIANTS := softmax lssa lssar
GRADCHECK_HEADERS := eval/cli.h model/gpt2_cpu.h model/gpt2_cuda.cuh model/gpt2_config.h model/rand.h
GRADCHECK_CU_BINS := $(addprefix $(BUILD)/gradcheck_cu_,$(GRADCHECK_VARIANTS))
GRADCHECK_EMU_BINS := $(addprefix $(BUILD)/gradcheck_cu_emu_,$(GRADCHECK_VARIANTS))
.SECONDEXPANSION:
$(GRADCHECK_CU_BINS): $(BUILD)/gradcheck_cu_%: eval/gradcheck.cu $(GRADCHECK_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -DATTN_NAME='"$*"' $< $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
$(GRADCHECK_EMU_BINS): $(BUILD)/gradcheck_cu_emu_%: eval/gradcheck.cu $(GRADCHECK_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@
.PHONY: gradcheck_cu
gradcheck_cu: $(BUILD)/gradcheck_cu_$(ATTN)
CUDA_BINS += $(BUILD)/gradcheck_cu_$(ATTN)
$(BUILD)/test_gradcheck: test/test_gradcheck.cpp test/run_command.h $(BUILD)/gradcheck_cu_emu_lssar | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_gradcheck
