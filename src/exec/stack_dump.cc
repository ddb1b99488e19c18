#include "exec/stack_dump.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/files.h"
#include "exec/command.h"

namespace lote::exec {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Field 3 of /proc/PID/stat (state) and field 5 (process group), after the
// command name in parentheses.
bool ReadStat(pid_t pid, char* state, pid_t* pgrp) {
  const std::string stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(stat.substr(close + 1));
  long ppid = 0, group = 0;
  rest >> *state >> ppid >> group;
  *pgrp = static_cast<pid_t>(group);
  return !rest.fail();
}

std::string StateName(char s) {
  switch (s) {
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'D':
      return "D (disk sleep)";
    case 'T':
      return "T (stopped)";
    case 't':
      return "t (tracing stop)";
    case 'Z':
      return "Z (zombie)";
    default:
      return std::string(1, s);
  }
}

std::string Cmdline(pid_t pid) {
  std::string c = ReadSmallFile("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(c.begin(), c.end(), '\0', ' ');
  while (!c.empty() && c.back() == ' ') c.pop_back();
  return c.size() > 300 ? c.substr(0, 300) + "..." : c;
}

bool OnPath(const std::string& program) {
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/local/bin/"})
    if (::access((std::string(dir) + program).c_str(), X_OK) == 0) return true;
  return false;
}

std::string LastProgressLine(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "(none)";
  const off_t size = ::lseek(fd, 0, SEEK_END);
  const off_t from = std::max<off_t>(0, size - (256 << 10));
  std::string tail(static_cast<size_t>(size - from), '\0');
  ssize_t n = ::pread(fd, tail.data(), tail.size(), from);
  ::close(fd);
  tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  size_t pos = tail.rfind("\nLOTE_PROGRESS ");
  if (pos == std::string::npos) return tail.rfind("LOTE_PROGRESS ", 0) == 0 ? tail : "(none)";
  const size_t end = tail.find('\n', pos + 1);
  return tail.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
}

}  // namespace

std::vector<pid_t> ProcessGroupMembers(pid_t pgid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    char state = 0;
    pid_t group = 0;
    if (ReadStat(static_cast<pid_t>(pid), &state, &group) && group == pgid)
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string DumpProcess(pid_t pid, int64_t timeout_ms) {
  char state = '?';
  pid_t group = 0;
  ReadStat(pid, &state, &group);
  std::string out = "=== process " + std::to_string(pid) + " (" + StateName(state) +
                    "): " + Cmdline(pid) + " ===\n";
  std::vector<std::string> argv;
  if (OnPath("eu-stack")) {
    argv = {"eu-stack", "-p", std::to_string(pid)};
  } else if (OnPath("gdb")) {
    argv = {"gdb",
            "-batch",
            "-nx",
            "-p",
            std::to_string(pid),
            "-ex",
            "set pagination off",
            "-ex",
            "thread apply all bt"};
  } else {
    return out + "(no stack: neither eu-stack nor gdb is installed on this host)\n";
  }
  Result<CommandResult> r = RunCommand(argv, {}, timeout_ms);
  if (!r.ok()) return out + "(no stack: " + argv[0] + ": " + r.status().message() + ")\n";
  // gdb's own chatter (symbol loading) is on stderr; the stacks on stdout.
  std::string stacks;
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Thread ", 0) == 0 || line.rfind("#", 0) == 0 || line.rfind("TID ", 0) == 0 ||
        line.rfind("PID ", 0) == 0)
      stacks += line + "\n";
  }
  if (stacks.empty())
    return out + "(no stack: " + argv[0] + " exited with " + std::to_string(r->exit_code) + ": " +
           r->err.substr(0, 500) + ")\n";
  return out + stacks;
}

std::string DumpNodeStacks(pid_t pgid, const std::string& output_path, int64_t timeout_ms) {
  const std::vector<pid_t> pids = ProcessGroupMembers(pgid);
  std::vector<std::string> sections(pids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pids.size(); ++i)
    threads.emplace_back([&, i] { sections[i] = DumpProcess(pids[i], timeout_ms); });
  for (std::thread& t : threads) t.join();
  std::string out;
  if (pids.empty()) out = "(no process is left in process group " + std::to_string(pgid) + ")\n";
  for (const std::string& s : sections) out += s;
  return out + "=== last progress: " + LastProgressLine(output_path) + " ===\n";
}

std::vector<std::string> StackSignature(const std::string& dump) {
  std::vector<std::string> frames;
  std::istringstream lines(dump);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '#') continue;
    // gdb: "#3  0x00007f... in gloo::foo (args) at file:12" or "#0  main () at ...";
    // eu-stack: "#3  0x00007f... gloo::foo".
    std::istringstream words(line);
    std::string index, word, name;
    words >> index;
    while (words >> word) {
      if (word.rfind("0x", 0) == 0 || word == "in") continue;
      name = word;
      break;
    }
    if (!name.empty()) frames.push_back(name);
  }
  std::sort(frames.begin(), frames.end());
  frames.erase(std::unique(frames.begin(), frames.end()), frames.end());
  return frames;
}

}  // namespace lote::exec
