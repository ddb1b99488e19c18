#include "engine/checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "common/clock.h"
#include "common/files.h"
#include "data/prepare.h"
#include "engine/checkpoint_shards.h"
#include "engine/communicator.h"
#include "engine/safetensors.h"
#include "objstore/objstore.h"

namespace lote::engine {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string DoneMarker(int rank) { return fmt::format("rank-{}.done", rank); }
std::string FailedMarker(int rank) { return fmt::format("rank-{}.failed", rank); }

// "step_12/..." -> 12; -1 when the key is not in a step folder.
int64_t StepOfKey(const std::string& key) {
  if (key.rfind("step_", 0) != 0) return -1;
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return -1;
  const std::string n = key.substr(5, slash - 5);
  if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(n);
}

Status WithRetries(const std::string& what, const std::function<Status()>& fn) {
  Status s;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    s = fn();
    if (s.ok()) return s;
    if (attempt < 3) std::this_thread::sleep_for(std::chrono::milliseconds(500 * attempt));
  }
  return Status(s.code(), fmt::format("{} failed after 3 attempts: {}", what, s.message()));
}

std::string SpoolDir(const std::string& tag) {
  std::error_code ec;
  std::string base = std::filesystem::temp_directory_path(ec).string();
  if (base.empty()) base = "/tmp";
  return fmt::format("{}/lote-ckpt-{}-{}", base, ::getpid(), tag);
}

std::map<std::string, std::string> FileMetadata(const ParamLayout& layout) {
  return {{"format", "pt"},
          {"producer", "lote"},
          {"tp_rank", std::to_string(layout.tp().rank)},
          {"tp_size", std::to_string(layout.tp().size)}};
}

}  // namespace

std::string ModelShardFile(int tp_rank) { return fmt::format("model-tp{}.safetensors", tp_rank); }

std::string OptimShardFile(int tp_rank, int dp_rank) {
  return fmt::format("optim-tp{}-dp{}.safetensors", tp_rank, dp_rank);
}

std::map<std::string, std::string> ModelShardMetadata(const ParamLayout& layout) {
  Json shards = Json::object();
  for (const TensorSpec& t : layout.tensors()) {
    shards[t.name] = {{"global_shape", t.global_shape},
                      {"split_dim", t.split_dim},
                      {"split_begin", t.split_begin}};
  }
  auto meta = FileMetadata(layout);
  meta["lote_shards"] = shards.dump();
  return meta;
}

std::map<std::string, std::string> OptimShardMetadata(const ParamLayout& layout, int dp_rank,
                                                      int dp, Range shard) {
  auto meta = FileMetadata(layout);
  meta["dp_rank"] = std::to_string(dp_rank);
  meta["dp_size"] = std::to_string(dp);
  meta["begin"] = std::to_string(shard.begin);
  meta["end"] = std::to_string(shard.end);
  return meta;
}

CheckpointWriter::CheckpointWriter(CheckpointOptions options, const LlamaConfig& config,
                                   const ParallelDims& dims)
    : opt_(std::move(options)), config_(config), dims_(dims) {}

Result<std::unique_ptr<CheckpointWriter>> CheckpointWriter::Create(CheckpointOptions options,
                                                                   const LlamaConfig& config,
                                                                   const ParallelDims& dims) {
  if (options.uri.empty()) return Status::InvalidArgument("--checkpoint-uri is empty");
  std::unique_ptr<CheckpointWriter> w(new CheckpointWriter(std::move(options), config, dims));
  w->job_root_ = objstore::JoinKey(w->opt_.uri, w->opt_.job_id);
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(w->job_root_));  // checks the URI early
  (void)store;
  w->spool_ = SpoolDir(fmt::format("rank{}", dims.rank()));
  ASSIGN_OR_RETURN(objstore::Uri root, objstore::ParseUri(w->job_root_));
  if (root.scheme == "file") w->local_root_ = root.key;
  RETURN_IF_ERROR(MakeDirs(w->spool_, 0700));
  return w;
}

CheckpointWriter::~CheckpointWriter() {
  if (worker_.joinable()) worker_.join();
  std::error_code ec;
  std::filesystem::remove_all(spool_, ec);
}

