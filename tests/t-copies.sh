#!/bin/bash
# Verified copies past their memory (-o copy_memory, memcopy.h): with
# verify=always an open reads the bytes it hashes into a memory copy and
# serves them from there.  With room for one copy of a 3 MiB block (4 MiB)
# and another reader holding it:
#   - an open waits for the copy to be given back (copy_waits), gets one,
#     and a byte changed on the lower disk after that open never reaches
#     its reads;
#   - an open whose wait ends with none (5 s) is served from the lower
#     file, right bytes, counted (uncopied) and logged;
#   - 16 loads at once through 4 daemon threads do not wait for copies
#     on every thread (the releases that give them back need one).
# kvt-kind: mount
# kvt-timeout: 120
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 14
kvt_setup
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SIZE=$((3 << 20))

kvt_mount verify=always,copy_memory=4
for v in a b; do
	head -c "$SIZE" /dev/urandom >"$T/$v"
	cp "$T/$v" "$MNT/$v.tmp" && mv "$MNT/$v.tmp" "$MNT/$v"
done
# (b's open may wait for a's copy: the kernel sends a close's RELEASE
# without waiting for it.)
cmp -s "$T/a" "$MNT/a" && cmp -s "$T/b" "$MNT/b" && [ "$(kvt_stat "$MNT" uncopied)" = 0 ]
ok $? "two 3 MiB blocks, read one after the other with room for one copy: both whole, each with a copy"

# client NAME: opens $MNT/NAME, says "open", reads 1 MiB; then at the
# line "read" on its stdin reads the rest to $T/NAME.read and says "done",
# at "close" (or EOF) closes the file, says "closed" and exits.
CLIENT='
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("open", flush=True)
first = os.read(fd, 1 << 20)
for line in sys.stdin:
    if line.strip() != "read":
        break
    rest = b""
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        rest += b
    open(sys.argv[2], "wb").write(first + rest)
    print("done", flush=True)
os.close(fd)
print("closed", flush=True)'
client() {
	"$PY" -c "$CLIENT" "$MNT/$1" "$T/$1.read"
}
# start NAME: client NAME in the background, $CIN its stdin, $COUT its
# stdout, $CPID (its "open" is for the caller to read: the open may wait).
start() {
	rm -f "$T/$1.in" "$T/$1.out"
	mkfifo "$T/$1.in" "$T/$1.out" || bail "mkfifo failed"
	client "$1" <"$T/$1.in" >"$T/$1.out" &
	CPID=$!
	kvt_bg "$CPID"
	exec {CIN}>"$T/$1.in" {COUT}<"$T/$1.out"
}
# finish: the client closes its file and exits (a later client holds
# this one's stdin open too: a line, not EOF, tells it).
finish() {
	local w
	echo close >&"$CIN"
	read -r -t 30 -u "$COUT" w
	[ "$w" = closed ] || diag "client $CPID did not close its file: '$w'"
	exec {CIN}>&- {COUT}<&-
	wait "$CPID" 2>/dev/null
}
# counter_is NAME VALUE: waits (10 s at most) for the counter to be VALUE.
counter_is() {
	local i
	for ((i = 0; i < 1000; i++)); do
		[ "$(kvt_stat "$MNT" "$1")" = "$2" ] && return 0
		sleep 0.01
	done
	return 1
}
obj_b=$LOWER/$(kvt_xattr "$MNT/b" user.kvtierfs.object)
[ -f "$obj_b" ] || bail "no object for b: '$obj_b'"
# flip_b: flips a bit at 2.5 MiB of b's object (a second flip puts it
# back).
flip_b() { kvt_flip_bit "$obj_b" $((5 << 19)); }

# --- an open waits for the copy another reader holds ------------------------
start a
read -r -t 30 -u "$COUT" w
[ "$w" = open ] || bail "the holder of a did not open it: '$w'"
ha_in=$CIN ha_out=$COUT ha_pid=$CPID
waits=$(kvt_stat "$MNT" copy_waits)
start b
counter_is copy_waits $((waits + 1))
ok $? "an open of b while a holds the only copy waits for it (copy_waits $(kvt_stat "$MNT" copy_waits))"
t0=$(date +%s%N)
CIN=$ha_in COUT=$ha_out CPID=$ha_pid finish
read -r -t 30 -u "$COUT" w
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$w" = open ] && [ "$ms" -lt 4000 ]
ok $? "a closes: b's open goes on, with a copy ($w after ${ms} ms)"
flip_b
echo read >&"$CIN"
read -r -t 30 -u "$COUT" w
cmp -s "$T/b" "$T/b.read" && [ "$(kvt_stat "$MNT" uncopied)" = 0 ]
ok $? "a bit of b flipped on the lower disk after that open: its reads are the verified bytes"
finish
flip_b
cmp -s "$T/b" "$MNT/b"
ok $? "the bit put back: b reads whole again"

# --- none given back within the wait ---------------------------------------
start a
read -r -t 30 -u "$COUT" w
[ "$w" = open ] || bail "the holder of a did not open it: '$w'"
waits=$(kvt_stat "$MNT" copy_waits)
t0=$(date +%s%N)
cat "$MNT/b" >"$T/b.read2"
st=$?
ms=$((($(date +%s%N) - t0) / 1000000))
cmp -s "$T/b" "$T/b.read2" && [ "$st" = 0 ] && [ "$ms" -ge 4900 ] && [ "$ms" -lt 30000 ]
ok $? "with a held for good, b's open waits its 5 s, then b is read whole from the lower file (${ms} ms)"
[ "$(kvt_stat "$MNT" copy_waits)" -ge $((waits + 1)) ] && [ "$(kvt_stat "$MNT" uncopied)" = 1 ]
ok $? "counted: copy_waits $(kvt_stat "$MNT" copy_waits), uncopied $(kvt_stat "$MNT" uncopied)"
grep -q 'no memory for a verified copy of 3 MiB (budget 4 MiB, waited 5.0 s at most)' "$T/daemon.log"
ok $? "and logged"
finish
kvt_umount

# --- more loads at once than threads that may wait -------------------------
# A copy comes back by its release, which needs a daemon thread: opens
# waiting for copies on every thread would leave none for it, and each
# would wait its 5 s.  A quarter of the threads wait (here 1 of 4); the
# other opens go without at once.
kvt_mount verify=always,copy_memory=4,max_threads=4
BENCH=(--dir "$MNT" --blocks 32 --block-size 3M --threads 16 --buffered)
ok_cmd "32 blocks of 3 MiB stored" "$top_builddir/src/kvtierfs-bench" "${BENCH[@]}" --phases store
"$top_builddir/src/kvtierfs-bench" "${BENCH[@]}" --phases load --check >"$T/load.out" 2>&1
st=$?
secs=$(sed -n 's/^load: .* secs=\([0-9.]*\) .*/\1/p' "$T/load.out")
[ "$st" = 0 ] && grep -q '^load: .* errors=0' "$T/load.out" &&
	kvt_num_cmp "$secs" -lt 4
ok $? "16 threads load them, each byte checked, through 4 daemon threads and one copy: ${secs:-?} s (5 s and more when every thread waits; copy_waits $(kvt_stat "$MNT" copy_waits), uncopied $(kvt_stat "$MNT" uncopied))" ||
	diag_file "$T/load.out" 5
kvt_umount
