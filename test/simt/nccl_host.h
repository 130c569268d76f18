// NCCL on the host, for the emulated CUDA build: ranks are threads of one process.
//
// The subset of /usr/local/cuda/include/nccl.h that the project calls, with the
// same names, enum values and signatures. Members of a communicator find each
// other through a process-wide registry keyed by the ncclUniqueId (one rank per
// thread calls ncclCommInitRank), or all come from one ncclCommInitAll call.
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
//     then broken and every later collective on it fails at once.
//   - send and receive buffers must lie in cudaMalloc allocations of the emulator.
//   - inside ncclGroupStart/ncclGroupEnd the collectives are posted at the call
//     and completed at ncclGroupEnd, so one thread may drive several ranks
//     (the ncclCommInitAll pattern).
#pragma once

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

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
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
