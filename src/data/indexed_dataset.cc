#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"

namespace lote::data {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
bool Get(std::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

}  // namespace

OrderedJson DatasetManifest::ToJson() const {
  OrderedJson j;
  j["format"] = format;
  j["version"] = version;
  j["prefix"] = prefix;
  j["dtype"] = dtype;
  j["tokenizer_sha256"] = tokenizer_sha256;
  j["vocab_size"] = vocab_size;
  j["bos_id"] = bos_id;
  j["eos_id"] = eos_id ? OrderedJson(*eos_id) : OrderedJson(nullptr);
  j["block_size"] = block_size;
  j["num_sequences"] = num_sequences;
  j["num_tokens"] = num_tokens;
  j["num_documents"] = num_documents;
  j["num_source_tokens"] = num_source_tokens;
  j["sources"] = OrderedJson::array();
  for (const auto& s : sources) {
    OrderedJson o;
    o["path"] = s.path;
    o["bytes"] = s.bytes;
    o["sha256"] = s.sha256;
    j["sources"].push_back(o);
  }
  if (!files.empty()) {
    j["files"] = OrderedJson::object();
    for (const auto& f : files)
      j["files"][f.name] = OrderedJson{{"bytes", f.bytes}, {"sha256", f.sha256}};
  }
  return j;
}

const FileDigest* DatasetManifest::file(std::string_view name) const {
  for (const auto& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Result<DatasetManifest> DatasetManifest::FromJson(const Json& j) {
  DatasetManifest m;
  try {
    m.format = j.at("format").get<std::string>();
    if (m.format != "megatron-mmidx")
      return Status::InvalidArgument("manifest format is '" + m.format +
                                     "', expected megatron-mmidx");
    m.version = j.at("version").get<int64_t>();
    m.prefix = j.at("prefix").get<std::string>();
    m.dtype = j.at("dtype").get<std::string>();
    m.tokenizer_sha256 = j.at("tokenizer_sha256").get<std::string>();
    m.vocab_size = j.at("vocab_size").get<int64_t>();
    m.bos_id = j.at("bos_id").get<int64_t>();
    if (!j.at("eos_id").is_null()) m.eos_id = j.at("eos_id").get<int64_t>();
    m.block_size = j.at("block_size").get<int64_t>();
    m.num_sequences = j.at("num_sequences").get<int64_t>();
    m.num_tokens = j.at("num_tokens").get<int64_t>();
    m.num_documents = j.at("num_documents").get<int64_t>();
    m.num_source_tokens = j.at("num_source_tokens").get<int64_t>();
    for (const auto& s : j.at("sources")) {
      m.sources.push_back({s.at("path").get<std::string>(), s.at("bytes").get<uint64_t>(),
                           s.at("sha256").get<std::string>()});
    }
    if (auto it = j.find("files"); it != j.end()) {
      if (!it->is_object())
        return Status::InvalidArgument("bad dataset manifest: \"files\" must be an object");
      for (const auto& [name, f] : it->items()) {
        const std::string sha = f.at("sha256").get<std::string>();
        if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos) {
          return Status::InvalidArgument("bad dataset manifest: files." + name +
                                         ".sha256 is not 64 lowercase hex digits");
        }
        m.files.push_back({name, f.at("bytes").get<uint64_t>(), sha});
      }
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("bad dataset manifest: ") + e.what());
  }
  return m;
}

Result<std::unique_ptr<IndexedDatasetWriter>> IndexedDatasetWriter::Create(const std::string& dir,
                                                                           int64_t vocab_size,
                                                                           int64_t block_size) {
  if (block_size <= 0) return Status::InvalidArgument("block size must be positive");
  std::unique_ptr<IndexedDatasetWriter> w(new IndexedDatasetWriter());
  w->dir_ = dir;
  w->dtype_ = vocab_size <= 65536 ? kDtypeUint16 : kDtypeInt32;
  w->block_size_ = block_size;
  std::string path = dir + "/" + kDatasetPrefix + ".bin";
  w->bin_ = std::fopen(path.c_str(), "wb");
  if (!w->bin_) return Status::Internal("cannot create " + path + ": " + std::strerror(errno));
  w->bin_hash_ = std::make_unique<Sha256Hasher>();
  return w;
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_) std::fclose(bin_);
}

Status IndexedDatasetWriter::AddSequence(const int32_t* tokens) {
  if (dtype_ == kDtypeUint16) {
    buffer_.resize(static_cast<size_t>(block_size_) * 2);
    for (int64_t i = 0; i < block_size_; ++i) {
      uint16_t v = static_cast<uint16_t>(tokens[i]);
      std::memcpy(buffer_.data() + i * 2, &v, 2);
    }
  } else {
    buffer_.resize(static_cast<size_t>(block_size_) * 4);
    std::memcpy(buffer_.data(), tokens, buffer_.size());
  }
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), bin_) != buffer_.size()) {
    return Status::Internal("cannot write " + dir_ + "/data.bin: " + std::strerror(errno));
  }
  bin_hash_->Update(std::string_view(buffer_.data(), buffer_.size()));
  bin_bytes_ += buffer_.size();
  ++num_sequences_;
  return Status::Ok();
}

