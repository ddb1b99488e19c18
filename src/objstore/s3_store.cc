#include "objstore/s3_store.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/sigv4.h"

namespace lote::objstore {
namespace {

constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Md5(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<char*>(out), n);
}

// Incremental MD5 for downloads.
class Md5Hasher {
 public:
  Md5Hasher() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  ~Md5Hasher() { EVP_MD_CTX_free(ctx_); }
  Md5Hasher(const Md5Hasher&) = delete;
  Md5Hasher& operator=(const Md5Hasher&) = delete;
  void Update(std::string_view d) { EVP_DigestUpdate(ctx_, d.data(), d.size()); }
  void Reset() { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  std::string FinishHex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
    return HexEncode(std::string_view(reinterpret_cast<char*>(out), n));
  }

 private:
  EVP_MD_CTX* ctx_;
};

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out.push_back('&');
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out.push_back('&');
    else if (ent == "lt")
      out.push_back('<');
    else if (ent == "gt")
      out.push_back('>');
    else if (ent == "quot")
      out.push_back('"');
    else if (ent == "apos")
      out.push_back('\'');
    else if (!ent.empty() && ent[0] == '#') {
      uint32_t cp =
          ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')
              ? static_cast<uint32_t>(std::strtoul(std::string(ent.substr(2)).c_str(), nullptr, 16))
              : static_cast<uint32_t>(
                    std::strtoul(std::string(ent.substr(1)).c_str(), nullptr, 10));
      if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
      } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

// Text of every <tag>...</tag> element in `xml`, in order (no nesting of the same tag).
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  for (;;) {
    size_t b = xml.find(open, pos);
    if (b == std::string_view::npos) break;
    b += open.size();
    size_t e = xml.find(close, b);
    if (e == std::string_view::npos) break;
    out.push_back(xml.substr(b, e - b));
    pos = e + close.size();
  }
  return out;
}

std::string XmlText(std::string_view xml, std::string_view tag) {
  auto v = XmlElements(xml, tag);
  return v.empty() ? "" : XmlUnescape(v.front());
}

std::string StripQuotes(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') return s.substr(1, s.size() - 2);
  return s;
}

int64_t ParseIsoMillis(const std::string& s) {
  std::tm tm{};
  if (!strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  size_t dot = s.find('.');
  if (dot != std::string::npos) ms += std::strtol(s.substr(dot + 1, 3).c_str(), nullptr, 10);
  return ms;
}

int64_t ParseHttpDateMillis(const std::string& s) {
  std::tm tm{};
  if (!strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm)) return 0;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
};

// Where a response body goes: a string, or a file descriptor (with an MD5 of it).
struct BodySink {
  std::string* str = nullptr;
  int fd = -1;
  Md5Hasher* md5 = nullptr;
  bool write_error = false;
  long status = 0;  // bodies of non-2xx responses always go to `error_body`
  std::string error_body;
};

struct UploadSource {
  std::string_view data;
  size_t pos = 0;
};

size_t WriteCb(char* ptr, size_t size, size_t n, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  size_t len = size * n;
  if (sink->status == 0 || sink->status >= 300) {
    sink->error_body.append(ptr, len);
    return len;
  }
  if (sink->str) {
    sink->str->append(ptr, len);
  } else if (sink->fd >= 0) {
    size_t done = 0;
    while (done < len) {
      ssize_t w = ::write(sink->fd, ptr + done, len - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        sink->write_error = true;
        return 0;
      }
      done += static_cast<size_t>(w);
    }
    if (sink->md5) sink->md5->Update(std::string_view(ptr, len));
  }
  return len;
}

size_t ReadCb(char* buf, size_t size, size_t n, void* user) {
  auto* src = static_cast<UploadSource*>(user);
  size_t len = std::min(size * n, src->data.size() - src->pos);
  std::memcpy(buf, src->data.data() + src->pos, len);
  src->pos += len;
  return len;
}

struct HeaderCtx {
  HttpResponse* resp;
  BodySink* sink;
};

