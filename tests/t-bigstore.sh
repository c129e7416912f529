#!/bin/bash
# A large store costs nothing at mount time and nothing per lookup: the
# mount answers its first lookup at once (the bound is 2 s with a million
# names), the lookup rate of a store with many names is that of a small
# one, and the daemon's memory stays small however many names it has
# looked up (-o max_inodes: 60000 names looked up take less than 3/4 of
# the memory they take without).
#
# KVT_BIG_NAMES (default 20000) sets the size of the large store; the
# figures for one million names are in docs/performance.md.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

BIG=${KVT_BIG_NAMES:-20000}
BOUND=60000
SMALL=2000
LOOKUPS=2000
MKSTORE=$top_builddir/tests/mkstore

plan 19
kvt_require_root
kvt_setup
[ -x "$MKSTORE" ] || bail "tests/mkstore is not built"

ok_cmd "fill a store with $SMALL names" "$MKSTORE" fill "$LOWER" $SMALL
small=$LOWER
kvt_new_lower
ok_cmd "fill a store with $BIG names" "$MKSTORE" fill "$LOWER" $BIG
big=$LOWER

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# mount_and_measure LOWER N: mounts, times the first lookup from the
# start of the mount, then the rate of $LOOKUPS lookups of distinct names,
# each new to the mount (the lower disk's cache is warm for both stores:
# what is measured is kvtierfs, not the disk); sets FIRST_MS, RATE.
mount_and_measure() {
	local t0
	LOWER=$1
	t0=$(now_ms)
	kvt_mount
	kvt_run "$MKSTORE" lookup "$MNT" "$2" 1 >/dev/null
	FIRST_MS=$(($(now_ms) - t0))
	RATE=$(kvt_run "$MKSTORE" lookup "$MNT" "$2" $LOOKUPS | awk '{ print $(NF - 1) }')
}

mount_and_measure "$small" $SMALL
small_first=$FIRST_MS small_rate=$RATE
kvt_umount
mount_and_measure "$big" $BIG
big_first=$FIRST_MS big_rate=$RATE
diag "first lookup after the mount started: ${small_first} ms ($SMALL names), ${big_first} ms ($BIG names)"
diag "lookup rate, $LOOKUPS distinct names new to the mount: $small_rate/s ($SMALL names), $big_rate/s ($BIG names)"

[ "$big_first" -lt 2000 ]
ok $? "with $BIG names the first lookup is answered within 2 s of the mount (${big_first} ms)"
kvt_num_cmp "$big_rate" -ge "$(kvt_calc '0.7 * s' s="$small_rate")"
ok $? "the lookup rate with $BIG names is that of $SMALL names (>= 0.7 x: $big_rate vs $small_rate per s)"

ok_cmd "look up every one of the $BIG names" "$MKSTORE" lookup "$MNT" $BIG $BIG
rss=$(awk '/^VmRSS/ { print $2 }' /proc/"$KVT_PID"/status)
diag "daemon RSS after looking up all $BIG names: ${rss} KiB"
sanitized=$(kvt_sanitizer)
if [ -n "$sanitized" ]; then
	skip "the daemon's RSS stays below 64 MiB" "$sanitized"
else
	[ -n "$rss" ] && [ "$rss" -lt $((64 * 1024)) ]
	ok $? "the daemon's RSS stays below 64 MiB (${rss} KiB)"
fi
n=$(ls -A "$big/staging" | wc -l)
[ "$n" = 1 ]
ok $? "the mount did not walk or copy the store: only its own staging directory is new ($n)"
kvt_umount

# The kernel keeps what it looked up; -o max_inodes makes it forget the
# oldest, so that the daemon's inodes stay bounded.  Measured with more
# names than above: the inodes of $BIG names are some 5 MiB, as much as the
# RSS of the threads a loaded machine adds to one mount and not the other.
rss_after() { # NAMES: every name looked up; RSS_NOW (KiB), THREADS
	ok_cmd "$1: look up every one of the $BOUND names" "$MKSTORE" lookup "$MNT" $BOUND $BOUND
	RSS_NOW=$(awk '/^VmRSS/ { print $2 }' /proc/"$KVT_PID"/status)
	THREADS=$(ls /proc/"$KVT_PID"/task | wc -l)
}
kvt_new_lower
ok_cmd "fill a store with $BOUND names" "$MKSTORE" fill "$LOWER" $BOUND
kvt_mount
rss_after "default"
rss=$RSS_NOW threads=$THREADS
kvt_umount
kvt_mount max_inodes=1000
rss_after "-o max_inodes=1000"
diag "daemon RSS after $BOUND lookups: ${RSS_NOW} KiB with max_inodes=1000, $THREADS threads;" \
	"${rss} KiB by default, $threads threads"
if [ -n "$sanitized" ]; then
	skip "bounded inodes: the RSS stays well below the default's" "$sanitized"
else
	[ -n "$RSS_NOW" ] && [ "$RSS_NOW" -lt $((rss * 3 / 4)) ]
	ok $? "bounded inodes: the RSS stays below 3/4 of the default's (${RSS_NOW} vs ${rss} KiB)"
fi
kvt_umount
