// Stack dumps of a node's processes, the evidence kept when a job hangs
// (docs/faults.md). Every process of the node's command (its process group)
// is dumped with every thread: `eu-stack -p PID` when elfutils is installed,
// else `gdb -batch -p PID -ex "thread apply all bt"`; processes are dumped in
// parallel. The dump names each process's state (a stopped one reads
// "T (stopped)") and ends with the node's last LOTE_PROGRESS line.
//
// Attaching needs ptrace permission over the processes: the same user
// (Yama's ptrace_scope 0 or absent) or CAP_SYS_PTRACE. A process that cannot
// be attached says why in its section instead of a stack. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lote::exec {

// The processes whose process group is `pgid` (a scan of /proc), ascending.
std::vector<pid_t> ProcessGroupMembers(pid_t pgid);

// One process's section: "=== process PID (STATE): CMDLINE ===" and its
// threads' stacks (or why there are none).
std::string DumpProcess(pid_t pid, int64_t timeout_ms);

// Every process of group `pgid`, then "=== last progress: LINE ===" from
// `output_path` ("(none)" when it has no LOTE_PROGRESS line).
std::string DumpNodeStacks(pid_t pgid, const std::string& output_path, int64_t timeout_ms);

// The normalized frames of a dump (function names, without addresses,
// arguments or process ids), one per line, for comparing nodes.
std::vector<std::string> StackSignature(const std::string& dump);

}  // namespace lote::exec
