# felab: `make` builds build/felab; `make run` and `make test` install what is missing first.
# Options: HAVE_READLINE=0|1, HAVE_OPENCL=0|1, HAVE_GMSH=0|1, LUA_STATIC=path/to/liblua5.4.a, SANITIZE=1,
# HAVE_HYPRE=0|1 (HYPRE_DIR=folder from scripts/gpu-hypre.sh).

CC       ?= gcc
BUILD    ?= build
LUA_CFLAGS := $(shell pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
LUA_LIBS   := $(shell pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4)
ifdef LUA_STATIC
LUA_LIBS := $(LUA_STATIC)
endif
HAVE_READLINE ?= $(shell test -f /usr/include/readline/readline.h && echo 1 || echo 0)
HAVE_OPENCL   ?= $(shell test -f /usr/include/CL/cl.h && echo 1 || echo 0)
HAVE_GMSH     ?= $(shell test -f /usr/include/gmshc.h && echo 1 || echo 0)
HAVE_HYPRE    ?= $(shell test -f $(or $(HYPRE_DIR),/usr)/include/hypre/HYPRE.h && echo 1 || echo 0)

WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
override CFLAGS += -std=c11 -D_GNU_SOURCE $(WARN) -I. -I$(BUILD)/gen -fopenmp
LDLIBS  := -ldl -lm -fopenmp
ifeq ($(SANITIZE),1)
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer
LDLIBS  += -fsanitize=address,undefined
endif
ifeq ($(HAVE_OPENCL),1)
override CFLAGS += -DFE_HAVE_OPENCL=1 -DCL_TARGET_OPENCL_VERSION=120
LDLIBS  += -lOpenCL
endif
# Gmsh: felab loads the SDK at its first file (engine/mesh/io/gmsh-load.c, by its soname), so that
# starting felab does not load the ~80 libraries it pulls in; the unit tests call it through
# tests/unit/gmsh_lazy.c, which loads it so too (Criterion starts their binary for every test).
ifeq ($(HAVE_GMSH),1)
GMSH_LIB ?= $(shell objdump -p $$($(CC) -print-file-name=libgmsh.so) 2>/dev/null | awk '/SONAME/ {print $$2}')
override CFLAGS += -DFE_HAVE_GMSH=1 -DFE_GMSH_LIB='"$(or $(GMSH_LIB),libgmsh.so)"'
endif
# hypre (the amg preconditioner, engine/solve/precond/amg.c alone includes it): Debian's
# libhypre-dev and OpenMPI, or HYPRE_DIR/{include,lib} made by scripts/gpu-hypre.sh, found at
# run time through an rpath relative to the binary.
ifeq ($(HAVE_HYPRE),1)
ifdef HYPRE_DIR
HYPRE_CFLAGS := -isystem $(HYPRE_DIR)/include/hypre -isystem $(HYPRE_DIR)/include
MPI_CFLAGS   := -isystem $(HYPRE_DIR)/include
LDLIBS  += -L$(HYPRE_DIR)/lib -Wl,-rpath-link,$(HYPRE_DIR)/lib \
           $(patsubst %,-l:%,$(notdir $(wildcard $(HYPRE_DIR)/lib/libHYPRE*.so $(HYPRE_DIR)/lib/libmpi.so.*))) \
           -Wl,-rpath,'$$ORIGIN/$(shell realpath -m --relative-to=$(BUILD) $(HYPRE_DIR)/lib)'
else
MPI_CFLAGS   := $(patsubst -I%,-isystem %,$(shell pkg-config --cflags-only-I ompi-c 2>/dev/null))
HYPRE_CFLAGS := -isystem /usr/include/hypre $(MPI_CFLAGS)
LDLIBS  += -lHYPRE $(shell pkg-config --libs ompi-c 2>/dev/null || echo -lmpi)
endif
HYPRE_CFLAGS += -DFE_HAVE_HYPRE=1
# felab's ranks under mpirun (engine/parallel/comm.c) use the MPI hypre links
MPI_CFLAGS += -DFE_HAVE_MPI=1
endif
# METIS (a mesh's partition, engine/parallel/partition.c): Debian's libmetis-dev
HAVE_METIS ?= $(shell test -f /usr/include/metis.h && echo 1 || echo 0)
ifeq ($(HAVE_METIS),1)
LDLIBS  += -lmetis
endif
SHELL_CFLAGS := $(LUA_CFLAGS)
SHELL_LIBS   := $(LUA_LIBS)
ifeq ($(HAVE_READLINE),1)
SHELL_CFLAGS += -DFE_HAVE_READLINE=1
SHELL_LIBS   += -lreadline
endif

ENGINE_SRC  := $(wildcard engine/*/*.c engine/*/*/*.c)
BACKEND_SRC := backends/backend.c $(wildcard backends/cpu/*.c) $(wildcard backends/cuda/*.c)
ifeq ($(HAVE_OPENCL),1)
BACKEND_SRC += $(wildcard backends/opencl/*.c)
endif
SHELL_SRC   := $(wildcard shell/*.c)
KERNELS     := $(wildcard engine/codegen/kernels/*.knl)

LIB_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(ENGINE_SRC) $(BACKEND_SRC)) $(BUILD)/obj/gen/kernels.o
LUALIB     := $(wildcard shell/lib/*.lua)
LESSONS    := $(sort $(wildcard scripts/lessons/*.lua))
SHELL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(SHELL_SRC)) $(BUILD)/obj/gen/lualib.o \
             $(BUILD)/obj/gen/lessons.o

.PHONY: all run test deps unit scripts prompt check-asan check-house bench bank-model clean format fuzz fuzz-mesh fuzz-api gpu
all: $(BUILD)/felab

deps:
	@scripts/install-deps.sh

run: deps
	@$(MAKE) --no-print-directory $(BUILD)/felab
	$(BUILD)/felab scripts/demo.lua

# make test and check-asan build on every core unless make was given -j: a clean clone builds
# twice (plain, sanitized), and one core alone left the other idle for minutes
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))

# The sanitized build is made during the plain pass's tests, at the lowest priority (in the
# time the two test lanes leave idle: FELAB_TEST_BESIDE in scripts/run-tests.sh); check-asan
# then finds it made.
ASAN_BUILD = $(MAKE) --no-print-directory $(BUILD_JOBS) BUILD=build-asan SANITIZE=1 build-asan/felab build-asan/unit-tests
test: deps
	@$(MAKE) --no-print-directory $(BUILD_JOBS) $(BUILD)/felab $(BUILD)/unit-tests
	@FELAB_TEST_BESIDE='$(ASAN_BUILD)' scripts/run-tests.sh $(BUILD)
	@$(MAKE) --no-print-directory check-asan TEST_CACHE=$(abspath $(BUILD))/cache

# House rules a grep checks, no build and no Lua needed: the engine and the shell ask a
# backend for capabilities, never compare its name; no file of engine/, shell/ or backends/
# over 800 lines, no function there over 100 (scripts/check-house.sh)
check-house:
	@scripts/check-house.sh

# The same suite built with AddressSanitizer and UBSan, in its own build folder. Its kernels
# are the same (cc compiles them with the same flags whatever felab was built with), so
# after `make test`'s plain pass it reads that pass's kernel cache (TEST_CACHE) instead of
# compiling every kernel again; test_cache.lua still compiles into fresh caches under it.
check-asan:
	@$(ASAN_BUILD)
	@FELAB_ASAN=1 FELAB_TEST_CACHE=$(TEST_CACHE) scripts/run-tests.sh build-asan

$(BUILD)/felab: $(SHELL_OBJ) $(BUILD)/libfelab.a
	$(CC) -o $@ $(SHELL_OBJ) $(BUILD)/libfelab.a $(SHELL_LIBS) $(LDLIBS)

$(BUILD)/libfelab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/obj/shell/%.o: shell/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SHELL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# amg.o alone sees hypre's headers; it is rebuilt when its flags change (HAVE_HYPRE, HYPRE_DIR).
$(BUILD)/obj/engine/solve/precond/amg.o: override CFLAGS += $(HYPRE_CFLAGS)
$(BUILD)/obj/engine/solve/precond/amg.o: $(BUILD)/gen/hypre-flags
$(BUILD)/obj/engine/parallel/partition.o: override CFLAGS += $(if $(filter 1,$(HAVE_METIS)),-DFE_HAVE_METIS=1)
$(BUILD)/obj/engine/parallel/partition.o: $(BUILD)/gen/metis-flags
$(BUILD)/gen/metis-flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(HAVE_METIS)' | cmp -s - $@ || echo '$(HAVE_METIS)' > $@
$(BUILD)/obj/engine/parallel/comm.o: override CFLAGS += $(MPI_CFLAGS)
$(BUILD)/obj/engine/parallel/comm.o: $(BUILD)/gen/hypre-flags
$(BUILD)/gen/hypre-flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(HYPRE_CFLAGS)' | cmp -s - $@ || echo '$(HYPRE_CFLAGS)' > $@
FORCE:

# Kernel templates become C strings (fe_kernel_template(name)).
$(BUILD)/gen/kernels.c: $(KERNELS) scripts/embed.sh
	@mkdir -p $(dir $@)
	scripts/embed.sh fe_kernel_template $(KERNELS) > $@

$(BUILD)/obj/gen/kernels.o: $(BUILD)/gen/kernels.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The physics library in Lua becomes C strings (felab_lua_library(name)).
$(BUILD)/gen/lualib.c: $(LUALIB) scripts/embed.sh
	@mkdir -p $(dir $@)
	scripts/embed.sh felab_lua_library $(LUALIB) > $@

$(BUILD)/obj/gen/lualib.o: $(BUILD)/gen/lualib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The lessons (scripts/lessons/NN-name.lua, in the order of their numbers) become C strings
# too (felab_lesson_source(name), felab_lesson_source_name(i)): lesson() runs them.
$(BUILD)/gen/lessons.c: $(LESSONS) scripts/embed.sh
	@mkdir -p $(dir $@)
	scripts/embed.sh felab_lesson_source $(LESSONS) > $@

$(BUILD)/obj/gen/lessons.o: $(BUILD)/gen/lessons.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# One object a test file (compiled side by side under -j, and only what changed), then one link.
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(UNIT_SRC))
$(BUILD)/obj/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(shell pkg-config --cflags criterion) -MMD -MP -c $< -o $@

$(BUILD)/unit-tests: $(UNIT_OBJ) $(BUILD)/libfelab.a
	$(CC) $(CFLAGS) -o $@ $(UNIT_OBJ) $(BUILD)/libfelab.a \
	  $(shell pkg-config --libs criterion) $(LDLIBS)

# A build for machines without readline, Gmsh or a Lua package (the GPU machine): Lua linked
# statically from this machine's liblua5.4.a, the OpenCL ICD loader copied beside it (lib/).
# Carry $(GPU_BUILD) and run scripts/gpu-test.sh $(GPU_BUILD) there. hypre (amg) comes from
# $(GPU_HYPRE) when scripts/gpu-hypre.sh has made it: carry that folder too.
GPU_BUILD ?= build-gpu
GPU_HYPRE ?= .carry/hypre
gpu:
	@$(if $(wildcard $(GPU_HYPRE)/lib/libHYPRE*.so),,echo "gpu: no $(GPU_HYPRE) (scripts/gpu-hypre.sh makes it): amg will be unavailable")
	@$(MAKE) --no-print-directory BUILD=$(GPU_BUILD) HAVE_READLINE=0 HAVE_GMSH=0 \
	  $(if $(wildcard $(GPU_HYPRE)/lib/libHYPRE*.so),HAVE_HYPRE=1 HYPRE_DIR=$(abspath $(GPU_HYPRE)),HAVE_HYPRE=0) \
	  HAVE_METIS=$(if $(wildcard $(GPU_HYPRE)/lib/libmetis.so*),1,0) \
	  LUA_STATIC=/usr/lib/x86_64-linux-gnu/liblua5.4.a $(GPU_BUILD)/felab
	@mkdir -p $(GPU_BUILD)/lib && cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 $(GPU_BUILD)/lib/ 2>/dev/null || true

bench: $(BUILD)/felab
	$(BUILD)/felab scripts/bench/skeleton.lua

# The shared-memory wavefronts of the patch kernel, counted on the host (docs/kernels.md).
bank-model: $(BUILD)/libfelab.a scripts/bench/bank_model.c
	$(CC) $(CFLAGS) -o $(BUILD)/bank-model scripts/bench/bank_model.c $(BUILD)/libfelab.a $(LDLIBS)

format:
	clang-format -i engine/*/*.[ch] engine/*/*/*.[ch] backends/*.[ch] backends/*/*.[ch] shell/*.[ch] tests/unit/*.c

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# make fuzz: both fuzzers below, one after the other.
fuzz: fuzz-mesh fuzz-api

# Fuzz the conversion from Gmsh SDK arrays to a felab mesh (clang's libFuzzer), for
# FUZZ_SECONDS; crashes land in tests/fuzz/ as crash-* and become regression inputs.
FUZZ_SECONDS ?= 600
FUZZ_SRC := tests/fuzz/fuzz_mesh_arrays.c engine/mesh/io/gmsh-io.c engine/mesh/mesh.c engine/mesh/mesh-box.c \
            engine/mesh/mesh-geo.c engine/mesh/mesh-color.c engine/mesh/mesh-ops.c engine/mesh/mesh-order.c \
            engine/mesh/mesh-quality.c \
            engine/core/error.c engine/core/strbuf.c engine/core/sort.c engine/mesh/io/msh-read.c \
            engine/mesh/io/msh-stream.c \
            engine/core/progress.c engine/core/memory.c
build/fuzz-mesh: $(FUZZ_SRC)
	@mkdir -p build
	clang -std=c11 -D_GNU_SOURCE -g -O1 -fopenmp -fsanitize=fuzzer,address,undefined -I. -o $@ $(FUZZ_SRC) -lm
fuzz-mesh: build/fuzz-mesh
	@mkdir -p build/fuzz-corpus
	build/fuzz-mesh -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=tests/fuzz/ build/fuzz-corpus tests/fuzz/regressions

# Fuzz the Lua surface (tests/fuzz/api_fuzz.lua) under ASan and UBSan: FUZZ_CALLS random calls
# for each seed of FUZZ_SEEDS (make test's sanitized pass runs 4000 of seed 1 in at most 20 s).
# Each seed's calls, one a line before each runs, and the errors' messages go to
# $(FUZZ_BUILD)/fuzz-api-<seed>.log: the last line of a crashed run is the call that crashed.
FUZZ_CALLS ?= 100000
FUZZ_SEEDS ?= 1 2 3 4
FUZZ_BUILD ?= build-asan
fuzz-api:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) SANITIZE=1 $(FUZZ_BUILD)/felab
	@for s in $(FUZZ_SEEDS); do \
	  log=$(FUZZ_BUILD)/fuzz-api-$$s.log; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_WAIT_POLICY=passive FELAB_PROGRESS=0 \
	  FELAB_CACHE=$(CURDIR)/$(FUZZ_BUILD)/cache \
	  FELAB_FUZZ_SEED=$$s FELAB_FUZZ_CALLS=$(FUZZ_CALLS) FELAB_FUZZ_VERBOSE=2 \
	    $(FUZZ_BUILD)/felab tests/fuzz/api_fuzz.lua > $$log 2>&1; rc=$$?; \
	  grep -a '^api fuzz' $$log; \
	  if [ $$rc != 0 ]; then echo "fuzz-api: seed $$s failed (status $$rc); its last calls:"; \
	    grep -a '^#' $$log | tail -3; echo "and then ($$log):"; \
	    grep -a -v '^#\|^    -> \|^      (inside)' $$log | \
	      grep -a -m1 -A25 -e 'ERROR: ' -e 'runtime error' -e 'fuzz.lua:' || tail -20 $$log; \
	    exit 1; fi; \
	done
