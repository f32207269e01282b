# Builds the mneme prefix: build/bin/mneme, build/lib/{libmneme_rt.so,libmneme_inject.so,libmneme_shim.a},
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

# Lint tools: staticcheck at a pinned version, installed from the Go module
# proxy into $(TOOLS) on first use (scripts/setup.sh installs it up front);
# clang-format-22 from Debian (scripts/setup.sh).
TOOLS               ?= $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
CLANG_FORMAT        ?= clang-format-22
# Mutation testing (make mutate, not part of make test: it takes a while):
# gremlins at a pinned version, installed the same way.
GREMLINS_VERSION    := v0.6.0
GREMLINS            := $(TOOLS)/gremlins-$(GREMLINS_VERSION)
# Tracked and new (not ignored) files, so build outputs are never checked.
GO_FILES = $$(git ls-files --cached --others --exclude-standard '*.go')
C_FILES  = $$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cc' '*.cpp' '*.cu' '*.cuh')
# How long `make test` runs each fuzz target.
FUZZTIME ?= 3s
# Packages whose code runs goroutines, tested again under the race detector.
RACE_PKGS := ./tune ./db ./record ./record/arena ./record/llvmir ./record/session ./jit ./deploy
# Packages whose tests build inputs in a subprocess that go test's cache does
# not see: the runtime library built from cmd/mneme-rt and its Go imports
# (shimtest), the shim's C sources (toolchain), the tuner's test worker
# (tune/internal/testworker), the injection library's test loader
# (cmd/mneme-inject/testdata), the CUDA test kernels compiled by clang (jit,
# llvm, record/llvmir). A cached pass of theirs could be stale, so make test
# runs them with -count=1, never from the cache.
UNCACHED_PKGS := ./cmd/mneme-rt/shim/shimtest ./cmd/mneme-inject ./toolchain ./tune ./jit ./llvm ./record/llvmir

.PHONY: all mneme runtime cmake test lint tools gpu-test mutate clean
all: mneme runtime cmake

mneme:
	$(GO) build -trimpath -tags '$(GOTAGS)' -o $(PREFIX)/bin/mneme ./cmd/mneme
	install -m 755 toolchain/bin/mneme-cc toolchain/bin/mneme-cxx $(PREFIX)/bin/

# The C shim: one object per file of cmd/mneme-rt/shim, archived afresh (ar
# would keep members of files that no longer exist). It knows the runtime
# library of its prefix, which an application running tuned kernels loads
# without `mneme record` to name it (MNEME_RT_LIB overrides).
SHIM_SRC := $(wildcard cmd/mneme-rt/shim/*.c)
SHIM_OBJ := $(SHIM_SRC:cmd/mneme-rt/shim/%.c=$(PREFIX)/obj/shim/%.o)

runtime:
	@mkdir -p $(PREFIX)/lib $(PREFIX)/obj/shim
	$(GO) build -trimpath -buildmode=c-shared -o $(PREFIX)/lib/libmneme_rt.so ./cmd/mneme-rt
	$(GO) build -trimpath -buildmode=c-shared -o $(PREFIX)/lib/libmneme_inject.so ./cmd/mneme-inject
	for c in $(SHIM_SRC); do $(CC) -O2 -fPIC -Wall -DMNEME_DEFAULT_RT_LIB='"$(PREFIX)/lib/libmneme_rt.so"' -c $$c -o $(PREFIX)/obj/shim/$$(basename $$c .c).o || exit 1; done
	rm -f $(PREFIX)/lib/libmneme_shim.a
	ar rcs $(PREFIX)/lib/libmneme_shim.a $(SHIM_OBJ)

cmake:
	@mkdir -p $(PREFIX)/lib/cmake/mneme
	cp toolchain/cmake/*.cmake $(PREFIX)/lib/cmake/mneme/

tools: $(STATICCHECK)

$(STATICCHECK):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/staticcheck $@

$(GREMLINS):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	mv $(TOOLS)/gremlins $@

# go vet, staticcheck (staticcheck.conf), the format of every Go file (gofmt)
# and C, C++ and CUDA file (clang-format, .clang-format), that every file
# the sources and documents refer to exists, and ruff and mypy on python/.
lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@files=$$(gofmt -l $(GO_FILES)); if [ -n "$$files" ]; then echo "gofmt -w these files:"; echo "$$files"; exit 1; fi
	$(CLANG_FORMAT) --dry-run --Werror $(C_FILES)
	./scripts/check-refs.sh
	# the Python package: ruff and mypy --strict (python/pyproject.toml), from .venv
	cd python && ../.venv/bin/python -m ruff check . && ../.venv/bin/python -m mypy

test: lint
	m=$$($(GO) list -m) && $(GO) test $$($(GO) list ./... | grep -v -x -F $(UNCACHED_PKGS:./%=-e $$m/%))
	$(GO) test -count=1 $(UNCACHED_PKGS)
	$(GO) test -race $(filter-out $(UNCACHED_PKGS),$(RACE_PKGS))
	$(GO) test -race -count=1 $(filter $(UNCACHED_PKGS),$(RACE_PKGS))
	# the static LLVM link that `make` ships, through the LLVM and JIT tests
	$(GO) test -count=1 -tags llvmstatic ./llvm ./jit
	# the Python API (python/), from the virtual environment scripts/setup.sh makes
	cd python && ../.venv/bin/python -m pytest -q
	# the verdicts the GPU benchmark scripts print (bench/)
	.venv/bin/python -m pytest -q -p no:cacheprovider bench
	# an optimize report opened in headless Chromium (scripts/check-report.sh)
	GO=$(GO) ./scripts/check-report.sh
	# every fuzz target past its seeds, FUZZTIME each (scripts/fuzz-all.sh)
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz-all.sh

# Mutation testing of the packages where a wrong answer is silent
# (scripts/mutate.sh); prints each package's score.
mutate: $(GREMLINS)
	GREMLINS=$(GREMLINS) ./scripts/mutate.sh

gpu-test:
	./scripts/gpu-test.sh

clean:
	rm -rf $(PREFIX)
