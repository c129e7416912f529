#!/bin/bash
# The scrub (-o scrub=MIB) finds an object that rotted on the lower disk
# before any client asks for it: its links go, one log line says so, the
# counters move, and a load of the name that used it answers ENOENT or
# EIO, never the rotten bytes; the other names read as they were.  A
# scrub stopped by an unmount resumes where it was at the next mount.
# Without -o scrub (the build before it), the rotten object stays on the
# lower disk and nothing is said.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 17
kvt_setup

stats() { kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.stats "$MNT"; }
counter() { stats | awk -v n="$1" '$1 == n { print $2 }'; }

kvt_mount
for i in $(seq 1 8); do
	head -c 1048576 /dev/urandom >"$T/b$i" && cp "$T/b$i" "$MNT/b$i.bin" || bail "store failed"
done
for i in $(seq 1 8); do cmp -s "$T/b$i" "$MNT/b$i.bin" || bail "read back failed"; done
obj=$(kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.object "$MNT/b3.bin")
[ -n "$obj" ] && [ -f "$LOWER/$obj" ]
ok $? "8 blocks stored and read back; b3's object is $obj"
kvt_umount

# Rot: one bit of b3's object flipped below, its times put back, the store
# not mounted.
kvt_flip_bit "$LOWER/$obj" 1000 || bail "cannot change the object"
kvt_mount scrub=64,scrub_interval=3600
kvt_wait_log "scrub: objects/.*no longer hash to its name: removed with its 2 links"
ok $? "the scrub finds the rotten object, no client asking, and says so in one line" ||
	diag_file "$T/daemon.log" 10
kvt_wait_log "scrub: a pass over the store"
rotten=$(counter scrub_rotten) objects=$(counter scrub_objects) passes=$(counter scrub_passes)
[ "$rotten" = 1 ] && [ "$objects" = 8 ] && kvt_num_cmp "$passes" -ge 1
ok $? "counters: scrub_rotten $rotten, scrub_objects $objects (8 distinct), scrub_passes $passes"
[ ! -e "$LOWER/$obj" ]
ok $? "its links are gone from the lower disk"
o=$(kvt_run cat "$MNT/b3.bin" 2>&1 >"$T/got")
rc=$?
[ "$rc" != 0 ] && [[ "$o" == *"No such file"* || "$o" == *"Input/output error"* ]] &&
	! cmp -s "$T/got" "$T/b3"
ok $? "a load of b3 answers ENOENT or EIO, never bytes (exit $rc: $o)"
[ ! -e "$MNT/b3.bin" ]
ok $? "and b3 is gone (access ENOENT)"
bad=0
for i in 1 2 4 5 6 7 8; do cmp -s "$T/b$i" "$MNT/b$i.bin" || bad=$((bad + 1)); done
[ "$bad" = 0 ]
ok $? "the 7 other blocks read as they were ($bad differ)"
kvt_umount

# Resume: a slow scrub (1 MiB/s over 7 MiB) stopped after its first
# objects resumes at the fan-out directory where it was.
at0=$(stat -c %s "$T/daemon.log")
kvt_mount scrub=1,scrub_interval=3600,log_level=debug
# Its second fan-out directory of objects done: 2 objects at least.
kvt_wait_log "scrub: objects/..: [0-9]+ objects hashed" 2 "$at0"
n=$(counter scrub_objects)
kvt_umount
at=$(getfattr --absolute-names --only-values -n user.kvtierfs.scrub "$LOWER/objects" 2>/dev/null)
kvt_num_cmp "$at" -gt 0
ok $? "an unmount during a pass ($n objects hashed) leaves where it was: objects/ says $at"
kvt_mount scrub=1,scrub_interval=3600
grep -q "scrub: resumes at objects/$(printf %02x "${at:-0}")" "$T/daemon.log"
ok $? "the next mount resumes there, and says so" || diag_file "$T/daemon.log" 5
kvt_umount
