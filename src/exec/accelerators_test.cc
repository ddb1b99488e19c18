#include "exec/accelerators.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace lote::exec {
namespace {

namespace fs = std::filesystem;

class FakeTree {
 public:
  FakeTree() {
    char tmpl[] = "/tmp/lote-accel-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FakeTree() { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << text;
  }
  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }
  DiscoveryRoots Roots() const {
    return DiscoveryRoots{Path("proc"), Path("sys"), Path("dev"), {Path("cdi")}, /*nvml=*/false};
  }

 private:
  std::string root_;
};

TEST(AcceleratorsTest, ParsesTheInventoryFile) {
  auto inv = ParseInventoryFile(
      "# a test host\n"
      "gpu /dev/nvidia1 index=1 name=NVIDIA_H100 uuid=GPU-b numa=1 links=0 memory_mib=81559\n"
      "gpu /dev/nvidia0 index=0 uuid=GPU-a numa=0 links=1 pci=0000:18:00.0   # first\n"
      "neuron /dev/neuron0 cores=2\n"
      "neuron /dev/neuron1 cores=2 cdi=aws.amazon.com/neuron=1\n",
      "inv.txt");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->source, "file inv.txt");
  ASSERT_EQ(inv->devices.size(), 4u);
  EXPECT_EQ(inv->devices[0].path, "/dev/nvidia0");  // sorted by kind, then index
  EXPECT_EQ(inv->devices[1].name, "NVIDIA H100");
  EXPECT_EQ(inv->devices[1].memory_mib, 81559);
  EXPECT_EQ(inv->devices[1].links, std::vector<int32_t>{0});
  EXPECT_EQ(inv->devices[2].index, 0);  // default index: order among its kind
  EXPECT_EQ(inv->devices[3].index, 1);
  EXPECT_EQ(inv->devices[3].cdi, "aws.amazon.com/neuron=1");
  EXPECT_EQ(inv->ScheduledKind(), AcceleratorKind::kGpu);  // a tie goes to GPUs
  EXPECT_EQ(inv->Of(AcceleratorKind::kNeuron).size(), 2u);
}

TEST(AcceleratorsTest, RefusesABadInventoryLineNamingIt) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"tpu /dev/x\n", "inv:1: unknown kind 'tpu'"}, Case{"gpu\n", "inv:1: no device file"},
        Case{"\ngpu /dev/nvidia0 numa=-1\n", "inv:2: numa must be a whole number"},
        Case{"gpu /dev/a\ngpu /dev/b index=0\n", "a second gpu with index 0"},
        Case{"gpu /dev/a colour=red\n", "unknown key 'colour'"},
        Case{"gpu /dev/a cdi=gpu0\n", "fully qualified CDI name"}}) {
    auto inv = ParseInventoryFile(c.text, "inv");
    ASSERT_FALSE(inv.ok()) << c.text;
    EXPECT_NE(inv.status().message().find(c.says), std::string::npos) << inv.status().message();
  }
  EXPECT_TRUE(ReadInventoryFile("/nonexistent/inv").status().IsInvalidArgument());
}

