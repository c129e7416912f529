#!/bin/bash
# What a store and a load through kvtierfs cost the NFS server, against
# the same work on NFS used directly: the server's own count of the
# requests it served (/proc/net/rpc/nfsd: COMPOUNDs, each one round trip
# from a client, and the operations in them), less what the idle mounts
# send meanwhile.  64 blocks of 256 KiB in vLLM's fan-out, one at a time,
# stored through host A, every cache dropped, loaded through host B; the
# rig of tests/nfs.sh (NFS 4.2, lookupcache=none,actimeo=0, as the README
# asks).  Counts, not times: they mean the same in the emulated machine
# of t-nfs-cost.sh as on real hosts.  The bounds are the figures measured
# here with some room.
# kvt-timeout: 900
: "${KVT_CMD_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nfs.sh"

kvt_require_root
plan 11
kvt_setup
BENCH=$top_builddir/src/kvtierfs-bench
[ -x "$BENCH" ] || bail "kvtierfs-bench is not built: $BENCH"

nf_setup
# No reclamation pass meanwhile (one every 60 s by default): it lists
# every objects/<ab> of the store, whatever the mounts are doing.
kvt_two_hosts "$NF1/store" "$NF2/store" reclaim_interval=86400

# nfsd_counts: "COMPOUNDS OPS" the server has served since it started;
# nothing when the server shows no such count.
nfsd_counts() {
	awk '$1 == "proc4" { c = $4; nc++ }
	     $1 == "proc4ops" { for (i = 3; i <= NF; i++) o += $i; no++ }
	     END { if (nc && no) print c, o }' /proc/net/rpc/nfsd
}

# nfsd_ops: the count of each NFS 4 operation the server has served, one
# "NAME COUNT" a line (RFC 8881's numbers; 4.2's from RFC 7862, 8276).
NFS4_OPS=(- - - ACCESS CLOSE COMMIT CREATE DELEGPURGE DELEGRETURN GETATTR GETFH LINK LOCK
	LOCKT LOCKU LOOKUP LOOKUPP NVERIFY OPEN OPENATTR OPEN_CONFIRM OPEN_DOWNGRADE PUTFH
	PUTPUBFH PUTROOTFH READ READDIR READLINK REMOVE RENAME RENEW RESTOREFH SAVEFH SECINFO
	SETATTR SETCLIENTID SETCLIENTID_CONFIRM VERIFY WRITE RELEASE_LOCKOWNER BACKCHANNEL_CTL
	BIND_CONN_TO_SESSION EXCHANGE_ID CREATE_SESSION DESTROY_SESSION FREE_STATEID
	GET_DIR_DELEGATION GETDEVICEINFO GETDEVICELIST LAYOUTCOMMIT LAYOUTGET LAYOUTRETURN
	SECINFO_NO_NAME SEQUENCE SET_SSV TEST_STATEID WANT_DELEGATION DESTROY_CLIENTID
	RECLAIM_COMPLETE ALLOCATE COPY COPY_NOTIFY DEALLOCATE IO_ADVISE LAYOUTERROR LAYOUTSTATS
	OFFLOAD_CANCEL OFFLOAD_STATUS READ_PLUS SEEK WRITE_SAME CLONE GETXATTR SETXATTR
	LISTXATTRS REMOVEXATTR)
nfsd_ops() {
	awk -v names="${NFS4_OPS[*]}" '$1 == "proc4ops" {
		n = split(names, name, " ")
		for (i = 3; i <= NF; i++)
			print (i - 2 <= n ? name[i - 2] : "op" (i - 3)), $i
	}' /proc/net/rpc/nfsd
}

