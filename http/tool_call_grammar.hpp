// The grammar that holds a model to well-formed tool calls in its family's
// syntax, each call's arguments following its function's `parameters`
// schema (grammar/json_schema.hpp; strict unless the tool says
// "strict": false).
//
//   required, a named function: the answer is calls and nothing else
//     hermes       <tool_call>\n{"name": "f", "arguments": ARGS}\n</tool_call>, one or
//                  (parallel) more, separated by "\n"
//     llama3_json  {"name": "f", "parameters": ARGS}, one or (parallel) more separated by "; "
//     mistral      [{"name": "f", "arguments": ARGS}, ...]: the list without its
//                  [TOOL_CALLS] control token, which a grammar over bytes cannot
//                  ask for (tool_calls.hpp reads the list as calls)
//   auto (a structural tag): the model writes freely until it opens a call;
//   from there the call is held to the syntax and the schemas
//     hermes       text that does not contain "<tool_call>", then optionally
//                  that tag and the calls as above. The text avoids the tag
//                  with one rule per state of the tag's KMP automaton.
//     llama3_json  an answer that starts with '{' is the calls; any other is free
//     mistral      unconstrained (its trigger is a control token): parsed only
//   none: unconstrained.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"
#include "http/api_types.hpp"
#include "http/constraint_compiler.hpp"
#include "http/tool_calls.hpp"

namespace conveyor::http {

// Whether tool_call_grammar constrains this choice in this format.
bool constrains_tool_calls(ToolCallFormat format, const ToolChoice& choice);

// The grammar (see the top of the file). `tools` must hold the function a
// named choice names; a format and choice that constrains_tool_calls()
// refuses is an error.
Expected<grammar::Grammar> tool_call_grammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                             const ToolChoice& choice, bool parallel);

// The request's constraint from its tools (an empty one when they do not
// constrain it), compiled by `compiler`; errors name "tools". With auto, a
// schema the compiler refuses leaves the request unconstrained (its calls
// are still read), as does a response_format beside it; a forced call with
// a schema the compiler refuses, or with a response_format, is a 400.
ConstraintResult tool_call_constraint(const ApiRequest& request, ToolCallFormat format,
                                      ConstraintCompiler& compiler);

}  // namespace conveyor::http
