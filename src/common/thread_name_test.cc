#include "common/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "common/files.h"

namespace lote {
namespace {

std::string CommOfThisThread() {
  const long tid = ::syscall(SYS_gettid);
  Result<std::string> comm = ReadFile("/proc/self/task/" + std::to_string(tid) + "/comm");
  return comm.ok() ? *comm : "(unreadable: " + comm.status().ToString() + ")";
}

TEST(ThreadNameTest, TheThreadShowsItsNameCutTo15Characters) {
  std::string short_name, long_name;
  NamedThread("lote-store", [&] {
    short_name = CommOfThisThread();
    NameThisThread("lote-a-name-longer-than-fifteen");
    long_name = CommOfThisThread();
  }).join();
  EXPECT_EQ(short_name, "lote-store\n");
  EXPECT_EQ(long_name, "lote-a-name-lon\n");
}

}  // namespace
}  // namespace lote
