// Checkpoint listing and export against checkpoints built here, file by file, as
// docs/checkpoints.md specifies them (an independent writer: TP=2 shards cut from a
// known whole model with ParamLayout(config, {r, 2}) + SliceShard, uneven vocabulary
// and MLP splits), on file:// and on s3:// (moto_server). Also --init-weights from a
// Hugging Face sharded checkpoint (model.safetensors.index.json + two shards).
#include "engine/checkpoint_tools.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>
#include <utility>

#include "common/crypto.h"
#include "common/files.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_reshard.h"
#include "engine/communicator.h"
#include "engine/llama_model.h"
#include "engine/parallel_dims.h"
#include "engine/param_layout.h"
#include "engine/weights_io.h"
#include "objstore/moto_for_tests.h"
#include "objstore/s3_store.h"

namespace lote::engine {
namespace {

namespace fs = std::filesystem;

// Heads split evenly; vocabulary 37 = 19 + 18 and MLP width 45 = 23 + 22 do not.
Json TinyConfigJson(bool tied = false) {
  return Json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", 16},
              {"intermediate_size", 45},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"vocab_size", 37},
              {"max_position_embeddings", 32},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", tied}};
}

LlamaConfig TinyConfig(bool tied = false) {
  auto c = LlamaConfig::FromJson(TinyConfigJson(tied));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// Whole parameters laid out as ParamLayout(config), with arbitrary bit patterns.
std::vector<float> WholeModel(const LlamaConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> p(static_cast<size_t>(ParamLayout(c).total()));
  for (float& x : p) x = d(rng);
  return p;
}

std::string TempDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/ckpt_" + std::to_string(::getpid()) + "_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct BuildOptions {
  int tp = 2, dp = 2;
  bool manifest = true;
  Json config = TinyConfigJson();
};

// Writes <store>/<job>/step_<step>/ exactly as docs/checkpoints.md describes it,
// the manifest last. `staging` is a local folder for the files before upload.
void BuildCheckpoint(objstore::ObjectStore* store, const std::string& job, int64_t step,
                     const std::vector<float>& whole, const std::string& staging,
                     const BuildOptions& o = {}) {
  auto config = LlamaConfig::FromJson(o.config);
  ASSERT_TRUE(config.ok());
  const ParamLayout whole_layout(*config);
  const std::string folder = job + "/step_" + std::to_string(step) + "/";
  Json files = Json::object();
  auto put = [&](const std::string& name, const std::string& path) {
    uint64_t size = 0;
    auto sha = Sha256File(path, &size);
    ASSERT_TRUE(sha.ok()) << sha.status().ToString();
    files[name] = {{"bytes", size}, {"sha256", *sha}};
    Status s = store->PutFile(folder + name, path);
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  for (int r = 0; r < o.tp; ++r) {
    const ParamLayout layout(*config, {r, o.tp});
    std::vector<float> shard(static_cast<size_t>(layout.total()));
    std::vector<TensorToWrite> tensors;
    Json shards = Json::object();
    for (const TensorSpec& spec : layout.tensors()) {
      const TensorSpec* w = whole_layout.Find(spec.name);
      SliceShard(spec, whole.data() + w->offset, shard.data() + spec.offset);
      tensors.push_back({spec.name, spec.shape, shard.data() + spec.offset});
      shards[spec.name] = {{"global_shape", spec.global_shape},
                           {"split_dim", spec.split_dim},
                           {"split_begin", spec.split_begin}};
    }
    const std::string name = "model-tp" + std::to_string(r) + ".safetensors";
    const std::string path = staging + "/" + name;
    ASSERT_TRUE(WriteSafetensors(path, tensors,
                                 {{"format", "pt"},
                                  {"producer", "lote"},
                                  {"tp_rank", std::to_string(r)},
                                  {"tp_size", std::to_string(o.tp)},
                                  {"lote_shards", shards.dump()}})
                    .ok());
    put(name, path);
    for (int d = 0; d < o.dp; ++d) {
      const Range range = EvenSplit(layout.total(), o.dp, d);
      std::vector<float> m(static_cast<size_t>(range.size()), 0.01f * static_cast<float>(d + 1));
      std::vector<float> v(static_cast<size_t>(range.size()), 0.001f);
      const std::string oname =
          "optim-tp" + std::to_string(r) + "-dp" + std::to_string(d) + ".safetensors";
      ASSERT_TRUE(WriteSafetensors(staging + "/" + oname,
                                   {{"exp_avg", {range.size()}, m.data()},
                                    {"exp_avg_sq", {range.size()}, v.data()}},
                                   {{"format", "pt"},
                                    {"producer", "lote"},
                                    {"tp_rank", std::to_string(r)},
                                    {"tp_size", std::to_string(o.tp)},
                                    {"dp_rank", std::to_string(d)},
                                    {"dp_size", std::to_string(o.dp)},
                                    {"begin", std::to_string(range.begin)},
                                    {"end", std::to_string(range.end)}})
                      .ok());
      put(oname, staging + "/" + oname);
    }
  }
  if (!o.manifest) return;
  Json manifest{
      {"format", "lote-checkpoint-1"},
      {"step", step},
      {"job_id", job},
      {"created_at", "2026-12-01T10:00:00Z"},
      {"config", o.config},
      {"layout", {{"world", o.tp * o.dp}, {"tensor_parallel", o.tp}, {"data_parallel", o.dp}}},
      {"optimizer",
       {{"name", "adamw"},
        {"step", step},
        {"beta1", 0.9},
        {"beta2", 0.999},
        {"eps", 1e-6},
        {"weight_decay", 0.01}}},
      {"sampler", {{"epoch", 0}, {"position", step * 8}}},
      {"train", {{"seed", 1234}, {"lr", 3e-4}, {"max_steps", 100}}},
      {"files", files}};
  ASSERT_TRUE(store->PutBytes(folder + "manifest.json", manifest.dump(2)).ok());
}

// The exported model.safetensors holds exactly `whole`, F32, format=pt.
void ExpectExported(const std::string& dir, const LlamaConfig& c, const std::vector<float>& whole,
                    const Json& config_json) {
  auto r = SafetensorsReader::Open(dir + "/model.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->metadata().at("format"), "pt");
  const ParamLayout layout(c);
  EXPECT_EQ((*r)->tensors().size(), layout.tensors().size());
  for (const TensorSpec& spec : layout.tensors()) {
    const TensorInfo* t = (*r)->Find(spec.name);
    ASSERT_NE(t, nullptr) << spec.name;
    EXPECT_EQ(t->dtype_name, "F32");
    EXPECT_EQ(t->shape, spec.global_shape) << spec.name;
    ASSERT_EQ(t->nbytes, spec.numel * 4);
    EXPECT_EQ(std::memcmp(t->data, whole.data() + spec.offset, static_cast<size_t>(t->nbytes)), 0)
        << spec.name << " differs from the model the shards were cut from";
  }
  auto cfg = ReadJsonFile(dir + "/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(*cfg, config_json);
}

std::unique_ptr<objstore::ObjectStore> OpenLocal(const std::string& root) {
  auto s = objstore::OpenObjectStore(root);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

TEST(CheckpointExportTest, ReassemblesUnevenTensorParallelShardsBitExactly) {
  const std::string root = TempDir("exact");
  const LlamaConfig c = TinyConfig();
  const std::vector<float> whole = WholeModel(c, 7);
  auto store = OpenLocal(root + "/ckpts");
  BuildCheckpoint(store.get(), "job-1", 10, whole, TempDir("exact_stage"));
  // The uneven splits really are uneven.
  const ParamLayout rank0(c, {0, 2}), rank1(c, {1, 2});
  ASSERT_EQ(rank1.Find("model.embed_tokens.weight")->shape[0], 18);
  ASSERT_EQ(rank0.Find("model.layers.0.mlp.down_proj.weight")->shape[1], 23);

  ExportOptions o;
  o.output_dir = root + "/out";
  auto r = ExportCheckpoint("file://" + root + "/ckpts/job-1/step_10", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 10);
  EXPECT_EQ(r->tensor_parallel, 2);
  ExpectExported(o.output_dir, c, whole, TinyConfigJson());

  // The export loads as --init-weights would and gives the same parameters.
  auto model = LlamaModel::Create(c, 1, 4, false);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(LoadWeights(model->get(), o.output_dir + "/model.safetensors").ok());
  EXPECT_EQ(std::memcmp((*model)->params(), whole.data(), whole.size() * 4), 0);
}

TEST(CheckpointExportTest, TiedEmbeddingsAndSingleRank) {
  const std::string root = TempDir("tied");
  BuildOptions o;
  o.tp = 1;
  o.dp = 3;
  o.config = TinyConfigJson(true);
  const LlamaConfig c = TinyConfig(true);
  const std::vector<float> whole = WholeModel(c, 8);
  auto store = OpenLocal(root);
  BuildCheckpoint(store.get(), "j", 3, whole, TempDir("tied_stage"), o);
  ExportOptions e;
  e.output_dir = root + "/out";
  auto r = ExportCheckpoint(root + "/j", e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectExported(e.output_dir, c, whole, o.config);
}

TEST(CheckpointListTest, IncompleteCheckpointsAreListedAndExportSkipsThem) {
  const std::string root = TempDir("list");
  const LlamaConfig c = TinyConfig();
  const std::vector<float> w10 = WholeModel(c, 10), w20 = WholeModel(c, 20);
  const std::string stage = TempDir("list_stage");
  auto store = OpenLocal(root);
  BuildCheckpoint(store.get(), "job", 10, w10, stage);
  BuildCheckpoint(store.get(), "job", 20, w20, stage);
  BuildOptions no_manifest;
  no_manifest.manifest = false;
  BuildCheckpoint(store.get(), "job", 30, WholeModel(c, 30), stage, no_manifest);
  BuildCheckpoint(store.get(), "job", 25, WholeModel(c, 25), stage);
  // step_25: an optimizer shard that lost its tail.
  const std::string optim = root + "/job/step_25/optim-tp1-dp0.safetensors";
  fs::resize_file(optim, fs::file_size(optim) - 4);
  ASSERT_TRUE(store->PutBytes("job/unrelated.txt", "x").ok());

  auto list = ListCheckpoints(root + "/job/");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 4u);
  const std::vector<int64_t> steps = {(*list)[0].step, (*list)[1].step, (*list)[2].step,
                                      (*list)[3].step};
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 20, 25, 30}));
  EXPECT_TRUE((*list)[0].complete);
  EXPECT_TRUE((*list)[1].complete);
  EXPECT_FALSE((*list)[2].complete);
  EXPECT_NE((*list)[2].problem.find("optim-tp1-dp0.safetensors"), std::string::npos)
      << (*list)[2].problem;
  EXPECT_FALSE((*list)[3].complete);
  EXPECT_NE((*list)[3].problem.find("manifest"), std::string::npos);
  for (const CheckpointSummary& s : *list) {
    EXPECT_EQ(s.tensor_parallel, 2) << s.name;  // step_30's guessed from its file names
    EXPECT_EQ(s.data_parallel, 2) << s.name;
    EXPECT_EQ(s.objects, s.name == "step_30" ? 6 : 7) << s.name;
  }
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(root + "/job/step_20")) bytes += e.file_size();
  EXPECT_EQ((*list)[1].total_bytes, bytes);
  EXPECT_EQ((*list)[1].uri, root + "/job/step_20");

  // One folder lists alone.
  auto one = ListCheckpoints(root + "/job/step_30");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].step, 30);

