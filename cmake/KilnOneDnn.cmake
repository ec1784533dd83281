# oneDNN for the CPU backend's float32 convolutions (Note [oneDNN convolutions] in
# kernels/cpu/conv_onednn.h). KILN_ONEDNN: AUTO (use it when found), ON (required), OFF
# (the vol2col + Eigen reference path alone). Debian's libdnnl-dev provides it; the
# Makefile installs it. Found by header and library rather than through dnnl-config.cmake,
# which also demands the OpenCL development files of oneDNN's GPU runtime (unused here).
# Sets KILN_WITH_ONEDNN and, when found, the imported target Kiln::onednn.
set(KILN_ONEDNN AUTO CACHE STRING "CPU convolutions through oneDNN: AUTO (when found), ON, OFF")
set_property(CACHE KILN_ONEDNN PROPERTY STRINGS AUTO ON OFF)

set(KILN_WITH_ONEDNN OFF)
if(NOT KILN_ONEDNN STREQUAL "OFF")
  find_path(ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp HINTS ${ONEDNN_ROOT} $ENV{ONEDNN_ROOT} PATH_SUFFIXES include)
  find_library(ONEDNN_LIBRARY dnnl HINTS ${ONEDNN_ROOT} $ENV{ONEDNN_ROOT} PATH_SUFFIXES lib lib64)
  if(ONEDNN_INCLUDE_DIR AND ONEDNN_LIBRARY)
    file(STRINGS "${ONEDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _kiln_dnnl_major REGEX "#define DNNL_VERSION_MAJOR")
    string(REGEX MATCH "[0-9]+" ONEDNN_VERSION_MAJOR "${_kiln_dnnl_major}")
    file(STRINGS "${ONEDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h" _kiln_dnnl_runtime REGEX "#define DNNL_CPU_RUNTIME ")
    if(NOT ONEDNN_VERSION_MAJOR EQUAL 2)
      set(_kiln_onednn_problem "oneDNN ${ONEDNN_VERSION_MAJOR}.x was found (${ONEDNN_LIBRARY}); Kiln uses the 2.x API")
    elseif(NOT _kiln_dnnl_runtime MATCHES "DNNL_RUNTIME_OMP")
      set(_kiln_onednn_problem "this oneDNN (${ONEDNN_LIBRARY}) does not thread with OpenMP, as Kiln does")
    else()
      set(KILN_WITH_ONEDNN ON)
    endif()
  else()
    set(_kiln_onednn_problem "oneDNN was not found (install Debian's libdnnl-dev, or set ONEDNN_ROOT)")
  endif()
  if(NOT KILN_WITH_ONEDNN)
    if(KILN_ONEDNN STREQUAL "ON")
      message(FATAL_ERROR "${_kiln_onednn_problem}")
    endif()
    message(STATUS "${_kiln_onednn_problem}: CPU convolutions use the vol2col + Eigen path alone")
  endif()
endif()

if(KILN_WITH_ONEDNN AND NOT TARGET Kiln::onednn)
  add_library(Kiln::onednn UNKNOWN IMPORTED)
  set_target_properties(Kiln::onednn PROPERTIES
    IMPORTED_LOCATION ${ONEDNN_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${ONEDNN_INCLUDE_DIR})
  get_filename_component(KILN_ONEDNN_LIBRARY_DIR ${ONEDNN_LIBRARY} DIRECTORY)
  message(STATUS "oneDNN ${ONEDNN_VERSION_MAJOR}: ${ONEDNN_LIBRARY}")
endif()
