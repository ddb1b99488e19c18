#include "engine/checkpoint_reshard.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "common/files.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_shards.h"
#include "engine/parallel_dims.h"
#include "engine/safetensors.h"

namespace lote::engine {
namespace {

Result<std::string> LocalFolder(const std::string& output) {
  if (output.empty()) return Status::InvalidArgument("give an output folder (--output)");
  if (output.starts_with("file://")) return output.substr(7);
  if (output.find("://") != std::string::npos) {
    return Status::InvalidArgument(fmt::format(
        "--output {}: re-sharding writes a local folder (a path or file:// URI); upload it "
        "afterwards",
        output));
  }
  return output;
}

// The step folder to write: `target` itself when it is a step_<N> folder (N must be
// the checkpoint's step), else target/step_<N>, so target is a job folder.
Result<std::string> StepFolder(const std::string& target, int64_t step) {
  int64_t named = 0;
  if (!IsStepFolder(target, &named)) return fmt::format("{}/step_{}", target, step);
  if (named != step) {
    return Status::InvalidArgument(fmt::format(
        "--output {} names step {}, but the checkpoint is step {}", target, named, step));
  }
  return target;
}

// model-tp<r>.safetensors of the new layout: each tensor's shard read and appended.
Status WriteModelShard(const ParamLayout& layout, ModelShards* model, std::vector<float>* buf,
                       const std::string& path) {
  std::vector<TensorHeader> headers;
  for (const TensorSpec& t : layout.tensors()) headers.push_back({t.name, t.shape});
  ASSIGN_OR_RETURN(auto writer,
                   SafetensorsWriter::Create(path, headers, ModelShardMetadata(layout)));
  for (const TensorSpec& t : layout.tensors()) {
    buf->resize(static_cast<size_t>(t.numel));
    RETURN_IF_ERROR(model->Read(t, buf->data()));
    RETURN_IF_ERROR(writer->Append(buf->data(), t.numel));
  }
  return writer->Finish();
}

// optim-tp<r>-dp<d>.safetensors: exp_avg then exp_avg_sq over `shard` of the new TP
// rank's flat buffer, each the concatenation of the tensors' parts inside the shard.
Status WriteOptimShard(const ParamLayout& layout, int dp_rank, int dp, OptimShards* optim,
                       std::vector<float>* buf, const std::string& path) {
  const Range shard = EvenSplit(layout.total(), dp, dp_rank);
  const std::vector<TensorHeader> headers{{"exp_avg", {shard.size()}},
                                          {"exp_avg_sq", {shard.size()}}};
  ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(
                                    path, headers, OptimShardMetadata(layout, dp_rank, dp, shard)));
  for (const char* moment : {"exp_avg", "exp_avg_sq"}) {
    for (const TensorSpec& t : layout.tensors()) {
      const int64_t lo = std::max(t.offset, shard.begin);
      const int64_t hi = std::min(t.offset + t.numel, shard.end);
      if (lo >= hi) continue;
      buf->resize(static_cast<size_t>(t.numel));
      RETURN_IF_ERROR(optim->Read(t, moment, buf->data()));
      RETURN_IF_ERROR(writer->Append(buf->data() + (lo - t.offset), hi - lo));
    }
  }
  return writer->Finish();
}

// The source's optimizer shards, every TP x DP file verified and opened.
Result<OptimShards> OpenOptim(ChosenCheckpoint* chosen, int tp, int dp,
                              const std::function<void(std::string_view)>& log) {
  std::vector<const SafetensorsReader*> readers;
  std::vector<std::string> names;
  for (int r = 0; r < tp; ++r) {
    for (int d = 0; d < dp; ++d) {
      ASSIGN_OR_RETURN(const SafetensorsReader* reader, chosen->Shard(OptimShardFile(r, d), log));
      readers.push_back(reader);
      names.push_back(OptimShardFile(r, d));
    }
  }
  return OptimShards::Open(chosen->config(), tp, dp, readers, names);
}

}  // namespace

Result<ReshardResult> ReshardCheckpoint(std::string_view uri, const ReshardOptions& options) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  ASSIGN_OR_RETURN(const std::string target, LocalFolder(options.output_dir));
  const int tp = options.tensor_parallel, dp = options.data_parallel;
  if (dp < 1) return Status::InvalidArgument("--data-parallel-size must be at least 1");
  ASSIGN_OR_RETURN(ChosenCheckpoint chosen,
                   ChosenCheckpoint::Open(uri, options.open_store, target));
  const LlamaConfig& config = chosen.config();
  RETURN_IF_ERROR(ParallelDims::Create(config, tp * dp, tp, 0).status());
  ReshardResult result;
  result.checkpoint_uri = chosen.summary().uri;
  result.step = chosen.summary().step;
  result.from_tp = chosen.summary().tensor_parallel;
  result.from_dp = chosen.summary().data_parallel;
  ASSIGN_OR_RETURN(result.step_dir, StepFolder(target, result.step));
  const std::string& out = result.step_dir;
  log(fmt::format("re-sharding {} (step {}, {}x{}) to {}x{} in {}", result.checkpoint_uri,
                  result.step, result.from_tp, result.from_dp, tp, dp, out));
  if (FileExists(out + "/manifest.json")) {
    return Status::AlreadyExists(
        fmt::format("{} already holds a checkpoint (manifest.json); give an empty folder", out));
  }
  RETURN_IF_ERROR(MakeDirs(out));
  ASSIGN_OR_RETURN(ModelShards model, chosen.OpenModel(options.log));
  ASSIGN_OR_RETURN(OptimShards optim,
                   OpenOptim(&chosen, result.from_tp, result.from_dp, options.log));

  Json files = Json::object();
  auto record = [&](const std::string& name) -> Status {
    uint64_t size = 0;
    ASSIGN_OR_RETURN(std::string sha, Sha256File(out + "/" + name, &size));
    files[name] = {{"bytes", size}, {"sha256", sha}};
    result.bytes += size;
    ++result.files;
    log(fmt::format("wrote {} ({} bytes)", name, size));
    return Status::Ok();
  };
  const ParamLayout whole(config);
  for (const TensorSpec& t : whole.tensors()) {
    result.largest_tensor = std::max(result.largest_tensor, t.numel);
  }
  std::vector<float> buf;
  for (int r = 0; r < tp; ++r) {
    const ParamLayout layout(config, {r, tp});
    RETURN_IF_ERROR(WriteModelShard(layout, &model, &buf, out + "/" + ModelShardFile(r)));
    RETURN_IF_ERROR(record(ModelShardFile(r)));
    for (int d = 0; d < dp; ++d) {
      RETURN_IF_ERROR(
          WriteOptimShard(layout, d, dp, &optim, &buf, out + "/" + OptimShardFile(r, d)));
      RETURN_IF_ERROR(record(OptimShardFile(r, d)));
    }
  }
  Json manifest = chosen.manifest();
  manifest["layout"] = {{"world", tp * dp}, {"tensor_parallel", tp}, {"data_parallel", dp}};
  manifest["files"] = files;
  manifest["resharded_from"] = {{"uri", result.checkpoint_uri},
                                {"tensor_parallel", result.from_tp},
                                {"data_parallel", result.from_dp}};
  RETURN_IF_ERROR(WriteFileAtomic(out + "/manifest.json", manifest.dump(2) + "\n"));
  return result;
}

}  // namespace lote::engine