  // Relative paths, down to a bare step folder name in the current directory.
  {
    const fs::path cwd = fs::current_path();
    fs::current_path(root + "/job");
    auto rel = ListCheckpoints("step_20");
    auto rel_out = ExportCheckpoint("step_20", {root + "/rel_out", nullptr, nullptr});
    fs::current_path(cwd);
    ASSERT_TRUE(rel.ok()) << rel.status().ToString();
    ASSERT_EQ(rel->size(), 1u);
    EXPECT_TRUE((*rel)[0].complete) << (*rel)[0].problem;
    ASSERT_TRUE(rel_out.ok()) << rel_out.status().ToString();
    EXPECT_EQ(rel_out->step, 20);
  }

  ExportOptions o;
  o.output_dir = root + "/out";
  auto r = ExportCheckpoint(root + "/job", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 20);
  ExpectExported(o.output_dir, c, w20, TinyConfigJson());

  auto refused = ExportCheckpoint(root + "/job/step_30", o);
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);
  EXPECT_NE(refused.status().message().find("incomplete"), std::string::npos);

  EXPECT_TRUE(ListCheckpoints(root + "/no-such-job").status().IsNotFound());
  EXPECT_FALSE(fs::exists(root + "/no-such-job"));  // listing creates nothing
}

TEST(CheckpointListTest, ResolvesJobIdsUnderABase) {
  EXPECT_EQ(ResolveJobUri("abc-123#2", "s3://b/ckpt/"), "s3://b/ckpt/abc-123");
  EXPECT_EQ(ResolveJobUri("abc-123", "/data/ckpt"), "/data/ckpt/abc-123");
  EXPECT_EQ(ResolveJobUri("s3://b/x/job/", "s3://b/ckpt"), "s3://b/x/job");
  EXPECT_EQ(ResolveJobUri("rel/job", ""), "rel/job");
  int64_t step = 0;
  EXPECT_TRUE(IsStepFolder("s3://b/job/step_40/", &step));
  EXPECT_EQ(step, 40);
  EXPECT_FALSE(IsStepFolder("s3://b/job/step_4x", &step));
  EXPECT_FALSE(IsStepFolder("s3://b/job", &step));
}

