# Install rules, and the two packages users find Kiln by. `cmake --install build --prefix P`
# writes:
#   P/include/kiln/{core,nn,optim,data,train,kiln}/**.h  the public headers; P/include/kiln is
#                                  the include directory, so <kiln/kiln.h> and the headers'
#                                  own "core/ops.h" includes both resolve
#   P/lib/libkiln*.a               the static libraries
#   P/bin/kiln                     the `kiln` command
#   P/lib/cmake/Kiln/              KilnConfig.cmake, KilnConfigVersion.cmake, KilnTargets*.cmake
#   P/lib/pkgconfig/kiln.pc        for pkg-config
# (lib/ is GNUInstallDirs' CMAKE_INSTALL_LIBDIR.) Included from the top-level
# CMakeLists.txt when KILN_INSTALL is on, after every target exists. kernels/ headers are
# internal and not installed; tests/install/ checks that no installed header needs one.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)

# The libraries, in the order a static link needs them (each before what it uses). The
# umbrella `kiln` carries the others, so users name only Kiln::kiln; the rest are exported
# because it links them, as Kiln::core, Kiln::cpu, ... (EXPORT_NAME drops the prefix).
set(KILN_INSTALLED_LIBRARIES kiln kiln_train kiln_dist kiln_data kiln_nn kiln_optim kiln_cpu kiln_kernels kiln_core)
if(KILN_WITH_CUDA)
  list(INSERT KILN_INSTALLED_LIBRARIES 7 kiln_cuda)
endif()
foreach(library IN LISTS KILN_INSTALLED_LIBRARIES)
  string(REGEX REPLACE "^kiln_" "" export_name ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${export_name})
endforeach()

install(TARGETS ${KILN_INSTALLED_LIBRARIES} EXPORT KilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${KILN_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core ${PROJECT_SOURCE_DIR}/nn ${PROJECT_SOURCE_DIR}/optim ${PROJECT_SOURCE_DIR}/data
                  ${PROJECT_SOURCE_DIR}/dist
                  ${PROJECT_SOURCE_DIR}/train ${PROJECT_SOURCE_DIR}/kiln
        DESTINATION ${KILN_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# The installed `kiln` finds cuDNN (and oneDNN) where it was linked against them (a CUDA
# toolkit outside the loader's default paths; cuBLAS is opened by its full path, Note
# [cuBLAS loaded on first use]); nothing else of ours is shared.
set_target_properties(kiln_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The CMake package. Note [Kiln's version promise]: while Kiln is 0.x, a minor release
# may change the API and a patch release may not, so find_package(Kiln 0.1) accepts
# 0.1.z only (SameMinorVersion); from 1.0 on this becomes SameMajorVersion.
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})
if(KILN_WITH_CUDA)
  # What KilnConfig.cmake needs to find the same CUDA toolkit and cuDNN again.
  get_filename_component(KILN_CUDA_TOOLKIT_ROOT ${CUDAToolkit_BIN_DIR} DIRECTORY)
  get_filename_component(KILN_CUDNN_LIBRARY_DIR ${CUDNN_LIBRARY} DIRECTORY)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/KilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/KilnConfig.cmake INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/KilnConfig.cmake ${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR})

# kiln.pc. Kiln is static libraries only, so `pkg-config --libs kiln` (not only --static)
# must give a complete link line: our libraries in link order, then oneDNN (when built
# with it), OpenMP, threads and, in a CUDA build, cuDNN and the static CUDA runtime with
# what it needs (cuBLAS is loaded at run time, Note [cuBLAS loaded on first use]), and the
# NIfTI library, libcurl and zlib of kiln_data. Hence
# all of it sits in Libs and Libs.private stays empty. prefix is found from the .pc file's
# own place (${pcfiledir}), so the installed tree can be moved.
list(TRANSFORM KILN_INSTALLED_LIBRARIES PREPEND "-l" OUTPUT_VARIABLE KILN_PC_LIBS)
if(KILN_WITH_ONEDNN)
  list(APPEND KILN_PC_LIBS -L${KILN_ONEDNN_LIBRARY_DIR} -ldnnl)
endif()
list(APPEND KILN_PC_LIBS -L${KILN_NIFTI_LIBRARY_DIR} -lnifti2 -lznz -lcurl -lz -lm -ldl ${OpenMP_CXX_FLAGS} ${CMAKE_THREAD_LIBS_INIT})
if(KILN_WITH_CUDA)
  list(APPEND KILN_PC_LIBS -L${KILN_CUDNN_LIBRARY_DIR} -lcudnn
       -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt -pthread)
endif()
list(JOIN KILN_PC_LIBS " " KILN_PC_LIBS)
# (The prefix is chosen at install time, `--prefix P`, so the path is worked out on a
# stand-in; GNUInstallDirs' relative CMAKE_INSTALL_LIBDIR is assumed, as everywhere here.)
file(RELATIVE_PATH KILN_PC_PREFIX_FROM_PCFILEDIR /P/${CMAKE_INSTALL_LIBDIR}/pkgconfig /P)
string(REGEX REPLACE "/$" "" KILN_PC_PREFIX_FROM_PCFILEDIR "${KILN_PC_PREFIX_FROM_PCFILEDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
