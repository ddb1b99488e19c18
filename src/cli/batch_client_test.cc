#include "cli/batch_client.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "cli/test_server.h"

namespace lote::cli {
namespace {

class BatchClientTest : public ServerTest {
 protected:
  std::unique_ptr<BatchClient> Client() {
    auto c = BatchClient::Connect(Options(creds_));
    EXPECT_TRUE(c.ok());
    return std::move(*c);
  }
};

TEST_F(BatchClientTest, DescribeReturnsEveryPageAndOneNameFormsSayAbsent) {
  auto c = Client();
  for (int i = 0; i < 3; ++i) {
    auto r = c->CreateComputeEnvironment(
        {{"computeEnvironmentName", "ce-" + std::to_string(i)}, {"type", "UNMANAGED"}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  for (int i = 0; i < 25; ++i) {
    auto r = c->RegisterJobDefinition(
        {{"jobDefinitionName", "jd-" + std::to_string(i)},
         {"type", "container"},
         {"containerProperties", {{"image", "busybox"}, {"vcpus", 1}, {"memory", 128}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Pages of 10: every page is followed.
  auto defs = c->DescribeJobDefinitions({{"maxResults", 10}, {"status", "ACTIVE"}});
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  EXPECT_EQ(defs->size(), 25u);
  auto all = c->DescribeComputeEnvironments();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->size(), 3u);
  auto one = c->DescribeComputeEnvironment("ce-2");
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ((**one).value("computeEnvironmentName", ""), "ce-2");
  auto none = c->DescribeComputeEnvironment("absent");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto no_queue = c->DescribeJobQueue("absent");
  ASSERT_TRUE(no_queue.ok());
  EXPECT_FALSE(no_queue->has_value());
  // An AWS error keeps its code and is not retried.
  Status bad = c->DeleteJobQueue("missing");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message().rfind("ClientException: ", 0), 0u) << bad.message();
}

// A server that throttles the first `throttled` requests.
class FlakyServer {
 public:
  FlakyServer(int throttled, int status) : throttled_(throttled), status_(status) {
    server_.Post(".*", [this](const httplib::Request&, httplib::Response& res) {
      if (calls_.fetch_add(1) < throttled_) {
        res.status = status_;
        res.set_header("x-amzn-ErrorType",
                       status_ == 429 ? "TooManyRequestsException" : "ServiceUnavailableException");
        res.set_content(R"({"message": "slow down"})", "application/json");
        return;
      }
      res.set_content(R"({"jobId": "j-1", "jobName": "n"})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // bind_to_any_port already listens: requests queue until the loop accepts them.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FlakyServer() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int calls() const { return calls_.load(); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  int throttled_;
  int status_;
  std::atomic<int> calls_{0};
};

std::unique_ptr<BatchClient> FakeClient(const std::string& endpoint, std::vector<int64_t>* waits) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.region = "us-east-1";
  o.credentials = sigv4::Credentials{"AKID", "secret", ""};
  RetryPolicy retry;
  retry.attempts = 4;
  retry.base_delay_ms = 100;
  retry.sleep = [waits](int64_t ms) { waits->push_back(ms); };
  return std::move(*BatchClient::Connect(o, retry));
}

TEST(BatchClientRetryTest, ThrottledRequestsAreRetriedWithBackoff) {
  FlakyServer flaky(2, 429);
  std::vector<int64_t> waits;
  auto c = FakeClient(flaky.endpoint(), &waits);
  auto r = c->SubmitJob({{"jobName", "n"}});  // a mutation: 429 means "not done"
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->value("jobId", ""), "j-1");
  EXPECT_EQ(flaky.calls(), 3);
  EXPECT_EQ(waits, (std::vector<int64_t>{100, 200}));
}

TEST(BatchClientRetryTest, GivesUpAfterTheLastAttemptWithTheServersError) {
  FlakyServer flaky(100, 503);
  std::vector<int64_t> waits;
  auto c = FakeClient(flaky.endpoint(), &waits);
  auto r = c->DescribeJobs({"a"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("ServiceUnavailableException"), std::string::npos);
  EXPECT_EQ(flaky.calls(), 4);
  EXPECT_EQ(waits.size(), 3u);
}

TEST(BatchClientRetryTest, AMutationIsNotRepeatedWhenTheConnectionFails) {
  std::vector<int64_t> waits;
  auto c = FakeClient("http://127.0.0.1:1", &waits);
  EXPECT_FALSE(c->SubmitJob({{"jobName", "n"}}).ok());
  EXPECT_TRUE(waits.empty());  // it may have been done: not sent again
  EXPECT_FALSE(c->DescribeJobQueues().ok());
  EXPECT_EQ(waits.size(), 3u);  // a read is safe to repeat
}

}  // namespace
}  // namespace lote::cli
