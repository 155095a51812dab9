// allOf for the JSON Schema compiler: two schemas merged into one whose
// instances are those valid under both, where the keywords allow it. A
// grammar cannot intersect two grammars, so the compiler merges schemas
// instead (allOf, and the siblings of anyOf / oneOf / $ref).
//
//   type                   the intersection (integer within number)
//   properties             a name in both: allOf of the two; a name in one:
//                          also constrained by the other's
//                          additionalProperties, as JSON Schema evaluates
//                          each schema on its own
//   additionalProperties   allOf of the two
//   required               the union
//   enum, const            the values in both (as an enum)
//   minimum, minLength,    the larger; maximum, maxLength, maxItems and
//   minItems, exclusive... exclusiveMaximum the smaller
//   items                  allOf of the two
//   allOf                  concatenated
//   anyOf, oneOf           the pairs of branches (at most 64), as anyOf
//   anything else          kept when equal or in one schema only, refused
//                          otherwise (two different patterns, prefixItems,
//                          formats: the intersection has no schema)
// Booleans: true is the identity, false absorbs. Neither input may hold a
// $ref: the compiler resolves them first.
#pragma once

#include <boost/json/value.hpp>

#include "base/status.hpp"

namespace conveyor::grammar {

// Errc::invalid_argument naming the keyword when the merge is refused.
Expected<boost::json::value> merge_schemas(const boost::json::value& a, const boost::json::value& b);

}  // namespace conveyor::grammar