size_t HeaderCb(char* ptr, size_t size, size_t n, void* user) {
  auto* ctx = static_cast<HeaderCtx*>(user);
  std::string line(ptr, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    ctx->resp->headers.clear();
    size_t sp = line.find(' ');
    if (sp != std::string::npos)
      ctx->sink->status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = line.find_first_not_of(' ', colon + 1);
    ctx->resp->headers[name] = v == std::string::npos ? "" : line.substr(v);
  }
  return size * n;
}

struct ProgressCtx {
  const ProgressFn* fn;
  uint64_t base;
  uint64_t total;
  bool upload;
  // When set, bytes so far are stored here instead of calling fn (transfers on
  // helper threads: the calling thread reports).
  std::atomic<uint64_t>* counter = nullptr;
};

int XferCb(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  auto* p = static_cast<ProgressCtx*>(user);
  if (p->counter) {
    p->counter->store(static_cast<uint64_t>(p->upload ? ulnow : dlnow), std::memory_order_relaxed);
  } else if (p->fn && *p->fn) {
    uint64_t now = static_cast<uint64_t>(p->upload ? ulnow : dlnow);
    uint64_t total = p->total ? p->total : static_cast<uint64_t>(p->upload ? ultotal : dltotal);
    (*p->fn)(p->base + now, total);
  }
  return 0;
}

// One logical request, retried by Impl::Send.
struct HttpRequest {
  std::string method;
  std::string raw_path;   // percent-encoded
  std::string raw_query;  // without '?'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view body;
  bool send_body = false;
  std::string body_sha256;  // hex; computed when empty
};

}  // namespace

struct S3Store::Impl {
  std::string bucket;
  std::string prefix;
  S3Config config;
  std::string host;  // authority of the endpoint
  std::atomic<int64_t> retries{0};

  std::string FullKey(const std::string& key) const {
    return prefix.empty() ? key : prefix + "/" + key;
  }
  std::string ObjectPath(const std::string& key) const {
    return "/" + bucket + "/" + sigv4::UriEncode(FullKey(key), false);
  }
  std::string Describe(const std::string& key) const {
    return "s3://" + bucket + "/" + FullKey(key);
  }

