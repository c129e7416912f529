#!/bin/bash
# Error paths against the lock order: creating a file whose staging file
# cannot be made (the lower disk is out of inodes: ENOSPC) while the
# kernel forgets the directory's other files (a small -o max_inodes makes
# it drop the oldest names all the time, and drop_caches the rest), over
# and over, from several processes.  A create that failed used to drop its
# never-seen inode under the directory's lock, taking the tree lock in the
# wrong order against FORGET: every daemon thread then waited forever.
# Each round is bounded by the hang guard (lib.sh); with
# --enable-lock-checks a wrong order aborts the daemon at once.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 10
kvt_setup

mount -t tmpfs -o size=64m,nr_inodes=2000 kvt-locks "$LOWER" || bail "mount tmpfs"
kvt_mount max_inodes=64

kvt_run mkdir "$MNT/d"
kvt_run perl -e '
	my ($d) = @ARGV;
	for my $i (1 .. 150) {
		open(my $f, ">", "$d/f$i") or exit 1;
		print $f "block $i\n" or exit 1;
		close($f) or exit 1;
		print "f$i\n";
	}' "$MNT/d" >"$T/names" 2>"$T/fill.err"
ok $? "150 files stored in one directory" || diag_file "$T/fill.err"

# Then no inode is left on the lower disk: not even a staging file can be
# made.  (Files at the top of LOWERDIR are nothing the mount looks at.)
perl -e 'my ($dir) = @ARGV; for (my $i = 0; ; $i++) {
	open(my $f, ">", "$dir/filler.$i") or exit($!{ENOSPC} ? 0 : 1) }' "$LOWER"
ok $? "the lower disk's inodes are used up"
kvt_run perl -e 'open(my $f, ">", "$ARGV[0]") and exit 1; exit($!{ENOSPC} ? 0 : 2)' \
	"$MNT/d/one-more"
ok $? "a create fails with ENOSPC (no staging file can be made)"

creates() {
	perl -e '
		my ($d, $tag, $n) = @ARGV; my $bad = 0;
		for my $i (1 .. $n) {
			if (open(my $f, ">", "$d/new.$tag.$i")) { $bad++; close($f); next }
			$bad++ unless $!{ENOSPC};
		}
		exit($bad ? 1 : 0);' "$MNT/d" "$1" "$2"
}

lookups() {
	perl -e '
		my ($d, $list, $rounds) = @ARGV; my $bad = 0;
		open(my $l, "<", $list) or exit 2; chomp(my @names = <$l>);
		for my $r (1 .. $rounds) {
			for my $f (@names) { $bad++ unless -e "$d/$f" }
		}
		exit($bad ? 1 : 0);' "$MNT/d" "$T/names" "$1"
}

forgets() {
	for _ in $(seq 20); do
		echo 2 >/proc/sys/vm/drop_caches
		sleep 0.2
	done
}

storm() {
	local pids=() st=0 p
	for t in 1 2 3 4; do creates "$t" 3000 & pids+=($!); done
	for _ in 1 2; do lookups 40 & pids+=($!); done
	forgets & pids+=($!)
	for p in "${pids[@]}"; do wait "$p" || st=1; done
	return $st
}

for round in 1 2 3; do
	kvt_run storm
	ok $? "round $round: 12000 failed creates, 2 x 6000 lookups and drop_caches at once; none hangs"
done

kvt_run stat "$MNT/d/f1" >/dev/null
ok $? "the mount still answers"
kvt_run perl -e 'my ($d, $list) = @ARGV; open(my $l, "<", $list) or exit 2;
	while (<$l>) { chomp; exit 1 unless -e "$d/$_" }
	for my $t (1 .. 4) { exit 1 if -e "$d/new.$t.1" } exit 0' "$MNT/d" "$T/names"
ok $? "every one of the 150 files is still there, none of the failed ones"
kvt_umount
