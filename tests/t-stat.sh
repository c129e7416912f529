#!/bin/bash
# kvtierfs-stat: the human form, --json and --prometheus say what the
# root's user.kvtierfs.* xattrs say (every counter, the store, the last
# purge); --watch samples until SIGINT and shows rates; a directory that
# is not a kvtierfs mount, and usage errors, get their exit statuses; a
# remount starts the counters again, as the man page says.  A mount with
# a budget (-o max_size) whose evictor has evicted shows the budget, the
# usage, the index and the eviction counters in all three forms, equal to
# the xattrs; a mount without one shows nothing of a budget.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 29
kvt_setup
STAT=$top_builddir/src/kvtierfs-stat
[ -x "$STAT" ] || bail "kvtierfs-stat is not built: $STAT"
SIZE=65536

kvt_mount
ok_kvclient "store 8 blocks" vllm-store --dir "$MNT" --blocks 8 --size $SIZE
ok_kvclient "load them" vllm-load --dir "$MNT" --blocks 8 --size $SIZE
victim=$(cd "$MNT" && find . -name '*.bin' | sort | head -n 1)
victim=${victim#./}
obj=$(kvt_xattr "$MNT/$victim" user.kvtierfs.object)
truncate -s 1 "$LOWER/$obj"
cat "$MNT/$victim" >/dev/null 2>&1
[ ! -e "$MNT/$victim" ] && [ "$(kvt_stat "$MNT" purges)" = 1 ]
ok $? "a block torn on the lower disk is purged ($victim)"

# human_counters XATTR HUMAN [SKIP]: the counters of XATTR that HUMAN does
# not show as the xattr has them, into bad[]; those matching the extended
# regex SKIP left out.
human_counters() {
	local name value
	bad=()
	while read -r name value; do
		case $name in *bytes* | *_us) continue ;; esac # shown in units
		[ -n "${3-}" ] && [[ $name =~ $3 ]] && continue
		grep -Eq "  $name $value( |\$)" "$2" || bad+=("$name $value")
	done <"$1"
	[ -s "$1" ]
}

