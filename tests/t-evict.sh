#!/bin/bash
# Eviction: with a budget (-o max_size), the names used least go, in the
# background, so that stores never fail while something can go.
#
# 1. Watermarks: under evict_high (95% of the budget) nothing goes; past
#    it a pass evicts down to evict_low (85%), one log line; statfs never
#    shows more than the budget.
# 2. The order (evict=lru): the least recently stored or loaded names go
#    first; a load is a use, a stat or a lookup is not.
# 3. An evicted name goes at once for the kernel too (access() misses,
#    the entry it had cached is gone), and counts as an eviction, not as
#    a torn block.
# 4. An open file is never evicted; when every block is open a store
#    gets ENOSPC, publishes nothing and the log says nothing can be
#    evicted; once they are closed the store goes through.
# 5. Recency survives a remount and a kill -9 (the records' atimes):
#    the blocks loaded before go last after it.
# 6. Four writers storing 3 times the budget at once: no store fails,
#    statfs sampled at 10 Hz never shows more than the budget, every
#    name left reads back whole.
# 7. A name removed below the mount meanwhile is passed over.
# 8. Two mounts of one store: one evicts past evict_high at a time; the
#    other makes room for its own stores only (none fails), and takes over
#    once the first is gone.  Each counts the other's stores in its usage
#    within a second or so: one budget for the store.  The first mount
#    leads from the start; a lead that stores nothing evicts the other's
#    blocks (it walks the store again when a pass finds nothing).
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 67
kvt_setup
MiB=1048576
BUDGET=$((8 * MiB))

used() { stat -f -c '%b %f %S' "$MNT" | awk '{ print ($1 - $2) * $3 }'; }
mount_at=0
# mount_tier OPTS: the watermarks these points count blocks by (95/85 of
# 8 blocks of 1 MiB: a pass evicts 2), unless OPTS sets them.
mount_tier() {
	mount_at=$(stat -c %s "$T/daemon.log")
	kvt_mount "evict_high=95,evict_low=85${1:+,$1}" "${@:2}"
}
# passes N: until this mount's log shows N eviction passes that evicted.
passes() {
	kvt_wait_log 'eviction: [1-9][0-9]* names \(' "$1" "$mount_at"
}
for i in $(seq 1 12); do head -c $MiB /dev/urandom >"$T/b$i" || bail "random bytes"; done
store() { cp "$T/b$1" "$MNT/b$1.tmp" && mv "$MNT/b$1.tmp" "$MNT/b$1.bin"; }
load() { cat "$MNT/b$1.bin" >/dev/null; }
# left: the blocks still there, "1 2 ...".
left() {
	local i out=()
	for i in $(seq 1 12); do [ -e "$MNT/b$i.bin" ] && out+=("$i"); done
	echo "${out[*]}"
}
# left_is LIST: left says LIST within 2 s (an evicted name's invalidation
# reaches the kernel through the daemon's queue, notify.h).
left_is() {
	want=$1
	kvt_within 2 left_is_want
}
left_is_want() { [ "$(left)" = "$want" ]; }
# whole: every block left reads back as stored.
whole() {
	local i
	for i in $(left); do cmp -s "$T/b$i" "$MNT/b$i.bin" || return 1; done
}

# --- 1-3. watermarks, order, the kernel's entry ---------------------
mount_tier max_size=8M,evict=lru
kvt_wait_log "eviction: an index of the store's 0 names built" 1 "$mount_at"
ok $? "an empty store: the index is built at once"
bad=0
for i in 1 2 3 4 5 6 7; do store "$i" || bad=$((bad + 1)); done
sleep 0.6 # two of the evictor's looks at the usage: nothing must go
[ "$bad" = 0 ] && [ "$(left)" = "1 2 3 4 5 6 7" ] && [ "$(kvt_stat "$MNT" evictions)" = 0 ]
ok $? "7 MiB of 8, under evict_high: all 7 stay ($(left)), no eviction"
load 1
stat "$MNT/b2.bin" >/dev/null && [ -e "$MNT/b3.bin" ] && ls -l "$MNT" >/dev/null
ok $? "b1 loaded; b2 stat'ed, b3 looked up (the kernel caches its entry)"
store 8
ok $? "an 8th block, past evict_high"
passes 1
ok $? "a pass ran"
u=$(used)
kvt_num_cmp "$u" -le $((BUDGET * 85 / 100))
ok $? "it evicted down to evict_low: $u bytes used of $BUDGET"
left_is "1 4 5 6 7 8"
ok $? "the least recently used went: b2 (a stat is no use), b3 (nor a lookup); b1 (loaded) stays ($(left))"
gone_b3() { [ ! -e "$MNT/b3.bin" ] && ! stat "$MNT/b3.bin" 2>/dev/null; }
kvt_within 1 gone_b3
ok $? "access() misses b3 at once ($took s), though the kernel had its entry for a day"
ev=$(kvt_stat "$MNT" evictions) by=$(kvt_stat "$MNT" evicted_bytes)
[ "$ev" = 2 ] && [ "$by" = $((2 * MiB)) ] && [ "$(kvt_stat "$MNT" purges)" = 0 ] &&
	[ "$(kvt_stat "$MNT" torn_size)" = 0 ] && [ "$(kvt_stat "$MNT" unlinks)" = 0 ]
