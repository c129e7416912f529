#!/bin/bash
# The command line: --help exits 0 and lists exactly the options the man
# page documents; every -o option it calls kvtierfs's own is parsed by
# kvtierfs; values at the edges of their ranges mount; allow_other brings
# default_permissions, fsname= names the source; auto_unmount takes the
# mount of a killed daemon away.  (Refused values: t-badinput.sh.)
# kvt-kind: mount
. "$(dirname "$0")/lib.sh"

kvt_require_root
plan 15
kvt_setup

MAN=$top_srcdir/man/kvtierfs.8
H=$T/help

"$KVTIERFS" --help >"$H" 2>"$T/help.err"
rc=$?
[ "$rc" = 0 ] && grep -q '^usage: kvtierfs ' "$H" && [ ! -s "$T/help.err" ]
ok $? "--help: exit 0 ($rc), usage on stdout, nothing on stderr"
diag_file "$T/help.err" 5

"$KVTIERFS" -h >"$T/help.h" 2>&1
rc=$?
[ "$rc" = 0 ] && cmp -s "$H" "$T/help.h"
ok $? "-h: exit 0 ($rc), the same help"

"$KVTIERFS" -o max_threads=0 --help >"$T/help.bad" 2>&1
rc=$?
[ "$rc" = 0 ] && cmp -s "$H" "$T/help.bad"
ok $? "--help after a bad option and without directories: exit 0 ($rc), the help"

v1=$("$KVTIERFS" -V 2>&1)
rc1=$?
v2=$("$KVTIERFS" --version 2>&1)
rc2=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [[ "$v1" == "kvtierfs "* ]] && [ "$v1" = "$v2" ]
ok $? "-V and --version: exit 0, '$v1'"

# help_names: every option --help shows, one a line: "-f", "--foreground",
# "-o", "max_threads" (for "-o max_threads=N").
help_names() {
	awk '$1 == "-o" && $2 ~ /^[a-z]/ { n = $2; sub(/=.*/, "", n); print n; next }
	     $1 ~ /^-/ { n = $1; sub(/,$/, "", n); print n; if ($1 ~ /,$/) print $2 }' "$1" |
		LC_ALL=C sort
}

# man_names: the same from the tags of the man page's OPTIONS section
# (".BR \-f \", \" \-\-foreground", ".BI max_threads= N", ".B ro").
man_names() {
	awk '/^\.SH/ { sec = $2 }
	     sec == "OPTIONS" && tag { print; tag = 0; next }
	     sec == "OPTIONS" && /^\.TP/ { tag = 1 }' "$MAN" |
		sed -e 's/\\-/-/g' -e 's/"//g' -e 's/^\.[A-Z]* *//' |
		awk '$1 ~ /^-/ { for (i = 1; i <= NF; i++) if ($i ~ /^-/) { n = $i; sub(/,$/, "", n); print n }; next }
		     { n = $1; sub(/=.*/, "", n); print n }' |
		LC_ALL=C sort
}

help_names "$H" >"$T/names.help"
man_names >"$T/names.man"
n=$(grep -c '' "$T/names.help")
cmp -s "$T/names.help" "$T/names.man" && [ "$n" -ge 20 ] &&
	grep -qx max_dir_fds "$T/names.help" && grep -qx auto_unmount "$T/names.help"
ok $? "--help and kvtierfs(8) list the same $n options" ||
	diag "$(diff "$T/names.help" "$T/names.man" | sed -n 's/^</only in --help:/p; s/^>/only in the man page:/p')"

# Each option of "kvtierfs mount options:" is kvtierfs's: a value no
# option takes ("/x/") is refused with one line naming it, before libfuse
# sees it.
own=$(sed -n '/^kvtierfs mount options:/,/^$/p' "$H" | help_names /dev/stdin)
bad=()
for name in $own; do
	timeout -k 5 10 "$KVTIERFS" -f -o "$name=/x/" "$LOWER" "$MNT" \
		</dev/null >/dev/null 2>"$T/err"
	rc=$?
	if kvt_is_mounted "$MNT"; then
		fusermount3 -u -z "$MNT"
		bad+=("$name: mounted")
	elif [ "$rc" != 1 ] || [ "$(grep -c '' "$T/err")" != 1 ] ||
		! grep -q "^kvtierfs: -o $name: expects " "$T/err"; then
		bad+=("$name: exit $rc, stderr: $(head -c 300 "$T/err")")
	fi
done
[ ${#bad[@]} = 0 ] && [ "$(echo "$own" | wc -w)" -ge 12 ]
ok $? "each of the $(echo "$own" | wc -w) kvtierfs -o options refuses '/x/' itself, naming it"
[ ${#bad[@]} = 0 ] || diag "${bad[@]}"

# mount_opts: the super block options of the mount at $MNT;
# mount_source: its source.
mount_opts() {
	awk -v p="$MNT" '$5 == p { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 3); exit } }' \
		/proc/self/mountinfo
}
mount_source() {
	awk -v p="$MNT" '$5 == p { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 2); exit } }' \
		/proc/self/mountinfo
}

kvt_mount entry_timeout=0.25 attr_timeout=86400 negative_timeout=0 \
	max_threads=1024 max_idle_threads=0 max_inodes=64 verify_cache=16 \
	max_dir_fds=1048576 verify=always uring=0 tmp_suffix=.part \
	allow_other fsname=kvt-options
opts=$(mount_opts)
src=$(mount_source)
[ "$(kvt_fstype "$MNT")" = fuse.kvtierfs ] && [ "$src" = kvt-options ] &&
	[[ ",$opts," == *,default_permissions,* ]] && [[ ",$opts," == *,allow_other,* ]] &&
	[[ ",$opts," == *,max_read=1032192,* ]]
ok $? "fuse.kvtierfs from kvt-options ($src), with allow_other and default_permissions ($opts)"

kvt_run sh -c 'printf "kept\n" >"$1/f.part" && mv "$1/f.part" "$1/f" && [ "$(cat "$1/f")" = kept ]' sh "$MNT"
ok $? "a file written as f.part and renamed to f reads back"
kvt_umount

kvt_mount
opts=$(mount_opts)
src=$(mount_source)
[ "$src" = "$(readlink -f "$LOWER")" ] && [[ ",$opts," != *,default_permissions,* ]] &&
	[[ ",$opts," == *,max_read=1032192,* ]]
ok $? "by default: the store's path as the source ($src), no default_permissions ($opts)"
kvt_umount

# auto_unmount: libfuse mounts through fusermount3, which stays and
# unmounts once the daemon is gone.
kvt_mount auto_unmount
pid=$KVT_PID
{ kill -KILL "$pid"; wait "$pid"; } 2>/dev/null
unset "KVT_DAEMONS[$pid]"
KVT_PID=
for i in $(seq 100); do
	kvt_is_mounted "$MNT" || break
	sleep 0.1
done
! kvt_is_mounted "$MNT"
ok $? "auto_unmount: the mount of the killed daemon $pid is gone within ${i}00 ms" ||
	fusermount3 -u -z "$MNT"
