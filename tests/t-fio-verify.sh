#!/bin/bash
# fio jobs with verification (tests/fio/verify/*.fio) against a mount, for
# KVT_FIO_RUNTIME seconds each (default 30; the whole file takes about
# 3 x KVT_FIO_RUNTIME + 30 s):
#
#   write-once.fio  2 MiB files written once (O_DIRECT, buffered, libaio),
#                   read back and checked, unlinked, over and over;
#   populate.fio    128 files of 2 MiB and 2 of 64 MiB, checked;
#   zipf.fio        16 readers over them, zipf-hot files and blocks, every
#                   read checked, O_DIRECT and buffered;
#   churn.fio       files created, checked and unlinked over and over next
#                   to a statx storm on the stable files, and statstorm.pl
#                   on the churning tree (stat, access, readdir, reads).
#
# A job passes when fio exits 0, its JSON report gives every job error 0,
# no short or dropped I/O, I/O done by every process (verify reads too),
# and fio said nothing about verify or errors.  Then: no torn block counted,
# a clean unmount, kvtierfs-fsck clean, and after a remount every file
# left is read back with a read-only open and checked, exactly the names
# and bytes the lower store records; the 2 MiB and 64 MiB files read back
# the bytes they had before the readers ran.  Last, a changed byte must
# fail the check (the check can fail).
#
# Stress (scripts/stress): the same file with a longer run, e.g.
#   KVT_FIO_RUNTIME=600 tests/t-fio-verify.sh
# (about half an hour); through tests/run give it the time too:
#   KVT_FIO_RUNTIME=600 KVT_TIMEOUT=2400 tests/run tests/t-fio-verify.sh
# kvt-kind: clients
# kvt-timeout: 300
. "$(dirname "$0")/lib.sh"

: "${KVT_FIO_RUNTIME:=$(kvt_stress_pick 30 600)}"
: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
JOBS="$KVT_LIB_DIR/fio/verify"
BLK=$((2 << 20))

