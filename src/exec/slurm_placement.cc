#include "exec/slurm_placement.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "exec/backend.h"

namespace lote::exec {

Result<std::string> SlurmNodeDir(const std::string& attempt_dir, const char* slurm_node_id) {
  const std::string id = slurm_node_id == nullptr ? "" : slurm_node_id;
  if (id.empty() || id.size() > 6 || id.find_first_not_of("0123456789") != std::string::npos)
    return Status::InvalidArgument("SLURM_NODEID is '" + id +
                                   "': --attempt-dir is for a runner started by srun or sbatch");
  return attempt_dir + "/node-" + id;
}

std::vector<std::string> SlurmPlacementEnv(const std::map<std::string, std::string>& task_env,
                                           int32_t node_index, bool multi_node,
                                           int32_t main_node_index) {
  auto get = [&](const char* key) {
    auto it = task_env.find(key);
    return it == task_env.end() ? std::string() : it->second;
  };
  std::vector<std::string> out = {"LOTE_SLURM_JOB_ID=" + get("SLURM_JOB_ID"),
                                  "LOTE_SLURM_NODE=" + get("SLURMD_NODENAME")};
  std::istringstream addrs(get("LOTE_NODE_ADDRS"));
  std::string addr;
  for (int32_t k = 0; k <= node_index && addrs >> addr; ++k) {
    if (k == node_index) out.push_back("LOTE_PRIVATE_IPV4_ADDRESS=" + addr);
  }
  if (multi_node && node_index != main_node_index)
    out.push_back(std::string(kMainNodeAddressVar) + "=" + get("LOTE_MAIN_ADDR"));
  // The GPUs Slurm bound to this task (--gres=gpu:N), named as on the local
  // backend. LOTE_ACCELERATORS (what the node records, and the server reads
  // back into the attempt) are the host's own indices: Slurm's SLURM_STEP_GPUS
  // or SLURM_JOB_GPUS where it sets them (CUDA_VISIBLE_DEVICES counts from 0
  // inside a device cgroup), else CUDA_VISIBLE_DEVICES.
  if (const std::string gpus = get("CUDA_VISIBLE_DEVICES"); !gpus.empty()) {
    out.push_back("CUDA_VISIBLE_DEVICES=" + gpus);
    out.push_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");
    std::string host_gpus = get("SLURM_STEP_GPUS");
    if (host_gpus.empty()) host_gpus = get("SLURM_JOB_GPUS");
    out.push_back("LOTE_ACCELERATORS=" + (host_gpus.empty() ? gpus : host_gpus));
  }
  return out;
}

void MergeEnv(std::vector<std::string>* env, const std::vector<std::string>& add) {
  for (const std::string& kv : add) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    bool replaced = false;
    for (std::string& e : *env) {
      if (e.compare(0, key.size(), key) == 0) {
        e = kv;
        replaced = true;
        break;
      }
    }
    if (!replaced) env->push_back(kv);
  }
}

int32_t GresGpus(std::string_view gres) {
  int32_t total = 0;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= gres.size(); ++i) {
    const char c = i < gres.size() ? gres[i] : ',';
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c != ',' || depth > 0) continue;
    std::string_view entry = gres.substr(start, i - start);
    start = i + 1;
    if (size_t paren = entry.find('('); paren != std::string_view::npos)
      entry = entry.substr(0, paren);
    if (entry.substr(0, 4) != "gpu:") continue;
    const std::string_view count = entry.substr(entry.rfind(':') + 1);
    int32_t n = 0;
    bool digits = !count.empty();
    for (char d : count) {
      if (d < '0' || d > '9') {
        digits = false;
        break;
      }
      n = n * 10 + (d - '0');
    }
    if (digits) total += n;
  }
  return total;
}

std::vector<SlurmNodeState> ParseSinfoNodeStates(const std::string& sinfo_out) {
  std::vector<SlurmNodeState> out;
  std::set<std::string> seen;  // a node of several partitions is listed once per partition
  std::istringstream in(sinfo_out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    SlurmNodeState n;
    if (!(f >> n.name >> n.state)) continue;
    if (seen.insert(n.name).second) out.push_back(std::move(n));
  }
  return out;
}

bool SlurmNodeUsable(const std::string& state) {
  size_t end = 0;
  while (end < state.size() && std::isalpha(static_cast<unsigned char>(state[end]))) ++end;
  const std::string base = state.substr(0, end);
  if (state.find('*') != std::string::npos) return false;  // not responding
  return base == "idle" || base == "mix" || base == "alloc" || base == "comp" || base == "plnd";
}

std::vector<std::string> HostsToExclude(const std::vector<std::string>& avoid,
                                        const std::vector<SlurmNodeState>& partition,
                                        int32_t needed) {
  std::set<std::string> excluded;
  int32_t usable_left = 0;
  for (const SlurmNodeState& n : partition) {
    const bool avoided = std::find(avoid.begin(), avoid.end(), n.name) != avoid.end();
    if (avoided) excluded.insert(n.name);
    if (!avoided && SlurmNodeUsable(n.state)) ++usable_left;
  }
  if (excluded.empty() || usable_left < needed) return {};
  return {excluded.begin(), excluded.end()};
}

bool IsLoteDrainReason(const std::string& reason) {
  return reason.rfind(kSlurmQuarantineReasonPrefix, 0) == 0;
}

}  // namespace lote::exec
