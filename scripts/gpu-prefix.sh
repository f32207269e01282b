# Sourced, from the repository root ($root), by the GPU scripts that run a
# mneme prefix's compiler wrappers and binaries (scripts/gpu-record-checks.sh,
# bench/gpu-record-overhead.sh): clang-22 and CUDA on PATH (.gpu/env.sh,
# where present), then the prefix ($prefix: MNEME_PREFIX_DIR, default
# .gpu/rt), the wrappers it lacks copied from toolchain/bin.
[ -f .gpu/env.sh ] && source .gpu/env.sh
prefix=${MNEME_PREFIX_DIR:-$root/.gpu/rt}
for w in mneme-cc mneme-cxx; do [ -x "$prefix/bin/$w" ] || cp "toolchain/bin/$w" "$prefix/bin/"; done
export PATH=$prefix/bin:$PATH
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
