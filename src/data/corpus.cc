#include "data/corpus.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/json.h"

namespace lote::data {
namespace {

namespace fs = std::filesystem;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

CorpusFile Describe(const fs::path& p, const CorpusOptions& options, uint64_t size) {
  CorpusFile f;
  f.path = p.string();
  f.bytes = size;
  f.gzip = EndsWith(f.path, ".gz");
  std::string base = f.gzip ? f.path.substr(0, f.path.size() - 3) : f.path;
  if (options.format != CorpusFormat::kAuto) {
    f.format = options.format;
  } else if (EndsWith(base, ".jsonl") || EndsWith(base, ".ndjson") || EndsWith(base, ".json")) {
    f.format = CorpusFormat::kJsonl;
  } else {
    f.format = CorpusFormat::kText;
  }
  return f;
}

}  // namespace

int64_t FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    if (i + 8 <= n) {
      uint64_t v;
      std::memcpy(&v, p + i, 8);
      if ((v & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
      return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

Result<std::vector<CorpusFile>> ExpandInputs(const std::vector<std::string>& inputs,
                                             const CorpusOptions& options) {
  std::vector<CorpusFile> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) return Status::NotFound("input " + input + " does not exist");
    if (fs::is_regular_file(st)) {
      out.push_back(Describe(input, options, fs::file_size(input, ec)));
      continue;
    }
    if (!fs::is_directory(st))
      return Status::InvalidArgument("input " + input + " is not a file or directory");
    std::vector<CorpusFile> found;
    fs::recursive_directory_iterator it(input, fs::directory_options::follow_directory_symlink, ec),
        end;
    if (ec) return Status::Internal("cannot read directory " + input + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) return Status::Internal("cannot read directory " + input + ": " + ec.message());
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) found.push_back(Describe(it->path(), options, it->file_size()));
    }
    std::sort(found.begin(), found.end(),
              [](const CorpusFile& a, const CorpusFile& b) { return a.path < b.path; });
    if (found.empty())
      return Status::InvalidArgument("input directory " + input + " holds no files");
    out.insert(out.end(), found.begin(), found.end());
  }
  if (out.empty()) return Status::InvalidArgument("no input files (pass --input PATH)");
  return out;
}

CorpusReader::CorpusReader(std::vector<CorpusFile> files, CorpusOptions options)
    : files_(std::move(files)), options_(std::move(options)) {
  for (const auto& f : files_) total_bytes_ += f.bytes;
}

CorpusReader::~CorpusReader() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

uint64_t CorpusReader::bytes_read() const {
  if (!gz_) return done_bytes_;
  z_off_t off = gzoffset(static_cast<gzFile>(gz_));
  return done_bytes_ + static_cast<uint64_t>(std::max<z_off_t>(off, 0));
}

Status CorpusReader::OpenNext() {
  if (gz_) {
    gzclose(static_cast<gzFile>(gz_));
    gz_ = nullptr;
    done_bytes_ += current_->bytes;
  }
  current_ = &files_[next_file_++];
  if (current_->gzip) {
    // gzopen would read a non-gzip file as plain text; a .gz name promises gzip.
    std::FILE* f = std::fopen(current_->path.c_str(), "rb");
    if (!f) return Status::NotFound("cannot open input " + current_->path);
    unsigned char magic[2] = {0, 0};
    size_t n = std::fread(magic, 1, 2, f);
    std::fclose(f);
    if (current_->bytes > 0 && (n != 2 || magic[0] != 0x1f || magic[1] != 0x8b)) {
      return Status::InvalidArgument(current_->path + ":1: not gzip data despite the .gz name");
    }
  }
  // gzopen reads plain files transparently, so one path serves both.
  gzFile gz = gzopen(current_->path.c_str(), "rb");
  if (!gz) return Status::NotFound("cannot open input " + current_->path);
  gzbuffer(gz, 1 << 20);
  gz_ = gz;
  line_no_ = 0;
  buf_.clear();
  buf_pos_ = 0;
  eof_ = false;
  return Status::Ok();
}

