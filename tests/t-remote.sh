#!/bin/bash
# verify=auto (the default): on a store whose file system is served from
# elsewhere (NFS, CephFS, a FUSE file system such as GlusterFS; here
# bindfs stands for one) size and times do not prove an object's bytes
# unchanged, so every open for reading hashes; on a local disk an object
# is hashed once a mount.  verify=once and verify=always override it.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v bindfs >/dev/null || bail "bindfs is missing (scripts/install-deps)"
plan 15
kvt_setup

# loads_and_hashes MNT: open the block three times, print "loads verified"
# as the counters moved.
loads_and_hashes() {
	local l0 v0
	l0=$(kvt_stat "$1" loads)
	v0=$(kvt_stat "$1" verified)
	for _ in 1 2 3; do
		cat "$1/m/b.bin" >/dev/null || return 1
	done
	echo "$(kvt_calc 'b - a' a="$l0" b="$(kvt_stat "$1" loads)")" \
		"$(kvt_calc 'b - a' a="$v0" b="$(kvt_stat "$1" verified)")"
}

REAL=$T/real
mkdir "$REAL"
bindfs "$REAL" "$LOWER" || bail "bindfs $REAL $LOWER failed"
[ "$(stat -f -c %t "$LOWER")" = 65735546 ]
ok $? "the store's directory is on a FUSE file system (bindfs)"

head -c 1M /dev/urandom >"$T/block"
kvt_mount
mkdir -p "$MNT/m"
cp "$T/block" "$MNT/m/b.bin"
r=$(loads_and_hashes "$MNT")
[ "$r" = "3 3" ]
ok $? "verify=auto on a remote store: 3 loads, 3 hashes ($r)"
grep -q 'verify=auto: the store is on FUSE .*every open for reading hashes' "$T/daemon.log"
ok $? "a line at mount says why"
kvt_umount

kvt_mount verify=once
off=${KVT_LOGOFF[$KVT_PID]}
r=$(loads_and_hashes "$MNT")
[ "$r" = "3 1" ]
ok $? "verify=once on the same store: 3 loads, 1 hash ($r)"
kvt_umount
! grep -q 'verify=auto: the store is' <(tail -c +"$((off + 1))" "$T/daemon.log")

ok $? "verify=once: no such line"

# A local store: the store's own directory, without bindfs between.
LOCAL=$T/local
mkdir "$LOCAL"
kvt_start "$LOCAL" "$MNT"
mkdir -p "$MNT/m"
cp "$T/block" "$MNT/m/b.bin"
r=$(loads_and_hashes "$MNT")
[ "$r" = "3 0" ] || [ "$r" = "3 1" ]
ok $? "verify=auto on a local store ($(stat -f -c %T "$LOCAL")): 3 loads, at most 1 hash ($r)"
kvt_stop "$MNT" "$KVT_LAST_PID"
kvt_start "$LOCAL" "$MNT" verify=always
r=$(loads_and_hashes "$MNT")
[ "$r" = "3 3" ]
ok $? "verify=always on a local store: 3 loads, 3 hashes ($r)"
kvt_stop "$MNT" "$KVT_LAST_PID"
