#!/bin/bash
# The daemon as a service: a line at mount (store, mount point, options)
# and at unmount; SIGTERM and SIGINT unmount and exit 0, with a line for
# each file dropped unpublished; SIGHUP reopens -o log_file and leaves the
# mount serving; a daemonized mount logs to syslog (a receiver on /dev/log
# when the machine has none), where a purge line is read back; systemd's
# READY=1 and STOPPING=1 reach NOTIFY_SOCKET; -o log_level filters, -d
# names the paths of changes; the source column is the store's path.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 46
kvt_setup

SINK=$top_srcdir/tests/dgram-sink.py

# log_of PID: what daemon PID (started by kvt_start) has logged so far.
# (Read it as grep's file, not through a pipe: grep -q leaves early, and
# pipefail would count the writer's SIGPIPE.)
log_of() {
	tail -c +"$((${KVT_LOGOFF[$1]:-0} + 1))" "$T/daemon.log"
}

# stop_with SIG PID: signal the daemon, wait for it (timeout); its exit
# status, 255 when it had to be killed.
stop_with() {
	local sig=$1 pid=$2 st
	kill -"$sig" "$pid"
	_kvt_wait_pid "$pid" "$KVT_UMOUNT_TIMEOUT"
	st=$?
	unset "KVT_DAEMONS[$pid]"
	kvt_is_mounted "${KVT_DAEMONS[$pid]:-$MNT}" && fusermount3 -u -z "$MNT"
	return "$st"
}

# sink_start SOCKET OUT: a datagram receiver on SOCKET, ready when this
# returns; its pid in SINK_PID.
sink_start() {
	local line fifo=$T/.sink.fifo
	rm -f "$fifo"
	mkfifo "$fifo"
	python3 "$SINK" "$1" "$2" >"$fifo" 2>>"$T/sink.err" &
	SINK_PID=$!
	kvt_bg "$SINK_PID"
	IFS= read -r -t 10 line <"$fifo"
	rm -f "$fifo"
	[ "$line" = ready ] || bail "datagram receiver on $1 did not start: $(cat "$T/sink.err")"
}

