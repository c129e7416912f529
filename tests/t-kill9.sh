#!/bin/bash
# kill -9 the daemon while 16 threads store blocks, clean the dead mount,
# mount again: every name present is complete and correct, every block
# whose rename() returned before the kill is there, no *.tmp is visible and
# staging/ holds nothing of the dead mount (which, right after the kill,
# held the files that mount had staged).  Twice: vLLM tmp+rename stores
# (O_DIRECT) and LMCache in-place writes (buffered).
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"

SIZE=$((2 << 20))

plan 21
kvt_setup

# dead_staging WHAT PID: right after the kill -9 of daemon PID, its staging
# directory LOWERDIR/staging/<mount id>/ (the id is <host>.<pid>.<random>)
# is still there with its lock and the files it had staged; everything
# under LOWERDIR/staging goes to $T/staging.dead, for the check that the
# next mount removes it.  One test point.
dead_staging() {
	local what=$1 pid=$2 dirs=() staged=() why=()
	find "$LOWER/staging" -mindepth 1 >"$T/staging.dead" 2>"$T/staging.err" ||
		why+=("find $LOWER/staging failed: $(head -n 3 "$T/staging.err")")
	mapfile -t dirs < <(find "$LOWER/staging" -mindepth 1 -maxdepth 1 -type d \
		-name "*.$pid.*" 2>/dev/null)
	if [ ${#dirs[@]} != 1 ]; then
		why+=("${#dirs[@]} staging directories of daemon $pid, expected 1: ${dirs[*]}")
	else
		[ -f "${dirs[0]}/lock" ] || why+=("${dirs[0]} has no lock file")
		mapfile -t staged < <(find "${dirs[0]}" -mindepth 1 ! -name lock -printf '%P\n')
		[ ${#staged[@]} -gt 0 ] || why+=("${dirs[0]} holds nothing besides lock")
	fi
	ok ${#why[@]} "$what: after the kill, the dead mount's LOWERDIR/staging/<mount id>/ holds ${#staged[@]} staged file(s) besides lock"
	[ ${#why[@]} = 0 ] || diag "${why[@]}"
	[ ${#dirs[@]} != 1 ] || diag "dead staging: ${dirs[0]#"$LOWER"/}: ${staged[*]:0:8}"
}

crash_cycle() {
	local what=$1 want=$2 pid
	shift 2
	kvt_mount
	pid=$KVT_PID
	: >"$T/client.err"
	: >"$T/client.out"
	kvt_client_start "$@"
	kvt_client_wait "$want"
	ok $? "$what: client published $KVT_PROGRESS blocks (waiting for $want)"
	# the client must see its calls fail (--crash-ok: it stops at the
	# first ENOTCONN) before the dead mount is cleaned: afterwards its
	# paths are the bare directory under the mount point
	kvt_kill9 kvt_client_drain
	drain=$?
	dead_staging "$what" "$pid"
	ok $drain "$what: the client ended after the daemon died (exit status ${KVT_CRC:-?})"
	diag_file "$T/client.out" 3
	diag_file "$T/client.err" 3
	kvt_mount
}

# --- vLLM: tmp + rename, O_DIRECT, 16 threads -----------------------------
crash_cycle "vllm-store" 96 \
	vllm-store --dir "$MNT" --blocks 1024 --size $SIZE --threads 16 --odirect \
	--progress 8 --crash-ok
STORED=$KVT_PROGRESS
ok_kvclient "after kill -9: every block present is complete, at least the $STORED published ones" \
	verify --dir "$MNT" --min "$STORED" --size $SIZE --no-tmp
n=$(kvt_count_tmp "$MNT") && [ "$n" = 0 ]
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
	--rounds 1000 --buffered --progress 10 --crash-ok
ok_kvclient "after kill -9: every .pt present is one complete version" \
	verify --dir "$MNT" --size $SIZE --no-tmp
left=$(while IFS= read -r p; do [ -e "$p" ] && echo "$p"; done <"$T/staging.dead")
[ -z "$left" ]
ok $? "staging/ holds nothing of the dead mount"
[ -z "$left" ] || diag "$left"
kvt_umount