  // Sends once. Returns the response (any status) or a transport error.
  Result<HttpResponse> SendOnce(const HttpRequest& req, BodySink* sink, ProgressCtx* progress) {
    GlobalInit();
    CURL* curl = curl_easy_init();
    if (!curl) return Status::Internal("curl_easy_init failed");
    sigv4::Request sreq;
    sreq.method = req.method;
    sreq.raw_path = req.raw_path;
    sreq.raw_query = req.raw_query;
    sreq.headers = req.headers;
    sreq.headers.emplace_back("host", host);
    sreq.payload_sha256_hex =
        !req.body_sha256.empty()
            ? req.body_sha256
            : (req.body.empty() ? std::string(kEmptySha256) : Sha256Hex(req.body));
    sigv4::SignRequest(&sreq, config.credentials, config.region, "s3",
                       sigv4::FormatAmzDate(SystemClock::Default()->NowMillis()));
    curl_slist* hdrs = nullptr;
    for (const auto& [k, v] : sreq.headers) hdrs = curl_slist_append(hdrs, (k + ": " + v).c_str());
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (!req.send_body) hdrs = curl_slist_append(hdrs, "Content-Type:");
    std::string url =
        config.endpoint + req.raw_path + (req.raw_query.empty() ? "" : "?" + req.raw_query);

    HttpResponse resp;
    HeaderCtx hctx{&resp, sink};
    UploadSource src{req.body, 0};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config.connect_timeout_ms));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config.low_speed_timeout_s));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteCb);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, HeaderCb);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &hctx);
    if (req.method == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (req.send_body) {
      curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadCb);
      curl_easy_setopt(curl, CURLOPT_READDATA, &src);
      curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      if (req.method != "PUT") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    } else if (req.method != "GET") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    if (progress) {
      curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, XferCb);
      curl_easy_setopt(curl, CURLOPT_XFERINFODATA, progress);
    }
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    curl_slist_free_all(hdrs);
    if (sink->write_error)
      return Status::Internal("cannot write download: " + std::string(std::strerror(errno)));
    if (rc != CURLE_OK) {
      return Status::Unavailable(req.method + " " + url + ": " + curl_easy_strerror(rc));
    }
    resp.status = status;
    resp.body = std::move(sink->error_body);
    return resp;
  }

  static bool Retryable(const Result<HttpResponse>& r) {
    if (!r.ok()) return r.status().code() == StatusCode::kUnavailable;
    return r->status >= 500 || r->status == 429;
  }

  // Sends with retries. `reset` runs before each retry (to rewind a file sink).
  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink, ProgressCtx* progress,
                            const std::function<Status()>& reset = nullptr) {
    thread_local std::mt19937_64 rng(std::random_device{}());
    int64_t backoff = config.initial_backoff_ms;
    for (int attempt = 1;; ++attempt) {
      Result<HttpResponse> r = SendOnce(req, sink, progress);
      if (!Retryable(r) || attempt >= config.max_attempts) return r;
      ++retries;
      int64_t sleep_ms =
          backoff / 2 + static_cast<int64_t>(rng() % static_cast<uint64_t>(backoff / 2 + 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      backoff = std::min<int64_t>(backoff * 2, 20'000);
      sink->error_body.clear();
      sink->status = 0;
      if (sink->str) sink->str->clear();
      if (reset) RETURN_IF_ERROR(reset());
    }
  }

  // Maps a non-2xx response to a Status naming the S3 error code.
  Status ErrorOf(const HttpResponse& r, const std::string& what) const {
    std::string code = XmlText(r.body, "Code");
    std::string message = XmlText(r.body, "Message");
    std::string msg = what + ": HTTP " + std::to_string(r.status) +
                      (code.empty() ? "" : " " + code) +
                      (message.empty() ? "" : " (" + message + ")");
    if (r.status == 404) return Status::NotFound(msg);
    if (r.status == 401) return Status::Unauthenticated(msg);
    if (r.status == 403) {
      return Status::PermissionDenied(
          msg + "; check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE");
    }
    if (code == "BadDigest" || code == "InvalidDigest") return Status::DataLoss(msg);
    if (r.status >= 500 || r.status == 429) return Status::Unavailable(msg + " (after retries)");
    return Status::InvalidArgument(msg);
  }

  Result<HttpResponse> Call(const HttpRequest& req, const std::string& what,
                            BodySink* sink = nullptr, ProgressCtx* progress = nullptr,
                            const std::function<Status()>& reset = nullptr) {
    BodySink local;
    std::string body;
    if (!sink) {
      local.str = &body;
      sink = &local;
    }
    auto r = Send(req, sink, progress, reset);
    if (!r.ok()) return r.status().WithContext(what);
    if (r->status < 200 || r->status >= 300) return ErrorOf(*r, what);
    if (sink == &local) r->body = std::move(body);
    return r;
  }

  Status PutSingle(const std::string& key, std::string_view data, const ProgressFn& progress) {
    HttpRequest req;
    req.method = "PUT";
    req.raw_path = ObjectPath(key);
    std::string md5 = Md5(data);
    req.headers = {{"Content-MD5", Base64Encode(md5)},
                   {"Content-Type", "application/octet-stream"}};
    req.body = data;
    req.send_body = true;
    ProgressCtx pctx{&progress, 0, data.size(), true};
    ASSIGN_OR_RETURN(HttpResponse r,
                     Call(req, "PUT " + Describe(key), nullptr, progress ? &pctx : nullptr));
    std::string etag = StripQuotes(r.headers["etag"]);
    if (etag != HexEncode(md5)) {
      return Status::DataLoss("PUT " + Describe(key) + ": ETag " + etag +
                              " does not match the MD5 " + HexEncode(md5) + " of the data sent");
    }
    if (progress) progress(data.size(), data.size());
    return Status::Ok();
  }

  // Reads part of the object; called from several threads at once.
  using ReadRange = std::function<Status(uint64_t offset, size_t len, std::string* out)>;

  Status PutMultipart(const std::string& key, uint64_t size, const ReadRange& read,
                      const ProgressFn& progress) {
    const std::string what = "multipart upload of " + Describe(key);
    HttpRequest init;
    init.method = "POST";
    init.raw_path = ObjectPath(key);
    init.raw_query = "uploads=";
    init.send_body = true;
    init.headers = {{"Content-Type", "application/octet-stream"}};
    ASSIGN_OR_RETURN(HttpResponse ir, Call(init, what + " (initiate)"));
    std::string upload_id = XmlText(ir.body, "UploadId");
    if (upload_id.empty()) return Status::Internal(what + ": no UploadId in the response");
    const std::string id_query = "uploadId=" + sigv4::UriEncode(upload_id, true);

    auto abort = [&](Status st) {
      HttpRequest a;
      a.method = "DELETE";
      a.raw_path = ObjectPath(key);
      a.raw_query = id_query;
      (void)Call(a, what + " (abort)");
      return st;
    };

    // Parts go up on up to max_parallel_parts helper threads, each taking the
    // next part number; the calling thread reports progress and waits. The
    // first failure stops new parts; the upload is then aborted.
    const uint64_t part_size = std::max<uint64_t>(config.part_size, 5ull << 20);
    const size_t parts = static_cast<size_t>((size + part_size - 1) / part_size);
    struct Part {
      std::string md5;  // raw
      std::string etag;
      std::atomic<uint64_t> sent{0};
    };
    std::vector<Part> results(parts);
    std::atomic<size_t> next_part{0};
    std::mutex mu;
    std::condition_variable done_cv;
    size_t workers_left = 0;  // guarded by mu
    Status failure;           // guarded by mu: the first error
    std::atomic<bool> failed{false};
    auto fail = [&](Status st) {
      std::lock_guard<std::mutex> lock(mu);
      if (failure.ok()) failure = std::move(st);
      failed = true;
    };
    auto upload_parts = [&] {
      std::string part;
      for (size_t i; !failed && (i = next_part.fetch_add(1)) < parts;) {
        const uint64_t off = i * part_size;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(part_size, size - off));
        const std::string number = std::to_string(i + 1);
        Status rs = read(off, len, &part);
        if (!rs.ok()) return fail(rs);
        std::string md5 = Md5(part);
        HttpRequest pr;
        pr.method = "PUT";
        pr.raw_path = ObjectPath(key);
        pr.raw_query = "partNumber=" + number + "&" + id_query;
        pr.headers = {{"Content-MD5", Base64Encode(md5)},
                      {"Content-Type", "application/octet-stream"}};
        pr.body = part;
        pr.send_body = true;
        ProgressCtx pctx{&progress, off, size, true, &results[i].sent};
        auto r = Call(pr, what + " (part " + number + ")", nullptr, progress ? &pctx : nullptr);
        if (!r.ok()) return fail(r.status());
        std::string etag = StripQuotes(r->headers["etag"]);
        if (etag != HexEncode(md5)) {
          return fail(Status::DataLoss(what + ": part " + number + " ETag " + etag +
                                       " does not match the MD5 of the data sent"));
        }
        results[i].sent = len;
        results[i].md5 = std::move(md5);
        results[i].etag = std::move(etag);
      }
    };
    const size_t threads =
        std::min<size_t>(parts, static_cast<size_t>(std::max(1, config.max_parallel_parts)));
    std::vector<std::thread> pool;
    workers_left = threads;
    for (size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        upload_parts();
        std::lock_guard<std::mutex> lock(mu);
        --workers_left;
        done_cv.notify_all();
      });
    }
    uint64_t reported = 0;
    for (bool finished = false; !finished;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        finished = done_cv.wait_for(lock, std::chrono::milliseconds(100),
                                    [&] { return workers_left == 0; });
      }
      if (progress && !finished) {
        uint64_t sent = 0;
        for (const Part& p : results) sent += p.sent.load(std::memory_order_relaxed);
        if (sent > reported && sent < size) progress(reported = sent, size);  // never backwards
      }
    }
    for (auto& t : pool) t.join();
    if (failed) return abort(failure);

    std::string md5s;
    std::string complete = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < parts; ++i) {
      md5s += results[i].md5;
      complete += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>\"" +
                  results[i].etag + "\"</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    HttpRequest cr;
    cr.method = "POST";
    cr.raw_path = ObjectPath(key);
    cr.raw_query = id_query;
    cr.headers = {{"Content-Type", "application/xml"}};
    cr.body = complete;
    cr.send_body = true;
    auto r = Call(cr, what + " (complete)");
    if (!r.ok()) return abort(r.status());
    // S3 may report an error inside a 200 response to CompleteMultipartUpload.
    if (r->body.find("<Error>") != std::string::npos) {
      return abort(Status::Unavailable(what + " (complete): " + XmlText(r->body, "Code") + " " +
                                       XmlText(r->body, "Message")));
    }
    std::string expected = HexEncode(Md5(md5s)) + "-" + std::to_string(parts);
    std::string etag = StripQuotes(XmlText(r->body, "ETag"));
    if (etag != expected) {
      return Status::DataLoss(what + ": final ETag " + etag + " does not match the expected " +
                              expected);
    }
    if (progress) progress(size, size);
    return Status::Ok();
  }
};

