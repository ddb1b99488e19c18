#include "engine/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <limits>

#include "common/files.h"
#include "engine/bf16.h"

namespace lote::engine {
namespace {

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

TEST(SafetensorsTest, WritesAndReadsBack) {
  const std::string path = TempPath("a.safetensors");
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::vector<float> b = {0.125f};
  ASSERT_TRUE(WriteSafetensors(path, {{"x.weight", {2, 3}, a.data()}, {"y", {1}, b.data()}},
                               {{"producer", "lote"}})
                  .ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->tensors().size(), 2u);
  EXPECT_EQ((*r)->metadata().at("producer"), "lote");
  const TensorInfo* x = (*r)->Find("x.weight");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x->data) % 4, 0u);
  std::vector<float> got(6);
  ASSERT_TRUE((*r)->ReadFloat("x.weight", got.data(), 6).ok());
  EXPECT_EQ(got, a);
  EXPECT_FALSE((*r)->ReadFloat("x.weight", got.data(), 5).ok());
  EXPECT_TRUE((*r)->ReadFloat("nope", got.data(), 6).IsNotFound());
  std::remove(path.c_str());
}

// A BF16 writer rounds each float to nearest even as it is appended (here in two
// pieces), and the header says BF16 with 2 bytes per element.
TEST(SafetensorsTest, WritesBFloat16RoundedToNearestEven) {
  const std::string path = TempPath("bf.safetensors");
  // 1 + 2^-8 (a tie: down to 1), 1 + 3*2^-8 (a tie: up to 1 + 2^-6), 1 + 2^-8 + 2^-20
  // (above the tie: up), -3.0 (exact), Inf.
  const std::vector<float> x = {1.00390625f, 1.01171875f, 1.0039072f, -3.0f,
                                std::numeric_limits<float>::infinity()};
  auto w = SafetensorsWriter::Create(path, {{"t", {5}}}, {}, DType::kBF16);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Append(x.data(), 2).ok());
  ASSERT_TRUE((*w)->Append(x.data() + 2, 3).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TensorInfo* t = (*r)->Find("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kBF16);
  EXPECT_EQ(t->nbytes, 10);
  std::vector<float> got(5);
  ASSERT_TRUE((*r)->ReadFloat("t", got.data(), 5).ok());
  EXPECT_EQ(got, (std::vector<float>{1.0f, 1.015625f, 1.0078125f, -3.0f, x[4]}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], RoundToBf16(x[i])) << i;
  std::remove(path.c_str());
}

TEST(SafetensorsTest, ConvertsHalfAndBFloat16) {
  // Hand-made file: one BF16 tensor [2] and one F16 tensor [3].
  std::string header =
      R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"h":{"dtype":"F16","shape":[3],"data_offsets":[4,10]}})";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  file += header;
  const uint16_t vals[] = {0x3FC0 /* bf16 1.5 */, 0xC000 /* bf16 -2 */, 0x3C00 /* f16 1 */,
                           0xB800 /* f16 -0.5 */, 0x0001 /* f16 smallest subnormal */};
  file.append(reinterpret_cast<const char*>(vals), sizeof(vals));
  const std::string path = TempPath("h.safetensors");
  ASSERT_TRUE(WriteFileAtomic(path, file).ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  float b[2], h[3];
  ASSERT_TRUE((*r)->ReadFloat("b", b, 2).ok());
  ASSERT_TRUE((*r)->ReadFloat("h", h, 3).ok());
  EXPECT_EQ(b[0], 1.5f);
  EXPECT_EQ(b[1], -2.0f);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -0.5f);
  EXPECT_FLOAT_EQ(h[2], 5.9604645e-08f);
  std::remove(path.c_str());
}

TEST(SafetensorsTest, RejectsCorruptFiles) {
  const std::string path = TempPath("bad.safetensors");
  ASSERT_TRUE(WriteFileAtomic(path, std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10)).ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("header length"), std::string::npos);
  std::string header = R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  ASSERT_TRUE(WriteFileAtomic(path, file + header + "abcd").ok());
  r = SafetensorsReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside the file"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lote::engine
