/*
cuDNN's causal flash-attention graphs of the dev benchmarks (attention/attention_cudnn.h), checked on a
machine without a GPU. cuDNN finalizes operation graphs without a handle and runs its engine
heuristics against a device described in JSON; here an H200 (sm_90):
  1. the forward (14 nodes) and backward (22 nodes) graphs of the benchmark shapes finalize
     (B T = 16384 tokens, NH = 12; hd 64 at T 1024, 4096, 16384; hd 32 and 128 at T 1024);
  2. heuristics mode A recommends engine configs for each, and at least one of them accepts the
     graph: rebuilt from its engine id and knob choices, it finalizes, or fails only with
     CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING, cuDNN's status for the missing driver
     (libcuda), which it checks after the graph pattern;
  3. the configs that accept a graph reject it with CUDNN_STATUS_NOT_SUPPORTED once the graph is
     no longer the attention pattern (the forward without its softmax normalisation, the backward
     without the dK nodes), so check 2 can fail; the status code tells this apart from 2's;
  4. the launcher returns false with a named error where no GPU is present.
cuDNN 9 returns from heuristics only the configs that pass its support checks; without a driver none
does, and its last error string then lists every recommended config (JSON: engine id, knob choices)
with the status chain of its check. The configs are read from there, and each is rebuilt through the
backend API so that its status comes from cudnnBackendFinalize itself.
What this cannot see: cuDNN checks the pattern's structure before the driver, not its meaning nor the
strides. A forward with the causal mask's nodes removed, or the mask reversed (row <= col), is still
accepted (the engines run other masks too), and so is a backward whose dK multiplies dS^T by dO instead
of Q, or a Q with wrong strides. That the graphs compute the project's causal attention is the
numerical check of the dev benchmarks (-check) on a GPU.
*/
#include <doctest/doctest.h>

#ifndef ATTN_DEV_CUDNN
#error "build with make build/test_cudnn_graph: test/test.mk defines ATTN_DEV_CUDNN and links cuDNN"
#endif
#include "attention/attention_cudnn.h"

#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

// ----------------------------------------------------------------------------
// the device and the shapes

// An H200 as cuDNN's device-property JSON: compute capability 9.0, 132 SMs, 227 KiB of shared memory
// per block by opt-in (48 KiB by default, 1 KiB reserved), 64 Ki registers, 2048 threads and 32 blocks
// per SM, 50 MiB of L2, about 140 GiB of memory; driver of CUDA 13.0.
static const char* kH200Json =
    "{\"deviceName\":\"NVIDIA H200\",\"deviceVer\":900,\"driverVer\":13000,\"cudaDeviceId\":0,"
    "\"pciDeviceId\":0,\"isTccDriver\":0,\"supportCoopLaunch\":1,\"multiProcessorCount\":132,"
    "\"warpSize\":32,\"maxThreadsPerBlock\":1024,\"maxThreadsPerSM\":2048,\"maxCtasPerSM\":32,"
    "\"maxBlockSize\":[1024,1024,64],\"maxGridSize\":[2147483647,65535,65535],"
    "\"regsPerBlock\":65536,\"maxRegistersPerSM\":65536,\"maxSharedMemoryPerBlock\":49152,"
    "\"maxSharedMemoryPerBlockOptin\":232448,\"reservedSharedMemoryPerBlock\":1024,"
    "\"l2CacheSize\":52428800,\"totalGlobalMem\":150000000000,\"smClockRateKHz\":1980000,"
    "\"memClockRateKHz\":3201000}";

