#!/bin/bash
# llm-d fs backend: 16 MiB files written in 1 MiB chunks to dest_<u32>.tmp,
# renamed while the fd is still open; a store of a present block is an
# open(O_RDONLY) probe plus utimensat(atime=NOW, mtime=OMIT); loads read the
# tail at non-zero offsets.  Its evictor needs st_atime to move on reads,
# unlink + rmdir to work, and statvfs to show the space coming back.
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"

BLOCKS=32
SIZE=$((16 << 20))
OLD='2020-01-01 00:00:00 UTC'

plan 18
kvt_setup
kvt_mount

ok_kvclient "llmd-store: $BLOCKS x 16 MiB, 8 threads, rename with the fd open" \
	llmd-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 8

ok_cmd "touch -a -d '$OLD' on every block" \
	find "$MNT" -name '*.bin' -exec touch -a -d "$OLD" {} +

old=$(date -d "$OLD" +%s)
kvt_run find "$MNT" -name '*.bin' -printf '%A@ %p\n' >"$T/atimes"
n=$(grep -c '' "$T/atimes")
bad=$(awk -v o="$old" 'int($1) != o' "$T/atimes" | head -n 3)
[ "$n" = $BLOCKS ] && [ -z "$bad" ]
ok $? "atime of every block is now $OLD ($n blocks)"
[ -z "$bad" ] || diag "$bad"

ok_kvclient "llmd-store again: every block present, utimensat keeps mtime, moves atime" \
	llmd-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 8
grep -q "present=$BLOCKS touched=$BLOCKS" "$KVT_OUT"
ok $? "second store found all $BLOCKS blocks present and touched them"

ok_kvclient "llmd-load buffered: lseek(SEEK_END), tail preads, bytes checked" \
	llmd-load --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 8 --buffered
ok_kvclient "llmd-load O_DIRECT: lseek(SEEK_END), tail preads, bytes checked" \
	llmd-load --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 8 --odirect

f=$(kvt_first_block "$MNT")
kvt_run touch -a -d "$OLD" "$f"
a0=$(kvt_run stat -c %X "$f")
t0=$(date +%s)
kvt_run cat "$f" >/dev/null
a=$(kvt_run stat -c %X "$f")
[ "$a0" = "$old" ] && [ "$a" -ge "$t0" ] 2>/dev/null
ok $? "a read moves st_atime (evictor skips recently read files): atime $a0 before, $a after a read at $t0"

ok_kvclient "verify: $BLOCKS complete 16 MiB blocks, no *.tmp" \
	verify --dir "$MNT" --expect $BLOCKS --size $SIZE --no-tmp

# --- the evictor: unlink half of the blocks, rmdir emptied directories ----
avail() { # bytes available (bash arithmetic: mawk's printf %d stops at 2^31)
	local a s
	read -r a s <<<"$(kvt_run stat -f -c '%a %S' "$1")"
	echo $((a * s))
}
before=$(avail "$MNT")
kvt_run find "$MNT" -name '*.bin' | LC_ALL=C sort | head -n $((BLOCKS / 2)) >"$T/evict.list"
ok_cmd "evictor: unlink $((BLOCKS / 2)) blocks and rmdir the emptied directories" \
	bash -c 'xargs -d "\n" rm -f -- <"$1" && find "$2" -mindepth 1 -depth -type d -empty -delete' \
	_ "$T/evict.list" "$MNT"

left=0
while IFS= read -r p; do
	kvt_run test -e "$p" && left=$((left + 1))
done <"$T/evict.list"
[ "$left" = 0 ]
ok $? "unlinked names are gone ($left still visible)"

ok_kvclient "verify after eviction: $((BLOCKS / 2)) blocks left" \
	verify --dir "$MNT" --expect $((BLOCKS / 2)) --size $SIZE --no-tmp

# ext4 returns freed blocks at the next journal commit: commit it
sync -f "$LOWER"
after=$(avail "$MNT")
freed=$((after - before))
[ "$freed" -ge $((BLOCKS / 2 * SIZE / 2)) ]
ok $? "statvfs shows the space come back: $((freed >> 20)) MiB freed for $((BLOCKS / 2 * SIZE >> 20)) MiB unlinked"

kvt_umount
kvt_mount
ok_kvclient "after remount: the $((BLOCKS / 2)) blocks left are complete, the evicted stay gone" \
	verify --dir "$MNT" --expect $((BLOCKS / 2)) --size $SIZE --no-tmp
kvt_umount
