// Note [cuBLAS loaded on first use] (kernels/cuda/cublas/cublas_loader.cpp): a process of a
// CUDA build that has not called cuBLAS has no cuBLAS mapped, and the first call loads it
// and forwards to the real function. Runs without a GPU: cublasGetStatusString needs none.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/ops.h"

namespace kiln {
namespace {

bool cublas_is_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("libcublas") != std::string::npos;
}

TEST(CublasLoader, NothingIsLoadedUntilTheFirstCallWhichForwardsToCublas) {
  const Tensor x = ones({64, 64});
  (void)matmul(x, x).sum().item<double>();  // CPU work: no cuBLAS
  EXPECT_FALSE(cublas_is_mapped()) << "cuBLAS was loaded before any cuBLAS call";
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_NE(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)), "");
  EXPECT_TRUE(cublas_is_mapped());
}

}  // namespace
}  // namespace kiln