static cudnnBackendDescriptor_t h200() {
    static CudnnGraphBuilder g;  // lives as long as the program
    static cudnnBackendDescriptor_t device = nullptr;
    if (device) return device;
    cudnnBackendDescriptor_t d = cudnn_create(g, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device properties");
    CUDNN_SET(g, d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, (int64_t)strlen(kH200Json) + 1,
              kH200Json, "device properties");
    cudnn_finalize(g, d, "device properties");
    REQUIRE_MESSAGE(g.ok, cudnn_attention_error());
    device = d;
    return device;
}

struct Shape {
    int T, hd;
};
static const Shape kShapes[] = {{1024, 64}, {4096, 64}, {16384, 64}, {1024, 32}, {1024, 128}};

static std::string describe(bool backward, Shape s) {
    return std::string(backward ? "backward" : "forward") + " B=" + std::to_string(16384 / s.T) +
           " T=" + std::to_string(s.T) + " NH=12 hd=" + std::to_string(s.hd);
}

// ----------------------------------------------------------------------------
// graphs: the product's nodes, less the ones named in drop, as an operation graph without a handle

struct Graph {
    CudnnGraphBuilder g;
    cudnnBackendDescriptor_t graph = nullptr;
    Graph() = default;
    Graph(const Graph&) = delete;
    ~Graph() { cudnn_graph_release(g.owned); }
};

static void build(Graph& out, bool backward, Shape s, const std::vector<std::string>& drop = {}) {
    CudnnAttnShape shape{16384 / s.T, s.T, 12, s.hd, 12 * (int64_t)s.hd};
    if (backward) cudnn_build_backward_ops(out.g, shape);
    else cudnn_build_forward_ops(out.g, shape);
    REQUIRE_MESSAGE(out.g.ok, describe(backward, s), ": ", cudnn_attention_error());
    for (const std::string& name : drop) {
        size_t i = 0;
        while (i < out.g.op_names.size() && out.g.op_names[i] != name) i++;
        REQUIRE_MESSAGE(i < out.g.op_names.size(), "no node \"", name, "\" in the graph of attention/attention_cudnn.h");
        out.g.ops.erase(out.g.ops.begin() + i);
        out.g.op_names.erase(out.g.op_names.begin() + i);
    }
    out.graph = cudnn_attn_operation_graph(out.g, nullptr);
    REQUIRE_MESSAGE(out.graph != nullptr, describe(backward, s), ": ", cudnn_attention_error());
}

// ----------------------------------------------------------------------------
// engine configs: what heuristics recommend, and cuDNN's verdict on one config for one graph

struct EngineChoice {
    int64_t engine = -1;
    std::vector<std::pair<cudnnBackendKnobType_t, int64_t>> knobs;
    std::string report;  // heuristics' own check of it: first status and reason ("" where it passed)
};

// the knob names cuDNN writes in its JSON, as the enum
static const std::map<std::string, cudnnBackendKnobType_t> kKnobs = {
    {"SWIZZLE", CUDNN_KNOB_TYPE_SWIZZLE}, {"TILE_SIZE", CUDNN_KNOB_TYPE_TILE_SIZE},
    {"EDGE", CUDNN_KNOB_TYPE_EDGE}, {"MULTIPLY", CUDNN_KNOB_TYPE_MULTIPLY},
    {"SPLIT_K_BUF", CUDNN_KNOB_TYPE_SPLIT_K_BUF}, {"TILEK", CUDNN_KNOB_TYPE_TILEK},
    {"STAGES", CUDNN_KNOB_TYPE_STAGES}, {"REDUCTION_MODE", CUDNN_KNOB_TYPE_REDUCTION_MODE},
    {"SPLIT_K_SLC", CUDNN_KNOB_TYPE_SPLIT_K_SLC}, {"IDX_MODE", CUDNN_KNOB_TYPE_IDX_MODE},
    {"SPECFILT", CUDNN_KNOB_TYPE_SPECFILT}, {"KERNEL_CFG", CUDNN_KNOB_TYPE_KERNEL_CFG},
    {"WORKSPACE", CUDNN_KNOB_TYPE_WORKSPACE}, {"TILE_CGA_M", CUDNN_KNOB_TYPE_TILE_CGA_M},
    {"TILE_CGA_N", CUDNN_KNOB_TYPE_TILE_CGA_N}, {"BLOCK_SIZE", CUDNN_KNOB_TYPE_BLOCK_SIZE},
    {"OCCUPANCY", CUDNN_KNOB_TYPE_OCCUPANCY}, {"ARRAY_SIZE_PER_THREAD", CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD},
    {"SPLIT_COLS", CUDNN_KNOB_TYPE_SPLIT_COLS}, {"TILE_ROWS", CUDNN_KNOB_TYPE_TILE_ROWS},
    {"TILE_COLS", CUDNN_KNOB_TYPE_TILE_COLS}, {"LOAD_SIZE", CUDNN_KNOB_TYPE_LOAD_SIZE},
};

static std::string knob_name(cudnnBackendKnobType_t type) {
    for (auto& k : kKnobs)
        if (k.second == type) return k.first;
    return "knob " + std::to_string((int)type);
}

static std::string describe(const EngineChoice& c) {
    std::string s = "engine " + std::to_string(c.engine) + " {";
    for (size_t i = 0; i < c.knobs.size(); i++)
        s += (i ? ", " : "") + knob_name(c.knobs[i].first) + " " + std::to_string(c.knobs[i].second);
    return s + "}";
}

// Engine and knobs of a config heuristics returned.
static EngineChoice read_config(cudnnBackendDescriptor_t config) {
    CudnnGraphBuilder g;
    EngineChoice c;
    int64_t n = 0;
    cudnnBackendDescriptor_t engine = cudnn_create(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
    REQUIRE(g.ok);
    REQUIRE(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                     &engine) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &c.engine) ==
            CUDNN_STATUS_SUCCESS);
    std::vector<cudnnBackendDescriptor_t> knobs;
    for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; i++)
        knobs.push_back(cudnn_create(g, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice"));
    REQUIRE(g.ok);
    int64_t count = 0;
    REQUIRE(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     (int64_t)knobs.size(), &count, knobs.data()) == CUDNN_STATUS_SUCCESS);
    for (int64_t i = 0; i < count; i++) {
        cudnnBackendKnobType_t type;
        int64_t value = 0;
        REQUIRE(cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n,
                                         &type) == CUDNN_STATUS_SUCCESS);
        REQUIRE(cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n,
                                         &value) == CUDNN_STATUS_SUCCESS);
        c.knobs.push_back({type, value});
    }
    cudnn_graph_release(g.owned);
    return c;
}

