// The console's static files (src/console/web/ and the pinned npm packages),
// embedded into the binary at build time (embed_assets.cmake).
#pragma once

#include <string_view>

namespace lote::console {

struct Asset {
  std::string_view path;  // "index.html", "vendor/uPlot.iife.min.js"
  std::string_view content_type;
  std::string_view data;
};

// The asset at `path` (relative to /console/), or null.
const Asset* FindAsset(std::string_view path);

}  // namespace lote::console
