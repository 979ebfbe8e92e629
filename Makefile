# k3 build. Sources are found by wildcard: every src/<area>/*.c except the
# CLI's (src/cli) and the offline trunk packer's (src/pack) goes into libk3.a;
# those two link into bin/k3 only. Every tests/unit/test_*.c is one test program.
#
#   make            build bin/k3
#   make test       build and run the short ladder (tests/run.sh, <= 6 min on
#                   2 cores): every gate but those tagged `# ladder: check`
#   make check      build and run every step of the ladder (CI runs this)
#   make asan       the full ladder under AddressSanitizer + UBSan (build-asan/)
#   make ubsan      the same under UBSan alone (build-ubsan/)
#   BUILD=dir       put objects somewhere else (parallel builds of one tree)

CC      ?= cc
BUILD   ?= build
PYTHON  ?= /usr/bin/python3
OPT     ?= -O2 -g
# -ffp-contract=off: the compiler must never fuse a*b+c on its own; kernels
# call fmaf() where they mean it, so results do not depend on the compiler.
# WERROR= (empty) lets deliberately broken mutants of the source build.
WERROR  ?= -Werror
CFLAGS_BASE = -std=c99 -D_POSIX_C_SOURCE=200809L -D_FILE_OFFSET_BITS=64 \
	-Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wvla -Wformat=2 -Wundef \
	-ffp-contract=off -fno-fast-math -fopenmp -pthread -Iinclude -Isrc
CFLAGS  ?=
# IMAGE=1: PNG and JPEG decoding (src/vision/image*.c) with Debian's libpng
# and libjpeg-turbo (libpng-dev, libjpeg62-turbo-dev), found by pkg-config;
# IMAGE=0 builds without (k3 --image then says "built without image
# support"). Default: 1 when pkg-config finds both, and for a native build
# only (make windows and make cross-aarch64 pass IMAGE=0).
IMAGE   ?= $(shell pkg-config --exists libpng libjpeg 2>/dev/null && echo 1 || echo 0)
ifeq ($(IMAGE),1)
IMAGE_CFLAGS := -DK3_HAVE_IMAGE $(shell pkg-config --cflags libpng libjpeg)
IMAGE_LIBS   := $(shell pkg-config --libs libpng libjpeg)
endif
# URING=1: the io_uring reader (src/util/os_ring.c, io/read_queue.h) with
# Debian's liburing (liburing-dev), found by pkg-config; URING=0 builds
# without (reads then run on threads, as where the kernel refuses a ring).
# Default: 1 when pkg-config finds it, native builds only (make windows and
# make cross-aarch64 pass URING=0).
URING   ?= $(shell pkg-config --exists liburing 2>/dev/null && echo 1 || echo 0)
ifeq ($(URING),1)
URING_CFLAGS := -DK3_HAVE_URING $(shell pkg-config --cflags liburing)
URING_LIBS   := $(shell pkg-config --libs liburing)
endif
# EDIT=1: the chat's line editor (src/cli/line_input.c: editing keys, history,
# Ctrl-R, bracketed paste) with Debian's libedit (libedit-dev, BSD-licensed),
# found by pkg-config; EDIT=0 builds without (the chat reads plain lines, as
# it always does when stdin is not a terminal). Only bin/k3 links it, never
# libk3. Default: 1 when pkg-config finds it, native builds only (make
# windows and make cross-aarch64 pass EDIT=0).
EDIT    ?= $(shell pkg-config --exists libedit 2>/dev/null && echo 1 || echo 0)
ifeq ($(EDIT),1)
EDIT_CFLAGS := -DK3_HAVE_EDIT $(shell pkg-config --cflags libedit)
EDIT_LIBS   := $(shell pkg-config --libs libedit)
endif
LDLIBS  = -lm -fopenmp -pthread $(IMAGE_LIBS) $(URING_LIBS) $(LDLIBS_OS)
ALL_CFLAGS = $(CFLAGS_BASE) $(IMAGE_CFLAGS) $(URING_CFLAGS) $(OPT) $(CFLAGS)

