// The runner's injected faults (node_fault.h) and the stack dumps of a hang
// (stack_dump.h): the step watch over a real output file, the sentence each
// fault is recorded with, and a real runner that kills, preempts or stops its
// command as asked.
#include "exec/node_fault.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/files.h"
#include "exec/command.h"
#include "exec/node_files.h"
#include "exec/stack_dump.h"

namespace lote::exec {
namespace {

TEST(LastProgressStep, TakesTheHighestStepOfCompleteProgressLines) {
  EXPECT_EQ(LastProgressStep(""), std::nullopt);
  EXPECT_EQ(LastProgressStep("step 8 | loss 3\n"), std::nullopt);
  EXPECT_EQ(LastProgressStep("LOTE_PROGRESS {\"step\": 4}\nLOTE_PROGRESS {\"step\": 8}\n"), 8);
  // An unfinished line, a line that only contains the prefix, bad JSON: ignored.
  EXPECT_EQ(LastProgressStep("LOTE_PROGRESS {\"step\": 2}\nLOTE_PROGRESS {\"step\": 9"), 2);
  EXPECT_EQ(LastProgressStep("x LOTE_PROGRESS {\"step\": 5}\nLOTE_PROGRESS nope\n"), std::nullopt);
  EXPECT_EQ(LastProgressStep("LOTE_PROGRESS {\"val_loss\": 2.0}\n"), std::nullopt);
}

TEST(DescribeInjected, SaysWhatWasDoneToWhichNodeAndWhen) {
  NodeFault kill{FaultAction::kKill, 8, -1, 30000, ""};
  EXPECT_EQ(DescribeInjected(kill, 1, 8, -1), "Injected fault: node 1 killed (SIGKILL) at step 8");
  NodeFault preempt{FaultAction::kPreempt, 0, 30000, 20000, ""};
  EXPECT_EQ(DescribeInjected(preempt, 0, 0, 30000),
            "Injected fault: node 0 preempted (SIGTERM, 20 s grace) after 30 s");
  NodeFault stop{FaultAction::kStop, 3, -1, 30000, ""};
  EXPECT_EQ(DescribeInjected(stop, 2, 4, -1), "Injected fault: node 2 stopped (SIGSTOP) at step 4");
}

TEST(NodeFault, RoundTripsThroughTheSpecAndIsAbsentWhenNone) {
  NodeFault f{FaultAction::kStop, 12, -1, 5000, "/x/output.log"};
  EXPECT_EQ(NodeFaultFromJson(ToJson(f)), f);
  EXPECT_TRUE(ToJson(NodeFault{}).is_null());
  EXPECT_FALSE(NodeFaultFromJson(Json()).Any());
  ShimSpec s;
  s.argv = {"true"};
  EXPECT_FALSE(ToJson(s).contains("fault"));
  s.fault = f;
  Result<ShimSpec> back = ShimSpecFromJson(ToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->fault, f);
}

class FaultWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote-fault-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Append(const std::string& text) { std::ofstream(dir_ + "/out.log", std::ios::app) << text; }
  std::string dir_;
};

TEST_F(FaultWatchTest, FiresOnceWhenTheStepIsReached) {
  FaultWatch w(NodeFault{FaultAction::kKill, 8, -1, 30000, dir_ + "/out.log"}, 0);
  EXPECT_FALSE(w.Due(10));  // no file yet
  EXPECT_GT(w.PollTimeoutMs(10), 0);
  Append("LOTE_PROGRESS {\"step\": 7}\nLOTE_PROGRESS {\"step\": 8");
  EXPECT_FALSE(w.Due(20));  // step 8's line is not complete
  Append("}\n");
  EXPECT_TRUE(w.Due(30));
  EXPECT_EQ(w.step_seen(), 8);
  EXPECT_FALSE(w.Due(40));
  EXPECT_EQ(w.PollTimeoutMs(40), -1);
}

TEST_F(FaultWatchTest, FiresAfterItsTimeAndNeverWithoutAFault) {
  FaultWatch w(NodeFault{FaultAction::kStop, 0, 5000, 30000, ""}, 1000);
  EXPECT_EQ(w.PollTimeoutMs(2000), 4000);
  EXPECT_FALSE(w.Due(5999));
  EXPECT_TRUE(w.Due(6000));
  EXPECT_EQ(w.after_ms_seen(), 5000);
  FaultWatch none(NodeFault{}, 0);
  EXPECT_EQ(none.PollTimeoutMs(0), -1);
  EXPECT_FALSE(none.Due(1'000'000));
}

// A real runner with a fault in its spec.
class InjectingRunnerTest : public FaultWatchTest {
 protected:
  StatusRecord Run(NodeFault fault, const std::string& script) {
    NodePaths p{dir_ + "/node"};
    EXPECT_TRUE(MakeDirs(p.dir).ok());
    ShimSpec s;
    s.node = NodeKey{AttemptKey{"fault-job", 1}, 1};
    s.argv = {"sh", "-c", script};
    s.env = {"PATH=/usr/bin:/bin"};
    s.working_dir = dir_ + "/work";
    s.output_path = dir_ + "/out.log";
    s.fault = std::move(fault);
    EXPECT_TRUE(WriteJsonRecord(p.spec(), ToJson(s), 0600).ok());
    auto r = RunCommand({LOTE_EXEC_SHIM_PATH, "--node-dir", p.dir}, {{"PATH", "/usr/bin:/bin"}},
                        120'000, false);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Result<StatusRecord> st = ReadStatusRecord(p.status());
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return st.ok() ? *st : StatusRecord{};
  }
};

TEST_F(InjectingRunnerTest, KillsItsCommandAtTheStepAndRecordsIt) {
  StatusRecord st = Run(NodeFault{FaultAction::kKill, 3, -1, 30000, dir_ + "/out.log"},
                        "for i in 1 2 3 4 5 6 7 8 9; do echo \"LOTE_PROGRESS {\\\"step\\\": $i}\"; "
                        "sleep 1; done; exit 0");
  EXPECT_EQ(st.outcome, NodeOutcome::kSignaled);
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_EQ(st.injected.rfind("Injected fault: node 1 killed (SIGKILL) at step ", 0), 0)
      << st.injected;
  EXPECT_TRUE(FileExists(dir_ + "/node/fault.json"));
  auto out = ReadFile(dir_ + "/out.log");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->find("{\"step\": 9}"), std::string::npos) << *out;  // it never got there
}

TEST_F(InjectingRunnerTest, PreemptsWithSigtermAndTheGracePeriod) {
  // The command saves its state on SIGTERM and exits 75, as lote train does;
  // its first progress line comes once the trap is set.
  StatusRecord st = Run(NodeFault{FaultAction::kPreempt, 1, -1, 60000, dir_ + "/out.log"},
                        "trap 'echo saved; exit 75' TERM; echo 'LOTE_PROGRESS {\"step\": 1}'; "
                        "while true; do sleep 0.1; done");
  EXPECT_EQ(st.outcome, NodeOutcome::kExited);
  EXPECT_EQ(st.exit_code, 75);
  EXPECT_FALSE(st.terminated);  // not a TerminateJob: the attempt is PREEMPTED
  EXPECT_EQ(st.injected, "Injected fault: node 1 preempted (SIGTERM, 60 s grace) at step 1");
}

TEST(Throttle, RunsItsShareOfEachPeriodAndNeverCatchesUp) {
  Throttle t(25, 1000);
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.Due(1000), 0);
  EXPECT_EQ(t.PollTimeoutMs(1000), 25);
  EXPECT_EQ(t.Due(1025), SIGSTOP);
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.PollTimeoutMs(1025), 75);
  EXPECT_EQ(t.Due(1099), 0);
  EXPECT_EQ(t.Due(1100), SIGCONT);
  EXPECT_FALSE(t.stopped());
  // A late turn counts from when it came: one stop, not a burst.
  EXPECT_EQ(t.Due(1500), SIGSTOP);
  EXPECT_EQ(t.PollTimeoutMs(1500), 75);
  EXPECT_EQ(t.Due(1501), 0);
  EXPECT_EQ(t.stops(), 2);
  // Out of range: 1% and 99%, never all or nothing.
  Throttle low(0, 0);
  EXPECT_EQ(low.PollTimeoutMs(0), 1);
  Throttle high(100, 0);
  EXPECT_EQ(high.PollTimeoutMs(0), 99);
}

