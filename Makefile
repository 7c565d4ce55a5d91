# Makefile - builds libftengine (static and shared), the ftengine tool, the
# tests and the benchmarks. CUDA is optional: nvcc is looked for on PATH, then
# in $CUDA_HOME, then in /usr/local/cuda; without it (or with CUDA=0) the
# CPU-only library is built and the CUDA tests report themselves skipped.
#
#   make                 library + tool
#   make test            every test, ending with "N passed, N failed, N skipped"
#   make CUDA=0 ...      force a CPU-only build
#   make tsan-test       ThreadSanitizer run of tests/test_threads.c (CPU-only build in build/tsan)
#   make gpu-check       on a GPU machine: build for the local GPU, run everything,
#                        compute-sanitizer memcheck + racecheck (tests/gpu_check.sh)
#   make gpu-prebuild    here, no GPU needed: build/gpu-sm90, what the one-call GPU day
#                        runs (sh tests/gpu_session.sh day OUT; docs/gpu_session.md)
#   make bench MODE=eager MODEL=bert-base [DEVICE=cuda BATCH=1 SEQ=128 DTYPE=fp16 ARGS="--iters 50"]
#                        (defaults: DEVICE cuda if a GPU answers nvidia-smi, else cpu; DTYPE fp32)
#   make sweep MODEL=bert-base [DEVICE=cuda DTYPE=fp16 CSV=out.csv]   (every mode, batch 1..128, 5 rounds)
#   make examples        the programs in examples/
#   make report [DEVICE=cpu|cuda] [DTYPE=fp16] [QUICK=1] [REPORT_DIR=build/report] [STAGE=main,...] [PEERS=0]
#               [MODEL=DIR|PRESET [SEQ=N]] [PYTHON=python3]
#                        the framework-tax study: sweeps, figures, report.md (docs/report.md); on the CPU
#                        with PyTorch, TorchScript and ONNX Runtime beside it where present (bench/peers.py)
#   make install PREFIX=/usr/local   (header, libraries, tool, ftengine.pc)

# the first rule in this file is not `all` (tests' helper libraries come earlier)
.DEFAULT_GOAL := all

CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
CUDA    ?= auto
CUDA_ARCH ?= 90

# ---------------------------------------------------------------------------
# CUDA detection (printed, never silent)
# ---------------------------------------------------------------------------
ifeq ($(CUDA),0)
  NVCC :=
  $(info ftengine: CUDA=0 given: building the CPU-only library)
else
  NVCC := $(shell command -v nvcc 2>/dev/null)
  ifeq ($(NVCC),)
    ifneq ($(CUDA_HOME),)
      NVCC := $(wildcard $(CUDA_HOME)/bin/nvcc)
    endif
  endif
  ifeq ($(NVCC),)
    NVCC := $(wildcard /usr/local/cuda/bin/nvcc)
  endif
  ifeq ($(NVCC),)
    $(info ftengine: nvcc not found (PATH, CUDA_HOME, /usr/local/cuda): building the CPU-only library)
  endif
endif

