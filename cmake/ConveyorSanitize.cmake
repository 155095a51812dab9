# CONVEYOR_SANITIZE: sanitizers for the whole build, as -fsanitize= takes them.
#
#   -DCONVEYOR_SANITIZE=address,undefined   AddressSanitizer + UBSan (UB aborts)
#   -DCONVEYOR_SANITIZE=thread              ThreadSanitizer
#   (empty, the default)                    none
#
# Every target of the build is compiled and linked with them, at -O1 (whatever
# CMAKE_BUILD_TYPE says; the later flag wins): the sanitizers' advice for
# readable stack traces, and the quickest compile that keeps tests fast
# enough. Line tables only (-gline-tables-only / -g1) give file:line in
# reports at little compile cost. Prebuilt libraries (CAF, libgomp, OpenBLAS)
# are not instrumented: tests/sanitizers/tsan.supp says what that costs ThreadSanitizer.
# Works with gcc and clang; tools/bootstrap.sh uses clang (its libFuzzer build
# is the ASan build).
set(CONVEYOR_SANITIZE "" CACHE STRING "Sanitizers for every target (-fsanitize=...): address,undefined or thread; empty for none")

if(CONVEYOR_SANITIZE)
  string(REPLACE "," ";" _conveyor_sanitizers "${CONVEYOR_SANITIZE}")
  if("thread" IN_LIST _conveyor_sanitizers AND "address" IN_LIST _conveyor_sanitizers)
    message(FATAL_ERROR "CONVEYOR_SANITIZE: thread and address cannot be combined (two build directories)")
  endif()
  set(_conveyor_sanitize_flags -fsanitize=${CONVEYOR_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _conveyor_sanitizers)
    # A report is a test failure, not a line in a log nobody reads.
    list(APPEND _conveyor_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(_conveyor_sanitize_compile -gline-tables-only)
    # At -O1 Clang leaves some `omp simd` loops scalar (the kernels', the
    # samplers') and warns for each (-Wpass-failed, 90 lines a CI run); their
    # speed counts in the release build, not here.
    list(APPEND _conveyor_sanitize_compile -Wno-pass-failed)
  else()
    set(_conveyor_sanitize_compile -g1)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_conveyor_sanitize_flags};-O1;${_conveyor_sanitize_compile}>")
  add_link_options(${_conveyor_sanitize_flags})
  message(STATUS "Sanitizers: ${CONVEYOR_SANITIZE} (-O1)")
endif()
