# Vendor libraries of the project: cuBLASLt and NCCL.
#   nvcc build:     link $(NVCC_LDLIBS) (the real libraries of /usr/local/cuda)
#   emulated build: link $(VENDOR_LIB) $(SIMT_LDLIBS), the host implementations of the
#                   subsets the project calls (test/simt/cublaslt_host.h, nccl_host.h)
# An emulated test that includes layers/cublas_common.cuh or layers/nccl_common.cuh builds as
#   $(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ test/test_foo.cu -x none $(VENDOR_LIB) $(SIMT_LDLIBS) -o $@
# and depends on $(VENDOR_LIB) $(SIMT_LIB).

NVCC_LDLIBS := -L/usr/local/cuda/lib64 -lcublasLt -lcublas -lnccl

VENDOR_HEADERS := test/simt/cublaslt_host.h test/simt/nccl_host.h test/simt/simt.h test/simt/simt_bf16.h
VENDOR_SRCS    := test/simt/cublaslt_host.cpp test/simt/nccl_host.cpp
VENDOR_OBJS    := $(patsubst test/simt/%.cpp,$(BUILD)/vendor/%.o,$(VENDOR_SRCS))
VENDOR_LIB     := $(BUILD)/libsimt_vendor.a

$(BUILD)/vendor/%.o: test/simt/%.cpp $(VENDOR_HEADERS) | $(BUILD)
	@mkdir -p $(BUILD)/vendor
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -c $< -o $@

$(VENDOR_LIB): $(VENDOR_OBJS)
	rm -f $@
	ar rcs $@ $^

VENDOR_COMMON := layers/cublas_common.cuh layers/nccl_common.cuh layers/cuda_common.cuh

# the host implementations against double-precision and serial references (emulated build)
$(BUILD)/test_vendor_host: test/test_vendor_host.cpp $(VENDOR_LIB) $(SIMT_LIB) $(VENDOR_HEADERS) $(VENDOR_COMMON) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) $< $(VENDOR_LIB) $(SIMT_LDLIBS) -o $@

# the same tests against the real cuBLASLt on a GPU: checks that the host semantics match
$(BUILD)/test_vendor_host_cu: test/test_vendor_host.cpp $(VENDOR_COMMON) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -x cu $< -o $@ $(NVCC_LDLIBS)

CUDA_BINS += $(BUILD)/test_vendor_host_cu

TESTS += $(BUILD)/test_vendor_host
