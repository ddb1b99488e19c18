// Protocol-neutral HTTP request/response values, so routing, authentication
// and error shaping are testable without sockets.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace lote::api {

// Where a request's body goes when it is not kept in memory (an S3 object's
// bytes): the server hands it the body as it arrives, in order. A failed
// Write stops the read; the request is answered through TransportError with
// that status (400, or 413 for ResourceExhausted).
class BodySink {
 public:
  virtual ~BodySink() = default;
  virtual Status Write(std::string_view bytes) = 0;
  // Checked once the sink is made, before any body byte is read (or a
  // "100 Continue" sent): an error answers the request at once (403 for
  // PermissionDenied, 404 NotFound, 413 ResourceExhausted, else 400).
  virtual Status Refusal() const { return Status::Ok(); }
};

// A response body read from a file: `length` bytes from `offset` of the
// descriptor (shared: it stays open until the write is done).
struct FileBody {
  std::shared_ptr<int> fd;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct HttpRequest {
  std::string method;     // "POST"
  std::string raw_path;   // as sent, still percent-encoded: "/v1/tags/arn%3Aaws%3A..."
  std::string raw_query;  // as sent, without '?'
  std::vector<std::pair<std::string, std::string>> headers;  // in order, any case
  std::string body;
  // Set when the handler asked for the body to be streamed (BodySinkFor):
  // the body went there and `body` is empty.
  std::shared_ptr<BodySink> body_sink;

  // The first header with this name (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // When set, the body is these bytes of a file instead of `body`.
  std::optional<FileBody> file;
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
  // Asked once the headers are read (`head` has no body): a sink to stream
  // the body into instead of memory, or null (the default) to buffer it
  // under the server's body limit. A streamed body has no server limit: the
  // sink enforces its own.
  virtual std::shared_ptr<BodySink> BodySinkFor(const HttpRequest& head) const { return nullptr; }
  // The answer to a failure below the handler (too large, malformed, timed
  // out, refused); `http_status` is the HTTP status sent.
  virtual HttpResponse TransportError(const HttpRequest& request, int http_status,
                                      const Status& status) const = 0;
  // A 500 for a handler that threw (a bug).
  virtual HttpResponse InternalError(const HttpRequest& request, const std::string& what) const = 0;
};

}  // namespace lote::api
