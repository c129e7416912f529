#!/bin/bash
# kvtierfs-bench and scripts/bench, small: the phase lines and their fields
# on a plain directory and on a mount (with the daemon's CPU by --cpu-of),
# stores of present blocks skipped,
# --check failing on a damaged and on a short block (plain) and on a damaged
# lower object (mount), bad usage, one quick round of scripts/bench, and
# one of scripts/bench-tar on a small tree.
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_BENCH:=$top_builddir/src/kvtierfs-bench}"
: "${KVTIERFS_NULLFS:=$top_builddir/src/kvtierfs-nullfs}"
export KVTIERFS_BENCH KVTIERFS_NULLFS

BLOCKS=64
SIZE=$((256 << 10))
ARGS=(--blocks "$BLOCKS" --block-size 256K --threads 4 --check)

kvt_require_root
[ -x "$KVTIERFS_BENCH" ] || bail "kvtierfs-bench is not built: $KVTIERFS_BENCH"
plan 28
kvt_setup
PLAIN=$T/plain
mkdir "$PLAIN" || bail "mkdir $PLAIN failed"

# bench OUT ARGS...: run kvtierfs-bench (stdout to OUT, stderr to OUT.err)
# under the hang guard; its status.
bench() {
	local out=$1
	shift
	kvt_guard "$KVTIERFS_BENCH" "$@" >"$out" 2>"$out.err"
}

# ok_bench DESC OUT ARGS...: bench, pass on exit 0; output shown.
ok_bench() {
	local desc=$1 out=$2 st
	shift 2
	bench "$out" "$@"
	st=$?
	ok "$st" "$desc (exit $st)"
	sed 's/^/#   /' "$out"
	[ "$st" = 0 ] || diag_file "$out.err" 20
}

# lines_ok OUT BYTES LABEL...: each LABEL has exactly one line in OUT with
# every field, ops=$BLOCKS, errors=0 and bytes=BYTES (lookups: 0).
lines_ok() {
	local out=$1 bytes=$2 l b num='[0-9]+(\.[0-9]+)?'
	shift 2
	for l in "$@"; do
		b=$bytes
		[[ $l == lookup* ]] && b=0
		if [ "$(grep -c "^$l: " "$out")" != 1 ] ||
			! grep -Eq "^$l: ops=$BLOCKS bytes=$b secs=$num GB/s=$num ops/s=$num p50_us=$num p99_us=$num max_us=$num errors=0( skipped=[0-9]+)?$" "$out"; then
			diag "no good '$l:' line (bytes=$b, errors=0)"
			return 1
		fi
	done
}

# --- bad usage --------------------------------------------------------------
bench "$T/usage.out" --blocks 1
st=$?
[ "$st" = 2 ] && [ "$(wc -l <"$T/usage.out.err")" = 1 ] && [ ! -s "$T/usage.out" ]
ok $? "no --dir: exit 2, one line on stderr (exit $st: $(cat "$T/usage.out.err"))"
bench "$T/usage.out" --dir "$PLAIN" --block-size 1000
st=$?
[ "$st" = 2 ] && grep -q 'multiple of 4096' "$T/usage.out.err"
ok $? "O_DIRECT with --block-size 1000: exit 2 (exit $st: $(cat "$T/usage.out.err"))"

# --- plain directory --------------------------------------------------------
ok_bench "plain: all phases, $BLOCKS x 256 KiB, 4 threads, --check, 2 loads" \
	"$T/plain.out" --dir "$PLAIN" "${ARGS[@]}" --repeat-load 2
lines_ok "$T/plain.out" $((BLOCKS * SIZE)) store lookup lookup-miss load load-2
ok $? "plain: a line per phase with every field, errors=0"
n=$(find "$PLAIN" -name '*.bin' -size "$((SIZE / 1024))k" | wc -l)
t=$(find "$PLAIN" -name '*.tmp' | wc -l)
[ "$n" = $BLOCKS ] && [ "$t" = 0 ]
ok $? "plain: $BLOCKS blocks in the vLLM layout, no *.tmp left (found $n and $t)"
find "$PLAIN" -name '*.bin' | head -n 1 | sed "s|^$PLAIN/|#   |"

# --- kvtierfs mount ---------------------------------------------------------
kvt_mount
ok_bench "mount: all phases, --check, cold and warm load" \
	"$T/mnt.out" --dir "$MNT" "${ARGS[@]}" --drop-caches --repeat-load 2
lines_ok "$T/mnt.out" $((BLOCKS * SIZE)) store lookup lookup-miss load load-2
ok $? "mount: a line per phase with every field, errors=0"
ok_bench "mount: store again" "$T/again.out" --dir "$MNT" "${ARGS[@]}" --phases store
grep -Eq "^store: .* bytes=0 .*errors=0 skipped=$BLOCKS$" "$T/again.out"
ok $? "mount: the second store skips all $BLOCKS blocks"
ok_bench "mount: buffered load" "$T/buf.out" --dir "$MNT" "${ARGS[@]}" \
	--phases load --buffered
