// The plain types of a render, shared by the public API (jinja.hpp) and the
// renderer's internals (value.hpp, interpreter.hpp), which include this and
// not the public header.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::jinja {

// Byte offsets [begin, end) into a rendered text: the tokenizer's type, so
// the data ranges go to Tokenizer::encode as its verbatim ranges unchanged.
using TextRange = conveyor::TextRange;

struct Rendered {
  std::string text;
  std::vector<TextRange> data;  // the bytes that came from data_context: sorted, disjoint, merged
};

// Bounds on one render. The defaults are far above what real chat templates
// need and far below what would hurt a server: Qwen 2.5's template renders
// 1,000 messages and 20 tools in 56,000 steps (3.5 ms on a 2-core EPYC, about
// 60 ns a step), so the step limit stops a runaway template within about
// 0.3 s of one core.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // also the size of any one string or list
  uint64_t max_steps = 5'000'000;              // evaluation steps plus bytes/elements built / 16
  int max_call_depth = 64;                     // nested macro calls
};

struct RenderOptions {
  RenderLimits limits;
  // The time strftime_now() formats (in local time); unset: the clock's now.
  std::optional<std::chrono::system_clock::time_point> now;
};

// The parsed statements of a template (ast.hpp).
struct Program;

}  // namespace conveyor::jinja
