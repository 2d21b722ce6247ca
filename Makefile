# attn — build, test and benchmark.
#   make            library (build/libattn.a, build/libattn.so) and CLI (build/attn)
#   make test       install what the tests need, generate PyTorch references, run every test
#   make san        the same tests built with AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench      kernels side by side with PyTorch (installs torch from PyPI into .venv-bench)
#   make demo       the README's main job: train and run the English -> Chinese translator
#   make fuzz, fuzz-regress, fuzz-campaign: libFuzzer targets (mk/fuzz.mk, fuzz/README.md)
# Variables: CC=gcc|clang, WERROR=1 (warnings are errors), SAN=1 (sanitizers, into build-san/),
#   ATTN_MPI=0 (build without MPI even when Open MPI is installed; default: with it when found).

CC      ?= cc
# The one C++ file (src/tok/spm_shim.cc, around libsentencepiece) is built by the C compiler's
# C++ sibling: clang++ with clang, g++ otherwise.
ifeq ($(origin CXX),default)
CXX     := $(if $(findstring clang,$(CC)),clang++,g++)
endif
SAN     ?= 0
WERROR  ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-san
OPT     ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SANLD   := -fsanitize=address,undefined
else
BUILD   ?= build
OPT     ?= -O3 -g
SANLD   :=
endif

WARN    := -Wall -Wextra -Wshadow -Wno-unknown-pragmas
ifeq ($(WERROR),1)
WARN    += -Werror
endif
CPPFLAGS := -Iinclude -I/usr/include/freetype2 -I/usr/include/libpng16 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
CFLAGS   := -std=c11 $(OPT) $(WARN) -fPIC -fopenmp
# -fno-sanitize=vptr: the C driver links, without UBSan's C++ runtime.
CXXFLAGS := -std=c++17 $(OPT) $(WARN) -fPIC -fno-sanitize=vptr
LDLIBS   := -ljansson -lutf8proc -lpcre2-8 -lpng16 -lfreetype -lsentencepiece -lstdc++ -lm
CLI_LDLIBS := -lmicrohttpd -lpthread
LDFLAGS  := -fopenmp $(SANLD)

# MPI (src/dist/, include/attn_dist.h: `mpirun -np N attn train`): Open MPI's compile and link
# flags from mpicc --showme, else pkg-config ompi-c; none found (or ATTN_MPI=0): a build without
# it, where attn_dist is a single process. Only src/dist/ includes mpi.h (as a system header, so
# its warnings are not ours). Switching ATTN_MPI in one BUILD dir: make clean first.
ifeq ($(origin ATTN_MPI),undefined)
ATTN_MPI := $(if $(shell command -v mpicc 2>/dev/null || pkg-config --exists ompi-c 2>/dev/null && echo y),1,0)
endif
ifeq ($(ATTN_MPI),1)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null || pkg-config --cflags ompi-c)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null || pkg-config --libs ompi-c)
MPI_CFLAGS := $(patsubst -I%,-isystem %,$(MPI_CFLAGS)) -DATTN_HAVE_MPI
LDLIBS     += $(MPI_LIBS)
endif

ISA_avx2   := -mavx2 -mfma -mf16c -DATTN_ISA=2 -ffp-contract=fast
ISA_avx512 := -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c -DATTN_ISA=512 -ffp-contract=fast

# Library sources, layer by layer: core -> kernels, io -> nn -> viz -> cli.
LIB_SRCS  := $(wildcard src/core/*.c src/io/*.c src/nn/*.c src/viz/*.c src/eval/*.c src/tok/*.c src/models/*.c src/train/*.c src/data/*.c src/infer/*.c src/embed/*.c src/chat/*.c src/dist/*.c) \
             $(filter-out %_simd.c,$(wildcard src/kernels/*.c))
CXX_SRCS  := $(wildcard src/tok/*.cc)
SIMD_SRCS := $(wildcard src/kernels/*_simd.c)
# The CLI, and `attn serve`'s server (src/serve/: the CLI's, over libmicrohttpd, which only the
# attn binary links: CLI_LDLIBS).
CLI_SRCS  := $(wildcard src/cli/*.c src/serve/*.c)
TEST_SRCS := $(wildcard tests/test_*.c)
# (bench_allreduce.c is an MPI program: mk/mpinet.mk builds it where mpicc is installed)
BENCH_SRCS:= $(filter-out bench/bench_allreduce.c,$(wildcard bench/bench_*.c))

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(CXX_SRCS:%.cc=$(BUILD)/obj/%.o) \
             $(SIMD_SRCS:%.c=$(BUILD)/obj/%_avx2.o) $(SIMD_SRCS:%.c=$(BUILD)/obj/%_avx512.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TESTS     := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
BENCHES   := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
HEADERS   := $(wildcard include/*.h src/*/*.h)
# Tests and tools link the static library.
LIBLINK   := $(BUILD)/libattn.a

.PHONY: all lib tests benches test san bench demo clean deps venv headers-check print-mpi-libs \
        dist-nompi-check
all: $(BUILD)/attn $(BUILD)/libattn.so

lib: $(BUILD)/libattn.a $(BUILD)/libattn.so

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/src/dist/%.o: CPPFLAGS += $(MPI_CFLAGS)

$(BUILD)/obj/%.o: %.cc $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/obj/%_avx2.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_avx2) -c $< -o $@

$(BUILD)/obj/%_avx512.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_avx512) -c $< -o $@

$(BUILD)/libattn.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libattn.so: $(LIB_OBJS)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/attn: $(CLI_OBJS) $(BUILD)/libattn.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(LIBLINK) $(LDLIBS) $(CLI_LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/tu.h tests/tu_tok.h tests/tu_page.h $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< $(LIBLINK) $(LDFLAGS) -lcmocka $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIBLINK) $(LDFLAGS) $(LDLIBS)

tests: $(TESTS) $(BUILD)/attn
benches: $(BENCHES)

# System packages (Debian) and the reference venv; idempotent and quick when already done.
deps:
	@sh tools/install_deps.sh

# Every public header compiles on its own as plain C.
headers-check:
	@for h in include/*.h; do echo "#include \"$$(basename $$h)\"" | \
	  $(CC) $(CPPFLAGS) -std=c11 -Wall -Wextra -Werror -x c -fsyntax-only - || exit 1; done

test: deps
	@$(MAKE) --no-print-directory headers-check
	@$(MAKE) --no-print-directory tests
	@sh tests/run.sh $(BUILD)

san:
	@$(MAKE) --no-print-directory SAN=1 tests
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 sh tests/run.sh build-san

bench: all benches
	@sh bench/run.sh $(BUILD)

# The README's main job: train the English -> Chinese model (<= 10 minutes), translate, score.
demo: deps all
	@sh tools/demo.sh $(BUILD)

# The build without MPI (ATTN_MPI=0, or no Open MPI installed) differs in src/dist/ alone: it
# compiles warning-free that way too (CI checks both compilers; a full ATTN_MPI=0 build also works).
dist-nompi-check:
	@for f in src/dist/*.c; do $(CC) $(CPPFLAGS) -std=c11 -Wall -Wextra -Wshadow -Werror -fopenmp \
	  -fsyntax-only $$f || exit 1; done

# The link flags MPI adds (python/setup.py links the extension with them); empty without MPI.
print-mpi-libs:
	@echo $(MPI_LIBS)

clean:
	rm -rf build build-san

# Extra rule sets (fuzzing, ...).
-include mk/*.mk
