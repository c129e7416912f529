#!/bin/bash
# One store, two hosts, on CephFS through the kernel's client: the checks
# of t-cephfs.sh (tests/cephfs-body.sh) and of t-gluster-race.sh
# (tests/twohosts-race.sh) over two mounts of the kernel's CephFS client,
# each a client of its own (noshare), as two hosts are.
# Runs in the virtual machine of t-cephfs-kernel.sh (tests/vm.sh), whose
# cluster runs outside it: CONF is that cluster's ceph.conf, ADDR the
# address of its monitor.  Run it by itself on a machine whose kernel has
# CephFS, with a cluster made by tests/cephfs.sh.
#
# usage: cephfs-kernel-inner.sh CONF ADDR
# kvt-timeout: 1200
# Emulated, a race of both hosts takes up to 2 min: a command is deemed
# hung after 10.
: "${KVT_CMD_TIMEOUT:=600}"
# and a replacement whose holder died may take 6 s instead of 2 (2.7 s
# seen over CephFS there, against 0.2 s in another run).
: "${TH_GOES_ON_MS:=6000}"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cephfs.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 42
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
CF_CONF=$1
CF_ADDR=$2

# cfk_cleanup: the client mounts, after the kvtierfs mounts over them.
cfk_cleanup() {
	local m
	for m in "$CF1" "$CF2"; do
		kvt_is_mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
}

CF1=$T/c1
CF2=$T/c2
mkdir "$CF1" "$CF2" || bail "mkdir failed"
KVT_CLEANUP_HOOKS+=(cfk_cleanup)
modprobe ceph || bail "no ceph module in this kernel"
for m in 1 2; do
	# -i: the kernel parses the source; no mount.ceph, no keyring (the
	# cluster asks for no authentication).
	mount -i -t ceph -o "name=h$m,noshare" "$CF_ADDR:16789:/" "$T/c$m" ||
		bail "mount of CephFS on $T/c$m failed: $(dmesg | grep -i ceph | tail -n 3)"
	[ "$(kvt_fstype "$T/c$m")" = ceph ] || bail "$T/c$m is not a CephFS mount"
done
# a point of its own, not a check: each mount above bails out on failure
# or when it is not ceph
ok 0 "CephFS mounted twice by the kernel's client ($(uname -r)), each a client of its own"
kvt_two_hosts "$CF1/store" "$CF2/store"
th_remote_store CephFS

. "$(dirname "$0")/cephfs-body.sh"

# The races of t-gluster-race.sh.
th_new_store "$CF1/race" "$CF2/race" reclaim=0
. "$(dirname "$0")/twohosts-race.sh"
