// FetchDataset: local folders used in place; s3:// datasets downloaded from a
// real S3-compatible server (moto_server, started here on a free loopback
// port) into a cache, checked, reused, and downloaded once for concurrent
// callers. Requests are counted by a store that wraps the real S3 store.
#include "engine/dataset_cache.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "common/crypto.h"
#include "common/files.h"
#include "data/indexed_dataset.h"
#include "engine/indexed_dataset.h"
#include "objstore/moto_for_tests.h"
#include "objstore/s3_store.h"

namespace lote::engine {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("lote-dcache-test-" + HexEncode(RandomBytes(6)));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// A dataset of `n` blocks of `block` tokens in `dir`; its manifest lists the
// files' digests unless `old_manifest` (a manifest from before they existed).
data::DatasetManifest MakeDataset(const std::string& dir, int64_t n, int64_t block,
                                  bool old_manifest = false, int seed = 0) {
  fs::create_directories(dir);
  auto w = data::IndexedDatasetWriter::Create(dir, 32000, block);
  EXPECT_TRUE(w.ok());
  std::vector<int32_t> tokens(static_cast<size_t>(block));
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t i = 0; i < block; ++i)
      tokens[static_cast<size_t>(i)] = (s * 31 + i * 7 + seed) % 32000;
    EXPECT_TRUE((*w)->AddSequence(tokens.data()).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  data::DatasetManifest m;
  m.dtype = (*w)->dtype_name();
  m.tokenizer_sha256 = std::string(64, '0');
  m.vocab_size = 32000;
  m.block_size = block;
  m.num_sequences = n;
  m.num_tokens = n * block;
  m.num_documents = n;
  m.num_source_tokens = n * block;
  if (!old_manifest) m.files = (*w)->files();
  EXPECT_TRUE(WriteFileAtomic(dir + "/manifest.json", m.ToJson().dump(2) + "\n").ok());
  return m;
}

FetchOptions CacheAt(const std::string& root) {
  FetchOptions o;
  o.cache_root = root;
  return o;
}

TEST(DatasetCacheTest, DefaultCacheRootFollowsTheVariables) {
  const char* saved[] = {std::getenv("LOTE_CACHE_DIR"), std::getenv("XDG_CACHE_HOME")};
  std::string keep[] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : ""};
  ::setenv("LOTE_CACHE_DIR", "/c/lote", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  EXPECT_EQ(DefaultDatasetCacheRoot(), "/c/lote");
  ::setenv("LOTE_CACHE_DIR", "", 1);  // empty counts as unset
  EXPECT_EQ(DefaultDatasetCacheRoot(), "/x/lote/datasets");
  ::unsetenv("LOTE_CACHE_DIR");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultDatasetCacheRoot(), HomeDir() + "/.cache/lote/datasets");
  if (saved[0]) ::setenv("LOTE_CACHE_DIR", keep[0].c_str(), 1);
  if (saved[1]) ::setenv("XDG_CACHE_HOME", keep[1].c_str(), 1);
}

TEST(DatasetCacheTest, LocalFoldersAreUsedInPlace) {
  TempDir t;
  const std::string dir = t.path() + "/ds";
  MakeDataset(dir, 6, 64);
  const std::string cache = t.path() + "/cache";
  for (const std::string& given : {dir, "file://" + dir}) {
    auto got = FetchDataset(given, CacheAt(cache));
    ASSERT_TRUE(got.ok()) << given << ": " << got.status().ToString();
    EXPECT_EQ(got->dir, dir);
    EXPECT_FALSE(got->cached);
    EXPECT_FALSE(got->downloaded);
  }
  EXPECT_FALSE(fs::exists(cache));  // nothing copied

  auto missing = FetchDataset(t.path() + "/nope", CacheAt(cache));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(t.path() + "/nope"), std::string::npos);
  fs::create_directories(t.path() + "/empty");
  EXPECT_EQ(FetchDataset(t.path() + "/empty").status().code(), StatusCode::kNotFound);

  // Bytes appended to data.bin: the index still fits, the manifest's size does not.
  {
    std::string bin = *ReadFile(dir + "/data.bin");
    ASSERT_TRUE(WriteFileAtomic(dir + "/data.bin", bin + "xx").ok());
  }
  auto grown = FetchDataset(dir, CacheAt(cache));
  EXPECT_EQ(grown.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(grown.status().message().find("data.bin"), std::string::npos)
      << grown.status().ToString();
}