# server_cost LABEL CMD...: runs CMD, then sets RPCS and OPS to the
# requests and operations the server served meanwhile, less what the
# idle mounts send in that time (IDLE_RPCS and IDLE_OPS per second),
# and DT to the seconds it took; RPCS and OPS are empty when the server
# showed no count.
IDLE_RPCS=0 IDLE_OPS=0
server_cost() {
	local label=$1 t0 t1 c0 o0 c1 o1
	shift
	read -r c0 o0 < <(nfsd_counts)
	nfsd_ops >"$T/ops.before"
	t0=$(date +%s.%N)
	"$@" >>"$T/bench.log" 2>&1 || { RPCS= OPS=; return 1; }
	t1=$(date +%s.%N)
	read -r c1 o1 < <(nfsd_counts)
	DT=$(kvt_calc 'b - a' a="$t0" b="$t1")
	# less the idle share, truncated and never below 0, as bc's scale=0 did
	RPCS=$(kvt_calc '(x = n1 - n0 - dt * idle) < 0 ? 0 : int(x)' \
		n0="$c0" n1="$c1" dt="$DT" idle="$IDLE_RPCS")
	OPS=$(kvt_calc '(x = n1 - n0 - dt * idle) < 0 ? 0 : int(x)' \
		n0="$o0" n1="$o1" dt="$DT" idle="$IDLE_OPS")
	diag "$label: ${RPCS:-?} requests, ${OPS:-?} operations (${DT:-?} s; raw $(kvt_calc 'b - a' a="$c0" b="$c1") and $(kvt_calc 'b - a' a="$o0" b="$o1"): $(
		nfsd_ops | paste -d ' ' "$T/ops.before" - | awk '$4 > $2 { printf "%s=%d ", $1, $4 - $2 }')"
}

# Idle, each mount looks at the other's staging every second; measured
# after the caches are dropped, as the loads are.
kvt_drop_caches
server_cost "idle" sleep 10
IDLE_RPCS=$(kvt_calc 'r / dt' r="$RPCS" dt="$DT")
IDLE_OPS=$(kvt_calc 'r / dt' r="$OPS" dt="$DT")
r=$(kvt_calc 'int(r * 10 + 0.5) / 10' r="$IDLE_RPCS")
kvt_num_cmp "$IDLE_RPCS" -le 40
ok $? "the idle mounts send the server $r requests a second (each looks at the other's staging every second; at most 40)"

BLOCKS=(--blocks 64 --threads 1 --block-size 262144 --quiet)
mkdir "$NF1/plain"
server_cost "plain store" "$BENCH" --dir "$NF1/plain" "${BLOCKS[@]}" --phases store
ok $? "64 blocks stored on NFS directly"
PLAIN_STORE=$RPCS PLAIN_STORE_OPS=$OPS
server_cost "kvtierfs store" "$BENCH" --dir "$K1" "${BLOCKS[@]}" --phases store
ok $? "the same 64 blocks stored through kvtierfs on host A"
r=$(kvt_ratio_at_most "$RPCS" "$PLAIN_STORE" 1.5)
ok $? "a store costs the server $r times the requests of a plain one (at most 1.5; operations: $(kvt_ratio_at_most "$OPS" "$PLAIN_STORE_OPS" 1000)): $RPCS against $PLAIN_STORE"

kvt_drop_caches
server_cost "plain load" "$BENCH" --dir "$NF2/plain" "${BLOCKS[@]}" --phases load --check
ok $? "64 blocks loaded from NFS directly, checked"
PLAIN_LOAD=$RPCS PLAIN_LOAD_OPS=$OPS
server_cost "kvtierfs load" "$BENCH" --dir "$K2" "${BLOCKS[@]}" --phases load --check
ok $? "the same 64 blocks loaded through kvtierfs on host B, checked"
r=$(kvt_ratio_at_most "$RPCS" "$PLAIN_LOAD" 4.0)
ok $? "a first load costs the server $r times the requests of a plain one (at most 4.0; operations: $(kvt_ratio_at_most "$OPS" "$PLAIN_LOAD_OPS" 1000)): $RPCS against $PLAIN_LOAD"
kvt_stop "$K1" "$P1"
kvt_stop "$K2" "$P2"
