// Incremental detokenization for streaming.
//
// Generated tokens arrive one at a time; one character may span several
// tokens (byte-fallback tokens, or byte-level BPE). push() returns only text
// that is complete, valid UTF-8, holding back the bytes of a character that is
// not finished yet; flush() returns what is left at the end, with bytes that
// never formed a character replaced by U+FFFD.
#pragma once

#include <cstdint>
#include <string>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer);

  // The text that token `id` completes (possibly empty).
  std::string push(int32_t id);
  // Everything still held back; invalid bytes become U+FFFD.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of an unfinished character (at most 3)
};

}  // namespace conveyor
