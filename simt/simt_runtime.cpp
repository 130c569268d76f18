// SIMT emulator: the CUDA runtime API on the host (memory, streams, events, errors,
// device properties) and the checks a launch goes through before its blocks run.
#include "simt.h"
#include "simt_internal.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <omp.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace simt { namespace detail {

struct Stream { unsigned flags; };
struct Event {
    unsigned flags;
    bool recorded;
    std::chrono::steady_clock::time_point when;
};

// ---- settings, statistics, per-host-thread error state

static std::atomic<bool> g_print_reports{true};
static std::atomic<int> g_block_threads{0};
static std::atomic<uint64_t> g_launches{0}, g_blocks{0}, g_switches{0};

size_t stack_kib() {
    const char* s = getenv("SIMT_STACK_KB");
    size_t kib = s ? (size_t)atol(s) : 0;
    return kib >= 16 ? kib : 128;
}
int block_threads() {
    int n = g_block_threads.load();
    if (n > 0) return n;
    const char* s = getenv("SIMT_THREADS");
    if (s && atoi(s) > 0) return atoi(s);
    return omp_get_max_threads();
}
void add_stats(uint64_t blocks, uint64_t switches) {
    g_blocks += blocks;
    g_switches += switches;
}

static thread_local cudaError_t t_last_error = cudaSuccess;   // cudaGetLastError
static thread_local cudaError_t t_async_error = cudaSuccess;  // for the next synchronising call
static thread_local std::string t_report;
static thread_local bool t_report_is_race = false;
static thread_local int t_device = 0;

static cudaError_t set_error(cudaError_t err) {
    if (err != cudaSuccess) t_last_error = err;
    return err;
}
static cudaError_t api_error(cudaError_t err, const std::string& msg) {
    if (g_print_reports) fprintf(stderr, "[simt] %s\n", msg.c_str());
    return set_error(err);
}
static cudaError_t take_async() {
    cudaError_t e = t_async_error;
    t_async_error = cudaSuccess;
    return e;
}

// ---- memory registry: device (cudaMalloc/Managed) and pinned host allocations

enum AllocKind { kDevice, kManaged, kPinned };
struct Alloc { size_t bytes; AllocKind kind; };
static std::mutex g_mem_mu;
static std::map<uintptr_t, Alloc> g_allocs;
static size_t g_device_bytes = 0;
static constexpr size_t kDeviceMemory = 80ull << 30;  // declared device memory

// Each allocation sits between two guard zones of a known byte: a kernel that writes
// just outside its buffer changes them, which the checks after each launch report.
static constexpr size_t kRedzone = 256;
static constexpr unsigned char kRedzoneByte = 0xa5;

// "" if the guard zones of the allocation at base are intact, else what was overwritten
// (and the zones are restored so the damage is reported once). Caller holds g_mem_mu.
static std::string redzone_damage(uintptr_t base, const Alloc& a) {
    const unsigned char* p = (const unsigned char*)base;
    long first = 0, last = 0;
    bool hit = false;
    for (size_t i = 0; i < kRedzone; i++) {
        if (p[-(long)kRedzone + (long)i] != kRedzoneByte) {
            long off = -(long)kRedzone + (long)i;
            if (!hit) first = off;
            last = off, hit = true;
        }
    }
    for (size_t i = 0; i < kRedzone; i++) {
        if (p[a.bytes + i] != kRedzoneByte) {
            long off = (long)(a.bytes + i);
            if (!hit) first = off;
            last = off, hit = true;
        }
    }
    if (!hit) return "";
    memset((unsigned char*)p - kRedzone, kRedzoneByte, kRedzone);
    memset((unsigned char*)p + a.bytes, kRedzoneByte, kRedzone);
    char buf[256];
    snprintf(buf, sizeof buf,
             "bytes %ld..%ld relative to the %zu-byte allocation at %p were written: out of bounds (guard zone)",
             first, last, a.bytes, (const void*)p);
    return buf;
}

