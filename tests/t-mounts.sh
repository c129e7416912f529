#!/bin/bash
# Two mounts of one LOWERDIR, one step at a time: a mount whose inode still
# shows a version that the other mount replaced (and whose object that
# mount then released) reads, and writes in place, the version the name
# holds now; it never answers ENOENT for the name.  The first mount keeps
# its entries for a minute, so that the kernel does not look the name up
# again on its own.  A setxattr there lands on the version the name holds
# now, and does not undo the other mount's store.  A directory the other
# mount removed while the first one's kernel holds it is made again by a
# store, a write in place or a mkdir in it; so is one the first mount no
# longer holds open, and one the other mount made again is used as it is
# now.  A directory the other mount renamed over another, held open by
# this mount's client, shows what POSIX shows of it.  At the end
# kvtierfs-fsck finds nothing left over.
# (The races of many writers on two mounts: t-concurrency.sh.)
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"

kvt_require_root
plan 40
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
MNT2="$T/mnt2"
mkdir "$MNT2"
head -c 65536 /dev/urandom >"$T/a"
head -c 65536 /dev/urandom >"$T/b"
head -c 65536 /dev/urandom >"$T/c"

kvt_mount entry_timeout=60 attr_timeout=60 negative_timeout=0
kvt_start "$LOWER" "$MNT2"
pid2=$KVT_LAST_PID

ok_cmd "mount 1 stores f and reads it back (its inode shows that version)" \
	bash -c 'cp "$1" "$2/f" && cmp "$1" "$2/f"' _ "$T/a" "$MNT"
ok_cmd "mount 2 replaces f (temp file and rename): the first version's object goes" \
	bash -c 'cp "$1" "$2/f.tmp" && mv "$2/f.tmp" "$2/f"' _ "$T/b" "$MNT2"
ok_cmd "mount 1 reads f: the version mount 2 stored" cmp "$T/b" "$MNT/f"

ok_cmd "mount 2 replaces f again" \
	bash -c 'cp "$1" "$2/f.tmp" && mv "$2/f.tmp" "$2/f"' _ "$T/c" "$MNT2"
# dd conv=notrunc: an open for writing without O_TRUNC, one byte at 0; the
# new version starts as a copy of the published one.
ok_cmd "mount 1 writes one byte in place into f: no ENOENT" \
	dd if=/dev/zero of="$MNT/f" bs=1 count=1 conv=notrunc status=none
{ printf '\0'; tail -c +2 "$T/c"; } >"$T/c0"
ok_cmd "f is the version mount 2 stored last, with that byte, seen from mount 2" \
	cmp "$T/c0" "$MNT2/f"
ok_cmd "and from mount 1" cmp "$T/c0" "$MNT/f"

# setxattr on an inode whose version the other mount replaced: the kernel
# is told ESTALE, looks the name up again and sets it on the version there
ok_cmd "mount 1 stores g and reads it back" \
	bash -c 'cp "$1" "$2/g" && cmp "$1" "$2/g"' _ "$T/a" "$MNT"
ok_cmd "mount 2 replaces g" \
	bash -c 'cp "$1" "$2/g.tmp" && mv "$2/g.tmp" "$2/g"' _ "$T/b" "$MNT2"
ok_cmd "mount 1 sets user.k on g" setfattr -n user.k -v v1 "$MNT/g"
ok_cmd "g is mount 2's version, from both mounts (its store is not undone)" \
	bash -c 'cmp "$1" "$2/g" && cmp "$1" "$3/g"' _ "$T/b" "$MNT" "$MNT2"
v=$(kvt_run getfattr --only-values -n user.k "$MNT2/g" 2>/dev/null)
[ "$v" = v1 ]
ok $? "mount 2 sees user.k on its version: '$v'"

