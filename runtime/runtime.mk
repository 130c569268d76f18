# The runtime around the model: checkpoints (runtime/checkpoint.h), the rendezvous of a
# data-parallel run (runtime/rendezvous.h), data parallelism over NCCL (runtime/distributed.h).
#   $(RUNTIME_OBJS)   link these into a program that reads or writes checkpoints
# (the tests of the rendezvous and of data parallelism: test/test.mk)
RUNTIME_OBJS := $(BUILD)/runtime/checkpoint.o

$(BUILD)/runtime/%.o: runtime/%.cpp | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_HOST) -c $< -o $@