ok $? "counted as 2 evictions of $by bytes ($ev), no purge, no unlink"
n=$(grep -c 'eviction: 2 names (2097152 bytes)' "$T/daemon.log")
[ "$n" = 1 ]
ok $? "one log line for the pass ($n)"
getfattr --only-values -n user.kvtierfs.mount "$MNT" >"$T/mount.x" 2>/dev/null
grep -qx "budget $BUDGET" "$T/mount.x" && grep -qx 'evict lru' "$T/mount.x" &&
	grep -qx 'evict_high 95' "$T/mount.x" && grep -qx 'evict_low 85' "$T/mount.x" &&
	grep -qx 'indexed_blocks 6' "$T/mount.x"
ok $? "user.kvtierfs.mount shows the budget, the policy and the 6 blocks indexed" ||
	diag_file "$T/mount.x"

# --- 4. open files stay; ENOSPC only when all are open ----------------
store 9 && store 10 && store 11
passes 2
exec 5<"$MNT/b1.bin" 6<"$MNT/b6.bin"
store 12
passes 3
left_is "1 6 9 10 11 12"
ok $? "b1 and b6, open for reading (b6 the oldest), stay while b7 and b8 go ($(left))"
cmp -s "$T/b6" - <&6 && cmp -s "$T/b1" - <&5
ok $? "their readers read their bytes"
exec 5<&- 6<&-
whole
ok $? "the blocks left read back whole"
kvt_umount
rm -rf "$LOWER" && mkdir -m 0700 "$LOWER"

# evict_high=100: no pass but for a store that needs room.
mount_tier max_size=4M,evict=lru,evict_high=100
for i in 1 2 3 4; do store "$i"; done
exec 5<"$MNT/b1.bin" 6<"$MNT/b2.bin" 7<"$MNT/b3.bin" 8<"$MNT/b4.bin"
err=$(store 5 2>&1)
rc=$?
[ "$rc" != 0 ] && [[ "$err" == *"No space left on device"* ]] && [ ! -e "$MNT/b5.bin" ]
ok $? "every block open: a 5th store gets ENOSPC and publishes nothing ($err)"
grep -q "no room for a new object of $MiB bytes: .* leaves none and nothing can be evicted" "$T/daemon.log"
ok $? "the log says nothing could be evicted"
[ "$(left)" = "1 2 3 4" ]
ok $? "the open blocks all stay"
exec 5<&- 6<&-
store 5
ok $? "two closed: the store goes through"
left_is "2 3 4 5"
ok $? "... and the oldest closed one went ($(left))"
exec 7<&- 8<&-
kvt_umount
rm -rf "$LOWER" && mkdir -m 0700 "$LOWER"

# --- 5. recency across a remount and a kill -9 -----------------------
mount_tier max_size=8M,evict=lru
for i in 1 2 3 4 5 6; do store "$i"; done
kvt_umount
# Stored minutes ago, b1 first: a load now is a use the record keeps
# (a load sets the atime at most every 10 s a name).
for i in 1 2 3 4 5 6; do touch -h -a -d "-$((10 - i)) minutes" "$LOWER/names/b$i.bin"; done
mount_tier max_size=8M,evict=lru
load 5 && load 2
kvt_umount
mount_tier max_size=8M,evict=lru
store 7 && store 8
passes 1
left_is "2 4 5 6 7 8"
ok $? "after a remount, the blocks loaded before stay: $(left) (b1 and b3 went)"
load 6
kvt_kill9
mount_tier max_size=8M,evict=lru
store 9 && store 10
passes 1
left_is "2 6 7 8 9 10"
ok $? "after a kill -9, b6's load is kept too: b4 and b5 went ($(left))"
whole
ok $? "what is left reads back whole"
kvt_umount
rm -rf "$LOWER" && mkdir -m 0700 "$LOWER"

