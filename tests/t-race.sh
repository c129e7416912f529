#!/bin/bash
# Two or more writers store the SAME names via tmp+rename (vLLM style, no
# access() skip) with different versions while readers read them: every
# read is one complete version, and once published a name never vanishes
# (rename over an existing name is atomic).  Old versions replaced by a
# rename must not stay behind in the lower store.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

NAMES=4
SIZE=$((2 << 20))

plan 10
kvt_setup
kvt_mount

ok_kvclient "race buffered: 4 writers x 30 rounds over $NAMES names, 8 readers" \
	race --dir "$MNT" --blocks $NAMES --size $SIZE --writers 4 --readers 8 \
	--rounds 30 --buffered
ok_kvclient "race O_DIRECT: 4 writers x 30 rounds over $NAMES names, 8 readers" \
	race --dir "$MNT" --blocks $NAMES --key-base 100 --size $SIZE --writers 4 \
	--readers 8 --rounds 30 --odirect
ok_kvclient "race, 2 writers, 1 MiB blocks, 50 rounds over 1 name, 8 readers" \
	race --dir "$MNT" --blocks 1 --key-base 200 --size 1M --writers 2 \
	--readers 8 --rounds 50 --buffered
ok_kvclient "verify: $((2 * NAMES + 1)) complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $((2 * NAMES + 1)) --no-tmp

kvt_umount
kvt_mount
ok_kvclient "after remount: $((2 * NAMES + 1)) complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $((2 * NAMES + 1)) --no-tmp

# objects are counted by inode: a name may hold a hard link to its object
n=$(find "$LOWER/objects" -type f -printf '%i\n' 2>/dev/null | sort -u | wc -l)
[ "$n" -ge 1 ] && [ "$n" -le $((2 * NAMES + 1)) ]
ok $? "objects/ holds no more objects (inodes) than live names ($n for $((2 * NAMES + 1)) names after up to 1060 stores)"

kvt_umount
