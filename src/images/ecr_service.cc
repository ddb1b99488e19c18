#include "images/ecr_service.h"

#include <sys/stat.h>

#include <map>
#include <regex>

#include "common/crypto.h"
#include "common/files.h"

namespace lote::images {
namespace {

constexpr const char* kImageNotFound = "The image with imageId ";

Result<std::string> RepositoryName(const Json& request) {
  if (!request.contains("repositoryName") || !request["repositoryName"].is_string())
    return Status::InvalidArgument("repositoryName is required");
  std::string name = request["repositoryName"].get<std::string>();
  static const std::regex kName("(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*");
  if (name.size() < 2 || name.size() > 256 || !std::regex_match(name, kName))
    return Status::InvalidArgument(
        "Invalid parameter at 'repositoryName' failed to satisfy constraint: 'must satisfy "
        "regular expression '(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*' "
        "and length between 2 and 256'");
  return name;
}

std::string ImageIdText(const Json& id) {
  return "{imageDigest:'" + id.value("imageDigest", std::string()) + "', imageTag:'" +
         id.value("imageTag", std::string()) + "'}";
}

bool WantsUntaggedOnly(const Json& request) {
  return request.contains("filter") && request["filter"].is_object() &&
         request["filter"].value("tagStatus", std::string()) == "UNTAGGED";
}

}  // namespace

EcrService::EcrService(EcrOptions options)
    : options_(std::move(options)), client_(options_.address, "AWS", options_.password) {}

const std::vector<std::string>& EcrService::Operations() {
  static const std::vector<std::string> ops = {
      "GetAuthorizationToken", "CreateRepository", "DescribeRepositories",
      "DeleteRepository",      "ListImages",       "DescribeImages",
      "BatchDeleteImage"};
  return ops;
}

Result<Json> EcrService::Call(const std::string& op, const Json& request) {
  if (op == "GetAuthorizationToken") return GetAuthorizationToken(request);
  if (op == "CreateRepository") return CreateRepository(request);
  if (op == "DescribeRepositories") return DescribeRepositories(request);
  if (op == "DeleteRepository") return DeleteRepository(request);
  if (op == "ListImages") return ListImages(request);
  if (op == "DescribeImages") return DescribeImages(request);
  if (op == "BatchDeleteImage") return BatchDeleteImage(request);
  return Status::Unimplemented("lote does not implement ECR " + op);
}

std::string EcrService::NotFoundMessage(const std::string& name) const {
  return "The repository with name '" + name + "' does not exist in the registry with id '" +
         options_.account_id + "'";
}

Json EcrService::RepositoryJson(const std::string& name, int64_t created_ms) const {
  const std::string& a = options_.account_id;
  return {{"repositoryArn", "arn:aws:ecr:" + options_.region + ":" + a + ":repository/" + name},
          {"registryId", a},
          {"repositoryName", name},
          {"repositoryUri", a + ".dkr.ecr." + options_.region + ".amazonaws.com/" + name},
          {"createdAt", static_cast<double>(created_ms) / 1000.0},
          {"imageTagMutability", "MUTABLE"},
          {"imageScanningConfiguration", {{"scanOnPush", false}}},
          {"encryptionConfiguration", {{"encryptionType", "AES256"}}}};
}

Result<Json> EcrService::LoadRepositories() const {
  const std::string path = options_.dir + "/repositories.json";
  if (!FileExists(path)) return Json::object();
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    return Status::DataLoss(path + " is not JSON: " + e.what());
  }
}

Status EcrService::SaveRepositories(const Json& repos) const {
  return WriteFileAtomic(options_.dir + "/repositories.json", repos.dump(2) + "\n", 0600);
}

Result<Json> EcrService::FindRepository(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(Json repos, LoadRepositories());
    if (repos.contains(name)) return RepositoryJson(name, repos[name].value("createdAt", 0L));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> tags, client_.Tags(name));
  if (tags.empty()) return Status::NotFound(NotFoundMessage(name));
  return RepositoryJson(name, options_.clock->NowMillis());
}

