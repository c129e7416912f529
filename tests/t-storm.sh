#!/bin/bash
# A load storm over damaged blocks: 96 blocks of 2 MiB stored the vLLM way,
# a third of them damaged on the lower disk with a mix of damages
# (truncations, an extension, flipped bits, zeroed pages, swapped bytes,
# deleted objects, garbage records), then all loaded by 16 threads with
# O_DIRECT.  Every damaged block fails with EIO or ENOENT and is absent
# afterwards, every intact one reads back byte for byte, one purge per
# damaged name.  Once damaged while mounted (dentries cached: found at
# open), once while unmounted (found at lookup), and once with 16 threads
# loading the same block at once (one purge per name, however many loads
# race to find it).
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/damage.sh"

BLOCKS=96
SIZE=$((2 << 20))
THREADS=16
SAME_BLOCKS=30

kvt_require_root
plan 38
kvt_setup

# plan_damage ROUND [N]: of blocks 0..N-1 (default $BLOCKS), those with
# k % 3 == ROUND get the damages of $DMG_KINDS in turn (a swap takes two of
# them).  Sets DAMAGED (keys, in order) and STEPS ("KIND KEY [PARTNER]"
# lines for dmg_apply).
plan_damage() {
	local keys=() kinds i=0 n=0 kind k
	read -r -a kinds <<<"$DMG_KINDS"
	for ((k = $1; k < ${2:-$BLOCKS}; k += 3)); do
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

# storm_load OUT N SAME: vllm-load --report of blocks 0..N-1 by 16 threads,
# O_DIRECT; SAME is 1 (each block loaded once) or 16 (--same: all threads
# load each block at once); stdout in OUT, stderr in OUT.err; the exit
# status of kvclient.
storm_load() {
	local same=()
	[ "$3" = 1 ] || same=(--same)
	kvt_run "$KVCLIENT" vllm-load --dir "$MNT" --blocks "$2" "${same[@]}" \
		--size $SIZE --threads $THREADS --odirect --report >"$1" 2>"$1.err"
}

# report_keys OUT [STEP]: the keys reported as failed (enoent or eio) in
# OUT, at STEP if given, sorted, each once.
report_keys() {
	awk -v s="${2:-}" '$1 ~ /^[0-9]+$/ && ($3 == "enoent" || $3 == "eio") &&
		(s == "" || $2 == s) { print $1 }' "$1" | sort -n -u
}

# storm WHEN N SAME: load blocks 0..N-1, each SAME times at once, with the
# DAMAGED ones damaged; check.  Seven test points.
#
# Every load of a block whose bytes are damaged fails.  A block whose name
# record is garbage has intact bytes: loads that race with the one that
# finds the garbage and purges the name may still return its right bytes
# (they hold the inode the kernel looked up before the purge).
storm() {
	local when=$1 nblk=$2 same=$3 want nd=${#DAMAGED[@]} k n nsize=0 ndel=0
	local nhash=0 re=() st why=() gok=0 wok
	declare -A fails=()
	want=$(printf '%s\n' "${DAMAGED[@]}" | sort -n)
	for k in "${DAMAGED[@]}"; do
		case ${KIND[$k]} in
		trunc0 | half | minus1 | plus1) nsize=$((nsize + 1)) ;;
		bitflip | zeropage | swap) nhash=$((nhash + 1)) ;;
		delete) ndel=$((ndel + 1)) ;;
		esac
	done

	storm_load "$T/load1" "$nblk" "$same"
	st=$?
	! grep -Eq ' (short|wrong|error) ' "$T/load1"
	ok $((st + $?)) "$when: $THREADS-thread O_DIRECT load of $nblk blocks, each $same time(s) at once: no short count, no wrong byte, no other error"
	[ "$st" = 0 ] || { diag "exit status $st"; diag_file "$T/load1.err" 20; }
	grep -v '^vllm-load ' "$T/load1" | grep -Ev ' (enoent|eio)$' | head -n 20 | sed 's/^/#   /'
	grep '^vllm-load ' "$T/load1" | sed 's/^/#   /'

	while read -r k n; do
		fails[$k]=$n
	done < <(awk '$1 ~ /^[0-9]+$/ && ($3 == "enoent" || $3 == "eio") { n[$1]++ }
		END { for (k in n) print k, n[k] }' "$T/load1")
	for k in "${DAMAGED[@]}"; do
		n=${fails[$k]:-0}
		unset "fails[$k]"
		if [ "${KIND[$k]}" = garbage ] && [ "$same" -gt 1 ]; then
			[ "$n" -ge 1 ] ||
				why+=("block $k (garbage record): no load failed")
			gok=$((gok + same - n))
		elif [ "$n" != "$same" ]; then
			why+=("block $k (${KIND[$k]}): $n of $same loads failed")
		fi
	done
	for k in "${!fails[@]}"; do
		why+=("block $k (not damaged): ${fails[$k]} loads failed")
	done
	ok ${#why[@]} "$when: every load of the $nd damaged blocks fails with EIO or ENOENT (garbage record: at least one)"
	[ ${#why[@]} = 0 ] || diag "${why[@]}"
	wok=$(((nblk - nd) * same + gok))
	grep -q " ok=$wok " "$T/load1"
	ok $? "$when: the $((nblk - nd)) intact blocks read back byte for byte ($wok loads ok)"

	storm_load "$T/load2" "$nblk" 1
	st=$?
	[ "$st" = 0 ] && [ "$(report_keys "$T/load2" access)" = "$want" ] &&
		[ "$(report_keys "$T/load2")" = "$want" ] &&
		grep -q " ok=$((nblk - nd)) " "$T/load2"
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

# restore_all N: store blocks 0..N-1 again; the damaged ones are stored
# anew.  Two test points.
restore_all() {
	local n=$1 nd=${#DAMAGED[@]}
	ok_kvclient "store all $n again: the $nd damaged are stored anew" \
		vllm-store --dir "$MNT" --blocks "$n" --size $SIZE --threads $THREADS --odirect
	grep -q "stored=$nd skipped=$((n - nd)) " "$KVT_OUT"
	ok $? "stored $nd, skipped $((n - nd))"
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
storm "mounted" $BLOCKS 1
restore_all $BLOCKS
kvt_umount

# --- damaged while unmounted ----------------------------------------------
dmg_remember_all() {
	dmg_remember $(seq 0 $((BLOCKS - 1))) >"$T/why"
	ok $? "each block names its object again"
	diag_file "$T/why"
}
plan_damage 2
kvt_mount
dmg_remember_all
kvt_umount
diag "damaged while unmounted: ${STEPS[*]}"
apply_damage
kvt_mount
dmg_stats "$T/before"
MARK=$(dmg_log_mark)
storm "after remount" $BLOCKS 1
restore_all $BLOCKS

# --- 16 threads load the same damaged block at once -----------------------
dmg_remember_all
plan_damage 0 $SAME_BLOCKS
diag "damaged while mounted, each block loaded $THREADS times at once: ${STEPS[*]}"
dmg_stats "$T/before"
MARK=$(dmg_log_mark)
apply_damage
storm "same block" $SAME_BLOCKS $THREADS
restore_all $SAME_BLOCKS
ok_kvclient "verify: exactly $BLOCKS complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $BLOCKS --size $SIZE --no-tmp --threads $THREADS
kvt_umount
