#!/bin/bash
# Power cuts that lose the drive's cache: the lower disk's writes are
# recorded with their flushes by the kernel's dm-log-writes target while
# clients store, and the disk is then rebuilt from that log as it stood at
# chosen points, each a power cut after which the drive kept exactly the
# writes it had made durable (tests/powercut.sh's cut keeps every write
# the disk received).  It runs in the virtual machine of t-logwrites.sh
# (tests/vm.sh), since this machine's kernel has no device mapper; run it
# by itself on a machine whose kernel has dm-log-writes.
#
# The rig: ext4 on a loop device behind a log-writes target whose log is a
# second loop device.  kvtierfs mounts it and four vLLM-style clients store
# at once: three sync each block (tmp + rename + fsync of the final name;
# the POSIX idiom, fsync of the temp file and of the directory; LMCache's
# write in place with fsync before close), one never does.  While they
# run, each time more synced stores have been acknowledged the log gets a
# mark (dmsetup message ... mark), and the lengths of the clients'
# manifests just before it are noted: the stores synced before the mark.
# More marks:
# "ready" (the store made, the mount up), "stored" (every client done),
# "clean" (kvtierfs and ext4 unmounted: every acknowledged store is on the
# disk, synced or not).
#
# Then tests/logwrites (the log's reader) rebuilds the disk up to each
# point checked: every mark, every flush (FLUSH or FUA entry) and, between
# two flushes, the entry halfway (the drive made some of those writes
# durable and not the others).  At each point, on a copy:
#   - ext4 mounts (its journal replayed), and e2fsck -fn finds it clean;
#   - kvtierfs-fsck, before the mount, finds only what a cut leaves
#     (orphans, a dead staging directory, torn names where nothing synced);
#     before "ready", a cut while the first mount made the store, it may
#     find no store at all (the next mount makes one), not half of one;
#   - kvtierfs mounts; every acknowledged block loads byte-exact or not at
#     all (ENOENT, EIO), never a wrong byte; every block synced before the
#     last mark at or before the point is there, byte for byte (after
#     "clean", every acknowledged block); every name in the store reads
#     back byte-exact; it unmounts clean;
#   - and kvtierfs-fsck then finds only orphans.
#
# KVT_LOGWRITES_POINTS: "all" (the default with KVT_STRESS=1), or how many
# points to check (default 16): the named marks, then marks, flushes and
# points between after "ready", each spread over the log.  All of them is
# some 750 points, 10 s each emulated: two hours.  KVT_LOGWRITES_BLOCKS
# (16): blocks per client; KVT_LOGWRITES_SIZE (64K, 256K with
# KVT_STRESS=1): their size; KVT_LOGWRITES_DISK (64M, 256M): the disk;
# KVT_LOGWRITES_OPTS (none): more options of the mount that stores.
# One line per point: its entry, kind, blocks loaded, synced blocks
# required, lost, wrong; and the summary line of the fault suite.
# Emulated, a store or a check may take long: a command is deemed hung
# after 10 min.
: "${KVT_CMD_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"

kvt_require_root
kvt_setup
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
: "${KVT_LOGWRITES:=$top_builddir/tests/logwrites}"
: "${KVT_LOGWRITES_POINTS:=$(kvt_stress_pick 16 all)}"
: "${KVT_LOGWRITES_BLOCKS:=16}"
: "${KVT_LOGWRITES_SIZE:=$(kvt_stress_pick 64K 256K)}"
: "${KVT_LOGWRITES_DISK:=$(kvt_stress_pick 64M 256M)}"
# The mount the clients store through verifies with io_uring, whose reads
# on this device once answered EAGAIN (an object opened O_NONBLOCK), and
# kvtierfs answered EIO to the open: this run found it.
: "${KVT_LOGWRITES_OPTS=}"
OPTS=$KVT_LOGWRITES_OPTS
POINTS=$KVT_LOGWRITES_POINTS
BLOCKS=$KVT_LOGWRITES_BLOCKS
SIZE=$KVT_LOGWRITES_SIZE
[[ $POINTS == all || $POINTS =~ ^[1-9][0-9]*$ ]] ||
	bail "KVT_LOGWRITES_POINTS: 'all' or a number >= 1, not '$POINTS'"
