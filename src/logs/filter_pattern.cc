#include "logs/filter_pattern.h"

namespace lote::logs {

Result<FilterPattern> FilterPattern::Parse(std::string_view p) {
  FilterPattern out;
  size_t i = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < p.size() && is_space(p[i])) ++i;
  if (i < p.size() && (p[i] == '{' || p[i] == '[')) {
    return Status::InvalidArgument(
        "Invalid filter pattern: JSON and space-delimited patterns are not supported by lote; use "
        "terms "
        "and \"quoted phrases\" (with ?term for any-of and -term to exclude)");
  }
  while (i < p.size()) {
    while (i < p.size() && is_space(p[i])) ++i;
    if (i >= p.size()) break;
    char kind = ' ';
    if (p[i] == '?' || p[i] == '-') {
      kind = p[i];
      ++i;
    }
    std::string term;
    if (i < p.size() && p[i] == '"') {
      size_t close = i + 1;
      while (close < p.size() && p[close] != '"') {
        if (p[close] == '\\' && close + 1 < p.size()) {
          term.push_back(p[close + 1]);
          close += 2;
          continue;
        }
        term.push_back(p[close]);
        ++close;
      }
      if (close >= p.size()) {
        return Status::InvalidArgument("Invalid filter pattern: unterminated quoted phrase in '" +
                                       std::string(p) + "'");
      }
      i = close + 1;
    } else {
      while (i < p.size() && !is_space(p[i])) term.push_back(p[i++]);
    }
    if (term.empty()) {
      if (kind == ' ') continue;
      return Status::InvalidArgument("Invalid filter pattern: '" + std::string(1, kind) +
                                     "' must precede a term");
    }
    if (kind == '?') {
      out.any_.push_back(std::move(term));
    } else if (kind == '-') {
      out.excluded_.push_back(std::move(term));
    } else {
      out.required_.push_back(std::move(term));
    }
  }
  return out;
}

bool FilterPattern::Matches(std::string_view m) const {
  for (const std::string& t : required_) {
    if (m.find(t) == std::string_view::npos) return false;
  }
  for (const std::string& t : excluded_) {
    if (m.find(t) != std::string_view::npos) return false;
  }
  if (any_.empty()) return true;
  for (const std::string& t : any_) {
    if (m.find(t) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace lote::logs
