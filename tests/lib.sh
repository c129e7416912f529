# shellcheck shell=bash
#
# tests/lib.sh: harness for the kvtierfs mount tests (TAP).  Sourced by
# tests/t-*.sh:
#
#     . "$(dirname "$0")/lib.sh"
#     plan 5
#     kvt_setup              # $T with $LOWER and $MNT, cleanup on exit
#     kvt_mount              # test point: daemon up, "ready <pid>" seen
#     ok_kvclient "store" vllm-store --dir "$MNT" --blocks 8
#     ...
#     kvt_umount             # test point: clean unmount, exit 0, clean log
#
# TAP helpers: plan N, ok STATUS DESC (STATUS is an exit status: 0 = pass),
# ok_cmd DESC CMD..., ok_kvclient DESC KVCLIENT-ARGS..., skip DESC REASON,
# diag TEXT..., bail TEXT.  kvt_mount, kvt_umount, kvt_kill9 and kvt_start /
# kvt_stop each print one test point, count them in the plan.
#
# Environment: top_builddir, top_srcdir (default: derived from this file),
# KVTIERFS (default $top_builddir/src/kvtierfs), KVCLIENT (default
# $top_builddir/tests/kvclient), KVT_XXH128 (default
# $top_builddir/tests/xxh128: XXH3-128 of files, printed like xxh128sum),
# TMPDIR, KVT_KEEP=1 keeps $T for debugging, KVT_LOG_TAIL (80: lines of
# the daemons' log shown when a point failed),
# KVT_MOUNT_TIMEOUT (30 s), KVT_UMOUNT_TIMEOUT (60 s), KVT_CMD_TIMEOUT
# (150 s: a command of ok_cmd/ok_kvclient/kvt_guard that takes longer means
# the daemon hangs: its stacks are shown, it is killed and the file bails out).
#
# The runner (tests/run) runs each test file under timeout(1); the EXIT
# trap here always unmounts, stops the daemons this file started and removes
# $T, whatever way the file ends (end of script, bail, TERM from timeout).

set -u
set -o pipefail

