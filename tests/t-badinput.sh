#!/bin/bash
# Bad input gets a clear error and loses nothing: each bad invocation exits
# non-zero with exactly one line on stderr, never reports ready, mounts
# nothing and leaves the lower directory unchanged; a refused option is
# named on that line.  ENOSPC on the lower
# disk fails that store with ENOSPC and publishes nothing.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"

SIZE=$((2 << 20))

kvt_require_root
plan 59
kvt_setup

C="$T/cases"
O="$T/out"
mkdir "$C" "$O"

mounts_under_T() {
	awk -v p="$T/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | LC_ALL=C sort
}

# try_bad DESC DIR ARGS...: run "kvtierfs -f -o ready_fd=3 ARGS...".  It must
# exit non-zero with exactly one line on stderr (holding $WANT_ERR when
# set), never say ready (ready_fd gets EOF), leave DIR unchanged and mount
# nothing.  A daemon that does come up is unmounted at once, so a wrong
# success costs no timeout.
try_bad() {
	local desc=$1 dir=$2 before after mb ma rc rrc n line="" pid why=()
	shift 2
	before=$(kvt_snapshot "$dir")
	mb=$(mounts_under_T)
	rm -f "$O/ready"
	mkfifo "$O/ready"
	"$KVTIERFS" -f -o ready_fd=3 "$@" \
		3>"$O/ready" </dev/null >"$O/stdout" 2>"$O/stderr" &
	pid=$!
	IFS= read -r -t 30 line <"$O/ready"
	rrc=$?
	if [ -n "$line" ]; then
		why+=("it mounted: ready_fd said '$line'")
	elif [ "$rrc" -gt 128 ]; then
		why+=("neither ready nor exited within 30 s")
	fi
	ma=$(mounts_under_T)
	if [ "$mb" != "$ma" ]; then
		why+=("mounts changed: $(diff <(echo "$mb") <(echo "$ma") | grep '^[<>]' | tr '\n' ' ')")
		comm -13 <(echo "$mb") <(echo "$ma") | sort -r | while IFS= read -r m; do
			[ -n "$m" ] && { fusermount3 -u "$m" 2>/dev/null ||
				fusermount3 -u -z "$m" 2>/dev/null; }
		done
	fi
	[ "$rrc" -gt 128 ] && kill -TERM "$pid" 2>/dev/null
	_kvt_wait_pid "$pid" 10
	rc=$?
	[ "$rc" = 0 ] && why+=("exit status 0")
	[ "$rc" = 255 ] && why+=("did not exit (killed)")
	n=$(grep -c '' "$O/stderr")
	[ "$n" = 1 ] || why+=("$n lines on stderr, expected exactly 1")
	[ -z "${WANT_ERR:-}" ] || grep -qF -- "$WANT_ERR" "$O/stderr" ||
		why+=("stderr does not say '$WANT_ERR'")
	after=$(kvt_snapshot "$dir")
	if [ "$before" != "$after" ]; then
		why+=("$dir changed:")
		why+=("$(diff <(echo "$before") <(echo "$after") | head -n 10)")
	fi
	if [ ${#why[@]} -eq 0 ]; then
		ok 0 "$desc: exit $rc, one line on stderr, nothing changed"
		diag "stderr: $(cat "$O/stderr")"
	else
		ok 1 "$desc"
		diag "${why[@]}" "exit status: $rc" "stderr:"
		diag_file "$O/stderr" 10
	fi
}

# --- option and argument errors -------------------------------------------
mkdir "$C/empty"
try_bad "unknown option --no-such-option" "$C" \
	--no-such-option "$C/empty" "$MNT"
try_bad "unknown mount option -o no_such_option=1" "$C" \
	-o no_such_option=1 "$C/empty" "$MNT"
WANT_ERR="-o max_idle_threads:" try_bad "mount option with a bad number -o max_idle_threads=lots" "$C" \
	-o max_idle_threads=lots "$C/empty" "$MNT"
WANT_ERR="-o max_threads:" try_bad "mount option out of range -o max_threads=0" "$C" \
	-o max_threads=0 "$C/empty" "$MNT"
# Counts are decimal digits, seconds may have a fraction; nothing else.
for bad in max_threads=2.5 max_threads= max_threads=1e3 max_threads=-1 \
	max_threads=1025 max_threads max_inodes=99999999999999999999 \
	max_dir_fds=15 max_dir_fds=1048577 entry_timeout=86401 \
	attr_timeout=-0.5 negative_timeout=1e2 verify=sometimes uring=2 sync=1 \
	copy_memory=-1 copy_memory=1048577 copy_memory=auto; do
	WANT_ERR="-o ${bad%%=*}:" try_bad "strict value: -o $bad" "$C" \
		-o "$bad" "$C/empty" "$MNT"
done
# The watermarks: evict_low below evict_high, both given or evict_low by
# default (evict_high alone moves it down, t-evict.sh).
for bad in max_size=1G,evict_high=90,evict_low=90 max_size=1G,evict_low=99 \
	max_size=1G,evict_high=1,evict_low=1; do
	WANT_ERR="-o evict_low=" try_bad "watermarks: -o $bad" "$C" \
		-o "$bad" "$C/empty" "$MNT"
done
WANT_ERR="-o:" try_bad "-o without its list" "$C" \
	"$C/empty" "$MNT" -o
try_bad "a third argument" "$C" \
	"$C/empty" "$MNT" "$C/empty"
try_bad "LOWERDIR does not exist" "$C" \
	"$C/missing" "$MNT"
printf 'not a directory\n' >"$C/lower-file"
try_bad "LOWERDIR is a regular file" "$C" \
	"$C/lower-file" "$MNT"

timeout -k 5 30 "$KVTIERFS" -f "$MNT" </dev/null >/dev/null 2>"$O/stderr"
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ -s "$O/stderr" ] && ! kvt_is_mounted "$MNT"
ok $? "only one argument: exit non-zero ($rc) with a message"
diag_file "$O/stderr" 5

# --- read-only LOWERDIR ---------------------------------------------------
mkdir "$C/ro-src" "$C/ro"
mount --bind "$C/ro-src" "$C/ro" && mount -o remount,bind,ro "$C/ro"
ok $? "bind-mount an empty directory read-only"
try_bad "read-only empty LOWERDIR" "$C" \
	"$C/ro" "$MNT"

# an existing store, then read-only
mkdir "$C/store"
LOWER="$C/store"
kvt_mount
ok_kvclient "make a store with 4 blocks" \
	vllm-store --dir "$MNT" --blocks 4 --size $SIZE --threads 2
kvt_umount
mkdir "$C/store-ro"
mount --bind "$C/store" "$C/store-ro" && mount -o remount,bind,ro "$C/store-ro"
ok $? "bind-mount the store read-only"
try_bad "read-only LOWERDIR holding a store" "$C" \
	"$C/store-ro" "$MNT"

# --- MOUNTPOINT errors ----------------------------------------------------
mkdir "$C/empty2"
printf 'x\n' >"$C/mnt-file"
try_bad "MOUNTPOINT is a regular file" "$C" \
	"$C/empty2" "$C/mnt-file"
try_bad "MOUNTPOINT does not exist" "$C" \
	"$C/empty2" "$C/no-such-mnt"

LOWER="$C/store"
kvt_mount
try_bad "MOUNTPOINT is already mounted (kvtierfs there)" "$C/empty2" \
	"$C/empty2" "$MNT"
ok_kvclient "the existing mount still works: 4 blocks read back" \
	verify --dir "$MNT" --expect 4 --size $SIZE --no-tmp
kvt_umount

# --- a foreign LOWERDIR ---------------------------------------------------
mkdir -p "$C/foreign/sub"
printf 'precious\n' >"$C/foreign/data.txt"
printf 'more\n' >"$C/foreign/sub/other"
try_bad "non-empty LOWERDIR that is not a store" "$C" \
	"$C/foreign" "$MNT"
mkdir -p "$C/nest/lower"
try_bad "LOWERDIR inside MOUNTPOINT" "$C" "$C/nest/lower" "$C/nest"
try_bad "MOUNTPOINT inside LOWERDIR" "$C" "$C/nest" "$C/nest/lower"

# A name that merely begins like the other one is not inside it.
mkdir "$T/pre" "$T/pre.mnt"
kvt_start "$T/pre" "$T/pre.mnt"
kvt_stop "$T/pre.mnt" "$KVT_LAST_PID"

# --- ENOSPC: a 24 MiB tmpfs as LOWERDIR -----------------------------------
mkdir "$T/small"
mount -t tmpfs -o size=24m kvt-enospc "$T/small"
ok $? "mount a 24 MiB tmpfs as LOWERDIR"
LOWER="$T/small"
kvt_mount

enospc_store() { # DESC ARGS...: store until ENOSPC; sets STORED, FAILED
	local desc=$1
	shift
	ok_kvclient "$desc" vllm-store --dir "$MNT" --size $SIZE --threads 1 \
		--blocks 100 --stop-on-enospc "$@"
	STORED=$(sed -n 's/.* stored=\([0-9]*\) .*/\1/p' "$KVT_OUT")
	FAILED=$(sed -n 's/^enospc //p' "$KVT_OUT")
	diag "stored ${STORED:-?} blocks; ENOSPC on ${FAILED#"$MNT"/}"
}
enospc_store "O_DIRECT stores until ENOSPC: the failed block does not appear" --odirect
S1=${STORED:-0}
F1=$FAILED
ok_kvclient "every visible block reads back complete ($S1 blocks)" \
	verify --dir "$MNT" --expect "$S1" --size $SIZE --no-tmp

kvt_run find "$MNT" -name '*.bin' | LC_ALL=C sort | head -n 3 | kvt_run xargs -d '\n' rm -f --
enospc_store "after removing 3 blocks, buffered stores until ENOSPC" \
	--buffered --key-base 5000
S2=${STORED:-0}
F2=$FAILED
ok_kvclient "every visible block reads back complete ($((S1 - 3 + S2)) blocks)" \
	verify --dir "$MNT" --expect $((S1 - 3 + S2)) --size $SIZE --no-tmp
kvt_umount

kvt_mount
ok_kvclient "after remount: the same $((S1 - 3 + S2)) blocks, all complete" \
	verify --dir "$MNT" --expect $((S1 - 3 + S2)) --size $SIZE --no-tmp
[ -n "$F1" ] && [ ! -e "$F1" ] && { [ -z "$F2" ] || [ ! -e "$F2" ]; }
ok $? "after remount the blocks that failed with ENOSPC do not exist"
kvt_umount
