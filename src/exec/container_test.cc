// Container mode's pure parts: the AWS fields as a ContainerRun, the podman
// command line of a node, and how a failed podman run becomes AWS's reason.
#include "exec/container.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lote::exec {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ContainerTest, AwsFieldsBecomeAContainerRun) {
  Json lp = Json::parse(R"({"devices": [{"hostPath": "/dev/null", "containerPath": "/dev/x",
                                          "permissions": ["READ", "WRITE"]}],
                             "sharedMemorySize": 4096})");
  Json other = Json::parse(R"({"privileged": true, "readonlyRootFilesystem": true,
      "volumes": [{"name": "data", "host": {"sourcePath": "/srv/data"}}, {"name": "scratch"}],
      "mountPoints": [{"sourceVolume": "data", "containerPath": "/data", "readOnly": true},
                      {"sourceVolume": "scratch", "containerPath": "/scratch"}]})");
  auto c = ContainerRunFromAws("img:1", lp, other);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->privileged);
  EXPECT_TRUE(c->read_only_root);
  EXPECT_EQ(c->shm_mib, 4096);
  EXPECT_EQ(c->devices, (std::vector<ContainerDevice>{{"/dev/null", "/dev/x", "rw"}}));
  EXPECT_EQ(c->mounts, (std::vector<ContainerMount>{{"/srv/data", "/data", true},
                                                    {"lote-scratch", "/scratch", false}}));
  EXPECT_EQ(ContainerRunFromJson(ToJson(*c)), *c);

  Json bad = Json::parse(R"({"mountPoints": [{"sourceVolume": "nope", "containerPath": "/x"}]})");
  EXPECT_TRUE(ContainerRunFromAws("img", Json::object(), bad).status().IsInvalidArgument());
  Json efs = Json::parse(R"({"volumes": [{"name": "e", "efsVolumeConfiguration": {}}]})");
  EXPECT_TRUE(ContainerRunFromAws("img", Json::object(), efs).status().IsInvalidArgument());
  EXPECT_TRUE(ContainerRunFromAws("", Json::object(), Json::object()).status().IsInvalidArgument());
}

TEST(ContainerTest, NamesAreByJobAttemptAndNode) {
  EXPECT_EQ(ContainerName("abc-1", 2, 3), "lote-abc-1-2-3");
  EXPECT_EQ(ContainerName("abc:7", 1, 0), "lote-abc_7-1-0");
}

TEST(ContainerTest, PodmanRunArgsPassTheJobByName) {
  PodmanRunSpec s;
  s.container.image = "localhost/img:1";
  s.container.name = "lote-j-1-0";
  s.container.devices = {{"/dev/null", "", ""}};
  s.container.mounts = {{"/srv", "/data", true}};
  s.container.read_only_root = true;
  s.env_keys = {"AWS_BATCH_JOB_ID", "SECRET"};
  s.user = UserIds{65534, 65534, {65534, 27}};
  s.memory_mib = 512;
  s.container.shm_mib = 2048;
  s.vcpu_milli = 1500;
  s.cid_file = "/n/container.id";
  const ContainerUlimit nofile{"nofile", 1024, 4096}, nproc{"nproc", 100, 200};
  std::vector<std::string> a = PodmanRunArgs(s, nofile, nproc);
  EXPECT_EQ(std::vector<std::string>(a.begin(), a.begin() + 4),
            (std::vector<std::string>{"run", "--rm", "--name", "lote-j-1-0"}));
  for (const char* want :
       {"--init", "--network=host", "--user=65534:65534", "--group-add=27", "-e", "SECRET",
        "--device=/dev/null:/dev/null", "--volume=/srv:/data:ro", "--read-only", "--memory=512m",
        "--cpus=1.5", "--shm-size=2048m", "--cidfile=/n/container.id",
        "--security-opt=no-new-privileges", "--cap-drop=all"})
    EXPECT_TRUE(Has(a, want)) << want;
  EXPECT_FALSE(Has(a, "--group-add=65534"));  // the primary group is --user's
  // No ulimit asked: containers.conf's defaults stand.
  EXPECT_FALSE(std::any_of(a.begin(), a.end(),
                           [](const std::string& x) { return x.rfind("--ulimit", 0) == 0; }));
  EXPECT_EQ(a.back(), "localhost/img:1");  // no command: the image's ENTRYPOINT + CMD
  // Values never on the command line: -e names only.
  EXPECT_FALSE(Has(a, "SECRET="));

  // Any ulimit: nofile and nproc always named (podman drops the defaults then).
  s.ulimits = {{"memlock", -1, -1}};
  s.command = {"python", "train.py"};
  a = PodmanRunArgs(s, nofile, nproc);
  EXPECT_TRUE(Has(a, "--ulimit=memlock=-1:-1"));
  EXPECT_TRUE(Has(a, "--ulimit=nofile=1024:4096"));
  EXPECT_TRUE(Has(a, "--ulimit=nproc=100:200"));
  EXPECT_EQ(std::vector<std::string>(a.end() - 3, a.end()),
            (std::vector<std::string>{"localhost/img:1", "python", "train.py"}));
}

