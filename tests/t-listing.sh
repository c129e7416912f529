#!/bin/bash
# Listings of large directories, as ls, find, du, rm -rf and an evictor
# see them: every entry, each with its inode number (glibc's readdir hides
# an entry whose d_ino is 0), the same number that stat gives.  The kernel
# reads a large directory with READDIRPLUS first and plain READDIR after,
# so both carry it.
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 14
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
kvt_umount
