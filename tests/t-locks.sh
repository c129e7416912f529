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
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 9
kvt_setup

mount -t tmpfs -o size=64m,nr_inodes=700 kvt-locks "$LOWER" || bail "mount tmpfs"
kvt_mount max_inodes=64

# Distinct small files until the lower disk has no inode left.
kvt_run mkdir "$MNT/d"
n=$(kvt_run perl -e '
	my ($d) = @ARGV; my $n = 0;
	for my $i (1 .. 2000) {
		open(my $f, ">", "$d/f$i") or last;
		print $f "block $i\n" or last;
		close($f) or last;
		$n++;
	}
	print "$n\n";' "$MNT/d")
[ "${n:-0}" -ge 100 ]
ok $? "stored $n files in one directory until the lower disk ran out of inodes"

kvt_run perl -e 'open(my $f, ">", "$ARGV[0]") and close($f) and exit 1; exit($!{ENOSPC} ? 0 : 2)' \
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
		my ($d, $n, $rounds) = @ARGV; my $bad = 0;
		for my $r (1 .. $rounds) {
			for my $i (1 .. $n) { $bad++ unless -e "$d/f$i" }
		}
		exit($bad ? 1 : 0);' "$MNT/d" "$n" "$1"
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
	ok $? "round $round: 12000 failed creates, 2 x $((40 * n)) lookups and drop_caches at once; none hangs"
done

kvt_run stat "$MNT/d/f1" >/dev/null
ok $? "the mount still answers"
kvt_run perl -e 'my ($d, $n) = @ARGV; for (1 .. $n) { exit 1 unless -e "$d/f$_" }
	for my $t (1 .. 4) { exit 1 if -e "$d/new.$t.1" } exit 0' "$MNT/d" "$n"
ok $? "every one of the $n files is still there, none of the failed ones"
kvt_umount
