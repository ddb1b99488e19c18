// lote's BPE encoder against libsentencepiece: the same ids for every document
// of the test corpora with the real Llama 2 model, for edge cases, and for tiny
// models trained here with spm_train.
#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "data/bpe_tokenizer.h"
#include "data/reference_tokenizer.h"
#include "data/sentencepiece_model.h"
#include "data/test_util.h"

namespace lote::data {
namespace {

using testing::LlamaModel;
using testing::TempDir;
using testing::TestDataDir;

std::vector<int32_t> Ids(const Tokenizer& t, std::string_view text) {
  std::vector<int32_t> ids;
  EXPECT_TRUE(t.Encode(text, &ids).ok());
  return ids;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

const std::vector<std::string>& EdgeCases() {
  static const std::vector<std::string> cases = {
      "",
      " ",
      "  ",
      "a",
      " a",
      "a ",
      "  leading",
      "trailing  ",
      "a  b   c",
      "tabs\tand\r\nnewline\n",
      "\xE2\x96\x81literal\xE2\x96\x81 \xE2\x96\x81\xE2\x96\x81x",
      "日本語のテキストです。",
      "emoji 🙂🙃 and ñ é ü",
      "bad \xff\xfe bytes",
      "\xEF\xBF\xBD replacement",
      "cut \xE2\x96",
      "\xE2\x96",
      "overlong \xC0\xAF",
      "surrogate \xED\xA0\x80",
      "nul \0 byte",
      std::string(700, 'a'),
      std::string(300, ' ') + "x",
      "x" + std::string(300, ' '),
      "Hello world, this is a test.",
      "1234567890 3.14159 -42",
      "<s> </s> <unk> <0x41>",
      "Ꙭ ᚠᛇᚻ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
      std::string("a\xE2\x96\x81\xE2\x96\x81 b"),
      std::string(500, 'x') + " " + std::string(300, 'y'),
      "你好世界你好世界你好世界你好世界你好世界你好世界你好世界你好世界"};
  return cases;
}

TEST(SentencePieceModelTest, ParsesLlama) {
  auto m = SentencePieceModel::Load(LlamaModel());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->vocab_size(), 32000);
  EXPECT_EQ(m->model_type, ModelType::kBpe);
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->normalizer_name, "identity");
  EXPECT_TRUE(m->add_dummy_prefix);
  EXPECT_FALSE(m->remove_extra_whitespaces);
  EXPECT_EQ(m->unk_id, 0);
  EXPECT_EQ(m->bos_id, 1);
  EXPECT_EQ(m->eos_id, 2);
  EXPECT_EQ(m->pieces[1].piece, "<s>");
  EXPECT_EQ(m->pieces[1].type, PieceType::kControl);
  EXPECT_EQ(m->pieces[3].piece, "<0x00>");
  EXPECT_EQ(m->pieces[3].type, PieceType::kByte);
}

TEST(SentencePieceModelTest, RejectsOtherFiles) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/x.model", "this is plain text, not a model\n").ok());
  auto m = SentencePieceModel::Load(dir.path() + "/x.model");
  EXPECT_TRUE(m.status().IsInvalidArgument());
  EXPECT_NE(m.status().message().find("not a SentencePiece model"), std::string::npos)
      << m.status().ToString();
  EXPECT_NE(m.status().message().find("x.model"), std::string::npos);
  EXPECT_TRUE(OpenTokenizer(dir.path() + "/x.model").status().IsInvalidArgument());
  EXPECT_TRUE(OpenTokenizer(dir.path() + "/missing.model").status().IsNotFound());
}

TEST(BpeTokenizerTest, HelloWorld) {
  auto t = OpenTokenizer(LlamaModel(), TokenizerKind::kLote);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->name(), "lote-bpe");
  EXPECT_EQ((*t)->bos_id(), 1);
  EXPECT_EQ((*t)->eos_id(), 2);
  EXPECT_EQ(Ids(**t, "Hello world, this is a test."),
            (std::vector<int32_t>{15043, 3186, 29892, 445, 338, 263, 1243, 29889}));
  auto ref = OpenTokenizer(LlamaModel(), TokenizerKind::kReference);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  EXPECT_EQ(Ids(**ref, "Hello world, this is a test."),
            (std::vector<int32_t>{15043, 3186, 29892, 445, 338, 263, 1243, 29889}));
}

