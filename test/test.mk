# Every test program: `make test` builds and runs $(TESTS) in the order they are added below (the
# cheap foundations first: the emulator, the data, the kernels, then the models, the tools, the
# pipelines). Read last: the rules name the programs and objects the other fragments define.
# A test binary's suffix says how it is built and where it runs:
#   (none)    g++, runs in `make test` on any machine: the CPU code, and CUDA code under the SIMT
#             emulator (test_<what>_cuda: kernels or the CUDA back end, emulated)
#   _cu_emu   the emulated build of a test that also has a CPU build (test_passkey_cu_emu runs
#             build/passkey_cu_emu_lssar, as test_passkey runs build/passkey_cpu_lssar); in `make test`
#   _gpu      the same source under nvcc, to run on a GPU: `make cuda` builds it, `make test` never
#             runs it (on a GPU machine, scripts/gpu_check.sh runs those it lists)
# (a tool's suffix, _cpu, _cu (nvcc) or _cu_emu, names the back end it runs: eval/eval.mk, train.mk)

# doctest's main, compiled once and linked into every doctest program
$(DOCTEST_MAIN): test/doctest_main.cpp | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_HOST) -c $< -o $@

# ----------------------------------------------------------------------------
# The SIMT emulator's own tests, and the host cuBLASLt/NCCL against double-precision and serial
# references; the _gpu builds are the same files under nvcc for a GPU (the host semantics must match).
$(BUILD)/test_simt: test/test_simt.cpp $(DOCTEST_MAIN) $(SIMT_LIB) | $(BUILD)
	$(CXX_EMU) $< $(DOCTEST_MAIN) $(SIMT_LIB) -lboost_context -rdynamic -o $@

$(BUILD)/test_simt_gpu: test/test_simt.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CPP_OBJ)
	$(NVCC_LINK) $@.o $(DOCTEST_MAIN) -o $@

$(BUILD)/test_vendor_host: test/test_vendor_host.cpp $(DOCTEST_MAIN) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) $< $(DOCTEST_MAIN) $(EMU_LDLIBS) -o $@

$(BUILD)/test_vendor_host_gpu: test/test_vendor_host.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CPP_OBJ)
	$(NVCC_LINK) $@.o $(DOCTEST_MAIN) -o $@ $(NVCC_LDLIBS)

# the host NCCL with ranks in separate processes: the test runs itself again as the other ranks
$(BUILD)/test_nccl_processes: test/test_nccl_processes.cpp $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) $< $(EMU_LDLIBS) -o $@

TESTS     += $(BUILD)/test_simt $(BUILD)/test_vendor_host $(BUILD)/test_nccl_processes
CUDA_BINS += $(BUILD)/test_simt_gpu $(BUILD)/test_vendor_host_gpu

# ----------------------------------------------------------------------------
# Shards and the loader; the tokenizer against build/tokenize, PCRE2 (an independent regex engine)
# and node
$(BUILD)/test_shards: test/test_shards.cpp $(DOCTEST_MAIN) $(DATALOADER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(DATALOADER_OBJS) -o $@ $(LDLIBS)

$(BUILD)/test_tokenizer: test/test_tokenizer.cpp $(DOCTEST_MAIN) $(DATALOADER_OBJS) | $(BUILD) $(BUILD)/tokenize
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(DATALOADER_OBJS) -o $@ -lpcre2-8 $(LDLIBS)

TESTS += $(BUILD)/test_shards $(BUILD)/test_tokenizer

# ----------------------------------------------------------------------------
# The rendezvous (the id file and TCP, host only); data parallelism and scripts/launch.sh: emulated
# (ranks as threads, host NCCL), and the same file under nvcc for a machine with GPUs
$(BUILD)/test_rendezvous: test/test_rendezvous.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ -pthread $(LDLIBS)

$(BUILD)/test_distributed: test/test_distributed.cu $(DOCTEST_MAIN) $(RUNTIME_OBJS) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(RUNTIME_OBJS) $(EMU_LDLIBS) -o $@

$(BUILD)/test_distributed_gpu: test/test_distributed.cu $(DOCTEST_MAIN) $(RUNTIME_OBJS) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) $(RUNTIME_OBJS) -o $@ $(NVCC_LDLIBS) -lgomp

