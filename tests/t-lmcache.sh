#!/bin/bash
# LMCache local disk: blocks written straight to their final name
# (<dir>/<key>.pt, O_CREAT|O_WRONLY|O_TRUNC, chunked writes, rewritten with
# new versions) while readers read the same names with readinto: each read
# is ENOENT or one whole version, never part of one.  Publishing at close
# must be done when close() returns.  Its other backend writes <name>.tmp
# and os.replace()s it.
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"

KEYS=16
SIZE=$((2 << 20))
ROUNDS=10

plan 20
kvt_setup
kvt_mount

ok_kvclient "lmcache buffered: $KEYS keys x $ROUNDS versions in place, 2 writers, 6 readers" \
	lmcache --dir "$MNT" --blocks $KEYS --size $SIZE --writers 2 --readers 6 \
	--rounds $ROUNDS --buffered
ok_kvclient "lmcache O_DIRECT: $KEYS keys x $ROUNDS versions in place, 2 writers, 6 readers" \
	lmcache --dir "$MNT" --blocks $KEYS --key-base 1000 --size $SIZE --writers 2 \
	--readers 6 --rounds $ROUNDS --odirect
ok_kvclient "verify: $((2 * KEYS)) complete .pt blocks, no *.tmp" \
	verify --dir "$MNT" --expect $((2 * KEYS)) --size $SIZE --no-tmp

# A file written under its final name is published by the time close()
# returns (FLUSH), not later at RELEASE.
cat >"$T/publish.py" <<'PY'
import os, sys
d, bad = sys.argv[1], []
for i in range(50):
    p = os.path.join(d, "pub-%d.dat" % i)
    data = os.urandom(1 << 20)
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.close(fd)
    v = os.getxattr(p, "user.kvtierfs.verdict").decode()
    st = os.stat(p)
    with open(p, "rb") as f:
        back = f.read()
    if v == "pending" or st.st_size != len(data) or back != data:
        bad.append("%s: verdict %s size %d read %d bytes%s" % (
            p, v, st.st_size, len(back), "" if back == data else " (differ)"))
for b in bad[:5]:
    print(b)
sys.exit(1 if bad else 0)
PY
ok_cmd "50 files written under their final name are published when close() returns" \
	python3 "$T/publish.py" "$MNT"

# the other backend: <name>.tmp (same name for every writer), os.replace
src="$MNT/kv-0000000000000003.pt"
kvt_run cp "$src" "$T/block3" && kvt_run rm -f "$src"
cat >"$T/replace.py" <<'PY'
import os, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    data = f.read()
with open(dst + ".tmp", "wb") as f:
    f.write(data)
PY
ok_cmd "write kv-...3.pt.tmp with open('wb')" python3 "$T/replace.py" "$T/block3" "$src"
v=$(kvt_xattr "$src.tmp" user.kvtierfs.verdict)
[ "$v" = pending ] && ! kvt_run test -e "$src"
ok $? "the closed .tmp is 'pending' (got '$v') and the final name does not exist yet"
ok_cmd "os.replace(kv-...3.pt.tmp, kv-...3.pt)" \
	python3 -c 'import os, sys; os.replace(sys.argv[1] + ".tmp", sys.argv[1])' "$src"
ok_kvclient "verify: $((2 * KEYS)) complete .pt blocks after the replace, no *.tmp" \
	verify --dir "$MNT" --expect $((2 * KEYS)) --size $SIZE --no-tmp

kvt_umount
kvt_mount
ok_kvclient "after remount: $((2 * KEYS)) complete .pt blocks" \
	verify --dir "$MNT" --expect $((2 * KEYS)) --size $SIZE --no-tmp
ok_kvclient "after remount: every key holds its last version ($ROUNDS)" \
	verify --dir "$MNT" --expect $((2 * KEYS)) --size $SIZE --version $ROUNDS

