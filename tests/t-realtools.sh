#!/bin/bash
# Tools that rely on a file keeping its identity: GNU tar, cp -a and git,
# run on the mount and compared with the same run on a plain directory.
#
# A file's inode number is the one it had at its create, through its
# publication at close or rename and across a remount, and its ctime does
# not move when kvtierfs publishes it.  GNU tar extracts a symbolic link
# whose target is absolute or climbs with ".." by making an empty
# placeholder file first and, at the end, replacing it only if its device,
# inode number and ctime are those it saw: otherwise the link is left an
# empty regular file, silently.  cp -a sets times on the open file before
# the close that publishes it; git's index keeps inode numbers and ctimes.
# kvt-timeout: 600
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 24
kvt_setup
command -v git >/dev/null || bail "git is missing (scripts/install-deps)"

# The tree: Debian's documentation (thousands of files, some symbolic
# links to absolute paths and up with ".."), and links of every kind the
# placeholder logic handles, so that the test does not hang on what a
# machine happens to have.  Hard links are stored as files (--hard-dereference):
# kvtierfs has none.
SRC=$T/src
mkdir -p "$SRC/own/a/b" "$SRC/own/c" || bail "mkdir failed"
printf 'target\n' >"$SRC/own/a/file"
ln -s ../a/file "$SRC/own/c/up"          # climbs with ..
ln -s /etc/hostname "$SRC/own/c/abs"     # absolute
ln -s file "$SRC/own/a/same"             # plain, made at once
ln -s ../../a/b "$SRC/own/a/b/loop"      # climbs, to a directory
ln -s /nonexistent/x "$SRC/own/c/dangling"
cp -a /usr/share/doc "$SRC/doc" || bail "cp -a /usr/share/doc failed"
tar -C "$SRC" --hard-dereference -cf "$T/tree.tar" . || bail "tar -c failed"
links=$(tar -tvf "$T/tree.tar" | grep -c '^l')
delayed=$(tar -tvf "$T/tree.tar" | awk '/^l/ { t = $NF; if (t ~ /^\// || t ~ /(^|\/)\.\.(\/|$)/) n++ } END { print n + 0 }')
files=$(tar -tf "$T/tree.tar" | wc -l)
diag "tree: $files entries, $links symbolic links, $delayed of them absolute or with .."

mkdir "$T/plain" || bail "mkdir failed"
tar -C "$T/plain" -xf "$T/tree.tar" || bail "tar -x into a plain directory failed"

kvt_mount
ok_cmd "tar -x of the tree into the mount" tar -C "$MNT" -xf "$T/tree.tar"
out=$(kvt_run diff -r --no-dereference "$T/plain" "$MNT" 2>&1 | head -n 20)
[ -z "$out" ]
ok $? "the extraction is the plain one: diff -r --no-dereference finds nothing" ||
	diag "$out"
got=$(kvt_run find "$MNT" -type l | wc -l)
[ "$links" -gt 0 ] && [ "$got" = "$links" ]
ok $? "all $links symbolic links are links ($got), $delayed of them by tar's placeholder" ||
	diag "empty files where links should be: $(kvt_run find "$MNT" -type f -empty | head -n 5)"
[ "$(kvt_run readlink "$MNT/own/c/up")" = ../a/file ] &&
	[ "$(kvt_run cat "$MNT/own/c/up")" = target ]
ok $? "a link up with .. reads its target"

# cp -a: modes and times set on the open file before the close that
# publishes it are kept.
ok_cmd "cp -a of the plain extraction into the mount" cp -a "$T/plain" "$MNT/copy"
meta() { (cd "$1" && find . -printf '%p %y %m %s %T@ %l\n' | sort); }
meta "$T/plain" >"$T/meta.plain"
kvt_run bash -c "$(declare -f meta); meta '$MNT/copy'" >"$T/meta.copy"
out=$(diff "$T/meta.plain" "$T/meta.copy" | head -n 20)
[ -s "$T/meta.plain" ] && [ -z "$out" ]
ok $? "cp -a kept every type, mode, size, mtime and link target ($(wc -l <"$T/meta.plain") entries)" ||
	diag "$out"