TESTS     += $(BUILD)/test_rendezvous $(BUILD)/test_distributed
CUDA_BINS += $(BUILD)/test_distributed_gpu

# ----------------------------------------------------------------------------
# CUDA kernels of the non-attention layers (layers/*.cuh) against their CPU reference
# (layers/*_cpu.h), emulated
$(BUILD)/test_layers_cuda: test/test_layers_cuda.cu $(DOCTEST_MAIN) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(EMU_LDLIBS) -o $@

$(BUILD)/test_layers_cuda_gpu: test/test_layers_cuda.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) -o $@ $(NVCC_LDLIBS) $(NVCC_BLAS_LDLIBS) -lgomp

TESTS     += $(BUILD)/test_layers_cuda
CUDA_BINS += $(BUILD)/test_layers_cuda_gpu

# The attention family's CUDA kernels (attention/attention.cuh) against the CPU reference, emulated
$(BUILD)/test_attention_cuda: test/test_attention_cuda.cu $(DOCTEST_MAIN) $(SIMT_LIB) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(SIMT_LIB) -lboost_context -rdynamic $(LDLIBS) -o $@

$(BUILD)/test_attention_cuda_gpu: test/test_attention_cuda.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) -o $@

TESTS     += $(BUILD)/test_attention_cuda
CUDA_BINS += $(BUILD)/test_attention_cuda_gpu

# test_cudnn_graph: the graphs of attention/attention_cudnn.h finalized and put through cuDNN's
# heuristics against a described sm_90 device, without a GPU (cuDNN's flags: dev/dev.mk). Part of
# make test where nvcc and a cuDNN whose graph header has device descriptions (cuDNN 9) are found;
# skipped otherwise.
CUDNN_HAS_DEVICEPROP := $(if $(CUDNN_HEADER),$(shell grep -ls CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION \
                                                     $(dir $(CUDNN_HEADER))cudnn_graph*.h))
NVCC_FOUND := $(shell command -v $(NVCC) 2>/dev/null)
ifneq ($(and $(ATTN_DEV_CUDNN_FLAGS),$(CUDNN_HAS_DEVICEPROP),$(NVCC_FOUND)),)
TESTS += $(BUILD)/test_cudnn_graph
endif
$(BUILD)/test_cudnn_graph: test/test_cudnn_graph.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $(ATTN_DEV_CUDNN_FLAGS) $< $(DOCTEST_MAIN) -o $@ $(ATTN_DEV_CUDNN_LIBS)

# ----------------------------------------------------------------------------
# CPU reference tests (rungs 1 and 2 of the correctness ladder); test_pytorch runs
# test/gpt2_torch.py (PyTorch) at each run and falls back to test/data/torch_state_*.bin
CPU_REFERENCE_TESTS := $(addprefix $(BUILD)/,test_layers_cpu test_attention_cpu test_model_cpu test_pytorch)

$(CPU_REFERENCE_TESTS): $(BUILD)/%: test/%.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(CPU_REFERENCE_TESTS)

# the fast path's attention (attention/attention_fast_cpu.h) against the float64 reference, on every
# Highway target the CPU runs and in both numerics
$(BUILD)/test_attention_fast_cpu: test/test_attention_fast_cpu.cpp $(DOCTEST_MAIN) $(FAST_CPU_LIB) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(FAST_CPU_LIB) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_attention_fast_cpu

# The CUDA back end of the model (model/gpt2_cuda.cuh) against the CPU back end (model/gpt2_cpu.h),
# emulated
$(BUILD)/test_model_cuda: test/test_model_cuda.cu $(DOCTEST_MAIN) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(EMU_LDLIBS) -o $@

$(BUILD)/test_model_cuda_gpu: test/test_model_cuda.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) -o $@ $(NVCC_LDLIBS) $(NVCC_BLAS_LDLIBS) -lgomp

TESTS     += $(BUILD)/test_model_cuda
CUDA_BINS += $(BUILD)/test_model_cuda_gpu