Result<Json> EcrService::GetAuthorizationToken(const Json&) {
  const double expires = static_cast<double>(options_.clock->NowMillis()) / 1000.0 + 12 * 3600;
  return Json{{"authorizationData",
               Json::array({{{"authorizationToken", Base64Encode("AWS:" + options_.password)},
                             {"expiresAt", expires},
                             {"proxyEndpoint", "http://" + options_.address}}})}};
}

Result<Json> EcrService::CreateRepository(const Json& request) {
  ASSIGN_OR_RETURN(std::string name, RepositoryName(request));
  ASSIGN_OR_RETURN(std::vector<std::string> tags, client_.Tags(name));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Json repos, LoadRepositories());
  if (repos.contains(name) || !tags.empty())
    return Status::AlreadyExists("The repository with name '" + name +
                                 "' already exists in the registry with id '" +
                                 options_.account_id + "'");
  const int64_t now = options_.clock->NowMillis();
  repos[name] = {{"createdAt", now}};
  RETURN_IF_ERROR(SaveRepositories(repos));
  return Json{{"repository", RepositoryJson(name, now)}};
}

Result<Json> EcrService::DescribeRepositories(const Json& request) {
  Json out = Json::array();
  if (request.contains("repositoryNames") && request["repositoryNames"].is_array() &&
      !request["repositoryNames"].empty()) {
    for (const Json& n : request["repositoryNames"]) {
      ASSIGN_OR_RETURN(Json repo, FindRepository(n.get<std::string>()));
      out.push_back(std::move(repo));
    }
    return Json{{"repositories", out}};
  }
  std::map<std::string, int64_t> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(Json repos, LoadRepositories());
    for (const auto& [name, rec] : repos.items()) names[name] = rec.value("createdAt", 0L);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> catalog, client_.Catalog());
  for (const std::string& name : catalog) {
    if (names.count(name)) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> tags, client_.Tags(name));
    if (!tags.empty()) names[name] = options_.clock->NowMillis();
  }
  for (const auto& [name, created] : names) out.push_back(RepositoryJson(name, created));
  return Json{{"repositories", out}};
}

Result<std::vector<std::pair<ManifestInfo, std::vector<std::string>>>> EcrService::Images(
    const std::string& repository) const {
  ASSIGN_OR_RETURN(std::vector<std::string> tags, client_.Tags(repository));
  std::vector<std::pair<ManifestInfo, std::vector<std::string>>> out;
  std::map<std::string, size_t> by_digest;
  for (const std::string& tag : tags) {
    Result<ManifestInfo> m = client_.Manifest(repository, tag);
    if (m.status().code() == StatusCode::kNotFound) continue;  // deleted meanwhile
    RETURN_IF_ERROR(m.status());
    auto [it, added] = by_digest.emplace(m->digest, out.size());
    if (added) out.push_back({*m, {}});
    out[it->second].second.push_back(tag);
  }
  return out;
}

Result<ManifestInfo> EcrService::Resolve(const std::string& repository,
                                         const Json& image_id) const {
  std::string ref = image_id.value("imageDigest", std::string());
  const std::string tag = image_id.value("imageTag", std::string());
  if (ref.empty()) ref = tag;
  if (ref.empty()) return Status::InvalidArgument("an imageId needs imageDigest or imageTag");
  Result<ManifestInfo> m = client_.Manifest(repository, ref);
  if (m.status().code() == StatusCode::kNotFound)
    return Status::NotFound(kImageNotFound + ImageIdText(image_id) +
                            " does not exist within the repository with name '" + repository +
                            "' in the registry with id '" + options_.account_id + "'");
  return m;
}

