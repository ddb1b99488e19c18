// Wires CloudWatch Logs into the server: opens the log store at
// $home/logs, registers the Logs_20140328 json-protocol service (SigV4
// service "logs", same port as Batch) and enforces retention once a minute.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/router.h"
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

// Owns the store, the service and the retention thread; destroyed in Stop().
class LogsWiring {
 public:
  LogsWiring(std::unique_ptr<logs::LogStore> store, const Clock* clock,
             logs::LogsServiceOptions options)
      : store_(std::move(store)), clock_(clock), service_(store_.get(), clock, options) {
    retention_ = std::thread([this] { RetentionLoop(); });
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

  std::unique_ptr<logs::LogStore> store_;
  const Clock* clock_;
  logs::LogsService service_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // protected by mu_
  std::thread retention_;
};

Result<std::shared_ptr<void>> WireLogs(ServerContext& context) {
  logs::LogStoreOptions store_options;
  store_options.root = context.home + "/logs";
  store_options.clock = context.clock;
  ASSIGN_OR_RETURN(auto store, logs::LogStore::Open(store_options));
  logs::LogsServiceOptions options;
  options.region = context.control->config().region;
  options.account_id = context.control->config().account_id;
  auto wiring = std::make_shared<LogsWiring>(std::move(store), context.clock, options);

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
