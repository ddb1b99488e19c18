#include "iam/job_privileges.h"

#include <gtest/gtest.h>

namespace lote::iam {
namespace {

HostAllowances Host() {
  HostAllowances h;
  h.host_paths = {"/data", "/home/lote/jobs/"};
  h.max_shared_memory_mib = 1024;
  h.hard_limits = {{"memlock", 65536}, {"nofile", 4096}, {"core", -1}};
  return h;
}

Json Def(const char* text) { return *ParseJson(text); }

TEST(JobPrivilegesTest, PlainDefinitionHasNone) {
  EXPECT_TRUE(RootEquivalentSettings(Def(R"({"containerProperties":{"image":"x","user":"nobody",
      "privileged":false,"ulimits":[{"name":"nofile","softLimit":1024,"hardLimit":4096}],
      "linuxParameters":{"sharedMemorySize":1024},
      "volumes":[{"name":"d","host":{"sourcePath":"/data/set"}},{"name":"scratch"},
                 {"name":"j","host":{"sourcePath":"/home/lote/jobs"}}]}})"),
                                     Host())
                  .empty());
}

TEST(JobPrivilegesTest, EachRootEquivalentSettingIsNamedWhereItIs) {
  const std::vector<std::string> s =
      RootEquivalentSettings(Def(R"({"containerProperties":{"privileged":true,
          "linuxParameters":{"devices":[{"hostPath":"/dev/fuse"},{"hostPath":"/dev/neuron3"},{"hostPath":"/dev/neuron3x"}],"sharedMemorySize":2048},
          "volumes":[{"name":"etc","host":{"sourcePath":"/etc"}},
                     {"name":"sneaky","host":{"sourcePath":"/data/../root"}},
                     {"name":"prefix","host":{"sourcePath":"/database"}}],
          "ulimits":[{"name":"memlock","softLimit":-1,"hardLimit":-1},
                     {"name":"nofile","softLimit":1024,"hardLimit":8192},
                     {"name":"core","softLimit":-1,"hardLimit":-1}]}})"),
                             Host());
  ASSERT_EQ(s.size(), 9u) << Json(s).dump();
  EXPECT_EQ(s[0], "containerProperties.privileged = true");
  EXPECT_EQ(s[1], "containerProperties.linuxParameters.devices[0] = /dev/fuse");
  // /dev/neuron3 asks for a Neuron device (not root-equivalent); /dev/neuron3x is no such name.
  EXPECT_EQ(s[2], "containerProperties.linuxParameters.devices[2] = /dev/neuron3x");
  EXPECT_NE(s[3].find("sharedMemorySize = 2048 MiB (above this server's 1024 MiB)"),
            std::string::npos);
  EXPECT_NE(s[4].find("volumes[0].host.sourcePath = /etc, outside the allowed host paths"),
            std::string::npos);
  EXPECT_NE(s[5].find("/data/../root (/root)"), std::string::npos) << s[5];
  EXPECT_NE(s[6].find("/database"), std::string::npos) << s[6];  // not under /data
  EXPECT_NE(s[7].find("ulimits[0] memlock softLimit = unlimited (above the host's hard limit "
                      "65536)"),
            std::string::npos)
      << s[7];
  EXPECT_NE(s[8].find("ulimits[1] nofile hardLimit = 8192"), std::string::npos) << s[8];
}

TEST(JobPrivilegesTest, NodeRangesAreCheckedAndSymlinksFollowed) {
  HostAllowances host = Host();
  host.canonical = [](const std::string& p) { return p == "/data/link" ? "/root" : p; };
  const std::vector<std::string> s =
      RootEquivalentSettings(Def(R"({"nodeProperties":{"nodeRangeProperties":[
          {"targetNodes":"0","container":{"image":"x"}},
          {"targetNodes":"1:","container":{"volumes":[{"name":"l","host":{"sourcePath":"/data/link"}}]}}]}})"),
                             host);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_NE(s[0].find("nodeProperties.nodeRangeProperties[1].container.volumes[0]"),
            std::string::npos);
  EXPECT_NE(s[0].find("(/root)"), std::string::npos) << s[0];
}

TEST(JobPrivilegesTest, OnlyPrincipalsThatMayRunAsRootUseThem) {
  const Json privileged = Def(R"({"containerProperties":{"privileged":true}})");
  User erin;
  erin.name = "erin";
  erin.arn = "arn:aws:iam::123456789012:user/erin";
  erin.unix_users = {"nobody"};
  std::optional<std::string> refused =
      CheckRootEquivalent(erin, "batch:SubmitJob", "arn:jd", privileged, Host());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->rfind("User: arn:aws:iam::123456789012:user/erin is not authorized to "
                           "perform: batch:SubmitJob on resource: arn:jd because the job "
                           "definition sets containerProperties.privileged = true",
                           0),
            0u)
      << *refused;
  EXPECT_NE(refused->find("lote users set-unix-users erin root"), std::string::npos);
  EXPECT_FALSE(CheckRootEquivalent(erin, "batch:SubmitJob", "arn:jd",
                                   Def(R"({"containerProperties":{"image":"x"}})"), Host()));
  for (const char* grant : {"root", "0", "*"}) {
    User root = erin;
    root.unix_users = {"nobody", grant};
    EXPECT_TRUE(MayRunJobsAsRoot(root)) << grant;
    EXPECT_FALSE(CheckRootEquivalent(root, "batch:SubmitJob", "arn:jd", privileged, Host()));
  }
}

}  // namespace
}  // namespace lote::iam