// ---- s3:// against moto_server ----------------------------------------------

objstore::S3Config TestConfig(const std::string& endpoint) {
  return objstore::testing::MotoConfig(endpoint);
}

constexpr const char* kBucket = "lote-dcache";

// What the wrapped stores were asked for, by operation and key; shared by all
// the stores one test opens.
struct Requests {
  std::mutex mu;
  std::map<std::string, int> counts;  // "GetFile data.bin" -> n   (protected by mu)
  // Runs before GetFile of data.bin (tests hold the download there); set
  // before the stores are used.
  std::function<Status()> before_bin;

  void Count(const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    ++counts[what];
  }
  int Get(const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    return counts[what];
  }
  void Reset() {
    std::lock_guard<std::mutex> l(mu);
    counts.clear();
  }
};

class RecordingStore final : public objstore::ObjectStore {
 public:
  RecordingStore(std::unique_ptr<objstore::ObjectStore> inner, Requests* r)
      : inner_(std::move(inner)), r_(r) {}
  std::string RootUri() const override { return inner_->RootUri(); }
  Status PutBytes(const std::string& key, std::string_view data) override {
    return inner_->PutBytes(key, data);
  }
  Status PutFile(const std::string& key, const std::string& path,
                 const objstore::ProgressFn& p) override {
    return inner_->PutFile(key, path, p);
  }
  Result<std::string> GetBytes(const std::string& key) override {
    r_->Count("GetBytes " + key);
    return inner_->GetBytes(key);
  }
  Status GetFile(const std::string& key, const std::string& path,
                 const objstore::ProgressFn& p) override {
    r_->Count("GetFile " + key);
    if (key == "data.bin" && r_->before_bin) RETURN_IF_ERROR(r_->before_bin());
    return inner_->GetFile(key, path, p);
  }
  Result<std::string> GetRange(const std::string& key, uint64_t offset, uint64_t length) override {
    r_->Count("GetRange " + key);
    return inner_->GetRange(key, offset, length);
  }
  Result<objstore::ObjectInfo> Head(const std::string& key) override {
    r_->Count("Head " + key);
    return inner_->Head(key);
  }
  Result<std::vector<objstore::ObjectInfo>> List(const std::string& prefix) override {
    return inner_->List(prefix);
  }
  Status Delete(const std::string& key) override { return inner_->Delete(key); }

 private:
  std::unique_ptr<objstore::ObjectStore> inner_;
  Requests* r_;
};

// One moto_server for the suite, in its own process group.
class S3DatasetCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new objstore::testing::MotoServer();
    ready_ = moto_->ready() && moto_->CreateBucket(kBucket);
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }
  static std::string Endpoint() { return moto_->endpoint(); }

  void SetUp() override { ASSERT_TRUE(ready_) << "moto_server did not start"; }

  // Uploads the three files of a local dataset folder to s3://kBucket/prefix.
  static void Upload(const std::string& dir, const std::string& prefix, bool with_bin = true) {
    auto s = objstore::S3Store::Open(kBucket, prefix, TestConfig(Endpoint()));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (const char* f : {"data.idx", "data.bin", "manifest.json"}) {
      if (!with_bin && std::string(f) == "data.bin") continue;
      Status st = (*s)->PutFile(f, dir + "/" + f);
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
  }

  FetchOptions Options(const std::string& cache) {
    FetchOptions o;
    o.cache_root = cache;
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> l(log_mu_);
      log_ += std::string(line) + "\n";
    };
    o.open_store = [this](std::string_view uri) -> Result<std::unique_ptr<objstore::ObjectStore>> {
      ASSIGN_OR_RETURN(objstore::Uri u, objstore::ParseUri(uri));
      ASSIGN_OR_RETURN(auto inner,
                       objstore::S3Store::Open(u.bucket, u.key, TestConfig(Endpoint())));
      return std::unique_ptr<objstore::ObjectStore>(
          std::make_unique<RecordingStore>(std::move(inner), &requests_));
    };
    return o;
  }
  std::string Log() {
    std::lock_guard<std::mutex> l(log_mu_);
    return log_;
  }

  static objstore::testing::MotoServer* moto_;
  static bool ready_;
  Requests requests_;
  std::mutex log_mu_;
  std::string log_;  // protected by log_mu_
};
objstore::testing::MotoServer* S3DatasetCacheTest::moto_ = nullptr;
bool S3DatasetCacheTest::ready_ = false;