KVT_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${top_srcdir:=$(cd "$KVT_LIB_DIR/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${KVTIERFS:=$top_builddir/src/kvtierfs}"
: "${KVCLIENT:=$top_builddir/tests/kvclient}"
: "${KVT_XXH128:=$top_builddir/tests/xxh128}"
: "${KVT_MOUNT_TIMEOUT:=30}"
: "${KVT_UMOUNT_TIMEOUT:=60}"
: "${KVT_CMD_TIMEOUT:=150}"
export top_srcdir top_builddir KVTIERFS KVCLIENT KVT_XXH128

T=
LOWER=
MNT=
KVT_PID=            # daemon of the main mount ($LOWER on $MNT)
KVT_LAST_PID=       # daemon started by the last kvt_start
declare -A KVT_DAEMONS=()   # pid -> mountpoint, every daemon still running
declare -A KVT_LOGOFF=()    # pid -> daemon.log offset when it started
KVT_BG=()                   # other background pids to kill at exit (kvt_bg)
KVT_CLEANUP_HOOKS=()        # functions kvt_cleanup runs after the unmounts
                            # (tests/powercut.sh: its loop devices)
_kvt_n=0
_kvt_failed=0
_kvt_plan=
_kvt_lowers=0
_kvt_main_pid=$BASHPID
_kvt_out=1
_kvt_err=2

# ---------------------------------------------------------------- TAP

plan() {
	_kvt_plan=$1
	echo "1..$1"
}

# diag TEXT...: print each TEXT argument (may span lines) as TAP comments.
diag() {
	local line
	printf '%s\n' "$@" | while IFS= read -r line; do
		printf '# %s\n' "$line"
	done
}

# diag_file FILE [MAXLINES]: the last MAXLINES (default 60) lines of FILE.
diag_file() {
	local f=$1 max=${2:-60} n
	[ -s "$f" ] || return 0
	n=$(wc -l <"$f")
	if [ "$n" -gt "$max" ]; then
		diag "... ($((n - max)) earlier lines of $(basename "$f") not shown)"
	fi
	tail -n "$max" "$f" | sed 's/^/#   /'
}

# ok STATUS DESC...: one test point; STATUS is an exit status (0 = pass).
# Returns 0 on pass, 1 on failure.  If a command run by kvt_run/kvt_guard
# (also in a $(...) subshell) found the daemon hung, the hang report is
# shown and the file bails out after this test point.
ok() {
	_kvt_ok "$@"
	local st=$?
	_kvt_check_hung
	return "$st"
}

_kvt_ok() {
	local st=$1
	shift
	_kvt_n=$((_kvt_n + 1))
	if [ "$st" = 0 ]; then
		echo "ok $_kvt_n - $*"
		return 0
	fi
	echo "not ok $_kvt_n - $*"
	_kvt_failed=$((_kvt_failed + 1))
	return 1
}

skip() {
	_kvt_n=$((_kvt_n + 1))
	echo "ok $_kvt_n - $1 # SKIP ${2:-}"
}

# kvt_sanitizer: why the daemon's RSS says nothing of kvtierfs's memory
# (a sanitizer's shadow memory and quarantine), or nothing.
kvt_sanitizer() {
	grep -qa __asan_init "$KVTIERFS" && echo "AddressSanitizer build"
}

bail() {
	echo "Bail out! $*"
	exit 1
}

# _kvt_tmpfile: a scratch file under $T (or /tmp before kvt_setup).
_kvt_tmpfile() {
	mktemp "${T:-${TMPDIR:-/tmp}}/out.XXXXXX"
}

# kvt_guard CMD...: run CMD (with the caller's redirections) as a background
# job and wait for it.  If it has not finished after $KVT_CMD_TIMEOUT s the
# daemon is taken to hang (a FLUSH the daemon never answers leaves close()
# in an uninterruptible sleep; no signal ends it): the kernel stacks of CMD
# and the daemon's thread backtraces go to $T/.hang, every daemon of this
# file is killed (which aborts the FUSE connection, so CMD returns), the
# flag file $T/.hung makes the next test point bail out (_kvt_check_hung),
# and the status is 254.
kvt_guard() {
	local pid wd
	"$@" {_kvt_out}>&- {_kvt_err}>&- &
	pid=$!
	_kvt_after "$KVT_CMD_TIMEOUT" _kvt_hung "$pid" "$*"
	wd=$!
	wait "$pid"
	local st=$?
	_kvt_after_cancel "$wd" || return "$st"
	# The watchdog found it hung and killed the daemons (in its own
	# shell): forget them here too.
	_kvt_kill_daemons
	return 254
}

# _kvt_hung PID CMDLINE: the report of kvt_guard's command PID still
# running, then every daemon killed (so that PID returns).
_kvt_hung() {
	kill -0 "$1" 2>/dev/null || return 0
	_kvt_hang_report "$1" "$2" >"$T/.hang" 2>&1
	: >"$T/.hung"
	_kvt_kill_daemons
	_kvt_wait_pid "$1" 30
}

# _kvt_after SECONDS CMD...: a background job (its pid in $!) that runs
# CMD after SECONDS unless it is killed first (_kvt_after_cancel); its
# exit status is 1 if CMD ran.  It waits in bash's own read -t on a pipe
# nobody writes to: no child to outlive it, and SIGKILL, which no trap
# can take or lose, ends it.  (A wait for one pid is reliable where bash
# 5.2's "wait -n PID1 PID2" is not: it does not see a job that ended
# before it was called, and waits for the other one.)
_kvt_after() {
	local secs=$1
	shift
	(
		exec {fd}<> <(:)
		read -r -t "$secs" -u "$fd" _ && exit 0
		"$@"
		exit 1
	) </dev/null >/dev/null 2>&1 {_kvt_out}>&- {_kvt_err}>&- &
}

# _kvt_after_cancel PID: ends the _kvt_after job PID; true if its CMD ran.
_kvt_after_cancel() {
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	[ $? = 1 ]
}

# _kvt_hang_report PID CMDLINE: what PID and the daemons are blocked on.
_kvt_hang_report() {
	local pid=$1 d t
	echo "no answer after ${KVT_CMD_TIMEOUT}s: $2"
	echo "blocked threads of the command (kernel stacks):"
	for t in /proc/"$pid"/task/* $(pgrep -P "$pid" | sed 's|^|/proc/|; s|$|/task/*|'); do
		[ -r "$t/stack" ] || continue
		echo "$(cat "$t/comm" 2>/dev/null) ($(awk '{ print $3 }' "$t/stat" 2>/dev/null)):" \
			"$(head -n 6 "$t/stack" 2>/dev/null | awk '{ print $2 }' | tr '\n' ' ')"
	done | sort | uniq -c | head -n 20
	for d in "${!KVT_DAEMONS[@]}"; do
		echo "daemon $d (${KVT_DAEMONS[$d]}) threads:"
		if command -v gdb >/dev/null; then
			timeout 60 gdb -p "$d" -batch -ex 'set pagination off' \
				-ex 'thread apply all bt 12' 2>/dev/null | _kvt_bt_summary
		else
			for t in /proc/"$d"/task/*; do
				echo "  $(basename "$t") $(cat "$t/wchan" 2>/dev/null)"
			done | sort -k2 | uniq -c -f1
		fi
	done
}

# _kvt_bt_summary: gdb "thread apply all bt" -> one line per distinct stack
# (the daemon's own frames, innermost first) with the number of threads.
_kvt_bt_summary() {
	awk '
	function flush() { if (n) { if (sig == "") sig = first; cnt[sig]++ } sig = ""; first = ""; n = 0 }
	/^Thread / { flush(); next }
	/^#[0-9]/ {
		l = $0; sub(/^#[0-9]+ +/, "", l); sub(/^0x[0-9a-f]+ in /, "", l)
		fn = l; sub(/ \(.*/, "", fn)
		loc = ""
		if (match(l, / at [^ ]+$/)) loc = substr(l, RSTART + 4)
		n++
		if (n == 1) first = fn
		if (loc ~ /^src\//) sig = sig (sig == "" ? "" : " <- ") fn " (" loc ")"
	}
	END { flush(); for (s in cnt) printf "  %3d thread(s): %s\n", cnt[s], s }' |
		sort -rn
}

# _kvt_kill_daemons: kill -9 every daemon of this file, clean their mounts.
_kvt_kill_daemons() {
	local d
	for d in "${!KVT_DAEMONS[@]}"; do
		# A daemon thread blocked in the kernel on its own mount (a
		# deadlock) cannot die, and its clients wait in D state: abort
		# the connection first, then the kill ends it.
		kvt_abort_conn "${KVT_DAEMONS[$d]}"
		kill -KILL "$d" 2>/dev/null
		_kvt_wait_pid "$d" 30
		fusermount3 -u -z "${KVT_DAEMONS[$d]}" 2>/dev/null
		unset "KVT_DAEMONS[$d]"
	done
	KVT_PID=
}

# kvt_abort_conn MOUNTPOINT: abort the FUSE connection of MOUNTPOINT
# (fusectl), so that every request on it fails at once.
kvt_abort_conn() {
	local dev c=/sys/fs/fuse/connections mounted=0
	dev=$(awk -v p="$1" '$5 == p { print $3 }' /proc/self/mountinfo | tail -n 1)
	[ -n "$dev" ] || return 0
	if ! awk -v c="$c" '$5 == c { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		mount -t fusectl none "$c" 2>/dev/null || return 0
		mounted=1
	fi
	[ -w "$c/${dev#*:}/abort" ] && echo 1 >"$c/${dev#*:}/abort"
	# leave the machine as it was found
	[ "$mounted" = 0 ] || umount "$c" 2>/dev/null
	return 0
}

# _kvt_check_hung: if a command found the daemon hung (flag file, so that
# it works from subshells too): show the report and bail out, the mount is
# gone and the rest of the file cannot run.
_kvt_check_hung() {
	[ -n "$T" ] && [ -e "$T/.hung" ] || return 0
	rm -f "$T/.hung"
	diag_file "$T/.hang" 200
	bail "kvtierfs hung: $(head -n 1 "$T/.hang")"
}

# kvt_run CMD...: run a command that touches the mount under the hang guard
# (see kvt_guard); its status.  Use it for every command on the mount.
kvt_run() {
	kvt_guard "$@"
}

# ok_cmd DESC CMD...: run CMD, pass if it exits 0; on failure show the
# command, its status and its output.
ok_cmd() {
	local desc=$1 out st
	shift
	out=$(_kvt_tmpfile)
	kvt_guard "$@" >"$out" 2>&1
	st=$?
	if _kvt_ok "$st" "$desc"; then
		rm -f "$out"
		_kvt_check_hung
		return 0
	fi
	diag "command: $*" "exit status: $st"
	diag_file "$out"
	rm -f "$out"
	_kvt_check_hung
	return 1
}

# ok_kvclient DESC ARGS...: run $KVCLIENT ARGS; pass on exit 0.  Its summary
# lines are always shown; stderr (the failure details) on failure.
# Its stdout is kept in $KVT_OUT for the caller to inspect.
KVT_OUT=
ok_kvclient() {
	local desc=$1 err st
	shift
	[ -n "$KVT_OUT" ] && rm -f "$KVT_OUT"
	KVT_OUT=$(_kvt_tmpfile)
	err=$(_kvt_tmpfile)
	kvt_guard "$KVCLIENT" "$@" >"$KVT_OUT" 2>"$err"
	st=$?
	if _kvt_ok "$st" "$desc"; then
		grep -v '^progress ' "$KVT_OUT" | sed 's/^/#   /'
		rm -f "$err"
		_kvt_check_hung
		return 0
	fi
	diag "command: kvclient $*" "exit status: $st"
	grep -v '^progress ' "$KVT_OUT" | sed 's/^/#   /'
	diag_file "$err" 40
	rm -f "$err"
	_kvt_check_hung
	return 1
}

# ---------------------------------------------------------------- mounts

# kvt_is_mounted PATH: PATH is a mount point now (works on dead FUSE mounts,
# which stat(2) cannot look at).
kvt_is_mounted() {
	awk -v p="$1" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# kvt_fstype PATH: filesystem type of the mount at PATH.
kvt_fstype() {
	awk -v p="$1" '$5 == p { for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break } } END { print t }' \
		/proc/self/mountinfo
}

# _kvt_wait_pid PID SECONDS: wait for our child PID to exit; kill -9 it after
# SECONDS.  Returns its exit status, or 255 if it had to be killed.  (A
# watchdog job, _kvt_after: no polling.)
_kvt_wait_pid() {
	local pid=$1 wd st
	_kvt_after "$2" kill -KILL "$pid"
	wd=$!
	wait "$pid" 2>/dev/null
	st=$?
	_kvt_after_cancel "$wd" && return 255
	[ "$st" = 127 ] && return 0 # not our child (or already waited for)
	return "$st"
}

# kvt_start LOWERDIR MOUNTPOINT [OPT...]: start the daemon in the
# foreground (as a background job) with -o ready_fd=3[,OPT...], wait for
# "ready <pid>" on a pipe (no polling) and check the mount is there.
# One test point.  Sets KVT_LAST_PID.  Bails out if the mount fails.
kvt_start() {
	local lower=$1 mnt=$2 opts=ready_fd=3 o line="" rc pid fifo why=""
	shift 2
	for o in "$@"; do
		opts="$opts,$o"
	done
	fifo="$T/.ready.fifo"
	rm -f "$fifo"
	mkfifo "$fifo" || bail "mkfifo $fifo failed"
	echo "=== $(date '+%F %T') start: $KVTIERFS -f -o $opts $lower $mnt" \
		>>"$T/daemon.log"
	local off
	off=$(stat -c %s "$T/daemon.log")
	"$KVTIERFS" -f -o "$opts" "$lower" "$mnt" 3>"$fifo" \
		</dev/null >>"$T/daemon.log" 2>&1 {_kvt_out}>&- {_kvt_err}>&- &
	pid=$!
	KVT_DAEMONS[$pid]=$mnt
	KVT_LOGOFF[$pid]=$off
	# The open blocks until the daemon side has opened its end; read gets
	# the line, or EOF when the daemon exits without writing it.
	IFS= read -r -t "$KVT_MOUNT_TIMEOUT" line <"$fifo"
	rc=$?
	rm -f "$fifo"
	if [ "$line" != "ready $pid" ]; then
		if [ -n "$line" ]; then
			why="expected 'ready $pid' on ready_fd, got '$line'"
		elif [ "$rc" -gt 128 ]; then
			why="no ready line within ${KVT_MOUNT_TIMEOUT}s"
		else
			why="ready_fd closed without a ready line (EOF)"
		fi
	elif ! kvt_is_mounted "$mnt"; then
		why="daemon said ready but $mnt is not a mount point"
	elif [[ "$(kvt_fstype "$mnt")" != fuse* ]]; then
		why="$mnt is mounted as '$(kvt_fstype "$mnt")', not fuse"
	fi
	if [ -z "$why" ]; then
		KVT_LAST_PID=$pid
		_kvt_ok 0 "mount $(basename "$lower") on $(basename "$mnt") (-o $opts): ready $pid"
		return 0
	fi
	_kvt_ok 1 "mount $(basename "$lower") on $(basename "$mnt") (-o $opts)"
	diag "$why"
	if kill -0 "$pid" 2>/dev/null; then
		if kvt_is_mounted "$mnt"; then
			fusermount3 -u "$mnt" 2>/dev/null ||
				fusermount3 -u -z "$mnt" 2>/dev/null
		else
			kill -TERM "$pid" 2>/dev/null
		fi
		_kvt_wait_pid "$pid" 10
		rc=$?
	else
		wait "$pid" 2>/dev/null
		rc=$?
	fi
	unset "KVT_DAEMONS[$pid]"
	diag "daemon exit status: $rc; its log:"
	tail -c +"$((off + 1))" "$T/daemon.log" >"$T/.log.part"
	diag_file "$T/.log.part" 80
	bail "cannot mount kvtierfs"
}

# The log patterns that fail a test (sanitizers, assertions, errors).
KVT_LOG_BAD='AddressSanitizer|UndefinedBehaviorSanitizer|runtime error|LeakSanitizer|ERROR|assert'

# kvt_stop MOUNTPOINT PID: fusermount3 -u, wait for the daemon (timeout),
# check it exited 0 and its log has no sanitizer/assert/ERROR line.
# One test point.
kvt_stop() {
	local mnt=$1 pid=$2 st why=() off
	off=${KVT_LOGOFF[$pid]:-0}
	if ! fusermount3 -u "$mnt" 2>"$T/.umount.err"; then
		why+=("fusermount3 -u $mnt failed: $(head -n 3 "$T/.umount.err")")
		fusermount3 -u -z "$mnt" 2>/dev/null
	fi
	_kvt_wait_pid "$pid" "$KVT_UMOUNT_TIMEOUT"
	st=$?
	unset "KVT_DAEMONS[$pid]"
	if [ "$st" = 255 ]; then
		why+=("daemon did not exit within ${KVT_UMOUNT_TIMEOUT}s of the unmount (killed)")
	elif [ "$st" != 0 ]; then
		why+=("daemon exited with status $st after the unmount")
	fi
	if kvt_is_mounted "$mnt"; then
		why+=("$mnt is still mounted")
		fusermount3 -u -z "$mnt" 2>/dev/null
	fi
	tail -c +"$((off + 1))" "$T/daemon.log" >"$T/.log.part"
	if grep -Eq "$KVT_LOG_BAD" "$T/.log.part"; then
		why+=("daemon log has lines matching $KVT_LOG_BAD:")
	fi
	if [ ${#why[@]} -eq 0 ]; then
		_kvt_ok 0 "unmount $(basename "$mnt"): daemon $pid exited 0, log clean"
		return 0
	fi
	_kvt_ok 1 "unmount $(basename "$mnt"): daemon $pid exited 0, log clean"
	diag "${why[@]}"
	if grep -Eq "$KVT_LOG_BAD" "$T/.log.part"; then
		grep -E -m 20 "$KVT_LOG_BAD" "$T/.log.part" | sed 's/^/#   /'
		diag "full log of this daemon:"
	fi
	diag_file "$T/.log.part" 80
	return 1
}

# kvt_mount [OPT...]: mount $LOWER on $MNT (see kvt_start); sets KVT_PID.
kvt_mount() {
	[ -z "$KVT_PID" ] || bail "kvt_mount: $MNT is already mounted by $KVT_PID"
	kvt_start "$LOWER" "$MNT" "$@"
	KVT_PID=$KVT_LAST_PID
}

# kvt_umount: unmount $MNT (see kvt_stop).
kvt_umount() {
	[ -n "$KVT_PID" ] || bail "kvt_umount: nothing mounted"
	local pid=$KVT_PID
	KVT_PID=
	kvt_stop "$MNT" "$pid"
}

# kvt_kill9 [CMD...]: kill -9 the daemon of $MNT, run CMD if given (once
# the daemon is dead and the mount's calls fail, before the mountpoint is
# bare again: e.g. let a client see its calls fail, kvt_client_drain), then
# clean the dead mount with fusermount3 -u -z.  One test point.
kvt_kill9() {
	[ -n "$KVT_PID" ] || bail "kvt_kill9: nothing mounted"
	local pid=$KVT_PID st why=()
	KVT_PID=
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	st=$?
	unset "KVT_DAEMONS[$pid]"
	[ $# -eq 0 ] || "$@"
	[ "$st" = 137 ] || why+=("daemon exit status $st, expected 137 (SIGKILL)")
	if ! fusermount3 -u -z "$MNT" 2>"$T/.umount.err"; then
		why+=("fusermount3 -u -z failed: $(head -n 3 "$T/.umount.err")")
	fi
	if kvt_is_mounted "$MNT"; then
		why+=("$MNT still mounted after fusermount3 -u -z")
	fi
	if [ ${#why[@]} -eq 0 ]; then
		_kvt_ok 0 "kill -9 daemon $pid and clean the dead mount"
		return 0
	fi
	_kvt_ok 1 "kill -9 daemon $pid and clean the dead mount"
	diag "${why[@]}"
	return 1
}

# ---------------------------------------------------------------- setup

# kvt_two_hosts STORE1 STORE2 [OPTION...]: one store seen through two
# client mounts of a shared file system (STORE2 is STORE1 through the
# other), made, and a kvtierfs mount on each host, with the OPTIONs: $K1
# (pid $P1) and $K2 (pid $P2).  Two test points.
kvt_two_hosts() {
	mkdir "$1" "$T/k1" "$T/k2" || bail "mkdir failed"
	K1=$T/k1
	K2=$T/k2
	kvt_start "$1" "$K1" "${@:3}"
	P1=$KVT_LAST_PID
	kvt_start "$2" "$K2" "${@:3}"
	P2=$KVT_LAST_PID
}

# kvt_within SECONDS CMD...: CMD succeeds within SECONDS (tried every
# 0.1 s); $took is the time it took (">SECONDS" when it did not).  Status
# 2 when SECONDS is not a number.
kvt_within() {
	local limit=$1 t0=$EPOCHREALTIME
	shift
	took=
	_kvt_nums "kvt_within $limit" "$limit" || return 2
	while :; do
		if "$@"; then
			took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
			return 0
		fi
		awk -v a="$t0" -v b="$EPOCHREALTIME" -v l="$limit" 'BEGIN { exit !(b - a > l) }' &&
			{ took=">$limit"; return 1; }
		sleep 0.1
	done
}

# kvt_bg PID: kill PID at exit if it still runs (e.g. a client started in a
# process substitution, which jobs -p does not list).
kvt_bg() {
	KVT_BG+=("$1")
}

# kvt_new_lower: switch $LOWER to a new empty directory under $T.
kvt_new_lower() {
	_kvt_lowers=$((_kvt_lowers + 1))
	LOWER="$T/lower$_kvt_lowers"
	mkdir "$LOWER" || bail "mkdir $LOWER failed"
}

# kvt_require_root: skip the whole file when not root.
kvt_require_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "1..0 # SKIP needs root (mount)"
		exit 0
	fi
}

# kvt_setup: $T (temp dir) with $LOWER (empty) and $MNT; EXIT trap cleans.
kvt_setup() {
	[ -c /dev/fuse ] || { echo "1..0 # SKIP /dev/fuse is missing"; exit 0; }
	command -v fusermount3 >/dev/null ||
		{ echo "1..0 # SKIP fusermount3 is missing"; exit 0; }
	[ -x "$KVTIERFS" ] || bail "kvtierfs is not built: $KVTIERFS"
	[ -x "$KVCLIENT" ] || bail "kvclient is not built: $KVCLIENT (make check, or gcc -O2 -pthread -o tests/kvclient tests/kvclient-src/*.c)"
	[ -x "$KVT_XXH128" ] || bail "xxh128 is not built: $KVT_XXH128 (make check)"
	T=$(mktemp -d "${TMPDIR:-/tmp}/kvtierfs-test.XXXXXX") || bail "mktemp failed"
	_kvt_main_pid=$BASHPID
	# the TAP stream, for the exit trap: a signal may arrive while a
	# command's output is redirected to a file
	exec {_kvt_out}>&1 {_kvt_err}>&2
	trap _kvt_exit EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
	LOWER="$T/lower"
	MNT="$T/mnt"
	mkdir "$LOWER" "$MNT" || bail "mkdir failed"
	: >"$T/daemon.log"
}

# Unmount everything under $T, stop our daemons and other background jobs,
# remove $T.
kvt_cleanup() {
	local pid m j aborted=${1:-0}
	[ -n "$T" ] || return 0
	# killed by the runner's timeout: the daemon may hang, do not wait
	[ "$aborted" = 1 ] && _kvt_kill_daemons
	# background jobs of this shell other than daemons (clients) first
	for j in "${KVT_BG[@]}" $(jobs -p); do
		[ -n "${KVT_DAEMONS[$j]+x}" ] && continue
		kill -KILL "$j" 2>/dev/null
	done
	for pid in "${!KVT_DAEMONS[@]}"; do
		m=${KVT_DAEMONS[$pid]}
		if kvt_is_mounted "$m"; then
			fusermount3 -u "$m" 2>/dev/null ||
				fusermount3 -u -z "$m" 2>/dev/null
		fi
		_kvt_wait_pid "$pid" 10
		unset "KVT_DAEMONS[$pid]"
	done
	wait 2>/dev/null
	# whatever is still mounted under $T, deepest first
	awk -v p="$T/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while IFS= read -r m; do
			case "$(kvt_fstype "$m")" in
			fuse*) fusermount3 -u -z "$m" 2>/dev/null ;;
			*) umount -l "$m" 2>/dev/null ;;
			esac
		done
	for m in "${KVT_CLEANUP_HOOKS[@]}"; do
		"$m"
	done
	# A failure in CI is known by its output alone: what the daemons said
	# last (their exit lines come after the unmounts above).
	if [ "$aborted" = 1 ] || [ "$_kvt_failed" -gt 0 ]; then
		diag "the daemons' log, its last lines ($T/daemon.log):"
		diag_file "$T/daemon.log" "${KVT_LOG_TAIL:-80}"
	fi
	if awk -v p="$T/" 'index($5, p) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		echo "# cleanup: mounts left under $T, not removing it"
		return 0
	fi
	if [ "${KVT_KEEP:-0}" = 1 ]; then
		echo "# KVT_KEEP=1: kept $T"
		return 0
	fi
	rm -rf --one-file-system "$T"
}

_kvt_exit() {
	local rc=$?
	# a subshell that inherited the trap (bash does so once a subshell
	# sets a trap of its own) must not clean up the test's directory
	[ "$BASHPID" = "$_kvt_main_pid" ] || return 0
	trap - EXIT
	trap '' HUP INT TERM
	exec 1>&"$_kvt_out" 2>&"$_kvt_err"
	if [ "$rc" -ge 128 ]; then
		echo "# aborted by signal $((rc - 128)): killing the daemons"
		kvt_cleanup 1
	else
		kvt_cleanup 0
	fi
	if [ -n "$_kvt_plan" ] && [ "$_kvt_n" != "$_kvt_plan" ]; then
		echo "# planned $_kvt_plan tests but ran $_kvt_n"
		rc=1
	fi
	if [ "$_kvt_failed" -gt 0 ]; then
		echo "# failed $_kvt_failed of $_kvt_n tests"
		rc=1
	fi
	exit "$rc"
}

# ---------------------------------------------------------------- helpers

# kvt_hold_writer FILE BYTES: a process that creates FILE, writes BYTES
# bytes and keeps it open (a writer that never closed); returns once the
# bytes are written (it says so on a pipe), with the writer's pid in
# KVT_HOLDER (killed at exit).  Fails if the writer did not get there.
kvt_hold_writer() {
	local fifo=$T/.hold.fifo line
	rm -f "$fifo"
	mkfifo "$fifo" || return 1
	python3 -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"w" * int(sys.argv[2]))
print("written", flush=True)
time.sleep(300)' "$1" "$2" >"$fifo" 2>>"$T/holder.err" &
	KVT_HOLDER=$!
	kvt_bg "$KVT_HOLDER"
	IFS= read -r -t 30 line <"$fifo"
	rm -f "$fifo"
	[ "$line" = written ]
}

# kvt_make_users USER...: unprivileged users (their own group, no home),
# made when absent and left in place for later runs; bail if one cannot.
kvt_make_users() {
	local u
	for u in "$@"; do
		id -u "$u" >/dev/null 2>&1 || useradd -M -U -s /usr/sbin/nologin "$u" 2>/dev/null
		id -u "$u" >/dev/null 2>&1 || bail "cannot make user $u"
	done
}

# kvt_as USER CMD...: CMD as USER (his gid and groups), in $MNT, under the
# hang guard.  The directories above $T are tests/run's, 0700: such a
# user names his paths from $MNT (../in/a), and $T must be 0755.
kvt_as() {
	local u=$1
	shift
	(cd "$MNT" && kvt_run setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@")
}

# kvt_wait_log REGEX [N [OFFSET]]: until the daemon's log, from byte OFFSET
# (0) on, has N (1) lines matching the extended REGEX, 30 s at most:
# follows the log as it grows, a line at a time (no polling); status 1
# when it times out.
kvt_wait_log() {
	local fd pid line k=0
	exec {fd}< <(exec timeout 30 tail -c +$((${3:-0} + 1)) -F "$T/daemon.log" 2>/dev/null)
	pid=$!
	while [ "$k" -lt "${2:-1}" ] && IFS= read -r line <&"$fd"; do
		[[ $line =~ $1 ]] && k=$((k + 1))
	done
	kill "$pid" 2>/dev/null
	exec {fd}<&-
	# Gone before we go on: it holds copies of the caller's descriptors
	# (files open on a mount that is unmounted next).
	wait "$pid" 2>/dev/null
	[ "$k" -ge "${2:-1}" ]
}

# kvt_flip_bit FILE OFFSET: flips the low bit of FILE's byte at OFFSET on
# the lower disk, its times put back, as bit rot does (a second flip puts
# it back).  Its ctime moves all the same.
kvt_flip_bit() {
	/usr/bin/python3 - "$1" "$2" <<-'PY'
		import os, sys
		path, off = sys.argv[1], int(sys.argv[2])
		st = os.stat(path)
		with open(path, "r+b") as f:
		    f.seek(off)
		    c = f.read(1)
		    f.seek(off)
		    f.write(bytes([c[0] ^ 1]))
		os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
	PY
}

# kvt_drop_caches [--no-sync]: the kernel lets go of clean pages, dentries
# and inodes, as a host's kernel does when it needs the memory: the next
# access looks the name up and reads the bytes from below.  The sync
# first makes dirty pages clean; --no-sync skips it where it would wait
# on every other mount of the machine.
kvt_drop_caches() {
	[ "${1:-}" = --no-sync ] || sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null ||
		diag "cannot write /proc/sys/vm/drop_caches"
}

# ---------------------------------------------------------------- numbers
# Measured numbers are compared and computed with these functions, not
# with awk or bash's arithmetic, which take an empty or non-numeric value
# for 0: awk's "n < 300", or $((b - a)) == 0, passes when the command that
# was to print n printed nothing.  (test(1)'s -lt and the like fail on
# such a value; they may stay where no negation turns that around.)
# These refuse such an operand: a line "# NAME: ... is not a number" on
# stderr (the TAP stream of tests/run) and status 2, a failure like 1.
# Never negate them (! kvt_num_cmp ...): a refused operand would pass;
# use the opposite operator.

# kvt_is_num VALUE: VALUE is a decimal number (sign, digits, a fraction,
# an exponent: what awk and printf read alike); silent.
kvt_is_num() {
	[[ ${1-} =~ ^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]]
}

# _kvt_nums WHO VALUE...: every VALUE is a number, or a line on stderr
# naming the first that is not, and status 2.
_kvt_nums() {
	local who=$1 v
	shift
	for v in "$@"; do
		kvt_is_num "$v" && continue
		if [ -z "$v" ]; then
			echo "# $who: an operand is empty, not a number" >&2
		else
			echo "# $who: '$v' is not a number" >&2
		fi
		return 2
	done
}

# kvt_num_cmp A OP B: A OP B for numbers (integers or not), OP one of
# test(1)'s -lt -le -gt -ge -eq -ne; status 2 (and a line on stderr)
# when A or B is not a number or OP is unknown.
kvt_num_cmp() {
	local op
	_kvt_nums "kvt_num_cmp ${1-} ${2-} ${3-}" "${1-}" "${3-}" || return 2
	case ${2-} in
	-lt) op='<' ;;
	-le) op='<=' ;;
	-gt) op='>' ;;
	-ge) op='>=' ;;
	-eq) op='==' ;;
	-ne) op='!=' ;;
	*)
		echo "# kvt_num_cmp: unknown operator '${2-}' (${1-} ${2-} ${3-})" >&2
		return 2
		;;
	esac
	awk -v a="$1" -v b="$3" "BEGIN { exit !(a + 0 $op b + 0) }"
}

