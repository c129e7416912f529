#!/bin/bash
# How long the kernel keeps names and attributes (src/daemon/share.h), and that
# it never keeps what the mount changed:
#  1. a mount alone on its store: blocks stored, then looked up 2.5 s
#     later (past the old 1 s timeouts) with access() from one thread; no
#     LOOKUP reaches the daemon; a first miss is one LOOKUP;
#  2. still alone, each change through the mount shows at once from
#     another process, while the kernel's entry would still be valid: a
#     purge (an object damaged on the lower disk, found by an open), an
#     unlink, a rename over a name, a version written in place, the access
#     time a load moves;
#  3. a second mount of the same store: both say that the store is shared,
#     and the first sees the second's replacement and unlink of names it
#     had cached for a day within 5 s (a second's timeouts after a look
#     every second, and a loaded machine);
#  4. -o shared: a second's timeouts from the start;
#  5. entry_timeout and attr_timeout given: held (0: every lookup reaches
#     the daemon);
#  6. four mounts of one store: a mount's look every second opens the
#     lock of one other mount, not of each (on a network file system each
#     is a few round trips, and N hosts looking at all the others made N²
#     of them a second).
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 39
kvt_setup

BLOCKS=200
MNT2=$T/mnt2
mkdir "$MNT2"

# present DIR: how many of the paths in $T/paths exist under DIR, by
# access() from one process.
present() {
	kvt_run perl -e 'my ($d, $list) = @ARGV; open(my $l, "<", $list) or exit 2; my $n = 0;
		while (<$l>) { chomp; $n++ if -e "$d/$_" } print "$n\n"' "$1" "$T/paths"
}

# present_counted DIR: present, and in $looked the lookups that reached
# the daemon of $MNT meanwhile (empty when the counter could not be
# read); $n the count found.
present_counted() {
	local l0
	l0=$(kvt_stat "$MNT" lookups)
	n=$(present "$1")
	looked=$(kvt_calc 'b - a' a="$l0" b="$(kvt_stat "$MNT" lookups)")
}

# --- 1. alone: the kernel answers ------------------------------------------
kvt_mount
ok_kvclient "a mount alone on its store stores $BLOCKS blocks" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size 4K --threads 4
"$KVCLIENT" paths --dir "$MNT" --blocks $BLOCKS >"$T/paths"
sleep 2.5
present_counted "$MNT"
[ "$n" = $BLOCKS ]
ok $? "2.5 s later, access() from one thread finds all $BLOCKS ($n)"
kvt_num_cmp "$looked" -eq 0
ok $? "... and the kernel answered each itself: $looked lookups reached the daemon"
# a first miss: one round trip, in a directory that exists or not
d=$(dirname "$(head -n 1 "$T/paths")")
l0=$(kvt_stat "$MNT" lookups)
! kvt_run test -e "$MNT/$d/never-stored.bin"
l1=$(kvt_stat "$MNT" lookups)
[ $((l1 - l0)) = 1 ]
ok $? "a first miss in a known directory is one lookup in the daemon ($((l1 - l0)))"
l0=$(kvt_stat "$MNT" lookups)
! kvt_run test -e "$MNT/${d%%/*}/no-such-dir/00_g0/never-stored.bin"
l1=$(kvt_stat "$MNT" lookups)
[ $((l1 - l0)) = 1 ]
ok $? "... and in a directory that does not exist, one too ($((l1 - l0)))"

# --- 2. what the mount changes shows at once ---------------------------------
mapfile -t P <"$T/paths"
# a purge: a byte of the object flipped on the lower disk; the open finds it
obj=$(kvt_xattr "$MNT/${P[0]}" user.kvtierfs.object)
[ -f "$LOWER/$obj" ] || bail "no object for ${P[0]}: '$obj'"
printf '\x55' | dd of="$LOWER/$obj" bs=1 seek=100 conv=notrunc status=none
! kvt_run cat "$MNT/${P[0]}" >/dev/null 2>"$T/cat.err" && grep -q 'Input/output error' "$T/cat.err"
ok $? "an object damaged on the lower disk: the load fails with EIO ($(cat "$T/cat.err"))"
! kvt_run test -e "$MNT/${P[0]}"
ok $? "... and another process finds the name gone at once"
kvt_run rm "$MNT/${P[1]}"
! kvt_run test -e "$MNT/${P[1]}"
ok $? "an unlink: the name is gone at once for another process"
head -c 4096 /dev/urandom >"$T/new"
kvt_run cp "$T/new" "$MNT/${P[2]}.tmp" && kvt_run mv "$MNT/${P[2]}.tmp" "$MNT/${P[2]}"
kvt_run cmp -s "$T/new" "$MNT/${P[2]}"
ok $? "a rename over a name: another process reads the new bytes at once"
printf 'a longer first version' >"$T/v1"
kvt_run cp "$T/v1" "$MNT/inplace"
s1=$(kvt_run stat -c %s "$MNT/inplace")
kvt_run sh -c 'printf new >"$1"' _ "$MNT/inplace"
s2=$(kvt_run stat -c %s "$MNT/inplace")
[ "$s1" = 22 ] && [ "$s2" = 3 ]
ok $? "a version written in place: its size shows at once ($s1, then $s2)"
kvt_run touch -a -d 2020-01-01 "$MNT/${P[3]}"
a1=$(kvt_run stat -c %X "$MNT/${P[3]}")
t0=$(date +%s)
kvt_run cat "$MNT/${P[3]}" >/dev/null
a2=$(kvt_run stat -c %X "$MNT/${P[3]}")
[ "$a1" -lt 1600000000 ] && [ "$a2" -ge "$t0" ]
ok $? "a load moves the access time, which an evictor's stat sees at once ($a1, then $a2)"
n=$(present "$MNT")
[ "$n" = $((BLOCKS - 2)) ]
ok $? "every other block is still there ($n of $((BLOCKS - 2)))"