bool SameFiles(const std::string& a, const std::string& b) {
  for (const char* f : {"data.idx", "data.bin", "manifest.json"}) {
    auto x = ReadFile(a + "/" + f), y = ReadFile(b + "/" + f);
    if (!x.ok() || !y.ok() || *x != *y) return false;
  }
  return true;
}

// Names under the cache root other than entries' lock files.
std::vector<std::string> CacheEntries(const std::string& cache) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache, ec)) {
    const std::string n = e.path().filename().string();
    if (!n.ends_with(".lock")) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(S3DatasetCacheTest, DownloadsVerifiesAndReuses) {
  TempDir t;
  const std::string src = t.path() + "/src";
  data::DatasetManifest m = MakeDataset(src, 40, 256);
  Upload(src, "datasets/wiki");
  const std::string cache = t.path() + "/cache";
  const std::string uri = std::string("s3://") + kBucket + "/datasets/wiki";

  uint64_t last_done = 0, last_total = 0;
  FetchOptions o = Options(cache);
  o.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  };
  auto first = FetchDataset(uri, o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->cached);
  EXPECT_TRUE(first->downloaded);
  EXPECT_EQ(fs::path(first->dir).parent_path().string(), cache);
  EXPECT_TRUE(fs::path(first->dir).filename().string().starts_with("wiki-"));
  EXPECT_TRUE(SameFiles(first->dir, src));
  EXPECT_EQ(last_total, m.file("data.bin")->bytes + m.file("data.idx")->bytes);
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(requests_.Get("GetFile data.bin"), 1);
  EXPECT_EQ(requests_.Get("GetFile data.idx"), 1);
  EXPECT_EQ(requests_.Get("GetBytes manifest.json"), 1);
  EXPECT_EQ(requests_.Get("Head data.bin"), 0);  // the manifest has the sizes
  EXPECT_EQ(Log(), "");
  // Only the entry remains: no temporary folder.
  EXPECT_EQ(CacheEntries(cache),
            std::vector<std::string>{fs::path(first->dir).filename().string()});
  auto opened = engine::IndexedDataset::Open(first->dir);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->num_sequences(), 40);

  // Again: the entry is reused; only the manifest is read from the store.
  requests_.Reset();
  auto second = FetchDataset(uri + "/", Options(cache));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->dir, first->dir);
  EXPECT_FALSE(second->downloaded);
  EXPECT_EQ(requests_.Get("GetFile data.bin"), 0);
  EXPECT_EQ(requests_.Get("GetFile data.idx"), 0);
  EXPECT_EQ(requests_.Get("GetBytes manifest.json"), 1);

  // A damaged entry (truncated data.bin) is noticed from its size and replaced.
  fs::resize_file(first->dir + "/data.bin", 100);
  requests_.Reset();
  auto third = FetchDataset(uri, Options(cache));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE(third->downloaded);
  EXPECT_EQ(requests_.Get("GetFile data.bin"), 1);
  EXPECT_TRUE(SameFiles(third->dir, src));
  EXPECT_NE(Log().find("damaged"), std::string::npos) << Log();
  EXPECT_EQ(CacheEntries(cache).size(), 1u);

  // The dataset rewritten at the same URI gets a new entry (the manifest is part of the key).
  const std::string src2 = t.path() + "/src2";
  MakeDataset(src2, 41, 256, false, 5);
  auto s3 = objstore::S3Store::Open(kBucket, "datasets/wiki", TestConfig(Endpoint()));
  ASSERT_TRUE(s3.ok());
  for (const char* f : {"data.idx", "data.bin", "manifest.json"}) {
    ASSERT_TRUE((*s3)->PutFile(f, src2 + "/" + f).ok());
  }
  auto fourth = FetchDataset(uri, Options(cache));
  ASSERT_TRUE(fourth.ok()) << fourth.status().ToString();
  EXPECT_TRUE(fourth->downloaded);
  EXPECT_NE(fourth->dir, first->dir);
  EXPECT_TRUE(SameFiles(fourth->dir, src2));

  // The default opener (standard AWS variables) reaches the same entry.
  ::setenv("AWS_ACCESS_KEY_ID", "testing", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
  ::setenv("AWS_DEFAULT_REGION", "us-east-1", 1);
  ::setenv("AWS_ENDPOINT_URL_S3", Endpoint().c_str(), 1);
  ::unsetenv("AWS_PROFILE");
  auto plain = FetchDataset(uri, CacheAt(cache));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->dir, fourth->dir);
  EXPECT_FALSE(plain->downloaded);
}