kvt_xattr "$MNT" user.kvtierfs.stats >"$T/xattr"
"$STAT" "$MNT" >"$T/human" 2>"$T/err"
st=$?
human_counters "$T/xattr" "$T/human" '^(evict|room_)'
[ "$?" = 0 ] && [ "$st" = 0 ] && [ ! -s "$T/err" ] && [ ${#bad[@]} = 0 ] &&
	grep -q "^kvtierfs on $MNT: store $(readlink -f "$LOWER"), version [0-9.]*, pid $KVT_PID, up " "$T/human" &&
	grep -Fq "purged $victim: object $obj: torn by size: expected $SIZE, found 1" "$T/human"
ok $? "the human form: the mount, every counter as the xattr has it, the purge (exit $st)" ||
	diag "not shown: ${bad[*]}"
diag_file "$T/human" 12

"$STAT" --json "$MNT" >"$T/json"
st=$?
python3 - "$T/json" "$T/xattr" "$MNT" "$(readlink -f "$LOWER")" "$victim" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
want = dict(l.split() for l in open(sys.argv[2]) if l.strip())
want = {k: int(v) for k, v in want.items()}
assert doc["counters"] == want, (doc["counters"], want)
assert doc["mountpoint"] == sys.argv[3] and doc["store"] == sys.argv[4], doc
assert doc["space"]["bytes_total"] > 0 and doc["space"]["files_total"] > 0
p = doc["recent_purges"]
assert len(p) == 1 and p[0]["message"].startswith("purged " + sys.argv[5] + ":"), p
assert isinstance(p[0]["time"], int) and p[0]["time"] > 1.7e9
PY
py=$?
[ "$st" = 0 ] && [ "$py" = 0 ]
ok $? "--json: one document, the counters equal the xattr's, the store, the purge"

"$STAT" --prometheus "$MNT" >"$T/prom"
st=$?
python3 - "$T/prom" "$T/xattr" "$MNT" <<'PY'
import re, sys
want = {k: int(v) for k, v in (l.split() for l in open(sys.argv[2]) if l.strip())}
typed, seen = {}, {}
line_re = re.compile(r'^(kvtierfs_[a-z0-9_]+)\{([^}]*)\} ([0-9]+(?:\.[0-9]+)?)$')
for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("# HELP "):
        continue
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split()
        typed[name] = kind
        continue
    m = line_re.match(line)
    assert m, "bad line: " + line
    name, labels, value = m.groups()
    assert name in typed, "no TYPE before " + name
    assert 'mountpoint="%s"' % sys.argv[3] in labels, labels
    if typed[name] == "counter":
        assert name.endswith("_total"), name
        base = name[len("kvtierfs_"):-len("_total")]
        if base.endswith("_seconds"):
            seen[base[:-len("_seconds")] + "_us"] = round(float(value) * 1e6)
        else:
            seen[base] = int(value)
assert seen == want, (seen, want)
assert typed.get("kvtierfs_space_bytes") == "gauge"
PY
py=$?
[ "$st" = 0 ] && [ "$py" = 0 ]
ok $? "--prometheus: TYPE before each metric, kvtierfs_ names, counters as _total equal to the xattr's"
diag_file "$T/prom" 6

# No budget: no budget line, no eviction group, no budget object, no
# budget gauges (the counters stay in --json and --prometheus, at 0).
kvt_xattr "$MNT" user.kvtierfs.mount >"$T/mount"
[ -s "$T/mount" ] && [ -s "$T/human" ] && [ -s "$T/json" ] && [ -s "$T/prom" ] &&
	! grep -q '^budget ' "$T/mount" &&
	! grep -Eq '^  (budget|eviction) ' "$T/human" && ! grep -q 'evict' "$T/human" &&
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit("budget" in d or d["counters"]["evictions"] != 0)' "$T/json" &&
	grep -q '^kvtierfs_evictions_total{' "$T/prom" &&
	! grep -Eq '^kvtierfs_(budget_bytes|usage_bytes|pinned_bytes|indexed|indexed_blocks|indexed_bytes|evict_lead|evict_info)\{' "$T/prom"
ok $? "no budget: nothing of one in the human form, --json or --prometheus"

# --watch while blocks are stored: samples with rates, then SIGINT.
"$KVCLIENT" vllm-store --dir "$MNT" --blocks 400 --size 4096 --key-base 1000 \
	>"$T/bg.out" 2>&1 &
bg=$!
timeout --preserve-status -s INT 3.5 "$STAT" --watch 1 --json "$MNT" >"$T/watch" 2>"$T/watch.err"
st=$?
wait "$bg"
python3 - "$T/watch" <<'PY'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(docs) >= 3, len(docs)
assert "rates" not in docs[0] and all("rates" in d for d in docs[1:])
assert any(d["rates"]["stores"] > 0 for d in docs[1:]), [d["rates"]["stores"] for d in docs[1:]]
assert all(0.9 < d["interval"] < 2.0 for d in docs[1:])
PY
py=$?
[ "$st" = 0 ] && [ "$py" = 0 ] && [ ! -s "$T/watch.err" ]
ok $? "--watch 1 --json: a sample a second with rates (stores moving), SIGINT ends it with exit 0 ($st)"
diag "$(wc -l <"$T/watch") samples"

timeout --preserve-status -s TERM 2.5 "$STAT" --watch 1 "$MNT" >"$T/watch-h" 2>&1
st=$?
[ "$st" = 0 ] && [ "$(grep -c '^kvtierfs on ' "$T/watch-h")" -ge 2 ] &&
	grep -Eq 'stores [0-9]+ \([0-9.]+/s\)' "$T/watch-h"
ok $? "--watch 1: human samples with rates, SIGTERM ends it with exit 0 ($st)"

mkdir "$T/plain"
"$STAT" "$T/plain" >"$T/out" 2>"$T/err"
st=$?
[ "$st" = 1 ] && [ ! -s "$T/out" ] && [ "$(grep -c '' "$T/err")" = 1 ] &&
	grep -Fq "$T/plain: not the root of a kvtierfs mount" "$T/err"
ok $? "a plain directory: exit 1 ($st), one line naming it: $(cat "$T/err")"

usage_bad() {
	local desc=$1
	shift
	"$STAT" "$@" >"$T/out" 2>"$T/err"
	local st=$?
	[ "$st" = 2 ] && [ ! -s "$T/out" ] && [ "$(grep -c '' "$T/err")" = 1 ]
	ok $? "$desc: exit 2 ($st): $(cat "$T/err")"
}
usage_bad "an unknown option" --bogus "$MNT"
usage_bad "no MOUNTPOINT"
usage_bad "--watch 0" --watch 0 "$MNT"
usage_bad "--json with --prometheus" --json --prometheus "$MNT"

kvt_umount
kvt_mount
[ "$("$STAT" --json "$MNT" | python3 -c 'import json, sys; print(json.load(sys.stdin)["counters"]["stores"])')" = 0 ]
ok $? "after a remount the counters start at 0"
kvt_umount

# A budget of 8 MiB and 20 blocks of 1 MiB, each written as NAME.tmp and
# renamed: the evictor removes the oldest to make room.
MiB=1048576
LOWER=$T/lower-budget
mkdir -m 0700 "$LOWER" || bail "mkdir $LOWER"
mount_at=$(stat -c %s "$T/daemon.log")
kvt_mount max_size=8M
kvt_wait_log "eviction: an index of the store.s [0-9]+ names built" 1 "$mount_at" &&
	kvt_wait_log "the store's objects hold 0 bytes" 1 "$mount_at"
ok $? "the budget's mount has counted its usage and indexed its store"
head -c $((20 * MiB)) /dev/urandom >"$T/blocks" || bail "random bytes"
failed=0
for i in $(seq 1 20); do
	dd if="$T/blocks" of="$MNT/blk$i.tmp" bs=$MiB skip=$((i - 1)) count=1 status=none &&
		mv "$MNT/blk$i.tmp" "$MNT/blk$i.bin" || failed=$((failed + 1))
done
[ "$failed" = 0 ]
ok $? "20 blocks of 1 MiB stored under a budget of 8 MiB ($failed failed)"

# snapshot: the xattrs, then the three forms, then the xattrs again; the
# same twice, so that no eviction pass ran in between.
snapshot() {
	local tries=0
	while [ "$tries" -lt 10 ]; do
		tries=$((tries + 1))
		kvt_xattr "$MNT" user.kvtierfs.stats >"$T/bxattr"
		kvt_xattr "$MNT" user.kvtierfs.mount >"$T/bmount"
		"$STAT" "$MNT" >"$T/bhuman" 2>"$T/berr" &&
			"$STAT" --json "$MNT" >"$T/bjson" 2>>"$T/berr" &&
			"$STAT" --prometheus "$MNT" >"$T/bprom" 2>>"$T/berr" || return 1
		kvt_xattr "$MNT" user.kvtierfs.stats >"$T/bxattr2"
		kvt_xattr "$MNT" user.kvtierfs.mount >"$T/bmount2"
		[ -s "$T/bxattr" ] && cmp -s "$T/bxattr" "$T/bxattr2" &&
			cmp -s "$T/bmount" "$T/bmount2" && return 0
		sleep 0.5
	done
	return 1
}
snapshot
ok $? "kvtierfs-stat in its three forms, with the xattrs unchanged around them"
mval() { awk -v n="$1" '$1 == n { print $2 }' "$T/bmount"; }
sval() { awk -v n="$1" '$1 == n { print $2 }' "$T/bxattr"; }
budget=$(mval budget) usage=$(mval usage) evictions=$(sval evictions)
names=$(find "$MNT" -name 'blk*.bin' | wc -l)
[ "$budget" = $((8 * MiB)) ] && kvt_num_cmp "$usage" -le "$budget" &&
	kvt_num_cmp "$evictions" -gt 0 && [ "$(kvt_calc 'n + e' n="$names" e="$evictions")" = 20 ]
ok $? "the daemon: budget $budget, usage $usage, $evictions evictions, $names names left of 20"

pct=$(kvt_calc 'u * 100 / b' u="$usage" b="$budget")
pct=$(printf '%.1f' "$pct")
# g_format_size puts a no-break space before the unit.
LC_ALL=C sed 's/\xc2\xa0/ /g' "$T/bhuman" >"$T/bhuman.sp"
size_re='[0-9.]+ ([KMG]iB|bytes?)'
budget_re="^  budget   $size_re used of 8\.0 MiB \($pct%\), $size_re pinned;"
budget_re+=" evict $(mval evict), indexed $(mval indexed_blocks) blocks, $size_re\$"
evict_re="^  eviction  evictions $evictions  evicted_bytes $size_re  evict_passes [1-9][0-9]*"
evict_re+="  evict_pass_time [0-9.]+ (us|ms|s)  room_waits [0-9]+  room_wait_time [0-9.]+ (us|ms|s)\$"
human_counters "$T/bxattr" "$T/bhuman"
[ "$?" = 0 ] && [ ${#bad[@]} = 0 ] && [ ! -s "$T/berr" ] &&
	grep -Eq "$budget_re" "$T/bhuman.sp" && grep -Eq "$evict_re" "$T/bhuman.sp" &&
	grep -q '^  recent purges: none$' "$T/bhuman"
ok $? "the human form: the budget line ($pct% used), the eviction group, every counter as the xattr has it, evictions not purges" ||
	diag "not shown: ${bad[*]}"
diag_file "$T/bhuman" 12

python3 - "$T/bjson" "$T/bxattr" "$T/bmount" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
want = {k: int(v) for k, v in (l.split() for l in open(sys.argv[2]) if l.strip())}
mount = dict(l.split(None, 1) for l in open(sys.argv[3]).read().splitlines() if l.strip())
b = doc["budget"]
assert doc["counters"] == want, (doc["counters"], want)
assert b["bytes"] == 8388608 == int(mount["budget"]), b
assert b["usage_bytes"] == int(mount["usage"]) <= b["bytes"], b
assert abs(b["usage_percent"] - 100 * b["usage_bytes"] / b["bytes"]) < 0.06, b
assert b["evict"] == mount["evict"] and b["evict"] != "off", b
assert b["indexed"] is True and mount["indexed"] == "1", b
assert b["evict_lead"] is True and mount["evict_lead"] == "1", b
for k in ("indexed_blocks", "indexed_bytes", "pinned_bytes"):
    assert b[k] == int(mount[k]), (k, b, mount)
assert want["evictions"] > 0 and want["evicted_bytes"] > 0 and want["evict_passes"] > 0, want
PY
ok $? "--json: the budget object equals the mount's xattr (budget 8388608, usage within it), evictions > 0 as the stats say"

python3 - "$T/bprom" "$T/bxattr" "$T/bmount" "$MNT" <<'PY'
import re, sys
want = {k: int(v) for k, v in (l.split() for l in open(sys.argv[2]) if l.strip())}
mount = dict(l.split(None, 1) for l in open(sys.argv[3]).read().splitlines() if l.strip())
line_re = re.compile(r'^(kvtierfs_[a-z0-9_]+)\{([^}]*)\} ([0-9]+(?:\.[0-9]+)?)$')
typed, val, labels = {}, {}, {}
for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("# HELP "):
        continue
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split()
        typed[name] = kind
        continue
    m = line_re.match(line)
    assert m, "bad line: " + line
    name, lab, value = m.groups()
    assert name in typed and name not in val, name
    assert 'mountpoint="%s"' % sys.argv[4] in lab, lab
    val[name], labels[name] = float(value), lab
gauges = {"budget_bytes": "budget", "usage_bytes": "usage", "pinned_bytes": "pinned_bytes",
          "indexed": "indexed", "indexed_blocks": "indexed_blocks",
          "indexed_bytes": "indexed_bytes", "evict_lead": "evict_lead"}
for g, k in gauges.items():
    assert typed["kvtierfs_" + g] == "gauge", g
    assert val["kvtierfs_" + g] == int(mount[k]), (g, val["kvtierfs_" + g], mount[k])
assert val["kvtierfs_budget_bytes"] == 8388608
assert val["kvtierfs_usage_bytes"] <= val["kvtierfs_budget_bytes"]
assert 'policy="%s"' % mount["evict"] in labels["kvtierfs_evict_info"], labels
for c in ("evictions", "evicted_bytes", "evict_passes"):
    assert typed["kvtierfs_%s_total" % c] == "counter"
    assert val["kvtierfs_%s_total" % c] == want[c] > 0, (c, want[c])
assert typed["kvtierfs_evict_pass_seconds_total"] == "counter"
assert round(val["kvtierfs_evict_pass_seconds_total"] * 1e6) == want["evict_pass_us"]
PY
ok $? "--prometheus: the budget gauges equal the mount's xattr, the eviction counters the stats (evict_pass_us in seconds)"

# --watch while more blocks go in: the eviction counters with rates.
(
	for i in $(seq 21 40); do
		dd if="$T/blocks" of="$MNT/blk$i.tmp" bs=$MiB skip=$((i - 21)) count=1 status=none &&
			mv "$MNT/blk$i.tmp" "$MNT/blk$i.bin" || exit 1
		sleep 0.1
	done
) &
bg=$!
timeout --preserve-status -s INT 3.5 "$STAT" --watch 1 "$MNT" >"$T/bwatch" 2>&1
st=$?
wait "$bg"
bgst=$?
[ "$st" = 0 ] && [ "$bgst" = 0 ] && [ "$(grep -c '^  budget   ' "$T/bwatch")" -ge 3 ] &&
	grep -Eq 'evictions [0-9]+ \([0-9.]*[1-9][0-9.]*/s\)' "$T/bwatch" &&
	grep -Eq 'evict_pass_time [0-9.]+ (us|ms|s) \([0-9.]+% busy\)' "$T/bwatch"
ok $? "--watch 1 while blocks are stored: a budget line a sample, evictions moving, the passes' share of time (exit $st, stores $bgst)"
diag_file "$T/bwatch" 4
kvt_umount
