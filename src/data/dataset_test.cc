// PrepareDataset end to end on local files: packing equals libsentencepiece's
// ids with BOS per document cut into blocks, determinism across thread counts,
// input formats, and clean failures that leave nothing behind.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

#include "common/files.h"
#include "data/corpus.h"
#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "data/reference_tokenizer.h"
#include "data/test_util.h"

namespace lote::data {
namespace {

namespace fs = std::filesystem;
using testing::LlamaModel;
using testing::TempDir;
using testing::TestDataDir;

PrepareOptions Options(std::vector<std::string> inputs, const std::string& out, int64_t block,
                       int threads) {
  PrepareOptions o;
  o.inputs = std::move(inputs);
  o.tokenizer_path = LlamaModel();
  o.block_size = block;
  o.output_uri = out;
  o.threads = threads;
  o.batch_bytes = 8 << 10;  // many small work items: exercises ordering
  return o;
}

// What the dataset must hold: BOS + ids per document, concatenated, cut.
std::vector<int32_t> ExpectedStream(const std::vector<std::string>& docs) {
  auto ref = ReferenceTokenizer::Load(LlamaModel());
  EXPECT_TRUE(ref.ok());
  std::vector<int32_t> all;
  for (const auto& d : docs) {
    all.push_back(1);
    EXPECT_TRUE((*ref)->Encode(d, &all).ok());
  }
  return all;
}

void WriteGzip(const std::string& path, const std::string& data) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, data.data(), static_cast<unsigned>(data.size())),
            static_cast<int>(data.size()));
  gzclose(gz);
}

TEST(PrepareTest, PacksLikeGroupTextsAndIsDeterministic) {
  TempDir dir;
  auto lines = testing::ReadLines(TestDataDir() + "/moby-dick.txt");
  lines.resize(600);
  std::string text;
  std::vector<std::string> docs;
  for (const auto& l : lines) {
    text += l + "\n";
    if (!l.empty()) docs.push_back(l);
  }
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/in.txt", text).ok());

  auto m1 = PrepareDataset(Options({dir.path() + "/in.txt"}, dir.path() + "/one", 128, 1));
  ASSERT_TRUE(m1.ok()) << m1.status().ToString();
  auto m3 =
      PrepareDataset(Options({dir.path() + "/in.txt"}, "file://" + dir.path() + "/three", 128, 3));
  ASSERT_TRUE(m3.ok()) << m3.status().ToString();
  for (const char* f : {"data.bin", "data.idx", "manifest.json"}) {
    EXPECT_TRUE(*ReadFile(dir.path() + "/one/" + f) == *ReadFile(dir.path() + "/three/" + f)) << f;
  }

  std::vector<int32_t> stream = ExpectedStream(docs);
  EXPECT_EQ(m1->num_documents, static_cast<int64_t>(docs.size()));
  EXPECT_EQ(m1->num_source_tokens, static_cast<int64_t>(stream.size()));
  EXPECT_EQ(m1->num_sequences, static_cast<int64_t>(stream.size() / 128));
  EXPECT_EQ(m1->num_tokens, m1->num_sequences * 128);
  EXPECT_EQ(m1->dtype, "uint16");
  EXPECT_EQ(m1->tokenizer_sha256,
            "9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347");
  ASSERT_EQ(m1->sources.size(), 1u);
  EXPECT_EQ(m1->sources[0].bytes, text.size());
  // The manifest records size and sha256 of both data files, as written.
  ASSERT_EQ(m1->files.size(), 2u);
  for (const char* f : {"data.bin", "data.idx"}) {
    auto hash = HashFile(dir.path() + "/one/" + f);
    ASSERT_TRUE(hash.ok());
    const FileDigest* d = m1->file(f);
    ASSERT_NE(d, nullptr) << f;
    EXPECT_EQ(d->sha256, hash->first) << f;
    EXPECT_EQ(d->bytes, hash->second) << f;
  }
  auto on_disk = ReadJsonFile(dir.path() + "/one/manifest.json");
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ((*on_disk)["files"]["data.bin"]["sha256"], m1->file("data.bin")->sha256);

  auto ds = IndexedDataset::Open(dir.path() + "/one");
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ((*ds)->num_sequences(), m1->num_sequences);
  EXPECT_EQ((*ds)->num_documents(), m1->num_sequences + 1);
  ASSERT_TRUE((*ds)->manifest().has_value());
  EXPECT_EQ((*ds)->manifest()->num_sequences, m1->num_sequences);
  for (int64_t i = 0; i < (*ds)->num_sequences(); ++i) {
    EXPECT_EQ((*ds)->size(i), 128);
    EXPECT_EQ((*ds)->pointer(i), i * 128 * 2);
    EXPECT_EQ((*ds)->doc_idx()[i], i);
    std::vector<int32_t> want(stream.begin() + i * 128, stream.begin() + (i + 1) * 128);
    ASSERT_EQ((*ds)->Sequence(i), want) << "sequence " << i;
  }
  // No staging folders remain beside the outputs.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".lote-tmp-"), std::string::npos) << e.path();
  }
}

