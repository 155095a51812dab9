// The donor of tests/test_pch.hpp's precompiled header (tests/CMakeLists.txt).
