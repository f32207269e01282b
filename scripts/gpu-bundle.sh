#!/usr/bin/env bash
# Run on a build machine (Go + LLVM 22) to prepare .gpu/ for a GPU machine that
# has neither. See scripts/gpu-test.sh.
#
#   scripts/gpu-bundle.sh               .gpu/mneme-bundle.tar.xz: the mneme prefix
#       and the GPU test binaries, linked against libLLVM-22.so (which
#       .gpu/env.sh provides there with clang-22), for scripts/gpu-test.sh.
#   scripts/gpu-bundle.sh python        .gpu-py/: what the Python API's GPU
#       checks need (python/gpu-checks.sh: optuna's wheels, libLLVM without
#       clang, vecadd and gridstride prebuilt with the wrapper, and the fetched copies of
#       Mneme's published scripts from .mneme-published/ when present, never
#       committed); carry .gpu-py and run .gpu-py/run.sh there.
#   scripts/gpu-bundle.sh record-bench  .gpu/record-bench.tar.xz: what the
#       recording-overhead benchmark needs and nothing else, so it travels
#       without clang: the prefix as `make` ships it (LLVM linked statically),
#       the same mneme linked against libLLVM-22.so with that library, and
#       scalarsweep built plainly and with the wrapper for sm_90 against CUDA
#       headers from NVIDIA's wheels, and tracer likewise for its run-scale script.
#       Run on the GPU machine:
#         mkdir -p /tmp/rb && tar xJf .gpu/record-bench.tar.xz -C /tmp/rb && /tmp/rb/run.sh
#         /tmp/rb/run-scale.sh --runs 8 --replay   (tracer, record_scale.py)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CPPFLAGS="$(llvm-config-22 --cppflags)" CGO_LDFLAGS="$(llvm-config-22 --ldflags)"
strip_flags="GOFLAGS=-ldflags=-s -ldflags=-w"

if [ "${1:-}" = record-bench ]; then
  b=.gpu/record-bench; rm -rf "$b"; mkdir -p "$b/apps" "$b/llvm"
  make all PREFIX="$PWD/$b/prefix" LLVM_LINK=static "$strip_flags" >/dev/null
  make mneme PREFIX="$PWD/$b/shared" LLVM_LINK=shared "$strip_flags" >/dev/null
  mv "$b/shared/bin/mneme" "$b/prefix/bin/mneme-shared" && rm -rf "$b/shared"
  # libLLVM and what it needs that an Ubuntu GPU machine may lack.
  for l in /usr/lib/llvm-22/lib/libLLVM.so.22.1 /lib/x86_64-linux-gnu/libz3.so.4 /lib/x86_64-linux-gnu/libedit.so.2; do cp -L "$l" "$b/llvm/"; done
  cuda=${CUDA_PATH:-/usr/local/cuda}
  [ -f "$cuda/include/cuda_runtime.h" ] || cuda=$(toolchain/scripts/local-cuda.sh "$PWD/build/cuda")
  export CUDA_PATH=$cuda
  make -s -C examples/scalarsweep BUILD="$PWD/$b/plain" CUDA="$cuda" ARCH=sm_90 >/dev/null
  make -s -C examples/scalarsweep BUILD="$PWD/$b/wrapped" CUDA="$cuda" ARCH=sm_90 CXX="$PWD/$b/prefix/bin/mneme-cxx" >/dev/null
  cp "$b/plain/scalarsweep" "$b/apps/scalarsweep-plain"; cp "$b/wrapped/scalarsweep" "$b/apps/scalarsweep-wrapped"; rm -rf "$b/plain" "$b/wrapped"
  # tracer (4 GiB, ~1.5 s) for the bound on programs of several GiB, and the
  # pinned-bandwidth reference record_scale.py compares copies against.
  make -s -C examples/tracer BUILD="$PWD/$b/plain" CUDA="$cuda" ARCH=sm_90 >/dev/null
  make -s -C examples/tracer BUILD="$PWD/$b/wrapped" CUDA="$cuda" ARCH=sm_90 CXX="$PWD/$b/prefix/bin/mneme-cxx" >/dev/null
  cp "$b/plain/tracer" "$b/apps/tracer-plain"; cp "$b/wrapped/tracer" "$b/apps/tracer-wrapped"; rm -rf "$b/plain" "$b/wrapped"
  clang++-22 -x cuda --cuda-path="$cuda" --cuda-gpu-arch=sm_90 --no-offload-new-driver -Wno-unknown-cuda-version -O2 \
    bench/pinned_bw.cu -o "$b/apps/pinned_bw" -L"$cuda/lib64" -lcudart -Wl,-rpath,/usr/local/cuda/lib64
  cat > "$b/run.sh" <<'RUN'