TEST(CheckpointExportTest, RefusesACorruptShardNamingTheFile) {
  const std::string root = TempDir("corrupt");
  const LlamaConfig c = TinyConfig();
  auto store = OpenLocal(root);
  BuildCheckpoint(store.get(), "job", 5, WholeModel(c, 5), TempDir("corrupt_stage"));
  // Same size, one flipped bit in the tensor data: the listing (sizes) cannot tell.
  const std::string shard = root + "/job/step_5/model-tp1.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-9, std::ios::end);
    char b = 0;
    f.read(&b, 1);
    b ^= 0x10;
    f.seekp(-9, std::ios::end);
    f.write(&b, 1);
  }
  auto list = ListCheckpoints(root + "/job");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE((*list)[0].complete);
  ExportOptions o;
  o.output_dir = root + "/out";
  auto r = ExportCheckpoint(root + "/job/step_5", o);
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  EXPECT_NE(r.status().message().find("model-tp1.safetensors"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("sha256"), std::string::npos);
  EXPECT_FALSE(fs::exists(o.output_dir + "/model.safetensors"));
}

// Shards whose lote_shards do not tile a tensor are refused.
TEST(CheckpointExportTest, AssemblyRefusesShardsThatDoNotTile) {
  const LlamaConfig c = TinyConfig();
  const std::vector<float> whole = WholeModel(c, 3);
  const std::string dir = TempDir("tile");
  std::vector<std::unique_ptr<SafetensorsReader>> readers;
  std::vector<const SafetensorsReader*> views;
  const ParamLayout wl(c);
  // Both "ranks" claim rank 0's rows.
  for (int r = 0; r < 2; ++r) {
    const ParamLayout layout(c, {0, 2});
    std::vector<float> shard(static_cast<size_t>(layout.total()));
    std::vector<TensorToWrite> tensors;
    Json shards = Json::object();
    for (const TensorSpec& spec : layout.tensors()) {
      SliceShard(spec, whole.data() + wl.Find(spec.name)->offset, shard.data() + spec.offset);
      tensors.push_back({spec.name, spec.shape, shard.data() + spec.offset});
      shards[spec.name] = {{"global_shape", spec.global_shape},
                           {"split_dim", spec.split_dim},
                           {"split_begin", spec.split_begin}};
    }
    const std::string path = dir + "/s" + std::to_string(r) + ".safetensors";
    ASSERT_TRUE(WriteSafetensors(path, tensors, {{"lote_shards", shards.dump()}}).ok());
    auto reader = SafetensorsReader::Open(path);
    ASSERT_TRUE(reader.ok());
    views.push_back(reader->get());
    readers.push_back(std::move(*reader));
  }
  std::vector<float> out;
  Status s = AssembleModelShards(c, views, {"a", "b"}, &out);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  s = AssembleModelShards(c, {views[0]}, {"a"}, &out);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("cover"), std::string::npos) << s.message();
}

