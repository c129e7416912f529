# shellcheck shell=bash
#
# tests/twohosts-basic.sh: what one store shared by two hosts must do, on
# any shared file system: sourced by t-gluster.sh and, in its virtual
# machine, nfs-inner.sh once both hosts are up (kvt_two_hosts: $K1, $P1,
# $K2, $P2), with the store at $S1 through host A's client mount, at $S2
# through host B's, and at $SRV on the server's own disk, where a test
# damages what the clients see.  24 test points.
#
# Blocks stored through K1 load byte-exact through K2; damage done on the
# server, a byte flipped with the file's times put back and a truncation,
# is never served by either host once the clients' page caches let go of
# the old bytes: the first to read it purges it, the other misses at its
# next resolve; kvtierfs-fsck finds the store clean after; a kill -9 of K1
# during stores leaves K2 serving and its staging alone, and K1's remount
# removes only its own; both hosts renaming versions of one size over the
# same names while reading them read only whole versions.

SIZE=262144
N=32
th_exchange $N

# --- damage on the server ---------------------------------------------------
rel_of() {
	"$KVCLIENT" paths --dir "$K1" --key-base "$1" --blocks 1
}
# flip KEY: one byte in the middle of KEY's object, on the server, its
# access and modification times put back as they were.
flip() {
	local obj
	obj=$(kvt_xattr "$K1/$(rel_of "$1")" user.kvtierfs.object)
	python3 - "$SRV/$obj" <<-'PY'
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
kvt_drop_caches
r=$(th_damaged 3)
[ "$r" = "eio enoent enoent enoent" ]
ok $? "a byte flipped on the server, times kept: host B gets EIO, then both hosts miss it ($r)"
grep -q "purged $(rel_of 3): .*torn by hash" "$T/daemon.log"
ok $? "the purge is logged: torn by hash"

flip 5
r=$(th_damaged 5)
[[ "$r" =~ ^(ok )*eio( enoent)*$ ]] || [[ "$r" =~ ^(ok )+(ok)$ ]]
ok $? "flipped while both hosts' caches hold the block: right bytes from a cache, or EIO then misses, never wrong ($r)"
kvt_drop_caches
r=$(th_damaged 5)
[[ "$r" =~ ^(eio|enoent)( enoent)*$ ]]
ok $? "and once the caches let go: EIO or a miss, then misses ($r)"

obj=$(kvt_xattr "$K1/$(rel_of 7)" user.kvtierfs.object)
truncate -s $((SIZE / 2)) "$SRV/$obj"
kvt_drop_caches
r=$(th_damaged 7)
[ "$r" = "enoent enoent enoent enoent" ]
ok $? "truncated on the server: both hosts miss it ($r)"

th_others_ok $N 3 5 7

th_stop_fsck "$S1"

# --- kill -9 of one host during stores ---------------------------------------
kvt_start "$S1" "$K1"
P1=$KVT_LAST_PID
ids_a=$(ls "$S1/staging" | sort)
kvt_start "$S2" "$K2"
P2=$KVT_LAST_PID
id_b=$(ls "$S1/staging" | sort | comm -13 <(echo "$ids_a") -)
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
kvt_start "$S1" "$K1"
P1=$KVT_LAST_PID
still=$(ls "$S1/staging" | sort)
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
