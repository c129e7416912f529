#!/bin/bash
# Shared use by several users: a root daemon mounted with -o allow_other
# (and so default_permissions) serves workers that run as other users, as
# the vLLM, llm-d and LMCache workers of a shared KV-cache directory do.
# Two unprivileged users (kvtu1, kvtu2, both in the group kvtshare; made
# here when absent and left in place) check that:
#  - new files and directories belong to their maker (uid and primary gid),
#    with the maker's umask applied, however they are made: open(O_CREAT),
#    a temp file renamed (vLLM), mkdir -p of a vLLM fan-out, kvclient's
#    vLLM store;
#  - a set-group-ID directory gives its group to what is made in it and
#    its set-group-ID bit to new subdirectories, as ext4 does (the same
#    operations on an ext4 or tmpfs directory are compared);
#  - chmod, chown and chgrp follow POSIX's rules (the owner may chmod and
#    chgrp to a group of its own, only root may give a file away) and show
#    at once and after a remount, set-user-ID and set-group-ID bits of
#    files included (kept when a record is written again: at publication,
#    at a setfattr);
#  - the mode bits guard read, write, unlink, rename, mkdir and user
#    xattrs, and the sticky bit of a 1777 directory guards its names;
#  - nobody, root included, can set or remove a user.kvtierfs.* name,
#    while the owner's own user.* names work.
# kvt-kind: mount
# shellcheck disable=SC2016 # the users' scripts expand in their own sh
. "$(dirname "$0")/lib.sh"

kvt_require_root
if ! command -v setpriv >/dev/null || ! command -v setfattr >/dev/null; then
	echo "1..0 # SKIP needs setpriv (util-linux) and setfattr (attr)"
	exit 0
fi

U1=kvtu1
U2=kvtu2
G=kvtshare
# The users and their shared group; other test runs may have made them
# already (or be making them now: useradd fails then, id says).
getent group "$G" >/dev/null || groupadd "$G" 2>/dev/null
for u in "$U1" "$U2"; do
	id -u "$u" >/dev/null 2>&1 ||
		useradd -M -U -s /usr/sbin/nologin "$u" 2>/dev/null
	id -nG "$u" 2>/dev/null | tr ' ' '\n' | grep -qx "$G" ||
		usermod -aG "$G" "$u" 2>/dev/null
done
for u in "$U1" "$U2"; do
	if ! id -nG "$u" 2>/dev/null | tr ' ' '\n' | grep -qx "$G"; then
		echo "1..0 # SKIP cannot make user $u in group $G"
		exit 0
	fi
done

plan 40
kvt_setup
# mktemp made $T 0700: the users must get from the mount to $T's other
# directories (../ref) and to the client, a copy in $T.  The directories
# above $T (tests/run's, 0700 too) are not theirs to pass: each of their
# commands starts in $MNT, where root took it, and names paths from there
# (cd -P: sh's logical cd would walk from / through them).
chmod 755 "$T"
cp "$KVCLIENT" "$T/kvclient" && chmod 755 "$T/kvclient"

# ush USER UMASK SCRIPT [ARG...]: SCRIPT (sh) as USER, with its primary
# group and its supplementary groups, with UMASK, in $MNT; $KVC is the
# client.  Under the hang guard.
ush() {
	local u=$1 m=$2 s=$3
	shift 3
	(cd "$MNT" && kvt_run setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
		sh -c "umask $m && KVC=../kvclient && $s" sh "$@")
}

# is PATH WANT: `stat -c '%U:%G %a'` of PATH (through the mount, as root)
# is WANT; otherwise say what it is.
is() {
	local got
	got=$(kvt_run stat -c '%U:%G %a' "$1" 2>&1)
	[ "$got" = "$2" ] && return 0
	diag "$1: $got, expected $2"
	return 1
}

# denied USER UMASK SCRIPT: SCRIPT as USER fails with EACCES or EPERM.
denied() {
	local out=$T/.denied st
	ush "$@" >"$out" 2>&1
	st=$?
	if [ "$st" != 0 ] && grep -Eq 'Permission denied|Operation not permitted' "$out"; then
		return 0
	fi
	diag "as $1: $3: exit $st, expected EACCES or EPERM"
	diag_file "$out" 10
	return 1
}

# runs USER UMASK SCRIPT: SCRIPT as USER succeeds.
runs() {
	local out=$T/.runs st
	ush "$@" >"$out" 2>&1
	st=$?
	[ "$st" = 0 ] && return 0
	diag "as $1: $3: exit $st"
	diag_file "$out" 10
	return 1
}

