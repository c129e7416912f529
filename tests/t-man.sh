#!/bin/bash
# The man pages: every installed command has one, mandoc -T lint and
# groff -ww find nothing to say about any of them, and the options that
# kvtierfs-fsck, kvtierfs-bench and kvtierfs-stat list in --help are the ones their man
# pages document (kvtierfs's own: t-options.sh).
# kvt-kind: unit
. "$(dirname "$0")/lib.sh"

plan 8
T=$(mktemp -d "${TMPDIR:-/tmp}/kvtierfs-test.XXXXXX") || bail "mktemp failed"
trap 'rm -rf "$T"' EXIT
command -v mandoc >/dev/null || bail "mandoc is missing (scripts/install-deps)"
command -v groff >/dev/null || bail "groff is missing (scripts/install-deps)"

MANS=("$top_srcdir"/man/*.[1-8])

# Every program make install puts in bin_PROGRAMS has its page.
progs=$(awk '/^(bin_PROGRAMS|mounthelper_SCRIPTS) *=/ { on = 1 }
	on { print; if (!/\\$/) on = 0 }' "$top_srcdir/Makefile.am" |
	tr ' \\' '\n\n' | sed -n 's|^src/||p; s|^contrib/||p')
missing=()
for p in $progs; do
	ls "$top_srcdir"/man/"$p".[1-8] >/dev/null 2>&1 || missing+=("$p")
done
[ -n "$progs" ] && [ ${#missing[@]} = 0 ]
ok $? "each installed command has a man page: $(echo $progs)" ||
	diag "without one: ${missing[*]}"

mandoc -T lint -W style "${MANS[@]}" >"$T/mandoc" 2>&1
[ ! -s "$T/mandoc" ]
ok $? "mandoc -T lint -W style: nothing on ${#MANS[@]} pages"
diag_file "$T/mandoc" 20

for m in "${MANS[@]}"; do
	groff -ww -z -man -Tutf8 "$m" 2>&1 | sed "s|^|$(basename "$m"): |"
done >"$T/groff"
[ ! -s "$T/groff" ]
ok $? "groff -ww: no warning on ${#MANS[@]} pages"
diag_file "$T/groff" 20

# help_longs: the long options of --help's option lines; man_longs: those
# in the OPTIONS section of a man page.
help_longs() {
	grep -E '^ +-' | grep -oE -- '--[a-z][a-z-]*' | sort -u
}
man_longs() {
	sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$1" | grep '^\.' | sed 's/\\//g' |
		grep -oE -- '--[a-z][a-z-]*' | sort -u
}
same_options() {
	local prog=$1 man=$2
	"$top_builddir/src/$prog" --help | help_longs >"$T/$prog.help"
	man_longs "$man" >"$T/$prog.man"
	if cmp -s "$T/$prog.help" "$T/$prog.man" && [ -s "$T/$prog.help" ]; then
		ok 0 "$prog: --help and $(basename "$man") list the same $(grep -c '' "$T/$prog.help") options"
	else
		ok 1 "$prog: --help and $(basename "$man") list the same options"
		diff "$T/$prog.help" "$T/$prog.man" |
			sed -n 's/^</# only in --help:/p; s/^>/# only in the man page:/p'
	fi
}
same_options kvtierfs-fsck "$top_srcdir/man/kvtierfs-fsck.8"
same_options kvtierfs-bench "$top_srcdir/man/kvtierfs-bench.1"
same_options kvtierfs-stat "$top_srcdir/man/kvtierfs-stat.1"

v=$("$top_builddir/src/kvtierfs-bench" --version)
[[ "$v" == "kvtierfs-bench "[0-9]* ]]
ok $? "kvtierfs-bench --version: '$v'"
grep -q '^  kvtierfs-fsck \[OPTION…\] LOWERDIR$' <(LANG=C.UTF-8 "$top_builddir/src/kvtierfs-fsck" --help)
ok $? "kvtierfs-fsck --help in a UTF-8 locale: [OPTION…]"
