#!/bin/bash
# What a POSIX conformance suite checks, as kvtierfs's own test: rename of
# files and directories (over existing names, ENOTEMPTY, EISDIR, ENOTDIR,
# RENAME_NOREPLACE, RENAME_EXCHANGE), chmod, chown and utimensat of files
# and directories (kept across a remount), mkdir and rmdir, unlink of an
# open file, truncate, O_APPEND, sparse writes, symbolic links and special
# files, and the clear answer for what kvtierfs refuses (link: EPERM).
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 42
kvt_setup
kvt_mount
M=$MNT

# pl CODE ARGS...: perl in the mount, under the hang guard; CODE exits 0
# for a pass.  renameat2(2) is syscall 316 on x86_64.
pl() {
	local code=$1
	shift
	(cd "$M" && kvt_run perl -e 'use strict; use warnings; use Errno;
		sub rn2 { my ($a, $b, $f) = @_; syscall(316, -100, $a, -100, $b, $f) }
		sub put { my ($n, $s) = @_; open(my $f, ">", $n) or die "$n: $!"; print $f $s; close($f) or die "$n: $!" }
		sub get { my ($n) = @_; open(my $f, "<", $n) or return undef; local $/; my $s = <$f>; $s }
		'"$code" "$@")
}

pl 'put("a", "A"); put("b", "B"); my $i = (stat("a"))[1];
	rename("a", "b") or exit 1; exit(!(get("b") eq "A" && !-e "a" && (stat("b"))[1] == $i))'
ok $? "rename a file over a file: the target has the source's bytes and inode number"

pl 'mkdir("d1"); mkdir("d2"); put("d1/x", "X"); rename("d1", "d2") or exit 1;
	exit(!(get("d2/x") eq "X" && !-e "d1"))'
ok $? "rename a directory over an empty directory"
# Both directories known to the daemon, in either order of their
# addresses (the lock order check of --enable-lock-checks sees both).
pl 'for my $i (1 .. 40) { for my $d ("q$i", "q$i/x", "p$i", "p$i/y") { mkdir($d) or exit 1; stat($d) }
	rename("p$i/y", "q$i/x") or exit 1; exit 1 if -e "p$i/y" || !-d "q$i/x";
	rmdir("q$i/x") && rmdir("q$i") && rmdir("p$i") or exit 1 }'
ok $? "40 renames of a directory over an empty one in another directory, all looked up"
pl 'mkdir("d3"); put("d3/y", "Y"); !rename("d2", "d3") && $!{ENOTEMPTY} or exit 1;
	exit(!(get("d2/x") eq "X" && get("d3/y") eq "Y"))'
ok $? "rename a directory over a non-empty one: ENOTEMPTY, both unchanged"
pl 'put("f", "F"); !rename("d2", "f") && $!{ENOTDIR} or exit 1; exit(!(get("f") eq "F"))'
ok $? "rename a directory over a file: ENOTDIR"
pl '!rename("f", "d3") && $!{EISDIR} or exit 1; exit(!(get("d3/y") eq "Y" && get("f") eq "F"))'
ok $? "rename a file over a directory: EISDIR"
pl 'put("n1", "1"); put("n2", "2"); rn2("n1", "n2", 1) == -1 && $!{EEXIST} or exit 1;
	exit(!(get("n1") eq "1" && get("n2") eq "2"))'
ok $? "RENAME_NOREPLACE over an existing name: EEXIST, both unchanged"
pl 'rn2("n1", "n3", 1) == 0 or exit 1; exit(!(get("n3") eq "1" && !-e "n1"))'
ok $? "RENAME_NOREPLACE to a free name renames"
pl 'rn2("n2", "n3", 2) == 0 or exit 1; exit(!(get("n3") eq "2" && get("n2") eq "1"))'
ok $? "RENAME_EXCHANGE swaps two files"
pl 'mkdir("e1"); put("e1/a", "a"); mkdir("e2"); rn2("e1", "e2", 2) == 0 or exit 1;
	exit(!(get("e2/a") eq "a" && -d "e1" && !-e "e1/a"))'
ok $? "RENAME_EXCHANGE swaps two directories"
pl 'exit(!(rename("n3", "n3") && get("n3") eq "2"))'
ok $? "rename of a name onto itself changes nothing"

