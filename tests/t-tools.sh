#!/bin/bash
# The tools users reach for: ls -lR, ls and rm -rf of a directory larger
# than one readdir reply, du, df, getfattr/setfattr.  Client
# xattrs (user.vllm.kv_crc32c) set by path and by fd on a temp file follow
# it across the rename and survive a remount.
# kvt-kind: clients
. "$(dirname "$0")/lib.sh"

BLOCKS=8
SIZE=$((2 << 20))
X=user.vllm.kv_crc32c

plan 32
kvt_setup
kvt_mount

ok_kvclient "vllm-store: $BLOCKS x 2 MiB" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 4

# --- ls, stat, du, df -----------------------------------------------------
kvt_run ls -lR "$MNT" >"$T/ls.out" 2>&1
st=$?
n=$(awk -v s=$SIZE '$5 == s && $NF ~ /\.bin$/' "$T/ls.out" | wc -l)
[ "$st" = 0 ] && [ "$n" = $BLOCKS ]
ok $? "ls -lR works and lists $BLOCKS blocks of $SIZE bytes (exit $st, found $n)"
[ "$st" = 0 ] && [ "$n" = $BLOCKS ] || diag_file "$T/ls.out" 20

# A plain readdir (no stat of the entries) past the first reply: the
# kernel asks READDIRPLUS first, then READDIR, and readdir(3) drops every
# entry whose d_ino is 0.
big="$MNT/many"
ok_cmd "300 files in one directory" bash -c \
	'mkdir "$1" && for i in $(seq 1 300); do echo $i >"$1/f-$i"; done' _ "$big"
n=$(kvt_run ls -a "$big" | grep -c '^f-')
dots=$(kvt_run ls -a "$big" | grep -cx '\.\.\?')
[ "$n" = 300 ] && [ "$dots" = 2 ]
ok $? "ls -a lists all 300 files, '.' and '..' (found $n files, $dots dots)"
kvt_run rm -rf "$big" 2>"$T/rm.err" && ! kvt_run test -e "$big"
ok $? "rm -rf of the directory removes it" || diag_file "$T/rm.err" 5

bad=$(kvt_run find "$MNT" -name '*.bin' -printf '%s %p\n' | awk -v s=$SIZE '$1 != s')
n=$(kvt_run find "$MNT" -name '*.bin' | wc -l)
[ -z "$bad" ] && [ "$n" = $BLOCKS ]
ok $? "stat: all $BLOCKS blocks have st_size $SIZE (found $n)"
[ -z "$bad" ] || diag "$bad"

du_k=$(kvt_run du -sk "$MNT" | cut -f1)
[ "$du_k" -ge $((BLOCKS * SIZE / 1024)) ] 2>/dev/null
ok $? "du -sk counts the blocks' disk usage: ${du_k} KiB for $((BLOCKS * SIZE / 1024)) KiB stored"
du_h=$(kvt_run du -sh "$MNT" | cut -f1)
diag "du -sh: $du_h"

du_b=$(kvt_run du -sb "$MNT" | cut -f1)
[ "$du_b" -ge $((BLOCKS * SIZE)) ] 2>/dev/null
ok $? "du -sb (apparent size) >= $((BLOCKS * SIZE)) bytes (got $du_b)"

read -r m_bs m_blocks m_avail m_files <<<"$(kvt_run stat -f -c '%S %b %a %c' "$MNT")"
read -r l_bs l_blocks l_avail l_files <<<"$(stat -f -c '%S %b %a %c' "$LOWER")"
diag "statvfs mount: bsize $m_bs blocks $m_blocks avail $m_avail files $m_files" \
	"statvfs lower: bsize $l_bs blocks $l_blocks avail $l_avail files $l_files"
m_size=$(kvt_calc 'b * n' b="$m_bs" n="$m_blocks")
l_size=$(kvt_calc 'b * n' b="$l_bs" n="$l_blocks")
kvt_num_cmp "$m_size" -eq "$l_size" && kvt_num_cmp "$m_size" -gt 0
ok $? "statvfs total size of the mount is the lower fs's (${m_size:-?} vs ${l_size:-?} bytes)"
d=$(kvt_calc 'b * n - c * m' b="$m_bs" n="$m_avail" c="$l_bs" m="$l_avail")
kvt_num_cmp "${d#-}" -le $((64 << 20))
ok $? "statvfs available space of the mount is the lower fs's (differ by ${d:-?} bytes)"
kvt_run df -P "$MNT" >"$T/df.out" 2>&1 && df -P "$LOWER" >>"$T/df.out" 2>&1
st=$?
m_total=$(awk 'NR == 2 { print $2 }' "$T/df.out")
l_total=$(awk 'NR == 4 { print $2 }' "$T/df.out")
[ "$st" = 0 ] && [ -n "$m_total" ] && [ "$m_total" = "$l_total" ] && [ "$m_total" -gt 0 ]
ok $? "df shows the lower fs's size (${m_total:-?} vs ${l_total:-?} KiB)"
diag_file "$T/df.out"

f=$(kvt_first_block "$MNT")
kvt_run getfattr -d -m - "$f" >"$T/getfattr.out" 2>&1
st=$?
ok "$st" "getfattr -d -m - on a block works"
diag_file "$T/getfattr.out"

