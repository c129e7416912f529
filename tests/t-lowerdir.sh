#!/bin/bash
# LOWERDIR closed: the users of a shared mount (-o allow_other) reach the
# store through the mount only.  An unprivileged user who could enter
# LOWERDIR would list objects/ (every user's hashes and sizes), read
# records and objects, forge records in names/ and lock the marker's
# reclaimer byte (reclamation stops on every mount).  So:
#  - a LOWERDIR that others can enter (0755, as mkdir makes it) is 0700
#    once mounted, and the log says so in one line; then each of those
#    steps, taken by kvtu1, is refused (EACCES);
#  - a LOWERDIR owned by another user (who could open it again at will)
#    is refused by the mount and by kvtierfs-fsck, in one line, exit != 0;
#  - kvtierfs-fsck reports an open LOWERDIR and, with --repair, closes it.
# Before LOWERDIR was closed (areas 0755, records owned by their client)
# kvtu1 listed objects/, read his record, wrote one into names/ and took
# the lock; objects themselves were already root's 0600.
# The users are t-users.sh's (made here when absent, left in place).
# kvt-kind: mount
# shellcheck disable=SC2016 # the users' scripts expand in their own sh
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v setpriv >/dev/null || bail "setpriv is missing (util-linux)"
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
# The users run the system's python3, not one in root's home.
PY=$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3) || bail "python3 is missing"
U1=kvtu1
U2=kvtu2
kvt_make_users "$U1" "$U2"

plan 21
kvt_setup
# The users get from the mount to LOWERDIR ($T/lower): the directories
# above $T are tests/run's, 0700, so their paths start in $MNT (../lower).
chmod 755 "$T"

# as USER CMD...: CMD as USER (its groups), in $MNT, under the hang guard.
as() { kvt_as "$@"; }
# refused DESC USER CMD...: CMD as USER fails with EACCES.
refused() {
	local desc=$1 rc
	shift
	as "$@" >"$T/out" 2>&1
	rc=$?
	[ "$rc" != 0 ] && grep -q 'Permission denied' "$T/out"
	ok $? "$desc: refused (exit $rc: $(head -c 200 "$T/out" | tr '\n' ' '))"
}

chmod 0755 "$LOWER"
kvt_mount allow_other
mode=$(stat -c %a "$LOWER")
[ "$mode" = 700 ]
ok $? "a LOWERDIR made 0755 is 0700 once mounted (now $mode)"
n=$(grep -c "LOWERDIR $LOWER: mode 0755 made 0700: others could reach the store" "$T/daemon.log")
kvt_num_cmp "$n" -eq 1
ok $? "the log says so in one line ($n)"

for u in "$U1" "$U2"; do
	install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
done
as "$U1" sh -c 'echo one >"$1/blk.bin"' sh "$U1" &&
	as "$U2" sh -c 'umask 077 && echo secret >"$1/blk.bin"' sh "$U2"
ok $? "$U1 and $U2 store a block each through the mount ($U2's 0600)"
obj=$(kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.object "$MNT/$U2/blk.bin")
[ -n "$obj" ] && [ -f "$LOWER/$obj" ] && [ -f "$LOWER/names/$U1/blk.bin" ]
ok $? "$U2's object ($obj) and $U1's record are in LOWERDIR"

refused "$U1 lists objects/" "$U1" ls ../lower/objects
refused "$U1 reads his own record" "$U1" cat "../lower/names/$U1/blk.bin"
refused "$U1 reads $U2's object" "$U1" cat "../lower/$obj"
refused "$U1 writes a record into names/$U1" "$U1" \
	sh -c 'echo forged >"../lower/names/$1/forged.bin"' sh "$U1"
