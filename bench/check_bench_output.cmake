# Runs kiln_bench (${KILN_BENCH}) with ${ARGS} (a ;-list) and checks the run is clean: exit
# code 0, no failed case (Google Benchmark 1.7 prints "ERROR OCCURRED" for a failed or
# skipped case in its console report, "error_occurred": true in its JSON one; a GPU-less
# run once failed every CUDA case), and the CUDA benchmarks either ran or were skipped with
# exactly one line saying why (bench_main.cpp). ARGS must therefore select a CUDA case:
# with a GPU no skip line is printed, so only a CUDA case that ran can pass. With
# --benchmark_format=json among ARGS, standard output must also be one valid JSON document
# listing the benchmarks (bench_main.cpp writes its notes to standard error).
cmake_minimum_required(VERSION 3.24)
execute_process(COMMAND ${KILN_BENCH} ${ARGS} RESULT_VARIABLE code
                OUTPUT_VARIABLE bench_stdout ERROR_VARIABLE bench_stderr)
set(output "${bench_stdout}\n${bench_stderr}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "kiln_bench ${ARGS}: exit code ${code}\n${output}")
endif()
if(output MATCHES "ERROR OCCURRED" OR output MATCHES "\"error_occurred\": true")
  message(FATAL_ERROR "kiln_bench ${ARGS}: a benchmark reported an error:\n${output}")
endif()
string(REGEX MATCHALL "CUDA benchmarks skipped: [^\n]*" skip_lines "${output}")
list(LENGTH skip_lines skip_count)
if(output MATCHES "BM_Cuda")
  set(cuda_ran TRUE)
else()
  set(cuda_ran FALSE)
endif()
if(NOT ((skip_count EQUAL 1 AND NOT cuda_ran) OR (skip_count EQUAL 0 AND cuda_ran)))
  message(FATAL_ERROR "kiln_bench ${ARGS}: expected the CUDA benchmarks to run or one line saying why not; "
                      "got ${skip_count} skip lines, CUDA benchmarks ran: ${cuda_ran}\n${output}")
endif()
if(ARGS MATCHES "--benchmark_format=json")
  string(JSON benchmark_count ERROR_VARIABLE json_error LENGTH "${bench_stdout}" benchmarks)
  if(json_error)
    message(FATAL_ERROR "kiln_bench ${ARGS}: standard output is not a JSON report (${json_error}):\n${bench_stdout}")
  endif()
  if(benchmark_count EQUAL 0)
    message(FATAL_ERROR "kiln_bench ${ARGS}: the JSON report lists no benchmarks:\n${bench_stdout}")
  endif()
endif()
