# shellcheck shell=bash
#
# tests/vm.sh: run a test inside a virtual machine whose kernel has what
# this machine's lacks (NFS client and server, the CephFS client).
# Sourced after lib.sh (and kvt_setup) by t-nfs.sh and t-cephfs-kernel.sh:
#
#     vm_setup [CMD...]            # or bail out saying what is missing
#     vm_tap                       # if it must reach a server running here
#     vm_run tests/nfs-inner.sh    # its TAP output becomes this file's
#
# With VM_INIT=systemd set before vm_setup, the machine boots systemd
# instead: its root is this machine's root under an overlay (the writes go
# to memory), what the test put in $T/vm/root is copied over it before
# systemd starts (the build's make install DESTDIR=, an fstab, units), and
# systemd starts kvt-test.target: basic.target and the unit that runs the
# script (vm_run), not this machine's own services.
#
# The machine is Debian's kernel (linux-image-amd64) under qemu, emulated
# (no KVM here).  Its root is this machine's root, read-only over virtio-9p,
# so the build under test, its libraries and the tools are the same files;
# /run (with TMPDIR, /run/tmp) and /var/lib/nfs are its own tmpfs, and $T
# is shared read-write (the script's output, its exit status).  Nothing is
# downloaded: qemu-system-x86, linux-image-amd64, busybox-static and the
# tools are Debian packages (scripts/install-deps).

: "${KVT_VM_MEM:=3072}"

# The modules the initramfs loads to reach the root over 9p (with what
# they need, from modules.dep); the others (fuse, nfs, nfsd, ceph,
# virtio_net) are loaded from the root by modprobe.
VM_BOOT_MODULES="virtio_pci 9pnet_virtio 9p"
: "${VM_INIT:=script}"

# vm_setup [CMD...]: the kernel, its modules and the tools (and the
# commands CMD... the test runs in the machine), or bail out.
vm_setup() {
	local c
	for c in qemu-system-x86_64 busybox cpio modprobe ip "$@"; do
		command -v "$c" >/dev/null ||
			bail "$c is missing: apt-get install qemu-system-x86 linux-image-amd64 busybox-static cpio iproute2 (and what the test uses, scripts/install-deps)"
	done
	# busybox must be static: it runs before the root is there.
	VM_BUSYBOX=$(command -v busybox)
	! ldd "$VM_BUSYBOX" >/dev/null 2>&1 ||
		bail "$VM_BUSYBOX is not static: apt-get install busybox-static"
	VM_KERNEL=$(find /boot -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
	[ -n "$VM_KERNEL" ] || bail "no kernel in /boot: apt-get install linux-image-amd64"
	VM_KVER=${VM_KERNEL#/boot/vmlinuz-}
	VM_MODS=/lib/modules/$VM_KVER
	[ -f "$VM_MODS/modules.dep" ] || bail "no modules for $VM_KVER in $VM_MODS"
	[ -r "$VM_KERNEL" ] || bail "$VM_KERNEL is not readable"
	case $VM_INIT in
	script) ;;
	systemd) vm_systemd_root ;;
	*) bail "VM_INIT=$VM_INIT: script or systemd" ;;
	esac
	vm_initramfs
}

# vm_systemd_root: $T/vm/root, what goes over the machine's root: the
# target and the unit that run vm_run's script under systemd.
vm_systemd_root() {
	local u=$T/vm/root/etc/systemd/system
	[ -x /lib/systemd/systemd ] || bail "no /lib/systemd/systemd: apt-get install systemd"
	mkdir -p "$u" || bail "mkdir failed"
	cat >"$u/kvt-test.target" <<-EOF
		[Unit]
		Description=kvtierfs: the test in this machine
		Requires=basic.target
		After=basic.target
		Wants=kvt-test.service
		AllowIsolate=yes
	EOF
	cat >"$u/kvt-test.service" <<-EOF
		[Unit]
		Description=kvtierfs: the test script
		After=basic.target local-fs.target
		[Service]
		Type=oneshot
		ExecStart=/bin/bash $T/vm/boot.sh
	EOF
	# /tmp as it is here (the build and the tests may be there): not
	# emptied at boot
	mkdir -p "$T/vm/root/etc/tmpfiles.d"
	echo "d /tmp 1777 root root -" >"$T/vm/root/etc/tmpfiles.d/tmp.conf"
}

# vm_install_root: make install of the build into $T/vm/root, what the
# machine's root gets.  A directory this machine has as a link (merged
# /usr: /sbin -> usr/sbin) goes where the link points, as dpkg would put
# it, since copying it over the link would fail.
vm_install_root() {
	local r=$T/vm/root d to
	make -C "$top_builddir" install DESTDIR="$r" >"$T/vm/install.log" 2>&1 ||
		{ diag_file "$T/vm/install.log" 20; bail "make install DESTDIR=$r failed"; }
	for d in bin sbin lib lib64; do
		[ -L "/$d" ] && [ -d "$r/$d" ] && [ ! -L "$r/$d" ] || continue
		to=$(readlink "/$d")
		mkdir -p "$r/$to" && cp -a "$r/$d/." "$r/$to/" && rm -rf "${r:?}/$d" ||
			bail "cannot move $r/$d to $r/$to"
	done
}

