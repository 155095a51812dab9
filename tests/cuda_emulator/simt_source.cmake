# cmake -DIN=kernel.cu -DOUT=kernel.cpp -P simt_source.cmake: IN for the host
# compiler, each launch `k<<<grid, block, shared, stream>>>(args)` written as
# `launch_named(k, "k", grid, block, shared, stream)(args)` (simt.hpp).
# `#line` keeps the compiler's messages pointing into IN.
file(READ "${IN}" text)
string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_]*(<[^<>;]*>)?)<<<([^>;]*)>>>"
  "::conveyor::cuda_emulator::simt::launch_named(\\1, \"\\1\", \\3)" text "${text}")
if(text MATCHES "<<<|>>>")
  message(FATAL_ERROR "${IN}: a launch simt_source.cmake cannot rewrite")
endif()
file(WRITE "${OUT}.new" "#line 1 \"${IN}\"\n${text}")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