# kvt_calc EXPR NAME=VALUE...: prints the value of the awk expression EXPR
# over the numbers NAME (an integer as one, else 9 decimals at most), as
# bc would; prints nothing and returns 2 when a VALUE is not a number or
# the result is none (a division by zero).
#     secs=$(kvt_calc 'b - a' a="$t0" b="$t1")
kvt_calc() {
	local expr=$1 a vars=() vals=() r
	shift
	for a in "$@"; do
		vars+=(-v "$a")
		vals+=("${a#*=}")
	done
	_kvt_nums "kvt_calc $expr ($*)" "${vals[@]}" || return 2
	r=$(awk "${vars[@]}" 'BEGIN { r = ('"$expr"')
		if (r == int(r) && r > -2^53 && r < 2^53) { printf "%.0f\n", r; exit }
		s = sprintf("%.9f", r); sub(/0+$/, "", s); sub(/\.$/, "", s); print s }') &&
		_kvt_nums "kvt_calc $expr ($*): the result" "$r" || return 2
	echo "$r"
}

# kvt_ratio_at_most NUM DEN LIMIT: prints NUM / DEN (two decimals);
# whether it is at most LIMIT.  Status 2, nothing printed, when one is not
# a number or DEN is 0.
kvt_ratio_at_most() {
	_kvt_nums "kvt_ratio_at_most ${1-} ${2-} ${3-}" "${1-}" "${2-}" "${3-}" || return 2
	if kvt_num_cmp "$2" -eq 0; then
		echo "# kvt_ratio_at_most: $1 over 0 is no ratio" >&2
		return 2
	fi
	awk -v n="$1" -v d="$2" -v l="$3" 'BEGIN { r = n / d; printf "%.2f", r; exit !(r <= l) }'
}