# --- 6. four writers at three times the budget ----------------------
cat >"$T/writer" <<'EOF'
#!/bin/bash
# writer MNT W N: N blocks of 256 KiB of writer W; prints the failures.
fail=0
for i in $(seq 1 "$3"); do
	f=$1/w$2-$i
	head -c 262144 /dev/urandom >"$f.tmp" && mv "$f.tmp" "$f" || fail=$((fail + 1))
done
echo "$fail"
EOF
chmod +x "$T/writer"
mount_tier max_size=8M
: >"$T/samples"
(while [ ! -e "$T/stop" ]; do used >>"$T/samples"; sleep 0.1; done) &
sampler=$!
writers=()
for w in 1 2 3 4; do
	"$T/writer" "$MNT" "$w" 24 >"$T/fail.$w" 2>"$T/err.$w" &
	writers+=($!)
done
wait "${writers[@]}"
touch "$T/stop"
wait "$sampler"
fails=$(cat "$T/fail."* | awk '{ n += $1 } END { print n }')
[ "$fails" = 0 ]
ok $? "4 writers stored 96 blocks of 256 KiB (24 MiB) into 8 MiB: $fails failures" ||
	diag_file "$T/err.1"
max=$(sort -n "$T/samples" | tail -n 1)
n=$(grep -c '' "$T/samples")
kvt_num_cmp "$n" -ge 5 && kvt_num_cmp "$max" -le "$BUDGET"
ok $? "statfs sampled $n times: at most $max bytes used, the budget $BUDGET"
ev=$(kvt_stat "$MNT" evictions)
kvt_num_cmp "$ev" -ge 60
ok $? "$ev evictions"
# A pass may still run: a name that fails to read must be gone since
# (for the kernel too, within 2 s: left_is).
gone_f() { [ ! -e "$f" ]; }
bad=0 read=0
for f in "$MNT"/w*; do
	if [ "$(stat -c %s "$f" 2>/dev/null)" = 262144 ] && cat "$f" >/dev/null 2>&1; then
		read=$((read + 1))
	elif ! kvt_within 2 gone_f; then
		bad=$((bad + 1))
	fi
done
[ "$bad" = 0 ] && kvt_num_cmp "$read" -ge 16 && [ "$(kvt_stat "$MNT" purges)" = 0 ]
ok $? "every name left reads back ($read), none torn ($bad bad)"

# --- 7. a name removed below meanwhile -------------------------------
victim=$(cd "$LOWER/names" && ls w1-* | head -n 1)
rm -f "$LOWER/names/$victim"
for i in 1 2 3 4 5 6 7 8; do store "$i" || break; done
[ "$i" = 8 ] && [ -e "$MNT/b8.bin" ]
ok $? "a record removed below the mount: the evictor passes over it, 8 more stores go" || diag "i=$i; left: $(ls "$MNT")"
kvt_umount
rm -rf "$LOWER" && mkdir -m 0700 "$LOWER"

# --- 8. two mounts of one store --------------------------------------
MNT2=$T/mnt2
mkdir "$MNT2"
usedof() { stat -f -c '%b %f %S' "$1" | awk '{ print ($1 - $2) * $3 }'; }
same_usage() { [ "$(usedof "$MNT")" = "$(usedof "$MNT2")" ]; }
mount_tier max_size=8M,evict=lru
for i in 1 2 3 4 5 6 7 8; do store "$i"; done
passes 1
ok $? "mount A evicts past evict_high"
at2=$(stat -c %s "$T/daemon.log")
kvt_start "$LOWER" "$MNT2" max_size=8M,evict=lru
PIDB=$KVT_LAST_PID
kvt_wait_log "the store's objects hold 6291456 bytes" 1 "$at2"
ok $? "mount B counts the store A left: 6 MiB"
bad=0
for i in 9 10 11 12; do
	cp "$T/b$i" "$MNT2/b$i.tmp" && mv "$MNT2/b$i.tmp" "$MNT2/b$i.bin" || bad=$((bad + 1))
