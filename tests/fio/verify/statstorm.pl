#!/usr/bin/perl
# statstorm.pl SECONDS CHURN_DIR STABLE_DIR STABLE_COUNT STABLE_SIZE
#
# The side storm of tests/t-fio-verify.sh, next to churn.fio: for SECONDS,
# over and over, walk CHURN_DIR (where files are created and unlinked all
# the time): readdir every directory, lstat and access(R_OK) every name,
# and open and read every 8th file to its end; then readdir STABLE_DIR and
# lstat its files, which stay.
#
# In CHURN_DIR a name may go at any moment: ENOENT is counted, not an
# error; so is ENOENT from open() after lstat() found the name (a file still
# being written under its own name is not there for a reader yet).  A file
# that opened reads to the size fstat gives (an unlink does not cut an open
# file short).  STABLE_DIR lists exactly STABLE_COUNT files, each of
# STABLE_SIZE bytes, every time.  Any other error, a short read, or no
# pass at all: one line each (the first 20), and exit 1.  The last line:
#   statstorm: N passes, N lstat, N access, N readdir, N opens, N bytes
#   read, N ENOENT, N errors
use strict;
use warnings;
use Errno qw(ENOENT);
use Fcntl qw(O_RDONLY);
use POSIX qw(R_OK);
use Time::HiRes qw(time);

my ($secs, $churn, $stable, $stable_count, $stable_size) = @ARGV;
die "usage: statstorm.pl SECONDS CHURN_DIR STABLE_DIR STABLE_COUNT STABLE_SIZE\n"
	unless defined $stable_size;

my %n = map { $_ => 0 } qw(passes lstat access readdir opens bytes enoent errors);
my $end = time + $secs;

sub error {
	$n{errors}++;
	print "statstorm: $_[0]\n" if $n{errors} <= 20;
}

# list DIR: its names without . and .., or undef (ENOENT counted).
sub list {
	my ($dir) = @_;
	my $dh;
	unless (opendir($dh, $dir)) {
		$! == ENOENT ? $n{enoent}++ : error("opendir $dir: $!");
		return undef;
	}
	my @names = grep { $_ ne '.' && $_ ne '..' } readdir($dh);
	closedir($dh);
	$n{readdir}++;
	return \@names;
}

sub read_all {
	my ($path) = @_;
	my $fh;
	unless (sysopen($fh, $path, O_RDONLY)) {
		$! == ENOENT ? $n{enoent}++ : error("open $path: $!");
		return;
	}
	$n{opens}++;
	my $size = (stat($fh))[7];
	my ($got, $buf, $r) = (0, '');
	while (($r = sysread($fh, $buf, 1 << 20)) ) {
		$got += $r;
	}
	if (!defined $r) {
		error("read $path at $got: $!");
	} elsif ($got != $size) {
		error("read $path: $got bytes, fstat says $size");
	}
	$n{bytes} += $got;
	close($fh);
}

my ($k, $churn_names) = (0, 0);
sub walk {
	my ($dir) = @_;
	my $names = list($dir) or return;
	for my $name (@$names) {
		my $p = "$dir/$name";
		my @st = lstat($p);
		unless (@st) {
			$! == ENOENT ? $n{enoent}++ : error("lstat $p: $!");
			next;
		}
		$n{lstat}++;
		$churn_names++;
		if (-d _) {
			walk($p);
			next;
		}
		if (POSIX::access($p, R_OK)) {
			$n{access}++;
		} else {
			$! == ENOENT ? $n{enoent}++ : error("access $p: $!");
		}
		read_all($p) if ++$k % 8 == 0;
	}
}

while (time < $end) {
	walk($churn);
	my $names = list($stable);
	if (!$names) {
		error("$stable cannot be listed");
	} elsif (@$names != $stable_count) {
		error(sprintf("%s lists %d names, not %d", $stable, scalar(@$names), $stable_count));
	} else {
		for my $name (@$names) {
			my @st = lstat("$stable/$name");
			if (!@st) {
				error("lstat $stable/$name: $!");
			} elsif ($st[7] != $stable_size) {
				error("lstat $stable/$name: size $st[7], not $stable_size");
			} else {
				$n{lstat}++;
			}
		}
	}
	$n{passes}++;
}
error("no pass over $churn in ${secs}s") unless $n{passes};
error("nothing found in $churn") unless $churn_names;
printf "statstorm: %d passes, %d lstat, %d access, %d readdir, %d opens, %d bytes read, %d ENOENT, %d errors\n",
	@n{qw(passes lstat access readdir opens bytes enoent errors)};
exit($n{errors} ? 1 : 0);
