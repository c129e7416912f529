#!/bin/bash
# Installing, as an operator does: a tree made by make distdir builds,
# installs under a prefix that is not on mount(8)'s PATH, and
# mount.fuse.kvtierfs mounts from it (directly, through mount -t
# fuse.kvtierfs and through an fstab line); the unit passes
# systemd-analyze verify; make install DESTDIR= and make uninstall leave
# nothing behind; make distcheck passes (with a few tests: the whole
# suite runs from the source tree).
# kvt-kind: mount
# kvt-timeout: 900
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 14
kvt_setup

# The source tree may be configured in place: the copy to build is the
# one make dist would pack.
SRC=$T/kvtierfs-src
INST=$T/inst
make -s -C "$top_builddir" distdir distdir="$SRC" >"$T/distdir.log" 2>&1
ok $? "make distdir: a tree to build" || diag_file "$T/distdir.log" 20

# What make dist packs is what the repository holds (but dotfiles).
if git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$SRC" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$T/dist.list"
	git -C "$top_srcdir" ls-files --cached | grep -Ev '(^|/)\.' | LC_ALL=C sort >"$T/git.list"
	comm -23 "$T/git.list" "$T/dist.list" >"$T/missing"
	[ ! -s "$T/missing" ]
	ok $? "the distribution holds every file of the repository ($(grep -c '' "$T/git.list") files)" ||
		{ diag "missing:"; diag_file "$T/missing" 20; }
else
	skip "the distribution holds every file of the repository" "not a git work tree"
fi

(cd "$SRC" && ./configure --prefix="$INST" --with-mount-helper-dir="$INST/sbin" \
	--with-systemdsystemunitdir="$INST/lib/systemd/system" &&
	make -j"$(nproc)" && make install) >"$T/build.log" 2>&1
ok $? "configure --prefix=$INST, make, make install" || diag_file "$T/build.log" 30

want="bin/kvtierfs bin/kvtierfs-bench bin/kvtierfs-fsck bin/kvtierfs-stat share/man/man8/mount.fuse.kvtierfs.8
lib/systemd/system/kvtierfs@.service sbin/mount.fuse.kvtierfs
share/doc/kvtierfs/fstab.example share/man/man1/kvtierfs-bench.1
share/man/man1/kvtierfs-stat.1 share/man/man8/kvtierfs-fsck.8
share/man/man8/kvtierfs.8"
got=$(cd "$INST" && find . -type f | sed 's|^\./||' | sort)
[ "$got" = "$(echo $want | tr ' ' '\n' | sort)" ]
ok $? "installed: the four commands, their man pages, the mount helper, the unit, an fstab example" ||
	diag "installed: $(echo $got)"