# fio_report JSON: check fio's JSON report; one "#" line per job (its
# processes summed), and on failure what is wrong.  Exit 0 when every
# process has error 0, no short or dropped I/O and did I/O (stat, for
# ioengine=filestat), and a writer that checks also read back.
fio_report() {
	perl -MJSON::PP -e '
		local $/;
		my $text = <>;
		$text =~ s/^[^{]*//s;	# lines fio prints before the JSON
		my $j = eval { decode_json($text) } or do { print "no JSON report: $@"; exit 1 };
		my (%sum, @order, @bad);
		@{$j->{jobs} // []} or push @bad, "no job in the report";
		for my $t (@{$j->{jobs}}) {
			my $name = $t->{jobname};
			my $o = $t->{"job options"} // {};
			my $filestat = ($o->{ioengine} // "") eq "filestat";
			my $s = $sum{$name} //= do { push @order, $name; {} };
			$s->{procs}++;
			$s->{filestat} = $filestat;
			push @bad, "$name: error $t->{error}" if $t->{error};
			for my $d (qw(read write)) {
				for my $k (qw(short_ios drop_ios)) {
					push @bad, "$name: $d $k $t->{$d}{$k}" if $t->{$d}{$k};
				}
				$s->{$d} += $t->{$d}{io_bytes};
				$s->{"${d}_ios"} += $t->{$d}{total_ios};
				$s->{"${d}_lat"} += $t->{$d}{lat_ns}{mean} * $t->{$d}{total_ios};
				$s->{"${d}_max"} = $t->{$d}{lat_ns}{max}
					if $t->{$d}{lat_ns}{max} > ($s->{"${d}_max"} // 0);
			}
			if ($filestat) {
				my $c = $t->{read}{clat_ns};
				$s->{stats} += $c->{N};
				$s->{stat_lat} += $c->{mean} * $c->{N};
				$s->{stat_max} = $c->{max} if $c->{max} > ($s->{stat_max} // 0);
			}
			if ($filestat ? !$t->{read}{clat_ns}{N} :
			    !$t->{read}{io_bytes} && !$t->{write}{io_bytes}) {
				push @bad, "$name: a process did nothing";
			} elsif (!$filestat && $t->{write}{io_bytes} && !$t->{read}{io_bytes}) {
				push @bad, "$name: a process wrote but read nothing back";
			}
		}
		for my $name (@order) {
			my $s = $sum{$name};
			my $line = sprintf "#   %-16s x%d:", $name, $s->{procs};
			if ($s->{filestat}) {
				$line .= sprintf " %d statx, %.0f us mean, %.1f ms max",
					$s->{stats}, $s->{stat_lat} / ($s->{stats} || 1) / 1e3,
					$s->{stat_max} / 1e6;
			}
			for my $d (grep { !$s->{filestat} && $s->{$_} } qw(write read)) {
				$line .= sprintf " %s %.0f MiB in %d I/Os (%.2f ms mean, %.0f ms max)",
					$d eq "write" ? "wrote" : "read", $s->{$d} / 1048576,
					$s->{"${d}_ios"}, $s->{"${d}_lat"} / ($s->{"${d}_ios"} || 1) / 1e6,
					$s->{"${d}_max"} / 1e6;
			}
			print "$line\n";
		}
		print "$_\n" for @bad;
		exit(@bad ? 1 : 0);
	' "$1"
}

# run_fio JOB [VAR=VALUE...]: run fio JOB (in $T, with the variables and
# KVT_FIO_RUNTIME in its environment) under the hang guard, allowing it its
# runtime.  Its JSON report goes to $T/fio.json, the rest of what it says
# to $T/fio.out, the summary of fio_report to $T/fio.report; $fio_st is its
# exit status.  Returns 0 when fio exited 0, fio_report passed, and fio
# said nothing of verify, errors or failures.
run_fio() {
	local job=$1 rst KVT_CMD_TIMEOUT=$((KVT_CMD_TIMEOUT + KVT_FIO_RUNTIME))
	shift
	fio_args="$(basename "$job") $*"
	kvt_guard env -C "$T" KVT_FIO_RUNTIME="$KVT_FIO_RUNTIME" "$@" \
		fio --output-format=json --output="$T/fio.json" "$job" >"$T/fio.out" 2>&1
	fio_st=$?
	# what fio prints to its output file before the report
	sed -n '/^{/q; p' "$T/fio.json" >>"$T/fio.out"
	fio_report "$T/fio.json" >"$T/fio.report"
	rst=$?
	[ "$fio_st" = 0 ] && [ "$rst" = 0 ] && ! grep -Eiq 'verify|err|fail|bad' "$T/fio.out"
}

# fio_diag: what went wrong in the last run_fio.
fio_diag() {
	diag "fio $fio_args: exit status $fio_st"
	sed 's/^#   /  /' "$T/fio.report" | diag "$(cat)"
	grep -Ei 'verify|err|fail|bad|fio:' "$T/fio.out" | head -n 20 | sed 's/^/#   /'
}

# ok_fio DESC JOB [VAR=VALUE...]: run_fio; one test point, with the
# summary of every job.
ok_fio() {
	local desc=$1
	shift
	local st=0
	if run_fio "$@"; then
		_kvt_ok 0 "$desc"
		cat "$T/fio.report"
	else
		st=1
		_kvt_ok 1 "$desc"
		fio_diag
	fi
	_kvt_check_hung
	return $st
}

# lower_files REL: "COUNT BYTES" of the names the lower store records under
# REL (below $MNT), the sizes as the mount gives them.
lower_files() {
	(cd "$LOWER/names" && find "$1" -type f -print0) >"$T/names.list"
	(cd "$MNT" && kvt_guard xargs -0 -r -a "$T/names.list" stat -c %s) |
		awk '{ n++; b += $1 } END { print n + 0, b + 0 }'
}

# ok_readback DESC REL BS DIRECT: readback.fio over $MNT/REL (bs BS,
# O_DIRECT when DIRECT is 1), one test point: every file fio found checked,
# and fio found and read exactly the files and bytes the lower store
# records there.
ok_readback() {
	local desc=$1 rel=$2 bs=$3 direct=$4 want got found st
	want=$(lower_files "$rel")
	run_fio "$JOBS/readback.fio" KVT_FIO_DIR="$MNT/$rel" KVT_FIO_BS="$bs" \
		KVT_FIO_DIRECT="$direct"
	st=$?
	found=$(sed -n 's/^fio: opendir added \([0-9]*\) files$/\1/p' "$T/fio.out")
	got=$(perl -MJSON::PP -e 'local $/; my $t = <>; $t =~ s/^[^{]*//s;
		my $r = 0; $r += $_->{read}{io_bytes} for @{decode_json($t)->{jobs}};
		print $r' "$T/fio.json" 2>/dev/null)
	[ "$st" = 0 ] && [ "${want%% *}" -gt 0 ] && [ "$found $got" = "$want" ]
	if ok $? "$desc: fio checked ${found:-?} files, ${got:-?} bytes; the store has $want"; then
		cat "$T/fio.report"
	else
		fio_diag
	fi
}

# set_sums: XXH3-128 of every file of $MNT/set/blk and big, sorted by name.
set_sums() {
	(cd "$MNT/set" && kvt_guard find blk big -type f -print0) | LC_ALL=C sort -z >"$T/set.list"
	(cd "$MNT/set" && kvt_guard xargs -0 -a "$T/set.list" "$KVT_XXH128")
}

# counters NAME...: "name value" of the mount's counters NAME.
counters() {
	local re
	re="^($(IFS='|'; echo "$*")) "
	kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.stats "$MNT" | grep -E "$re" | tr '\n' ' '
}

# ok_fsck: kvtierfs-fsck on the unmounted store: exit 0, nothing but the
# summary line, 0 problems.
ok_fsck() {
	"$KVTIERFS_FSCK" "$LOWER" >"$T/fsck.out" 2>"$T/fsck.err"
	local rc=$?
	[ "$rc" = 0 ] && [ "$(grep -c '' "$T/fsck.out")" = 1 ] && [ ! -s "$T/fsck.err" ] &&
		grep -q ', 0 problems$' "$T/fsck.out"
	ok $? "kvtierfs-fsck: exit $rc, $(tail -n 1 "$T/fsck.out")" || {
		diag_file "$T/fsck.out" 20
		diag_file "$T/fsck.err" 20
	}
}

if ! command -v fio >/dev/null; then
	echo "1..0 # SKIP fio is not installed"
	exit 0
fi
kvt_require_root
plan 25
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"
diag "KVT_FIO_RUNTIME=$KVT_FIO_RUNTIME"
kvt_mount
kvt_run mkdir "$MNT/once" "$MNT/set"

# --- write-once files ------------------------------------------------------
ok_fio "write-once: 2 MiB files written, checked, unlinked for ${KVT_FIO_RUNTIME}s" \
	"$JOBS/write-once.fio" KVT_FIO_DIR="$MNT/once" KVT_FIO_LOOPS=1000000000
# The timed run may stop right after a loop unlinked its files (as the
# churn below): one last loop leaves the files the readbacks check.
kvt_guard rm -rf "$MNT/once/direct" "$MNT/once/buffered" "$MNT/once/libaio"
ok $? "rm -rf of the write-once directories"
ok_fio "write-once: one last loop that leaves its files, checked" \
	"$JOBS/write-once.fio" KVT_FIO_DIR="$MNT/once" KVT_FIO_LOOPS=1 KVT_FIO_RUNTIME=10
ok_readback "write-once: the last files, read-only and O_DIRECT, checked" once 2M 1

# --- zipf readers ----------------------------------------------------------
ok_fio "populate: 128 x 2 MiB and 2 x 64 MiB written and checked" \
	"$JOBS/populate.fio" KVT_FIO_DIR="$MNT/set"
set_sums >"$T/set.sums"
n=$(grep -c '' "$T/set.sums")
[ "$n" = 130 ]
ok $? "the 130 files hashed (found $n)"
ok_fio "zipf: 16 readers on hot files and blocks for ${KVT_FIO_RUNTIME}s, every read checked" \
	"$JOBS/zipf.fio" KVT_FIO_DIR="$MNT/set"

# --- churn and stat storms -------------------------------------------------
kvt_run mkdir "$MNT/set/churn"
perl "$JOBS/statstorm.pl" "$KVT_FIO_RUNTIME" "$MNT/set/churn" "$MNT/set/blk" 128 $BLK \
	>"$T/storm.out" 2>&1 &
storm=$!
kvt_bg $storm
ok_fio "churn: files created, checked, unlinked for ${KVT_FIO_RUNTIME}s next to a statx storm" \
	"$JOBS/churn.fio" KVT_FIO_DIR="$MNT/set" KVT_FIO_LOOPS=1000000000
wait $storm
st=$?
ok $st "statstorm on the churning tree: $(tail -n 1 "$T/storm.out")" ||
	diag_file "$T/storm.out" 25
# The timed churn may stop right after a loop unlinked its files; one
# last pass, which unlinks nothing, leaves files for the remount to check.
kvt_guard rm -rf "$MNT/set/churn/churn-direct" "$MNT/set/churn/churn-mixed"
ok $? "rm -rf of the churned directories"
ok_fio "churn: one last pass that leaves its files, checked" \
	"$JOBS/churn.fio" KVT_FIO_DIR="$MNT/set" KVT_FIO_LOOPS=1 KVT_FIO_RUNTIME=10

# --- the mount after all that ---------------------------------------------
c=$(counters stores torn_size torn_hash short_reads purges)
[[ "$c" =~ "torn_size 0 torn_hash 0 short_reads 0 purges 0" ]] && [[ ! "$c" =~ "stores 0 " ]]
ok $? "nothing torn, short or purged: $c"
kvt_umount
ok_fsck

kvt_mount
ok_readback "after the remount: write-once files, buffered, checked" once 2M 0
ok_readback "after the remount: the 2 MiB files, O_DIRECT, checked" set/blk 2M 1
ok_readback "after the remount: the 64 MiB files, buffered, checked" set/big 2M 0
ok_readback "after the remount: the churn-direct files of the last pass, checked" set/churn/churn-direct 2M 0
ok_readback "after the remount: the churn-mixed files of the last pass (64 KiB blocks), checked" \
	set/churn/churn-mixed 64k 0
set_sums >"$T/set.sums2"
cmp -s "$T/set.sums" "$T/set.sums2"
ok $? "the 130 files hold the bytes they had before the readers (xxh128)" ||
	diff "$T/set.sums" "$T/set.sums2" | head -n 10 | sed 's/^/#   /'

# --- the check can fail -----------------------------------------------------
kvt_run mkdir "$MNT/canary"
kvt_run cp "$MNT/set/blk/0.bin" "$MNT/set/blk/1.bin" "$MNT/canary/"
printf 'x' >"$T/x"
kvt_run dd if="$T/x" of="$MNT/canary/1.bin" bs=1 seek=$((BLK / 2)) conv=notrunc status=none
! run_fio "$JOBS/readback.fio" KVT_FIO_DIR="$MNT/canary" KVT_FIO_BS=2M KVT_FIO_DIRECT=0 &&
	[ "$fio_st" != 0 ] && grep -Eq 'verify failed|verify: bad' "$T/fio.out"
ok $? "a changed byte in a copy fails the check: exit $fio_st, $(grep -Em 1 'verify failed|verify: bad' "$T/fio.out")" ||
	fio_diag
kvt_umount
ok_fsck

kvt_stress_summary 1 - - - -
