#include "exec/slurm_placement.h"

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

}  // namespace lote::exec
