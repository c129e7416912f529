# shellcheck shell=bash
#
# tests/twohosts.sh: the steps the tests over GlusterFS, CephFS and NFS
# take alike on two hosts, $K1 (A) and $K2 (B), over one shared store
# (kvt_two_hosts), with blocks of $SIZE bytes.  Sourced after lib.sh.

# th_exchange N: host A stores N blocks, B loads them (O_DIRECT, then
# buffered), B stores N more, A loads those.  Five test points.
th_exchange() {
	ok_kvclient "host A stores $1 blocks (O_DIRECT)" \
		vllm-store --dir "$K1" --blocks "$1" --size "$SIZE"
	ok_kvclient "host B loads them, every byte checked (O_DIRECT)" \
		vllm-load --dir "$K2" --blocks "$1" --size "$SIZE"
	ok_kvclient "host B loads them buffered" \
		vllm-load --dir "$K2" --blocks "$1" --size "$SIZE" --buffered
	ok_kvclient "host B stores $1 more" \
		vllm-store --dir "$K2" --blocks "$1" --size "$SIZE" --key-base 1000
	ok_kvclient "host A loads them" \
		vllm-load --dir "$K1" --blocks "$1" --size "$SIZE" --key-base 1000
}

# th_remote_store KIND: both hosts logged that the store is on KIND (so
# every open for reading hashes) and that names change under flocks (no
# RENAME_EXCHANGE there).  One test point.
th_remote_store() {
	[ "$(grep -c "verify=auto: the store is on $1" "$T/daemon.log")" = 2 ] &&
		[ "$(grep -c "no RENAME_EXCHANGE: a name is replaced or removed under a flock" \
			"$T/daemon.log")" = 2 ]
	ok $? "both hosts see a store on $1, verify at every open, and change names under flocks" ||
		diag_file "$T/daemon.log" 20
}

# th_new_store DIR_A DIR_B: both hosts, unmounted, mount again on a new
# store, at DIR_A through host A's client and DIR_B through host B's
# ($S1, $S2): the races of twohosts-race.sh on a store of their own, whose
# names hold no version a reader there would not know.  Two test points.
th_new_store() {
	S1=$1
	S2=$2
	shift 2
	mkdir "$S1" || bail "mkdir failed"
	kvt_start "$S1" "$K1" "$@"
	P1=$KVT_LAST_PID
	kvt_start "$S2" "$K2" "$@"
	P2=$KVT_LAST_PID
}

# th_probe HOST KEY: kvclient's outcome for the block KEY through HOST.
th_probe() {
	"$KVCLIENT" probe --dir "$1" --key-base "$2" --size "$SIZE" 2>/dev/null | head -n 1
}

# th_damaged KEY: KEY probed on host B, then A, then both again: no host may
# serve a wrong or short block; the first to read the damage gets EIO
# (torn by hash) or ENOENT (torn by size), every later resolve misses.
th_damaged() {
	local out=() h
	for h in "$K2" "$K1" "$K2" "$K1"; do
		out+=("$(th_probe "$h" "$1")")
	done
	echo "${out[*]}"
}

# th_others_ok N KEY...: every block 0..N-1 but KEY... loads right on both
# hosts.  One test point.
th_others_ok() {
	local n=$1 bad k h o
	shift
	bad=$(for ((k = 0; k < n; k++)); do
		[[ " $* " == *" $k "* ]] && continue
		for h in "$K1" "$K2"; do
			o=$(th_probe "$h" "$k")
			[ "$o" = ok ] || echo "$k@$(basename "$h"):$o"
		done
	done)
	[ -z "$bad" ]
	ok $? "every other block still loads right on both hosts" || diag "$bad"
}

