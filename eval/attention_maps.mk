# Attention maps (eval/attention_maps.h) of a checkpoint, CPU back end, per attention variant, and its test.
#   make attention_maps_cpu ATTN=lssar   -> build/attention_maps_cpu_lssar
# model/model.mk, read after this fragment, defines the trainer's headers and objects used here,
# hence the second expansion of the prerequisites.
ATTN_MAPS_VARIANTS := softmax lssa lssar
ATTN_MAPS_HEADERS := eval/attention_maps.h eval/loss_vs_length.h dataloader/tokenizer.h
ATTN_MAPS_CPU_BINS := $(addprefix $(BUILD)/attention_maps_cpu_,$(ATTN_MAPS_VARIANTS))
.SECONDEXPANSION:
$(ATTN_MAPS_CPU_BINS): $(BUILD)/attention_maps_cpu_%: eval/attention_maps.cu $(ATTN_MAPS_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

.PHONY: attention_maps_cpu
attention_maps_cpu: $(BUILD)/attention_maps_cpu_$(ATTN)
CPU_BINS += $(BUILD)/attention_maps_cpu_$(ATTN)

# test/test_attention_maps.cpp: the maps against the forward for each variant, the statistics on
# hand-made rows, and the tool (lssar) end to end; reads the GPT-2 vocabulary for the -p case
# (scripts/install_gpt2_vocab.sh)
$(BUILD)/test_attention_maps: test/test_attention_maps.cpp test/temp_dir.h test/run_command.h $(ATTN_MAPS_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) $(BUILD)/attention_maps_cpu_lssar | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_attention_maps
