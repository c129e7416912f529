#!/bin/bash
# One store, two hosts, on CephFS: kvtierfs mounts K1 and K2 over two
# ceph-fuse clients of one single-node Ceph cluster (tests/cephfs.sh), a
# file system without RENAME_EXCHANGE or RENAME_NOREPLACE through
# ceph-fuse, where names change under flocks (src/hold.h).  Blocks stored
# through K1 load byte-exact through K2 and back; a byte flipped in the
# data pool behind both clients (the metadata server hears nothing: size
# and times stay) is never served: the first host to read it answers EIO
# and purges it, both miss it after; a truncation misses on both; both
# hosts renaming versions over the same names while reading them read only
# whole versions, with no ENOENT; kvtierfs-fsck finds the store clean.
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cephfs.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 19
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

t0=$SECONDS
cf_setup
ok 0 "a single-node Ceph cluster, its CephFS mounted twice by ceph-fuse (two hosts), in $((SECONDS - t0)) s"
kvt_two_hosts "$CF1/store" "$CF2/store"
[ "$(grep -c 'verify=auto: the store is on FUSE' "$T/daemon.log")" = 2 ] &&
	[ "$(grep -c "no RENAME_EXCHANGE: a name is replaced or removed under a flock" "$T/daemon.log")" = 2 ]
ok $? "both hosts see a remote store, verify at every open, and change names under flocks"

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
th_drop_caches
r=$(th_damaged 3)
[ "$r" = "eio enoent enoent enoent" ]
ok $? "host B gets EIO, then both hosts miss it ($r)"
grep -q "purged .*: .*torn by hash" "$T/daemon.log"
ok $? "the purge is logged: torn by hash"

truncate -s $((SIZE / 2)) "$(obj_of 7)"
th_drop_caches
r=$(th_damaged 7)
[ "$r" = "enoent enoent enoent enoent" ]
ok $? "block 7's object truncated through a client: both hosts miss it ($r)"

th_others_ok $N 3 7

# Both hosts store the same names at once, while each reads them.
th_race

th_stop_fsck "$CF1/store"
cf_cleanup
[ -z "$(cf_procs)" ] && ! kvt_is_mounted "$CF1" && ! kvt_is_mounted "$CF2"
ok $? "the cluster is gone: no daemon, no mount"
