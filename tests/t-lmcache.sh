#!/bin/bash
# LMCache local disk: blocks written straight to their final name
# (<dir>/<key>.pt, O_CREAT|O_WRONLY|O_TRUNC, chunked writes, rewritten with
# new versions) while readers read the same names with readinto: each read
# is ENOENT or one whole version, never part of one.  Publishing at close
# must be done when close() returns.  Its other backend writes <name>.tmp
# and os.replace()s it.
. "$(dirname "$0")/lib.sh"

KEYS=16
SIZE=$((2 << 20))
ROUNDS=10

plan 14
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
kvt_umount
