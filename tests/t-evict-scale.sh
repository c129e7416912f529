#!/bin/bash
# Eviction at a server's number of blocks: 16 threads store blocks of
# 4 KiB in vLLM's layout, twice what the budget holds, once with room
# (no budget) and once with max_size at half of them.  With the budget:
# no store fails, statfs sampled at 10 Hz never shows more than the
# budget, the evictor keeps up (the stores go at least at half the pace
# of the run with room), half the blocks or more are evicted, every
# block left loads back whole, and the daemon's memory stays within what
# its caches and the evictor's index (KVT_EVICTOR_BYTES_PER_BLOCK, 400
# bytes a block held) allow.  Mounted again with the budget halved, the
# store answers its first lookup within 2 s while the index of its names
# is built in the background, stores made meanwhile wait for the index
# instead of being refused, and the usage comes down to the new budget.
# The figures (stores a second, evictions, the daemon's RSS and CPU
# seconds) go to the TAP diagnostics.
#
# KVT_EVICT_BLOCKS sets the number of blocks: 30000, or 1000000 with
# KVT_STRESS=1 (scripts/stress).
# kvt-kind: mount
# kvt-timeout: 1800
. "$(dirname "$0")/lib.sh"

BLOCKS=${KVT_EVICT_BLOCKS:-$(kvt_stress_pick 30000 1000000)}
BUDGET=$((BLOCKS / 2 * 4096))
MAX_INODES=65536
VERIFY_CACHE=100000
BYTES_PER_BLOCK=400 # evictor.h

plan 22
kvt_require_root
kvt_setup
[ "$KVT_CMD_TIMEOUT" -ge $((BLOCKS / 300 + 150)) ] || KVT_CMD_TIMEOUT=$((BLOCKS / 300 + 150))
# The kernel lets go of a million names at an unmount: give it time.
[ "$KVT_UMOUNT_TIMEOUT" -ge $((BLOCKS / 5000 + 60)) ] || KVT_UMOUNT_TIMEOUT=$((BLOCKS / 5000 + 60))

# tier DIR: a tmpfs for DIR, big enough for all the blocks (4 KiB of
# object and a page of record each) and their directories (t-scale.sh).
tier() {
	mkdir -p "$1"
	mount -t tmpfs -o size=$((BLOCKS * 16 / 1024 + 1024))m,nr_inodes=$((BLOCKS * 5 + 100000)) \
		kvt-evict "$1" || bail "mount tmpfs"
	mkdir -m 0700 "$1/lower"
	LOWER=$1/lower
}
cpu_secs() {
	awk '{ printf "%.1f", ($14 + $15) / 100 }' /proc/"$KVT_PID"/stat 2>/dev/null
}
rss_kib() {
	awk '/^VmRSS:/ { print $2 }' /proc/"$KVT_PID"/status 2>/dev/null
}
# store: all the blocks, 16 threads; $secs, the run's seconds.
store() {
	local t0
	t0=$(date +%s.%N)
	ok_kvclient "$1" vllm-store --dir "$MNT" --blocks "$BLOCKS" --size 4K --threads 16
	secs=$(kvt_calc 'b - a' a="$t0" b="$(date +%s.%N)")
}

# --- with room ---------------------------------------------------------
tier "$T/room"
kvt_mount max_inodes=$MAX_INODES verify_cache=$VERIFY_CACHE
store "with room: $BLOCKS blocks of 4 KiB, vLLM layout, 16 threads"
room_secs=$secs
room_rate=$(kvt_calc 'int(n / s)' n="$BLOCKS" s="$secs")
diag "with room: $room_rate stores/s; daemon CPU $(cpu_secs) s, RSS $(rss_kib) KiB"
kvt_umount
umount "$T/room"

