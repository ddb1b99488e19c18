// SSM Parameter Store: String, StringList and SecureString parameters
// (SecureString values encrypted with AES-256-GCM under the server's secret
// key; never stored in plain text), the public ECS-optimized AMI names, and
// the values job secrets resolve to. Requests and answers are the SSM json
// protocol's shapes.
#include <algorithm>
#include <cctype>

#include "common/crypto.h"
#include "common/ids.h"
#include "control/control_plane.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {

constexpr size_t kMaxParameters = 10000;
constexpr size_t kMaxValueBytes = 8192;  // AWS's advanced tier; standard is 4096
constexpr const char* kPublicAmiPrefix = "/aws/service/ecs/optimized-ami/";

std::string Str(const Json& request, const char* key) {
  auto it = request.find(key);
  return it != request.end() && it->is_string() ? it->get<std::string>() : "";
}

Status ValidateParameterName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("Name is required");
  if (name.size() > 2048) return Status::InvalidArgument("Name is longer than 2048 characters");
  std::string lower = name.substr(name[0] == '/' ? 1 : 0);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower.rfind("aws", 0) == 0 || lower.rfind("ssm", 0) == 0)
    return Status::InvalidArgument(
        "Parameter name: can't be prefixed with \"aws\" or \"ssm\" (case-insensitive).");
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("_.-/").find(c) == std::string::npos)
      return Status::InvalidArgument("parameter name '" + name +
                                     "' may hold only letters, digits and _ . - /");
  }
  return Status::Ok();
}

}  // namespace

std::string ControlPlane::PublicAmiId() const {
  // A stable id for "what lote's nodes run": this host (process runtime) or
  // the job's own container image. No machine image is booted.
  return "ami-" + Sha256Hex("lote-host-image").substr(0, 17);
}

std::string ControlPlane::ParameterArn(const std::string& name) const {
  return "arn:aws:ssm:" + config_.region + ":" + config_.account_id + ":parameter" +
         (name[0] == '/' ? "" : "/") + name;
}

Result<Json> ControlPlane::PublicParameter(const std::string& name) const {
  if (name.rfind(kPublicAmiPrefix, 0) != 0 || name.find("/recommended") == std::string::npos)
    return Status::NotFound("Parameter " + name + " not found.");
  const std::string id = PublicAmiId();
  Json value = {
      {"image_id", id}, {"image_name", "lote-host"}, {"os", "Linux"}, {"schema_version", 1}};
  const bool field = name.size() > 9 && name.compare(name.size() - 9, 9, "/image_id") == 0;
  return Json{{"Name", name},
              {"Type", "String"},
              {"Value", field ? id : value.dump()},
              {"Version", 1},
              {"LastModifiedDate", 0},
              {"ARN", "arn:aws:ssm:" + config_.region + "::parameter" + name},
              {"DataType", field ? "aws:ec2:image" : "text"}};
}

Result<Json> ControlPlane::ParameterAnswerLocked(const Json& doc, bool decrypt) const {
  Json out = {{"Name", doc["Name"]},       {"Type", doc["Type"]},
              {"Version", doc["Version"]}, {"LastModifiedDate", doc["LastModifiedDate"]},
              {"ARN", doc["ARN"]},         {"DataType", doc.value("DataType", "text")}};
  if (doc["Type"] == "SecureString") {
    if (decrypt) {
      ASSIGN_OR_RETURN(std::string plain,
                       OpenAes256Gcm(config_.secret_key, doc["Ciphertext"].get<std::string>()));
      out["Value"] = plain;
    } else {
      out["Value"] = doc["Ciphertext"];
    }
  } else {
    out["Value"] = doc["Value"];
  }
  return out;
}

