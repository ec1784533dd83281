# Compiler launcher for tests/kernels/CMakeLists.txt: runs the compile command given after
# "--" and writes its standard error, which holds GCC's -fopt-info-vec-optimized report,
# to REPORT, replaced at every compile (GCC's own -fopt-info=FILE appends, so an old
# report would hide a loop that stopped vectorising). A failed compile fails the build.
cmake_minimum_required(VERSION 3.24)
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
execute_process(COMMAND ${command} RESULT_VARIABLE result ERROR_FILE ${REPORT})
if(NOT result EQUAL 0)
  file(READ ${REPORT} errors)
  message(FATAL_ERROR "compile failed (${result}):\n${errors}")
endif()
