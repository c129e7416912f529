#!/bin/bash
# Bounds that fail the one caller, not the mount, as unprivileged users on
# an allow_other mount meet them (the users of t-users.sh, and bare uids).
#
# Files being written: the daemon runs with 1024 descriptors, so that
# max_pending's default is 85 a uid (a quarter of them, three a file) and
# 170 in all.  kvtu1 creates 400 empty .tmp files and keeps them open: his
# 86th and later fail with EDQUOT, one log line says so, and meanwhile
# kvtu2 stores and loads blocks the vLLM way (tmp, rename), byte-exact.
# A second uid fills the total: a third gets ENFILE.  Closed, a .tmp file
# is still pending (only a rename publishes it): the bound is given back
# once they remove them.  (Without the bound kvtu1 took every descriptor
# and kvtu2's stores failed with EMFILE.)
#
# Xattrs: kvtu1's 800 setxattr of 32 KiB values on one .tmp stop at the
# 64 KiB of names and values a file may carry (E2BIG), and the daemon's
# resident memory stays within a few MiB (without the bound: 25 MiB more).
# On a mount with xattr_memory=1, a uid's pending files get a quarter of
# the MiB (EDQUOT past it), five uids the whole (ENOSPC), and an unlink or
# a publication gives it back.
#
# Whom a file being written is counted against: the caller of the request
# that begins it, whatever the request.  On a fresh mount with
# max_pending=20, kvtu1 makes 30 .tmp files by mknod(2), which opens
# nothing: 20 taken, then EDQUOT, logged as his; root's and kvtu2's
# creates meanwhile are taken.  (When the uid was remembered per thread,
# set by the operations that knew to, mknod counted kvtu1's files against
# whoever the thread served last: root, which then got EDQUOT.)
#
# Staged bytes (-o max_staged): the default is a quarter of the lower
# file system (the mount's bounds line).  With max_staged=8 (MiB), kvtu1
# writes 6 MiB to one .tmp and then 6 MiB to another: the second stops
# at 2 MiB with EDQUOT, logged once; a truncate that grows a third to
# 100 MiB fails the same; meanwhile kvtu2 stores two 6 MiB blocks
# byte-exact.  Once kvtu1 renames his first (published) and removes the
# second, he writes 8 MiB again; an append to the published one, a new
# version that starts from its 6 MiB, then fails the same until he
# removes those 8 MiB.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v setpriv >/dev/null || bail "setpriv is missing (util-linux)"
# The users' python: root's own may live where they cannot enter.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || bail "python3 is missing"
U1=kvtu1
U2=kvtu2
kvt_make_users "$U1" "$U2"
UID1=$(id -u "$U1")
# Uids without an account: the bounds go by number.
X1=60901
X2=60902
X3=60903

plan 38
kvt_setup
chmod 755 "$T"

# as USER CMD...: CMD as USER (its groups), in $MNT, under the hang guard.
# The directories above $T are tests/run's, 0700: the users name their
# paths from $MNT (../in/a).
as() { kvt_as "$@"; }
# as_uid UID CMD...: the same as a bare uid (its own gid, no groups).
as_uid() {
	local u=$1
	shift
	(cd "$MNT" && kvt_run setpriv --reuid="$u" --regid="$u" --clear-groups "$@")
}

