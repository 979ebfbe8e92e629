# 63-prefix-cache-full: gate 62 at full size: four conversations, a
# restart per kind of damaged cache file over every file (truncated,
# another namespace, another model's, a flipped byte, the checksum's own
# bytes), three conversations of three turns on the slots
# (tests/gates/prefix_gate.sh).
# ladder: check
PREFIX_FULL=1
. tests/gates/prefix_gate.sh
