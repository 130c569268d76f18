// The fp32 optimizer state of the CUDA model (model/gpt2_cuda.cuh): the master weights and AdamW
// moments of the parameters [begin, end), in device buffers of `slot` >= end - begin elements
// (the tail 0: one slot of ZeRO-1's all-gather). It covers the whole model, or, after shard(), one
// rank's shard under ZeRO-1 (runtime/distributed.h). The model owns it; shard() is the only way
// its range changes.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/cuda_common.cuh"

struct OptimizerState {
    size_t begin = 0, end = 0, slot = 0;
    float* master = nullptr;  // (slot) fp32 weights AdamW updates, of parameter begin onwards
    float* m = nullptr;       // (slot) AdamW moments, allocated at the first update (or restore)
    float* v = nullptr;

    OptimizerState() = default;
    OptimizerState(const OptimizerState&) = delete;
    OptimizerState& operator=(const OptimizerState&) = delete;
    ~OptimizerState() { release(); }

    // The state of all n parameters: master weights 0, no moments yet.
    void init(size_t n) {
        release();
        begin = 0;
        end = slot = n;
        master = zeros(slot);
    }

    size_t size() const { return end - begin; }
    bool covers(size_t first, size_t last) const { return first >= begin && last <= end && first <= last; }

    void ensure_moments() {
        if (m != nullptr) return;
        m = zeros(slot);
        v = zeros(slot);
    }

    // master weights = all[begin, end) of a host vector of every parameter
    void set_master(const std::vector<float>& all) {
        cudaCheck(cudaMemcpy(master, all.data() + begin, size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    void get_master(std::vector<float>& out) const {
        out.resize(size());
        cudaCheck(cudaMemcpy(out.data(), master, size() * sizeof(float), cudaMemcpyDeviceToHost));
    }

    // the moments of [begin, end); zeros before the first update
    void get_moments(std::vector<float>& m_out, std::vector<float>& v_out) const {
        m_out.assign(size(), 0.0f);
        v_out.assign(size(), 0.0f);
        if (m == nullptr) return;
        cudaCheck(cudaMemcpy(m_out.data(), m, size() * sizeof(float), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(v_out.data(), v, size() * sizeof(float), cudaMemcpyDeviceToHost));
    }
    void set_moments(const std::vector<float>& m_in, const std::vector<float>& v_in) {
        if (m_in.size() != size() || v_in.size() != size()) {
            throw std::invalid_argument("set_optimizer: m and v have " + std::to_string(m_in.size()) + " and " +
                                        std::to_string(v_in.size()) + " values, this model's optimizer state covers " +
                                        std::to_string(size()) + " parameters (a checkpoint of another config?)");
        }
        ensure_moments();
        cudaCheck(cudaMemcpy(m, m_in.data(), size() * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(v, v_in.data(), size() * sizeof(float), cudaMemcpyHostToDevice));
    }

    // ZeRO-1: from now on the state covers [first, last) of what it covered whole, in buffers of
    // slot_elems >= last - first elements.
    void shard(size_t first, size_t last, size_t slot_elems) {
        if (begin != 0 || first > last || last > end || slot_elems < last - first) {
            throw std::invalid_argument("optimizer shard [" + std::to_string(first) + ", " + std::to_string(last) +
                                        ") in " + std::to_string(slot_elems) + " elements of a state covering [" +
                                        std::to_string(begin) + ", " + std::to_string(end) + ")");
        }
        for (float** b : {&master, &m, &v}) {
            if (*b == nullptr) continue;
            float* part = zeros(slot_elems);
            cudaCheck(cudaMemcpy(part, *b + first, (last - first) * sizeof(float), cudaMemcpyDeviceToDevice));
            cudaCheck(cudaFree(*b));
            *b = part;
        }
        begin = first;
        end = last;
        slot = slot_elems;
    }

  private:
    static float* zeros(size_t n) {
        float* p = nullptr;
        cudaCheck(cudaMalloc(&p, n * sizeof(float)));
        cudaCheck(cudaMemset(p, 0, n * sizeof(float)));
        return p;
    }
    void release() {
        for (float** b : {&master, &m, &v}) {
            if (*b != nullptr) cudaFree(*b);
            *b = nullptr;
        }
    }
};
