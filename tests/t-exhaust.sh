#!/bin/bash
# A daemon out of file descriptors: stores fail (EMFILE), but nothing
# crashes, and at unmount the daemon still exits 0 and removes its
# staging.  (glibc loads libgcc_s the first time a thread is cancelled,
# which libfuse does to its workers at unmount; with no fd left that load
# failed and the daemon aborted, leaving its staging behind.)
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
kvt_require_root
command -v prlimit >/dev/null || bail "prlimit is missing (util-linux)"
plan 7
kvt_setup
kvt_mount

ok_kvclient "store 32 blocks while the daemon has its fds" \
	vllm-store --dir "$MNT" --blocks 32 --size 64K --threads 8
n=$(find /proc/"$KVT_PID"/fd -mindepth 1 -maxdepth 1 | wc -l)
prlimit --pid "$KVT_PID" --nofile="$n:$n"
ok $? "the daemon's fd limit lowered to the $n it has open"

kvt_run "$KVCLIENT" vllm-store --dir "$MNT" --key-base 1000 --blocks 64 --size 64K \
	--threads 8 >"$T/store.out" 2>&1
st=$?
[ "$st" = 1 ] && grep -Eq "EMFILE|Too many open files" "$T/store.out"
ok $? "new stores fail with EMFILE (status $st), the daemon answers"
diag "$(grep -m 3 'FAIL' "$T/store.out")"
kvt_run "$KVCLIENT" verify --dir "$MNT" >/dev/null 2>&1
kvt_run stat "$MNT" >/dev/null
ok $? "the mount still answers"

# Unmounted at the limit: the daemon exits 0 (kvt_umount's test point).
kvt_umount
ls -A "$LOWER/staging" >"$T/staging.left"
[ ! -s "$T/staging.left" ]
ok $? "no staging left behind: $(tr '\n' ' ' <"$T/staging.left")"
