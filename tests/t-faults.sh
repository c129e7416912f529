#!/bin/bash
# Injected lower errors (KVT_FAULTS, src/fault.h): the daemon runs with a
# fault layer in its door to the lower disk that fails chosen lower calls,
# one class of fault per case:
#   stage-write    the bytes of a block written to staging (EIO)
#   stage-create   the staged file of a new block (ENOSPC)
#   object-link    the links that make the staged bytes an object (EIO)
#   record-rename  the record's rename onto the block's name (ENOSPC)
#   record-write   the record written to staging (EIO)
#   fsync          the object's bytes at a client's fsync (EIO)
#   verify-read    the object read to verify it before it is served (EIO)
#   list           the lower listing behind a readdir (EIO)
# Each case runs vLLM's store (and load) with faults at a rate, and
# check: the client gets an error for the affected blocks only (as many as
# the faults the daemon counted, or for faults that may miss, at most that
# many and at least one), every other block works; the daemon stays up and
# unmounts cleanly with no ERROR line; kvtierfs-fsck finds the unmounted
# store clean (a fault is not a crash: no orphan object, no torn or
# half-published name, no staging left); after a remount without faults
# exactly the blocks the client saw stored are there and read back
# byte-exact, the failed ones are absent, no *.tmp is visible, and storing
# the failed ones again works.
#
# Environment (scripts/stress sets them for longer runs; raise KVT_TIMEOUT
# of tests/run too):
#   KVT_FAULT_RATE    one fault in N matching lower calls (default 5)
#   KVT_FAULT_SEED    unset: every Nth call; set: each call with
#                     probability 1/N, drawn from this seed
#   KVT_FAULT_BLOCKS  blocks per round (default 64)
#   KVT_FAULT_ROUNDS  store/load rounds with faults per case (default 1)
#   KVT_FAULT_SIZE    block size, kvclient's suffixes (default 2M)
#   KVT_FAULT_CASES   the cases to run, by name (default: all, as above)
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
: "${KVT_FAULT_RATE:=5}"
: "${KVT_FAULT_SEED:=}"
: "${KVT_FAULT_BLOCKS:=64}"
: "${KVT_FAULT_ROUNDS:=1}"
: "${KVT_FAULT_SIZE:=2M}"
: "${KVT_FAULT_CASES:=stage-write stage-create object-link record-rename record-write fsync verify-read list}"
R=$KVT_FAULT_RATE
B=$KVT_FAULT_BLOCKS
ROUNDS=$KVT_FAULT_ROUNDS
SIZE=$KVT_FAULT_SIZE

kvt_require_root
for c in $KVT_FAULT_CASES; do
	case $c in
	stage-write | stage-create | object-link | record-rename | record-write | fsync | verify-read | list) ;;
	*) bail "KVT_FAULT_CASES: unknown case '$c'" ;;
	esac
done
# test points: per case 16, and per round 4 (store) or 3 (load, list);
# load and list cases store on the clean mount first (1 more)
n=0
for c in $KVT_FAULT_CASES; do
	case $c in
	verify-read | list) n=$((n + 17 + 3 * ROUNDS)) ;;
	*) n=$((n + 16 + 4 * ROUNDS)) ;;
	esac
done
plan $n
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"

# when: the condition that picks the faulting calls (rate and mode).
when() {
	if [ -n "$KVT_FAULT_SEED" ]; then
		echo "p=1/$R"
	else
		echo "every=$R"
	fi
}

# mount_faults SPEC: mount $LOWER with KVT_FAULTS=SPEC (the daemon reads
# it at start; nothing else here does).
mount_faults() {
	export KVT_FAULTS=$1
	kvt_mount
	unset KVT_FAULTS
}

# fault_counts: "FAULTS CALLS" summed over the rules, from the line per
# rule the daemon logged at exit ($T/.log.part: the last daemon's log).
fault_counts() {
	sed -n 's/^kvtierfs: fault injection: .*: \([0-9]*\) faults in \([0-9]*\) calls$/\1 \2/p' \
		"$T/.log.part" | awk '{ f += $1; c += $2; n++ } END { if (n) print f, c }'
}

# fsck_clean: kvtierfs-fsck finds $LOWER clean (one test point).
fsck_clean() {
	local out rc
	out=$("$KVTIERFS_FSCK" "$LOWER" 2>&1)
	rc=$?
	[ "$rc" = 0 ] && [[ "$(tail -n 1 <<<"$out")" == *" 0 problems" ]]
	ok $? "$1: kvtierfs-fsck finds the unmounted store clean (exit $rc: $(tail -n 1 <<<"$out"))"
	[ "$rc" = 0 ] || diag "$out"
}

# failed_keys FILE: the keys of kvclient's "<key> <step> <outcome>" lines.
failed_keys() {
	awk '$1 ~ /^[0-9]+$/ && NF == 3 { print $1 }' "$1" | sort -n
}

