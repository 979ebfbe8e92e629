# 02-fixtures-current: the committed kernel fixtures are exactly what the
# reference computes today (regenerated and compared byte for byte).
. tests/gates/lib.sh
"$PYTHON" tools/make_kernel_fixtures.py "$K3_BUILD/kernels.json"
cmp "$K3_BUILD/kernels.json" tests/fixtures/kernels.json ||
    die "tests/fixtures/kernels.json is stale: run tools/make_kernel_fixtures.py"
echo "tests/fixtures/kernels.json matches the reference"
