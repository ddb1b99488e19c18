#include "data/prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "common/crypto.h"
#include "common/files.h"
#include "objstore/objstore.h"

namespace lote::data {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// Work handed from the reader to the tokenizer threads, and their results
// handed, in order, to the packer.
class Pipeline {
 public:
  Pipeline(size_t max_queued) : max_queued_(max_queued) {}

  // Reader side. False when the pipeline failed (stop reading).
  bool Push(std::vector<std::string> docs) {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [&] { return queue_.size() < max_queued_ || !error_.ok(); });
    if (!error_.ok()) return false;
    queue_.push_back({next_seq_++, std::move(docs)});
    work_.notify_one();
    return true;
  }
  void CloseInput() {
    std::lock_guard<std::mutex> lock(mu_);
    input_closed_ = true;
    work_.notify_all();
    results_cv_.notify_all();
  }
  // Worker side. False when there is no more work.
  bool Pop(uint64_t* seq, std::vector<std::string>* docs) {
    std::unique_lock<std::mutex> lock(mu_);
    work_.wait(lock, [&] { return !queue_.empty() || input_closed_ || !error_.ok(); });
    if (queue_.empty() || !error_.ok()) return false;
    *seq = queue_.front().first;
    *docs = std::move(queue_.front().second);
    queue_.pop_front();
    space_.notify_one();
    return true;
  }
  void PutResult(uint64_t seq, std::vector<int32_t> tokens, uint64_t text_bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    // Bound memory: wait while far ahead of the packer.
    space_.wait(lock, [&] { return seq < next_result_ + 4 * max_queued_ || !error_.ok(); });
    results_[seq] = {std::move(tokens), text_bytes};
    results_cv_.notify_all();
  }
  // Packer side: the next result in order; false when all are consumed.
  bool NextResult(std::vector<int32_t>* tokens, uint64_t* text_bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    results_cv_.wait(lock, [&] {
      return results_.count(next_result_) || (input_closed_ && next_result_ == next_seq_) ||
             !error_.ok();
    });
    if (!error_.ok()) return false;
    auto it = results_.find(next_result_);
    if (it == results_.end()) return false;
    *tokens = std::move(it->second.first);
    *text_bytes = it->second.second;
    results_.erase(it);
    ++next_result_;
    space_.notify_all();
    return true;
  }
  void Fail(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = std::move(st);
    work_.notify_all();
    space_.notify_all();
    results_cv_.notify_all();
  }
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable work_, space_, results_cv_;
  // protected by mu_:
  std::deque<std::pair<uint64_t, std::vector<std::string>>> queue_;
  std::map<uint64_t, std::pair<std::vector<int32_t>, uint64_t>> results_;  // tokens, text bytes
  uint64_t next_seq_ = 0;
  uint64_t next_result_ = 0;
  bool input_closed_ = false;
  Status error_;
};

struct ResolvedInput {
  std::vector<CorpusFile> files;
  std::vector<SourceInfo> sources;  // parallel to files
};