# kvt_fault_counts: "FAULTS CALLS" summed over the KVT_FAULTS rules, from
# the line per rule the daemon logged at exit ($T/.log.part: the last
# daemon's log); nothing if it logged none.
kvt_fault_counts() {
	sed -n 's/^kvtierfs: fault injection: .*: \([0-9]*\) faults in \([0-9]*\) calls$/\1 \2/p' \
		"$T/.log.part" | awk '{ f += $1; c += $2; n++ } END { if (n) print f, c }'
}

# kvt_xattr FILE NAME: the value of xattr NAME of FILE (text), or nothing.
kvt_xattr() {
	kvt_guard getfattr --absolute-names --only-values -n "$2" "$1" 2>/dev/null
}

# kvt_stat MNT NAME: the counter NAME of the mount on MNT
# (user.kvtierfs.stats), or nothing.
kvt_stat() {
	kvt_xattr "$1" user.kvtierfs.stats | awk -v n="$2" '$1 == n { print $2 }'
}

# kvt_mattr MNT KEY: the line KEY of the mount's own attribute
# (user.kvtierfs.mount: its budget, usage and evictor), or nothing.
kvt_mattr() {
	kvt_xattr "$1" user.kvtierfs.mount | awk -v k="$2" '$1 == k { print $2 }'
}

