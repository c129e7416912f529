#!/bin/bash
# Crash loop: round after round, a client stores blocks while the daemon
# is killed (kill -9) at a random moment of the store run, then:
#
#   - the client saw the mount go (ENOTCONN/ECONNABORTED, or EIO for a
#     direct write split into several requests, once the mount answers
#     ENOTCONN) and nothing wrong before;
#   - the dead mount is cleaned (fusermount3 -u -z);
#   - kvtierfs-fsck on the unmounted store finds nothing torn, dangling or
#     unparsable: only orphans (counted) and the killed mount's staging;
#   - after a remount every block the client acknowledged (its rename, or
#     its close for in-place writes, had returned: kvclient --manifest
#     fdatasyncs one line per block, outside the mount) reads back byte for
#     byte, every removed name stays absent, every other name is absent or
#     one complete block, and no *.tmp is visible.
#
# The rounds take turns: vLLM (16 threads, tmp + rename, O_DIRECT, 2 MiB),
# LMCache (8 writers rewriting their files in place, 256 KiB chunks, 2
# readers), vLLM buffered (640 KiB).  A vLLM round first evicts its key
# window (unlink, recorded in the manifest) and stores it again with a new
# version, so an old version that comes back is caught.  The kill moment
# is a random number of acknowledged stores plus a random delay, from a
# seed printed at the start (KVT_SEED=N replays a run).  At the end:
# kvtierfs-fsck --repair, a clean fsck, and every acknowledged block read
# back once more.
#
# Rounds: 10, or 200 with KVT_STRESS=1; KVT_CRASHLOOP_ROUNDS=N sets them.
# kvt-kind: faults
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
ROUNDS=${KVT_CRASHLOOP_ROUNDS:-$(kvt_stress_pick 10 200)}
SEED=${KVT_SEED:-$(( $(date +%s%N) % 1000000007 ))}
VBLOCKS=128         # keys per vLLM window
WINDOWS=3           # vLLM key windows, visited in random order
LBLOCKS=32          # LMCache keys
LVERSIONS=40        # versions each LMCache round writes per key

kvt_require_root
plan $((1 + 6 * ROUNDS + 7))
midway=0
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
M="$T/manifest"
: >"$M"
RANDOM=$SEED
diag "seed $SEED (KVT_SEED=$SEED replays the kill points), $ROUNDS rounds"

blocks=0 wrong=0 lost=0 orphans=0

# verify_manifest DESC: every block complete, the manifest kept, no *.tmp;
# adds the counts of the verify summary to the totals.
verify_manifest() {
	local line
	ok_kvclient "$1" verify --dir "$MNT" --manifest "$M" --no-tmp --threads 8
	line=$(grep '^verify verify:' "$KVT_OUT")
	[[ $line =~ \ blocks=([0-9]+) ]] && blocks=$((blocks + BASH_REMATCH[1]))
	[[ $line =~ \ wrong=([0-9]+) ]] && wrong=$((wrong + BASH_REMATCH[1]))
	[[ $line =~ \ lost=([0-9]+) ]] && lost=$((lost + BASH_REMATCH[1]))
	[ -n "$line" ] || wrong=$((wrong + 1)) # no summary: the client died
}

# fsck_after_kill R: the unmounted store has no problem but orphans and the
# killed mount's staging directory (exactly one: the mount before removed
# the one of the kill before).
fsck_after_kill() {
	local rc other stale
	"$KVTIERFS_FSCK" "$LOWER" >"$T/fsck.out" 2>"$T/fsck.err"
	rc=$?
	orphans=$(grep -c '^orphan ' "$T/fsck.out")
	stale=$(grep -c '^stale-staging ' "$T/fsck.out")
	other=$(grep -v -e '^orphan ' -e '^stale-staging ' -e '^kvtierfs-fsck: ' "$T/fsck.out" | grep -c '')
	{ [ "$rc" = 0 ] || [ "$rc" = 4 ]; } && [ "$other" = 0 ] && [ "$stale" = 1 ] &&
		[ ! -s "$T/fsck.err" ]
	ok $? "round $1: fsck of the killed store: $orphans orphan(s), $stale dead staging, nothing else (exit $rc)" && return 0
	diag "expected only orphan lines and one stale-staging line:"
	diag_file "$T/fsck.out" 30
	diag_file "$T/fsck.err" 10
}

