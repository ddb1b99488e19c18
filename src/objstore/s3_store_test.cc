// S3Store against a real S3-compatible server (moto_server, started here on a
// free loopback port), checked both ways with the stock `aws` CLI; and retry /
// integrity behaviour against a small faulty server.
#include "objstore/s3_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "common/crypto.h"
#include "common/files.h"
#include "objstore/moto_for_tests.h"

namespace lote::objstore {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string RunCommand(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

using testing::MotoServer;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("lote-s3-test-" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

S3Config TestConfig(const std::string& endpoint) {
  S3Config cfg;
  cfg.endpoint = endpoint;
  cfg.region = "us-east-1";
  cfg.credentials = {"testing", "testing", ""};
  cfg.multipart_threshold = 6 << 20;
  cfg.part_size = 5 << 20;
  cfg.initial_backoff_ms = 10;
  return cfg;
}

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

TEST(S3StoreTest, RoundTripsAndInteroperatesWithAwsCli) {
  MotoServer moto;
  ASSERT_TRUE(moto.ready()) << "moto_server did not start";
  TempDir dir;
  ::setenv("AWS_ACCESS_KEY_ID", "testing", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
  ::setenv("AWS_DEFAULT_REGION", "us-east-1", 1);
  ::setenv("AWS_ENDPOINT_URL_S3", moto.endpoint().c_str(), 1);
  ::unsetenv("AWS_PROFILE");

  auto store = S3Store::Open("lote-test", "runs/r1", TestConfig(moto.endpoint()));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  S3Store& s = **store;
  ASSERT_TRUE(s.CreateBucket().ok());
  ASSERT_TRUE(s.CreateBucket().ok());  // idempotent

  // Small objects, keys that need encoding.
  ASSERT_TRUE(s.PutBytes("a/hello world+1.txt", "hello").ok());
  ASSERT_TRUE(s.PutBytes("a/empty", "").ok());
  auto got = s.GetBytes("a/hello world+1.txt");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "hello");
  EXPECT_EQ(*s.GetBytes("a/empty"), "");
  auto head = s.Head("a/hello world+1.txt");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, 5u);
  EXPECT_EQ(head->etag, "5d41402abc4b2a76b9719d911017c592");
  EXPECT_TRUE(s.Head("a/missing").status().IsNotFound());
  EXPECT_FALSE(*s.Exists("a/missing"));

  // A large file goes up in parts, with progress, and comes back identical.
  std::string big = Pattern((13 << 20) + 17, 7);
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/big.bin", big).ok());
  uint64_t last = 0;
  int calls = 0;
  Status put = s.PutFile("b/big.bin", dir.path() + "/big.bin", [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last);
    EXPECT_EQ(total, big.size());
    last = done;
    ++calls;
  });
  ASSERT_TRUE(put.ok()) << put.ToString();
  // How many intermediate reports come depends on how fast the parts go up
  // (the calling thread samples them); the last one is always the total.
  EXPECT_GE(calls, 1);
  EXPECT_EQ(last, big.size());
  auto big_head = s.Head("b/big.bin");
  ASSERT_TRUE(big_head.ok());
  EXPECT_NE(big_head->etag.find("-3"), std::string::npos) << big_head->etag;  // 3 parts
  ASSERT_TRUE(s.GetFile("b/big.bin", dir.path() + "/back.bin").ok());
  // Ranged reads (HTTP Range): across a part boundary, cut at the end, past it.
  auto range = s.GetRange("b/big.bin", (5 << 20) - 3, 10);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_TRUE(*range == big.substr((5 << 20) - 3, 10));
  EXPECT_TRUE(*s.GetRange("b/big.bin", big.size() - 4, 100) == big.substr(big.size() - 4));
  EXPECT_EQ(*s.GetRange("b/big.bin", big.size(), 10), "");
  EXPECT_TRUE(s.GetRange("b/none.bin", 0, 10).status().IsNotFound());
  EXPECT_TRUE(*ReadFile(dir.path() + "/back.bin") == big);

  auto list = s.List("");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].key, "a/empty");
  EXPECT_EQ((*list)[1].key, "a/hello world+1.txt");
  EXPECT_EQ((*list)[2].key, "b/big.bin");
  EXPECT_EQ((*list)[2].size, big.size());
  EXPECT_EQ(s.List("a/")->size(), 2u);

  // The stock aws CLI sees and reads what lote wrote...
  int rc = 0;
  std::string ep = " --endpoint-url " + moto.endpoint() + " ";
  std::string ls = RunCommand("aws" + ep + "s3 ls --recursive s3://lote-test/runs/r1/ 2>&1", &rc);
  ASSERT_EQ(rc, 0) << ls;
  EXPECT_NE(ls.find("runs/r1/b/big.bin"), std::string::npos) << ls;
  EXPECT_NE(ls.find(std::to_string(big.size())), std::string::npos) << ls;
  std::string cp = RunCommand(
      "aws" + ep + "s3 cp s3://lote-test/runs/r1/b/big.bin " + dir.path() + "/cli.bin 2>&1", &rc);
  ASSERT_EQ(rc, 0) << cp;
  EXPECT_TRUE(*ReadFile(dir.path() + "/cli.bin") == big);

  // ...and lote reads what the CLI wrote (the CLI uses multipart above 8 MiB).
  std::string cli_data = Pattern((9 << 20) + 3, 11);
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/up.bin", cli_data).ok());
  cp = RunCommand(
      "aws" + ep + "s3 cp " + dir.path() + "/up.bin s3://lote-test/runs/r1/from-cli.bin 2>&1", &rc);
  ASSERT_EQ(rc, 0) << cp;
  ASSERT_TRUE(s.GetFile("from-cli.bin", dir.path() + "/got.bin").ok());
  EXPECT_TRUE(*ReadFile(dir.path() + "/got.bin") == cli_data);

  // OpenObjectStore resolves the endpoint and credentials from the environment.
  auto via_env = OpenObjectStore("s3://lote-test/runs");
  ASSERT_TRUE(via_env.ok()) << via_env.status().ToString();
  auto r1 = (*via_env)->GetBytes("r1/a/hello world+1.txt");
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(*r1, "hello");

  ASSERT_TRUE(s.Delete("b/big.bin").ok());
  EXPECT_TRUE(s.Delete("b/big.bin").ok());
  EXPECT_TRUE(s.Head("b/big.bin").status().IsNotFound());
  EXPECT_TRUE(s.GetFile("b/big.bin", dir.path() + "/none.bin").IsNotFound());
  EXPECT_FALSE(FileExists(dir.path() + "/none.bin"));

  // Wrong credentials are a clear error, not a retry loop.
  S3Config bad = TestConfig(moto.endpoint());
  bad.credentials = {"", "", ""};
  auto bad_store = S3Store::Open("no-such-bucket-x", "", bad);
  ASSERT_TRUE(bad_store.ok());
  EXPECT_FALSE((*bad_store)->GetBytes("k").ok());
}

