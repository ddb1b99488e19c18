#include <arpa/inet.h>
#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "exec/container.h"
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
  exec::LocalRegistry r{"127.0.0.1:5000", "/h/registry/auth.json"};
  EXPECT_EQ(exec::ResolveEcrImage("123456789012.dkr.ecr.us-west-2.amazonaws.com/llama/train:v1", r),
            "127.0.0.1:5000/llama/train:v1");
  EXPECT_EQ(exec::ResolveEcrImage("docker.io/library/busybox:1", r), "docker.io/library/busybox:1");
  EXPECT_EQ(exec::ResolveEcrImage("12345.dkr.ecr.us-west-2.amazonaws.com/x:1", r),
            "12345.dkr.ecr.us-west-2.amazonaws.com/x:1");  // not an account id
  EXPECT_EQ(exec::ResolveEcrImage("123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1", {}),
            "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1");  // no registry
}

}  // namespace
}  // namespace lote::images
