# shellcheck shell=bash
#
# tests/cephfs.sh: a throwaway single-node Ceph cluster (one monitor, one
# OSD on a sparse file, one metadata server) with a CephFS, mounted twice
# by ceph-fuse as two hosts sharing one store.  Sourced after lib.sh (and
# kvt_setup) by t-cephfs.sh:
#
#     cf_setup             # the cluster, mounts $CF1 and $CF2
#     kvt_two_hosts "$CF1/store" "$CF2/store"   # $K1 and $K2 (lib.sh)
#
# cf_object_get / cf_object_put reach a file's bytes in the data pool
# (RADOS), behind both clients' backs: what a server disk holds, where a
# test damages objects without the metadata server hearing of it.
# Everything goes at exit (kvt_cleanup runs cf_cleanup after unmounting
# the kvtierfs mounts): the client mounts and every daemon.
#
# No authentication, one replica, no manager (CephFS serves without one);
# the clients keep no object cache (client_oc off), so that a read asks
# the OSD, as a host whose cache has let go of the bytes does.  The
# daemons listen on $CF_ADDR (127.0.0.1 unless set) on ports of their own.
#
# CF_FUSE=0 before cf_setup: the cluster only, no ceph-fuse mounts (the
# kernel's client mounts it elsewhere: t-cephfs-kernel.sh).

CF_POOL=cephfs_data
: "${CF_ADDR:=127.0.0.1}"
: "${CF_FUSE:=1}"

# cf_ceph ARGS...: the ceph command line tool on this cluster.
cf_ceph() {
	timeout 60 ceph -c "$CF_CONF" "$@"
}

# cf_wait DESC SECONDS CMD...: until CMD succeeds (the daemons have no
# ready signal of their own: their state is asked of the monitor).
cf_wait() {
	local desc=$1 end=$((SECONDS + $2))
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || bail "Ceph: no $desc after $2 s (logs in $CF_DIR/log)"
		sleep 0.2
	done
}