# vm_tap: the machine gets a network card on a tap device of this
# machine's, $VM_HOST_ADDR here and $VM_GUEST_ADDR there, so that it
# reaches servers running here (a Ceph cluster bound to $VM_HOST_ADDR).
# The network is the first of the documentation and benchmarking ranges
# (RFC 5737, RFC 2544) that this machine does not use already.  The device
# goes at exit.
vm_tap() {
	local net
	for net in 198.51.100 203.0.113 198.18.0 198.19.0; do
		ip -4 route show | grep -q "^$net\." || break
		net=
	done
	[ -n "$net" ] || bail "no free network for the virtual machine's card"
	VM_TAP=kvt$$
	VM_HOST_ADDR=$net.1
	VM_GUEST_ADDR=$net.2
	ip tuntap add dev "$VM_TAP" mode tap >/dev/null 2>&1 ||
		bail "cannot make a tap device (ip tuntap add: /dev/net/tun, iproute2)"
	KVT_CLEANUP_HOOKS+=(vm_tap_cleanup)
	ip addr add "$VM_HOST_ADDR/24" dev "$VM_TAP" && ip link set "$VM_TAP" up ||
		bail "cannot give $VM_TAP the address $VM_HOST_ADDR"
}

vm_tap_cleanup() {
	[ -z "${VM_TAP:-}" ] || ip link del "$VM_TAP" 2>/dev/null
}

# vm_module_files NAME...: the files of modules NAME... and of those they
# need, relative to $VM_MODS, each after what it needs.
vm_module_files() {
	local m
	for m in "$@"; do
		awk -v m="$m" -F': *' '
			{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n) }
			n == m { k = split($2, d, " "); for (i = k; i >= 1; i--) print d[i]; print $1; f = 1 }
			END { if (!f) exit 1 }' "$VM_MODS/modules.dep" || bail "module $m is missing from $VM_MODS"
	done | awk '!seen[$0]++'
}

# vm_initramfs: $T/vm/initrd, busybox, the 9p modules and an init that
# mounts this machine's root and hands over to vm_boot's script there.
vm_initramfs() {
	local d=$T/vm/initrd.d m f
	mkdir -p "$d"/{bin,dev,proc,sys,newroot,mods} || bail "mkdir failed"
	cp "$VM_BUSYBOX" "$d/bin/busybox" || bail "cp busybox failed"
	local mods=$VM_BOOT_MODULES
	[ "$VM_INIT" = script ] || mods+=" overlay"
	for f in $(vm_module_files $mods); do
		m=$(basename "${f%%.ko*}")
		case "$f" in
		*.ko) cp "$VM_MODS/$f" "$d/mods/$m.ko" ;;
		*.ko.xz) xz -dc "$VM_MODS/$f" >"$d/mods/$m.ko" ;;
		*.ko.zst) zstd -qdc "$VM_MODS/$f" >"$d/mods/$m.ko" ;;
		*) bail "module $f: unknown compression" ;;
		esac || bail "cannot copy $f"
		echo "$m" >>"$d/mods/order"
	done
	cat >"$d/init" <<-'EOF'
		#!/bin/busybox sh
		# kvt.t= the shared test directory, kvt.init= script or systemd
		/bin/busybox --install -s /bin
		export PATH=/bin
		mount -t proc proc /proc
		mount -t sysfs sys /sys
		mount -t devtmpfs dev /dev
		init=script
		for a in $(cat /proc/cmdline); do
			case $a in kvt.t=*) t=${a#kvt.t=} ;; kvt.init=*) init=${a#kvt.init=} ;; esac
		done
		for m in $(cat /mods/order); do insmod /mods/$m.ko || echo "insmod $m failed"; done
		if [ "$init" = systemd ]; then
			# systemd writes where it likes: the root read-only
			# underneath, the writes in memory above it
			mkdir -p /lower /rw
			mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 root /lower ||
				{ echo "kvt-vm: no root over 9p"; poweroff -f; }
			mount -t tmpfs -o mode=0755 rw /rw
			mkdir -p /rw/upper /rw/work
			mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work root /newroot ||
				{ echo "kvt-vm: no overlay over the root"; poweroff -f; }
			mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 t /newroot$t ||
				{ echo "kvt-vm: no test directory over 9p"; poweroff -f; }
			cp -a /newroot$t/vm/root/. /newroot/ ||
				{ echo "kvt-vm: cannot copy $t/vm/root"; poweroff -f; }
			# this machine may be a container: the virtual one is
			# not (systemd would ignore the kernel's command line)
			rm -f /newroot/.dockerenv /newroot/run/.containerenv
			mount --move /proc /newroot/proc
			mount --move /sys /newroot/sys
			mount --move /dev /newroot/dev
			exec switch_root /newroot /lib/systemd/systemd
		fi
		mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 root /newroot ||
			{ echo "kvt-vm: no root over 9p"; poweroff -f; }
		# what is written there; the test's directory, read-write, at
		# its own path (the build may be anywhere else, /tmp included)
		for m in run var/lib/nfs; do
			mount -t tmpfs -o mode=0755 tmpfs /newroot/$m
		done
		mkdir -m 1777 /newroot/run/tmp
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 t /newroot$t ||
			{ echo "kvt-vm: no test directory over 9p"; poweroff -f; }
		mount --move /proc /newroot/proc
		mount --move /sys /newroot/sys
		mount --move /dev /newroot/dev
		# what udev would make
		ln -s /proc/self/fd /newroot/dev/fd
		ln -s fd/0 /newroot/dev/stdin; ln -s fd/1 /newroot/dev/stdout; ln -s fd/2 /newroot/dev/stderr
		mkdir -p /newroot/dev/shm /newroot/dev/pts
		mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
		mount -t devpts devpts /newroot/dev/pts
		exec switch_root /newroot /bin/bash $t/vm/boot.sh
	EOF
	chmod +x "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet | gzip -1 >"$T/vm/initrd") ||
		bail "cannot make the initramfs"
}

