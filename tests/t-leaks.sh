#!/bin/bash
# What a hostile user of a shared mount (-o allow_other) must not learn or
# cause, beyond another user's bytes (t-neighbours.sh):
#  - the root's counters and purge list tell him nothing of what others
#    store: the counters a store of a guess moves are the same whether
#    another user holds the guessed bytes or not, and the purged paths
#    are shown to root only;
#  - the daemon's open check honours supplementary groups, as the
#    kernel's access(2) does;
#  - a FIFO or a device node planted on the store, as a name's record or
#    as an object, is never opened (inotify sees no open of it), and
#    nothing hangs;
#  - a name with a newline logs one line, the newline escaped;
#  - listxattr lists no namespace but user.* a record carries;
#  - with -o sync, a publication whose sync fails (an injected EIO)
#    answers the error and leaves no name: a rename's, and a close's.
# The users are t-users.sh's (kvtu1, kvtu2); kvtu2 is also in the group
# kvtleaks, as a supplementary group (made here when absent, left in
# place).
# kvt-kind: mount
# shellcheck disable=SC2016 # the users' scripts expand in their own sh
. "$(dirname "$0")/lib.sh"

kvt_require_root
for c in setpriv getfattr setfattr mkfifo mknod; do
	command -v "$c" >/dev/null || { echo "1..0 # SKIP needs $c"; exit 0; }
done
PY=/usr/bin/python3 # a shim in PATH may take seconds to start
[ -x "$PY" ] || PY=python3
command -v "$PY" >/dev/null || { echo "1..0 # SKIP needs python3 (inotify)"; exit 0; }
U1=kvtu1
U2=kvtu2
G=kvtleaks
getent group "$G" >/dev/null || groupadd "$G" 2>/dev/null
kvt_make_users "$U1" "$U2"
id -nG "$U2" | tr ' ' '\n' | grep -qx "$G" || usermod -aG "$G" "$U2" 2>/dev/null
id -nG "$U2" | tr ' ' '\n' | grep -qx "$G" || bail "cannot put $U2 in group $G"
[ "$(id -g "$U2")" != "$(getent group "$G" | cut -d: -f3)" ] ||
	bail "$G is $U2's primary group, not a supplementary one"

plan 32
kvt_setup
chmod 755 "$T"

# as USER CMD...: CMD as USER with his groups, in $MNT (the directories
# above $T are 0700: paths are named from $MNT).
as() { kvt_as "$@"; }

# store USER SRC NAME: vLLM's way, a temp file renamed over the name.
store() {
	as "$1" sh -c 'cp "$1" "$2.tmp" && mv "$2.tmp" "$2"' sh "$2" "$3"
}

# watch_opens OUT PATH...: IN_OPEN of each PATH, a line each into OUT,
# until killed; returns once the watches are set.
watch_opens() {
	local out=$1
	shift
	: >"$out"
	"$PY" -c '
import ctypes, os, select, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
out = open(sys.argv[1], "a")
for p in sys.argv[2:]:
    if libc.inotify_add_watch(fd, p.encode(), 0x20) < 0:  # IN_OPEN
        sys.exit("inotify_add_watch %s: %s" % (p, os.strerror(ctypes.get_errno())))
print("ready", flush=True)
while True:
    if select.select([fd], [], [], 1)[0]:
        buf = os.read(fd, 4096)
        off = 0
        while off < len(buf):
            wd, mask, cookie, ln = struct.unpack_from("iIII", buf, off)
            off += 16 + ln
            if mask & 0x20:  # not IN_IGNORED, when the node goes
                out.write("open %s\n" % sys.argv[1 + wd])
                out.flush()
' "$out" "$@" >"$out.ready" 2>&1 &
	WATCHER=$!
	kvt_bg "$WATCHER"
	kvt_within 10 grep -qx ready "$out.ready" || bail "inotify watcher: $(cat "$out.ready")"
}
stop_watch() {
	sleep 0.3 # the events of the last call, read
	kill "$WATCHER" 2>/dev/null
	wait "$WATCHER" 2>/dev/null
}

# stats_as USER: the root's counters as USER sees them, sorted.
stats_as() {
	as "$1" getfattr --absolute-names --only-values -n user.kvtierfs.stats . | sort
}
# delta A B: "name (b - a)" for each counter of B.
delta() {
	join "$1" "$2" | awk '{ print $1, $3 - $2 }'
}

head -c 65536 /dev/urandom >"$T/secret"
head -c 65536 /dev/urandom >"$T/wrong"
head -c 8192 /dev/urandom >"$T/plant-fifo"
head -c 8192 /dev/urandom >"$T/plant-dev"
head -c 4096 /dev/urandom >"$T/torn"
chmod 644 "$T"/secret "$T"/wrong "$T"/plant-* "$T"/torn

kvt_mount allow_other
for u in "$U1" "$U2"; do
	install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
done

