#!/bin/sh
# Regenerates fingerprint.ptx from fingerprint.cu (go generate). PTX 7.0 for
# sm_75 is loaded by every driver that runs CUDA 13 and JIT-compiled for
# the GPU at hand.
set -e
cd "$(dirname "$0")"
${CLANGXX:-clang++-22} -x cuda --cuda-device-only -nocudainc -nocudalib \
  --cuda-gpu-arch=sm_75 -Xclang -target-feature -Xclang +ptx70 -O3 -S \
  -o fingerprint.ptx fingerprint.cu
