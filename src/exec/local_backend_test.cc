// LocalBackend with real processes (no mocks): each test runs real commands
// under the real supervisor (the lote-exec-shim program) in a temp home.
#include "exec/local_backend.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "common/files.h"
#include "exec/batch_env.h"
#include "exec/proc_util.h"

namespace lote::exec {
namespace {

using std::chrono::milliseconds;

// Upper bound for "the event arrives" so a broken backend fails instead of hanging.
constexpr int64_t kEventLimitMs = 30'000;

std::string ReadAll(const std::string& path) {
  auto r = ReadFile(path);
  return r.ok() ? *r : "";
}

// A `sleep 300` in a session of its own that no supervisor started (a stray
// command for the recovery tests); the caller reaps it. -1 if fork failed.
pid_t StartStraySleep() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::execlp("sleep", "sleep", "300", nullptr);
    ::_exit(127);
  }
  std::this_thread::sleep_for(milliseconds(20));  // exec'd by now (its identity is sleep's)
  return pid;
}

// Every test runs with both node runners: one supervisor program per node
// (false), and the node agent that runs each command itself (true).
class LocalBackendTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote-exec-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    // Jobs may run as another user, who must be able to reach their folders.
    ::chmod(home_.c_str(), 0755);
    backend_ = MakeBackend();
  }
  void TearDown() override {
    if (backend_) {
      for (const auto& key : backend_->Running()) {
        (void)backend_->Terminate(key.attempt, 0);
      }
      int64_t deadline = Now() + kEventLimitMs;
      while (!backend_->Running().empty() && Now() < deadline) (void)backend_->Wait(200);
    }
    backend_.reset();
    std::filesystem::remove_all(home_);
  }
  static int64_t Now() { return SystemClock::Default()->NowMillis(); }

  std::unique_ptr<LocalBackend> MakeBackend(int64_t default_grace_ms = 30'000) {
    LocalBackendOptions o;
    o.home = home_;
    o.shim_command = {LOTE_EXEC_SHIM_PATH};
    o.default_grace_ms = default_grace_ms;
    o.use_node_agent = GetParam();
    auto b = LocalBackend::Create(o);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(*b) : nullptr;
  }

  static NodeSpec Spec(const std::string& job, std::vector<std::string> command, int32_t node = 0,
                       int32_t attempt = 1) {
    NodeSpec s;
    s.node = NodeKey{AttemptKey{job, attempt}, node};
    s.command = std::move(command);
    return s;
  }

  // Waits for the terminal event of `key` (other events are kept in others_).
  NodeEvent WaitFor(LocalBackend* b, const NodeKey& key) {
    for (auto it = others_.begin(); it != others_.end(); ++it) {
      if (it->node == key) {
        NodeEvent e = *it;
        others_.erase(it);
        return e;
      }
    }
    int64_t deadline = Now() + kEventLimitMs;
    while (Now() < deadline) {
      auto events = b->Wait(500);
      EXPECT_TRUE(events.ok()) << events.status().ToString();
      if (!events.ok()) break;
      std::optional<NodeEvent> found;
      for (auto& e : *events) {
        if (e.node == key && !found) {
          found = e;
        } else {
          others_.push_back(e);
        }
      }
      if (found) return *found;
    }
    ADD_FAILURE() << "no event for " << key.ToString();
    return NodeEvent{};
  }

  // Waits until `path` exists and has `min_lines` lines.
  static std::string WaitForLines(const std::string& path, size_t min_lines) {
    int64_t deadline = Now() + kEventLimitMs;
    while (Now() < deadline) {
      std::string text = ReadAll(path);
      if (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) >= min_lines) return text;
      std::this_thread::sleep_for(milliseconds(10));
    }
    ADD_FAILURE() << "timed out waiting for " << min_lines << " lines in " << path;
    return ReadAll(path);
  }

  std::string home_;
  std::unique_ptr<LocalBackend> backend_;
  std::vector<NodeEvent> others_;
};

