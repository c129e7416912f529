#!/bin/bash
# Interleavings of calls that only timing allows, forced by delaying the
# daemon's lower calls (KVT_FAULTS, src/store/fault.h) and watching where the
# clients wait (/proc/PID/stack).  Each section's comment says the order.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 34
kvt_setup
MNT2="$T/mnt2"
mkdir "$MNT2"
for v in a b c h; do
	head -c 65536 /dev/urandom >"$T/$v"
done

# in_call PID FUNCTION: PID waits for kvtierfs in FUNCTION of the kernel
# (fuse_rename: a rename(2); fuse_dentry_revalidate: a lookup of a name
# the kernel knows).
in_call() {
	local i
	for ((i = 0; i < 1000; i++)); do
		grep -q "$2" "/proc/$1/stack" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}
# Debian's python3, not a shim in PATH: a client that takes seconds to
# start on a loaded machine would miss its turn.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
rename_bg() {
	"$PY" -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$1" "$2" &
}

# --- the kernel forgets an inode while a rename replaces it ----------------
# Two mounts of one store, as two hosts: mount 2's rename of n.tmp over n is under way
# when another version of n lands through mount 1, and a stat through
# mount 2 makes that mount's lookup give n a new inode.  The kernel still
# holds the old one under the rename, so it refuses the new one and
# forgets it at once, while the rename, which found the new one at n,
# replaces it.  Nothing may use that inode once the rename lets its locks
# go: after that, the FORGET frees it.
#
# Lower calls of mount 2 are delayed (KVT_FAULTS) to force that order:
#   - the rename's record write (before its locks), 5 s, so that the
#     rest lines up behind it (the clients' start may take seconds on a
#     loaded machine);
#   - a rename in another directory, o/, whose lower rename holds the
#     tree lock for 8 s: the rename of n waits there first, then the
#     lookup of the stat (its reply, and so the FORGET, behind it);
#   - the unlink of the staged file after the rename's locks: the FORGET
#     lands while the rename is still running.
# A daemon that reads the freed inode there (as namespace.c did before
# b873469: a use-after-free, a SIGSEGV in CI) is caught by ASan, and by
# the lock-checked build, which keeps freed inodes marked (inode.c).
kvt_mount
ok_cmd "mount 1 stores n and makes o/" bash -c 'cp "$1" "$2/n" && mkdir "$2/o"' _ "$T/a" "$MNT"
export KVT_FAULTS="write:5000ms:name=n.*:max=1,rename:8000ms:name=h,link:8000ms:name=h,unlink:1500ms:name=d.*"
# Every walk asks the daemon: the stat's lookup reaches it.
kvt_start "$LOWER" "$MNT2" entry_timeout=0 attr_timeout=0 negative_timeout=0
pid2=$KVT_LAST_PID
unset KVT_FAULTS
ok_cmd "mount 2 writes n.tmp and o/h.tmp, and looks n up" \
	bash -c 'cp "$1" "$3/n.tmp" && cp "$2" "$3/o/h.tmp" && cmp "$4" "$3/n"' _ \
	"$T/b" "$T/h" "$MNT2" "$T/a"

rename_bg "$MNT2/n.tmp" "$MNT2/n"
p1=$!
in_call "$p1" fuse_rename
ok $? "mount 2: the rename of n.tmp over n is under way (its record write delayed 5 s)"
t1=$(date +%s%N)
rename_bg "$MNT2/o/h.tmp" "$MNT2/o/h"
x=$!
in_call "$x" fuse_rename
ok $? "mount 2: the rename of o/h.tmp holds the tree lock (its lower rename delayed 8 s)"
ok_cmd "mount 1 replaces n" bash -c 'cp "$1" "$2/n.t" && mv "$2/n.t" "$2/n"' _ "$T/c" "$MNT"
# Once the rename's record write is done: it waits for the tree lock
# first.
left=$(( 5500 - ($(date +%s%N) - t1) / 1000000 ))
[ "$left" -le 0 ] || sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
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

