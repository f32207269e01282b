# Builds the mneme prefix: build/bin/mneme, build/lib/{libmneme_rt.so,libmneme_shim.a},
# build/lib/cmake/mneme. `mneme config prefix` finds this layout from the binary's location.
PREFIX   ?= $(CURDIR)/build
GO       ?= go
CC       ?= cc
LLVM_CONFIG ?= llvm-config-22
# static: mneme links the LLVM components it uses from their archives and
# starts ~9 ms sooner (every `mneme record` and compiler-wrapper call pays
# that); shared: it links libLLVM-22.so, a smaller binary that links faster.
LLVM_LINK   ?= static
GOTAGS      := $(if $(filter static,$(LLVM_LINK)),llvmstatic,)
export CGO_CPPFLAGS := $(shell $(LLVM_CONFIG) --cppflags)
export CGO_LDFLAGS  := $(shell $(LLVM_CONFIG) --ldflags) -Wl,-rpath,$(shell $(LLVM_CONFIG) --libdir)

.PHONY: all mneme runtime cmake test gpu-test clean
all: mneme runtime cmake

mneme:
	$(GO) build -trimpath -tags '$(GOTAGS)' -o $(PREFIX)/bin/mneme ./cmd/mneme
	install -m 755 toolchain/bin/mneme-cc toolchain/bin/mneme-cxx $(PREFIX)/bin/

runtime:
	@mkdir -p $(PREFIX)/lib $(PREFIX)/obj
	$(GO) build -trimpath -buildmode=c-shared -o $(PREFIX)/lib/libmneme_rt.so ./runtime/librt
	$(CC) -O2 -fPIC -Wall -c runtime/shim/mneme_shim.c -o $(PREFIX)/obj/mneme_shim.o
	ar rcs $(PREFIX)/lib/libmneme_shim.a $(PREFIX)/obj/mneme_shim.o

cmake:
	@mkdir -p $(PREFIX)/lib/cmake/mneme
	cp toolchain/cmake/*.cmake $(PREFIX)/lib/cmake/mneme/

test:
	$(GO) vet ./...
	$(GO) test ./...
	# the static LLVM link that `make` ships, through the LLVM and JIT tests
	$(GO) test -tags llvmstatic ./llvm ./jit

gpu-test:
	./scripts/gpu-test.sh

clean:
	rm -rf $(PREFIX)
