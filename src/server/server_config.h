// The server's config file (`lote server --config PATH`; the package's unit
// passes /etc/lote/server.conf): one `key = value` per line, where a key is a
// `lote server` option without its leading "--" (listen, home, region, ...),
// a flag takes true or false, "#" starts a comment line, and a value may be
// in double quotes. Read once at start; an option given on the command line
// wins over the file. docs/deploy.md shows a complete file.
// Thread safety: pure.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace lote::server {

struct ConfigEntry {
  int line = 0;  // 1-based, for messages
  std::string key;
  std::string value;
};

// The entries of `text` in order. A line that is not blank, a comment or
// `key = value` (or repeats a key) is InvalidArgument naming `path` and the line.
Result<std::vector<ConfigEntry>> ParseServerConfig(const std::string& text,
                                                   const std::string& path);

}  // namespace lote::server
