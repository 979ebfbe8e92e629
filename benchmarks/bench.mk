# ---- make bench: k3's speed against this machine's ceilings ----
# Included by the Makefile. Builds the ceilings probe (benchmarks/peak.c)
# and the kernel timer (benchmarks/kernels.c), both linked with libk3.a, and
# runs benchmarks/bench.sh, which makes the "slice" checkpoint once
# (K3_SLICE_DIR, default build/slice, ~7.6 GB; benchmarks/checkpoint.sh) and
# writes $(BUILD)/bench/report.md.
# make plots: benchmarks/plots.sh, seconds per token against the memory
# budget (k3 --budget-gb) and the expert-cache hit rate against its
# capacity, as gnuplot SVG/PNG in $(BUILD)/plots (K3_PLOTS_DOCS=1 copies
# them to docs/plots/). Needs gnuplot (sh scripts/deps.sh plots); make test
# never runs it.
BENCH_BIN := $(BUILD)/bench/peak $(BUILD)/bench/kernels $(BUILD)/bench/codec_decode \
	$(BUILD)/bench/io_depth $(BUILD)/bench/grammar_bench $(BUILD)/bench/expert_order

$(BUILD)/bench/%: benchmarks/%.c $(BUILD)/libk3.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libk3.a $(LDLIBS)

.PHONY: bench
bench: $(K3_BIN) $(BENCH_BIN)
	K3_BIN=$(K3_BIN) K3_BUILD=$(BUILD) PYTHON=$(PYTHON) CC="$(CC)" sh benchmarks/bench.sh

# make bench-codec: benchmarks/codec_bench.sh alone (the lossless trunk,
# plain against compressed; bench.sh runs it too).
.PHONY: bench-codec
bench-codec: $(K3_BIN) $(BUILD)/tests/test_codec $(BUILD)/bench/codec_decode
	K3_BIN=$(K3_BIN) K3_BUILD=$(BUILD) PYTHON=$(PYTHON) sh benchmarks/codec_bench.sh

# make bench-io: benchmarks/io_bench.sh alone (the io_uring reader against
# the threads reader and the disk; bench.sh runs it too).
.PHONY: bench-io
bench-io: $(K3_BIN) $(BUILD)/bench/io_depth
	K3_BIN=$(K3_BIN) K3_BUILD=$(BUILD) PYTHON=$(PYTHON) sh benchmarks/io_bench.sh

# make bench-experts: benchmarks/expert_order_bench.sh (ready-order expert
# compute against the batch order on the slice, experts streamed).
.PHONY: bench-experts
bench-experts: $(BUILD)/bench/expert_order
	K3_BUILD=$(BUILD) PYTHON=$(PYTHON) sh benchmarks/expert_order_bench.sh

.PHONY: plots
plots: $(K3_BIN)
	K3_BIN=$(K3_BIN) K3_BUILD=$(BUILD) PYTHON=$(PYTHON) sh benchmarks/plots.sh

-include $(BENCH_BIN:=.d)