ifneq ($(NVCC),)
  # nvcc may be a wrapper script or a symlink (CI has /usr/local/bin/nvcc exec'ing
  # the real one), so ask nvcc where it lives instead of trusting its path.
  NVCC_HERE := $(shell $(NVCC) --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$$ _HERE_=//p' | head -n1)
  CUDA_ROOT := $(patsubst %/bin,%,$(NVCC_HERE))
  ifeq ($(wildcard $(CUDA_ROOT)/include/cuda_runtime.h),)
    CUDA_ROOT := $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
  endif
  ifeq ($(wildcard $(CUDA_ROOT)/include/cuda_runtime.h),)
    CUDA_ROOT := /usr/local/cuda
  endif
  ifeq ($(wildcard $(CUDA_ROOT)/include/cuda_runtime.h),)
    $(info ftengine: nvcc at $(NVCC) but no cuda_runtime.h under its toolkit: building the CPU-only library)
    NVCC :=
  endif
endif

ifneq ($(NVCC),)
  # NVTX3 and CUPTI are optional parts of a toolkit install: probe, don't assume.
  HAVE_NVTX  := $(if $(wildcard $(CUDA_ROOT)/include/nvtx3/nvToolsExt.h),1,)
  CUPTI_INC  := $(firstword $(dir $(wildcard $(CUDA_ROOT)/include/cupti.h $(CUDA_ROOT)/extras/CUPTI/include/cupti.h)))
  CUPTI_LIB  := $(firstword $(dir $(wildcard $(CUDA_ROOT)/lib64/libcupti.so $(CUDA_ROOT)/extras/CUPTI/lib64/libcupti.so)))
  HAVE_CUPTI := $(if $(and $(CUPTI_INC),$(CUPTI_LIB)),1,)
  CUDA_VER  := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  $(info ftengine: nvcc $(CUDA_VER) at $(NVCC) (toolkit $(CUDA_ROOT)); CUDA backend for sm_$(CUDA_ARCH) (CUDA_ARCH=NN to change); NVTX $(if $(HAVE_NVTX),yes,no), CUPTI $(if $(HAVE_CUPTI),yes,no))
endif

# ---------------------------------------------------------------------------
# flags
# ---------------------------------------------------------------------------
CPPFLAGS += -Iinclude -Iengine -D_GNU_SOURCE
CFLAGS   ?= -O2
CFLAGS   += -std=c11 -fPIC -fopenmp -fno-strict-aliasing -Wall -Wextra -Wno-unused-parameter -MMD -MP
LDLIBS   += -lm -lpthread
LDFLAGS  += -fopenmp

ifeq ($(SANITIZE),1)
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -g
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SANITIZE),thread)
  CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer -g
  LDFLAGS += -fsanitize=thread
endif

