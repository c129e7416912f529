#!/bin/bash
# fio with the job files in tests/fio: 2 MiB files written once with
# verify=xxhash and read back verified (ioengine=psync), O_DIRECT and
# buffered; then read back and verified again after close and after a
# remount.
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"

JOBS="$KVT_LIB_DIR/fio"

# ok_fio DESC JOBFILE DIR VERIFY_ONLY
ok_fio() {
	local desc=$1 job=$2 dir=$3 vo=$4 out st
	out=$(_kvt_tmpfile)
	kvt_guard env -C "$T" FIO_DIR="$dir" FIO_VERIFY_ONLY="$vo" fio "$job" >"$out" 2>&1
	st=$?
	if [ "$st" = 0 ] && ! grep -Eq 'err= *[1-9]|verify failed|fio: ' "$out"; then
		_kvt_ok 0 "$desc"
		grep -E '^ *(READ|WRITE):' "$out" | sed 's/^ */#   /'
	else
		_kvt_ok 1 "$desc"
		diag "fio $(basename "$job") (FIO_DIR=$dir FIO_VERIFY_ONLY=$vo), exit status $st"
		grep -E 'fio:|err=|verify|rror' "$out" | head -n 20 | sed 's/^/#   /'
	fi
	rm -f "$out"
	_kvt_check_hung
}

if ! command -v fio >/dev/null; then
	echo "1..0 # SKIP fio is not installed"
	exit 0
fi

plan 11
kvt_setup
kvt_mount
kvt_run mkdir -p "$MNT/fio/direct" "$MNT/fio/buffered"

ok_fio "fio direct=1: 64 files of 2 MiB written, read back, verified" \
	"$JOBS/direct.fio" "$MNT/fio/direct" 0
ok_fio "fio buffered: 64 files of 2 MiB written, read back, verified" \
	"$JOBS/buffered.fio" "$MNT/fio/buffered" 0

n=$(kvt_run find "$MNT/fio" -type f -size 2048k | wc -l)
[ "$n" = 128 ]
ok $? "128 files of 2 MiB are there (found $n)"

ok_fio "fio direct=1 verify_only after close: all files check" \
	"$JOBS/direct.fio" "$MNT/fio/direct" 1
ok_fio "fio buffered verify_only after close: all files check" \
	"$JOBS/buffered.fio" "$MNT/fio/buffered" 1

kvt_umount
kvt_mount

ok_fio "fio direct=1 verify_only after remount: all files check" \
	"$JOBS/direct.fio" "$MNT/fio/direct" 1
ok_fio "fio buffered verify_only after remount: all files check" \
	"$JOBS/buffered.fio" "$MNT/fio/buffered" 1
kvt_umount
