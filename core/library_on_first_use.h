// LibraryOnFirstUse: a shared library opened (dlopen) the first time one of its functions
// is needed, for the large GPU libraries most programs never call: cuBLAS (Note [cuBLAS
// loaded on first use], kernels/cuda/cublas/cublas_loader.cpp) and NCCL
// (dist/nccl/nccl_loader.cpp). Linked the usual way, each would be mapped and relocated at
// every program start, hundreds of MB.
//
// It tries the file the build found, then the soname through the loader's search path;
// failing both, symbol() throws a kiln::Error saying which library could not be loaded and
// why. Thread-safe; the library stays loaded until exit.
//
//   static LibraryOnFirstUse nccl("NCCL", "/usr/local/cuda/lib/libnccl.so.2", "libnccl.so.2");
//   auto real = reinterpret_cast<decltype(&ncclGetVersion)>(nccl.symbol("ncclGetVersion"));
#pragma once

#include <mutex>
#include <string>

namespace kiln {

class LibraryOnFirstUse {
 public:
  LibraryOnFirstUse(std::string what, std::string path, std::string soname)
      : what_(std::move(what)), path_(std::move(path)), soname_(std::move(soname)) {}
  // The address of `name` in the library, loading it first if needed.
  void* symbol(const char* name);
  // Whether the library can be loaded (loads it), without throwing.
  bool available();

 private:
  void* handle();  // throws when it cannot be loaded
  std::string what_, path_, soname_;
  std::once_flag once_;
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace kiln
