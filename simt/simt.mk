# The SIMT emulator (simt/README.md): the project's CUDA sources run on the CPU, and host
# implementations of the cuBLASLt and NCCL subsets the project calls.
#   nvcc build:      $(NVCC_CUDA) ... $(NVCC_LDLIBS)             (the real CUDA libraries)
#   emulated build:  $(CXX_EMU) -x c++ foo.cu -x none $(EMU_LDLIBS)  (kernels, cuBLASLt and NCCL on the CPU)
# A rule for an emulated program lists $(EMU_LIBS) among its prerequisites.

SIMT_CXXFLAGS := -DSIMT -Isimt/include
SIMT_LIB      := $(BUILD)/libsimt.a
VENDOR_LIB    := $(BUILD)/libsimt_vendor.a
EMU_LIBS      := $(VENDOR_LIB) $(SIMT_LIB)
EMU_LDLIBS    := $(VENDOR_LIB) $(SIMT_LIB) -lboost_context -rdynamic $(BLAS_LDLIBS) $(LDLIBS)   # -rdynamic: kernel names in SIMT_LAUNCH_LOG
NVCC_LDLIBS   := -L/usr/local/cuda/lib64 -lcublasLt -lcublas -lnccl

# compile commands with generated dependencies: host/CPU back end, emulated CUDA, nvcc
CXX_HOST  = $(CXX) $(CXXFLAGS) $(DEPFLAGS)
CXX_EMU   = $(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) $(DEPFLAGS)
NVCC_CUDA = $(NVCC) $(NVCCFLAGS) $(DEPFLAGS)
# nvcc on a .cpp source: compiled as CUDA on its own first ($@.o), since nvcc's -x cu applies to
# every file of its command line; then $(NVCC_LINK) $@.o objects... -o $@ libraries...
NVCC_CPP_OBJ = $(NVCC_CUDA) -x cu -c $< -o $@.o
NVCC_LINK    = $(NVCC) $(NVCCFLAGS)

SIMT_OBJS   := $(BUILD)/simt/simt_runtime.o $(BUILD)/simt/simt_exec.o
VENDOR_OBJS := $(BUILD)/simt/cublaslt_host.o $(BUILD)/simt/nccl_host.o

$(BUILD)/simt/%.o: simt/%.cpp | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_EMU) -c $< -o $@

$(SIMT_LIB): $(SIMT_OBJS)
	rm -f $@
	ar rcs $@ $^

$(VENDOR_LIB): $(VENDOR_OBJS)
	rm -f $@
	ar rcs $@ $^

# The emulator's own tests, and the host cuBLASLt/NCCL against double-precision and serial
# references; the _cu builds are the same files under nvcc for a GPU (the host semantics must match).
$(BUILD)/test_simt: test/test_simt.cpp $(DOCTEST_MAIN) $(SIMT_LIB) | $(BUILD)
	$(CXX_EMU) $< $(DOCTEST_MAIN) $(SIMT_LIB) -lboost_context -rdynamic -o $@

$(BUILD)/test_simt_cu: test/test_simt.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CPP_OBJ)
	$(NVCC_LINK) $@.o $(DOCTEST_MAIN) -o $@

$(BUILD)/test_vendor_host: test/test_vendor_host.cpp $(DOCTEST_MAIN) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) $< $(DOCTEST_MAIN) $(EMU_LDLIBS) -o $@

$(BUILD)/test_vendor_host_cu: test/test_vendor_host.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CPP_OBJ)
	$(NVCC_LINK) $@.o $(DOCTEST_MAIN) -o $@ $(NVCC_LDLIBS)

# the host NCCL with ranks in separate processes: the test runs itself again as the other ranks
$(BUILD)/test_nccl_processes: test/test_nccl_processes.cpp $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) $< $(EMU_LDLIBS) -o $@

TESTS     += $(BUILD)/test_simt $(BUILD)/test_vendor_host $(BUILD)/test_nccl_processes
CUDA_BINS += $(BUILD)/test_simt_cu $(BUILD)/test_vendor_host_cu
