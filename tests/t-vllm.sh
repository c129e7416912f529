#!/bin/bash
# vLLM fs tier: store (O_DIRECT probe, tmp+rename, one write per block) and
# load (access, O_DIRECT open, one read), 16+16 threads, 512 x 2 MiB, then
# the same buffered on a fresh mount; kvtierfs xattrs of a stored block.
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"

BLOCKS=512
SIZE=$((2 << 20))

plan 26
kvt_setup

# --- O_DIRECT -------------------------------------------------------------
kvt_mount
ok_kvclient "vllm-store O_DIRECT: $BLOCKS x 2 MiB, 16 threads" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect

# Each block is two 1 MiB WRITE requests (max_write), and each arrives
# page-aligned, so it goes to the lower disk with no copy (src/daemon/receive.c);
# the client's O_DIRECT probe writes too.
n=$(kvt_stat "$MNT" aligned_writes)
[ "${n:-0}" -ge $((2 * BLOCKS)) ]
ok $? "the O_DIRECT writes arrived page-aligned: $n WRITE requests for $BLOCKS blocks (at least $((2 * BLOCKS)))"

f=$(kvt_first_block "$MNT")
diag "block: ${f#"$MNT"/}"

v=$(kvt_xattr "$f" user.kvtierfs.verdict)
[ "$v" = unverified ]
ok $? "verdict of a stored, never read block is 'unverified' (got '$v')"

h=$(kvt_xattr "$f" user.kvtierfs.hash)
[[ "$h" =~ ^xxh3-128:[0-9a-f]{32}$ ]]
ok $? "user.kvtierfs.hash is xxh3-128:<32 hex> (got '$h')"

want=$(kvt_run "$KVT_XXH128" "$f") && want=${want%%  *} &&
	[ -n "$want" ] && [ "${h#xxh3-128:}" = "$want" ]
ok $? "user.kvtierfs.hash matches tests/xxh128 of the bytes read (xxh128: $want)"

# tests/xxh128 ($KVT_XXH128, which the damage tests hash with) prints
# exactly what xxh128sum prints: files of every size class of XXH3
# (0..16, 17..128, 129..240, longer, stripes and 1 MiB read chunks) and
# the block read through the mount
if command -v xxh128sum >/dev/null; then
	mkdir "$T/xxh"
	for n in 0 1 3 4 8 9 16 17 128 129 240 241 1024 1025 65536 \
		1048575 1048576 1048577 3145745; do
		head -c $n /dev/urandom >"$T/xxh/r$n"
	done
	a=$(cd "$T/xxh" && "$KVT_XXH128" r* && kvt_run "$KVT_XXH128" "$f" &&
		"$KVT_XXH128" <r241)
	# (xxh128sum's stderr: progress output of large files)
	b=$(exec 2>/dev/null; cd "$T/xxh" && xxh128sum r* && kvt_run xxh128sum "$f" &&
		xxh128sum <r241)
	[ -n "$a" ] && [ "$a" = "$b" ]
	ok $? "tests/xxh128 prints what xxh128sum prints ($(wc -l <<<"$b") files of 0..3 MiB, the block, stdin)"
	[ "$a" = "$b" ] || diag "tests/xxh128:" "$a" "xxh128sum:" "$b"
else
	skip "tests/xxh128 prints what xxh128sum prints" "xxh128sum not installed"
fi

s=$(kvt_xattr "$f" user.kvtierfs.size)
st=$(kvt_run stat -c %s "$f" 2>/dev/null)
[ "$s" = $SIZE ] && [ "$st" = $SIZE ]
ok $? "user.kvtierfs.size and st_size are $SIZE (xattr '$s', stat $st)"

o=$(kvt_xattr "$f" user.kvtierfs.object)
[[ "$o" == objects/* ]] && [ -f "$LOWER/$o" ] &&
	[ "$(stat -c %s "$LOWER/$o")" = $SIZE ]
ok $? "user.kvtierfs.object names a $SIZE-byte file under LOWERDIR/objects (got '$o')"

[ -n "$o" ] && kvt_run cmp -s "$LOWER/$o" "$f"
ok $? "the object file holds exactly the bytes of the block"

n=$(kvt_count_tmp "$MNT") && [ "$n" = 0 ]
ok $? "no *.tmp name remains after the store (probe and block temps; found $n)"
[ "$n" = 0 ] || kvt_run find "$MNT" -name '*.tmp' | head -n 5 | sed 's/^/#   /'

ok_kvclient "vllm-store again: every block is an access() hit" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect
grep -q "skipped=$BLOCKS " "$KVT_OUT"
ok $? "second store skipped all $BLOCKS blocks"

ok_kvclient "vllm-load O_DIRECT: $BLOCKS x 2 MiB, 16 threads, every byte checked" \
	vllm-load --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect

v=$(kvt_xattr "$f" user.kvtierfs.verdict)
[ "$v" = verified ]
ok $? "verdict after the block was read is 'verified' (got '$v')"

kvt_umount

# --- buffered, fresh lower dir --------------------------------------------
kvt_new_lower
kvt_mount
ok_kvclient "vllm-store buffered: $BLOCKS x 2 MiB, 16 threads" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --buffered
ok_kvclient "vllm-load buffered: $BLOCKS x 2 MiB, 16 threads" \
	vllm-load --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --buffered
ok_kvclient "verify: exactly $BLOCKS complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $BLOCKS --size $SIZE --no-tmp
kvt_umount

# --- O_DIRECT again with few idle threads: threads end and start in bursts --
kvt_new_lower
kvt_mount max_idle_threads=2
ok_kvclient "-o max_idle_threads=2: vllm-store O_DIRECT, 16 threads" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect
ok_kvclient "-o max_idle_threads=2: vllm-load O_DIRECT, 16 threads, every byte checked" \
	vllm-load --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect
n=$(ls "/proc/$KVT_PID/task" | wc -l)
# the idle workers, libfuse's main thread, kvtierfs's purge notifier, its
# sharing watch (share.h) and the thread that takes SIGHUP (main.c)
[ "$n" -le 6 ]
ok $? "-o max_idle_threads=2: the daemon is down to $n threads (at most 6) once idle"
kvt_umount