ok_bench "mount: load with --cpu-of the daemon" "$T/cpu.out" --dir "$MNT" "${ARGS[@]}" \
	--phases load --cpu-of "$KVT_PID"
cpu=$(grep -Eo ' cpu_s=[0-9]+\.[0-9]{3}$' "$T/cpu.out" | cut -d= -f2)
[ -n "$cpu" ] && awk -v c="$cpu" 'BEGIN { exit !(c > 0 && c < 60) }'
ok $? "mount: the load line ends with the daemon's CPU seconds, more than none (${cpu:-none})"
bench "$T/cpu-bad.out" --dir "$MNT" --phases load --cpu-of 2147483647
st=$?
[ "$st" = 2 ] && grep -q 'no process 2147483647' "$T/cpu-bad.out.err" && [ ! -s "$T/cpu-bad.out" ]
ok $? "--cpu-of a process that is not there: exit 2 before any phase (exit $st: $(cat "$T/cpu-bad.out.err"))"

# --- damage is found ----------------------------------------------------------
mapfile -t B < <(find "$PLAIN" -name '*.bin' | LC_ALL=C sort | head -n 2)
printf 'X' | dd of="${B[0]}" bs=1 seek=$((SIZE / 2 + 3)) conv=notrunc status=none
truncate -s $((SIZE / 2)) "${B[1]}"
bench "$T/bad.out" --dir "$PLAIN" "${ARGS[@]}" --phases load
st=$?
sed 's/^/#   /' "$T/bad.out" "$T/bad.out.err"
[ "$st" = 1 ] && grep -Eq "^load: .* errors=2$" "$T/bad.out"
ok $? "plain: load --check of a damaged and a short block: errors=2, exit 1 (exit $st)"
grep -q "content differs .* at offset $((SIZE / 2 + 3))$" "$T/bad.out.err" &&
	grep -q 'short read' "$T/bad.out.err"
ok $? "plain: the damaged byte's offset and the short read are named on stderr"
[ -e "${B[0]}" ] && [ ! -e "${B[1]}" ]
ok $? "plain: the short block is unlinked (as vLLM does), the damaged one is not"

f=$(kvt_first_block "$MNT")
o=$(kvt_xattr "$f" user.kvtierfs.object)
kvt_umount
if [ -n "$o" ] && [ -f "$LOWER/$o" ]; then
	printf 'X' | dd of="$LOWER/$o" bs=1 seek=$((SIZE - 5)) conv=notrunc status=none
else
	diag "no lower object for $f (user.kvtierfs.object '$o')"
fi
kvt_mount
bench "$T/mbad.out" --dir "$MNT" "${ARGS[@]}" --phases load
st=$?
sed 's/^/#   /' "$T/mbad.out" "$T/mbad.out.err"
[ "$st" = 1 ] && grep -Eq "^load: .* errors=[1-9][0-9]*$" "$T/mbad.out"
ok $? "mount: a damaged lower object fails the load (errors>0, exit $st)"
kvt_umount

# --- scripts/bench ------------------------------------------------------------
mkdir "$T/sb"
kvt_guard "$top_srcdir/scripts/bench" --rounds 1 --blocks 32 --block-size 256K \
	--no-fio --dir "$T/sb" >"$T/sb.out" 2>"$T/sb.err"
st=$?
sed 's/^/#   /' "$T/sb.out"
ok "$st" "scripts/bench --rounds 1 --blocks 32 --block-size 256K --no-fio (exit $st)"
[ "$st" = 0 ] || diag_file "$T/sb.err" 20
num='[0-9]+\.[0-9]+'
miss=
for p in store "load cold" "load warm" "load warm, against plain buffered reads" "lookup hit" \
	"lookup hit, null FUSE fs \(cached\)" "lookup hit, kvtierfs / null FUSE fs" "lookup miss" \
	"lookup miss, null FUSE fs" "lookup miss, kvtierfs / null FUSE fs"; do
	grep -Eq "^\| $p \| $num (GB|kops)/s \| $num (GB|kops)/s \| $num \| " "$T/sb.out" ||
		miss="$miss '$p'"
done
grep -Eq "^daemon CPU-seconds per GB .*: store $num, load cold $num, load warm $num$" "$T/sb.out" ||
	miss="$miss 'daemon CPU'"
[ -z "$miss" ] && grep -q '^| phase | plain | kvtierfs | ratio | target |$' "$T/sb.out" &&
	grep -q '^command: .*scripts/bench --rounds 1' "$T/sb.out"
ok $? "scripts/bench: the table has both medians and a ratio for every phase${miss:+ (missing:$miss)}"
left=$(awk -v p="$T/sb/" 'index($5, p) == 1' /proc/self/mountinfo | wc -l)
[ "$left" = 0 ] && [ -z "$(ls -A "$T/sb")" ]
ok $? "scripts/bench: unmounted and removed its work directory ($left mounts left)"

