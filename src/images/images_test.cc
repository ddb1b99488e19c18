#include <arpa/inet.h>
#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "common/files.h"
#include "exec/container.h"
#include "images/ecr_host.h"
#include "images/ecr_service.h"
#include "images/registry_process.h"

namespace lote::images {
namespace {

TEST(HtpasswdLine, IsABcryptHashTheSamePasswordChecksAgainst) {
  Result<std::string> line = HtpasswdLine("AWS", "s3cret");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  ASSERT_EQ(line->rfind("AWS:$2b$06$", 0), 0u) << *line;
  const std::string hash = line->substr(4);
  crypt_data data{};
  EXPECT_EQ(std::string(crypt_r("s3cret", hash.c_str(), &data)), hash);
  crypt_data other{};
  EXPECT_NE(std::string(crypt_r("wrong", hash.c_str(), &other)), hash);
}

TEST(RegistryAddress, IsKeptAndMovesWhenItsPortIsTaken) {
  char tmpl[] = "/tmp/lote_registry_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  Result<std::string> first = RegistryAddress(dir);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->rfind("127.0.0.1:", 0), 0u) << *first;
  EXPECT_EQ(*RegistryAddress(dir), *first);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(first->substr(first->rfind(':') + 1))));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  Result<std::string> moved = RegistryAddress(dir);
  ::close(fd);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_NE(*moved, *first);
  EXPECT_EQ(*RegistryAddress(dir), *moved);
  std::filesystem::remove_all(dir);
}

TEST(EcrErrorFromStatus, NamesEcrCodes) {
  EXPECT_EQ(EcrErrorFromStatus(Status::NotFound("The repository with name 'x' ...")).code,
            "RepositoryNotFoundException");
  EXPECT_EQ(EcrErrorFromStatus(Status::NotFound("The image with imageId {...}")).code,
            "ImageNotFoundException");
  EXPECT_EQ(EcrErrorFromStatus(Status::AlreadyExists("x")).code,
            "RepositoryAlreadyExistsException");
  EXPECT_EQ(EcrErrorFromStatus(Status::FailedPrecondition("x")).code,
            "RepositoryNotEmptyException");
  EXPECT_EQ(EcrErrorFromStatus(Status::InvalidArgument("x")).code, "InvalidParameterException");
  api::ApiError e = EcrErrorFromStatus(Status::Unavailable("down"));
  EXPECT_EQ(e.code, "ServerException");
  EXPECT_EQ(e.http_status, 500);
}

TEST(ResolveEcrImage, EcrHostsBecomeTheLocalRegistry) {
  exec::LocalRegistry r{"127.0.0.1:5000", "/h/registry/auth.json", ""};
  EXPECT_EQ(exec::ResolveEcrImage("123456789012.dkr.ecr.us-west-2.amazonaws.com/llama/train:v1", r),
            "127.0.0.1:5000/llama/train:v1");
  EXPECT_EQ(exec::ResolveEcrImage("docker.io/library/busybox:1", r), "docker.io/library/busybox:1");
  EXPECT_EQ(exec::ResolveEcrImage("12345.dkr.ecr.us-west-2.amazonaws.com/x:1", r),
            "12345.dkr.ecr.us-west-2.amazonaws.com/x:1");  // not an account id
  EXPECT_EQ(exec::ResolveEcrImage("123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1", {}),
            "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1");  // no registry
}

TEST(EcrHostName, IsEcrsRegistryHost) {
  EXPECT_EQ(EcrHostName("000000000000", "us-east-1"),
            "000000000000.dkr.ecr.us-east-1.amazonaws.com");
}

TEST(EditHostsText, AddsOneMarkedLineAndKeepsEveryOtherLine) {
  const std::string host = "000000000000.dkr.ecr.us-east-1.amazonaws.com";
  const std::string line = "127.0.0.1 " + host + "  # lote ecr-host-names /tmp/h\n";
  const std::string hosts = "127.0.0.1 localhost\n# a comment\n::1\tip6-localhost\n";
  const std::string added = EditHostsText(hosts, "/tmp/h", host);
  EXPECT_EQ(added, hosts + line);
  EXPECT_EQ(EditHostsText(added, "/tmp/h", host), added);  // never twice
  EXPECT_EQ(EditHostsText(added, "/tmp/h", ""), hosts);    // removed exactly
  EXPECT_EQ(EditHostsText("", "/tmp/h", host), line);
  // A last line without a newline keeps its text.
  EXPECT_EQ(EditHostsText("127.0.0.1 localhost", "/tmp/h", host), "127.0.0.1 localhost\n" + line);
}

TEST(EditHostsText, RemovesOnlyTheHomesLinesWhereverTheyAre) {
  const std::string mine = "127.0.0.1 1.dkr.ecr.r.amazonaws.com  # lote ecr-host-names /tmp/h\n";
  const std::string other = "127.0.0.1 1.dkr.ecr.r.amazonaws.com  # lote ecr-host-names /tmp/hh\n";
  const std::string hosts = "a\n" + mine + "b\n" + other + mine;
  EXPECT_EQ(EditHostsText(hosts, "/tmp/h", ""), "a\nb\n" + other);
  // A line left with CRLF or trailing blanks is still the home's.
  EXPECT_EQ(EditHostsText("a\n127.0.0.1 x  # lote ecr-host-names /tmp/h \r\n", "/tmp/h", ""),
            "a\n");
  EXPECT_EQ(EditHostsText("a\n", "/tmp/h", ""), "a\n");
}

