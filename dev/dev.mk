# dev/: single-file kernel experiments (llm.c dev/cuda style). Each includes its product kernel
# (layers/*.cuh) as version 1, adds variants, validates against the CPU reference, and on a GPU
# benchmarks (time, effective bandwidth).
#   make dev        emulated builds, each run once to validate versions 1 and 2 (no GPU needed)
#   make dev-cuda   nvcc builds (also part of `make cuda`): ./build/dev/<name>_gpu [version]
# The attention dev files (dev/attention_*.cu) have their nvcc builds in attention/attention.mk.
# the one list of dev kernels
DEV_NAMES := encoder rope layernorm matmul gelu classifier adamw global_norm
DEV_EMU   := $(DEV_NAMES:%=$(BUILD)/dev/%)
DEV_GPU   := $(DEV_NAMES:%=$(BUILD)/dev/%_gpu)
DEV_ATTN_EMU := $(BUILD)/dev/attention_forward $(BUILD)/dev/attention_backward

$(DEV_EMU): $(BUILD)/dev/%: dev/%.cu $(EMU_LIBS) | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_EMU) -x c++ $< -x none $(EMU_LDLIBS) -o $@

$(DEV_GPU): $(BUILD)/dev/%_gpu: dev/%.cu | $(BUILD)
	@mkdir -p $(@D)
	$(NVCC_CUDA) $< -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp

# the attention dev files, emulated (validation only)
$(DEV_ATTN_EMU): $(BUILD)/dev/attention_%: dev/attention_%.cu $(SIMT_LIB) | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_EMU) -x c++ $< -x none $(SIMT_LIB) -lboost_context $(LDLIBS) -o $@

.PHONY: dev dev-cuda
dev: $(BUILD)/test_dev
	./$(BUILD)/test_dev
dev-cuda: $(DEV_GPU)

# `make test` runs every dev file's validation once (dev/validate.sh with the list above)
$(BUILD)/test_dev: dev/validate.sh $(DEV_EMU) $(DEV_ATTN_EMU)
	printf '#!/usr/bin/env bash\nexec bash dev/validate.sh $(DEV_NAMES)\n' > $@
	chmod +x $@

TESTS     += $(BUILD)/test_dev
CUDA_BINS += $(DEV_GPU)