TEST(PrepareTest, ReadsJsonlGzipDirectoriesAndWholeFiles) {
  TempDir dir;
  fs::create_directories(dir.path() + "/in/sub");
  ASSERT_TRUE(
      WriteFileAtomic(
          dir.path() + "/in/a.jsonl",
          "{\"content\": \"First document.\", \"id\": 1}\n\n{\"content\": \"Second one\"}\n")
          .ok());
  WriteGzip(dir.path() + "/in/sub/b.txt.gz", "Third doc\r\nFourth doc\n");
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/in/.hidden", "ignored\n").ok());
  auto o = Options({dir.path() + "/in"}, dir.path() + "/out", 4, 2);
  o.corpus.text_key = "content";
  auto m = PrepareDataset(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_documents, 4);
  ASSERT_EQ(m->sources.size(), 2u);
  EXPECT_NE(m->sources[0].path.find("a.jsonl"), std::string::npos);
  EXPECT_NE(m->sources[1].path.find("b.txt.gz"), std::string::npos);
  std::vector<int32_t> stream =
      ExpectedStream({"First document.", "Second one", "Third doc", "Fourth doc"});
  EXPECT_EQ(m->num_source_tokens, static_cast<int64_t>(stream.size()));
  auto ds = IndexedDataset::Open(dir.path() + "/out");
  ASSERT_TRUE(ds.ok());
  std::vector<int32_t> got;
  for (int64_t i = 0; i < (*ds)->num_sequences(); ++i) {
    auto s = (*ds)->Sequence(i);
    got.insert(got.end(), s.begin(), s.end());
  }
  stream.resize(stream.size() / 4 * 4);
  EXPECT_EQ(got, stream);

  // One document per file.
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/whole.txt", "Line one\nLine two\n").ok());
  auto w = Options({dir.path() + "/whole.txt"}, dir.path() + "/whole", 2, 1);
  w.corpus.doc_per_file = true;
  auto mw = PrepareDataset(w);
  ASSERT_TRUE(mw.ok()) << mw.status().ToString();
  EXPECT_EQ(mw->num_documents, 1);
  EXPECT_EQ(mw->num_source_tokens,
            static_cast<int64_t>(ExpectedStream({"Line one\nLine two\n"}).size()));
}

void ExpectFailsCleanly(const PrepareOptions& o, StatusCode code, const std::string& needle) {
  auto m = PrepareDataset(o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), code) << m.status().ToString();
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
  EXPECT_FALSE(fs::exists(o.output_uri)) << "output left behind: " << o.output_uri;
  for (const auto& e : fs::directory_iterator(fs::path(o.output_uri).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find(".lote-tmp-"), std::string::npos) << e.path();
  }
}