TEST(EditHostsFile, ReplacesTheFileKeepingItsModeAndWritesNothingWhenUnchanged) {
  char tmpl[] = "/tmp/lote_hosts_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/hosts";
  ASSERT_TRUE(WriteFileAtomic(path, "127.0.0.1 localhost\n", 0640).ok());
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  // Nothing to remove: the file is not rewritten.
  ASSERT_TRUE(EditHostsFile(path, "/tmp/h", "").ok());
  struct stat same {};
  ASSERT_EQ(::stat(path.c_str(), &same), 0);
  EXPECT_EQ(same.st_ino, before.st_ino);
  Status added = EditHostsFile(path, "/tmp/h", "1.dkr.ecr.r.amazonaws.com");
  ASSERT_TRUE(added.ok()) << added.ToString();
  EXPECT_EQ(*ReadFile(path),
            "127.0.0.1 localhost\n127.0.0.1 1.dkr.ecr.r.amazonaws.com  # lote ecr-host-names "
            "/tmp/h\n");
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);  // renamed over it
  EXPECT_EQ(after.st_mode & 07777, 0640u);
  ASSERT_TRUE(EditHostsFile(path, "/tmp/h", "").ok());
  EXPECT_EQ(*ReadFile(path), "127.0.0.1 localhost\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temp file left
  // A missing file reads as empty.
  ASSERT_TRUE(EditHostsFile(dir + "/new", "/tmp/h", "x").ok());
  EXPECT_EQ(*ReadFile(dir + "/new"), "127.0.0.1 x  # lote ecr-host-names /tmp/h\n");
  std::filesystem::remove_all(dir);
}

int ListenOnLoopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 4) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectToLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string ReadToEnd(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(TcpForwarder, CopiesBothWaysAndPassesHalfCloses) {
  int target_port = 0;
  const int target = ListenOnLoopback(&target_port);
  ASSERT_GE(target, 0);
  // The target reads its request to the end (the client's half-close), then
  // answers with it reversed, larger than one forwarded chunk.
  std::thread server([target] {
    int c = ::accept(target, nullptr, nullptr);
    std::string got = ReadToEnd(c);
    std::string answer(200'000, 'x');
    answer += std::string(got.rbegin(), got.rend());
    for (size_t off = 0; off < answer.size();) {
      ssize_t n = ::write(c, answer.data() + off, answer.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(c);
  });
  Result<std::unique_ptr<TcpForwarder>> fwd =
      TcpForwarder::Start("127.0.0.1", 0, "127.0.0.1:" + std::to_string(target_port));
  ASSERT_TRUE(fwd.ok()) << fwd.status().ToString();
  ASSERT_GT((*fwd)->port(), 0);
  const int client = ConnectToLoopback((*fwd)->port());
  ASSERT_GE(client, 0);
  ASSERT_EQ(::write(client, "ping", 4), 4);
  ::shutdown(client, SHUT_WR);
  const std::string got = ReadToEnd(client);
  ::close(client);
  server.join();
  ::close(target);
  ASSERT_EQ(got.size(), 200'004u);
  EXPECT_EQ(got.substr(200'000), "gnip");
}

TEST(TcpForwarder, APortInUseIsAnErrorNamingIt) {
  int port = 0;
  const int taken = ListenOnLoopback(&port);
  ASSERT_GE(taken, 0);
  Result<std::unique_ptr<TcpForwarder>> fwd = TcpForwarder::Start("127.0.0.1", port, "127.0.0.1:1");
  ASSERT_FALSE(fwd.ok());
  EXPECT_NE(fwd.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << fwd.status().ToString();
  ::close(taken);
}

TEST(WritePodmanConfig, MarksTheRegistryAndTheEcrHostInsecure) {
  char tmpl[] = "/tmp/lote_podman_conf_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto plain = exec::WritePodmanConfig(dir, {"127.0.0.1:5000", "", ""});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  std::string regs = *ReadFile(plain->second);
  EXPECT_NE(regs.find("location = \"127.0.0.1:5000\"\ninsecure = true\n"), std::string::npos);
  EXPECT_EQ(regs.find("amazonaws.com"), std::string::npos) << regs;
  auto both = exec::WritePodmanConfig(
      dir, {"127.0.0.1:5000", "", "000000000000.dkr.ecr.us-east-1.amazonaws.com"});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  regs = *ReadFile(both->second);
  EXPECT_NE(regs.find("location = \"127.0.0.1:5000\"\ninsecure = true\n"), std::string::npos);
  EXPECT_NE(regs.find("[[registry]]\nlocation = \"000000000000.dkr.ecr.us-east-1.amazonaws.com\"\n"
                      "insecure = true\n"),
            std::string::npos)
      << regs;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lote::images