S3Store::S3Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
S3Store::~S3Store() = default;

Result<std::unique_ptr<S3Store>> S3Store::Open(const std::string& bucket, const std::string& prefix,
                                               S3Config config) {
  if (bucket.empty()) return Status::InvalidArgument("s3 URI needs a bucket: s3://BUCKET/prefix");
  auto impl = std::make_unique<Impl>();
  impl->bucket = bucket;
  impl->prefix = prefix;
  while (!impl->prefix.empty() && impl->prefix.back() == '/') impl->prefix.pop_back();
  impl->config = std::move(config);
  std::string ep = impl->config.endpoint;
  size_t scheme = ep.find("://");
  if (scheme == std::string::npos) return Status::InvalidArgument("bad S3 endpoint " + ep);
  std::string rest = ep.substr(scheme + 3);
  size_t slash = rest.find('/');
  impl->host = slash == std::string::npos ? rest : rest.substr(0, slash);
  if (slash != std::string::npos) {
    return Status::InvalidArgument("S3 endpoint " + ep +
                                   " must not have a path (path-style addressing adds the bucket)");
  }
  return std::unique_ptr<S3Store>(new S3Store(std::move(impl)));
}

std::string S3Store::RootUri() const {
  return "s3://" + impl_->bucket + (impl_->prefix.empty() ? "" : "/" + impl_->prefix);
}

