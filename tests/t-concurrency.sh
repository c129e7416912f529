#!/bin/bash
# Concurrency: 32 writer threads rename new versions over one set of names
# (every writer writes every name, each starting at another one) while 16
# reader threads load and check them: every read is one whole version that
# was written, no name that was published ever answers ENOENT, no wrong
# byte.  Buffered and O_DIRECT.  Then two mounts of one LOWERDIR race:
# a client on each writes the same names (16 + 16 writers, 8 + 8 readers
# per mount, versions of their own), each reading what both write: no
# wrong byte (a read of a name whose version the other mount replaced
# once mixed the page cache's pages of the old version with the new one's),
# no ENOENT for a published name, no other failure.  After the unmounts
# kvtierfs-fsck finds the store clean (no orphan: every replaced version
# was released), and a new mount reads every name back whole.
#
# KVT_STRESS=1: 10 times the rounds; KVT_CONCURRENCY_ROUNDS=N sets the
# rounds of the single-mount race (the others follow).
# kvt-kind: mount
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
R=${KVT_CONCURRENCY_ROUNDS:-$(kvt_stress_pick 6 60)}
RD=$(( (R + 1) / 2 ))          # O_DIRECT race: 1 MiB blocks
R2=$(( R * 2 ))                # two mounts: 16 writers each
NAMES=16
DNAMES=8
SNAMES=12

kvt_require_root
plan 16
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"

blocks=0 wrong=0 lost=0 rounds=0

# count_race FILE: add the reads checked, the wrong ones and the published
# names found missing of a race run.
count_race() {
	local l
	l=$(grep ' write+read:' "$1")
	[[ $l =~ \ hits=([0-9]+) ]] && blocks=$((blocks + BASH_REMATCH[1]))
	[[ $l =~ \ lost=([0-9]+) ]] && lost=$((lost + BASH_REMATCH[1]))
	# wrong= counts the whole run: the final line's includes the rest
	l=$(grep ' final:' "$1" || grep ' write+read:' "$1")
	[[ $l =~ \ ok=([0-9]+) ]] && blocks=$((blocks + BASH_REMATCH[1]))
	[[ $l =~ \ wrong=([0-9]+) ]] && wrong=$((wrong + BASH_REMATCH[1]))
	grep -q ' final:' "$1" || wrong=$((wrong + 1)) # it did not finish
}

kvt_mount
ok_kvclient "race buffered: 32 writers x $R rounds over the same $NAMES names (256 KiB), 16 readers" \
	race --dir "$MNT" --blocks $NAMES --size 256K --writers 32 --readers 16 \
	--rounds "$R" --buffered
count_race "$KVT_OUT"
ok_kvclient "race O_DIRECT: 32 writers x $RD rounds over the same $DNAMES names (1 MiB), 16 readers" \
	race --dir "$MNT" --blocks $DNAMES --key-base 100 --size 1M --writers 32 \
	--readers 16 --rounds "$RD" --odirect
count_race "$KVT_OUT"
rounds=$((R + RD))
ok_kvclient "verify: $((NAMES + DNAMES)) complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $((NAMES + DNAMES)) --no-tmp

# --- two mounts of one LOWERDIR --------------------------------------------
MNT2="$T/mnt2"
mkdir "$MNT2"
kvt_start "$LOWER" "$MNT2"
pid2=$KVT_LAST_PID
# one client per mount at once, on the same names (key base 1000), with
# version ranges of their own: each checks every read whole, its own
# versions against what it wrote, the other's as whole blocks
for m in 1 2; do
	mnt=$MNT
	[ $m = 2 ] && mnt=$MNT2
	kvt_guard "$KVCLIENT" race --dir "$mnt" --shared --blocks $SNAMES --key-base 1000 \
		--size 512K --writers 16 --readers 8 --rounds "$R2" \
		--version $(( (m - 1) * 1000000 + 1 )) --buffered \
		>"$T/race$m.out" 2>"$T/race$m.err" &
	pids[m]=$!
done
w=0 l=0 other=0
for m in 1 2; do
	wait "${pids[m]}"
	st=$?
	sed 's/^/#   /' "$T/race$m.out"
	c=$(grep ' write+read:' "$T/race$m.out")
	[[ $c =~ \ errors=([0-9]+).*\ wrong=([0-9]+)\ lost=([0-9]+) ]] || BASH_REMATCH=(x 1 0 0)
	w=$((w + BASH_REMATCH[2]))
	l=$((l + BASH_REMATCH[3]))
	other=$((other + BASH_REMATCH[1] - BASH_REMATCH[2] - BASH_REMATCH[3]))
	grep -q ' final:' "$T/race$m.out" && { [ "$st" = 0 ] || [ "${BASH_REMATCH[1]}" != 0 ]; } ||
		other=$((other + 1))
	count_race "$T/race$m.out"
done
show_races() {
	grep -h "$1" "$T/race1.err" "$T/race2.err" | head -n 8 | sed 's/^/#   /'
}
[ "$w" = 0 ]
ok $? "two mounts, 16 writers x $R2 rounds each over the same $SNAMES names, 8 readers each: no wrong byte ($w wrong reads)" ||
	show_races 'data differs\|header\|length\|version'
[ "$l" = 0 ]
ok $? "two mounts: a published name never answers ENOENT ($l times it did)" ||
	show_races 'ENOENT'
[ "$other" = 0 ]
ok $? "two mounts: no other failure, both clients finished ($other)" ||
	{ diag_file "$T/race1.err" 10; diag_file "$T/race2.err" 10; }
rounds=$((rounds + R2))
ok_kvclient "the first mount reads every shared name whole" \
	verify --dir "$MNT" --expect $((NAMES + DNAMES + SNAMES)) --no-tmp
ok_kvclient "the second mount reads every name whole" \
	verify --dir "$MNT2" --expect $((NAMES + DNAMES + SNAMES)) --no-tmp
kvt_stop "$MNT2" "$pid2"
kvt_umount

"$KVTIERFS_FSCK" "$LOWER" >"$T/fsck.out" 2>"$T/fsck.err"
st=$?
leaked=$(grep -c '^orphan ' "$T/fsck.out")
ok "$st" "fsck: clean after the races ($(tail -n 1 "$T/fsck.out"))" ||
	{ diag_file "$T/fsck.out" 30; diag_file "$T/fsck.err" 10; }
kvt_mount
ok_kvclient "after a remount: $((NAMES + DNAMES + SNAMES)) complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $((NAMES + DNAMES + SNAMES)) --no-tmp
l=$(grep '^verify verify:' "$KVT_OUT")
[[ $l =~ \ blocks=([0-9]+) ]] && blocks=$((blocks + BASH_REMATCH[1]))
[[ $l =~ \ wrong=([0-9]+) ]] && wrong=$((wrong + BASH_REMATCH[1]))
kvt_umount
kvt_stress_summary "$rounds" "$blocks" "$wrong" "$lost" "$leaked"