TEST_P(LocalBackendTest, ExitCodesAreRecorded) {
  auto ok = backend_->LaunchNode(Spec("job-ok", {"sh", "-c", "exit 0"}));
  auto three = backend_->LaunchNode(Spec("job-three", {"sh", "-c", "exit 3"}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  NodeEvent e0 = WaitFor(backend_.get(), NodeKey{AttemptKey{"job-ok", 1}, 0});
  NodeEvent e3 = WaitFor(backend_.get(), NodeKey{AttemptKey{"job-three", 1}, 0});
  EXPECT_EQ(e0.outcome, NodeOutcome::kExited);
  EXPECT_EQ(e0.exit_code, 0);
  EXPECT_EQ(e3.outcome, NodeOutcome::kExited);
  EXPECT_EQ(e3.exit_code, 3);
  EXPECT_FALSE(e3.terminated);
  EXPECT_GT(e3.started_at_ms, 0);
  EXPECT_GE(e3.stopped_at_ms, e3.started_at_ms);
  auto st = ReadStatusRecord(three->node_dir + "/status.json");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->exit_code, 3);
  EXPECT_TRUE(backend_->Running().empty());
}

TEST_P(LocalBackendTest, ChildSeesExactlyTheJobEnvironment) {
  ::setenv("LOTE_EXEC_TEST_LEAK", "1", 1);  // the server's environment must not leak
  NodeSpec s = Spec("arr:7", {"sh", "-c", "env > \"$AWS_BATCH_JOB_ID.env\""}, 0, 2);
  s.environment = {{"AWS_BATCH_JOB_ID", "arr:7"},      {"AWS_BATCH_JOB_ATTEMPT", "2"},
                   {"AWS_BATCH_JQ_NAME", "queue-a"},   {"AWS_BATCH_CE_NAME", "ce-a"},
                   {"AWS_BATCH_JOB_ARRAY_INDEX", "7"}, {"AWS_BATCH_JOB_ARRAY_SIZE", "10"}};
  s.environment["MY_VAR"] = "hello world";
  s.private_ip = "127.0.1.8";
  auto r = backend_->LaunchNode(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  NodeEvent e = WaitFor(backend_.get(), s.node);
  ASSERT_EQ(e.exit_code, 0) << ReadAll(r->output_path);
  std::string text = ReadAll(r->node_dir + "/work/arr:7.env");
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.insert(line);
  for (const char* want :
       {"AWS_BATCH_JOB_ID=arr:7", "AWS_BATCH_JOB_ATTEMPT=2", "AWS_BATCH_JQ_NAME=queue-a",
        "AWS_BATCH_CE_NAME=ce-a", "AWS_BATCH_JOB_ARRAY_INDEX=7", "AWS_BATCH_JOB_ARRAY_SIZE=10",
        "MY_VAR=hello world", "LOTE_PRIVATE_IPV4_ADDRESS=127.0.1.8"}) {
    EXPECT_EQ(lines.count(want), 1u) << want << " missing in:\n" << text;
  }
  EXPECT_EQ(text.find("AWS_BATCH_JOB_NODE_INDEX"), std::string::npos);
  EXPECT_EQ(text.find("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"), std::string::npos);
  EXPECT_EQ(text.find("LOTE_EXEC_TEST_LEAK"), std::string::npos) << text;
  ::unsetenv("LOTE_EXEC_TEST_LEAK");
}

// Four nodes of one attempt: the main node listens on its own 127.0.1.x address,
// the children bind their own addresses and connect to the main over TCP.
TEST_P(LocalBackendTest, FourNodesTalkOverTheirPrivateAddresses) {
  const char* script = R"PY(
import os, socket, sys, time
idx = int(os.environ["AWS_BATCH_JOB_NODE_INDEX"])
main = int(os.environ["AWS_BATCH_JOB_MAIN_NODE_INDEX"])
me = os.environ["LOTE_PRIVATE_IPV4_ADDRESS"]
port = int(sys.argv[1])
if idx == main:
    assert "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS" not in os.environ
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((me, port))
    s.listen(8)
    n = int(os.environ["AWS_BATCH_JOB_NUM_NODES"]) - 1
    for _ in range(n):
        c, addr = s.accept()
        msg = c.recv(100).decode()
        print("peer %s says %s" % (addr[0], msg), flush=True)
        c.sendall(b"ok")
        c.close()
else:
    target = os.environ["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"]
    for i in range(400):
        try:
            c = socket.socket()
            c.bind((me, 0))
            c.connect((target, port))
            break
        except OSError:
            c.close()
            time.sleep(0.05)
    else:
        sys.exit("cannot reach the main node at %s:%d" % (target, port))
    c.sendall(("node %d job %s" % (idx, os.environ["AWS_BATCH_JOB_ID"])).encode())
    assert c.recv(10) == b"ok"
    print("connected to", target, flush=True)
)PY";
  // A free port on the main node's address.
  int port = 0;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000101);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    ::close(fd);
  }
  // One gang: the backend fills in the main node's address on the others.
  GangSpec gang;
  gang.attempt = AttemptKey{"gang", 1};
  gang.multi_node = true;
  gang.main_node_index = 0;
  for (int32_t node = 0; node < 4; ++node) {
    NodeSpec s = Spec("gang", {"python3", "-c", script, std::to_string(port)}, node);
    s.environment = {{"AWS_BATCH_JOB_ID", "gang#" + std::to_string(node)},
                     {"AWS_BATCH_JOB_NODE_INDEX", std::to_string(node)},
                     {"AWS_BATCH_JOB_NUM_NODES", "4"},
                     {"AWS_BATCH_JOB_MAIN_NODE_INDEX", "0"}};
    s.private_ip = *InstancePrivateIp(node);
    gang.nodes.push_back(s);
  }
  auto launched = backend_->LaunchGang(gang);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  ASSERT_EQ(launched->events.size(), 4u);
  for (const NodeEvent& e : launched->events) EXPECT_EQ(e.kind, NodeEventKind::kRunning);
  std::vector<LaunchResult> results;
  for (int32_t node = 0; node < 4; ++node) {
    auto out = backend_->OutputPath(NodeKey{gang.attempt, node});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    results.push_back(LaunchResult{"", *out, {}});
  }
  for (int32_t node = 0; node < 4; ++node) {
    NodeEvent e = WaitFor(backend_.get(), NodeKey{AttemptKey{"gang", 1}, node});
    EXPECT_EQ(e.outcome, NodeOutcome::kExited);
    EXPECT_EQ(e.exit_code, 0) << ReadAll(results[node].output_path);
  }
  std::string main_out = ReadAll(results[0].output_path);
  for (int node = 1; node < 4; ++node) {
    std::string want = "peer 127.0.1." + std::to_string(node + 1) + " says node " +
                       std::to_string(node) + " job gang#" + std::to_string(node);
    EXPECT_NE(main_out.find(want), std::string::npos) << want << " not in:\n" << main_out;
    EXPECT_NE(ReadAll(results[node].output_path).find("connected to 127.0.1.1"), std::string::npos);
  }
}

