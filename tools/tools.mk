# Programs that are neither the trainer nor an evaluation: data preparation and profiling. Their
# outputs keep the names scripts and documents use (build/<name>).
#   build/tokenize             the GPT-2 tokenizer's shard tool: text files -> token shards, ids <-> text,
#                              shard inspection (build/tokenize -h)
#   build/passkey_mix          the passkey training mix (eval/passkey_mix.h) of a corpus's token shards
#   build/profile_cpu          the CPU back end's fast path (model/gpt2_cpu_fast.h) on this machine: FLOPs
#                              per token, the libraries' kernels, bf16/fp32 matmul throughput, share of
#                              step time per layer, the long-context evaluation on both paths
#   build/bench_attention_cpu  the fast path's attention on every ISA target this CPU runs against the
#                              reference path's, forward and backward (build/bench_attention_cpu -h)
#   build/write_random_shard   a token shard of random GPT-2 ids, for speed runs without a dataset
#   build/manifest.json        the variants, parameter tensors and activations as JSON
#                              (tools/print_manifest.cpp; `make -s print-manifest` prints it), which the
#                              Python and shell scripts read (scripts/manifest.py)
$(BUILD)/tokenize: tools/tokenize.cpp $(DATALOADER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)

$(BUILD)/passkey_mix: tools/passkey_mix.cpp $(DATALOADER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)

$(BUILD)/profile_cpu: tools/profile_cpu.cpp $(FAST_CPU_LIB) | $(BUILD)
	$(CXX_HOST) $< $(FAST_CPU_LIB) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

$(BUILD)/bench_attention_cpu: tools/bench_attention_cpu.cpp $(FAST_CPU_LIB) | $(BUILD)
	$(CXX_HOST) $< $(FAST_CPU_LIB) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

$(BUILD)/write_random_shard: tools/write_random_shard.cpp $(DATALOADER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DATALOADER_OBJS) -o $@

CPU_BINS += $(BUILD)/tokenize $(BUILD)/passkey_mix $(BUILD)/profile_cpu $(BUILD)/bench_attention_cpu

# The manifest follows the headers it prints (the compiler's dependency file lists them).
$(BUILD)/print_manifest: tools/print_manifest.cpp | $(BUILD)
	$(CXX_HOST) $(MANIFEST_FLAGS) $< -o $@
$(BUILD)/manifest.json: $(BUILD)/print_manifest
	$< > $@.$$$$ && mv $@.$$$$ $@
print-manifest: $(BUILD)/manifest.json
	@cat $<
.PHONY: print-manifest