TEST(PrepareTest, BadInputFailsWithFileAndLineAndLeavesNothing) {
  TempDir dir;
  const std::string out = dir.path() + "/out/ds";
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/good.txt", std::string(5000, 'x') + "\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/bad.txt", "fine line\nsecond \xff\xfe line\n").ok());
  ASSERT_TRUE(
      WriteFileAtomic(dir.path() + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": oops}\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/nokey.jsonl", "{\"body\": \"x\"}\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/fake.model", "not a model at all").ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/bad.txt.gz", "this is not gzip data").ok());

  ExpectFailsCleanly(Options({dir.path() + "/missing.txt"}, out, 16, 2), StatusCode::kNotFound,
                     "missing.txt");
  ExpectFailsCleanly(Options({dir.path() + "/good.txt", dir.path() + "/bad.txt"}, out, 16, 2),
                     StatusCode::kInvalidArgument, "bad.txt:2: not valid UTF-8");
  ExpectFailsCleanly(Options({dir.path() + "/bad.jsonl"}, out, 1, 2), StatusCode::kInvalidArgument,
                     "bad.jsonl:2: invalid JSON");
  ExpectFailsCleanly(Options({dir.path() + "/nokey.jsonl"}, out, 1, 2),
                     StatusCode::kInvalidArgument, "nokey.jsonl:1: no string field 'text'");
  ExpectFailsCleanly(Options({dir.path() + "/bad.txt.gz"}, out, 1, 2), StatusCode::kInvalidArgument,
                     "bad.txt.gz:1: not gzip data");
  WriteGzip(dir.path() + "/trunc.txt.gz", std::string(200000, 'y'));
  auto gz = ReadFile(dir.path() + "/trunc.txt.gz");
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/trunc.txt.gz", gz->substr(0, gz->size() / 2)).ok());
  ExpectFailsCleanly(Options({dir.path() + "/trunc.txt.gz"}, out, 1, 2), StatusCode::kDataLoss,
                     "trunc.txt.gz");
  auto fake = Options({dir.path() + "/good.txt"}, out, 16, 2);
  fake.tokenizer_path = dir.path() + "/fake.model";
  ExpectFailsCleanly(fake, StatusCode::kInvalidArgument, "not a SentencePiece model");
  ExpectFailsCleanly(Options({dir.path() + "/good.txt"}, out, 1 << 20, 2),
                     StatusCode::kInvalidArgument, "fewer than one block");

  // An output that already holds something is refused and left as it was.
  fs::create_directories(dir.path() + "/full");
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/full/keep.txt", "mine").ok());
  auto m = PrepareDataset(Options({dir.path() + "/good.txt"}, dir.path() + "/full", 16, 1));
  EXPECT_TRUE(m.status().IsAlreadyExists()) << m.status().ToString();
  EXPECT_EQ(*ReadFile(dir.path() + "/full/keep.txt"), "mine");
}

TEST(IndexedDatasetTest, WriterReaderRoundTripAndCorruption) {
  TempDir dir;
  for (int64_t vocab : {32000, 100000}) {
    const std::string d = dir.path() + "/v" + std::to_string(vocab);
    fs::create_directories(d);
    auto w = IndexedDatasetWriter::Create(d, vocab, 3);
    ASSERT_TRUE(w.ok());
    const int32_t a[3] = {1, 65535 < vocab ? 70000 : 5, 7};
    const int32_t b[3] = {1, 2, 3};
    ASSERT_TRUE((*w)->AddSequence(a).ok());
    ASSERT_TRUE((*w)->AddSequence(b).ok());
    ASSERT_TRUE((*w)->Finish().ok());
    auto ds = IndexedDataset::Open(d);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    EXPECT_EQ((*ds)->dtype(), vocab <= 65536 ? kDtypeUint16 : kDtypeInt32);
    EXPECT_EQ((*ds)->Sequence(0), std::vector<int32_t>(a, a + 3));
    EXPECT_EQ((*ds)->Sequence(1), std::vector<int32_t>(b, b + 3));
    EXPECT_EQ((*ds)->pointer(1), vocab <= 65536 ? 6 : 12);
    EXPECT_FALSE((*ds)->manifest().has_value());
  }
  // A .bin shorter than the index says is caught; so is a bad magic.
  const std::string d = dir.path() + "/v32000";
  ASSERT_TRUE(WriteFileAtomic(d + "/data.bin", "xx").ok());
  EXPECT_EQ(IndexedDataset::Open(d).status().code(), StatusCode::kDataLoss);
  auto idx = ReadFile(d + "/data.idx");
  ASSERT_TRUE(WriteFileAtomic(d + "/data.idx", "NOTMMIDX" + idx->substr(8)).ok());
  auto bad = IndexedDataset::Open(d);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("bad magic"), std::string::npos);
}

// Records what is read through a real store, to check that inspecting a
// dataset reads only small ranges.
class RecordingStore final : public objstore::ObjectStore {
 public:
  explicit RecordingStore(std::unique_ptr<objstore::ObjectStore> inner)
      : inner_(std::move(inner)) {}
  std::string RootUri() const override { return inner_->RootUri(); }
  Status PutBytes(const std::string& k, std::string_view d) override {
    return inner_->PutBytes(k, d);
  }
  Status PutFile(const std::string& k, const std::string& p,
                 const objstore::ProgressFn& f) override {
    return inner_->PutFile(k, p, f);
  }
  Result<std::string> GetBytes(const std::string& k) override {
    whole_reads.push_back(k);
    return inner_->GetBytes(k);
  }
  Status GetFile(const std::string& k, const std::string& p,
                 const objstore::ProgressFn& f) override {
    whole_reads.push_back(k);
    return inner_->GetFile(k, p, f);
  }
  Result<std::string> GetRange(const std::string& k, uint64_t off, uint64_t len) override {
    auto r = inner_->GetRange(k, off, len);
    if (r.ok()) range_bytes += r->size();
    return r;
  }
  Result<objstore::ObjectInfo> Head(const std::string& k) override { return inner_->Head(k); }
  Result<std::vector<objstore::ObjectInfo>> List(const std::string& p) override {
    return inner_->List(p);
  }
  Status Delete(const std::string& k) override { return inner_->Delete(k); }

