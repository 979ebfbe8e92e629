# fuzz.mk - fuzz targets (tests/fuzz/fuzz_*.c), included by the Makefile.
#
#   every build   $(BUILD)/fuzz/replay_NAME: each target with the plain main of
#                 tests/fuzz/replay.c, built with the build's own compiler and
#                 flags (so `make asan` replays under ASan + UBSan); the gate
#                 tests/gates/70-fuzz-regressions.sh runs them.
#   make fuzz     builds the targets with clang's libFuzzer, ASan and UBSan in
#                 $(FUZZ_BUILD) and runs each for FUZZ_SECONDS (default 60)
#                 through tests/fuzz/run.sh, which prints execution counts and
#                 saves every finding under tests/fuzz/regressions/NAME/.
#                 FUZZ_TARGETS="json config" limits the run to some targets.

FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES   := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY  := $(FUZZ_NAMES:%=$(BUILD)/fuzz/replay_%)
FUZZ_C       := tests/fuzz/util.c tests/fuzz/text.c
FUZZ_COMMON  := $(FUZZ_C) tests/fuzz/fuzz.h

all: $(FUZZ_REPLAY)

# Targets whose code is not in libk3.a link its objects too.
$(BUILD)/fuzz/replay_history $(BUILD)/fuzz/fuzz_history: $(BUILD)/src/cli/history.o

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(FUZZ_COMMON) $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/fuzz -o $@ $< tests/fuzz/replay.c $(FUZZ_C) \
		$(filter %.o,$^) $(BUILD)/libk3.a $(LDLIBS)

# libFuzzer binaries: only meaningful in a build made by `make fuzz` (clang,
# objects instrumented with -fsanitize=fuzzer-no-link).
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_COMMON) $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< $(FUZZ_C) \
		$(filter %.o,$^) $(BUILD)/libk3.a $(LDLIBS)

FUZZ_SECONDS ?= 60
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_FLAGS    = -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
		-fno-omit-frame-pointer -fsanitize-coverage-ignorelist=tests/fuzz/coverage.ignore

# The flags are not tracked by make: objects of the fuzz build are rebuilt
# when the ignore list changes.
ifeq ($(BUILD),$(FUZZ_BUILD))
$(LIB_OBJ) $(CLI_OBJ) $(PACK_OBJ): tests/fuzz/coverage.ignore
endif

.PHONY: fuzz
fuzz: $(K3_BIN)
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) OPT="-O2 -g" CFLAGS="$(FUZZ_FLAGS)" \
		$(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/fuzz_%)
	$(PYTHON) tests/fuzz/make_seeds.py $(FUZZ_BUILD) --k3 $(K3_BIN)
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TARGETS)
