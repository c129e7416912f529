# shellcheck shell=bash
#
# tests/twohosts-race.sh: two hosts changing the same names on one shared
# store: sourced by t-gluster-race.sh and, in their virtual machines,
# nfs-inner.sh and cephfs-kernel-inner.sh once both hosts are up (kvt_two_hosts: $K1, $P1, $K2, $P2),
# with the store at $S1 through host A's client mount and at $S2 through
# host B's, both mounted with reclaim=0: a reclamation pass would remove
# what a race leaked, which the fsck at the end is to find.  22 test
# points.  Both hosts run on a file system without
# RENAME_EXCHANGE, where names change under a hold (src/store/hold.h).
#   - A version of another size that host A puts at a name host B has
#     just read: B reads one whole version, never the new bytes cut at the
#     old size its kernel keeps.
#   - open(O_CREAT) without O_EXCL of a name the other host made since
#     this one missed it opens it (no EEXIST).
#   - A directory host B removed after host A's client made sure of it:
#     a store there makes it again, or takes the one B made again.
#   - Host A evicts a block host B is reading: B reads it to its end.
#   - kvtierfs-fsck --repair refuses while the hosts are mounted.
#   - A hold another process keeps on a record: a replacement waits for
#     it and goes on once it goes (kill -9); one kept longer than 10 s
#     fails the replacement with EBUSY instead of hanging it.
#   - 8 writers and 8 readers per host on the same names, in vLLM's way
#     (tmp + rename) and LMCache's (written in place, published at
#     close), versions of two sizes over names holding a third: every read
#     one whole version, no ENOENT once published, every name there at the
#     end; after the unmounts kvtierfs-fsck finds no unused object (each
#     replaced version's reference was released exactly once).

# --- another size under a cached inode --------------------------------------
head -c 262144 /dev/urandom >"$T/v1"
head -c 300000 /dev/urandom >"$T/v2"
mkdir "$K1/d"
cp "$T/v1" "$K1/d/x.tmp" && mv "$K1/d/x.tmp" "$K1/d/x"
cmp -s "$K2/d/x" "$T/v1"
ok $? "host B reads the 256 KiB version host A stored"
# Within the 1 s the kernel keeps the name's inode and size for:
cp "$T/v2" "$K1/d/x.tmp" && mv "$K1/d/x.tmp" "$K1/d/x"
cat "$K2/d/x" >"$T/read" 2>"$T/read.err"
st=$?
{ cmp -s "$T/read" "$T/v1" || cmp -s "$T/read" "$T/v2"; } && [ "$st" = 0 ]
ok $? "host A puts a 300000-byte version there; host B reads one whole version at once ($(stat -c %s "$T/read") bytes, exit $st)" ||
	diag_file "$T/read.err"
cmp -s "$K2/d/x" "$T/v2" && [ "$(stat -c %s "$K2/d/x")" = 300000 ]
ok $? "host B then reads and stats the new version"

# --- a create of what the other host made -----------------------------------
stat "$K2/d/y" >/dev/null 2>&1 # host B misses it: a negative entry
echo one >"$K1/d/y"
if echo two >"$K2/d/y" 2>"$T/create.err"; then st=0; else st=1; fi
[ "$st" = 0 ] && [ "$(cat "$K2/d/y")" = two ]
ok $? "host B opens for writing (O_CREAT, no O_EXCL) the name host A made since it missed it" ||
	diag_file "$T/create.err"

# --- holds ------------------------------------------------------------------
# A replacement whose holder died goes on within this, far from the 10 s
# a hold is waited for; an emulated machine (the inner scripts of t-nfs.sh
# and t-cephfs-kernel.sh) runs each step several times slower and sets
# more.
: "${TH_GOES_ON_MS:=2000}"
# hold FILE SECONDS: flock FILE (on the shared file system, as host A
# would) for SECONDS; prints "held" once it holds it.  Opened for writing:
# NFS makes a flock a lock of the whole file, which wants that.
hold() {
	python3 -c '
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))' "$1" "$2"
}
# in_rename PID: PID is inside a rename system call, not yet answered
# (/proc/PID/syscall; x86-64's rename, renameat, renameat2).
in_rename() {
	local nr
	read -r nr _ 2>/dev/null <"/proc/$1/syscall" || return 1
	case $nr in
	82 | 264 | 316) return 0 ;;
	esac
	return 1
}
# rename_waits PID: PID is in a rename call at every look for a second.
# (mv first tries renameat2 with RENAME_NOREPLACE, which fails at once
# over an existing name, then renames: an unheld rename never lasts that
# long.)
rename_waits() {
	local i
	for ((i = 0; i < 10; i++)); do
		in_rename "$1" || return 1
		sleep 0.1
	done
	in_rename "$1"
}
echo a >"$K1/d/h"
exec 5< <(hold "$S1/names/d/h" 600)
hp=$!
read -r -t 60 word <&5
echo b >"$K2/d/h.tmp"
mv "$K2/d/h.tmp" "$K2/d/h" 2>"$T/mv.err" &
mvp=$!
# mv's rename reaches the mount (however slowly mv started), and stays
# unanswered while the record is held.
kvt_within 20 rename_waits "$mvp"
ok $? "a replacement from host B waits while the record is held ($word; a second in its rename, seen after ${took:-?} s)"
kill -KILL "$hp"
t0=$(date +%s%N)
wait "$mvp"
st=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$st" = 0 ] && [ "$(cat "$K2/d/h")" = b ] && [ "$ms" -lt "$TH_GOES_ON_MS" ]
ok $? "the holder killed with -9: the replacement goes on (${ms} ms, exit $st)" || diag_file "$T/mv.err"
exec 5<&-

