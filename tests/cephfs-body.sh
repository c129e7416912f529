# shellcheck shell=bash
#
# tests/cephfs-body.sh: the checks of a shared store on CephFS, whichever
# client mounts it ($CF1 and $CF2, with kvtierfs mounts $K1 and $K2 over
# them, tests/cephfs.sh's cluster): blocks exchanged both ways, a byte
# changed in the data pool behind both clients and a truncation, both
# hosts racing renames over the same names, then both stopped and
# kvtierfs-fsck.  Sourced by t-cephfs.sh (ceph-fuse) and
# cephfs-kernel-inner.sh (the kernel's client); 14 test points.

SIZE=262144
N=32
th_exchange $N

# --- damage on the server -------------------------------------------------
obj_of() {
	echo "$CF1/store/$(kvt_xattr "$K1/$("$KVCLIENT" paths --dir "$K1" --key-base "$1" --blocks 1)" \
		user.kvtierfs.object)"
}
o3=$(obj_of 3)
cf_object_get "$o3" "$T/obj3" && [ "$(stat -c %s "$T/obj3")" = $SIZE ] &&
	printf '\x5a' | dd of="$T/obj3" bs=1 seek=$((SIZE / 2)) conv=notrunc status=none &&
	before=$(stat -c '%s %Y %Z' "$o3") && cf_object_put "$o3" "$T/obj3" &&
	[ "$(stat -c '%s %Y %Z' "$o3")" = "$before" ]
ok $? "a byte of block 3's object changed in the data pool: its size and times on the clients stay ($before)"
kvt_drop_caches
r=$(th_damaged 3)
[ "$r" = "eio enoent enoent enoent" ]
ok $? "host B gets EIO, then both hosts miss it ($r)"
grep -q "purged .*: .*torn by hash" "$T/daemon.log"
ok $? "the purge is logged: torn by hash"

truncate -s $((SIZE / 2)) "$(obj_of 7)"
kvt_drop_caches
r=$(th_damaged 7)
[ "$r" = "enoent enoent enoent enoent" ]
ok $? "block 7's object truncated through a client: both hosts miss it ($r)"

th_others_ok $N 3 7

# Both hosts store the same names at once, while each reads them.
th_race

th_stop_fsck "$CF1/store"
