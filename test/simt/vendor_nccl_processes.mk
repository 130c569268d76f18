# The host NCCL with ranks in separate processes (test/simt/nccl_host.h): test/test_nccl_processes.cpp
# runs itself again as the other ranks. Named to come after vendor.mk, which defines VENDOR_LIB.

$(BUILD)/test_nccl_processes: test/test_nccl_processes.cpp test/temp_dir.h $(VENDOR_LIB) $(SIMT_LIB) $(VENDOR_HEADERS) $(VENDOR_COMMON) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) $< $(VENDOR_LIB) $(SIMT_LDLIBS) -o $@

TESTS += $(BUILD)/test_nccl_processes
