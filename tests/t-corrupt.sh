#!/bin/bash
# Torn blocks are detected, never served.  A 2 MiB block stored the vLLM way
# is damaged on the lower disk (truncated to 0, to half, to size-1, extended
# by a byte, a bit flipped, a page zeroed, its bytes swapped with another
# block's, its object deleted, its name record overwritten with garbage),
# once while mounted and once while unmounted.  The next load gets EIO or
# ENOENT (never a short count, never wrong bytes), the name is gone at once
# (access ENOENT), the counters and ONE purge line in the daemon log say
# what was found, and storing the block again works and reads back
# verified.  Then: a buffered tail read and an mmap read of a damaged
# block, an fd opened before a purge, an fd whose next read finds the object
# truncated (EIO, never a short count), two names sharing one damaged object
# (dedup), and -o verify=always finding damage done after a verified read,
# and serving an fd opened before the damage the bytes verified at its
# open.
# kvt-kind: faults
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/damage.sh"

SIZE=$((2 << 20))
# keys: 0..9 damaged while mounted, 10..19 while unmounted (one per kind,
# swap takes two), 20..27 the single cases
LIVE=0
REMOUNT=10
TAIL=20
MMAP=21
HELD=22
ALWAYS=23
HELD_ALWAYS=24
SHORT=25        # 25, 26
DEDUP=27
COPY=28
NBLOCKS=29

kvt_require_root
plan 166
kvt_setup

# probe KEY ARGS...: one load of block KEY through $MNT (kvclient probe);
# prints the outcome word.
probe() {
	local k=$1
	shift
	kvt_run "$KVCLIENT" probe --dir "$MNT" --key-base "$k" --size $SIZE "$@" \
		2>>"$T/probe.err"
}