// First damaged guard zone of any allocation ("" if none).
static std::string check_redzones() {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    for (const auto& kv : g_allocs) {
        std::string d = redzone_damage(kv.first, kv.second);
        if (!d.empty()) return d;
    }
    return "";
}

// Allocation holding [p, p+bytes) (bytes may be 0: p may be one past the end), or null.
static const Alloc* find_alloc(const void* p, size_t bytes, uintptr_t* base) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return nullptr;
    --it;
    if (a + bytes > it->first + it->second.bytes) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}

bool is_device_range(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    return find_alloc(p, bytes, nullptr) != nullptr;
}

static cudaError_t allocate(void** ptr, size_t bytes, AllocKind kind, const char* fn) {
    if (!ptr) return api_error(cudaErrorInvalidValue, std::string(fn) + ": null output pointer");
    *ptr = nullptr;
    if (bytes == 0) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(g_mem_mu);
        if (kind != kPinned && g_device_bytes + bytes > kDeviceMemory)
            return api_error(cudaErrorMemoryAllocation, std::string(fn) + ": out of the emulated device's memory");
    }
    void* raw = nullptr;
    if (posix_memalign(&raw, 256, bytes + 2 * kRedzone) != 0) return set_error(cudaErrorMemoryAllocation);
    unsigned char* p = (unsigned char*)raw + kRedzone;
    memset(p - kRedzone, kRedzoneByte, kRedzone);
    memset(p + bytes, kRedzoneByte, kRedzone);
    if (kind == kDevice) memset(p, 0xff, bytes);  // device memory starts as garbage (NaN as float and bf16)
    std::lock_guard<std::mutex> lock(g_mem_mu);
    g_allocs[(uintptr_t)p] = Alloc{bytes, kind};
    if (kind != kPinned) g_device_bytes += bytes;
    *ptr = p;
    return cudaSuccess;
}

static cudaError_t release(void* p, bool pinned, const char* fn) {
    if (!p) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(g_mem_mu);
        auto it = g_allocs.find((uintptr_t)p);
        if (it == g_allocs.end() || (it->second.kind == kPinned) != pinned) {
            char buf[160];
            snprintf(buf, sizeof buf, "%s(%p): not a pointer returned by %s", fn, p,
                     pinned ? "cudaMallocHost" : "cudaMalloc");
            return api_error(cudaErrorInvalidValue, buf);
        }
        if (!pinned) g_device_bytes -= it->second.bytes;
        std::string damage = redzone_damage(it->first, it->second);
        g_allocs.erase(it);
        if (!damage.empty()) {
            free((unsigned char*)p - kRedzone);
            return api_error(cudaErrorIllegalAddress, std::string(fn) + ": " + damage);
        }
    }
    free((unsigned char*)p - kRedzone);
    return cudaSuccess;
}

static bool on_device(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    const Alloc* a = find_alloc(p, bytes, nullptr);
    return a != nullptr;
}

static cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* fn) {
    if (bytes == 0) return cudaSuccess;
    if (!dst || !src) return api_error(cudaErrorInvalidValue, std::string(fn) + ": null pointer");
    const char* kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};
    if ((int)kind < 0 || (int)kind > 4) return set_error(cudaErrorInvalidMemcpyDirection);
    bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    char buf[256];
    if (dst_dev && !on_device(dst, bytes)) {
        snprintf(buf, sizeof buf, "%s %s: destination %p (%zu bytes) is not inside a cudaMalloc allocation", fn,
                 kinds[kind], dst, bytes);
        return api_error(cudaErrorInvalidValue, buf);
    }
    if (src_dev && !on_device(src, bytes)) {
        snprintf(buf, sizeof buf, "%s %s: source %p (%zu bytes) is not inside a cudaMalloc allocation", fn,
                 kinds[kind], src, bytes);
        return api_error(cudaErrorInvalidValue, buf);
    }
    return cudaSuccess;
}

// ---- streams and events

static std::mutex g_handle_mu;
static std::set<Stream*> g_streams;
static std::set<Event*> g_events;
static bool valid_stream(cudaStream_t s) {
    if (!s) return true;
    std::lock_guard<std::mutex> lock(g_handle_mu);
    return g_streams.count(s) > 0;
}
static bool valid_event(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(g_handle_mu);
    return e && g_events.count(e) > 0;
}