Result<Json> ControlPlane::PutParameter(const Json& request) {
  const std::string name = Str(request, "Name");
  RETURN_IF_ERROR(ValidateParameterName(name));
  if (!request.contains("Value") || !request["Value"].is_string())
    return Status::InvalidArgument("Value is required");
  const std::string value = request["Value"];
  if (value.empty()) return Status::InvalidArgument("Value must not be empty");
  if (value.size() > kMaxValueBytes)
    return Status::InvalidArgument("Value is longer than 8192 bytes");
  std::string type = Str(request, "Type");
  const bool overwrite = request.value("Overwrite", false);
  const int64_t now = clock_->NowMillis();
  std::unique_lock<std::mutex> lock(mu_);
  auto it = ssm_parameters_.find(name);
  if (it != ssm_parameters_.end() && !overwrite)
    return Status::AlreadyExists(
        "The parameter already exists. To overwrite this value, set the "
        "overwrite option in the request to true.");
  if (type.empty() && it != ssm_parameters_.end()) type = it->second["Type"];
  if (type.empty()) return Status::InvalidArgument("Type is required for a new parameter");
  RETURN_IF_ERROR(ExpectEnum(type, "Type", {"String", "StringList", "SecureString"}));
  if (it == ssm_parameters_.end() && ssm_parameters_.size() >= kMaxParameters)
    return Status::ResourceExhausted("this server holds at most 10000 parameters");
  const int64_t version =
      it == ssm_parameters_.end() ? 1 : it->second["Version"].get<int64_t>() + 1;
  Json doc = {{"Name", name},
              {"Type", type},
              {"Version", version},
              {"LastModifiedDate", static_cast<double>(now) / 1000.0},
              {"ARN", ParameterArn(name)},
              {"DataType", Str(request, "DataType").empty() ? "text" : Str(request, "DataType")},
              {"Description", Str(request, "Description")},
              {"Tier", "Standard"}};
  if (type == "SecureString") {
    if (config_.secret_key.size() != 32)
      return Status::FailedPrecondition(
          "this server has no secret key, so it stores no SecureString");
    ASSIGN_OR_RETURN(std::string sealed, SealAes256Gcm(config_.secret_key, value));
    doc["Ciphertext"] = sealed;
    doc["KeyId"] = Str(request, "KeyId").empty() ? "alias/aws/ssm" : Str(request, "KeyId");
  } else {
    doc["Value"] = value;
  }
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kSsmParameter, doc, doc["ARN"], name, 0);
  ssm_parameters_[name] = doc;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"Version", version}, {"Tier", "Standard"}};
}

Result<Json> ControlPlane::GetParameterLocked(std::string name, bool decrypt) const {
  std::optional<int64_t> version;
  if (size_t colon = name.rfind(':'); colon != std::string::npos && name.rfind("arn:", 0) != 0) {
    version = std::atoll(name.c_str() + colon + 1);
    name = name.substr(0, colon);
  }
  if (name.rfind("arn:aws:ssm:", 0) == 0) {
    size_t at = name.find(":parameter");
    if (at == std::string::npos)
      return Status::InvalidArgument("'" + name + "' is not a parameter ARN");
    name = name.substr(at + 10);
  }
  if (name.rfind("/aws/", 0) == 0) return PublicParameter(name);
  auto it = ssm_parameters_.find(name);
  if (it == ssm_parameters_.end() && name.size() > 1 && name[0] == '/')
    it = ssm_parameters_.find(name.substr(1));  // an ARN's "/x" for the name "x"
  if (it == ssm_parameters_.end()) return Status::NotFound("Parameter " + name + " not found.");
  if (version && *version != it->second["Version"].get<int64_t>())
    return Status::FailedPrecondition("Systems Manager could not find version " +
                                      std::to_string(*version) + " of " + name +
                                      ". Verify the version and try again.");
  return ParameterAnswerLocked(it->second, decrypt);
}

Result<Json> ControlPlane::GetParameter(const Json& request) const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(
      Json p, GetParameterLocked(Str(request, "Name"), request.value("WithDecryption", false)));
  return Json{{"Parameter", p}};
}

Result<Json> ControlPlane::GetParameters(const Json& request) const {
  if (!request.contains("Names") || !request["Names"].is_array())
    return Status::InvalidArgument("Names is required (a list of parameter names)");
  std::lock_guard<std::mutex> lock(mu_);
  Json found = Json::array(), invalid = Json::array();
  for (const Json& n : request["Names"]) {
    Result<Json> p =
        GetParameterLocked(n.get<std::string>(), request.value("WithDecryption", false));
    if (p.ok()) {
      found.push_back(*p);
    } else if (p.status().IsNotFound() || p.status().code() == StatusCode::kFailedPrecondition) {
      invalid.push_back(n);
    } else {
      return p.status();
    }
  }
  return Json{{"Parameters", found}, {"InvalidParameters", invalid}};
}

