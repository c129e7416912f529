#!/bin/bash
# Power cuts that lose the drive's cache: tests/logwrites-inner.sh (the
# lower disk's writes recorded by dm-log-writes while clients store, then
# the disk rebuilt from the log at its flushes, its marks and points
# between, and the store checked at each) run in a virtual machine on
# Debian's kernel (tests/vm.sh), since this machine's kernel has no
# device mapper.  Its TAP output is this file's.
#
# CI checks 16 points of a short run (3 to 4 minutes, emulated);
# KVT_STRESS=1 (scripts/stress) every flush, mark and point between, of
# bigger blocks (some two hours); KVT_LOGWRITES_POINTS=all checks them all
# here (tests/logwrites-inner.sh has the other variables).
# kvt-timeout: 900
# kvt-kind: vm
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vm.sh"

kvt_require_root
kvt_setup
: "${KVT_LOGWRITES:=$top_builddir/tests/logwrites}"
[ -x "$KVT_LOGWRITES" ] || bail "tests/logwrites is not built: $KVT_LOGWRITES (make check)"
vm_setup dmsetup mkfs.ext4 e2fsck losetup blockdev
vm_run "$top_srcdir/tests/logwrites-inner.sh"
