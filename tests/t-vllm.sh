#!/bin/bash
# vLLM fs tier: store (O_DIRECT probe, tmp+rename, one write per block) and
# load (access, O_DIRECT open, one read), 16+16 threads, 512 x 2 MiB, then
# the same buffered on a fresh mount; kvtierfs xattrs of a stored block.
. "$(dirname "$0")/lib.sh"

BLOCKS=512
SIZE=$((2 << 20))

plan 24
kvt_setup

# --- O_DIRECT -------------------------------------------------------------
kvt_mount
ok_kvclient "vllm-store O_DIRECT: $BLOCKS x 2 MiB, 16 threads" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 16 --odirect

f=$(kvt_first_block "$MNT")
diag "block: ${f#"$MNT"/}"

v=$(kvt_xattr "$f" user.kvtierfs.verdict)
[ "$v" = unverified ]
ok $? "verdict of a stored, never read block is 'unverified' (got '$v')"

h=$(kvt_xattr "$f" user.kvtierfs.hash)
[[ "$h" =~ ^xxh3-128:[0-9a-f]{32}$ ]]
ok $? "user.kvtierfs.hash is xxh3-128:<32 hex> (got '$h')"

if command -v xxh128sum >/dev/null; then
	want=$(kvt_run xxh128sum "$f" 2>/dev/null | cut -d' ' -f1)
	[ -n "$want" ] && [ "${h#xxh3-128:}" = "$want" ]
	ok $? "user.kvtierfs.hash matches xxh128sum of the bytes read (xxh128sum: $want)"
else
	skip "user.kvtierfs.hash matches xxh128sum" "xxh128sum not installed"
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
# the idle workers, libfuse's main thread and kvtierfs's purge notifier
[ "$n" -le 4 ]
ok $? "-o max_idle_threads=2: the daemon is down to $n threads (at most 4) once idle"
kvt_umount
