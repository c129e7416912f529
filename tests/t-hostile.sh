#!/bin/bash
# A hostile or damaged lower directory: symbolic links and FIFOs planted
# where kvtierfs expects its own directories and files.  Nothing outside
# LOWERDIR is ever read, written or removed, and nothing hangs: the mount
# and kvtierfs-fsck refuse what they cannot use, with a reason, and ignore
# or report what is not theirs.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 25
kvt_setup
FSCK=$top_builddir/src/kvtierfs-fsck

# A directory outside LOWERDIR that a link points to; it must keep its
# files whatever happens.
OUT="$T/outside"
mkdir -p "$OUT/sub1" "$OUT/sub2"
echo keep >"$OUT/sub1/file"
echo keep >"$OUT/sub2/file"
echo keep >"$OUT/file"
outside_intact() {
	[ "$(cat "$OUT/sub1/file" "$OUT/sub2/file" "$OUT/file" 2>/dev/null)" = "keep
keep
keep" ]
}

# try_mount DESC: the daemon refuses LOWER: exit 1 with one line, within
# the time a hung open would not pass, no mount.
try_mount() {
	timeout -k 5 20 "$KVTIERFS" -f "$LOWER" "$MNT" </dev/null >"$T/out" 2>"$T/err"
	local rc=$?
	[ "$rc" = 1 ] && [ "$(grep -c '' "$T/err")" = 1 ] && ! kvt_is_mounted "$MNT"
	ok $? "$1: the mount refuses (exit $rc): $(cat "$T/err")"
}

# A store, with a few blocks.
kvt_mount
ok_kvclient "store 8 blocks" vllm-store --dir "$MNT" --blocks 8 --size 64K
kvt_umount
store=$T/store.tar
tar -C "$LOWER" -cf "$store" .
fresh() {
	rm -rf "$LOWER" && mkdir "$LOWER" && tar -C "$LOWER" -xf "$store"
}

# staging/ is a link to the outside directory.
rm -rf "$LOWER/staging" && ln -s "$OUT" "$LOWER/staging"
try_mount "staging/ a link outside"
ok "$(outside_intact; echo $?)" "the directory the link points to keeps its files"
timeout 20 "$FSCK" --repair "$LOWER" >"$T/out" 2>&1
rc=$?
[ "$rc" = 8 ] && outside_intact
ok $? "kvtierfs-fsck --repair refuses it too (exit $rc) and removes nothing outside"

# A dead mount's staging directory is a link outside: only the link goes.
fresh
ln -s "$OUT" "$LOWER/staging/host.1.deadbeefdeadbeef"
kvt_mount
[ ! -e "$LOWER/staging/host.1.deadbeefdeadbeef" ] && outside_intact
ok $? "a link among the staging directories: the mount removes the link only"
ok_kvclient "the blocks read back" verify --dir "$MNT" --expect 8
kvt_umount

# The marker is a FIFO, a directory, a link.
fresh
rm "$LOWER/kvtierfs-store" && mkfifo "$LOWER/kvtierfs-store"
try_mount "the marker a FIFO"
timeout 20 "$FSCK" "$LOWER" >"$T/out" 2>&1
rc=$?
[ "$rc" = 4 ] && grep -q "kvtierfs-store: a FIFO, not a marker" "$T/out" && [ -p "$LOWER/kvtierfs-store" ]
ok $? "kvtierfs-fsck reports a FIFO marker, without hanging or touching it (exit $rc): $(head -n 1 "$T/out")"
rm "$LOWER/kvtierfs-store" && mkdir "$LOWER/kvtierfs-store"
try_mount "the marker a directory"
rmdir "$LOWER/kvtierfs-store" && ln -s "$OUT/file" "$LOWER/kvtierfs-store"
try_mount "the marker a link"

# objects/ and names/ as links: refused.
fresh
mv "$LOWER/objects" "$T/objects.real" && ln -s "$T/objects.real" "$LOWER/objects"
try_mount "objects/ a link"
rm "$LOWER/objects" && mv "$T/objects.real" "$LOWER/objects"

# Planted inside names/: a FIFO, a link outside, a link to a record, a
# directory link; and a fan-out directory of objects/ as a link.
fresh
d=$(find "$LOWER/names" -name '*.bin' -printf '%h\n' | head -n 1)
mkfifo "$d/fifo.bin"
ln -s "$OUT/file" "$d/out.bin"
ln -s "$(find "$d" -name '*.bin' -type f | head -n 1)" "$d/alias.bin"
ln -s "$OUT" "$LOWER/names/outdir"
kvt_mount
rel=${d#"$LOWER/names/"}
kvt_run stat "$MNT/$rel/fifo.bin" >/dev/null 2>&1
st1=$?
kvt_run cat "$MNT/$rel/out.bin" >/dev/null 2>&1
st2=$?
kvt_run cat "$MNT/$rel/alias.bin" >/dev/null 2>&1
st3=$?
kvt_run ls "$MNT/outdir/" >/dev/null 2>&1
st4=$?
[ "$st1" != 0 ] && [ "$st2" != 0 ] && [ "$st3" != 0 ] && [ "$st4" != 0 ]
ok $? "planted FIFO, links and a directory link are not there for clients (stat $st1, cat $st2, $st3, ls $st4)"
n=$(kvt_run ls "$MNT/$rel" | grep -c -E 'fifo|out|alias')
[ "$n" = 0 ]
ok $? "and not listed ($n)"
ok_kvclient "the blocks still read back" verify --dir "$MNT" --expect 8
kvt_run rm -rf "$MNT/$rel"
outside_intact && [ -p "$d/fifo.bin" ]
ok $? "rm -rf of their directory through the mount removes nothing outside, nor the FIFO"
kvt_umount
timeout 20 "$FSCK" --repair "$LOWER" >"$T/out" 2>&1
rc=$?
grep -q "unknown names/$rel/fifo.bin" "$T/out" && grep -q "unknown names/outdir" "$T/out" &&
	outside_intact
ok $? "kvtierfs-fsck reports them as not kvtierfs's (exit $rc) and leaves them, and the outside alone"

fresh
# The store makes its fan-out directories ahead: take one that holds objects.
fan=$(dirname "$(find "$LOWER/objects" -mindepth 2 -type f | head -n 1)")
mv "$fan" "$T/fan.real" && ln -s "$T/fan.real" "$fan"
before=$(find "$T/fan.real" -type f | wc -l)
kvt_mount
kvt_run "$KVCLIENT" verify --dir "$MNT" >"$T/verify.out" 2>&1
st=$?
after=$(find "$T/fan.real" -type f | wc -l)
[ "$st" != 0 ] && [ "$before" -gt 0 ] && [ "$after" = "$before" ]
ok $? "a fan-out directory of objects/ as a link: its blocks are not served through it, nothing in it removed ($after of $before files)"
kvt_umount