  std::vector<std::string> whole_reads;
  uint64_t range_bytes = 0;

 private:
  std::unique_ptr<objstore::ObjectStore> inner_;
};

TEST(IndexedDatasetTest, PeekReadsOnlySmallRanges) {
  TempDir dir;
  const std::string d = dir.path() + "/ds";
  fs::create_directories(d);
  auto w = IndexedDatasetWriter::Create(d, 32000, 1000);
  ASSERT_TRUE(w.ok());
  std::vector<int32_t> block(1000);
  for (int s = 0; s < 50; ++s) {
    for (int i = 0; i < 1000; ++i) block[static_cast<size_t>(i)] = (s * 7 + i) % 32000;
    ASSERT_TRUE((*w)->AddSequence(block.data()).ok());
  }
  ASSERT_TRUE((*w)->Finish().ok());
  DatasetManifest m;
  m.dtype = "uint16";
  m.block_size = 1000;
  m.num_sequences = 50;
  ASSERT_TRUE(WriteFileAtomic(d + "/manifest.json", m.ToJson().dump(2)).ok());

  auto inner = objstore::OpenObjectStore("file://" + d);
  ASSERT_TRUE(inner.ok());
  RecordingStore store(std::move(*inner));
  auto peek = PeekDataset(store, 5);
  ASSERT_TRUE(peek.ok()) << peek.status().ToString();
  ASSERT_TRUE(peek->manifest.has_value());
  EXPECT_EQ(peek->manifest->num_sequences, 50);
  EXPECT_EQ(peek->header.dtype, kDtypeUint16);
  EXPECT_EQ(peek->header.num_sequences, 50u);
  EXPECT_EQ(peek->header.num_documents, 51u);
  EXPECT_EQ(peek->first_tokens, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(store.whole_reads, std::vector<std::string>{"manifest.json"});
  EXPECT_EQ(store.range_bytes, IndexHeader::kBytes + 4 + 8 + 5 * 2);  // not the 100 KB .bin

  // A truncated data.bin is caught from the sizes alone.
  ASSERT_TRUE(WriteFileAtomic(d + "/data.bin", "xx").ok());
  EXPECT_EQ(PeekDataset(store, 5).status().code(), StatusCode::kDataLoss);
}

TEST(IndexedDatasetTest, ManifestRoundTrip) {
  DatasetManifest m;
  m.dtype = "uint16";
  m.tokenizer_sha256 = "ab";
  m.vocab_size = 32000;
  m.block_size = 4096;
  m.num_sequences = 2;
  m.num_tokens = 8192;
  m.num_documents = 5;
  m.num_source_tokens = 9000;
  m.sources = {{"s3://b/x.txt", 10, "cd"}};
  // A manifest from before "files" existed still reads, with no digests.
  auto old = DatasetManifest::FromJson(Json::parse(m.ToJson().dump()));
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->files.empty());
  EXPECT_FALSE(m.ToJson().contains("files"));
  EXPECT_EQ(old->file("data.bin"), nullptr);

  m.files = {{"data.bin", 16384, std::string(64, 'a')}, {"data.idx", 90, std::string(64, 'b')}};
  auto back = DatasetManifest::FromJson(Json::parse(m.ToJson().dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), m.ToJson());
  EXPECT_EQ(back->files, m.files);
  EXPECT_TRUE(m.ToJson()["eos_id"].is_null());
  Json bad = Json::parse(m.ToJson().dump());
  bad["files"]["data.bin"]["sha256"] = "XYZ";
  EXPECT_EQ(DatasetManifest::FromJson(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(DatasetManifest::FromJson(Json::parse(R"({"format":"other"})")).ok());
}

TEST(CorpusTest, FindsInvalidUtf8) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii text that is long enough"), -1);
  EXPECT_EQ(FindInvalidUtf8("ñé日本🙂"), -1);
  EXPECT_EQ(FindInvalidUtf8("abc\xff"), 3);
  EXPECT_EQ(FindInvalidUtf8("\xC0\xAF"), 0);          // overlong
  EXPECT_EQ(FindInvalidUtf8("x\xED\xA0\x80"), 1);     // surrogate
  EXPECT_EQ(FindInvalidUtf8("ok \xE2\x96"), 3);       // truncated
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0);  // > U+10FFFF
}

}  // namespace
}  // namespace lote::data
