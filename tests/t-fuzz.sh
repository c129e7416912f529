#!/bin/bash
# The libFuzzer harnesses of tests/fuzz/ through scripts/fuzz, short: each
# target replays its seed corpus (valid inputs, and the inputs that once
# found a bug), then is fuzzed for KVT_FUZZ_SECONDS (10) from it.  No
# crash, leak, hang or failed harness check; and each run ran for real
# (thousands of inputs, some coverage), so that a broken harness cannot
# pass.  Needs clang and libclang-rt-14-dev (scripts/install-deps).
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"

targets=(record marker options)
: "${KVT_FUZZ_SECONDS:=10}"

command -v clang >/dev/null ||
	{ echo "1..0 # SKIP clang is missing (scripts/install-deps)"; exit 0; }
plan $((2 * ${#targets[@]}))

W=$(mktemp -d "${TMPDIR:-/tmp}/kvt-fuzz.XXXXXX") || bail "mktemp failed"
trap 'rm -rf --one-file-system "$W"' EXIT
# its own build and working corpus: the tree's build-fuzz/ stays as it was
export KVT_FUZZ_DIR=$W/build

"$top_srcdir/scripts/fuzz" --replay >"$W/replay.out" 2>&1
replay_rc=$?
for t in "${targets[@]}"; do
	line=$(grep -m1 "^fuzz: $t: " "$W/replay.out")
	n=$(find "$top_srcdir/tests/fuzz/corpus/$t" -type f | wc -l)
	[[ "$line" == "fuzz: $t: $n seed inputs replayed: nothing found" ]]
	ok $? "$t: the $n inputs of tests/fuzz/corpus/$t/ run clean"
done
[ "$replay_rc" = 0 ] || diag_file "$W/replay.out" 80

"$top_srcdir/scripts/fuzz" --time "$KVT_FUZZ_SECONDS" >"$W/fuzz.out" 2>&1
fuzz_rc=$?
for t in "${targets[@]}"; do
	line=$(grep -m1 "^fuzz: $t: " "$W/fuzz.out")
	runs=$(sed -n 's/.* \([0-9][0-9]*\) runs, cov: \([0-9][0-9]*\),.*nothing found$/\1/p' <<<"$line")
	cov=$(sed -n 's/.* runs, cov: \([0-9][0-9]*\),.*nothing found$/\1/p' <<<"$line")
	[ -n "$runs" ] && [ "$runs" -ge 1000 ] && [ "$cov" -gt 0 ]
	ok $? "$t: fuzzed ${KVT_FUZZ_SECONDS}s: ${runs:-?} inputs, coverage ${cov:-?}, nothing found"
done
[ "$fuzz_rc" = 0 ] || diag_file "$W/fuzz.out" 120
