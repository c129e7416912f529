#!/bin/bash
# The number functions of tests/lib.sh, which every comparison of measured
# numbers in the tests goes through: each refuses an empty or non-numeric
# operand (status 2 and a line saying so), where awk and bash's
# arithmetic take it for 0 and a check would pass on a command that
# printed nothing; and each answers right on real numbers.  No mount.
# kvt-kind: unit
. "$(dirname "$0")/lib.sh"

plan 29
T=$(mktemp -d "${TMPDIR:-/tmp}/kvtierfs-test.XXXXXX") || bail "mktemp failed"
exec {_kvt_out}>&1 {_kvt_err}>&2
trap _kvt_exit EXIT

# run CMD...: runs CMD; its status in $st, its stdout in $out, its stderr
# in $err.
run() {
	"$@" >"$T/out" 2>"$T/err"
	st=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}

# refuses DESC CMD...: CMD refuses its input: status 2, nothing on
# stdout, a line "# ... not a number" (or WHY, when set) on stderr.
refuses() {
	local desc=$1
	shift
	run "$@"
	[ "$st" = 2 ] && [ -z "$out" ] && grep -q "^# .*${WHY:-not a number}" <<<"$err"
	ok $? "$desc: refused (status $st${out:+, printed '$out'})" ||
		diag "command: $*" "stderr: $err"
}

# answers DESC WANT_STATUS WANT_OUT CMD...: CMD exits WANT_STATUS,
# prints WANT_OUT, and says nothing on stderr.
answers() {
	local desc=$1 want_st=$2 want_out=$3
	shift 3
	run "$@"
	[ "$st" = "$want_st" ] && [ "$out" = "$want_out" ] && [ -z "$err" ]
	ok $? "$desc (status $st, printed '$out')" ||
		diag "command: $*" "expected status $want_st, '$want_out'" "stderr: $err"
}

# --- kvt_is_num -----------------------------------------------------------
wrong=()
for v in 0 7 -3 +4 2.5 .5 5. 1e3 1.5E-2 4611686018427387907; do
	kvt_is_num "$v" || wrong+=("'$v' refused")
done
for v in "" " " " 3" "3 " "3 4" abc 12abc 1.2.3 - . e3 inf nan -nan 0x10 "1,5" "\$x"; do
	! kvt_is_num "$v" || wrong+=("'$v' taken")
done
[ ${#wrong[@]} = 0 ]
ok $? "kvt_is_num takes decimal numbers and nothing else${wrong[*]:+ (${wrong[*]})}"

# --- kvt_num_cmp ----------------------------------------------------------
refuses "kvt_num_cmp: an empty left operand" kvt_num_cmp "" -lt 300
refuses "kvt_num_cmp: an empty right operand" kvt_num_cmp 5 -ge ""
refuses "kvt_num_cmp: both empty, for -eq" kvt_num_cmp "" -eq ""
refuses "kvt_num_cmp: both empty, for -ne" kvt_num_cmp "" -ne ""
refuses "kvt_num_cmp: a word" kvt_num_cmp "FIND FAILED: exit status 1" -eq 0
refuses "kvt_num_cmp: a number followed by text" kvt_num_cmp 12abc -gt 3
refuses "kvt_num_cmp: no operands" kvt_num_cmp
WHY="unknown operator" refuses "kvt_num_cmp: an operator it does not know" kvt_num_cmp 1 '<' 2
wrong=()
for c in "2 -lt 3" "3 -le 3" "10 -gt 9" "2.5 -gt 2.25" "-1 -lt 0" "1e3 -eq 1000" \
	"0.10 -eq .1" "3 -ne 4" "4611686018427387904 -gt 1"; do
	# shellcheck disable=SC2086 # the case is split into its three words
	kvt_num_cmp $c 2>>"$T/cmp.err" || wrong+=("'$c' false")
done
for c in "3 -lt 3" "4 -le 3" "9 -gt 10" "2 -ge 2.5" "0 -eq 1" "5 -ne 5.0"; do
	# shellcheck disable=SC2086
	kvt_num_cmp $c 2>>"$T/cmp.err"
	[ $? = 1 ] || wrong+=("'$c' not false")
done
[ ${#wrong[@]} = 0 ] && [ ! -s "$T/cmp.err" ]
ok $? "kvt_num_cmp compares numbers as numbers, true and false (status 1)${wrong[*]:+ (${wrong[*]})}" ||
	diag_file "$T/cmp.err"

# --- kvt_calc -------------------------------------------------------------
refuses "kvt_calc: an empty operand" kvt_calc 'b - a' a="" b=3
refuses "kvt_calc: a word" kvt_calc 'n / 3' n="no count"
refuses "kvt_calc: a division by zero" kvt_calc 'n / d' n=5 d=0
answers "kvt_calc: a difference of times" 0 1.75 kvt_calc 'b - a' a=1733549000.25 b=1733549002
answers "kvt_calc: an integer stays one, past 2^31" 0 12345678901000 kvt_calc 'n * 1000' n=12345678901
answers "kvt_calc: a third" 0 0.333333333 kvt_calc 'a / b' a=1 b=3
answers "kvt_calc: a condition, as bc's scale=0 truncation was used" 0 0 \
	kvt_calc '(x = n1 - n0 - dt * idle) < 0 ? 0 : int(x)' n0=100 n1=101 dt=10 idle=3.3

# --- kvt_ratio_at_most ----------------------------------------------------
refuses "kvt_ratio_at_most: an empty numerator" kvt_ratio_at_most "" 2 1.5
refuses "kvt_ratio_at_most: an empty denominator" kvt_ratio_at_most 3 "" 1.5
refuses "kvt_ratio_at_most: an empty limit" kvt_ratio_at_most 3 2 ""
refuses "kvt_ratio_at_most: a word" kvt_ratio_at_most 3 none 1.5
WHY="no ratio" refuses "kvt_ratio_at_most: a denominator of 0" kvt_ratio_at_most 3 0 1.5
answers "kvt_ratio_at_most: 3 / 2 is at most 1.5" 0 1.50 kvt_ratio_at_most 3 2 1.5
answers "kvt_ratio_at_most: 4 / 2 is not" 1 2.00 kvt_ratio_at_most 4 2 1.5

# --- kvt_within -----------------------------------------------------------
refuses "kvt_within: an empty time limit" kvt_within "" true
answers "kvt_within: a command that succeeds at once" 0 "" kvt_within 5 true
kvt_within 0.3 false
st=$?
[ "$st" = 1 ] && [ "$took" = ">0.3" ]
ok $? "kvt_within: a command that never succeeds fails after the limit (status $st, took $took)"

# --- the test points themselves, and a count of temp files --------------
# in a subshell: the point it prints is not one of this file's
out=$( (ok "" "a test point whose status is empty") )
grep -q '^not ok [0-9]* - a test point whose status is empty$' <<<"$out"
ok $? "ok: an empty status is a failed test point ($out)"
run kvt_count_tmp "$T/no-such-directory"
[ "$st" = 1 ] && [[ $out == "FIND FAILED: "* ]] && ! kvt_is_num "$out"
ok $? "kvt_count_tmp: a directory find cannot read gives no number and status 1 ($out)"
