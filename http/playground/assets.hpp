// The browser playground's files (index.html, playground.js, playground.css,
// favicon.svg beside this header), compiled into the binary: embed_assets.cmake turns
// them into byte arrays at build time, so the server needs no files on disk
// and the page no build step. Read-only data, safe from any thread.
#pragma once

#include <span>
#include <string_view>

namespace conveyor::http {

struct PlaygroundAsset {
  std::string_view path;          // the URL path: "/", "/playground.js", ...
  std::string_view content_type;  // with its charset
  std::string_view body;
  std::string_view etag;          // quoted: the first 16 hex digits of the file's SHA-256
};

// Every asset (generated file).
std::span<const PlaygroundAsset> playground_assets();

// The asset served at `path` (no query string), or nullptr.
inline const PlaygroundAsset* find_playground_asset(std::string_view path) {
  for (const PlaygroundAsset& asset : playground_assets())
    if (asset.path == path) return &asset;
  return nullptr;
}

}  // namespace conveyor::http
