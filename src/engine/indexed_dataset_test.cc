#include "engine/indexed_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "common/files.h"

namespace lote::engine {
namespace {

// Writes a dataset in the documented format: `blocks` blocks of `block` tokens, token
// value = block * 1000 + position (uint16).
std::string MakeDataset(const std::string& name, int64_t blocks, int64_t block, int64_t vocab) {
  const std::string dir = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
  EXPECT_TRUE(MakeDirs(dir).ok());
  std::string bin, idx("MMIDIDX\0\0", 9);
  auto put = [&idx](const void* p, size_t n) { idx.append(static_cast<const char*>(p), n); };
  const uint64_t version = 1, count = static_cast<uint64_t>(blocks), docs = count + 1;
  const uint8_t code = 8;
  put(&version, 8);
  put(&code, 1);
  put(&count, 8);
  put(&docs, 8);
  for (int64_t i = 0; i < blocks; ++i) {
    const int32_t size = static_cast<int32_t>(block);
    put(&size, 4);
  }
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t ptr = i * block * 2;
    put(&ptr, 8);
  }
  for (int64_t i = 0; i <= blocks; ++i) put(&i, 8);
  for (int64_t i = 0; i < blocks; ++i) {
    for (int64_t t = 0; t < block; ++t) {
      const uint16_t v = static_cast<uint16_t>(i * 1000 + t);
      bin.append(reinterpret_cast<const char*>(&v), 2);
    }
  }
  EXPECT_TRUE(WriteFileAtomic(dir + "/data.bin", bin).ok());
  EXPECT_TRUE(WriteFileAtomic(dir + "/data.idx", idx).ok());
  Json m{{"vocab_size", vocab}, {"block_size", block}, {"num_sequences", blocks},
         {"dtype", "uint16"},   {"bos_id", 1},         {"tokenizer_sha256", "x"}};
  EXPECT_TRUE(WriteFileAtomic(dir + "/manifest.json", m.dump()).ok());
  return dir;
}

TEST(IndexedDatasetTest, ReadsBlocks) {
  const std::string dir = MakeDataset("read", 4, 17, 32000);
  auto d = IndexedDataset::Open(dir);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->num_sequences(), 4);
  EXPECT_EQ((*d)->block_size(), 17);
  int32_t buf[3];
  (*d)->Read(2, 5, 3, buf);
  EXPECT_EQ(buf[0], 2005);
  EXPECT_EQ(buf[2], 2007);
  std::filesystem::remove_all(dir);
}

TEST(IndexedDatasetTest, SamplesShiftLabelsAndHoldOutValidation) {
  const std::string dir = MakeDataset("sample", 10, 17, 32000);
  auto d = IndexedDataset::Open(dir);
  ASSERT_TRUE(d.ok());
  // seq_len 8: (17-1)/8 = 2 windows per block; 1 of 10 blocks held out.
  auto s = BatchSampler::Create(d->get(), 8, 0.1, 7);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->num_train_samples(), 18);
  EXPECT_EQ((*s)->num_val_samples(), 2);
  std::vector<int32_t> in(8 * 18), tg(8 * 18);
  (*s)->NextTrainBatch(18, in.data(), tg.data());
  std::set<int32_t> firsts;
  for (int64_t b = 0; b < 18; ++b) {
    firsts.insert(in[b * 8]);
    for (int t = 0; t < 8; ++t) EXPECT_EQ(tg[b * 8 + t], in[b * 8 + t] + 1);
    EXPECT_LT(in[b * 8] / 1000, 9) << "training sample from the validation block";
  }
  EXPECT_EQ(firsts.size(), 18u);  // one epoch visits every sample once
  int32_t vin[8], vtg[8];
  (*s)->ValSample(1, vin, vtg);
  EXPECT_EQ(vin[0], 9008);
  EXPECT_EQ(vtg[7], 9016);
  std::filesystem::remove_all(dir);
}

TEST(IndexedDatasetTest, OrderIsDeterministicAndRestorable) {
  const std::string dir = MakeDataset("order", 6, 9, 32000);
  auto d = IndexedDataset::Open(dir);
  ASSERT_TRUE(d.ok());
  auto a = BatchSampler::Create(d->get(), 4, 0.0, 42).value();
  auto b = BatchSampler::Create(d->get(), 4, 0.0, 42).value();
  std::vector<int32_t> x(4 * 5), y(4 * 5), x2(4 * 5), y2(4 * 5);
  a->NextTrainBatch(5, x.data(), y.data());
  b->NextTrainBatch(5, x2.data(), y2.data());
  EXPECT_EQ(x, x2);
  const SamplerState saved = a->state();
  a->NextTrainBatch(5, x.data(), y.data());  // crosses into epoch 1
  auto c = BatchSampler::Create(d->get(), 4, 0.0, 42).value();
  ASSERT_TRUE(c->Restore(SamplerState::FromJson(saved.ToJson()).value()).ok());
  c->NextTrainBatch(5, x2.data(), y2.data());
  EXPECT_EQ(x, x2);
  auto other = BatchSampler::Create(d->get(), 4, 0.0, 43).value();
  other->NextTrainBatch(5, x2.data(), y2.data());
  std::vector<int32_t> first(4 * 5), ft(4 * 5);
  b = BatchSampler::Create(d->get(), 4, 0.0, 42).value();
  b->NextTrainBatch(5, first.data(), ft.data());
  EXPECT_NE(first, x2) << "a different seed should give a different order";
  std::filesystem::remove_all(dir);
}

TEST(IndexedDatasetTest, SeqLenEqualToBlockShiftsInside) {
  const std::string dir = MakeDataset("inside", 3, 8, 32000);
  auto d = IndexedDataset::Open(dir);
  ASSERT_TRUE(d.ok());
  auto s = BatchSampler::Create(d->get(), 8, 0.0, 1).value();
  int32_t in[8], tg[8];
  s->NextTrainBatch(1, in, tg);
  EXPECT_EQ(tg[6], in[7]);
  EXPECT_EQ(tg[7], -1);
  EXPECT_FALSE(BatchSampler::Create(d->get(), 9, 0.0, 1).ok());
  std::filesystem::remove_all(dir);
}

TEST(IndexedDatasetTest, RejectsCorruptIndex) {
  const std::string dir = MakeDataset("corrupt", 3, 8, 32000);
  ASSERT_TRUE(WriteFileAtomic(dir + "/data.idx", "NOTANIDX0000000000000000000000000000").ok());
  auto d = IndexedDataset::Open(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("MMIDIDX"), std::string::npos);
  auto missing = IndexedDataset::Open(dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("lote data prepare"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lote::engine