pl 'chmod(0600, "f") == 1 or exit 1; exit(((stat("f"))[2] & 07777) != 0600)'
ok $? "chmod of a file"
pl 'chmod(0711, "d3") == 1 or exit 1; exit(((stat("d3"))[2] & 07777) != 0711)'
ok $? "chmod of a directory"
pl 'chown(1234, 5678, "f", "d3") == 2 or exit 1;
	exit(!((stat("f"))[4] == 1234 && (stat("f"))[5] == 5678 && (stat("d3"))[4] == 1234))'
ok $? "chown of a file and a directory"
pl 'utime(1000000000, 1200000000, "f", "d3") == 2 or exit 1;
	exit(!((stat("f"))[8] == 1000000000 && (stat("f"))[9] == 1200000000 &&
	       (stat("d3"))[9] == 1200000000))'
ok $? "utimensat of a file and a directory"

pl 'mkdir("r") or exit 1; put("r/z", "z"); !rmdir("r") && $!{ENOTEMPTY} or exit 1;
	!rmdir("f") && $!{ENOTDIR} or exit 1; unlink("r/z") && rmdir("r") or exit 1; exit(-e "r")'
ok $? "rmdir: ENOTEMPTY, ENOTDIR, then removes an empty directory"
pl '!mkdir("d3") && $!{EEXIST} or exit 1; exit 0'
ok $? "mkdir of an existing name: EEXIST"

pl 'put("u", "open then unlinked"); open(my $h, "<", "u") or exit 1; unlink("u") or exit 1;
	exit 1 if -e "u"; local $/; my $s = <$h>; exit($s ne "open then unlinked")'
ok $? "a file unlinked while open is still read through its descriptor"

pl 'put("t", "0123456789"); truncate("t", 4) or exit 1; my $a = get("t");
	truncate("t", 8) or exit 1; my $b = get("t"); s/\0/\\0/g for $a, $b;
	print "# after truncate to 4: \"$a\", then to 8: \"$b\"\n";
	exit(!($a eq "0123" && $b eq "0123\\0\\0\\0\\0"))'
ok $? "truncate shortens, and extends with zeros"
# Past what the lower file system takes: its EFBIG, the file as it was,
# before any bound of kvtierfs (max_staged's EDQUOT), and no lower error
# logged: the caller's mistake (pjdfstest truncate/12, ftruncate/12).
pl 'use Errno; put("big", "0123"); my $r = truncate("big", 999999999999999999);
	my $e = $!; print "# truncate: ", ($r ? "done" : "$e"), "\n";
	exit(!(!$r && $!{EFBIG} && get("big") eq "0123"))' &&
	! grep -q 'lower file system: truncate' "$T/daemon.log"
ok $? "a truncate past the lower file system's largest file: EFBIG, the file unchanged, no lower error logged"
# A truncate by path right after the close of the file's writer: the
# kernel sends that writer's RELEASE after close() returned, so the
# truncate may come while the file still counts a writer whose version
# is already published.  Every truncate shows at once, and stays.
pl 'my @bad; for my $i (1 .. 3000) { my $n = $i % 3 ? 4 : 0; put("tl$i", "0123456789");
		truncate("tl$i", $n) or exit 1; my $s = get("tl$i");
		push @bad, $i if $s ne substr("0123", 0, $n) || -s "tl$i" != $n }
	sleep 2; for my $i (1 .. 3000) { my $s = get("tl$i"); unlink("tl$i");
		push @bad, "$i later" if $s ne substr("0123", 0, $i % 3 ? 4 : 0) }
	print "# bad: @bad[0 .. ($#bad < 9 ? $#bad : 9)]\n" if @bad; exit(@bad != 0)'
ok $? "3000 truncates (to 4 and to 0) right after the writer's close: each read at once and later shows the truncate"
pl 'put("ap", "first,"); open(my $f, ">>", "ap") or exit 1; print $f "second"; close($f) or exit 1;
	exit(get("ap") ne "first,second")'
ok $? "O_APPEND appends to a published file"
pl 'open(my $f, ">", "sp") or exit 1; seek($f, 1 << 20, 0); print $f "end"; close($f) or exit 1;
	my $s = get("sp"); exit(!(length($s) == (1 << 20) + 3 && substr($s, 0, 1 << 20) eq "\0" x (1 << 20)))'
ok $? "a sparse write: the hole reads as zeros"

pl 'symlink("target/of/link", "sl") or exit 1;
	exit(!(-l "sl" && readlink("sl") eq "target/of/link"))'
