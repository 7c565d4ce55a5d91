# emu.mk - included by the Makefile: the CUDA backend built for the host
# emulator (tests/emu/emu.h) and the CUDA tests linked against it, so `make
# test` runs the CUDA code paths (kernels, launches, capture, cuBLASLt calls)
# on a machine without a GPU. Needs the CUDA headers and a C++17 compiler;
# EMU=0 leaves it out. It replaces no GPU run: see docs/emulator.md.

EMU ?= 1
ifneq ($(NVCC),)
ifneq ($(EMU),0)

comma := ,
EMU_CXX   ?= $(if $(shell command -v g++ 2>/dev/null),g++,c++)
EMU_BUILD := $(BUILD)/emu
# with the toolkit's CUPTI headers the engine's CUPTI layer is built too, over
# the fake CUPTI of tests/emu/fake_cupti.c (libcupti itself is never linked)
EMU_CPPFLAGS := -Iinclude -Iengine -D_GNU_SOURCE -DFT_WITH_CUDA -DFT_CUDA_EMU -I$(CUDA_ROOT)/include \
                $(if $(HAVE_CUPTI),-DFT_WITH_CUPTI -I$(CUPTI_INC)) $(if $(HAVE_NVTX),-DFT_WITH_NVTX)
EMU_CFLAGS   := $(filter-out -MMD -MP,$(CFLAGS)) -MMD -MP
EMU_CXXFLAGS := -std=c++17 -O1 -fPIC -fno-strict-aliasing -Wall -Wno-unknown-pragmas \
                -Wno-maybe-uninitialized -MMD -MP $(if $(filter 1,$(SANITIZE)),-fsanitize=address$(comma)undefined -g)

EMU_SUPPORT := $(wildcard tests/emu/*.c)
EMU_OBJS := $(CPU_SRCS:%.c=$(EMU_BUILD)/obj/%.o) $(CUDA_CSRC:%.c=$(EMU_BUILD)/obj/%.o) \
            $(CU_SRCS:%.cu=$(EMU_BUILD)/obj/%.o) $(EMU_SUPPORT:%.c=$(EMU_BUILD)/obj/%.o)
EMU_LIB  := $(EMU_BUILD)/libftengine_emu.a
EMU_LIBS := -lm -lpthread -lstdc++ $(if $(HAVE_NVTX),-ldl)

# the test programs with CUDA cases; run with FT_TEST_FILTER=cuda (tests/run_tests.sh)
EMU_TESTS := test_cuda_ops test_bert test_hardening test_funnel_mobilebert test_funnel_factorized test_zoo_vision_b \
             test_resnet_wavlm test_graph_golden test_golden_variants test_oom test_graph \
             test_profiler test_plan_info test_cuda_pdl test_cuda_gemm_tune test_cupti_attach \
             test_golden_all \
             test_zoo_vision_a test_zoo_vision_a_io \
             test_zoo_text_b \
             test_zoo_text_a
# the op test again (tests/run_tests.sh sets the switches from the name):
# _random with the threads of every round in a random order (FT_EMU_ORDER=random),
# where an unsynchronised shared read shows; _noepi and _nolt with the fake
# cuBLASLt refusing fused epilogues / every GEMM (FT_EMU_LT_NO_ALGO), so the
# engine's GEMM fallbacks (epilogue pass, classic cuBLAS) are checked too;
# _lazy (with the golden graph test too) with stream work deferred to the host's
# next sync (FT_EMU_LAZY=1), where host code that reuses a pinned buffer or reads
# a result before synchronising shows
EMU_OPS_AGAIN := $(EMU_BUILD)/tests/test_cuda_ops_random $(EMU_BUILD)/tests/test_cuda_ops_noepi \
                 $(EMU_BUILD)/tests/test_cuda_ops_nolt $(EMU_BUILD)/tests/test_cuda_ops_lazy
EMU_GOLDEN_AGAIN := $(EMU_BUILD)/tests/test_graph_golden_lazy
# _cuptibusy: the profiler test with cuptiSubscribe refused as under nsys or
# compute-sanitizer (FT_EMU_CUPTI_BUSY=1): host timers only, and a reason
EMU_PROF_AGAIN := $(EMU_BUILD)/tests/test_profiler_cuptibusy
# shell tests of whole programs on the emulator (tests/emu/test_*.sh)
EMU_SH_TESTS := $(patsubst tests/emu/%.sh,$(EMU_BUILD)/tests/%,$(wildcard tests/emu/test_*.sh))
EMU_TEST_BINS := $(EMU_TESTS:%=$(EMU_BUILD)/tests/%) $(EMU_OPS_AGAIN) $(EMU_GOLDEN_AGAIN) \
                 $(EMU_PROF_AGAIN) $(EMU_SH_TESTS)

$(EMU_BUILD)/obj/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CPPFLAGS) $(EMU_CFLAGS) -c $< -o $@

$(EMU_BUILD)/obj/%.o: %.cu $(STAMP)
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CPPFLAGS) $(EMU_CXXFLAGS) -x c++ -c $< -o $@

$(EMU_LIB): $(EMU_OBJS)
	rm -f $@ && ar rcs $@ $^

$(EMU_BUILD)/tests/%: tests/%.c tests/ft_test.h $(EMU_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CPPFLAGS) -Itests $(EMU_CFLAGS) -o $@ $< $(EMU_LIB) $(LDFLAGS) $(EMU_LIBS)
$(EMU_BUILD)/tests/test_cuda_ops: tests/cuda_ops_cases.h tests/cuda_ops_cases_vision.h
$(EMU_OPS_AGAIN): $(EMU_BUILD)/tests/test_cuda_ops
	cp $< $@
$(EMU_GOLDEN_AGAIN): $(EMU_BUILD)/tests/test_graph_golden
	cp $< $@
$(EMU_PROF_AGAIN): $(EMU_BUILD)/tests/test_profiler
	cp $< $@

$(EMU_SH_TESTS): $(EMU_BUILD)/tests/%: tests/emu/%.sh $(EMU_BUILD)/ftengine $(EMU_BUILD)/examples/framework_tax
	@mkdir -p $(dir $@)
	cp $< $@ && chmod +x $@

# the tool on the emulator: dry runs of the GPU session's commands (tests/emu/dry_run.sh)
EMU_TOOL := $(EMU_BUILD)/ftengine
$(EMU_TOOL): $(TOOL_SRCS) tools/cli.h $(EMU_LIB)
	$(CC) $(EMU_CPPFLAGS) $(EMU_CFLAGS) -o $@ $(TOOL_SRCS) $(EMU_LIB) $(LDFLAGS) $(EMU_LIBS)

$(EMU_BUILD)/examples/%: examples/%.c $(EMU_LIB)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude $(EMU_CFLAGS) -o $@ $< $(EMU_LIB) $(LDFLAGS) $(EMU_LIBS)

emu-dry-run: $(EMU_TOOL) $(EMU_BUILD)/examples/framework_tax
	@FT_BUILD=$(BUILD) sh tests/emu/dry_run.sh

-include $(EMU_OBJS:.o=.d)
endif
endif
