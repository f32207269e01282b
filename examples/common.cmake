# Shared setup of the example CMake projects, included before project().
#   cmake -DCMAKE_CUDA_COMPILER=clang++-22 ..                     plain build
#   cmake -DCMAKE_CUDA_COMPILER=clang++-22 -DMNEME=ON \
#         -Dmneme_DIR=$(mneme config cmakedir) ..                 recordable build
# CUDA_PATH (default /usr/local/cuda) names the toolkit; CMAKE_CUDA_ARCHITECTURES
# defaults to 90.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
if(DEFINED ENV{CUDA_PATH})
  set(_cuda "$ENV{CUDA_PATH}")
else()
  set(_cuda "/usr/local/cuda")
endif()
# CMake locates the toolkit of a clang CUDA compiler through CUDAToolkit_ROOT.
if(NOT DEFINED CUDAToolkit_ROOT)
  set(CUDAToolkit_ROOT "${_cuda}")
endif()
# clang must find the toolkit during CMake's compiler checks too, CUDA 13's libcu++
# lives in include/cccl, and the classic offload driver needs no clang-linker-wrapper.
set(CMAKE_CUDA_FLAGS_INIT "--cuda-path=${_cuda} -I${_cuda}/include/cccl --no-offload-new-driver -Wno-unknown-cuda-version")
option(MNEME "build the example recordable with mneme (find_package(mneme) + add_mneme)" OFF)

macro(mneme_example name)
  add_executable(${name} ${name}.cu)
  set_target_properties(${name} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  if(MNEME)
    find_package(mneme REQUIRED)
    add_mneme(${name})
  endif()
endmacro()
