// Precompiled for every test executable (tests/CMakeLists.txt,
// conveyor_discover_tests): GoogleTest and the standard headers most tests
// include, parsed once a build instead of once a file. A test still includes
// what it uses; this only saves the parsing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>