# The reclaimer's lock is an OFD write lock on byte 4096 of the marker
# (layout.h); a read lock there is what would hold it off.
refused "$U1 takes a read lock on the marker's reclaimer byte" "$U1" "$PY" -c '
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 4096)
print("locked")' ../lower/kvtierfs-store
[ ! -e "$LOWER/names/$U1/forged.bin" ] && as "$U1" cat "$U1/blk.bin" >/dev/null &&
	! as "$U1" cat "$U2/blk.bin" >/dev/null 2>&1
ok $? "no record forged; through the mount $U1 reads his block, not $U2's"
kvt_umount

# --- kvtierfs-fsck on an open LOWERDIR ------------------------------------
chmod 0755 "$LOWER"
"$KVTIERFS_FSCK" "$LOWER" >"$T/out" 2>&1
rc=$?
mode=$(stat -c %a "$LOWER")
[ "$rc" = 4 ] && [ "$mode" = 755 ] &&
	grep -qx 'open-lowerdir \.: mode 0755: others can reach the store around the mount; it should be 0700' "$T/out"
ok $? "kvtierfs-fsck reports an open LOWERDIR and changes nothing (exit $rc, mode $mode)" ||
	diag_file "$T/out" 5
"$KVTIERFS_FSCK" --repair "$LOWER" >"$T/out" 2>&1
rc=$?
mode=$(stat -c %a "$LOWER")
[ "$rc" = 1 ] && [ "$mode" = 700 ] && grep -q '^open-lowerdir \.: .* (removed)$' "$T/out"
ok $? "kvtierfs-fsck --repair makes it 0700 (exit $rc, mode $mode)" || diag_file "$T/out" 5

# --- a LOWERDIR owned by another user --------------------------------------
# try_mount DIR: kvtierfs -f on DIR; sets rc, its output in $T/out.
try_mount() {
	mkdir -p "$T/mnt2"
	kvt_run timeout 30 "$KVTIERFS" -f "$1" "$T/mnt2" >"$T/out" 2>&1 </dev/null
	rc=$?
	if kvt_is_mounted "$T/mnt2"; then
		fusermount3 -u -z "$T/mnt2"
		rc="0 (it mounted)"
	fi
}
uid1=$(id -u "$U1")
chown "$U1" "$LOWER"
try_mount "$LOWER"
n=$(grep -c '' "$T/out")
[ "$rc" != 0 ] && [ "$n" = 1 ] &&
	grep -q "LOWERDIR $LOWER is owned by uid $uid1, not by root: its owner could reach the store around the mount" "$T/out"
ok $? "a store owned by $U1 is refused by the mount (exit $rc): $(head -n 1 "$T/out")"
"$KVTIERFS_FSCK" "$LOWER" >"$T/out" 2>&1
rc=$?
[ "$rc" = 8 ] && grep -q "LOWERDIR $LOWER is owned by uid $uid1, not by root" "$T/out"
ok $? "and by kvtierfs-fsck (exit $rc): $(head -n 1 "$T/out")"
chown root "$LOWER"

mkdir -m 0700 "$T/owned"
chown "$U1" "$T/owned"
try_mount "$T/owned"
[ "$rc" != 0 ] && grep -q "LOWERDIR $T/owned is owned by uid $uid1" "$T/out" &&
	[ -z "$(ls -A "$T/owned")" ]
ok $? "an empty LOWERDIR owned by $U1 is refused, not made a store (exit $rc)"

# --- a new store -----------------------------------------------------------
LOWER=$T/new
mkdir -m 0700 "$LOWER"
kvt_mount
modes=$(cd "$LOWER" && stat -c '%n %a' . objects names staging moves kvtierfs-store objects/00 | tr '\n' ' ')
[ "$modes" = ". 700 objects 700 names 755 staging 700 moves 700 kvtierfs-store 600 objects/00 700 " ]
ok $? "a new store: its areas and fan-out 0700 (names/, the mount root, 0755), its marker 0600 ($modes)"
! grep -q "LOWERDIR $LOWER: mode" "$T/daemon.log"
ok $? "a LOWERDIR already 0700: no line about its mode"
kvt_umount