# A directory the other mount removed (an evictor's rmdir of an empty
# one) after this mount's client made sure it is there (mkdir -p): a
# store into it, a file written in place there, a mkdir in it make it
# again, as it was.  The client holds the directory open, so that its
# kernel goes on naming the directory it knew, as it does until its
# entry times out.
# in_removed STEP: mount 1's client makes d/e, opens it, mount 2 removes
# d, and the client does STEP in it (python, the directory's fd is "d").
in_removed() {
	mkdir -p "$MNT/d/e" &&
		python3 - "$MNT/d/e" "$MNT2/d" "$T/b" "$1" <<-'PY'
			import os, shutil, sys
			d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
			shutil.rmtree(sys.argv[2])
			data = open(sys.argv[3], "rb").read()
			exec(sys.argv[4])
		PY
}
ok_cmd "mount 1 stores d/e/h" bash -c 'mkdir -p "$2/d/e" && cp "$1" "$2/d/e/h"' _ "$T/a" "$MNT"
in_removed '
fd = os.open("i.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=d)
os.write(fd, data)
os.close(fd)
os.rename("i.tmp", "i", src_dir_fd=d, dst_dir_fd=d)' && cmp "$T/b" "$MNT/d/e/i"
ok $? "mount 2 removes d; mount 1 stores d/e/i there (temp file and rename), and reads it"
in_removed '
fd = os.open("k", os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644, dir_fd=d)
os.write(fd, data)
os.close(fd)' && cmp "$T/b" "$MNT/d/e/k" && [ -f "$LOWER/names/d/e/k" ]
ok $? "mount 2 removes d; mount 1 writes d/e/k in place there (published at close), and reads it"
in_removed 'os.mkdir("sub", dir_fd=d)' && [ -d "$LOWER/names/d/e/sub" ]
ok $? "mount 2 removes d; mount 1 makes d/e/sub there"
[ "$(grep -c 'directory [de] was removed by another mount: made again' "$T/daemon.log")" = 6 ]
ok $? "each time mount 1 says it made d and d/e again"
# lower_shown DIR...: "mode uid:gid" each lower directory shows: written
# in it (store format 2: user.kvtierfs.dir, "uid gid mode") or its own.
lower_shown() {
	local d v u g m
	for d in "$@"; do
		v=$(getfattr --absolute-names --only-values -n user.kvtierfs.dir "$d" 2>/dev/null)
		if [ -n "$v" ]; then
			read -r u g m <<<"$v"
			echo "$m $u:$g"
		else
			stat -c '%a %u:%g' "$d"
		fi
	done
}
# Made again with the mode and owner it had, as mount 1 last saw them.
mkdir -m 0750 "$MNT/m" && mkdir "$MNT/m/n" && chmod 2710 "$MNT/m/n" &&
	chown 65534:65534 "$MNT/m/n" && stat -c '%a %u:%g' "$MNT/m" "$MNT/m/n" >"$T/m.before" &&
	python3 - "$MNT/m/n" "$MNT2/m" "$T/b" <<-'PY' && cmp "$T/b" "$MNT/m/n/i" &&
		import os, shutil, sys
		d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
		shutil.rmtree(sys.argv[2])
		fd = os.open("i.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=d)
		os.write(fd, open(sys.argv[3], "rb").read())
		os.close(fd)
		os.rename("i.tmp", "i", src_dir_fd=d, dst_dir_fd=d)
	PY
	lower_shown "$LOWER/names/m" "$LOWER/names/m/n" >"$T/m.after" &&
	cmp -s "$T/m.before" "$T/m.after" && [ "$(tr '\n' ' ' <"$T/m.after")" = "750 0:0 2710 65534:65534 " ]
ok $? "a directory made again has the mode and owner it had: $(tr '\n' ' ' <"$T/m.after" 2>/dev/null)"
# mount 2's kernel keeps its own view (negative entries) for 1 s
sleep 1.1
ok_cmd "mount 2 sees d/e/sub" test -d "$MNT2/d/e/sub"

# The same when mount 1 no longer holds the directory open: more
# directories than -o max_dir_fds were used since, as on a server with
# thousands of them.  One that mount 2 removed and made again (another
# lower directory by the same name, made beside it and renamed there) is
# used as it is now; one removed and not made again is made again.
# Neither answers ENOENT.
# (-o shared: a mount that finds another one later makes its kernel
# forget every name once, which would hide what is tested here.)
kvt_umount
kvt_mount entry_timeout=60 attr_timeout=60 negative_timeout=0 max_dir_fds=16 shared
# use_dirs TAG: 20 more directories used through mount 1
use_dirs() {
	local i
	for i in $(seq 1 20); do
		mkdir -p "$MNT/$1/$i" && : >"$MNT/$1/$i/f" || return 1
	done
}
mkdir -p "$MNT/r/d" && use_dirs u1 && ino0=$(stat -c %i "$LOWER/names/r/d") &&
	mkdir "$MNT2/r/n" && rmdir "$MNT2/r/d" && mv "$MNT2/r/n" "$MNT2/r/d" &&
	ino1=$(stat -c %i "$LOWER/names/r/d") &&
	[ "$ino0" != "$ino1" ]
ok $? "mount 2 removes r/d and makes it again: another directory (lower inode ${ino0:-?}, now ${ino1:-?})"
cp "$T/a" "$MNT/r/d/h" && cmp "$T/a" "$MNT2/r/d/h"
ok $? "mount 1, which no longer held r/d open, stores r/d/h in the one there now"
ok_cmd "mount 1 makes r/d/sub there" mkdir "$MNT/r/d/sub"
[ -d "$LOWER/names/r/d/sub" ] && [ "$(stat -c %i "$LOWER/names/r/d")" = "$ino1" ]
ok $? "r/d/sub is in the directory mount 2 made (lower inode $(stat -c %i "$LOWER/names/r/d" 2>/dev/null))"
grep -q 'directory d was made again by another mount' "$T/daemon.log"
ok $? "mount 1 says r/d was made again by another mount"
mkdir -p "$MNT/q/e" && chmod 0750 "$MNT/q" && chmod 2710 "$MNT/q/e" && chown 65534:65534 "$MNT/q/e" &&
	stat -c '%a %u:%g' "$MNT/q" "$MNT/q/e" >"$T/q.before" &&
	use_dirs u2 && rm -r "$MNT2/q" && cp "$T/b" "$MNT/q/e/i" &&
	[ -d "$LOWER/names/q/e" ] && cmp "$T/b" "$MNT/q/e/i"
ok $? "mount 2 removes q; mount 1, which no longer held q/e open, stores q/e/i: q and q/e are made again"
lower_shown "$LOWER/names/q" "$LOWER/names/q/e" >"$T/q.after"
[ "$(tr '\n' ' ' <"$T/q.after")" = "750 0:0 2710 65534:65534 " ] && cmp -s "$T/q.before" "$T/q.after"
ok $? "and with the modes and owners they had: $(tr '\n' ' ' <"$T/q.after")"
mkdir -p "$MNT/q2/e" && use_dirs u3 && rm -r "$MNT2/q2" && mkdir "$MNT/q2/e/sub" &&
	[ -d "$LOWER/names/q2/e/sub" ]
ok $? "mount 2 removes q2; mount 1 makes q2/e/sub: q2 and q2/e are made again" ||
	diag "$(grep 'made again' "$T/daemon.log" | tail -n 4)"

# A directory that mount 2 renames over another, while mount 1's client
# holds both open: mount 1 then has two inodes on the lower directory now
# at the name (the one it knew as p/x, held open, and the one the name p/y
# gives), and one on the removed directory.  Each shows what POSIX shows
# of a renamed directory held open: the held x is the directory now at
# p/y, with its files; the held y is removed and empty.  What is stored,
# removed or renamed through one shows through the other and through
# mount 2, with the right bytes.  (Mount 1 with its default timeouts
# here: 1 s on a store another mount uses.)
kvt_umount
kvt_mount
mkdir -p "$MNT/p/x" "$MNT/p/y" && cp "$T/a" "$MNT/p/x/f" && ls "$MNT/p/y" >/dev/null
ok $? "mount 1 makes p/x/f and an empty p/y"
python3 - "$MNT/p" "$MNT2/p" "$T/a" "$T/b" >"$T/over.out" 2>&1 <<-'PY'
	import os, sys, time
	p1, p2, A, B = sys.argv[1:]
	a, b = open(A, "rb").read(), open(B, "rb").read()
	x = os.open(p1 + "/x", os.O_RDONLY | os.O_DIRECTORY)
	y = os.open(p1 + "/y", os.O_RDONLY | os.O_DIRECTORY)
	os.rename(p2 + "/x", p2 + "/y")
	time.sleep(1.2)  # past the 1 s that mount 1's kernel keeps names
	def ls(d):
	    try:
	        return sorted(os.listdir(d))
	    except OSError as e:
	        return e.strerror
	def read(path, dir_fd=None):
	    try:
	        with open(os.open(path, os.O_RDONLY, dir_fd=dir_fd), "rb") as f:
	            return f.read()
	    except OSError as e:
	        return e.strerror
	def check(what, good):
	    print("check", "pass" if good else "FAIL", what)
	check("listings: held x %s, held y %s, p/y %s, mount 2's p/y %s" %
	      (ls(x), ls(y), ls(p1 + "/y"), ls(p2 + "/y")),
	      ls(x) == ["f"] and ls(y) == [] and ls(p1 + "/y") == ["f"] and
	      ls(p2 + "/y") == ["f"] and not os.path.exists(p1 + "/x"))
	fd = os.open("h.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=x)
	os.write(fd, b)
	os.close(fd)
	os.rename("h.tmp", "h", src_dir_fd=x, dst_dir_fd=x)
	check("stored through held x: p/y/h, mount 2's p/y/h and p/y/f read right",
	      read(p1 + "/y/h") == b and read(p2 + "/y/h") == b and read(p1 + "/y/f") == a and
	      read("h", x) == b and read("f", y) == "No such file or directory")
	os.unlink(p1 + "/y/h")
	os.rename("f", "f2", src_dir_fd=x, dst_dir_fd=x)
	time.sleep(1.2)
	check("p/y/h removed by its path, f renamed to f2 through held x: held x %s, p/y %s, "
	      "mount 2's p/y %s" % (ls(x), ls(p1 + "/y"), ls(p2 + "/y")),
	      read("h", x) == "No such file or directory" and ls(x) == ["f2"] and
	      ls(p1 + "/y") == ["f2"] and ls(p2 + "/y") == ["f2"] and read(p2 + "/y/f2") == a)
	PY
for i in 1 2 3; do
	line=$(grep '^check ' "$T/over.out" | sed -n "${i}p")
	[ "${line#check pass}" != "$line" ]
	ok $? "mount 2 renamed p/x over p/y: ${line#check * }" || diag_file "$T/over.out" 20
done

kvt_stop "$MNT2" "$pid2"
kvt_umount
"$KVTIERFS_FSCK" "$LOWER" >"$T/fsck.out" 2>&1
ok $? "fsck: clean ($(tail -n 1 "$T/fsck.out"))" || diag_file "$T/fsck.out" 20