# systemd's arguments: the test's target; the console quiet but for
# what fails.
vm_systemd_args() {
	[ "$VM_INIT" = systemd ] || return 0
	printf ' systemd.unit=kvt-test.target systemd.show_status=error'
}

# vm_run SCRIPT [ARGS...]: boot the machine, run SCRIPT there as root with
# this file's environment (top_srcdir, top_builddir, KVT_*), its output
# relayed here as it comes; returns its exit status.  The machine powers
# off after it.  One that ran nothing (no kernel, no root) returns 1 after
# showing its console.
vm_run() {
	local out=$T/vm/out rc=$T/vm/rc qp tp st
	: >"$out"
	rm -f "$rc"
	{
		echo '#!/bin/bash'
		echo "# made by tests/vm.sh: runs in the virtual machine"
		printf 'export %s=%q\n' top_srcdir "$top_srcdir" top_builddir "$top_builddir" \
			PATH "$PATH" HOME /run TMPDIR /run/tmp
		local v
		for v in $(compgen -e | grep -E '^(KVT|KVTIERFS|KVCLIENT)'); do
			printf 'export %s=%q\n' "$v" "${!v}"
		done
		echo 'mkdir -p -m 1777 /run/tmp'
		echo 'modprobe fuse'
		echo 'ip link set lo up'
		if [ -n "${VM_TAP:-}" ]; then
			echo 'modprobe virtio_net'
			printf 'ip addr add %q/24 dev eth0\n' "$VM_GUEST_ADDR"
			echo 'ip link set eth0 up'
		fi
		echo 'hostname vm'
		printf '%q ' "$@"
		printf '>%q 2>&1 </dev/null\n' "$out"
		printf 'echo $? >%q\n' "$rc"
		echo 'sync'
		echo 'echo o >/proc/sysrq-trigger'
		echo "sleep 60"
	} >"$T/vm/boot.sh"
	chmod +x "$T/vm/boot.sh"
	local net=()
	[ -z "${VM_TAP:-}" ] ||
		net=(-netdev "tap,id=n0,ifname=$VM_TAP,script=no,downscript=no"
			-device virtio-net-pci,netdev=n0)
	qemu-system-x86_64 -machine q35 -cpu max -smp "$(nproc)" -m "$KVT_VM_MEM" "${net[@]}" \
		-nographic -no-reboot -nodefaults -serial "file:$T/vm/console" \
		-kernel "$VM_KERNEL" -initrd "$T/vm/initrd" \
		-append "console=ttyS0 panic=-1 loglevel=4 kvt.t=$T kvt.init=$VM_INIT$(vm_systemd_args)" \
		-virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$T,mount_tag=t,security_model=none,multidevs=remap" \
		>"$T/vm/qemu.log" 2>&1 &
	qp=$!
	kvt_bg "$qp"
	tail -n +1 -f --pid="$qp" "$out" &
	tp=$!
	wait "$qp"
	st=$?
	wait "$tp"
	if [ ! -s "$rc" ]; then
		diag "qemu exited $st; the machine's console:"
		diag_file "$T/vm/console" 40
		diag_file "$T/vm/qemu.log" 10
		return 1
	fi
	return "$(cat "$rc")"
}
