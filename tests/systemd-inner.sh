#!/bin/bash
# kvtierfs under a running systemd, as an operator meets it: the unit
# kvtierfs@.service started, restarted, killed and stopped, its logs in
# the journal, configurations it must refuse, and the fstab lines of
# t-systemd.sh mounted at boot.  It runs as a service in the virtual
# machine of t-systemd.sh (tests/vm.sh, VM_INIT=systemd), after make
# install; run by itself it needs a machine booted that way.
# kvt-timeout: 900
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 38
kvt_setup
command -v systemctl >/dev/null && [ -d /run/systemd/system ] ||
	bail "systemd is not running here: run t-systemd.sh"
# Emulated: a command hangs only after 10 minutes.
: "${KVT_CMD_TIMEOUT:=600}"

# conf NAME LINE...: /etc/kvtierfs/NAME.conf, of kvtierfs@NAME.
conf() {
	local name=$1
	shift
	mkdir -p /etc/kvtierfs
	printf '%s\n' "$@" >"/etc/kvtierfs/$name.conf"
}

# journal_of UNIT: its lines of this boot, the messages alone.
journal_of() {
	journalctl -b -u "$1" -o cat --no-pager 2>/dev/null
}

# journal_has UNIT ERE: a line of UNIT's journal matches ERE (read as
# grep's file: grep -q leaves early, and pipefail would count
# journalctl's SIGPIPE).
journal_has() {
	grep -Eq "$2" <(journal_of "$1")
}

# in_journal UNIT ERE: journal_has, within 10 s: the journal takes a
# moment.
in_journal() {
	kvt_within 10 journal_has "$1" "$2"
}

# show_journal UNIT: its last lines as diagnostics.
show_journal() {
	journal_of "$1" >"$T/journal.out"
	diag_file "$T/journal.out" 12
}

main_pid() {
	systemctl show -p MainPID --value "$1"
}

fuse_at() {
	grep -q " $1 fuse.kvtierfs " /proc/mounts
}

is_state() {
	[ "$(systemctl show -p ActiveState --value "$2")" = "$1" ]
}

# --- no configuration: the defaults -----------------------------------
systemctl start kvtierfs@plain
st=$?
fuse_at /mnt/kvtierfs/plain && [ "$(stat -c %a /var/lib/kvtierfs/plain)" = 700 ] &&
	[ -f /var/lib/kvtierfs/plain/kvtierfs-store ]
ok $? "kvtierfs@plain, no configuration: exit $st, the store /var/lib/kvtierfs/plain (0700) on /mnt/kvtierfs/plain"
systemctl stop kvtierfs@plain

# --- start: active once mounted, and the mount line ------------------
UNIT=kvtierfs@served.service
SMNT=/mnt/kvt-served
STORE=/var/lib/kvt-served
conf served "MOUNTPOINT=$SMNT" "LOWERDIR=$STORE" "KVTIERFS_OPTS=-o allow_other,max_size=1G"
mkdir -p -m 0700 "$STORE"
t0=$SECONDS
systemctl enable --now "$UNIT" 2>/dev/null
st=$?
# Type=notify: start returns once the daemon said READY=1, which it says
# once mounted; a unit that never notifies makes start time out instead
fuse_at "$SMNT" && is_state active "$UNIT" &&
	echo started >"$SMNT/first.bin" && [ "$(cat "$SMNT/first.bin")" = started ]
ok $? "systemctl enable --now $UNIT: exit $st after $((SECONDS - t0)) s, active, the mount serves at once" ||
	{ show_journal "$UNIT"; bail "the unit did not start"; }
pid=$(main_pid "$UNIT")
in_journal "$UNIT" "^(kvtierfs: )?mounted $STORE on $SMNT, pid $pid \(.*max_size=1073741824.*allow_other"
ok $? "journalctl -u: the mount line, the store, the mount point, the options" ||
	show_journal "$UNIT"

# another account on the allow_other mount: the daemon's capabilities
# (CapabilityBoundingSet=) let it give a directory to its user
mkdir "$SMNT/u" && chown 65534:65534 "$SMNT/u" &&
	setpriv --reuid 65534 --regid 65534 --clear-groups bash -c \
		"echo mine >$SMNT/u/.m.tmp && mv $SMNT/u/.m.tmp $SMNT/u/m.bin && [ \"\$(cat $SMNT/u/m.bin)\" = mine ]" &&
	[ "$(stat -c %u "$SMNT/u/m.bin")" = 65534 ]
ok $? "allow_other: a directory given to uid 65534, who stores and loads a block there, his"

# --- blocks, and a purge in the journal -------------------------------
for i in 1 2 3; do
	head -c $((300000 + i)) /dev/urandom >"$T/b$i"
	cp "$T/b$i" "$SMNT/.b$i.tmp" && mv "$SMNT/.b$i.tmp" "$SMNT/b$i.bin"