TEST_P(LocalBackendTest, OutputIsCapturedInOrder) {
  auto r = backend_->LaunchNode(Spec(
      "out",
      {"sh", "-c", "i=0; while [ $i -lt 100 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done"}));
  ASSERT_TRUE(r.ok());
  NodeEvent e = WaitFor(backend_.get(), NodeKey{AttemptKey{"out", 1}, 0});
  EXPECT_EQ(e.exit_code, 0);
  std::string want;
  for (int i = 0; i < 100; ++i)
    want += "out" + std::to_string(i) + "\nerr" + std::to_string(i) + "\n";
  EXPECT_EQ(ReadAll(r->output_path), want);
}

TEST_P(LocalBackendTest, TerminateKillsTheWholeTreeIncludingEscapedDescendants) {
  // The leader, a background child, a grandchild in a subshell, and one that
  // left the process group and the session (setsid). The node's variables are
  // those every node gets (control::JobEnvironment): the node agent knows a
  // process that left the session by them.
  NodeSpec spec = Spec("tree", {"sh", "-c",
                                "sleep 300 & echo child $!; "
                                "sh -c 'sleep 300 & echo grandchild $!; wait' & "
                                "setsid sleep 300 & echo escaped $!; wait"});
  spec.environment = {{"AWS_BATCH_JOB_ID", "tree"}, {"AWS_BATCH_JOB_ATTEMPT", "1"}};
  auto r = backend_->LaunchNode(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string text = WaitForLines(r->output_path, 3);
  std::vector<ProcessIdentity> procs;
  std::istringstream in(text);
  std::string label;
  int pid;
  while (in >> label >> pid) {
    auto id = CurrentIdentity(pid);
    ASSERT_TRUE(id.ok()) << label << " " << pid << " is not running";
    procs.push_back(*id);
  }
  ASSERT_EQ(procs.size(), 3u) << text;
  AttemptKey attempt{"tree", 1};
  ASSERT_TRUE(backend_->Terminate(attempt, 5'000).ok());
  NodeEvent e = WaitFor(backend_.get(), NodeKey{attempt, 0});
  EXPECT_TRUE(e.terminated);
  EXPECT_EQ(e.outcome, NodeOutcome::kSignaled);
  EXPECT_EQ(e.signal, SIGTERM);
  for (const auto& p : procs) EXPECT_FALSE(IdentityAlive(p)) << "pid " << p.pid << " survived";
  EXPECT_TRUE(backend_->Terminate(attempt, 0).IsNotFound());
}

TEST_P(LocalBackendTest, GraceThenSigkillForACommandIgnoringSigterm) {
  auto r = backend_->LaunchNode(
      Spec("stubborn", {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}));
  ASSERT_TRUE(r.ok());
  WaitForLines(r->output_path, 1);
  int64_t t0 = Now();
  ASSERT_TRUE(backend_->Terminate(AttemptKey{"stubborn", 1}, 300).ok());
  NodeEvent e = WaitFor(backend_.get(), NodeKey{AttemptKey{"stubborn", 1}, 0});
  EXPECT_EQ(e.outcome, NodeOutcome::kSignaled);
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_TRUE(e.terminated);
  EXPECT_GE(e.stopped_at_ms - t0, 300);  // SIGKILL only after the grace period
  EXPECT_NE(ReadAll(r->node_dir + "/shim.log").find("grace period over"), std::string::npos);
}

TEST_P(LocalBackendTest, TerminateRightAfterLaunchIsNotLost) {
  NodeSpec s = Spec("early", {"sleep", "300"});
  ASSERT_TRUE(backend_->LaunchNode(s).ok());
  ASSERT_TRUE(backend_->Terminate(s.node.attempt, 0).ok());
  NodeEvent e = WaitFor(backend_.get(), s.node);
  EXPECT_TRUE(e.terminated) << e.reason;
  EXPECT_NE(e.outcome, NodeOutcome::kLost) << e.reason;
}

// Retention's removal of a deleted job's files: refused while a node of the
// job runs, then every attempt's folder goes; another job's stays.
TEST_P(LocalBackendTest, AJobsFilesAreRemovedOnlyOnceNothingOfItRuns) {
  NodeSpec running = Spec("gone", {"sleep", "300"});
  auto r = backend_->LaunchNode(running);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  NodeSpec other = Spec("kept", {"true"});
  ASSERT_TRUE(backend_->LaunchNode(other).ok());
  WaitFor(backend_.get(), other.node);
  const std::string job_dir = home_ + "/jobs/gone";
  ASSERT_TRUE(std::filesystem::exists(job_dir + "/1/0/spec.json"));
  Status refused = backend_->RemoveJobFiles("gone");
  EXPECT_TRUE(refused.IsFailedPrecondition()) << refused.ToString();
  EXPECT_TRUE(std::filesystem::exists(job_dir + "/1/0/spec.json"));
  ASSERT_TRUE(backend_->Terminate(running.node.attempt, 0).ok());
  WaitFor(backend_.get(), running.node);
  Status removed = backend_->RemoveJobFiles("gone");
  EXPECT_TRUE(removed.ok()) << removed.ToString();
  EXPECT_FALSE(std::filesystem::exists(job_dir));
  EXPECT_TRUE(std::filesystem::exists(home_ + "/jobs/kept/1/0/status.json"));
  EXPECT_TRUE(backend_->RemoveJobFiles("never-ran").ok());  // nothing there
  EXPECT_TRUE(backend_->RemoveJobFiles("../etc").IsInvalidArgument());
}

// Recovery looks for unknown running nodes among the nodes listed live
// (nodes-live/: listed by the launch, unlisted once the outcome is seen), not
// in the folder of every job the home keeps; a home from before the list has
// all its folders read once.
TEST_P(LocalBackendTest, RecoveryReadsTheNodesListedLiveAndAnOlderHomesFoldersOnce) {
  NodeSpec done = Spec("done", {"true"});
  ASSERT_TRUE(backend_->LaunchNode(done).ok());
  WaitFor(backend_.get(), done.node);
  EXPECT_FALSE(FileExists(home_ + "/nodes-live/done.1.0"));
  const NodeKey unknown{AttemptKey{"unknown", 1}, 0};
  auto r = backend_->LaunchNode(Spec("unknown", {"sh", "-c", "echo up; sleep 300"}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  WaitForLines(r->output_path, 1);
  EXPECT_TRUE(FileExists(home_ + "/nodes-live/unknown.1.0"));
  // A folder no launch listed: a command record naming a live process, no outcome.
  pid_t stray = StartStraySleep();
  ASSERT_GE(stray, 0);
  auto stray_id = CurrentIdentity(stray);
  ASSERT_TRUE(stray_id.ok());
  const NodeKey unlisted{AttemptKey{"unlisted", 1}, 0};
  auto stray_paths = NodePathsFor(home_, unlisted);
  ASSERT_TRUE(MakeDirs(stray_paths->dir).ok());
  ASSERT_TRUE(WriteJsonRecord(stray_paths->command(), ToJson(ProcessRecord{*stray_id, 1})).ok());

  auto old = std::move(backend_);
  backend_ = MakeBackend();
  auto report = backend_->RecoverNodes({});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->orphans_terminated, std::vector<NodeKey>{unknown});
  EXPECT_TRUE(WaitFor(old.get(), unknown).terminated);
  EXPECT_TRUE(IdentityAlive(*stray_id)) << "a folder that is not listed was read";

  // An older home: no nodes-live/ yet. Every folder is read, the stray is killed.
  std::filesystem::remove_all(home_ + "/nodes-live");
  backend_ = MakeBackend();
  EXPECT_TRUE(std::filesystem::is_directory(home_ + "/nodes-live"));
  report = backend_->RecoverNodes({});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->orphans_terminated, std::vector<NodeKey>{unlisted});
  int status = 0;
  ASSERT_EQ(::waitpid(stray, &status, 0), stray);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_P(LocalBackendTest, DefaultGraceComesFromOptions) {
  backend_ = MakeBackend(/*default_grace_ms=*/200);
  auto r = backend_->LaunchNode(
      Spec("dflt", {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}));
  ASSERT_TRUE(r.ok());
  WaitForLines(r->output_path, 1);
  ASSERT_TRUE(backend_->Terminate(AttemptKey{"dflt", 1}, std::nullopt).ok());
  NodeEvent e = WaitFor(backend_.get(), NodeKey{AttemptKey{"dflt", 1}, 0});
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_NE(ReadAll(r->node_dir + "/shim.log").find("grace 200 ms"), std::string::npos);
}

// A server killed with SIGKILL: a forked process owns the first backend, launches
// and dies; a new backend (the restarted server) adopts the node and sees its exit.
TEST_P(LocalBackendTest, RestartedServerAdoptsARunningNode) {
  NodeKey key{AttemptKey{"adopt", 1}, 0};
  std::string go = home_ + "/go";
  pid_t server = ::fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    auto b = MakeBackend();
    NodeSpec s =
        Spec("adopt",
             {"sh", "-c", "echo started; while [ ! -e " + go + " ]; do sleep 0.02; done; exit 5"});
    bool ok = b && b->LaunchNode(s).ok();
    if (!ok) ::_exit(1);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(server, &status, 0), server);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the first server failed to launch";
  auto paths = NodePathsFor(home_, key);
  WaitForLines(paths->default_output(), 1);

  backend_ = MakeBackend();
  auto report = backend_->RecoverNodes({key});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->adopted.size(), 1u);
  EXPECT_EQ(report->adopted[0], key);
  EXPECT_EQ(backend_->Running(), std::vector<NodeKey>{key});
  // Launching it again is refused: a node never runs twice.
  EXPECT_TRUE(backend_->LaunchNode(Spec("adopt", {"true"})).status().IsAlreadyExists());
  auto nothing = backend_->Wait(50);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->empty());

  std::ofstream(go) << "go";
  NodeEvent e = WaitFor(backend_.get(), key);
  EXPECT_EQ(e.outcome, NodeOutcome::kExited);
  EXPECT_EQ(e.exit_code, 5);
}

TEST_P(LocalBackendTest, NodeThatEndedWhileNoServerWatchedIsReported) {
  NodeKey key{AttemptKey{"ended", 1}, 0};
  ASSERT_TRUE(backend_->LaunchNode(Spec("ended", {"sh", "-c", "exit 4"})).ok());
  auto paths = NodePathsFor(home_, key);
  int64_t deadline = Now() + kEventLimitMs;
  while (!FileExists(paths->status()) && Now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  backend_ = MakeBackend();  // restart without having consumed the event
  auto report = backend_->RecoverNodes({key});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->finished, std::vector<NodeKey>{key});
  NodeEvent e = WaitFor(backend_.get(), key);
  EXPECT_EQ(e.exit_code, 4);
}

TEST_P(LocalBackendTest, StaleRecordsAreReportedLostAndOrphanedCommandsKilled) {
  // Node 0: its supervisor record names a pid that was recycled (our own pid,
  // with another start time), and its command record a live process, which
  // must be killed. Node 1: the supervisor's pid is dead.
  pid_t orphan = StartStraySleep();
  ASSERT_GE(orphan, 0);
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  auto dead_id = CurrentIdentity(dead);  // may already be a zombie: use its pid only
  ::waitpid(dead, nullptr, 0);

  auto me = CurrentIdentity(::getpid());
  ASSERT_TRUE(me.ok());
  ProcessIdentity recycled = *me;
  recycled.start_time += 7;
  auto orphan_id = CurrentIdentity(orphan);
  ASSERT_TRUE(orphan_id.ok());

  NodeKey k0{AttemptKey{"stale", 1}, 0};
  NodeKey k1{AttemptKey{"stale", 1}, 1};
  auto p0 = NodePathsFor(home_, k0);
  auto p1 = NodePathsFor(home_, k1);
  ASSERT_TRUE(MakeDirs(p0->dir).ok());
  ASSERT_TRUE(MakeDirs(p1->dir).ok());
  ASSERT_TRUE(WriteJsonRecord(p0->shim(), ToJson(ProcessRecord{recycled, 1})).ok());
  ASSERT_TRUE(WriteJsonRecord(p0->command(), ToJson(ProcessRecord{*orphan_id, 1})).ok());
  ASSERT_TRUE(
      WriteJsonRecord(p1->shim(), ToJson(ProcessRecord{ProcessIdentity{dead, 1, BootId()}, 1}))
          .ok());

  auto report = backend_->RecoverNodes({k0, k1});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->lost.size(), 2u);
  EXPECT_TRUE(report->adopted.empty());
  NodeEvent e0 = WaitFor(backend_.get(), k0);
  NodeEvent e1 = WaitFor(backend_.get(), k1);
  EXPECT_EQ(e0.outcome, NodeOutcome::kLost);
  EXPECT_EQ(e1.outcome, NodeOutcome::kLost);
  EXPECT_NE(e0.reason.find("was killed"), std::string::npos) << e0.reason;
  int status = 0;
  ASSERT_EQ(::waitpid(orphan, &status, 0), orphan);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // A tombstone keeps a late supervisor from ever starting the node.
  auto st = ReadStatusRecord(p0->status());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->outcome, NodeOutcome::kLost);
  (void)dead_id;
}

