// The node runner (`lote-exec-shim`, shim.h) as every backend starts it, with
// real processes: as a Slurm task (--attempt-dir, the node from SLURM_NODEID,
// the placement's variables, the command's exit status) and its pure parts
// (the placement's environment, the ulimit check, the one node resolution).
#include "exec/shim.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/files.h"
#include "exec/command.h"
#include "exec/node_files.h"
#include "exec/node_resolve.h"
#include "exec/node_run.h"
#include "exec/slurm_placement.h"
#include "exec/ulimits.h"

namespace lote::exec {
namespace {

class RunnerTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote-runner-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes node k's spec (placement "slurm") and runs the runner as srun would.
  CommandResult RunTask(int32_t k, std::vector<std::string> argv, bool multi,
                        std::map<std::string, std::string> task_env) {
    NodePaths p{dir_ + "/node-" + std::to_string(k)};
    EXPECT_TRUE(MakeDirs(p.dir).ok());
    ShimSpec s;
    s.node = NodeKey{AttemptKey{"task-job", 1}, k};
    s.argv = std::move(argv);
    s.env = {"PATH=/usr/bin:/bin", "LOTE_PRIVATE_IPV4_ADDRESS=stale"};
    s.working_dir = dir_ + "/work-" + std::to_string(k);
    s.output_path = dir_ + "/node-" + std::to_string(k) + ".out";
    s.placement = "slurm";
    s.multi_node = multi;
    s.main_node_index = 0;
    EXPECT_TRUE(WriteJsonRecord(p.spec(), ToJson(s), 0600).ok());
    task_env["SLURM_NODEID"] = std::to_string(k);
    task_env["PATH"] = "/usr/bin:/bin";
    auto r = RunCommand({LOTE_EXEC_SHIM_PATH, "--attempt-dir", dir_}, task_env, 30'000, false);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CommandResult{};
  }
  std::string Out(int32_t k) {
    auto r = ReadFile(dir_ + "/node-" + std::to_string(k) + ".out");
    return r.ok() ? *r : "";
  }

  std::string dir_;
};

TEST_F(RunnerTaskTest, ExitsWithTheCommandsStatusAndRecordsIt) {
  CommandResult r = RunTask(0, {"sh", "-c", "echo out; exit 7"}, false, {});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(Out(0), "out\n");
  auto st = ReadStatusRecord(dir_ + "/node-0/status.json");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->outcome, NodeOutcome::kExited);
  EXPECT_EQ(st->exit_code, 7);
  auto cmd = ReadProcessRecord(dir_ + "/node-0/command.json");
  ASSERT_TRUE(cmd.ok());
  EXPECT_GT(cmd->started_at_ms, 0);
  // Run again (srun restarting a task): the node is not run twice, same status.
  EXPECT_EQ(RunTask(0, {"sh", "-c", "echo again"}, false, {}).exit_code, 7);
  EXPECT_EQ(Out(0), "out\n");
}

TEST_F(RunnerTaskTest, SignalAndBadCommandBecomeTaskStatuses) {
  EXPECT_EQ(RunTask(0, {"sh", "-c", "kill -9 $$"}, false, {}).exit_code, 128 + 9);
  CommandResult bad = RunTask(1, {"no-such-program-xyz"}, false, {});
  EXPECT_EQ(bad.exit_code, 127);
  auto st = ReadStatusRecord(dir_ + "/node-1/status.json");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->outcome, NodeOutcome::kStartFailed);
  EXPECT_TRUE(st->bad_command);
}

