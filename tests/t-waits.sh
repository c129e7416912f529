#!/bin/bash
# Threads one user can hold on a shared mount (-o allow_other): a request
# that waits holds a FUSE thread, and one user with many of them must not
# leave none for the others.  As two unprivileged users (t-users.sh's):
#
# Copy waits (verify=always, copy_memory=8, max_threads=16: 4 opens may
# wait for copy memory, 1 of them a uid's): kvtu1 holds both copies the
# budget has room for and starts 8 more opens; one of them waits, the
# others go without at once (logged).  kvtu2's open then still waits for
# a copy, gets one when kvtu1 lets go, and a byte flipped on the lower
# disk after that open never reaches his reads.  (Without the share
# kvtu1's opens took every place, kvtu2's went without its copy and read
# the flipped byte.)
#
# Changes in place waiting for readers (max_threads=8: 1 thread a uid):
# kvtu1 keeps a reader of his file open and opens it for writing through
# /proc/self/fd from 16 threads (the change waits for the reader, 10 s at
# most); one waits, the others get EBUSY at once, logged.  Meanwhile
# kvtu2 stores and loads two blocks within 3 s.  (Without the bound
# kvtu1's waits held all 8 threads, and kvtu2's store waited 10 s.)
#
# fsync of a directory anyone may write (1777): it syncs the bytes of the
# caller's names only.  The syncs of records named bb* are slowed to 20 ms
# each (KVT_FAULTS); kvtu1 has 10 names there, kvtu2 100.  kvtu1's fsync
# of the directory takes 10 of those syncs (0.2 s, less than 1.5), kvtu2's
# his 100 (2 s and more): what fsync promises the caller is kept.  (It
# synced every name in the directory: kvtu1 paid for kvtu2's 100.)
# kvt-kind: mount
# kvt-timeout: 180
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v setpriv >/dev/null || bail "setpriv is missing (util-linux)"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || bail "python3 is missing"
U1=kvtu1
U2=kvtu2
kvt_make_users "$U1" "$U2"
UID1=$(id -u "$U1")

plan 18
kvt_setup
chmod 755 "$T"

# as USER CMD...: CMD as USER, in $MNT (paths named from there: ../in/a).
as() { kvt_as "$@"; }
# store USER SRC NAME: vLLM's way, a temp file renamed over the name.
store() {
	as "$1" sh -c 'cp "$1" "$2.tmp" && mv "$2.tmp" "$2"' sh "$2" "$3"
}
log_count() { grep -c -- "$1" "$T/daemon.log"; }
# ms_since T0: milliseconds since T0 ($EPOCHREALTIME).
ms_since() { kvt_calc 'int((b - a) * 1000)' a="$1" b="$EPOCHREALTIME"; }
# has_line FILE PATTERN: FILE has a line matching PATTERN.
has_line() { grep -q -- "$2" "$1" 2>/dev/null; }
user_dirs() {
	local u
	for u in "$U1" "$U2"; do
		install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
	done
}

mkdir "$T/in" && chmod 755 "$T/in" || bail "mkdir failed"
head -c $((3 << 20)) /dev/urandom >"$T/in/a" && head -c $((3 << 20)) /dev/urandom >"$T/in/b" &&
	head -c 200000 /dev/urandom >"$T/in/f" && head -c 4096 /dev/urandom >"$T/in/small" ||
	bail "head failed"