TEST_F(InjectingRunnerTest, ASlowNodeIsStoppedAndContinuedInTurns) {
  // The command (busy, never sleeping) writes its pid; this test watches its
  // state in /proc from outside its process group: it must be seen stopped
  // ('T') and then running again, and it ends once told to.
  const std::string pid_file = dir_ + "/pid", done = dir_ + "/done";
  StatusRecord st;
  std::thread runner([&] {
    st = Run(NodeFault{FaultAction::kSlow, 0, 0, 30000, "", 0, 1, 25},
             "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file +
                 "; while [ ! -e " + done + " ]; do :; done; exit 0");
  });
  auto state = [&]() -> char {
    Result<std::string> pid = ReadFile(pid_file);
    if (!pid.ok() || pid->empty()) return 0;
    Result<std::string> stat = ReadFile("/proc/" + pid->substr(0, pid->find('\n')) + "/stat");
    if (!stat.ok()) return 0;
    const size_t paren = stat->rfind(')');
    return paren != std::string::npos && paren + 2 < stat->size() ? (*stat)[paren + 2] : 0;
  };
  bool seen_stopped = false, seen_running_after = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!seen_running_after && std::chrono::steady_clock::now() < deadline) {
    const char s = state();
    if (s == 'T') seen_stopped = true;
    if (seen_stopped && (s == 'R' || s == 'S')) seen_running_after = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ofstream(done).put('1');
  runner.join();
  EXPECT_TRUE(seen_stopped);
  EXPECT_TRUE(seen_running_after);
  EXPECT_EQ(st.outcome, NodeOutcome::kExited);
  EXPECT_EQ(st.exit_code, 0);
  EXPECT_EQ(st.injected,
            "Injected fault: node 1 slowed to 25% of its CPU time (SIGSTOP and SIGCONT in turns, "
            "every 100 ms) after 0 s");
  Result<std::string> log = ReadFile(dir_ + "/node/shim.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("slow node: "), std::string::npos) << *log;
}

// What a backend that cannot reach the node's host (Slurm) asks: dump.json,
// then SIGUSR2 to the runner; the runner's child writes dump.txt.
TEST_F(InjectingRunnerTest, DumpsItsOwnCommandsStacksWhenAsked) {
  const std::string done = dir_ + "/done";
  StatusRecord st;
  std::thread runner([&] {
    st = Run(NodeFault{}, "echo up; while [ ! -e " + done + " ]; do sleep 0.05; done; exit 0");
  });
  NodePaths p{dir_ + "/node"};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  Result<ProcessRecord> shim = Status::NotFound("");
  while (std::chrono::steady_clock::now() < deadline &&
         !(FileExists(p.command()) && (shim = ReadProcessRecord(p.shim())).ok()))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(shim.ok());
  ASSERT_TRUE(WriteJsonRecord(p.dump_request(), Json{{"timeout_ms", 60000}}).ok());
  ASSERT_EQ(::kill(shim->id.pid, SIGUSR2), 0);
  Result<std::string> dump = Status::NotFound("");
  while (std::chrono::steady_clock::now() < deadline && !(dump = ReadFile(p.dump_result())).ok())
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::ofstream(done).put('1');
  runner.join();
  ASSERT_TRUE(dump.ok()) << "no dump.txt";
  EXPECT_NE(dump->find("=== process "), std::string::npos) << *dump;
  EXPECT_NE(dump->find("sh"), std::string::npos) << *dump;
  EXPECT_FALSE(FileExists(p.dump_request()));  // taken
  EXPECT_EQ(st.exit_code, 0);
}

TEST_F(InjectingRunnerTest, WithoutAFaultNothingIsInjected) {
  StatusRecord st = Run(NodeFault{}, "echo hi");
  EXPECT_EQ(st.outcome, NodeOutcome::kExited);
  EXPECT_EQ(st.exit_code, 0);
  EXPECT_TRUE(st.injected.empty());
  EXPECT_FALSE(FileExists(dir_ + "/node/fault.json"));
}

TEST(StackDump, DumpsEveryProcessOfAGroupWithItsState) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setpgid(0, 0);
    ::execlp("sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  ::setpgid(child, child);
  // Wait until it is sleep, stopped.
  for (int i = 0; i < 500 && ProcessGroupMembers(child).empty(); ++i) ::usleep(10'000);
  ::kill(child, SIGSTOP);
  siginfo_t info{};
  ::waitid(P_PID, child, &info, WSTOPPED);
  const std::string dump = DumpNodeStacks(child, "/nonexistent", 60'000);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NE(dump.find("=== process " + std::to_string(child) + " (T (stopped))"), std::string::npos)
      << dump;
  EXPECT_NE(dump.find("=== last progress: (none) ==="), std::string::npos) << dump;
  // With ptrace allowed here, gdb's stack of the stopped sleep.
  if (dump.find("(no stack:") == std::string::npos) {
    EXPECT_FALSE(StackSignature(dump).empty()) << dump;
  }
}

TEST(StackSignature, KeepsFunctionNamesOnly) {
  const std::string dump =
      "=== process 12 (S (sleeping)): x ===\n"
      "Thread 1 (Thread 0x7f (LWP 12) \"x\"):\n"
      "#0  0x00007f12 in __futex_abstimed_wait_common64 (private=0) at f.c:57\n"
      "#1  gloo::Wait () at g.cc:3\n"
      "#2  0x00007f13 in __futex_abstimed_wait_common64 (private=0) at f.c:57\n";
  EXPECT_EQ(StackSignature(dump),
            (std::vector<std::string>{"__futex_abstimed_wait_common64", "gloo::Wait"}));
}

// An upload failure is given to the command at its start: nothing to watch.
TEST(UploadFailFault, NeverFiresASignalAndIsGivenInTheEnvironment) {
  NodeFault f;
  f.action = FaultAction::kUploadFail;
  f.upload_fail_ms = 5000;
  f.upload_from_step = 2;
  FaultWatch w(f, 0);
  EXPECT_EQ(w.PollTimeoutMs(0), -1);
  EXPECT_FALSE(w.Due(1'000'000));
  EXPECT_EQ(DescribeInjected(f, 3, 0, -1),
            "Injected fault: checkpoint writes of node 3 fail for 5 s from step 2");
  EXPECT_TRUE(UploadFailEnv(NodeFault{}).empty());
}

}  // namespace
}  // namespace lote::exec