# A file's identity, as fstat sees it on the open file and lstat after.
cat >"$T/ident.py" <<-'PY'
	import os, sys
	d = sys.argv[1]
	bad = []
	def same(what, a, b):
	    if (a.st_ino, a.st_ctime_ns) != (b.st_ino, b.st_ctime_ns):
	        bad.append("%s: ino %d ctime %d, then ino %d ctime %d" %
	                   (what, a.st_ino, a.st_ctime_ns, b.st_ino, b.st_ctime_ns))
	fd = os.open(d + "/empty", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
	a = os.fstat(fd); os.close(fd)
	same("empty file, closed", a, os.lstat(d + "/empty"))
	fd = os.open(d + "/full", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
	os.write(fd, b"x" * 100000)
	a = os.fstat(fd); os.close(fd)
	same("written file, closed", a, os.lstat(d + "/full"))
	fd = os.open(d + "/blk.bin_7.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
	os.write(fd, b"y" * 4096); os.close(fd)
	a = os.lstat(d + "/blk.bin_7.tmp")
	os.rename(d + "/blk.bin_7.tmp", d + "/blk.bin")
	b = os.lstat(d + "/blk.bin")
	if a.st_ino != b.st_ino:
	    bad.append("renamed: ino %d, then %d" % (a.st_ino, b.st_ino))
	# A truncate changes the data: mtime and ctime move (pjdfstest's
	# truncate/00, ftruncate/00, open/00); one that fails moves nothing.
	import time
	a = os.lstat(d + "/full"); time.sleep(0.02)
	os.truncate(d + "/full", 10)
	b = os.lstat(d + "/full")
	if not (b.st_ctime_ns > a.st_ctime_ns and b.st_mtime_ns > a.st_mtime_ns):
	    bad.append("truncate: ctime %d -> %d, mtime %d -> %d" %
	               (a.st_ctime_ns, b.st_ctime_ns, a.st_mtime_ns, b.st_mtime_ns))
	time.sleep(0.02)
	os.close(os.open(d + "/full", os.O_WRONLY | os.O_TRUNC))
	c = os.lstat(d + "/full")
	if not (c.st_ctime_ns > b.st_ctime_ns and c.st_size == 0):
	    bad.append("O_TRUNC: ctime %d -> %d, size %d" % (b.st_ctime_ns, c.st_ctime_ns, c.st_size))
	try:
	    os.truncate(d + "/full", -1)
	except OSError:
	    pass
	e = os.lstat(d + "/full")
	if e.st_ctime_ns != c.st_ctime_ns:
	    bad.append("a failed truncate moved ctime %d -> %d" % (c.st_ctime_ns, e.st_ctime_ns))
	with open(d + "/inos", "w") as f:
	    for n in ("empty", "full", "blk.bin"):
	        f.write("%s %d\n" % (n, os.lstat(d + "/" + n).st_ino))
	print("\n".join(bad))
	sys.exit(1 if bad else 0)
	PY
mkdir "$MNT/ident" || bail "mkdir failed"
out=$(kvt_run /usr/bin/python3 "$T/ident.py" "$MNT/ident" 2>&1)
ok $? "a file keeps its inode number and ctime through its publication (close, rename); a truncate moves ctime and mtime" ||
	diag "$out"
cp "$MNT/ident/inos" "$T/inos.before" || bail "cp failed"

# git: its index holds inode numbers and ctimes; a commit, a gc (which
# rewrites packs and renames them) and an fsck.
G=$MNT/repo
git_in() { git -C "$G" -c user.name=k -c user.email=k@example.invalid "$@"; }
ok_cmd "git init in the mount" git init -q "$G"
cp -a "$T/plain/own" "$G/" || bail "cp -a into the repository failed"
ok_cmd "git add and commit" git_in add -A
ok_cmd "git commit" git_in commit -q -m one
out=$(kvt_run git_in status --porcelain 2>&1)
[ -z "$out" ]
ok $? "git status after the commit: clean" || diag "$out"
ok_cmd "git gc" git_in gc -q --aggressive
ok_cmd "git fsck --full" git_in fsck --full --strict
echo more >>"$G/own/a/file"
ok_cmd "git commit -a" git_in commit -q -a -m two
out=$(kvt_run git_in status --porcelain 2>&1)
[ -z "$out" ]
ok $? "git status after the second commit: clean" || diag "$out"

kvt_umount
# The same numbers after a remount: the lower record's.
kvt_mount
while read -r n ino; do
	now=$(stat -c %i "$MNT/ident/$n") || now=missing
	[ "$now" = "$ino" ] || echo "$n: $ino, now $now"
done <"$T/inos.before" >"$T/inos.diff"
[ -s "$T/inos.before" ] && [ ! -s "$T/inos.diff" ]
ok $? "after a remount, each file has the number it had ($(wc -l <"$T/inos.before") files)" ||
	diag_file "$T/inos.diff"
out=$(kvt_run diff -r --no-dereference "$T/plain" "$MNT" -x copy -x ident -x repo 2>&1 | head -n 20)
[ -z "$out" ]
ok $? "after a remount, the extraction is still the plain one" || diag "$out"
ok_cmd "git fsck after the remount" git_in fsck --full --strict
out=$(kvt_run git_in status --porcelain 2>&1)
[ -z "$out" ]
ok $? "git status after the remount: clean" || diag "$out"
ok_cmd "rm -rf of the whole tree" rm -rf "$MNT/own" "$MNT/doc" "$MNT/copy" "$MNT/repo"
kvt_umount
