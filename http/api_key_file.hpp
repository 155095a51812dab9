// The API key file (`--api-key-file PATH`, key `api_key_file` of the [server]
// table): the keys a server accepts, each with a name and optional limits.
// TOML, one [[key]] table per key:
//
//   [[key]]
//   key = "sk-team-a-0123456789"   # required: what clients send as "Authorization: Bearer KEY"
//   name = "team-a"                # optional (default "key-N", N counting from 1): messages name it
//   max_concurrent = 4             # optional: requests in flight at once (no limit when left out)
//   tokens_per_minute = 20000      # optional: prompt + generated tokens per minute (no limit when left out)
//
// Rules, each an error naming the entry (never the key itself): a key is
// printable ASCII without spaces; keys and names are unique; limits are
// integers of 1 or more; an unknown field or top-level key is an error; a
// file without any [[key]] is an error (it would lock everyone out).
// http/key_gate.hpp says how the limits are enforced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/server_options.hpp"
#include "base/status.hpp"

namespace conveyor::http {

struct ApiKeySpec {
  std::string key;
  std::string name;
  int64_t max_concurrent = 0;     // 0: no limit
  int64_t tokens_per_minute = 0;  // 0: no limit
};

// `source` names the text in messages (the file's path).
Expected<std::vector<ApiKeySpec>> parse_api_key_file(std::string_view toml_text, const std::string& source);
Expected<std::vector<ApiKeySpec>> load_api_key_file(const std::string& path);

// The keys a server with `options` accepts: api_key (named "--api-key",
// without limits), then the keys of api_key_file. Empty: no key needed.
Expected<std::vector<ApiKeySpec>> api_keys_of(const ServerOptions& options);

}  // namespace conveyor::http
