// Protocol-neutral HTTP request/response values, so routing, authentication
// and error shaping are testable without sockets.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

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

// What an HttpServer serves: the API (ApiRouter) or the web console. All
// methods are called concurrently from the server's threads.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual HttpResponse Handle(const HttpRequest& request) const = 0;
  // True when Handle never blocks for this request (memory only, short
  // locks): the server may run it on an I/O thread.
  virtual bool IsNonblocking(const HttpRequest& request) const { return false; }
  // The answer to a failure below the handler (too large, malformed, timed
  // out, refused); `http_status` is the HTTP status sent.
  virtual HttpResponse TransportError(const HttpRequest& request, int http_status,
                                      const Status& status) const = 0;
  // A 500 for a handler that threw (a bug).
  virtual HttpResponse InternalError(const HttpRequest& request, const std::string& what) const = 0;
};

}  // namespace lote::api