# 1. The counters: kvtu2 guesses kvtu1's block right, then wrong.
store "$U1" ../secret "$U1/secret.bin" || bail "$U1's store failed"
stats_as "$U2" >"$T/s0" && store "$U2" ../secret "$U2/right.bin" &&
	stats_as "$U2" >"$T/s1" && store "$U2" ../wrong "$U2/wrong.bin" &&
	stats_as "$U2" >"$T/s2"
ok $? "$U2 stores a right guess of $U1's block and a wrong one, and reads the stats"
seen=$(awk '$1 ~ /^(dedups|objects|bytes_stored|orphans_reclaimed|orphan_bytes_reclaimed)$/' \
	"$T/s2" | tr "\n" " ")
[ -s "$T/s2" ] && grep -q '^stores ' "$T/s2" && [ -z "$seen" ]
ok $? "$U2's stats show no counter that moves with the bytes (saw: ${seen:-none})"
delta "$T/s0" "$T/s1" >"$T/d-right"
delta "$T/s1" "$T/s2" >"$T/d-wrong"
[ -s "$T/d-right" ] && grep -q '^stores 1$' "$T/d-right" && cmp -s "$T/d-right" "$T/d-wrong"
ok $? "every counter $U2 sees moves the same for the right guess and the wrong one"
if ! cmp -s "$T/d-right" "$T/d-wrong"; then
	diag "right guess: $(tr '\n' ' ' <"$T/d-right")" "wrong guess: $(tr '\n' ' ' <"$T/d-wrong")"
fi
d=$(kvt_stat "$MNT" dedups)
kvt_num_cmp "$d" -ge 1
ok $? "root still sees dedups ($d: the right guess shared $U1's object)"

# 2. The purge list: kvtu1's file, with a newline in its name, torn.
name=$'private\nkvtierfs: warning: forged line'
store "$U1" ../torn "$U1/$name" || bail "$U1's store of a name with a newline failed"
obj=$(kvt_xattr "$MNT/$U1/$name" user.kvtierfs.object)
[ -n "$obj" ] && [ -f "$LOWER/$obj" ] && truncate -s 100 "$LOWER/$obj"
ok $? "$U1's object torn by hand ($obj)"
off=$(stat -c %s "$T/daemon.log")
! as "$U1" cat "$U1/$name" >/dev/null 2>&1
ok $? "$U1's read of the torn name fails: the name is purged"
p2=$(as "$U2" getfattr --absolute-names --only-values -n user.kvtierfs.purges .)
[ -n "$p2" ] && ! grep -q private <<<"$p2" && ! grep -q 'objects/' <<<"$p2"
ok $? "$U2's user.kvtierfs.purges names no path of $U1's ($(head -n 1 <<<"$p2"))"
p0=$(kvt_xattr "$MNT" user.kvtierfs.purges)
grep -qF "$U1/private\\nkvtierfs: warning: forged line" <<<"$p0" && [ "$(wc -l <<<"$p0")" = 1 ]
ok $? "root's names it, on one line, the newline escaped ($p0)"

# 3. The log: one line for the name with a newline.
tail -c +"$((off + 1))" "$T/daemon.log" >"$T/log.part"
n=$(grep -c 'forged line' "$T/log.part")
forged=$(grep -c '^kvtierfs: warning: forged line' "$T/log.part")
[ "$n" = 1 ] && [ "$forged" = 0 ] &&
	grep -qF "purged $U1/private\\nkvtierfs: warning: forged line: object" "$T/log.part"
ok $? "the purge logs one line, the newline escaped as \\n (lines: $n, forged: $forged)"
[ "$n" = 1 ] || diag_file "$T/log.part" 10

# 4. Supplementary groups: a 0640 file of group kvtleaks, which kvtu2
# is in only as a supplementary group.
install -d -o "$U1" -g "$(id -g "$U1")" -m 0755 "$MNT/grp" || bail "install -d failed"
store "$U1" ../wrong grp/shared.bin && chgrp "$G" "$MNT/grp/shared.bin" &&
	chmod 0640 "$MNT/grp/shared.bin"
ok $? "$U1's file made 0640, group $G"
as "$U2" test -r grp/shared.bin
ok $? "access(R_OK) lets $U2 (in $G as a supplementary group) read it"
as "$U2" cmp ../wrong grp/shared.bin
ok $? "... and so does the open: $U2 reads it"
! as nobody cat grp/shared.bin >/dev/null 2>&1
ok $? "a user outside $G is refused"

# 5. A FIFO and a device node planted as objects (the anchors of blocks
# about to be stored: a store of the same bytes shares the anchor) and as
# names' records.
fan_of() { # FILE BLOCK: the anchor path of BLOCK's bytes, FILE gone
	local o h
	cp "$2" "$MNT/$1" || return 1
	o=$(kvt_xattr "$MNT/$1" user.kvtierfs.object)
	h=$(kvt_xattr "$MNT/$1" user.kvtierfs.hash)
	rm "$MNT/$1" || return 1
	[ -n "$o" ] && [ -n "$h" ] || return 1
	echo "$LOWER/$(dirname "$o")/${h#xxh3-128:}"
}
a_fifo=$(fan_of pf.bin "$T/plant-fifo") && a_dev=$(fan_of pd.bin "$T/plant-dev") &&
	rm -f "$a_fifo" "$a_dev" && mkfifo -m 644 "$a_fifo" && mknod -m 644 "$a_dev" c 1 3
