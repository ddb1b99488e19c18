// Checkpoint write/read throughput with lote's pieces, on a checkpoint-sized set of
// safetensors files (a TP x DP layout: one model shard per TP rank, one AdamW shard
// per rank, manifest.json last), to any objstore URI. bench/checkpoint/run.sh runs it
// next to dd (file://) and the aws CLI (s3://, moto_server) on the same bytes.
//
// Phases (one per invocation, one JSON line on stdout with bytes and seconds):
//   write         as the training loop's checkpoint writer does it: WriteSafetensors to a
//                 local spool file (fsync), sha256 of it, ObjectStore::PutFile into
//                 <root>/step_1/, spool file removed; then manifest.json.
//   write-direct  file:// only: WriteSafetensors straight into the store folder, then
//                 sha256 (no spool copy).
//   read          as a resume does it: manifest.json, then per file GetFile into a local
//                 folder, sha256 checked, SafetensorsReader::Open + ReadFloat of every
//                 tensor into memory.
//   read-inplace  file:// only, as `lote checkpoint export` does it: sha256 of the
//                 file in the store, then mmap + ReadFloat (no copy).
//   hash-memory   sha256 (OpenSSL) of MB MiB in memory: the checksum's share of the above.
// Before every phase the files it reads are dropped from the page cache
// (posix_fadvise DONTNEED after fsync), so reads come from the disk.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "engine/checkpoint_tools.h"
#include "engine/communicator.h"
#include "engine/safetensors.h"
#include "objstore/objstore.h"

