// `lote queues`: lists job queues.
#include <cstdio>

#include "cli/batch_client.h"
#include "lote/registry.h"

namespace lote::cli {
namespace {

lote::CommandRegistrar queues_command([](CLI::App& app) {
  auto endpoint = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("queues", "List job queues and their compute environments");
  sub->add_option("--endpoint", *endpoint,
                  "Server URL; default $LOTE_ENDPOINT, $AWS_ENDPOINT_URL_BATCH or "
                  "http://127.0.0.1:7480");
  sub->callback([endpoint] {
    ClientOptions options;
    options.endpoint = *endpoint;
    auto client = BatchClient::Connect(options);
    Result<std::vector<Json>> queues =
        client.ok() ? (*client)->DescribeJobQueues() : Result<std::vector<Json>>(client.status());
    if (!queues.ok()) {
      std::fprintf(stderr, "lote queues: %s\n", queues.status().message().c_str());
      lote::SetExitCode(1);
      return;
    }
    std::printf("%-32s %-9s %-9s %8s  %s\n", "NAME", "STATE", "STATUS", "PRIORITY",
                "COMPUTE ENVIRONMENTS");
    for (const Json& q : *queues) {
      std::string ces;
      for (const Json& o : q.value("computeEnvironmentOrder", Json::array())) {
        std::string arn = o.value("computeEnvironment", "");
        ces += (ces.empty() ? "" : ",") + arn.substr(arn.rfind('/') + 1);
      }
      std::printf("%-32s %-9s %-9s %8d  %s\n", q.value("jobQueueName", "").c_str(),
                  q.value("state", "").c_str(), q.value("status", "").c_str(),
                  q.value("priority", 0), ces.c_str());
    }
  });
});

}  // namespace
}  // namespace lote::cli