# listing DIR: every name below DIR with its owner, group and mode.
listing() {
	(cd "$1" && kvt_run find . -mindepth 1 -printf '%p %u:%g %m\n') | LC_ALL=C sort
}

kvt_mount allow_other
chmod 1777 "$MNT"
is "$MNT" "root:root 1777" && runs "$U1" 022 'test -w . && test -x .' &&
	runs "$U2" 022 'test -w . && test -x .'
ok $? "the mount's root is 1777 and both users may write there"

# ---------------------------------------------------------------- owners

# For each user and umask: a file made by open(O_CREAT), one written
# under a temp name and renamed (vLLM), a vLLM fan-out by mkdir -p, and
# kvclient's vLLM stores; files are made 0666 by sh and 0644 by kvclient,
# directories 0777 by mkdir and 0755 by kvclient.
for um in "$U1 022 644 755" "$U2 077 600 700"; do
	read -r u m f d <<<"$um"
	r=0
	runs "$u" "$m" "printf data >c_$u && test \"\$(cat c_$u)\" = data" &&
		is "$MNT/c_$u" "$u:$u $f" || r=1
	ok $r "$u, umask $m: a file made by open(O_CREAT) is $u:$u $f"

	r=0
	runs "$u" "$m" "printf data >t_$u.tmp && mv t_$u.tmp t_$u && test ! -e t_$u.tmp" &&
		is "$MNT/t_$u" "$u:$u $f" || r=1
	ok $r "$u, umask $m: a file written as .tmp and renamed is $u:$u $f"

	r=0
	runs "$u" "$m" "mkdir -p m_$u/model_r0/abc/de_g0" || r=1
	for p in m_$u m_$u/model_r0 m_$u/model_r0/abc m_$u/model_r0/abc/de_g0; do
		is "$MNT/$p" "$u:$u $d" || r=1
	done
	ok $r "$u, umask $m: mkdir -p of a vLLM fan-out makes $u:$u $d directories"

	r=0
	runs "$u" "$m" "mkdir v_$u && \$KVC vllm-store --dir v_$u --blocks 6 --size 64K --threads 2" || r=1
	listing "$MNT/v_$u" >"$T/v_$u.list"
	n=$(grep -c '\.bin ' "$T/v_$u.list")
	bad=$(grep -Ev "\.bin $u:$u $f\$|/[^/.]+ $u:$u $d\$" "$T/v_$u.list")
	[ "$r" = 0 ] && [ "$n" = 6 ] && [ -z "$bad" ] && is "$MNT/v_$u" "$u:$u $d" || r=1
	ok $r "$u, umask $m: kvclient vllm-store as $u: $n blocks $u:$u $f, its directories $u:$u $d" ||
		diag "not as expected:" "$bad"
done

# ---------------------------------------------------------------- setgid

# The same operations in a set-group-ID directory of the shared group,
# on the mount and on a directory of the file system $T is on.
REF=$T/ref
mkdir -p "$REF/sg" && chmod 755 "$REF"
kvt_run mkdir "$MNT/sg"
for sg in sg ../ref/sg; do
	kvt_run chgrp "$G" "$MNT/$sg" && kvt_run chmod 2775 "$MNT/$sg"
	ush "$U1" 022 "cd -P '$sg' && printf x >f && printf y >g.tmp && mv g.tmp g &&
		mkdir -p sub/abc/de_g0 && printf z >sub/abc/de_g0/h" >"$T/sg.out" 2>&1 ||
		diag "as $U1 in $sg:" "$(cat "$T/sg.out")"
	ush "$U2" 002 "cd -P '$sg' && printf w >f2 && mkdir d2" >"$T/sg.out" 2>&1 ||
		diag "as $U2 in $sg:" "$(cat "$T/sg.out")"
done
listing "$MNT/sg" >"$T/sg.mnt"
listing "$REF/sg" >"$T/sg.ref"
r=0
for p in "f $U1:$G 644" "g $U1:$G 644" "sub/abc/de_g0/h $U1:$G 644" "f2 $U2:$G 664"; do
	grep -qx "./$p" "$T/sg.mnt" || { diag "not ./$p:" "$(grep "^./${p%% *} " "$T/sg.mnt")"; r=1; }