Status IndexedDatasetWriter::Finish() {
  std::string bin_path = dir_ + "/" + kDatasetPrefix + ".bin";
  if (std::fflush(bin_) != 0 || ::fsync(fileno(bin_)) != 0 || std::fclose(bin_) != 0) {
    bin_ = nullptr;
    return Status::Internal("cannot write " + bin_path + ": " + std::strerror(errno));
  }
  bin_ = nullptr;
  const int64_t n = num_sequences_;
  const int64_t item = dtype_ == kDtypeUint16 ? 2 : 4;
  std::string idx;
  idx.reserve(34 + static_cast<size_t>(n) * 20 + 8);
  idx.append(kIdxMagic, sizeof(kIdxMagic));
  Put<uint64_t>(&idx, 1);
  Put<uint8_t>(&idx, dtype_);
  Put<uint64_t>(&idx, static_cast<uint64_t>(n));
  Put<uint64_t>(&idx, static_cast<uint64_t>(n + 1));
  for (int64_t i = 0; i < n; ++i) Put<int32_t>(&idx, static_cast<int32_t>(block_size_));
  for (int64_t i = 0; i < n; ++i) Put<int64_t>(&idx, i * block_size_ * item);
  for (int64_t i = 0; i <= n; ++i) Put<int64_t>(&idx, i);
  RETURN_IF_ERROR(WriteFileAtomic(dir_ + "/" + kDatasetPrefix + ".idx", idx));
  files_ = {{std::string(kDatasetPrefix) + ".bin", bin_bytes_, bin_hash_->FinishHex()},
            {std::string(kDatasetPrefix) + ".idx", idx.size(), Sha256Hex(idx)}};
  return Status::Ok();
}

IndexedDataset::~IndexedDataset() {
  if (bin_ && bin_size_) ::munmap(const_cast<uint8_t*>(bin_), bin_size_);
}

Result<IndexHeader> ParseIndexHeader(std::string_view in, const std::string& what) {
  auto corrupt = [&](const std::string& why) { return Status::DataLoss(what + ": " + why); };
  if (in.size() < sizeof(kIdxMagic) || std::memcmp(in.data(), kIdxMagic, sizeof(kIdxMagic)) != 0) {
    return corrupt("not a Megatron MMIDIDX index (bad magic)");
  }
  in.remove_prefix(sizeof(kIdxMagic));
  IndexHeader h;
  uint64_t version = 0;
  if (!Get(&in, &version) || version != 1) return corrupt("unsupported version");
  if (!Get(&in, &h.dtype) || (h.dtype != kDtypeUint16 && h.dtype != kDtypeInt32)) {
    return corrupt("unsupported dtype code " + std::to_string(h.dtype));
  }
  if (!Get(&in, &h.num_sequences) || !Get(&in, &h.num_documents)) {
    return corrupt("truncated header");
  }
  return h;
}

Result<DatasetPeek> PeekDataset(objstore::ObjectStore& store, int64_t count) {
  const std::string idx_key = std::string(kDatasetPrefix) + ".idx";
  const std::string bin_key = std::string(kDatasetPrefix) + ".bin";
  const std::string idx_name = objstore::JoinKey(store.RootUri(), idx_key);
  const std::string bin_name = objstore::JoinKey(store.RootUri(), bin_key);
  DatasetPeek peek;
  ASSIGN_OR_RETURN(bool has_manifest, store.Exists(kManifestName));
  if (has_manifest) {
    ASSIGN_OR_RETURN(std::string text, store.GetBytes(kManifestName));
    ASSIGN_OR_RETURN(Json j, ParseJson(text));
    ASSIGN_OR_RETURN(DatasetManifest m, DatasetManifest::FromJson(j));
    peek.manifest = std::move(m);
  }
  ASSIGN_OR_RETURN(objstore::ObjectInfo idx_info, store.Head(idx_key));
  ASSIGN_OR_RETURN(objstore::ObjectInfo bin_info, store.Head(bin_key));
  ASSIGN_OR_RETURN(std::string head, store.GetRange(idx_key, 0, IndexHeader::kBytes));
  ASSIGN_OR_RETURN(peek.header, ParseIndexHeader(head, idx_name));
  const IndexHeader& h = peek.header;
  if (idx_info.size != h.idx_bytes()) {
    return Status::DataLoss(idx_name + ": " + std::to_string(idx_info.size) +
                            " bytes, but its counts need " + std::to_string(h.idx_bytes()));
  }
  if (h.num_sequences == 0 || count <= 0) return peek;
  ASSIGN_OR_RETURN(std::string size_bytes, store.GetRange(idx_key, h.size_offset(0), 4));
  ASSIGN_OR_RETURN(std::string pointer_bytes, store.GetRange(idx_key, h.pointer_offset(0), 8));
  if (size_bytes.size() != 4 || pointer_bytes.size() != 8) {
    return Status::DataLoss(idx_name + ": short read of the first entry");
  }
  int32_t size = 0;
  int64_t pointer = 0;
  std::memcpy(&size, size_bytes.data(), 4);
  std::memcpy(&pointer, pointer_bytes.data(), 8);
  if (size < 0 || pointer < 0 ||
      static_cast<uint64_t>(pointer) + static_cast<uint64_t>(size) * h.item_bytes() >
          bin_info.size) {
    return Status::DataLoss(bin_name + ": sequence 0 lies outside the file");
  }
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(count), static_cast<uint64_t>(size));
  ASSIGN_OR_RETURN(std::string tokens,
                   store.GetRange(bin_key, static_cast<uint64_t>(pointer), n * h.item_bytes()));
  if (tokens.size() != n * h.item_bytes()) {
    return Status::DataLoss(bin_name + ": short read of sequence 0");
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (h.dtype == kDtypeUint16) {
      uint16_t v;
      std::memcpy(&v, tokens.data() + 2 * i, 2);
      peek.first_tokens.push_back(v);
    } else {
      int32_t v;
      std::memcpy(&v, tokens.data() + 4 * i, 4);
      peek.first_tokens.push_back(v);
    }
  }
  return peek;
}

