#!/bin/sh
# Regenerates fingerprint.fatbin from fingerprint.ptx (go generate, after
# gen.sh): cubins for the GPU families CUDA 13 runs (a cubin for sm_X0 runs
# on every sm_Xy), built by ptxas, and the PTX itself for any other GPU. The
# driver loads a cubin without compiling anything; PTX alone costs the first
# recording on a machine 45-170 ms of JIT compilation, and every recording
# where the driver's cache is off or not writable. fingerprint.fatbin.txt
# names the PTX's SHA-256, the ptxas version and the families, so a test can
# tell the fatbin belongs to the PTX.
# Needs ptxas and fatbinary from CUDA 13: $CUDA_PATH/bin, or a tree made by
# toolchain/scripts/local-cuda.sh (CUDA_PATH=$(toolchain/scripts/local-cuda.sh)).
set -e
cd "$(dirname "$0")"
cuda=${CUDA_PATH:-/usr/local/cuda}
for tool in ptxas fatbinary; do
  [ -x "$cuda/bin/$tool" ] || { echo "gen-fatbin.sh: $cuda/bin/$tool not found (set CUDA_PATH to a CUDA 13 toolkit, e.g. the tree toolchain/scripts/local-cuda.sh makes)" >&2; exit 1; }
done
archs="80 90 100 120"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
images=""
for a in $archs; do
  "$cuda/bin/ptxas" -arch=sm_$a -O3 -o "$tmp/sm_$a.cubin" fingerprint.ptx
  images="$images --image3=kind=elf,sm=$a,file=$tmp/sm_$a.cubin"
done
# shellcheck disable=SC2086 # one argument per image
"$cuda/bin/fatbinary" -64 --create="$tmp/fingerprint.fatbin" $images --image3=kind=ptx,sm=75,file=fingerprint.ptx
{
  echo "ptx sha256 $(sha256sum fingerprint.ptx | cut -d' ' -f1)"
  echo "ptxas $("$cuda/bin/ptxas" --version | grep -o "release.*" | head -n1)"
  echo "cubins$(for a in $archs; do printf ' sm_%s' "$a"; done)"
} > "$tmp/fingerprint.fatbin.txt"
mv "$tmp/fingerprint.fatbin" fingerprint.fatbin
mv "$tmp/fingerprint.fatbin.txt" fingerprint.fatbin.txt