// Downloads s3:// inputs into `staging`/inputs and expands local ones.
Result<ResolvedInput> ResolveInputs(const PrepareOptions& options, const std::string& staging) {
  ResolvedInput out;
  int downloaded = 0;
  for (const std::string& input : options.inputs) {
    std::vector<std::string> local;
    std::vector<std::string> names;
    if (input.rfind("s3://", 0) == 0) {
      ASSIGN_OR_RETURN(objstore::Uri uri, objstore::ParseUri(input));
      const std::string key = uri.key;
      objstore::Uri root = uri;
      root.key = "";
      ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(root.ToString()));
      std::vector<std::string> keys;
      auto head =
          key.empty() ? Result<objstore::ObjectInfo>(Status::NotFound("")) : store->Head(key);
      if (head.ok()) {
        keys.push_back(key);
      } else if (head.status().IsNotFound()) {
        ASSIGN_OR_RETURN(auto list, store->List(key.empty() ? "" : key + "/"));
        for (const auto& o : list) keys.push_back(o.key);
        if (keys.empty())
          return Status::NotFound("input " + input + " does not exist (no object or prefix)");
      } else {
        return head.status();
      }
      for (const std::string& k : keys) {
        std::string base = fs::path(k).filename().string();
        std::string path = staging + "/inputs/" + std::to_string(downloaded++) + "-" + base;
        RETURN_IF_ERROR(store->GetFile(k, path));
        local.push_back(path);
        names.push_back("s3://" + uri.bucket + "/" + k);
      }
      for (size_t i = 0; i < local.size(); ++i) {
        ASSIGN_OR_RETURN(auto files, ExpandInputs({local[i]}, options.corpus));
        for (auto& f : files) {
          out.sources.push_back({names[i], f.bytes, ""});
          out.files.push_back(std::move(f));
        }
      }
      continue;
    }
    ASSIGN_OR_RETURN(auto files, ExpandInputs({input}, options.corpus));
    for (auto& f : files) {
      out.sources.push_back({f.path, f.bytes, ""});
      out.files.push_back(std::move(f));
    }
  }
  if (out.files.empty()) return Status::InvalidArgument("no input files (pass --input PATH)");
  for (size_t i = 0; i < out.files.size(); ++i) {
    ASSIGN_OR_RETURN(auto hash, HashFile(out.files[i].path));
    out.sources[i].sha256 = hash.first;
    out.sources[i].bytes = hash.second;
    out.files[i].bytes = hash.second;
  }
  return out;
}

}  // namespace

Result<std::pair<std::string, uint64_t>> HashFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + path);
  Sha256Hasher h;
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Status::Internal("cannot read " + path);
    }
    if (n == 0) break;
    h.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return std::make_pair(h.FinishHex(), total);
}

