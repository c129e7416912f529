#!/bin/bash
# Names deeper than PATH_MAX: a client reaches them one directory at a
# time, and so do the mount and kvtierfs-fsck, which walks the store by
# directory handles, never by whole paths.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 7
kvt_setup
FSCK=$top_builddir/src/kvtierfs-fsck
kvt_mount

# 24 levels of 250-character names: about 6000 bytes of path.
deep() {
	(cd "$MNT" && kvt_run perl -e '
		my ($what) = @ARGV; my $n = "d" x 249;
		for my $i (1 .. 24) {
			if ($what eq "make") { mkdir("$n$i") or die "mkdir $i: $!" }
			chdir("$n$i") or die "chdir $i: $!";
		}
		if ($what eq "make") {
			open(my $f, ">", "block.bin") or die "create: $!";
			print $f "deep" x 1024; close($f) or die "close: $!";
		} else {
			open(my $f, "<", "block.bin") or die "open: $!"; local $/;
			exit(<$f> eq "deep" x 1024 ? 0 : 1);
		}' "$1")
}
deep make
ok $? "a block stored 24 directories of 250 characters down (path ~6000 bytes)"
deep read
ok $? "and read back"
kvt_umount
"$FSCK" "$LOWER" >"$T/fsck.out" 2>&1
rc=$?
grep -q " 1 names, 1 objects, 0 problems" "$T/fsck.out" && [ "$rc" = 0 ]
ok $? "kvtierfs-fsck checks it like any other name (exit $rc): $(tail -n 1 "$T/fsck.out")"
# Damage its record, reaching it the same way.
(cd "$LOWER/names" && perl -e 'my $n = "d" x 249;
	for my $i (1 .. 24) { chdir("$n$i") or die "chdir $i: $!" }
	truncate("block.bin", 10) or die "truncate: $!"')
ok $? "its record is damaged by hand (cut to 10 bytes)"
"$FSCK" --repair "$LOWER" >"$T/fsck.out" 2>&1
rc=$?
[ "$rc" = 1 ]
ok $? "a damaged record that deep is found and repaired (exit $rc): $(grep -c removed "$T/fsck.out") removed"