[[ $BLOCKS =~ ^[1-9][0-9]*$ ]] || bail "KVT_LOGWRITES_BLOCKS: a number >= 1, not '$BLOCKS'"
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
[ -x "$KVT_LOGWRITES" ] || bail "tests/logwrites is not built: $KVT_LOGWRITES (make check)"
for c in dmsetup mkfs.ext4 e2fsck losetup blockdev; do
	command -v "$c" >/dev/null || bail "$c is missing (scripts/install-deps)"
done
modprobe loop && modprobe dm-log-writes ||
	bail "no loop or dm-log-writes module in this kernel ($(uname -r))"

# The synced clients, and the one that never syncs.
SYNCED="rename posix inplace"
KINDS="$SYNCED nosync"
DM=kvtlw$$
IMG=$T/disk.img        # the disk the clients write, through $DM
LOG=$T/log.img         # its log
BASE=$T/base.img       # the disk as it was when the log began
REPLAY=$T/replay.img   # the disk rebuilt so far (never mounted)
CHECK=$T/check.img     # a copy of it, checked
DISK=$T/disk           # where ext4 is mounted: $LOWER
LOOPS=()
mkdir "$DISK" || bail "mkdir failed"
: >"$T/marks"

lw_cleanup() {
	local l
	dmsetup remove --noudevsync "$DM" 2>/dev/null
	for l in "${LOOPS[@]}"; do
		losetup -d "$l" 2>/dev/null
	done
	LOOPS=()
}
KVT_CLEANUP_HOOKS+=(lw_cleanup)

