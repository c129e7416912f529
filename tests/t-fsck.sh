#!/bin/bash
# kvtierfs-fsck on a store written through a mount: clean after a clean
# unmount; refuses while mounted; finds exactly the damage done to the
# unmounted store (torn objects by size and by bytes, a missing reference,
# a garbage record, an orphan object, a dead mount's staging) and reports
# no intact name; --repair removes just that, after which the store is
# clean, every intact name reads back and the damaged names are gone.
# Bad invocations exit 16 (usage) or 8 (operational) with one line on
# stderr.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"

: "${KVTIERFS_FSCK:=$top_builddir/src/kvtierfs-fsck}"
BLOCKS=24
SIZE=65536

kvt_require_root
plan 38
kvt_setup
[ -x "$KVTIERFS_FSCK" ] || bail "kvtierfs-fsck is not built: $KVTIERFS_FSCK"

# fsck ARGS...: run kvtierfs-fsck; sets $rc, stdout in $T/out, stderr in $T/err.
fsck() {
	"$KVTIERFS_FSCK" "$@" >"$T/out" 2>"$T/err"
	rc=$?
}

# show_fsck: its output, for a failed test point.
show_fsck() {
	diag "exit status $rc; stdout:"
	diag_file "$T/out"
	diag "stderr:"
	diag_file "$T/err"
}

# summary_is TEXT: the last line of stdout is "kvtierfs-fsck: $LOWER: TEXT".
summary_is() {
	[ "$(tail -n 1 "$T/out")" = "kvtierfs-fsck: $LOWER: $1" ]
}

kvt_mount
ok_kvclient "vllm-store O_DIRECT: $BLOCKS x 64 KiB" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 4 --odirect
mapfile -t B < <(kvt_run find "$MNT" -name '*.bin' -type f | LC_ALL=C sort)
ok_cmd "a copy of the last block under another name (same bytes, one object)" \
	bash -c 'mkdir "$1/copies" && cp "$2" "$1/copies/dup"' _ "$MNT" "${B[23]}"

# names/<path> and the object (reference) of every block, from the mount
declare -a NAME OBJ
bad=0
for i in "${!B[@]}"; do
	NAME[i]="names/${B[i]#"$MNT"/}"
	OBJ[i]=$(kvt_xattr "${B[i]}" user.kvtierfs.object)
	[[ "${OBJ[i]}" =~ ^objects/[0-9a-f]{2}/[0-9a-f]{32}\.[^./]+$ ]] || bad=1