namespace {

namespace fs = std::filesystem;
using lote::Json;
using lote::Status;

struct FileSpec {
  std::string name;
  std::vector<std::string> tensors;
  int64_t floats_per_tensor = 0;
};

// A layout of `mb` MiB: per TP rank P = N / tp parameters (N = bytes / 12: 4 bytes of
// weights + 8 of AdamW moments each), the model shard as 16 tensors, each DP rank's
// optimizer shard as exp_avg + exp_avg_sq of P / dp floats.
std::vector<FileSpec> Layout(int64_t mb, int tp, int dp) {
  const int64_t n = mb * (int64_t{1} << 20) / 12;
  const int64_t p = n / tp;
  std::vector<FileSpec> out;
  for (int r = 0; r < tp; ++r) {
    FileSpec m{fmt::format("model-tp{}.safetensors", r), {}, p / 16};
    for (int i = 0; i < 16; ++i) m.tensors.push_back(fmt::format("model.layers.{}.weight", i));
    out.push_back(m);
    for (int d = 0; d < dp; ++d) {
      out.push_back(
          {fmt::format("optim-tp{}-dp{}.safetensors", r, d), {"exp_avg", "exp_avg_sq"}, p / dp});
    }
  }
  return out;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void DropCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

int Die(const Status& s) {
  fmt::print(stderr, "error: {}\n", s.ToString());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("lote checkpoint write/read benchmark");
  std::string root, spool, phase;
  int64_t mb = 256;
  int tp = 2, dp = 2;
  app.add_option("--root", root, "objstore URI of the job folder")->required();
  app.add_option("--spool", spool, "local folder for spool/downloaded files")->required();
  app.add_option("--phase", phase, "write | write-direct | read | read-inplace | hash-memory")
      ->required();
  app.add_option("--mb", mb, "checkpoint size in MiB")->capture_default_str();
  app.add_option("--tp", tp)->capture_default_str();
  app.add_option("--dp", dp)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<FileSpec> files = Layout(mb, tp, dp);
  auto store_or = lote::objstore::OpenObjectStore(root);
  if (!store_or.ok()) return Die(store_or.status());
  auto& store = *store_or;
  auto uri = lote::objstore::ParseUri(root);
  if (!uri.ok()) return Die(uri.status());
  const bool local = uri->scheme == "file";
  if ((phase == "write-direct" || phase == "read-inplace") && !local) {
    return Die(Status::InvalidArgument(phase + " is for file:// roots only"));
  }
  if (auto s = lote::MakeDirs(spool); !s.ok()) return Die(s);
  const std::string step = "step_1";

  uint64_t bytes = 0;
  double seconds = 0;
  if (phase == "write" || phase == "write-direct") {
    int64_t most = 0;
    for (const FileSpec& f : files) most = std::max(most, f.floats_per_tensor);
    std::vector<float> data(static_cast<size_t>(most));
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    for (float& x : data) x = dist(rng);
    Json listed = Json::object();
    if (local) {
      if (auto s = lote::MakeDirs(uri->key + "/" + step); !s.ok()) return Die(s);
    }
    const double t0 = Now();
    for (const FileSpec& f : files) {
      std::vector<lote::engine::TensorToWrite> tensors;
      for (const std::string& t : f.tensors)
        tensors.push_back({t, {f.floats_per_tensor}, data.data()});
      const std::string path =
          phase == "write" ? spool + "/" + f.name : uri->key + "/" + step + "/" + f.name;
      if (auto s = lote::engine::WriteSafetensors(path, tensors, {{"format", "pt"}}); !s.ok()) {
        return Die(s);
      }
      uint64_t size = 0;
      auto sha = lote::engine::Sha256File(path, &size);
      if (!sha.ok()) return Die(sha.status());
      if (phase == "write") {
        if (auto s = store->PutFile(step + "/" + f.name, path); !s.ok()) return Die(s);
        fs::remove(path);
      }
      listed[f.name] = {{"bytes", size}, {"sha256", *sha}};
      bytes += size;
    }
    Json manifest{{"format", "lote-checkpoint-1"}, {"step", 1}, {"files", listed}};
    if (auto s = store->PutBytes(step + "/manifest.json", manifest.dump(2)); !s.ok()) {
      return Die(s);
    }
    seconds = Now() - t0;
  } else if (phase == "read" || phase == "read-inplace") {
    if (local) {
      for (const FileSpec& f : files) DropCache(uri->key + "/" + step + "/" + f.name);
    }
    std::vector<float> buf;
    const double t0 = Now();
    auto text = store->GetBytes(step + "/manifest.json");
    if (!text.ok()) return Die(text.status());
    auto manifest = lote::ParseJson(*text);
    if (!manifest.ok()) return Die(manifest.status());
    for (const FileSpec& f : files) {
      const std::string path =
          phase == "read" ? spool + "/" + f.name : uri->key + "/" + step + "/" + f.name;
      if (phase == "read") {
        if (auto s = store->GetFile(step + "/" + f.name, path); !s.ok()) return Die(s);
      }
      uint64_t size = 0;
      auto sha = lote::engine::Sha256File(path, &size);
      if (!sha.ok()) return Die(sha.status());
      if ((*manifest)["files"][f.name]["sha256"] != *sha) {
        return Die(Status::DataLoss(f.name + ": sha256 differs from the manifest"));
      }
      auto reader = lote::engine::SafetensorsReader::Open(path);
      if (!reader.ok()) return Die(reader.status());
      for (const auto& [name, info] : (*reader)->tensors()) {
        buf.resize(static_cast<size_t>(info.numel()));
        if (auto s = (*reader)->ReadFloat(name, buf.data(), info.numel()); !s.ok()) return Die(s);
      }
      bytes += size;
      if (phase == "read") fs::remove(path);
    }
    seconds = Now() - t0;
  } else if (phase == "hash-memory") {
    // The checksum alone: sha256 of the checkpoint's bytes from memory.
    std::string data(static_cast<size_t>(mb) << 20, '\x5a');
    const double t0 = Now();
    lote::Sha256Hasher hasher;
    for (size_t off = 0; off < data.size(); off += 4 << 20) {
      hasher.Update(std::string_view(data).substr(off, 4 << 20));
    }
    const std::string hex = hasher.FinishHex();
    seconds = Now() - t0;
    bytes = data.size() + (hex.empty() ? 1 : 0);
  } else {
    return Die(Status::InvalidArgument("unknown --phase " + phase));
  }
  fmt::print("{}\n", Json{{"phase", phase},
                          {"root", root},
                          {"files", files.size()},
                          {"bytes", bytes},
                          {"seconds", seconds},
                          {"gb_per_s", static_cast<double>(bytes) / seconds / 1e9}}
                         .dump());
  return 0;
}
