// Where the tests find ../shared/models (CONVEYOR_SHARED_MODELS, set by
// tests/CMakeLists.txt for every test).
#pragma once

#include <string>
#include <string_view>

namespace conveyor::test {

// The path of `name` in ../shared/models, whether it is there or not.
// (Appended rather than `std::string(CONVEYOR_SHARED_MODELS) + "/" + name`,
// on which GCC 12 warns of a bounds error that is not there.)
inline std::string shared_model_path(std::string_view name) {
  std::string path = CONVEYOR_SHARED_MODELS;
  path += '/';
  path += name;
  return path;
}

}  // namespace conveyor::test