chmod 644 "$T/in"/*

# ---------------------------------------------------------------- copy waits

kvt_mount allow_other verify=always copy_memory=8 max_threads=16 ||
	bail "the mount with verify=always failed"
user_dirs
for i in 0 1 2 3 4 5 6 7 8 9; do
	store "$U1" ../in/a "$U1/a$i" || bail "$U1's store failed"
done
store "$U2" ../in/b "$U2/b" || bail "$U2's store failed"

# HOLD_PY UNTIL PATH...: opens each PATH and reads 1 MiB of it (from
# separate threads, at once), says "open" once all are open, and closes
# them once the file UNTIL exists.
HOLD_PY=$(cat <<'EOF'
import os, sys, threading, time
until, paths = sys.argv[1], sys.argv[2:]
fds = []
def hold(p):
    fd = os.open(p, os.O_RDONLY)
    os.read(fd, 1 << 20)
    fds.append(fd)
ts = [threading.Thread(target=hold, args=(p,)) for p in paths]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("open", flush=True)
for _ in range(1200):
    if os.path.exists(until):
        break
    time.sleep(0.05)
for fd in fds:
    os.close(fd)
EOF
)
# READ_PY PATH WANT UNTIL: opens PATH, says "open", reads it all once the
# file UNTIL exists and says "same" if it holds the bytes of WANT, else
# "differ".
READ_PY=$(cat <<'EOF'
import os, sys, time
path, want, until = sys.argv[1:4]
fd = os.open(path, os.O_RDONLY)
print("open", flush=True)
for _ in range(1200):
    if os.path.exists(until):
        break
    time.sleep(0.05)
got = b""
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    got += b
os.close(fd)
print("same" if got == open(want, "rb").read() else "differ", flush=True)
EOF
)
as "$U1" "$PY" -c "$HOLD_PY" ../release1 "$U1/a0" "$U1/a1" >"$T/hold.out" 2>&1 &
holder=$!
kvt_bg "$holder"
kvt_within 30 has_line "$T/hold.out" '^open' || bail "$U1 did not open a0 and a1"
waits0=$(kvt_stat "$MNT" copy_waits)
as "$U1" "$PY" -c "$HOLD_PY" ../release1 "$U1/a2" "$U1/a3" "$U1/a4" "$U1/a5" "$U1/a6" \
	"$U1/a7" "$U1/a8" "$U1/a9" >"$T/wait.out" 2>&1 &
waiter=$!
kvt_bg "$waiter"
waited() { kvt_num_cmp "$(kvt_stat "$MNT" copy_waits)" -ge "$((waits0 + 1))"; }
kvt_within 10 waited
sleep 1 # the other opens of his wait too, or go without
waits1=$(kvt_stat "$MNT" copy_waits)
kvt_num_cmp "$waits1" -eq "$((waits0 + 1))" && kvt_num_cmp "$(log_count "uid $UID1 has 1 opens waiting")" -eq 1
ok $? "$U1 holds the budget's 2 copies, and of his 8 opens more one waits (copy_waits $waits0, then $waits1), the rest go without, logged once"
as "$U2" "$PY" -c "$READ_PY" "$U2/b" ../in/b ../flipped >"$T/b.out" 2>&1 &
reader=$!
kvt_bg "$reader"
sleep 0.5
: >"$T/release1"
kvt_within 15 has_line "$T/b.out" '^open'
ok $? "$U2's open goes on once $U1 lets go (${took:-})" || diag_file "$T/b.out" 3
obj_b=$LOWER/$(kvt_xattr "$MNT/$U2/b" user.kvtierfs.object)
[ -f "$obj_b" ] || bail "no object for b: '$obj_b'"
# flip_b: flips a bit at 2.5 MiB of b's object (a second flip puts it
# back).
flip_b() { kvt_flip_bit "$obj_b" $((5 << 19)); }
flip_b
: >"$T/flipped"
kvt_within 15 has_line "$T/b.out" '^same\|^differ'
has_line "$T/b.out" '^same'
ok $? "a bit of b flipped on the lower disk after that open: $U2 reads the verified bytes ($(tail -n 1 "$T/b.out"))"
flip_b
as "$U2" cmp ../in/b "$U2/b"
ok $? "the bit put back: b reads whole again"
wait "$holder" "$waiter" "$reader"
kvt_umount

# ---------------------------------------------------------------- changes in place waiting

kvt_mount allow_other max_threads=8 || bail "the mount with max_threads=8 failed"
user_dirs
store "$U1" ../in/f "$U1/f" || bail "$U1's store failed"
# ROOM_PY PATH N UNTIL: keeps a reader of PATH open (4 KiB read), says
# "reading", and opens PATH for writing through /proc/self/fd from N
# threads; once the file UNTIL exists closes the reader, and says how the
# opens ended ("ok:1 EBUSY:15").
ROOM_PY=$(cat <<'EOF'
import errno, os, sys, threading, time
path, n, until = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = os.open(path, os.O_RDONLY)
os.read(r, 4096)
o = os.open(path, os.O_PATH)
print("reading", flush=True)
ends, lock = {}, threading.Lock()
def change():
    try:
        os.close(os.open("/proc/self/fd/%d" % o, os.O_WRONLY))
        end = "ok"
    except OSError as e:
        end = errno.errorcode.get(e.errno, str(e.errno))
    with lock:
        ends[end] = ends.get(end, 0) + 1
ts = [threading.Thread(target=change) for _ in range(n)]
for t in ts:
    t.start()
for _ in range(1200):
    if os.path.exists(until):
        break
    time.sleep(0.05)
os.close(r)
for t in ts:
    t.join()
print(" ".join("%s:%d" % kv for kv in sorted(ends.items())), flush=True)
EOF
)
busy0=$(log_count "uid $UID1 has 1 threads waiting")
as "$U1" "$PY" -c "$ROOM_PY" "$U1/f" 16 ../release2 >"$T/room.out" 2>&1 &
room=$!
kvt_bg "$room"
kvt_within 30 has_line "$T/room.out" '^reading' || bail "$U1's reader did not open f"
sleep 1 # his changes wait, or are refused
t0=$EPOCHREALTIME
store "$U2" ../in/small "$U2/s0" && store "$U2" ../in/small "$U2/s1" &&
	as "$U2" cmp ../in/small "$U2/s0" && as "$U2" cmp ../in/small "$U2/s1"
st=$?
ms=$(ms_since "$t0")
[ "$st" = 0 ] && kvt_num_cmp "$ms" -lt 3000
ok $? "while $U1's 16 changes of f wait for his reader, $U2 stores and loads 2 blocks in ${ms} ms (less than 3000)"
: >"$T/release2"
wait "$room"
out=$(tail -n 1 "$T/room.out")
[ "$out" = "EBUSY:15 ok:1" ]
ok $? "of $U1's 16 changes, one waited for the reader and went on once it closed, 15 got EBUSY at once ($out)"
kvt_num_cmp "$(log_count "uid $UID1 has 1 threads waiting")" -eq "$((busy0 + 1))"
ok $? "the refusals logged once"
as "$U1" cmp ../in/f "$U1/f"
ok $? "f keeps its bytes"
kvt_umount

# ---------------------------------------------------------------- fsync of a directory

export KVT_FAULTS="sync:20ms:name=bb*"
kvt_mount allow_other || bail "the mount with KVT_FAULTS failed"
unset KVT_FAULTS
install -d -m 1777 "$MNT/pub" || bail "install -d failed"
# many USER PREFIX N: USER stores N blocks pub/PREFIX0 ... (tmp, rename).
many() {
	as "$1" sh -c 'i=0; while [ $i -lt "$2" ]; do
		cp ../in/small "pub/$1$i.tmp" && mv "pub/$1$i.tmp" "pub/$1$i" || exit; i=$((i + 1)); done' \
		sh "$2" "$3"
}
many "$U1" bba 10 && many "$U2" bbb 100
ok $? "in a 1777 directory, $U1 stores 10 blocks and $U2 100"
# FSYNC_PY DIR: fsync(2) of DIR; says the milliseconds it took.
FSYNC_PY='
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
t0 = time.monotonic()
os.fsync(fd)
print(int((time.monotonic() - t0) * 1000))'
ms1=$(as "$U1" "$PY" -c "$FSYNC_PY" pub)
kvt_num_cmp "${ms1:-}" -ge 200 && kvt_num_cmp "$ms1" -lt 1500
ok $? "$U1's fsync of the directory syncs his 10 names' records, not $U2's 100 (${ms1:-none} ms: 200 to 1500)"
ms2=$(as "$U2" "$PY" -c "$FSYNC_PY" pub)
kvt_num_cmp "${ms2:-}" -ge 2000
ok $? "$U2's syncs his 100 (${ms2:-none} ms: 2000 and more)"
ms0=$("$PY" -c "$FSYNC_PY" "$MNT/pub")
kvt_num_cmp "${ms0:-}" -ge 2200
ok $? "root's syncs all 110 (${ms0:-none} ms: 2200 and more)"
kvt_umount
