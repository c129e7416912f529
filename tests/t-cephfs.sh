#!/bin/bash
# One store, two hosts, on CephFS: kvtierfs mounts K1 and K2 over two
# ceph-fuse clients of one single-node Ceph cluster (tests/cephfs.sh), a
# file system without RENAME_EXCHANGE or RENAME_NOREPLACE through
# ceph-fuse, where names change under flocks (src/hold.h).  Blocks stored
# through K1 load byte-exact through K2 and back; a byte flipped in the
# data pool behind both clients (the metadata server hears nothing: size
# and times stay) is never served: the first host to read it answers EIO
# and purges it, both miss it after; a truncation misses on both; both
# hosts renaming versions over the same names while reading them read only
# whole versions, with no ENOENT; kvtierfs-fsck finds the store clean.
# kvt-timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cephfs.sh"

kvt_require_root
plan 19
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

t0=$SECONDS
cf_setup
ok 0 "a single-node Ceph cluster, its CephFS mounted twice by ceph-fuse (two hosts), in $((SECONDS - t0)) s"
kvt_two_hosts "$CF1/store" "$CF2/store"
[ "$(grep -c 'verify=auto: the store is on FUSE' "$T/daemon.log")" = 2 ] &&
	[ "$(grep -c "no RENAME_EXCHANGE: a name is replaced or removed under a flock" "$T/daemon.log")" = 2 ]
ok $? "both hosts see a remote store, verify at every open, and change names under flocks"

SIZE=262144
N=32
ok_kvclient "host A stores $N blocks (O_DIRECT)" \
	vllm-store --dir "$K1" --blocks $N --size $SIZE
ok_kvclient "host B loads them, every byte checked (O_DIRECT)" \
	vllm-load --dir "$K2" --blocks $N --size $SIZE
ok_kvclient "host B loads them buffered" \
	vllm-load --dir "$K2" --blocks $N --size $SIZE --buffered
ok_kvclient "host B stores $N more" \
	vllm-store --dir "$K2" --blocks $N --size $SIZE --key-base 1000
ok_kvclient "host A loads them" \
	vllm-load --dir "$K1" --blocks $N --size $SIZE --key-base 1000

# --- damage on the server -------------------------------------------------
probe() {
	"$KVCLIENT" probe --dir "$1" --key-base "$2" --size $SIZE 2>/dev/null | head -n 1
}
obj_of() {
	echo "$CF1/store/$(kvt_xattr "$K1/$("$KVCLIENT" paths --dir "$K1" --key-base "$1" --blocks 1)" \
		user.kvtierfs.object)"
}
# damaged KEY: KEY probed on host B, A, B, A: no host may serve a wrong or
# short block; the first to read the damage gets EIO (torn by hash) or
# ENOENT (torn by size), every later resolve misses.
damaged() {
	local out=() h
	for h in "$K2" "$K1" "$K2" "$K1"; do
		out+=("$(probe "$h" "$1")")
	done
	echo "${out[*]}"
}
drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

o3=$(obj_of 3)
cf_object_get "$o3" "$T/obj3" && [ "$(stat -c %s "$T/obj3")" = $SIZE ] &&
	printf '\x5a' | dd of="$T/obj3" bs=1 seek=$((SIZE / 2)) conv=notrunc status=none &&
	before=$(stat -c '%s %Y %Z' "$o3") && cf_object_put "$o3" "$T/obj3" &&
	[ "$(stat -c '%s %Y %Z' "$o3")" = "$before" ]
ok $? "a byte of block 3's object changed in the data pool: its size and times on the clients stay ($before)"
drop_caches
r=$(damaged 3)
[ "$r" = "eio enoent enoent enoent" ]
ok $? "host B gets EIO, then both hosts miss it ($r)"
grep -q "purged .*: .*torn by hash" "$T/daemon.log"
ok $? "the purge is logged: torn by hash"

truncate -s $((SIZE / 2)) "$(obj_of 7)"
drop_caches
r=$(damaged 7)
[ "$r" = "enoent enoent enoent enoent" ]
ok $? "block 7's object truncated through a client: both hosts miss it ($r)"

bad=$(for k in $(seq 0 $((N - 1))); do
	case $k in 3 | 7) continue ;; esac
	for h in "$K1" "$K2"; do
		o=$(probe "$h" "$k")
		[ "$o" = ok ] || echo "$k@$(basename "$h"):$o"
	done
done)
[ -z "$bad" ]
ok $? "every other block still loads right on both hosts" || diag "$bad"

# Both hosts store the same names at once, while each reads them.
RACE=(--blocks 8 --size 65536 --writers 4 --readers 8 --rounds 8 --shared --key-base 500)
"$KVCLIENT" race --dir "$K1" "${RACE[@]}" --version 1 >"$T/race1.out" 2>&1 &
r1=$!
kvt_bg "$r1"
"$KVCLIENT" race --dir "$K2" "${RACE[@]}" --version 1001 >"$T/race2.out" 2>&1
s2=$?
wait "$r1"
s1=$?
[ "$s1" = 0 ] && [ "$s2" = 0 ]
ok $? "both hosts rename versions over the same 8 names while 8 readers each read them: every read one whole version, no ENOENT once published (exit $s1, $s2)"
grep -h '^race ' "$T/race1.out" "$T/race2.out" | sed 's/^/#   /'
[ "$s1" = 0 ] || diag_file "$T/race1.out" 10
[ "$s2" = 0 ] || diag_file "$T/race2.out" 10

kvt_stop "$K1" "$P1"
kvt_stop "$K2" "$P2"
"$KVTIERFS_FSCK" "$CF1/store" >"$T/fsck.out" 2>&1
st=$?
[ "$st" = 0 ]
ok $? "kvtierfs-fsck on the shared store: clean (exit $st): $(tail -n 1 "$T/fsck.out")"
[ "$st" = 0 ] || diag_file "$T/fsck.out" 20
cf_cleanup
[ -z "$(cf_procs)" ] && ! kvt_is_mounted "$CF1" && ! kvt_is_mounted "$CF2"
ok $? "the cluster is gone: no daemon, no mount"
