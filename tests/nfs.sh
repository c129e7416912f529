# shellcheck shell=bash
#
# tests/nfs.sh: an NFS server (the kernel's nfsd) exporting a directory,
# mounted twice as two hosts.  Sourced after lib.sh (and kvt_setup) by
# nfs-inner.sh, in the virtual machine of t-nfs.sh (tests/vm.sh): this
# machine's kernel has no NFS.
#
#     nf_setup             # the export $NF_EXPORT, mounted on $NF1 and $NF2
#     kvt_two_hosts "$NF1/store" "$NF2/store"   # $K1 and $K2 (lib.sh)
#
# NFS 4.2, as a server would serve it.  The two client mounts reach the
# server by two addresses (127.0.0.1 and 127.0.0.2), so that they are two
# clients of it, not one superblock shared, and each is made under a host
# name of its own, which NFS 4.1 and later give the server as the client's
# identity: two hosts, as the server sees them.  The export is the
# server's NFS 4 root (fsid=0): the root of this machine is not one it
# can export, so no path leads to it from there.  Mount options:
# $KVT_NFS_OPTS (default: the README's, lookupcache=none,actimeo=0).
# The server's grace period (when it refuses new opens after it starts)
# is the shortest it takes, 10 s.  Everything goes at exit (kvt_cleanup
# runs nf_cleanup after unmounting the kvtierfs mounts).

: "${KVT_NFS_OPTS:=lookupcache=none,actimeo=0}"

# nf_setup: the server and both client mounts, or bail out saying why.
nf_setup() {
	local c
	for c in rpc.nfsd rpc.mountd exportfs mount.nfs modprobe; do
		command -v "$c" >/dev/null ||
			bail "$c is missing: apt-get install nfs-kernel-server (scripts/install-deps)"
	done
	modprobe nfsd && modprobe nfsv4 || bail "no NFS modules in this kernel ($(uname -r))"
	NF_EXPORT=$T/export
	NF1=$T/n1
	NF2=$T/n2
	mkdir -p "$NF_EXPORT" "$NF1" "$NF2" /var/lib/nfs/v4recovery &&
		touch /var/lib/nfs/etab /var/lib/nfs/rmtab /var/lib/nfs/xtab || bail "mkdir failed"
	KVT_CLEANUP_HOOKS+=(nf_cleanup)
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || bail "cannot mount nfsd"
	echo 10 >/proc/fs/nfsd/nfsv4leasetime && echo 10 >/proc/fs/nfsd/nfsv4gracetime ||
		bail "cannot set the server's lease and grace times"
	exportfs -o rw,sync,no_root_squash,no_subtree_check,fsid=0 "*:$NF_EXPORT" ||
		bail "exportfs failed"
	rpc.mountd -N 2 -N 3 --no-udp >"$T/mountd.log" 2>&1 || bail "rpc.mountd failed: $(cat "$T/mountd.log")"
	rpc.nfsd -N 3 --no-udp 8 >"$T/nfsd.log" 2>&1 || bail "rpc.nfsd failed: $(cat "$T/nfsd.log")"
	nf_mount hosta 127.0.0.1 "$NF1"
	nf_mount hostb 127.0.0.2 "$NF2"
}

# nf_mount HOSTNAME ADDRESS DIR: the export mounted on DIR as a client
# named HOSTNAME.
nf_mount() {
	unshare -u sh -c 'hostname "$1" && exec mount -t nfs4 -o "vers=4.2,$2" "$3:/" "$4"' \
		- "$1" "$KVT_NFS_OPTS" "$2" "$3" >"$T/mount-$1.log" 2>&1 ||
		bail "mount of $2:$NF_EXPORT as $1 failed: $(cat "$T/mount-$1.log")"
}

# nf_cleanup: both client mounts and the server, whatever state they are in.
nf_cleanup() {
	local m
	for m in "$NF1" "$NF2"; do
		mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	rpc.nfsd 0 2>/dev/null
	exportfs -ua 2>/dev/null
	pkill -x rpc.mountd 2>/dev/null
}
