#!/bin/bash
# What a store and a load through kvtierfs cost an NFS server against NFS
# used directly: tests/nfs-cost-inner.sh, in the virtual machine of
# t-nfs.sh (tests/vm.sh).  Its TAP output is this file's.
# kvt-kind: vm
# kvt-timeout: 900
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vm.sh"

kvt_require_root
kvt_setup
vm_setup rpc.nfsd rpc.mountd exportfs mount.nfs
vm_run "$top_srcdir/tests/nfs-cost-inner.sh"
