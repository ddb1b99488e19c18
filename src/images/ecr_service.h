// The ECR API subset lote answers (json protocol, target prefix
// AmazonEC2ContainerRegistry_V20150921, SigV4 service "ecr") over the local
// registry's real content (registry_client.h): GetAuthorizationToken,
// CreateRepository, DescribeRepositories, DeleteRepository, ListImages,
// DescribeImages, BatchDeleteImage. Shapes and error codes follow botocore's
// model ecr/2015-09-21; docs/api.md lists what differs.
//
// Repositories created through the API are remembered in
// <dir>/repositories.json (so an empty one still lists); a repository the
// registry holds images of (pushed without CreateRepository) lists too.
// repositoryUri is ECR's form, <account>.dkr.ecr.<region>.amazonaws.com/<name>,
// which container mode resolves to the local registry (exec/container.h).
// Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "api/errors.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"
#include "images/registry_client.h"

namespace lote::images {

struct EcrOptions {
  std::string dir;       // <home>/registry
  std::string address;   // the registry's "127.0.0.1:PORT"
  std::string password;  // of user AWS
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  const Clock* clock = SystemClock::Default();
};

class EcrService {
 public:
  explicit EcrService(EcrOptions options);

  static const std::vector<std::string>& Operations();
  Result<Json> Call(const std::string& operation, const Json& request);

 private:
  Result<Json> GetAuthorizationToken(const Json& request);
  Result<Json> CreateRepository(const Json& request);
  Result<Json> DescribeRepositories(const Json& request);
  Result<Json> DeleteRepository(const Json& request);
  Result<Json> ListImages(const Json& request);
  Result<Json> DescribeImages(const Json& request);
  Result<Json> BatchDeleteImage(const Json& request);

  // The repository's record (404-shaped error when it does not exist).
  Result<Json> FindRepository(const std::string& name);
  Json RepositoryJson(const std::string& name, int64_t created_ms) const;
  Result<Json> LoadRepositories() const;             // mu_ held
  Status SaveRepositories(const Json& repos) const;  // mu_ held
  // The digests of the repository's tagged images, each with its tags.
  Result<std::vector<std::pair<ManifestInfo, std::vector<std::string>>>> Images(
      const std::string& repository) const;
  Result<ManifestInfo> Resolve(const std::string& repository, const Json& image_id) const;
  double PushedAt(const std::string& repository, const std::string& digest) const;
  std::string NotFoundMessage(const std::string& name) const;

  EcrOptions options_;
  RegistryClient client_;
  std::mutex mu_;  // repositories.json
};

// ECR's error codes: RepositoryNotFoundException, ImageNotFoundException,
// RepositoryAlreadyExistsException, RepositoryNotEmptyException,
// InvalidParameterException (400); ServerException (500).
api::ApiError EcrErrorFromStatus(const Status& status);

}  // namespace lote::images