done
dup_obj=$(kvt_xattr "$MNT/copies/dup" user.kvtierfs.object)
[ ${#B[@]} = $BLOCKS ] && [ "$bad" = 0 ] && [ "${dup_obj%.*}" = "${OBJ[23]%.*}" ]
ok $? "$BLOCKS blocks, each with its object; the copy shares the last one's anchor"
anchor() { echo "${1%.*}"; }

before=$(kvt_snapshot "$LOWER")
fsck "$LOWER"
[ "$rc" = 8 ] && [ "$(grep -c '' "$T/err")" = 1 ] && grep -q 'in use' "$T/err" &&
	[ ! -s "$T/out" ]
ok $? "while mounted: refused, exit 8, one line on stderr: $(head -n 1 "$T/err")" ||
	show_fsck
fsck --repair "$LOWER"
[ "$rc" = 8 ] && [ "$(grep -c '' "$T/err")" = 1 ] && [ ! -s "$T/out" ]
ok $? "while mounted: --repair refused too, exit 8" || show_fsck
[ "$before" = "$(kvt_snapshot "$LOWER")" ]
ok $? "the mounted store is untouched"

kvt_umount

fsck "$LOWER"
[ "$rc" = 0 ] && [ "$(grep -c '' "$T/out")" = 1 ] && [ ! -s "$T/err" ]
ok $? "after a clean unmount: exit 0, nothing but the summary" || show_fsck
summary_is "$((BLOCKS + 1)) names, $BLOCKS objects, 0 problems"
ok $? "summary: $(tail -n 1 "$T/out")"

# --- damage to the unmounted store -------------------------------------
L=$LOWER
{
	truncate -s -1 "$L/${OBJ[0]}" &&
	b=$(od -An -tu1 -j 1000 -N 1 "$L/${OBJ[1]}" | tr -d ' ') &&
	printf "\\$(printf %03o $((b ^ 4)))" |
		dd of="$L/${OBJ[1]}" bs=1 seek=1000 count=1 conv=notrunc status=none &&
	printf x >>"$L/${OBJ[2]}" &&
	rm "$L/${OBJ[3]}" &&
	echo "this is no record" >"$L/${NAME[4]}" &&
	cp "$L/$(anchor "${OBJ[5]}")" "$L/$(anchor "${OBJ[5]}").0rphan1" &&
	mkdir "$L/staging/dead.1.x" &&
	: >"$L/staging/dead.1.x/lock" &&
	head -c 4096 /dev/urandom >"$L/staging/dead.1.x/d.1"
}
ok $? "damage: truncate, flip a bit, extend by a byte, remove a reference, garbage record, orphan copy, dead staging"

# What each damage must show, one line each: "<keyword> <path>".
want=(
	"torn-hash $(anchor "${OBJ[0]}")" "torn-hash ${OBJ[0]}" "torn-size ${NAME[0]}"
	"torn-hash $(anchor "${OBJ[1]}")" "torn-hash ${OBJ[1]}" "torn-hash ${NAME[1]}"
	"torn-hash $(anchor "${OBJ[2]}")" "torn-hash ${OBJ[2]}" "torn-size ${NAME[2]}"
	"dangling ${NAME[3]}" "orphan $(anchor "${OBJ[3]}")"
	"unparsable ${NAME[4]}" "orphan ${OBJ[4]}" "orphan $(anchor "${OBJ[4]}")"
	"orphan $(anchor "${OBJ[5]}").0rphan1"
	"stale-staging staging/dead.1.x"
)
N=${#want[@]}
printf '%s\n' "${want[@]}" | LC_ALL=C sort >"$T/want"

before=$(kvt_snapshot "$LOWER")
fsck "$LOWER"
[ "$rc" = 4 ]
ok $? "damaged store: exit 4 (problems left)" || show_fsck
sed '$d' "$T/out" | awk '{ k = $1; p = $2; sub(/:$/, "", p); print k, p }' |
	LC_ALL=C sort >"$T/got"
diff -u "$T/want" "$T/got" >"$T/diff"
ok $? "exactly the $N expected problems, one line each" || diag_file "$T/diff"
hit=0
for i in $(seq 5 $((BLOCKS - 1))); do
	grep -qF -- "${NAME[i]}" "$T/out" && hit=1
	grep -qF -- "${OBJ[i]}:" "$T/out" && hit=1
	grep -qF -- "$(anchor "${OBJ[i]}"):" "$T/out" && hit=1
done
grep -qF -- "copies/dup" "$T/out" && hit=1
grep -qF -- "$dup_obj" "$T/out" && hit=1
[ "$hit" = 0 ]
ok $? "no intact name and no object an intact name uses is reported"
summary_is "$((BLOCKS + 1)) names, $((BLOCKS + 1)) objects, $N problems"
ok $? "summary: $(tail -n 1 "$T/out")"
[ "$before" = "$(kvt_snapshot "$LOWER")" ]
ok $? "without --repair nothing changed"

fsck --repair "$LOWER"
[ "$rc" = 1 ]
ok $? "--repair: exit 1 (all repaired)" || show_fsck
summary_is "$((BLOCKS + 1)) names, $((BLOCKS + 1)) objects, $N problems ($N repaired)" &&
	[ "$(grep -c ' (removed)$' "$T/out")" = "$N" ]
ok $? "--repair: $N problems, each line says removed"
fsck "$LOWER"
[ "$rc" = 0 ]
ok $? "after repair: exit 0" || show_fsck
summary_is "$((BLOCKS - 4)) names, $((BLOCKS - 5)) objects, 0 problems"
ok $? "after repair: $(tail -n 1 "$T/out")"
left=$(find "$L/staging" "$L/objects" -mindepth 1 -type f | wc -l)
[ "$left" = $(((BLOCKS - 5) * 2 + 1)) ]
ok $? "objects/ holds anchor and reference of 19 blocks plus the copy's reference ($left files), staging/ nothing"

kvt_mount
ok_kvclient "verify: exactly the $((BLOCKS - 5)) intact blocks, every byte" \
	verify --dir "$MNT" --expect $((BLOCKS - 5)) --size $SIZE --no-tmp
gone=0
for i in 0 1 2 3 4; do
	[ -e "${B[i]}" ] && gone=1 && diag "still there: ${B[i]}"
done
[ "$gone" = 0 ]
ok $? "the 5 damaged names are gone"
ok_cmd "the copy still reads back the last block's bytes" \
	cmp "$MNT/copies/dup" "${B[23]}"
ok_kvclient "vllm-store again: the 5 lost blocks are stored anew (the others skipped)" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads 4 --odirect
kvt_umount
fsck "$LOWER"
[ "$rc" = 0 ] && summary_is "$((BLOCKS + 1)) names, $BLOCKS objects, 0 problems"
ok $? "after another mount: clean, $(tail -n 1 "$T/out")" || show_fsck

# --- bad invocations ---------------------------------------------------
# bad DESC STATUS ARGS...: exit STATUS (16 usage, 8 operational, as
# fsck(8)), exactly one line on stderr, nothing on stdout.
bad() {
	local desc=$1 want=$2
	shift 2
	fsck "$@"
	[ "$rc" = "$want" ] && [ "$(grep -c '' "$T/err")" = 1 ] && [ ! -s "$T/out" ]
	ok $? "$desc: exit $want ($rc): $(head -n 1 "$T/err")" || show_fsck
}
mkdir "$T/empty" "$T/foreign"
echo data >"$T/foreign/file"
bad "no LOWERDIR" 16
bad "two LOWERDIRs" 16 "$LOWER" "$LOWER"
bad "unknown option" 16 --bogus "$LOWER"
bad "--repair with --dry-run" 16 --repair -n "$LOWER"
bad "missing LOWERDIR" 8 "$T/missing"
bad "a file as LOWERDIR" 8 "$T/foreign/file"
bad "a directory that is not a store" 8 "$T/foreign"
bad "an empty directory" 8 "$T/empty"
[ -z "$(ls -A "$T/empty")" ] && [ "$(ls -A "$T/foreign")" = file ]
ok $? "and neither directory was changed (fsck makes no store)"
fsck --help
[ "$rc" = 0 ] && grep -q -- '--repair' "$T/out"
ok $? "--help: exit 0, lists --repair" || show_fsck
