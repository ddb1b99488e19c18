#include "engine/checkpoint_tools.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <utility>

#include "common/crypto.h"
#include "common/files.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_shards.h"
#include "engine/param_layout.h"

namespace lote::engine {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifest = "manifest.json";
constexpr const char* kFormat = "lote-checkpoint-1";

std::string TrimSlashes(std::string_view uri) {
  std::string s(uri);
  while (s.size() > 1 && s.back() == '/' && !s.ends_with("://")) s.pop_back();
  return s;
}

// The parent of a URI or path ("s3://b/job/step_4" -> "s3://b/job").
std::string ParentUri(const std::string& uri) {
  const size_t slash = uri.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return uri.substr(0, slash);
}

bool ParseStepName(std::string_view name, int64_t* step) {
  static const std::regex kStep("step_([0-9]{1,18})");
  std::cmatch m;
  if (!std::regex_match(name.begin(), name.end(), m, kStep)) return false;
  *step = std::stoll(m[1].str());
  return true;
}

Result<std::unique_ptr<objstore::ObjectStore>> OpenStore(const OpenStoreFn& open_store,
                                                         const std::string& uri) {
  if (open_store) return open_store(uri);
  return objstore::OpenObjectStore(uri);
}

// A file:// root that does not exist is NotFound (opening the store would create it).
Status CheckLocalRootExists(const std::string& uri) {
  ASSIGN_OR_RETURN(objstore::Uri u, objstore::ParseUri(uri));
  if (u.scheme != "file") return Status::Ok();
  std::error_code ec;
  if (!fs::is_directory(u.key, ec)) {
    return Status::NotFound(fmt::format("no checkpoints at {}: the folder does not exist", uri));
  }
  return Status::Ok();
}

int64_t IntOr(const Json& j, const char* key, int64_t fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return fallback;
  return j[key].get<int64_t>();
}

// Fills the manifest-dependent fields of `s` from manifest text and the folder's
// objects (file name -> size).
void Evaluate(const std::string& text, const std::map<std::string, uint64_t>& sizes,
              CheckpointSummary* s) {
  auto parsed = ParseJson(text);
  if (!parsed.ok() || !parsed->is_object()) {
    s->problem = "manifest.json is not a JSON object";
    return;
  }
  const Json& m = *parsed;
  if (m.contains("created_at") && m["created_at"].is_string()) {
    s->created_at = m["created_at"].get<std::string>();
  }
  if (m.contains("layout")) {
    s->tensor_parallel = static_cast<int>(IntOr(m["layout"], "tensor_parallel", 0));
    s->data_parallel = static_cast<int>(IntOr(m["layout"], "data_parallel", 0));
  }
  if (!m.contains("format") || m["format"] != kFormat) {
    s->problem = fmt::format("manifest.json: format is not \"{}\"", kFormat);
    return;
  }
  if (IntOr(m, "step", -1) != s->step) {
    s->problem =
        fmt::format("manifest.json says step {}, the folder is {}", IntOr(m, "step", -1), s->name);
    return;
  }
  if (s->tensor_parallel < 1 || s->data_parallel < 1) {
    s->problem = "manifest.json: layout needs tensor_parallel and data_parallel >= 1";
    return;
  }
  if (!m.contains("files") || !m["files"].is_object()) {
    s->problem = "manifest.json has no \"files\" object";
    return;
  }
  const Json& files = m["files"];
  for (int r = 0; r < s->tensor_parallel; ++r) {
    if (!files.contains(ModelShardFile(r))) {
      s->problem = fmt::format("manifest.json does not list {}", ModelShardFile(r));
      return;
    }
  }
  for (const auto& [name, entry] : files.items()) {
    const int64_t bytes = IntOr(entry, "bytes", -1);
    if (bytes < 0) {
      s->problem = fmt::format("manifest.json: {} has no \"bytes\"", name);
      return;
    }
    auto it = sizes.find(name);
    if (it == sizes.end()) {
      s->problem = fmt::format("{} is missing", name);
      return;
    }
    if (it->second != static_cast<uint64_t>(bytes)) {
      s->problem = fmt::format("{} has {} bytes, manifest.json says {}", name, it->second, bytes);
      return;
    }
  }
  s->complete = true;
}

// Without a manifest: the layout as the file names show it.
void GuessLayout(const std::map<std::string, uint64_t>& sizes, CheckpointSummary* s) {
  static const std::regex kModel("model-tp([0-9]+)\\.safetensors");
  static const std::regex kOptim("optim-tp([0-9]+)-dp([0-9]+)\\.safetensors");
  int tp = 0, dp = 0;
  for (const auto& [name, size] : sizes) {
    std::smatch m;
    if (std::regex_match(name, m, kModel)) tp = std::max(tp, std::stoi(m[1].str()) + 1);
    if (std::regex_match(name, m, kOptim)) {
      tp = std::max(tp, std::stoi(m[1].str()) + 1);
      dp = std::max(dp, std::stoi(m[2].str()) + 1);
    }
  }
  s->tensor_parallel = tp;
  s->data_parallel = dp;
}

}  // namespace