int64_t S3Store::retries() const { return impl_->retries.load(); }

Status S3Store::CreateBucket() {
  HttpRequest req;
  req.method = "PUT";
  req.raw_path = "/" + impl_->bucket;
  std::string body;
  if (impl_->config.region != "us-east-1") {
    body = "<CreateBucketConfiguration><LocationConstraint>" + impl_->config.region +
           "</LocationConstraint></CreateBucketConfiguration>";
  }
  req.body = body;
  req.send_body = true;
  req.headers = {{"Content-Type", "application/xml"}};
  BodySink sink;
  std::string out;
  sink.str = &out;
  auto r = impl_->Send(req, &sink, nullptr);
  if (!r.ok()) return r.status();
  if (r->status == 409 && XmlText(r->body, "Code") == "BucketAlreadyOwnedByYou")
    return Status::Ok();
  if (r->status < 200 || r->status >= 300)
    return impl_->ErrorOf(*r, "create bucket " + impl_->bucket);
  return Status::Ok();
}

Status S3Store::PutBytes(const std::string& key, std::string_view data) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (data.size() < impl_->config.multipart_threshold) return impl_->PutSingle(key, data, nullptr);
  return impl_->PutMultipart(
      key, data.size(),
      [&](uint64_t off, size_t len, std::string* out) {
        out->assign(data.substr(off, len));
        return Status::Ok();
      },
      nullptr);
}