// Nodes that provably never ran their command are told apart from lost ones:
// no folder at all (the server stopped before launching it), or a folder
// whose lock is free and which holds no supervisor record. A node whose
// supervisor record exists is lost, not "never started". A second restart
// reads the same answer back from the tombstone.
TEST_P(LocalBackendTest, RecoverTellsNodesThatNeverStarted) {
  NodeKey absent{AttemptKey{"ns", 1}, 0};
  NodeKey bare{AttemptKey{"ns", 1}, 1};
  NodeKey had_shim{AttemptKey{"ns", 1}, 2};
  ASSERT_TRUE(MakeDirs(NodePathsFor(home_, bare)->dir).ok());
  auto p2 = NodePathsFor(home_, had_shim);
  ASSERT_TRUE(MakeDirs(p2->dir).ok());
  auto me = CurrentIdentity(::getpid());
  ASSERT_TRUE(me.ok());
  ProcessIdentity gone = *me;
  gone.start_time += 7;  // a recycled pid: not our supervisor
  ASSERT_TRUE(WriteJsonRecord(p2->shim(), ToJson(ProcessRecord{gone, 1})).ok());

  for (int restart = 0; restart < 2; ++restart) {
    backend_ = MakeBackend();
    auto report = backend_->RecoverNodes({absent, bare, had_shim});
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->lost.size(), 3u) << restart;
    std::vector<NodeKey> never = report->never_started;
    std::sort(never.begin(), never.end());
    EXPECT_EQ(never, (std::vector<NodeKey>{absent, bare})) << restart;
    for (const NodeKey& k : {absent, bare, had_shim}) {
      NodeEvent e = WaitFor(backend_.get(), k);
      EXPECT_EQ(e.outcome, NodeOutcome::kLost);
      EXPECT_EQ(e.never_started, !(k == had_shim)) << e.reason;
    }
  }
  // The tombstone stops a late supervisor: the bare node's command never runs.
  auto st = ReadStatusRecord(NodePathsFor(home_, bare)->status());
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->never_started);
}