TEST_F(RunnerTaskTest, AChildNodeGetsItsPlacementsAddresses) {
  std::map<std::string, std::string> env = {{"SLURM_JOB_ID", "42"},
                                            {"SLURMD_NODENAME", "b2"},
                                            {"LOTE_NODE_ADDRS", "10.1.0.1 10.1.0.2"},
                                            {"LOTE_MAIN_ADDR", "10.1.0.1"}};
  CommandResult r =
      RunTask(1,
              {"sh", "-c",
               "echo $LOTE_SLURM_JOB_ID $LOTE_SLURM_NODE $LOTE_PRIVATE_IPV4_ADDRESS "
               "$AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS; echo ${SLURM_JOB_ID:-none}"},
              true, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Only the placement's variables, never the task's own environment.
  EXPECT_EQ(Out(1), "42 b2 10.1.0.2 10.1.0.1\nnone\n");
}

TEST_F(RunnerTaskTest, WithoutSlurmNodeIdItIsAUsageError) {
  auto r = RunCommand({LOTE_EXEC_SHIM_PATH, "--attempt-dir", dir_}, {{"PATH", "/usr/bin:/bin"}},
                      30'000, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find("SLURM_NODEID"), std::string::npos) << r->err;
}

// A thread the runner did not start (OpenBLAS starts one as the lote binary
// loads) blocks no signal, so the kernel hands it the SIGCHLD of the command's
// exit and the runner's signalfd never sees it: the runner must still notice
// the end (it also polls the command's pidfd). Run in a child process that has
// such a thread; a runner that missed the end would never exit.
TEST_F(RunnerTaskTest, AnotherThreadThatTakesSigchldDoesNotHideTheCommandsEnd) {
  NodePaths p{dir_ + "/node-0"};
  ASSERT_TRUE(MakeDirs(p.dir).ok());
  ShimSpec s;
  s.node = NodeKey{AttemptKey{"thread-job", 1}, 0};
  s.argv = {"sh", "-c", "exit 7"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.working_dir = dir_;
  s.output_path = dir_ + "/node-0.out";
  ASSERT_TRUE(WriteJsonRecord(p.spec(), ToJson(s), 0600).ok());
  const pid_t runner = ::fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::thread([] {
      while (true) ::pause();
    }).detach();
    ::_exit(RunExecShim(p.dir, ShimMode::kTask));
  }
  // Wait for the runner; a hung one is killed after a minute (the command
  // itself ends at once).
  int status = 0;
  pid_t done = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while ((done = ::waitpid(runner, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    ::kill(runner, SIGKILL);
    ::waitpid(runner, &status, 0);
    FAIL() << "the runner missed its command's end: still supervising after a minute";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  auto st = ReadStatusRecord(p.dir + "/status.json");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->outcome, NodeOutcome::kExited);
  EXPECT_EQ(st->exit_code, 7);
}

TEST(SlurmPlacementTest, MainNodeHasNoMainAddressAndMissingAddressesAreLeftOut) {
  std::map<std::string, std::string> env = {{"SLURM_JOB_ID", "7"},
                                            {"SLURMD_NODENAME", "n0"},
                                            {"LOTE_NODE_ADDRS", "1.1.1.1"},
                                            {"LOTE_MAIN_ADDR", "1.1.1.1"}};
  EXPECT_EQ(SlurmPlacementEnv(env, 0, true, 0),
            (std::vector<std::string>{"LOTE_SLURM_JOB_ID=7", "LOTE_SLURM_NODE=n0",
                                      "LOTE_PRIVATE_IPV4_ADDRESS=1.1.1.1"}));
  EXPECT_EQ(SlurmPlacementEnv(env, 3, false, 0),
            (std::vector<std::string>{"LOTE_SLURM_JOB_ID=7", "LOTE_SLURM_NODE=n0"}));
  std::vector<std::string> e = {"A=1", "AB=2"};
  MergeEnv(&e, {"A=3", "C=4"});
  EXPECT_EQ(e, (std::vector<std::string>{"A=3", "AB=2", "C=4"}));
  EXPECT_EQ(*SlurmNodeDir("/a", "12"), "/a/node-12");
  EXPECT_TRUE(SlurmNodeDir("/a", nullptr).status().IsInvalidArgument());
  EXPECT_TRUE(SlurmNodeDir("/a", "1x").status().IsInvalidArgument());
}

TEST(SlurmPlacementTest, TheHostsGpuIndicesAreWhatTheNodeRecords) {
  // Inside Slurm's device cgroup CUDA_VISIBLE_DEVICES counts from 0; the
  // host's indices (what the server reads back) are SLURM_STEP_GPUS, then
  // SLURM_JOB_GPUS.
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", "0,1"},
                                            {"SLURM_JOB_GPUS", "2,3"}};
  std::vector<std::string> out = SlurmPlacementEnv(env, 0, false, 0);
  EXPECT_NE(std::find(out.begin(), out.end(), "CUDA_VISIBLE_DEVICES=0,1"), out.end());
  EXPECT_NE(std::find(out.begin(), out.end(), "LOTE_ACCELERATORS=2,3"), out.end());
  env["SLURM_STEP_GPUS"] = "5,6";
  out = SlurmPlacementEnv(env, 0, false, 0);
  EXPECT_NE(std::find(out.begin(), out.end(), "LOTE_ACCELERATORS=5,6"), out.end());
  env.erase("SLURM_STEP_GPUS");
  env.erase("SLURM_JOB_GPUS");
  out = SlurmPlacementEnv(env, 0, false, 0);
  EXPECT_NE(std::find(out.begin(), out.end(), "LOTE_ACCELERATORS=0,1"), out.end());
  EXPECT_EQ(RecordedDevices(out), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(RecordedDevices({"LOTE_ACCELERATORS=0,2-4"}), (std::vector<int32_t>{0, 2, 3, 4}));
  EXPECT_TRUE(RecordedDevices({"LOTE_ACCELERATORS=0,x"}).empty());
  EXPECT_TRUE(RecordedDevices({"LOTE_ACCELERATORS="}).empty());
  EXPECT_TRUE(RecordedDevices({"OTHER=1"}).empty());
}

TEST(UlimitsTest, AboveTheHostIsRefusedOrLoweredInEmulation) {
  const struct rlimit host { 1024, 4096 };
  std::string w;
  auto ok = ResolveRlimit(Ulimit{"nofile", 100, 200}, host, false, false, &w);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->soft, 100);
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(ResolveRlimit(Ulimit{"nofile", 100, 8192}, host, false, false, &w)
                  .status()
                  .IsFailedPrecondition());
  EXPECT_TRUE(ResolveRlimit(Ulimit{"nofile", 100, 8192}, host, true, false, &w).ok());
  auto low = ResolveRlimit(Ulimit{"memlock", -1, -1}, host, false, true, &w);
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(low->soft, 4096);
  EXPECT_EQ(low->hard, 4096);
  EXPECT_NE(w.find("emulation: ulimits memlock"), std::string::npos) << w;
  EXPECT_TRUE(
      ResolveRlimit(Ulimit{"nofiles", 1, 1}, host, true, true, &w).status().IsInvalidArgument());
  EXPECT_TRUE(
      ResolveRlimit(Ulimit{"nofile", 10, 5}, host, true, true, &w).status().IsInvalidArgument());
}

TEST(ResolveNodeTest, DefaultsEnvironmentAndUser) {
  NodeSpec n;
  n.node = NodeKey{AttemptKey{"j", 1}, 0};
  n.command = {"true"};
  n.environment = {{"HOME", "/mine"}};
  n.private_ip = "127.0.1.3";
  RunnerHost host;
  host.euid = 4242;
  host.user_name = "svc";
  host.home_dir = "/home/svc";
  host.node_is_here = false;
  n.ulimits = {Ulimit{"memlock", -1, -1}};
  auto r = ResolveNode(n, host, "the test executor", "/w", "/o");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->spec.working_dir, "/w");
  EXPECT_EQ(r->spec.output_path, "/o");
  EXPECT_FALSE(r->spec.uid.has_value());
  ASSERT_EQ(r->spec.rlimits.size(), 1u);  // checked on the node (node_is_here false)
  EXPECT_EQ(r->spec.rlimits[0].hard, -1);
  EXPECT_EQ(r->spec.env,
            (std::vector<std::string>{
                "HOME=/mine", "LOGNAME=svc", "LOTE_PRIVATE_IPV4_ADDRESS=127.0.1.3",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "USER=svc"}));
  n.user = "0";  // another user than the (non-root) host's
  // Resolved on the node it lands on (node_is_here false), not here.
  auto remote = ResolveNode(n, host, "x", "/w", "/o");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->spec.user, "0");
  EXPECT_FALSE(remote->spec.uid.has_value());
  host.node_is_here = true;
  EXPECT_TRUE(ResolveNode(n, host, "x", "/w", "/o").status().IsFailedPrecondition());
  n.emulation = true;
  auto emulated = ResolveNode(n, host, "x", "/w", "/o");
  ASSERT_TRUE(emulated.ok());
  EXPECT_FALSE(emulated->spec.uid.has_value());
  ASSERT_FALSE(emulated->warnings.empty());
  EXPECT_NE(emulated->warnings.back().find("running as uid 4242 instead"), std::string::npos)
      << emulated->warnings.back();
  host.node_is_here = false;
  n.unsupported_fields = {"privileged"};
  n.emulation = false;
  auto refused = ResolveNode(n, host, "the test executor", "/w", "/o");
  EXPECT_NE(refused.status().message().find("the test executor cannot honour privileged"),
            std::string::npos);
}

TEST(ResolveNodeTest, TheHostDecidesWhoTheJobsUserIs) {
  // A process: a root runner switches to the host's numbers, with the user's
  // HOME, USER and LOGNAME.
  ShimSpec p;
  p.argv = {"id"};
  p.user = "nobody";
  std::vector<std::string> warnings;
  ASSERT_TRUE(ResolveJobUser(&p, 0, "h1", &warnings).ok());
  ASSERT_TRUE(p.uid.has_value());
  EXPECT_EQ(*p.uid, 65534u);
  EXPECT_EQ(p.gid, 65534u);
  EXPECT_NE(std::find(p.env.begin(), p.env.end(), "USER=nobody"), p.env.end());
  // A container gets the very same numbers, never the name.
  ShimSpec c;
  c.container = ContainerRun{};
  c.user = "nobody";
  ASSERT_TRUE(ResolveJobUser(&c, 0, "h1", &warnings).ok());
  ASSERT_TRUE(c.container_user.has_value());
  EXPECT_EQ(c.container_user->uid, *p.uid);
  EXPECT_EQ(c.container_user->gid, p.gid);
  EXPECT_EQ(c.container_user->groups, p.groups);
  EXPECT_FALSE(c.uid.has_value());  // podman itself runs as the runner
  EXPECT_TRUE(c.env.empty());       // the image's HOME
  // A user this host lacks: the job's own error, naming the user and the host.
  ShimSpec missing;
  missing.container = ContainerRun{};
  missing.user = "no-such-user-lote";
  Status s = ResolveJobUser(&missing, 0, "node-7", &warnings);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("user 'no-such-user-lote' does not exist on host node-7"),
            std::string::npos)
      << s.message();
  // The statically linked runner asks getent: the same answer.
  ShimSpec g;
  g.container = ContainerRun{};
  g.user = "nobody";
  ASSERT_TRUE(ResolveJobUser(&g, 0, "h1", &warnings, ResolveUserWithGetent).ok());
  EXPECT_EQ(g.container_user, c.container_user);
  EXPECT_TRUE(
      ResolveJobUser(&missing, 0, "node-7", &warnings, ResolveUserWithGetent).IsInvalidArgument());
  // No user: nothing to decide (the runner's own, or the image's USER).
  ShimSpec none;
  none.container = ContainerRun{};
  EXPECT_TRUE(ResolveJobUser(&none, 0, "h1", &warnings).ok());
  EXPECT_FALSE(none.container_user.has_value());
  EXPECT_TRUE(warnings.empty());
}