# ----------------------------------------------------------------------------
# test_trainer runs ./train_gpt2cpu_lssar (CLI, resume, guards, checkpoint refusal), ./train_gpt2cpu_ssmax
# (its s logged, saved, resumed), ./train_gpt2cpu_softmax (-tl 1), the loss-versus-length tool and the emulated CUDA trainer (resume,
# processes under scripts/launch.sh)
$(BUILD)/test_trainer: test/test_trainer.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) train_gpt2cpu_lssar train_gpt2cpu_ssmax \
                       train_gpt2cpu_softmax $(BUILD)/loss_vs_length_cpu_lssar $(BUILD)/train_gpt2cu_emu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(BUILD)/test_trainer

# test_cli: every program's flag table (runtime/cli.h) against the program, and llm.c's letters
CLI_TABLE_PROGRAMS := train_gpt2cpu_lssar $(BUILD)/train_gpt2cu_emu_lssar $(BUILD)/loss_vs_length_cpu_lssar \
                      $(BUILD)/passkey_cpu_lssar $(BUILD)/passkey_cu_emu_lssar $(BUILD)/mc_eval_cpu_lssar \
                      $(BUILD)/mc_eval_cu_emu_lssar $(BUILD)/attention_maps_cpu_lssar $(BUILD)/hidden_states_cpu_lssar \
                      $(BUILD)/gradcheck_cu_emu_lssar $(BUILD)/passkey_mix $(BUILD)/sample_cpu_lssar \
                      $(BUILD)/sample_cu_emu_lssar
# (the one list of them: the test reads it from -DCLI_TABLE_PROGRAMS)
$(BUILD)/test_cli: test/test_cli.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(CLI_TABLE_PROGRAMS) $(BUILD)/bench_attention_cpu \
                  test/test.mk | $(BUILD)
	$(CXX_HOST) -DCLI_TABLE_PROGRAMS='"$(CLI_TABLE_PROGRAMS)"' $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_cli

# The CPU back end's fast path (model/gpt2_cpu_fast.h), on every ISA target the CPU runs:
#   test_cpu_fast    its layers and the whole model in fp32 and bf16 numerics against the reference
#                    (10 AdamW steps, resume, the trainer's -pr)
#   test_eval_bf16   the evaluation tools' results on the reference and the fast path agree
$(BUILD)/test_cpu_fast: test/test_cpu_fast.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) train_gpt2cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_cpu_fast

$(BUILD)/test_eval_bf16: test/test_eval_bf16.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_eval_bf16

# ----------------------------------------------------------------------------
# The evaluation tools (eval/eval.mk)
# the statistics of loss versus length (position buckets, beyond the training length, paired
# differences, block bootstrap) against direct computations
$(BUILD)/test_length_stats: test/test_length_stats.cpp $(DOCTEST_MAIN) $(BUILD)/dataloader/shard.o | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(BUILD)/dataloader/shard.o -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_length_stats

# The tools' tests (each runs its tool built for lssar; they read the GPT-2 vocabulary,
# scripts/install_gpt2_vocab.sh):
#   test_passkey, test_passkey_cu_emu   passkey on the CPU and the emulated CUDA back end
#   test_passkey_gpu                    the same on a GPU (`make cuda`)
#   test_attention_maps                 the maps against the forward, and the tool end to end
$(BUILD)/test_passkey: test/test_passkey.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/passkey_cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
$(BUILD)/test_passkey_cu_emu: test/test_passkey.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(EMU_LIBS) \
                              $(BUILD)/passkey_cu_emu_lssar | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(TRAINER_OBJS) $(EMU_LDLIBS) -o $@
$(BUILD)/test_passkey_gpu: test/test_passkey.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/passkey_cu_lssar | $(BUILD)
	$(NVCC_CPP_OBJ)
	$(NVCC_LINK) $@.o $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(NVCC_BLAS_LDLIBS) -lgomp
$(BUILD)/test_attention_maps: test/test_attention_maps.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) \
                              $(BUILD)/attention_maps_cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS     += $(BUILD)/test_passkey $(BUILD)/test_passkey_cu_emu $(BUILD)/test_attention_maps
CUDA_BINS += $(BUILD)/test_passkey_gpu

