// The node agent (node_agent.h) with real processes: the real lote-exec-shim
// started as the home's agent by a real LocalBackend, the nodes' commands its
// own children, and what happens when it, its keeper, the backend or several
// of them are killed.
#include "exec/node_agent.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "exec/local_backend.h"
#include "exec/node_files.h"
#include "exec/proc_util.h"

namespace lote::exec {
namespace {

// Upper bound for "the event arrives" so a broken agent fails instead of hanging.
constexpr int64_t kEventLimitMs = 30'000;

int64_t Now() { return SystemClock::Default()->NowMillis(); }

// Field 4 of /proc/<pid>/stat.
pid_t ParentOf(pid_t pid) {
  Result<std::string> stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return -1;
  std::istringstream in(stat->substr(stat->rfind(')') + 1));
  std::string state;
  pid_t ppid = -1;
  in >> state >> ppid;
  return ppid;
}

std::string ExeOf(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

// Kills `id` with SIGKILL and waits until it is gone (a bounded wait, no
// assertion on how long it takes).
void KillAndWaitGone(const ProcessIdentity& id) {
  ASSERT_EQ(::kill(id.pid, SIGKILL), 0);
  const int64_t deadline = Now() + kEventLimitMs;
  while (IdentityAlive(id) && Now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(IdentityAlive(id)) << "pid " << id.pid << " survived SIGKILL";
}

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote-agent-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    go_ = home_ + "/go";
  }
  void TearDown() override {
    if (backend_) {
      for (const auto& key : backend_->Running()) (void)backend_->Terminate(key.attempt, 0);
      const int64_t deadline = Now() + kEventLimitMs;
      while (!backend_->Running().empty() && Now() < deadline) (void)backend_->Wait(200);
    }
    backend_.reset();
    // Removing the home makes its agent stop by itself.
    std::filesystem::remove_all(home_);
  }

  std::unique_ptr<LocalBackend> MakeBackend(bool agent = true, int64_t grace_ms = 30'000) {
    LocalBackendOptions o;
    o.home = home_;
    o.shim_command = {LOTE_EXEC_SHIM_PATH};
    o.use_node_agent = agent;
    o.default_grace_ms = grace_ms;
    auto b = LocalBackend::Create(o);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(*b) : nullptr;
  }

  // A node that runs until the file go_ exists, then exits `code`.
  NodeSpec Held(const std::string& job, int32_t node = 0, int code = 0) const {
    NodeSpec s;
    s.node = NodeKey{AttemptKey{job, 1}, node};
    s.command = {
        "sh", "-c",
        "echo up; while [ ! -e " + go_ + " ]; do sleep 0.02; done; exit " + std::to_string(code)};
    return s;
  }
  GangSpec HeldGang(const std::string& job, int32_t nodes) const {
    GangSpec g;
    g.attempt = AttemptKey{job, 1};
    g.multi_node = nodes > 1;
    for (int32_t i = 0; i < nodes; ++i) g.nodes.push_back(Held(job, i));
    return g;
  }

  void Go() const { std::ofstream(go_) << "go"; }

  // A node of `job` through the agent that says "got TERM" on SIGTERM and goes
  // on; returned once it runs (its trap set).
  Result<LaunchResult> LaunchStubborn(const std::string& job, NodeSpec* s) {
    const std::string ready = home_ + "/ready-" + job;
    s->node = NodeKey{AttemptKey{job, 1}, 0};
    s->command = {"sh", "-c",
                  "trap 'echo got TERM' TERM; touch " + ready + "; while :; do sleep 0.02; done"};
    Result<LaunchResult> r = backend_->LaunchNode(*s);
    if (!r.ok()) return r;
    if (backend_->node_agent().pid <= 0)
      return Status::Unavailable("no agent: " + backend_->node_agent_problem());
    const int64_t deadline = Now() + kEventLimitMs;
    while (!FileExists(ready) && Now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return r;
  }

  ProcessRecord Shim(const NodeKey& key) const {
    Result<NodePaths> p = NodePathsFor(home_, key);
    Result<ProcessRecord> r = Status::NotFound("");
    const int64_t deadline = Now() + kEventLimitMs;
    while (!(r = ReadProcessRecord(p->shim())).ok() && Now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ProcessRecord{};
  }

  // Every terminal event until `keys` have one each; a key seen twice fails.
  std::map<NodeKey, NodeEvent> WaitAll(LocalBackend* b, const std::set<NodeKey>& keys) {
    std::map<NodeKey, NodeEvent> got;
    const int64_t deadline = Now() + kEventLimitMs;
    while (got.size() < keys.size() && Now() < deadline) {
      auto events = b->Wait(500);
      EXPECT_TRUE(events.ok()) << events.status().ToString();
      if (!events.ok()) break;
      for (const NodeEvent& e : *events) {
        EXPECT_EQ(keys.count(e.node), 1u) << "unexpected " << e.node.ToString();
        EXPECT_TRUE(got.emplace(e.node, e).second)
            << "two terminal events for " << e.node.ToString();
      }
    }
    EXPECT_EQ(got.size(), keys.size()) << "not every node ended";
    return got;
  }

  std::string home_;
  std::string go_;
  std::unique_ptr<LocalBackend> backend_;
};

TEST_F(NodeAgentTest, CommandsAreTheAgentsOwnChildren) {
  backend_ = MakeBackend();
  ASSERT_TRUE(backend_);
  EXPECT_EQ(backend_->node_agent().pid, 0) << "started on first use, not before";
  GangSpec gang = HeldGang("direct", 2);
  auto launched = backend_->LaunchGang(gang);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  const ProcessIdentity agent = backend_->node_agent();
  ASSERT_GT(agent.pid, 0) << backend_->node_agent_problem();
  EXPECT_TRUE(IdentityAlive(agent));
  Result<ProcessRecord> recorded = ReadProcessRecord(AgentPathsFor(home_).record());
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->id.pid, agent.pid);
  ASSERT_TRUE(recorded->keeper.has_value());
  EXPECT_EQ(ParentOf(agent.pid), recorded->keeper->pid) << "the agent runs under its keeper";
  for (const NodeSpec& n : gang.nodes) {
    // The node's runner is the agent itself, and its command the agent's
    // child: one process per node, exec'd (the command's program, not the
    // agent's image).
    const ProcessRecord runner = Shim(n.node);
    EXPECT_TRUE(runner.agent);
    EXPECT_EQ(runner.id.pid, agent.pid);
    Result<ProcessRecord> command = ReadProcessRecord(NodePathsFor(home_, n.node)->command());
    ASSERT_TRUE(command.ok());
    EXPECT_EQ(ParentOf(command->id.pid), agent.pid);
    // Recorded before its exec; once it has printed, it runs `sh`.
    const std::string out = NodePathsFor(home_, n.node)->default_output();
    const int64_t deadline = Now() + kEventLimitMs;
    while (ReadFile(out).value_or("").empty() && Now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_NE(ExeOf(command->id.pid), ExeOf(agent.pid));
  }
  Go();
  auto ended = WaitAll(backend_.get(), {gang.nodes[0].node, gang.nodes[1].node});
  for (const auto& [key, e] : ended) {
    EXPECT_EQ(e.outcome, NodeOutcome::kExited) << e.reason;
    EXPECT_EQ(e.exit_code, 0);
    // The real times: from the command's exec to its exit.
    EXPECT_GT(e.started_at_ms, 0);
    EXPECT_GE(e.stopped_at_ms, e.started_at_ms);
    Result<ProcessRecord> command = ReadProcessRecord(NodePathsFor(home_, key)->command());
    ASSERT_TRUE(command.ok());
    EXPECT_GE(e.started_at_ms, command->started_at_ms) << "stamped before the exec";
  }
  EXPECT_TRUE(backend_->Running().empty());
}

TEST_F(NodeAgentTest, KillingTheAgentLeavesItsNodesToTheKeeper) {
  backend_ = MakeBackend();
  GangSpec gang = HeldGang("agent-killed", 2);
  ASSERT_TRUE(backend_->LaunchGang(gang).ok());
  const ProcessIdentity agent = backend_->node_agent();
  ASSERT_GT(agent.pid, 0) << backend_->node_agent_problem();
  const ProcessRecord runner = Shim(gang.nodes[0].node);
  ASSERT_TRUE(runner.keeper.has_value());
  std::vector<ProcessIdentity> commands;
  for (const NodeSpec& n : gang.nodes) {
    Result<ProcessRecord> c = ReadProcessRecord(NodePathsFor(home_, n.node)->command());
    ASSERT_TRUE(c.ok());
    commands.push_back(c->id);
  }
  KillAndWaitGone(agent);
  // The commands run on, the keeper's children now.
  for (const ProcessIdentity& c : commands) {
    EXPECT_TRUE(IdentityAlive(c));
    const int64_t deadline = Now() + kEventLimitMs;
    while (ParentOf(c.pid) != runner.keeper->pid && Now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(ParentOf(c.pid), runner.keeper->pid);
  }
  Go();
  auto ended = WaitAll(backend_.get(), {gang.nodes[0].node, gang.nodes[1].node});
  for (const auto& [key, e] : ended) {
    EXPECT_EQ(e.outcome, NodeOutcome::kExited) << key.ToString() << ": " << e.reason;
    EXPECT_EQ(e.exit_code, 0);
  }
  EXPECT_TRUE(backend_->Running().empty());
  auto more = backend_->Wait(0);
  ASSERT_TRUE(more.ok());
  EXPECT_TRUE(more->empty()) << "an event after every node's terminal one";
  // The keeper ends once it has nothing left to keep.
  const int64_t deadline = Now() + kEventLimitMs;
  while (IdentityAlive(*runner.keeper) && Now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(IdentityAlive(*runner.keeper));

  // The next launch finds the agent gone and starts another.
  ASSERT_TRUE(backend_->LaunchNode(Held("after-agent")).ok());
  const ProcessIdentity second = backend_->node_agent();
  EXPECT_GT(second.pid, 0) << backend_->node_agent_problem();
  EXPECT_NE(second.pid, agent.pid);
  EXPECT_EQ(Shim(NodeKey{AttemptKey{"after-agent", 1}, 0}).id.pid, second.pid);
  auto last = WaitAll(backend_.get(), {NodeKey{AttemptKey{"after-agent", 1}, 0}});
  EXPECT_EQ(last.begin()->second.outcome, NodeOutcome::kExited);
}

TEST_F(NodeAgentTest, KillingTheAgentAndItsKeeperLosesTheirNodesAndKillsTheCommands) {
  backend_ = MakeBackend();
  ASSERT_TRUE(backend_->LaunchNode(Held("both-gone")).ok());
  const NodeKey key{AttemptKey{"both-gone", 1}, 0};
  const ProcessRecord runner = Shim(key);
  ASSERT_TRUE(runner.keeper.has_value());
  Result<ProcessRecord> command = ReadProcessRecord(NodePathsFor(home_, key)->command());
  ASSERT_TRUE(command.ok());
  KillAndWaitGone(*runner.keeper);
  KillAndWaitGone(runner.id);
  auto ended = WaitAll(backend_.get(), {key});
  EXPECT_EQ(ended[key].outcome, NodeOutcome::kLost) << ended[key].reason;
  EXPECT_FALSE(IdentityAlive(command->id)) << "a command nobody can record runs on";
}

TEST_F(NodeAgentTest, AfterServerAndAgentAreKilledTheNextBackendAdoptsTheNodes) {
  const NodeKey key{AttemptKey{"both-killed", 1}, 0};
  const NodeKey kept{AttemptKey{"agent-kept", 1}, 0};
  // 1. A "server" (a child process) launches and is killed: its agent stays
  // and the next backend uses it.
  auto server = [&](const NodeSpec& spec) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto b = MakeBackend();
      if (!b || !b->LaunchNode(spec).ok()) ::_exit(1);
      ::raise(SIGKILL);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFSIGNALED(status);
  };
  ASSERT_TRUE(server(Held("agent-kept", 0, 4))) << "the first server failed to launch";
  Result<ProcessRecord> agent = ReadProcessRecord(AgentPathsFor(home_).record());
  ASSERT_TRUE(agent.ok());
  ASSERT_TRUE(IdentityAlive(agent->id));
  // 2. Another server launches through the same agent, then the server and
  // the agent are killed together.
  ASSERT_TRUE(server(Held("both-killed", 0, 3)));
  Result<ProcessRecord> same = ReadProcessRecord(AgentPathsFor(home_).record());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->id.pid, agent->id.pid) << "the second server started another agent";
  EXPECT_EQ(Shim(key).id.pid, agent->id.pid);
  KillAndWaitGone(agent->id);

  // 3. The next backend adopts both nodes by their records: their commands
  // run under the keeper, which records their outcomes.
  backend_ = MakeBackend();
  auto report = backend_->RecoverNodes({key, kept});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->adopted.size(), 2u);
  EXPECT_TRUE(backend_->LaunchNode(Held("both-killed")).status().IsAlreadyExists());
  Go();
  auto ended = WaitAll(backend_.get(), {key, kept});
  EXPECT_EQ(ended[key].outcome, NodeOutcome::kExited) << ended[key].reason;
  EXPECT_EQ(ended[key].exit_code, 3);
  EXPECT_EQ(ended[kept].exit_code, 4);
}

TEST_F(NodeAgentTest, ARestartedBackendIsToldOfItsNodesEndsByTheAgent) {
  auto first = MakeBackend();
  ASSERT_TRUE(first->LaunchNode(Held("restart", 0, 5)).ok());
  const NodeKey key{AttemptKey{"restart", 1}, 0};
  const ProcessIdentity agent = first->node_agent();
  first.reset();  // the server stops; the node and the agent go on
  ASSERT_TRUE(IdentityAlive(agent));
  backend_ = MakeBackend();
  auto report = backend_->RecoverNodes({key});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->adopted.size(), 1u);
  Go();
  auto ended = WaitAll(backend_.get(), {key});
  EXPECT_EQ(ended[key].outcome, NodeOutcome::kExited) << ended[key].reason;
  EXPECT_EQ(ended[key].exit_code, 5);
  EXPECT_EQ(backend_->node_agent().pid, agent.pid) << "the same agent";
}

TEST_F(NodeAgentTest, ACommandThatCannotStartIsItsNodesOutcome) {
  backend_ = MakeBackend();
  NodeSpec s;
  s.node = NodeKey{AttemptKey{"bad-command", 1}, 0};
  s.command = {"no-such-command-of-lote"};
  ASSERT_TRUE(backend_->LaunchNode(s).ok());
  ASSERT_GT(backend_->node_agent().pid, 0) << backend_->node_agent_problem();
  auto ended = WaitAll(backend_.get(), {s.node});
  EXPECT_EQ(ended[s.node].outcome, NodeOutcome::kStartFailed);
  EXPECT_TRUE(ended[s.node].bad_command);
  EXPECT_NE(ended[s.node].reason.find("no-such-command-of-lote"), std::string::npos)
      << ended[s.node].reason;
}

TEST_F(NodeAgentTest, AFaultAskedForARunningNodeIsFiredByTheAgent) {
  backend_ = MakeBackend();
  ASSERT_TRUE(backend_->LaunchNode(Held("inject")).ok());
  const NodeKey key{AttemptKey{"inject", 1}, 0};
  Result<ProcessRecord> command = ReadProcessRecord(NodePathsFor(home_, key)->command());
  ASSERT_TRUE(command.ok());
  NodeFault kill;
  kill.action = FaultAction::kKill;
  kill.after_ms = 0;
  ASSERT_TRUE(backend_->InjectFault(key, kill, 0).ok());
  auto ended = WaitAll(backend_.get(), {key});
  EXPECT_EQ(ended[key].outcome, NodeOutcome::kSignaled) << ended[key].reason;
  EXPECT_EQ(ended[key].signal, SIGKILL);
  EXPECT_EQ(ended[key].injected.rfind(kInjectedFaultPrefix, 0), 0u) << ended[key].injected;
  EXPECT_FALSE(IdentityAlive(command->id));
}

// What a node leaves behind when its command ends by itself: a process that
// left its session (setsid) is known by the node's AWS_BATCH_JOB_ID and
// attempt and killed; another node's, still running, is not touched.
TEST_F(NodeAgentTest, ANodesEscapedProcessIsKilledWhenItEndsAndNoOtherNodes) {
  backend_ = MakeBackend();
  auto escaping = [&](const std::string& job, const std::string& then) {
    NodeSpec s;
    s.node = NodeKey{AttemptKey{job, 1}, 0};
    // The inner shell ends at once: the escaped process is the agent's child
    // (its orphan) from then on, for both nodes.
    s.command = {"sh", "-c", "sh -c 'setsid sleep 300 & echo $!'; " + then};
    s.environment = {{"AWS_BATCH_JOB_ID", job}, {"AWS_BATCH_JOB_ATTEMPT", "1"}};
    return s;
  };
  NodeSpec stays = escaping("stays", "while [ ! -e " + go_ + " ]; do sleep 0.02; done");
  NodeSpec ends = escaping("ends", "sleep 0.2; exit 0");
  auto escaped = [&](const NodeSpec& s) {
    const std::string out = NodePathsFor(home_, s.node)->default_output();
    const int64_t deadline = Now() + kEventLimitMs;
    std::string text;
    while ((text = ReadFile(out).value_or("")).find('\n') == std::string::npos && Now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    Result<ProcessIdentity> id = CurrentIdentity(std::atoi(text.c_str()));
    EXPECT_TRUE(id.ok()) << "no escaped process in '" << text << "'";
    return id.ok() ? *id : ProcessIdentity{};
  };
  ASSERT_TRUE(backend_->LaunchNode(stays).ok());
  ASSERT_TRUE(backend_->LaunchNode(ends).ok());
  const ProcessIdentity other = escaped(stays);
  const ProcessIdentity mine = escaped(ends);
  const int64_t deadline = Now() + kEventLimitMs;  // the inner shell's end hands it over
  while (ParentOf(other.pid) != backend_->node_agent().pid && Now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(ParentOf(other.pid), backend_->node_agent().pid);
  auto ended = WaitAll(backend_.get(), {ends.node});
  EXPECT_EQ(ended[ends.node].exit_code, 0) << ended[ends.node].reason;
  EXPECT_FALSE(IdentityAlive(mine)) << "the ended node's escaped process runs on";
  EXPECT_TRUE(IdentityAlive(other)) << "another node's process was killed";
  Go();
  WaitAll(backend_.get(), {stays.node});
  EXPECT_FALSE(IdentityAlive(other));
}

TEST_F(NodeAgentTest, TerminateWithGraceSigtermsThenSigkillsThroughTheAgent) {
  backend_ = MakeBackend(/*agent=*/true, /*grace_ms=*/30'000);
  NodeSpec s;
  auto r = LaunchStubborn("stubborn", &s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(backend_->Terminate(s.node.attempt, 200).ok());
  auto ended = WaitAll(backend_.get(), {s.node});
  const NodeEvent& e = ended[s.node];
  EXPECT_EQ(e.outcome, NodeOutcome::kSignaled) << e.reason;
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_TRUE(e.terminated);
  // The SIGTERM reached the command first; the SIGKILL came when the grace ran out.
  Result<std::string> out = ReadFile(r->output_path);
  EXPECT_NE(out->find("got TERM"), std::string::npos) << *out;
  Result<std::string> log = ReadFile(r->node_dir + "/shim.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("grace 200 ms"), std::string::npos) << *log;
  EXPECT_NE(log->find("grace period over"), std::string::npos) << *log;
}

// The agent dies during a termination's grace period, and so does the
// server: the keeper, which holds the command now, kills it when the grace
// period is over and records the outcome.
TEST_F(NodeAgentTest, TheKeeperEndsATerminationTheAgentDiedDuring) {
  backend_ = MakeBackend(/*agent=*/true, /*grace_ms=*/30'000);
  NodeSpec s;
  auto r = LaunchStubborn("orphaned-term", &s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ProcessIdentity agent = backend_->node_agent();
  ASSERT_TRUE(Shim(s.node).keeper.has_value());
  Result<ProcessRecord> command = ReadProcessRecord(r->node_dir + "/command.json");
  ASSERT_TRUE(command.ok());
  // A grace period long enough that the agent is surely killed inside it.
  ASSERT_TRUE(backend_->Terminate(s.node.attempt, 5'000).ok());
  backend_.reset();  // the server is gone too: nobody else ends the command
  KillAndWaitGone(agent);
  ASSERT_TRUE(IdentityAlive(command->id)) << "the command ended before its grace period did";
  const NodePaths paths{r->node_dir};
  Result<StatusRecord> st = Status::NotFound("");
  const int64_t limit = Now() + kEventLimitMs;
  while (!(st = ReadStatusRecord(paths.status())).ok() && Now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(st.ok()) << "the command outlived its termination's grace period: "
                       << st.status().ToString();
  EXPECT_FALSE(IdentityAlive(command->id));
  EXPECT_EQ(st->outcome, NodeOutcome::kSignaled) << st->reason;
  EXPECT_EQ(st->signal, SIGKILL);
  EXPECT_TRUE(st->terminated);
}

TEST_F(NodeAgentTest, AGangOfFourIsTornDownTogether) {
  backend_ = MakeBackend();
  GangSpec gang = HeldGang("gang4", 4);
  ASSERT_TRUE(backend_->LaunchGang(gang).ok());
  std::set<NodeKey> keys;
  for (const NodeSpec& n : gang.nodes) {
    keys.insert(n.node);
    EXPECT_EQ(Shim(n.node).id.pid, backend_->node_agent().pid);
  }
  ASSERT_TRUE(backend_->Terminate(gang.attempt, 0).ok());
  auto ended = WaitAll(backend_.get(), keys);
  for (const auto& [key, e] : ended) {
    EXPECT_EQ(e.outcome, NodeOutcome::kSignaled) << key.ToString() << ": " << e.reason;
    EXPECT_TRUE(e.terminated) << key.ToString();
    Result<ProcessRecord> command = ReadProcessRecord(NodePathsFor(home_, key)->command());
    ASSERT_TRUE(command.ok());
    EXPECT_FALSE(IdentityAlive(command->id)) << key.ToString() << "'s command still runs";
  }
  EXPECT_TRUE(backend_->Running().empty());
}

TEST_F(NodeAgentTest, WithoutTheAgentEachSupervisorIsAProgramOfItsOwn) {
  backend_ = MakeBackend(/*agent=*/false);
  ASSERT_TRUE(backend_->LaunchNode(Held("no-agent")).ok());
  const NodeKey key{AttemptKey{"no-agent", 1}, 0};
  EXPECT_EQ(ParentOf(Shim(key).id.pid), ::getpid());
  EXPECT_EQ(backend_->node_agent().pid, 0);
  EXPECT_FALSE(FileExists(AgentPathsFor(home_).record()));
  Go();
  EXPECT_EQ(WaitAll(backend_.get(), {key})[key].outcome, NodeOutcome::kExited);
}

TEST_F(NodeAgentTest, AnAgentThatCannotStartFallsBackAndSaysWhy) {
  // <home>/agent is a file: the agent cannot make its folder.
  std::ofstream(home_ + "/agent") << "in the way";
  backend_ = MakeBackend();
  ASSERT_TRUE(backend_->LaunchNode(Held("fallback")).ok());
  const NodeKey key{AttemptKey{"fallback", 1}, 0};
  EXPECT_EQ(backend_->node_agent().pid, 0);
  EXPECT_NE(backend_->node_agent_problem().find("did not start"), std::string::npos)
      << backend_->node_agent_problem();
  EXPECT_EQ(ParentOf(Shim(key).id.pid), ::getpid());
  Go();
  auto ended = WaitAll(backend_.get(), {key});
  EXPECT_EQ(ended[key].outcome, NodeOutcome::kExited) << ended[key].reason;
}

TEST_F(NodeAgentTest, TheAgentServesOnlyNodeFoldersOfItsHome) {
  backend_ = MakeBackend();
  ASSERT_TRUE(backend_->LaunchNode(Held("first")).ok());  // starts the agent
  auto client = NodeAgentClient::Connect(home_);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->agent().pid, backend_->node_agent().pid);
  auto answers = (*client)->Launch({{"/etc", ""}, {home_ + "/jobs/../../etc", ""}});
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  ASSERT_EQ(answers->size(), 2u);
  EXPECT_FALSE((*answers)[0].ok());
  EXPECT_FALSE((*answers)[1].ok());
  EXPECT_NE((*answers)[0].status().message().find("not a node folder"), std::string::npos);
  // A create makes the folder its spec names, and a node's folder only once.
  const NodeKey key{AttemptKey{"first", 1}, 0};
  ShimSpec again, other;
  again.node = key;
  again.argv = {"true"};
  other.node = NodeKey{AttemptKey{"other", 1}, 0};
  other.argv = {"true"};
  const std::string other_dir = NodePathsFor(home_, other.node)->dir;
  answers = (*client)->Launch({{NodePathsFor(home_, key)->dir, ToJson(again).dump()},
                               {other_dir + "x", ToJson(other).dump()}});
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  ASSERT_EQ(answers->size(), 2u);
  EXPECT_TRUE((*answers)[0].status().IsAlreadyExists()) << (*answers)[0].status().ToString();
  ASSERT_FALSE((*answers)[1].ok());
  EXPECT_NE((*answers)[1].status().message().find("the spec is of node"), std::string::npos)
      << (*answers)[1].status().ToString();
  EXPECT_FALSE(FileExists(other_dir + "x"));
  Go();
  EXPECT_EQ(WaitAll(backend_.get(), {key})[key].outcome, NodeOutcome::kExited);
}

TEST_F(NodeAgentTest, ConnectFindsNoAgentInAnEmptyHome) {
  auto client = NodeAgentClient::Connect(home_);
  EXPECT_TRUE(client.status().IsNotFound()) << client.status().ToString();
}

}  // namespace
}  // namespace lote::exec