Result<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& dir,
                                                             Options options) {
  const std::string idx_path = dir + "/" + kDatasetPrefix + ".idx";
  const std::string bin_path = dir + "/" + kDatasetPrefix + ".bin";
  ASSIGN_OR_RETURN(std::string idx, ReadFile(idx_path));
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  auto corrupt = [&](const std::string& why) { return Status::DataLoss(idx_path + ": " + why); };
  ASSIGN_OR_RETURN(IndexHeader header, ParseIndexHeader(idx, idx_path));
  ds->dtype_ = header.dtype;
  const uint64_t seqs = header.num_sequences, docs = header.num_documents;
  if (idx.size() != header.idx_bytes()) return corrupt("size does not match its counts");
  std::string_view in = std::string_view(idx).substr(IndexHeader::kBytes);
  ds->sizes_.resize(seqs);
  ds->pointers_.resize(seqs);
  ds->doc_idx_.resize(docs);
  std::memcpy(ds->sizes_.data(), in.data(), seqs * 4);
  std::memcpy(ds->pointers_.data(), in.data() + seqs * 4, seqs * 8);
  std::memcpy(ds->doc_idx_.data(), in.data() + seqs * 12, docs * 8);

  int fd = ::open(bin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + bin_path + ": " + std::strerror(errno));
  struct stat st;
  ::fstat(fd, &st);
  ds->bin_size_ = static_cast<size_t>(st.st_size);
  if (ds->bin_size_ > 0) {
    void* p = ::mmap(nullptr, ds->bin_size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::Internal("cannot mmap " + bin_path);
    }
    ds->bin_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  const int64_t item = ds->dtype_ == kDtypeUint16 ? 2 : 4;
  for (uint64_t i = 0; i < seqs; ++i) {
    if (ds->sizes_[i] < 0 || ds->pointers_[i] < 0 ||
        static_cast<uint64_t>(ds->pointers_[i] + ds->sizes_[i] * item) > ds->bin_size_) {
      return Status::DataLoss(bin_path + ": sequence " + std::to_string(i) +
                              " lies outside the file");
    }
  }
  if (options.read_manifest && FileExists(dir + "/" + kManifestName)) {
    ASSIGN_OR_RETURN(Json j, ReadJsonFile(dir + "/" + kManifestName));
    ASSIGN_OR_RETURN(DatasetManifest m, DatasetManifest::FromJson(j));
    ds->manifest_ = std::move(m);
  }
  return ds;
}

int32_t IndexedDataset::token(int64_t i, int64_t pos) const {
  const uint8_t* p = bin_ + pointers_[i];
  if (dtype_ == kDtypeUint16) {
    uint16_t v;
    std::memcpy(&v, p + pos * 2, 2);
    return v;
  }
  int32_t v;
  std::memcpy(&v, p + pos * 4, 4);
  return v;
}

std::vector<int32_t> IndexedDataset::Sequence(int64_t i) const {
  std::vector<int32_t> out(static_cast<size_t>(sizes_[i]));
  Read(i, 0, sizes_[i], out.data());
  return out;
}

void IndexedDataset::Read(int64_t i, int64_t begin, int64_t count, int32_t* out) const {
  const uint8_t* p = bin_ + pointers_[i];
  if (dtype_ == kDtypeUint16) {
    for (int64_t k = 0; k < count; ++k) {
      uint16_t v;
      std::memcpy(&v, p + (begin + k) * 2, 2);
      out[k] = v;
    }
  } else {
    std::memcpy(out, p + begin * 4, static_cast<size_t>(count) * sizeof(int32_t));
  }
}

}  // namespace lote::data
