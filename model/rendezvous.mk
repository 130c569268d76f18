# The rendezvous of a data-parallel run (model/rendezvous.h): the id file and TCP, host only.
$(BUILD)/test_rendezvous: test/test_rendezvous.cpp model/rendezvous.h test/temp_dir.h | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ -pthread $(LDLIBS)

TESTS += $(BUILD)/test_rendezvous
