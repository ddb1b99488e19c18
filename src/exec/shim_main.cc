// lote-exec-shim: the node supervisor as a small standalone program, the same
// code as `lote exec-shim` (shim.h). Used by tests and by installs that prefer
// not to re-execute the server binary.
#include <cstdio>
#include <cstring>
#include <string>

#include "exec/shim.h"

int main(int argc, char** argv) {
  std::string node_dir;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--node-dir") == 0) node_dir = argv[i + 1];
  }
  if (node_dir.empty()) {
    std::fprintf(stderr, "usage: %s --node-dir DIR\n", argv[0]);
    return 2;
  }
  return lote::exec::RunExecShim(node_dir);
}
