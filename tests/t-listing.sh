#!/bin/bash
# Listings of large directories, as ls, find, du, rm -rf and an evictor
# see them: every entry, each with its inode number (glibc's readdir hides
# an entry whose d_ino is 0), the same number that stat gives.  The kernel
# reads a large directory with READDIRPLUS first and plain READDIR after,
# so both carry it.  A directory kept open and rewound (rewinddir, as an
# evictor walking the tree again does) lists the names as they are then.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 17
kvt_setup
LISTDIR=$top_builddir/tests/listdir
[ -x "$LISTDIR" ] || bail "tests/listdir is not built"
kvt_mount

for n in 1000 10000; do
	d="$MNT/d$n"
	kvt_run mkdir "$d"
	kvt_run perl -e 'my ($d, $n) = @ARGV;
		for (1 .. $n) { open(my $f, ">", "$d/f$_") or die "$d/f$_: $!"; close($f) or die }' \
		"$d" "$n"
	ok $? "$n files made in one directory"
	# A fresh look: what the kernel knows of the names goes.
	echo 2 >/proc/sys/vm/drop_caches
	out=$(kvt_run "$LISTDIR" "$d")
	ok $? "raw listing of $n: $out"
	got=$(kvt_run ls "$d" | wc -l)
	[ "$got" = "$n" ]
	ok $? "ls lists all $n ($got)"
	got=$(kvt_run find "$d" -type f | wc -l)
	[ "$got" = "$n" ]
	ok $? "find finds all $n ($got)"
	got=$(kvt_run du -a --inodes "$d" | tail -n 1 | cut -f1)
	[ "$got" = $((n + 1)) ]
	ok $? "du counts $((n + 1)) inodes ($got)"
	kvt_run rm -rf "$d"
	ok $? "rm -rf removes the directory with its $n files"
done

# rewound: 300 names (more than one READDIR reply), then changes made
# through the mount, then the same descriptor listed again from the start
kvt_run mkdir "$MNT/r"
# (a command under kvt_run runs in the background: no stdin)
cat >"$T/rewind.py" <<-'PY'
	import os, sys
	d = sys.argv[1]
	for i in range(300):
	    open("%s/f%d" % (d, i), "w").close()
	fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
	first = set(os.listdir(fd))
	open(d + "/new", "w").close()
	os.rename(d + "/f0", d + "/f0.moved")
	os.unlink(d + "/f1")
	os.mkdir(d + "/sub")
	again = set(os.listdir(fd))   # rewinddir, then readdir
	want = first - {"f0", "f1"} | {"new", "f0.moved", "sub"}
	print(len(first), len(again), sorted(again ^ want))
	sys.exit(0 if len(first) == 300 and again == want else 1)
	PY
out=$(kvt_run python3 "$T/rewind.py" "$MNT/r" 2>&1)
ok $? "a directory rewound lists the names as they are now (300, a new file, a rename, an unlink, a mkdir): $out"
ok_cmd "ls agrees" bash -c '[ "$(ls "$1" | wc -l)" = 301 ]' _ "$MNT/r"
kvt_run rm -rf "$MNT/r"
ok $? "rm -rf removes it"
kvt_umount
