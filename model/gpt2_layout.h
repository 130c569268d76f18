// The parameter layout both back ends share: one contiguous buffer holding the tensors of
// model/gpt2_config.h's ParamTensor order, with each tensor's element count and offset.
// GPT2<F> (model/gpt2_cpu.h) and GPT2Cuda (model/gpt2_cuda.cuh) derive from it, so the
// checkpoints, the tests and the data-parallel shards see the same offsets everywhere.
#pragma once

#include <cstddef>

#include "model/gpt2_config.h"

struct GPT2ParamLayout {
    size_t param_sizes[NUM_PARAM_TENSORS];    // elements of every tensor
    size_t param_offsets[NUM_PARAM_TENSORS];  // its first element in the buffer
    size_t num_parameters = 0;                // elements of the whole buffer
    int layout_layers = 0;

    explicit GPT2ParamLayout(const GPT2Config& c) : layout_layers(c.num_layers) {
        gpt2_param_sizes(param_sizes, c);
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            param_offsets[i] = num_parameters;
            num_parameters += param_sizes[i];
        }
    }

    // offset of layer l's slice of a per-layer tensor (param_tensor_per_layer), or of the
    // whole tensor for the others
    size_t param_offset(int i, int l = 0) const {
        if (!param_tensor_per_layer(i)) return param_offsets[i];
        return param_offsets[i] + (size_t)l * (param_sizes[i] / layout_layers);
    }
};
