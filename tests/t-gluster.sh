#!/bin/bash
# One store, two hosts: kvtierfs mounts K1 and K2 over two client mounts
# of one GlusterFS volume (tests/gluster.sh).  Blocks stored through K1
# load byte-exact through K2; damage done on the brick, a byte flipped
# with the file's times put back and a truncation, is never served by
# either host once the clients' page caches let go of the old bytes: the
# first to read it purges it, the other misses at its next resolve;
# kvtierfs-fsck finds the store clean after; a kill -9 of K1 during stores
# leaves K2 serving and its staging alone, and K1's remount removes only
# its own; both hosts renaming versions of one size over the same names
# while reading them read only whole versions (t-gluster-race.sh races
# harder: versions of two sizes, both ways of storing, fsck after); both
# hosts storing the same blocks at once make every fan-out directory
# together, and no store fails (GlusterFS loses a directory two clients
# make at once: kvtierfs makes it again); 120 blocks of the same bytes
# all store (GlusterFS refuses an inode its 47th link in one directory).
# kvt-kind: remote
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gluster.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 39
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

gl_setup
# a point of its own, not a check: gl_setup bails out on any failure and
# checks each client mount is glusterfs
ok 0 "GlusterFS volume on $GL_ADDR, mounted twice (two hosts)"
gl_two_hosts
th_remote_store FUSE

SRV=$GL_BRICK/store
S1=$GL1/store
S2=$GL2/store
. "$(dirname "$0")/twohosts-basic.sh"

# A new store on the same volume: the fan-out directories are all new.
th_new_store "$GL1/fan" "$GL2/fan"
th_fanout_race 1000 2
th_same_bytes 120
th_stop_fsck "$GL1/fan"