// ---- Hugging Face sharded checkpoints for --init-weights ------------------------

// Writes the whole model as two shard files + model.safetensors.index.json.
void WriteHfSharded(const std::string& dir, const LlamaConfig& c, const std::vector<float>& whole,
                    const std::string& extra_tensor = "") {
  const ParamLayout layout(c);
  std::vector<TensorToWrite> a, b;
  Json weight_map = Json::object();
  for (size_t i = 0; i < layout.tensors().size(); ++i) {
    const TensorSpec& spec = layout.tensors()[i];
    const bool first = i < layout.tensors().size() / 2;
    (first ? a : b).push_back({spec.name, spec.shape, whole.data() + spec.offset});
    weight_map[spec.name] =
        first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  static const float one = 1.0f;
  if (!extra_tensor.empty()) {
    b.push_back({extra_tensor, {1}, &one});
    weight_map[extra_tensor] = "model-00002-of-00002.safetensors";
  }
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model-00001-of-00002.safetensors", a, {{"format", "pt"}}).ok());
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model-00002-of-00002.safetensors", b, {{"format", "pt"}}).ok());
  Json index{{"metadata", {{"total_size", whole.size() * 4}}}, {"weight_map", weight_map}};
  ASSERT_TRUE(WriteFileAtomic(dir + "/model.safetensors.index.json", index.dump(2)).ok());
}

TEST(HfShardedWeightsTest, LoadsFromTheIndexOrItsFolder) {
  const LlamaConfig c = TinyConfig();
  const std::vector<float> whole = WholeModel(c, 11);
  const std::string dir = TempDir("hf");
  WriteHfSharded(dir, c, whole);
  for (const std::string& path : {dir + "/model.safetensors.index.json", dir}) {
    auto model = LlamaModel::Create(c, 1, 4, false);
    ASSERT_TRUE(model.ok());
    Status s = LoadWeights(model->get(), path);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(std::memcmp((*model)->params(), whole.data(), whole.size() * 4), 0) << path;
  }
}

TEST(HfShardedWeightsTest, ErrorsNameTheTensorAndFile) {
  const LlamaConfig c = TinyConfig();
  const std::vector<float> whole = WholeModel(c, 12);
  auto model = LlamaModel::Create(c, 1, 4, false);
  ASSERT_TRUE(model.ok());

  // A tensor the config does not have.
  const std::string extra = TempDir("hf_extra");
  WriteHfSharded(extra, c, whole, "model.layers.9.mlp.gate_proj.weight");
  Status s = LoadWeights(model->get(), extra);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.layers.9.mlp.gate_proj.weight"), std::string::npos)
      << s.message();

  // A config the checkpoint does not match: wrong shape, named with its shard file.
  const std::string dir = TempDir("hf_shape");
  WriteHfSharded(dir, c, whole);
  Json bigger = TinyConfigJson();
  bigger["intermediate_size"] = 46;
  auto c2 = LlamaConfig::FromJson(bigger);
  ASSERT_TRUE(c2.ok());
  auto model2 = LlamaModel::Create(*c2, 1, 4, false);
  ASSERT_TRUE(model2.ok());
  s = LoadWeights(model2->get(), dir);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mlp.gate_proj.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("model-00001-of-00002.safetensors"), std::string::npos) << s.message();

  // A tensor missing from the weight map.
  auto index = ReadJsonFile(dir + "/model.safetensors.index.json");
  ASSERT_TRUE(index.ok());
  (*index)["weight_map"].erase("model.norm.weight");
  ASSERT_TRUE(WriteFileAtomic(dir + "/model.safetensors.index.json", index->dump()).ok());
  s = LoadWeights(model->get(), dir + "/model.safetensors.index.json");
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("\"model.norm.weight\""), std::string::npos) << s.message();

  // The index sends a tensor to a shard that lacks it.
  (*index)["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  ASSERT_TRUE(WriteFileAtomic(dir + "/model.safetensors.index.json", index->dump()).ok());
  s = LoadWeights(model->get(), dir);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("model-00001-of-00002.safetensors"), std::string::npos) << s.message();

  // A shard file that is not there.
  (*index)["weight_map"]["model.norm.weight"] = "model-00003-of-00002.safetensors";
  ASSERT_TRUE(WriteFileAtomic(dir + "/model.safetensors.index.json", index->dump()).ok());
  s = LoadWeights(model->get(), dir);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("model-00003-of-00002.safetensors"), std::string::npos) << s.message();

  // A folder with neither an index nor model.safetensors.
  s = LoadWeights(model->get(), TempDir("hf_empty"));
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("model.safetensors.index.json"), std::string::npos);
}

