# scripts/bench-lib.sh: what scripts/bench and scripts/bench-life share:
# the work directory, mounting kvtierfs and always unmounting it, medians.
# Sourced; uses $KVTIERFS, $mount_opts and $failures of the caller.

# How the script was called (sourced before it parses its arguments):
# bench_workdir runs it so again, with this bash.
BENCH_ARGV=("$0" "$@")

die() {
	echo "bench: $*" >&2
	exit 1
}

bad_usage() {
	echo "bench: $* (see $0 --help)" >&2
	exit 2
}

# bytes SIZE: SIZE (N, NK, NM) in bytes.
bytes() {
	local n=${1%[KkMm]}
	case $1 in
	*[Kk]) echo $((n << 10)) ;;
	*[Mm]) echo $((n << 20)) ;;
	*) echo "$n" ;;
	esac
}

# human SIZE_BYTES: 2 MiB, 896 KiB, 1000 B.
human() {
	local b=$1
	if [ $((b % (1 << 20))) = 0 ]; then
		echo "$((b >> 20)) MiB"
	elif [ $((b % 1024)) = 0 ]; then
		echo "$((b >> 10)) KiB"
	else
		echo "$b B"
	fi
}

# bench_workdir BASE: a new work directory under BASE ($W, with
# $MNT, $LOG, $RES), removed at exit with whatever is mounted on $MNT.
#
# The benchmark itself then runs in a child: this script again, in a
# session of its own, told the directory by $KVT_BENCH_W; this shell only
# waits for it, and on INT or TERM stops it and everything it started
# (kvtierfs, kvtierfs-bench, fio), unmounts and removes $W.  Bash 5.2
# fails to parse a trap's command when the signal lands while it expands
# a $( ) ("trap: line 2: unexpected EOF while looking for matching `)'"),
# and the script then went on as if nothing came; a shell blocked in
# wait runs its trap cleanly.  So only the child returns from here.
#
# The child and all it starts share one open file of $W/running, locked
# by this shell before the fork: the lock lasts until the last of them
# exits, so the cleanup knows when nothing writes in $W any more (it
# cannot wait for the child's daemon, which is not its own child).
bench_workdir() {
	local base=$1 st lk
	if [ -n "${KVT_BENCH_W:-}" ]; then
		W=$KVT_BENCH_W
		bench_paths
		return 0
	fi
	W=$(mktemp -d "$base/kvtierfs-bench.XXXXXX") || die "cannot create a directory in $base"
	W=$(readlink -f "$W")
	bench_paths
	BENCH_CHILD=
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	mkdir "$MNT" "$RES" || die "cannot create directories in $W"
	: >"$LOG"
	exec {lk}>"$W/running" || die "cannot create $W/running"
	flock "$lk" || die "cannot lock $W/running"
	# Not a process group leader (no job control here): setsid makes
	# the child one without forking, so its pid names its group.
	KVT_BENCH_W=$W KVT_BENCH_LOCK_FD=$lk setsid "$BASH" "${BENCH_ARGV[@]}" &
	BENCH_CHILD=$!
	BENCH_GROUP=$BENCH_CHILD
	exec {lk}>&-
	wait "$BENCH_CHILD"
	st=$?
	BENCH_CHILD=
	exit "$st"
}

# bench_daemon CMD...: run CMD, which leaves a daemon behind (one that
# detaches from the script's process group), without the lock the
# cleanup waits on.
bench_daemon() {
	local lock=${KVT_BENCH_LOCK_FD:-}
	if [ -n "$lock" ]; then
		"$@" {lock}>&-
	else
		"$@"
	fi
}

bench_paths() {
	MNT=$W/mnt
	LOG=$W/kvtierfs.log
	RES=$W/results
	DPID=
}