// The configs listed in cuDNN's report of the configs that failed its support checks, e.g.
//   engineConfig: type=json; val={"engineId":6,"smVersion":900,"knobChoices":{"CUDNN_KNOB_TYPE_KERNEL_CFG":26}};
//   Warning: CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING; Reason: this->libcuda == nullptr
static std::vector<EngineChoice> parse_report(const std::string& report) {
    static const std::regex config_re("\"engineId\":(\\d+),\"smVersion\":\\d+,\"knobChoices\":\\{([^}]*)\\}\\}");
    static const std::regex knob_re("\"CUDNN_KNOB_TYPE_([A-Z_]+)\":(-?\\d+)");
    static const std::regex status_re("(CUDNN_STATUS_[A-Z_]+); Reason: ([^\\n]*)");
    std::vector<EngineChoice> choices;
    for (auto m = std::sregex_iterator(report.begin(), report.end(), config_re); m != std::sregex_iterator(); ++m) {
        EngineChoice c;
        c.engine = std::stoll((*m)[1]);
        std::string knobs = (*m)[2];
        for (auto k = std::sregex_iterator(knobs.begin(), knobs.end(), knob_re); k != std::sregex_iterator(); ++k) {
            auto known = kKnobs.find((*k)[1]);
            REQUIRE_MESSAGE(known != kKnobs.end(), "knob CUDNN_KNOB_TYPE_", (*k)[1].str(),
                            " of cuDNN's report is missing from kKnobs in test/test_cudnn_graph.cu: add it");
            c.knobs.push_back({known->second, std::stoll((*k)[2])});
        }
        // the first status of this config's chain: the text up to the next config
        size_t from = m->position() + m->length();
        size_t to = report.find("engineConfig:", from);
        std::string chain = report.substr(from, to == std::string::npos ? std::string::npos : to - from);
        std::smatch status;
        if (std::regex_search(chain, status, status_re)) c.report = status[1].str() + ": " + status[2].str();
        choices.push_back(c);
    }
    return choices;
}

