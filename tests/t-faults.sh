#!/bin/bash
# Injected lower errors (KVT_FAULTS, src/store/fault.h): the daemon runs with a
# fault layer in its door to the lower disk that fails chosen lower calls,
# one class of fault per case:
#   stage-write    the bytes of a block written to staging (EIO)
#   stage-create   the staged file of a new block (ENOSPC)
#   object-link    the links that make the staged bytes an object (EIO)
#   record-rename  the record's rename onto the block's name (ENOSPC)
#   record-write   the record written to staging (EIO)
#   fsync          the object's bytes at a client's fsync (EIO)
#   verify-read    the object read to verify it before it is served (EIO)
#   verify-stale   the same read answered ESTALE, as a network file system
#                  does when another host changed a name: no verdict on
#                  the object (the load fails with EIO, nothing is purged)
#   list           the lower listing behind a readdir (EIO)
#   inplace-write  files written under their own names (LMCache), their
#                  bytes written to staging (EIO): a file whose close()
#                  failed is never read (its staged bytes may have a hole)
#   lookup-eio     a lookup's stat while a published file is rewritten
#                  in place (EIO): the writer's close() that succeeds has
#                  published its version (a lookup took the name for gone
#                  and the close published nothing)
#   trunc-failed   a truncate(2) by path after a close() whose publication
#                  failed (the rename onto the name, EIO), while another
#                  descriptor still holds the file open for writing: the
#                  truncate is published (it was left to a writer whose
#                  close had already failed, and so was never published)
#   stage-unlink   the staged file of a publication cannot be unlinked
#                  (EIO), then the name is replaced: the first version's
#                  object goes with its record all the same, no object is
#                  left that no name uses
# The first nine run vLLM's store (and load) with faults at a rate, and
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
#   KVT_FAULT_FILES   files written by inplace-write and lookup-eio
#                     (default 12)
# kvt-kind: faults
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
: "${KVT_FAULT_RATE:=5}"
: "${KVT_FAULT_SEED:=}"
: "${KVT_FAULT_BLOCKS:=64}"
: "${KVT_FAULT_ROUNDS:=1}"
: "${KVT_FAULT_SIZE:=2M}"
: "${KVT_FAULT_CASES:=stage-write stage-create object-link record-rename record-write fsync verify-read verify-stale list inplace-write lookup-eio trunc-failed stage-unlink}"
: "${KVT_FAULT_FILES:=12}"
R=$KVT_FAULT_RATE
B=$KVT_FAULT_BLOCKS
ROUNDS=$KVT_FAULT_ROUNDS
SIZE=$KVT_FAULT_SIZE

kvt_require_root
for c in $KVT_FAULT_CASES; do
	case $c in
	stage-write | stage-create | object-link | record-rename | record-write | fsync | verify-read | verify-stale | list | inplace-write | lookup-eio | trunc-failed | stage-unlink) ;;
	*) bail "KVT_FAULT_CASES: unknown case '$c'" ;;
	esac
done
# test points: per case 17, and per round 4 (store) or 3 (load, list);
# load and list cases store on the clean mount first (1 more)
n=0
for c in $KVT_FAULT_CASES; do
	case $c in
	verify-read | verify-stale | list) n=$((n + 18 + 3 * ROUNDS)) ;;
	lookup-eio) n=$((n + 7)) ;;
	trunc-failed) n=$((n + 10)) ;;
	stage-unlink) n=$((n + 7)) ;;
	inplace-write) n=$((n + 8)) ;;
	*) n=$((n + 17 + 4 * ROUNDS)) ;;
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
	local r=$1 steps=$2 errs=$3 kb=$(($1 * B)) stored failed bad n probes
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
	# a fault may fail the client's O_DIRECT probe instead of a block
	# (it then stores with buffered I/O, as vLLM does)
	probes=$(awk -v e="^($errs)\$" '$1 == "probe" && $3 ~ e' "$KVT_OUT" | wc -l)
	ROUND_FAILED=$((${failed:-0} + probes))
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
	lower_errors=$(kvt_stat "$MNT" lower_errors)
	kvt_umount
	read -r f calls < <(kvt_fault_counts)
	if [ "$rel" = exact ]; then
		[ -n "$f" ] && [ "$f" -ge 1 ] && [ "$failed" = "$f" ]
	else
		[ -n "$f" ] && [ "$failed" -ge 1 ] && [ "$failed" -le "$f" ]
	fi
	ok $? "$name: the daemon injected ${f:-no} faults in ${calls:-no} calls; $failed failed ($rel)"
	lines=$(grep -c "warning: lower file system: .*(errno [0-9]*)" "$T/.log.part")
	[ -n "$f" ] && [ "$lower_errors" = "$f" ] && [ "$lines" -ge 1 ] &&
		{ [ "$f" -lt 10 ] || [ "$lines" -lt "$f" ]; }
	ok $? "$name: each fault counted as a failure of the lower file system (lower_errors $lower_errors), logged with its errno in $lines line(s)"
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