# --- at half --------------------------------------------------------
tier "$T/half"
mount_at=$(stat -c %s "$T/daemon.log")
kvt_mount max_inodes=$MAX_INODES verify_cache=$VERIFY_CACHE max_size=$BUDGET
kvt_wait_log "eviction: an index of the store's 0 names built" 1 "$mount_at"
ok $? "a budget of $BUDGET bytes: half the blocks"
: >"$T/samples"
(while [ ! -e "$T/stop" ]; do
	stat -f -c '%b %f %S' "$MNT" | awk '{ print ($1 - $2) * $3 }' >>"$T/samples"
	sleep 0.1
done) &
sampler=$!
store "at half: the same stores"
# The last pass may still run: what is counted and read is what it leaves.
evicting() { [ "$(kvt_mattr "$MNT" evicting)" = 1 ]; }
idle() { ! evicting && sleep 0.5 && ! evicting; }
kvt_within $((BLOCKS / 1000 + 60)) idle
diag "the evictor was idle $took s after the stores ended"
touch "$T/stop"
wait "$sampler"
grep -q "errors=0 stored=$BLOCKS " "$KVT_OUT"
ok $? "every one stored, no error"
half_rate=$(kvt_calc 'int(n / s)' n="$BLOCKS" s="$secs")
ev=$(kvt_stat "$MNT" evictions) passes=$(kvt_stat "$MNT" evict_passes)
pass_us=$(kvt_stat "$MNT" evict_pass_us)
cpu=$(cpu_secs) rss=$(rss_kib)
diag "at half: $half_rate stores/s ($room_rate with room); $ev evictions in $passes passes" \
	"taking $(kvt_calc 'int(u / 1000)' u="$pass_us") ms; daemon CPU $cpu s, RSS $rss KiB"
kvt_num_cmp "$half_rate" -ge "$(kvt_calc 'int(r / 2)' r="$room_rate")"
ok $? "the evictor keeps up: $half_rate stores/s, at least half of $room_rate with room"
max=$(sort -n "$T/samples" | tail -n 1)
n=$(grep -c '' "$T/samples")
kvt_num_cmp "$n" -ge 10 && kvt_num_cmp "$max" -le "$BUDGET"
ok $? "statfs sampled $n times at 10 Hz: at most $max bytes used, the budget $BUDGET"
kvt_num_cmp "$ev" -ge $((BLOCKS / 2))
ok $? "$ev evictions, at least half the blocks"
held=$(kvt_mattr "$MNT" indexed_blocks)
left=$(find "$LOWER/names" -name '*.bin' -type f | wc -l)
[ -n "$held" ] && [ "$held" = "$left" ]
ok $? "the index holds the $left names left ($held)"
bound=$((64 * 1024 + MAX_INODES + VERIFY_CACHE * 128 / 1024 + left * BYTES_PER_BLOCK / 1024))
# Under a sanitizer its allocator's padding is most of the RSS: not
# kvtierfs's memory (t-life.sh does the same).
sanitized=$(kvt_sanitizer)
[ -n "$sanitized" ] && bound=$((bound * 4))
[ -n "$rss" ] && kvt_num_cmp "$rss" -le "$bound"
ok $? "the daemon's memory ($rss KiB) within 64 MiB + its caches + $BYTES_PER_BLOCK bytes a name held ($bound KiB${sanitized:+, 4 times that under an $sanitized})"
ok_kvclient "read every block left, each checked" verify --dir "$MNT" --min "$left"
grep -q " wrong=0 " "$KVT_OUT" && grep -q " valid=$left " "$KVT_OUT"
ok $? "every block left reads back whole"
kvt_umount
# A mount of the store serves before its index and usage are built; with
# its budget halved it holds twice the budget, and stores made while the
# index is built wait for it instead of being refused.
one=$(cd "$LOWER/names" && find . -name '*.bin' -type f -print -quit)
mount_at=$(stat -c %s "$T/daemon.log")
t0=$(date +%s.%N)
kvt_mount max_inodes=$MAX_INODES verify_cache=$VERIFY_CACHE max_size=$((BUDGET / 2))
[ -n "$one" ] && stat "$MNT/$one" >/dev/null
st=$?
first=$(kvt_calc 'b - a' a="$t0" b="$(date +%s.%N)")
[ "$st" = 0 ] && kvt_num_cmp "$first" -le 2
ok $? "remounted with $left names: the first lookup answered $first s after the mount began (2 s at most)"
ok_kvclient "the budget halved: 2000 more stores at once, none refused" vllm-store --dir "$MNT" \
	--blocks 2000 --key-base $((BLOCKS * 2)) --size 4K --threads 16
kvt_wait_log "eviction: an index of the store's $left names built" 1 "$mount_at"
ok $? "the index of the $left names is built in the background: $(grep -o "index of the store's $left names built in [0-9.]* s" "$T/daemon.log" | tail -n 1)"
! tail -c +"$((mount_at + 1))" "$T/daemon.log" | grep -q 'no room for a new object'
ok $? "no store refused while the index was built"
down() { kvt_num_cmp "$(kvt_mattr "$MNT" usage)" -le $((BUDGET / 2)); }
kvt_within 60 down
ok $? "the usage came down to the halved budget ($took s)"
kvt_umount
umount "$T/half"