# --- 3. a second mount: short timeouts, and the cache forgotten --------------
kvt_start "$LOWER" "$MNT2"
pid2=$KVT_LAST_PID
both_say() { [ "$(grep -c 'another mount uses the store' "$T/daemon.log")" -ge 2 ]; }
kvt_within 5 both_say
ok $? "both mounts say the store is shared ($took s): $(grep -m1 'another mount uses' "$T/daemon.log")"
head -c 4096 /dev/urandom >"$T/new2"
kvt_run cp "$T/new2" "$MNT2/${P[4]}.tmp" && kvt_run mv "$MNT2/${P[4]}.tmp" "$MNT2/${P[4]}"
kvt_within 5 kvt_run cmp -s "$T/new2" "$MNT/${P[4]}"
ok $? "the second mount replaces a block: the first reads the new bytes within 5 s ($took s)"
kvt_run rm "$MNT2/${P[5]}"
kvt_within 5 eval '! kvt_run test -e "$MNT/${P[5]}"'
ok $? "the second mount removes a block: the first finds it gone within 5 s ($took s)"
kvt_run cmp -s "$T/new" "$MNT2/${P[2]}"
ok $? "the second mount reads what the first stored"
kvt_stop "$MNT2" "$pid2"
kvt_within 5 grep -q 'no other mount uses the store' "$T/daemon.log"
ok $? "once the second mount is gone, the first says it is alone again ($took s)"
kvt_umount

# --- 4. -o shared --------------------------------------------------------------
kvt_new_lower
kvt_mount shared
grep -q -- '-o shared: the kernel keeps names and attributes for 1 s' "$T/daemon.log"
ok $? "-o shared: said at the mount"
ok_kvclient "stores $BLOCKS blocks" vllm-store --dir "$MNT" --blocks $BLOCKS --size 4K --threads 4
sleep 1.5
present_counted "$MNT"
[ "$n" = $BLOCKS ] && [ "$looked" -ge $BLOCKS ]
ok $? "1.5 s later each access() is a lookup in the daemon ($looked for $n)"
kvt_umount

# --- 5. given timeouts hold --------------------------------------------------
kvt_new_lower
kvt_mount entry_timeout=0 attr_timeout=0
ok_kvclient "entry_timeout=0: stores $BLOCKS blocks" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size 4K --threads 4
present_counted "$MNT"
[ "$n" = $BLOCKS ] && [ "$looked" -ge $BLOCKS ]
ok $? "at once, each access() is a lookup in the daemon ($looked for $n)"
kvt_umount

# --- 6. many mounts: a look opens one other mount's lock ------------------------
# The fault layer counts the opens of "lock" files (a rule that never
# fires) and logs the count when the daemon exits.
kvt_new_lower
t0=$(date +%s.%N)
KVT_FAULTS="open:EIO:name=lock:after=1000000000" kvt_mount
others=()
for i in 2 3 4; do
	mkdir -p "$T/many$i"
	kvt_start "$LOWER" "$T/many$i"
	others+=("$T/many$i" "$KVT_LAST_PID")
done
sleep 4
kvt_umount
t1=$(date +%s.%N)
opens=
read -r _ opens < <(kvt_fault_counts)
secs=$(kvt_calc 'b - a' a="$t0" b="$t1")
kvt_num_cmp "$opens" -le "$(kvt_calc 's + 2' s="$secs")"
ok $? "with three other mounts live, the first opened $opens lock files in $(printf %.1f "$secs") s of looks every second (at most one a look)"
for ((i = 0; i < ${#others[@]}; i += 2)); do
	kvt_stop "${others[i]}" "${others[i + 1]}"
done
