#!/bin/bash
# Eviction on a store two hosts share over GlusterFS (tests/gluster.sh),
# each with the same budget: one budget for the store, one evictor at a
# time, uses seen from both hosts.
#
# Host A stores 6 blocks; host B's usage counts them within a few seconds
# (each mount's moves in staging/<id>/usage, ledger.h).  B loads one of
# them; A then stores past evict_high and evicts: the block B loaded stays
# (its record's atime says so), the oldest others go, and miss on both
# hosts.  B stores 4 more past the budget: none fails, B leaves the passes
# to A (which leads from its mount on) and says so, and both hosts' statfs
# show the same usage, within the budget.  Every name left reads back on
# both hosts, and kvtierfs-fsck finds the store clean after (an eviction
# leaves no orphan).  Then, on a fresh store, a block open on host B is
# spared by host A's pass (B's pins file, peerpins.h).
# kvt-kind: remote
# kvt-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gluster.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 28
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
MiB=1048576
BUDGET=$((8 * MiB))

gl_setup
ok 0 "GlusterFS volume on $GL_ADDR, mounted twice (two hosts)"
# lead_of HOST: the mount's evict_lead line (1: it evicts past
# evict_high, the first mount whose index is built).
lead_of() { kvt_mattr "$1" evict_lead; }
a_leads() { [ "$(lead_of "$K1")" = 1 ]; }
# Host A leads before host B mounts.
mkdir "$GL1/store" "$T/k1" "$T/k2" || bail "mkdir failed"
K1=$T/k1
K2=$T/k2
kvt_start "$GL1/store" "$K1" max_size=8M,evict=lru,evict_high=95,evict_low=85
P1=$KVT_LAST_PID
kvt_within 10 a_leads || bail "host A does not lead the eviction (evict_lead $(lead_of "$K1"))"
kvt_start "$GL2/store" "$K2" max_size=8M,evict=lru,evict_high=95,evict_low=85
P2=$KVT_LAST_PID

for i in $(seq 1 12); do head -c $MiB /dev/urandom >"$T/b$i" || bail "random bytes"; done
# store HOST N: block N stored through HOST as tmp + rename.
store() { cp "$T/b$2" "$1/b$2.tmp" && mv "$1/b$2.tmp" "$1/b$2.bin"; }
usedof() { stat -f -c '%b %f %S' "$1" | awk '{ print ($1 - $2) * $3 }'; }
same_usage() { [ "$(usedof "$K1")" = "$(usedof "$K2")" ]; }
# left HOST: the blocks HOST sees, "1 2 ...".
left() {
	local i out=()
	for i in $(seq 1 12); do [ -e "$1/b$i.bin" ] && out+=("$i"); done
	echo "${out[*]}"
}
left_both() { [ "$(left "$K1")" = "$want" ] && [ "$(left "$K2")" = "$want" ]; }

# (What one host stores while the other counts may be counted twice
# until the next count, ledger.h.)
kvt_wait_log "eviction: an index of the store's 0 names built" 2 &&
	kvt_wait_log "the store's objects hold 0 bytes" 2