Json CheckpointSummary::ToJson() const {
  Json j{{"uri", uri},
         {"name", name},
         {"step", step},
         {"bytes", total_bytes},
         {"objects", objects},
         {"complete", complete},
         {"tensor_parallel", tensor_parallel},
         {"data_parallel", data_parallel}};
  if (!problem.empty()) j["problem"] = problem;
  if (!created_at.empty()) j["created_at"] = created_at;
  return j;
}

std::string ResolveJobUri(std::string_view arg, std::string_view base) {
  if (!base.empty() && arg.find('/') == std::string_view::npos) {
    std::string job(arg.substr(0, arg.find('#')));
    return objstore::JoinKey(TrimSlashes(base), job);
  }
  return TrimSlashes(arg);
}

bool IsStepFolder(std::string_view uri, int64_t* step) {
  const std::string s = TrimSlashes(uri);
  const size_t slash = s.rfind('/');
  const std::string last = slash == std::string::npos ? s : s.substr(slash + 1);
  return ParseStepName(last, step);
}

Result<std::vector<CheckpointSummary>> ListCheckpoints(std::string_view uri_in,
                                                       const OpenStoreFn& open_store) {
  std::string uri = TrimSlashes(uri_in);
  int64_t only_step = -1;
  std::string job_uri = uri;
  if (IsStepFolder(uri, &only_step)) job_uri = ParentUri(uri);
  RETURN_IF_ERROR(CheckLocalRootExists(only_step >= 0 ? uri : job_uri));
  ASSIGN_OR_RETURN(auto store, OpenStore(open_store, job_uri));
  const std::string prefix =
      only_step >= 0
          ? uri.substr(uri.rfind('/') == std::string::npos ? 0 : uri.rfind('/') + 1) + "/"
          : "";
  auto listed = store->List(prefix);
  if (!listed.ok()) {
    return Status(listed.status().code(),
                  fmt::format("cannot list {}: {}", uri, listed.status().message()));
  }
  if (listed->empty()) {
    return Status::NotFound(fmt::format("no checkpoints at {}: nothing is stored there", uri));
  }
  // step folder name -> (file name -> size)
  std::map<std::string, std::map<std::string, uint64_t>> folders;
  for (const objstore::ObjectInfo& o : *listed) {
    const size_t slash = o.key.find('/');
    if (slash == std::string::npos) continue;
    int64_t step = 0;
    const std::string folder = o.key.substr(0, slash);
    if (!ParseStepName(folder, &step)) continue;
    folders[folder][o.key.substr(slash + 1)] = o.size;
  }
  std::vector<CheckpointSummary> out;
  for (const auto& [folder, sizes] : folders) {
    CheckpointSummary s;
    s.name = folder;
    ParseStepName(folder, &s.step);
    s.uri = objstore::JoinKey(job_uri, folder);
    s.objects = static_cast<int64_t>(sizes.size());
    for (const auto& [name, size] : sizes) s.total_bytes += size;
    if (sizes.count(kManifest) == 0) {
      s.problem = "no manifest.json (not finished, or its writer died)";
      GuessLayout(sizes, &s);
    } else {
      auto text = store->GetBytes(folder + "/" + kManifest);
      if (!text.ok()) {
        s.problem = "cannot read manifest.json: " + text.status().message();
      } else {
        Evaluate(*text, sizes, &s);
      }
      if (s.tensor_parallel == 0) GuessLayout(sizes, &s);
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointSummary& a, const CheckpointSummary& b) { return a.step < b.step; });
  return out;
}

