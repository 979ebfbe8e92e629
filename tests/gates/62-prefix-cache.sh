# 62-prefix-cache: k3 serve's prefix cache, reuse = cold bit for bit
# across eviction, spill, restart, damaged cache files, slots and
# speculation (the fast cut; tests/gates/prefix_gate.sh says what it checks).
. tests/gates/prefix_gate.sh