// ---- s3:// against moto_server -------------------------------------------------

constexpr const char* kBucket = "lote-ckpt";

class S3CheckpointTest : public ::testing::Test {
 protected:
  static objstore::S3Config Config() { return moto_->config(); }
  static void SetUpTestSuite() {
    moto_ = new objstore::testing::MotoServer();
    ready_ = moto_->ready() && moto_->CreateBucket(kBucket);
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(ready_) << "moto_server did not start"; }

  static OpenStoreFn Opener() {
    return [](std::string_view uri) -> Result<std::unique_ptr<objstore::ObjectStore>> {
      ASSIGN_OR_RETURN(objstore::Uri u, objstore::ParseUri(uri));
      ASSIGN_OR_RETURN(auto s, objstore::S3Store::Open(u.bucket, u.key, Config()));
      return std::unique_ptr<objstore::ObjectStore>(std::move(s));
    };
  }

  static objstore::testing::MotoServer* moto_;
  static bool ready_;
};
objstore::testing::MotoServer* S3CheckpointTest::moto_ = nullptr;
bool S3CheckpointTest::ready_ = false;

TEST_F(S3CheckpointTest, ListsAndExportsFromS3) {
  const LlamaConfig c = TinyConfig();
  const std::vector<float> w4 = WholeModel(c, 4), w8 = WholeModel(c, 8);
  auto store = Opener()(std::string("s3://") + kBucket + "/runs");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string stage = TempDir("s3_stage");
  BuildCheckpoint(store->get(), "job-s3", 4, w4, stage);
  BuildCheckpoint(store->get(), "job-s3", 8, w8, stage);
  BuildOptions partial;
  partial.manifest = false;
  BuildCheckpoint(store->get(), "job-s3", 12, WholeModel(c, 12), stage, partial);

  const std::string job = std::string("s3://") + kBucket + "/runs/job-s3";
  auto list = ListCheckpoints(ResolveJobUri("job-s3#0", std::string("s3://") + kBucket + "/runs"),
                              Opener());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_TRUE((*list)[0].complete);
  EXPECT_TRUE((*list)[1].complete);
  EXPECT_FALSE((*list)[2].complete);
  EXPECT_EQ((*list)[1].uri, job + "/step_8");

  ExportOptions o;
  o.output_dir = TempDir("s3_out");
  o.open_store = Opener();
  auto r = ExportCheckpoint(job, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 8);
  ExpectExported(o.output_dir, c, w8, TinyConfigJson());
  // The downloads were staged inside the output folder and removed.
  for (const auto& e : fs::directory_iterator(o.output_dir)) {
    EXPECT_TRUE(e.path().filename() == "model.safetensors" || e.path().filename() == "config.json")
        << e.path();
  }

  // A corrupt object in the store is refused by name.
  ASSERT_TRUE(
      (*store)->PutFile("job-s3/step_4/model-tp0.safetensors", o.output_dir + "/config.json").ok());
  auto bad = ExportCheckpoint(job + "/step_4", o);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model-tp0.safetensors"), std::string::npos)
      << bad.status().ToString();
  EXPECT_TRUE(ListCheckpoints(std::string("s3://") + kBucket + "/runs/none", Opener())
                  .status()
                  .IsNotFound());
}

