# Resolves the KILN_CUDA option (AUTO|ON|OFF) into KILN_WITH_CUDA.
# AUTO turns CUDA on when a CUDA compiler and the CUDA toolkit are both found; ON makes
# their absence a configure error; OFF never looks. Hopper (sm_90) is the default target.
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
  # CMake releases older than the toolkit (3.25 with nvcc 13) do not know its C++20
  # flag and would refuse CUDA20 targets: tell them.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()