TEST_F(S3DatasetCacheTest, CorruptionIsDetectedAndNothingIsKept) {
  TempDir t;
  const std::string src = t.path() + "/src";
  data::DatasetManifest m = MakeDataset(src, 10, 128);
  // Same size, one byte changed after the manifest was written.
  std::string bin = *ReadFile(src + "/data.bin");
  bin[300] ^= 0x5a;
  ASSERT_TRUE(WriteFileAtomic(src + "/data.bin", bin).ok());
  Upload(src, "bad/one");
  const std::string cache = t.path() + "/cache";

  auto got = FetchDataset(std::string("s3://") + kBucket + "/bad/one", Options(cache));
  ASSERT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
  const std::string& msg = got.status().message();
  EXPECT_NE(msg.find("data.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find(m.file("data.bin")->sha256), std::string::npos) << msg;
  EXPECT_NE(msg.find(Sha256Hex(bin)), std::string::npos) << msg;
  EXPECT_TRUE(CacheEntries(cache).empty());  // no entry, no temporary folder

  // A corrupt index is named too.
  const std::string src2 = t.path() + "/src2";
  data::DatasetManifest m2 = MakeDataset(src2, 10, 128);
  std::string idx = *ReadFile(src2 + "/data.idx");
  idx[40] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(src2 + "/data.idx", idx).ok());
  Upload(src2, "bad/two");
  auto got2 = FetchDataset(std::string("s3://") + kBucket + "/bad/two", Options(cache));
  ASSERT_EQ(got2.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got2.status().message().find("data.idx: sha256 mismatch"), std::string::npos)
      << got2.status().ToString();
  EXPECT_NE(got2.status().message().find(m2.file("data.idx")->sha256), std::string::npos);
  EXPECT_TRUE(CacheEntries(cache).empty());
}

TEST_F(S3DatasetCacheTest, MissingObjectsAreNamed) {
  TempDir t;
  const std::string cache = t.path() + "/cache";
  auto none = FetchDataset(std::string("s3://") + kBucket + "/nothing/here", Options(cache));
  ASSERT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("s3://lote-dcache/nothing/here has no manifest.json"),
            std::string::npos)
      << none.status().ToString();

  const std::string src = t.path() + "/src";
  MakeDataset(src, 4, 64);
  Upload(src, "half/done", /*with_bin=*/false);
  auto half = FetchDataset(std::string("s3://") + kBucket + "/half/done", Options(cache));
  ASSERT_EQ(half.status().code(), StatusCode::kNotFound) << half.status().ToString();
  EXPECT_NE(half.status().message().find("s3://lote-dcache/half/done/data.bin is missing"),
            std::string::npos)
      << half.status().ToString();
  EXPECT_TRUE(CacheEntries(cache).empty());

  // A bucket that does not exist.
  auto nob = FetchDataset("s3://no-such-bucket-lote/x", Options(cache));
  EXPECT_FALSE(nob.ok());
}

TEST_F(S3DatasetCacheTest, OldManifestsAreCheckedBySizeWithAWarning) {
  TempDir t;
  const std::string src = t.path() + "/src";
  MakeDataset(src, 8, 128, /*old_manifest=*/true);
  Upload(src, "old/ds");
  const std::string cache = t.path() + "/cache";
  const std::string uri = std::string("s3://") + kBucket + "/old/ds";
  auto first = FetchDataset(uri, Options(cache));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->downloaded);
  EXPECT_TRUE(SameFiles(first->dir, src));
  EXPECT_NE(Log().find("checked by size only"), std::string::npos) << Log();
  EXPECT_EQ(requests_.Get("Head data.bin"), 1);  // the size comes from the store

  // Reuse checks the sizes with Head; data.bin is not downloaded again.
  requests_.Reset();
  auto second = FetchDataset(uri, Options(cache));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->downloaded);
  EXPECT_EQ(requests_.Get("GetFile data.bin"), 0);
  EXPECT_EQ(requests_.Get("Head data.bin"), 1);
}

