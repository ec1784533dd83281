# Resolves the KILN_CUDA option (AUTO|ON|OFF) into KILN_WITH_CUDA.
# AUTO turns CUDA on when a CUDA compiler and the CUDA toolkit are both found; ON makes
# their absence a configure error; OFF never looks. Hopper (sm_90) is the default target.
#
# Note [cuDNN is required with CUDA]: a CUDA build also needs cuDNN (convolutions on the
# GPU are cuDNN's, kernels/cuda/cudnn/). When CUDA is on and cuDNN is missing, configure
# fails and names the package, rather than building a CUDA backend without convolution:
# every model Kiln exists to train is a CNN, so such a build would only fail later, at the
# first conv, far from the cause. KILN_CUDA=OFF remains the way to build without both.
# cuDNN is looked for beside the toolkit and under CUDNN_ROOT; the imported target
# Kiln::cudnn is linked privately by kiln_cuda.
set(KILN_WITH_CUDA OFF)
if(NOT KILN_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(KILN_WITH_CUDA ON)
  elseif(KILN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KILN_CUDA=ON but no CUDA compiler/toolkit was found (is nvcc on PATH?)")
  endif()
endif()
if(KILN_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  # CMake before 3.26 does not know nvcc's C++20 switch (nvcc 12+ has -std=c++20).
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)

  find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn
    HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
  if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY OR NOT EXISTS "${CUDNN_LIBRARY}")
    set(_kiln_cuda_major ${CUDAToolkit_VERSION_MAJOR})
    message(FATAL_ERROR "CUDA is on but cuDNN was not found (cudnn.h: ${CUDNN_INCLUDE_DIR}, "
      "libcudnn: ${CUDNN_LIBRARY}). Kiln's GPU convolutions need cuDNN 9: install NVIDIA's "
      "Debian package cudnn9-cuda-${_kiln_cuda_major} (headers and libraries: "
      "libcudnn9-dev-cuda-${_kiln_cuda_major}), or point CUDNN_ROOT at an unpacked cuDNN, or "
      "configure with -DKILN_CUDA=OFF for a CPU-only build.")
  endif()
  add_library(Kiln::cudnn UNKNOWN IMPORTED)
  set_target_properties(Kiln::cudnn PROPERTIES
    IMPORTED_LOCATION ${CUDNN_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
  message(STATUS "cuDNN: ${CUDNN_LIBRARY}")
endif()