done
is "$MNT/sg" "root:$G 2775" || r=1
ok $r "a setgid directory of $G: files made in it (open, .tmp + rename, deeper) are of $G"
r=0
for p in "sub $U1:$G 2755" "sub/abc $U1:$G 2755" "sub/abc/de_g0 $U1:$G 2755" "d2 $U2:$G 2775"; do
	grep -qx "./$p" "$T/sg.mnt" || { diag "not ./$p:" "$(grep "^./${p%% *} " "$T/sg.mnt")"; r=1; }
done
ok $r "a setgid directory of $G: its new subdirectories are of $G and setgid, all the way down"
cmp -s "$T/sg.mnt" "$T/sg.ref"
ok $? "the same owners, groups and modes as the same operations on $(stat -f -c %T "$REF")" ||
	diag "$(diff "$T/sg.ref" "$T/sg.mnt")"

r=0
runs "$U2" 022 "mkdir sg/v && \$KVC vllm-store --dir sg/v --blocks 4 --size 64K --threads 2" || r=1
listing "$MNT/sg/v" >"$T/sgv.list"
n=$(grep -c '\.bin ' "$T/sgv.list")
bad=$(grep -Ev "\.bin $U2:$G 644\$|/[^/.]+ $U2:$G 2755\$" "$T/sgv.list")
[ "$r" = 0 ] && [ "$n" = 4 ] && [ -z "$bad" ] || r=1
ok $r "kvclient vllm-store as $U2 in the setgid directory: $n blocks $U2:$G 644, directories $U2:$G 2755" ||
	diag "not as expected:" "$bad"

# ---------------------------------------------------------------- modes

# $U1's directory (0755) with a private (0600) and a public (0644) file,
# and a file of each user in the sticky root.
runs "$U1" 022 'mkdir u1d && printf secret >u1d/secret && chmod 600 u1d/secret &&
	printf pub >u1d/pub && printf s1 >stk' || bail "cannot make $U1's files"
runs "$U2" 022 'printf s2 >u2f' || bail "cannot make $U2's file"

r=0
denied "$U2" 022 'cat u1d/secret' || r=1
[ "$(ush "$U1" 022 'cat u1d/secret')" = secret ] || r=1
ok $r "$U2 cannot read $U1's 0600 file, $U1 can"

r=0
denied "$U2" 022 'printf x >u1d/pub' || r=1
denied "$U2" 022 'printf x >>u1d/pub' || r=1
denied "$U2" 022 'truncate -s 0 u1d/pub' || r=1
[ "$(cat "$MNT/u1d/pub")" = pub ] || { diag "u1d/pub: $(cat "$MNT/u1d/pub")"; r=1; }
ok $r "$U2 cannot write, append to or truncate $U1's 0644 file; its bytes stay"

r=0
denied "$U2" 022 'rm -f u1d/pub' || r=1
denied "$U2" 022 'rm -f u1d/secret' || r=1
[ -e "$MNT/u1d/pub" ] && [ -e "$MNT/u1d/secret" ] || r=1
ok $r "$U2 cannot unlink in $U1's 0755 directory"

r=0
denied "$U2" 022 'mv u1d/pub u1d/pub.x' || r=1
denied "$U2" 022 'mv u1d/pub stolen' || r=1
denied "$U2" 022 'mv u2f u1d/pub' || r=1
[ "$(cat "$MNT/u1d/pub")" = pub ] && [ ! -e "$MNT/u1d/pub.x" ] && [ ! -e "$MNT/stolen" ] &&
	[ "$(cat "$MNT/u2f")" = s2 ] && is "$MNT/u1d/pub" "$U1:$U1 644" || r=1
ok $r "$U2 cannot rename in, out of or into $U1's 0755 directory"

r=0
denied "$U2" 022 'mkdir u1d/x' || r=1
denied "$U2" 022 'printf x >u1d/new' || r=1
[ ! -e "$MNT/u1d/x" ] && [ ! -e "$MNT/u1d/new" ] || r=1
ok $r "$U2 cannot mkdir or create in $U1's 0755 directory"

r=0
denied "$U2" 022 'setfattr -n user.foo -v bar u1d/pub' || r=1
denied "$U2" 022 'setfattr -n user.foo -v bar u1d' || r=1
! getfattr -n user.foo "$MNT/u1d/pub" >/dev/null 2>&1 || r=1
ok $r "$U2 cannot set a user xattr on $U1's 0644 file or 0755 directory"

r=0
denied "$U2" 022 'rm -f stk' || r=1
denied "$U2" 022 'mv stk stk.x' || r=1
denied "$U2" 022 'mv u2f stk' || r=1
[ "$(cat "$MNT/stk")" = s1 ] && [ ! -e "$MNT/stk.x" ] && is "$MNT/stk" "$U1:$U1 644" || r=1
ok $r "sticky 1777 root: $U2 cannot unlink, rename or replace $U1's file"

