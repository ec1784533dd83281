# Resolves the KILN_CUDA option (AUTO|ON|OFF) into KILN_WITH_CUDA.
# AUTO turns CUDA on when a CUDA compiler, the CUDA toolkit and cuDNN are all found; ON
# makes the absence of any of them a configure error; OFF never looks. Hopper (sm_90) is
# the default target.
#
# Note [cuDNN is required with CUDA]: a CUDA build also needs cuDNN (convolutions on the
# GPU are cuDNN's, kernels/cuda/cudnn/). We never build a CUDA backend without
# convolution: every model Kiln exists to train is a CNN, so such a build would only fail
# later, at the first conv, far from the cause. With AUTO, a toolkit without cuDNN gives a
# CPU-only build and a warning naming the package; with ON it is an error.
# cuDNN is looked for beside the toolkit and under CUDNN_ROOT; the imported target
# Kiln::cudnn is linked privately by kiln_cuda.
set(KILN_WITH_CUDA OFF)
if(NOT KILN_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    find_path(CUDNN_INCLUDE_DIR cudnn.h
      HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
    find_library(CUDNN_LIBRARY cudnn
      HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
    if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND EXISTS "${CUDNN_LIBRARY}")
      set(KILN_WITH_CUDA ON)
    else()
      set(_kiln_cudnn_missing "CUDA was found but cuDNN was not (cudnn.h: ${CUDNN_INCLUDE_DIR}, "
        "libcudnn: ${CUDNN_LIBRARY}). Kiln's GPU convolutions need cuDNN 9: install NVIDIA's "
        "Debian package cudnn9-cuda-${CUDAToolkit_VERSION_MAJOR} (headers and libraries: "
        "libcudnn9-dev-cuda-${CUDAToolkit_VERSION_MAJOR}) or point CUDNN_ROOT at an unpacked cuDNN.")
      if(KILN_CUDA STREQUAL "ON")
        message(FATAL_ERROR ${_kiln_cudnn_missing})
      endif()
      message(WARNING ${_kiln_cudnn_missing} " Building without the CUDA backend.")
    endif()
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

  add_library(Kiln::cudnn UNKNOWN IMPORTED)
  set_target_properties(Kiln::cudnn PROPERTIES
    IMPORTED_LOCATION ${CUDNN_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
  message(STATUS "cuDNN: ${CUDNN_LIBRARY}")

  # NCCL, for kiln_dist's nccl backend (dist/process_group_nccl.h), found as cuDNN is: beside
  # the toolkit or under NCCL_ROOT. Optional: without it the build goes on, saying so, and
  # the ring backend carries GPU tensors through host memory. Only its header is used at
  # build time (KILN_WITH_NCCL, Kiln::nccl_headers); libnccl is opened on first use
  # (dist/nccl/nccl_loader.cpp), from KILN_NCCL_LIBRARY_PATH or by its soname.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(KILN_WITH_NCCL ON)
    get_filename_component(_kiln_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
    set(KILN_NCCL_LIBRARY_PATH "${_kiln_nccl_dir}/libnccl.so.2")
    add_library(Kiln::nccl_headers INTERFACE IMPORTED)
    set_target_properties(Kiln::nccl_headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    message(STATUS "NCCL: ${NCCL_LIBRARY} (opened on first use)")
  else()
    message(WARNING "NCCL was not found (nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}): building "
      "without kiln_dist's nccl backend; the ring backend carries GPU tensors through host memory. Install "
      "NVIDIA's libnccl-dev or point NCCL_ROOT at an unpacked NCCL.")
  endif()
endif()
if(NOT KILN_WITH_NCCL)
  set(KILN_WITH_NCCL OFF)
endif()
