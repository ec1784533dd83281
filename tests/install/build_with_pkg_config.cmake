# The install.pkg_config test (tests/install/CMakeLists.txt), run as
#   cmake -DPKG_CONFIG=... -DPREFIX=... -DLIBDIR=lib -DCXX=... -DSOURCE=main.cpp -DOUT=... -P this
# Builds SOURCE as README.md tells a pkg-config user to,
#   c++ -std=c++20 app.cpp $(pkg-config --cflags --libs kiln)
# with the kiln.pc installed under PREFIX, and runs the program (non-zero exit: failure).
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs kiln OUTPUT_VARIABLE flags
                ERROR_VARIABLE error RESULT_VARIABLE result OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs kiln failed (${result}): ${error}")
endif()
message(STATUS "pkg-config --cflags --libs kiln: ${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")

execute_process(COMMAND ${CXX} -std=c++20 ${SOURCE} ${flags} -o ${OUT} RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "compiling ${SOURCE} with pkg-config's flags failed (${result})")
endif()
execute_process(COMMAND ${OUT} RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${OUT} failed (${result})")
endif()