// ---- Re-sharding: `lote checkpoint reshard` and LoadCheckpoint on another layout ----

// One training state as whole tensors: parameters and both AdamW moments, laid out as
// ParamLayout(config), with arbitrary bit patterns.
struct WholeState {
  std::vector<float> params, m, v;
};

WholeState RandomState(const LlamaConfig& c, uint32_t seed) {
  return {WholeModel(c, seed), WholeModel(c, seed + 1), WholeModel(c, seed + 2)};
}

// Rank `rank` of a TP x DP layout as a run holds it: its TP rank's flat buffer and its
// ZeRO-1 range of the moments, cut from the whole state (today's algorithm: whole
// tensors, then slices).
TrainState RankState(const LlamaConfig& c, const WholeState& w, const ParallelDims& dims) {
  const ParamLayout whole(c), local(c, dims.tensor_parallel());
  std::vector<float> p(static_cast<size_t>(local.total())), m(p.size()), v(p.size());
  for (const TensorSpec& t : local.tensors()) {
    const int64_t at = whole.Find(t.name)->offset;
    SliceShard(t, w.params.data() + at, p.data() + t.offset);
    SliceShard(t, w.m.data() + at, m.data() + t.offset);
    SliceShard(t, w.v.data() + at, v.data() + t.offset);
  }
  const Range shard = dims.ZeroShard(local.total());
  TrainState st;
  st.step = 12;
  st.adam_step = 12;
  st.sampler_epoch = 1;
  st.sampler_position = 96;
  st.params = std::move(p);
  st.exp_avg.assign(m.begin() + shard.begin, m.begin() + shard.end);
  st.exp_avg_sq.assign(v.begin() + shard.begin, v.begin() + shard.end);
  st.shard_begin = shard.begin;
  st.shard_end = shard.end;
  st.train = Json{{"seed", 1234}};
  return st;
}