// Heuristics mode A for the graph on the H200: every config it recommends, those that pass cuDNN's
// support checks read from the descriptors, the others from cuDNN's report of them.
static std::vector<EngineChoice> heuristics_mode_a(cudnnBackendDescriptor_t graph) {
    CudnnGraphBuilder g;
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    cudnnBackendDescriptor_t device = h200();
    cudnnBackendDescriptor_t heur = cudnn_create(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
    CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heuristics");
    CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics");
    CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device, "heuristics");
    cudnn_finalize(g, heur, "heuristics");
    REQUIRE_MESSAGE(g.ok, cudnn_attention_error());
    int64_t recommended = 0, returned = 0;
    REQUIRE(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                     &recommended, nullptr) == CUDNN_STATUS_SUCCESS);
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < recommended; i++)
        configs.push_back(cudnn_create(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
    REQUIRE(g.ok);
    std::vector<EngineChoice> choices;
    if (recommended > 0) {
        REQUIRE(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         recommended, &returned, configs.data()) == CUDNN_STATUS_SUCCESS);
        for (int64_t i = 0; i < returned; i++) choices.push_back(read_config(configs[i]));
    }
    if (returned < recommended) {
        static char report[1 << 16];
        report[0] = '\0';
        cudnnGetLastErrorString(report, sizeof(report));
        std::vector<EngineChoice> failed = parse_report(report);
        REQUIRE_MESSAGE((int64_t)failed.size() == recommended - returned, "heuristics recommended ", recommended,
                        " configs and returned ", returned, ", but cuDNN's report lists ", failed.size(),
                        " others:\n", report);
        choices.insert(choices.end(), failed.begin(), failed.end());
    }
    cudnn_graph_release(g.owned);
    return choices;
}