#!/usr/bin/env bash
# The recording-overhead benchmark on a bare GPU machine (see scripts/gpu-bundle.sh).
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/llvm:${CUDA_PATH:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/GPU: /'
exec python3 "${BENCH:-$here/record_overhead.py}" --plain "$here/apps/scalarsweep-plain" --wrapped "$here/apps/scalarsweep-wrapped" \
  --mneme "record=$here/prefix/bin/mneme" --mneme "record-shared-llvm=$here/prefix/bin/mneme-shared" "$@"
RUN
  chmod +x "$b/run.sh"; cp bench/record_overhead.py bench/record_scale.py "$b/"
  cat > "$b/run-scale.sh" <<'RUN'
#!/usr/bin/env bash
# tracer recorded by the statically linked mneme `make` ships (record_scale.py; arguments are passed on).
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/llvm:${CUDA_PATH:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "$(mktemp -d)" && exec python3 "$here/record_scale.py" --mneme "$here/prefix/bin/mneme" --pinned-bw "$here/apps/pinned_bw" \
  "$@" "tracer=$here/apps/tracer-plain:$here/apps/tracer-wrapped"
RUN
  chmod +x "$b/run-scale.sh"
  # A runtime library in plain C that records nothing, to tell the cost of
  # loading the Go one apart (record_overhead.py --in-app LABEL:MNEME_RT_LIB=...).
  mkdir -p "$b/lib" && cc -O2 -fPIC -shared -o "$b/lib/librt_standin.so" cmd/mneme-rt/shim/shimtest/testdata/rt_standin.c
  tar cf - -C "$b" . | xz -T0 -6 > .gpu/record-bench.tar.xz
  rm -rf "$b"
  du -sh .gpu/record-bench.tar.xz
  exit 0
fi

if [ "${1:-}" = python ]; then
  # The Python API's GPU checks (python/gpu-checks.sh) need optuna's wheels,
  # which do not fit the transfer limit beside clang: .gpu-py carries
  # libLLVM without clang, the mneme bundle, the wheels and vecadd built
  # here with the wrapper for sm_90. Run there: .gpu-py/run.sh
  [ -f .gpu/env.sh ] && [ -f .gpu/mneme-bundle.tar.xz ] || { echo "run ../shared/gpu/bundle.sh and scripts/gpu-bundle.sh first" >&2; exit 1; }
  b=.gpu-py; rm -rf "$b"; mkdir -p "$b/debs"
  cp .gpu/env.sh .gpu/mneme-bundle.tar.xz "$b/"
  cp .gpu/debs/libllvm22_* .gpu/debs/libz3-* .gpu/debs/libedit* "$b/debs/"
  python/bundle-wheels.sh "$PWD/$b/wheels" >/dev/null
  make all >/dev/null # the shim vecadd links must speak this runtime's interface
  cuda=${CUDA_PATH:-/usr/local/cuda}
  [ -f "$cuda/include/cuda_runtime.h" ] || cuda=$(toolchain/scripts/local-cuda.sh "$PWD/build/cuda")
  rm -rf "$b/build"
  CUDA_PATH=$cuda make -s -C examples/vecadd BUILD="$PWD/$b/build" CUDA="$cuda" ARCH=sm_90 CXX="$PWD/build/bin/mneme-cxx" >/dev/null
  mv "$b/build/vecadd" "$b/vecadd" && rm -rf "$b/build"
  # A grid-stride kernel for the scripts whose space shrinks the grid.
  CUDA_PATH=$cuda make -s -C examples/gridstride BUILD="$PWD/$b/build" CUDA="$cuda" ARCH=sm_90 CXX="$PWD/build/bin/mneme-cxx" >/dev/null
  mv "$b/build/gridstride" "$b/gridstride" && rm -rf "$b/build"
  # Mneme's published scripts (python/mneme_scripts.py runs them), as fetched.
  if [ -f .mneme-published/SOURCE ]; then cp -r .mneme-published "$b/mneme-published"
  else echo "warning: no .mneme-published/: the bundle's checks will skip Mneme's published scripts" >&2; fi
  cat > "$b/run.sh" <<'RUN'
#!/usr/bin/env bash
# The Python API's GPU checks on a GPU machine without clang (scripts/gpu-bundle.sh python).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
[ -d "$here/prefix" ] || xz -dc "$here/mneme-bundle.tar.xz" | tar xf - -C "$here"
export PATH=$here/prefix/bin:$PATH
rdb=${TMPDIR:-/tmp}/mneme-py-rdb; rm -rf "$rdb"
mneme record -rdb "$rdb" --max-recordings 2 -- "$here/vecadd" || exit 1
stride=${TMPDIR:-/tmp}/mneme-py-stride-rdb; rm -rf "$stride"
mneme record -rdb "$stride" --max-recordings 1 -- "$here/gridstride" || exit 1
MNEME_WHEELS=$here/wheels MNEME_SCRIPTS=$here/mneme-published MNEME_GRID_STRIDE_DB=$(ls "$stride"/*.json | grep -v '/\.' | head -n 1) \
  exec "$here/../python/gpu-checks.sh" "$rdb" "$(command -v mneme)"
RUN
  chmod +x "$b/run.sh"
  du -sh "$b"
  exit 0
fi

[ -f .gpu/env.sh ] || { echo "run the clang/LLVM bundling step first (.gpu/env.sh missing)" >&2; exit 1; }
rm -rf .gpu/prefix .gpu/tests
# Linked against libLLVM-22.so: statically linked binaries would not fit the
# transfer limit next to the clang packages.
make all PREFIX="$PWD/.gpu/prefix" LLVM_LINK=shared "$strip_flags" >/dev/null
mkdir -p .gpu/tests
for pkg in cuda jit replay record record/devicecopy; do
  [ -d "$pkg" ] || continue
  mkdir -p ".gpu/tests/$(dirname "$pkg")"
  go test -c -ldflags="-s -w" -o ".gpu/tests/$pkg.test" "./$pkg" 2>/dev/null || echo "warning: $pkg tests do not build" >&2
done
# One compressed archive keeps what travels under the transfer limit (-9e:
# its large window finds what the Go binaries share, 25% smaller than -6);
# gpu-test.sh unpacks it on the GPU machine.
tar cf - -C .gpu prefix tests | xz -T0 -9e > .gpu/mneme-bundle.tar.xz
rm -rf .gpu/prefix .gpu/tests
du -sh .gpu/debs .gpu/mneme-bundle.tar.xz