# mounted_pid MNT: the daemon's pid, from the mount's root.
mounted_pid() {
	kvt_xattr "$1" user.kvtierfs.mount | awk '$1 == "pid" { print $2 }'
}
# gone PID: wait (30 s at most) for a daemon that is not our child.
gone() {
	local i
	for ((i = 0; i < 600; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}
# works HOW: a mount by HOW is there, serves a store and a load, its
# source is the store; then umount(8) ends it and its daemon.
works() {
	local how=$1 pid src
	pid=$(mounted_pid "$MNT")
	KVT_DAEMONS[${pid:-0}]=$MNT
	src=$(findmnt -n -o SOURCE "$MNT")
	echo "$how" >"$MNT/$how.bin" && [ "$(cat "$MNT/$how.bin")" = "$how" ] &&
		[ "$src" = "$(readlink -f "$LOWER")" ] && [ -n "$pid" ] &&
		[ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.kvtierfs ]
	ok $? "$how: mounted (fuse.kvtierfs, source $src, pid $pid), a block stored and read back"
	umount "$MNT" && gone "$pid" && ! kvt_is_mounted "$MNT"
	ok $? "$how: umount ends the mount and its daemon"
	unset "KVT_DAEMONS[${pid:-0}]"
}

# mount.fuse.kvtierfs with a PATH that knows nothing of $INST/bin.
env PATH=/usr/bin:/bin "$INST/sbin/mount.fuse.kvtierfs" "$LOWER" "$MNT" \
	-o allow_other,nofail >"$T/helper.out" 2>&1 </dev/null
works "mount.fuse.kvtierfs"
diag_file "$T/helper.out" 5

# mount(8) finds helpers in /sbin only: one there for these two mounts.
if [ -e /sbin/mount.fuse.kvtierfs ]; then
	skip "mount -t fuse.kvtierfs" "/sbin/mount.fuse.kvtierfs belongs to an installed kvtierfs"
	skip "mount -t fuse.kvtierfs: umount" "as above"
	skip "fstab" "as above"
	skip "fstab: umount" "as above"
else
	cp "$INST/sbin/mount.fuse.kvtierfs" /sbin/mount.fuse.kvtierfs
	drop_helper() { rm -f /sbin/mount.fuse.kvtierfs; }
	KVT_CLEANUP_HOOKS+=(drop_helper)
	env PATH=/usr/sbin:/usr/bin:/sbin:/bin mount -t fuse.kvtierfs "$LOWER" "$MNT" -o allow_other \
		>"$T/mount.out" 2>&1 </dev/null
	works "mount -t fuse.kvtierfs"
	diag_file "$T/mount.out" 5
	printf '%s %s fuse.kvtierfs allow_other,nofail 0 0\n' "$LOWER" "$MNT" >"$T/fstab"
	env PATH=/usr/sbin:/usr/bin:/sbin:/bin mount --fstab "$T/fstab" "$MNT" \
		>"$T/mount.out" 2>&1 </dev/null
	works "fstab"
	diag_file "$T/mount.out" 5
	drop_helper
fi

# systemd-analyze verify wants a unit instance and finds Documentation=
# through man(1).
cp "$INST/lib/systemd/system/kvtierfs@.service" "$T/kvtierfs@kv.service"
MANPATH=$INST/share/man systemd-analyze verify "$T/kvtierfs@kv.service" \
	>"$T/verify.out" 2>&1
st=$?
[ "$st" = 0 ] && [ ! -s "$T/verify.out" ] &&
	grep -qx "ExecStart=$INST/bin/kvtierfs -f \$KVTIERFS_OPTS \${LOWERDIR} \${MOUNTPOINT}" \
		"$INST/lib/systemd/system/kvtierfs@.service" &&
	grep -qx 'Type=notify' "$INST/lib/systemd/system/kvtierfs@.service"
ok $? "systemd-analyze verify kvtierfs@.service: silent, exit $st (Type=notify, ExecStart in the prefix)"
diag_file "$T/verify.out" 10

(cd "$SRC" && make install DESTDIR="$T/dest" && make uninstall DESTDIR="$T/dest") \
	>"$T/destdir.log" 2>&1
st=$?
left=$(find "$T/dest" -not -type d | head -n 5)
n=$(find "$T/dest" -type d | wc -l)
[ "$st" = 0 ] && [ -z "$left" ] && [ "$n" -gt 5 ]
ok $? "make install DESTDIR=, then make uninstall DESTDIR=: no file left (exit $st)" ||
	{ diag "left: $left"; diag_file "$T/destdir.log" 20; }

(cd "$SRC" && make uninstall) >"$T/uninstall.log" 2>&1
st=$?
left=$(find "$INST" -not -type d | head -n 5)
[ "$st" = 0 ] && [ -z "$left" ]
ok $? "make uninstall: no file left under the prefix (exit $st)" || diag "left: $left"

(cd "$SRC" && make distcheck KVT_CHECK="tests/t-man.sh tests/t-options.sh") \
	>"$T/distcheck.log" 2>&1
st=$?
[ "$st" = 0 ] && grep -q 'archives ready for distribution' "$T/distcheck.log"
ok $? "make distcheck (exit $st)" || diag_file "$T/distcheck.log" 40