// The runner that would record the command's outcome is killed: the
// supervisor, or the node agent together with its keeper.
TEST_P(LocalBackendTest, SupervisorKilledMeansNodeLostAndCommandKilled) {
  auto r = backend_->LaunchNode(Spec("victim", {"sh", "-c", "echo up; sleep 300"}));
  ASSERT_TRUE(r.ok());
  WaitForLines(r->output_path, 1);
  auto shim = ReadProcessRecord(r->node_dir + "/shim.json");
  auto cmd = ReadProcessRecord(r->node_dir + "/command.json");
  ASSERT_TRUE(shim.ok() && cmd.ok());
  ASSERT_EQ(shim->agent, GetParam());
  if (GetParam()) {
    ASSERT_TRUE(shim->keeper.has_value());
    ASSERT_EQ(::kill(shim->keeper->pid, SIGKILL), 0);
  }
  ASSERT_EQ(::kill(shim->id.pid, SIGKILL), 0);
  NodeEvent e = WaitFor(backend_.get(), NodeKey{AttemptKey{"victim", 1}, 0});
  EXPECT_EQ(e.outcome, NodeOutcome::kLost);
  EXPECT_FALSE(IdentityAlive(cmd->id));
}

TEST_P(LocalBackendTest, UnknownRunningNodesAreTerminatedAtRecovery) {
  auto r = backend_->LaunchNode(Spec("unknown", {"sh", "-c", "echo up; sleep 300"}));
  ASSERT_TRUE(r.ok());
  WaitForLines(r->output_path, 1);
  auto cmd = ReadProcessRecord(r->node_dir + "/command.json");
  ASSERT_TRUE(cmd.ok());
  auto old = std::move(backend_);
  backend_ = MakeBackend();
  auto report = backend_->RecoverNodes({});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->orphans_terminated.size(), 1u);
  NodeEvent e = WaitFor(old.get(), NodeKey{AttemptKey{"unknown", 1}, 0});
  EXPECT_TRUE(e.terminated);
  EXPECT_FALSE(IdentityAlive(cmd->id));
}

