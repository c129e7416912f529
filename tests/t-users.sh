#!/bin/bash
# Shared use: a root daemon mounted with allow_other serves workers that
# run as other users (kvtierfs then adds default_permissions).  As two
# unprivileged users: what they create is theirs (uid, gid, umask), a
# setgid directory hands its group down as on a local disk, chmod, chown
# and chgrp work on files and directories and survive a remount, mode bits
# stop the other user from reading, writing, unlinking, renaming, making
# directories and setting xattrs, the sticky bit protects files in a
# shared directory, and nobody can set or remove kvtierfs's own
# user.kvtierfs.* names.
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v setpriv >/dev/null || bail "setpriv is missing (util-linux)"
plan 27
kvt_setup

U1=kvtu1
U2=kvtu2
G=kvtshare
getent group "$G" >/dev/null || groupadd "$G" || bail "groupadd $G failed"
for u in "$U1" "$U2"; do
	id "$u" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$u" || bail "useradd $u failed"
	usermod -a -G "$G" "$u" || bail "usermod $u failed"
done
uid1=$(id -u "$U1") gid1=$(id -g "$U1") uid2=$(id -u "$U2") gidS=$(getent group "$G" | cut -d: -f3)

# as USER CMD...: run CMD under bash as USER (with its groups), in $MNT.
as() {
	local u=$1
	shift
	(cd "$MNT" && setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
		bash -c "$*") 2>>"$T/as.err"
}
# owner_mode PATH: "uid:gid:octal mode".
owner_mode() {
	stat -c '%u:%g:%a' "$1"
}

chmod 755 "$T"
kvt_mount allow_other
chmod 1777 "$MNT"

as "$U1" 'umask 022 && mkdir -p m1_r0/abc/de_g0 && printf x >m1_r0/abc/de_g0/b.bin.tmp &&
	mv m1_r0/abc/de_g0/b.bin.tmp m1_r0/abc/de_g0/b.bin && printf y >m1_r0/plain.bin'
r="$(owner_mode "$MNT/m1_r0") $(owner_mode "$MNT/m1_r0/abc/de_g0") $(owner_mode "$MNT/m1_r0/abc/de_g0/b.bin") $(owner_mode "$MNT/m1_r0/plain.bin")"
[ "$r" = "$uid1:$gid1:755 $uid1:$gid1:755 $uid1:$gid1:644 $uid1:$gid1:644" ]
ok $? "umask 022: vLLM's fan-out, a tmp+rename block and a file are the caller's, 755/644 ($r)"

as "$U1" 'umask 077 && mkdir m1_r0/private && printf z >m1_r0/private/p.bin'
r="$(owner_mode "$MNT/m1_r0/private") $(owner_mode "$MNT/m1_r0/private/p.bin")"
[ "$r" = "$uid1:$gid1:700 $uid1:$gid1:600" ]
ok $? "umask 077: 700 and 600 ($r)"

# A setgid directory, on kvtierfs and on the local disk under $T.
mkdir "$T/ref"
chmod 1777 "$T/ref"
setgid_case() { # DIR USER: the group and mode of what USER makes in DIR/sg
	local d=$1
	(cd "$d" && setpriv --reuid="$U1" --regid="$gid1" --init-groups bash -c \
		"umask 002 && mkdir sg && chgrp $G sg && chmod 2775 sg && mkdir sg/sub && printf a >sg/f1") 2>>"$T/as.err" &&
	(cd "$d" && setpriv --reuid="$U2" --regid="$(id -g "$U2")" --init-groups bash -c \
		"umask 002 && printf b >sg/f2") 2>>"$T/as.err" &&
	echo "$(stat -c '%g:%a' "$d/sg/sub" "$d/sg/f1" "$d/sg/f2" | tr '\n' ' ')"
}
ref=$(setgid_case "$T/ref")
got=$(setgid_case "$MNT")
[ -n "$got" ] && [ "$got" = "$ref" ] && [ "$got" = "$gidS:2775 $gidS:664 $gidS:664 " ]
ok $? "a setgid directory hands its group (and the bit, to directories) down as the local disk does ($got; local: $ref)"

as "$U1" 'chmod 700 m1_r0/abc && chmod 600 m1_r0/plain.bin && chgrp '"$G"' m1_r0/plain.bin'
r="$(owner_mode "$MNT/m1_r0/abc") $(owner_mode "$MNT/m1_r0/plain.bin")"
[ "$r" = "$uid1:$gid1:700 $uid1:$gidS:600" ]
ok $? "the owner's chmod on a directory and a file, and chgrp to a group of its own ($r)"
! as "$U1" "chown $U2 m1_r0/plain.bin" && ! as "$U1" "chgrp root m1_r0/plain.bin" &&
	[ "$(owner_mode "$MNT/m1_r0/plain.bin")" = "$uid1:$gidS:600" ]
