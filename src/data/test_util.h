// Helpers shared by the data tests: test data paths, temp dirs, tiny models.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/files.h"

namespace lote::data::testing {

inline std::string TestDataDir() {
  // ctest's ENVIRONMENT may not carry LOTE_TEST_DATA; CMake also compiles the path in.
  const char* d = std::getenv("LOTE_TEST_DATA");
  if (d && *d) return d;
#ifdef LOTE_TEST_DATA_DIR
  return LOTE_TEST_DATA_DIR;
#else
  return ".cache/testdata";
#endif
}
inline std::string LlamaModel() { return TestDataDir() + "/tokenizer.model"; }

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("lote-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Lines of a text file (without '\n').
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  auto text = ReadFile(path);
  if (!text.ok()) return out;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) nl = text->size();
    out.push_back(text->substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// Trains a small BPE model with spm_train on the first `lines` lines of
// moby-dick.txt; returns the model path ("" on failure).
inline std::string TrainTinyModel(const std::string& dir, const std::string& name, int lines,
                                  const std::string& extra_flags) {
  std::string input = dir + "/" + name + ".txt";
  auto all = ReadLines(TestDataDir() + "/moby-dick.txt");
  std::string text;
  for (int i = 0; i < lines && i < static_cast<int>(all.size()); ++i) text += all[i] + "\n";
  if (!WriteFileAtomic(input, text).ok()) return "";
  std::string cmd = "spm_train --input=" + input + " --model_prefix=" + dir + "/" + name +
                    " --model_type=bpe --vocab_size=400 --num_threads=1 --minloglevel=2 " +
                    extra_flags + " > " + dir + "/" + name + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) return "";
  return dir + "/" + name + ".model";
}

}  // namespace lote::data::testing
