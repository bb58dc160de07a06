# Shared by the command-line tests (sourced): a scratch folder, `expect` and `finish`.
starfa=${STARFA:-./starfa}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/starfa-cli-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# expect CODE PATTERN -- ARGS...: runs starfa ARGS, checks the exit code and that the
# combined output matches the extended regular expression PATTERN.
expect() {
	code=$1 pattern=$2
	shift 3
	out=$("$starfa" "$@" 2>&1)
	rc=$?
	if [ "$rc" != "$code" ]; then
		fail "starfa $* exited $rc, expected $code; output:
$out"
	elif ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
		fail "starfa $*: output does not match /$pattern/:
$out"
	else
		echo "ok: starfa $*"
	fi
}

# The exit status of a test script: 1 after any failure.
finish() {
	[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
	exit 0
}