# A reader that opened a name before its first version written in place
# on this mount reads through the page cache, up to the kernel's size of
# the inode: the new version must not move it (it went to a new inode).
# rewrite.py PATH OLD NEW [HOLD]: a reader opens PATH, which holds OLD
# bytes, reads 4 KiB; a writer opens it O_TRUNC (NEW < 0: truncates it
# by path to -NEW bytes instead; through /proc/self/fd
# with HOLD: the kernel cannot look the name up again, so the writer
# waits for the reader, which reads on after HOLD seconds), writes NEW
# bytes, closes; the reader reads the rest.
cat >"$T/rewrite.py" <<'PY'
import os, sys, threading, time
p, old, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hold = float(sys.argv[4]) if len(sys.argv) > 4 else None
v1 = open(p, "rb").read()
v2 = os.urandom(max(new, 0))
if len(v1) != old:
    sys.exit("%s holds %d bytes, not %d" % (p, len(v1), old))
r = os.open(p, os.O_RDONLY)
first = os.read(r, 4096)
got = []
def read_rest():
    if hold is not None:
        time.sleep(hold)
    rest = b""
    while True:
        b = os.read(r, 1 << 20)
        if not b:
            break
        rest += b
    got.append(first + rest)
    os.close(r)
t = threading.Thread(target=read_rest)
if hold is not None:
    t.start()
t0 = time.monotonic()
try:
    path = p
    if hold is not None:
        o = os.open(p, os.O_PATH)
        path = "/proc/self/fd/%d" % o
    if new < 0:  # truncate(2) by path to -NEW bytes
        v2 = v1[:-new]
        os.truncate(path, -new)
    else:
        w = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.write(w, v2)
        os.close(w)
    wrote = "the writer wrote"
except OSError as e:
    wrote = "the writer got %s" % e.strerror
    v2 = v1
secs = time.monotonic() - t0
if hold is None:
    t.start()
t.join()
now = open(p, "rb").read()
print("%s after %.1f s; the reader read %d bytes (%s); a new reader %d bytes (%s)" % (
    wrote, secs, len(got[0]), "its version" if got[0] == v1 else "WRONG",
    len(now), "the name's version" if now == v2 else "WRONG"))
sys.exit(0 if got[0] == v1 and now == v2 else 1)
PY
# rewrite NAME OLD NEW [HOLD]: rewrite.py on $MNT/NAME; prints its line.
rewrite() {
	python3 "$T/rewrite.py" "$MNT/$1" "${@:2}" 2>&1
}
head -c 200000 /dev/urandom >"$T/big"
cp "$T/big" "$MNT/shrink.pt.tmp" && mv "$MNT/shrink.pt.tmp" "$MNT/shrink.pt"
out=$(rewrite shrink.pt 200000 65536)
ok $? "a reader of a name stored by rename, opened before it is rewritten in place shorter, reads its whole version: $out"
out=$(rewrite kv-0000000000000005.pt $SIZE 65536)
ok $? "the same for a name written in place before the remount: $out"
cp "$T/big" "$MNT/cut.pt.tmp" && mv "$MNT/cut.pt.tmp" "$MNT/cut.pt"
out=$(rewrite cut.pt 200000 -1000)
ok $? "and for truncate(2) by path to 1000 bytes: $out"
head -c 65536 /dev/urandom >"$T/small"
cp "$T/small" "$MNT/grow.pt.tmp" && mv "$MNT/grow.pt.tmp" "$MNT/grow.pt"
out=$(rewrite grow.pt 65536 200000)
ok $? "rewritten longer: $out"
cp "$T/big" "$MNT/proc.pt.tmp" && mv "$MNT/proc.pt.tmp" "$MNT/proc.pt"
out=$(rewrite proc.pt 200000 65536 0.5)
ok $? "a writer that opens it through /proc/self/fd waits for the reader to close: $out"
cp "$T/big" "$MNT/busy.pt.tmp" && mv "$MNT/busy.pt.tmp" "$MNT/busy.pt"
out=$(rewrite busy.pt 200000 65536 12)
[[ "$out" == "the writer got Device or resource busy after 1"[0-9].* ]] &&
	grep -q "waited 10 s for its readers of the page cache to close: EBUSY" "$T/daemon.log"
ok $? "a reader kept open past 10 s: the writer fails with EBUSY, logged; the name keeps its version: $out"
kvt_umount