r=0
runs "$U1" 022 'test "$(cat u1d/secret)" = secret && printf pub2 >u1d/pub &&
	test "$(cat u1d/pub)" = pub2 && setfattr -n user.foo -v bar u1d/pub &&
	test "$(getfattr --only-values -n user.foo u1d/pub)" = bar &&
	setfattr -n user.foo -v bar u1d && mkdir u1d/x && rmdir u1d/x &&
	printf n >u1d/new && mv u1d/new u1d/new2 && rm u1d/new2 &&
	mv u1d/pub u1d/pub.x && mv u1d/pub.x u1d/pub' || r=1
[ "$(cat "$MNT/u1d/pub")" = pub2 ] && is "$MNT/u1d/pub" "$U1:$U1 644" || r=1
ok $r "$U1 reads, writes, sets user xattrs, makes, renames and unlinks in its own directory"

r=0
runs "$U1" 022 'mv stk stk.x && mv stk.x stk && printf t >stk2 && rm stk2' || r=1
runs "$U2" 022 'mv u2f u2f.x && mv u2f.x u2f && printf t >u2g && rm u2g' || r=1
ok $r "sticky 1777 root: each user renames and unlinks its own files"

# ---------------------------------------------------------------- kvtierfs's names

PUB=$MNT/u1d/pub
verdict=$(getfattr --only-values -n user.kvtierfs.verdict "$PUB" 2>/dev/null)
hash=$(getfattr --only-values -n user.kvtierfs.hash "$PUB" 2>/dev/null)
r=0
denied "$U1" 022 'setfattr -n user.kvtierfs.verdict -v verified u1d/pub' || r=1
denied "$U1" 022 'setfattr -x user.kvtierfs.hash u1d/pub' || r=1
denied "$U1" 022 'setfattr -n user.kvtierfs.other -v x u1d/pub' || r=1
denied "$U1" 022 'setfattr -n user.kvtierfs.verdict -v verified u1d' || r=1
ok $r "the owner cannot set or remove user.kvtierfs.* names of its file or directory"

r=0
for c in "-n user.kvtierfs.verdict -v verified $PUB" "-x user.kvtierfs.hash $PUB" \
	"-x user.kvtierfs.verdict $PUB" "-n user.kvtierfs.stats -v 0 $MNT" \
	"-x user.kvtierfs.stats $MNT"; do
	read -ra args <<<"$c"
	if kvt_run setfattr "${args[@]}" >"$T/root.out" 2>&1 ||
		! grep -q 'Operation not permitted' "$T/root.out"; then
		diag "as root: setfattr $c: $(cat "$T/root.out")"
		r=1
	fi
done
ok $r "root cannot set or remove user.kvtierfs.* names either (EPERM)"

[ -n "$verdict" ] && [[ "$hash" == xxh3-128:* ]] &&
	[ "$(getfattr --only-values -n user.kvtierfs.verdict "$PUB" 2>/dev/null)" = "$verdict" ] &&
	[ "$(getfattr --only-values -n user.kvtierfs.hash "$PUB" 2>/dev/null)" = "$hash" ] &&
	[ -n "$(getfattr --only-values -n user.kvtierfs.stats "$MNT" 2>/dev/null)" ]
ok $? "the verdict ($verdict), the hash and the stats are as they were"

r=0
runs "$U1" 022 'setfattr -n user.tmp -v 1 u1d/pub && setfattr -x user.tmp u1d/pub &&
	! getfattr -n user.tmp u1d/pub 2>/dev/null && setfattr -n user.keep -v kept u1d/pub &&
	setfattr -n user.keep -v kept u1d' || r=1
[ "$(ush "$U2" 022 'getfattr --only-values -n user.keep u1d/pub')" = kept ] || r=1
ok $r "the owner sets and removes ordinary user.* names; others read them"

# ---------------------------------------------------------------- chmod, chown

runs "$U1" 022 'printf c >cf && mkdir cd && printf r >rf && mkdir rd' ||
	bail "cannot make $U1's files for chmod"
r=0
runs "$U1" 022 'chmod 640 cf && chmod 750 cd' || r=1
is "$MNT/cf" "$U1:$U1 640" && is "$MNT/cd" "$U1:$U1 750" || r=1
ok $r "the owner chmods its file and directory, stat shows it at once"