# Python runs with -c: it would make a script's path absolute, through the
# directories above $T.
# HOLD_PY DIR N UNTIL: creates DIR/h0.tmp ... (N tries, going on past
# failures) and keeps those made open; says "held K" and the errors by
# name ("EDQUOT:315"), then waits for the file UNTIL (named from $MNT: the
# directories above $T are closed to the users) before closing them.
HOLD_PY=$(cat <<'EOF'
import errno, os, sys, time
d, n, until = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fds, errs = [], {}
for i in range(n):
    try:
        fds.append(os.open("%s/h%d.tmp" % (d, i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errs[name] = errs.get(name, 0) + 1
print("held %d %s" % (len(fds), " ".join("%s:%d" % kv for kv in sorted(errs.items())) or "none"),
      flush=True)
for _ in range(1200):
    if os.path.exists(until):
        break
    time.sleep(0.1)
for fd in fds:
    os.close(fd)
EOF
)
# XATTRS_PY PATH N SIZE [PREFIX]: N setxattr of SIZE bytes (PREFIX0,
# PREFIX1, ...; PREFIX user.k) on PATH, made when missing; says "set K"
# and the errors by name.
XATTRS_PY=$(cat <<'EOF'
import errno, os, sys
path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prefix = sys.argv[4] if len(sys.argv) > 4 else "user.k"
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
done, errs = 0, {}
for i in range(n):
    try:
        os.setxattr(fd, "%s%d" % (prefix, i), b"x" * size)
        done += 1
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errs[name] = errs.get(name, 0) + 1
os.close(fd)
print("set %d %s" % (done, " ".join("%s:%d" % kv for kv in sorted(errs.items())) or "none"))
EOF
)
mkdir "$T/in" && chmod 755 "$T/in" || bail "mkdir failed"
for i in 0 1 2 3 4; do
	head -c $((1024 * 1024 + i * 4096)) /dev/urandom >"$T/in/b$i" || bail "head failed"
done
chmod 644 "$T/in"/*

# The daemon with 1024 descriptors: its soft and hard limit.
cat >"$T/kvtierfs-1024" <<EOF
#!/bin/sh
ulimit -n 1024 || exit 1
exec "$KVTIERFS" "\$@"
EOF
chmod 755 "$T/kvtierfs-1024"
REAL_KVTIERFS=$KVTIERFS
KVTIERFS=$T/kvtierfs-1024

kvt_mount allow_other
KVTIERFS=$REAL_KVTIERFS
for u in "$U1" "$U2"; do
	install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
done
install -d -m 1777 "$MNT/pub" || bail "install -d failed"

# store USER SRC NAME: vLLM's way, a temp file renamed over the name.
store() {
	as "$1" sh -c 'cp "$1" "$2.tmp" && mv "$2.tmp" "$2"' sh "$2" "$3"
}
# log_count PATTERN: lines of the daemon log matching PATTERN.
log_count() { grep -c -- "$1" "$T/daemon.log"; }
# held_line FILE: the "held" line HOLD_PY printed there (for kvt_within).
held_line() { grep -q '^held ' "$1"; }

# ---------------------------------------------------------------- the default bounds

read -r blocks bsize < <(stat -f -c '%b %S' "$LOWER")
want=$(kvt_calc 'int(b * s / 4 / 1048576)' b="${blocks:-}" s="${bsize:-}")
grep -q "bounds: .*max_staged=$want MiB per uid" "$T/daemon.log"
ok $? "max_staged's default: a quarter of the lower file system ($want MiB)" ||
	diag "$(grep -o 'bounds: .*' "$T/daemon.log" | head -n 1)"

# ---------------------------------------------------------------- files being written

edquot0=$(log_count "uid $UID1 holds")
as "$U1" "$PY" -c "$HOLD_PY" "$U1" 400 ../release1 >"$T/hold1.out" 2>&1 &
h1=$!
kvt_bg "$h1"
kvt_within 60 held_line "$T/hold1.out"
read -r _ held1 errs1 <"$T/hold1.out"
kvt_num_cmp "${held1:-}" -eq 85 && [ "${errs1:-}" = EDQUOT:315 ]
ok $? "$U1's 400 creates of empty .tmp files kept open: 85 taken, the rest EDQUOT (${held1:-none}, ${errs1:-})" ||
	diag_file "$T/hold1.out" 5
fds=$(find "/proc/$KVT_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
diag "the daemon holds $fds descriptors of 1024"

ok_b=0
for i in 0 1 2 3; do
	store "$U2" ../in/b$i "$U2/blk$i.bin" && as "$U2" cmp ../in/b$i "$U2/blk$i.bin" && ok_b=$((ok_b + 1))
done
kvt_num_cmp "$ok_b" -eq 4
ok $? "meanwhile $U2 stores 4 blocks (tmp and rename) and reads them back byte-exact ($ok_b)"

edquot=$(log_count "uid $UID1 holds")
kvt_num_cmp "$edquot" -eq "$((edquot0 + 1))"
ok $? "one log line for $U1's 315 refusals ($edquot0, then $edquot)"

as_uid "$X1" "$PY" -c "$HOLD_PY" pub 100 ../release1 >"$T/hold2.out" 2>&1 &
h2=$!
kvt_bg "$h2"
kvt_within 60 held_line "$T/hold2.out"
read -r _ held2 errs2 <"$T/hold2.out"
as_uid "$X2" sh -c 'exec 3>pub/x2.tmp' 2>"$T/x2.err"
rc=$?
kvt_num_cmp "${held2:-}" -eq 85 && [ "${errs2:-}" = EDQUOT:15 ] && [ "$rc" != 0 ] &&
	grep -q 'Too many open files in system' "$T/x2.err"
ok $? "uid $X1 takes 85 more (${held2:-none}, ${errs2:-}); then, 170 in all, uid $X2's create fails with ENFILE" ||
	diag_file "$T/x2.err" 3
kvt_num_cmp "$(log_count 'files being written in all')" -ge 1
ok $? "the mount's total is logged"

# Closed, a .tmp file is still pending (only a rename publishes it): its
# stage goes with its name.
: >"$T/release1"
wait "$h1" "$h2"
# store_again: kvtu1 and kvtu2 store and load (the kernel's FORGET of the
# removed files, which frees them, may come a moment after the unlink).
store_again() {
	store "$U1" ../in/b4 "$U1/again.bin" && as "$U1" cmp ../in/b4 "$U1/again.bin" &&
		store "$U2" ../in/b4 "$U2/again.bin" && as "$U2" cmp ../in/b4 "$U2/again.bin"
}
as "$U1" sh -c 'rm "$1"/h*.tmp' sh "$U1" && as_uid "$X1" sh -c 'rm pub/h*.tmp' &&
	kvt_within 15 store_again 2>"$T/again.err"
ok $? "once $U1 and uid $X1 removed their .tmp files, $U1 and $U2 store and load again (${took:-})" ||
	diag_file "$T/again.err" 5

# ---------------------------------------------------------------- xattrs

rss() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$KVT_PID/status"; }
rss0=$(rss)
e2big0=$(log_count 'over -o max_xattr_size')
out=$(as "$U1" "$PY" -c "$XATTRS_PY" "$U1/x.tmp" 800 32768)
rss1=$(rss)
e2big=$(log_count 'over -o max_xattr_size')
[ "$out" = "set 1 E2BIG:799" ]
ok $? "$U1's 800 setxattr of 32 KiB on one .tmp: one taken, then E2BIG ($out)"
grow=$(kvt_calc 'b - a' a="$rss0" b="$rss1")
kvt_num_cmp "$grow" -lt 8192
ok $? "the daemon's resident memory grew less than 8 MiB ($rss0 kB, then $rss1 kB)"
kvt_num_cmp "$e2big" -eq "$((e2big0 + 1))"
ok $? "one log line for 799 refusals ($e2big0, then $e2big)"

# Published: the record holds them, within the same bound.
as "$U1" mv "$U1/x.tmp" "$U1/x.bin" &&
	as "$U1" setfattr -n user.vllm.kv_crc32c -v 0x1a2b3c4d "$U1/x.bin" &&
	as "$U1" getfattr -e hex -n user.vllm.kv_crc32c "$U1/x.bin" | grep -qx 'user.vllm.kv_crc32c=0x1a2b3c4d'
ok $? "on the published file, a 4-byte user.vllm.kv_crc32c is set and read back"
out=$(as "$U1" "$PY" -c "$XATTRS_PY" "$U1/x.bin" 2 40000 user.big)
[ "$out" = "set 0 E2BIG:2" ]
ok $? "40 KB more on it: E2BIG ($out)"
kvt_umount

# ---------------------------------------------------------------- xattr memory

kvt_mount allow_other xattr_memory=1 || bail "the mount with xattr_memory=1 failed"
for u in "$U1" "$U2"; do
	install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
done
install -d -m 1777 "$MNT/pub" || bail "install -d failed"

# fill WHO DIR: 6 pending files of one 60000-byte xattr each, as WHO
# (as or as_uid ID); prints what each said ("set 1 none" ...), one a line.
fill() {
	local i
	for i in 0 1 2 3 4 5; do
		"$@" "$PY" -c "$XATTRS_PY" "$DIR/m$i.tmp" 1 60000
	done
}
DIR=$U1 fill as "$U1" >"$T/m1.out"
DIR=$U2 fill as "$U2" >"$T/m2.out"
for x in "$X1" "$X2" "$X3"; do
	install -d -o "$x" -g "$x" -m 0700 "$MNT/pub/$x" || bail "install -d failed"
done
DIR=pub/$X1 fill as_uid "$X1" >"$T/m3.out"
DIR=pub/$X2 fill as_uid "$X2" >"$T/m4.out"
DIR=pub/$X3 fill as_uid "$X3" >"$T/m5.out"
# oneline FILE: its lines joined by spaces.
oneline() { paste -s -d ' ' "$1"; }
quarter='set 1 none set 1 none set 1 none set 1 none set 0 EDQUOT:1 set 0 EDQUOT:1'
[ "$(oneline "$T/m1.out")" = "$quarter" ] && [ "$(oneline "$T/m2.out")" = "$quarter" ]
ok $? "$U1 and $U2: 4 pending files with 60000 bytes of xattrs each, then EDQUOT (a quarter of 1 MiB)" ||
	diag "$(oneline "$T/m1.out") / $(oneline "$T/m2.out")"
[ "$(oneline "$T/m3.out")" = "$quarter" ] && [ "$(oneline "$T/m4.out")" = "$quarter" ]
ok $? "uids $X1 and $X2 the same" ||
	diag "$(oneline "$T/m3.out") / $(oneline "$T/m4.out")"
[ "$(oneline "$T/m5.out")" = 'set 1 none set 0 ENOSPC:1 set 0 ENOSPC:1 set 0 ENOSPC:1 set 0 ENOSPC:1 set 0 ENOSPC:1' ]
ok $? "a fifth uid ($X3) gets one, then ENOSPC: the mount's MiB is taken" ||
	diag "$(oneline "$T/m5.out")"
kvt_num_cmp "$(log_count 'xattr_memory=1 MiB')" -ge 1
ok $? "the refusals are logged"

# set_again: uid X3's setxattr is taken (the kernel's FORGET of the
# removed files, which frees them, may come a moment after the unlink).
set_again() {
	out=$(as_uid "$X3" "$PY" -c "$XATTRS_PY" "pub/$X3/n.tmp" 1 60000) && [ "$out" = "set 1 none" ]
}
out=
as "$U1" sh -c 'rm "$1"/m*.tmp' sh "$U1" && kvt_within 15 set_again
ok $? "once $U1 removed his pending files, uid $X3 sets one again (${out:-}, ${took:-})"

# A publication gives the memory back: the record holds the xattrs.
as "$U2" sh -c 'for i in 0 1 2 3; do mv "$1/m$i.tmp" "$1/m$i.bin" || exit; done' sh "$U2" &&
	out=$(as "$U2" "$PY" -c "$XATTRS_PY" "$U2/n.tmp" 1 60000) && [ "$out" = "set 1 none" ] &&
	as "$U2" getfattr -n user.k0 "$U2/m3.bin" >/dev/null
ok $? "once $U2 renamed his .tmp files (published), he sets one on a new .tmp (${out:-})"
kvt_umount

# ---------------------------------------------------------------- whom a stage counts against

kvt_mount allow_other max_pending=20 || bail "the mount with max_pending=20 failed"
install -d -o "$U1" -g "$(id -g "$U1")" -m 0700 "$MNT/$U1" || bail "install -d failed"
install -d -o "$U2" -g "$(id -g "$U2")" -m 0700 "$MNT/$U2" || bail "install -d failed"
# MKNOD_PY DIR N: N regular files DIR/k0.tmp ... by mknod(2), which opens
# nothing; says "made K" and the errors by name.
MKNOD_PY=$(cat <<'EOF'
import errno, os, stat, sys
d, n = sys.argv[1], int(sys.argv[2])
made, errs = 0, {}
for i in range(n):
    try:
        os.mknod("%s/k%d.tmp" % (d, i), stat.S_IFREG | 0o600)
        made += 1
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errs[name] = errs.get(name, 0) + 1
print("made %d %s" % (made, " ".join("%s:%d" % kv for kv in sorted(errs.items())) or "none"))
EOF
)
out=$(as "$U1" "$PY" -c "$MKNOD_PY" "$U1" 30)
[ "$out" = "made 20 EDQUOT:10" ]
ok $? "$U1's 30 mknod of .tmp files with max_pending=20: 20 made, then EDQUOT ($out)"
kvt_num_cmp "$(log_count "uid $UID1 holds 20 files")" -eq 1
ok $? "logged once, as $U1's"
: >"$MNT/root.tmp" && as "$U2" sh -c ': >"$1/b.tmp"' sh "$U2"
ok $? "meanwhile root and $U2 each create a .tmp file: taken"
as "$U1" sh -c 'rm "$1"/k*.tmp' sh "$U1" && rm -f "$MNT/root.tmp" && as "$U2" rm "$U2/b.tmp"
ok $? "the .tmp files removed"
kvt_umount

# ---------------------------------------------------------------- staged bytes

kvt_mount allow_other max_staged=8 || bail "the mount with max_staged=8 failed"
for u in "$U1" "$U2"; do
	install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
done
head -c $((6 << 20)) /dev/urandom >"$T/in/six" && chmod 644 "$T/in/six" || bail "head failed"
# WRITE_PY PATH MIB: writes MIB MiB to PATH, 1 MiB at a time, and says
# "wrote K" (MiB) and the error that stopped it, by name ("none").
WRITE_PY=$(cat <<'EOF'
import errno, os, sys
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
done, err = 0, "none"
try:
    for i in range(n):
        if os.write(fd, b"s" * (1 << 20)) != 1 << 20:
            err = "short"
            break
        done += 1
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
os.close(fd)
print("wrote %d %s" % (done, err))
EOF
)
staged0=$(log_count 'max_staged=8 MiB')
out1=$(as "$U1" "$PY" -c "$WRITE_PY" "$U1/s1.tmp" 6)
out2=$(as "$U1" "$PY" -c "$WRITE_PY" "$U1/s2.tmp" 6)
[ "$out1" = "wrote 6 none" ] && [ "$out2" = "wrote 2 EDQUOT" ]
ok $? "$U1 writes 6 MiB to one .tmp ($out1), then to another: 2 MiB, then EDQUOT ($out2)"
as "$U1" truncate -s 100M "$U1/s3.tmp" 2>"$T/trunc.err"
rc=$?
[ "$rc" != 0 ] && grep -q 'Disk quota exceeded' "$T/trunc.err"
ok $? "a truncate of a third .tmp to 100 MiB: EDQUOT" || diag_file "$T/trunc.err" 3
kvt_num_cmp "$(log_count 'max_staged=8 MiB')" -eq "$((staged0 + 1))"
ok $? "one log line for both refusals"
ok_b=0
for i in 0 1; do
	store "$U2" ../in/six "$U2/six$i.bin" && as "$U2" cmp ../in/six "$U2/six$i.bin" && ok_b=$((ok_b + 1))
done
kvt_num_cmp "$ok_b" -eq 2
ok $? "meanwhile $U2 stores two 6 MiB blocks and reads them back byte-exact ($ok_b)"
as "$U1" mv "$U1/s1.tmp" "$U1/s1.bin" && as "$U1" rm "$U1/s2.tmp" "$U1/s3.tmp" &&
	out=$(as "$U1" "$PY" -c "$WRITE_PY" "$U1/s4.tmp" 8) && [ "$out" = "wrote 8 none" ]
ok $? "once $U1 published one (rename) and removed the others, he writes 8 MiB to a .tmp again (${out:-})"
kvt_num_cmp "$(stat -c %s "$MNT/$U1/s1.bin")" -eq $((6 << 20))
ok $? "the published one holds its 6 MiB"
# A rewrite in place starts from the published bytes: 6 MiB staged.
# (dd, not the shell's echo: dash says "I/O error" whatever the errno.)
append() {
	as "$U1" dd if=/dev/zero of="$U1/s1.bin" bs=5 count=1 oflag=append conv=notrunc status=none
}
append 2>"$T/append.err"
rc=$?
[ "$rc" != 0 ] && grep -q 'Disk quota exceeded' "$T/append.err" &&
	kvt_num_cmp "$(stat -c %s "$MNT/$U1/s1.bin")" -eq $((6 << 20))
ok $? "with 8 MiB staged, an append to it (a new version from its 6 MiB) fails with EDQUOT, the file unchanged" ||
	diag_file "$T/append.err" 3
as "$U1" rm "$U1/s4.tmp" && append &&
	kvt_num_cmp "$(stat -c %s "$MNT/$U1/s1.bin")" -eq $(((6 << 20) + 5))
ok $? "once he removed the 8 MiB .tmp, the append is taken"
kvt_umount