TEST(ResolveNodeTest, AContainersMissingDeviceIsRefusedOrLeftOutInEmulation) {
  NodeSpec n;
  n.node = NodeKey{AttemptKey{"j", 1}, 0};
  n.container = ContainerRun{};
  n.container->image = "localhost/img:1";
  n.container->devices = {ContainerDevice{"/dev/null", "/dev/lote0", "rw"},
                          ContainerDevice{"/dev/lote-no-such-device", "/dev/neuron0", "rw"}};
  RunnerHost host;
  auto refused = ResolveNode(n, host, "the test executor", "/w", "/o");
  ASSERT_TRUE(refused.status().IsFailedPrecondition()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find(
                "linuxParameters.devices /dev/lote-no-such-device does not exist on this host"),
            std::string::npos)
      << refused.status().message();
  n.emulation = true;
  auto emulated = ResolveNode(n, host, "the test executor", "/w", "/o");
  ASSERT_TRUE(emulated.ok()) << emulated.status().ToString();
  ASSERT_TRUE(emulated->spec.container.has_value());
  EXPECT_EQ(emulated->spec.container->devices,
            (std::vector<ContainerDevice>{{"/dev/null", "/dev/lote0", "rw"}}));
  EXPECT_EQ(emulated->warnings,
            (std::vector<std::string>{"emulation: skipped linuxParameters.devices "
                                      "/dev/lote-no-such-device (not on this host)"}));
  // Elsewhere (Slurm) the node's own podman finds out.
  host.node_is_here = false;
  n.emulation = false;
  auto remote = ResolveNode(n, host, "the test executor", "/w", "/o");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->spec.container->devices.size(), 2u);
}

}  // namespace
}  // namespace lote::exec
