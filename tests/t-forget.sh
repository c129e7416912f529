#!/bin/bash
# The kernel forgets an inode while a rename replaces it.  Two mounts of
# one store, as two hosts: mount 2's rename of n.tmp over n is under way
# when another version of n lands through mount 1, and a stat through
# mount 2 makes that mount's lookup give n a new inode.  The kernel still
# holds the old one under the rename, so it refuses the new one and
# forgets it at once, while the rename, which found the new one at n,
# replaces it.  Nothing may use that inode once the rename lets its locks
# go: after that, the FORGET frees it.
#
# Lower calls of mount 2 are delayed (KVT_FAULTS) to force that order:
#   - the rename's record write (before its locks), so that the rest
#     lines up behind it;
#   - a rename in another directory, o/, whose lower rename holds the
#     tree lock for 4 s: the rename of n waits there first, then the
#     lookup of the stat (its reply, and so the FORGET, behind it);
#   - the unlink of the staged file after the rename's locks: the FORGET
#     lands while the rename is still running.
# A daemon that reads the freed inode there (as namespace.c did before
# b873469: a use-after-free, a SIGSEGV in CI) is caught by ASan
# (scripts/check --asan); without it, a daemon that survives must still
# serve the right version and exit clean.
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 13
kvt_setup
MNT2="$T/mnt2"
mkdir "$MNT2"
for v in a b c h; do
	head -c 65536 /dev/urandom >"$T/$v"
done

# in_rename PID: PID's rename(2) is in kvtierfs, waiting for its reply.
in_rename() {
	local i
	for ((i = 0; i < 1000; i++)); do
		grep -q fuse_rename "/proc/$1/stack" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}
rename_bg() {
	python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$1" "$2" &
}

kvt_mount
ok_cmd "mount 1 stores n and makes o/" bash -c 'cp "$1" "$2/n" && mkdir "$2/o"' _ "$T/a" "$MNT"
export KVT_FAULTS="write:1000ms:name=n.*:max=1,rename:4000ms:name=h,link:4000ms:name=h,unlink:1500ms:name=d.*"
# Every walk asks the daemon: the stat's lookup reaches it.
kvt_start "$LOWER" "$MNT2" entry_timeout=0 attr_timeout=0 negative_timeout=0
pid2=$KVT_LAST_PID
unset KVT_FAULTS
ok_cmd "mount 2 writes n.tmp and o/h.tmp, and looks n up" \
	bash -c 'cp "$1" "$3/n.tmp" && cp "$2" "$3/o/h.tmp" && cmp "$4" "$3/n"' _ \
	"$T/b" "$T/h" "$MNT2" "$T/a"

rename_bg "$MNT2/n.tmp" "$MNT2/n"
p1=$!
in_rename "$p1"
ok $? "mount 2: the rename of n.tmp over n is under way (its record write delayed 1 s)"
rename_bg "$MNT2/o/h.tmp" "$MNT2/o/h"
x=$!
in_rename "$x"
ok $? "mount 2: the rename of o/h.tmp holds the tree lock (its lower rename delayed 4 s)"
ok_cmd "mount 1 replaces n" bash -c 'cp "$1" "$2/n.t" && mv "$2/n.t" "$2/n"' _ "$T/c" "$MNT"
# After the rename's record write: it waits for the tree lock first.
sleep 1.5
stat "$MNT2/n" >/dev/null &
p2=$!
wait "$p1"
ok $? "mount 2: the rename of n.tmp over n succeeds"
wait "$x"
ok $? "mount 2: the rename of o/h.tmp succeeds"
wait "$p2"
ok $? "mount 2: the stat of n succeeds"
ok_cmd "both mounts read n as mount 2's rename left it, o/h as stored" \
	bash -c 'cmp "$1" "$3/n" && cmp "$1" "$4/n" && cmp "$2" "$4/o/h"' _ \
	"$T/b" "$T/h" "$MNT" "$MNT2"
kvt_stop "$MNT2" "$pid2"
kvt_umount
