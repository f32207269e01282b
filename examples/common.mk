# Shared rules of the example Makefiles. Each example sets NAME and includes this.
#   make                               plain build with clang++-22
#   make CXX=$(mneme config cxx)       recordable build with the mneme wrapper
# An example that links a CUDA library sets LDLIBS (e.g. -lcublas) before the include.
# Variables: CUDA (toolkit, default $CUDA_PATH or /usr/local/cuda), ARCH (sm_XX,
# default: the GPU's, else sm_90), BUILD (output directory, default build).
ifeq ($(origin CXX),default)
CXX := clang++-22
endif
CUDA  ?= $(or $(CUDA_PATH),/usr/local/cuda)
ARCH  ?= $(or $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d . | sed -n 's/^\([0-9][0-9]*\)$$/sm_\1/p'),sm_90)
BUILD ?= build
CUDAFLAGS ?= -O3 -std=c++17
CUDALIB := $(if $(wildcard $(CUDA)/lib64),$(CUDA)/lib64,$(CUDA)/lib)

ALL_CUDAFLAGS := -x cuda --cuda-path=$(CUDA) --cuda-gpu-arch=$(ARCH) -I$(CUDA)/include/cccl \
	--no-offload-new-driver -Wno-unknown-cuda-version $(CUDAFLAGS)

.PHONY: all run clean
all: $(BUILD)/$(NAME)

$(BUILD)/$(NAME).o: $(NAME).cu ../common/check.h
	@mkdir -p $(BUILD)
	$(CXX) $(ALL_CUDAFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/$(NAME): $(BUILD)/$(NAME).o
	$(CXX) $< -o $@ -L$(CUDALIB) $(LDLIBS) -lcudart -Wl,-rpath,$(CUDALIB)

run: $(BUILD)/$(NAME)
	./$(BUILD)/$(NAME)

clean:
	rm -rf $(BUILD)

-include $(BUILD)/$(NAME).d