# test_gradcheck runs build/gradcheck_cu_emu_lssar on a tiny model, and with one gradient
# deliberately scaled
$(BUILD)/test_gradcheck: test/test_gradcheck.cpp $(DOCTEST_MAIN) $(BUILD)/gradcheck_cu_emu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_gradcheck

# re-weighting at evaluation (-rw): an lssa checkpoint through each lssar tool, as the lssar checkpoint
# with its weights
$(BUILD)/test_reweight_eval: test/test_reweight_eval.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/loss_vs_length_cpu_lssar \
                             $(BUILD)/passkey_cpu_lssar $(BUILD)/mc_eval_cpu_lssar $(BUILD)/attention_maps_cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_reweight_eval

# log-length scaling at evaluation (-ls 1): a softmax checkpoint through loss_vs_length, passkey,
# attention_maps and sample, unchanged within the training length bit for bit, changed beyond it; the refusals
$(BUILD)/test_log_len_eval: test/test_log_len_eval.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/loss_vs_length_cpu_softmax \
                            $(BUILD)/loss_vs_length_cpu_lssar $(BUILD)/passkey_cpu_softmax $(BUILD)/attention_maps_cpu_softmax \
                            $(BUILD)/attention_maps_cpu_lssar $(BUILD)/sample_cpu_softmax | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_log_len_eval

# the comparisons' statistics (eval/stats_tests.py against SciPy) and the report tools using them
$(BUILD)/test_stats_tools: test/test_stats_tools.py eval/stats_tests.py eval/compare_mc.py eval/passkey_report.py eval/gap_report.py eval/pool_report.py \
                           eval/extrapolation_report.py eval/plot_positions.py scripts/ablation_table.py | $(BUILD)
	printf '#!/bin/sh\nexec /usr/bin/python3 test/test_stats_tools.py\n' > $@
	chmod +x $@
TESTS += $(BUILD)/test_stats_tools

# test_sample: greedy sampling against the reference's teacher-forced argmax (CPU and emulated
# CUDA), the seed, the refusals, byte-level and GPT-2 text
$(BUILD)/test_sample: test/test_sample.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/sample_cpu_lssar \
                      $(BUILD)/sample_cu_emu_lssar train_gpt2cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_sample
# test_export: scripts/export.py and its PyTorch module against the CPU reference, every variant and
# learned p, and the export -> import -> export round trip (PyTorch: /usr/bin/python3)
$(BUILD)/test_export: test/test_export.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_export

# test/test_mc_eval.cpp: the format and its refusals, scoring, the planted file through the trainer
# (-f) and the tools (CPU, emulated CUDA), the PyTorch cross-check (test/gpt2_torch.py) and the
# preparation script's unit tests (test/test_prepare_mc.py, which runs build/tokenize)
$(BUILD)/test_mc_eval: test/test_mc_eval.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/mc_eval_cpu_lssar \
                       $(BUILD)/mc_eval_cpu_softmax $(BUILD)/mc_eval_cu_emu_lssar train_gpt2cpu_lssar $(BUILD)/tokenize | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_mc_eval

# the passkey training mix (eval/passkey_mix.h, build/passkey_mix)
$(BUILD)/test_passkey_mix: test/test_passkey_mix.cpp $(DOCTEST_MAIN) $(DATALOADER_OBJS) $(BUILD)/passkey_mix | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(DATALOADER_OBJS) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_passkey_mix

# training curves (eval/plot_training.py) on synthetic logs, with Debian's Python (matplotlib)
$(BUILD)/test_plot_training: test/test_plot_training.py eval/plot_training.py | $(BUILD)
	printf '#!/bin/sh\nexec /usr/bin/python3 test/test_plot_training.py\n' > $@
	chmod +x $@
TESTS += $(BUILD)/test_plot_training

