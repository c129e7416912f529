#!/bin/bash
# One store, two hosts, on CephFS through the kernel's client (t-cephfs.sh
# covers ceph-fuse): the cluster of tests/cephfs.sh runs here, bound to a
# tap device, and tests/cephfs-kernel-inner.sh runs in a virtual machine
# on Debian's kernel (tests/vm.sh), since this machine's kernel has no
# CephFS.  Its TAP output is this file's.
# kvt-kind: vm
# kvt-timeout: 1200
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cephfs.sh"
. "$(dirname "$0")/vm.sh"

kvt_require_root
kvt_setup
vm_setup
vm_tap
CF_ADDR=$VM_HOST_ADDR
CF_FUSE=0
cf_setup
vm_run "$top_srcdir/tests/cephfs-kernel-inner.sh" "$CF_CONF" "$CF_ADDR"