exec 5< <(hold "$S1/names/d/h" 600)
hp=$!
read -r -t 60 word <&5
echo c >"$K2/d/h.tmp"
t0=$(date +%s%N)
mv "$K2/d/h.tmp" "$K2/d/h" 2>"$T/mv.err"
st=$?
ms=$((($(date +%s%N) - t0) / 1000000))
kill -KILL "$hp"
exec 5<&-
[ "$st" != 0 ] && grep -q 'Device or resource busy' "$T/mv.err" &&
	[ "$ms" -ge 9000 ] && [ "$ms" -lt 30000 ] && [ "$(cat "$K2/d/h")" = b ]
ok $? "a hold kept past 10 s: the replacement fails with EBUSY after ${ms} ms, the name keeps its version" ||
	diag_file "$T/mv.err"
grep -q 'held by another mount' "$T/daemon.log"
ok $? "and the wait is logged"
rm -f "$K2/d/h.tmp"

# --- a directory the other host removed ------------------------------------
# in_removed MAKE STEP: host A's client makes d2/e, opens it; host B
# removes d2 (and with MAKE=1 makes d2/e again); the client does STEP in
# the directory it holds (python, its fd is "d"), as a client whose
# mkdir -p came just before the other host's rmdir.
in_removed() {
	mkdir -p "$K1/d2/e" &&
		python3 - "$K1/d2/e" "$K2/d2" "$T/v1" "$1" "$2" <<-'PY'
			import os, shutil, sys
			d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
			shutil.rmtree(sys.argv[2])
			if sys.argv[4] == "1":
			    os.makedirs(sys.argv[2] + "/e")
			data = open(sys.argv[3], "rb").read()
			exec(sys.argv[5])
		PY
}
STORE='
fd = os.open("b.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=d)
os.write(fd, data)
os.close(fd)
os.rename("b.tmp", "b", src_dir_fd=d, dst_dir_fd=d)'
in_removed 0 "$STORE" 2>"$T/rm.err" && cmp -s "$T/v1" "$K1/d2/e/b"
ok $? "host B removes d2; host A stores d2/e/b into the d2/e it holds: made again, and read back" ||
	diag_file "$T/rm.err"
in_removed 1 "$STORE" 2>"$T/rm.err" && cmp -s "$T/v1" "$K1/d2/e/b" && cmp -s "$T/v1" "$K2/d2/e/b"
ok $? "host B removes d2 and makes d2/e again; host A stores d2/e/b there: both hosts read it" ||
	diag_file "$T/rm.err"
grep -q 'directory e was removed by another mount: another mount made it again' "$T/daemon.log"
ok $? "host A says it took the directory host B made again"

# --- an eviction while the other host reads, fsck while hosts are live -----
python3 - "$K2/d/x" "$K1/d/x" "$T/read2" <<-'PY' 2>"$T/evict.err"
	import os, sys
	fd = os.open(sys.argv[1], os.O_RDONLY)
	first = os.read(fd, 100000)
	os.unlink(sys.argv[2])  # host A's evictor
	rest = b""
	while True:
	    b = os.read(fd, 1 << 20)
	    if not b:
	        break
	    rest += b
	open(sys.argv[3], "wb").write(first + rest)
PY
st=$?
cmp -s "$T/read2" "$T/v2" && [ "$st" = 0 ]
ok $? "host A evicts d/x while host B reads it: B reads the whole block to its end" ||
	diag_file "$T/evict.err"
# The hosts finish what the eviction left first (a release, a ".nfs" name
# that NFS removes after the last close): the tree is taken once it
# stays the same for half a second.
tree() { find "$S1/objects" "$S1/staging" "$S1/names" | sort; }
tree >"$T/tree.before"
for ((i = 0; i < 20; i++)); do
	sleep 0.5
	tree >"$T/tree.now"
	cmp -s "$T/tree.before" "$T/tree.now" && break
	mv "$T/tree.now" "$T/tree.before"
done
"$KVTIERFS_FSCK" --repair "$S1" >"$T/fsck-live.out" 2>&1
st=$?
tree >"$T/tree.after"
# What a host adds meanwhile (a reclamation pass makes its staging's
# "clock") is not fsck's: nothing may be gone.
gone=$(comm -23 "$T/tree.before" "$T/tree.after" | head -n 5 | tr "\n" " ")
[ "$st" != 0 ] && grep -q 'is in use by a mount' "$T/fsck-live.out" && [ -z "$gone" ]
ok $? "kvtierfs-fsck --repair from a third client refuses while the hosts are mounted, removing nothing (exit $st)${gone:+; gone: $gone}" ||
	diag_file "$T/fsck-live.out"

# --- 16 threads per host on the same names ----------------------------------
ok_kvclient "host A stores 8 blocks of 128 KiB, the names the race takes over" \
	vllm-store --dir "$K1" --blocks 8 --size 131072 --key-base 500 --version 5000
RACE=(--blocks 8 --size 65536 --size-odd 200000 --writers 8 --readers 8 --shared --key-base 500)
# Rounds of each race; scripts/stress (KVT_STRESS=1) runs ten times as
# many, and the whole race may then take longer than a command's limit.
TH_RACE_ROUNDS=${TH_RACE_ROUNDS:-$(kvt_stress_pick 6 60)}
TH_LMCACHE_ROUNDS=${TH_LMCACHE_ROUNDS:-$(kvt_stress_pick 30 300)}
KVT_CMD_TIMEOUT=$(kvt_stress_pick "$KVT_CMD_TIMEOUT" 7200)
: >"$T/race.all"
# race STYLE ROUNDS: STYLE on both hosts at once; prints the summaries.
# Host A's versions are 1 and up, one per writer and round, host B's
# 1000001 and up: each host's checks know its own by their range.
# Under the hang guard: a race still running after $KVT_CMD_TIMEOUT s
# shows what the clients and both daemons wait on (kvt_guard).
race() {
	local st
	th_both "$1" "--version 1" "--version 1000001" "${RACE[@]}" --rounds "$2" &&
		[ "$(grep -ch "^$1 final: blocks=8 ok=8 errors=0 wrong=0" "$T/both1.out" "$T/both2.out" |
			tr '\n' ' ')" = "1 1 " ]
	st=$?
	grep -h "^$1 " "$T/both1.out" "$T/both2.out" >>"$T/race.all"
	return "$st"
}
race race "$TH_RACE_ROUNDS"
ok $? "vLLM's way: both hosts rename versions of 64 KiB and 200000 bytes over the same 8 names, 8 readers each: every read whole, no ENOENT once published, every name there"
race lmcache "$TH_LMCACHE_ROUNDS"
ok $? "LMCache's way: both hosts rewrite the same 8 names in place, published at close: every read whole, none older than one read before, every name there"

kvt_stop "$K1" "$P1"
kvt_stop "$K2" "$P2"
"$KVTIERFS_FSCK" "$S1" >"$T/fsck.out" 2>&1
st=$?
[ "$st" = 0 ] && grep -q ', 0 problems' "$T/fsck.out"
ok $? "kvtierfs-fsck after the races: no unused object, every name whole (exit $st)" ||
	diag_file "$T/fsck.out" 20
grep -h 'names,' "$T/fsck.out" | sed 's/^/#   /'
# For scripts/stress: reads checked, wrong, lost, and objects no name
# uses (fsck's problems); "-" where the races printed no count.
sum_of() {
	grep ' write+read' "$T/race.all" | sed -n "s/.* $1=\([0-9]*\).*/\1/p" |
		awk '{ s += $1 } END { print NR ? s : "-" }'
}
kvt_stress_summary $((TH_RACE_ROUNDS + TH_LMCACHE_ROUNDS)) "$(sum_of hits)" "$(sum_of wrong)" \
	"$(sum_of lost)" "$(sed -n 's/.* \([0-9]*\) problems\{0,1\}.*/\1/p' "$T/fsck.out" | head -n 1)"
kvt_start "$S2" "$K2"
P2=$KVT_LAST_PID
ok_kvclient "a new mount reads every name of both races whole" verify --dir "$K2"
kvt_stop "$K2" "$P2"