TEST(BpeTokenizerTest, EdgeCasesMatchSentencePiece) {
  auto model = SentencePieceModel::Load(LlamaModel());
  ASSERT_TRUE(model.ok());
  auto fast = BpeTokenizer::Create(*model);
  ASSERT_TRUE(fast.ok());
  EXPECT_TRUE((*fast)->fast_path());
  auto general = BpeTokenizer::Create(*model, {.allow_fast_path = false});
  ASSERT_TRUE(general.ok());
  EXPECT_FALSE((*general)->fast_path());
  auto ref = ReferenceTokenizer::Load(LlamaModel());
  ASSERT_TRUE(ref.ok());
  for (int round = 0; round < 2; ++round) {  // the second round hits the word cache
    for (const std::string& text : EdgeCases()) {
      auto want = Ids(**ref, text);
      EXPECT_EQ(Ids(**fast, text), want) << "fast path, text: '" << text << "' want " << Show(want);
      EXPECT_EQ(Ids(**general, text), want) << "general path, text: '" << text << "'";
    }
  }
}

// Every document (line) of the three corpora: lote's fast path, on one thread
// and on two threads (shared word cache), vs libsentencepiece.
TEST(BpeTokenizerTest, CorporaMatchSentencePiece) {
  auto model = SentencePieceModel::Load(LlamaModel());
  auto ref = OpenTokenizer(LlamaModel(), TokenizerKind::kReference);
  ASSERT_TRUE(model.ok() && ref.ok());
  auto one = BpeTokenizer::Create(*model);
  auto two = BpeTokenizer::Create(*model);
  ASSERT_TRUE(one.ok() && two.ok());
  // Encodes every line on `threads` threads, 64-line chunks taken in turn.
  auto encode_all = [](const Tokenizer& t, const std::vector<std::string>& lines, int threads) {
    std::vector<std::vector<int32_t>> out(lines.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t b; (b = next.fetch_add(64)) < lines.size();) {
        for (size_t i = b; i < std::min(lines.size(), b + 64); ++i)
          (void)t.Encode(lines[i], &out[i]);
      }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    return out;
  };
  for (const char* corpus : {"sotu.txt", "moby-dick.txt", "wordnet.txt"}) {
    auto lines = testing::ReadLines(TestDataDir() + "/" + corpus);
    ASSERT_GT(lines.size(), 100u) << corpus;
    auto want = encode_all(**ref, lines, 2);  // the reference is the slow part
    auto got1 = encode_all(**one, lines, 1);
    auto got2 = encode_all(**two, lines, 2);
    for (const auto* got : {&got1, &got2}) {
      size_t mismatches = 0, tokens = 0;
      for (size_t i = 0; i < lines.size(); ++i) {
        tokens += (*got)[i].size();
        if ((*got)[i] != want[i] && ++mismatches <= 3) {
          ADD_FAILURE() << corpus << " line " << i + 1 << " differs (" << (got == &got1 ? 1 : 2)
                        << " threads):\n got  " << Show((*got)[i]) << "\n want " << Show(want[i]);
        }
      }
      EXPECT_EQ(mismatches, 0u) << corpus;
      EXPECT_GT(tokens, lines.size()) << corpus;
    }
  }
}

