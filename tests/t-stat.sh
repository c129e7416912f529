#!/bin/bash
# kvtierfs-stat: the human form, --json and --prometheus say what the
# root's user.kvtierfs.* xattrs say (every counter, the store, the last
# purge); --watch samples until SIGINT and shows rates; a directory that
# is not a kvtierfs mount, and usage errors, get their exit statuses; a
# remount starts the counters again, as the man page says.
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 18
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

kvt_xattr "$MNT" user.kvtierfs.stats >"$T/xattr"
"$STAT" "$MNT" >"$T/human" 2>"$T/err"
st=$?
bad=()
while read -r name value; do
	case $name in *bytes*) continue ;; esac # shown in units
	grep -Eq "  $name $value( |\$)" "$T/human" || bad+=("$name $value")
done <"$T/xattr"
[ "$st" = 0 ] && [ ! -s "$T/err" ] && [ ${#bad[@]} = 0 ] &&
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
line_re = re.compile(r'^(kvtierfs_[a-z0-9_]+)\{([^}]*)\} ([0-9]+)$')
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
        seen[name[len("kvtierfs_"):-len("_total")]] = int(value)
assert seen == want, (seen, want)
assert typed.get("kvtierfs_space_bytes") == "gauge"
PY
py=$?
[ "$st" = 0 ] && [ "$py" = 0 ]
ok $? "--prometheus: TYPE before each metric, kvtierfs_ names, counters as _total equal to the xattr's"
diag_file "$T/prom" 6

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