// A server that fails the first `failures` PUTs with 503, then stores the body
// and answers with its MD5 as ETag (or a wrong ETag when `corrupt`).
class FlakyServer {
 public:
  FlakyServer(int failures, bool corrupt) : failures_(failures), corrupt_(corrupt) {
    server_.Put(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      if (puts_++ < failures_) {
        res.status = 503;
        res.set_content("<Error><Code>SlowDown</Code></Error>", "application/xml");
        return;
      }
      std::string etag = corrupt_ ? std::string(32, '0') : HexEncode(Md5Raw(req.body));
      res.set_header("ETag", "\"" + etag + "\"");
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FlakyServer() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int puts() const { return puts_.load(); }

 private:
  static std::string Md5Raw(const std::string& data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), out, &n, EVP_md5(), nullptr);
    return std::string(reinterpret_cast<char*>(out), n);
  }
  int failures_;
  bool corrupt_;
  std::atomic<int> puts_{0};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(S3StoreRetryTest, RetriesServerErrorsThenSucceeds) {
  FlakyServer server(2, false);
  auto store = S3Store::Open("b", "", TestConfig(server.endpoint()));
  ASSERT_TRUE(store.ok());
  Status st = (*store)->PutBytes("k", "payload");
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(server.puts(), 3);
  EXPECT_EQ((*store)->retries(), 2);
}

TEST(S3StoreRetryTest, GivesUpAfterMaxAttempts) {
  FlakyServer server(100, false);
  S3Config cfg = TestConfig(server.endpoint());
  cfg.max_attempts = 3;
  auto store = S3Store::Open("b", "", cfg);
  ASSERT_TRUE(store.ok());
  Status st = (*store)->PutBytes("k", "payload");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("SlowDown"), std::string::npos) << st.ToString();
  EXPECT_EQ(server.puts(), 3);
}

TEST(S3StoreRetryTest, DetectsIntegrityMismatch) {
  FlakyServer server(0, true);
  auto store = S3Store::Open("b", "", TestConfig(server.endpoint()));
  ASSERT_TRUE(store.ok());
  Status st = (*store)->PutBytes("k", "payload");
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
}

