// Timing helpers shared by the benchmark programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

// Seconds on the steady clock.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median of `v` (the upper one for an even count); v must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A comma-separated list of numbers ("0,50,100"), as T; stops at the first
// text that is not a number.
template <class T = double>
std::vector<T> parse_list(const char* s) {
  std::vector<T> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    out.push_back(T(std::strtod(p, &end)));
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}
