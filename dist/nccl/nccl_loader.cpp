// NCCL, loaded the first time Kiln calls it (LibraryOnFirstUse, core/library_on_first_use.h):
// libnccl.so.2 is over 200 MB, which every program of a CUDA build would map at start-up
// if it were linked, though only distributed GPU training uses it (Note [cuBLAS loaded on
// first use] in kernels/cuda/cublas/cublas_loader.cpp makes the same case for cuBLAS).
// This file defines the NCCL functions Kiln calls, with nccl.h's signatures (the compiler
// checks them against its declarations), each forwarding to the real one: first the
// library the build found (KILN_NCCL_PATH), then libnccl.so.2 on the loader's search path.
#include <nccl.h>

#include "core/library_on_first_use.h"

#if !defined(KILN_NCCL_PATH)
#error "KILN_NCCL_PATH must be defined by the build (dist/CMakeLists.txt)"
#endif

namespace kiln::dist {
namespace {

template <typename Fn>
Fn nccl_symbol(const char* name) {
  static LibraryOnFirstUse nccl("NCCL", KILN_NCCL_PATH, "libnccl.so.2");
  return reinterpret_cast<Fn>(nccl.symbol(name));
}

}  // namespace
}  // namespace kiln::dist

// Resolves the real function once per process, then forwards the call.
#define KILN_NCCL_FORWARD(name, ...)                                          \
  static const auto real = ::kiln::dist::nccl_symbol<decltype(&name)>(#name); \
  return real(__VA_ARGS__)

extern "C" {

ncclResult_t ncclGetVersion(int* version) { KILN_NCCL_FORWARD(ncclGetVersion, version); }
ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) { KILN_NCCL_FORWARD(ncclGetUniqueId, unique_id); }
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  KILN_NCCL_FORWARD(ncclCommInitRankConfig, comm, nranks, comm_id, rank, config);
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { KILN_NCCL_FORWARD(ncclCommDestroy, comm); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { KILN_NCCL_FORWARD(ncclCommAbort, comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  KILN_NCCL_FORWARD(ncclCommGetAsyncError, comm, async_error);
}
const char* ncclGetErrorString(ncclResult_t result) { KILN_NCCL_FORWARD(ncclGetErrorString, result); }
const char* ncclGetLastError(ncclComm_t comm) { KILN_NCCL_FORWARD(ncclGetLastError, comm); }
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  KILN_NCCL_FORWARD(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  KILN_NCCL_FORWARD(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  KILN_NCCL_FORWARD(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream);
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  KILN_NCCL_FORWARD(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}
ncclResult_t ncclGroupStart() { KILN_NCCL_FORWARD(ncclGroupStart); }
ncclResult_t ncclGroupEnd() { KILN_NCCL_FORWARD(ncclGroupEnd); }

}  // extern "C"