ok $? "a FIFO and a device node planted as anchors ($(basename "$a_fifo"))"
rdir=$LOWER/names/$U1
mkfifo -m 644 "$rdir/fifo.bin" && mknod -m 644 "$rdir/dev.bin" c 1 3
ok $? "a FIFO and a device node planted as records in $U1's directory"
watch_opens "$T/opens" "$a_fifo" "$a_dev" "$rdir/fifo.bin" "$rdir/dev.bin"
store "$U1" ../plant-fifo "$U1/fifo-block.bin" && store "$U1" ../plant-dev "$U1/dev-block.bin" &&
	as "$U1" cmp ../plant-fifo "$U1/fifo-block.bin" && as "$U1" cmp ../plant-dev "$U1/dev-block.bin"
ok $? "$U1 stores the blocks whose anchors are planted, at once, and reads them back"
for f in fifo.bin dev.bin; do
	as "$U1" stat "$U1/$f" >/dev/null 2>&1
	as "$U1" cat "$U1/$f" >/dev/null 2>&1
	as "$U1" getfattr -d "$U1/$f" >/dev/null 2>&1
	as "$U1" ls -l "$U1" >/dev/null 2>&1
	as "$U1" rm -f "$U1/$f" >/dev/null 2>&1
done
as "$U1" ls "$U1" >/dev/null
ok $? "the planted records are looked up, read, listed and removed: nothing hangs"
stop_watch
[ -f "$T/opens" ] && [ ! -s "$T/opens" ]
ok $? "none of the planted FIFOs and device nodes was opened ($(sort "$T/opens" | uniq -c | tr '\n' ' '))"

# 6. listxattr: a record that carries a trusted.* name besides its
# client's user.*, and a lower directory that carries one.
kvt_umount
rec=$LOWER/names/$U1/secret.bin
"$PY" - "$rec" <<'PYEOF'
import ctypes, ctypes.util, sys
xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
path = sys.argv[1]
lines = [l for l in open(path, "rb").read().split(b"\n") if l and not l.startswith(b"check ")]
for name in (b"trusted.x", b"user.mine"):
    lines.append(b"xattr " + name.hex().encode() + b" " + b"v".hex().encode())
body = b"\n".join(lines) + b"\n"
with open(path, "r+b") as f:
    f.write(body + b"check %016x\n" % xxh.XXH3_64bits(body, len(body)))
    f.truncate()
PYEOF
ok $? "$U1's record made to carry trusted.x and user.mine"
setfattr -n trusted.y -v v "$LOWER/names/$U1"
ok $? "$U1's lower directory made to carry trusted.y"
kvt_mount allow_other
l1=$(as "$U1" getfattr --absolute-names -m - "$U1/secret.bin" | sed 1d | sort | tr '\n' ' ')
l0=$(getfattr --absolute-names -m - "$MNT/$U1/secret.bin" | sed 1d | sort | tr '\n' ' ')
[[ " $l1 " == *" user.mine "* ]] && [[ " $l1 " != *trusted* ]] && [ "$l0" = "$l1" ]
ok $? "listxattr of the file lists user.mine, not trusted.x, to $U1 and to root ($l0)"
d0=$(getfattr --absolute-names -m - "$MNT/$U1" | sed 1d | tr '\n' ' ')
[[ "$d0" != *trusted* ]] && [ "$(getfattr --absolute-names -m - "$LOWER/names/$U1" | grep -c trusted.y)" = 1 ]
ok $? "listxattr of the directory does not list trusted.y (${d0:-nothing})"
kvt_umount

# 7. -o sync, and the sync after a record took its name fails.
export KVT_FAULTS="sync:EIO:name=*unsynced.bin"
kvt_mount sync
unset KVT_FAULTS
cp "$T/wrong" "$MNT/unsynced.bin.tmp" && ! mv "$MNT/unsynced.bin.tmp" "$MNT/unsynced.bin" 2>/dev/null
ok $? "a rename whose sync fails answers an error"
sleep 0.5 # the kernel's entries go by the notifier thread
[ ! -e "$MNT/unsynced.bin" ] && [ ! -e "$LOWER/names/unsynced.bin" ]
ok $? "... and publishes no name"
! dd if="$T/wrong" of="$MNT/inplace-unsynced.bin" conv=fsync status=none 2>/dev/null
ok $? "a file written in place whose sync fails: a write or the fsync answers an error"
sleep 0.5
[ ! -e "$MNT/inplace-unsynced.bin" ] && [ ! -e "$LOWER/names/inplace-unsynced.bin" ]
ok $? "... and no name is left"
kvt_umount