double EcrService::PushedAt(const std::string& repository, const std::string& digest) const {
  const std::string hex = digest.substr(digest.find(':') + 1);
  const std::string link = options_.dir + "/data/docker/registry/v2/repositories/" + repository +
                           "/_manifests/revisions/sha256/" + hex + "/link";
  struct stat st {};
  if (::stat(link.c_str(), &st) != 0) return static_cast<double>(options_.clock->NowMillis()) / 1e3;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

Result<Json> EcrService::ListImages(const Json& request) {
  ASSIGN_OR_RETURN(std::string name, RepositoryName(request));
  RETURN_IF_ERROR(FindRepository(name).status());
  Json ids = Json::array();
  if (!WantsUntaggedOnly(request)) {
    ASSIGN_OR_RETURN(auto images, Images(name));
    for (const auto& [m, tags] : images)
      for (const std::string& tag : tags)
        ids.push_back({{"imageDigest", m.digest}, {"imageTag", tag}});
  }
  return Json{{"imageIds", ids}};
}

Result<Json> EcrService::DescribeImages(const Json& request) {
  ASSIGN_OR_RETURN(std::string name, RepositoryName(request));
  RETURN_IF_ERROR(FindRepository(name).status());
  ASSIGN_OR_RETURN(auto images, Images(name));
  if (request.contains("imageIds") && request["imageIds"].is_array()) {
    std::vector<std::pair<ManifestInfo, std::vector<std::string>>> chosen;
    for (const Json& id : request["imageIds"]) {
      ASSIGN_OR_RETURN(ManifestInfo m, Resolve(name, id));
      for (const auto& image : images)
        if (image.first.digest == m.digest) chosen.push_back(image);
    }
    images = std::move(chosen);
  } else if (WantsUntaggedOnly(request)) {
    images.clear();
  }
  Json details = Json::array();
  for (const auto& [m, tags] : images) {
    details.push_back({{"registryId", options_.account_id},
                       {"repositoryName", name},
                       {"imageDigest", m.digest},
                       {"imageTags", tags},
                       {"imageSizeInBytes", m.size_bytes},
                       {"imagePushedAt", PushedAt(name, m.digest)},
                       {"imageManifestMediaType", m.media_type}});
  }
  return Json{{"imageDetails", details}};
}

Result<Json> EcrService::BatchDeleteImage(const Json& request) {
  ASSIGN_OR_RETURN(std::string name, RepositoryName(request));
  if (!request.contains("imageIds") || !request["imageIds"].is_array())
    return Status::InvalidArgument("imageIds is required");
  RETURN_IF_ERROR(FindRepository(name).status());
  Json deleted = Json::array();
  Json failures = Json::array();
  for (const Json& id : request["imageIds"]) {
    Result<ManifestInfo> m = Resolve(name, id);
    Status st = m.ok() ? client_.DeleteManifest(name, m->digest) : m.status();
    if (st.code() == StatusCode::kNotFound) {
      failures.push_back({{"imageId", id},
                          {"failureCode", "ImageNotFound"},
                          {"failureReason", "Requested image not found"}});
      continue;
    }
    RETURN_IF_ERROR(st);
    Json done = id;
    done["imageDigest"] = m->digest;
    deleted.push_back(std::move(done));
  }
  return Json{{"imageIds", deleted}, {"failures", failures}};
}

Result<Json> EcrService::DeleteRepository(const Json& request) {
  ASSIGN_OR_RETURN(std::string name, RepositoryName(request));
  ASSIGN_OR_RETURN(Json repo, FindRepository(name));
  ASSIGN_OR_RETURN(auto images, Images(name));
  const bool force = request.value("force", false);
  if (!images.empty() && !force)
    return Status::FailedPrecondition("The repository with name '" + name +
                                      "' in registry with id '" + options_.account_id +
                                      "' cannot be deleted because it still contains images");
  for (const auto& image : images) {
    Status st = client_.DeleteManifest(name, image.first.digest);
    if (st.code() != StatusCode::kNotFound) RETURN_IF_ERROR(st);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Json repos, LoadRepositories());
  repos.erase(name);
  RETURN_IF_ERROR(SaveRepositories(repos));
  return Json{{"repository", repo}};
}

api::ApiError EcrErrorFromStatus(const Status& status) {
  const std::string& m = status.message();
  switch (status.code()) {
    case StatusCode::kNotFound:
      return {400,
              m.rfind(kImageNotFound, 0) == 0 ? "ImageNotFoundException"
                                              : "RepositoryNotFoundException",
              m};
    case StatusCode::kAlreadyExists:
      return {400, "RepositoryAlreadyExistsException", m};
    case StatusCode::kFailedPrecondition:
      return {400, "RepositoryNotEmptyException", m};
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented:
      return {400, "InvalidParameterException", m};
    default:
      return {500, "ServerException", m};
  }
}

}  // namespace lote::images