// ---- kernels: attributes set by cudaFuncSetAttribute, static shared bytes seen

struct KernelInfo {
    int max_dynamic = -1;      // cudaFuncAttributeMaxDynamicSharedMemorySize, -1 unset
    size_t static_bytes = 0;   // largest static shared memory seen in a launch
    bool launched = false;
};
static std::mutex g_kernel_mu;
static std::unordered_map<const void*, KernelInfo> g_kernels;

static constexpr size_t kDefaultLimit = 48 * 1024;
static constexpr size_t kOptinLimit = 227 * 1024;

cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value) {
    if (!func) return set_error(cudaErrorInvalidDeviceFunction);
    std::lock_guard<std::mutex> lock(g_kernel_mu);
    KernelInfo& k = g_kernels[func];
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value + k.static_bytes > kOptinLimit) {
            char buf[200];
            snprintf(buf, sizeof buf,
                     "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): static (%zu) + dynamic shared memory "
                     "exceeds the device's %zu bytes",
                     value, k.static_bytes, kOptinLimit);
            return api_error(cudaErrorInvalidValue, buf);
        }
        k.max_dynamic = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
        return (value < -1 || value > 100) ? set_error(cudaErrorInvalidValue) : cudaSuccess;
    }
    return set_error(cudaErrorInvalidValue);
}

cudaError_t func_get_attributes(cudaFuncAttributes* attr, const void* func) {
    if (!attr || !func) return set_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(g_kernel_mu);
    const KernelInfo& k = g_kernels[func];
    memset(attr, 0, sizeof *attr);
    attr->sharedSizeBytes = k.static_bytes;
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    attr->maxDynamicSharedSizeBytes = k.max_dynamic >= 0 ? k.max_dynamic : (int)(kDefaultLimit - k.static_bytes);
    return cudaSuccess;
}

// ---- launch

// SIMT_LAUNCH_LOG=FILE appends one line per distinct (kernel, block, dynamic shared memory) launched:
// "symbol<TAB>threads per block<TAB>dynamic shared bytes", the symbol demangled (the binary must be
// linked with -rdynamic, as $(SIMT_LDLIBS) does). scripts/kernel_stats.sh reads it for the
// occupancy of each kernel at the shapes of a real run.
static void log_launch(const char* name, const void* kernel, dim3 block, size_t smem_bytes) {
    static const char* path = getenv("SIMT_LAUNCH_LOG");
    if (!path || !*path) return;
    static std::mutex mu;
    static std::set<std::string> seen;
    Dl_info info;
    std::string symbol = name;
    if (dladdr(kernel, &info) && info.dli_sname) {
        int status = 0;
        char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
        symbol = status == 0 && demangled ? demangled : info.dli_sname;
        free(demangled);
    }
    char line[1024];
    snprintf(line, sizeof line, "%s\t%u\t%zu\n", symbol.c_str(), block.x * block.y * block.z, smem_bytes);
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(line).second) return;
    FILE* f = fopen(path, "a");
    if (!f) { fprintf(stderr, "[simt] SIMT_LAUNCH_LOG=%s: cannot open it for appending\n", path); return; }
    fputs(line, f);
    fclose(f);
}

void launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            const PtrArg* ptr_args, int n_ptr_args, FnRef body) {
    if (t_thread) {
        fprintf(stderr, "[simt] kernel '%s' launched from device code: dynamic parallelism is not emulated\n", name);
        abort();
    }
    g_launches++;
    t_report.clear();
    t_report_is_race = false;
    char buf[512];
    auto refuse = [&](cudaError_t err) {
        t_report = buf;
        if (g_print_reports) fprintf(stderr, "[simt] %s\n", buf);
        set_error(err);
    };
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
        snprintf(buf, sizeof buf, "launch of '%s' refused: empty grid (%u,%u,%u) or block (%u,%u,%u)", name, grid.x,
                 grid.y, grid.z, block.x, block.y, block.z);
        return refuse(cudaErrorInvalidConfiguration);
    }
    if (threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
        snprintf(buf, sizeof buf,
                 "launch of '%s' refused: block (%u,%u,%u) has %llu threads; at most 1024, and block dims at most "
                 "(1024,1024,64)",
                 name, block.x, block.y, block.z, (unsigned long long)threads);
        return refuse(cudaErrorInvalidConfiguration);
    }
    if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        snprintf(buf, sizeof buf, "launch of '%s' refused: grid (%u,%u,%u) exceeds (2^31-1, 65535, 65535)", name,
                 grid.x, grid.y, grid.z);
        return refuse(cudaErrorInvalidConfiguration);
    }
    if (!valid_stream(stream)) {
        snprintf(buf, sizeof buf, "launch of '%s' refused: stream %p is not a live stream", name, (void*)stream);
        return refuse(cudaErrorInvalidResourceHandle);
    }
    KernelInfo info;
    {
        std::lock_guard<std::mutex> lock(g_kernel_mu);
        info = g_kernels[kernel];
    }
    size_t total_limit = info.max_dynamic >= 0 ? kOptinLimit : kDefaultLimit;
    size_t dyn_limit = info.max_dynamic >= 0 ? (size_t)info.max_dynamic : kDefaultLimit;
    if (smem_bytes > dyn_limit || smem_bytes + info.static_bytes > total_limit) {
        snprintf(buf, sizeof buf,
                 "launch of '%s' refused: %zu bytes of dynamic shared memory (+ %zu static) exceed the limit of %zu%s",
                 name, smem_bytes, info.static_bytes, info.max_dynamic >= 0 ? std::min(dyn_limit, total_limit) : dyn_limit,
                 info.max_dynamic >= 0 ? "" : " (above 48 KiB call cudaFuncSetAttribute(kernel, "
                                              "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first)");
        return refuse(cudaErrorInvalidValue);
    }
    for (int i = 0; i < n_ptr_args; i++) {
        if (!on_device(ptr_args[i].ptr, 0)) {
            snprintf(buf, sizeof buf,
                     "launch of '%s' refused: pointer argument %d (%p) is not device memory (cudaMalloc, "
                     "cudaMallocManaged or cudaMallocHost); a GPU would fault on it",
                     name, ptr_args[i].index, ptr_args[i].ptr);
            return refuse(cudaErrorInvalidValue);
        }
    }

    log_launch(name, kernel, block, smem_bytes);
    LaunchState L;
    L.name = name;
    L.grid = grid;
    L.block = block;
    L.dyn_smem = smem_bytes;
    L.total_limit = total_limit;
    L.body = body;
    run_blocks(L);
    std::string damage = check_redzones();
    if (!damage.empty())
        L.record(cudaErrorIllegalAddress,
                 "after kernel '" + std::string(name) + "': memory outside a cudaMalloc buffer was changed (by this "
                 "kernel, or host code since the last launch): " + damage, false);
    {
        std::lock_guard<std::mutex> lock(g_kernel_mu);
        KernelInfo& k = g_kernels[kernel];
        k.static_bytes = std::max(k.static_bytes, L.static_bytes.load());
        k.launched = true;
    }
    if (L.err != cudaSuccess) {
        t_report = L.report;
        t_report_is_race = L.is_race;
        if (g_print_reports) fprintf(stderr, "[simt] %s\n", L.report.c_str());
        set_error(L.err);
        t_async_error = L.err;
    }
}

}}  // namespace simt::detail

using namespace simt::detail;

// ---- simt:: controls

namespace simt {
std::string last_error_report() { return t_report; }
std::string last_race_report() { return t_report_is_race ? t_report : std::string(); }
void set_print_reports(bool on) { g_print_reports = on; }
void set_block_threads(int n) { g_block_threads = n; }
void set_spin_limit(uint64_t accesses) { g_spin_limit = accesses ? accesses : (1ull << 30); }
Stats stats() { return Stats{g_launches.load(), g_blocks.load(), g_switches.load()}; }
}  // namespace simt

// ---- errors