# killed while kvtierfs is mounted: the trap unmounts and cleans up, once
# all it started has ended.  Its kvtierfs-bench here is one that takes a
# second to end after TERM and then writes in the work directory, and
# says on a pipe when it runs on the mount.
mkdir "$T/sb2"
mkfifo "$T/sb2.fifo" "$T/sb2.running"
cat >"$T/slow-bench" <<EOF
#!/bin/bash
trap 'sleep 1; : >"\$W/late"; exit 143' TERM
W=
for a; do case \$a in */mnt) W=\${a%/mnt} ;; esac; done
"$KVTIERFS_BENCH" "\$@" &
[ -n "\$W" ] && echo running >"$T/sb2.running"
wait \$!
EOF
chmod +x "$T/slow-bench"
KVTIERFS_BENCH=$T/slow-bench "$top_srcdir/scripts/bench" --rounds 50 --blocks 32 \
	--block-size 256K --no-fio --dir "$T/sb2" >"$T/sb2.out" 2>"$T/sb2.fifo" </dev/null &
pid=$!
kvt_bg "$pid"
exec {fd}<"$T/sb2.fifo" {rfd}<>"$T/sb2.running"
seen=
while IFS= read -r -t 60 line <&"$fd"; do
	case $line in
	"# kvtierfs "*" mounted "*) seen=$line; break ;;
	esac
done
running=
IFS= read -r -t 60 running <&"$rfd"
kill -TERM "$pid"
cat <&"$fd" >"$T/sb2.err"
exec {fd}<&- {rfd}<&-
_kvt_wait_pid "$pid" 60
st=$?
# what it started (kvtierfs, kvtierfs-bench) has ended when it exits
alive=$(pgrep -f "$T/sb2/" | wc -l)
left=$(awk -v p="$T/sb2/" 'index($5, p) == 1' /proc/self/mountinfo | wc -l)
[ -n "$seen" ] && [ "$running" = running ] && [ "$st" = 143 ] && [ "$left" = 0 ] &&
	[ "$alive" = 0 ] && [ -z "$(ls -A "$T/sb2")" ]
ok $? "scripts/bench killed (TERM) while mounted: unmounts, removes its directory once what it started has ended (exit $st, $left mounts, $alive processes and '$(ls -A "$T/sb2")' left)"
[ -n "$seen" ] || diag "never saw the 'mounted' line"
[ "$running" = running ] || diag "its kvtierfs-bench never ran on the mount"
diag_file "$T/sb2.err" 10

if command -v setpriv >/dev/null; then
	kvt_guard setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$top_srcdir/scripts/bench" --no-fio >"$T/sb3.out" 2>&1
	st=$?
	[ "$st" = 1 ] && grep -q 'must run as root' "$T/sb3.out"
	ok $? "scripts/bench as a user: exit 1, says it needs root (exit $st: $(head -n 1 "$T/sb3.out"))"
else
	skip "scripts/bench as a user says it needs root" "setpriv is missing"
fi

# --- scripts/bench-tar: one round of a small tree ---------------------------
mkdir -p "$T/tree/a/b" "$T/bt" && printf 'one\n' >"$T/tree/a/one.h" &&
	printf 'two\n' >"$T/tree/a/b/two.h" && ln -s ../one.h "$T/tree/a/b/link.h" &&
	chmod 0640 "$T/tree/a/one.h" && touch -d 2001-02-03 "$T/tree/a/b/two.h" ||
	bail "cannot make the tree"
kvt_guard "$top_srcdir/scripts/bench-tar" --rounds 1 --tree "$T/tree" --dir "$T/bt" \
	>"$T/bt.out" 2>"$T/bt.err"
st=$?
[ "$st" = 0 ] && grep -q '^failures: 0$' "$T/bt.out" &&
	grep -Eq '^\| kvtierfs / plain \(target <= 2\) \| [0-9.]+ \([0-9.]+-[0-9.]+\) \|$' "$T/bt.out" &&
	grep -Eq '^\| kvtierfs / passthrough_ll \| [0-9.]+ ' "$T/bt.out" &&
	[ -z "$(ls -A "$T/bt")" ]
ok $? "scripts/bench-tar --rounds 1: exit $st, the tree the same through kvtierfs and passthrough_ll as plain, the ratios, its directory removed"
sed 's/^/#   /' "$T/bt.out"
[ "$st" = 0 ] || diag_file "$T/bt.err" 10

kvt_guard "$top_srcdir/scripts/bench-tar" --tree "$T/no-such-tree" --dir "$T/bt" >"$T/bt2.out" 2>&1
st=$?
[ "$st" = 1 ] && grep -q 'no-such-tree: not a directory' "$T/bt2.out"
ok $? "scripts/bench-tar --tree of a missing directory: exit 1, says so (exit $st)"
