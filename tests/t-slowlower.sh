#!/bin/bash
# A lower file system where every call that changes a name is a round
# trip (a network one: GlusterFS, NFS, CephFS): stores from many threads
# stay parallel.  The daemon runs with KVT_FAULTS delays, so each create,
# link, rename and unlink on the lower store waits DELAY ms.  A store in
# vLLM's style makes about eight of them, and the rename that publishes a
# temp file holds the mount's tree lock; if the lower calls of the
# publication ran under it, every store would wait for the one before,
# and the stores of 16 threads would take about as long as all their
# delayed calls one after another.  Measured here: the stores take at
# most half that time, and every block reads back; fsck finds the store
# clean.  The same for LMCache's files, published when they are closed.
# And lookups: 16 threads looking up the names of one directory, each
# look at a lower name delayed, overlap too (they looked under the
# directory's lock, one after another: 4.2 s where they now take 0.3 s).
# kvt-kind: mount
# kvt-timeout: 300
. "$(dirname "$0")/lib.sh"

DELAY=20
BLOCKS=32
FSCK=$top_builddir/src/kvtierfs-fsck
plan 23
kvt_setup

# delayed_calls: the delayed calls the last daemon made, from the line
# per rule it logged at exit; nothing when it logged none.
delayed_calls() {
	sed -n 's/^kvtierfs: fault injection: .*: \([0-9]*\) faults in [0-9]* calls$/\1/p' \
		"$T/.log.part" | awk '{ n += $1 } END { if (NR) print n }'
}

# slow_store LABEL CLIENT-ARGS...: mounts with every create, link, rename
# and unlink delayed, runs the stores, unmounts; sets WALL (s) and
# SERIAL (s: the delayed calls one after another).
slow_store() {
	local label=$1 t0 t1
	shift
	export KVT_FAULTS="create:${DELAY}ms,link:${DELAY}ms,rename:${DELAY}ms,unlink:${DELAY}ms"
	kvt_mount
	unset KVT_FAULTS
	t0=$(date +%s.%N)
	ok_kvclient "$label" "$@"
	t1=$(date +%s.%N)
	kvt_umount
	WALL=$(kvt_calc 'b - a' a="$t0" b="$t1")
	SERIAL=$(kvt_calc 'n * d / 1000' n="$(delayed_calls)" d=$DELAY)
	diag "$label: $(printf '%.2f' "${WALL:-nan}") s; $(delayed_calls) delayed calls, $(printf '%.2f' "${SERIAL:-nan}") s one after another"
}

# at_most_half [STORES]: prints WALL / SERIAL; whether it is at most 0.5,
# with SERIAL at least the worth of STORES stores (default BLOCKS).
at_most_half() {
	local st
	kvt_ratio_at_most "$WALL" "$SERIAL" 0.5
	st=$?
	kvt_num_cmp "$SERIAL" -ge "$(kvt_calc 'n * 6 * d / 1000' n="${1:-$BLOCKS}" d=$DELAY)" &&
		return "$st"
}

slow_store "$BLOCKS blocks of 64 KiB stored by 16 threads, vLLM style (O_DIRECT)" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size 64K --threads 16
r=$(at_most_half)
ok $? "the stores overlap: $r of the time their delayed lower calls take one after another (at most 0.5)"

slow_store "$BLOCKS more, buffered, into the same directories" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --key-base 1000 --size 64K --threads 16 --buffered
r=$(at_most_half)
ok $? "buffered too: $r (at most 0.5)"

# LMCache: files written in place in one directory, published at close;
# if the lower calls of the publication ran under the directory's lock,
# every close would wait for the one before.
slow_store "LMCache: 8 writers, 16 files written twice each in the top directory" \
	lmcache --dir "$MNT" --blocks 16 --size 64K --writers 8 --readers 1 --rounds 2
r=$(at_most_half 16)
ok $? "the closes overlap: $r (at most 0.5)"

# Replacements: renames over names that hold a record, from 4 writers,
# while readers read (the record replaced goes after the lock).
slow_store "4 writers replace 4 names 5 times each while 4 readers read" \
	race --dir "$MNT" --blocks 4 --key-base 2000 --size 64K --writers 4 --readers 4 \
	--rounds 5 --buffered

# Lookups: on a fresh mount (nothing cached by the kernel), 16 threads
# each look up (stat) one of LMCache's 16 files, all in the top
# directory, every look at a lower name delayed LDELAY ms.  The names
# come from the store, not from a listing of the mount (which would look
# them up).  Each lookup looks at its name at least once; under the
# directory's lock the 16 would take at least 16 x LDELAY.
LDELAY=100
export KVT_FAULTS="stat:${LDELAY}ms"
kvt_mount
unset KVT_FAULTS
secs=$(python3 - "$MNT" "$LOWER/names" <<'PY'
import os, sys, threading, time
mnt, names = sys.argv[1], sorted(n for n in os.listdir(sys.argv[2]) if n.endswith(".pt"))
go, bad = threading.Barrier(len(names) + 1), []
def look(n):
    go.wait()
    try:
        os.stat(os.path.join(mnt, n))
    except OSError as e:
        bad.append("%s: %s" % (n, e))
ts = [threading.Thread(target=look, args=(n,)) for n in names]
for t in ts:
    t.start()
go.wait()
t0 = time.monotonic()
for t in ts:
    t.join()
print("%.2f %d %s" % (time.monotonic() - t0, len(names), "; ".join(bad)))
PY
)
diag "16 lookups in one directory, each look ${LDELAY} ms: ${secs:-none}"
set -- $secs
[ "${2:-0}" = 16 ] && [ -z "${3:-}" ]
ok $? "16 threads look up LMCache's 16 files: ${2:-0} names, all found"
kvt_num_cmp "${1-}" -le "$(kvt_calc '16 * d / 1000 / 2' d=$LDELAY)"
ok $? "the lookups overlap: ${1:-?} s, at most half of 16 x $LDELAY ms"
kvt_umount

kvt_mount
ok_kvclient "every block reads back, no temp file left" \
	verify --dir "$MNT" --expect $((2 * BLOCKS + 16 + 4)) --no-tmp
kvt_umount
fsck_out=$("$FSCK" "$LOWER" 2>&1) || { diag "$fsck_out"; false; }
ok $? "kvtierfs-fsck finds the store clean"
