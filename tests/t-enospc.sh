#!/bin/bash
# A full lower disk: 2000 stores of 4 KiB (write to a temp name, rename)
# into a 64 MiB tmpfs that fills up on the way.  Stores fail with ENOSPC
# at write, close or rename; a failed one never appears, every one that
# succeeded reads back, nothing leaks (kvtierfs-fsck finds no orphan: a
# publication that fails takes its new object and anchor back), and
# stores work again once there is room.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
kvt_require_root
plan 11
kvt_setup
FSCK=$top_builddir/src/kvtierfs-fsck
mkdir "$T/disk"
mount -t tmpfs -o size=64m kvt-enospc "$T/disk" || bail "mount tmpfs"
LOWER=$T/disk/lower
mkdir "$LOWER"
# Leave room for a few hundred blocks only.
dd if=/dev/zero of="$T/disk/filler" bs=1M count=60 status=none
kvt_mount

kvt_run perl -e '
	my ($d, $n) = @ARGV; my (%res, @stored);
	mkdir("$d/m");
	for my $i (1 .. $n) {
		my $name = sprintf("%s/m/b%05d.bin", $d, $i);
		my $bytes = sprintf("%08d", $i) x 512;
		my $step = "open";
		if (open(my $f, ">", "$name.tmp")) {
			$step = "write";
			if (print $f $bytes) {
				$step = "close";
				if (close($f)) {
					$step = "rename";
					if (rename("$name.tmp", $name)) {
						push @stored, $i; $res{ok}++; next;
					}
				}
			}
		}
		my $e = $! + 0;
		$res{"$step:" . ($!{ENOSPC} ? "ENOSPC" : "errno $e")}++;
		unlink("$name.tmp");
		-e $name and die "$name: appeared although its store failed\n";
	}
	print join(" ", map { "$_=$res{$_}" } sort keys %res), "\n";
	open(my $l, ">", $ARGV[2]) or die; print $l "$_\n" for @stored;' \
	"$MNT" 2000 "$T/stored" >"$T/stores.out" 2>&1
ok $? "2000 stores into a filling disk: $(cat "$T/stores.out")"
n=$(wc -l <"$T/stored")
grep -q ENOSPC "$T/stores.out" && [ "$n" -gt 0 ] && [ "$n" -lt 2000 ]
ok $? "some stored ($n), the rest failed with ENOSPC, none appeared"

# check_all: every stored block reads back; counts into the totals.
checked=0 wrong=0 lost=0
check_all() {
	local line st
	line=$(kvt_run perl -e 'my ($d, $list) = @ARGV; open(my $l, "<", $list) or exit 2;
		my ($n, $lost, $wrong) = (0, 0, 0);
		while (my $i = <$l>) { chomp $i; $n++;
			my $name = sprintf("%s/m/b%05d.bin", $d, $i);
			if (!open(my $f, "<", $name)) { print STDERR "$name: $!\n"; $lost++; next }
			else { local $/; <$f> eq sprintf("%08d", $i) x 512 or
				do { print STDERR "$name: wrong bytes\n"; $wrong++ } } }
		print "$n $lost $wrong\n"; exit($lost || $wrong)' \
		"$MNT" "$T/stored")
	st=$?
	read -r n_c n_l n_w <<<"$line"
	checked=$((checked + ${n_c:-0})) lost=$((lost + ${n_l:-0})) wrong=$((wrong + ${n_w:-1}))
	return $st
}
check_all
ok $? "every stored block reads back"
n_tmp=$(kvt_count_tmp "$MNT") && [ "$n_tmp" = 0 ]
ok $? "no temp file left (${n_tmp})"
kvt_umount
"$FSCK" "$LOWER" >"$T/fsck.out" 2>&1
rc=$?
orphans=$(grep -c '^orphan' "$T/fsck.out")
[ "$rc" = 0 ]
ok $? "kvtierfs-fsck: no orphan, nothing torn (exit $rc): $orphans orphans"
grep -E '^orphan' "$T/fsck.out" | head -n 5 | sed 's/^/# /'
rm -f "$T/disk/filler"
kvt_mount
ok_kvclient "with room again, stores work" vllm-store --dir "$MNT" --blocks 16 --size 64K
check_all
ok $? "and the blocks stored before still read back"
kvt_umount

kvt_stress_summary 1 "$checked" "$wrong" "$lost" "$orphans"