# th_both CMD A_EXTRA B_EXTRA ARG...: kvclient CMD ARG... on host A (--dir
# $K1, then the words of A_EXTRA) and on host B (--dir $K2, B_EXTRA) at
# once, each under the hang guard (kvt_guard); the outputs in
# $T/both1.out and $T/both2.out, their summary lines printed, the output
# of a client that failed shown.  True when both exit 0; $TH_S1 and
# $TH_S2 are their exit statuses.
th_both() {
	local cmd=$1 a=$2 b=$3 pid
	shift 3
	# shellcheck disable=SC2086 # the extras are lists of words
	kvt_guard "$KVCLIENT" "$cmd" --dir "$K1" "$@" $a >"$T/both1.out" 2>&1 &
	pid=$!
	kvt_bg "$pid"
	# shellcheck disable=SC2086
	kvt_guard "$KVCLIENT" "$cmd" --dir "$K2" "$@" $b >"$T/both2.out" 2>&1
	TH_S2=$?
	wait "$pid"
	TH_S1=$?
	grep -h "^$cmd " "$T/both1.out" "$T/both2.out" | sed 's/^/#   /'
	[ "$TH_S1" = 0 ] || diag_file "$T/both1.out" 10
	[ "$TH_S2" = 0 ] || diag_file "$T/both2.out" 10
	[ "$TH_S1" = 0 ] && [ "$TH_S2" = 0 ]
}

# th_race: both hosts store versions of one size under the same 8 names at
# once (tmp + rename), while 8 readers on each read them.  One test point.
th_race() {
	th_both race "--version 1" "--version 1001" --blocks 8 --size 65536 --writers 4 \
		--readers 8 --rounds 8 --shared --key-base 500
	ok $? "both hosts rename versions over the same 8 names while 8 readers each read them: every read one whole version, no ENOENT once published (exit $TH_S1, $TH_S2)"
}

# th_fanout_race N ROUNDS: both hosts store the same N blocks of 4 KiB at
# once, ROUNDS times, as two vLLM servers of one model do: each block's
# fan-out directories (<3 hex>/<2 hex>_g0) are made by both hosts' mkdir -p
# at nearly the same instant.  Every store succeeds (as a store or a skip
# of a block the other host stored first); then every block loads whole
# on both hosts.  ROUNDS + 2 test points.
th_fanout_race() {
	local n=$1 rounds=$2 r
	for ((r = 0; r < rounds; r++)); do
		th_both vllm-store "" "" --blocks "$n" --size 4096 --buffered --keep-going \
			--key-base $((200000 + r * n))
		ok $? "both hosts store the same $n blocks at once, making each fan-out directory together: every store succeeds (exit $TH_S1, $TH_S2)"
	done
	ok_kvclient "host A loads all $((n * rounds)) blocks, every byte checked" \
		vllm-load --dir "$K1" --blocks $((n * rounds)) --size 4096 --buffered --key-base 200000
	ok_kvclient "host B loads them too" \
		vllm-load --dir "$K2" --blocks $((n * rounds)) --size 4096 --buffered --key-base 200000
}

# th_same_bytes N: host A stores N blocks of the same bytes (blocks of a
# padding, say) as vLLM does, a file then its rename: they share one
# object until the lower file system refuses its inode another link
# (GlusterFS: ENOSPC past some 46 in one directory), then each has its
# own.  Every one reads right on host B.  Two test points.
th_same_bytes() {
	local n=$1 i bad=0 d0
	head -c 65536 /dev/urandom >"$T/same" || bail "head failed"
	d0=$(kvt_stat "$K1" dedups)
	mkdir -p "$K1/same" || bail "mkdir failed"
	for ((i = 0; i < n; i++)); do
		cp "$T/same" "$K1/same/b$i.tmp" && mv "$K1/same/b$i.tmp" "$K1/same/b$i" || break
	done
	[ "$i" = "$n" ]
	ok $? "host A stores $n blocks of the same bytes ($i stored, $(kvt_calc 'b - a' a="$d0" b="$(kvt_stat "$K1" dedups)") sharing an object)"
	for ((i = 0; i < n; i++)); do
		cmp -s "$T/same" "$K2/same/b$i" || bad=$((bad + 1))
	done
	[ "$bad" = 0 ]
	ok $? "host B reads every one of them right ($bad wrong or missing)"
}

# th_stop_fsck STORE: both hosts unmount, then kvtierfs-fsck finds STORE
# clean.  Three test points.
th_stop_fsck() {
	local st
	kvt_stop "$K1" "$P1"
	kvt_stop "$K2" "$P2"
	"$KVTIERFS_FSCK" "$1" >"$T/fsck.out" 2>&1
	st=$?
	[ "$st" = 0 ]
	ok $? "kvtierfs-fsck on the shared store: clean (exit $st): $(tail -n 1 "$T/fsck.out")"
	[ "$st" = 0 ] || diag_file "$T/fsck.out" 20
}