# lw_count KIND: lines in KIND's manifest now, in COUNT (a builtin: the
# loop below runs often and a process costs much, emulated).
lw_count() {
	local lines
	mapfile -t lines <"$T/manifest.$1"
	COUNT=${#lines[@]}
}

# lw_mark NAME: a mark in the log, after the manifests' lengths are noted
# in $T/marks: what had been acknowledged before it (the manifests only
# grow).
lw_mark() {
	local k line=$1
	for k in $KINDS; do
		lw_count "$k"
		line+=" $k=$COUNT"
	done
	echo "$line" >>"$T/marks" || return 1
	dmsetup message "$DM" 0 mark "$1"
}

# lw_synced: how many synced stores the manifests hold now, in SYNCED_N.
lw_synced() {
	local k
	SYNCED_N=0
	for k in $SYNCED; do
		lw_count "$k"
		SYNCED_N=$((SYNCED_N + COUNT))
	done
}

# ---------------------------------------------------------------- record

t0=$SECONDS
truncate -s "$KVT_LOGWRITES_DISK" "$IMG" && truncate -s 1G "$LOG" || bail "truncate failed"
# 4 KiB blocks as on a real disk; no lazy init: no background zeroing
mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$IMG" ||
	bail "mkfs.ext4 $IMG failed"
cp --sparse=always "$IMG" "$BASE" || bail "cp failed"
for f in "$IMG" "$LOG"; do
	l=$(losetup -f --show "$f") || bail "losetup $f failed"
	LOOPS+=("$l")
done
# no udev here: the node in /dev/mapper is made by mknodes
echo "0 $(blockdev --getsz "${LOOPS[0]}") log-writes ${LOOPS[0]} ${LOOPS[1]}" |
	dmsetup create --noudevsync "$DM" && dmsetup mknodes "$DM" ||
	bail "dmsetup create $DM (log-writes) failed"
mount -t ext4 "/dev/mapper/$DM" "$DISK" || bail "cannot mount ext4 on /dev/mapper/$DM"
LOWER=$DISK
ok 0 "ext4 ($KVT_LOGWRITES_DISK, $(uname -r)) on a log-writes target, its log on a second loop device"

for k in $KINDS; do
	: >"$T/manifest.$k"
done
# shellcheck disable=SC2086 # options, split on purpose
kvt_mount $OPTS
lw_mark ready || bail "cannot mark the log"

pids=()
# one thread each: the stores come one after another, and a mark can fall
# between any two
common=(--dir "$MNT" --blocks "$BLOCKS" --size "$SIZE" --threads 1)
# a block's bytes follow from its key: keys of their own, so that no two
# clients share an object (one client's sync would make the other's bytes
# durable)
base=0
start() {
	local k=$1
	shift
	base=$((base + 1000000))
	"$KVCLIENT" vllm-store "${common[@]}" --key-base "$base" --model "$k" \
		--manifest "$T/manifest.$k" "$@" \
		>"$T/client.$k.out" 2>"$T/client.$k.err" {_kvt_out}>&- {_kvt_err}>&- &
	pids+=("$!")
	kvt_bg "$!"
}
start rename --odirect --fsync
start posix --odirect --fsync-dir
start inplace --buffered --in-place --fsync
start nosync --odirect
# a mark whenever more synced stores were acknowledged (every 0.1 s at most)
marks=0 last=0 running=1 tc=$SECONDS
exec {idle}<> <(:) # read -t on it: a sleep without a process
while [ "$running" = 1 ] && [ $((SECONDS - tc)) -lt "$KVT_CMD_TIMEOUT" ]; do
	running=0
	for p in "${pids[@]}"; do
		kill -0 "$p" 2>/dev/null && running=1
	done
	lw_synced
	if [ "$SYNCED_N" -gt "$last" ]; then
		marks=$((marks + 1))
		lw_mark "sync$marks" || bail "cannot mark the log"
		last=$SYNCED_N
	fi
	read -r -t 0.1 -u "$idle" _
done
exec {idle}<&-
st=0
for p in "${pids[@]}"; do
	_kvt_wait_pid "$p" 60 || st=1
done
for k in $KINDS; do
	[ "$(wc -l <"$T/manifest.$k")" = "$BLOCKS" ] || st=1
done
ok "$st" "4 clients stored $BLOCKS blocks of $SIZE each ($SYNCED synced, nosync not) in $((SECONDS - tc)) s, $marks marks after synced stores"
if [ "$st" != 0 ]; then
	for k in $KINDS; do
		diag "$k: $(wc -l <"$T/manifest.$k") acknowledged; $(cat "$T/client.$k.out")"
		diag_file "$T/client.$k.err" 10
	done
fi
lw_mark stored || bail "cannot mark the log"
kvt_umount
umount "$DISK" || bail "cannot unmount ext4 from /dev/mapper/$DM"
lw_mark clean || bail "cannot mark the log"
# a log that ran out of room (or met an error) stops logging: it would
# lack the last writes
lw_status=$(dmsetup status "$DM") && [[ $lw_status != *logging_disabled* ]] ||
	bail "the log is not whole: dmsetup status $DM: ${lw_status:-failed}"
dmsetup remove --noudevsync "$DM" || bail "dmsetup remove $DM failed"
lw_cleanup

# ---------------------------------------------------------------- points

"$KVT_LOGWRITES" list "$LOG" >"$T/entries" 2>"$T/entries.err"
st=$?
# index, kind (mark, flush, between) and name of every candidate point:
# every mark, every FLUSH or FUA entry, the plain entry halfway between
# two of those
awk 'NR > 1 {
	if ($4 ~ /MARK/) { flushgap(); print $1, "mark", $5; next }
	if ($4 ~ /FLUSH|FUA/) { flushgap(); print $1, "flush", "-"; next }
	gap[n++] = $1
}
function flushgap() { if (n) print gap[int(n / 2)], "between", "-"; n = 0 }
END { flushgap() }' "$T/entries" >"$T/candidates"
nflush=$(awk '$2 == "flush"' "$T/candidates" | wc -l)
nmark=$(awk '$2 == "mark"' "$T/candidates" | wc -l)
nentries=$(awk 'NR == 1 { print $2 }' "$T/entries")
[ "$st" = 0 ] && [ "${nentries:-0}" -gt 0 ] && [ "$nflush" -gt 0 ] &&
	[ "$nmark" -ge $((marks + 3)) ]
