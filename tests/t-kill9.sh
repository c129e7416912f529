#!/bin/bash
# kill -9 the daemon while 16 threads store blocks, clean the dead mount,
# mount again: every name present is complete and correct, every block
# whose rename() returned before the kill is there, no *.tmp is visible and
# staging/ holds nothing of the dead mount.  Twice: vLLM tmp+rename stores
# (O_DIRECT) and LMCache in-place writes (buffered).
. "$(dirname "$0")/lib.sh"

SIZE=$((2 << 20))

plan 19
kvt_setup

# start_client ARGS...: run kvclient in the background, its stdout on fd
# $CFD (progress lines), its stderr in $T/client.err; sets CPID.
start_client() {
	exec {CFD}< <(exec "$KVCLIENT" "$@" 2>>"$T/client.err" {_kvt_out}>&- {_kvt_err}>&-)
	CPID=$!
	kvt_bg "$CPID"
}

# wait_progress N: read progress lines until "progress >= N"; sets PROGRESS.
# Fails when the client ends or stays silent for 60 s.
wait_progress() {
	local want=$1 line
	PROGRESS=0
	while IFS= read -r -t 60 -u "$CFD" line; do
		case $line in
		"progress "*) PROGRESS=${line#progress } ;;
		*) diag "client: $line" ;;
		esac
		[ "$PROGRESS" -ge "$want" ] && return 0
	done
	return 1
}

# drain_client: read the client's output to EOF (it exits once the mount
# is gone), then reap it.  Fails if it is still running after 60 s.
drain_client() {
	local line rc
	while IFS= read -r -t 60 -u "$CFD" line; do
		case $line in
		"progress "*) ;;
		*) diag "client: $line" ;;
		esac
	done
	rc=$?
	exec {CFD}<&-
	if [ "$rc" -gt 128 ]; then
		kill -KILL "$CPID" 2>/dev/null
		wait "$CPID" 2>/dev/null
		return 1
	fi
	wait "$CPID" 2>/dev/null
	CRC=$?
	return 0
}

crash_cycle() {
	local what=$1 want=$2
	shift 2
	kvt_mount
	: >"$T/client.err"
	start_client "$@"
	wait_progress "$want"
	ok $? "$what: client published $PROGRESS blocks (waiting for $want)"
	find "$LOWER/staging" -mindepth 1 >"$T/staging.dead" 2>/dev/null
	kvt_kill9
	drain_client
	ok $? "$what: the client ended after the daemon died (exit status ${CRC:-?})"
	diag_file "$T/client.err" 3
	kvt_mount
}

# --- vLLM: tmp + rename, O_DIRECT, 16 threads -----------------------------
crash_cycle "vllm-store" 96 \
	vllm-store --dir "$MNT" --blocks 1024 --size $SIZE --threads 16 --odirect \
	--progress 8
STORED=$PROGRESS
ok_kvclient "after kill -9: every block present is complete, at least the $STORED published ones" \
	verify --dir "$MNT" --min "$STORED" --size $SIZE --no-tmp
n=$(kvt_count_tmp "$MNT")
[ "$n" = 0 ]
ok $? "no *.tmp visible after kill -9 and remount (found $n)"
left=$(while IFS= read -r p; do [ -e "$p" ] && echo "$p"; done <"$T/staging.dead")
[ -z "$left" ]
ok $? "staging/ holds nothing of the dead mount"
[ -z "$left" ] || diag "$left"
ok_kvclient "store the rest: present blocks are skipped, the others stored" \
	vllm-store --dir "$MNT" --blocks 1024 --size $SIZE --threads 16 --odirect
ok_kvclient "vllm-load of all 1024 blocks after the crash" \
	vllm-load --dir "$MNT" --blocks 1024 --size $SIZE --threads 16 --odirect
kvt_umount

# --- LMCache: in-place writes to the final name, buffered -----------------
kvt_new_lower
crash_cycle "lmcache" 150 \
	lmcache --dir "$MNT" --blocks 64 --size $SIZE --writers 8 --readers 2 \
	--rounds 1000 --buffered --progress 10
ok_kvclient "after kill -9: every .pt present is one complete version" \
	verify --dir "$MNT" --size $SIZE --no-tmp
left=$(while IFS= read -r p; do [ -e "$p" ] && echo "$p"; done <"$T/staging.dead")
[ -z "$left" ]
ok $? "staging/ holds nothing of the dead mount"
[ -z "$left" ] || diag "$left"
kvt_umount
