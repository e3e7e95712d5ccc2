# tests/lib/cases.sh: what the shell tests share, sourced by each (not run): cases that print PASS /
# FAIL lines like tests/lib/test.h, and the text they tokenize, made here so that no case needs a
# file from elsewhere.
#   begin NAME; check WHAT COMMAND...; ...; end     a case fails at its first failing check
#   exit $((failures > 0))                          at the end of the script

failures=0
case_name=
case_failed=0
begin() { case_name=$1; case_failed=0; }
check() {  # check <what> <command...>: fails the case when the command fails
    local what=$1; shift
    if ! "$@" >/dev/null 2>&1; then
        [ "$case_failed" = 0 ] && echo "FAIL $case_name: $what" || echo "    also: $what"
        case_failed=1
    fi
}
end() {
    if [ "$case_failed" = 0 ]; then echo "PASS $case_name"; else failures=$((failures + 1)); fi
}
has() { grep -q -- "$2" "$1"; }
not() { ! "$@"; }

# Paragraphs of four lines of nine words each, from a fixed list, drawn from the seed.
make_text() {  # make_text <path> <paragraphs> <seed>
    awk -v n="$2" -v s="$3" 'BEGIN { srand(s); split("the of and to in a is that for it as was with be by on not he this are or his from", w)
        for (p = 0; p < n; p++) { for (l = 0; l < 4; l++) { line = ""
            for (k = 0; k < 9; k++) line = line w[int(rand() * 22) + 1] " "; print line }
            print "" } }' > "$1"
}
