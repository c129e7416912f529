#!/bin/bash
# The lower directory is the only truth: after an unmount and a new mount
# every stored block reads back identical, client temp files that were
# written and closed but never renamed are gone, and staging/ holds nothing
# of the old mount.  Two mounts may share one lower directory.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

BLOCKS=64
SIZE=$((2 << 20))

plan 26
kvt_setup
kvt_mount

ok_kvclient "vllm-store O_DIRECT: $BLOCKS x 2 MiB" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 8 --odirect
ok_kvclient "vllm-store --no-rename: 3 block temps written and closed, never renamed" \
	vllm-store --dir "$MNT" --blocks 3 --key-base 1000 --size $SIZE --threads 3 \
	--odirect --no-rename
ok_cmd "a process writes and closes other *.tmp files (LMCache style, and at the root)" \
	bash -c 'head -c 1048576 /dev/urandom >"$1/kv-00000000000007d0.pt.tmp" &&
		mkdir -p "$1/sub/dir" && head -c 4096 /dev/urandom >"$1/sub/dir/x.tmp" &&
		echo hello >"$1/plain.tmp"' _ "$MNT"
n=$(kvt_count_tmp "$MNT") && [ "$n" = 6 ]
ok $? "the 6 temp files are visible while mounted (found $n)"

t=$(kvt_run find "$MNT" -name '*.bin_*.tmp' | head -n 1)
v=$(kvt_xattr "$t" user.kvtierfs.verdict)
[ "$v" = pending ]
ok $? "a closed, never renamed block temp is 'pending' (got '$v')"
v=$(kvt_xattr "$MNT/plain.tmp" user.kvtierfs.verdict)
[ "$v" = pending ]
ok $? "a closed plain *.tmp is 'pending' (got '$v')"

ok_cmd "config.json written with a plain open('w') reads back" \
	bash -c 'd=$(ls -d "$1"/*_r0 | head -n 1); d=${d%_r0}
		mkdir -p "$d" && printf "{\"model\": \"x\"}\n" >"$d/config.json" &&
		[ "$(cat "$d/config.json")" = "{\"model\": \"x\"}" ]' _ "$MNT"

ls -A "$LOWER/staging" >"$T/staging.old" 2>/dev/null
[ -s "$T/staging.old" ]
ok $? "LOWERDIR/staging has this mount's staging ($(tr '\n' ' ' <"$T/staging.old"))"
find "$LOWER/staging" -mindepth 1 >"$T/staging.old.all" 2>/dev/null

kvt_umount
kvt_mount

f=$(kvt_first_block "$MNT")
v=$(kvt_xattr "$f" user.kvtierfs.verdict)
[ "$v" = unverified ]
ok $? "after remount an unread block is 'unverified' (got '$v')"

ok_kvclient "verify after remount: exactly $BLOCKS complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $BLOCKS --size $SIZE --no-tmp
n=$(kvt_count_tmp "$MNT") && [ "$n" = 0 ]
ok $? "no *.tmp name after remount (found $n)"
[ "$n" = 0 ] || kvt_run find "$MNT" -name '*.tmp' | head -n 5 | sed 's/^/#   /'

left=$(while IFS= read -r p; do [ -e "$p" ] && echo "$p"; done <"$T/staging.old.all")
[ -z "$left" ]
ok $? "staging/ holds nothing of the old mount"
[ -z "$left" ] || diag "$left"

ok_kvclient "vllm-load O_DIRECT after remount: every byte" \
	vllm-load --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect
ok_cmd "config.json survived the remount" \
	bash -c 'd=$(ls -d "$1"/*_r0 | head -n 1); d=${d%_r0}
		[ "$(cat "$d/config.json")" = "{\"model\": \"x\"}" ]' _ "$MNT"

# --- two mounts of one lower directory -----------------------------------
MNT2="$T/mnt2"
mkdir "$MNT2"
kvt_start "$LOWER" "$MNT2"
pid2=$KVT_LAST_PID
ok_kvclient "second mount of the same lower: sees the $BLOCKS blocks" \
	verify --dir "$MNT2" --expect $BLOCKS --size $SIZE --no-tmp
ok_kvclient "store 16 new blocks through the first mount" \
	vllm-store --dir "$MNT" --blocks 16 --key-base 5000 --size $SIZE --threads 4
ok_kvclient "the second mount reads the 16 new blocks" \
	vllm-load --dir "$MNT2" --blocks 16 --key-base 5000 --size $SIZE --threads 4
kvt_stop "$MNT2" "$pid2"
kvt_umount

kvt_mount
ok_kvclient "third mount: exactly $((BLOCKS + 16)) complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $((BLOCKS + 16)) --size $SIZE --no-tmp
kvt_umount
