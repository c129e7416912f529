#!/bin/bash
# A budget: -o max_size and -o min_free bound what the tier's objects
# hold.  statfs shows the budget as the file system's size and the
# objects' bytes as its use, so that df and an evictor that watches
# statfs (llm-d's) see the tier's own limit.  A store past the budget is
# refused with ENOSPC and publishes nothing, one log line; a store of
# bytes held already (a dedup) takes no room and goes through; an unlink
# gives room back, counting an object shared by two names once.  The
# usage is counted again at each mount: right after a remount, a kill -9
# and a removal outside the mount.  min_free keeps that share of a small
# lower file system free.  All with -o evict=off: the store refuses
# (t-evict.sh evicts).
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 27
kvt_setup
MiB=1048576

# used: the mount's statfs "size used" in bytes.
used() { stat -f -c '%b %f %S' "$MNT" | awk '{ print ($1 - $2) * $3 }'; }
size() { stat -f -c '%b %S' "$MNT" | awk '{ print $1 * $2 }'; }
# mount_tier OPT...: kvt_mount, the log's lines from here on the mount's.
mount_at=0
mount_tier() {
	mount_at=$(stat -c %s "$T/daemon.log")
	kvt_mount "$@"
}
# counted BYTES: until this mount's log says its count found BYTES.
counted() {
	kvt_wait_log "the store's objects hold $1 bytes" 1 "$mount_at"
}
for i in $(seq 1 10); do head -c $MiB /dev/urandom >"$T/b$i" || bail "random bytes"; done
store() { cp "$T/b$1" "$MNT/b$1.tmp" && mv "$MNT/b$1.tmp" "$MNT/b$1.bin"; }

mount_tier max_size=8M,evict=off
counted 0
ok $? "the first count finds an empty store"
s=$(size) u=$(used)
[ "$s" = $((8 * MiB)) ] && [ "$u" = 0 ]
ok $? "statfs: the size is the budget, 8 MiB ($s), none used ($u)"
bad=0
for i in $(seq 1 8); do store "$i" || bad=$((bad + 1)); done
u=$(used)
[ "$bad" = 0 ] && [ "$u" = $((8 * MiB)) ]
ok $? "8 blocks of 1 MiB stored ($bad failed); used $u"
err=$(store 9 2>&1)
rc=$?
[ "$rc" != 0 ] && [[ "$err" == *"No space left on device"* ]] && [ ! -e "$MNT/b9.bin" ]
ok $? "a 9th is refused: ENOSPC, nothing published (exit $rc: $err)"
n=$(grep -c "no room for a new object of $MiB bytes: the tier holds $((8 * MiB)) bytes, its budget (-o max_size) leaves none" "$T/daemon.log")
[ "$n" = 1 ]
ok $? "the log says so in one line ($n)"
rm -f "$MNT/b9.tmp"
cp "$T/b1" "$MNT/dup.bin" && cmp -s "$T/b1" "$MNT/dup.bin" && [ "$(used)" = $((8 * MiB)) ]
ok $? "a block stored before, stored again under another name (a dedup): taken, no room used"
rm "$MNT/b1.bin" "$MNT/b2.bin"
u=$(used)
[ "$u" = $((7 * MiB)) ]
ok $? "two unlinks, one of an object another name shares: 1 MiB given back ($u used)"
store 9 && cmp -s "$T/b9" "$MNT/b9.bin" && [ "$(used)" = $((8 * MiB)) ]
ok $? "the 9th now fits, and reads back"
kvt_umount

mount_tier max_size=8M,evict=off
counted $((8 * MiB))
ok $? "a remount counts the same usage"
[ "$(used)" = $((8 * MiB)) ]
ok $? "and statfs shows it"
kvt_kill9
mount_tier max_size=8M,evict=off
counted $((8 * MiB))
ok $? "after a kill -9, the same"
kvt_umount

# Removed outside the mount: b3's record and every link of its object.
obj=$(basename "$(grep -h '^hash ' "$LOWER/names/b3.bin" | cut -d' ' -f2)")
rm -f "$LOWER/names/b3.bin" "$LOWER"/objects/*/"$obj"*
mount_tier max_size=8M,evict=off
counted $((7 * MiB))
ok $? "b3 removed below while unmounted: the next mount counts 7 MiB"
[ ! -e "$MNT/b3.bin" ] && [ "$(used)" = $((7 * MiB)) ]
ok $? "and statfs shows 7 MiB used"
kvt_umount

# min_free: a lower file system of 32 MiB, half of it kept free.
mkdir "$T/disk"
mount -t tmpfs -o size=32m kvt-budget "$T/disk" || bail "mount tmpfs"
LOWER=$T/disk/lower
mkdir -m 0700 "$LOWER"
mount_tier min_free=50,evict=off
counted 0
ok $? "min_free=50 on a 32 MiB lower file system: counted"
stored=0
for i in $(seq 1 32); do
	head -c $MiB /dev/urandom >"$T/m$i"
	cp "$T/m$i" "$MNT/m$i.tmp" 2>/dev/null && mv "$MNT/m$i.tmp" "$MNT/m$i.bin" 2>/dev/null || break
	stored=$((stored + 1))
done
avail=$(df -B1 --output=avail "$T/disk" | tail -n 1)
# Half of 32 MiB kept free; the refused block's own 1 MiB still staged.
kvt_num_cmp "$stored" -ge 10 && kvt_num_cmp "$stored" -lt 16 &&
	kvt_num_cmp "$avail" -ge $((15 * MiB))
ok $? "stores stop before the lower file system's free space falls below half: $stored stored, $avail bytes free"
[ ! -e "$MNT/m$((stored + 1)).bin" ]
ok $? "the refused one is not published"
grep -q "its budget (-o min_free) leaves none" "$T/daemon.log"
ok $? "the log says min_free refused it"
kvt_umount
