#!/usr/bin/env bash
# Run on a build machine (Go + LLVM 22) to prepare .gpu/ for a GPU machine that
# has neither: the mneme prefix and the GPU test binaries, linked against
# libLLVM-22.so (which .gpu/env.sh provides there). See scripts/gpu-test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .gpu/env.sh ] || { echo "run the clang/LLVM bundling step first (.gpu/env.sh missing)" >&2; exit 1; }
export CGO_CPPFLAGS="$(llvm-config-22 --cppflags)" CGO_LDFLAGS="$(llvm-config-22 --ldflags)"
rm -rf .gpu/prefix .gpu/tests
make all PREFIX="$PWD/.gpu/prefix" GOFLAGS="-ldflags=-s -ldflags=-w" >/dev/null
mkdir -p .gpu/tests
for pkg in cuda jit replay record; do
  [ -d "$pkg" ] || continue
  go test -c -ldflags="-s -w" -o ".gpu/tests/$pkg.test" "./$pkg" 2>/dev/null || echo "warning: $pkg tests do not build" >&2
done
# One compressed archive keeps what travels under the transfer limit;
# gpu-test.sh unpacks it on the GPU machine.
tar cf - -C .gpu prefix tests | xz -T0 -6 > .gpu/mneme-bundle.tar.xz
rm -rf .gpu/prefix .gpu/tests
du -sh .gpu/debs .gpu/mneme-bundle.tar.xz
