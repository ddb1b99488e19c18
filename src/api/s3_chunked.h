// The aws-chunked content encoding of S3 uploads (SigV4 streaming): decodes
// "<hex size>[;chunk-signature=SIG]\r\n<data>\r\n ... 0[...]\r\n<trailers>\r\n"
// as it arrives in any pieces, handing out the data and keeping each chunk's
// signature and SHA-256 so the chain can be verified once the request's
// signature is (VerifyChunkSignatures), and the trailers (x-amz-checksum-*).
// Thread safety: one writer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::api {

class AwsChunkedDecoder {
 public:
  AwsChunkedDecoder();
  ~AwsChunkedDecoder();
  // Decodes the next encoded bytes; `data` receives the decoded ones.
  // InvalidArgument (S3's IncompleteBody / InvalidChunkSizeError) on a
  // malformed stream.
  Status Feed(std::string_view encoded, const std::function<Status(std::string_view)>& data);
  // Whether each chunk's SHA-256 is computed (for VerifyChunkSignatures; on
  // by default). Set before the first Feed.
  void set_hash_chunks(bool on) { hash_chunks_ = on; }
  // The final chunk and the trailers were read.
  bool done() const { return state_ == State::kDone; }
  // Trailer name (lowercase) → value.
  const std::map<std::string, std::string>& trailers() const { return trailers_; }

  struct Chunk {
    std::string signature;   // hex, empty for unsigned chunks
    std::string sha256_hex;  // of the chunk's data
  };
  const std::vector<Chunk>& chunks() const { return chunks_; }

 private:
  enum class State { kSizeLine, kData, kDataEnd, kTrailers, kDone };
  Status OnSizeLine(const std::string& line);
  State state_ = State::kSizeLine;
  bool hash_chunks_ = true;
  uint64_t last_size_ = 0;  // the size of the chunk before this one
  std::string line_;
  uint64_t remaining_ = 0;
  std::vector<Chunk> chunks_;
  std::map<std::string, std::string> trailers_;
  struct Hash;
  std::unique_ptr<Hash> hash_;
};

// Checks a streaming upload's chunk signatures against the request's
// ("seed") signature: each is HMAC(signing key, "AWS4-HMAC-SHA256-PAYLOAD\n"
// date "\n" scope "\n" previous "\n" SHA256("") "\n" SHA256(data)).
// `signing_key` is sigv4::SigningKey's raw bytes.
Status VerifyChunkSignatures(const std::vector<AwsChunkedDecoder::Chunk>& chunks,
                             std::string_view seed_signature, std::string_view signing_key,
                             std::string_view amz_date, std::string_view scope);

}  // namespace lote::api