kvt_run getfattr -d -m - "$MNT" >"$T/getfattr-root.out" 2>&1
grep -q '^user.kvtierfs.stats=' "$T/getfattr-root.out"
ok $? "getfattr -d -m - on the mount root shows user.kvtierfs.stats"
diag_file "$T/getfattr-root.out"
stats=$(kvt_run getfattr --only-values -n user.kvtierfs.stats "$MNT")
missing=()
for c in lookups hits misses stores dedups loads verified torn_size torn_hash \
	short_reads purges bytes_in bytes_out unlinks objects bytes_stored; do
	grep -Eq "^$c [0-9]+\$" <<<"$stats" || missing+=("$c")
done
[ ${#missing[@]} = 0 ]
ok $? "user.kvtierfs.stats has every counter as 'name value'${missing[*]:+ (missing: ${missing[*]})}"
n=$(awk '$1 == "stores" { print $2 }' <<<"$stats")
kvt_num_cmp "$n" -gt 0
ok $? "the stores counter counted the stores (stores $n)"
kvt_run getfattr -d -m user.kvtierfs "$f" >"$T/own.out" 2>&1
[ "$(grep -c '^user.kvtierfs.\(verdict\|hash\|size\|object\)=' "$T/own.out")" = 4 ]
ok $? "getfattr -d -m user.kvtierfs FILE shows verdict, hash, size, object"
out=$(kvt_run getfattr -n security.capability "$f" 2>&1)
grep -q 'No such attribute' <<<"$out"
ok $? "security.capability answers ENODATA (got: $out)"

# --- client xattrs on temp files ------------------------------------------
dir=$(dirname "$f")
A="$dir/client-a.dat"
B="$dir/client-b.dat"
head -c 1048576 /dev/urandom >"$T/a.data"
head -c 1048576 /dev/urandom >"$T/b.data"

# by path: write + close the temp, setfattr on its name, rename
ok_cmd "by path: write $(basename "$A")_1.tmp, setfattr $X=0x11223344, rename" \
	bash -c 'cp "$1" "$2_1.tmp" && setfattr -n "$3" -v 0x11223344 "$2_1.tmp" &&
		getfattr -e hex -n "$3" "$2_1.tmp" | grep -qx "$3=0x11223344" &&
		mv "$2_1.tmp" "$2"' _ "$T/a.data" "$A" "$X"

# by fd, as vLLM's proposed CRC: fsetxattr on the temp fd before rename
cat >"$T/fdxattr.py" <<'PY'
import os, sys
data_file, dest, name = sys.argv[1:4]
with open(data_file, "rb") as f:
    data = f.read()
tmp = dest + "_2.tmp"
fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, data)
os.setxattr(fd, name, bytes.fromhex("a1b2c3d4"))
assert os.getxattr(fd, name) == bytes.fromhex("a1b2c3d4"), "fgetxattr on the fd"
os.close(fd)
os.rename(tmp, dest)
PY
ok_cmd "by fd: write $(basename "$B")_2.tmp, fsetxattr $X=0xa1b2c3d4 on the fd, rename" \
	python3 "$T/fdxattr.py" "$T/b.data" "$B" "$X"

v=$(kvt_xattr_hex "$A" "$X")
[ "$v" = 0x11223344 ]
ok $? "xattr set by path followed the rename (got '$v')"
v=$(kvt_xattr_hex "$B" "$X")
[ "$v" = 0xa1b2c3d4 ]
ok $? "xattr set by fd followed the rename (got '$v')"
dump=$(kvt_run getfattr -d -m - "$B" 2>/dev/null)
grep -q "^$X=" <<<"$dump"
ok $? "getfattr -d -m - lists $X"
ok_cmd "setfattr on a published file, then remove one" \
	bash -c 'setfattr -n user.test.keep -v kept "$1" && setfattr -n user.test.gone -v x "$1" &&
		setfattr -x user.test.gone "$1" &&
		! getfattr -n user.test.gone "$1" >/dev/null 2>&1' _ "$B"
kvt_run cmp -s "$A" "$T/a.data" && kvt_run cmp -s "$B" "$T/b.data"
ok $? "both files hold their bytes"

kvt_umount
kvt_mount

v=$(kvt_xattr_hex "$A" "$X")
w=$(kvt_xattr_hex "$B" "$X")
k=$(kvt_xattr "$B" user.test.keep)
[ "$v" = 0x11223344 ] && [ "$w" = 0xa1b2c3d4 ] && [ "$k" = kept ]
ok $? "client xattrs survive the remount ($X: '$v', '$w'; user.test.keep: '$k')"
! kvt_run getfattr -n user.test.gone "$B" >/dev/null 2>&1
ok $? "a removed xattr stays removed after the remount"
kvt_run cmp -s "$A" "$T/a.data" && kvt_run cmp -s "$B" "$T/b.data"
ok $? "both files hold their bytes after the remount"
ok_kvclient "the $BLOCKS blocks are intact after the remount" \
	verify --dir "$MNT" --expect $BLOCKS --size $SIZE --no-tmp
kvt_umount
