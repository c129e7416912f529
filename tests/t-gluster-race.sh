#!/bin/bash
# One store, two hosts changing the same names: kvtierfs mounts K1 and K2
# over two client mounts of one GlusterFS volume (tests/gluster.sh), a
# file system without RENAME_EXCHANGE, where names change under a hold
# (src/store/hold.h).
# What is checked: tests/twohosts-race.sh.
# kvt-kind: remote
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gluster.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 25
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

gl_setup
gl_two_hosts reclaim=0
# Each mount sees the other's staging lock: the second at its start, the
# first at its next look, within a second (a loaded machine may take
# longer).
both_shared() { [ "$(grep -c "another mount uses the store" "$T/daemon.log")" -ge 2 ]; }
kvt_within 10 both_shared &&
	[ "$(grep -c "no RENAME_EXCHANGE: a name is replaced or removed under a flock" "$T/daemon.log")" = 2 ]
ok $? "two hosts on one GlusterFS store: both see the other ($took s); each says its names change under flocks" ||
	diag_file "$T/daemon.log" 20

S1=$GL1/store
S2=$GL2/store
. "$(dirname "$0")/twohosts-race.sh"
