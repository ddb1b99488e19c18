// Protocol-neutral HTTP request/response values, so routing, authentication
// and error shaping are testable without sockets.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lote::api {

struct HttpRequest {
  std::string method;     // "POST"
  std::string raw_path;   // as sent, still percent-encoded: "/v1/tags/arn%3Aaws%3A..."
  std::string raw_query;  // as sent, without '?'
  std::vector<std::pair<std::string, std::string>> headers;  // in order, any case
  std::string body;

  // The first header with this name (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

}  // namespace lote::api
