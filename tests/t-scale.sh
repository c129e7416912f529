#!/bin/bash
# A server's number of blocks: 100000 blocks of 4 KiB stored through the
# mount in vLLM's layout (<3 hex>/<2 hex>_g0/<hash>.bin, about 100000
# directories) by 16 threads, then loaded back: not one error, and the
# daemon's open files stay bounded by -o max_dir_fds, and its memory by
# 64 MiB and -o max_inodes and verify_cache, not by the number of
# directories; mounted again with both caches at their smallest, the
# loads of every block leave it under 40 MiB + 1.1 MiB a thread.
#
# KVT_SCALE_BLOCKS sets the number of blocks: 100000, or 1000000 with
# KVT_STRESS=1 (scripts/stress; about 8 minutes of stores here).
# kvt-kind: mount
# kvt-timeout: 900
. "$(dirname "$0")/lib.sh"

BLOCKS=${KVT_SCALE_BLOCKS:-$(kvt_stress_pick 100000 1000000)}
MAX_DIR_FDS=256
# What the daemon holds open besides its directory cache: stdio, the
# FUSE device, the store's own directories and lock, the 256 object
# fan-out directories, and a splice pipe and an io_uring ring for each of
# at most 64 request threads.
FIXED=512
MAX_INODES=65536
VERIFY_CACHE=100000
# The daemon's memory: 64 MiB, and what its caches hold at most:
# max_inodes inodes (files and directories) at 1 KiB each, verify_cache
# entries at 128 bytes.  (With directories outside max_inodes it was
# 156 MiB here: one inode per directory, and vLLM makes about one
# directory per block.)
RSS_BOUND_MIB=$((64 + MAX_INODES / 1024 + VERIFY_CACHE * 128 / 1048576))

plan 14
kvt_require_root
kvt_setup
# In memory: what is measured is the daemon's files, not the disk, and
# the next test does not wait for 100000 directories to be written back.
# 4 KiB of object and a page of record a block, and about 3.7 inodes a
# block (record, object, directories; measured 3649448 for a million): a
# million blocks overflow a default tmpfs's inodes.
mount -t tmpfs -o size=$((BLOCKS * 16 / 1024 + 1024))m,nr_inodes=$((BLOCKS * 5 + 100000)) \
	kvt-scale "$LOWER" || bail "mount tmpfs"
kvt_mount max_dir_fds=$MAX_DIR_FDS max_inodes=$MAX_INODES verify_cache=$VERIFY_CACHE
# A store or load of every block is one command: give it the time a
# million of them take here (about 3000 a second), not the 150 s meant for
# one client call.
[ "$KVT_CMD_TIMEOUT" -ge $((BLOCKS / 500 + 150)) ] || KVT_CMD_TIMEOUT=$((BLOCKS / 500 + 150))

# The daemon's open files; nothing when it is gone, which fails the check.
fds() {
	kill -0 "$KVT_PID" 2>/dev/null &&
		find /proc/"$KVT_PID"/fd -mindepth 1 -maxdepth 1 2>/dev/null | wc -l
}

ok_kvclient "store $BLOCKS blocks of 4 KiB, vLLM layout, 16 threads" \
	vllm-store --dir "$MNT" --blocks "$BLOCKS" --size 4K --threads 16
grep -q "errors=0 stored=$BLOCKS " "$KVT_OUT"
ok $? "every one stored, no error"

dirs=$(find "$LOWER/names" -mindepth 1 -type d | wc -l)
n=$(fds)
diag "lower directories: $dirs; daemon fds after the stores: $n (max_dir_fds=$MAX_DIR_FDS)"
[ "$dirs" -gt $((10 * (MAX_DIR_FDS + FIXED))) ] && [ -n "$n" ] && [ "$n" -gt 0 ] &&
	[ "$n" -le $((MAX_DIR_FDS + FIXED)) ]
ok $? "the daemon's open files ($n) stay within max_dir_fds + $FIXED, with $dirs directories"

ok_kvclient "load all $BLOCKS back, every byte checked" \
	vllm-load --dir "$MNT" --blocks "$BLOCKS" --size 4K --threads 16
grep -q "errors=0" "$KVT_OUT"
ok $? "no load failed"

n=$(fds)
diag "daemon fds after the loads: $n"
[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -le $((MAX_DIR_FDS + FIXED)) ]
ok $? "and the open files are still within the bound after every directory was visited again ($n)"
rss=$(awk '/^VmRSS:/ { print $2 }' /proc/"$KVT_PID"/status 2>/dev/null)
diag "daemon RSS after $BLOCKS stores and loads: ${rss:-?} KiB (max_inodes=$MAX_INODES, verify_cache=$VERIFY_CACHE)"
sanitized=$(kvt_sanitizer)
if [ -n "$sanitized" ]; then
	skip "the daemon's memory stays within 64 MiB + its bounded caches" "$sanitized"
else
	[ -n "$rss" ] && [ "$rss" -le $((RSS_BOUND_MIB * 1024)) ]
	ok $? "the daemon's memory stays within 64 MiB + its bounded caches = $RSS_BOUND_MIB MiB (${rss:-?} KiB)"
fi
kvt_umount

# The memory without the caches: the same store mounted again with both
# caches at their smallest, every block loaded.  What is left grows with
# the threads libfuse started for the loads (45-67 MiB here at 26-37
# threads), as t-life's bound for large writes has it: 40 MiB and 1.1 MiB
# a thread.
kvt_mount max_dir_fds=$MAX_DIR_FDS max_inodes=64 verify_cache=16
ok_kvclient "with max_inodes=64 and verify_cache=16: load all $BLOCKS, every byte checked" \
	vllm-load --dir "$MNT" --blocks "$BLOCKS" --size 4K --threads 16
rss=$(awk '/^VmRSS:/ { print $2 }' /proc/"$KVT_PID"/status 2>/dev/null)
threads=$(ls /proc/"$KVT_PID"/task 2>/dev/null | wc -l)
grep -q "errors=0" "$KVT_OUT"
ok $? "... no load failed"
if [ -n "$sanitized" ]; then
	skip "... and the daemon's memory stays within 40 MiB + 1.1 MiB a thread" "$sanitized"
else
	limit=$(( (40 << 10) + threads * 1126 ))
	[ -n "$rss" ] && [ "$threads" -gt 0 ] && [ "$rss" -le "$limit" ]
	ok $? "... and the daemon's memory stays within 40 MiB + 1.1 MiB for each of its $threads threads ($limit KiB): ${rss:-?} KiB"
fi
kvt_umount
