#!/bin/bash
# Power cuts of the lower disk (tests/powercut.sh: ext4 on a loop device,
# `xfs_io -x -c shutdown` without flush, remount):
#
#   (a) a store cut a moment after it was created (its creation committed
#       by the journal, as the periodic commit would, its data not written
#       back): the store still mounts, its marker is whole; and a marker
#       lost anyway (truncated by hand) is found and rewritten by
#       kvtierfs-fsck --repair, after which the store mounts again;
#   then per round, each on a fresh disk, clients store while the disk is
#   cut (a journal commit halfway, as the periodic one):
#   (b) default mount, vLLM O_DIRECT and buffered stores: after the cut
#       every name present reads back byte-exact (torn ones answer ENOENT
#       or EIO, a wrong byte never), acknowledged blocks may be lost;
#       beside them the only client that syncs, with the POSIX idiom
#       (fsync of the temp file, rename, fsync of the directory): each of
#       its blocks survives;
#   (c) default mount, clients that fsync each block under its final name
#       (tmp + rename, then fsync of the final name; LMCache-style writes
#       in place with fsync before close) beside one that does not sync:
#       every block whose fsync returned survives, byte for byte;
#   (d) -o sync: every block whose rename or close returned survives, and
#       the cut leaves no torn name behind at all.
#   Each time kvtierfs-fsck, before the remount, reports only what a power
#   cut may leave (orphans, a dead staging directory, torn names where
#   nothing was synced), and after the remount and the loads only orphans.
#
# KVT_POWERCUT_ROUNDS (default 1): rounds of (b), (c), (d); a run makes
# 1 + 3 x rounds cuts, about 40 s a round (raise tests/run's KVT_TIMEOUT
# past 300 s for more than five).  Each round prints one line per cut: blocks
# acknowledged, blocks checked, wrong bytes, synced acknowledged blocks
# lost (never allowed), unsynced ones lost (allowed), orphans reported.
# kvt-kind: faults
# kvt-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/powercut.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
: "${KVT_POWERCUT_ROUNDS:=1}"
ROUNDS=$KVT_POWERCUT_ROUNDS
SIZE=$((256 << 10))

kvt_require_root
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "Bail out! KVT_POWERCUT_ROUNDS: expects a number >= 1"; exit 1; }
kvt_setup
pc_require
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
plan $((17 + ROUNDS * (3 * 11 + 1)))

# ---------------------------------------------------------------- helpers

# start_client ARGS...: kvclient in the background, its stdout (progress
# lines) on fd $CFD, its stderr appended to $T/client.err; sets CPID.
start_client() {
	exec {CFD}< <(exec "$KVCLIENT" "$@" 2>>"$T/client.err" {_kvt_out}>&- {_kvt_err}>&-)
	CPID=$!
	kvt_bg "$CPID"
}

# start_side ARGS...: one more kvclient, output to $T/client.err; its pid
# appended to SIDE.
SIDE=()
start_side() {
	"$KVCLIENT" "$@" >/dev/null 2>>"$T/client.err" {_kvt_out}>&- {_kvt_err}>&- &
	SIDE+=("$!")
	kvt_bg "$!"
}

# wait_progress N: read the first client's progress lines until it has
# stored N blocks; sets PROGRESS.  Fails when it ends or is silent 60 s.
wait_progress() {
	local want=$1 line
	while IFS= read -r -t 60 -u "$CFD" line; do
		case $line in
		"progress "*) PROGRESS=${line#progress } ;;
		esac
		[ "$PROGRESS" -ge "$want" ] && return 0
	done
	return 1
}

# drain_clients: every client ends once its mount is gone (60 s each).
drain_clients() {
	local p st=0 rc=0
	while IFS= read -r -t 60 -u "$CFD" _; do :; done
	rc=$?
	exec {CFD}<&-
	if [ "$rc" -gt 128 ]; then
		kill -KILL "$CPID" 2>/dev/null
		st=1
	fi
	wait "$CPID" 2>/dev/null
	for p in "${SIDE[@]}"; do
		_kvt_wait_pid "$p" 60
		[ $? != 255 ] || st=1
	done
	SIDE=()
	return "$st"
}

