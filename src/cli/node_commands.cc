// `lote nodes list` (the quarantined nodes of every compute environment and
// each host's accelerators with who holds them), `lote nodes release NODE`
// (ends a node's quarantine: lote's own ReleaseNode), `lote nodes rescan`,
// `drain-device HOST DEVICE` and `release-device HOST DEVICE` (docs/jobs.md,
// "Accelerators").
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

// The hosts' devices: one line each, with who holds it or why it is drained.
int PrintAccelerators(const Json& answer) {
  for (const Json& h : answer.value("hosts", Json::array())) {
    const Json devices = h.value("devices", Json::array());
    std::printf("\nACCELERATORS of %s (%s): %zu\n", h.value("host", "").c_str(),
                h.value("source", "").c_str(), devices.size());
    for (const Json& note : h.value("notes", Json::array()))
      if (note.is_string()) std::printf("  note: %s\n", note.get<std::string>().c_str());
    if (devices.empty()) continue;
    std::printf("  %-6s %-7s %-16s %-28s %-7s %-8s %s\n", "INDEX", "KIND", "PATH", "NAME", "ISLAND",
                "STATE", "HELD BY / REASON");
    for (const Json& d : devices) {
      const std::string state = d.value("state", "");
      const std::string who =
          state == "DRAINED" ? d.value("reason", "") : d.value("heldBy", std::string("-"));
      std::printf("  %-6d %-7s %-16s %-28s %-7d %-8s %s\n", d.value("index", 0),
                  d.value("kind", "").c_str(), d.value("path", "").c_str(),
                  d.value("name", "").c_str(), d.value("island", 0), state.c_str(), who.c_str());
    }
  }
  return 0;
}

int DeviceOperation(const std::string& endpoint, const std::string& operation,
                    const std::string& host, int32_t index, const std::string& reason) {
  auto client = Connect(endpoint);
  Json body = Json::object();
  if (operation != "rescan") body = Json{{"host", host}, {"index", index}};
  if (!reason.empty()) body["reason"] = reason;
  Result<Json> r =
      client.ok() ? (*client)->Accelerators(operation, body) : Result<Json>(client.status());
  if (!r.ok()) {
    std::fprintf(stderr, "lote nodes %s: %s\n",
                 operation == "rescan" ? "rescan" : (operation + "-device").c_str(),
                 r.status().message().c_str());
    return 1;
  }
  return PrintAccelerators(*r);
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
  Result<Json> acc = (*client)->Accelerators("describe", Json::object());
  if (!acc.ok()) {
    std::fprintf(stderr, "lote nodes list: accelerators: %s\n", acc.status().message().c_str());
    return 1;
  }
  return PrintAccelerators(*acc);
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
  CLI::App* nodes = app.add_subcommand(
      "nodes", "Nodes and their accelerators: list, release, rescan, drain-device, release-device");
  nodes->require_subcommand(1);
  const char* endpoint_help =
      "Server URL; default $LOTE_ENDPOINT, $AWS_ENDPOINT_URL_BATCH or http://127.0.0.1:7480";
  CLI::App* list = nodes->add_subcommand(
      "list", "The quarantined nodes and why, and each host's accelerators and who holds them");
  list->add_option("--endpoint", *endpoint, endpoint_help);
  list->callback([endpoint] { lote::SetExitCode(List(*endpoint)); });
  CLI::App* release =
      nodes->add_subcommand("release", "End a node's quarantine now (it takes new work again)");
  release->add_option("node", *node, "The node: an instance id or a Slurm node name")->required();
  release->add_option("--endpoint", *endpoint, endpoint_help);
  release->callback([endpoint, node] { lote::SetExitCode(Release(*endpoint, *node)); });
  CLI::App* rescan = nodes->add_subcommand(
      "rescan", "Read this host's accelerators again (the inventory file, or discovery)");
  rescan->add_option("--endpoint", *endpoint, endpoint_help);
  rescan->callback(
      [endpoint] { lote::SetExitCode(DeviceOperation(*endpoint, "rescan", "", 0, "")); });
  auto host = std::make_shared<std::string>();
  auto index = std::make_shared<int32_t>(0);
  auto reason = std::make_shared<std::string>();
  CLI::App* drain = nodes->add_subcommand(
      "drain-device",
      "Take one accelerator out of service (the job holding it keeps it until it ends; the "
      "rest of the host keeps working)");
  drain->add_option("host", *host, "The host (lote nodes list)")->required();
  drain->add_option("device", *index, "The device's index (lote nodes list)")->required();
  drain->add_option("--reason", *reason, "Why, shown by lote nodes list");
  drain->add_option("--endpoint", *endpoint, endpoint_help);
  drain->callback([endpoint, host, index, reason] {
    lote::SetExitCode(DeviceOperation(*endpoint, "drain", *host, *index, *reason));
  });
  CLI::App* undrain =
      nodes->add_subcommand("release-device", "Put a drained accelerator back in service");
  undrain->add_option("host", *host, "The host (lote nodes list)")->required();
  undrain->add_option("device", *index, "The device's index")->required();
  undrain->add_option("--endpoint", *endpoint, endpoint_help);
  undrain->callback([endpoint, host, index] {
    lote::SetExitCode(DeviceOperation(*endpoint, "release", *host, *index, ""));
  });
});

}  // namespace
}  // namespace lote::cli
