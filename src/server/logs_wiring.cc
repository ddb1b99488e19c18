// Wires CloudWatch Logs into the server: over the server's log store
// ($home/logs, shared with the job loop, which stores job output), registers the Logs_20140328
// json-protocol service (SigV4 service "logs", same port as Batch) and enforces retention once a
// minute.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/router.h"
#include "common/thread_name.h"
#include "logs/log_store.h"
#include "logs/logs_service.h"
#include "server/server.h"

namespace lote::server {
namespace {

constexpr const char* kLogsOperations[] = {
    "CreateLogGroup",  "DeleteLogGroup",     "DescribeLogGroups",     "CreateLogStream",
    "DeleteLogStream", "DescribeLogStreams", "PutLogEvents",          "GetLogEvents",
    "FilterLogEvents", "PutRetentionPolicy", "DeleteRetentionPolicy",
};

// Owns the service and the retention thread; destroyed in Stop().
class LogsWiring {
 public:
  LogsWiring(logs::LogStore* store, const Clock* clock, logs::LogsServiceOptions options)
      : store_(store), clock_(clock), service_(store_, clock, options) {
    retention_ = NamedThread("lote-log-expiry", [this] { RetentionLoop(); });
  }
  ~LogsWiring() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    retention_.join();
  }

  logs::LogsService* service() { return &service_; }

 private:
  void RetentionLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(60), [this] { return stopping_; })) {
      lock.unlock();
      (void)store_->EnforceRetention(clock_->NowMillis());
      lock.lock();
    }
  }

  logs::LogStore* store_;
  const Clock* clock_;
  logs::LogsService service_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // protected by mu_
  std::thread retention_;
};

Result<std::shared_ptr<void>> WireLogs(ServerContext& context) {
  logs::LogsServiceOptions options;
  options.region = context.control->config().region;
  options.account_id = context.control->config().account_id;
  auto wiring = std::make_shared<LogsWiring>(context.log_store, context.clock, options);

  api::JsonService service;
  service.target_prefix = "Logs_20140328";
  service.signing_service = "logs";
  logs::LogsService* logs_service = wiring->service();
  for (const char* op : kLogsOperations) {
    std::string name = op;
    service.operations[name] = [logs_service, name](const Json& request) {
      return logs_service->Call(name, request);
    };
  }
  context.router->RegisterJsonService(std::move(service));
  return std::shared_ptr<void>(wiring);
}

const ServerExtensionRegistrar kLogsRegistrar(WireLogs);

}  // namespace
}  // namespace lote::server