ok $? "the log: ${nentries:-no} entries, $nflush flushes, $nmark marks ($((SECONDS - t0)) s so far)" ||
	diag_file "$T/entries.err" 5

# The points: all, or the named marks, then marks after synced stores
# (half of what is left) and flushes and points between, each spread
# over the log.
if [ "$POINTS" = all ]; then
	cp "$T/candidates" "$T/points"
else
	awk '$2 == "mark" && $3 !~ /^sync/' "$T/candidates" >"$T/named"
	awk '$3 ~ /^sync/' "$T/candidates" >"$T/syncs"
	# a few points cannot show the cuts while the store is made: those
	# wait for "all"
	ready=$(awk '$2 == "mark" && $3 == "ready" { print $1 }' "$T/candidates")
	awk -v r="${ready:-0}" '$2 != "mark" && $1 > r' "$T/candidates" >"$T/others"
	left=$((POINTS - $(wc -l <"$T/named")))
	[ "$left" -gt 0 ] || left=0
	ns=$(wc -l <"$T/syncs")
	ks=$((left / 2 < ns ? left / 2 : ns))
	# spread FILE K: K of FILE's lines, evenly apart
	spread() {
		awk -v n="$(wc -l <"$1")" -v k="$2" 'BEGIN { for (i = 0; i < k && i < n; i++) pick[int((i + 0.5) * n / k) + 1] = 1 }
			pick[FNR]' "$1"
	}
	{ cat "$T/named"; spread "$T/syncs" "$ks"; spread "$T/others" $((left - ks)); } |
		sort -n -k1,1 -u >"$T/points"
fi
npoints=$(wc -l <"$T/points")