ok $? "the owner cannot give a file away, nor chgrp to a group it is not in"
chown "$U2" "$MNT/m1_r0/private/p.bin" && chown "$U2:$G" "$MNT/m1_r0/private"
r="$(owner_mode "$MNT/m1_r0/private") $(owner_mode "$MNT/m1_r0/private/p.bin")"
[ "$r" = "$uid2:$gidS:700 $uid2:$gid1:600" ]
ok $? "root's chown of a directory and a file ($r)"
chown "$U1:$gid1" "$MNT/m1_r0/private/p.bin" "$MNT/m1_r0/private"
kvt_stat "$MNT" stores >/dev/null

# The other user, kept out by mode bits.
denied() { ! as "$U2" "$1"; }
denied 'cat m1_r0/private/p.bin'
ok $? "$U2 cannot read $U1's file in a 0700 directory"
chmod 711 "$MNT/m1_r0/private"
as "$U1" 'chmod 600 m1_r0/private/p.bin'
denied 'cat m1_r0/private/p.bin'
ok $? "$U2 cannot read $U1's 0600 file"
as "$U1" 'chmod 644 m1_r0/private/p.bin'
as "$U2" 'cat m1_r0/private/p.bin >/dev/null' && denied 'printf w >>m1_r0/private/p.bin' &&
	denied 'printf w >m1_r0/private/p.bin'
ok $? "$U2 reads $U1's 0644 file and cannot write it (append or truncate)"
[ "$(cat "$MNT/m1_r0/private/p.bin")" = z ]
ok $? "and its bytes are as $U1 stored them"
as "$U1" 'chmod 755 m1_r0/private'
denied 'rm -f m1_r0/private/p.bin'
ok $? "$U2 cannot unlink in $U1's 0755 directory"
denied 'mv m1_r0/private/p.bin m1_r0/private/q.bin'
ok $? "$U2 cannot rename in it"
denied 'mv m1_r0/private/p.bin stolen.bin'
ok $? "$U2 cannot rename out of it"
denied 'mkdir m1_r0/private/mine'
ok $? "$U2 cannot make a directory in it"
denied 'printf n >m1_r0/private/new.bin'
ok $? "$U2 cannot create a file in it"
denied 'setfattr -n user.note -v 2 m1_r0/private/p.bin'
ok $? "$U2 cannot set a user xattr on $U1's 0644 file"
[ -e "$MNT/m1_r0/private/p.bin" ] && [ ! -e "$MNT/stolen.bin" ] && [ ! -e "$MNT/m1_r0/private/mine" ]
ok $? "nothing of that happened"

# The sticky bit of the shared root.
as "$U1" 'printf s >shared.bin'
denied 'rm -f shared.bin' && denied 'mv shared.bin taken.bin' && [ -e "$MNT/shared.bin" ]
ok $? "sticky 1777 root: $U2 cannot unlink or rename $U1's file"
as "$U2" 'printf t >theirs.bin && mv theirs.bin theirs2.bin && rm theirs2.bin'
ok $? "and does all of it to a file of its own"

# The owner does all of it.
as "$U1" 'printf o >>m1_r0/plain.bin && setfattr -n user.note -v 1 m1_r0/plain.bin &&
	mkdir m1_r0/private/d && mv m1_r0/private/p.bin m1_r0/private/d/p.bin &&
	rm m1_r0/private/d/p.bin && rmdir m1_r0/private/d'
[ "$(getfattr --absolute-names --only-values -n user.note "$MNT/m1_r0/plain.bin" 2>/dev/null)" = 1 ]
ok $? "$U1 writes, sets a user xattr, makes a directory, renames and unlinks in its own tree"

# kvtierfs's own names: nobody sets or removes them.
F=$MNT/m1_r0/abc/de_g0/b.bin
chmod 711 "$MNT/m1_r0/abc"
v0=$(getfattr --absolute-names --only-values -n user.kvtierfs.hash "$F")
! as "$U1" "setfattr -n user.kvtierfs.verdict -v verified '$F'" &&
	! as "$U1" "setfattr -x user.kvtierfs.hash '$F'" &&
	! setfattr -n user.kvtierfs.hash -v xxh3-128:0 "$F" 2>/dev/null &&
	! setfattr -x user.kvtierfs.size "$F" 2>/dev/null &&
	! setfattr -n user.kvtierfs.stats -v 0 "$MNT" 2>/dev/null
ok $? "user.kvtierfs.*: neither the owner nor root sets or removes them"
[ "$(getfattr --absolute-names --only-values -n user.kvtierfs.hash "$F")" = "$v0" ] &&
	[ "$(getfattr --absolute-names --only-values -n user.kvtierfs.size "$F")" = 1 ]
ok $? "and they are as they were ($v0)"

kvt_umount
kvt_mount allow_other
r="$(owner_mode "$MNT/m1_r0/abc") $(owner_mode "$MNT/m1_r0/plain.bin") $(stat -c '%g:%a' "$MNT/sg/sub")"
[ "$r" = "$uid1:$gid1:711 $uid1:$gidS:600 $gidS:2775" ] &&
	[ "$(getfattr --absolute-names --only-values -n user.note "$MNT/m1_r0/plain.bin" 2>/dev/null)" = 1 ]
ok $? "after a remount: modes, owners, groups, the setgid bit and the xattr are kept ($r)"
kvt_umount
diag_file "$T/as.err" 30