kvt_mount
for ((r = 1; r <= ROUNDS; r++)); do
	pattern=$(( (r - 1) % 3 ))
	: >"$T/client.err"
	: >"$T/client.out"
	case $pattern in
	0 | 2)
		base=$(( (RANDOM % WINDOWS) * VBLOCKS ))
		if [ $pattern = 0 ]; then
			what="vllm O_DIRECT 2M"
			args=(--size 2M --odirect)
		else
			what="vllm buffered 640K"
			args=(--size 640K --buffered)
		fi
		ok_kvclient "round $r: evict keys $base..$((base + VBLOCKS - 1))" \
			evict --dir "$MNT" --blocks $VBLOCKS --key-base $base --version "$r" \
			--manifest "$M"
		kill_at=$(( 1 + RANDOM % (VBLOCKS / 2) ))
		delay_ms=$(( RANDOM % 20 ))
		kvt_client_start vllm-store --dir "$MNT" --blocks $VBLOCKS --key-base $base \
			--version "$r" --threads 16 "${args[@]}" --manifest "$M" --crash-ok \
			--progress 1
		;;
	1)
		what="lmcache in place"
		ok_kvclient "round $r: evict the LMCache keys (the writers rewrite them from nothing)" \
			evict --dir "$MNT" --blocks $LBLOCKS --pt --version $((r * 1000)) \
			--manifest "$M"
		kill_at=$(( 1 + RANDOM % (LBLOCKS * LVERSIONS / 2) ))
		delay_ms=$(( RANDOM % 20 ))
		kvt_client_start lmcache --dir "$MNT" --blocks $LBLOCKS --size 1M --chunk 256K \
			--writers 8 --readers 2 --rounds $LVERSIONS --version $((r * 1000)) \
			--buffered --manifest "$M" --crash-ok --progress 1
		;;
	esac
	# the kill: after kill_at acknowledged stores and delay_ms more
	kvt_client_wait "$kill_at"
	waited=$?
	sleep "0.0$(printf '%02d' "$delay_ms")"
	# the client must see its calls fail before the mountpoint is bare
	# again: it would store into the directory under the mount
	kvt_kill9 kvt_client_drain
	gone=$(grep -m 1 '^gone ' "$T/client.out")
	# Under load the kill may land after the client's last store: the
	# round then checks a kill after the stores, and the count below
	# keeps the test from passing without kills during stores.
	[ -n "$gone" ] && midway=$((midway + 1))
	[ "$waited" = 0 ] && [ "$KVT_CRC" = 0 ] &&
		{ [ -n "$gone" ] || grep -q ' errors=0 ' "$T/client.out"; }
	ok $? "round $r ($what): killed after $kill_at stores + ${delay_ms} ms; the client saw '${gone:-its stores finish first}' after $KVT_PROGRESS stores, nothing wrong before (exit $KVT_CRC)" ||
		{ diag_file "$T/client.out" 10; diag_file "$T/client.err" 20; }
	fsck_after_kill "$r"
	kvt_mount
	verify_manifest "round $r: after the remount, every acknowledged block byte for byte, removed names absent, nothing else but complete blocks, no *.tmp"
done
kvt_umount

"$KVTIERFS_FSCK" --repair "$LOWER" >"$T/fsck.out" 2>"$T/fsck.err"
rc=$?
n=$(grep -v -e '^orphan ' -e '^stale-staging ' -e '^kvtierfs-fsck: ' "$T/fsck.out" | grep -c '')
{ [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && [ "$n" = 0 ]
ok $? "fsck --repair after $ROUNDS kills: removed $orphans orphan(s), nothing else found (exit $rc)" ||
	{ diag_file "$T/fsck.out" 30; diag_file "$T/fsck.err" 10; }
"$KVTIERFS_FSCK" "$LOWER" >"$T/fsck.out" 2>"$T/fsck.err"
ok $? "fsck after the repair: clean ($(tail -n 1 "$T/fsck.out"))" ||
	{ diag_file "$T/fsck.out" 30; diag_file "$T/fsck.err" 10; }
kvt_mount
verify_manifest "after the repair: every acknowledged block still there, byte for byte"
kvt_umount
[ $((midway * 2)) -ge "$ROUNDS" ]
ok $? "the kill came during the client's stores in $midway of $ROUNDS rounds (at least half)"
kvt_stress_summary "$ROUNDS" "$blocks" "$wrong" "$lost" "$orphans"