CPU_SRCS  := $(filter-out engine/cuda_%.c graph/cuda_%.c,$(wildcard engine/*.c graph/*.c models/*.c kernels/cpu/*.c))
CUDA_CSRC := $(wildcard engine/cuda_*.c graph/cuda_*.c)
CU_SRCS   := $(wildcard kernels/cuda/*.cu)

OBJS := $(CPU_SRCS:%.c=$(BUILD)/obj/%.o)
# NVTX v3 is header-only (plus -ldl): the CPU-only build has it too when a toolkit's
# headers are around, so a tool attached to a CPU run sees ftengine's ranges
ifeq ($(NVCC),)
  NVTX_ROOT := $(firstword $(foreach d,$(CUDA_HOME) /usr/local/cuda,$(if $(wildcard $(d)/include/nvtx3/nvToolsExt.h),$(d))))
  HAVE_NVTX := $(if $(NVTX_ROOT),1,)
  NVTX_CPPFLAGS := $(if $(NVTX_ROOT),-isystem $(NVTX_ROOT)/include)
endif
ifeq ($(HAVE_NVTX),1)
  CPPFLAGS += -DFT_WITH_NVTX $(NVTX_CPPFLAGS)
  LDLIBS   += -ldl
endif
ifneq ($(NVCC),)
  CPPFLAGS += -DFT_WITH_CUDA -I$(CUDA_ROOT)/include
  OBJS     += $(CUDA_CSRC:%.c=$(BUILD)/obj/%.o) $(CU_SRCS:%.cu=$(BUILD)/obj/%.o)
  CUDA_LIBDIR := $(CUDA_ROOT)/lib64
  LDLIBS   += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt -lcublas
  ifeq ($(HAVE_CUPTI),1)
    CPPFLAGS += -DFT_WITH_CUPTI -I$(CUPTI_INC)
    LDLIBS   += -L$(CUPTI_LIB) -Wl,-rpath,$(CUPTI_LIB) -lcupti
  endif
  LDLIBS   += -lcudart -lstdc++
  NVCCFLAGS ?= -O3
  NVCCFLAGS += -std=c++17 -lineinfo -Iinclude -Iengine -DFT_WITH_CUDA \
               -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
               -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) \
               -Xcompiler -fPIC,-Wall,-fno-strict-aliasing -MMD -MP
endif

# Objects depend on a stamp of the configuration, so switching CUDA=0 / CUDA_ARCH /
# SANITIZE in the same build directory rebuilds them instead of mixing builds.
CONFIG_ID := $(NVCC)|$(CUDA_ROOT)|$(HAVE_NVTX)$(HAVE_CUPTI)|$(CUDA_ARCH)|$(CFLAGS)|$(NVCCFLAGS)|$(SANITIZE)
STAMP := $(BUILD)/config.stamp
$(shell mkdir -p $(BUILD); echo '$(CONFIG_ID)' | cmp -s - $(STAMP) || echo '$(CONFIG_ID)' > $(STAMP))

LIB_A  := $(BUILD)/libftengine.a
LIB_SO := $(BUILD)/libftengine.so
TOOL   := $(BUILD)/ftengine

# the NVTX tool the tests attach (tests/nvtx_inject.c, loaded via NVTX_INJECTION64_PATH)
NVTX_INJECT := $(if $(HAVE_NVTX),$(BUILD)/tests/libnvtx_inject.so)
$(BUILD)/tests/libnvtx_inject.so: tests/nvtx_inject.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out -MMD -MP,$(CFLAGS)) -shared -o $@ $< -lpthread

TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_SRCS := $(wildcard examples/*.c)
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)
# shell tests (tests/test_*.sh), copied next to the C ones; run from the checkout
SH_TEST_BINS := $(patsubst tests/%.sh,$(BUILD)/tests/%,$(wildcard tests/test_*.sh))
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test test-bins emu-test emu-dry-run check gpu-check bench sweep report kernel-bench install clean lint examples
all: $(LIB_A) $(LIB_SO) $(TOOL)
	@echo "ftengine: built $(LIB_A) $(LIB_SO) $(TOOL) ($(if $(NVCC),cpu+cuda,cpu only))"

.PHONY: tsan-test
# ThreadSanitizer: contexts in several threads, every golden model and mode, on a
# CPU-only build of its own (OpenMP at one thread: libgomp is not instrumented)
TSAN_BUILD ?= $(BUILD)/tsan
tsan-test:
	$(MAKE) CUDA=0 SANITIZE=thread BUILD=$(TSAN_BUILD) $(TSAN_BUILD)/tests/test_threads
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66 $(TSAN_OPTIONS)" $(TSAN_BUILD)/tests/test_threads

$(BUILD)/obj/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIB_A): $(OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(OBJS)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The commit the tool reports (tools/provenance.c): short hash, -dirty when tracked
# files differ from it, "unknown" outside a git checkout of this tree. It goes into
# a generated header rewritten only when it changes, so a new commit relinks the
# tool and rebuilds nothing of the library.
GIT_HERE   := $(shell git rev-parse --show-toplevel 2>/dev/null)
FT_COMMIT  := $(if $(filter $(realpath $(CURDIR)),$(realpath $(GIT_HERE))),$(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty),)
FT_COMMIT  := $(if $(FT_COMMIT),$(FT_COMMIT),unknown)
COMMIT_H   := $(BUILD)/gen/ft_commit.h
$(shell mkdir -p $(BUILD)/gen; echo '#define FT_COMMIT "$(FT_COMMIT)"' | cmp -s - $(COMMIT_H) || echo '#define FT_COMMIT "$(FT_COMMIT)"' > $(COMMIT_H))

TOOL_SRCS := $(wildcard tools/*.c)
TOOL_HDRS := $(wildcard tools/*.h)
$(TOOL): $(TOOL_SRCS) $(TOOL_HDRS) $(COMMIT_H) $(LIB_A)
	$(CC) $(CPPFLAGS) -I$(BUILD)/gen $(CFLAGS) -o $@ $(TOOL_SRCS) $(LIB_A) $(LDFLAGS) $(LDLIBS)

# the CUDA backend on the host emulator (EMU_TEST_BINS, emu-test, EMU_TOOL)
include tests/emu/emu.mk

$(BUILD)/tests/%: tests/%.c tests/ft_test.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

# test_usability also unit-tests the tool's own code: every tools/*.c but main's
TOOL_LIB_SRCS := $(filter-out tools/ftengine.c,$(TOOL_SRCS))
$(BUILD)/tests/test_usability: tests/test_usability.c tests/ft_test.h tools/cli.h $(TOOL_LIB_SRCS) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests -Itools $(CFLAGS) -o $@ $< $(TOOL_LIB_SRCS) $(LIB_A) $(LDFLAGS) $(LDLIBS)

# examples link the way a user's program would: only the public header
$(BUILD)/examples/%: examples/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c bench/bench_clock.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

# the test programs without running them (gpu_check.sh runs some under compute-sanitizer)
test-bins: all $(TEST_BINS) $(EXAMPLE_BINS) $(NVTX_INJECT)

examples: $(EXAMPLE_BINS)
	@echo "ftengine: built $(EXAMPLE_BINS)"

# shell tests (tests/test_*.sh: the GPU session's file limits, the baselines' Python, the
# installed library through pkg-config, the docs' commands), copied beside the test programs
$(SH_TEST_BINS): $(BUILD)/tests/%: tests/%.sh
	@mkdir -p $(dir $@)
	cp $< $@ && chmod +x $@
# the report's Python (bench/report.py ...): standard library only, figures skipped without matplotlib;
# bench/cpu_vs_torch.py's torch models and their golden check: skipped without torch. They run with
# $(PYTHON), the interpreter `make report` uses (PYTHON=/usr/bin/python3 for one with matplotlib).
PYTHON     ?= python3
PY_TESTS := $(if $(shell command -v $(PYTHON) 2>/dev/null),tests/test_report.py bench/test_cpu_vs_torch.py \
              bench/test_torch_zoo_vision_a.py bench/test_torch_zoo_text_b.py bench/test_torch_zoo_vision_b.py \
              bench/test_torch_zoo_text_a.py bench/test_gemm_peers.py)

test check: all $(TEST_BINS) $(SH_TEST_BINS) $(EXAMPLE_BINS) $(EMU_TEST_BINS) $(NVTX_INJECT) $(EMU_TOOL)
	$(PTXAS_CHECK)
	@$(if $(PY_TESTS),echo "ftengine: Python tests with $(PYTHON) ($(shell command -v $(PYTHON) 2>/dev/null))",echo "ftengine: no $(PYTHON): tests/test_report.py, bench/test_cpu_vs_torch.py not run")
	@FT_BUILD=$(BUILD) FT_MAKE="$(MAKE)" FT_PYTHON="$(PYTHON)" sh tests/run_tests.sh $(TEST_BINS) $(SH_TEST_BINS) $(EXAMPLE_BINS) $(EMU_TEST_BINS) $(PY_TESTS)

# only the CUDA tests on the host emulator (tests/emu/)
emu-test: $(EMU_TEST_BINS)
	@FT_BUILD=$(BUILD) sh tests/run_tests.sh $(EMU_TEST_BINS)

gpu-check:
	@sh tests/gpu_check.sh

MODE   ?= eager
MODEL  ?= bert-base
# cuda when the CUDA backend is built and a GPU answers, else cpu
DEVICE ?= $(if $(NVCC),$(shell nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu),cpu)
BATCH  ?= 1
SEQ    ?=
DTYPE  ?= fp32
ARGS   ?=
# one line before a run that quietly fell back to the CPU
DEVICE_NOTE = $(if $(and $(filter file,$(origin DEVICE)),$(filter cpu,$(DEVICE))),@echo "ftengine: running on the CPU in $(DTYPE): $(if $(NVCC),no GPU answered nvidia-smi,no CUDA build (nvcc not found or CUDA=0)); DEVICE=cuda to insist",@true)
bench: all
	$(DEVICE_NOTE)
	$(TOOL) bench $(MODEL) --device $(DEVICE) --mode $(MODE) --batch $(BATCH) $(if $(SEQ),--seq $(SEQ)) --dtype $(DTYPE) $(ARGS)

# the framework-tax curve: every mode at batch 1..128, the paper's timing protocol
sweep: all
	$(DEVICE_NOTE)
	$(TOOL) sweep $(MODEL) --device $(DEVICE) --dtype $(DTYPE) $(if $(SEQ),--seq $(SEQ)) --protocol paper --overhead \
	    --iters 20 --warmup 2 --rounds 5 $(if $(CSV),--csv $(CSV)) $(ARGS)

# the framework-tax study (bench/report.py, docs/report.md): the sweeps it needs (resumed
# from REPORT_DIR), the figures (matplotlib, optional: without it a warning on stderr names
# $(PYTHON) and how to point PYTHON= at one that has it) and REPORT_DIR/report.md with F1-F8.
# STAGE=main,emulation,width,depth,models runs only those sweep groups (GPU sessions).
# MODEL=DIR|PRESET on the command line: the per-model parts (main, emulation) on that model,
# in $(BUILD)/report-<name> unless REPORT_DIR is given; SEQ=N its input length.
REPORT_MODEL = $(if $(filter command line,$(origin MODEL)),$(MODEL))
REPORT_DIR ?= $(BUILD)/report$(if $(REPORT_MODEL),-$(notdir $(patsubst %/,%,$(REPORT_MODEL))))
report: all
	$(PYTHON) bench/report.py --tool $(TOOL) --device $(DEVICE) --dir $(REPORT_DIR) \
	    $(if $(filter command line environment,$(origin DTYPE)),--dtype $(DTYPE)) \
	    $(if $(filter 1,$(QUICK)),--quick) $(if $(STAGE),--only $(STAGE)) $(if $(filter 0,$(PEERS)),--no-peers) \
	    $(if $(REPORT_MODEL),--model $(REPORT_MODEL) $(if $(SEQ),--seq $(SEQ)))

# kernel bench (bench/kernels/): GB/s and TFLOP/s of single kernels, plus PyTorch's if importable
KBENCH := $(BUILD)/bench/kernels/kernel_bench
$(KBENCH): bench/kernels/kernel_bench.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)
kernel-bench: $(KBENCH)
	$(KBENCH)
	-@python3 bench/kernels/torch_kernels.py
$(BUILD)/tests/test_cuda_ops: tests/cuda_ops_cases.h tests/cuda_ops_cases_vision.h

# ---------------------------------------------------------------------------
# gpu-prebuild: everything `sh tests/gpu_session.sh day` runs on a GPU machine,
# built here for sm_$(GPU_PRE_ARCH) so the device call spends no time compiling
# (docs/gpu_session.md). Objects go to $(GPU_PRE)-obj; $(GPU_PRE) gets only what
# travels with the call (its size in the docs): the shared library (one copy of
# the kernels), the tool, the test programs with CUDA tests (every tests/test_*.c
# naming FT_DEVICE_CUDA), the kernel bench and framework_tax, linked against it
# with an $$ORIGIN rpath and stripped, and STAMP (the sources' hash the day
# script compares, commit, dirty state, nvcc, arch).
# ---------------------------------------------------------------------------
GPU_PRE_ARCH ?= 90
GPU_PRE      ?= build/gpu-sm$(GPU_PRE_ARCH)
GPU_PRE_TESTS := $(basename $(notdir $(shell grep -l FT_DEVICE_CUDA tests/test_*.c 2>/dev/null)))
GPU_PRE_BINS := $(GPU_PRE)/lib/libftengine.so $(GPU_PRE)/bin/ftengine $(GPU_PRE_TESTS:%=$(GPU_PRE)/tests/%) \
                $(GPU_PRE)/bench/kernel_bench $(GPU_PRE)/examples/framework_tax
GPU_PRE_LINK  = -L$(GPU_PRE)/lib -lftengine -Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS) $(LDLIBS)
GPU_PRE_CFLAGS = $(filter-out -MMD -MP,$(CFLAGS))
.PHONY: gpu-prebuild gpu-prebuild-inner
gpu-prebuild:
	@test -n "$(NVCC)" || { echo "gpu-prebuild: nvcc not found (PATH, CUDA_HOME, /usr/local/cuda): nothing for a GPU to run" >&2; exit 1; }
	@command -v sha256sum >/dev/null || { echo "gpu-prebuild: needs sha256sum" >&2; exit 1; }
	$(MAKE) CUDA_ARCH=$(GPU_PRE_ARCH) BUILD=$(GPU_PRE)-obj EMU=0 GPU_PRE=$(GPU_PRE) gpu-prebuild-inner
gpu-prebuild-inner: $(GPU_PRE_BINS)
	@sh tests/gpu_session.sh stamp > $(GPU_PRE)/STAMP.tmp
	@{ echo "arch: $(CUDA_ARCH)"; echo "nvcc: $(CUDA_VER)"; echo "commit: $(FT_COMMIT)"; \
	   echo "built: $$(date -u +%Y-%m-%dT%H:%M:%SZ) on $$(uname -n)"; } >> $(GPU_PRE)/STAMP.tmp
	@mv $(GPU_PRE)/STAMP.tmp $(GPU_PRE)/STAMP
	@echo "gpu-prebuild: $(GPU_PRE) holds $$(find $(GPU_PRE) -type f | wc -l) files, $$(du -sk $(GPU_PRE) | cut -f1) KiB:"
	@cat $(GPU_PRE)/STAMP
$(GPU_PRE)/lib/libftengine.so: $(LIB_SO)
	@mkdir -p $(dir $@)
	strip --strip-unneeded -o $@ $<
$(GPU_PRE)/bin/ftengine: $(TOOL_SRCS) $(TOOL_HDRS) $(COMMIT_H) $(GPU_PRE)/lib/libftengine.so
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(BUILD)/gen $(GPU_PRE_CFLAGS) -s -o $@ $(TOOL_SRCS) $(GPU_PRE_LINK)
$(GPU_PRE)/tests/%: tests/%.c tests/ft_test.h $(GPU_PRE)/lib/libftengine.so
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(GPU_PRE_CFLAGS) -s -o $@ $< $(GPU_PRE_LINK)
$(GPU_PRE)/tests/test_cuda_ops: tests/cuda_ops_cases.h
$(GPU_PRE)/bench/kernel_bench: bench/kernels/kernel_bench.c $(GPU_PRE)/lib/libftengine.so
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(GPU_PRE_CFLAGS) -s -o $@ $< $(GPU_PRE_LINK)
$(GPU_PRE)/examples/framework_tax: examples/framework_tax.c $(GPU_PRE)/lib/libftengine.so
	@mkdir -p $(dir $@)
	$(CC) -Iinclude $(GPU_PRE_CFLAGS) -s -o $@ $< $(GPU_PRE_LINK)

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/ftengine.h include/ftengine_ops.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|0.1.0|g' \
	    -e 's|@LIBS_PRIVATE@|$(LDLIBS) -fopenmp|g' ftengine.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ftengine.pc
	chmod 644 $(DESTDIR)$(PREFIX)/lib/pkgconfig/ftengine.pc
	@echo "ftengine: installed into $(DESTDIR)$(PREFIX)"

# style checks, then the kernels' resources from ptxas on sm_90 (no spills, no stack
# frames outside the allowlist, registers and shared memory within the launch
# configuration; cached in $(BUILD)/ptxas/ by a hash of the sources): tests/ptxas_check.sh
PTXAS_CHECK = @NVCC='$(NVCC)' FT_BUILD=$(BUILD) sh tests/ptxas_check.sh
lint:
	@sh tests/lint.sh
	$(PTXAS_CHECK)

clean:
	rm -rf $(BUILD)

-include $(OBJS:.o=.d)