Result<DatasetManifest> PrepareDataset(const PrepareOptions& options,
                                       const PrepareProgressFn& progress) {
  if (options.block_size <= 0) return Status::InvalidArgument("--block-size must be positive");
  if (options.output_uri.empty()) return Status::InvalidArgument("--output is required");
  if (options.inputs.empty()) return Status::InvalidArgument("--input is required");
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  // The tokenizer first: a wrong model fails fast.
  ASSIGN_OR_RETURN(auto tokenizer, OpenTokenizer(options.tokenizer_path, options.tokenizer));
  ASSIGN_OR_RETURN(auto tokenizer_hash, HashFile(options.tokenizer_path));
  if (tokenizer->bos_id() < 0) {
    return Status::InvalidArgument(options.tokenizer_path +
                                   " has no BOS piece; the recipe needs one");
  }

  // The output must not hold a dataset already.
  ASSIGN_OR_RETURN(objstore::Uri out_uri, objstore::ParseUri(options.output_uri));
  const bool local_output = out_uri.scheme == "file";
  std::string out_dir;
  std::unique_ptr<objstore::ObjectStore> out_store;
  std::string staging;
  if (local_output) {
    std::error_code ec;
    out_dir = fs::absolute(out_uri.key, ec).lexically_normal().string();
    while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
    if (fs::exists(out_dir, ec)) {
      if (!fs::is_directory(out_dir, ec))
        return Status::AlreadyExists("output " + out_dir + " exists and is not a folder");
      if (!fs::is_empty(out_dir, ec)) {
        return Status::AlreadyExists("output " + out_dir +
                                     " is not empty; remove it or choose another --output");
      }
    }
    std::string parent = fs::path(out_dir).parent_path().string();
    RETURN_IF_ERROR(MakeDirs(parent));
    staging = out_dir + ".lote-tmp-" + HexEncode(RandomBytes(6));
  } else {
    ASSIGN_OR_RETURN(out_store, objstore::OpenObjectStore(options.output_uri));
    ASSIGN_OR_RETURN(bool exists, out_store->Exists(kManifestName));
    if (exists) {
      return Status::AlreadyExists(
          "output " + options.output_uri +
          " already holds a dataset (manifest.json); choose another --output");
    }
    staging = (fs::temp_directory_path() / ("lote-prepare-" + HexEncode(RandomBytes(6)))).string();
  }
  RETURN_IF_ERROR(MakeDirs(staging));
  DirGuard guard(staging);
  const std::string dataset_dir = staging + "/dataset";
  RETURN_IF_ERROR(MakeDirs(dataset_dir));

  ASSIGN_OR_RETURN(ResolvedInput inputs, ResolveInputs(options, staging));
  ASSIGN_OR_RETURN(auto writer, IndexedDatasetWriter::Create(dataset_dir, tokenizer->vocab_size(),
                                                             options.block_size));

  // Reader (this thread) -> tokenizer threads -> packer thread.
  CorpusReader reader(inputs.files, options.corpus);
  Pipeline pipeline(static_cast<size_t>(2 * threads));
  std::atomic<uint64_t> source_tokens{0};
  std::atomic<uint64_t> packed_text_bytes{0};  // text of the documents packed so far
  std::atomic<bool> packer_done{false};
  uint64_t read_text_bytes = 0;
  const int32_t bos = tokenizer->bos_id();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      uint64_t seq;
      std::vector<std::string> docs;
      while (pipeline.Pop(&seq, &docs)) {
        std::vector<int32_t> tokens;
        size_t bytes = 0;
        for (const auto& d : docs) bytes += d.size();
        tokens.reserve(bytes / 3 + docs.size());
        for (const auto& d : docs) {
          tokens.push_back(bos);
          Status st = tokenizer->Encode(d, &tokens);
          if (!st.ok()) {
            pipeline.Fail(st);
            return;
          }
        }
        pipeline.PutResult(seq, std::move(tokens), bytes);
      }
    });
  }
  std::thread packer([&] {
    std::vector<int32_t> block;
    block.reserve(static_cast<size_t>(options.block_size));
    std::vector<int32_t> tokens;
    uint64_t text_bytes = 0;
    while (pipeline.NextResult(&tokens, &text_bytes)) {
      source_tokens += tokens.size();
      packed_text_bytes += text_bytes;
      size_t pos = 0;
      while (pos < tokens.size()) {
        size_t take =
            std::min(tokens.size() - pos, static_cast<size_t>(options.block_size) - block.size());
        block.insert(block.end(), tokens.begin() + static_cast<ptrdiff_t>(pos),
                     tokens.begin() + static_cast<ptrdiff_t>(pos + take));
        pos += take;
        if (block.size() == static_cast<size_t>(options.block_size)) {
          Status st = writer->AddSequence(block.data());
          if (!st.ok()) {
            pipeline.Fail(st);
            packer_done = true;
            return;
          }
          block.clear();
        }
      }
    }
    packer_done = true;
  });

  const auto start = SteadyClock::now();
  auto last_report = start;
  auto report = [&](bool final) {
    if (!progress) return;
    auto now = SteadyClock::now();
    if (!final && now - last_report < std::chrono::milliseconds(100)) return;
    last_report = now;
    PrepareProgress p;
    p.phase = "tokenize";
    // Input bytes read, scaled by the share of the text read that is already packed.
    const double packed_share = read_text_bytes ? static_cast<double>(packed_text_bytes.load()) /
                                                      static_cast<double>(read_text_bytes)
                                                : 0;
    p.bytes_done = final ? reader.total_bytes()
                         : static_cast<uint64_t>(static_cast<double>(reader.bytes_read()) *
                                                 std::min(1.0, packed_share));
    p.bytes_total = reader.total_bytes();
    p.documents = reader.documents();
    p.tokens = source_tokens.load();
    p.elapsed_s = std::chrono::duration<double>(now - start).count();
    p.final = final;
    progress(p);
  };
  Status read_status;
  for (;;) {
    std::vector<std::string> docs;
    auto more = reader.NextBatch(options.batch_bytes, &docs);
    if (!more.ok()) {
      read_status = more.status();
      pipeline.Fail(read_status);
      break;
    }
    for (const auto& d : docs) read_text_bytes += d.size();
    if (!docs.empty() && !pipeline.Push(std::move(docs))) break;
    report(false);
    if (!*more) break;
  }
  pipeline.CloseInput();
  while (!packer_done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    report(false);
  }
  for (auto& w : workers) w.join();
  packer.join();
  RETURN_IF_ERROR(pipeline.error());
  RETURN_IF_ERROR(read_status);
  report(true);
  RETURN_IF_ERROR(writer->Finish());

  DatasetManifest m;
  m.dtype = writer->dtype_name();
  m.tokenizer_sha256 = tokenizer_hash.first;
  m.vocab_size = tokenizer->vocab_size();
  m.bos_id = bos;
  m.block_size = options.block_size;
  m.num_sequences = writer->num_sequences();
  m.num_tokens = m.num_sequences * m.block_size;
  m.num_documents = static_cast<int64_t>(reader.documents());
  m.num_source_tokens = static_cast<int64_t>(source_tokens.load());
  m.sources = inputs.sources;
  m.files = writer->files();
  if (m.num_sequences == 0) {
    return Status::InvalidArgument("the input has " + std::to_string(m.num_source_tokens) +
                                   " tokens, fewer than one block of " +
                                   std::to_string(m.block_size) +
                                   "; nothing written (use a smaller --block-size or more input)");
  }
  const std::string manifest_text = m.ToJson().dump(2) + "\n";
  RETURN_IF_ERROR(WriteFileAtomic(dataset_dir + "/" + kManifestName, manifest_text));

  if (local_output) {
    // An empty output folder is replaced by the rename; the dataset appears at once.
    if (::rename(dataset_dir.c_str(), out_dir.c_str()) != 0) {
      return Status::Internal("cannot move the dataset into " + out_dir + ": " +
                              std::strerror(errno));
    }
    RETURN_IF_ERROR(SyncPath(fs::path(out_dir).parent_path().string()));
    return m;
  }
  // Upload: data files first, the manifest last; on failure remove what went up.
  const std::string bin = std::string(kDatasetPrefix) + ".bin";
  const std::string idx = std::string(kDatasetPrefix) + ".idx";
  uint64_t total = 0;
  for (const auto& name : {bin, idx}) total += fs::file_size(dataset_dir + "/" + name);
  uint64_t base = 0;
  const auto up_start = SteadyClock::now();
  auto up_progress = [&](uint64_t done, uint64_t) {
    if (!progress) return;
    auto now = SteadyClock::now();
    if (now - last_report < std::chrono::milliseconds(100)) return;
    last_report = now;
    PrepareProgress p;
    p.phase = "upload";
    p.bytes_done = base + done;
    p.bytes_total = total;
    p.elapsed_s = std::chrono::duration<double>(now - up_start).count();
    progress(p);
  };
  Status up;
  for (const auto& name : {bin, idx}) {
    up = out_store->PutFile(name, dataset_dir + "/" + name, up_progress);
    if (!up.ok()) break;
    base += fs::file_size(dataset_dir + "/" + name);
  }
  if (up.ok()) up = out_store->PutBytes(kManifestName, manifest_text);
  if (!up.ok()) {
    for (const auto& name : {bin, idx}) (void)out_store->Delete(name);
    return up.WithContext("upload to " + options.output_uri + " failed; nothing was left there");
  }
  if (progress) {
    PrepareProgress p;
    p.phase = "upload";
    p.bytes_done = p.bytes_total = total;
    p.elapsed_s = std::chrono::duration<double>(SteadyClock::now() - up_start).count();
    p.final = true;
    progress(p);
  }
  return m;
}

}  // namespace lote::data