TEST_P(LocalBackendTest, UlimitsAreApplied) {
  NodeSpec s = Spec("ulimit", {"sh", "-c", "echo $(ulimit -l) $(ulimit -n) $(ulimit -Hn)"});
  s.ulimits = {Ulimit{"memlock", 4 << 20, 4 << 20}, Ulimit{"nofile", 1000, 1500}};
  auto r = backend_->LaunchNode(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  WaitFor(backend_.get(), s.node);
  EXPECT_EQ(ReadAll(r->output_path), "4096 1000 1500\n");

  // memlock -1 (the recipe's value): granted when the host allows raising it,
  // else refused naming the field, or clamped with a warning in emulation.
  struct rlimit cur;
  ::getrlimit(RLIMIT_MEMLOCK, &cur);
  const bool can = cur.rlim_max == RLIM_INFINITY || HasEffectiveCapability(24 /*CAP_SYS_RESOURCE*/);
  NodeSpec big = Spec("memlock", {"sh", "-c", "ulimit -l"});
  big.ulimits = {Ulimit{"memlock", -1, -1}};
  auto strict = backend_->LaunchNode(big);
  if (can) {
    ASSERT_TRUE(strict.ok()) << strict.status().ToString();
    WaitFor(backend_.get(), big.node);
    EXPECT_EQ(ReadAll(strict->output_path), "unlimited\n");
  } else {
    ASSERT_TRUE(strict.status().IsFailedPrecondition());
    EXPECT_NE(strict.status().message().find("ulimits memlock"), std::string::npos);
    big.emulation = true;
    auto emulated = backend_->LaunchNode(big);
    ASSERT_TRUE(emulated.ok()) << emulated.status().ToString();
    ASSERT_EQ(emulated->warnings.size(), 1u);
    WaitFor(backend_.get(), big.node);
    std::string out = ReadAll(emulated->output_path);
    EXPECT_NE(emulated->warnings[0].find("emulation: ulimits memlock"), std::string::npos);
    // The output is the command's alone: the clamped limit, no notice.
    EXPECT_EQ(out, std::to_string(cur.rlim_max / 1024) + "\n");
  }
}

TEST_P(LocalBackendTest, BadUlimitsAreRejected) {
  NodeSpec s = Spec("badul", {"true"});
  s.ulimits = {Ulimit{"nofiles", 1, 1}};
  auto r = backend_->LaunchNode(s);
  ASSERT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("nofiles"), std::string::npos);
  s.ulimits = {Ulimit{"nofile", 10, 5}};
  EXPECT_TRUE(backend_->LaunchNode(s).status().IsInvalidArgument());
}