# point_loads MARK: each client's acknowledged blocks load byte-exact or
# not at all; those that MARK's manifests hold and must survive (synced,
# or MARK is "clean") all load.  Sets LOADED, REQUIRED, LOST, WRONG and
# ABSENT; $T/load.bad says what failed.
point_loads() {
	local mark=$1 k st n
	LOADED=0 REQUIRED=0 LOST=0 WRONG=0 ABSENT=0
	: >"$T/load.bad"
	for k in $KINDS; do
		kvt_guard "$KVCLIENT" vllm-load --dir "$MNT" --model "$k" --size "$SIZE" \
			--threads 4 --manifest "$T/manifest.$k" --report \
			>"$T/load.$k" 2>"$T/load.$k.err"
		st=$?
		LOADED=$((LOADED + $(wc -l <"$T/manifest.$k")))
		# "<key> ok", "<key> <step> enoent|eio", else wrong bytes
		WRONG=$((WRONG + $(grep -cE ' (wrong|short|error) ' "$T/load.$k")))
		ABSENT=$((ABSENT + $(grep -cE ' (enoent|eio)$' "$T/load.$k")))
		if [ "$st" != 0 ] && ! grep -qE ' (wrong|short|error) ' "$T/load.$k"; then
			WRONG=$((WRONG + 1))
			echo "$k: vllm-load exit status $st: $(head -n 3 "$T/load.$k.err")" >>"$T/load.bad"
		fi
		grep -E ' (wrong|short|error) ' "$T/load.$k" | sed "s/^/$k: /" >>"$T/load.bad"
		[ -n "$mark" ] || continue
		[ "$mark" = clean ] || [[ " $SYNCED " == *" $k "* ]] || continue
		# keys of MARK's manifest that did not load
		n=$(awk -v m="$mark" -v k="$k" '$1 == m { for (i = 2; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$T/marks")
		[ -n "$n" ] || bail "no count of $k at mark $mark"
		REQUIRED=$((REQUIRED + n))
		head -n "$n" "$T/manifest.$k" >"$T/need.$k"
		awk 'FNR == NR { need[$3] = 1; next } $2 != "ok" && need[$1]' \
			"$T/need.$k" "$T/load.$k" | sed "s/^/$k: lost: /" >"$T/lost.$k"
		LOST=$((LOST + $(wc -l <"$T/lost.$k")))
		cat "$T/lost.$k" >>"$T/load.bad"
	done
}

# fsck_kinds ARGS...: kvtierfs-fsck ARGS; FSCK_RC, and in KINDS_FOUND the
# problems found by kind ("orphan=3 ...").
fsck_kinds() {
	"$KVTIERFS_FSCK" "$@" >"$T/fsck.out" 2>"$T/fsck.err"
	FSCK_RC=$?
	KINDS_FOUND=$(awk '$1 !~ /^kvtierfs-fsck:/ { n[$1]++ }
		END { for (k in n) printf "%s=%d\n", k, n[k] }' "$T/fsck.out" | LC_ALL=C sort | tr '\n' ' ')
	KINDS_FOUND=${KINDS_FOUND% }
}

# only_kinds ALLOWED...: fsck did not fail (exit 0 or 4, nothing on
# stderr) and found nothing but ALLOWED.
only_kinds() {
	local k
	[ "$FSCK_RC" = 0 ] || [ "$FSCK_RC" = 4 ] || return 1
	[ -s "$T/fsck.err" ] && return 1
	for k in $KINDS_FOUND; do
		[[ " $* " == *" ${k%=*} "* ]] || return 1
	done
}

show_fsck() {
	diag "kvtierfs-fsck exit status $FSCK_RC; kinds: ${KINDS_FOUND:-none}"
	# a file: diag_file shows nothing of an empty-looking pipe
	grep -v '^orphan ' "$T/fsck.out" >"$T/fsck.shown"
	diag_file "$T/fsck.shown" 20
	diag_file "$T/fsck.err" 10
}

# check_point I ENTRY KIND NAME: the disk rebuilt up to ENTRY, checked.
# Eight test points.
PER_POINT=8
check_point() {
	local i=$1 e=$2 kind=$3 name=$4 what mark st c
	what="point $i/$npoints (entry $e, $kind${name:+ $name})"
	[ "$name" = - ] && what="point $i/$npoints (entry $e, $kind)"
	# the last mark at or before ENTRY says what must be there
	mark=$(awk -v e="$e" '$1 <= e && $4 ~ /MARK/ && $5 ~ /^(sync[0-9]+|ready|stored|clean)$/ { m = $5 }
		END { print m }' "$T/entries")
	"$KVT_LOGWRITES" replay "$LOG" "$REPLAY" "$((replayed + 1))" "$e" 2>"$T/replay.err" ||
		bail "$what: cannot replay the log: $(head -n 2 "$T/replay.err")"
	replayed=$e
	cp --sparse=always "$REPLAY" "$CHECK" || bail "cp failed"
	why=
	if ! mount -t ext4 -o loop "$CHECK" "$DISK" 2>"$T/mount.err"; then
		why="ext4 does not mount: $(head -n 2 "$T/mount.err")"
	elif ! umount "$DISK"; then
		why="cannot unmount ext4"
	elif ! e2fsck -fn "$CHECK" >"$T/e2fsck.out" 2>&1; then
		why="e2fsck -fn after the journal replay: $(tail -n 5 "$T/e2fsck.out")"
	elif ! mount -t ext4 -o loop "$CHECK" "$DISK" 2>"$T/mount.err"; then
		why="ext4 does not mount again: $(head -n 2 "$T/mount.err")"
	fi
	ok "$([ -z "$why" ]; echo $?)" "$what: ext4 mounts, its journal replayed, and e2fsck -fn finds it clean"
	[ -z "$why" ] || bail "$what: $why"
	fsck_kinds "$DISK"
	if [ -z "$mark" ] && [ "$FSCK_RC" = 8 ] && [ "$(ls -A "$DISK")" = lost+found ]; then
		# cut before the first mount made anything: no store yet,
		# the next mount makes one
		ok 0 "$what: no store yet (kvtierfs-fsck: exit 8, the directory holds only lost+found)"
	elif only_kinds orphan stale-staging torn-size torn-hash unparsable; then
		ok 0 "$what: before the mount kvtierfs-fsck finds only what a cut leaves (${KINDS_FOUND:-nothing})"
	else
		ok 1 "$what: before the mount kvtierfs-fsck finds only what a cut leaves (${KINDS_FOUND:-nothing})"
		show_fsck
		if [ -z "$mark" ]; then
			# cut while the first mount made the store: what is
			# left may not mount; the other points go on
			diag "$what: the store half made, the disk holds: $(ls -A "$DISK" | tr '\n' ' ')"
			for c in mount loads synced verify unmount fsck; do
				skip "$what: $c" "the store is half made (the point above)"
			done
			umount "$DISK" || bail "cannot unmount ext4 from $CHECK"
			all_refused=$((all_refused + 1))
			return
		fi
	fi
	kvt_mount
	point_loads "$mark"
	[ "$WRONG" = 0 ] && [ "$LOADED" -gt 0 ]
	ok $? "$what: $LOADED acknowledged blocks load byte-exact or not at all ($ABSENT absent)" ||
		diag_file "$T/load.bad" 20
	[ "$LOST" = 0 ]
	ok $? "$what: the $REQUIRED blocks ${mark:+acknowledged before mark }${mark:-(no mark yet)}$([ "$mark" = clean ] || echo ' and synced') are all there ($LOST lost)" ||
		diag_file "$T/load.bad" 20
	ok_kvclient "$what: every name in the store reads back byte-exact (torn: ENOENT or EIO)" \
		verify --dir "$MNT" --size "$SIZE" --report --no-tmp || WRONG=$((WRONG + 1))
	checked=$((checked + LOADED + $(sed -n 's/.* blocks=\([0-9]*\).*/\1/p' "$KVT_OUT")))
	kvt_umount
	fsck_kinds "$DISK"
	only_kinds orphan
	ok $? "$what: after the mount kvtierfs-fsck finds only orphans (${KINDS_FOUND:-nothing})" ||
		show_fsck
	umount "$DISK" || bail "cannot unmount ext4 from $CHECK"
	echo "# $what: mark=${mark:-none} loaded=$LOADED absent=$ABSENT required=$REQUIRED lost=$LOST wrong=$WRONG orphans=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^orphan=/) print substr($i, 8) }' <<<"$KINDS_FOUND")"
	all_wrong=$((all_wrong + WRONG)) all_lost=$((all_lost + LOST))
	all_required=$((all_required + REQUIRED))
}

cp --sparse=always "$BASE" "$REPLAY" || bail "cp failed"
replayed=0 checked=0 all_wrong=0 all_lost=0 all_required=0 all_refused=0 i=0 tp=$SECONDS
while read -r e kind name; do
	i=$((i + 1))
	check_point "$i" "$e" "$kind" "$name"
done <"$T/points"

# Points checked, and blocks that had to survive there: none would be a
# check that ran on nothing.
[ "$i" = "$npoints" ] && [ "$npoints" -ge 3 ] && [ "$all_required" -gt 0 ] &&
	[ "$all_wrong" = 0 ] && [ "$all_lost" = 0 ] && [ "$all_refused" = 0 ]
ok $? "$npoints points of $((nflush + nmark)) flushes and marks checked in $((SECONDS - tp)) s: $all_required synced blocks required, $all_lost lost, $all_wrong wrong, $all_refused stores half made"
plan $((5 + npoints * PER_POINT + 1))
kvt_stress_summary "$npoints" "$checked" "$all_wrong" "$all_lost" -
