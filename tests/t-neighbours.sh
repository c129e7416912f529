#!/bin/bash
# A hostile neighbour on a shared mount (-o allow_other): what one
# unprivileged user stores must never change what another reads.
#
# Dedup: two blocks of different bytes and the same XXH3-128 (and size),
# which tests/collide builds in a moment.  User kvtu1 stores one in a 0700
# directory of his; user kvtu2 then stores the other in his own 0700
# directory and reads it back: his bytes, not kvtu1's, whatever the hash
# says.  The users are t-users.sh's (made here when absent, left in place).
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
command -v setpriv >/dev/null || bail "setpriv is missing (util-linux)"
COLLIDE=$top_builddir/tests/collide
[ -x "$COLLIDE" ] || bail "tests/collide is not built (make check)"
U1=kvtu1
U2=kvtu2
kvt_make_users "$U1" "$U2"

plan 15
kvt_setup
chmod 755 "$T"

# as USER CMD...: CMD as USER (its groups), in $MNT, under the hang guard.
# The directories above $T are tests/run's, 0700: the users name their
# paths from $MNT (../in/a).
as() { kvt_as "$@"; }

# stats: the mount's counters, "name value" a line.
stats() {
	kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.stats "$MNT"
}
counter() { stats | awk -v n="$1" '$1 == n { print $2 }'; }

mkdir "$T/in" && chmod 755 "$T/in" || bail "mkdir failed"
hash=$("$COLLIDE" "$T/in/a" "$T/in/b") || bail "collide failed"
"$COLLIDE" "$T/in/a2" "$T/in/b2" 2097152 >/dev/null || bail "collide (2 MiB) failed"
chmod 644 "$T/in"/*
! cmp -s "$T/in/a" "$T/in/b" && [ "$($KVT_XXH128 "$T/in/a" | cut -d' ' -f1)" = "$($KVT_XXH128 "$T/in/b" | cut -d' ' -f1)" ]
ok $? "two blocks of other bytes and one XXH3-128 ($hash)"

kvt_mount allow_other
for u in "$U1" "$U2"; do
	install -d -o "$u" -g "$(id -g "$u")" -m 0700 "$MNT/$u" || bail "install -d failed"
done
# vLLM's way: a temp file renamed over the block's name.
store() { # USER SRC NAME
	as "$1" sh -c 'cp "$1" "$2.tmp" && mv "$2.tmp" "$2"' sh "$2" "$3"
}
store "$U1" ../in/a "$U1/blk.bin" && store "$U1" ../in/a2 "$U1/big.bin"
ok $? "$U1 stores his blocks (4 KiB and 2 MiB)"
dedups=$(counter dedups)
store "$U2" ../in/b "$U2/blk.bin" && store "$U2" ../in/b2 "$U2/big.bin"
ok $? "$U2 stores the colliding ones in his own directory"
as "$U2" cmp ../in/b "$U2/blk.bin" && as "$U2" cmp ../in/b2 "$U2/big.bin"
ok $? "$U2 reads back his own bytes, not $U1's"
as "$U1" cmp ../in/a "$U1/blk.bin" && as "$U1" cmp ../in/a2 "$U1/big.bin"
ok $? "$U1 still reads his own"
now=$(counter dedups)
kvt_num_cmp "$now" -eq "$dedups"
ok $? "no dedup counted for bytes that only share a hash ($dedups, then $now)"
o1=$(kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.object "$MNT/$U1/blk.bin")
o2=$(kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.object "$MNT/$U2/blk.bin")
[ -n "$o1" ] && [ -n "$o2" ] && ! [ "$LOWER/$o1" -ef "$LOWER/$o2" ]
ok $? "two objects, not one inode ($o1, $o2)"

# Same bytes still share one object.
store "$U2" ../in/a "$U2/same.bin"
now2=$(counter dedups)
kvt_num_cmp "$now2" -eq "$((now + 1))" && as "$U2" cmp ../in/a "$U2/same.bin"
ok $? "the same bytes as $U1's are still shared (dedups $now, then $now2)"

kvt_umount
kvt_drop_caches
kvt_mount allow_other
as "$U2" cmp ../in/b "$U2/blk.bin"
ok $? "after a remount, $U2 reads his own bytes"
v=$(kvt_run getfattr --absolute-names --only-values -n user.kvtierfs.verdict "$MNT/$U2/blk.bin")
[ "$v" = verified ]
ok $? "$U2's block, read: $v (its own object's hash checked)"
as "$U2" cmp ../in/b2 "$U2/big.bin" && as "$U1" cmp ../in/a "$U1/blk.bin" &&
	as "$U1" cmp ../in/a2 "$U1/big.bin"
ok $? "after a remount, the others read their own bytes too"
kvt_umount
