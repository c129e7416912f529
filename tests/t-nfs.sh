#!/bin/bash
# One store, two hosts, over NFS: tests/nfs-inner.sh (the checks of
# t-gluster.sh and t-gluster-race.sh, over two NFS 4.2 mounts of the
# kernel's nfsd) run in a virtual machine on Debian's kernel
# (tests/vm.sh), since this machine's kernel has no NFS.  Its TAP
# output is this file's.
# kvt-kind: vm
# kvt-timeout: 1200
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vm.sh"

kvt_require_root
kvt_setup
vm_setup rpc.nfsd rpc.mountd exportfs mount.nfs
vm_run "$top_srcdir/tests/nfs-inner.sh"
