# shellcheck shell=bash
# Sourced by scripts/gpu-check.sh (and by tests/scripts/gpu_check_suite_test.sh):
# runs ctest suites and gives the verdict on them. A check passes only when
# every suite's ctest ran to its end and exited 0, no test failed or was
# skipped (on a GPU machine every device test must run), and at least one
# test ran. Needs BUILD and LOG; CTEST (default ctest) and SUITE_TIMEOUT (s,
# default 300) may be set.

suite_passed=0; suite_failed=0; suite_skipped=0; suite_errors=0; suite_failures=""

# run_suite DIR [FILTER [EXCLUDE]]: ctest in $BUILD/DIR, -R FILTER and -E
# EXCLUDE when given (EXCLUDE: tests that skip by design where a device is
# usable).
run_suite() {
  local out rc total fail skip
  out=$(timeout "${SUITE_TIMEOUT:-300}" "${CTEST:-ctest}" --test-dir "$BUILD/$1" -j1 --output-on-failure \
          ${2:+-R "$2"} ${3:+-E "$3"} 2>&1)
  rc=$?
  echo "$out" >> "$LOG"
  # CTest 3 prints "100% tests passed, 0 tests failed out of 26"; CTest 4
  # "100% tests passed out of 26" when none failed.
  total=$(echo "$out" | sed -n 's/.*% tests passed.* out of \([0-9]*\).*/\1/p' | tail -1)
  fail=$(echo "$out" | sed -n 's/.*% tests passed, \([0-9]*\) tests failed out of.*/\1/p' | tail -1)
  skip=$(echo "$out" | grep -c '(Skipped)')
  total=${total:-0}; fail=${fail:-0}
  suite_passed=$((suite_passed + total - fail - skip))
  suite_failed=$((suite_failed + fail))
  suite_skipped=$((suite_skipped + skip))
  suite_failures+=$(echo "$out" | grep -E '\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run' | sed 's/^/  /')
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    suite_errors=$((suite_errors + 1))
    suite_failures+=$'\n'"  $1: ctest was killed after ${SUITE_TIMEOUT:-300} s (its counts are incomplete)"
  elif [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
    suite_errors=$((suite_errors + 1))
    suite_failures+=$'\n'"  $1: ctest exited $rc without a failed test"
  elif [ "$total" -eq 0 ]; then
    suite_errors=$((suite_errors + 1))
    suite_failures+=$'\n'"  $1: ctest ran no test"
  fi
}

# suite_verdict: prints how many tests ran and what failed; returns 0 only
# when the checks all passed.
suite_verdict() {
  echo "gpu-check: $suite_passed device and host tests ran and passed, $suite_failed failed, $suite_skipped skipped"
  [ -n "$suite_failures" ] && echo "${suite_failures#$'\n'}"
  if [ "$suite_skipped" -gt 0 ]; then
    echo "gpu-check: FAILED: $suite_skipped device tests skipped (no usable device?); every one must run"
  fi
  if [ "$suite_passed" -eq 0 ]; then
    echo "gpu-check: FAILED: no test ran"
  fi
  [ "$suite_failed" -eq 0 ] && [ "$suite_skipped" -eq 0 ] && [ "$suite_errors" -eq 0 ] && [ "$suite_passed" -gt 0 ]
}