TEST_F(S3DatasetCacheTest, ConcurrentCallersDownloadOnce) {
  TempDir t;
  const std::string src = t.path() + "/src";
  MakeDataset(src, 30, 512);
  Upload(src, "shared/ds");
  const std::string cache = t.path() + "/cache";
  const std::string uri = std::string("s3://") + kBucket + "/shared/ds";

  // Whoever takes the lock first holds data.bin's download until the other
  // caller has found the lock taken and is about to wait: the two really overlap.
  std::mutex mu;
  std::condition_variable cv;
  int waits = 0;  // protected by mu
  requests_.before_bin = [&]() -> Status {
    std::unique_lock<std::mutex> l(mu);
    // Not a timing assertion: a bound so that a bug fails the test instead of hanging it.
    if (!cv.wait_for(l, std::chrono::seconds(120), [&] { return waits > 0; })) {
      return Status::DeadlineExceeded("no second caller waited for the lock");
    }
    return Status::Ok();
  };
  FetchOptions o = Options(cache);
  o.on_wait = [&] {
    std::lock_guard<std::mutex> l(mu);
    ++waits;
    cv.notify_all();
  };
  Result<FetchedDataset> a = Status::Internal("not run"), b = Status::Internal("not run");
  std::thread ta([&] { a = FetchDataset(uri, o); });
  std::thread tb([&] { b = FetchDataset(uri, o); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->dir, b->dir);
  EXPECT_NE(a->downloaded, b->downloaded);  // exactly one downloaded
  EXPECT_EQ(requests_.Get("GetFile data.bin"), 1);
  EXPECT_EQ(requests_.Get("GetFile data.idx"), 1);
  EXPECT_EQ(waits, 1);
  EXPECT_NE(Log().find("waiting for another process"), std::string::npos) << Log();
  EXPECT_TRUE(SameFiles(a->dir, src));
}

// The same across processes (several launchers or ranks on one node): each
// child reports through its exit code whether it downloaded and how often it
// fetched data.bin.
TEST_F(S3DatasetCacheTest, ConcurrentProcessesDownloadOnce) {
  TempDir t;
  const std::string src = t.path() + "/src";
  MakeDataset(src, 30, 512);
  Upload(src, "shared/procs");
  const std::string cache = t.path() + "/cache";
  const std::string uri = std::string("s3://") + kBucket + "/shared/procs";
  int waited[2];
  ASSERT_EQ(::pipe(waited), 0);
  // The lock holder's data.bin download waits for a byte from the child that
  // found the lock taken.
  requests_.before_bin = [&]() -> Status {
    pollfd p{waited[0], POLLIN, 0};
    // Not a timing assertion: a bound so that a bug fails the test instead of hanging it.
    if (::poll(&p, 1, 120'000) != 1) return Status::DeadlineExceeded("no caller waited");
    char c;
    return ::read(waited[0], &c, 1) == 1 ? Status::Ok() : Status::Internal("read");
  };
  FetchOptions o = Options(cache);
  o.on_wait = [&] {
    const char c = 'w';
    if (::write(waited[1], &c, 1) != 1) ::_exit(100);
  };
  pid_t kids[2];
  for (pid_t& kid : kids) {
    kid = ::fork();
    ASSERT_GE(kid, 0);
    if (kid == 0) {
      auto got = FetchDataset(uri, o);
      if (!got.ok() || !SameFiles(got->dir, src)) ::_exit(100);
      ::_exit((got->downloaded ? 1 : 0) + 2 * requests_.Get("GetFile data.bin"));
    }
  }
  int downloads = 0, bin_gets = 0;
  for (pid_t kid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(kid, &status, 0), kid);
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    ASSERT_LT(code, 100) << "a child failed";
    downloads += code & 1;
    bin_gets += code >> 1;
  }
  ::close(waited[0]);
  ::close(waited[1]);
  EXPECT_EQ(downloads, 1);
  EXPECT_EQ(bin_gets, 1);
  EXPECT_EQ(CacheEntries(cache).size(), 1u);
}

}  // namespace
}  // namespace lote::engine