Result<std::string> Sha256File(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::NotFound(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  Sha256Hasher hasher;
  std::vector<char> buf(4 << 20);
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return Status::Unavailable(fmt::format("cannot read {}: {}", path, std::strerror(e)));
    }
    if (n == 0) break;
    hasher.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (size != nullptr) *size = total;
  return hasher.FinishHex();
}

Status AssembleModelShards(const LlamaConfig& config,
                           const std::vector<const SafetensorsReader*>& shards,
                           const std::vector<std::string>& names, std::vector<float>* params) {
  ASSIGN_OR_RETURN(ModelShards model, ModelShards::Open(config, shards, names));
  const ParamLayout layout(config);
  params->assign(static_cast<size_t>(layout.total()), 0.0f);
  for (const TensorSpec& spec : layout.tensors()) {
    RETURN_IF_ERROR(model.Read(spec, params->data() + spec.offset, /*check_replicas=*/true));
  }
  return Status::Ok();
}

namespace {

// model.safetensors of the whole model, written tensor by tensor from the shards (one
// tensor in memory at a time), with SaveWeights' header and metadata.
Status WriteWholeModel(const LlamaConfig& config, ModelShards* model, const std::string& path,
                       DType dtype) {
  const ParamLayout layout(config);
  std::vector<TensorHeader> headers;
  int64_t largest = 0;
  for (const TensorSpec& spec : layout.tensors()) {
    headers.push_back({spec.name, spec.shape});
    largest = std::max(largest, spec.numel);
  }
  ASSIGN_OR_RETURN(
      auto writer,
      SafetensorsWriter::Create(path, headers, {{"format", "pt"}, {"producer", "lote"}}, dtype));
  std::vector<float> tensor(static_cast<size_t>(largest));
  for (const TensorSpec& spec : layout.tensors()) {
    RETURN_IF_ERROR(model->Read(spec, tensor.data(), /*check_replicas=*/true));
    RETURN_IF_ERROR(writer->Append(tensor.data(), spec.numel));
  }
  return writer->Finish();
}

}  // namespace

Result<ChosenCheckpoint> ChosenCheckpoint::Open(std::string_view uri_in,
                                                const OpenStoreFn& open_store,
                                                const std::string& work_dir) {
  const std::string uri = TrimSlashes(uri_in);
  int64_t step = 0;
  const bool one = IsStepFolder(uri, &step);
  ASSIGN_OR_RETURN(std::vector<CheckpointSummary> all, ListCheckpoints(uri, open_store));
  const CheckpointSummary* chosen = nullptr;
  for (const CheckpointSummary& s : all) {
    if (s.complete) chosen = &s;
  }
  if (chosen == nullptr) {
    if (one && !all.empty()) {
      return Status::NotFound(
          fmt::format("checkpoint {} is incomplete: {}", uri, all.front().problem));
    }
    std::string why;
    for (const CheckpointSummary& s : all) why += fmt::format("; {}: {}", s.name, s.problem);
    return Status::NotFound(
        fmt::format("no complete checkpoint under {} ({} incomplete{})", uri, all.size(), why));
  }
  ChosenCheckpoint c;
  c.summary_ = *chosen;
  ASSIGN_OR_RETURN(c.store_,
                   one ? OpenStore(open_store, ParentUri(uri)) : OpenStore(open_store, uri));
  c.folder_ = chosen->name + "/";
  ASSIGN_OR_RETURN(std::string text, c.store_->GetBytes(c.folder_ + kManifest));
  ASSIGN_OR_RETURN(c.manifest_, ParseJson(text));
  if (!c.manifest_.contains("config") || !c.manifest_["config"].is_object()) {
    return Status::InvalidArgument(
        fmt::format("{}/manifest.json has no \"config\" object", chosen->uri));
  }
  auto config = LlamaConfig::FromJson(c.manifest_["config"]);
  if (!config.ok()) {
    return Status::InvalidArgument(
        fmt::format("{}/manifest.json: config: {}", chosen->uri, config.status().message()));
  }
  c.config_ = *config;
  ASSIGN_OR_RETURN(objstore::Uri parsed, objstore::ParseUri(chosen->uri));
  if (parsed.scheme == "file") {
    c.local_dir_ = parsed.key;
  } else {
    RETURN_IF_ERROR(MakeDirs(work_dir));
    c.local_dir_ = work_dir + "/.lote-checkpoint-" + HexEncode(RandomBytes(6));
    RETURN_IF_ERROR(MakeDirs(c.local_dir_));
    c.staging_ = std::make_unique<DirGuard>(c.local_dir_);
  }
  return c;
}

