#include "engine/sequence.hpp"

#include <stdexcept>

namespace conveyor {

const char* to_string(SeqState state) {
  switch (state) {
    case SeqState::waiting: return "waiting";
    case SeqState::running: return "running";
    case SeqState::forking: return "forking";
    case SeqState::padding: return "padding";
    case SeqState::swapping_out: return "swapping_out";
    case SeqState::swapped: return "swapped";
    case SeqState::swapping_in: return "swapping_in";
  }
  return "unknown";
}

void Sequence::move(SeqState from, SeqState to) {
  if (state_ != from)
    throw std::logic_error("sequence " + std::to_string(id) + ": " + to_string(state_) + " -> " + to_string(to) +
                           " (only from " + to_string(from) + ")");
  state_ = to;
}

void Sequence::requeue() {
  if (state_ != SeqState::running && state_ != SeqState::swapping_out)
    throw std::logic_error("sequence " + std::to_string(id) + ": " + to_string(state_) +
                           " -> waiting (only from running or swapping_out)");
  state_ = SeqState::waiting;
}

}  // namespace conveyor