const char* cudaGetErrorName(cudaError_t err) {
    switch (err) {
#define E(x) case x: return #x;
        E(cudaSuccess) E(cudaErrorInvalidValue) E(cudaErrorMemoryAllocation) E(cudaErrorInitializationError)
        E(cudaErrorInvalidConfiguration) E(cudaErrorInvalidSymbol) E(cudaErrorInvalidDevicePointer)
        E(cudaErrorInvalidMemcpyDirection) E(cudaErrorInvalidDeviceFunction) E(cudaErrorNoDevice)
        E(cudaErrorInvalidDevice) E(cudaErrorInvalidResourceHandle) E(cudaErrorNotReady) E(cudaErrorIllegalAddress)
        E(cudaErrorLaunchOutOfResources) E(cudaErrorIllegalInstruction) E(cudaErrorMisalignedAddress)
        E(cudaErrorLaunchFailure) E(cudaErrorNotSupported) E(cudaErrorUnknown)
#undef E
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
    switch (err) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInitializationError: return "initialization error";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidSymbol: return "invalid device symbol";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case cudaErrorInvalidDeviceFunction: return "invalid device function";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
        case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
        case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
        case cudaErrorMisalignedAddress: return "misaligned address";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        case cudaErrorNotSupported: return "operation not supported";
        default: return "unknown error";
    }
}

cudaError_t cudaGetLastError() {
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    t_async_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return t_last_error; }
cudaError_t cudaDeviceSynchronize() { return take_async(); }
cudaError_t cudaDeviceReset() {
    t_last_error = t_async_error = cudaSuccess;
    return cudaSuccess;
}

// ---- device

cudaError_t cudaGetDevice(int* device) {
    if (!device) return set_error(cudaErrorInvalidValue);
    *device = t_device;
    return cudaSuccess;
}
// Emulated devices: all alike and sharing one memory, so that ranks of the host NCCL
// (threads of this process) can each select their own (SIMT_DEVICES, default 8).
static int device_count() {
    static const int n = [] {
        const char* s = getenv("SIMT_DEVICES");
        int v = s ? atoi(s) : 8;
        return v >= 1 ? v : 8;
    }();
    return n;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) {
        char buf[128];
        snprintf(buf, sizeof buf, "cudaSetDevice(%d): the emulator has devices 0..%d (SIMT_DEVICES)", device,
                 device_count() - 1);
        return api_error(cudaErrorInvalidDevice, buf);
    }
    t_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return set_error(cudaErrorInvalidValue);
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (!p) return set_error(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count()) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "SIMT emulator (sm_90)");
    p->totalGlobalMem = kDeviceMemory;
    p->sharedMemPerBlock = kDefaultLimit;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->clockRate = 1980000;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->deviceOverlap = 1;
    p->multiProcessorCount = 132;
    p->pciBusID = device;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->memoryClockRate = 2619000;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->persistingL2CacheMaxSize = 30 * 1024 * 1024;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->sharedMemPerBlockOptin = kOptinLimit;
    p->maxBlocksPerMultiProcessor = 32;
    p->reservedSharedMemPerBlock = 1024;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    if (!value) return set_error(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count()) return set_error(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, device);
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
        case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
        case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
        case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
        case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
        case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
        case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
        case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
        case cudaDevAttrWarpSize: *value = p.warpSize; break;
        case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
        case cudaDevAttrClockRate: *value = p.clockRate; break;
        case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
        case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
        case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
        case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
        case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
        case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
        default: return set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) { if (!v) return set_error(cudaErrorInvalidValue); *v = 12040; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* v) { if (!v) return set_error(cudaErrorInvalidValue); *v = 12040; return cudaSuccess; }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    if (free_bytes) *free_bytes = kDeviceMemory - g_device_bytes;
    if (total_bytes) *total_bytes = kDeviceMemory;
    return cudaSuccess;
}

