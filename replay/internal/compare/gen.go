package compare

// compare.ptx is generated from compare.cu; regenerate it after editing the
// kernel. sm_70 and PTX 7.0 keep it loadable on every GPU from Volta on: the
// driver JIT-compiles it for the device at hand.
//go:generate clang++-22 -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_70 -Xclang -target-feature -Xclang +ptx70 -O3 -S -o compare.ptx compare.cu