// The general algorithm on a whole corpus too (it serves models the fast path cannot).
TEST(BpeTokenizerTest, GeneralPathMatchesOnMobyDick) {
  auto model = SentencePieceModel::Load(LlamaModel());
  ASSERT_TRUE(model.ok());
  auto general = BpeTokenizer::Create(*model, {.allow_fast_path = false});
  auto ref = ReferenceTokenizer::Load(LlamaModel());
  ASSERT_TRUE(general.ok() && ref.ok());
  size_t mismatches = 0;
  for (const auto& line : testing::ReadLines(TestDataDir() + "/moby-dick.txt")) {
    if (Ids(**general, line) != Ids(**ref, line)) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(BpeTokenizerTest, ConcurrentEncodingIsConsistent) {
  auto t = OpenTokenizer(LlamaModel(), TokenizerKind::kLote);
  ASSERT_TRUE(t.ok());
  auto lines = testing::ReadLines(TestDataDir() + "/moby-dick.txt");
  lines.resize(400);
  std::vector<std::vector<int32_t>> a(lines.size()), b(lines.size());
  std::thread th([&] {
    for (size_t i = 0; i < lines.size(); ++i) (void)(*t)->Encode(lines[i], &a[i]);
  });
  for (size_t i = 0; i < lines.size(); ++i) (void)(*t)->Encode(lines[i], &b[i]);
  th.join();
  EXPECT_EQ(a, b);
}

struct TinyCase {
  const char* name;
  const char* flags;
  bool expect_fast;
};

// Tiny models trained here: fast path, user-defined and control pieces, and no
// byte fallback (unknown runs) with remove_extra_whitespaces.
TEST(BpeTokenizerTest, TinyTrainedModelsMatchSentencePiece) {
  TempDir dir;
  const TinyCase cases[] = {
      {"fast",
       "--byte_fallback=true --normalization_rule_name=identity --remove_extra_whitespaces=false",
       true},
      {"userdef",
       "--byte_fallback=true --normalization_rule_name=identity "
       "'--user_defined_symbols=<br>,Ahab,@@' "
       "'--control_symbols=<ctl>' --remove_extra_whitespaces=false",
       false},
      {"nofallback",
       "--normalization_rule_name=identity --character_coverage=0.98 --add_dummy_prefix=false",
       false},
  };
  auto lines = testing::ReadLines(TestDataDir() + "/moby-dick.txt");
  std::vector<std::string> docs(EdgeCases());
  for (size_t i = 0; i < lines.size(); i += 7) docs.push_back(lines[i]);
  docs.push_back("Ahab<br>Ahab  @@x<ctl> Ahabs ");
  docs.push_back("ĀĂĄ ϞϠ ⅧⅨ qqqq zzz");
  for (const TinyCase& c : cases) {
    std::string path = testing::TrainTinyModel(dir.path(), c.name, 300, c.flags);
    ASSERT_FALSE(path.empty()) << "spm_train failed for " << c.name;
    auto model = SentencePieceModel::Load(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto lote = BpeTokenizer::Create(*model);
    ASSERT_TRUE(lote.ok()) << c.name << ": " << lote.status().ToString();
    EXPECT_EQ((*lote)->fast_path(), c.expect_fast) << c.name;
    auto ref = ReferenceTokenizer::Load(path);
    ASSERT_TRUE(ref.ok());
    size_t mismatches = 0;
    for (const auto& doc : docs) {
      auto want = Ids(**ref, doc);
      auto got = Ids(**lote, doc);
      if (got != want && ++mismatches <= 3) {
        ADD_FAILURE() << c.name << ": '" << doc.substr(0, 80) << "'\n got  " << Show(got)
                      << "\n want " << Show(want);
      }
    }
    EXPECT_EQ(mismatches, 0u) << c.name;
  }
}

TEST(TokenizerTest, AutoFallsBackToReferenceForUnigram) {
  TempDir dir;
  std::string input = dir.path() + "/in.txt";
  auto lines = testing::ReadLines(TestDataDir() + "/moby-dick.txt");
  std::string text;
  for (int i = 0; i < 200; ++i) text += lines[i] + "\n";
  ASSERT_TRUE(WriteFileAtomic(input, text).ok());
  std::string cmd = "spm_train --input=" + input + " --model_prefix=" + dir.path() +
                    "/uni --model_type=unigram --vocab_size=300 --minloglevel=2 > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto lote = OpenTokenizer(dir.path() + "/uni.model", TokenizerKind::kLote);
  EXPECT_EQ(lote.status().code(), StatusCode::kUnimplemented);
  auto any = OpenTokenizer(dir.path() + "/uni.model");
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_EQ((*any)->name(), "sentencepiece");
  EXPECT_FALSE(Ids(**any, "Call me Ishmael.").empty());
}

}  // namespace
}  // namespace lote::data