ParallelDims Dims(const LlamaConfig& c, int tp, int dp, int rank) {
  auto d = ParallelDims::Create(c, tp * dp, tp, rank);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return *d;
}

// Writes step_12 of <base>/<job> with the training loop's CheckpointWriter, one writer
// per rank (rank 0 last: it waits for the others' markers); returns the step folder.
std::string WriteWithCheckpointWriter(const LlamaConfig& c, const WholeState& w, int tp, int dp,
                                      const std::string& base, const std::string& job) {
  for (int rank = tp * dp - 1; rank >= 0; --rank) {
    const ParallelDims dims = Dims(c, tp, dp, rank);
    auto writer = CheckpointWriter::Create({base, job}, c, dims);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    if (!writer.ok()) return "";
    EXPECT_TRUE((*writer)->Save(RankState(c, w, dims)).ok());
    Status s = (*writer)->Wait();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return base + "/" + job + "/step_12";
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Every shard file of two step folders of one layout is byte-identical.
void ExpectSameShardFiles(const std::string& a, const std::string& b, int tp, int dp) {
  for (int r = 0; r < tp; ++r) {
    std::vector<std::string> names{ModelShardFile(r)};
    for (int d = 0; d < dp; ++d) names.push_back(OptimShardFile(r, d));
    for (const std::string& n : names) {
      const std::string x = Bytes(a + "/" + n), y = Bytes(b + "/" + n);
      EXPECT_FALSE(x.empty()) << a << "/" << n;
      EXPECT_TRUE(x == y) << n << " differs between " << a << " and " << b;
    }
  }
}

Result<ReshardResult> Reshard(const std::string& from, const std::string& to, int tp, int dp) {
  ReshardOptions o;
  o.output_dir = to;
  o.tensor_parallel = tp;
  o.data_parallel = dp;
  return ReshardCheckpoint(from, o);
}

// 2x2 -> 1x3 -> 2x2 gives back the original files byte for byte, and every re-sharded
// checkpoint is byte for byte what the checkpoint writer writes for that layout from
// the whole state (uneven vocabulary, MLP and ZeRO splits).
TEST(CheckpointReshardTest, RoundTripIsByteIdenticalToTheWritersFiles) {
  const std::string root = TempDir("reshard");
  const LlamaConfig c = TinyConfig();
  const WholeState w = RandomState(c, 40);
  const std::string src = WriteWithCheckpointWriter(c, w, 2, 2, "file://" + root, "orig");
  const std::string ref13 = WriteWithCheckpointWriter(c, w, 1, 3, "file://" + root, "ref13");
  auto r = Reshard(src, root + "/r13", 1, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 12);
  EXPECT_EQ(r->from_tp, 2);
  EXPECT_EQ(r->from_dp, 2);
  EXPECT_EQ(r->files, 4);
  EXPECT_EQ(r->largest_tensor, 45 * 16);  // gate_proj / up_proj [45, 16]
  EXPECT_EQ(r->step_dir, root + "/r13/step_12");
  ExpectSameShardFiles(ref13.substr(7), r->step_dir, 1, 3);
  auto back = Reshard("file://" + root + "/r13", root + "/r22/step_12", 2, 2);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->step_dir, root + "/r22/step_12");
  ExpectSameShardFiles(src.substr(7), back->step_dir, 2, 2);

  auto manifest = ReadJsonFile(root + "/r22/step_12/manifest.json");
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ((*manifest)["layout"]["tensor_parallel"], 2);
  EXPECT_EQ((*manifest)["layout"]["data_parallel"], 2);
  EXPECT_EQ((*manifest)["step"], 12);
  EXPECT_EQ((*manifest)["sampler"]["position"], 96);
  // The re-sharded checkpoint resumes on its own layout as the original does.
  for (int rank = 0; rank < 4; ++rank) {
    const ParallelDims dims = Dims(c, 2, 2, rank);
    auto a = LoadCheckpoint(src, c, dims);
    auto b = LoadCheckpoint("file://" + root + "/r22/step_12", c, dims);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->params, b->params);
    EXPECT_EQ(a->exp_avg_sq, b->exp_avg_sq);
  }
}

