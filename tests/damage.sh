# shellcheck shell=bash
#
# tests/damage.sh: damage stored blocks on the lower disk behind kvtierfs's
# back, and read what kvtierfs made of it (counters, purge log lines).
# Sourced after lib.sh by t-corrupt.sh and t-storm.sh.
#
# Blocks are kvclient's vLLM-layout blocks of $SIZE bytes (key -> path).
# While mounted, dmg_remember KEY records what the mount says about block
# KEY: REL[KEY] (path under the mount root), OBJ[KEY] (object path under
# LOWERDIR, user.kvtierfs.object), HASH[KEY] (user.kvtierfs.hash).  Then,
# mounted or not, dmg_apply KIND KEY damages it on $LOWER; KIND is one of
# $DMG_KINDS:
#
#   trunc0    truncate the object to 0 bytes
#   half      truncate it to half its size
#   minus1    truncate it to its size - 1
#   plus1     append one byte
#   bitflip   flip one bit in the middle
#   zeropage  zero one 4 KiB page in the middle
#   swap      swap the bytes of the objects of KEY and KEY+1, or of KEY
#             and PARTNER (dmg_apply swap KEY PARTNER); bytes are written,
#             no inode changes name
#   delete    unlink both names of the object's inode (reference, anchor)
#   garbage   overwrite the name record under names/ with garbage
#
# and sets FOUND[KEY] to what the lower disk now holds (new size, or
# xxh3-128:<hex> of the damaged bytes) and KIND[KEY].  After a load found
# the damage, dmg_log_re KEY is the purge line kvtierfs must have logged,
# and dmg_counter_conds KIND what its counters must have done.

DMG_KINDS="trunc0 half minus1 plus1 bitflip zeropage swap delete garbage"
declare -A REL=() OBJ=() HASH=() FOUND=() KIND=()

# dmg_rel KEY: path of block KEY relative to the mount root.
dmg_rel() {
	"$KVCLIENT" paths --dir "$MNT" --key-base "$1" --blocks 1
}

