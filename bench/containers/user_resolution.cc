// The host-side user resolution a container node now takes before its
// `podman run` (exec::ResolveJobUser: getpwnam_r, getgrouplist, the numbers
// into the spec), timed alone: N resolutions of USER, the median of R rounds.
// Usage: user_resolution [USER] [N] [R]   (bench/containers/user_start.sh runs it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "exec/node_resolve.h"

int main(int argc, char** argv) {
  const std::string user = argc > 1 ? argv[1] : "nobody";
  const int n = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 9;
  std::vector<double> per_call_us;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      lote::exec::ShimSpec spec;
      spec.container = lote::exec::ContainerRun{};
      spec.user = user;
      std::vector<std::string> warnings;
      if (!lote::exec::ResolveJobUser(&spec, 0, "bench", &warnings).ok()) {
        std::fprintf(stderr, "user_resolution: cannot resolve '%s'\n", user.c_str());
        return 1;
      }
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
    per_call_us.push_back(took.count() / n);
  }
  std::sort(per_call_us.begin(), per_call_us.end());
  std::printf(
      "user resolution of '%s': median %.1f us per node (%d rounds of %d; min %.1f, "
      "max %.1f)\n",
      user.c_str(), per_call_us[per_call_us.size() / 2], rounds, n, per_call_us.front(),
      per_call_us.back());
  return 0;
}