done
cmp -s "$T/b1" "$SMNT/b1.bin" && cmp -s "$T/b3" "$SMNT/b3.bin"
ok $? "blocks stored (temp file + rename) read back"

printf 'a block to tear\n' >"$SMNT/torn.bin"
obj=$(kvt_xattr "$SMNT/torn.bin" user.kvtierfs.object)
truncate -s 3 "$STORE/$obj"
! cat "$SMNT/torn.bin" >/dev/null 2>&1 && ! [ -e "$SMNT/torn.bin" ]
ok $? "a torn block: EIO, then gone"
in_journal "$UNIT" "^(kvtierfs: )?(warning: )?purged torn\.bin: "
ok $? "journalctl -u: the purge line"
journalctl -b -u "$UNIT" -p warning -o cat --no-pager | grep -q "purged torn\.bin"
ok $? "the purge line's priority is warning (journalctl -p warning)"

# --- restart keeps the blocks -----------------------------------------
systemctl restart "$UNIT"
st=$?
[ "$st" = 0 ] && is_state active "$UNIT" && [ "$(main_pid "$UNIT")" != "$pid" ] &&
	cmp -s "$T/b1" "$SMNT/b1.bin" && cmp -s "$T/b2" "$SMNT/b2.bin" && cmp -s "$T/b3" "$SMNT/b3.bin"
ok $? "systemctl restart: exit $st, a new daemon, every block kept"
in_journal "$UNIT" "^(kvtierfs: )?unmounted $SMNT$"
ok $? "journalctl -u: the unmount line of the restart"

# --- kill -9: Restart=on-failure brings the mount back ---------------
pid=$(main_pid "$UNIT")
kill -9 "$pid"
new_daemon() {
	local p
	p=$(main_pid "$UNIT")
	[ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != "$pid" ] && is_state active "$UNIT" && fuse_at "$SMNT"
}
kvt_within 60 new_daemon
ok $? "kill -9 of the daemon: the unit restarts it, mounted again ($took s)"
[ "$(systemctl show -p NRestarts --value "$UNIT")" = 1 ] &&
	cmp -s "$T/b1" "$SMNT/b1.bin" && cmp -s "$T/b2" "$SMNT/b2.bin" && cmp -s "$T/b3" "$SMNT/b3.bin" &&
	echo after >"$SMNT/after.bin" && [ "$(cat "$SMNT/after.bin")" = after ]
ok $? "after the restart: NRestarts 1, every block read back, a store works"
[ "$(grep -c " $SMNT " /proc/mounts)" = 1 ]
ok $? "one mount on $SMNT, not the dead one under the new"

# --- stop: unmounted, exit 0 -------------------------------------------
# a client still holds a block open, as a server would
exec {held}<"$SMNT/b1.bin" || bail "cannot open a block"
systemctl stop "$UNIT"
st=$?
[ "$st" = 0 ] && ! grep -q " $SMNT " /proc/mounts && is_state inactive "$UNIT"
ok $? "systemctl stop with a block held open: exit $st, unmounted, inactive"
exec {held}<&-
[ "$(systemctl show -p ExecMainStatus --value "$UNIT")" = 0 ] &&
	[ "$(systemctl show -p Result --value "$UNIT")" = success ]
ok $? "the daemon exited 0 (ExecMainStatus $(systemctl show -p ExecMainStatus --value "$UNIT"), Result $(systemctl show -p Result --value "$UNIT"))"
in_journal "$UNIT" "^(kvtierfs: )?stopping on SIGTERM$" && in_journal "$UNIT" "^(kvtierfs: )?unmounted $SMNT$"
ok $? "journalctl -u: the stopping line and the unmount line"
"${KVTIERFS_FSCK:-kvtierfs-fsck}" "$STORE" >"$T/fsck.out" 2>&1
st=$?
ok $st "kvtierfs-fsck of the store after the kill and the stop: clean (exit $st)" ||
	diag_file "$T/fsck.out" 10

# --- configurations the unit must refuse -------------------------------
# refused NAME WHAT ERE: kvtierfs@NAME fails to start, is failed, and
# the journal and systemctl status say why (ERE).
refused() {
	local name=$1 what=$2 re=$3 unit=kvtierfs@$1.service st mnt=/mnt/kvt-$1
	systemctl start "$unit" 2>/dev/null
	st=$?
	[ "$st" != 0 ] && kvt_within 30 is_state failed "$unit" &&
		[ "$(systemctl show -p NRestarts --value "$unit")" = 0 ]
	ok $? "$what: systemctl start fails (exit $st), the unit is failed, not started again"
	in_journal "$unit" "$re"
	ok $? "$what: the reason in the journal" || show_journal "$unit"
	systemctl status --no-pager -n 20 "$unit" >"$T/status.out" 2>&1
	grep -q "failed" "$T/status.out" && grep -Eq "$re" "$T/status.out"
	ok $? "$what: systemctl status shows it failed, and why" || diag_file "$T/status.out" 20
	! fuse_at "$mnt"
	ok $? "$what: nothing mounted"
}