# inplace_write SPEC: files f<i>.pt written under their own names in
# pieces at increasing offsets (LMCache; one perl process each, which
# reports whether its close() succeeded), some pieces failing.  A file
# whose close() failed was never published: reading it gets an error and
# no byte (its staged bytes may have a hole where a write failed), and
# after a remount it is gone; every other file reads back exactly.
inplace_write() {
	local n=$KVT_FAULT_FILES spec=$1 i f out ok_files=() failed_files=() bad=()
	name=inplace-write
	[ -n "$KVT_FAULT_SEED" ] && spec="seed=$KVT_FAULT_SEED,$spec"
	diag "--- $name: KVT_FAULTS=$spec"
	kvt_new_lower
	mount_faults "$spec"
	for ((i = 0; i < n; i++)); do
		f=$MNT/f$i.pt
		out=$(kvt_run perl -e '
			open(my $f, ">", $ARGV[0]) or die "open: $!\n";
			for my $k (0 .. 3) {
				sysseek($f, $k * 262144, 0);
				syswrite($f, chr(97 + $k) x 262144);
			}
			print close($f) ? "closed\n" : "failed $!\n";' "$f" 2>&1)
		perl -e 'print chr(97 + $_) x 262144 for 0 .. 3' >"$T/want$i"
		case $out in
		closed) ok_files+=("$i") ;;
		failed*) failed_files+=("$i") ;;
		*) bad+=("f$i.pt: $out") ;;
		esac
	done
	[ ${#failed_files[@]} -ge 1 ] && [ ${#bad[@]} = 0 ]
	ok $? "$name: ${#ok_files[@]} files closed, ${#failed_files[@]} closes failed (EIO)${bad:+; ${bad[*]}}"
	for i in "${failed_files[@]}"; do
		out=$(kvt_run cat "$MNT/f$i.pt" 2>/dev/null | wc -c)
		[ "$out" = 0 ] && ! kvt_run cat "$MNT/f$i.pt" >/dev/null 2>&1 ||
			bad+=("f$i.pt (close failed) read $out bytes")
	done
	for i in "${ok_files[@]}"; do
		kvt_run cmp -s "$MNT/f$i.pt" "$T/want$i" || bad+=("f$i.pt (closed) differs")
	done
	[ ${#bad[@]} = 0 ]
	ok $? "$name: no file whose close() failed can be read, every other reads back exactly${bad:+: ${bad[*]}}"
	kvt_umount
	fsck_clean "$name"
	kvt_mount
	bad=()
	for i in "${failed_files[@]}"; do
		[ -e "$MNT/f$i.pt" ] && bad+=("f$i.pt (close failed) exists")
	done
	for i in "${ok_files[@]}"; do
		kvt_run cmp -s "$MNT/f$i.pt" "$T/want$i" || bad+=("f$i.pt (closed) differs")
	done
	[ ${#bad[@]} = 0 ]
	ok $? "$name: after a remount the failed files are gone, the others read back exactly${bad:+: ${bad[*]}}"
	kvt_umount
}

# lookup_eio: files f<i>.pt written in place (LMCache), each rewritten by
# a writer that holds it open (a perl process: a shell cannot write
# without a close, and every close publishes) while another process looks
# the name up; a fault fails the (i+1)th stat of f<i>.pt, so that one of
# them falls on that lookup whatever the number of stats before it.  A
# writer whose close() succeeded must have published its version.
lookup_eio() {
	local n=$KVT_FAULT_FILES i spec="" f st ans wp closed=0 hit=0 lost=()
	name=lookup-eio
	for ((i = 0; i < n; i++)); do
		spec="$spec${spec:+,}stat:EIO:name=f$i.pt:after=$i:max=1"
	done
	diag "--- $name: KVT_FAULTS=$spec"
	kvt_new_lower
	rm -f "$T/closed"
	export KVT_FAULTS=$spec
	kvt_mount entry_timeout=0 attr_timeout=0
	unset KVT_FAULTS
	rm -f "$T/orders" "$T/answers"
	mkfifo "$T/orders" "$T/answers"
	exec 8<>"$T/orders" 9<>"$T/answers"
	for ((i = 0; i < n; i++)); do
		f=$MNT/f$i.pt
		kvt_run sh -c 'echo v1 >"$1"' _ "$f" 2>/dev/null
		perl -e '
			$| = 1;
			sub failed { print "failed $!\n"; exit 1 }
			open(my $f, ">", $ARGV[0]) or failed();
			syswrite($f, "v2\n") == 3 or failed();
			print "written\n";
			<STDIN>;
			print close($f) ? "closed\n" : "failed $!\n";' "$f" <&8 >&9 &
		wp=$!
		kvt_bg $wp
		read -r -t 60 -u 9 ans
		st=
		if [ "$ans" = written ]; then
			kvt_run stat "$f" >/dev/null 2>&1
			st=$?
			echo close >&8
			read -r -t 60 -u 9 ans
		fi
		[ "$ans" = written ] && ans=
		kill -KILL "$wp" 2>/dev/null
		wait "$wp" 2>/dev/null
		if [ "$ans" = closed ]; then
			closed=$((closed + 1))
			echo "$i" >>"$T/closed"
			[ "$st" != 0 ] && hit=$((hit + 1))
		fi
	done
	exec 8>&- 9>&-
	[ "$closed" -ge 1 ] && [ "$hit" -ge 1 ]
	ok $? "$name: $closed of $n writers closed their rewrite; a lookup failed meanwhile for $hit of them"
	kvt_umount
	kvt_mount
	for i in $(cat "$T/closed" 2>/dev/null); do
		[ "$(kvt_run cat "$MNT/f$i.pt" 2>&1)" = v2 ] || lost+=("f$i.pt")
	done
	[ ${#lost[@]} = 0 ]
	ok $? "$name: after a remount every rewrite whose close() succeeded is there${lost:+; lost: ${lost[*]}}"
	kvt_umount
	fsck_clean "$name"
}

# trunc_failed: f.pt published ("oldold"); on a mount that fails the
# first rename onto f.pt, one perl process holds
# it open for writing without writing, rewrites it through a second
# descriptor ("NEWNEW") whose close() fails, truncates it to 4 bytes by path and closes the first
# descriptor.  The truncate answered success, so the file is 4 bytes: the
# 4 first of either version (the failed close's bytes are the client's
# to doubt), at once and after a remount.
trunc_failed() {
	local out got
	name=trunc-failed
	kvt_new_lower
	kvt_mount
	kvt_run sh -c 'printf oldold >"$1"' _ "$MNT/f.pt"
	kvt_umount
	mount_faults "rename:EIO:name=f.pt:max=1"
	out=$(kvt_run perl -e '
		my $p = $ARGV[0];
		open(my $keep, "+<", $p) or die "open: $!\n";
		open(my $w, "+<", $p) or die "open: $!\n";
		syswrite($w, "NEWNEW") == 6 or die "write: $!\n";
		print close($w) ? "closed" : "close failed: $!", "\n";
		print truncate($p, 4) ? "truncated" : "truncate failed: $!", "\n";
		print close($keep) ? "closed" : "close failed: $!", "\n";' "$MNT/f.pt" 2>&1)
	[ "$out" = "close failed: Input/output error
truncated
closed" ]
	ok $? "$name: the rewrite's close() failed (EIO), the truncate and the other close succeeded: $(echo $out)"
	got=$(kvt_run cat "$MNT/f.pt" 2>&1)
	[ "$got" = NEWN ] || [ "$got" = oldo ]
	ok $? "$name: the file reads 4 bytes, the start of a version (read '$got')"
	kvt_umount
	fsck_clean "$name"
	kvt_mount
	got=$(kvt_run cat "$MNT/f.pt" 2>&1)
	[ "$got" = NEWN ] || [ "$got" = oldo ]
	ok $? "$name: after a remount too (read '$got')"
	kvt_umount
}

# stage_unlink: on a mount where the first unlink of a staged file fails
# (EIO), f.bin is stored the vLLM way (tmp + rename: that publication's
# staged file stays), then replaced.  The first version's object goes
# with its record, and its staged file at the unmount: the store is
# clean.  An anchor made while the staged file's link still counted
# would be kept by the release (object.h), then left alone.
stage_unlink() {
	local got f calls
	name=stage-unlink
	kvt_new_lower
	mount_faults "unlink:EIO:name=d.*:max=1"
	kvt_run sh -c 'printf one >"$1.tmp" && mv "$1.tmp" "$1"' _ "$MNT/f.bin"
	ok $? "$name: f.bin stored (tmp + rename)"
	kvt_run sh -c 'printf two >"$1.tmp" && mv "$1.tmp" "$1"' _ "$MNT/f.bin"
	ok $? "$name: ... and replaced"
	got=$(kvt_run cat "$MNT/f.bin" 2>&1)
	[ "$got" = two ]
	ok $? "$name: it reads the second version ('$got')"
	kvt_umount
	read -r f calls < <(kvt_fault_counts)
	[ "$f" = 1 ]
	ok $? "$name: one unlink of a staged file failed (${f:-no} fault in ${calls:-no} calls)"
	fsck_clean "$name"
}

for c in $KVT_FAULT_CASES; do
	case $c in
	stage-unlink)
		stage_unlink ;;
	trunc-failed)
		trunc_failed ;;
	lookup-eio)
		lookup_eio ;;
	inplace-write)
		inplace_write "write:EIO:$(when):name=d.*" ;;
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
	verify-stale)
		run_case "$c" "read:ESTALE:$(when):name=!*.bin" load exact open eio ;;
	list)
		run_case "$c" "list:EIO:$(when):name=*.bin" list exact - - ;;
	esac
done

kvt_stress_summary "$ROUNDS" - - - -