# fsck_kinds ARGS...: run kvtierfs-fsck ARGS; $T/fsck.out, exit status in
# FSCK_RC, the problems counted by kind in KINDS ("orphan=3 ...").
fsck_kinds() {
	"$KVTIERFS_FSCK" "$@" >"$T/fsck.out" 2>"$T/fsck.err"
	FSCK_RC=$?
	KINDS=$(awk '$1 !~ /^kvtierfs-fsck:/ { n[$1]++ }
		END { for (k in n) printf "%s=%d ", k, n[k] }' "$T/fsck.out" |
		tr ' ' '\n' | LC_ALL=C sort | tr '\n' ' ')
	KINDS=${KINDS# }
	KINDS=${KINDS% }
}

# only_kinds ALLOWED...: every kind in KINDS is one of ALLOWED, and fsck
# did not fail (exit 0 or 4, nothing on stderr).
only_kinds() {
	local k
	[ "$FSCK_RC" = 0 ] || [ "$FSCK_RC" = 4 ] || return 1
	[ -s "$T/fsck.err" ] && return 1
	for k in $KINDS; do
		[[ " $* " == *" ${k%=*} "* ]] || return 1
	done
	return 0
}

show_fsck() {
	diag "kvtierfs-fsck exit status $FSCK_RC; kinds: ${KINDS:-none}"
	grep -v '^orphan ' "$T/fsck.out" | diag_file /dev/stdin 20
	diag_file "$T/fsck.err" 10
}

# count KIND: how many of KIND were in KINDS.
count() {
	local k
	for k in $KINDS; do
		[ "${k%=*}" = "$1" ] && { echo "${k#*=}"; return; }
	done
	echo 0
}

# ---------------------------------------------------------------- (a)

pc_disk
kvt_mount
: >"$T/client.err"
PROGRESS=0
start_client vllm-store --dir "$MNT" --blocks 100000 --size $SIZE --threads 16 \
	--odirect --progress 8
wait_progress 8
ok $? "(a) a new store takes its first blocks ($PROGRESS)" || diag_file "$T/client.err" 10
pc_commit
pc_cut
drain_clients
marker=$(cat "$LOWER/kvtierfs-store" 2>&1)
[ "$marker" = "kvtierfs-store 2" ]
ok $? "(a) after the cut the store's marker is whole ('$marker')"
fsck_kinds "$LOWER"
only_kinds orphan stale-staging torn-size torn-hash unparsable
ok $? "(a) kvtierfs-fsck before the remount: only what a cut leaves (${KINDS:-nothing})"
only_kinds orphan stale-staging torn-size torn-hash unparsable || show_fsck
kvt_mount
ok_kvclient "(a) every name present reads back byte-exact (torn: ENOENT or EIO)" \
	verify --dir "$MNT" --size $SIZE --report --no-tmp
A_VALID=$(sed -n 's/.* valid=\([0-9]*\).*/\1/p' "$KVT_OUT")
kvt_umount

# The marker lost anyway: fsck finds it, --repair writes it again.
: >"$LOWER/kvtierfs-store"
kvt_guard "$KVTIERFS" "$LOWER" "$MNT" >"$T/mount.out" 2>&1
st=$?
[ "$st" != 0 ] && ! kvt_is_mounted "$MNT" && grep -q 'kvtierfs-store' "$T/mount.out"
ok $? "(a) an empty marker: the mount refuses (exit $st: $(head -c 120 "$T/mount.out"))"
kvt_is_mounted "$MNT" && fusermount3 -u -z "$MNT"
fsck_kinds "$LOWER"
[ "$FSCK_RC" = 4 ] && grep -q '^marker kvtierfs-store: ' "$T/fsck.out"
ok $? "(a) kvtierfs-fsck reports the marker (exit $FSCK_RC: $(grep '^marker' "$T/fsck.out"))"
[ "$FSCK_RC" = 4 ] || show_fsck
fsck_kinds --repair "$LOWER"
[ "$FSCK_RC" = 1 ] && [ "$(cat "$LOWER/kvtierfs-store")" = "kvtierfs-store 2" ]
ok $? "(a) kvtierfs-fsck --repair writes it again (exit $FSCK_RC)"
[ "$FSCK_RC" = 1 ] || show_fsck
fsck_kinds "$LOWER"
[ "$FSCK_RC" = 0 ]
ok $? "(a) then the store is clean (exit $FSCK_RC)"
[ "$FSCK_RC" = 0 ] || show_fsck
kvt_mount
ok_kvclient "(a) it mounts and every name reads back ($A_VALID)" \
	verify --dir "$MNT" --size $SIZE --expect "${A_VALID:-0}" --no-tmp
kvt_umount
rm "$LOWER/kvtierfs-store"
fsck_kinds "$LOWER"
[ "$FSCK_RC" = 4 ] && grep -q '^marker kvtierfs-store: missing' "$T/fsck.out"
ok $? "(a) a missing marker: reported too (exit $FSCK_RC)"
fsck_kinds --repair "$LOWER"
[ "$FSCK_RC" = 1 ] && [ "$(cat "$LOWER/kvtierfs-store")" = "kvtierfs-store 2" ]
ok $? "(a) and written again (exit $FSCK_RC)"

# ---------------------------------------------------------------- rounds

# cut_round ROUND MODE: one cut while clients store; MODE is default,
# fsync or sync.
cut_round() {
	local r=$1 mode=$2 opts=() p1 p2 acked=0 checked=0 lost=0 wrong=0 m st
	local acked_must=0 acked_ok=0 lost_ok=0
	local loads=() k
	pc_disk
	rm -f "$T"/manifest.*
	: >"$T/client.err"
	PROGRESS=0
	[ "$mode" = sync ] && opts=(sync)
	kvt_mount "${opts[@]}"
	case $mode in
	default)
		# the only client that syncs, and the one waited for: its
		# syncs alone commit the journal after the commit below
		p1=4 p2=12
		start_client vllm-store --dir "$MNT" --model posix --blocks 100000 \
			--size $SIZE --threads 4 --odirect --fsync-dir --progress 2 \
			--manifest "$T/manifest.posix"
		start_side vllm-store --dir "$MNT" --blocks 100000 --size $SIZE \
			--threads 16 --odirect --manifest "$T/manifest.direct"
		start_side vllm-store --dir "$MNT" --model buffered --blocks 100000 \
			--size $SIZE --threads 4 --buffered --manifest "$T/manifest.buffered"
		;;
	fsync)
		p1=16 p2=64
		start_client vllm-store --dir "$MNT" --blocks 100000 --size $SIZE \
			--threads 8 --odirect --fsync --progress 4 --manifest "$T/manifest.rename"
		start_side vllm-store --dir "$MNT" --model inplace --blocks 100000 \
			--size $SIZE --threads 4 --buffered --in-place --fsync \
			--manifest "$T/manifest.inplace"
		start_side vllm-store --dir "$MNT" --model nosync --blocks 100000 \
			--size $SIZE --threads 4 --odirect
		;;
	sync)
		p1=16 p2=64
		start_client vllm-store --dir "$MNT" --blocks 100000 --size $SIZE \
			--threads 16 --odirect --progress 4 --manifest "$T/manifest.rename"
		start_side vllm-store --dir "$MNT" --model inplace --blocks 100000 \
			--size $SIZE --threads 4 --buffered --in-place \
			--manifest "$T/manifest.inplace"
		;;
	esac
	t0=$EPOCHREALTIME
	wait_progress $p1 && pc_commit && t0=$EPOCHREALTIME && wait_progress $p2
	ok $? "round $r $mode: clients store, a journal commit, more stores ($PROGRESS, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s since the commit)" ||
		diag_file "$T/client.err" 10
	pc_cut
	drain_clients || diag "a client did not end after the cut"
	fsck_kinds "$LOWER"
	if [ "$mode" = sync ]; then
		only_kinds orphan stale-staging
		ok $? "round $r $mode: before the remount kvtierfs-fsck finds no torn name (${KINDS:-nothing})"
		only_kinds orphan stale-staging || show_fsck
	else
		only_kinds orphan stale-staging torn-size torn-hash unparsable
		ok $? "round $r $mode: before the remount kvtierfs-fsck finds only what a cut leaves (${KINDS:-nothing})"
		only_kinds orphan stale-staging torn-size torn-hash unparsable || show_fsck
	fi
	kvt_mount
	for m in "$T"/manifest.*; do
		k=${m##*.}
		loads+=("$k")
	done
	[ ${#loads[@]} = $([ "$mode" = default ] && echo 3 || echo 2) ] ||
		bail "round $r $mode: ${#loads[@]} manifests"
	for k in "${loads[@]}"; do
		m=$T/manifest.$k
		n=$(wc -l <"$m")
		acked=$((acked + n))
		model=kvclient-model
		case $k in buffered | inplace | posix) model=$k ;; esac
		kvt_guard "$KVCLIENT" vllm-load --dir "$MNT" --model "$model" --size $SIZE \
			--threads 8 --manifest "$m" --report >"$T/load.out" 2>"$T/load.err"
		st=$?
		bad=$(grep -cE ' (wrong|short|error) ' "$T/load.out")
		[ "$st" = 0 ] || [ "$bad" != 0 ] || bad=1
		ok "$bad" "round $r $mode: $n acknowledged $k blocks load byte-exact or not at all ($(grep -c ' ok$' "$T/load.out" 2>/dev/null)$(tail -n 1 "$T/load.out" | grep -o ' ok=.*eio=[0-9]*'))"
		if [ "$bad" != 0 ]; then
			diag "exit status $st"
			grep -vE ' (enoent|eio)$' "$T/load.out" | diag_file /dev/stdin 20
			diag_file "$T/load.err" 20
		fi
		checked=$((checked + n))
		wrong=$((wrong + bad))
		# blocks nobody synced may be lost; the others not
		case $mode.$k in
		default.direct | default.buffered)
			lost_ok=$((lost_ok + $(grep -cE ' (enoent|eio)$' "$T/load.out")))
			acked_ok=$((acked_ok + n)) ;;
		*)
			lost=$((lost + $(grep -cE ' (enoent|eio)$' "$T/load.out")))
			acked_must=$((acked_must + n)) ;;
		esac
	done
	[ "$lost" = 0 ] && [ "$acked_must" -gt 0 ]
	ok $? "round $r $mode: every one of the $acked_must synced acknowledged blocks survived ($lost lost; of $acked_ok unsynced ones $lost_ok lost, as allowed)"
	ok_kvclient "round $r $mode: every name present reads back byte-exact (torn: ENOENT or EIO)" \
		verify --dir "$MNT" --size $SIZE --report --no-tmp ||
		wrong=$((wrong + 1))
	checked=$((checked + $(sed -n 's/.* blocks=\([0-9]*\).*/\1/p' "$KVT_OUT")))
	kvt_umount
	fsck_kinds "$LOWER"
	only_kinds orphan
	ok $? "round $r $mode: after the remount and the loads kvtierfs-fsck finds only orphans (${KINDS:-nothing})"
	only_kinds orphan || show_fsck
	echo "# round $r $mode: acknowledged=$acked checked=$checked wrong=$wrong lost=$lost lost_unsynced=$lost_ok orphans=$(count orphan)"
	all_checked=$((all_checked + checked)) all_wrong=$((all_wrong + wrong))
	all_lost=$((all_lost + lost)) all_orphans=$((all_orphans + $(count orphan)))
}
all_checked=0 all_wrong=0 all_lost=0 all_orphans=0

for r in $(seq "$ROUNDS"); do
	cut_round "$r" default
	cut_round "$r" fsync
	cut_round "$r" sync
done

# One summary line (tests/lib.sh, fault suite): lost counts the blocks
# that had to survive (synced, or -o sync); leaked, the orphans each cut
# left (reclaimed by the mounts after it).
kvt_stress_summary "$ROUNDS" "$all_checked" "$all_wrong" "$all_lost" "$all_orphans"
