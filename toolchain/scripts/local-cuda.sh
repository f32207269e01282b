#!/usr/bin/env bash
# Assembles a CUDA 13.0 toolkit tree from NVIDIA's PyPI wheels (headers, curand's device headers, libcudart,
# ptxas/fatbinary, libdevice) so CUDA sources compile with clang on a machine without
# a CUDA installation. Nothing here runs kernels: there is no driver.
# Usage: toolchain/scripts/local-cuda.sh [OUTDIR]   (default build/cuda)
# Prints the toolkit root; use it as CUDA_PATH.
set -euo pipefail
out=${1:-build/cuda}
mkdir -p "$out/wheels" "$out/tree"
ver='13.0.*'
if ! ls "$out"/wheels/nvidia_nvvm-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$out/wheels" \
    "nvidia-cuda-runtime==$ver" "nvidia-cuda-cccl==$ver" "nvidia-cuda-crt==$ver" \
    "nvidia-cuda-nvcc==$ver" "nvidia-nvvm==$ver" "nvidia-curand==10.4.*" >&2
fi
# clang's CUDA wrapper headers include curand's device headers; its libraries are not needed.
for w in "$out"/wheels/*.whl; do
  case $w in
  *curand*) unzip -qo "$w" 'nvidia/*/include/*' -d "$out/tree" ;;
  *) unzip -qo "$w" 'nvidia/*' -d "$out/tree" ;;
  esac
done
root=$(cd "$out/tree/nvidia/cu13" && pwd)
# The installers' layout: lib64/, an unversioned libcudart.so, and a version file.
[ -e "$root/lib64" ] || ln -s lib "$root/lib64"
[ -e "$root/lib/libcudart.so" ] || ln -s "$(cd "$root/lib" && ls libcudart.so.* | head -1)" "$root/lib/libcudart.so"
rver=$(ls "$out"/wheels/nvidia_cuda_runtime-*.whl | sed -E 's/.*runtime-([0-9]+\.[0-9]+\.[0-9]+).*/\1/')
printf '{"cuda":{"name":"CUDA SDK","version":"%s"}}\n' "$rver" > "$root/version.json"
chmod +x "$root"/bin/* 2>/dev/null || true
echo "$root"
