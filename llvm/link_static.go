//go:build llvmstatic

package llvm

// The components mneme uses, linked from LLVM 22's static archives (the list
// is `llvm-config-22 --link-static --libs core bitreader bitwriter irreader
// passes nvptxcodegen nvptxdesc nvptxinfo transformutils linker target
// analysis`). The binary is larger but starts without resolving the whole
// shared libLLVM: `mneme record` and every compiler-wrapper call start about
// 9 ms sooner. zlib and zstd are what LLVM's compression support needs.

// #cgo LDFLAGS: -L/usr/lib/llvm-22/lib -lLLVMNVPTXCodeGen -lLLVMNVPTXDesc -lLLVMNVPTXInfo -lLLVMAsmPrinter -lLLVMPasses -lLLVMIRPrinter -lLLVMHipStdPar -lLLVMCoroutines -lLLVMipo -lLLVMInstrumentation -lLLVMVectorize -lLLVMSandboxIR -lLLVMLinker -lLLVMFrontendOpenMP -lLLVMFrontendDirective -lLLVMFrontendAtomic -lLLVMFrontendOffloading -lLLVMObjectYAML -lLLVMGlobalISel -lLLVMSelectionDAG -lLLVMCodeGen -lLLVMTarget -lLLVMScalarOpts -lLLVMInstCombine -lLLVMObjCARCOpts -lLLVMCodeGenTypes -lLLVMCGData -lLLVMCFGuard -lLLVMAggressiveInstCombine -lLLVMTransformUtils -lLLVMBitWriter -lLLVMAnalysis -lLLVMProfileData -lLLVMSymbolize -lLLVMDebugInfoBTF -lLLVMDebugInfoPDB -lLLVMDebugInfoMSF -lLLVMDebugInfoCodeView -lLLVMDebugInfoGSYM -lLLVMDebugInfoDWARF -lLLVMObject -lLLVMTextAPI -lLLVMMCParser -lLLVMIRReader -lLLVMAsmParser -lLLVMMC -lLLVMDebugInfoDWARFLowLevel -lLLVMFrontendHLSL -lLLVMBitReader -lLLVMCore -lLLVMRemarks -lLLVMBitstreamReader -lLLVMBinaryFormat -lLLVMTargetParser -lLLVMSupport -lLLVMDemangle
// #cgo LDFLAGS: -Wl,--push-state,--as-needed -lz -lzstd -Wl,--pop-state -lrt -ldl -lm -lstdc++
import "C"