# ----------------------------------------------------------------------------
# orbits/test_orbits.py (Python, /usr/bin/python3): simulator, tokens, symbolic regression, flags,
# and the hidden-state tool end to end on a checkpoint the CPU trainer makes in a second.
# build/test_orbits runs it; it prints a doctest-style summary line that scripts/run_tests.sh counts.
ORBITS_PY := $(wildcard orbits/*.py)
$(BUILD)/test_orbits: $(ORBITS_PY) scripts/orbits.sh $(BUILD)/hidden_states_cpu_lssar train_gpt2cpu_lssar | $(BUILD)
	@printf '#!/bin/sh\nexec /usr/bin/python3 orbits/test_orbits.py "$$@"\n' > $@
	@chmod +x $@
TESTS += $(BUILD)/test_orbits

# every dev/ file's validation once (dev/validate.sh with dev/dev.mk's list)
$(BUILD)/test_dev: dev/validate.sh $(DEV_EMU) $(DEV_ATTN_EMU)
	printf '#!/usr/bin/env bash\nexec bash dev/validate.sh $(DEV_NAMES)\n' > $@
	chmod +x $@
TESTS += $(BUILD)/test_dev

# Every repository path and .md file a source, script or document names exists, and every
# "<file>.md, section 'Name'" names one of that file's headings (doc/check_refs.py's header gives
# the rule; it first checks itself on a tree with a planted broken path)
$(BUILD)/test_doc_refs: doc/check_refs.py | $(BUILD)
	cp $< $@
	chmod +x $@
TESTS += $(BUILD)/test_doc_refs

# the GPU check without a GPU: its plan, the carry check, and a run on stubs (test/test_gpu_check.cpp)
$(BUILD)/test_gpu_check: test/test_gpu_check.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@
TESTS += $(BUILD)/test_gpu_check

# the build's variant list (ATTN_VARIANTS, read from attention/attention_kind.h by the Makefile)
# against ATTN_VARIANT_TABLE as the compiler sees it: the same names in the same order
$(BUILD)/test_variant_list: test/test_variant_list.cpp $(DOCTEST_MAIN) Makefile | $(BUILD)
	$(CXX_HOST) -DMAKE_ATTN_VARIANTS='"$(ATTN_VARIANTS)"' $< $(DOCTEST_MAIN) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_variant_list

# A variant added by one line: the tests of every variant, built in $(BUILD)/scratch with one more
# line of the variant list (SCRATCH_VARIANT: LSSA's length-scaled cosine scores with exp, l1, no
# re-weighting, a combination of existing parts that no variant has), run for it alone
# (test/test_scratch_variant.sh): the reference, the fast path on every ISA target, the emulated
# CUDA kernels, the model's float64 gradients, PyTorch and the export. (Dot scores with softplus
# would fail the CUDA kernels' scale test: a row whose every score is below about -87 has its
# softplus sum below float32's range, doc/attention.md, section 'The attention family'.)
SCRATCH_VARIANT := X(ATTN_SCRATCH, "scratch", COS_LEN, EXP, L1, false, 1)
SCRATCH_BUILD   := $(BUILD)/scratch
SCRATCH_TESTS   := $(addprefix $(SCRATCH_BUILD)/,test_attention_cpu test_attention_fast_cpu test_attention_cuda \
                   test_model_cpu test_export test_pytorch manifest.json)
# (make does not see a changed flag: a tree built with another SCRATCH_VARIANT is removed first)
scratch-build:
	@if [ "$$(cat $(SCRATCH_BUILD)/variant.txt 2>/dev/null)" != '$(SCRATCH_VARIANT)' ]; then \
	    rm -rf $(SCRATCH_BUILD) && mkdir -p $(SCRATCH_BUILD) && echo '$(SCRATCH_VARIANT)' > $(SCRATCH_BUILD)/variant.txt; fi
	@$(MAKE) --no-print-directory BUILD=$(SCRATCH_BUILD) ATTN_EXTRA='$(SCRATCH_VARIANT)' $(SCRATCH_TESTS)
$(BUILD)/test_scratch_variant: test/test_scratch_variant.sh scratch-build | $(BUILD)
	cp $< $@
	chmod +x $@
TESTS += $(BUILD)/test_scratch_variant
.PHONY: scratch-build

# the manifest against doc/attention.md's table of variants and the model's sizes (test/test_manifest.py)
$(BUILD)/test_manifest: test/test_manifest.py $(BUILD)/manifest.json | $(BUILD)
	cp $< $@
	chmod +x $@
TESTS += $(BUILD)/test_manifest