# kvt_xattr_hex FILE NAME: the value of xattr NAME of FILE as 0x<hex>, or
# nothing.  (getfattr --only-values ignores -e hex and prints raw bytes.)
kvt_xattr_hex() {
	kvt_guard getfattr --absolute-names -e hex -n "$2" "$1" 2>/dev/null |
		sed -n "s/^$2=//p"
}

# kvt_snapshot DIR: a listing that changes when anything under DIR changes
# (names, types, modes, sizes, mtimes, contents of files < 1 MiB).
kvt_snapshot() {
	local d=$1
	(cd "$d" && find . -printf '%P %y %m %s %T@\n' | LC_ALL=C sort &&
		find . -type f -size -1M -print0 | LC_ALL=C sort -z |
		xargs -0 -r md5sum)
}

# kvt_count_tmp DIR: number of names ending in .tmp under DIR.  When find
# fails (EIO, ENOTCONN, a hung mount, ...) it prints no number but
# "FIND FAILED: <status and first error>" and returns 1: callers check
# the status and the number, e.g. n=$(kvt_count_tmp "$MNT") && [ "$n" = 0 ].
kvt_count_tmp() {
	local out st n
	out=$(_kvt_tmpfile)
	kvt_guard find "$1" -name '*.tmp' -printf 'x\n' >"$out" 2>"$out.err"
	st=$?
	if [ "$st" != 0 ]; then
		echo "FIND FAILED: exit status $st: $(head -n 1 "$out.err")"
		rm -f "$out" "$out.err"
		return 1
	fi
	n=$(wc -l <"$out")
	rm -f "$out" "$out.err"
	echo "$n"
}