# restore DESC KEY...: store the consecutive blocks KEY... again (vllm-store,
# same keys): all are stored (none skipped), each reads back ok (O_DIRECT)
# and is then 'verified'.  One test point.
restore() {
	local desc=$1 k o v out why=()
	shift
	out=$(kvt_run "$KVCLIENT" vllm-store --dir "$MNT" --key-base "$1" \
		--blocks $# --size $SIZE --threads 1 --odirect 2>&1)
	[[ $out == *"stored=$# skipped=0 "* ]] || why+=("vllm-store: $out")
	for k; do
		o=$(probe "$k" --odirect)
		[ "$o" = ok ] || why+=("block $k reads back: $o")
		v=$(kvt_xattr "$MNT/${REL[$k]}" user.kvtierfs.verdict)
		[ "$v" = verified ] ||
			why+=("block $k: verdict '$v' after the read, expected verified")
	done
	ok ${#why[@]} "$desc: storing it again works, it reads back right and is verified"
	[ ${#why[@]} = 0 ] || diag "${why[@]}"
}

# after_found DESC KIND BEFORE MARK KEY... [-- COND...]: the damaged
# blocks KEY... were found by a load: their names are gone, the counters
# moved from BEFORE as the damage KIND says (or as the CONDs say), and the
# log since MARK has one purge line per block.  Three test points.
after_found() {
	local desc=$1 kind=$2 before=$3 mark=$4 k keys=() conds=() re=()
	shift 4
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		keys+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	conds=("$@")
	[ ${#conds[@]} -gt 0 ] ||
		read -r -a conds <<<"$(dmg_counter_conds "$kind") x${#keys[@]}"
	dmg_gone "${keys[@]}" >"$T/why"
	ok $? "$desc: the name is gone (access ENOENT), its record and object are off the lower disk"
	diag_file "$T/why"
	dmg_stats "$T/after"
	dmg_check_counters "$desc: counters: ${conds[*]}" "$before" "$T/after" \
		"${conds[@]}"
	for k in "${keys[@]}"; do
		re+=("$(dmg_log_re "$k")")
	done
	dmg_check_log "$desc: one purge line per damaged name, with path and reason" \
		"$mark" "${re[@]}"
}

# found MODE KIND KEY BEFORE MARK: block KEY (and KEY+1 for swap) was
# damaged: an O_DIRECT load gets EIO or ENOENT, then after_found and
# restore.  Five test points.
found() {
	local mode=$1 kind=$2 k=$3 before=$4 mark=$5 j o outs="" st=0 keys
	read -r -a keys <<<"$(dmg_keys "$kind" "$k")"
	: >"$T/probe.err"
	for j in "${keys[@]}"; do
		o=$(probe "$j" --odirect)
		outs+=" $j:$o"
		case $o in
		eio | enoent) ;;
		*) st=1 ;;
		esac
	done
	ok $st "$mode, $kind: the O_DIRECT load gets EIO or ENOENT (got$outs)"
	diag_file "$T/probe.err" 4
	after_found "$mode, $kind" "$kind" "$before" "$mark" "${keys[@]}"
	restore "$mode, $kind" "${keys[@]}"
}

# damage KIND KEY: dmg_apply, bail out if the damage did not take.
damage() {
	dmg_apply "$1" "$2" >"$T/why" ||
		bail "cannot damage block $2 ($1): $(cat "$T/why")"
}

# hold KEY: start a probe of block KEY in the background that reads it
# once (O_DIRECT) and keeps its fd open until $T/go.KEY exists, then reads
# again on that fd; its outcome lines come on fd $HFD.
hold() {
	exec {HFD}< <(exec "$KVCLIENT" probe --dir "$MNT" --key-base "$1" \
		--size $SIZE --odirect --reread-after "$T/go.$1" \
		2>>"$T/probe.err" {_kvt_out}>&- {_kvt_err}>&-)
	HPID=$!
	kvt_bg "$HPID"
}

# held_read KEY: let the held probe read again; its outcome in HELD_OUT
# ('none' if it said nothing within 60 s).
held_read() {
	HELD_OUT=none
	: >"$T/go.$1"
	IFS= read -r -t 60 -u "$HFD" HELD_OUT || kill -KILL "$HPID" 2>/dev/null
	exec {HFD}<&-
	wait "$HPID" 2>/dev/null
}

# hold_ok KEY WHAT: hold KEY; its first O_DIRECT read must be ok (a test
# point saying WHAT).
hold_ok() {
	local o
	: >"$T/probe.err"
	hold "$1"
	IFS= read -r -t 60 -u "$HFD" o
	[ "$o" = ok ]
	ok $? "$2: the first O_DIRECT read of the intact block is ok (got '$o')"
}

# damaged_probe WHAT KIND KEY DESC PROBE-ARGS...: damage block KEY by
# KIND, probe it with PROBE-ARGS: EIO (a test point, DESC), then what the
# mount made of it (after_found, with the counters and log from before the
# damage) and the block stored again (restore), under WHAT.
damaged_probe() {
	local what=$1 kind=$2 k=$3 desc=$4 o mark
	shift 4
	dmg_stats "$T/before"
	mark=$(dmg_log_mark)
	damage "$kind" "$k"
	: >"$T/probe.err"
	o=$(probe "$k" "$@")
	[ "$o" = eio ]
	ok $? "$desc (got '$o')"
	diag_file "$T/probe.err" 4
	after_found "$what" "$kind" "$T/before" "$mark" "$k"
	restore "$what" "$k"
}

kvt_mount
ok_kvclient "store $NBLOCKS blocks of 2 MiB the vLLM way (O_DIRECT, tmp + rename)" \
	vllm-store --dir "$MNT" --blocks $NBLOCKS --size $SIZE --threads 4 --odirect
dmg_remember $(seq 0 $((NBLOCKS - 1))) >"$T/why"
ok $? "each block names its own $SIZE-byte object and a record on the lower disk"
diag_file "$T/why"

# --- damaged while mounted; O_DIRECT loads, kernel caches dropped --------
k=$LIVE
for kind in $DMG_KINDS; do
	dmg_stats "$T/before"
	mark=$(dmg_log_mark)
	damage "$kind" $k
	kvt_drop_caches --no-sync
	found "mounted" "$kind" $k "$T/before" "$mark"
	k=$((k + $(wc -w <<<"$(dmg_keys "$kind" $k)")))
done

# --- damaged while unmounted ----------------------------------------------
kvt_umount
k=$REMOUNT
for kind in $DMG_KINDS; do
	damage "$kind" $k
	k=$((k + $(wc -w <<<"$(dmg_keys "$kind" $k)")))
done
kvt_mount
k=$REMOUNT
for kind in $DMG_KINDS; do
	dmg_stats "$T/before"
	mark=$(dmg_log_mark)
	found "after remount" "$kind" $k "$T/before" "$mark"
	k=$((k + $(wc -w <<<"$(dmg_keys "$kind" $k)")))
done

# --- llm-d: buffered read of the tail (non-zero offset) -------------------
damaged_probe "tail read, bitflip" bitflip $TAIL \
	"buffered read of the second half of a bit-flipped block gets EIO" \
	--buffered --offset $((SIZE / 2))

# --- mmap -------------------------------------------------------------------
damaged_probe "mmap, bitflip" bitflip $MMAP \
	"mmap read of a bit-flipped block: the open gets EIO" --mmap

# --- an fd opened before the purge (object truncated to half) -------------
hold_ok $HELD "open fd"
dmg_stats "$T/before"
mark=$(dmg_log_mark)
damage half $HELD
o=$(probe $HELD --odirect)
[ "$o" = enoent ] || [ "$o" = eio ]
ok $? "open fd, half: a second load gets ENOENT or EIO and purges (got '$o')"
held_read $HELD
o=$HELD_OUT
[ "$o" = eio ]
ok $? "open fd, half: the next read on the fd opened before the purge gets EIO (got '$o')"
diag_file "$T/probe.err" 4
after_found "open fd, half" half "$T/before" "$mark" $HELD -- \
	purges=1 "torn_size+short_reads>=1" "torn_size+short_reads<=2" torn_hash=0
restore "open fd, half" $HELD

# --- an fd opened before bytes changed in place (kvtierfs(8), Open files):
# a fresh open hashes the changed lower file again, gets EIO and purges;
# the fd opened before gets EIO or the bytes verified at its open, never
# a wrong byte once the change was found.
hold_ok $HELD "open fd"
dmg_stats "$T/before"
mark=$(dmg_log_mark)
dmg_remember $HELD >"$T/why" || bail "cannot find block $HELD's object: $(cat "$T/why")"
damage bitflip $HELD
o=$(probe $HELD --odirect)
[ "$o" = eio ]
ok $? "open fd, bitflip: a second open hashes the changed object and gets EIO (got '$o')"
held_read $HELD
o=$HELD_OUT
[ "$o" = eio ] || [ "$o" = ok ]
ok $? "open fd, bitflip: the next read on the fd opened before the change gets EIO or the right bytes (got '$o')"
diag_file "$T/probe.err" 4
after_found "open fd, bitflip" bitflip "$T/before" "$mark" $HELD
restore "open fd, bitflip" $HELD

# --- the next read on an open fd finds the object truncated ---------------
k=$SHORT
for kind in half minus1; do
	hold_ok $k "short read, $kind"
	dmg_stats "$T/before"
	mark=$(dmg_log_mark)
	damage $kind $k
	held_read $k
	o=$HELD_OUT
	[ "$o" = eio ]
	ok $? "short read, $kind: the next O_DIRECT read on the open fd gets EIO, not a short count (got '$o')"
	diag_file "$T/probe.err" 4
	after_found "short read, $kind" $kind "$T/before" "$mark" $k
	restore "short read, $kind" $k
	k=$((k + 1))
done

# --- two names, one object (dedup): both are torn -------------------------
REL[dup]=dup.bin
kvt_run dd if="$MNT/${REL[$DEDUP]}" of="$MNT/${REL[dup]}" bs=1M status=none
OBJ[dup]=$(kvt_xattr "$MNT/${REL[dup]}" user.kvtierfs.object)
HASH[dup]=${HASH[$DEDUP]}
[ -n "${OBJ[dup]}" ] && [ "${OBJ[dup]}" != "${OBJ[$DEDUP]}" ] &&
	[ "${OBJ[dup]%.*}" = "${OBJ[$DEDUP]%.*}" ] &&
	[ "$LOWER/${OBJ[dup]}" -ef "$LOWER/${OBJ[$DEDUP]}" ]
ok $? "dedup: a copy of a block through the mount is a new reference to the same object (${OBJ[dup]})"
dmg_stats "$T/before"
mark=$(dmg_log_mark)
damage bitflip $DEDUP
KIND[dup]=bitflip
FOUND[dup]=${FOUND[$DEDUP]}
: >"$T/probe.err"
o=$(probe $DEDUP --odirect)
[ "$o" = eio ]
ok $? "dedup, bitflip: the O_DIRECT load of the first name gets EIO (got '$o')"
dmg_gone $DEDUP >"$T/why"
ok $? "dedup, bitflip: the first name is gone, its record and object reference too"
diag_file "$T/why"
restore "dedup, bitflip: while the copy still references the damaged object" $DEDUP
o=$(probe $DEDUP --file "${REL[dup]}" --odirect)
[ "$o" = eio ] || [ "$o" = enoent ]
ok $? "dedup, bitflip: the O_DIRECT load of the copy gets EIO or ENOENT (got '$o')"
diag_file "$T/probe.err" 4
dmg_gone dup >"$T/why"
ok $? "dedup, bitflip: the copy is gone, its record and object reference too"
diag_file "$T/why"
dmg_stats "$T/after"
dmg_check_counters "dedup, bitflip: counters: 2 purges, the first torn by hash, the copy by hash or missing" \
	"$T/before" "$T/after" purges=2 "torn_hash>=1" torn_hash+torn_size=2 short_reads=0
dmg_check_log "dedup, bitflip: one purge line per name, with path and reason" "$mark" \
	"$(dmg_log_re $DEDUP)" \
	"^kvtierfs: warning: purged dup\.bin: object $(dmg_re "${OBJ[dup]}"): (torn by hash: expected ${HASH[dup]}, found ${FOUND[dup]}|missing object(: expected [^,]*, found .*)?)\$"
kvt_umount

# --- -o verify=always: damage after a verified read -----------------------
kvt_mount verify=always
: >"$T/probe.err"
o=$(probe $ALWAYS --odirect)
v=$(kvt_xattr "$MNT/${REL[$ALWAYS]}" user.kvtierfs.verdict)
[ "$o" = ok ] && [ "$v" = verified ]
ok $? "verify=always: a first O_DIRECT load is ok and the block is verified (got '$o', '$v')"
damaged_probe "verify=always, bitflip" bitflip $ALWAYS \
	"verify=always: a bit flipped after the verified read: the next O_DIRECT load gets EIO" --odirect

# an fd opened (and read) before a bit flip that a second open finds
hold_ok $HELD_ALWAYS "verify=always, open fd"
dmg_stats "$T/before"
mark=$(dmg_log_mark)
damage bitflip $HELD_ALWAYS
o=$(probe $HELD_ALWAYS --odirect)
[ "$o" = eio ]
ok $? "verify=always, open fd: a second open of the bit-flipped block gets EIO and purges (got '$o')"
held_read $HELD_ALWAYS
o=$HELD_OUT
[ "$o" = eio ]
ok $? "verify=always, open fd: the next read on the fd opened before the purge gets EIO (got '$o')"
diag_file "$T/probe.err" 4
after_found "verify=always, open fd" bitflip "$T/before" "$mark" $HELD_ALWAYS
restore "verify=always, open fd" $HELD_ALWAYS

# an fd opened before a bit flip, which reads on before any other open
# finds it: its bytes are the ones hashed at its open (a verified copy,
# src/store/verify.h), never the flipped one
hold_ok $COPY "verify=always, open fd, read on"
dmg_stats "$T/before"
mark=$(dmg_log_mark)
damage bitflip $COPY
held_read $COPY
o=$HELD_OUT
[ "$o" = ok ]
ok $? "verify=always, open fd, read on: after a bit flip, the fd reads the bytes verified at its open (got '$o')"
o=$(probe $COPY --odirect)
[ "$o" = eio ]
ok $? "verify=always, open fd, read on: a second open gets EIO and purges (got '$o')"
diag_file "$T/probe.err" 4
after_found "verify=always, read on" bitflip "$T/before" "$mark" $COPY
restore "verify=always, read on" $COPY
kvt_umount

# --- every block is back, nothing else is left over -----------------------
kvt_mount
ok_kvclient "verify: exactly $NBLOCKS complete blocks, no *.tmp" \
	verify --dir "$MNT" --expect $NBLOCKS --size $SIZE --no-tmp
ok_kvclient "vllm-load O_DIRECT: all $NBLOCKS blocks, every byte" \
	vllm-load --dir "$MNT" --blocks $NBLOCKS --size $SIZE --threads 8 --odirect
kvt_umount
