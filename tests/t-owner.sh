#!/bin/bash
# A name's owner, group and mode are its record's, not its lower file's:
# everything below LOWERDIR is root's and 0600 (store format 2), and what
# a name shows is what kvtierfs wrote; a directory's, written in its lower
# directory (root's, 0700), which no client reads or sets.  Before format 2 a record file was
# chowned to its name's owner and given its mode, so that a user owned
# files in the store, and a chown on the lower disk changed who owned a
# name.  A store of format 1 is upgraded by a mount that finds no other
# mount on it, and refused, the store untouched, while one is there.
# The users are t-users.sh's (made here when absent, left in place).
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v setpriv >/dev/null || bail "setpriv is missing (util-linux)"
MKSTORE=$top_builddir/tests/mkstore
[ -x "$MKSTORE" ] || bail "tests/mkstore is not built (make check)"
PY=$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3) || bail "python3 is missing"
U1=kvtu1
U2=kvtu2
kvt_make_users "$U1" "$U2"
uid1=$(id -u "$U1") gid1=$(id -g "$U1") uid2=$(id -u "$U2") gid2=$(id -g "$U2")

plan 29
kvt_setup
chmod 755 "$T"
as() { kvt_as "$@"; }
# shown PATH: "uid:gid mode" of PATH.
shown() { kvt_run stat -c '%u:%g %a' "$1" 2>&1; }

# --- a store of this format ------------------------------------------------
mkdir -m 0700 "$LOWER"
kvt_mount allow_other
install -d -o "$U1" -g "$gid1" -m 0755 "$MNT/$U1" || bail "install -d failed"
as "$U1" sh -c 'umask 027 && echo one >"$1/blk.bin"' sh "$U1"
ok $? "$U1 stores a block (mode 0640)"
got=$(shown "$MNT/$U1/blk.bin")
[ "$got" = "$uid1:$gid1 640" ]
ok $? "the mount shows it $U1's, 0640 ($got)"
got=$(shown "$LOWER/names/$U1/blk.bin")
[ "$got" = "0:0 600" ]
ok $? "its record file is root's and 0600 ($got)"
grep -qx "owner $uid1 $gid1" "$LOWER/names/$U1/blk.bin" &&
	grep -qx "mode 640" "$LOWER/names/$U1/blk.bin"
ok $? "the record says the owner and the mode" ||
	diag_file "$LOWER/names/$U1/blk.bin" 10
as "$U1" sh -c 'umask 027 && mkdir "$1/sub" && mkdir "$1/sub/deeper"' sh "$U1"
got="$(shown "$MNT/$U1") $(shown "$MNT/$U1/sub") / $(shown "$LOWER/names/$U1") $(shown "$LOWER/names/$U1/sub")"
[ "$got" = "$uid1:$gid1 755 $uid1:$gid1 750 / 0:0 700 0:0 700" ]
ok $? "directories show their owner and mode; their lower directories are root's 0700 ($got)"
kvt_run chmod 2770 "$MNT/$U1/sub" && kvt_run chgrp "$gid2" "$MNT/$U1/sub" &&
	as "$U1" mkdir "$U1/sub/sgid"
got="$(shown "$MNT/$U1/sub") $(shown "$MNT/$U1/sub/sgid")"
[ "$got" = "$uid1:$gid2 2770 $uid1:$gid2 2755" ]
ok $? "a set-group-ID directory hands its group and the bit down ($got)"
v=$(as "$U1" getfattr --only-values -n user.kvtierfs.dir "$U1/sub" 2>&1)
l=$(as "$U1" getfattr -d -m - "$U1/sub" 2>&1)
as "$U1" setfattr -n user.kvtierfs.dir -v "0 0 7777" "$U1/sub" 2>/dev/null
rc=$?
[[ "$v" == *"No such attribute"* ]] && [[ "$l" != *kvtierfs* ]] && [ "$rc" != 0 ] &&
	[ "$(shown "$MNT/$U1/sub")" = "$uid1:$gid2 2770" ]
ok $? "what a directory shows is kvtierfs's: not read, listed nor set through the mount (set: exit $rc)"
others=$(find "$LOWER" ! -user root -printf '%P ' ; find "$LOWER" -mindepth 1 -perm /077 ! -path "$LOWER/names" -printf '%P ')
[ -z "$others" ]
ok $? "everything below LOWERDIR is root's, and nothing but names/ open to group or others (${others:-none})"
kvt_run chown "$U2:$gid2" "$MNT/$U1/blk.bin" && kvt_run chmod 0604 "$MNT/$U1/blk.bin"
got="$(shown "$MNT/$U1/blk.bin") / $(shown "$LOWER/names/$U1/blk.bin")"
[ "$got" = "$uid2:$gid2 604 / 0:0 600" ]
ok $? "chown and chmod of the published block: the name changes, the record file stays root's 0600 ($got)"
kvt_umount