std::string CheckpointWriter::StepUri(int64_t step) const {
  return objstore::JoinKey(job_root_, fmt::format("step_{}", step));
}

Status CheckpointWriter::Wait() {
  if (worker_.joinable()) worker_.join();
  Status s = result_;
  result_ = Status::Ok();
  return s;
}

Status CheckpointWriter::Save(TrainState state) {
  ASSIGN_OR_RETURN(TrainState * buffer, Snapshot());
  *buffer = std::move(state);
  return Start();
}

Result<TrainState*> CheckpointWriter::Snapshot() {
  RETURN_IF_ERROR(Wait());  // at most one checkpoint in flight
  return &buffer_;
}

Status CheckpointWriter::Start() {
  worker_ = std::thread([this] { result_ = UploadOrMarkFailed(buffer_); });
  return Status::Ok();
}

// A failed upload leaves `rank-<r>.failed` (best effort: where even that cannot be
// written, rank 0 waits for this rank until wait_for_ranks) so that rank 0 does not
// wait for a marker that will never come.
Status CheckpointWriter::UploadOrMarkFailed(const TrainState& s) {
  Status result;
  if (inject_failure_.empty()) {
    result = Upload(s);
  } else {
    std::this_thread::sleep_until(inject_until_);  // every retry refused until then
    result = Status::Unavailable(inject_failure_);
    inject_failure_.clear();
  }
  if (result.ok()) return result;
  if (auto store = objstore::OpenObjectStore(job_root_); store.ok()) {
    const Json why{{"run", opt_.run}, {"error", result.ToString()}};
    (void)(*store)->PutBytes(fmt::format("step_{}/{}", s.step, FailedMarker(dims_.rank())),
                             why.dump());
  }
  return result;
}

