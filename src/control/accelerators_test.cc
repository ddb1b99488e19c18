#include "control/accelerators.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace lote::control {
namespace {

// A drain and a release build new views: their devices must point into their
// own inventory (a copied view's pointed into the old one's, freed with it).
TEST(HostDevicesTest, ViewsAfterDrainAndReleaseDescribeTheirOwnDevices) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("host_devices_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/inventory";
  {
    std::ofstream out(file);
    out << "gpu /dev/null index=0 uuid=GPU-a name=Fake\n"
        << "gpu /dev/null index=1 uuid=GPU-b name=Fake\n";
  }
  HostDevices devices("host1", file, /*home=*/"");
  ASSERT_TRUE(devices.Load().ok());
  ASSERT_TRUE(devices.Drain(1, "bad", 1).ok());
  for (int round = 0; round < 2; ++round) {
    std::shared_ptr<const HostDevicesView> view = devices.Current();
    ASSERT_EQ(view->devices.size(), 2u);
    EXPECT_EQ(view->devices[0]->index, 0);
    EXPECT_EQ(view->devices[0]->uuid, "GPU-a");
    EXPECT_EQ(view->devices[1]->uuid, "GPU-b");
    EXPECT_EQ(exec::KindName(view->devices[0]->kind), "gpu");
    EXPECT_EQ(view->drained.count(1), round == 0 ? 1u : 0u);
    if (round == 0) {
      ASSERT_TRUE(devices.Release(1).ok());
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lote::control
