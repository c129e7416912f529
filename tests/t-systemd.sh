#!/bin/bash
# kvtierfs under a running systemd: tests/systemd-inner.sh runs as a
# service in a virtual machine that boots systemd (tests/vm.sh,
# VM_INIT=systemd) over this machine's root, with the build installed
# there by make install, two fstab lines of kvtierfs stores (one of them
# x-systemd.automount), and kvtierfs@atboot enabled, its store a tmpfs
# of the fstab.  Its TAP output is this file's.
# kvt-kind: vm
# kvt-timeout: 900
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vm.sh"

kvt_require_root
kvt_setup
VM_INIT=systemd
vm_setup systemctl journalctl setpriv
vm_install_root
R=$T/vm/root
mkdir -p -m 0700 "$R/var/lib/kvt-boot" "$R/var/lib/kvt-auto" || bail "mkdir failed"
cat >"$R/etc/fstab" <<EOT
# what an operator writes (contrib/fstab.example)
/var/lib/kvt-boot  /mnt/kvt-boot  fuse.kvtierfs  nofail  0  0
/var/lib/kvt-auto  /mnt/kvt-auto  fuse.kvtierfs  x-systemd.automount,nofail  0  0
tmpfs  /srv/kvt-tmpfs  tmpfs  mode=0700  0  0
EOT
# systemctl enable kvtierfs@atboot, for the test's target
mkdir -p "$R/etc/kvtierfs" "$R/etc/systemd/system/kvt-test.target.wants" || bail "mkdir failed"
printf '%s\n' MOUNTPOINT=/mnt/kvt-atboot LOWERDIR=/srv/kvt-tmpfs >"$R/etc/kvtierfs/atboot.conf"
ln -s /lib/systemd/system/kvtierfs@.service \
	"$R/etc/systemd/system/kvt-test.target.wants/kvtierfs@atboot.service" || bail "ln failed"
vm_run "$top_srcdir/tests/systemd-inner.sh"