TEST(AcceleratorsTest, DiscoversNvidiaFromProcAndNeuronFromSysfs) {
  FakeTree t;
  t.Write("proc/driver/nvidia/gpus/0000:18:00.0/information",
          "Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 42\nGPU UUID: \t GPU-1111\n"
          "Bus Location: \t 0000:18:00.0\nDevice Minor: \t 0\n");
  t.Write("proc/driver/nvidia/gpus/0000:3b:00.0/information",
          "Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t GPU-2222\n"
          "Bus Location: \t 0000:3b:00.0\nDevice Minor: \t 1\n");
  t.Write("sys/bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  t.Write("sys/devices/virtual/neuron_device/neuron0/core_count", "2\n");
  t.Write("sys/devices/virtual/neuron_device/neuron0/connected_devices", "1, 3\n");
  t.Write("sys/devices/virtual/neuron_device/neuron0/info/architecture/device_name", "Trainium\n");
  t.Write("cdi/nvidia.yaml",
          "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"1\"\n  containerEdits:\n"
          "    deviceNodes:\n    - path: /dev/nvidia1\n- name: all\n");
  Inventory inv = Discover(t.Roots());
  EXPECT_EQ(inv.source, "proc+sysfs");
  ASSERT_EQ(inv.devices.size(), 3u);
  EXPECT_EQ(inv.devices[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(inv.devices[0].uuid, "GPU-1111");
  EXPECT_EQ(inv.devices[0].path, t.Path("dev") + "/nvidia0");
  EXPECT_EQ(inv.devices[0].numa_node, -1);
  EXPECT_EQ(inv.devices[0].cdi, "");
  EXPECT_EQ(inv.devices[1].numa_node, 1);
  EXPECT_EQ(inv.devices[1].cdi, "nvidia.com/gpu=1");
  EXPECT_EQ(inv.devices[2].kind, AcceleratorKind::kNeuron);
  EXPECT_EQ(inv.devices[2].cores, 2);
  EXPECT_EQ(inv.devices[2].name, "Trainium");
  EXPECT_EQ(inv.devices[2].links, (std::vector<int32_t>{1, 3}));
  EXPECT_FALSE(inv.notes.empty());  // says what /proc cannot give
}

TEST(AcceleratorsTest, DiscoversNothingOnAPlainHostAndSaysSo) {
  FakeTree t;
  t.Write("dev/null", "");
  Inventory inv = Discover(t.Roots());
  EXPECT_EQ(inv.source, "none");
  EXPECT_TRUE(inv.devices.empty());
  EXPECT_FALSE(inv.ScheduledKind().has_value());
}

TEST(AcceleratorsTest, CdiJsonSpecsNameDevicesByIndexOrUuid) {
  FakeTree t;
  t.Write("dev/nvidia0", "");
  t.Write("dev/nvidia1", "");
  t.Write(
      "cdi/test.json",
      R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"0"},{"name":"x"}]})");
  Inventory inv = Discover(t.Roots());
  EXPECT_EQ(inv.source, "dev");
  ASSERT_EQ(inv.devices.size(), 2u);
  EXPECT_EQ(inv.devices[0].cdi, "nvidia.com/gpu=0");
  EXPECT_EQ(inv.devices[1].cdi, "");
}

TEST(AcceleratorsTest, IslandsFollowLinksElseNuma) {
  auto inv = ParseInventoryFile(
      "gpu /d0 links=1\ngpu /d1 links=0\ngpu /d2 links=3\ngpu /d3 links=2\n", "f");
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(Islands(inv->Of(AcceleratorKind::kGpu)), (std::vector<int32_t>{0, 0, 1, 1}));
  auto numa = ParseInventoryFile("gpu /d0 numa=1\ngpu /d1 numa=0\ngpu /d2 numa=1\ngpu /d3\n", "f");
  ASSERT_TRUE(numa.ok());
  EXPECT_EQ(Islands(numa->Of(AcceleratorKind::kGpu)), (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(AcceleratorsTest, EnvironmentNamesExactlyTheDevicesGiven) {
  auto inv = ParseInventoryFile(
      "gpu /dev/nvidia0 uuid=GPU-a\ngpu /dev/nvidia1 uuid=GPU-b\ngpu /dev/nvidia2 uuid=GPU-c\n"
      "neuron /dev/neuron0 cores=2\nneuron /dev/neuron1 cores=2\nneuron /dev/neuron2 cores=2\n",
      "f");
  ASSERT_TRUE(inv.ok());
  auto gpus = inv->Of(AcceleratorKind::kGpu);
  auto given = DevicesForPositions(gpus, {2, 0});
  ASSERT_TRUE(given.ok());
  auto env = AcceleratorEnvironment(*given, gpus, /*renumbered=*/false);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "2,0");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "GPU-c,GPU-a");
  EXPECT_EQ(env["LOTE_ACCELERATORS"], "2,0");
  EXPECT_EQ(AcceleratorEnvironment(*given, gpus, true)["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_FALSE(DevicesForPositions(gpus, {3}).ok());

  auto neurons = inv->Of(AcceleratorKind::kNeuron);
  auto n = DevicesForPositions(neurons, {1, 2});
  ASSERT_TRUE(n.ok());
  auto nenv = AcceleratorEnvironment(*n, neurons, false);
  EXPECT_EQ(nenv["NEURON_RT_VISIBLE_CORES"], "2-5");
  EXPECT_EQ(nenv["AWS_NEURON_VISIBLE_DEVICES"], "1,2");
  EXPECT_EQ(nenv.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_TRUE(AcceleratorEnvironment({}, neurons, false).empty());
}

TEST(AcceleratorsTest, DescribesADeviceOnOneLine) {
  auto inv =
      ParseInventoryFile("gpu /dev/nvidia0 name=H100 memory_mib=80 numa=0 uuid=GPU-a\n", "f");
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(Describe(inv->devices[0]), "gpu 0 /dev/nvidia0 H100 (80 MiB, numa 0, GPU-a)");
}

}  // namespace
}  // namespace lote::exec