LIB_SRC  := $(sort $(wildcard src/*/*.c))
LIB_SRC  := $(filter-out src/cli/% src/pack/% src/mpi/%,$(LIB_SRC))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
PACK_SRC := $(sort $(wildcard src/pack/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
# Test programs that gate scripts run with arguments (a model dir, ...).
PROG_SRC := $(sort $(wildcard tests/progs/*.c))

# The chat page of k3 serve (src/server/webui.h), compiled in as a byte
# array generated into $(BUILD)/gen by scripts/embed.sh (never in git).
WEBUI_SRC := src/server/webui/index.html
WEBUI_C   := $(BUILD)/gen/webui_page.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/webui_page.o
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
PACK_OBJ := $(PACK_SRC:%.c=$(BUILD)/%.o)
# EXE: the executables' suffix (.exe for Windows, `make windows`).
EXE      ?=
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%$(EXE))
PROG_BIN := $(PROG_SRC:tests/progs/%.c=$(BUILD)/progs/%$(EXE))
K3_BIN   := $(if $(filter build,$(BUILD)),bin/k3,$(BUILD)/bin/k3$(EXE))

.PHONY: all test check asan ubsan clean demo install portable cross-aarch64
all: $(K3_BIN) $(TEST_BIN) $(PROG_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(WEBUI_C): $(WEBUI_SRC) scripts/embed.sh
	@mkdir -p $(dir $@)
	sh scripts/embed.sh k3_webui_page $(WEBUI_SRC) >$@.tmp && mv $@.tmp $@
$(BUILD)/gen/webui_page.o: $(WEBUI_C)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
$(BUILD)/pic/gen/webui_page.o: $(WEBUI_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -c $< -o $@

# util/xxh3.c inlines Debian's libxxhash-dev header (xxhash.h): searched
# after the compiler's own headers, so cross compilers find it too.
$(BUILD)/src/util/xxh3.o: ALL_CFLAGS += -idirafter /usr/include
$(BUILD)/src/cli/line_input.o: ALL_CFLAGS += $(EDIT_CFLAGS)

$(BUILD)/libk3.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# --version names the release (the VERSION file, also the shared library's
# file name) and, in a git checkout, the commit the binary was built from;
# outside git (a release tarball) the version alone.
K3_VERSION := $(shell cat VERSION)
GIT_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null)
$(BUILD)/src/cli/main.o: ALL_CFLAGS += -DK3_VERSION='"$(K3_VERSION)"' \
	-DK3_GIT_COMMIT='"$(GIT_COMMIT)"'
# main.o is rebuilt when the commit changes: this stamp is rewritten only then.
$(BUILD)/src/cli/main.o: $(BUILD)/commit.stamp
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' >$@
.PHONY: FORCE build-id
FORCE:
# make -s build-id: "VERSION COMMIT" as --version will name them (gate 65).
build-id:
	@echo '$(K3_VERSION) $(GIT_COMMIT)'

$(K3_BIN): $(CLI_OBJ) $(PACK_OBJ) $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $(CLI_OBJ) $(PACK_OBJ) $(BUILD)/libk3.a $(EDIT_LIBS) $(LDLIBS)

$(BUILD)/tests/%$(EXE): tests/unit/%.c $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libk3.a $(LDLIBS)

$(BUILD)/progs/%$(EXE): tests/progs/%.c $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit -MMD -MP -o $@ $< $(BUILD)/libk3.a $(LDLIBS)

# The two ladders (docs/TESTING.md): `make test` leaves out the gates tagged
# `# ladder: check` (tests/run.sh prints which, and its elapsed time);
# `make check` runs them all.
test: all
	@sh scripts/deps.sh test
	K3_LADDER=test K3_BIN=$(K3_BIN) K3_BUILD=$(BUILD) PYTHON=$(PYTHON) sh tests/run.sh
check: all
	@sh scripts/deps.sh test
	K3_LADDER=check K3_BIN=$(K3_BIN) K3_BUILD=$(BUILD) PYTHON=$(PYTHON) sh tests/run.sh

SAN_FLAGS = -fno-omit-frame-pointer -fno-sanitize-recover=all
# SAN_LADDER: which ladder the sanitizer builds run (check: every gate).
SAN_LADDER ?= check
# LSAN_OPTIONS: tests/lsan.supp names the one leak outside k3 (libedit's).
asan:
	LSAN_OPTIONS="suppressions=$(CURDIR)/tests/lsan.supp$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}" \
	$(MAKE) BUILD=build-asan OPT="-O1 -g" CFLAGS="$(SAN_FLAGS) -fsanitize=address,undefined" \
		$(SAN_LADDER)
ubsan:
	$(MAKE) BUILD=build-ubsan OPT="-O1 -g" CFLAGS="$(SAN_FLAGS) -fsanitize=undefined" \
		$(SAN_LADDER)

# The README's first command: build, then run k3-nano (models/k3-nano, a
# small Kimi K3 trained by tools/train_nano.py and committed) on a Python
# prompt and say what was seen (scripts/demo.sh). The tests' random-weight
# models are made by tools/make_checkpoint.py at test time.
demo: $(K3_BIN)
	@sh scripts/deps.sh demo
	@sh scripts/demo.sh --run $(K3_BIN)

# The shared library: the same sources compiled again as position-
# independent code into $(BUILD)/pic (the static library and bin/k3 stay
# non-PIC), linked with its dependencies recorded (libgomp, libm, pthread),
# so `cc prog.c -lk3` needs nothing else. The soname carries the ABI version
# (K3_SOVERSION); the file name the release.
K3_SOVERSION := 0
SHLIB        := $(BUILD)/libk3.so.$(K3_VERSION)
PIC_OBJ      := $(LIB_SRC:%.c=$(BUILD)/pic/%.o) $(BUILD)/pic/gen/webui_page.o
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@
# k3.map exports the public API (include/k3) only: internal names stay local.
$(SHLIB): $(PIC_OBJ) k3.map
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libk3.so.$(K3_SOVERSION) -Wl,--no-undefined \
		-Wl,--version-script,k3.map -o $@ $(PIC_OBJ) $(LDLIBS)
.PHONY: shared
shared: $(SHLIB)

# make install PREFIX=/opt/k3 [DESTDIR=...]: the command, the scripts, the
# libraries (static and shared), the public headers, a pkg-config file
# (k3.pc: `pkg-config --cflags --libs k3`, which also records an rpath to
# LIBDIR so the program runs without LD_LIBRARY_PATH; --static adds what
# libk3.a needs) and the examples. examples/generate.c and examples/chat.c
# build and run against exactly that (tests/gates/07-library.sh).
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
install: $(K3_BIN) $(BUILD)/libk3.a $(SHLIB)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(PREFIX)/include/k3 $(DESTDIR)$(PREFIX)/share/k3/examples
	install -m 755 $(K3_BIN) $(DESTDIR)$(PREFIX)/bin/k3
	install -m 755 scripts/k3-doctor.sh $(DESTDIR)$(PREFIX)/bin/k3-doctor
	install -m 755 scripts/download-model.sh $(DESTDIR)$(PREFIX)/bin/k3-download-model
	install -m 644 $(BUILD)/libk3.a $(DESTDIR)$(LIBDIR)/libk3.a
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/libk3.so.$(K3_VERSION)
	ln -sf libk3.so.$(K3_VERSION) $(DESTDIR)$(LIBDIR)/libk3.so.$(K3_SOVERSION)
	ln -sf libk3.so.$(K3_SOVERSION) $(DESTDIR)$(LIBDIR)/libk3.so
	install -m 644 include/k3/*.h $(DESTDIR)$(PREFIX)/include/k3/
	install -m 644 examples/generate.c examples/chat.c $(DESTDIR)$(PREFIX)/share/k3/examples/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@VERSION@|$(K3_VERSION)|' \
		-e 's|@IMAGE_LIBS@|$(IMAGE_LIBS)|; s|@URING_LIBS@|$(URING_LIBS)|' \
		k3.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/k3.pc

# make portable: no -march anywhere. The default build has none either: the
# x86 SIMD tables carry their own target attributes and are picked at run
# time (src/core/dispatch.c), so one binary runs on any x86-64.
portable:
	$(MAKE) BUILD=build-portable all

# make cross-aarch64: static aarch64 binaries in build-aarch64/, for
# qemu-aarch64 (tests/gates/60-aarch64.sh). -fno-tree-vectorize avoids an
# internal compiler error of Debian's gcc 12 cross compiler on a test file;
# it cannot change a bit (without -ffast-math gcc never reorders float sums).
cross-aarch64:
	$(MAKE) BUILD=build-aarch64 CC=aarch64-linux-gnu-gcc OPT="-O2 -g -fno-tree-vectorize" \
		CFLAGS=-static IMAGE=0 URING=0 EDIT=0 all

# ---- Windows (issue 21): a mingw-w64 cross build in build-win/, static (the
# .exe needs no DLLs: libgomp, winpthreads, libgcc linked in), and its suite
# under Wine (tests/windows/run.sh; not part of `make test`). The native
# MSYS2 build is `make windows WIN_CC=gcc` in its MINGW64 shell (README, "Windows").
WIN_CC     ?= x86_64-w64-mingw32-gcc
# C99 printf (%zu, %lld) from mingw's own stdio instead of msvcrt's.
WIN_CFLAGS  = -static -D__USE_MINGW_ANSI_STDIO=1
WIN_LIBS    = -lws2_32 -lpsapi -lshell32
# What the Wine suite runs (the unit tests that need no fork, Unix sockets
# or POSIX-only test helpers).
WIN_TESTS   = test_simd test_kernels test_fixtures test_xxh64 test_parsers
WIN_PROGS   =
.PHONY: windows test-windows
windows:
	$(MAKE) BUILD=build-win CC=$(WIN_CC) EXE=.exe CFLAGS="$(WIN_CFLAGS)" IMAGE=0 URING=0 EDIT=0 \
		LDLIBS_OS="$(WIN_LIBS)" build-win/bin/k3.exe \
		$(WIN_TESTS:%=build-win/tests/%.exe) $(WIN_PROGS:%=build-win/progs/%.exe)
	cp build-win/bin/k3.exe build-win/k3.exe
test-windows: windows $(K3_BIN)
	@sh scripts/deps.sh windows
	K3_BIN=$(K3_BIN) PYTHON=$(PYTHON) WIN_TESTS="$(WIN_TESTS)" sh tests/windows/run.sh

clean:
	rm -rf build build-* bin

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(PACK_OBJ:.o=.d) $(TEST_BIN:=.d) $(PROG_BIN:=.d) \
	$(PIC_OBJ:.o=.d)

# ---- fuzzing: replay drivers in `all`, and `make fuzz` (see tests/fuzz/fuzz.mk) ----
include tests/fuzz/fuzz.mk

# ---- MPI (docs/SCALE.md): `make MPI=1` also builds bin/k3-mpi with $(MPICC);
# `make test-mpi` runs tests/mpi/run.sh (not part of make test). Only
# src/mpi/*.c and a second compile of src/cli/main.c (main renamed
# k3_cli_main) see MPI; libk3.a and bin/k3 never do. ----
MPICC    ?= mpicc
MPI_SRC  := $(sort $(wildcard src/mpi/*.c))
MPI_OBJ  := $(MPI_SRC:%.c=$(BUILD)/%.o)
MPI_BIN  := $(if $(filter build,$(BUILD)),bin/k3-mpi,$(BUILD)/bin/k3-mpi)
MPI_CLI_OBJ := $(filter-out $(BUILD)/src/cli/main.o,$(CLI_OBJ)) $(BUILD)/src/mpi/cli/main.o
ifeq ($(MPI),1)
all: $(MPI_BIN)
endif
$(MPI_OBJ): $(BUILD)/src/mpi/%.o: src/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/src/mpi/cli/main.o: src/cli/main.c $(BUILD)/commit.stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DK3_GIT_COMMIT='"$(GIT_COMMIT)"' -Dmain=k3_cli_main \
		-include src/mpi/cli_main.h -MMD -MP -c $< -o $@
$(MPI_BIN): $(MPI_OBJ) $(MPI_CLI_OBJ) $(PACK_OBJ) $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -o $@ $(MPI_OBJ) $(MPI_CLI_OBJ) $(PACK_OBJ) $(BUILD)/libk3.a $(EDIT_LIBS) \
		$(LDLIBS)
.PHONY: mpi test-mpi test-mpich
mpi: $(MPI_BIN)
# The fault-shim k3-mpi for test-mpi: src/io/fault.c again with
# -DK3_FAULT_INJECTION, linked ahead of libk3.a (whose fault.o it replaces).
MPI_FAULT_BIN := $(BUILD)/mpi-fault/k3-mpi
$(BUILD)/mpi-fault/fault.o: src/io/fault.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DK3_FAULT_INJECTION -MMD -MP -c $< -o $@
$(MPI_FAULT_BIN): $(MPI_OBJ) $(MPI_CLI_OBJ) $(PACK_OBJ) $(BUILD)/mpi-fault/fault.o $(BUILD)/libk3.a
	$(MPICC) $(ALL_CFLAGS) -o $@ $(MPI_OBJ) $(MPI_CLI_OBJ) $(PACK_OBJ) \
		$(BUILD)/mpi-fault/fault.o $(BUILD)/libk3.a $(EDIT_LIBS) $(LDLIBS)
test-mpi: $(K3_BIN) $(MPI_BIN) $(MPI_FAULT_BIN)
	K3_BIN=$(K3_BIN) K3_MPI_BIN=$(MPI_BIN) K3_MPI_FAULT_BIN=$(MPI_FAULT_BIN) K3_BUILD=$(BUILD) \
		K3_MODELS=$(BUILD)/models PYTHON=$(PYTHON) sh tests/mpi/run.sh
# MPICH (Debian's mpich, libmpich-dev): bin/k3-mpi built with mpicc.mpich in
# build-mpich/, checked against bin/k3 by tests/mpi/mpich.sh (short; the full
# test-mpi runs with Open MPI, Debian's default MPI).
MPICH_BUILD := build-mpich
test-mpich: $(K3_BIN)
	$(MAKE) MPI=1 MPICC=mpicc.mpich BUILD=$(MPICH_BUILD) $(MPICH_BUILD)/bin/k3-mpi
	K3_BIN=$(K3_BIN) K3_MPI_BIN=$(MPICH_BUILD)/bin/k3-mpi K3_BUILD=$(BUILD) \
		K3_MODELS=$(BUILD)/models PYTHON=$(PYTHON) sh tests/mpi/mpich.sh
-include $(MPI_OBJ:.o=.d) $(BUILD)/src/mpi/cli/main.d
include benchmarks/bench.mk
