#!/bin/bash
# Power cuts that lose the drive's cache: tests/logwrites-inner.sh (the
# lower disk's writes recorded by dm-log-writes while clients store, then
# the disk rebuilt from the log at its flushes, its marks and points
# between, and the store checked at each) run in a virtual machine on
# Debian's kernel (tests/vm.sh), since this machine's kernel has no
# device mapper.  Its TAP output is this file's.
#
# CI checks 16 points of a short run; KVT_STRESS=1 (scripts/stress) every
# flush and mark of a longer one, and KVT_LOGWRITES_POINTS=all does that
# here (see tests/logwrites-inner.sh for the other variables).
# kvt-timeout: 900
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vm.sh"

kvt_require_root
kvt_setup
: "${KVT_LOGWRITES:=$top_builddir/tests/logwrites}"
[ -x "$KVT_LOGWRITES" ] || bail "tests/logwrites is not built: $KVT_LOGWRITES (make check)"
vm_setup dmsetup mkfs.ext4 e2fsck losetup blockdev
vm_run "$top_srcdir/tests/logwrites-inner.sh"