done
[ "$bad" = 0 ]
ok $? "B stores 4 blocks past the budget: none fails"
kvt_wait_log 'eviction: another mount evicts from this store past evict_high' 1 "$at2"
ok $? "B leaves the passes past evict_high to A, and says so once"
kvt_within 5 same_usage
ok $? "within a second or so, A's usage counts B's stores: both show $(usedof "$MNT") bytes used ($took s)"
u=$(usedof "$MNT") ev=$(($(kvt_stat "$MNT" evictions) + $(kvt_stat "$MNT2" evictions)))
kvt_num_cmp "$u" -le "$BUDGET" && kvt_num_cmp "$ev" -ge 4
ok $? "one budget for the store: $u bytes used of $BUDGET, $ev evictions by both"
for i in 1 2 3 4 5 6 7 8; do cp "$T/b$i" "$MNT/a$i.tmp" && mv "$MNT/a$i.tmp" "$MNT/a$i.bin"; done
kvt_within 5 same_usage
ok $? "A stores 8 more: B's usage counts them as soon ($took s)"
kvt_num_cmp "$(usedof "$MNT2")" -le "$BUDGET"
ok $? "and the store still holds at most the budget ($(usedof "$MNT2") bytes)"
kvt_umount
at3=$(stat -c %s "$T/daemon.log")
for i in 1 2 3 4 5 6 7 8; do
	cp "$T/b$i" "$MNT2/c$i.tmp" && mv "$MNT2/c$i.tmp" "$MNT2/c$i.bin" || break
done
kvt_wait_log 'eviction: this mount now evicts from this store past evict_high' 1 "$at3"
ok $? "A gone, B takes the passes over"
kvt_stop "$MNT2" "$PIDB"

# A mount that leads but stores nothing knows the other's blocks by a
# walk only: a pass that finds nothing to evict walks the store again (a
# small one at once), and evicts them.
lead_of() { kvt_mattr "$1" evict_lead; }
a_leads() { [ "$(lead_of "$MNT")" = 1 ]; }
rm -rf "${LOWER:?}"/* 2>/dev/null
mount_tier max_size=8M,evict=lru
kvt_within 5 a_leads
ok $? "the first mount of a store leads the eviction before it is needed ($took s, evict_lead $(lead_of "$MNT"))"
kvt_start "$LOWER" "$MNT2" max_size=8M,evict=lru,evict_high=95,evict_low=85
PIDB=$KVT_LAST_PID
bad=0
for i in 1 2 3 4 5 6 7 8; do
	cp "$T/b$i" "$MNT2/b$i.tmp" && mv "$MNT2/b$i.tmp" "$MNT2/b$i.bin" || bad=$((bad + 1))
done
[ "$bad" = 0 ] && [ "$(lead_of "$MNT2")" = 0 ]
ok $? "B, which does not lead (evict_lead $(lead_of "$MNT2")), stores 8 blocks, past evict_high"
a_evicted() { [ "$(kvt_stat "$MNT" evictions)" -ge 2 ]; }
kvt_within 10 a_evicted && left_is "3 4 5 6 7 8"
ok $? "A, which stored none of them, evicts B's two oldest ($took s): left $(left), A's evictions $(kvt_stat "$MNT" evictions), B's $(kvt_stat "$MNT2" evictions)"
kvt_stop "$MNT2" "$PIDB"
kvt_umount

# --- 9. the default watermarks -----------------------------------------
# mx KEY: KEY's value in the mount's attribute.
mx() { kvt_mattr "$MNT" "$1"; }
rm -rf "${LOWER:?}"/* 2>/dev/null
kvt_mount max_size=8M
[ "$(mx evict_high)" = 99 ] && [ "$(mx evict_low)" = 97 ]
ok $? "the defaults: evict_high $(mx evict_high), evict_low $(mx evict_low)"
kvt_umount
kvt_mount max_size=8M,evict_high=90
[ "$(mx evict_high)" = 90 ] && [ "$(mx evict_low)" = 88 ]
ok $? "evict_high=90 alone: evict_low follows it down ($(mx evict_low))"
kvt_umount