Result<bool> CorpusReader::ReadLine(std::string* line) {
  line->clear();
  for (;;) {
    size_t nl = buf_.find('\n', buf_pos_);
    if (nl != std::string::npos) {
      line->append(buf_, buf_pos_, nl - buf_pos_);
      buf_pos_ = nl + 1;
      ++line_no_;
      return true;
    }
    line->append(buf_, buf_pos_, std::string::npos);
    buf_.clear();
    buf_pos_ = 0;
    if (eof_) {
      if (line->empty()) return false;
      ++line_no_;
      return true;
    }
    buf_.resize(1 << 20);
    int n = gzread(static_cast<gzFile>(gz_), buf_.data(), static_cast<unsigned>(buf_.size()));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(static_cast<gzFile>(gz_), &err);
      return Status::DataLoss(current_->path + ":" + std::to_string(line_no_ + 1) +
                              ": cannot read (" + (msg ? msg : "?") + ")" +
                              (current_->gzip ? "; is it a valid .gz file?" : ""));
    }
    buf_.resize(static_cast<size_t>(n));
    if (n == 0) {
      RETURN_IF_ERROR(CheckEnd());
      eof_ = true;
    }
  }
}

Status CorpusReader::CheckEnd() {
  int err = Z_OK;
  const char* msg = gzerror(static_cast<gzFile>(gz_), &err);
  if (err != Z_OK) {
    return Status::DataLoss(current_->path + ":" + std::to_string(line_no_ + 1) + ": " +
                            (msg ? msg : "read error") + " (truncated or corrupt gzip file?)");
  }
  return Status::Ok();
}

Status CorpusReader::AddDocument(std::string&& text, std::vector<std::string>* docs,
                                 size_t* added) {
  int64_t bad = FindInvalidUtf8(text);
  if (bad >= 0) {
    return Status::InvalidArgument(current_->path + ":" + std::to_string(line_no_) +
                                   ": not valid UTF-8 (byte " + std::to_string(bad) +
                                   " of the document); convert the file to UTF-8 or drop the line");
  }
  *added += text.size();
  ++documents_;
  docs->push_back(std::move(text));
  return Status::Ok();
}

Result<bool> CorpusReader::NextBatch(size_t max_bytes, std::vector<std::string>* docs) {
  size_t added = 0;
  std::string line;
  while (added < max_bytes) {
    if (!gz_ || (eof_ && buf_pos_ >= buf_.size())) {
      if (next_file_ >= files_.size()) {
        if (gz_) {
          gzclose(static_cast<gzFile>(gz_));
          gz_ = nullptr;
          done_bytes_ += current_->bytes;
        }
        return false;
      }
      RETURN_IF_ERROR(OpenNext());
    }
    if (options_.doc_per_file && current_->format == CorpusFormat::kText) {
      // The whole file, exactly as stored, is one document.
      std::string all = buf_.substr(buf_pos_);
      std::string chunk(1 << 20, '\0');
      for (;;) {
        int n = gzread(static_cast<gzFile>(gz_), chunk.data(), static_cast<unsigned>(chunk.size()));
        if (n < 0)
          return Status::DataLoss("cannot read " + current_->path +
                                  (current_->gzip ? "; is it a valid .gz file?" : ""));
        if (n == 0) {
          RETURN_IF_ERROR(CheckEnd());
          break;
        }
        all.append(chunk.data(), static_cast<size_t>(n));
      }
      eof_ = true;
      buf_.clear();
      buf_pos_ = 0;
      int64_t bad = FindInvalidUtf8(all);
      line_no_ =
          bad < 0 ? 1 : 1 + static_cast<uint64_t>(std::count(all.begin(), all.begin() + bad, '\n'));
      if (!all.empty()) RETURN_IF_ERROR(AddDocument(std::move(all), docs, &added));
      continue;
    }
    ASSIGN_OR_RETURN(bool more, ReadLine(&line));
    if (!more) continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (current_->format == CorpusFormat::kText) {
      RETURN_IF_ERROR(AddDocument(std::move(line), docs, &added));
      continue;
    }
    // JSON Lines.
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = current_->path + ":" + std::to_string(line_no_) + ": ";
    if (j.is_discarded()) {
      auto parsed = ParseJson(line);  // for the parser's message
      return Status::InvalidArgument(where + "invalid JSON (" +
                                     (parsed.ok() ? std::string("?") : parsed.status().message()) +
                                     ")");
    }
    if (!j.is_object()) return Status::InvalidArgument(where + "expected a JSON object per line");
    auto it = j.find(options_.text_key);
    if (it == j.end() || !it->is_string()) {
      return Status::InvalidArgument(where + "no string field '" + options_.text_key +
                                     "' (choose the field with --text-key)");
    }
    std::string text = it->get<std::string>();
    if (text.empty()) continue;
    RETURN_IF_ERROR(AddDocument(std::move(text), docs, &added));
  }
  return true;
}

}  // namespace lote::data
