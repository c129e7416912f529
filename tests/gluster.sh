# shellcheck shell=bash
#
# tests/gluster.sh: a GlusterFS volume on loopback, mounted twice, as two
# hosts sharing one store.  Sourced after lib.sh (and kvt_setup) by the
# t-gluster*.sh tests:
#
#     gl_setup             # glusterd, volume, mounts $GL1 and $GL2
#     gl_two_hosts         # kvtierfs on each: $K1 (host A), $K2 (host B)
#
# $GL_BRICK is the brick's directory: what a server disk holds, where a
# test damages objects behind both hosts' backs.  Everything goes at exit
# (kvt_cleanup runs gl_cleanup after unmounting the kvtierfs mounts): the
# client mounts, the volume, the brick process and glusterd.
#
# glusterd refuses 127.0.0.1 and localhost in a brick's address, so it
# listens on 127.0.0.2; a brick on the root file system needs "force".
# The performance translators are off and the client mounts keep no
# entry, attribute or negative cache, so that what one mount changes the
# other sees at once, as two hosts of a coherent shared file system.

GL_ADDR=127.0.0.2
GL_VOL=kvt
GL_CLI=(gluster --mode=script --glusterd-sock=/var/run/glusterd.socket)

# gl_setup: bring the rig up or bail out saying why.
gl_setup() {
	local i
	command -v glusterd >/dev/null && command -v gluster >/dev/null ||
		bail "glusterd is missing: apt-get install glusterfs-server glusterfs-client (scripts/install-deps)"
	if pgrep -x glusterd >/dev/null; then
		bail "a glusterd already runs on this machine; the rig needs its own"
	fi
	GL_DIR=$T/gluster
	GL_BRICK=$GL_DIR/brick
	GL1=$T/g1
	GL2=$T/g2
	mkdir -p "$GL_DIR/wd" "$GL_DIR/run" "$GL_DIR/log" "$GL_BRICK" "$GL1" "$GL2" ||
		bail "mkdir failed"
	cat >"$GL_DIR/glusterd.vol" <<-EOF
		volume management
		    type mgmt/glusterd
		    option working-directory $GL_DIR/wd
		    option transport-type socket
		    option transport.socket.bind-address $GL_ADDR
		    option transport.socket.listen-port 24007
		    option ping-timeout 0
		    option event-threads 1
		    option max-port 60999
		end-volume
	EOF
	KVT_CLEANUP_HOOKS+=(gl_cleanup)
	glusterd -N -f "$GL_DIR/glusterd.vol" -p "$GL_DIR/run/glusterd.pid" \
		-l "$GL_DIR/log/glusterd.log" --log-level=WARNING </dev/null >/dev/null 2>&1 &
	GL_PID=$!
	# glusterd has no ready signal: its command socket answers once it
	# serves (about a second).
	for ((i = 0; i < 300; i++)); do
		"${GL_CLI[@]}" volume list >/dev/null 2>&1 && break
		kill -0 "$GL_PID" 2>/dev/null || bail "glusterd exited: $(tail -n 5 "$GL_DIR/log/glusterd.log")"
		sleep 0.05
	done
	"${GL_CLI[@]}" volume create "$GL_VOL" "$GL_ADDR:$GL_BRICK" force >"$GL_DIR/cli.log" 2>&1 ||
		bail "gluster volume create failed: $(cat "$GL_DIR/cli.log")"
	for o in quick-read stat-prefetch open-behind write-behind io-cache read-ahead \
		readdir-ahead nl-cache; do
		"${GL_CLI[@]}" volume set "$GL_VOL" "performance.$o" off >>"$GL_DIR/cli.log" 2>&1 ||
			bail "gluster volume set performance.$o off failed: $(tail -n 3 "$GL_DIR/cli.log")"
	done
	"${GL_CLI[@]}" volume start "$GL_VOL" >>"$GL_DIR/cli.log" 2>&1 ||
		bail "gluster volume start failed: $(tail -n 3 "$GL_DIR/cli.log")"
	for m in "$GL1" "$GL2"; do
		mount -t glusterfs -o attribute-timeout=0,entry-timeout=0,negative-timeout=0 \
			"$GL_ADDR:/$GL_VOL" "$m" >>"$GL_DIR/cli.log" 2>&1 ||
			bail "mount -t glusterfs on $m failed: $(tail -n 3 "$GL_DIR/cli.log")"
		[ "$(kvt_fstype "$m")" = fuse.glusterfs ] || bail "$m is not a glusterfs mount"
	done
}

# gl_two_hosts [OPTION...]: a store on the volume and a kvtierfs mount on
# each host, $K1 (pid $P1) over $GL1 and $K2 (pid $P2) over $GL2.
gl_two_hosts() {
	kvt_two_hosts "$GL1/store" "$GL2/store" "$@"
}

# gl_procs: the brick and client processes of this rig (their command
# lines name its directories).
gl_procs() {
	pgrep -f "glusterfs.*($GL_DIR|$GL1|$GL2)"
}

# gl_cleanup: every part of the rig, whatever state it is in.
gl_cleanup() {
	local m p i
	for m in "$GL1" "$GL2"; do
		[ -n "$m" ] && kvt_is_mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	if [ -n "${GL_PID:-}" ] && kill -0 "$GL_PID" 2>/dev/null; then
		timeout 20 "${GL_CLI[@]}" volume stop "$GL_VOL" force >/dev/null 2>&1
	fi
	for p in $(gl_procs) ${GL_PID:-}; do
		kill "$p" 2>/dev/null
	done
	for ((i = 0; i < 100; i++)); do
		[ -z "$(gl_procs)" ] && ! kill -0 "${GL_PID:-0}" 2>/dev/null && break
		sleep 0.05
	done
	for p in $(gl_procs) ${GL_PID:-}; do
		kill -KILL "$p" 2>/dev/null
	done
	[ -n "${GL_PID:-}" ] && wait "$GL_PID" 2>/dev/null
	GL_PID=
}

# gl_brick_path REL: the path on the brick of REL (relative to the volume).
gl_brick_path() {
	echo "$GL_BRICK/$1"
}