Result<Json> ControlPlane::GetParametersByPath(const Json& request) const {
  std::string path = Str(request, "Path");
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("Path must start with /");
  if (path.back() != '/') path += '/';
  const bool recursive = request.value("Recursive", false);
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::array();
  for (const auto& [name, doc] : ssm_parameters_) {
    if (name.rfind(path, 0) != 0) continue;
    if (!recursive && name.find('/', path.size()) != std::string::npos) continue;
    ASSIGN_OR_RETURN(Json p, ParameterAnswerLocked(doc, request.value("WithDecryption", false)));
    out.push_back(p);
  }
  return Json{{"Parameters", out}};
}

Result<Json> ControlPlane::DeleteParameters(const Json& request) {
  std::vector<std::string> names;
  if (request.contains("Name")) names.push_back(Str(request, "Name"));
  if (request.contains("Names") && request["Names"].is_array())
    for (const Json& n : request["Names"]) names.push_back(n.get<std::string>());
  if (names.empty()) return Status::InvalidArgument("Name or Names is required");
  std::unique_lock<std::mutex> lock(mu_);
  Json deleted = Json::array(), invalid = Json::array();
  WriteBatch batch;
  for (const std::string& name : names) {
    auto it = ssm_parameters_.find(name);
    if (it == ssm_parameters_.end()) {
      invalid.push_back(name);
      continue;
    }
    batch.DeleteResource(ResourceKind::kSsmParameter, it->second["ARN"]);
    ssm_parameters_.erase(it);
    deleted.push_back(name);
  }
  if (request.contains("Name") && deleted.empty())
    return Status::NotFound("Parameter " + names.front() + " not found.");
  if (!batch.empty()) RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  if (request.contains("Name")) return Json::object();
  return Json{{"DeletedParameters", deleted}, {"InvalidParameters", invalid}};
}

Result<Json> ControlPlane::DescribeParameters(const Json& request) const {
  std::vector<std::string> names;  // ParameterFilters Key Name, Option Equals
  for (const Json& f : request.value("ParameterFilters", Json::array())) {
    if (f.value("Key", "") != "Name")
      return Status::InvalidArgument("lote filters parameters by Key Name only");
    for (const Json& v : f.value("Values", Json::array())) names.push_back(v.get<std::string>());
  }
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::array();
  for (const auto& [name, doc] : ssm_parameters_) {
    if (!names.empty() && std::find(names.begin(), names.end(), name) == names.end()) continue;
    Json d = {{"Name", name},
              {"Type", doc["Type"]},
              {"Version", doc["Version"]},
              {"LastModifiedDate", doc["LastModifiedDate"]},
              {"ARN", doc["ARN"]},
              {"Tier", "Standard"},
              {"DataType", doc.value("DataType", "text")}};
    if (!doc.value("Description", "").empty()) d["Description"] = doc["Description"];
    if (doc.contains("KeyId")) d["KeyId"] = doc["KeyId"];
    out.push_back(std::move(d));
  }
  return Json{{"Parameters", out}};
}

Result<std::string> ControlPlane::SecretValue(const std::string& value_from) const {
  if (value_from.rfind("arn:aws:secretsmanager:", 0) == 0)
    return Status::InvalidArgument(
        "secret valueFrom " + value_from +
        " is a Secrets Manager ARN; lote serves no Secrets Manager: store the value as an SSM "
        "SecureString parameter and name that parameter (or its ARN) in valueFrom");
  std::lock_guard<std::mutex> lock(mu_);
  Result<Json> p = GetParameterLocked(value_from, /*decrypt=*/true);
  if (!p.ok()) {
    return Status::InvalidArgument("secret valueFrom " + value_from + ": " + p.status().message());
  }
  return (*p)["Value"].get<std::string>();
}

}  // namespace lote::control
