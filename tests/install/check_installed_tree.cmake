# The install.tree test (tests/install/CMakeLists.txt), run as
#   cmake -DBUILD_DIR=... -DCONFIG=... -DPREFIX=... -DINCLUDEDIR=include/kiln -DBINDIR=bin -P this
# Installs the build into a fresh PREFIX, then checks what a user gets:
#   - the include directory holds headers only (.h), and no kernels/ header (internal);
#   - every #include "..." of an installed header names an installed header, by its path
#     from the include directory as the house writes them ("core/tensor.h") or beside it;
#   - no installed header includes a private dependency (Eigen, CUDA, cuBLAS, cuDNN, NCCL,
#     GoogleTest, Google Benchmark): users are not given their include paths;
#   - the installed `kiln` command runs (`kiln info`).
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} --config ${CONFIG}
                OUTPUT_VARIABLE install_log ERROR_VARIABLE install_log RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${result}):\n${install_log}")
endif()

set(include_dir ${PREFIX}/${INCLUDEDIR})
file(GLOB_RECURSE installed RELATIVE ${include_dir} ${include_dir}/*)
if(NOT installed)
  message(FATAL_ERROR "no headers under ${include_dir}")
endif()
set(problems "")
foreach(file IN LISTS installed)
  if(NOT file MATCHES "\\.h$" OR file MATCHES "^kernels/")
    string(APPEND problems "  ${file}: installed, but not a public header\n")
    continue()
  endif()
  get_filename_component(file_dir ${file} DIRECTORY)
  file(STRINGS ${include_dir}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "include[ \t]*([\"<])([^\">]+)" _ "${line}")
    set(name ${CMAKE_MATCH_2})
    if(CMAKE_MATCH_1 STREQUAL "\"")
      if(NOT EXISTS ${include_dir}/${name} AND NOT EXISTS ${include_dir}/${file_dir}/${name})
        string(APPEND problems "  ${file}: includes \"${name}\", which is not installed\n")
      endif()
    elseif(name MATCHES "^(Eigen|unsupported/Eigen|cuda|cublas|cudnn|nccl|gtest|gmock|benchmark)")
      string(APPEND problems "  ${file}: includes <${name}>, a private dependency\n")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "installed headers under ${include_dir}:\n${problems}")
endif()
list(LENGTH installed count)
message(STATUS "${count} installed headers, each including only installed headers")

execute_process(COMMAND ${PREFIX}/${BINDIR}/kiln info OUTPUT_VARIABLE info ERROR_VARIABLE info RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the installed ${PREFIX}/${BINDIR}/kiln info failed (${result}):\n${info}")
endif()
message(STATUS "installed kiln info:\n${info}")
