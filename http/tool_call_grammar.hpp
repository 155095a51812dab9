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
//                  ask for (tool_calls.hpp reads a leading list as calls)
//   auto (a structural tag): the model writes freely until it opens a call;
//   from there the call is held to the syntax and the schemas
//     hermes       text that does not contain "<tool_call>", then optionally
//                  that tag and the calls as above. The text avoids the tag
//                  with one rule per state of the tag's KMP automaton.
//     llama3_json  an answer that starts with '{' is the calls; any other is free
//     mistral      free text until the model writes its [TOOL_CALLS] control
//                  token (`call_token`, the grammar's trigger_token), then an
//                  optional space (its templates write "[TOOL_CALLS] ["), the
//                  list of calls as above and the end; without the token in
//                  the vocabulary (call_token -1), unconstrained: parsed only
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
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {

// The control token that opens a call in `format` (Mistral's [TOOL_CALLS])
// when the vocabulary has one; -1 otherwise (other formats open calls with
// text, or the vocabulary spells [TOOL_CALLS] as text).
int32_t tool_call_token(ToolCallFormat format, const Tokenizer& tokenizer);

// Whether tool_call_grammar constrains this choice in this format.
// `call_token`: the id of the control token that opens Mistral's calls
// (ModelContext::tool_call_token), -1 when the vocabulary has none.
bool constrains_tool_calls(ToolCallFormat format, const ToolChoice& choice, int32_t call_token = -1);

// The grammar (see the top of the file). `tools` must hold the function a
// named choice names; a format and choice that constrains_tool_calls()
// refuses is an error.
Expected<grammar::Grammar> tool_call_grammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                             const ToolChoice& choice, bool parallel, int32_t call_token = -1);

// The request's constraint from its tools (an empty one when they do not
// constrain it), compiled by `compiler`; errors name "tools". With auto, a
// schema the compiler refuses leaves the request unconstrained (its calls
// are still read), as does a response_format beside it; a forced call with
// a schema the compiler refuses, or with a response_format, is a 400.
ConstraintResult tool_call_constraint(const ApiRequest& request, ToolCallFormat format, int32_t call_token,
                                      ConstraintCompiler& compiler);

}  // namespace conveyor::http
