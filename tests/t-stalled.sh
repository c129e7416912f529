#!/bin/bash
# A lower disk that stops answering: LOWERDIR on a FUSE passthrough
# (bindfs) that is stopped with SIGSTOP, as a hung network file system or
# a dead disk controller would be.  Calls that must touch the lower disk
# wait for it, each holding one daemon thread; the rest of the mount goes
# on answering: statfs (the last figures, within its patience), getattr of
# the root, names the kernel still has cached.  Once the lower disk
# answers again every waiting call completes with the right bytes and the
# mount unmounts cleanly.  KVT_STRESS=1: more rounds of stop and go.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
kvt_require_root
command -v bindfs >/dev/null || { echo "1..0 # SKIP bindfs is missing"; exit 0; }

ROUNDS=$(kvt_stress_pick 2 20)
WAITERS=8
plan $((5 + ROUNDS * 5))
kvt_setup

REAL="$T/real"
mkdir "$REAL"
bindfs -f "$REAL" "$LOWER" 2>"$T/bindfs.err" &
BPID=$!
kvt_bg "$BPID"
# The mount table is watched, not polled.
findmnt --poll=mount --mountpoint "$LOWER" --timeout 10000 >/dev/null
ok $? "bindfs passes $REAL through at $LOWER"

# Lookups cached by the kernel for the whole test.
kvt_mount entry_timeout=600 attr_timeout=600
ok_kvclient "store 32 blocks through the passthrough" \
	vllm-store --dir "$MNT" --blocks 32 --size 1M
ok_kvclient "they read back" verify --dir "$MNT" --expect 32
mapfile -t blocks < <(kvt_run find "$MNT" -name '*.bin' | sort)

# elapsed_ms CMD...: run CMD, killed after 5 s; prints its milliseconds and
# returns its status.
elapsed_ms() {
	local t0 st
	t0=$(date +%s%N)
	timeout -s KILL 5 bash -c '"$@"' _ "$@" >/dev/null 2>&1
	st=$?
	echo $(( ($(date +%s%N) - t0) / 1000000 ))
	return $st
}

# access_all PATH...: access(F_OK) of each, as a server probes its blocks.
access_all() {
	local p
	for p in "$@"; do [ -e "$p" ] || return 1; done
}
export -f access_all

stalled=0 blocks_checked=0 wrong=0
for r in $(seq 1 "$ROUNDS"); do
	# What the kernel caches: the root's and the blocks' attributes.
	kvt_run stat "$MNT" "${blocks[@]}" >/dev/null
	kill -STOP "$BPID"
	# Calls that need the lower disk: opens of blocks (the kernel keeps
	# no open), each waits for it.
	pids=()
	for i in $(seq 0 $((WAITERS - 1))); do
		b=${blocks[$(( (r * WAITERS + i) % ${#blocks[@]} ))]}
		cat "$b" >"$T/read.$i" &
		pids+=($!)
	done
	# One statfs goes down and waits too; those after it answer.
	( timeout -s KILL 30 stat -f "$MNT" >/dev/null 2>&1 ) &
	spid=$!
	sleep 0.3
	ms1=$(elapsed_ms stat -f "$MNT"); st1=$?
	ms2=$(elapsed_ms stat -f -c %b "$MNT"); st2=$?
	[ "$st1" = 0 ] && [ "$st2" = 0 ] && [ "$ms1" -lt 2000 ] && [ "$ms2" -lt 2000 ]
	ok $? "round $r, lower stopped: statfs answers the last figures ($ms1 ms, $ms2 ms)"
	ms=$(elapsed_ms stat "$MNT" "${blocks[0]}" "${blocks[1]}"); st=$?
	[ "$st" = 0 ] && [ "$ms" -lt 2000 ]
	ok $? "round $r: stat of the root and of names the kernel has cached answers ($ms ms)"
	ms=$(elapsed_ms access_all "${blocks[@]}"); st=$?
	[ "$st" = 0 ] && [ "$ms" -lt 2000 ]
	ok $? "round $r: access() of all ${#blocks[@]} cached names answers ($ms ms)"
	n=0
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
	stalled=$((stalled + n))
	[ "$n" -gt 0 ]
	ok $? "round $r: the reads that need the lower disk wait for it ($n of $WAITERS still waiting)"
	kill -CONT "$BPID"
	bad=0
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || bad=$((bad + 1))
		b=${blocks[$(( (r * WAITERS + i) % ${#blocks[@]} ))]}
		# what was read while the lower disk stood still is the block
		[ "$(stat -c %s "$T/read.$i")" = $((1 << 20)) ] &&
			kvt_run cmp -s "$T/read.$i" "$b" || wrong=$((wrong + 1))
	done
	wait "$spid"
	kvt_run "$KVCLIENT" verify --dir "$MNT" --expect 32 >"$T/verify.out" 2>&1 || bad=$((bad + 1))
	blocks_checked=$((blocks_checked + WAITERS + 32))
	[ "$bad" = 0 ] && [ "$wrong" = 0 ]
	ok $? "round $r, lower back: every waiting read completes whole, every block verifies ($bad failed, $wrong wrong)"
done

kvt_umount
kvt_stress_summary "$ROUNDS" "$blocks_checked" "$wrong" 0 -
diag "stalled calls over all rounds: $stalled"
