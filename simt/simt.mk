# The SIMT emulator (simt/README.md): the project's CUDA sources run on the CPU, and host
# implementations of the cuBLASLt and NCCL subsets the project calls.
#   nvcc build:      $(NVCC_CUDA) ... $(NVCC_LDLIBS)             (the real CUDA libraries)
#   emulated build:  $(CXX_EMU) -x c++ foo.cu -x none $(EMU_LDLIBS)  (kernels, cuBLASLt and NCCL on the CPU)
# A rule for an emulated program lists $(EMU_LIBS) among its prerequisites.
# (the emulator's own tests: test/test.mk)

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
