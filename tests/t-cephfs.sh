#!/bin/bash
# One store, two hosts, on CephFS: kvtierfs mounts K1 and K2 over two
# ceph-fuse clients of one single-node Ceph cluster (tests/cephfs.sh), a
# file system without RENAME_EXCHANGE or RENAME_NOREPLACE through
# ceph-fuse, where names change under flocks (src/store/hold.h).  Blocks stored
# through K1 load byte-exact through K2 and back; a byte flipped in the
# data pool behind both clients (the metadata server hears nothing: size
# and times stay) is never served: the first host to read it answers EIO
# and purges it, both miss it after; a truncation misses on both; both
# hosts renaming versions over the same names while reading them read only
# whole versions, with no ENOENT; kvtierfs-fsck finds the store clean.
# kvt-kind: remote
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
# a point of its own, not a check: cf_setup bails out on any failure and
# checks each client mount is ceph-fuse
ok 0 "a single-node Ceph cluster, its CephFS mounted twice by ceph-fuse (two hosts), in $((SECONDS - t0)) s"
kvt_two_hosts "$CF1/store" "$CF2/store"
th_remote_store FUSE

. "$(dirname "$0")/cephfs-body.sh"
cf_cleanup
[ -z "$(cf_procs)" ] && ! kvt_is_mounted "$CF1" && ! kvt_is_mounted "$CF2"
ok $? "the cluster is gone: no daemon, no mount"
