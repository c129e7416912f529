#!/bin/bash
# Orphans reclaimed by a mounted store.
#
# 1. kill -9 of the daemon in the middle of 16-thread O_DIRECT stores, then
#    the records of 8 published blocks removed from the unmounted store (a
#    power cut: objects survive, records do not).  kvtierfs-fsck counts the
#    orphans; a mount with fast reclamation removes exactly them, counts
#    them (orphans_reclaimed, orphan_bytes_reclaimed) and logs one line;
#    every name still reads back and fsck finds the store clean.
# 2. Two mounts on one LOWERDIR, both reclaiming as fast as they can, while
#    one moves the blocks of a mount that is gone back and forth between
#    directories (and renames the directory), both publish, and a third
#    mount is killed in the middle of its stores: every name reads back,
#    the dead mount's orphans are reclaimed, fsck finds the store clean.
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
SIZE=$((256 << 10))
FAST=reclaim=1000000,reclaim_interval=0.1

kvt_require_root
plan 40
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"

# stat_of MNT NAME: the mount's counter NAME.
stat_of() {
	kvt_xattr "$1" user.kvtierfs.stats | awk -v n="$2" '$1 == n { print $2 }'
}

# wait_stat MNT NAME MIN: wait (60 s at most) until counter NAME of MNT is
# at least MIN.  The passes run in the background: there is no event to
# wait on but the counter.
wait_stat() {
	local v i
	for i in $(seq 300); do
		v=$(stat_of "$1" "$2")
		[ -n "$v" ] && [ "$v" -ge "$3" ] && return 0
		sleep 0.2
	done
	diag "$2 of $1 is ${v:-?} after 60 s, expected at least $3"
	return 1
}

# fsck ARGS...: kvtierfs-fsck; $rc, stdout in $T/fsck.out.
fsck() {
	"$KVTIERFS_FSCK" "$@" >"$T/fsck.out" 2>"$T/fsck.err"
	rc=$?
}

# start_client ARGS...: kvclient in the background, its stdout on fd $CFD.
start_client() {
	exec {CFD}< <(exec "$KVCLIENT" "$@" 2>>"$T/client.err" {_kvt_out}>&- {_kvt_err}>&-)
	CPID=$!
	kvt_bg "$CPID"
}

# wait_progress N: until the client said "progress >= N"; sets PROGRESS.
wait_progress() {
	local want=$1 line
	PROGRESS=0
	while IFS= read -r -t 60 -u "$CFD" line; do
		case $line in
		"progress "*) PROGRESS=${line#progress } ;;
		esac
		[ "$PROGRESS" -ge "$want" ] && return 0
	done
	return 1
}

# drain_client: the client's output to its end (it ends with the mount).
drain_client() {
	local line
	while IFS= read -r -t 60 -u "$CFD" line; do :; done
	exec {CFD}<&-
	wait "$CPID" 2>/dev/null
	return 0
}

# log_part PID: what daemon PID logged so far.
log_part() {
	tail -c +"$((${KVT_LOGOFF[$1]} + 1))" "$T/daemon.log"
}

# --- 1. kill -9, a power cut, then a mount reclaims ---------------------
kvt_mount reclaim=0
: >"$T/client.err"
start_client vllm-store --dir "$MNT" --blocks 2048 --size $SIZE --threads 16 --odirect \
	--progress 8
