#include "images/registry_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/crypto.h"
#include "common/json.h"

namespace lote::images {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

constexpr const char* kManifestTypes =
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json";

Result<Json> ParseJson(const std::string& body, const std::string& what) {
  try {
    return Json::parse(body);
  } catch (const Json::exception& e) {
    return Status::Unavailable("the registry's " + what + " is not JSON: " + e.what());
  }
}

Status Unexpected(const RegistryClient::Response& r, const std::string& what) {
  return Status::Unavailable("the registry answered " + std::to_string(r.status) + " to " + what +
                             ": " + r.body.substr(0, 300));
}

}  // namespace

RegistryClient::RegistryClient(std::string address, std::string user, std::string password) {
  size_t colon = address.rfind(':');
  host_ = address.substr(0, colon);
  port_ = address.substr(colon + 1);
  authorization_ = "Basic " + Base64Encode(user + ":" + password);
}

Result<RegistryClient::Response> RegistryClient::Send(const std::string& method,
                                                      const std::string& target) const {
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(resolver.resolve(host_, port_));
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, host_ + ":" + port_);
    req.set(http::field::authorization, authorization_);
    req.set(http::field::accept, kManifestTypes);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    if (method == "HEAD") parser.skip(true);
    http::read(stream, buffer, parser);
    const auto& res = parser.get();
    Response out;
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    out.digest = std::string(res["Docker-Content-Digest"]);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return out;
  } catch (const std::exception& e) {
    return Status::Unavailable("the image registry at " + host_ + ":" + port_ +
                               " cannot be reached: " + e.what());
  }
}

Result<std::vector<std::string>> RegistryClient::Catalog() const {
  constexpr size_t kPage = 1000;  // the most distribution answers at once
  std::vector<std::string> out;
  while (true) {
    std::string target = "/v2/_catalog?n=" + std::to_string(kPage);
    if (!out.empty()) target += "&last=" + out.back();
    ASSIGN_OR_RETURN(Response r, Send("GET", target));
    if (r.status != 200) return Unexpected(r, "the catalog");
    ASSIGN_OR_RETURN(Json j, ParseJson(r.body, "catalog"));
    size_t got = 0;
    if (j.contains("repositories") && j["repositories"].is_array())
      for (const Json& name : j["repositories"]) {
        out.push_back(name.get<std::string>());
        ++got;
      }
    if (got < kPage) return out;
  }
}

Result<std::vector<std::string>> RegistryClient::Tags(const std::string& repository) const {
  ASSIGN_OR_RETURN(Response r, Send("GET", "/v2/" + repository + "/tags/list"));
  if (r.status == 404) return std::vector<std::string>{};
  if (r.status != 200) return Unexpected(r, "the tags of " + repository);
  ASSIGN_OR_RETURN(Json j, ParseJson(r.body, "tag list"));
  std::vector<std::string> out;
  if (j.contains("tags") && j["tags"].is_array())
    for (const Json& tag : j["tags"]) out.push_back(tag.get<std::string>());
  return out;
}

Result<ManifestInfo> RegistryClient::Manifest(const std::string& repository,
                                              const std::string& reference) const {
  ASSIGN_OR_RETURN(Response r, Send("GET", "/v2/" + repository + "/manifests/" + reference));
  if (r.status == 404) return Status::NotFound("no manifest " + reference + " in " + repository);
  if (r.status != 200) return Unexpected(r, "manifest " + reference + " of " + repository);
  ASSIGN_OR_RETURN(Json j, ParseJson(r.body, "manifest"));
  ManifestInfo info;
  info.digest = r.digest.empty() ? "sha256:" + Sha256Hex(r.body) : r.digest;
  info.media_type = j.value("mediaType", std::string());
  if (j.contains("config") && j["config"].is_object())
    info.size_bytes += j["config"].value("size", int64_t{0});
  if (j.contains("layers") && j["layers"].is_array())
    for (const Json& layer : j["layers"]) info.size_bytes += layer.value("size", int64_t{0});
  return info;
}

Status RegistryClient::DeleteManifest(const std::string& repository,
                                      const std::string& digest) const {
  ASSIGN_OR_RETURN(Response r, Send("DELETE", "/v2/" + repository + "/manifests/" + digest));
  if (r.status == 202 || r.status == 200) return Status::Ok();
  if (r.status == 404) return Status::NotFound("no manifest " + digest + " in " + repository);
  return Unexpected(r, "deleting " + digest + " of " + repository);
}

}  // namespace lote::images