TEST_P(LocalBackendTest, UnsupportedFieldRefusedUnlessEmulation) {
  NodeSpec s = Spec("dev", {"sh", "-c", "echo ran"});
  s.unsupported_fields = {"linuxParameters.devices"};
  auto refused = backend_->LaunchNode(s);
  ASSERT_TRUE(refused.status().IsFailedPrecondition());
  EXPECT_NE(refused.status().message().find("linuxParameters.devices"), std::string::npos);
  EXPECT_FALSE(FileExists(home_ + "/jobs/dev/1/0"));

  s.emulation = true;
  auto skipped = backend_->LaunchNode(s);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  ASSERT_EQ(skipped->warnings.size(), 1u);
  EXPECT_NE(skipped->warnings[0].find("skipped linuxParameters.devices"), std::string::npos);
  NodeEvent e = WaitFor(backend_.get(), s.node);
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(ReadAll(skipped->output_path), "ran\n");  // the notice is not in the output
}

TEST_P(LocalBackendTest, MemoryAndVcpuLimitsEnforcedOrWarnedOnce) {
  NodeSpec s = Spec("limits", {"sh", "-c", "cat /proc/self/cgroup"});
  s.vcpu_milli = 1500;
  s.memory_mib = 256;
  auto r = backend_->LaunchNode(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  WaitFor(backend_.get(), s.node);
  std::string out = ReadAll(r->output_path);
  if (backend_->cgroup_support().available) {
    EXPECT_TRUE(r->warnings.empty());
    EXPECT_NE(out.find("lote-limits-1-0"), std::string::npos) << out;
  } else {
    ASSERT_EQ(r->warnings.size(), 1u);
    EXPECT_NE(r->warnings[0].find("limits of this node (1.5 vCPU, 256 MiB) are NOT enforced"),
              std::string::npos)
        << r->warnings[0];
    EXPECT_NE(r->warnings[0].find(backend_->cgroup_support().reason), std::string::npos);
    EXPECT_EQ(out.find("NOT enforced"), std::string::npos) << "the notice is not the job's output";
  }
}

TEST_P(LocalBackendTest, RunsAsTheRequestedUser) {
  NodeSpec s = Spec("user", {"sh", "-c", "id -u; id -g; pwd"});
  s.user = "nobody";
  auto r = backend_->LaunchNode(s);
  if (::geteuid() != 0) {
    EXPECT_TRUE(r.status().IsFailedPrecondition()) << r.status().ToString();
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  NodeEvent e = WaitFor(backend_.get(), s.node);
  EXPECT_EQ(e.exit_code, 0) << ReadAll(r->output_path);
  EXPECT_EQ(ReadAll(r->output_path), "65534\n65534\n" + r->node_dir + "/work\n");
  EXPECT_TRUE(backend_->LaunchNode(Spec("user2", {"true"})).ok());
  NodeSpec bad = Spec("user3", {"true"});
  bad.user = "no-such-user-lote";
  EXPECT_TRUE(backend_->LaunchNode(bad).status().IsInvalidArgument());
}

TEST_P(LocalBackendTest, CommandThatCannotStartIsReported) {
  auto r = backend_->LaunchNode(Spec("missing", {"no-such-command-lote"}));
  ASSERT_TRUE(r.ok());
  NodeEvent e = WaitFor(backend_.get(), NodeKey{AttemptKey{"missing", 1}, 0});
  EXPECT_EQ(e.outcome, NodeOutcome::kStartFailed);
  EXPECT_NE(e.reason.find("no-such-command-lote"), std::string::npos);
  EXPECT_EQ(ReadAll(r->output_path), "");  // the reason is the event's, not the job's output

  NodeSpec s = Spec("baddir", {"true"});
  s.working_dir = "/proc/1/no-such-dir/x";
  auto bad = backend_->LaunchNode(s);
  if (bad.ok()) {
    NodeEvent e2 = WaitFor(backend_.get(), s.node);
    EXPECT_EQ(e2.outcome, NodeOutcome::kStartFailed);
  } else {
    EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  }
}

TEST_P(LocalBackendTest, SameNodeIsNeverLaunchedTwice) {
  NodeSpec s = Spec("twice", {"sh", "-c", "exit 0"});
  ASSERT_TRUE(backend_->LaunchNode(s).ok());
  EXPECT_TRUE(backend_->LaunchNode(s).status().IsAlreadyExists());
  WaitFor(backend_.get(), s.node);
  EXPECT_TRUE(backend_->LaunchNode(s).status().IsAlreadyExists());
  s.node.attempt.attempt = 2;  // a retry is a new attempt
  EXPECT_TRUE(backend_->LaunchNode(s).ok());
  WaitFor(backend_.get(), s.node);
}

// Many launches in a row: each node's event arrives once, none is lost or
// doubled (one epoll set, Wait returning every ended node at once).
TEST_P(LocalBackendTest, BurstOfLaunchesGivesOneEventPerNode) {
  std::set<std::string> expected;
  for (int i = 0; i < 40; ++i) {
    NodeSpec s = Spec("burst:" + std::to_string(i), {"sh", "-c", "exit " + std::to_string(i % 3)});
    ASSERT_TRUE(backend_->LaunchNode(s).ok());
    expected.insert(s.node.attempt.job_id);
  }
  std::set<std::string> seen;
  int64_t deadline = Now() + kEventLimitMs;
  while (seen.size() < expected.size() && Now() < deadline) {
    auto events = backend_->Wait(500);
    ASSERT_TRUE(events.ok());
    for (const NodeEvent& e : *events) {
      EXPECT_TRUE(seen.insert(e.node.attempt.job_id).second) << "twice: " << e.node.ToString();
      EXPECT_EQ(e.outcome, NodeOutcome::kExited) << e.reason;
      const int i = std::stoi(e.node.attempt.job_id.substr(6));
      EXPECT_EQ(e.exit_code, i % 3);
    }
  }
  EXPECT_EQ(seen, expected);
  EXPECT_TRUE(backend_->Running().empty());
}

TEST_P(LocalBackendTest, WaitUsesRealTimeEvenWithAFakeClock) {
  FakeClock fake;
  LocalBackendOptions o;
  o.home = home_;
  o.shim_command = {LOTE_EXEC_SHIM_PATH};
  o.clock = &fake;
  auto b = LocalBackend::Create(o);
  ASSERT_TRUE(b.ok());
  auto events = (*b)->Wait(20);  // must return although the fake clock stands still
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
}

// Wake ends a Wait that would otherwise last a day, whether it comes before
// the Wait (it is remembered) or from another thread during it. Nothing else
// can end these Waits (no node runs), so returning at all proves the wake.
TEST_P(LocalBackendTest, WakeInterruptsWait) {
  constexpr int64_t kDayMs = 86'400'000;
  const int64_t start = Now();
  backend_->Wake();
  auto events = backend_->Wait(kDayMs);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  std::thread t([&] { backend_->Wake(); });
  events = backend_->Wait(kDayMs);
  t.join();
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  EXPECT_LT(Now() - start, kDayMs);
  // The wake was consumed: a zero-length Wait finds nothing pending and returns.
  events = backend_->Wait(0);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
}

}  // namespace
}  // namespace lote::exec

