# CMake package of mneme: find_package(mneme) with mneme_DIR=$(mneme config cmakedir).
#
# add_mneme(<target>) makes a target recordable:
#   * its CUDA sources are compiled through the mneme compiler wrapper, used as the
#     CUDA compiler launcher: the wrapper runs the project's CUDA compiler (which must
#     be clang, e.g. -DCMAKE_CUDA_COMPILER=clang++-22 or $(mneme config cxx)) with the
#     flags CUDA 13 needs and embeds each source's device IR in its object;
#   * executables and shared libraries are linked as C++ through the wrapper as the
#     linker launcher (CMake supports linker launchers for C and C++ only), which adds
#     the mneme runtime shim, the --wrap options of the CUDA calls it intercepts, and
#     libcudart unless the link already has it.
# Needs CMake 3.21 (linker launchers); works with the Makefile and Ninja generators.
#
# Variables: MNEME_PREFIX, MNEME_EXECUTABLE, MNEME_CC, MNEME_CXX, MNEME_SHIM_LIBRARY.
cmake_minimum_required(VERSION 3.21)

get_filename_component(MNEME_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(MNEME_EXECUTABLE "${MNEME_PREFIX}/bin/mneme")
set(MNEME_CC "${MNEME_PREFIX}/bin/mneme-cc")
set(MNEME_CXX "${MNEME_PREFIX}/bin/mneme-cxx")
set(MNEME_SHIM_LIBRARY "${MNEME_PREFIX}/lib/libmneme_shim.a")

foreach(_mneme_file IN ITEMS "${MNEME_EXECUTABLE}" "${MNEME_CXX}" "${MNEME_SHIM_LIBRARY}")
  if(NOT EXISTS "${_mneme_file}")
    set(mneme_FOUND FALSE)
    set(mneme_NOT_FOUND_MESSAGE "mneme installation at ${MNEME_PREFIX} is incomplete: ${_mneme_file} is missing (run make in the mneme source tree)")
    return()
  endif()
endforeach()

function(add_mneme target)
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "add_mneme: ${target} is not a target")
  endif()
  get_property(_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST _langs AND NOT CMAKE_CUDA_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "add_mneme(${target}): the CUDA compiler is ${CMAKE_CUDA_COMPILER_ID} (${CMAKE_CUDA_COMPILER}); mneme needs clang: configure with -DCMAKE_CUDA_COMPILER=${MNEME_CXX}")
  endif()
  set_property(TARGET "${target}" PROPERTY CUDA_COMPILER_LAUNCHER "${MNEME_CXX}")
  get_target_property(_type "${target}" TYPE)
  if(_type STREQUAL "EXECUTABLE" OR _type STREQUAL "SHARED_LIBRARY" OR _type STREQUAL "MODULE_LIBRARY")
    set_property(TARGET "${target}" PROPERTY LINKER_LANGUAGE CXX)
    set_property(TARGET "${target}" PROPERTY CXX_LINKER_LAUNCHER "${MNEME_CXX}")
  endif()
endfunction()