// Resuming on another layout (LoadCheckpoint's streaming re-shard) gives every rank
// exactly the slices of the whole state.
TEST(CheckpointReshardTest, ResumeOnAnotherLayoutEqualsWholeThenSlice) {
  const std::string root = TempDir("resume_reshard");
  const LlamaConfig c = TinyConfig();
  const WholeState w = RandomState(c, 50);
  const std::string src = WriteWithCheckpointWriter(c, w, 2, 2, "file://" + root, "j");
  for (auto [tp, dp] : {std::pair{1, 3}, std::pair{2, 1}, std::pair{1, 1}, std::pair{2, 3}}) {
    for (int rank = 0; rank < tp * dp; ++rank) {
      const ParallelDims dims = Dims(c, tp, dp, rank);
      auto got = LoadCheckpoint(src, c, dims);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const TrainState want = RankState(c, w, dims);
      EXPECT_EQ(got->step, 12);
      EXPECT_EQ(got->sampler_position, 96);
      EXPECT_EQ(got->shard_begin, want.shard_begin);
      EXPECT_TRUE(got->params == want.params) << tp << "x" << dp << " rank " << rank;
      EXPECT_TRUE(got->exp_avg == want.exp_avg) << tp << "x" << dp << " rank " << rank;
      EXPECT_TRUE(got->exp_avg_sq == want.exp_avg_sq) << tp << "x" << dp << " rank " << rank;
    }
  }
}

TEST(CheckpointReshardTest, RefusesLayoutsTheModelCannotTakeAndNonEmptyOutputs) {
  const std::string root = TempDir("reshard_bad");
  const LlamaConfig c = TinyConfig();
  const std::string src =
      WriteWithCheckpointWriter(c, RandomState(c, 60), 2, 1, "file://" + root, "j");
  auto r = Reshard(src, root + "/out", 4, 1);  // 2 key/value heads
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("tensor"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(root + "/out"));
  r = Reshard(src, src, 1, 1);
  ASSERT_EQ(r.status().code(), StatusCode::kAlreadyExists) << r.status().ToString();
  r = Reshard(src, root + "/out/step_5", 1, 1);
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("step 12"), std::string::npos) << r.status().message();
  r = Reshard(src, "s3://bucket/x", 1, 1);
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
}

}  // namespace
}  // namespace lote::engine