TEST(S3StoreRetryTest, NetworkErrorIsUnavailable) {
  S3Config cfg = TestConfig("http://127.0.0.1:" + std::to_string(FreePort()));
  cfg.max_attempts = 2;
  auto store = S3Store::Open("b", "", cfg);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->PutBytes("k", "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ((*store)->retries(), 1);
}

// A minimal multipart endpoint. Each part PUT waits (up to 5 s) until another
// part is in flight too, so a serial uploader is seen as such; it records the
// most parts in flight at once, fails part `flaky_part` with 503 `flaky_times`
// times, answers part `corrupt_part` with a wrong ETag, and counts completes
// and aborts. The completed object is the parts joined in order.
class MultipartServer {
 public:
  MultipartServer(int flaky_part, int flaky_times, int corrupt_part)
      : flaky_part_(flaky_part), flaky_times_(flaky_times), corrupt_part_(corrupt_part) {
    server_.Post(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.has_param("uploads")) {
        res.set_content(
            "<InitiateMultipartUploadResult><UploadId>up-1</UploadId>"
            "</InitiateMultipartUploadResult>",
            "application/xml");
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      std::string md5s;
      object_.clear();
      for (const auto& [n, body] : parts_) {
        md5s += Md5Raw(body);
        object_ += body;
      }
      ++completes_;
      res.set_content("<CompleteMultipartUploadResult><ETag>\"" + HexEncode(Md5Raw(md5s)) + "-" +
                          std::to_string(parts_.size()) +
                          "\"</ETag></CompleteMultipartUploadResult>",
                      "application/xml");
    });
    server_.Put(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      const int part = std::atoi(req.get_param_value("partNumber").c_str());
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (part == flaky_part_ && flaky_left_ < flaky_times_) {
          ++flaky_left_;
          res.status = 503;
          res.set_content("<Error><Code>SlowDown</Code></Error>", "application/xml");
          return;
        }
        ++in_flight_;
        max_in_flight_ = std::max(max_in_flight_, in_flight_);
        cv_.notify_all();
        cv_.wait_for(lock, std::chrono::seconds(5), [&] { return max_in_flight_ >= 2; });
        parts_[part] = req.body;
        --in_flight_;
      }
      std::string etag = part == corrupt_part_ ? std::string(32, '0') : HexEncode(Md5Raw(req.body));
      res.set_header("ETag", "\"" + etag + "\"");
    });
    server_.Delete(R"(/.*)", [this](const httplib::Request&, httplib::Response& res) {
      ++aborts_;
      res.status = 204;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~MultipartServer() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int max_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }
  int completes() {
    std::lock_guard<std::mutex> lock(mu_);
    return completes_;
  }
  int aborts() const { return aborts_.load(); }
  std::string object() {
    std::lock_guard<std::mutex> lock(mu_);
    return object_;
  }

 private:
  static std::string Md5Raw(const std::string& data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), out, &n, EVP_md5(), nullptr);
    return std::string(reinterpret_cast<char*>(out), n);
  }
  const int flaky_part_, flaky_times_, corrupt_part_;
  std::mutex mu_;
  std::condition_variable cv_;
  // protected by mu_:
  int flaky_left_ = 0;
  int in_flight_ = 0, max_in_flight_ = 0, completes_ = 0;
  std::map<int, std::string> parts_;
  std::string object_;
  std::atomic<int> aborts_{0};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(S3StoreMultipartTest, UploadsPartsInParallelWithRetries) {
  MultipartServer server(/*flaky_part=*/3, /*flaky_times=*/2, /*corrupt_part=*/0);
  S3Config cfg = TestConfig(server.endpoint());
  cfg.max_parallel_parts = 3;
  auto store = S3Store::Open("b", "", cfg);
  ASSERT_TRUE(store.ok());
  const std::string data = Pattern((6 * (5 << 20)) + 123, 5);  // 7 parts
  Status st = (*store)->PutBytes("big", data);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(server.max_in_flight(), 2);  // parts overlapped...
  EXPECT_LE(server.max_in_flight(), 3);  // ...but never more than the bound
  EXPECT_EQ((*store)->retries(), 2);
  EXPECT_EQ(server.completes(), 1);
  EXPECT_EQ(server.aborts(), 0);
  EXPECT_TRUE(server.object() == data);
}

TEST(S3StoreMultipartTest, CorruptPartAbortsTheUpload) {
  MultipartServer server(/*flaky_part=*/0, /*flaky_times=*/0, /*corrupt_part=*/2);
  auto store = S3Store::Open("b", "", TestConfig(server.endpoint()));
  ASSERT_TRUE(store.ok());
  Status st = (*store)->PutBytes("big", Pattern(4 * (5 << 20), 9));
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("part 2"), std::string::npos) << st.ToString();
  EXPECT_EQ(server.completes(), 0);
  EXPECT_EQ(server.aborts(), 1);
}

}  // namespace
}  // namespace lote::objstore