# cf_setup: bring the cluster up or bail out saying why.
cf_setup() {
	local fsid uuid id m
	for c in ceph ceph-mon ceph-osd ceph-mds ceph-fuse monmaptool ceph-authtool rados; do
		command -v "$c" >/dev/null ||
			bail "$c is missing: apt-get install ceph-mon ceph-osd ceph-mds ceph-fuse (scripts/install-deps)"
	done
	CF_DIR=$T/ceph
	CF_CONF=$CF_DIR/ceph.conf
	CF1=$T/c1
	CF2=$T/c2
	mkdir -p "$CF_DIR"/{log,run,mon.a,osd.0,mds.a} "$CF1" "$CF2" || bail "mkdir failed"
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$CF_CONF" <<-EOF
		[global]
		fsid = $fsid
		mon_host = [v2:$CF_ADDR:13300,v1:$CF_ADDR:16789]
		public_addr = $CF_ADDR
		ms_bind_ipv6 = false
		ms_bind_port_min = 17000
		ms_bind_port_max = 17300
		auth_cluster_required = none
		auth_service_required = none
		auth_client_required = none
		run_dir = $CF_DIR/run
		admin_socket = $CF_DIR/run/\$name.asok
		pid_file = $CF_DIR/run/\$name.pid
		log_file = $CF_DIR/log/\$name.log
		keyring = $CF_DIR/keyring
		crash_dir = $CF_DIR/crash
		log_to_stderr = false
		err_to_stderr = false
		osd_pool_default_size = 1
		osd_pool_default_min_size = 1
		osd_pool_default_pg_num = 8
		osd_pool_default_pgp_num = 8
		osd_pool_default_pg_autoscale_mode = off
		osd_crush_chooseleaf_type = 0
		mon_allow_pool_size_one = true
		mon_warn_on_pool_no_redundancy = false
		mgr_initial_modules =
		[mon]
		mon_data = $CF_DIR/mon.\$id
		mon_initial_members = a
		[osd]
		osd_data = $CF_DIR/osd.\$id
		osd_objectstore = bluestore
		bluestore_block_create = true
		bluestore_block_size = 4294967296
		bluestore_fsck_on_mkfs = false
		bluestore_fsck_on_mount = false
		osd_memory_target = 1073741824
		[mds]
		mds_data = $CF_DIR/mds.\$id
		[client]
		client_oc = false
		client_mount_timeout = 60
	EOF
	KVT_CLEANUP_HOOKS+=(cf_cleanup)
	ceph-authtool --create-keyring "$CF_DIR/keyring" --gen-key -n mon. \
		--cap mon 'allow *' >"$CF_DIR/log/setup.out" 2>&1 &&
		monmaptool --create --fsid "$fsid" --addv a "[v2:$CF_ADDR:13300,v1:$CF_ADDR:16789]" \
			--set-min-mon-release pacific --enable-all-features "$CF_DIR/monmap" \
			>>"$CF_DIR/log/setup.out" 2>&1 &&
		ceph-mon -c "$CF_CONF" -i a --mkfs --monmap "$CF_DIR/monmap" \
			--keyring "$CF_DIR/keyring" >>"$CF_DIR/log/setup.out" 2>&1 &&
		ceph-mon -c "$CF_CONF" -i a >>"$CF_DIR/log/setup.out" 2>&1 ||
		bail "ceph-mon did not start: $(tail -n 3 "$CF_DIR/log/setup.out")"
	cf_wait "monitor quorum" 60 cf_ceph quorum_status
	uuid=$(cat /proc/sys/kernel/random/uuid)
	id=$(cf_ceph osd new "$uuid" 2>>"$CF_DIR/log/setup.out")
	[ "$id" = 0 ] || bail "ceph osd new: '$id'"
	ceph-osd -c "$CF_CONF" -i 0 --mkfs --osd-uuid "$uuid" --no-mon-config \
		>>"$CF_DIR/log/setup.out" 2>&1 &&
		ceph-osd -c "$CF_CONF" -i 0 >>"$CF_DIR/log/setup.out" 2>&1 ||
		bail "ceph-osd did not start: $(tail -n 3 "$CF_DIR/log/setup.out")"
	cf_wait "OSD up" 120 sh -c "timeout 10 ceph -c '$CF_CONF' osd dump | grep -q '^osd.0 up *in'"
	cf_ceph osd pool create cephfs_metadata 8 8 replicated >>"$CF_DIR/log/setup.out" 2>&1 &&
		cf_ceph osd pool create "$CF_POOL" 8 8 replicated >>"$CF_DIR/log/setup.out" 2>&1 &&
		cf_ceph fs new cephfs cephfs_metadata "$CF_POOL" >>"$CF_DIR/log/setup.out" 2>&1 &&
		ceph-mds -c "$CF_CONF" -i a >>"$CF_DIR/log/setup.out" 2>&1 ||
		bail "CephFS not made: $(tail -n 3 "$CF_DIR/log/setup.out")"
	cf_wait "active metadata server" 120 sh -c "timeout 10 ceph -c '$CF_CONF' mds stat | grep -q 'up:active'"
	[ "$CF_FUSE" = 1 ] || return 0
	for m in 1 2; do
		# ceph-fuse daemonizes once it has mounted.
		ceph-fuse -c "$CF_CONF" -n "client.h$m" --client_fs=cephfs "$T/c$m" \
			>>"$CF_DIR/log/setup.out" 2>&1 ||
			bail "ceph-fuse on $T/c$m failed: $(tail -n 3 "$CF_DIR/log/setup.out")"
		[ "$(kvt_fstype "$T/c$m")" = fuse.ceph-fuse ] || bail "$T/c$m is not a ceph-fuse mount"
	done
}

# cf_procs: the daemons and clients of this cluster (their command lines
# name its configuration).
cf_procs() {
	pgrep -f "^ceph-(mon|osd|mds|fuse) .*$CF_CONF"
}

# cf_cleanup: every part of the cluster, whatever state it is in.  Clients
# first, then the servers: a daemon waits long for a monitor already gone.
cf_cleanup() {
	local m p i kind
	[ -n "${CF_CONF:-}" ] || return 0
	for m in "$CF1" "$CF2"; do
		kvt_is_mounted "$m" && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
	done
	for kind in fuse mds osd mon; do
		for p in $(pgrep -f "^ceph-$kind .*$CF_CONF"); do
			kill "$p" 2>/dev/null
		done
		for ((i = 0; i < 40; i++)); do
			[ -z "$(pgrep -f "^ceph-$kind .*$CF_CONF")" ] && break
			sleep 0.05
		done
		for p in $(pgrep -f "^ceph-$kind .*$CF_CONF"); do
			kill -KILL "$p" 2>/dev/null
		done
	done
	for ((i = 0; i < 100; i++)); do
		[ -z "$(cf_procs)" ] && break
		sleep 0.05
	done
}

# cf_object_get FILE OUT: the first (up to 4 MiB) data object of FILE, a
# path on either client mount, read from the OSD into OUT.
cf_object_get() {
	rados -c "$CF_CONF" -p "$CF_POOL" get "$(printf '%x.00000000' "$(stat -c %i "$1")")" "$2"
}

# cf_object_put FILE IN: writes IN as that object, as a server disk might
# change it: the metadata server hears nothing, the size and times the
# clients show stay as they were.
cf_object_put() {
	rados -c "$CF_CONF" -p "$CF_POOL" put "$(printf '%x.00000000' "$(stat -c %i "$1")")" "$2"
}
