// FilterPattern: the term-based subset of CloudWatch Logs filter patterns.
//
// Supported: whitespace-separated terms and double-quoted phrases, all of
// which must occur in a message (case-sensitive substrings); "?term" terms of
// which at least one must occur; "-term" terms that must not occur. An empty
// pattern matches everything. JSON ("{ ... }") and space-delimited ("[ ... ]")
// patterns are rejected with InvalidArgument. Thread safety: immutable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::logs {

class FilterPattern {
 public:
  static Result<FilterPattern> Parse(std::string_view pattern);
  bool Matches(std::string_view message) const;
  bool empty() const { return required_.empty() && any_.empty() && excluded_.empty(); }

 private:
  std::vector<std::string> required_;
  std::vector<std::string> any_;
  std::vector<std::string> excluded_;
};

}  // namespace lote::logs
