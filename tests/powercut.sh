# shellcheck shell=bash
#
# tests/powercut.sh: power cuts of the lower disk, for mount tests.
# Sourced after lib.sh and kvt_setup:
#
#     . "$(dirname "$0")/lib.sh"
#     . "$(dirname "$0")/powercut.sh"
#     kvt_setup
#     pc_require             # skips the file without xfs_io, mkfs.ext4, loop
#     pc_disk                # $LOWER is a fresh ext4 on a loop device
#     kvt_mount
#     ...                    # stores
#     pc_cut                 # test point: the disk loses power, comes back
#     kvt_mount              # what survived
#
# The disk is a sparse image file in $T, with ext4 (data=ordered, the
# default) on a loop device, mounted on $T/disk, which is $LOWER (an empty
# ext4 has only lost+found: kvtierfs makes a store there).  The cut is
# `xfs_io -x -c shutdown`, WITHOUT -f: the file system stops at once and
# writes nothing more, not even the journal transaction it was building,
# so the disk holds what was committed before, as after a power loss: a
# rename committed by the journal's periodic commit (5 s) or by anyone's
# fsync is there, file data that sat in the page cache is not.  Then the
# daemon, whose disk is dead, is killed (kill -9), its FUSE mount cleaned
# (fusermount3 -u -z), the dead ext4 unmounted (which frees the loop
# device), the image checked (e2fsck -p replays the journal) and mounted
# again on a new loop device.  kvt_cleanup unmounts whatever is under $T;
# pc_cleanup, run at exit, detaches any loop device still on the image.

PC_IMG=
PC_DISK=
PC_SIZE=${PC_SIZE:-1G}

# pc_require: skip the whole file when the rig cannot be built here.
pc_require() {
	local c
	for c in xfs_io mkfs.ext4 e2fsck losetup; do
		command -v "$c" >/dev/null ||
			{ echo "1..0 # SKIP $c is missing (scripts/install-deps)"; exit 0; }
	done
	[ -e /dev/loop-control ] || modprobe loop 2>/dev/null
	[ -e /dev/loop-control ] || { echo "1..0 # SKIP no loop devices"; exit 0; }
}

# pc_cleanup: the loop devices still on the image go (the EXIT trap's
# kvt_cleanup has unmounted the file systems under $T by then).
pc_cleanup() {
	local dev
	[ -n "$PC_IMG" ] || return 0
	losetup -n -O NAME -j "$PC_IMG" 2>/dev/null | while IFS= read -r dev; do
		losetup -d "$dev" 2>/dev/null
	done
}

# pc_disk: a new image, ext4 on it, mounted on $T/disk; $LOWER is it.
# The disk of an earlier call goes (nothing may be mounted on it).
pc_disk() {
	if [ -n "$PC_IMG" ]; then
		umount "$PC_DISK" || bail "cannot unmount the old disk $PC_DISK"
		pc_cleanup
		rm -f "$PC_IMG"
	else
		KVT_CLEANUP_HOOKS+=(pc_cleanup)
	fi
	PC_IMG=$T/disk.img
	PC_DISK=$T/disk
	mkdir -p "$PC_DISK" || bail "mkdir $PC_DISK failed"
	truncate -s "$PC_SIZE" "$PC_IMG" || bail "truncate $PC_IMG failed"
	# lazy_itable_init=0: no background zeroing that writes on its own
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$PC_IMG" ||
		bail "mkfs.ext4 $PC_IMG failed"
	_pc_mount || bail "cannot mount $PC_IMG"
	LOWER=$PC_DISK
}

# _pc_mount: the image on $PC_DISK through a new loop device; "loop"
# detaches it again at unmount.
_pc_mount() {
	mount -t ext4 -o loop "$PC_IMG" "$PC_DISK"
}

# pc_commit: commit the journal's running transaction without writing
# back any file data, as the periodic commit does every 5 s: an fsync of
# the disk's top directory.  Renames and links made so far reach the disk,
# data still in the page cache (delayed allocation) does not.
pc_commit() {
	xfs_io -r -c fsync "$PC_DISK"
}

# pc_cut: the power cut.  One test point: the disk stopped without a
# flush, the daemon of $MNT killed and its mount cleaned, the disk back
# (journal replayed, e2fsck -p clean or fixed) and mounted again.
pc_cut() {
	local why=() pid=$KVT_PID st
	if ! xfs_io -x -c shutdown "$PC_DISK" 2>"$T/.cut.err"; then
		why+=("xfs_io shutdown failed: $(head -n 2 "$T/.cut.err")")
	fi
	if [ -n "$pid" ]; then
		KVT_PID=
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		unset "KVT_DAEMONS[$pid]"
	fi
	if kvt_is_mounted "$MNT" && ! fusermount3 -u -z "$MNT" 2>"$T/.cut.err"; then
		why+=("fusermount3 -u -z $MNT failed: $(head -n 2 "$T/.cut.err")")
	fi
	if ! umount "$PC_DISK" 2>"$T/.cut.err"; then
		why+=("umount of the dead disk failed: $(head -n 2 "$T/.cut.err")")
		umount -l "$PC_DISK" 2>/dev/null
	fi
	# 0: clean, 1: errors fixed (fsck(8)); a journal replay is neither
	e2fsck -p "$PC_IMG" >"$T/.fsck.out" 2>&1
	st=$?
	[ "$st" -le 1 ] || why+=("e2fsck -p exit status $st: $(tail -n 3 "$T/.fsck.out")")
	_pc_mount 2>"$T/.cut.err" ||
		why+=("mounting the disk again failed: $(head -n 2 "$T/.cut.err")")
	ok ${#why[@]} "power cut of the lower disk (shutdown without flush), daemon killed, disk mounted again (e2fsck: $(tail -n 1 "$T/.fsck.out" | cut -c1-60))"
	[ ${#why[@]} = 0 ] || diag "${why[@]}"
	[ ${#why[@]} = 0 ] || bail "the lower disk did not come back"
}