TEST(ContainerTest, RootKeepsItsCapabilitiesAndPrivilegedIsUnfenced) {
  PodmanRunSpec s;
  s.container.image = "img";
  s.container.name = "n";
  s.user = UserIds{0, 0, {0}};
  std::vector<std::string> a = PodmanRunArgs(s, {"nofile", 1, 1}, {"nproc", 1, 1});
  EXPECT_TRUE(Has(a, "--user=0:0"));
  EXPECT_TRUE(Has(a, "--security-opt=no-new-privileges"));
  EXPECT_FALSE(Has(a, "--cap-drop=all"));
  s.user.reset();  // the image's USER
  a = PodmanRunArgs(s, {"nofile", 1, 1}, {"nproc", 1, 1});
  EXPECT_FALSE(std::any_of(a.begin(), a.end(),
                           [](const std::string& x) { return x.rfind("--user", 0) == 0; }));
  s.container.privileged = true;
  a = PodmanRunArgs(s, {"nofile", 1, 1}, {"nproc", 1, 1});
  EXPECT_TRUE(Has(a, "--privileged"));
  EXPECT_FALSE(Has(a, "--security-opt=no-new-privileges"));
}

TEST(ContainerTest, PodmansOwnErrorsBecomeAwsReasons) {
  auto pull = ClassifyPodmanExit(
      125,
      "Trying to pull localhost/nope:1...\ntime=x msg=\"(1/3). Error: retrying\"\n"
      "Error: initializing source docker://localhost/nope:1: pinging container registry");
  ASSERT_TRUE(pull.has_value());
  EXPECT_EQ(pull->reason,
            "CannotPullContainerError: initializing source docker://localhost/nope:1: pinging "
            "container registry");
  EXPECT_FALSE(pull->users_fault);
  auto unknown = ClassifyPodmanExit(
      125,
      "Error: initializing source docker://r/x:1: reading manifest 1 in r/x: manifest unknown\n");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_TRUE(unknown->users_fault);
  auto exe = ClassifyPodmanExit(
      127, "Error: runc: runc create failed: exec: \"nope\": executable file not found in $PATH");
  ASSERT_TRUE(exe.has_value());
  EXPECT_EQ(exe->reason.rfind("CannotStartContainerError: ", 0), 0u);
  EXPECT_TRUE(exe->users_fault);
  // The container's own exit codes, and its own "Error:" lines with them.
  EXPECT_FALSE(ClassifyPodmanExit(1, "Error: my job failed\n").has_value());
  EXPECT_FALSE(ClassifyPodmanExit(125, "the job printed this\n").has_value());
}

TEST(ContainerTest, ThePullPhaseIsFromPodmansStartToTheContainerCreated) {
  // Cached image: the container's output comes first, no pull.
  EXPECT_FALSE(PullPhaseOf("hello\n", 1000, 1040, 2000).has_value());
  EXPECT_FALSE(PullPhaseOf("", 1000, 0, 1100).has_value());
  auto pulled =
      PullPhaseOf("Trying to pull 127.0.0.1:5000/r:1...\nGetting image", 1000, 3500, 9000);
  ASSERT_TRUE(pulled.has_value());
  EXPECT_EQ(pulled->started_at_ms, 1000);
  EXPECT_EQ(pulled->stopped_at_ms, 3500);
  // The pull failed: no container; the phase lasted until podman's end.
  auto failed = PullPhaseOf("Trying to pull localhost/nope:1...\nError: ...", 1000, 0, 4000);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->stopped_at_ms, 4000);
}

}  // namespace
}  // namespace lote::exec