Status S3Store::PutFile(const std::string& key, const std::string& local_path,
                        const ProgressFn& progress) {
  RETURN_IF_ERROR(ValidateKey(key));
  int fd = ::open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + local_path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("not a regular file: " + local_path);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto read = [&](uint64_t off, size_t len, std::string* out) -> Status {
    out->resize(len);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd, out->data() + done, len - done, static_cast<off_t>(off + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::DataLoss("cannot read " + local_path + " (did it shrink?)");
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  };
  Status result;
  if (size < impl_->config.multipart_threshold) {
    std::string data;
    result = read(0, size, &data);
    if (result.ok()) result = impl_->PutSingle(key, data, progress);
  } else {
    result = impl_->PutMultipart(key, size, read, progress);
  }
  ::close(fd);
  return result;
}

Result<std::string> S3Store::GetBytes(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  HttpRequest req;
  req.method = "GET";
  req.raw_path = impl_->ObjectPath(key);
  std::string out;
  BodySink sink;
  sink.str = &out;
  ASSIGN_OR_RETURN(HttpResponse r, impl_->Call(req, "GET " + impl_->Describe(key), &sink));
  std::string etag = StripQuotes(r.headers["etag"]);
  if (!etag.empty() && etag.find('-') == std::string::npos && etag.size() == 32 &&
      etag != HexEncode(Md5(out))) {
    return Status::DataLoss("GET " + impl_->Describe(key) +
                            ": the MD5 of the received bytes does not match ETag " + etag);
  }
  return out;
}

Result<std::string> S3Store::GetRange(const std::string& key, uint64_t offset, uint64_t length) {
  RETURN_IF_ERROR(ValidateKey(key));
  const std::string what = "GET " + impl_->Describe(key) + " bytes " + std::to_string(offset) +
                           "+" + std::to_string(length);
  if (length == 0) return std::string();
  HttpRequest req;
  req.method = "GET";
  req.raw_path = impl_->ObjectPath(key);
  req.headers = {
      {"Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1)}};
  std::string out;
  BodySink sink;
  sink.str = &out;
  auto r = impl_->Send(req, &sink, nullptr);
  if (!r.ok()) return r.status().WithContext(what);
  if (r->status == 416) return std::string();  // the range starts at or past the end
  if (r->status < 200 || r->status >= 300) {
    Status st = impl_->ErrorOf(*r, what);
    if (st.IsNotFound()) return Status::NotFound("no object " + impl_->Describe(key));
    return st;
  }
  const std::string len = r->headers["content-length"];
  if (!len.empty() && std::to_string(out.size()) != len) {
    return Status::DataLoss(what + ": received " + std::to_string(out.size()) +
                            " bytes, expected " + len);
  }
  if (r->status == 200) {  // a server that ignores Range sends the whole object
    if (offset >= out.size()) return std::string();
    return out.substr(static_cast<size_t>(offset), static_cast<size_t>(length));
  }
  if (out.size() > length) return Status::DataLoss(what + ": the server sent more than asked");
  return out;
}

Status S3Store::GetFile(const std::string& key, const std::string& local_path,
                        const ProgressFn& progress) {
  RETURN_IF_ERROR(ValidateKey(key));
  namespace fs = std::filesystem;
  std::string dir = fs::path(local_path).parent_path().string();
  if (!dir.empty()) RETURN_IF_ERROR(MakeDirs(dir));
  std::string tmp =
      (dir.empty() ? std::string(".") : dir) + "/.lote-tmp-" + HexEncode(RandomBytes(8));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot create " + tmp + ": " + std::strerror(errno));
  Md5Hasher md5;
  BodySink sink;
  sink.fd = fd;
  sink.md5 = &md5;
  HttpRequest req;
  req.method = "GET";
  req.raw_path = impl_->ObjectPath(key);
  ProgressCtx pctx{&progress, 0, 0, false};
  auto reset = [&]() -> Status {
    md5.Reset();
    if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
      return Status::Internal("cannot rewind " + tmp);
    }
    return Status::Ok();
  };
  auto r =
      impl_->Call(req, "GET " + impl_->Describe(key), &sink, progress ? &pctx : nullptr, reset);
  Status st = r.status();
  if (st.ok()) {
    struct stat fst;
    std::string len = r->headers["content-length"];
    if (::fstat(fd, &fst) == 0 && !len.empty() && std::to_string(fst.st_size) != len) {
      st = Status::DataLoss("GET " + impl_->Describe(key) + ": received " +
                            std::to_string(fst.st_size) + " bytes, expected " + len);
    }
    std::string etag = StripQuotes(r->headers["etag"]);
    if (st.ok() && etag.size() == 32 && etag.find('-') == std::string::npos &&
        etag != md5.FinishHex()) {
      st = Status::DataLoss("GET " + impl_->Describe(key) +
                            ": the MD5 of the received bytes does not match ETag " + etag);
    }
  }
  if (st.ok() && ::fsync(fd) != 0) st = Status::Internal("cannot fsync " + tmp);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), local_path.c_str()) != 0) {
    st = Status::Internal("cannot rename to " + local_path + ": " + std::strerror(errno));
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

Result<ObjectInfo> S3Store::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  HttpRequest req;
  req.method = "HEAD";
  req.raw_path = impl_->ObjectPath(key);
  auto r = impl_->Call(req, "HEAD " + impl_->Describe(key));
  if (!r.ok()) {
    if (r.status().IsNotFound()) return Status::NotFound("no object " + impl_->Describe(key));
    return r.status();
  }
  ObjectInfo info;
  info.key = key;
  info.size = std::strtoull(r->headers["content-length"].c_str(), nullptr, 10);
  info.etag = StripQuotes(r->headers["etag"]);
  info.mtime_millis = ParseHttpDateMillis(r->headers["last-modified"]);
  return info;
}