# --- a lookup that looked while a rename replaced the name ------------------
# A lookup reads the name's record and stats its object without the
# directory's lock (resolve.c), then takes what it saw only if nothing
# changed meanwhile.  Here the object's stat in a lookup of l/m (the
# kernel asking again about a name it knows) waits 1.5 s, while a rename
# of l/m.tmp over l/m publishes another version; the old version's
# reference stays 3 s more (its unlink delayed), so the look finds the
# old version whole.  It must not be taken: the stat that asked shows the
# rename's version, and so does every later read.  The first stat of the
# old object is that lookup's: l/m was published by a rename, which
# gave the kernel its entry, and nothing looked it up since.
head -c 100000 /dev/urandom >"$T/m2"
hash=$("$KVT_XXH128" "$T/a" | cut -d' ' -f1)
export KVT_FAULTS="stat:1500ms:name=$hash.*:max=1,unlink:3000ms:name=$hash.*"
kvt_mount entry_timeout=0 attr_timeout=0 negative_timeout=0
unset KVT_FAULTS
ok_cmd "stores l/m (65,536 bytes) by rename, writes l/m.tmp (100,000 bytes)" \
	bash -c 'mkdir "$3/l" && cp "$1" "$3/l/m0.tmp" && mv "$3/l/m0.tmp" "$3/l/m" &&
		cp "$2" "$3/l/m.tmp"' _ "$T/a" "$T/m2" "$MNT"
stat -c %s "$MNT/l/m" >"$T/m.size" 2>&1 &
sp=$!
in_call "$sp" fuse_dentry_revalidate
ok $? "a stat of l/m waits in its lookup (the object's stat delayed 1.5 s)"
rename_bg "$MNT/l/m.tmp" "$MNT/l/m"
rp=$!
wait "$sp"
ok $? "the stat succeeds"
[ "$(cat "$T/m.size")" = 100000 ]
ok $? "the stat shows the rename's version: $(cat "$T/m.size") bytes"
wait "$rp"
ok $? "the rename succeeds"
ok_cmd "l/m reads as the rename's version" cmp "$T/m2" "$MNT/l/m"
kvt_umount
grep -q "stat:1500ms:name=$hash.\*:max=1: 1 faults" "$T/daemon.log" &&
	grep -q "unlink:3000ms:name=$hash.\*: 1 faults" "$T/daemon.log"
ok $? "the daemon delayed the lookup's stat and the old reference's unlink, once each"
kvt_mount
ok_cmd "mounted again: l/m reads as the rename's version" cmp "$T/m2" "$MNT/l/m"

# --- a mkdir in a directory the lower file system no longer knows ---------
# Two hosts making one fan-out directory at once on GlusterFS: the brick
# keeps one of the two, and the host whose directory lost holds a
# descriptor that still answers fstat (it is not gone by its links) but
# makes nothing in it: ENOENT.  Here the lower mkdir of d/sub answers
# ENOENT once (KVT_FAULTS); the mkdir must take the directory at d's name
# and make sub there, not hand the ENOENT to the client (a store's
# mkdir -p failed so in t-gluster.sh's race, once in CI).
kvt_umount
export KVT_FAULTS="mkdir:ENOENT:max=1:name=sub"
kvt_mount
unset KVT_FAULTS
ok_cmd "mkdir d, then d/sub with its lower mkdir answering ENOENT once" \
	bash -c 'mkdir "$1/d" && mkdir "$1/d/sub" && [ -d "$1/d/sub" ]' _ "$MNT"
ok_cmd "a block stored in d/sub reads back" \
	bash -c 'cp "$1" "$2/d/sub/x.tmp" && mv "$2/d/sub/x.tmp" "$2/d/sub/x" && cmp "$1" "$2/d/sub/x"' _ "$T/a" "$MNT"

# --- a mkdir told "exists" of a directory that is not there ---------------
# GlusterFS loses a directory that two of its clients make (or one makes
# and one looks up) at the same instant: a mkdir may be answered EEXIST,
# and the directory is not there (tests/t-gluster.sh's fan-out race).
# Here the lower mkdir of d2 answers EEXIST twice without making it
# (KVT_FAULTS): the mkdir must make it, not hand the EEXIST to the client,
# whose mkdir -p would then fail on its next step with ENOENT.
kvt_umount
export KVT_FAULTS="mkdir:EEXIST:max=2:name=d2"
kvt_mount
unset KVT_FAULTS
ok_cmd "mkdir d2, its lower mkdir answering EEXIST twice where nothing is" \
	bash -c 'mkdir "$1/d2" && mkdir "$1/d2/sub" && [ -d "$1/d2/sub" ]' _ "$MNT"
ok_cmd "... and a mkdir of a directory that is there still fails with EEXIST" \
	bash -c '! mkdir "$1/d2" 2>/dev/null && [ -d "$1/d2" ]' _ "$MNT"
kvt_umount
grep -q "mkdir:EEXIST:max=2:name=d2: 2 faults" "$T/daemon.log"
ok $? "the daemon answered both of d2's lower mkdirs EEXIST"