namespace lote::exec {
namespace {

// The cgroup plumbing against a stand-in parent folder (this host may have no
// delegated cgroup v2): detection, the limit files and the command joining its
// group, all through the real backend and supervisor.
TEST_P(LocalBackendTest, CgroupLimitsAreWrittenForTheNode) {
  std::string parent = home_ + "/cgroup-parent";
  ASSERT_TRUE(MakeDirs(parent).ok());
  std::ofstream(parent + "/cgroup.controllers") << "cpuset cpu io memory pids\n";
  std::ofstream(parent + "/cgroup.subtree_control") << "cpu memory\n";
  LocalBackendOptions o;
  o.home = home_;
  o.shim_command = {LOTE_EXEC_SHIM_PATH};
  o.cgroup_parent = parent;
  auto b = LocalBackend::Create(o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->cgroup_support().available) << (*b)->cgroup_support().reason;
  // cgroupfs makes cgroup.procs in a new group; a plain folder needs it made.
  std::string group = parent + "/lote-cg_3-2-1";
  ASSERT_TRUE(MakeDirs(group).ok());
  std::ofstream(group + "/cgroup.procs") << "";
  NodeSpec s = Spec("cg:3", {"true"}, 1, 2);
  s.vcpu_milli = 1500;
  s.memory_mib = 256;
  auto r = (*b)->LaunchNode(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty());
  NodeEvent e = WaitFor(b->get(), s.node);
  EXPECT_EQ(e.exit_code, 0) << ReadAll(r->output_path);
  EXPECT_EQ(ReadAll(group + "/memory.max"), "268435456");
  EXPECT_EQ(ReadAll(group + "/cpu.max"), "150000 100000");
  EXPECT_EQ(ReadAll(group + "/cgroup.procs"), "0");  // the command moved itself in

  std::ofstream(parent + "/cgroup.controllers") << "cpu io\n";  // memory not delegated
  auto no_memory = LocalBackend::Create(o);
  ASSERT_TRUE(no_memory.ok());
  EXPECT_FALSE((*no_memory)->cgroup_support().available);
  EXPECT_NE((*no_memory)->cgroup_support().reason.find("memory"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Runners, LocalBackendTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "NodeAgent" : "SupervisorPerNode";
                         });

}  // namespace
}  // namespace lote::exec
