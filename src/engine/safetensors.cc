#include "engine/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/files.h"
#include "common/json.h"
#include "engine/bf16.h"

namespace lote::engine {
namespace {

DType ParseDType(const std::string& s, int64_t* size) {
  if (s == "F32") return *size = 4, DType::kF32;
  if (s == "F16") return *size = 2, DType::kF16;
  if (s == "BF16") return *size = 2, DType::kBF16;
  if (s == "I32") return *size = 4, DType::kI32;
  if (s == "I64") return *size = 8, DType::kI64;
  if (s == "U16") return *size = 2, DType::kU16;
  if (s == "F64" || s == "I8" || s == "U8" || s == "BOOL" || s == "I16" || s == "U32" ||
      s == "U64") {
    *size = (s == "F64" || s == "U64") ? 8 : (s == "I16") ? 2 : (s == "U32") ? 4 : 1;
    return DType::kOther;
  }
  *size = 0;
  return DType::kOther;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FFu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

float BFloat16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

Result<std::unique_ptr<SafetensorsReader>> SafetensorsReader::Open(const std::string& path) {
  std::unique_ptr<SafetensorsReader> r(new SafetensorsReader());
  r->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::NotFound(
        fmt::format("cannot open weights file {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 8) {
    ::close(fd);
    return Status::DataLoss(
        fmt::format("{} is not a safetensors file (shorter than 8 bytes)", path));
  }
  r->map_size_ = static_cast<size_t>(st.st_size);
  r->map_ = ::mmap(nullptr, r->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (r->map_ == MAP_FAILED) {
    r->map_ = nullptr;
    return Status::Internal(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  }
  const auto* bytes = static_cast<const uint8_t*>(r->map_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > r->map_size_ - 8) {
    return Status::DataLoss(
        fmt::format("{} is not a safetensors file: header length {} exceeds the file size {}", path,
                    header_len, r->map_size_));
  }
  auto header = ParseJson(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len));
  if (!header.ok() || !header->is_object()) {
    return Status::DataLoss(
        fmt::format("{} is not a safetensors file: its header is not a JSON object", path));
  }
  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_len = r->map_size_ - 8 - header_len;
  try {
    for (const auto& [name, value] : header->items()) {
      if (name == "__metadata__") {
        if (value.is_object()) {
          for (const auto& [k, v] : value.items()) {
            if (v.is_string()) r->metadata_[k] = v.get<std::string>();
          }
        }
        continue;
      }
      auto bad = [&](const std::string& why) {
        return Status::DataLoss(fmt::format("{}: tensor \"{}\": {}", path, name, why));
      };
      if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
          !value.contains("data_offsets")) {
        return bad("entry needs dtype, shape and data_offsets");
      }
      TensorInfo t;
      t.dtype_name = value["dtype"].get<std::string>();
      int64_t elem = 0;
      t.dtype = ParseDType(t.dtype_name, &elem);
      if (elem == 0) return bad("unknown dtype " + t.dtype_name);
      for (const auto& d : value["shape"]) t.shape.push_back(d.get<int64_t>());
      const auto& offs = value["data_offsets"];
      if (!offs.is_array() || offs.size() != 2) return bad("data_offsets must be [begin, end]");
      const uint64_t b = offs[0].get<uint64_t>(), e = offs[1].get<uint64_t>();
      if (b > e || e > data_len) return bad("data_offsets lie outside the file");
      t.nbytes = static_cast<int64_t>(e - b);
      if (t.nbytes != t.numel() * elem) {
        return bad(
            fmt::format("{} bytes for shape of {} {} elements", t.nbytes, t.numel(), t.dtype_name));
      }
      t.data = data + b;
      r->tensors_[name] = std::move(t);
    }
  } catch (const Json::exception& e) {
    return Status::DataLoss(fmt::format("{}: malformed safetensors header: {}", path, e.what()));
  }
  return r;
}

SafetensorsReader::~SafetensorsReader() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const TensorInfo* SafetensorsReader::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Status SafetensorsReader::ReadFloat(const std::string& name, float* out, int64_t numel) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) return Status::NotFound(fmt::format("{} has no tensor \"{}\"", path_, name));
  if (t->numel() != numel) {
    return Status::InvalidArgument(fmt::format("{}: tensor \"{}\" has {} elements, expected {}",
                                               path_, name, t->numel(), numel));
  }
  return ReadFloatRange(name, 0, numel, out);
}

Status SafetensorsReader::ReadFloatRange(const std::string& name, int64_t begin, int64_t count,
                                         float* out) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) return Status::NotFound(fmt::format("{} has no tensor \"{}\"", path_, name));
  if (begin < 0 || count < 0 || begin + count > t->numel()) {
    return Status::InvalidArgument(
        fmt::format("{}: tensor \"{}\" has {} elements; elements [{}, {}) were asked for", path_,
                    name, t->numel(), begin, begin + count));
  }
  switch (t->dtype) {
    case DType::kF32:
      std::memcpy(out, t->data + 4 * begin, sizeof(float) * static_cast<size_t>(count));
      return Status::Ok();
    case DType::kF16:
    case DType::kBF16: {
      const bool bf = t->dtype == DType::kBF16;
      const uint8_t* src = t->data + 2 * begin;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf ? BFloat16ToFloat(h) : HalfToFloat(h);
      }
      return Status::Ok();
    }
    default:
      return Status::InvalidArgument(
          fmt::format("{}: tensor \"{}\" has dtype {}; weights must be F32, F16 or BF16", path_,
                      name, t->dtype_name));
  }
}