# kvt_first_block DIR: path of one *.bin under DIR (a path that does not
# exist, named so in the test output, if there is none).
kvt_first_block() {
	local f
	f=$(kvt_guard find "$1" -name '*.bin' -type f 2>/dev/null | LC_ALL=C sort | head -n 1)
	echo "${f:-$1/NO-BLOCK-FOUND}"
}

# ---------------------------------------------------------------- clients
# A kvclient in the background whose progress the test follows (a crash
# test kills the daemon at a chosen point of a store run).

# kvt_client_start ARGS...: run $KVCLIENT ARGS in the background, its
# stdout on fd $KVT_CFD (progress lines), its stderr appended to
# $T/client.err; sets KVT_CPID.
kvt_client_start() {
	exec {KVT_CFD}< <(exec "$KVCLIENT" "$@" 2>>"$T/client.err" {_kvt_out}>&- {_kvt_err}>&-)
	KVT_CPID=$!
	kvt_bg "$KVT_CPID"
}

# kvt_client_wait N: read the client's lines until "progress >= N"; sets
# KVT_PROGRESS.  Other lines go to $T/client.out.  Fails when the client
# ends or stays silent for 60 s.
kvt_client_wait() {
	local want=$1 line
	KVT_PROGRESS=0
	while IFS= read -r -t 60 -u "$KVT_CFD" line; do
		case $line in
		"progress "*) KVT_PROGRESS=${line#progress } ;;
		*) echo "$line" >>"$T/client.out" ;;
		esac
		[ "$KVT_PROGRESS" -ge "$want" ] && return 0
	done
	return 1
}

