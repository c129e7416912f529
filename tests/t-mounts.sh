#!/bin/bash
# Two mounts of one LOWERDIR, one step at a time: a mount whose inode still
# shows a version that the other mount replaced (and whose object that
# mount then released) reads, and writes in place, the version the name
# holds now; it never answers ENOENT for the name.  The first mount keeps
# its entries for a minute, so that the kernel does not look the name up
# again on its own.  A setxattr there lands on the version the name holds
# now, and does not undo the other mount's store.  At the end kvtierfs-fsck finds nothing left over.
# (The races of many writers on two mounts: t-concurrency.sh.)
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

kvt_require_root
plan 17
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
MNT2="$T/mnt2"
mkdir "$MNT2"
head -c 65536 /dev/urandom >"$T/a"
head -c 65536 /dev/urandom >"$T/b"
head -c 65536 /dev/urandom >"$T/c"

kvt_mount entry_timeout=60 attr_timeout=60 negative_timeout=0
kvt_start "$LOWER" "$MNT2"
pid2=$KVT_LAST_PID

ok_cmd "mount 1 stores f and reads it back (its inode shows that version)" \
	bash -c 'cp "$1" "$2/f" && cmp "$1" "$2/f"' _ "$T/a" "$MNT"
ok_cmd "mount 2 replaces f (temp file and rename): the first version's object goes" \
	bash -c 'cp "$1" "$2/f.tmp" && mv "$2/f.tmp" "$2/f"' _ "$T/b" "$MNT2"
ok_cmd "mount 1 reads f: the version mount 2 stored" cmp "$T/b" "$MNT/f"

ok_cmd "mount 2 replaces f again" \
	bash -c 'cp "$1" "$2/f.tmp" && mv "$2/f.tmp" "$2/f"' _ "$T/c" "$MNT2"
# dd conv=notrunc: an open for writing without O_TRUNC, one byte at 0; the
# new version starts as a copy of the published one.
ok_cmd "mount 1 writes one byte in place into f: no ENOENT" \
	dd if=/dev/zero of="$MNT/f" bs=1 count=1 conv=notrunc status=none
{ printf '\0'; tail -c +2 "$T/c"; } >"$T/c0"
ok_cmd "f is the version mount 2 stored last, with that byte, seen from mount 2" \
	cmp "$T/c0" "$MNT2/f"
ok_cmd "and from mount 1" cmp "$T/c0" "$MNT/f"

# setxattr on an inode whose version the other mount replaced: the kernel
# is told ESTALE, looks the name up again and sets it on the version there
ok_cmd "mount 1 stores g and reads it back" \
	bash -c 'cp "$1" "$2/g" && cmp "$1" "$2/g"' _ "$T/a" "$MNT"
ok_cmd "mount 2 replaces g" \
	bash -c 'cp "$1" "$2/g.tmp" && mv "$2/g.tmp" "$2/g"' _ "$T/b" "$MNT2"
ok_cmd "mount 1 sets user.k on g" setfattr -n user.k -v v1 "$MNT/g"
ok_cmd "g is mount 2's version, from both mounts (its store is not undone)" \
	bash -c 'cmp "$1" "$2/g" && cmp "$1" "$3/g"' _ "$T/b" "$MNT" "$MNT2"
v=$(kvt_run getfattr --only-values -n user.k "$MNT2/g" 2>/dev/null)
[ "$v" = v1 ]
ok $? "mount 2 sees user.k on its version: '$v'"

kvt_stop "$MNT2" "$pid2"
kvt_umount
"$KVTIERFS_FSCK" "$LOWER" >"$T/fsck.out" 2>&1
ok $? "fsck: clean ($(tail -n 1 "$T/fsck.out"))" || diag_file "$T/fsck.out" 20