ok $? "both hosts count and index the empty store"
bad=0
for i in 1 2 3 4 5 6; do store "$K1" "$i" || bad=$((bad + 1)); done
[ "$bad" = 0 ]
ok $? "host A stores 6 blocks of 1 MiB"
kvt_within 5 same_usage
ok $? "host B's usage counts them: both show $(usedof "$K2") bytes used ($took s)"
# Stored a minute ago: a load sets a record's atime when it is 10 s old
# or more (file.c).  The evicting host counts an atime as a use elsewhere
# when it is more than a second past the last use it knows of
# (KVT_EVICT_REMOTE_USE_US): B loads more than a second after A stored.
touch -a -d '-1 minute' "$GL1"/store/names/b*.bin
sleep 1.5
cat "$K2/b1.bin" >/dev/null
ok $? "host B loads b1"
at=$(stat -c %s "$T/daemon.log")
store "$K1" 7 && store "$K1" 8
ok $? "host A stores 2 more: 8 MiB, past evict_high"
kvt_wait_log 'eviction: [1-9][0-9]* names \(' 1 "$at"
ok $? "a pass evicts"
want="1 4 5 6 7 8"
kvt_within 5 left_both
ok $? "the block B loaded stays, b2 and b3 went, on both hosts ($took s): A sees $(left "$K1"), B $(left "$K2")"
at=$(stat -c %s "$T/daemon.log")
bad=0
for i in 9 10 11 12; do store "$K2" "$i" || bad=$((bad + 1)); done
[ "$bad" = 0 ]
ok $? "host B stores 4 more past the budget: none fails"
kvt_wait_log 'eviction: another mount evicts from this store past evict_high' 1 &&
	[ "$(lead_of "$K1")" = 1 ] && [ "$(lead_of "$K2")" = 0 ]
ok $? "B leaves the passes past evict_high to A, and says so (evict_lead: A $(lead_of "$K1"), B $(lead_of "$K2"))"
kvt_within 5 same_usage && kvt_num_cmp "$(usedof "$K1")" -le "$BUDGET"
ok $? "one budget: both hosts show $(usedof "$K1") bytes used of $BUDGET ($took s)"
# Past the kernels' 1 s timeouts of a shared store: both hosts see the
# same names.
sleep 1.5
want=$(left "$K1")
[ -n "$want" ] && [ "$(left "$K2")" = "$want" ]
ok $? "both hosts see the same names left: $want"
bad=0
for i in $want; do
	cmp -s "$T/b$i" "$K1/b$i.bin" && cmp -s "$T/b$i" "$K2/b$i.bin" || bad=$((bad + 1))
done
[ "$bad" = 0 ] && [ "$(kvt_stat "$K1" purges)" = 0 ] && [ "$(kvt_stat "$K2" purges)" = 0 ]
ok $? "every name left reads back whole on both hosts, none purged ($bad bad)"
th_stop_fsck "$GL1/store"

# --- a block open on the other host --------------------------------------
# A fresh store: host A stores 6 blocks; B opens b2 at once (its record
# is too young for a load to set its atime, file.c) and keeps it open;
# A stores 2 more, past evict_high: b2 is among A's least recently used,
# but B has it open (B's staging/<id>/pins, peerpins.h), so b1 and b3 go,
# b2 stays, and B reads it whole.
mkdir "$GL1/store2" || bail "mkdir $GL1/store2"
kvt_start "$GL1/store2" "$K1" max_size=8M,evict=lru,evict_high=95,evict_low=85
P1=$KVT_LAST_PID
kvt_within 10 a_leads
ok $? "host A leads the eviction from the fresh store ($took s)"
kvt_start "$GL2/store2" "$K2" max_size=8M,evict=lru,evict_high=95,evict_low=85
P2=$KVT_LAST_PID
bad=0
for i in 1 2 3 4 5 6; do store "$K1" "$i" || bad=$((bad + 1)); done
exec 7<"$K2/b2.bin"
pins_listed() { cat "$GL1"/store2/staging/*/pins 2>/dev/null | grep -q .; }
[ "$bad" = 0 ] && kvt_within 5 pins_listed
ok $? "A stores 6 blocks; B opens b2 and says so in its pins file ($took s)"
at=$(stat -c %s "$T/daemon.log")
store "$K1" 7 && store "$K1" 8 && kvt_wait_log 'eviction: [1-9][0-9]* names \(' 1 "$at"
ok $? "host A stores 2 more, past evict_high: a pass evicts"
want="2 4 5 6 7 8"
kvt_within 5 left_both
ok $? "the block B has open stays, b1 and b3 went, on both hosts ($took s): A sees $(left "$K1"), B $(left "$K2")"
cmp -s "$T/b2" /dev/fd/7
ok $? "B reads its open block whole"
exec 7<&-
th_stop_fsck "$GL1/store2"