# wrong_lines FILE STEPS OUTCOMES: those of its lines whose step or
# outcome does not match the regexes (at most 3).
wrong_lines() {
	awk -v s="^($2)\$" -v e="^($3)\$" \
		'$1 ~ /^[0-9]+$/ && NF == 3 && ($2 !~ s || $3 !~ e)' "$1" | head -n 3
}

# Each round sets $ROUND_FAILED (blocks or listings that failed) and
# appends the keys that must be absent afterwards to $T/failed.all.

# round_store R STEPS ERRNOS [STORE-OPTS...]: vLLM stores under faults,
# then loads (4 test points).
round_store() {
	local r=$1 steps=$2 errs=$3 kb=$(($1 * B)) stored failed bad n
	shift 3
	ok_kvclient "$name: round $r: vllm-store of $B blocks under faults" \
		vllm-store --dir "$MNT" --blocks "$B" --key-base $kb --size "$SIZE" \
		--threads 16 --report "$@"
	stored=$(sed -n 's/.* stored=\([0-9]*\) .*/\1/p' "$KVT_OUT")
	failed=$(sed -n 's/.* failed=\([0-9]*\) .*/\1/p' "$KVT_OUT")
	failed_keys "$KVT_OUT" >"$T/failed"
	bad=$(wrong_lines "$KVT_OUT" "$steps" "$errs")
	[ -n "$stored" ] && [ -n "$failed" ] && [ -z "$bad" ] &&
		[ $((stored + failed)) = "$B" ] && [ "$(wc -l <"$T/failed")" = "$failed" ]
	ok $? "$name: round $r: ${stored:-?} stored, ${failed:-?} failed, each at $steps with $errs${bad:+ (not: $bad)}"
	ROUND_FAILED=${failed:-0}
	# after a failed fsync the block is there (the rename was done)
	[ "$steps" = fsync ] && : >"$T/failed"
	cat "$T/failed" >>"$T/failed.all"
	ok_kvclient "$name: round $r: vllm-load under faults" \
		vllm-load --dir "$MNT" --blocks "$B" --key-base $kb --size "$SIZE" \
		--threads 16 --report
	failed_keys "$KVT_OUT" >"$T/notloaded"
	n=$(awk '$1 ~ /^[0-9]+$/ && NF == 3 && !($2 == "access" && $3 == "enoent")' "$KVT_OUT" | wc -l)
	[ "$n" = 0 ] && cmp -s "$T/notloaded" "$T/failed"
	ok $? "$name: round $r: every stored block loads byte-exact, exactly the failed ones are absent ($(wc -l <"$T/notloaded") not loaded)"
}

# round_load R STEPS OUTCOMES: loads under faults of what a clean mount
# stored (3 test points).
round_load() {
	local r=$1 steps=$2 outs=$3 kb=$(($1 * B)) bad n p left
	ok_kvclient "$name: round $r: vllm-load of $B blocks under faults" \
		vllm-load --dir "$MNT" --blocks "$B" --key-base $kb --size "$SIZE" \
		--threads 16 --report
	failed_keys "$KVT_OUT" >"$T/notloaded"
	n=$(wc -l <"$T/notloaded")
	bad=$(wrong_lines "$KVT_OUT" "$steps" "$outs")
	[ -z "$bad" ] && grep -q " ok=$((B - n)) enoent=0 eio=$n " "$KVT_OUT"
	ok $? "$name: round $r: $n loads failed, each at $steps with $outs${bad:+ (not: $bad)}; the others read back byte-exact"
	ROUND_FAILED=$n
	# an error reading an object is no verdict on it: nothing is purged
	left=0
	while read -r p; do
		kvt_run test -f "$MNT/$p" && left=$((left + 1))
	done < <(while read -r k; do "$KVCLIENT" paths --dir "$MNT" --key-base "$k" --blocks 1; done \
		<"$T/notloaded")
	[ "$left" = "$n" ] && kvt_run kill -0 "$KVT_PID"
	ok $? "$name: round $r: the daemon is up, and the $n blocks whose load failed are still there ($left)"
}

# round_list R: lists the mount under faults (3 test points).
round_list() {
	local r=$1 st n all found
	LC_ALL=C kvt_guard find "$MNT" -name '*.bin' >"$T/found" 2>"$T/find.err"
	st=$?
	n=$(grep -c "': Input/output error\$" "$T/find.err")
	all=$(wc -l <"$T/find.err")
	found=$(wc -l <"$T/found")
	[ "$st" != 0 ] && [ "$n" -ge 1 ] && [ "$n" = "$all" ]
	ok $? "$name: round $r: find under faults: $n directories could not be listed (EIO), $found blocks found"
	[ "$n" = "$all" ] || diag_file "$T/find.err" 5
	ROUND_FAILED=$n
	ok_kvclient "$name: round $r: vllm-load of every block works meanwhile" \
		vllm-load --dir "$MNT" --blocks $((B * ROUNDS)) --size "$SIZE" --threads 16
	kvt_run kill -0 "$KVT_PID"
	ok $? "$name: round $r: the daemon is up"
}

