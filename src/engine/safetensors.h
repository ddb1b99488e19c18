// Safetensors files (8-byte little-endian header length, JSON header, raw tensor
// bytes): the engine's weight format in and out, compatible with Hugging Face.
// SafetensorsReader memory-maps a file read-only; it is immutable after Open and safe
// to read from several threads. WriteSafetensors writes atomically (temp file, fsync,
// rename) and streams tensor data, so no second copy of the weights is made.
#pragma once

#include <cstdint>
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

float HalfToFloat(uint16_t h);
float BFloat16ToFloat(uint16_t h);

}  // namespace lote::engine