# wait_line FILE ERE: wait (10 s at most) until FILE has a line matching
# ERE (lines another process writes: a log, a receiver's file).
wait_line() {
	local i
	for ((i = 0; i < 200; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# ---- foreground: mount and unmount lines, SIGTERM, dropped files -------
kvt_start "$LOWER" "$MNT"
pid=$KVT_LAST_PID
real_lower=$(readlink -f "$LOWER")
grep -Fq "mounted $real_lower on $MNT, pid $pid (" <(log_of "$pid") &&
	grep -q 'verify=auto,.*max_dir_fds=auto: a quarter of the descriptors' <(log_of "$pid")
ok $? "a line at mount names the store, the mount point, the pid and the options in effect"
log_of "$pid" >"$T/log.part"
diag_file "$T/log.part" 5

src=$(findmnt -n -o SOURCE "$MNT")
[ "$src" = "$real_lower" ]
ok $? "the source in the mount table is the store's path ('$src')"

# A writer that never closes, and a temp file closed but never renamed:
# both are unpublished when the daemon is told to stop.
mkdir -p "$MNT/m/r0"
printf 'abc' >"$MNT/m/r0/left.bin.tmp"
kvt_hold_writer "$MNT/m/r0/open.bin" 4096
st=$?
writer=$KVT_HOLDER
ok $st "a writer holds m/r0/open.bin open with 4096 bytes written"

stop_with TERM "$pid"
st=$?
[ "$st" = 0 ]
ok $? "SIGTERM: the daemon exits 0 (status $st)"
! kvt_is_mounted "$MNT"
ok $? "SIGTERM: the mount is gone"
grep -q '^kvtierfs: stopping on SIGTERM$' <(log_of "$pid") &&
	grep -Fxq "kvtierfs: unmounted $MNT" <(log_of "$pid")
ok $? "SIGTERM: a line says the daemon is stopping on SIGTERM, and one that it unmounted"
grep -Fq 'unmount: dropped m/r0/open.bin, never published (4096 bytes written, 1 writer(s) open)' <(log_of "$pid")
ok $? "a line for the file still being written, with its path and size"
grep -Fq 'unmount: dropped m/r0/left.bin.tmp, never published (3 bytes written' <(log_of "$pid")
ok $? "a line for the temp file never renamed"
log_of "$pid" >"$T/log.part"
diag_file "$T/log.part" 20
! grep -Eq "$KVT_LOG_BAD|warning" <(log_of "$pid")
ok $? "no warning or error line on the way"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null

# bash starts background commands with SIGINT ignored, and an ignored
# signal stays ignored across exec: this one starts with SIGINT's default.
printf '#!/usr/bin/perl\n$SIG{INT} = "DEFAULT";\nexec "%s", @ARGV or die;\n' "$KVTIERFS" >"$T/int-default"
chmod +x "$T/int-default"
KVTIERFS=$T/int-default kvt_start "$LOWER" "$MNT"
pid=$KVT_LAST_PID
[ ! -e "$MNT/m/r0/open.bin" ] && [ ! -e "$MNT/m/r0/left.bin.tmp" ]
ok $? "after a remount, neither dropped file exists"
stop_with INT "$pid"
st=$?
[ "$st" = 0 ] && ! kvt_is_mounted "$MNT" && grep -q '^kvtierfs: stopping on SIGINT$' <(log_of "$pid")
ok $? "SIGINT: unmounted, exit 0 (status $st), a stopping line"

# ---- SIGHUP and -o log_file ----------------------------------------------
LOG=$T/kvt.log
kvt_start "$LOWER" "$MNT" "log_file=$LOG"
pid=$KVT_LAST_PID
grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z kvtierfs\[$pid\]: mounted " "$LOG"
ok $? "log_file: the mount line, with a UTC time and the pid"
diag_file "$LOG" 3
[ -z "$(log_of "$pid")" ]
ok $? "log_file: nothing on stderr"
mv "$LOG" "$LOG.1"
kill -HUP "$pid"
wait_line "$LOG" "SIGHUP: log_file $LOG reopened"
ok $? "SIGHUP: a new $LOG, where the next line goes"
kvt_is_mounted "$MNT" && echo hup >"$MNT/after-hup.bin" && [ "$(cat "$MNT/after-hup.bin")" = hup ]
ok $? "SIGHUP: the mount still serves"
! grep -q SIGHUP "$LOG.1" && grep -q ' mounted ' "$LOG.1"
ok $? "SIGHUP: the rotated file kept its lines and got no new one"
kvt_stop "$MNT" "$pid"
grep -Fq "unmounted $MNT" "$LOG"
ok $? "log_file: the unmount line"

"$KVTIERFS" -f -o log_file="$T/no/such/dir/log" "$LOWER" "$MNT" >"$T/bad.out" 2>&1
st=$?
[ "$st" = 1 ] && grep -q "^kvtierfs: -o log_file $T/no/such/dir/log: No such file or directory$" "$T/bad.out" &&
	! kvt_is_mounted "$MNT"
ok $? "log_file in a missing directory: exit 1 ($st), a line naming it, nothing mounted"
diag_file "$T/bad.out" 3

"$KVTIERFS" -f -o log_level=loud "$LOWER" "$MNT" >"$T/bad.out" 2>&1
st=$?
[ "$st" = 1 ] && grep -q "^kvtierfs: -o log_level: expects one of error|warning|notice|info|debug, got 'loud'$" "$T/bad.out"
ok $? "log_level=loud: exit 1 ($st), the levels listed"
diag_file "$T/bad.out" 3

# ---- levels ---------------------------------------------------------------
kvt_start "$LOWER" "$MNT" log_level=warning
pid=$KVT_LAST_PID
echo quiet >"$MNT/quiet.bin"
kvt_stop "$MNT" "$pid"
! grep -Eq 'mounted|unmounted|published' <(log_of "$pid")
ok $? "log_level=warning: no mount, unmount or publication line"

kvt_start "$LOWER" "$MNT" log_level=debug
pid=$KVT_LAST_PID
mkdir -p "$MNT/d1/e2"
echo a >"$MNT/d1/e2/one.bin.tmp"
mv "$MNT/d1/e2/one.bin.tmp" "$MNT/d1/e2/one.bin"
mv "$MNT/d1/e2/one.bin" "$MNT/d1/e2/two.bin"
rm "$MNT/d1/e2/two.bin"
kvt_stop "$MNT" "$pid"
log_of "$pid" >"$T/debug.log"
grep -q '^kvtierfs: published d1/e2/one.bin: 2 bytes, objects/' "$T/debug.log" &&
	grep -q '^kvtierfs: renamed d1/e2/one.bin to d1/e2/two.bin$' "$T/debug.log" &&
	grep -q '^kvtierfs: removed d1/e2/two.bin$' "$T/debug.log"
ok $? "log_level=debug: publication (at the temp file's rename), rename and unlink lines name the paths"
diag_file "$T/debug.log" 10

# ---- fsname ---------------------------------------------------------------
kvt_start "$LOWER" "$MNT" fsname=kvstore1
src=$(findmnt -n -o SOURCE "$MNT")
[ "$src" = kvstore1 ]
ok $? "fsname= given: the source is '$src'"
kvt_stop "$MNT" "$KVT_LAST_PID"
ODD="$T/store, one"
mkdir "$ODD"
kvt_start "$ODD" "$MNT"
src=$(findmnt -n -o SOURCE "$MNT")
[ "$src" = "$ODD" ]
ok $? "a store path with a comma and a space is the source as it is ('$src')"
kvt_stop "$MNT" "$KVT_LAST_PID"

# ---- systemd readiness ------------------------------------------------------
sink_start "$T/notify.sock" "$T/notify.out"
NOTIFY_SOCKET=$T/notify.sock kvt_start "$LOWER" "$MNT"
pid=$KVT_LAST_PID
wait_line "$T/notify.out" '^READY=1'
ok $? "NOTIFY_SOCKET: READY=1 once mounted"
stop_with TERM "$pid"
st=$?
wait_line "$T/notify.out" '^STOPPING=1$' && [ "$st" = 0 ]
ok $? "NOTIFY_SOCKET: STOPPING=1 at SIGTERM, exit 0 ($st)"
diag_file "$T/notify.out" 4

# ---- daemonized: the system log -----------------------------------------------
# A receiver on /dev/log when nothing listens there (a container, CI); a
# machine with a syslog daemon or journald keeps its own.
SYSLOG=
if [ ! -e /dev/log ]; then
	sink_start /dev/log "$T/syslog.out"
	SYSLOG=$T/syslog.out
	syslog_cleanup() { [ -S /dev/log ] && [ -n "$SINK_OWN_DEVLOG" ] && rm -f /dev/log; }
	SINK_OWN_DEVLOG=1
	KVT_CLEANUP_HOOKS+=(syslog_cleanup)
fi
fifo=$T/.ready.fifo
rm -f "$fifo"
mkfifo "$fifo"
"$KVTIERFS" -o ready_fd=3 "$LOWER" "$MNT" 3>"$fifo" </dev/null >"$T/bg.out" 2>&1 &
IFS= read -r -t "$KVT_MOUNT_TIMEOUT" line <"$fifo"
rm -f "$fifo"
dpid=${line#ready }
if [[ "$dpid" =~ ^[0-9]+$ ]]; then
	KVT_DAEMONS[$dpid]=$MNT
	ok 0 "daemonized mount: ready $dpid"
else
	ok 1 "daemonized mount: ready line (got '$line')"
	bail "cannot mount daemonized"
fi
wait $! 2>/dev/null
st=$?
[ "$st" = 0 ] && [ ! -s "$T/bg.out" ]
ok $? "daemonized: the starting process exits 0 ($st) with nothing on its terminal"

printf 'block of bytes\n' >"$MNT/torn.bin"
obj=$(kvt_xattr "$MNT/torn.bin" user.kvtierfs.object)
truncate -s 3 "$LOWER/$obj"
cat "$MNT/torn.bin" >/dev/null 2>&1
! [ -e "$MNT/torn.bin" ] && [ "$(kvt_stat "$MNT" torn_size)" = 1 ]
ok $? "a torn object is purged (torn_size 1)"

if [ -n "$SYSLOG" ]; then
	wait_line "$SYSLOG" "kvtierfs\[$dpid\]: mounted $real_lower on $MNT"
	ok $? "syslog: the mount line, tagged kvtierfs[$dpid]"
	wait_line "$SYSLOG" "^<28>.*kvtierfs\[$dpid\]: warning: purged torn.bin: .*objects/"
	ok $? "syslog: the purge line, at LOG_DAEMON|LOG_WARNING"
else
	skip "syslog: the mount line" "/dev/log belongs to this machine's logger"
	skip "syslog: the purge line" "/dev/log belongs to this machine's logger"
fi
fusermount3 -u "$MNT"
# not a child of this shell: wait for it to be gone
for ((i = 0; i < KVT_UMOUNT_TIMEOUT * 20; i++)); do
	kill -0 "$dpid" 2>/dev/null || break
	sleep 0.05
done
! kill -0 "$dpid" 2>/dev/null && ! kvt_is_mounted "$MNT"
ok $? "daemonized: unmounted, the daemon is gone"
if [ -n "$SYSLOG" ]; then
	wait_line "$SYSLOG" "kvtierfs\[$dpid\]: unmounted $MNT"
	ok $? "syslog: the unmount line"
	diag_file "$SYSLOG" 10
else
	skip "syslog: the unmount line" "/dev/log belongs to this machine's logger"
fi

# ---- -d: libfuse's request trace goes through the same log ------------------
fifo=$T/.ready.fifo
mkfifo "$fifo"
"$KVTIERFS" -d -o ready_fd=3 "$LOWER" "$MNT" 3>"$fifo" </dev/null >"$T/d.out" 2>&1 &
pid=$!
KVT_DAEMONS[$pid]=$MNT
IFS= read -r -t "$KVT_MOUNT_TIMEOUT" line <"$fifo"
rm -f "$fifo"
stat "$MNT/nothing-here" >/dev/null 2>&1
fusermount3 -u "$MNT"
_kvt_wait_pid "$pid" "$KVT_UMOUNT_TIMEOUT"
st=$?
unset "KVT_DAEMONS[$pid]"
[ "$line" = "ready $pid" ] && [ "$st" = 0 ] && grep -q '^kvtierfs: unique: [0-9]*, opcode: LOOKUP' "$T/d.out" &&
	grep -q '^kvtierfs: unmounted ' "$T/d.out"
ok $? "-d: foreground (exit $st), libfuse's request trace as kvtierfs lines"
diag_file "$T/d.out" 5