void SafetensorsReader::Evict(const std::string& name, int64_t first, int64_t count) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr || t->nbytes == 0 || t->numel() == 0) return;
  const int64_t elem = t->nbytes / t->numel();
  first = std::clamp<int64_t>(first, 0, t->numel());
  if (count < 0 || first + count > t->numel()) count = t->numel() - first;
  if (count == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t at = reinterpret_cast<uintptr_t>(t->data + first * elem);
  const uintptr_t begin = at & ~(page - 1);
  const uintptr_t end = at + static_cast<uintptr_t>(count * elem);
  // A read-only file mapping: dropped pages are read from the file again on access.
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, const std::vector<TensorHeader>& tensors,
    const std::map<std::string, std::string>& metadata, DType dtype) {
  LOTE_CHECK_MSG(dtype == DType::kF32 || dtype == DType::kBF16, "writes F32 or BF16 only");
  const uint64_t elem = dtype == DType::kBF16 ? 2 : 4;
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const uint64_t bytes = static_cast<uint64_t>(n) * elem;
    header[t.name] = {{"dtype", elem == 2 ? "BF16" : "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // data starts 8-byte aligned
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  w->tmp_ = path + ".tmp";
  w->expected_ = off;
  w->dtype_ = dtype;
  w->file_ = std::fopen(w->tmp_.c_str(), "wb");
  if (w->file_ == nullptr) {
    return Status::Unavailable(fmt::format("cannot write {}: {}", w->tmp_, std::strerror(errno)));
  }
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>((text.size() >> (8 * i)) & 0xFF);
  if (std::fwrite(len, 1, 8, w->file_) != 8 ||
      std::fwrite(text.data(), 1, text.size(), w->file_) != text.size()) {
    return w->Failed("cannot write");
  }
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

Status SafetensorsWriter::Failed(const std::string& what) {
  const int e = errno;
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  std::remove(tmp_.c_str());
  return Status::Unavailable(fmt::format("{} {}: {}", what, path_, std::strerror(e)));
}

Status SafetensorsWriter::Append(const float* data, int64_t count) {
  if (file_ == nullptr) return Status::FailedPrecondition(path_ + ": the writer has stopped");
  const bool bf16 = dtype_ == DType::kBF16;
  const uint64_t bytes = static_cast<uint64_t>(count) * (bf16 ? 2 : 4);
  if (written_ + bytes > expected_) {
    (void)Failed("too much data for");
    return Status::Internal(fmt::format("{}: {} bytes appended beyond the header's {}", path_,
                                        written_ + bytes - expected_, expected_));
  }
  if (!bf16) {
    if (std::fwrite(data, sizeof(float), static_cast<size_t>(count), file_) !=
        static_cast<size_t>(count)) {
      return Failed("cannot write");
    }
  } else {
    constexpr int64_t kPiece = 1 << 20;  // converted a piece at a time
    for (int64_t at = 0; at < count; at += kPiece) {
      const int64_t n = std::min(kPiece, count - at);
      bf16_.resize(static_cast<size_t>(n));
      FloatsToBf16(bf16_.data(), data + at, n);
      if (std::fwrite(bf16_.data(), sizeof(uint16_t), static_cast<size_t>(n), file_) !=
          static_cast<size_t>(n)) {
        return Failed("cannot write");
      }
    }
  }
  written_ += bytes;
  return Status::Ok();
}

Status SafetensorsWriter::Finish() {
  if (file_ == nullptr) return Status::FailedPrecondition(path_ + ": the writer has stopped");
  if (written_ != expected_) {
    (void)Failed("incomplete");
    return Status::Internal(fmt::format("{}: {} of the header's {} data bytes were appended", path_,
                                        written_, expected_));
  }
  bool ok = std::fflush(file_) == 0;
  ok = ::fsync(::fileno(file_)) == 0 && ok;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    return Status::Unavailable(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  }
  return Status::Ok();
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<TensorHeader> headers;
  for (const auto& t : tensors) headers.push_back({t.name, t.shape});
  ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(path, headers, metadata));
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    RETURN_IF_ERROR(writer->Append(t.data, n));
  }
  return writer->Finish();
}

}  // namespace lote::engine
