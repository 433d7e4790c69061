# The libFuzzer targets and their seed folders, for .ci/fuzz.sh (the short CI
# run) and fuzz/long_run.sh (the long one). Sourced, not run.

# Every target in fuzz/fuzz_targets/.
FUZZ_TARGETS="regex_compile gbnf_compile lark_compile schema_compile stag_compile regex_matcher"

# seeds_of TARGET: the target's seed folder, relative to fuzz/ (a front end's
# targets share its seeds: regex_compile reads seeds/regex).
seeds_of() {
    case "$1" in
        regex_matcher) echo "seeds/regex_matcher" ;;
        *) echo "seeds/${1%%_*}" ;;
    esac
}
