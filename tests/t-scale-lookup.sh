#!/bin/bash
# Lookups at a server's scale: 100000 blocks of 4 KiB stored in vLLM's
# layout (about 200000 names, a directory per block or so) by 16
# threads, then each looked up once (access F_OK, one thread, as vLLM)
# 3 s after the stores, through the mount and on a plain directory of the
# same tmpfs.  With the default max_inodes (by the machine's memory) the
# kernel keeps every name, and the mount looks them up at half the
# plain directory's rate at least (a coarse guard: scripts/bench holds
# the figure).  With the old default, 65536, the kernel forgot most of
# the names and the mount ran at 0.04 of the plain directory: each
# lookup is a round trip to the daemon, which no order of forgetting
# saves.  Then a first miss of as many names never stored, after which
# the daemon holds open most first-level directories it looked in.
#
# KVT_SCALE_BLOCKS sets the number of blocks (default 100000).
# kvt-kind: mount
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_BENCH:=$top_builddir/src/kvtierfs-bench}"
BLOCKS=${KVT_SCALE_BLOCKS:-100000}

plan 8
kvt_require_root
kvt_setup
[ -x "$KVTIERFS_BENCH" ] || bail "kvtierfs-bench is not built: $KVTIERFS_BENCH"
# In memory, both sides: what is measured is the daemon and the kernel's
# caches, not the disk.
mkdir "$T/mem" || bail "mkdir"
mount -t tmpfs -o size=$((BLOCKS * 16 / 1024 + 1024))m,nr_inodes=$((BLOCKS * 8 + 100000)) \
	kvt-scale "$T/mem" || bail "mount tmpfs"
mkdir "$T/mem/plain" "$T/mem/lower" || bail "mkdir"
chmod 0700 "$T/mem/lower"
[ "$KVT_CMD_TIMEOUT" -ge $((BLOCKS / 500 + 150)) ] || KVT_CMD_TIMEOUT=$((BLOCKS / 500 + 150))

# bench DIR OUT: the stores, then the lookups 3 s later.
bench() {
	kvt_guard "$KVTIERFS_BENCH" --dir "$1" --block-size 4K --blocks "$BLOCKS" --threads 16 \
		--phases store,lookup --lookup-after 3 --quiet >"$2" 2>"$2.err"
}
# rate OUT PHASE: ops/s of PHASE.
rate() { grep "^$2: " "$1" | tr ' ' '\n' | awk -F= '$1 == "ops/s" { print $2 }'; }
lookups_ok() { grep -q "^lookup: ops=$BLOCKS " "$1"; }

bench "$T/mem/plain" "$T/plain.out"
lookups_ok "$T/plain.out"
ok $? "plain directory: $BLOCKS stores, $BLOCKS lookups 3 s later ($(rate "$T/plain.out" lookup) a second)" ||
	diag_file "$T/plain.out.err" 5
plain=$(rate "$T/plain.out" lookup)

LOWER=$T/mem/lower
kvt_mount
grep -Eo 'max_inodes=[0-9]+ names the kernel knows' "$T/daemon.log" | tail -n 1 >"$T/max"
max=$(grep -Eo '[0-9]+' "$T/max")
kvt_num_cmp "${max:-0}" -ge 65536
ok $? "the default max_inodes follows the memory: $max"
bench "$MNT" "$T/mnt.out"
lookups_ok "$T/mnt.out"
ok $? "the mount: $BLOCKS stores, $BLOCKS lookups 3 s later ($(rate "$T/mnt.out" lookup) a second)" ||
	diag_file "$T/mnt.out.err" 5
ratio=$(kvt_calc 'int(m / p * 1000) / 1000' m="$(rate "$T/mnt.out" lookup)" p="$plain")
names=$(find "$LOWER/names" | wc -l)
if kvt_num_cmp "$names" -le "$max"; then
	kvt_num_cmp "$ratio" -ge 0.5
	ok $? "the kernel keeps all $names names: lookups at $ratio of the plain directory's rate (>= 0.5)"
else
	skip "lookups at half the plain directory's rate" "$names names, more than max_inodes=$max on this machine"
fi
# First misses land in any of the 4096 first-level directories (and a
# tenth of them in a second-level one); the daemon keeps them open once it
# looked in them (max_dir_fds: a quarter of its descriptors, the least
# recently used let go), so that the next miss there is one lower call,
# not three more to open it again.  With the old default it held 1024
# directories in all.
kvt_guard "$KVTIERFS_BENCH" --dir "$MNT" --block-size 4K --blocks "$BLOCKS" \
	--phases lookup-miss --quiet >"$T/miss.out" 2>"$T/miss.out.err"
grep -q "^lookup-miss: ops=$BLOCKS .* errors=0$" "$T/miss.out"
ok $? "the mount: $BLOCKS first misses ($(rate "$T/miss.out" lookup-miss) a second)" ||
	diag_file "$T/miss.out.err" 5
level1=$(find "$LOWER/names" -mindepth 2 -maxdepth 2 -type d | wc -l)
dirfds=$(find "/proc/$KVT_PID/fd" -mindepth 1 -maxdepth 1 -printf '%l\n' 2>/dev/null |
	grep -c "^$LOWER/names/[^/]*/[^/]*$")
limit=$(awk '/^Max open files/ { print $4 }' "/proc/$KVT_PID/limits")
if kvt_num_cmp "${limit:-0}" -ge 8192; then
	kvt_num_cmp "$dirfds" -ge 2048
	ok $? "the daemon keeps open most first-level directories it looked in: $dirfds of $level1 (>= 2048, its open-file limit $limit)"
else
	skip "the daemon keeps open most first-level directories" "its open-file limit is $limit"
fi
rss=$(awk '/^VmRSS:/ { print $2 }' /proc/"$KVT_PID"/status 2>/dev/null)
diag "daemon RSS with $names names known: ${rss:-?} KiB"
kvt_umount
