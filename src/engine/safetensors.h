// Safetensors files (8-byte little-endian header length, JSON header, raw tensor
// bytes): the engine's weight format in and out, compatible with Hugging Face.
// SafetensorsReader memory-maps a file read-only; it is immutable after Open and safe
// to read from several threads. SafetensorsWriter streams a file tensor by tensor (the
// header first, then each tensor's data, in pieces if the caller likes) and publishes
// it atomically (temp file, fsync, rename); WriteSafetensors is the one-call form.
// Neither ever holds a second copy of the data, so tools that read and write one
// tensor at a time (checkpoint export, re-sharding) stay within a tensor's memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::engine {

enum class DType { kF32, kF16, kBF16, kI32, kI64, kU16, kOther };

struct TensorInfo {
  DType dtype = DType::kOther;
  std::string dtype_name;  // as written in the header ("F32", "BF16", ...)
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsReader {
 public:
  static Result<std::unique_ptr<SafetensorsReader>> Open(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* Find(const std::string& name) const;
  // Converts a F32/F16/BF16 tensor to fp32 into out[numel].
  Status ReadFloat(const std::string& name, float* out, int64_t numel) const;
  // The same for elements [begin, begin + count) of the flattened tensor.
  Status ReadFloatRange(const std::string& name, int64_t begin, int64_t count, float* out) const;
  // Drops the mapped pages of a tensor from this process's memory (they are read from
  // the file again if needed): reading a file larger than memory tensor by tensor
  // then costs one tensor's pages, not the file's. With count >= 0 only the pages of
  // elements [begin, begin + count). A name it lacks is ignored.
  void Evict(const std::string& name, int64_t begin = 0, int64_t count = -1) const;

 private:
  SafetensorsReader() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One fp32 tensor to write; data points at numel floats owned by the caller.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata);

// A tensor's entry in the header of a file written by SafetensorsWriter (F32).
struct TensorHeader {
  std::string name;
  std::vector<int64_t> shape;
};

// Writes `path` as a safetensors file of F32 tensors (or BF16 ones, each float rounded to
// nearest even as it is appended: bf16.h): Create writes the header (the
// tensors' data follow in the order given), Append adds the next floats (a tensor may
// come in several pieces), Finish checks that exactly the header's bytes were
// appended, fsyncs and renames the temp file `path.tmp` into place. A writer destroyed
// before Finish (or after an error) removes its temp file and leaves `path` as it was.
// Not thread-safe.
class SafetensorsWriter {
 public:
  static Result<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, const std::vector<TensorHeader>& tensors,
      const std::map<std::string, std::string>& metadata, DType dtype = DType::kF32);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  Status Append(const float* data, int64_t count);
  Status Finish();

 private:
  SafetensorsWriter() = default;
  Status Failed(const std::string& what);

  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  uint64_t expected_ = 0;  // data bytes the header promises
  uint64_t written_ = 0;
  DType dtype_ = DType::kF32;   // kF32 or kBF16
  std::vector<uint16_t> bf16_;  // Append's conversion buffer
};

float HalfToFloat(uint16_t h);
float BFloat16ToFloat(uint16_t h);

}  // namespace lote::engine