// Rank 0: every rank's `.done` marker (their files' sizes and checksums, into
// `files`); Aborted as soon as a rank of this run says its upload failed.
Status CheckpointWriter::WaitForMarkers(objstore::ObjectStore* store, const std::string& step_dir,
                                        int64_t step, Json* files) {
  const auto deadline = SteadyClock::now() + opt_.wait_for_ranks;
  for (int r = 0; r < dims_.world(); ++r) {
    while (true) {
      Result<std::string> marker = store->GetBytes(step_dir + "/" + DoneMarker(r));
      if (marker.ok()) {
        Json j = Json::parse(*marker, nullptr, false);
        if (j.is_object()) {
          for (auto& [k, v] : j.items()) (*files)[k] = v;
          break;
        }
      } else if (!marker.status().IsNotFound()) {
        return marker.status();
      }
      if (Result<std::string> failed = store->GetBytes(step_dir + "/" + FailedMarker(r));
          failed.ok()) {
        Json j = Json::parse(*failed, nullptr, false);
        if (j.is_object() && j.value("run", "") == opt_.run)
          return Status::Unavailable(
              fmt::format("checkpoint {}: rank {} could not write its shards: {}", StepUri(step), r,
                          j.value("error", "")));
      }
      if (SteadyClock::now() > deadline) {
        return Status::DeadlineExceeded(
            fmt::format("checkpoint {}: rank {} never finished its upload", StepUri(step), r));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

Status CheckpointWriter::Upload(const TrainState& s) {
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(job_root_));
  const std::string step_dir = fmt::format("step_{}", s.step);
  const ParamLayout layout(config_, dims_.tensor_parallel());
  Json mine = Json::object();
  auto put = [&](const std::string& name, const std::vector<TensorToWrite>& tensors,
                 const std::map<std::string, std::string>& meta) -> Status {
    if (local_root_) {
      // file://: written in place (WriteSafetensors is atomic: temp file, fsync, rename).
      const std::string dir = *local_root_ + "/" + step_dir;
      RETURN_IF_ERROR(MakeDirs(dir));
      RETURN_IF_ERROR(WithRetries(fmt::format("writing {}/{}", StepUri(s.step), name), [&] {
        return WriteSafetensors(dir + "/" + name, tensors, meta);
      }));
      ASSIGN_OR_RETURN(auto hash, data::HashFile(dir + "/" + name));
      mine[name] = {{"bytes", hash.second}, {"sha256", hash.first}};
      return Status::Ok();
    }
    const std::string local = spool_ + "/" + name;
    RETURN_IF_ERROR(WriteSafetensors(local, tensors, meta));
    ASSIGN_OR_RETURN(auto hash, data::HashFile(local));
    RETURN_IF_ERROR(WithRetries(fmt::format("uploading {}/{}", StepUri(s.step), name),
                                [&] { return store->PutFile(step_dir + "/" + name, local); }));
    std::error_code ec;
    std::filesystem::remove(local, ec);
    mine[name] = {{"bytes", hash.second}, {"sha256", hash.first}};
    return Status::Ok();
  };
  if (dims_.dp_rank() == 0) {
    std::vector<TensorToWrite> tensors;
    for (const TensorSpec& t : layout.tensors()) {
      tensors.push_back({t.name, t.shape, s.params.data() + t.offset});
    }
    RETURN_IF_ERROR(put(ModelShardFile(dims_.tp_rank()), tensors, ModelShardMetadata(layout)));
  }
  const int64_t n = s.shard_end - s.shard_begin;
  RETURN_IF_ERROR(
      put(OptimShardFile(dims_.tp_rank(), dims_.dp_rank()),
          {{"exp_avg", {n}, s.exp_avg.data()}, {"exp_avg_sq", {n}, s.exp_avg_sq.data()}},
          OptimShardMetadata(layout, dims_.dp_rank(), dims_.dp(), {s.shard_begin, s.shard_end})));
  RETURN_IF_ERROR(WithRetries("writing the completion marker", [&] {
    return store->PutBytes(step_dir + "/" + DoneMarker(dims_.rank()), mine.dump());
  }));
  if (dims_.rank() != 0) return Status::Ok();

  // Rank 0: every rank's marker, then the manifest (last), then pruning.
  Json files = Json::object();
  RETURN_IF_ERROR(WaitForMarkers(store.get(), step_dir, s.step, &files));
  Json manifest{
      {"format", "lote-checkpoint-1"},
      {"step", s.step},
      {"job_id", opt_.job_id},
      {"created_at", Iso8601Utc(SystemClock::Default()->NowMillis())},
      {"config", config_.ToJson()},
      {"layout",
       {{"world", dims_.world()}, {"tensor_parallel", dims_.tp()}, {"data_parallel", dims_.dp()}}},
      {"optimizer", {{"name", "adamw"}, {"step", s.adam_step}}},
      {"sampler", {{"epoch", s.sampler_epoch}, {"position", s.sampler_position}}},
      {"train", s.train},
      {"files", files}};
  RETURN_IF_ERROR(WithRetries("writing manifest.json", [&] {
    return store->PutBytes(step_dir + "/manifest.json", manifest.dump(2) + "\n");
  }));
  for (int r = 0; r < dims_.world(); ++r) (void)store->Delete(step_dir + "/" + DoneMarker(r));
  return Prune(s.step);
}

Status CheckpointWriter::Prune(int64_t newest) {
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(job_root_));
  ASSIGN_OR_RETURN(auto objects, store->List(""));
  std::map<int64_t, std::vector<std::string>> keys;  // step -> keys
  std::map<int64_t, bool> complete;
  for (const auto& o : objects) {
    const int64_t step = StepOfKey(o.key);
    if (step < 0) continue;
    keys[step].push_back(o.key);
    if (o.key == fmt::format("step_{}/manifest.json", step)) complete[step] = true;
  }
  std::vector<int64_t> complete_steps;
  for (const auto& [step, _] : complete) complete_steps.push_back(step);
  std::sort(complete_steps.rbegin(), complete_steps.rend());
  for (const auto& [step, list] : keys) {
    if (step >= newest) continue;
    const bool done = complete.count(step) > 0;
    bool drop = !done;  // a write that never completed, older than a complete one
    if (done && opt_.keep > 0) {
      const auto rank =
          std::find(complete_steps.begin(), complete_steps.end(), step) - complete_steps.begin();
      drop = rank >= opt_.keep;
    }
    if (!drop) continue;
    // The manifest goes first, so a half-deleted checkpoint is never "complete".
    RETURN_IF_ERROR(store->Delete(fmt::format("step_{}/manifest.json", step)));
    for (const auto& k : list) RETURN_IF_ERROR(store->Delete(k));
  }
  return Status::Ok();
}

Result<std::string> LatestCheckpoint(const std::string& uri, const std::string& job_id) {
  const std::string root = objstore::JoinKey(uri, job_id);
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(root));
  ASSIGN_OR_RETURN(auto objects, store->List(""));
  int64_t best = -1;
  for (const auto& o : objects) {
    const int64_t step = StepOfKey(o.key);
    if (step > best && o.key == fmt::format("step_{}/manifest.json", step)) best = step;
  }
  if (best < 0) {
    return Status::NotFound(fmt::format("no complete checkpoint under {}", root));
  }
  return objstore::JoinKey(root, fmt::format("step_{}", best));
}

namespace {

// Downloads `name` of the checkpoint into `dir` and checks it against the manifest.
Result<std::unique_ptr<SafetensorsReader>> FetchShard(objstore::ObjectStore* store,
                                                      const Json& manifest, const std::string& name,
                                                      const std::string& dir) {
  if (!manifest["files"].contains(name)) {
    return Status::DataLoss(
        fmt::format("{}: manifest.json does not list {}", store->RootUri(), name));
  }
  // file:// shards are read in place; others are downloaded first.
  std::string local = dir + "/" + name;
  ASSIGN_OR_RETURN(objstore::Uri root, objstore::ParseUri(store->RootUri()));
  if (root.scheme == "file") {
    local = root.key + "/" + name;
  } else {
    RETURN_IF_ERROR(store->GetFile(name, local));
  }
  ASSIGN_OR_RETURN(auto hash, data::HashFile(local));
  const Json& want = manifest["files"][name];
  if (hash.first != want.value("sha256", "") || hash.second != want.value("bytes", uint64_t{0})) {
    return Status::DataLoss(fmt::format(
        "{}/{}: {} bytes with sha256 {}, but manifest.json says {} bytes with sha256 {}",
        store->RootUri(), name, hash.second, hash.first, want.value("bytes", uint64_t{0}),
        want.value("sha256", "")));
  }
  return SafetensorsReader::Open(local);
}

// Every shard file of a checkpoint, verified and opened, as ModelShards/OptimShards.
struct CheckpointFiles {
  std::vector<std::unique_ptr<SafetensorsReader>> readers;  // owned; the shards borrow them
  std::optional<ModelShards> model;
  std::optional<OptimShards> optim;
};

Result<CheckpointFiles> OpenCheckpointFiles(objstore::ObjectStore* store, const Json& manifest,
                                            const LlamaConfig& config, int tp, int dp,
                                            const std::string& dir) {
  CheckpointFiles f;
  std::vector<const SafetensorsReader*> model, optim;
  std::vector<std::string> model_names, optim_names;
  for (int r = 0; r < tp; ++r) {
    ASSIGN_OR_RETURN(auto reader, FetchShard(store, manifest, ModelShardFile(r), dir));
    model.push_back(reader.get());
    model_names.push_back(ModelShardFile(r));
    f.readers.push_back(std::move(reader));
    for (int d = 0; d < dp; ++d) {
      ASSIGN_OR_RETURN(auto o, FetchShard(store, manifest, OptimShardFile(r, d), dir));
      optim.push_back(o.get());
      optim_names.push_back(OptimShardFile(r, d));
      f.readers.push_back(std::move(o));
    }
  }
  ASSIGN_OR_RETURN(ModelShards m, ModelShards::Open(config, model, model_names));
  ASSIGN_OR_RETURN(OptimShards o, OptimShards::Open(config, tp, dp, optim, optim_names));
  f.model.emplace(std::move(m));
  f.optim.emplace(std::move(o));
  return f;
}

// Another layout: tensor by tensor, this rank's shard of the parameters and, where
// the tensor meets its ZeRO-1 range, of both moments. Beyond the state itself it holds
// one tensor's shard and one source shard (ModelShards / OptimShards' buffer).
Result<TrainState> Reshard(CheckpointFiles* files, const ParamLayout& local, TrainState st) {
  std::vector<float> moment;
  for (const TensorSpec& t : local.tensors()) {
    RETURN_IF_ERROR(files->model->Read(t, st.params.data() + t.offset));
    const int64_t lo = std::max(t.offset, st.shard_begin);
    const int64_t hi = std::min(t.offset + t.numel, st.shard_end);
    if (lo >= hi) continue;
    moment.resize(static_cast<size_t>(t.numel));
    for (auto [name, out] :
         {std::pair{"exp_avg", &st.exp_avg}, std::pair{"exp_avg_sq", &st.exp_avg_sq}}) {
      RETURN_IF_ERROR(files->optim->Read(t, name, moment.data()));
      std::copy(moment.begin() + (lo - t.offset), moment.begin() + (hi - t.offset),
                out->begin() + (lo - st.shard_begin));
    }
  }
  return st;
}

}  // namespace

Result<TrainState> LoadCheckpoint(const std::string& step_uri, const LlamaConfig& config,
                                  const ParallelDims& dims) {
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(step_uri));
  ASSIGN_OR_RETURN(std::string raw, store->GetBytes("manifest.json"));
  Json m = Json::parse(raw, nullptr, false);
  if (!m.is_object() || m.value("format", "") != "lote-checkpoint-1") {
    return Status::DataLoss(
        fmt::format("{}/manifest.json is not a lote checkpoint manifest", step_uri));
  }
  ASSIGN_OR_RETURN(LlamaConfig saved, LlamaConfig::FromJson(m["config"]));
  if (saved.ToJson() != config.ToJson()) {
    return Status::InvalidArgument(fmt::format(
        "checkpoint {} was made with another model config ({}); resume with the same --config",
        step_uri, m["config"].dump()));
  }
  const int old_tp = m["layout"].value("tensor_parallel", 1);
  const int old_dp = m["layout"].value("data_parallel", 1);
  TrainState st;
  st.step = m.value("step", int64_t{0});
  st.adam_step = m["optimizer"].value("step", int64_t{0});
  st.sampler_epoch = m["sampler"].value("epoch", int64_t{0});
  st.sampler_position = m["sampler"].value("position", int64_t{0});
  st.train = m.value("train", Json::object());
  const ParamLayout local(config, dims.tensor_parallel());
  const Range shard = dims.ZeroShard(local.total());
  const int64_t shard_begin = shard.begin, shard_end = shard.end;
  st.shard_begin = shard_begin;
  st.shard_end = shard_end;
  st.params.assign(static_cast<size_t>(local.total()), 0.0f);
  st.exp_avg.assign(static_cast<size_t>(shard_end - shard_begin), 0.0f);
  st.exp_avg_sq.assign(st.exp_avg.size(), 0.0f);

  const std::string dir = SpoolDir(fmt::format("load{}", dims.rank()));
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  DirGuard cleanup(dir);

  if (old_tp == dims.tp() && old_dp == dims.dp()) {
    // Same layout: this rank's own shards only.
    ASSIGN_OR_RETURN(auto model, FetchShard(store.get(), m, ModelShardFile(dims.tp_rank()), dir));
    for (const TensorSpec& t : local.tensors()) {
      RETURN_IF_ERROR(model->ReadFloat(t.name, st.params.data() + t.offset, t.numel));
      model->Evict(t.name);
    }
    ASSIGN_OR_RETURN(auto optim, FetchShard(store.get(), m,
                                            OptimShardFile(dims.tp_rank(), dims.dp_rank()), dir));
    const int64_t n = shard_end - shard_begin;
    RETURN_IF_ERROR(optim->ReadFloat("exp_avg", st.exp_avg.data(), n));
    RETURN_IF_ERROR(optim->ReadFloat("exp_avg_sq", st.exp_avg_sq.data(), n));
    return st;
  }
  ASSIGN_OR_RETURN(CheckpointFiles files,
                   OpenCheckpointFiles(store.get(), m, config, old_tp, old_dp, dir));
  return Reshard(&files, local, std::move(st));
}

}  // namespace lote::engine
