#!/bin/bash
# Publication edge cases: a name appears only complete, and a version whose
# publication failed is not lost.
#  - another process opening a file for writing (touch) while it is being
#    written publishes nothing of it;
#  - a rename that fails with ENOSPC leaves the temp file intact, and the
#    same rename once there is room publishes it whole, also across a
#    remount.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

plan 18
kvt_require_root
kvt_setup
kvt_mount

# --- a touch while a file is being written under its own name -------------
# Every close of any descriptor of the file is a FLUSH, which publishes; a
# shell cannot write without one (a redirection is a dup and a close), so
# the writer is a perl process (perl-base is essential on Debian) that
# holds one descriptor and writes and closes when told to.  It takes its
# orders on one FIFO and answers on another, both opened read-write here
# so that no open blocks.
half=$((1 << 20))
{ head -c $half /dev/zero | tr '\0' a; head -c $half /dev/zero | tr '\0' b; } >"$T/g.want"
mkfifo "$T/orders" "$T/answers"
exec 8<>"$T/orders" 9<>"$T/answers"
perl -e '
	$| = 1;
	open(my $f, ">", $ARGV[0]) or die "open: $!\n";
	while (<STDIN>) {
		if (/^write (\S) (\d+)$/) {
			my $n = syswrite($f, $1 x $2);
			die "write: $!\n" unless defined $n && $n == $2;
			print "written\n";
		} elsif (/^close$/) {
			close($f) or die "close: $!\n";
			print "closed\n";
			exit 0;
		}
	}' "$MNT/g.pt" <&8 >&9 &
wpid=$!
echo "write a $half" >&8
read -r -t 60 -u 9 state
[ "$state" = written ]
ok $? "a writer holds g.pt open and has written its first 1 MiB (${state:-no answer})"
ok_cmd "another process touches g.pt meanwhile" touch "$MNT/g.pt"
out=$(kvt_run cat "$MNT/g.pt" 2>&1 >/dev/null)
st=$?
[ "$st" != 0 ] && grep -q 'No such file' <<<"$out"
ok $? "g.pt still cannot be read: nothing of the unfinished write was published (cat: exit $st, ${out:-no error})"
echo "write b $half" >&8
read -r -t 60 -u 9 state
echo close >&8
read -r -t 60 -u 9 state2
[ "$state $state2" = "written closed" ]
ok $? "the writer writes its second 1 MiB and closes g.pt (${state:-no answer} ${state2:-no answer})"
[ "$state2" = closed ] || kill -KILL "$wpid" 2>/dev/null
wait "$wpid"
exec 8>&- 9>&-
kvt_run cmp "$MNT/g.pt" "$T/g.want"
ok $? "g.pt reads back all 2 MiB its writer wrote"

kvt_umount

# --- a rename that fails for want of space, then again --------------------
kvt_new_lower
mount -t tmpfs -o size=8m kvt-publish "$LOWER"
ok $? "mount an 8 MiB tmpfs as LOWERDIR"
kvt_mount
head -c $((2 << 20)) /dev/urandom >"$T/a.want"
ok_cmd "write a 2 MiB temp file a.bin_1.tmp" cp "$T/a.want" "$MNT/a.bin_1.tmp"
dd if=/dev/zero of="$LOWER/filler" bs=64k status=none 2>/dev/null
out=$(kvt_run mv -T "$MNT/a.bin_1.tmp" "$MNT/a.bin" 2>&1)
st=$?
[ "$st" != 0 ] && grep -q 'No space left' <<<"$out"
ok $? "with the lower disk full, rename(a.bin_1.tmp, a.bin) fails with ENOSPC (${out:-succeeded})"
[ ! -e "$MNT/a.bin" ] && kvt_run cmp "$MNT/a.bin_1.tmp" "$T/a.want"
ok $? "a.bin does not exist, a.bin_1.tmp still holds its 2 MiB"
rm -f "$LOWER/filler"
ok_cmd "with room again, the same rename works" mv -T "$MNT/a.bin_1.tmp" "$MNT/a.bin"
kvt_run cmp "$MNT/a.bin" "$T/a.want"
ok $? "a.bin reads back the 2 MiB written"
kvt_umount
kvt_mount
kvt_run cmp "$MNT/a.bin" "$T/a.want" && [ ! -e "$MNT/a.bin_1.tmp" ]
ok $? "after a remount a.bin is there, complete, and the temp name is gone"
kvt_umount
umount "$LOWER"
