#!/bin/bash
# A load storm over damaged blocks: 96 blocks of 2 MiB stored the vLLM way,
# a third of them damaged on the lower disk with a mix of damages
# (truncations, an extension, flipped bits, zeroed pages, swapped bytes,
# deleted objects, garbage records), then all loaded by 16 threads with
# O_DIRECT.  Every damaged block fails with EIO or ENOENT and is absent
# afterwards, every intact one reads back byte for byte, one purge per
# damaged name.  Once damaged while mounted (dentries cached: found at
# open), once while unmounted (found at lookup).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/damage.sh"

BLOCKS=96
SIZE=$((2 << 20))
THREADS=16

plan 26
kvt_require_root
kvt_setup
command -v xxh128sum >/dev/null || bail "xxh128sum is needed (package xxhash)"

# plan_damage ROUND: the blocks k with k % 3 == ROUND get the damages of
# $DMG_KINDS in turn (a swap takes two of them).  Sets DAMAGED (keys, in
# order) and STEPS ("KIND KEY [PARTNER]" lines for dmg_apply).
plan_damage() {
	local keys=() kinds i=0 n=0 kind k
	read -r -a kinds <<<"$DMG_KINDS"
	for ((k = $1; k < BLOCKS; k += 3)); do
		keys+=("$k")
	done
	DAMAGED=()
	STEPS=()
	while [ $i -lt ${#keys[@]} ]; do
		kind=${kinds[$((n % ${#kinds[@]}))]}
		n=$((n + 1))
		if [ "$kind" = swap ]; then
			[ $((i + 1)) -lt ${#keys[@]} ] || continue
			STEPS+=("swap ${keys[$i]} ${keys[$((i + 1))]}")
			DAMAGED+=("${keys[$i]}" "${keys[$((i + 1))]}")
			i=$((i + 2))
		else
			STEPS+=("$kind ${keys[$i]}")
			DAMAGED+=("${keys[$i]}")
			i=$((i + 1))
		fi
	done
}

# apply_damage: every step of STEPS; bail out if one did not take.
apply_damage() {
	local s
	for s in "${STEPS[@]}"; do
		# shellcheck disable=SC2086
		dmg_apply $s >"$T/why" || bail "cannot damage ($s): $(cat "$T/why")"
	done
}

# storm_load OUT: vllm-load --report of all blocks, 16 threads, O_DIRECT;
# stdout in OUT, stderr in OUT.err; the exit status of kvclient.
storm_load() {
	kvt_run "$KVCLIENT" vllm-load --dir "$MNT" --blocks $BLOCKS --size $SIZE \
		--threads $THREADS --odirect --report >"$1" 2>"$1.err"
}

# report_keys OUT [STEP]: the keys reported as failed (enoent or eio) in
# OUT, at STEP if given, sorted.
report_keys() {
	awk -v s="${2:-}" '$1 ~ /^[0-9]+$/ && ($3 == "enoent" || $3 == "eio") &&
		(s == "" || $2 == s) { print $1 }' "$1" | sort -n
}

# storm WHEN: load all blocks with the DAMAGED ones damaged; check.
storm() {
	local when=$1 want nd=${#DAMAGED[@]} k nsize=0 ndel=0 nhash=0 re=() st
	want=$(printf '%s\n' "${DAMAGED[@]}" | sort -n)
	for k in "${DAMAGED[@]}"; do
		case ${KIND[$k]} in
		trunc0 | half | minus1 | plus1) nsize=$((nsize + 1)) ;;
		bitflip | zeropage | swap) nhash=$((nhash + 1)) ;;
		delete) ndel=$((ndel + 1)) ;;
		esac
	done

	storm_load "$T/load1"
	st=$?
	! grep -Eq ' (short|wrong|error) ' "$T/load1"
	ok $((st + $?)) "$when: $THREADS-thread O_DIRECT load of $BLOCKS blocks: no short count, no wrong byte, no other error"
	[ "$st" = 0 ] || { diag "exit status $st"; diag_file "$T/load1.err" 20; }
	grep -v '^vllm-load ' "$T/load1" | grep -Ev ' (enoent|eio)$' | head -n 20 | sed 's/^/#   /'
	grep '^vllm-load ' "$T/load1" | sed 's/^/#   /'

	[ "$(report_keys "$T/load1")" = "$want" ]
	ok $? "$when: exactly the $nd damaged blocks fail, each with EIO or ENOENT"
	diff <(echo "$want") <(report_keys "$T/load1") | grep '^[<>]' | head -n 10 |
		sed 's/^</#   not failed:/; s/^>/#   failed, not damaged:/'
	grep -q " ok=$((BLOCKS - nd)) " "$T/load1"
	ok $? "$when: the $((BLOCKS - nd)) intact blocks read back byte for byte"

	storm_load "$T/load2"
	st=$?
	[ "$st" = 0 ] && [ "$(report_keys "$T/load2" access)" = "$want" ] &&
		[ "$(report_keys "$T/load2")" = "$want" ] &&
		grep -q " ok=$((BLOCKS - nd)) " "$T/load2"
	ok $? "$when: loading all again: the damaged are absent at access(), the intact read back"
	grep -v '^vllm-load ' "$T/load2" | grep -v ' access enoent$' | head -n 10 | sed 's/^/#   /'
	grep '^vllm-load ' "$T/load2" | sed 's/^/#   /'
	diag_file "$T/load2.err" 10

	dmg_gone "${DAMAGED[@]}" >"$T/why"
	ok $? "$when: every damaged name and its record and object are gone"
	diag_file "$T/why" 10

	dmg_stats "$T/after"
	dmg_check_counters "$when: counters: $nd purges, $nhash torn by hash, $nsize..$((nsize + ndel)) torn by size or short reads" \
		"$T/before" "$T/after" "purges=$nd" "torn_hash=$nhash" \
		"torn_size+short_reads>=$nsize" "torn_size+short_reads<=$((nsize + ndel))"
	for k in "${DAMAGED[@]}"; do
		re+=("$(dmg_log_re "$k")")
	done
	dmg_check_log "$when: one purge line per damaged name, with path and reason" \
		"$MARK" "${re[@]}"
}

# restore_all: store every block again; the damaged ones are stored anew.
restore_all() {
	ok_kvclient "store all $BLOCKS again: the ${#DAMAGED[@]} damaged are stored anew" \
		vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads $THREADS --odirect
	grep -q "stored=${#DAMAGED[@]} skipped=$((BLOCKS - ${#DAMAGED[@]})) " "$KVT_OUT"
	ok $? "stored ${#DAMAGED[@]}, skipped $((BLOCKS - ${#DAMAGED[@]}))"
}

kvt_mount
ok_kvclient "vllm-store O_DIRECT: $BLOCKS x 2 MiB, $THREADS threads" \
	vllm-store --dir "$MNT" --blocks $BLOCKS --size $SIZE --threads $THREADS --odirect
dmg_remember $(seq 0 $((BLOCKS - 1))) >"$T/why"
ok $? "each block names its own $SIZE-byte object and a record on the lower disk"
diag_file "$T/why"

# --- damaged while mounted ------------------------------------------------
plan_damage 1
diag "damaged while mounted: ${STEPS[*]}"
dmg_stats "$T/before"
MARK=$(dmg_log_mark)
apply_damage
storm "mounted"
restore_all
dmg_remember $(seq 0 $((BLOCKS - 1))) >"$T/why"
ok $? "each block names its object again"
diag_file "$T/why"
kvt_umount

# --- damaged while unmounted ----------------------------------------------
plan_damage 2
diag "damaged while unmounted: ${STEPS[*]}"
apply_damage
kvt_mount
dmg_stats "$T/before"
MARK=$(dmg_log_mark)
storm "after remount"
restore_all
ok_kvclient "verify: exactly $BLOCKS complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $BLOCKS --size $SIZE --no-tmp --threads $THREADS
kvt_umount
