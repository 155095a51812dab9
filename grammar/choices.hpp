// A grammar matching exactly one of a list of strings (vLLM's `choice`
// structured output, and tool names inside a tool-call grammar).
//
// The strings share their prefixes in a trie of rules, so the matcher keeps
// one stack however many choices begin alike ("yes" / "yesterday").
#pragma once

#include <span>
#include <string>

#include "base/status.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

// One of `choices` (bytes as given; duplicates are harmless) as an element
// of `b`. Errc::invalid_argument when the list is empty.
Expected<Element> add_choices(GrammarBuilder& b, std::span<const std::string> choices);

// The grammar of exactly one of `choices`, rooted at "root".
Expected<Grammar> grammar_from_choices(std::span<const std::string> choices);

}  // namespace conveyor::grammar
