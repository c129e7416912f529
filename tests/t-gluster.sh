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
# harder: versions of two sizes, both ways of storing, fsck after).
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gluster.sh"
. "$(dirname "$0")/twohosts.sh"

kvt_require_root
plan 28
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

gl_setup
ok 0 "GlusterFS volume on $GL_ADDR, mounted twice (two hosts)"
gl_two_hosts
[ "$(grep -c 'verify=auto: the store is on FUSE' "$T/daemon.log")" = 2 ]
ok $? "both hosts see a remote store and verify at every open"

SIZE=262144
N=32
th_exchange $N

# --- damage on the server ---------------------------------------------------
rel_of() {
	"$KVCLIENT" paths --dir "$K1" --key-base "$1" --blocks 1
}
# flip KEY: one byte in the middle of KEY's object, on the brick, its
# access and modification times put back as they were.
flip() {
	local obj
	obj=$(kvt_xattr "$K1/$(rel_of "$1")" user.kvtierfs.object)
	python3 - "$GL_BRICK/store/$obj" <<-'PY'
		import os, sys
		p = sys.argv[1]
		st = os.stat(p)
		with open(p, "r+b") as f:
		    f.seek(st.st_size // 2)
		    b = f.read(1)
		    f.seek(st.st_size // 2)
		    f.write(bytes([b[0] ^ 0x20]))
		os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
	PY
}

flip 3
th_drop_caches
r=$(th_damaged 3)
[ "$r" = "eio enoent enoent enoent" ]
ok $? "a byte flipped on the brick, times kept: host B gets EIO, then both hosts miss it ($r)"
grep -q "purged $(rel_of 3): .*torn by hash" "$T/daemon.log"
ok $? "the purge is logged: torn by hash"

flip 5
r=$(th_damaged 5)
[[ "$r" =~ ^(ok )*eio( enoent)*$ ]] || [[ "$r" =~ ^(ok )+(ok)$ ]]
ok $? "flipped while both hosts' caches hold the block: right bytes from a cache, or EIO then misses, never wrong ($r)"
th_drop_caches
r=$(th_damaged 5)
[[ "$r" =~ ^(eio|enoent)( enoent)*$ ]]
ok $? "and once the caches let go: EIO or a miss, then misses ($r)"

obj=$(kvt_xattr "$K1/$(rel_of 7)" user.kvtierfs.object)
truncate -s $((SIZE / 2)) "$GL_BRICK/store/$obj"
th_drop_caches
r=$(th_damaged 7)
[ "$r" = "enoent enoent enoent enoent" ]
ok $? "truncated on the brick: both hosts miss it ($r)"

th_others_ok $N 3 5 7

th_stop_fsck "$GL1/store"

# --- kill -9 of one host during stores ---------------------------------------
kvt_start "$GL1/store" "$K1"
P1=$KVT_LAST_PID
ids_a=$(ls "$GL1/store/staging" | sort)
kvt_start "$GL2/store" "$K2"
P2=$KVT_LAST_PID
id_b=$(ls "$GL1/store/staging" | sort | comm -13 <(echo "$ids_a") -)
# host B keeps a file open for writing: its staging must outlive A's death
kvt_hold_writer "$K2/held.dat" 8192 || bail "no writer holds $K2/held.dat open"
held=$KVT_HOLDER
"$KVCLIENT" vllm-store --dir "$K1" --blocks 2000 --size 65536 --key-base 5000 --crash-ok \
	--progress 50 >"$T/crash.out" 2>&1 &
cl=$!
for ((i = 0; i < 400; i++)); do grep -q '^progress' "$T/crash.out" && break; sleep 0.05; done
kill -KILL "$P1"
wait "$cl"
unset "KVT_DAEMONS[$P1]"
fusermount3 -u -z "$K1"
grep -q '^progress' "$T/crash.out"
ok $? "host A killed with -9 in the middle of its stores ($(grep -c '^progress' "$T/crash.out") progress lines)"
bad=$(for k in 0 1 2 4 6 8 10 20 30; do o=$(th_probe "$K2" "$k"); [ "$o" = ok ] || echo "$k:$o"; done)
[ -z "$bad" ]
ok $? "host B goes on serving the blocks right" || diag "$bad"
kvt_start "$GL1/store" "$K1"
P1=$KVT_LAST_PID
still=$(ls "$GL1/store/staging" | sort)
[ -n "$id_b" ] && grep -qx -- "$id_b" <<<"$still" &&
	! grep -qx -- "$ids_a" <<<"$still" &&
	grep -q 'removed staging left by 1 dead mount' "$T/daemon.log"
ok $? "host A's remount removed its own dead staging ($ids_a) only (host B's $id_b is there)"
diag "staging now: $(echo $still)"
kill "$held" 2>/dev/null
wait "$held" 2>/dev/null
ok_kvclient "the blocks A stored before it died load on B, whole or absent" \
	verify --dir "$K2"

# Both hosts store the same names at once, versions of one size (as
# vLLM's blocks of a model), while each reads them.
th_race
kvt_stop "$K1" "$P1"
kvt_stop "$K2" "$P2"