# mounted PATH: PATH is a mount point (also a dead FUSE mount).
mounted() {
	awk -v p="$1" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# wait_pid PID SECS: wait for our child PID; kill -9 it after SECS.  Its
# exit status, 255 if it had to be killed.  No polling: a watchdog job
# waits in bash's read -t on a pipe nobody writes to, and is killed (-9:
# no trap can take or lose it) when the child ends first.  (A wait for
# one pid is reliable where bash 5.2's "wait -n PID1 PID2" is not: it
# misses a job that ended before it was called and waits for the other.)
wait_pid() {
	local pid=$1 wd st
	(
		exec {fd}<> <(:)
		read -r -t "$2" -u "$fd" _ && exit 0
		kill -KILL "$pid" 2>/dev/null
		exit 1
	) </dev/null >/dev/null 2>&1 &
	wd=$!
	wait "$pid"
	st=$?
	kill -KILL "$wd" 2>/dev/null
	wait "$wd" 2>/dev/null
	[ $? = 1 ] && return 255
	return "$st"
}

cleanup() {
	local st=$?
	trap - EXIT
	trap '' INT TERM
	if [ -n "${BENCH_CHILD:-}" ]; then
		# Interrupted: the child's whole group stops; kvtierfs
		# unmounts on TERM (or below).
		kill -TERM -- "-$BENCH_CHILD" 2>/dev/null || kill -TERM "$BENCH_CHILD" 2>/dev/null
		wait "$BENCH_CHILD" 2>/dev/null
	fi
	if [ -n "${BENCH_GROUP:-}" ] && ! flock -w 20 "$W/running" true; then
		echo "bench: what the benchmark started still runs 20 s after TERM; killing it" >&2
		fusermount3 -u -z "$MNT" 2>/dev/null
		kill -KILL -- "-$BENCH_GROUP" 2>/dev/null
		flock -w 10 "$W/running" true
	fi
	if mounted "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"
	elif [ -n "$DPID" ]; then
		# not mounted (yet): no unmount will end it
		kill -TERM "$DPID" 2>/dev/null
	fi
	if [ -n "$DPID" ]; then
		wait_pid "$DPID" 10
	fi
	# what else a script mounted in $W (scripts/bench-tar's
	# passthrough_ll): its daemon ends with the unmount
	awk -v p="$W/" -v m="$MNT" 'index($5, p) == 1 && $5 != m { print $5 }' /proc/self/mountinfo |
		while read -r m; do fusermount3 -u -z "$m"; done
	if mounted "$MNT"; then
		echo "bench: $MNT is still mounted; $W is left in place" >&2
	else
		rm -rf --one-file-system "$W"
	fi
	exit "$st"
}
# mount_kvtierfs LOWER: mount LOWER on $MNT, wait for "ready <pid>" on a
# pipe.
mount_kvtierfs() {
	local fifo=$W/ready line='' rc
	mkfifo "$fifo" || die "mkfifo $fifo failed"
	echo "=== $(date '+%F %T') mount $1" >>"$LOG"
	"$KVTIERFS" -f -o "ready_fd=3${mount_opts:+,$mount_opts}" "$1" "$MNT" \
		3>"$fifo" </dev/null >>"$LOG" 2>&1 &
	DPID=$!
	IFS= read -r -t 30 line <"$fifo"
	rc=$?
	rm -f "$fifo"
	if [ "$line" != "ready $DPID" ]; then
		[ "$rc" -gt 128 ] && line="no ready line within 30 s"
		echo "bench: kvtierfs did not mount ($KVTIERFS -f -o ready_fd=3${mount_opts:+,$mount_opts} $1 $MNT): ${line:-it exited}; its log:" >&2
		tail -n 20 "$LOG" | sed 's/^/  /' >&2
		exit 1
	fi
	echo "# kvtierfs $DPID mounted $1 on $MNT" >&2
}

# umount_kvtierfs: unmount $MNT, wait for the daemon; complain if it did
# not exit 0.
umount_kvtierfs() {
	local st
	if ! fusermount3 -u "$MNT"; then
		echo "bench: fusermount3 -u $MNT failed; lazy unmount" >&2
		fusermount3 -u -z "$MNT"
	fi
	wait_pid "$DPID" 60
	st=$?
	DPID=
	if [ "$st" != 0 ]; then
		echo "bench: kvtierfs exited with status $st after the unmount; log: " >&2
		tail -n 20 "$LOG" | sed 's/^/  /' >&2
		failures=$((failures + 1))
	fi
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# median FILE: the median of the numbers in FILE ("" if none).
median() {
	[ -s "$1" ] || return 0
	sort -g "$1" | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

