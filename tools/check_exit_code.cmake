# Runs ${KILN} with ${ARGS} (a ;-list) and checks its exit code is ${EXPECTED} and that
# its stdout (STREAM=out) or stderr (STREAM=err) matches the regex ${PATTERN}.
cmake_minimum_required(VERSION 3.24)
execute_process(COMMAND ${KILN} ${ARGS} RESULT_VARIABLE code
                OUTPUT_VARIABLE kiln_stdout ERROR_VARIABLE kiln_stderr)
if(NOT code EQUAL EXPECTED)
  message(FATAL_ERROR "kiln ${ARGS}: exit code ${code}, expected ${EXPECTED}\n"
                      "stdout: ${kiln_stdout}\nstderr: ${kiln_stderr}")
endif()
if(STREAM STREQUAL "out")
  set(text "${kiln_stdout}")
else()
  set(text "${kiln_stderr}")
endif()
if(NOT text MATCHES "${PATTERN}")
  message(FATAL_ERROR "kiln ${ARGS}: std${STREAM} does not match '${PATTERN}':\n${text}")
endif()