Result<std::vector<ObjectInfo>> S3Store::List(const std::string& prefix) {
  std::string full = impl_->prefix.empty() ? prefix : impl_->prefix + "/" + prefix;
  std::vector<ObjectInfo> out;
  std::string token;
  for (;;) {
    HttpRequest req;
    req.method = "GET";
    req.raw_path = "/" + impl_->bucket;
    req.raw_query = "list-type=2&prefix=" + sigv4::UriEncode(full, true);
    if (!token.empty()) req.raw_query += "&continuation-token=" + sigv4::UriEncode(token, true);
    ASSIGN_OR_RETURN(HttpResponse r, impl_->Call(req, "LIST " + impl_->Describe(prefix)));
    for (std::string_view c : XmlElements(r.body, "Contents")) {
      ObjectInfo info;
      std::string key = XmlText(c, "Key");
      info.key =
          impl_->prefix.empty() ? key : key.substr(std::min(key.size(), impl_->prefix.size() + 1));
      info.size = std::strtoull(XmlText(c, "Size").c_str(), nullptr, 10);
      info.etag = StripQuotes(XmlText(c, "ETag"));
      info.mtime_millis = ParseIsoMillis(XmlText(c, "LastModified"));
      out.push_back(std::move(info));
    }
    if (XmlText(r.body, "IsTruncated") != "true") break;
    token = XmlText(r.body, "NextContinuationToken");
    if (token.empty()) break;
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

Status S3Store::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  HttpRequest req;
  req.method = "DELETE";
  req.raw_path = impl_->ObjectPath(key);
  auto r = impl_->Call(req, "DELETE " + impl_->Describe(key));
  if (!r.ok() && !r.status().IsNotFound()) return r.status();
  return Status::Ok();
}

}  // namespace lote::objstore