wait_progress 96
ok $? "16 threads stored $PROGRESS blocks (waiting for 96)"
STORED=$PROGRESS
kvt_kill9
drain_client
mapfile -t LOST < <(find "$LOWER/names" -name '*.bin' -type f | LC_ALL=C sort | head -n 8)
rm -f "${LOST[@]}"
[ ${#LOST[@]} = 8 ] && ! [ -e "${LOST[0]}" ]
ok $? "power cut: the records of 8 published blocks lost, their objects kept"

fsck "$LOWER"
grep '^orphan ' "$T/fsck.out" | awk '{ p = $2; sub(/:$/, "", p); print p }' |
	LC_ALL=C sort >"$T/orphans"
N_ORPH=$(grep -c '' "$T/orphans")
# the distinct objects behind them: their bytes go
N_OBJ=$(sed 's|^objects/../\([0-9a-f]*\).*|\1|' "$T/orphans" | LC_ALL=C sort -u | grep -c '')
BYTES=$((N_OBJ * SIZE))
[ "$rc" = 4 ] && [ "$N_ORPH" -ge 16 ]
ok $? "kvtierfs-fsck: $N_ORPH orphan links of $N_OBJ objects (the 8 lost records' and the dead mount's)" ||
	diag_file "$T/fsck.out"
grep -c '^stale-staging ' "$T/fsck.out" | grep -qx 1
ok $? "... and the dead mount's staging"

kvt_mount "$FAST"
PID1=$KVT_PID
wait_stat "$MNT" orphans_reclaimed "$N_ORPH"
ok $? "the mount reclaims in the background"
got=$(stat_of "$MNT" orphans_reclaimed)
[ "$got" = "$N_ORPH" ]
ok $? "orphans_reclaimed: $got, exactly the $N_ORPH fsck found"
got=$(stat_of "$MNT" orphan_bytes_reclaimed)
[ "$got" = "$BYTES" ]
ok $? "orphan_bytes_reclaimed: $got, the $N_OBJ objects' bytes ($BYTES)"
left=0
while IFS= read -r p; do
	[ -e "$LOWER/$p" ] && left=$((left + 1))
done <"$T/orphans"
[ "$left" = 0 ]
ok $? "every orphan fsck listed is gone from LOWERDIR ($left left)"
n=$(log_part "$PID1" | grep -c "reclaimed $N_ORPH orphan object link(s), $BYTES bytes")
all=$(log_part "$PID1" | grep -c "reclaimed [0-9]* orphan")
[ "$n" = 1 ] && [ "$all" = 1 ]
ok $? "one log line says it: $(log_part "$PID1" | grep -m1 'reclaimed [0-9]* orphan')"
wait_stat "$MNT" reclaim_passes 3
ok $? "later passes run, and find nothing ($(stat_of "$MNT" reclaim_passes) passes)"
[ "$(stat_of "$MNT" orphans_reclaimed)" = "$N_ORPH" ]
ok $? "orphans_reclaimed still $N_ORPH"
ok_kvclient "every name still reads back: at least the $STORED published blocks, less the 8 lost" \
	verify --dir "$MNT" --min $((STORED - 8)) --size $SIZE --no-tmp
gone=0
for p in "${LOST[@]}"; do
	rel=${p#"$LOWER"/names/}
	kvt_run test -e "$MNT/$rel" && gone=1
done
[ "$gone" = 0 ]
ok $? "the 8 lost blocks are absent"
kvt_umount
fsck "$LOWER"
[ "$rc" = 0 ]
ok $? "kvtierfs-fsck: clean: $(tail -n 1 "$T/fsck.out")" || diag_file "$T/fsck.out"

# --- 2. two mounts publish and move while both reclaim -----------------
kvt_new_lower
# In memory: the next test does not wait for these files to be written back.
mount -t tmpfs -o size=1g kvt-reclaim "$LOWER" || bail "mount tmpfs"
M0=64
kvt_mount reclaim=0
ok_kvclient "a mount stores $M0 blocks, then goes" \
	vllm-store --dir "$MNT" --model m0 --blocks $M0 --size 65536 --threads 8 --odirect
kvt_umount
mapfile -t ALL < <(cd "$LOWER/names" && find . -name '*.bin' -type f | sed 's|^\./||' | LC_ALL=C sort)
# a power cut: 4 records lost (8 orphan links); 16 of the rest will move
for b in "${ALL[@]:0:4}"; do rm -f "$LOWER/names/$b"; done
BLK=("${ALL[@]:4:16}")
[ ${#ALL[@]} = $M0 ] && [ ${#BLK[@]} = 16 ] && ! [ -e "$LOWER/names/${ALL[0]}" ]
ok $? "$M0 names of a mount that is gone, 4 of their records lost: all their objects are candidates"
M0=$((M0 - 4))

MNT2=$T/mnt2
MNT3=$T/mnt3
mkdir "$MNT2" "$MNT3"
kvt_mount "$FAST"
PIDA=$KVT_PID
kvt_start "$LOWER" "$MNT2" "$FAST"
PIDB=$KVT_LAST_PID
kvt_start "$LOWER" "$MNT3" reclaim=0
PIDC=$KVT_LAST_PID

# mover ROUNDS: each round moves every block of m0 into moved/ and back,
# then renames moved/ away and back; prints the moves it made.
cat >"$T/mover" <<'EOF'
#!/bin/bash
mnt=$1 rounds=$2
shift 2
n=0
mkdir -p "$mnt/moved" || exit 1
for r in $(seq "$rounds"); do
	for b in "$@"; do
		mv "$mnt/$b" "$mnt/moved/" || exit 1
		n=$((n + 1))
	done
	mv "$mnt/moved" "$mnt/moved.away" && mv "$mnt/moved.away" "$mnt/moved" || exit 1
	for b in "$@"; do
		mv "$mnt/moved/${b##*/}" "$mnt/$b" || exit 1
		n=$((n + 1))
	done
done
echo "$n"
EOF
chmod +x "$T/mover"
# writer MNT MODEL: stores batches of 50 blocks of MODEL through MNT, a
# fifth of a second apart, until $T/stop exists; prints the number of
# batches.
cat >"$T/writer" <<'EOF'
#!/bin/bash
mnt=$1 model=$2 n=0
until [ -e "$T/stop" ]; do
	"$KVCLIENT" vllm-store --dir "$mnt" --model "$model" --key-base $((n * 50)) \
		--blocks 50 --size 16384 --threads 4 --odirect >/dev/null || exit 1
	n=$((n + 1))
	sleep 0.2
done
echo "$n"
EOF
chmod +x "$T/writer"
export T
kvt_run "$T/mover" "$MNT" 2 "${BLK[@]}" >"$T/moves" 2>"$T/moves.err" &
MOVER=$!
kvt_bg "$MOVER"
kvt_run "$T/writer" "$MNT" ma >"$T/storeA" 2>&1 &
SA=$!
kvt_bg "$SA"
kvt_run "$T/writer" "$MNT2" mb >"$T/storeB" 2>&1 &
SB=$!
kvt_bg "$SB"
: >"$T/client.err"
start_client vllm-store --dir "$MNT3" --model mc --blocks 4096 --size $SIZE --threads 16 \
	--odirect --progress 8
wait_progress 64
ok $? "a third mount stored $PROGRESS blocks"
kill -KILL "$PIDC"
wait "$PIDC" 2>/dev/null
unset "KVT_DAEMONS[$PIDC]"
fusermount3 -u -z "$MNT3"
drain_client
ok 0 "... and was killed (kill -9) in the middle of its stores"
wait "$MOVER"
ok $? "mount A moved the gone mount's names $(cat "$T/moves") times, and renamed their directory" ||
	diag_file "$T/moves.err"
touch "$T/stop"
wait "$SA"
ok $? "meanwhile mount A published $(cat "$T/storeA") batches of 50 blocks" || diag_file "$T/storeA"
NA=$(($(cat "$T/storeA") * 50))
wait "$SB"
ok $? "meanwhile mount B published $(cat "$T/storeB") batches of 50 blocks" || diag_file "$T/storeB"
NB=$(($(cat "$T/storeB") * 50))
ab=$(( $(stat_of "$MNT" reclaim_aborted) + $(stat_of "$MNT2" reclaim_aborted) ))
pa=$(( $(stat_of "$MNT" reclaim_passes) + $(stat_of "$MNT2" reclaim_passes) ))
[ "$ab" -gt 0 ]
ok $? "passes met the moves and stopped before their sweep ($ab stopped, $pa swept)"

# a pass that begins now sees the third mount dead and nothing moving
pa=$(stat_of "$MNT" reclaim_passes)
pb=$(stat_of "$MNT2" reclaim_passes)
wait_stat "$MNT" reclaim_passes $((pa + 2)) && wait_stat "$MNT2" reclaim_passes $((pb + 2))
ok $? "then both mounts complete passes"
rc_=$(( $(stat_of "$MNT" orphans_reclaimed) + $(stat_of "$MNT2" orphans_reclaimed) ))
[ "$rc_" -ge 8 ]
ok $? "the lost records' orphans and the killed mount's were reclaimed ($rc_ links, 8 of them the lost records')"
# model_dir MODEL: the vLLM layout's directory of MODEL (rank 0)
model_dir() {
	(cd "$LOWER/names" && ls -d "$1"_*_r0)
}
ok_kvclient "every block of the gone mount reads back, after all the moves (mount A)" \
	verify --dir "$MNT/$(model_dir m0)" --expect $M0 --size 65536 --no-tmp
ok_kvclient "... and through mount B" \
	verify --dir "$MNT2/$(model_dir m0)" --expect $M0 --size 65536 --no-tmp
ok_kvclient "every block mount A published reads back ($NA)" \
	verify --dir "$MNT/$(model_dir ma)" --expect $NA --size 16384 --no-tmp
ok_kvclient "every block mount B published reads back ($NB)" \
	verify --dir "$MNT2/$(model_dir mb)" --expect $NB --size 16384 --no-tmp
kvt_umount
kvt_stop "$MNT2" "$PIDB"
fsck "$LOWER"
[ "$rc" = 0 ]
ok $? "kvtierfs-fsck: clean: $(tail -n 1 "$T/fsck.out")" || diag_file "$T/fsck.out"