conf nostore "MOUNTPOINT=/mnt/kvt-nostore" "LOWERDIR=/var/lib/kvt-not-there/store"
refused nostore "a LOWERDIR that does not exist" "/var/lib/kvt-not-there/store"
! [ -e /var/lib/kvt-not-there ]
ok $? "a LOWERDIR that does not exist: not made (the root disk is no store)"

conf badopt "MOUNTPOINT=/mnt/kvt-badopt" "LOWERDIR=$STORE" "KVTIERFS_OPTS=-o max_size=lots"
refused badopt "a bad option" "max_size"

mkdir -p -m 0700 /var/lib/kvt-otherformat "$T/fmt"
kvtierfs /var/lib/kvt-otherformat "$T/fmt" && fusermount3 -u "$T/fmt" &&
	echo "kvtierfs-store 99" >/var/lib/kvt-otherformat/kvtierfs-store ||
	bail "cannot make a store of another format"
conf format "MOUNTPOINT=/mnt/kvt-format" "LOWERDIR=/var/lib/kvt-otherformat"
refused format "a store of another format" "store format 99"

# --- enabled: started at boot, its store on a file system of fstab ---
kvt_within 60 is_state active kvtierfs@atboot.service && fuse_at /mnt/kvt-atboot &&
	[ "$(stat -f -c %T /srv/kvt-tmpfs)" = tmpfs ] && [ -f /srv/kvt-tmpfs/kvtierfs-store ]
ok $? "kvtierfs@atboot, enabled: active at boot, its store on the tmpfs fstab mounts first" ||
	show_journal kvtierfs@atboot

# --- fstab: mounted at boot through the mount helper -------------------
fuse_at /mnt/kvt-boot && is_state active mnt-kvt\\x2dboot.mount &&
	echo boot >/mnt/kvt-boot/b.bin && [ "$(cat /mnt/kvt-boot/b.bin)" = boot ]
ok $? "an fstab line (fuse.kvtierfs): mounted at boot, by mnt-kvt\\x2dboot.mount, serving" ||
	show_journal mnt-kvt\\x2dboot.mount
helper_logged() {
	grep -q "kvtierfs\[[0-9]*\]: mounted /var/lib/kvt-boot on /mnt/kvt-boot" \
		<(journalctl -b -t kvtierfs -o short --no-pager)
}
kvt_within 10 helper_logged
ok $? "the daemon the helper started logs to the journal (its mount line)"
umount /mnt/kvt-boot
st=$?
gone_boot() { ! fuse_at /mnt/kvt-boot && ! pgrep -f "kvtierfs .*/var/lib/kvt-boot" >/dev/null; }
[ "$st" = 0 ] && kvt_within 30 gone_boot
ok $? "umount: exit $st, unmounted, the daemon gone"

grep -q " /mnt/kvt-auto autofs " /proc/mounts && ! fuse_at /mnt/kvt-auto
ok $? "x-systemd.automount: an automount point at boot, nothing mounted yet"
ls /mnt/kvt-auto >/dev/null && fuse_at /mnt/kvt-auto && is_state active mnt-kvt\\x2dauto.mount &&
	echo auto >/mnt/kvt-auto/a.bin && [ "$(cat /mnt/kvt-auto/a.bin)" = auto ]
ok $? "x-systemd.automount: the first access mounts it, serving"
umount /mnt/kvt-auto
st=$?
[ "$st" = 0 ] && kvt_within 30 eval '! fuse_at /mnt/kvt-auto'
ok $? "umount of the automounted store: exit $st, unmounted"

# --- what the daemons said: no sanitizer report, no warning unasked ---
journalctl -b -o cat --no-pager >"$T/boot.journal"
! grep -Eq 'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:' "$T/boot.journal" &&
	! journalctl -b -t kvtierfs -p warning -o cat --no-pager | grep -v '^purged torn\.bin: ' | grep -q .
ok $? "the journal of the boot: no sanitizer report, no warning of a daemon but the purge" ||
	{ grep -E 'Sanitizer|runtime error:' "$T/boot.journal" | head -n 5 | sed 's/^/#   /'
	  journalctl -b -t kvtierfs -p warning -o cat --no-pager | head -n 5 | sed 's/^/#   /'; }