Result<const SafetensorsReader*> ChosenCheckpoint::Shard(
    const std::string& name, const std::function<void(std::string_view)>& log) {
  const std::string& uri = summary_.uri;
  const Json& entry = manifest_["files"][name];
  const std::string path = local_dir_ + "/" + name;
  if (staging_ != nullptr) {
    if (log) log(fmt::format("downloading {}", name));
    RETURN_IF_ERROR(store_->GetFile(folder_ + name, path));
  }
  uint64_t size = 0;
  ASSIGN_OR_RETURN(std::string sha, Sha256File(path, &size));
  const int64_t want_bytes = IntOr(entry, "bytes", -1);
  const std::string want_sha = entry.contains("sha256") && entry["sha256"].is_string()
                                   ? entry["sha256"].get<std::string>()
                                   : "";
  if (static_cast<int64_t>(size) != want_bytes) {
    return Status::DataLoss(
        fmt::format("{}/{} has {} bytes, manifest.json says {}", uri, name, size, want_bytes));
  }
  if (sha != want_sha) {
    return Status::DataLoss(fmt::format("{}/{} is corrupt: sha256 {}, manifest.json says {}", uri,
                                        name, sha, want_sha.empty() ? "(none)" : want_sha));
  }
  auto reader = SafetensorsReader::Open(path);
  if (!reader.ok()) {
    return Status(reader.status().code(),
                  fmt::format("{}/{}: {}", uri, name, reader.status().message()));
  }
  readers_.push_back(std::move(*reader));
  return readers_.back().get();
}

Result<ModelShards> ChosenCheckpoint::OpenModel(const std::function<void(std::string_view)>& log) {
  std::vector<const SafetensorsReader*> views;
  std::vector<std::string> names;
  for (int r = 0; r < summary_.tensor_parallel; ++r) {
    ASSIGN_OR_RETURN(const SafetensorsReader* reader, Shard(ModelShardFile(r), log));
    views.push_back(reader);
    names.push_back(ModelShardFile(r));
  }
  return ModelShards::Open(config_, views, names);
}

Result<ExportResult> ExportCheckpoint(std::string_view uri, const ExportOptions& options) {
  if (options.output_dir.empty()) return Status::InvalidArgument("give an output folder");
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  ASSIGN_OR_RETURN(ChosenCheckpoint chosen,
                   ChosenCheckpoint::Open(uri, options.open_store, options.output_dir));
  ExportResult result;
  result.checkpoint_uri = chosen.summary().uri;
  result.step = chosen.summary().step;
  result.tensor_parallel = chosen.summary().tensor_parallel;
  log(fmt::format("exporting {} (step {})", result.checkpoint_uri, result.step));
  RETURN_IF_ERROR(MakeDirs(options.output_dir));
  ASSIGN_OR_RETURN(ModelShards model, chosen.OpenModel(options.log));
  const ParamLayout layout(chosen.config());
  result.tensors = static_cast<int64_t>(layout.tensors().size());
  result.parameters = layout.total();
  result.model_path = options.output_dir + "/model.safetensors";
  result.config_path = options.output_dir + "/config.json";
  RETURN_IF_ERROR(WriteWholeModel(chosen.config(), &model, result.model_path, options.dtype));
  Json config = chosen.manifest()["config"];
  if (options.dtype == DType::kBF16) config["torch_dtype"] = "bfloat16";  // else as trained
  RETURN_IF_ERROR(WriteFileAtomic(result.config_path, config.dump(2) + "\n"));
  log(fmt::format("wrote {} ({} tensors, {} parameters) and {}", result.model_path, result.tensors,
                  result.parameters, result.config_path));
  return result;
}

}  // namespace lote::engine
