#!/usr/bin/env bash
# GPT-2 124M + RoPE with softmax attention on 8 GPUs: the paper's setup, then loss versus length.
# The batch arithmetic and the settings are in scripts/run_gpt2_124M.sh.
exec bash "$(dirname "$0")/run_gpt2_124M.sh" softmax "$@"
