// Timing helpers shared by the benchmark programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
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

// A comma-separated list of words ("q4_0,q8_0"); empty items are dropped.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(',', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The CPU as /proc/cpuinfo names it, with its family and model numbers
// ("AMD EPYC (family 26, model 2)"): machines of one name differ (an EPYC
// of family 25 runs one 512-bit vpdpbusd a cycle, one of family 26 two), so
// every figure should say which it came from. Empty where there is no
// /proc/cpuinfo.
inline std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value = [](const std::string& l) {  // what follows "key\t: "
    const size_t colon = l.find(':');
    const size_t at = colon == std::string::npos ? colon : l.find_first_not_of(" \t", colon + 1);
    return at == std::string::npos ? std::string() : l.substr(at);
  };
  while (std::getline(in, line) && (name.empty() || family.empty() || model.empty())) {
    if (name.empty() && line.rfind("model name", 0) == 0) name = value(line);
    else if (family.empty() && line.rfind("cpu family", 0) == 0) family = value(line);
    else if (model.empty() && line.rfind("model", 0) == 0 && line.find("name") == std::string::npos) model = value(line);
  }
  if (name.empty()) return {};
  return name + " (family " + family + ", model " + model + ")";
}
