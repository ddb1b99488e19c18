// A client of the local registry's HTTP API v2 (distribution 2.8): the
// catalog, a repository's tags, manifests by tag or digest, deletion by
// digest. Plain HTTP to a loopback address with basic auth (user AWS).
// Thread-safe (one connection per request).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::images {

struct ManifestInfo {
  std::string digest;      // "sha256:..." (Docker-Content-Digest)
  std::string media_type;  // the manifest's mediaType
  int64_t size_bytes = 0;  // config + layers, as pushed (compressed)
};

class RegistryClient {
 public:
  // `address`: "127.0.0.1:PORT".
  RegistryClient(std::string address, std::string user, std::string password);

  Result<std::vector<std::string>> Catalog() const;
  // A repository's tags; empty when it has none or the registry does not
  // know it.
  Result<std::vector<std::string>> Tags(const std::string& repository) const;
  // The manifest a tag or digest names; NotFound when there is none.
  Result<ManifestInfo> Manifest(const std::string& repository, const std::string& reference) const;
  // Deletes the manifest `digest` (and so every tag naming it); NotFound when
  // there is none.
  Status DeleteManifest(const std::string& repository, const std::string& digest) const;

  struct Response {
    int status = 0;
    std::string body;
    std::string digest;  // Docker-Content-Digest
  };
  Result<Response> Send(const std::string& method, const std::string& target) const;

 private:
  std::string host_;
  std::string port_;
  std::string authorization_;
};

}  // namespace lote::images
