#!/bin/bash
# Eviction on ext4 (a loop device, tests/powercut.sh), which gives a freed
# inode number to the next file made: the record an eviction removes
# frees its number, and a store made meanwhile may take it at once.  The
# evictor knows a block by its record's inode number (evictor.h); it
# must not drop the new block from its index when it finishes evicting
# the old one (it did: after a long run the index knew few of the names
# on disk, and stores waited for a walk).  A server's stream
# (kvtierfs-bench --life, 16 threads) stores several times a small
# budget; once the passes are over, the evictor's index holds as many
# names as the store does, and a remount's walk finds the same.
# kvt-kind: mount
# kvt-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/powercut.sh"

: "${KVTIERFS_BENCH:=$top_builddir/src/kvtierfs-bench}"
kvt_require_root
kvt_setup
pc_require
plan 9
PC_SIZE=512M pc_disk
MiB=1048576
BUDGET=$((32 * MiB))

mattr() { kvt_mattr "$MNT" "$1"; }
# field KEY: KEY= on the bench's "life:" line.
field() {
	grep '^life: ' "$T/life.out" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'
}
# on_disk: the names the store holds (record files below names/).
on_disk() { find "$LOWER/names" -type f | wc -l; }
settled() { [ "$(mattr evicting)" = 0 ]; }

kvt_mount max_size=$BUDGET
kvt_guard "$KVTIERFS_BENCH" --life --dir "$MNT" --block-size 256K --threads 16 \
	--families 4096 --scan 20 --duration 8 --pid "$KVT_PID" >"$T/life.out" 2>"$T/life.err"
st=$?
sed 's/^/#   /' "$T/life.out"
stored=$(field stored)
# A load of a block evicted since its lookup found it (load_gone) is the
# one error allowed: a server computes it again.
{ [ "$st" = 0 ] || [ "$st" = 1 ]; } && [ "$(field wrong)" = 0 ] &&
	[ "$(field errors)" = "$(field load_gone)" ] && [ "$(field store_errors)" = 0 ] &&
	[ "$(field statfs_over)" = 0 ] && kvt_num_cmp "$((stored * 256 * 1024))" -ge $((3 * BUDGET))
ok $? "16 threads store $stored blocks of 256 KiB into a budget of 32 MiB: no store fails, 0 wrong, 0 statfs samples over (exit $st)" ||
	diag_file "$T/life.err" 10
kvt_within 10 settled
ok $? "the passes are over ($took s; $(kvt_stat "$MNT" evictions) evictions)"
n=$(on_disk) idx=$(mattr indexed_blocks)
[ "$idx" = "$n" ] && kvt_num_cmp "$n" -gt 0
ok $? "the index holds every name the store does: $idx indexed, $n on disk"
bad=0
while IFS= read -r -d '' f; do
	cat "$f" >/dev/null 2>&1 || bad=$((bad + 1))
done < <(find "$MNT" -type f -print0)
[ "$bad" = 0 ]
ok $? "every name left reads whole ($bad failed)"
kvt_umount
kvt_mount max_size=$BUDGET
indexed() { [ "$(mattr indexed)" = 1 ]; }
kvt_within 10 indexed && [ "$(mattr indexed_blocks)" = "$n" ]
ok $? "a remount's walk finds the same $n names ($(mattr indexed_blocks))"
kvt_umount
