// `lote nodes list` (the quarantined nodes of every compute environment) and
// `lote nodes release NODE` (ends a node's quarantine: lote's own ReleaseNode).
#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/batch_client.h"
#include "lote/registry.h"

namespace lote::cli {
namespace {

std::string Iso(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

Result<std::unique_ptr<BatchClient>> Connect(const std::string& endpoint) {
  ClientOptions options;
  options.endpoint = endpoint;
  return BatchClient::Connect(options);
}

int List(const std::string& endpoint) {
  auto client = Connect(endpoint);
  Result<std::vector<Json>> ces = client.ok() ? (*client)->DescribeComputeEnvironments()
                                              : Result<std::vector<Json>>(client.status());
  if (!ces.ok()) {
    std::fprintf(stderr, "lote nodes list: %s\n", ces.status().message().c_str());
    return 1;
  }
  std::printf("%-24s %-24s %-20s %-20s %s\n", "NODE", "COMPUTE ENVIRONMENT", "SINCE", "UNTIL",
              "REASON");
  for (const Json& ce : *ces) {
    for (const Json& n : ce.value("loteQuarantinedNodes", Json::array())) {
      std::printf("%-24s %-24s %-20s %-20s %s\n", n.value("node", "").c_str(),
                  ce.value("computeEnvironmentName", "").c_str(),
                  Iso(n.value("since", int64_t{0})).c_str(),
                  Iso(n.value("until", int64_t{0})).c_str(), n.value("reason", "").c_str());
    }
  }
  return 0;
}

int Release(const std::string& endpoint, const std::string& node) {
  auto client = Connect(endpoint);
  Result<Json> r = client.ok() ? (*client)->ReleaseNode(node) : Result<Json>(client.status());
  if (!r.ok()) {
    std::fprintf(stderr, "lote nodes release: %s\n", r.status().message().c_str());
    return 1;
  }
  std::printf("released %s\n", node.c_str());
  return 0;
}

lote::CommandRegistrar nodes_command([](CLI::App& app) {
  auto endpoint = std::make_shared<std::string>();
  auto node = std::make_shared<std::string>();
  CLI::App* nodes = app.add_subcommand("nodes", "Bad-node quarantine: list, release");
  nodes->require_subcommand(1);
  const char* endpoint_help =
      "Server URL; default $LOTE_ENDPOINT, $AWS_ENDPOINT_URL_BATCH or http://127.0.0.1:7480";
  CLI::App* list = nodes->add_subcommand("list", "The quarantined nodes and why");
  list->add_option("--endpoint", *endpoint, endpoint_help);
  list->callback([endpoint] { lote::SetExitCode(List(*endpoint)); });
  CLI::App* release =
      nodes->add_subcommand("release", "End a node's quarantine now (it takes new work again)");
  release->add_option("node", *node, "The node: an instance id or a Slurm node name")->required();
  release->add_option("--endpoint", *endpoint, endpoint_help);
  release->callback([endpoint, node] { lote::SetExitCode(Release(*endpoint, *node)); });
});

}  // namespace
}  // namespace lote::cli