r=0
runs "$U1" 077 'exec 3>pf && chmod 604 pf && printf p >&3 && exec 3>&-' || r=1
is "$MNT/pf" "$U1:$U1 604" && [ "$(cat "$MNT/pf")" = p ] || r=1
ok $r "the owner chmods a file it is still writing: the mode stays after its close"

r=0
runs "$U1" 022 "chgrp $G cf cd" || r=1
is "$MNT/cf" "$U1:$G 640" && is "$MNT/cd" "$U1:$G 750" || r=1
ok $r "the owner chgrps its file and directory to a group it is in ($G)"

r=0
denied "$U1" 022 "chown $U2 cf" || r=1
denied "$U1" 022 "chown $U2 cd" || r=1
denied "$U1" 022 "chgrp $U2 cf" || r=1
denied "$U1" 022 "chgrp root cd" || r=1
is "$MNT/cf" "$U1:$G 640" && is "$MNT/cd" "$U1:$G 750" || r=1
ok $r "the owner cannot give its file or directory away, nor to a group it is not in"

r=0
denied "$U2" 022 'chmod 666 cf' || r=1
denied "$U2" 022 'chmod 777 cd' || r=1
denied "$U2" 022 "chgrp $U2 cf" || r=1
is "$MNT/cf" "$U1:$G 640" && is "$MNT/cd" "$U1:$G 750" || r=1
ok $r "another user cannot chmod or chgrp them"

r=0
kvt_run chown "$U2:$U2" "$MNT/rf" "$MNT/rd" || r=1
is "$MNT/rf" "$U2:$U2 644" && is "$MNT/rd" "$U2:$U2 755" || r=1
denied "$U1" 022 'chmod 600 rf' || r=1
runs "$U2" 022 'chmod 600 rf && chmod 700 rd' || r=1
is "$MNT/rf" "$U2:$U2 600" && is "$MNT/rd" "$U2:$U2 700" || r=1
ok $r "root gives a file and a directory to $U2, who then chmods them and $U1 no longer can"

# The set-user-ID and set-group-ID bits of files: set on a file still
# being written before its publication by rename, and on a published file
# before a user xattr is set on it (its record is rewritten).
r=0
runs "$U1" 022 'printf s >sx.tmp && chmod 4755 sx.tmp && mv sx.tmp sx &&
	printf g >gx && chmod 2775 gx && setfattr -n user.a -v 1 gx' || r=1
kvt_run setfattr -n user.a -v 1 "$MNT/rf" && kvt_run chmod 4640 "$MNT/rf" &&
	kvt_run setfattr -n user.b -v 1 "$MNT/rf" || r=1
is "$MNT/sx" "$U1:$U1 4755" && is "$MNT/gx" "$U1:$U1 2775" && is "$MNT/rf" "$U2:$U2 4640" || r=1
ok $r "setuid and setgid files (chmod before a rename or a setfattr) show their modes"

listing "$MNT" >"$T/before.list"
kvt_umount
kvt_mount allow_other
listing "$MNT" >"$T/after.list"
r=0
cmp -s "$T/before.list" "$T/after.list" || { diag "$(diff "$T/before.list" "$T/after.list")"; r=1; }
is "$MNT" "root:root 1777" && is "$MNT/cf" "$U1:$G 640" && is "$MNT/cd" "$U1:$G 750" &&
	is "$MNT/rd" "$U2:$U2 700" && is "$MNT/pf" "$U1:$U1 604" &&
	is "$MNT/sg/sub" "$U1:$G 2755" || r=1
ok $r "after a remount every owner, group and mode ($(grep -c '' "$T/after.list") names) is as it was"

r=0
for p in "sx $U1:$U1 4755" "gx $U1:$U1 2775" "rf $U2:$U2 4640"; do
	is "$MNT/${p%% *}" "${p#* }" || r=1
done
ok $r "after a remount the setuid and setgid bits of the files are still set"

r=0
[ -n "$hash" ] && [ "$(getfattr --only-values -n user.keep "$PUB" 2>/dev/null)" = kept ] &&
	[ "$(getfattr --only-values -n user.keep "$MNT/u1d" 2>/dev/null)" = kept ] &&
	[ "$(getfattr --only-values -n user.kvtierfs.hash "$PUB" 2>/dev/null)" = "$hash" ] || r=1
denied "$U1" 022 'setfattr -n user.kvtierfs.verdict -v verified u1d/pub' || r=1
denied "$U2" 022 'cat u1d/secret' || r=1
ok $r "after a remount: user.keep kept, the hash the same, the rules still hold"

kvt_umount