# kvt_client_drain: read the client's output to EOF, then reap it; sets
# KVT_CRC (its exit status).  Lines other than progress go to
# $T/client.out.  Fails (and kills the client) if it still runs after 60 s.
kvt_client_drain() {
	local line rc
	while IFS= read -r -t 60 -u "$KVT_CFD" line; do
		case $line in
		"progress "*) KVT_PROGRESS=${line#progress } ;;
		*) echo "$line" >>"$T/client.out" ;;
		esac
	done
	rc=$?
	exec {KVT_CFD}<&-
	if [ "$rc" -gt 128 ]; then
		kill -KILL "$KVT_CPID" 2>/dev/null
		wait "$KVT_CPID" 2>/dev/null
		KVT_CRC=255
		return 1
	fi
	wait "$KVT_CPID" 2>/dev/null
	KVT_CRC=$?
	return 0
}

# ---------------------------------------------------------------- fault suite
#
# The fault suite (t-crashloop, t-stalled, t-concurrency, t-powercut,
# t-fio*, t-faults, t-reclaim, ...) runs short in CI and long under
# scripts/stress.  The convention every one of them follows:
#
#   - KVT_STRESS=1 in the environment selects the long version (more
#     rounds, longer runs); the test's own variables (KVT_CRASHLOOP_ROUNDS,
#     KVT_FIO_RUNTIME, KVT_POWERCUT_ROUNDS, ...) refine either version.
#     A long test also says how long it may run: scripts/stress raises the
#     runner's KVT_TIMEOUT.
#   - Each run prints ONE summary line, which scripts/stress parses:
#
#       # stress: rounds=N blocks=N wrong_bytes=N lost_acked=N leaked=N errors=N
#
#     rounds      rounds (faults injected, or passes) done
#     blocks      blocks (files) read back and checked, over all checks
#     wrong_bytes blocks read back with any wrong byte (torn, other data,
#                 wrong version): a count of blocks, not bytes; must be 0
#     lost_acked  acknowledged stores (rename or close had returned)
#                 missing or older after the fault, over all checks; must
#                 be 0
#     leaked      objects no name uses (kvtierfs-fsck orphans) left at the
#                 end, before any repair
#     errors      failed test points of the run (wrong_bytes or lost_acked
#                 above 0 fail a test point too)
#
#     kvt_stress_summary prints it; a number a test cannot know is "-".

# kvt_stress_pick CI LONG: LONG when KVT_STRESS=1, else CI.
kvt_stress_pick() {
	if [ "${KVT_STRESS:-0}" = 1 ]; then
		echo "$2"
	else
		echo "$1"
	fi
}

# kvt_stress_summary ROUNDS BLOCKS WRONG_BYTES LOST_ACKED LEAKED: the
# summary line of the run; errors are the test points failed so far.
kvt_stress_summary() {
	echo "# stress: rounds=$1 blocks=$2 wrong_bytes=$3 lost_acked=$4 leaked=$5 errors=$_kvt_failed"
}