# dmg_remember KEY...: record REL, OBJ, HASH of each block KEY (mounted).
# Fails when the mount does not name an object of $SIZE bytes for it.
dmg_remember() {
	local k o
	for k in "$@"; do
		REL[$k]=$(dmg_rel "$k")
		OBJ[$k]=$(kvt_xattr "$MNT/${REL[$k]}" user.kvtierfs.object)
		HASH[$k]=$(kvt_xattr "$MNT/${REL[$k]}" user.kvtierfs.hash)
		o="$LOWER/${OBJ[$k]}"
		if [[ "${OBJ[$k]}" != objects/* ]] || [ ! -f "$o" ] ||
			[ "$(stat -c %s "$o")" != "$SIZE" ] ||
			[[ ! "${HASH[$k]}" =~ ^xxh3-128:[0-9a-f]{32}$ ]] ||
			[ ! -f "$LOWER/names/${REL[$k]}" ]; then
			echo "block $k (${REL[$k]}): object '${OBJ[$k]}', hash '${HASH[$k]}'"
			return 1
		fi
	done
}

# dmg_xxh FILE: xxh3-128:<hex> of FILE's bytes ($KVT_XXH128).  Fails, with
# the reason on stdout, when FILE cannot be hashed.
dmg_xxh() {
	local out
	if ! out=$("$KVT_XXH128" "$1" 2>&1) || [[ ! "$out" =~ ^[0-9a-f]{32}\ \  ]]; then
		echo "cannot hash $1: $out"
		return 1
	fi
	echo "xxh3-128:${out%%  *}"
}

# dmg_flip_bit FILE OFFSET: flip the lowest bit of the byte at OFFSET.
dmg_flip_bit() {
	local f=$1 off=$2 b
	b=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
	[ -n "$b" ] || return 1
	# shellcheck disable=SC2059
	printf "\\x$(printf %02x $((b ^ 1)))" |
		dd of="$f" bs=1 seek="$off" conv=notrunc status=none
}

# dmg_apply KIND KEY [PARTNER]: damage block KEY on $LOWER (see the top of
# this file).  Returns non-zero, with the reason on stdout, if the damage
# did not take.
dmg_apply() {
	local kind=$1 k=$2 p=${3:-$(($2 + 1))} o o2 a mid=$((SIZE / 2)) want
	o="$LOWER/${OBJ[$k]}"
	KIND[$k]=$kind
	FOUND[$k]=
	case $kind in
	trunc0) want=0 ;;
	half) want=$mid ;;
	minus1) want=$((SIZE - 1)) ;;
	plus1) want=$((SIZE + 1)) ;;
	esac
	case $kind in
	trunc0 | half | minus1)
		truncate -s "$want" "$o" || return 1
		;;
	plus1)
		printf 'x' >>"$o" || return 1
		;;
	bitflip)
		dmg_flip_bit "$o" $((mid + 4093)) || return 1
		;;
	zeropage)
		dd if=/dev/zero of="$o" bs=4096 seek=$((mid / 4096)) count=1 \
			conv=notrunc status=none || return 1
		;;
	swap)
		o2="$LOWER/${OBJ[$p]}"
		KIND[$p]=swap
		cp "$o" "$T/.swap" &&
			dd if="$o2" of="$o" bs=1M conv=notrunc status=none &&
			dd if="$T/.swap" of="$o2" bs=1M conv=notrunc status=none ||
			return 1
		rm -f "$T/.swap"
		FOUND[$p]=$(dmg_xxh "$o2") || { echo "swap: ${FOUND[$p]}"; return 1; }
		if [ "${FOUND[$p]}" != "${HASH[$k]}" ]; then
			echo "swap: object of block $p now hashes ${FOUND[$p]}, not ${HASH[$k]}"
			return 1
		fi
		;;
	delete)
		a="$LOWER/${OBJ[$k]%.*}"
		if [ "$(stat -c %i "$o")" != "$(stat -c %i "$a")" ]; then
			echo "delete: anchor $a is not a link of $o"
			return 1
		fi
		rm "$o" "$a" || return 1
		;;
	garbage)
		printf 'kvtierfs-record 1\nhash 0123 not a hash\nsize many\n\001\002garbage\n' \
			>"$LOWER/names/${REL[$k]}" || return 1
		;;
	*)
		echo "unknown damage '$kind'"
		return 1
		;;
	esac
	case $kind in
	trunc0 | half | minus1 | plus1)
		FOUND[$k]=$(stat -c %s "$o")
		[ "${FOUND[$k]}" = "$want" ] ||
			{ echo "$kind: object has ${FOUND[$k]} bytes, not $want"; return 1; }
		;;
	bitflip | zeropage | swap)
		FOUND[$k]=$(dmg_xxh "$o") || { echo "$kind: ${FOUND[$k]}"; return 1; }
		if [ "$(stat -c %s "$o")" != "$SIZE" ] || [ "${FOUND[$k]}" = "${HASH[$k]}" ]; then
			echo "$kind: object has $(stat -c %s "$o") bytes, hashes ${FOUND[$k]}"
			return 1
		fi
		;;
	esac
	return 0
}

# dmg_keys KIND KEY [PARTNER]: the blocks damaged by dmg_apply KIND KEY.
dmg_keys() {
	if [ "$1" = swap ]; then
		echo "$2 ${3:-$(($2 + 1))}"
	else
		echo "$2"
	fi
}

# dmg_re TEXT: TEXT as an extended regular expression matching itself.
dmg_re() {
	printf '%s' "$1" | sed 's/[][\.^$*+?(){}|]/\\&/g'
}

# dmg_log_re KEY: the purge line for block KEY, damaged by dmg_apply, as
# an extended regular expression.  A truncated object may be found at
# resolve (torn by size) or by a read (short read).
dmg_log_re() {
	local k=$1 p r
	p="^kvtierfs: warning: purged $(dmg_re "${REL[$k]}"): "
	r="$p""object $(dmg_re "${OBJ[$k]}"): "
	case ${KIND[$k]} in
	trunc0 | half | minus1)
		echo "$r(torn by size: expected $SIZE, found ${FOUND[$k]}|short read: expected [0-9]+, found [0-9]+)\$"
		;;
	plus1)
		echo "$r""torn by size: expected $SIZE, found ${FOUND[$k]}\$"
		;;
	bitflip | zeropage | swap)
		echo "$r""torn by hash: expected ${HASH[$k]}, found ${FOUND[$k]}\$"
		;;
	delete)
		echo "$r""missing object(: expected [^,]*, found .*)?\$"
		;;
	garbage)
		echo "$p""record names/$(dmg_re "${REL[$k]}"): unparsable record\$"
		;;
	esac
}

# dmg_counter_conds KIND: what one damage of KIND found by a load does to
# the counters (per damaged name; see dmg_check_counters for the form).
dmg_counter_conds() {
	case $1 in
	trunc0 | half | minus1) echo "purges=1 torn_size+short_reads=1 torn_hash=0" ;;
	plus1) echo "purges=1 torn_size=1 short_reads=0 torn_hash=0" ;;
	bitflip | zeropage | swap) echo "purges=1 torn_hash=1 torn_size=0 short_reads=0" ;;
	delete) echo "purges=1 torn_size<=1 short_reads=0 torn_hash=0" ;;
	garbage) echo "purges=1 torn_size=0 short_reads=0 torn_hash=0" ;;
	esac
}

# dmg_stats FILE: save the mount's counters (user.kvtierfs.stats of the
# root: "name value" lines) in FILE.
dmg_stats() {
	kvt_xattr "$MNT" user.kvtierfs.stats >"$1"
}

# dmg_check_counters DESC BEFORE AFTER COND...: one test point.  Each COND
# is NAME[+NAME...]=N (or <=N, >=N) on the increase of the named counters
# from the BEFORE to the AFTER file (dmg_stats).  A COND xK multiplies
# every N by K (e.g. "purges=1 x2": two damaged names).
dmg_check_counters() {
	local desc=$1 before=$2 after=$3 c lhs op n sum name b a why=() mul=1
	shift 3
	for c in "$@"; do
		[[ $c == x* ]] && mul=${c#x}
	done
	for c in "$@"; do
		[[ $c == x* ]] && continue
		if [[ $c == *"<="* ]]; then
			op="<="
		elif [[ $c == *">="* ]]; then
			op=">="
		else
			op="="
		fi
		lhs=${c%%"$op"*}
		n=$((${c##*"$op"} * mul))
		sum=0
		for name in ${lhs//+/ }; do
			b=$(awk -v n="$name" '$1 == n { print $2 }' "$before")
			a=$(awk -v n="$name" '$1 == n { print $2 }' "$after")
			if [[ ! $b =~ ^[0-9]+$ ]] || [[ ! $a =~ ^[0-9]+$ ]]; then
				why+=("counter $name missing (before '$b', after '$a')")
				continue 2
			fi
			sum=$((sum + a - b))
		done
		if [ "$op" = "=" ] && [ "$sum" != "$n" ]; then
			why+=("$lhs went up by $sum, expected $n")
		elif [ "$op" = "<=" ] && [ "$sum" -gt "$n" ]; then
			why+=("$lhs went up by $sum, expected at most $n")
		elif [ "$op" = ">=" ] && [ "$sum" -lt "$n" ]; then
			why+=("$lhs went up by $sum, expected at least $n")
		fi
	done
	if [ ${#why[@]} -eq 0 ]; then
		ok 0 "$desc"
		return 0
	fi
	ok 1 "$desc"
	diag "${why[@]}" "counters before -> after:"
	join -a1 -a2 -e '?' -o 0,1.2,2.2 <(sort "$before") <(sort "$after") |
		sed 's/^/#   /'
	return 1
}

# dmg_log_mark: the current end of $T/daemon.log (for dmg_check_log).
dmg_log_mark() {
	stat -c %s "$T/daemon.log"
}

# dmg_check_log DESC MARK REGEX...: one test point.  The daemon log after
# MARK holds exactly one purge line per REGEX, matching it, and no other
# purge line.  (Waits up to 2 s for the lines: the daemon may log after
# it answered.)
dmg_check_log() {
	local desc=$1 mark=$2 re n i why=() want
	shift 2
	want=$#
	for ((i = 0; i < 20; i++)); do
		tail -c +"$((mark + 1))" "$T/daemon.log" >"$T/.log.seg"
		n=$(grep -c '^kvtierfs: warning: purged ' "$T/.log.seg")
		[ "$n" -ge "$want" ] && break
		sleep 0.1
	done
	[ "$n" = "$want" ] || why+=("$n purge lines, expected $want")
	for re in "$@"; do
		n=$(grep -Ec -- "$re" "$T/.log.seg")
		[ "$n" = 1 ] || why+=("$n lines match $re, expected 1")
	done
	if [ ${#why[@]} -eq 0 ]; then
		ok 0 "$desc"
		return 0
	fi
	ok 1 "$desc"
	diag "${why[@]}" "daemon log since the damage:"
	diag_file "$T/.log.seg" 20
	return 1
}

# dmg_gone KEY...: each block's name is gone: access(F_OK) through the
# mount fails with ENOENT, the name record is off the lower disk, and so is
# the object reference (unless the record was garbage: then its object is
# unknown).  Prints what is wrong; returns non-zero then.
dmg_gone() {
	local k out bad=0
	for k in "$@"; do
		out=$(LC_ALL=C kvt_run stat -c %s -- "$MNT/${REL[$k]}" 2>&1)
		if [[ $out != *"No such file or directory"* ]]; then
			echo "block $k: stat through the mount: $out (expected ENOENT)"
			bad=1
		fi
		if [ -e "$LOWER/names/${REL[$k]}" ]; then
			echo "block $k: name record names/${REL[$k]} is still on the lower disk"
			bad=1
		fi
		if [ "${KIND[$k]}" != garbage ] && [ -e "$LOWER/${OBJ[$k]}" ]; then
			echo "block $k: object ${OBJ[$k]} is still on the lower disk"
			bad=1
		fi
	done
	return "$bad"
}
