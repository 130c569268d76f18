# The prebuilt GPU check: every binary scripts/gpu_check.sh runs, built here into one folder that
# travels to a GPU machine, where nothing is compiled (bash scripts/gpu_check.sh --prebuilt DIR).
#   make gpu-check-build            -> $(GPU_CHECK_DIR) (default build/gpu_check); fails if the folder
#                                      and the working tree would not fit a device run (56 MiB of its
#                                      64), and prints the run's carry list and command
# The folder's binaries carry sm_90 (H100/H200) code only, are stripped, link only the libraries
# they use (--as-needed), are gzipped (scripts/gpu_check.sh unpacks them), and find OpenBLAS (the
# CPU reference's matmuls), its Fortran runtime and GCC's OpenMP runtime (libgomp: the CPU
# reference's threads) in the folder's lib/, gzipped too (unpacked and put on LD_LIBRARY_PATH), so
# a machine without Debian's packages (a GPU machine with a wheel's CUDA libraries) runs them too.
# The build lists what each binary needs (readelf -d) against what the folder carries and fails
# where one needs a library neither carried nor on such a machine (scripts/gpu_check.sh --libs). They are built by the
# project's own rules (a second make with BUILD=$(BUILD)/gpu_check_obj and these NVCCFLAGS).
GPU_CHECK_DIR ?= $(BUILD)/gpu_check
GPU_CHECK_OBJ := $(BUILD)/gpu_check_obj
# host objects for any x86-64 (the GPU machine's processor may lack this one's AVX-512); the Makefile
# appends the standard, the include path and OpenMP to both
GPU_CHECK_CXXFLAGS := -O2
GPU_CHECK_NVCCFLAGS := -O3 --use_fast_math -std=c++17 -gencode arch=compute_90,code=sm_90 -Xlinker --as-needed
# in the order scripts/gpu_check.sh runs them
GPU_CHECK_TESTS := test_simt_gpu test_vendor_host_gpu test_layers_cuda_gpu test_attention_cuda_gpu test_model_cuda_gpu \
                   test_distributed_gpu
GPU_CHECK_TOOLS := gradcheck_cu_softmax gradcheck_cu_lssar attention_backward \
                   train_gpt2cu_softmax train_gpt2cu_lssar dev/matmul_gpu
# (OpenBLAS: the OpenMP build the binaries link, Makefile's OPENBLAS_DIR, where there is one)
GPU_CHECK_LIBS := $(or $(wildcard $(OPENBLAS_DIR)/libopenblas.so.0),$(shell ldconfig -p 2>/dev/null | \
                      awk '$$1 == "libopenblas.so.0" && /x86-64/ { print $$NF; exit }')) \
                  $(shell for l in libgfortran.so.5 libquadmath.so.0 libgomp.so.1; do \
                      ldconfig -p 2>/dev/null | awk -v l=$$l '$$1 == l && /x86-64/ { print $$NF; exit }'; done)

# the trainers of the folder (the top-level train_gpt2cu_<attn> keep the project's flags)
$(BUILD)/train_gpt2cu_%: train_gpt2.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CU_PROGRAM)

# (write_random_shard, the synthetic shard of the trainer's speed run: tools/tools.mk)

.PHONY: gpu-check-build
gpu-check-build:
	+$(MAKE) BUILD=$(GPU_CHECK_OBJ) NVCCFLAGS="$(GPU_CHECK_NVCCFLAGS)" CXXFLAGS="$(GPU_CHECK_CXXFLAGS)" \
	    $(addprefix $(GPU_CHECK_OBJ)/,$(GPU_CHECK_TESTS) $(GPU_CHECK_TOOLS) write_random_shard manifest.json)
	@rm -rf $(GPU_CHECK_DIR) && mkdir -p $(GPU_CHECK_DIR)/lib
	cp $(addprefix $(GPU_CHECK_OBJ)/,$(GPU_CHECK_TESTS) $(GPU_CHECK_TOOLS) write_random_shard manifest.json) $(GPU_CHECK_DIR)/
	strip $(addprefix $(GPU_CHECK_DIR)/,$(GPU_CHECK_TESTS) $(notdir $(GPU_CHECK_TOOLS)) write_random_shard)
	gzip -f $(addprefix $(GPU_CHECK_DIR)/,$(GPU_CHECK_TESTS) $(notdir $(GPU_CHECK_TOOLS)) write_random_shard)
	$(if $(GPU_CHECK_LIBS),cp -L $(GPU_CHECK_LIBS) $(GPU_CHECK_DIR)/lib/ && gzip -f $(GPU_CHECK_DIR)/lib/*.so.*)
	@git rev-parse --short HEAD > $(GPU_CHECK_DIR)/COMMIT 2>/dev/null || true
	@ls -l $(GPU_CHECK_DIR) $(GPU_CHECK_DIR)/lib | awk 'NF > 5 { print $$5, $$NF }'
	@bash scripts/gpu_check.sh --libs $(GPU_CHECK_DIR)
	@bash scripts/gpu_check.sh --plan --prebuilt $(GPU_CHECK_DIR)
	@bash scripts/gpu_check.sh --carry $(GPU_CHECK_DIR)