ok $? "symlink makes a symbolic link; readlink gives its target"
pl 'symlink("f", "sl2") or exit 1; exit(!(get("sl2") eq "F" && (lstat("sl2"))[7] == 1))'
ok $? "a symbolic link to a file reads the file; lstat gives the target's length"
pl 'rename("sl2", "sl3") or exit 1; exit(!(readlink("sl3") eq "f" && !-e "sl2"))'
ok $? "a symbolic link is renamed"
pl 'system("mkfifo", "fifo") == 0 or exit 1; exit(!-p "fifo")'
ok $? "mkfifo makes a FIFO"
pl 'my $pid = fork(); if (!$pid) { open(my $w, ">", "fifo") or exit 1; print $w "through"; exit 0 }
	open(my $r, "<", "fifo") or exit 1; my $s = <$r>; waitpid($pid, 0); exit($s ne "through")'
ok $? "bytes go through the FIFO"
pl 'system("mknod", "chr", "c", "1", "3") == 0 or exit 1;
	my $r = (stat("chr"))[6]; exit(!(-c "chr" && $r == 259))'
ok $? "mknod makes a character device node with its numbers (1, 3)"
pl '!link("f", "hard") && $!{EPERM} or exit 1; exit(-e "hard")'
ok $? "link is refused with EPERM (a content-addressed name has no inode to share)"
pl 'unlink("sl", "sl3", "fifo", "chr") == 4 or exit 1; exit(-e "sl" || -e "fifo")'
ok $? "symbolic links and special files are unlinked"

# O_TRUNC reaches the daemon as a SETATTR without the handle: it must
# still be the opener's own version
pl 'put("tr", "0123456789"); open(my $f, ">", "tr") or exit 1; close($f) or exit 1;
	exit(!((stat("tr"))[7] == 0 && get("tr") eq ""))'
ok $? "an open with O_TRUNC and a close, nothing written, empties a published file"
pl 'put("tw", "old"); open(my $a, ">", "tw") or exit 1; open(my $b, ">", "tw") or exit 1;
	syswrite($a, "A" x 8) == 8 or exit 1; syswrite($b, "BB") == 2 or exit 1;
	close($a) or exit 1; my $mid = get("tw"); close($b) or exit 1;
	exit(!($mid eq "A" x 8 && get("tw") eq "BB"))'
ok $? "two writers that opened with O_TRUNC publish each its own version at its close, never a mix"

pl 'put("ul", "x"); open(my $f, "<", "ul") or exit 1; unlink("ul") or exit 1;
	exit(!((stat($f))[3] == 0 && -e "ul" == 0))'
ok $? "a file unlinked while open has a link count of 0 (fstat)"

# Inode numbers: a file made here, in place or as a temp file renamed to
# its name, has once published the number a listing says, and keeps it
# once the kernel has forgotten the inode (drop_caches) and looks the
# name up again.
inodes() {
	local f
	for f in "$@"; do
		printf '%s:%s:%s ' "$f" "$(stat -c %i "$M/$f")" "$(ls -i "$M" | awk -v f="$f" '$2 == f { print $1 }')"
	done
}
pl 'put("in1", "x"); put("in2.tmp", "y"); rename("in2.tmp", "in2") or exit 1; exit 0'
before=$(inodes in1 in2)
sync
echo 2 >/proc/sys/vm/drop_caches
after=$(inodes in1 in2)
[ "$before" = "$after" ] &&
	echo "$before" | awk '{ for (i = 1; i <= NF; i++) { split($i, a, ":"); if (a[2] == "" || a[2] != a[3]) exit 1 } }'
ok $? "inode numbers of files made here: stat and a listing agree, before and after the kernel forgets them ($before / $after)"

pl 'symlink("f", "keep-link"); system("mkfifo", "keep-fifo"); exit 0'
kvt_umount
kvt_mount
pl 'exit(!(((stat("f"))[2] & 07777) == 0600 && (stat("f"))[4] == 1234 &&
	   (stat("f"))[9] == 1200000000 && ((stat("d3"))[2] & 07777) == 0711 &&
	   (stat("d3"))[9] == 1200000000))'
ok $? "after a remount: modes, owners and times of files and directories are kept"
pl 'exit(!(readlink("keep-link") eq "f" && -p "keep-fifo" && get("n3") eq "2" && get("ap") eq "first,second"))'
ok $? "after a remount: links, FIFOs and contents are kept"
kvt_umount
"$top_builddir/src/kvtierfs-fsck" "$LOWER" >"$T/fsck.out" 2>&1
ok $? "kvtierfs-fsck finds the store clean, links and special files included" ||
	diag_file "$T/fsck.out"
