# The NIfTI reference library (nifti_clib) for kiln_data's .nii/.nii.gz reader
# (data/nifti.h): Debian's libnifti2-dev, which the Makefile installs. Found by header
# and library: the package's NIFTIConfig.cmake names files under /usr/lib and /usr/bin
# that Debian does not install where it says. Required: Kiln's data pipeline reads NIfTI.
# Makes the imported target Kiln::nifti (libnifti2 with libznz, zlib and libm).
find_path(NIFTI_INCLUDE_DIR nifti2_io.h PATH_SUFFIXES nifti)
find_library(NIFTI2_LIBRARY nifti2)
find_library(NIFTI_ZNZ_LIBRARY znz)
if(NOT NIFTI_INCLUDE_DIR OR NOT NIFTI2_LIBRARY OR NOT NIFTI_ZNZ_LIBRARY)
  message(FATAL_ERROR "The NIfTI library was not found (nifti2_io.h: ${NIFTI_INCLUDE_DIR}, libnifti2: "
    "${NIFTI2_LIBRARY}, libznz: ${NIFTI_ZNZ_LIBRARY}): install Debian's libnifti2-dev (`make deps` does).")
endif()
find_package(ZLIB REQUIRED)
if(NOT TARGET Kiln::nifti)
  add_library(Kiln::nifti UNKNOWN IMPORTED)
  set_target_properties(Kiln::nifti PROPERTIES IMPORTED_LOCATION ${NIFTI2_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${NIFTI_INCLUDE_DIR}
    INTERFACE_LINK_LIBRARIES "${NIFTI_ZNZ_LIBRARY};ZLIB::ZLIB;m")
  get_filename_component(KILN_NIFTI_LIBRARY_DIR ${NIFTI2_LIBRARY} DIRECTORY)
  message(STATUS "NIfTI: ${NIFTI2_LIBRARY}")
endif()
