// The grammar that holds a model to well-formed tool calls in its family's
// syntax, each call's arguments following its function's `parameters`
// schema (grammar/json_schema.hpp; strict unless the tool says
// "strict": false).
//
//   required, a named function: the answer is calls and nothing else
//     hermes       <tool_call>\n{"name": "f", "arguments": ARGS}\n</tool_call>, one or
//                  (parallel) more, separated by "\n"
//     llama3_json  {"name": "f", "parameters": ARGS}, one or (parallel) more separated by "; "
//     mistral      [TOOL_CALLS], an optional space (its templates write
//                  "[TOOL_CALLS] ["), then [{"name": "f", "arguments": ARGS}, ...];
//                  or, where the template writes the newer form,
//                  [TOOL_CALLS]f[ARGS]ARGS, one or (parallel) more. [TOOL_CALLS]
//                  and [ARGS] are the vocabulary's control tokens where it has
//                  them (token elements of the grammar), else their text.
//   auto (a structural tag): the model writes freely until it opens a call;
//   from there the call is held to the syntax and the schemas
//     hermes       text that does not contain "<tool_call>", then optionally
//                  that tag and the calls as above. The text avoids the tag
//                  with one rule per state of the tag's KMP automaton.
//     llama3_json  an answer that starts with '{' is the calls; any other is free
//     mistral      free text until the model writes its [TOOL_CALLS] control
//                  token (the grammar's trigger_token), then the calls as above
//                  and the end; where the vocabulary spells [TOOL_CALLS] as text,
//                  text without it, then optionally it and the calls (as hermes)
//   none: unconstrained.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"
#include "http/api_types.hpp"
#include "http/constraint_compiler.hpp"
#include "http/tool_calls.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {

// The grammar (see the top of the file). `tools` must hold the function a
// named choice names; tool_choice "none" is an error (it constrains nothing).
Expected<grammar::Grammar> tool_call_grammar(const ToolCallSyntax& syntax, const std::vector<ToolSpec>& tools,
                                             const ToolChoice& choice, bool parallel);

// The request's constraint from its tools (an empty one when they do not
// constrain it), compiled by `compiler`; errors name "tools". With auto, a
// schema the compiler refuses leaves the request unconstrained (its calls
// are still read), as does a response_format beside it; a forced call with
// a schema the compiler refuses, or with a response_format, is a 400.
ConstraintResult tool_call_constraint(const ApiRequest& request, const ToolCallSyntax& syntax,
                                      ConstraintCompiler& compiler);

}  // namespace conveyor::http
