#!/bin/bash
# kill -9 of a daemon with a thread stuck in the kernel, and a SIGTERM
# whose stop waits on a client (at the end).  The kernel ends
# a mount's connection only when the daemon's last thread has exited; a
# thread waiting in a lower call that was already taken up cannot exit
# until it is answered.  (The same holds for an invalidation waiting for
# a directory's lock that a client holds while it waits for the daemon:
# seen over GlusterFS, where it hung a client forever.)  The daemon's
# guard aborts the connection when the main thread dies: the clients'
# calls end at once with an error instead of waiting.
#
# The lower disk: bindfs over bindfs, the inner one stopped.  The outer
# one has taken the daemon's call up and waits for the inner one, so the
# daemon's thread waits for an answer, not for its call to be read.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
kvt_require_root
command -v bindfs >/dev/null || { echo "1..0 # SKIP bindfs is missing"; exit 0; }

plan 33
kvt_setup

REAL="$T/real" MID="$T/mid"
mkdir "$REAL" "$MID"
bindfs -f "$REAL" "$MID" 2>"$T/bindfs1.err" &
INNER=$!
kvt_bg "$INNER"
findmnt --poll=mount --mountpoint "$MID" --timeout 10000 >/dev/null
bindfs -f "$MID" "$LOWER" 2>"$T/bindfs2.err" &
OUTER=$!
kvt_bg "$OUTER"
findmnt --poll=mount --mountpoint "$LOWER" --timeout 10000 >/dev/null
ok $? "bindfs over bindfs at $LOWER"

# guard_of PID: the daemon's guard process, if one lives (not a zombie).
guard_of() {
	ps -o pid=,stat=,comm= --ppid "$1" | awk '$3 == "kvt-guard" && $2 !~ /^Z/ { print $1 }'
}

kvt_mount
pid=$KVT_PID
g=$(guard_of "$pid")
[ -n "$g" ]
ok $? "the daemon has a guard (pid ${g:-none})"
kvt_stop "$MNT" "$pid"
KVT_PID=
! kill -0 "$g" 2>/dev/null
ok $? "a normal unmount ends the guard too"

kvt_mount
ok_kvclient "store 8 blocks" vllm-store --dir "$MNT" --blocks 8 --size 1M
mapfile -t blocks < <(kvt_run find "$MNT" -name '*.bin' | sort)
kill -STOP "$INNER"
pids=()
for i in 0 1 2 3; do
	cat "${blocks[$i]}" >/dev/null 2>"$T/dead.$i" &
	pids+=($!)
done
# waiting_on_mount PID: PID's call waits for a FUSE reply (its kernel
# stack says so), within 5 s.  No event tells when a call got there.
waiting_on_mount() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q request_wait_answer "/proc/$1/stack" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
n=0
for p in "${pids[@]}"; do waiting_on_mount "$p" && n=$((n + 1)); done
[ "$n" = 4 ]
ok $? "inner bindfs stopped: the 4 reads wait for a reply of the mount ($n waiting)"

pid=$KVT_PID
KVT_PID=
# Whatever happens, the inner bindfs goes on after 10 s: without the
# guard the reads end only then, once the daemon could die.
_kvt_after 10 kill -CONT "$INNER"
wd=$!
t0=$(date +%s%N)
kill -KILL "$pid"
failed=0
for p in "${pids[@]}"; do
	wait "$p" || failed=$((failed + 1))
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
stuck=0
kill -0 "$pid" 2>/dev/null && stuck=1
_kvt_after_cancel "$wd" && diag "the inner bindfs had to go on for the reads to end"
[ "$ms" -lt 5000 ] && [ "$failed" = 4 ]
ok $? "kill -9: the 4 reads end at once ($ms ms) with an error ($failed failed)"
diag "they said: $(sort -u "$T"/dead.* | sed 's/.*: //' | sort -u | tr '\n' ' ')"
grep -q "Software caused connection abort" "$T"/dead.0
ok $? "the error is ECONNABORTED, the connection's abort"
[ "$stuck" = 1 ] && [ -z "$(guard_of "$pid")" ]
ok $? "the daemon's stuck thread was still waiting for the lower disk meanwhile; its guard is gone"
# A new client meets the dead connection at once.
ms=$(( $(date +%s%N) / 1000000 ))
stat "$MNT/" >/dev/null 2>&1
st=$?
ms=$(( $(date +%s%N) / 1000000 - ms ))
[ "$st" != 0 ] && [ "$ms" -lt 2000 ]
ok $? "a new call on the dead mount fails at once ($ms ms)"

kill -CONT "$INNER"
_kvt_wait_pid "$pid" 30
st=$?
unset "KVT_DAEMONS[$pid]"
[ "$st" = 137 ]
ok $? "once the lower disk answers, the daemon's end completes (exit status $st)"
fusermount3 -u -z "$MNT"
kvt_mount
ok_kvclient "mounted again: the 8 blocks verify" verify --dir "$MNT" --expect 8

# SIGTERM stops the daemon and its guard; the group's TERM is not the
# guard's to take.
pid=$KVT_PID
g=$(guard_of "$pid")
KVT_PID=
kill -TERM "$pid"
_kvt_wait_pid "$pid" 30
st=$?
unset "KVT_DAEMONS[$pid]"
[ "$st" = 0 ] && [ -n "$g" ] && ! kill -0 "$g" 2>/dev/null && ! kvt_is_mounted "$MNT"
ok $? "SIGTERM: the daemon unmounts and exits 0 (status $st), its guard (${g:-none}) ends"

