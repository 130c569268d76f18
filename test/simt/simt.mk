# SIMT emulator: CUDA kernels of the project run on the CPU (see test/simt/README.md).
# Other fragments build an emulated test with
#   $(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ test/test_foo_cuda.cu -x none $(SIMT_LDLIBS) -o $@
# and depend on $(SIMT_LIB) (and $(SIMT_HEADERS) if they like).

SIMT_CXXFLAGS := -DSIMT -Itest/simt/include
SIMT_HEADERS  := test/simt/simt.h test/simt/simt_bf16.h test/simt/simt_fastmath.h layers/cuda_common.cuh layers/mma.cuh
SIMT_SRCS     := test/simt/simt_runtime.cpp test/simt/simt_exec.cpp
SIMT_OBJS     := $(patsubst test/simt/%.cpp,$(BUILD)/simt/%.o,$(SIMT_SRCS))
SIMT_LIB      := $(BUILD)/libsimt.a
SIMT_LDLIBS   := $(SIMT_LIB) -lboost_context -rdynamic   # -rdynamic: kernel names in SIMT_LAUNCH_LOG

$(BUILD)/simt/%.o: test/simt/%.cpp test/simt/simt_internal.h $(SIMT_HEADERS) | $(BUILD)
	@mkdir -p $(BUILD)/simt
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -c $< -o $@

$(SIMT_LIB): $(SIMT_OBJS)
	rm -f $@
	ar rcs $@ $^

# the emulator's own tests: emulated here, and the same file under nvcc for a GPU
$(BUILD)/test_simt: test/test_simt.cpp $(SIMT_LIB) $(SIMT_HEADERS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) test/test_simt.cpp $(SIMT_LDLIBS) -o $@

$(BUILD)/test_simt_cu: test/test_simt.cpp layers/cuda_common.cuh layers/mma.cuh | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -x cu test/test_simt.cpp -o $@

TESTS     += $(BUILD)/test_simt
CUDA_BINS += $(BUILD)/test_simt_cu
