#!/usr/bin/env bash
# scripts/gpu-check-suite.sh's verdict, with a fake ctest in place of the
# real one: a GPU check passes only when every suite ran to its end, exited
# 0, and ran at least one test with none failed or skipped. A failing, killed,
# empty or all-skipped run makes it fail.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
BUILD=$work; LOG=$work/log; SUITE_TIMEOUT=2
failures=0; cases=0

# fake_ctest NAME BODY: a ctest stand-in that runs BODY.
fake_ctest() {
  printf '#!/usr/bin/env bash\n%s\n' "$2" > "$work/$1"
  chmod +x "$work/$1"
}
passed_out='echo "test 1 ... Passed"; echo "100% tests passed, 0 tests failed out of 5"'
fake_ctest pass "$passed_out; exit 0"
fake_ctest fail 'echo "  3 - CudaRunner.X (Failed)"; echo "80% tests passed, 1 tests failed out of 5"; exit 8'
fake_ctest killed "$passed_out; sleep 30"
fake_ctest crash 'echo "100% tests passed, 0 tests failed out of 5"; exit 2'
# CTest 4's line when none failed; one excluded test is passed on as -E.
fake_ctest pass4 'echo "100% tests passed out of 26"; exit 0'
fake_ctest exclude 'if [ "$5" = "-R" ] && [ "$7" = "-E" ] && [ "$8" = "Skips" ]; then echo "100% tests passed out of 2"; exit 0; fi
echo "  1 - Skips (Skipped)"; echo "100% tests passed out of 3"; exit 0'
fake_ctest empty 'echo "No tests were found!!!"; exit 0'
fake_ctest skipped 'for i in 1 2 3; do echo "  $i - CudaKernels.K$i (Skipped)"; done; echo "100% tests passed, 0 tests failed out of 3"; exit 0'

# expect NAME WANT(0 pass, 1 fail) SUITES...: runs the suites with ctest NAME;
# a suite is DIR or DIR:FILTER:EXCLUDE.
expect() {
  local name=$1 want=$2 out got
  shift 2
  out=$(
    CTEST=$work/$name
    # shellcheck source=scripts/gpu-check-suite.sh
    source "$here/scripts/gpu-check-suite.sh"
    for s in "$@"; do IFS=: read -r dir filter exclude <<< "$s"; run_suite "$dir" "$filter" "$exclude"; done
    suite_verdict
  )
  got=$?
  cases=$((cases + 1))
  [ "$got" -ne 0 ] && got=1
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: ctest '$name' gave verdict $got, wanted $want:"
    echo "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: ctest '$name': $(echo "$out" | tail -1)"
  fi
}

expect pass 0 a b
expect fail 1 a
expect killed 1 a
expect crash 1 a
expect empty 1 a
expect skipped 1 a
expect pass4 0 a
expect exclude 0 a:Cuda:Skips
expect exclude 1 a
# One bad suite among good ones fails the check.
fake_ctest mixed "if [ \"\$2\" = \"$work/b\" ]; then exit 8; fi; $passed_out"
expect mixed 1 a b

echo "$((cases - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