# run_case NAME SPEC PHASE RELATION STEPS OUTCOMES [STORE-OPTS...]
# PHASE: store (faults while storing, and loading), load (faults while
# loading what a clean mount stored), list (faults while listing it).
# RELATION: exact (each fault fails one block or listing) or atmost (a
# fault may miss, or two may meet one block: at least one, at most as many
# as the faults).
run_case() {
	local phase=$3 rel=$4 r failed=0 f calls total=$((B * ROUNDS)) absent present left
	local spec=$2
	name=$1
	[ -n "$KVT_FAULT_SEED" ] && spec="seed=$KVT_FAULT_SEED,$spec"
	diag "--- $name: KVT_FAULTS=$spec"
	kvt_new_lower
	: >"$T/failed.all"
	# the store exists before the faults begin (its creation syncs,
	# writes and renames too)
	kvt_mount
	[ "$phase" = store ] ||
		ok_kvclient "$name: a clean mount stores $total blocks" \
			vllm-store --dir "$MNT" --blocks "$total" --size "$SIZE" --threads 16
	kvt_umount
	mount_faults "$spec"
	for ((r = 0; r < ROUNDS; r++)); do
		case $phase in
		store) round_store "$r" "$5" "$6" "${@:7}" ;;
		load) round_load "$r" "$5" "$6" ;;
		list) round_list "$r" ;;
		esac
		failed=$((failed + ROUND_FAILED))
	done
	kvt_umount
	read -r f calls < <(fault_counts)
	if [ "$rel" = exact ]; then
		[ -n "$f" ] && [ "$f" -ge 1 ] && [ "$failed" = "$f" ]
	else
		[ -n "$f" ] && [ "$failed" -ge 1 ] && [ "$failed" -le "$f" ]
	fi
	ok $? "$name: the daemon injected ${f:-no} faults in ${calls:-no} calls; $failed failed ($rel)"
	fsck_clean "$name"
	left=$(find "$LOWER/names" "$LOWER/staging" -mindepth 1 \
		\( -name '*.tmp' -o -path "$LOWER/staging/*" \) 2>&1 | head -n 5)
	[ -z "$left" ]
	ok $? "$name: no *.tmp under names/, nothing under staging/${left:+: $left}"

	kvt_mount
	absent=$(wc -l <"$T/failed.all")
	present=$((total - absent))
	ok_kvclient "$name: remounted without faults: vllm-load of all $total keys" \
		vllm-load --dir "$MNT" --blocks "$total" --size "$SIZE" --threads 16 --report
	failed_keys "$KVT_OUT" >"$T/notloaded"
	sort -n "$T/failed.all" >"$T/failed.sorted"
	grep -q " ok=$present enoent=$absent eio=0 " "$KVT_OUT" &&
		cmp -s "$T/notloaded" "$T/failed.sorted"
	ok $? "$name: exactly the $present blocks the client saw stored read back byte-exact, the $absent failed ones are absent"
	ok_kvclient "$name: verify: exactly $present complete blocks, no *.tmp" \
		verify --dir "$MNT" --expect "$present" --size "$SIZE" --no-tmp --threads 16
	ok_kvclient "$name: storing all $total again" \
		vllm-store --dir "$MNT" --blocks "$total" --size "$SIZE" --threads 16
	grep -q " stored=$absent skipped=$present " "$KVT_OUT"
	ok $? "$name: the $absent failed blocks are stored now, the $present others skipped"
	ok_kvclient "$name: all $total load byte-exact" \
		vllm-load --dir "$MNT" --blocks "$total" --size "$SIZE" --threads 16
	kvt_umount
	fsck_clean "$name: after the run without faults"
}

for c in $KVT_FAULT_CASES; do
	case $c in
	stage-write)
		# the probe's write (call 1) stays whole: vLLM would fall back
		# to buffered I/O
		run_case "$c" "write:EIO:$(when):after=1:name=d.*" store atmost 'write|rename' EIO ;;
	stage-create)
		run_case "$c" "create:ENOSPC:$(when):after=1:name=d.*" store exact open ENOSPC ;;
	object-link)
		# Three links a block, the third (the anchor's) may fail
		# without failing the store.  Calls drawn at random (seed 1
		# unless KVT_FAULT_SEED says): every Nth call would, with the
		# stores mostly in sequence, hit the same link of each block.
		KVT_FAULT_SEED=${KVT_FAULT_SEED:-1} \
			run_case "$c" "link:EIO:p=1/$R" store atmost rename EIO ;;
	record-rename)
		run_case "$c" "rename:ENOSPC:$(when):name=*.bin" store exact rename ENOSPC ;;
	record-write)
		run_case "$c" "write:EIO:$(when):name=n.*" store exact rename EIO ;;
	fsync)
		# the object's bytes (its reference's name; not the record
		# *.bin, nor a directory, which have one of their own each)
		run_case "$c" "sync:EIO:$(when):name=!*.bin" store exact fsync EIO --fsync ;;
	verify-read)
		run_case "$c" "read:EIO:$(when):name=!*.bin" load exact open eio ;;
	list)
		run_case "$c" "list:EIO:$(when):name=*.bin" list exact - - ;;
	esac
done
