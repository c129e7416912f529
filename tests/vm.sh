# shellcheck shell=bash
#
# tests/nfsvm.sh: run a test inside a virtual machine whose kernel has an
# NFS client and server, where this machine's kernel has neither.  Sourced
# after lib.sh (and kvt_setup) by t-nfs.sh:
#
#     nv_setup                     # or bail out saying what is missing
#     nv_run tests/nfs-inner.sh    # its TAP output becomes this file's
#
# The machine is Debian's kernel (linux-image-amd64) under qemu, emulated
# (no KVM here).  Its root is this machine's root, read-only over virtio-9p,
# so the build under test, its libraries and the NFS tools are the same
# files; /run (with TMPDIR, /run/tmp) and /var/lib/nfs are its own tmpfs,
# and $T is shared read-write (the script's output, its exit status).  Nothing is
# downloaded: qemu-system-x86, linux-image-amd64, busybox-static and
# nfs-kernel-server are Debian packages (scripts/install-deps).

: "${KVT_VM_MEM:=3072}"

# The modules the initramfs loads to reach the root over 9p (with what
# they need, from modules.dep); fuse, nfs and nfsd are loaded from the
# root by modprobe.
NV_BOOT_MODULES="virtio_pci 9pnet_virtio 9p"

# nv_setup: the kernel, its modules and the tools, or bail out.
nv_setup() {
	local c
	for c in qemu-system-x86_64 busybox cpio rpc.nfsd rpc.mountd exportfs mount.nfs modprobe; do
		command -v "$c" >/dev/null ||
			bail "$c is missing: apt-get install qemu-system-x86 linux-image-amd64 busybox-static nfs-kernel-server cpio (scripts/install-deps)"
	done
	# busybox must be static: it runs before the root is there.
	NV_BUSYBOX=$(command -v busybox)
	! ldd "$NV_BUSYBOX" >/dev/null 2>&1 ||
		bail "$NV_BUSYBOX is not static: apt-get install busybox-static"
	NV_KERNEL=$(find /boot -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
	[ -n "$NV_KERNEL" ] || bail "no kernel in /boot: apt-get install linux-image-amd64"
	NV_KVER=${NV_KERNEL#/boot/vmlinuz-}
	NV_MODS=/lib/modules/$NV_KVER
	[ -f "$NV_MODS/modules.dep" ] || bail "no modules for $NV_KVER in $NV_MODS"
	[ -r "$NV_KERNEL" ] || bail "$NV_KERNEL is not readable"
	nv_initramfs
}

# nv_module_files NAME...: the files of modules NAME... and of those they
# need, relative to $NV_MODS, each after what it needs.
nv_module_files() {
	local m
	for m in "$@"; do
		awk -v m="$m" -F': *' '
			{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n) }
			n == m { k = split($2, d, " "); for (i = k; i >= 1; i--) print d[i]; print $1; f = 1 }
			END { if (!f) exit 1 }' "$NV_MODS/modules.dep" || bail "module $m is missing from $NV_MODS"
	done | awk '!seen[$0]++'
}

# nv_initramfs: $T/vm/initrd, busybox, the 9p modules and an init that
# mounts this machine's root and hands over to nv_boot's script there.
nv_initramfs() {
	local d=$T/vm/initrd.d m f
	mkdir -p "$d"/{bin,dev,proc,sys,newroot,mods} || bail "mkdir failed"
	cp "$NV_BUSYBOX" "$d/bin/busybox" || bail "cp busybox failed"
	for f in $(nv_module_files $NV_BOOT_MODULES); do
		m=$(basename "${f%%.ko*}")
		case "$f" in
		*.ko) cp "$NV_MODS/$f" "$d/mods/$m.ko" ;;
		*.ko.xz) xz -dc "$NV_MODS/$f" >"$d/mods/$m.ko" ;;
		*.ko.zst) zstd -qdc "$NV_MODS/$f" >"$d/mods/$m.ko" ;;
		*) bail "module $f: unknown compression" ;;
		esac || bail "cannot copy $f"
		echo "$m" >>"$d/mods/order"
	done
	cat >"$d/init" <<-'EOF'
		#!/bin/busybox sh
		# kvt.t= the shared test directory, kvt.run= the script to run in it
		/bin/busybox --install -s /bin
		export PATH=/bin
		mount -t proc proc /proc
		mount -t sysfs sys /sys
		mount -t devtmpfs dev /dev
		for a in $(cat /proc/cmdline); do
			case $a in kvt.t=*) t=${a#kvt.t=} ;; esac
		done
		for m in $(cat /mods/order); do insmod /mods/$m.ko || echo "insmod $m failed"; done
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

# nv_run SCRIPT [ARGS...]: boot the machine, run SCRIPT there as root with
# this file's environment (top_srcdir, top_builddir, KVT_*), its output
# relayed here as it comes; returns its exit status.  The machine powers
# off after it.  One that ran nothing (no kernel, no root) returns 1 after
# showing its console.
nv_run() {
	local out=$T/vm/out rc=$T/vm/rc qp tp st
	: >"$out"
	rm -f "$rc"
	{
		echo '#!/bin/bash'
		echo "# made by tests/nfsvm.sh: runs in the virtual machine"
		printf 'export %s=%q\n' top_srcdir "$top_srcdir" top_builddir "$top_builddir" \
			PATH "$PATH" HOME /run TMPDIR /run/tmp
		local v
		for v in $(compgen -e | grep -E '^(KVT|KVTIERFS|KVCLIENT)'); do
			printf 'export %s=%q\n' "$v" "${!v}"
		done
		echo 'modprobe fuse'
		echo 'ip link set lo up'
		echo 'hostname vm'
		printf '%q ' "$@"
		printf '>%q 2>&1 </dev/null\n' "$out"
		printf 'echo $? >%q\n' "$rc"
		echo 'sync'
		echo 'echo o >/proc/sysrq-trigger'
		echo "sleep 60"
	} >"$T/vm/boot.sh"
	chmod +x "$T/vm/boot.sh"
	qemu-system-x86_64 -machine q35 -cpu max -smp "$(nproc)" -m "$KVT_VM_MEM" \
		-nographic -no-reboot -nodefaults -serial "file:$T/vm/console" \
		-kernel "$NV_KERNEL" -initrd "$T/vm/initrd" \
		-append "console=ttyS0 panic=-1 loglevel=4 kvt.t=$T" \
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
