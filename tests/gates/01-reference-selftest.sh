# 01-reference-selftest: the float64 reference checks itself (full vs
# incremental to 1e-9, MXFP4/BF16 rounding, config strictness, diagnostics
# that every path of the test checkpoints matters). See tests/ref/.
. tests/gates/lib.sh
"$PYTHON" tests/ref/test_reference.py