# --- a stop that waits on a client ------------------------------------------
# One worker (max_threads=1) opens a torn block and waits on the stopped
# lower disk; mkdir holds the block's directory's lock and waits for a
# LOOKUP that no worker is free to read.  SIGTERM: libfuse reads no more
# requests and waits for its worker, whose open, once the disk answers,
# purges the block and invalidates its entry, which takes that
# directory's lock.  Nobody answers the mkdir: without a bound, the
# client, the worker and the stop wait forever.
kvt_mount max_threads=1
pid=$KVT_PID
b=${blocks[5]}
d=$(dirname "$b")
o=$(kvt_xattr "$b" user.kvtierfs.object)
stat "$b" >/dev/null
truncate -s 1000 "$LOWER/$o"
kill -STOP "$INNER"
cat "$b" >/dev/null 2>"$T/stop.cat" &
cpid=$!
waiting_on_mount "$cpid"
c1=$?
mkdir "$d/new" 2>"$T/stop.mkdir" &
mpid=$!
waiting_on_mount "$mpid"
c2=$?
[ "$c1" = 0 ] && [ "$c2" = 0 ]
ok $? "the open waits on the lower disk, the mkdir for its turn (waiting: $c1 $c2)"
KVT_PID=
_kvt_after 5 kill -CONT "$INNER"
t0=$(date +%s%N)
kill -TERM "$pid"
_kvt_wait_pid "$pid" 40
st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if kill -0 "$pid" 2>/dev/null; then
	# Not ended: the test aborts the connection itself, or it would
	# leave the daemon and its clients waiting forever.
	mkdir "$T/fusectl"
	mount -t fusectl fusectl "$T/fusectl"
	conn=$(awk -v m="$MNT" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo)
	echo 1 >"$T/fusectl/$conn/abort"
	umount "$T/fusectl"
	_kvt_wait_pid "$pid" 30
fi
unset "KVT_DAEMONS[$pid]"
kill -CONT "$INNER"
wait "$cpid"
wait "$mpid"
mst=$?
[ "$st" = 0 ] && [ "$ms" -lt 30000 ] && ! kvt_is_mounted "$MNT"
ok $? "SIGTERM while a client waits on a reply the stop will not read: the daemon ends in $ms ms (status $st)"
grep -q "the stop had not ended in 10 s (.*): the guard aborted the connection" "$T/daemon.log"
ok $? "it says it aborted the connection after 10 s"
[ "$mst" != 0 ] && grep -q "Software caused connection abort" "$T/stop.mkdir"
ok $? "the mkdir fails with ECONNABORTED (status $mst: $(cat "$T/stop.mkdir"))"
fusermount3 -u -z "$MNT" 2>/dev/null
kvt_mount
[ ! -e "$b" ] && [ ! -e "$d/new" ]
ok $? "mounted again: the torn block is gone, no directory was made"
ok_kvclient "the other blocks verify" verify --dir "$MNT" --expect 7

# --- a crash while an invalidation waits on a client -------------------------
# Before the kernel dumps a core (with ulimit -c 0 too) it waits for every
# thread of the process to stop.  One in an invalidation waits for a
# directory's lock, held by a client's rename that waits for this daemon:
# the dump never ends, nor the daemon, nor the client.  The crash signal
# tells the guard first, which aborts the connection.  Here the rename's
# record write is delayed (KVT_FAULTS), and a second mount of the store
# makes the first one invalidate every entry the kernel holds, the
# rename's source too.
kvt_umount
export KVT_FAULTS="write:8000ms:name=n.*:max=1"
kvt_mount
unset KVT_FAULTS
pid=$KVT_PID
mkdir "$MNT/crash" && head -c 100000 /dev/urandom >"$MNT/crash/n.tmp"
py=/usr/bin/python3 # Debian's: a shim in PATH may take seconds to start
[ -x "$py" ] || py=python3
"$py" -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' \
	"$MNT/crash/n.tmp" "$MNT/crash/n" 2>"$T/crash.rename" &
rpid=$!
waiting_on_mount "$rpid"
ok $? "a rename in crash/ waits for the daemon (its record write delayed 8 s)"
MNT2="$T/mnt2"
mkdir "$MNT2"
kvt_start "$LOWER" "$MNT2"
pid2=$KVT_LAST_PID
inval=1
for ((i = 0; i < 100; i++)); do
	if grep -qs fuse_reverse_inval_entry /proc/"$pid"/task/*/stack; then
		inval=0
		break
	fi
	sleep 0.05
done
ok "$inval" "a second mount: the first one's invalidation of crash/n.tmp waits for the rename's lock"
KVT_PID=
# Not ended in 20 s: the test aborts the connection itself, or it would
# leave the daemon and the rename waiting forever (a kill would not end a
# process whose core is being dumped).
_kvt_after 20 kvt_abort_conn "$MNT"
wd=$!
t0=$(date +%s%N)
kill -ABRT "$pid"
wait "$pid"
st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
_kvt_after_cancel "$wd" && diag "the test had to abort the connection itself"
unset "KVT_DAEMONS[$pid]"
wait "$rpid"
rst=$?
[ "$st" = 134 ] && [ "$ms" -lt 5000 ]
ok $? "SIGABRT: the daemon dies in $ms ms (status $st), its core not waiting on the rename"
[ "$rst" != 0 ] && grep -q "Software caused connection abort" "$T/crash.rename"
ok $? "the rename fails with ECONNABORTED (status $rst: $(tail -n 1 "$T/crash.rename"))"
fusermount3 -u -z "$MNT" 2>/dev/null
[ -d "$MNT2/crash" ] && [ ! -e "$MNT2/crash/n" ]
ok $? "the second mount: crash/ is there, crash/n never was"
kvt_stop "$MNT2" "$pid2"