// cuDNN's verdict on one config for the graph on the H200: the status of finalizing the engine, then
// the config with its knobs (the first that is not SUCCESS).
static cudnnStatus_t config_status(cudnnBackendDescriptor_t graph, const EngineChoice& c) {
    CudnnGraphBuilder g;
    cudnnBackendDescriptor_t device = h200();
    cudnnBackendDescriptor_t engine = cudnn_create(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
    CUDNN_SET(g, engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "engine");
    CUDNN_SET(g, engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &c.engine, "engine");
    CUDNN_SET(g, engine, CUDNN_ATTR_ENGINE_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device, "engine");
    REQUIRE_MESSAGE(g.ok, cudnn_attention_error());
    cudnnStatus_t status = cudnnBackendFinalize(engine);
    if (status == CUDNN_STATUS_SUCCESS) {
        std::vector<cudnnBackendDescriptor_t> knobs;
        for (auto& k : c.knobs) {
            cudnnBackendDescriptor_t knob = cudnn_create(g, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice");
            CUDNN_SET(g, knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &k.first, "knob choice");
            CUDNN_SET(g, knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &k.second, "knob choice");
            cudnn_finalize(g, knob, "knob choice");
            knobs.push_back(knob);
        }
        cudnnBackendDescriptor_t config = cudnn_create(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
        CUDNN_SET(g, config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine, "engine config");
        if (!knobs.empty())
            CUDNN_SET(g, config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                      (int64_t)knobs.size(), knobs.data(), "engine config");
        REQUIRE_MESSAGE(g.ok, cudnn_attention_error());
        status = cudnnBackendFinalize(config);
    }
    cudnn_graph_release(g.owned);
    return status;
}

// The engine takes the graph: it finalizes, or only the driver is missing (cuDNN checks the graph first).
static bool accepts(cudnnStatus_t s) {
    return s == CUDNN_STATUS_SUCCESS || s == CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING;
}
// The engine does not take the graph: not supported, or not the pattern it runs.
static bool rejects(cudnnStatus_t s) {
    return s == CUDNN_STATUS_NOT_SUPPORTED || s == CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
}

// The recommended configs of an intact graph that accept it (cached: case 3 reuses them).
static const std::vector<EngineChoice>& accepting_choices(bool backward, Shape s, std::string* log = nullptr) {
    static std::map<std::pair<bool, int>, std::vector<EngineChoice>> cache;
    static std::map<std::pair<bool, int>, std::string> logs;
    auto key = std::make_pair(backward, s.T * 1000 + s.hd);
    if (!cache.count(key)) {
        Graph G;
        build(G, backward, s);
        std::vector<EngineChoice> accepting;
        std::string& text = logs[key];
        for (const EngineChoice& c : heuristics_mode_a(G.graph)) {
            cudnnStatus_t status = config_status(G.graph, c);
            text += "\n  " + describe(c) + ": " + cudnnGetErrorString(status);
            if (accepts(status)) accepting.push_back(c);
        }
        cache[key] = accepting;
    }
    if (log) *log = logs[key];
    return cache[key];
}

// ----------------------------------------------------------------------------

TEST_CASE("cudnn graphs: forward and backward of the benchmark shapes finalize without a handle") {
    for (Shape s : kShapes) {
        for (bool backward : {false, true}) {
            Graph G;
            build(G, backward, s);  // REQUIREs every descriptor and the operation graph to finalize
            // the node counts of the graphs as attention/attention_cudnn.h describes them
            CHECK_MESSAGE(G.g.ops.size() == (backward ? 22u : 14u), describe(backward, s));
        }
    }
}

TEST_CASE("cudnn heuristics (mode A, H200): engine configs that accept the forward and backward graphs") {
    for (Shape s : kShapes) {
        for (bool backward : {false, true}) {
            std::string log;
            const std::vector<EngineChoice>& accepting = accepting_choices(backward, s, &log);
            CHECK_MESSAGE(!accepting.empty(), describe(backward, s), ": no recommended config accepts the graph:", log);
            MESSAGE(describe(backward, s), ": ", accepting.size(), " configs accept it; recommended:", log);
        }
    }
}

TEST_CASE("cudnn heuristics: the same configs reject graphs that are not the attention pattern") {
    struct Broken {
        bool backward;
        const char* what;
        std::vector<std::string> drop;
    };
    const Broken broken[] = {
        {false, "forward without the softmax normalisation", {"pointwise P = E / Z"}},
        {true, "backward without dK", {"reshape dS^T", "matmul dK = dS^T Q"}},
    };
    for (const Broken& b : broken) {
        for (const Shape& s : kShapes) {  // the statuses of every shape are checked, those of the first printed
            const std::vector<EngineChoice>& accepting = accepting_choices(b.backward, s);
            REQUIRE_MESSAGE(!accepting.empty(), describe(b.backward, s), ": no config accepts the intact graph");
            Graph G;
            build(G, b.backward, s, b.drop);
            std::string context = std::string(b.what) + ", " + describe(b.backward, s);
            // every config that accepted the intact graph now rejects it, with a status that is not the
            // missing driver's
            std::set<int64_t> attention_engines;
            std::string log;
            for (const EngineChoice& c : accepting) {
                attention_engines.insert(c.engine);
                cudnnStatus_t status = config_status(G.graph, c);
                log += "\n  " + describe(c) + ": " + cudnnGetErrorString(status);
                CHECK_MESSAGE(rejects(status), context, ": ", describe(c), " accepted the intact graph and gives ",
                              cudnnGetErrorString(status), " for this one");
            }
            // heuristics for the broken graph: any config of those engines it recommends rejects it too;
            // other engines may take it (they are not the attention engines of the intact graph)
            log += "\n  heuristics for it:";
            for (const EngineChoice& c : heuristics_mode_a(G.graph)) {
                cudnnStatus_t status = config_status(G.graph, c);
                log += "\n  " + describe(c) + ": " + cudnnGetErrorString(status) +
                       (c.report.empty() ? "" : " (heuristics' check: " + c.report + ")");
                if (attention_engines.count(c.engine))
                    CHECK_MESSAGE(rejects(status), context, ": heuristics recommend ", describe(c), ", which gives ",
                                  cudnnGetErrorString(status));
            }
            if (&s == &kShapes[0]) MESSAGE(context, ": the configs that accepted the intact graph:", log);
        }
    }
}

TEST_CASE("cudnn launchers without a GPU return false with a named error") {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
        MESSAGE("a GPU is present: the launchers would run; this case is for machines without one");
        return;
    }
    cudaGetLastError();  // clear the runtime's error of the query
    CHECK_FALSE(cudnn_attention_forward(nullptr, nullptr, nullptr, 16, 1024, 12, 64));
    std::string error = cudnn_attention_error();
    MESSAGE("cudnn_attention_forward: ", error);
    // the step that failed, then cuDNN's status
    CHECK_MESSAGE(error.rfind("cudnnCreate: CUDNN_STATUS_", 0) == 0, error);
    CHECK_FALSE(cudnn_attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 16, 1024, 12, 64));
    CHECK(cudnn_attention_error() == error);  // the handle's failure is kept, not retried
    CHECK(cudnn_attention_plan_info(false, 16, 1024, 12, 64).empty());
    cudnn_attention_free();
}
