#!/bin/bash
# What a store and a load through kvtierfs cost the GlusterFS server,
# against the same work on GlusterFS used directly, in one run on the rig
# of tests/gluster.sh: the brick's own count of operations ("gluster
# volume profile"), each one a round trip from a client, less what the
# idle mounts ask for meanwhile.  64 blocks of 256 KiB (small, so that
# the operations on names weigh more than the writes) in vLLM's fan-out,
# one at a time, stored through host A, every cache dropped, loaded
# through host B.  Measured here: a store costs 1.26 times a plain one
# (1.31-1.32 before a directory of the client's tree was held by an
# O_PATH descriptor instead of opened, 1.85 before stores made fewer
# lower calls); a first load 2.12-2.16 times (2.36-2.48 before the O_PATH
# directories, 2.90-2.94 before a lookup held the names new to it, 3.14
# before that).
# kvt-kind: remote
# kvt-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gluster.sh"

kvt_require_root
plan 13
kvt_setup
BENCH=$top_builddir/src/kvtierfs-bench
[ -x "$BENCH" ] || bail "kvtierfs-bench is not built: $BENCH"

gl_setup
gl_two_hosts
"${GL_CLI[@]}" volume profile "$GL_VOL" start >"$T/profile.log" 2>&1
ok $? "the brick counts its operations (gluster volume profile)"

# brick_ops LABEL CMD...: runs CMD, then sets OPS to the number of
# operations the brick served meanwhile less what the two idle mounts
# ask for in that time (IDLE_RATE per second: each looks at the others'
# staging every second), and logs them by kind.  OPS is empty when the
# profile shows no count.
IDLE_RATE=0
brick_ops() {
	local label=$1 t0 t1 idle
	shift
	"${GL_CLI[@]}" volume profile "$GL_VOL" info clear >/dev/null 2>&1
	t0=$(date +%s.%N)
	"$@" >>"$T/bench.log" 2>&1 || { OPS=; return 1; }
	t1=$(date +%s.%N)
	"${GL_CLI[@]}" volume profile "$GL_VOL" info cumulative >"$T/profile.out" 2>&1
	idle=$(kvt_calc '(b - a) * r' a="$t0" b="$t1" r="$IDLE_RATE")
	OPS=$(awk -v idle="$idle" '
		/Cumulative Stats/ { c = 1 }
		c && $NF ~ /^[A-Z]+$/ && $(NF - 1) ~ /^[0-9]+$/ { n += $(NF - 1); kinds++ }
		END { if (!kinds || idle == "") exit 1; n -= idle; printf "%d\n", n < 0 ? 0 : n }' \
		"$T/profile.out")
	diag "$label: ${OPS:-no count of} brick operations ($(kvt_calc 'b - a' a="$t0" b="$t1") s; all: $(awk '
		/Cumulative Stats/ { c = 1 }
		c && $NF ~ /^[A-Z]+$/ && $(NF - 1) ~ /^[0-9]+$/ { printf "%s=%s ", $NF, $(NF - 1) }' \
		"$T/profile.out"))"
}

brick_ops "idle" sleep 3
IDLE_RATE=$(kvt_calc 'n / 3' n="$OPS")
kvt_num_cmp "$OPS" -lt 300
ok $? "the idle mounts ask the brick for $OPS operations in 3 s"

BLOCKS=(--blocks 64 --threads 1 --block-size 262144 --quiet)
mkdir "$GL1/plain"
brick_ops "plain store" "$BENCH" --dir "$GL1/plain" "${BLOCKS[@]}" --phases store
ok $? "64 blocks stored on GlusterFS directly"
PLAIN_STORE=$OPS
brick_ops "kvtierfs store" "$BENCH" --dir "$K1" "${BLOCKS[@]}" --phases store
ok $? "the same 64 blocks stored through kvtierfs on host A"
KVT_STORE=$OPS
r=$(kvt_ratio_at_most "$KVT_STORE" "$PLAIN_STORE" 1.30)
ok $? "a store costs the server $r times a plain one (at most 1.30): $KVT_STORE against $PLAIN_STORE operations"

kvt_drop_caches
brick_ops "plain load" "$BENCH" --dir "$GL2/plain" "${BLOCKS[@]}" --phases load --check
ok $? "64 blocks loaded from GlusterFS directly, checked"
PLAIN_LOAD=$OPS
brick_ops "kvtierfs load" "$BENCH" --dir "$K2" "${BLOCKS[@]}" --phases load --check
ok $? "the same 64 blocks loaded through kvtierfs on host B, checked"
KVT_LOAD=$OPS
r=$(kvt_ratio_at_most "$KVT_LOAD" "$PLAIN_LOAD" 2.30)
ok $? "a first load costs the server $r times a plain one (at most 2.30): $KVT_LOAD against $PLAIN_LOAD operations"

"${GL_CLI[@]}" volume profile "$GL_VOL" stop >>"$T/profile.log" 2>&1
ok $? "profiling stopped"
kvt_stop "$K1" "$P1"
kvt_stop "$K2" "$P2"
