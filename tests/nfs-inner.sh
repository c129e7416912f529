#!/bin/bash
# One store, two hosts, over NFS: what t-gluster.sh and t-gluster-race.sh
# check over GlusterFS (tests/twohosts-basic.sh, tests/twohosts-race.sh),
# over two NFS 4.2 mounts of the kernel's nfsd (tests/nfs.sh).  It runs in
# the virtual machine of t-nfs.sh (tests/vm.sh); run it by itself on a
# machine whose kernel has NFS.
# kvt-timeout: 1200
# Emulated, a race of both hosts takes up to 2 min: a command is deemed
# hung after 10.
: "${KVT_CMD_TIMEOUT:=600}"
# and a replacement whose holder died may take 6 s instead of 2 (2.7 s
# seen over CephFS there, against 0.2 s in another run).
: "${TH_GOES_ON_MS:=6000}"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nfs.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 52
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

t0=$SECONDS
nf_setup
# a point of its own, not a check: nf_setup bails out on any failure (the
# server's start, either client's mount)
ok 0 "an NFS 4.2 export mounted twice ($KVT_NFS_OPTS), two clients of the server, in $((SECONDS - t0)) s"
kvt_two_hosts "$NF1/store" "$NF2/store"
th_remote_store NFS

SRV=$NF_EXPORT/store
S1=$NF1/store
S2=$NF2/store
. "$(dirname "$0")/twohosts-basic.sh"

th_new_store "$NF1/race" "$NF2/race" reclaim=0
. "$(dirname "$0")/twohosts-race.sh"
