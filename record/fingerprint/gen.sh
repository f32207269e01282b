#!/bin/sh
# Regenerates fingerprint.ptx from fingerprint.cu (go generate). PTX 7.0 for
# sm_75 is loaded by every driver that runs CUDA 13 and JIT-compiled for
# the GPU at hand. The first lines name the source's SHA-256 and the
# compiler, so a test can tell the PTX belongs to the source.
set -e
cd "$(dirname "$0")"
cxx=${CLANGXX:-clang++-22}
out=${OUT:-fingerprint.ptx}
{
  echo "// source fingerprint.cu sha256 $(sha256sum fingerprint.cu | cut -d' ' -f1)"
  echo "// compiler $("$cxx" --version | head -n1)"
  "$cxx" -x cuda --cuda-device-only -nocudainc -nocudalib \
    --cuda-gpu-arch=sm_75 -Xclang -target-feature -Xclang +ptx70 -O3 -S \
    -o - fingerprint.cu
} > "$out.tmp"
mv "$out.tmp" "$out"