// ---- memory

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return allocate(ptr, bytes, kDevice, "cudaMalloc"); }
cudaError_t cudaMallocManaged(void** ptr, size_t bytes, unsigned int) {
    return allocate(ptr, bytes, kManaged, "cudaMallocManaged");
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return allocate(ptr, bytes, kPinned, "cudaMallocHost"); }
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) { return allocate(ptr, bytes, kPinned, "cudaHostAlloc"); }
cudaError_t cudaFree(void* ptr) { return release(ptr, false, "cudaFree"); }
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
    if (!valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    return allocate(ptr, bytes, kDevice, "cudaMallocAsync");
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
    if (!valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    return release(ptr, false, "cudaFreeAsync");
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
    if (!can || device < 0 || peer < 0 || device >= device_count() || peer >= device_count())
        return set_error(cudaErrorInvalidDevice);
    *can = device != peer;  // one shared memory: every pair of distinct devices can
    return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int) {
    if (peer < 0 || peer >= device_count()) return set_error(cudaErrorInvalidDevice);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) { return release(ptr, true, "cudaFreeHost"); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    cudaError_t err = check_copy(dst, src, bytes, kind, "cudaMemcpy");
    if (err != cudaSuccess) return err;
    if (bytes) memmove(dst, src, bytes);
    return take_async();
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    if (!valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    cudaError_t err = check_copy(dst, src, bytes, kind, "cudaMemcpyAsync");
    if (err != cudaSuccess) return err;
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
    if (width > dpitch || width > spitch) return set_error(cudaErrorInvalidValue);
    if (height == 0 || width == 0) return cudaSuccess;
    cudaError_t err = check_copy(dst, src, 0, kind, "cudaMemcpy2D");  // pointers only
    if (err != cudaSuccess) return err;
    if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) &&
        !on_device(dst, dpitch * (height - 1) + width))
        return api_error(cudaErrorInvalidValue, "cudaMemcpy2D: destination rows leave the cudaMalloc allocation");
    if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) &&
        !on_device(src, spitch * (height - 1) + width))
        return api_error(cudaErrorInvalidValue, "cudaMemcpy2D: source rows leave the cudaMalloc allocation");
    for (size_t r = 0; r < height; r++) memmove((char*)dst + r * dpitch, (const char*)src + r * spitch, width);
    return take_async();
}
static cudaError_t memset_impl(void* ptr, int value, size_t bytes, const char* fn) {
    if (bytes == 0) return cudaSuccess;
    if (!on_device(ptr, bytes)) {
        char buf[200];
        snprintf(buf, sizeof buf, "%s(%p, %zu bytes): not inside a cudaMalloc allocation", fn, ptr, bytes);
        return api_error(cudaErrorInvalidValue, buf);
    }
    memset(ptr, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) { return memset_impl(ptr, value, bytes, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
    if (!valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    return memset_impl(ptr, value, bytes, "cudaMemsetAsync");
}

// ---- streams, events (work is done at the call, so waiting is never needed)

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
    if (!stream) return set_error(cudaErrorInvalidValue);
    *stream = new Stream{flags};
    std::lock_guard<std::mutex> lock(g_handle_mu);
    g_streams.insert(*stream);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(g_handle_mu);
    if (!stream || !g_streams.erase(stream)) return set_error(cudaErrorInvalidResourceHandle);
    delete stream;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    return take_async();
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
    if (!valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
    if (!valid_stream(stream) || !valid_event(event)) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    if (!event) return set_error(cudaErrorInvalidValue);
    *event = new Event{flags, false, {}};
    std::lock_guard<std::mutex> lock(g_handle_mu);
    g_events.insert(*event);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    std::lock_guard<std::mutex> lock(g_handle_mu);
    if (!event || !g_events.erase(event)) return set_error(cudaErrorInvalidResourceHandle);
    delete event;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (!valid_event(event) || !valid_stream(stream)) return set_error(cudaErrorInvalidResourceHandle);
    event->recorded = true;
    event->when = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (!valid_event(event)) return set_error(cudaErrorInvalidResourceHandle);
    return take_async();
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
    if (!valid_event(event)) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return set_error(cudaErrorInvalidValue);
    if (!valid_event(start) || !valid_event(end)) return set_error(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return set_error(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return set_error(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}