kvt_mount allow_other
got="$(shown "$MNT/$U1/blk.bin") $(shown "$MNT/$U1/sub/sgid")"
[ "$got" = "$uid2:$gid2 604 $uid1:$gid2 2755" ] && [ "$(as "$U2" cat "$U1/blk.bin")" = one ]
ok $? "after a remount: the block $U2's, 0604, and $U2 reads it; the directory as it was ($got)"
kvt_umount
# Who a name belongs to is what the record says: a chown on the lower
# disk is no way to take another user's name.
chown "$uid1:$gid1" "$LOWER/names/$U1/blk.bin" && chmod 0666 "$LOWER/names/$U1/blk.bin"
kvt_mount allow_other
got=$(shown "$MNT/$U1/blk.bin")
[ "$got" = "$uid2:$gid2 604" ]
ok $? "a chown and chmod of the record file below change nothing the mount shows ($got)"
as "$U1" sh -c 'echo mine >"$1/blk.bin"' sh "$U1" 2>/dev/null
[ "$(kvt_run cat "$MNT/$U1/blk.bin")" = one ]
ok $? "and give $U1 no right to write it"
kvt_umount

# --- a store of format 1 ---------------------------------------------------
"$MKSTORE" format1 "$LOWER" >"$T/out" 2>&1 || diag_file "$T/out" 5
got="$(cat "$LOWER/kvtierfs-store") / $(shown "$LOWER/names/$U1/blk.bin")"
[ "$got" = "kvtierfs-store 1 / $uid2:$gid2 604" ] &&
	! grep -q '^owner ' "$LOWER/names/$U1/blk.bin"
ok $? "made a store of format 1: marker 1, the record file chowned and chmodded ($got)"

# Another mount on it, as an older kvtierfs: a live staging lock.
mkdir -p "$LOWER/staging/older" && : >"$LOWER/staging/older/lock"
exec 3< <(exec "$PY" -c '
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)' "$LOWER/staging/older/lock")
holder=$!
read -r -t 30 line <&3
[ "$line" = locked ] || bail "the lock holder did not start: $line"
mkdir -p "$T/mnt2"
kvt_run timeout 30 "$KVTIERFS" -f "$LOWER" "$T/mnt2" >"$T/out" 2>&1 </dev/null
rc=$?
if kvt_is_mounted "$T/mnt2"; then fusermount3 -u -z "$T/mnt2"; rc="0 (it mounted)"; fi
[ "$rc" != 0 ] && [ "$(cat "$LOWER/kvtierfs-store")" = "kvtierfs-store 1" ] &&
	grep -q "store format 1, in use by another mount: unmount it (every host), then mount again to upgrade the store to format 2" "$T/out"
ok $? "with another mount on it, the mount refuses, the store left format 1 (exit $rc): $(head -n 1 "$T/out")"
kill "$holder" 2>/dev/null
exec 3<&-
rm -rf "$LOWER/staging/older"

kvt_mount allow_other
[ "$(cat "$LOWER/kvtierfs-store")" = "kvtierfs-store 2" ] &&
	grep -q "store format 1 upgraded to 2: a kvtierfs of format 1 no longer mounts it" "$T/daemon.log"
ok $? "alone on it, a mount upgrades it to format 2, and says so"
got=$(shown "$MNT/$U1/blk.bin")
[ "$got" = "$uid2:$gid2 604" ] && [ "$(as "$U2" cat "$U1/blk.bin")" = one ]
ok $? "a record of format 1 shows its record file's owner and mode, and reads ($got)"
kvt_run chmod 0640 "$MNT/$U1/blk.bin"
got="$(shown "$MNT/$U1/blk.bin") / $(shown "$LOWER/names/$U1/blk.bin")"
[ "$got" = "$uid2:$gid2 640 / 0:0 600" ] && grep -qx "owner $uid2 $gid2" "$LOWER/names/$U1/blk.bin"
ok $? "a chmod writes it again in format 2: the record file root's 0600 ($got)"
as "$U1" sh -c 'echo two >"$1/new.bin"' sh "$U1"
got=$(shown "$LOWER/names/$U1/new.bin")
[ "$got" = "0:0 600" ]
ok $? "a new block's record file is root's 0600 ($got)"
kvt_umount

# --- kvtierfs-fsck reads both ----------------------------------------------
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
"$KVTIERFS_FSCK" "$LOWER" >"$T/out" 2>&1
ok $? "kvtierfs-fsck finds the upgraded store clean (exit $?)" || diag_file "$T/out" 10
"$MKSTORE" format1 "$LOWER" >"$T/out" 2>&1 || diag_file "$T/out" 5
"$KVTIERFS_FSCK" "$LOWER" >"$T/out" 2>&1
ok $? "and a store of format 1" || diag_file "$T/out" 10
echo "kvtierfs-store 3" >"$LOWER/kvtierfs-store"
mkdir -p "$T/mnt2"
kvt_run timeout 30 "$KVTIERFS" -f "$LOWER" "$T/mnt2" >"$T/out" 2>&1 </dev/null
rc=$?
if kvt_is_mounted "$T/mnt2"; then fusermount3 -u -z "$T/mnt2"; rc="0 (it mounted)"; fi
[ "$rc" != 0 ] && grep -q "store format 3, this kvtierfs reads formats 1 to 2" "$T/out"
ok $? "a store of a later format is refused (exit $rc): $(head -n 1 "$T/out")"
