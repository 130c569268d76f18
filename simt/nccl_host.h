// NCCL on the host, for the emulated CUDA build: ranks are threads of one process, or
// processes of one machine (scripts/launch.sh), or both.
//
// The subset of /usr/local/cuda/include/nccl.h that the project calls, with the
// same names, enum values and signatures. Members of a communicator find each
// other through the ncclUniqueId: threads of the process that called
// ncclGetUniqueId through a process-wide registry (one rank per thread calls
// ncclCommInitRank), or all come from one ncclCommInitAll call; ranks in other
// processes through a TCP connection to that process (127.0.0.1 only).
//
// Semantics:
//   - a collective returns when every rank has taken part and its own output is
//     written (barrier style); the stream argument is not used.
//   - reductions add rank 0's data first, then rank 1's, ... so results are
//     reproducible; bf16 is reduced in fp32 and rounded to nearest even once;
//     ncclAvg = sum / nranks (in fp32 for bf16/fp32).
//   - a rank that does not arrive within SIMT_NCCL_TIMEOUT_S seconds (default 60)
//     makes the others return ncclSystemError with a message naming the
//     collective and the missing ranks (ncclGetLastError); the communicator is
//     then broken and every later collective on it fails at once. Ranks whose
//     collectives differ (kind, count, type, op, root) fail with a message
//     naming both calls.
//   - send and receive buffers must lie in cudaMalloc allocations of the emulator.
//   - inside ncclGroupStart/ncclGroupEnd the collectives are posted at the call
//     and completed at ncclGroupEnd, so one thread may drive several ranks
//     (the ncclCommInitAll pattern).
//
// Ranks in several processes:
//   - ncclGetUniqueId also starts, once per process, a "hub": a listening socket
//     on 127.0.0.1 (a free port) served by a background thread. The id holds
//     "simtNCCL" (bytes 0-7), the maker's pid (8-11), the hub's port (12-13), a
//     random nonce (16-23) and a serial (24-31); the rest is 0.
//   - ncclCommInitRank in the process that made the id joins through the
//     registry; in any other process it connects to the hub, which refuses an id
//     it did not make (wrong nonce) or a rank already taken, with a message. The
//     hub then runs the rank's collectives in its clique on the rank's behalf
//     (the rank sends its data and receives its output), so the results are
//     bit for bit those of thread ranks. The process that made the id must live
//     until the others' last collective (it holds the communicator); it need not
//     be a rank itself.
//   - a remote rank whose process exits without ncclCommDestroy breaks the
//     communicator at once: the others fail with "rank r of n closed its
//     connection". If the hub's process dies, a remote rank's collectives fail
//     with ncclRemoteError ("lost the connection to the process that made the
//     unique id"). Each socket wait is bounded by SIMT_NCCL_TIMEOUT_S (a remote
//     rank waits 5 s more for an answer, so the hub's own timeout, which names
//     the missing ranks, arrives first). Between two collectives the hub waits
//     for a remote rank without limit (it may compute for any time); the other
//     ranks' collectives still time out.
//   - a remote rank runs each collective whole at the call, also inside a group:
//     one thread may drive only one remote rank at a time. ncclCommAbort breaks
//     the communicator for all; ncclCommDestroy leaves quietly;
//     ncclCommGetAsyncError of a remote rank reports only its lost connection.
#pragma once

#include <climits>

#include <cstddef>
#include <cstdint>

#include "simt.h"  // cudaStream_t

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

// Implemented: ncclInt32, ncclInt64, ncclFloat32, ncclFloat64, ncclBfloat16.
typedef enum {
    ncclInt8 = 0, ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2, ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6, ncclHalf = 6,
    ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclNumTypes = 12
} ncclDataType_t;

// Communicator options; only `blocking` is honoured. blocking = 0 makes a non-blocking
// communicator, as NCCL's: its init, collectives, group end and finalize return ncclInProgress
// (their work is done, or being done), and ncclCommGetAsyncError reports ncclInProgress until the
// call has completed (here: at the first poll after it) and ncclSuccess then; the caller must poll
// before the next call. NCCL_CONFIG_INITIALIZER leaves blocking undefined, i.e. blocking.
#define NCCL_CONFIG_UNDEF_INT INT_MIN
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER \
    { sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT }

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
