#include "api/s3_chunked.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "common/crypto.h"

namespace lote::api {

namespace {
constexpr size_t kMaxLine = 4096;
constexpr uint64_t kMinSignedChunk = 8192;
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
}  // namespace

struct AwsChunkedDecoder::Hash {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Hash() { EVP_MD_CTX_free(ctx); }
};

AwsChunkedDecoder::AwsChunkedDecoder() : hash_(std::make_unique<Hash>()) {}
AwsChunkedDecoder::~AwsChunkedDecoder() = default;

Status AwsChunkedDecoder::OnSizeLine(const std::string& line) {
  const size_t semi = line.find(';');
  const std::string size_text = line.substr(0, semi);
  if (size_text.empty() || size_text.size() > 15 ||
      !std::all_of(size_text.begin(), size_text.end(),
                   [](unsigned char c) { return std::isxdigit(c) != 0; })) {
    return Status::InvalidArgument("InvalidChunkSizeError: the aws-chunked chunk header '" +
                                   line.substr(0, 64) + "' does not start with a hex size");
  }
  remaining_ = std::stoull(size_text, nullptr, 16);
  // Signed chunks (each kept until the chain is checked) are at least 8 KiB
  // but the last data chunk, as S3 requires: a body cannot be cut into
  // millions of tiny chunks to fill the server's memory.
  if (hash_chunks_ && remaining_ > 0 && chunks_.size() > 0 && last_size_ < kMinSignedChunk) {
    return Status::InvalidArgument(
        "InvalidChunkSizeError: Only the last chunk is allowed to have a size less than 8192 "
        "bytes");
  }
  last_size_ = remaining_;
  if (!hash_chunks_) {  // nothing to keep: unsigned chunks are not verified one by one
    state_ = remaining_ == 0 ? State::kTrailers : State::kData;
    return Status::Ok();
  }
  Chunk chunk;
  if (semi != std::string::npos) {
    const std::string ext = line.substr(semi + 1);
    constexpr std::string_view kSig = "chunk-signature=";
    if (ext.rfind(kSig, 0) == 0) chunk.signature = ext.substr(kSig.size());
  }
  chunks_.push_back(std::move(chunk));
  if (hash_chunks_) EVP_DigestInit_ex(hash_->ctx, EVP_sha256(), nullptr);
  state_ = remaining_ == 0 ? State::kTrailers : State::kData;
  if (remaining_ == 0) chunks_.back().sha256_hex = kEmptySha256;
  return Status::Ok();
}

Status AwsChunkedDecoder::Feed(std::string_view in,
                               const std::function<Status(std::string_view)>& data) {
  while (!in.empty()) {
    switch (state_) {
      case State::kDone:
        return Status::InvalidArgument(
            "IncompleteBody: bytes follow the final aws-chunked chunk and its trailers");
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size()));
        if (hash_chunks_) EVP_DigestUpdate(hash_->ctx, in.data(), n);
        RETURN_IF_ERROR(data(in.substr(0, n)));
        in.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) {
          if (hash_chunks_) {
            unsigned char out[EVP_MAX_MD_SIZE];
            unsigned int len = 0;
            EVP_DigestFinal_ex(hash_->ctx, out, &len);
            chunks_.back().sha256_hex =
                HexEncode(std::string_view(reinterpret_cast<char*>(out), len));
          }
          state_ = State::kDataEnd;
        }
        break;
      }
      case State::kDataEnd:
      case State::kSizeLine:
      case State::kTrailers: {
        const size_t nl = in.find('\n');
        const size_t take = nl == std::string_view::npos ? in.size() : nl + 1;
        line_.append(in.substr(0, take));
        in.remove_prefix(take);
        if (line_.size() > kMaxLine) {
          return Status::InvalidArgument("IncompleteBody: an aws-chunked header line exceeds " +
                                         std::to_string(kMaxLine) + " bytes");
        }
        if (nl == std::string_view::npos) break;
        std::string line = line_.substr(0, line_.size() - 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        line_.clear();
        if (state_ == State::kDataEnd) {
          if (!line.empty()) {
            return Status::InvalidArgument(
                "IncompleteBody: an aws-chunked chunk is longer than its size says");
          }
          state_ = State::kSizeLine;
        } else if (state_ == State::kSizeLine) {
          RETURN_IF_ERROR(OnSizeLine(line));
        } else if (line.empty()) {
          state_ = State::kDone;
        } else {
          const size_t colon = line.find(':');
          if (colon == std::string::npos) {
            return Status::InvalidArgument("IncompleteBody: the aws-chunked trailer '" +
                                           line.substr(0, 64) + "' has no ':'");
          }
          std::string name = line.substr(0, colon);
          std::transform(name.begin(), name.end(), name.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
          std::string value = line.substr(colon + 1);
          while (!value.empty() && value.front() == ' ') value.erase(value.begin());
          trailers_[name] = value;
        }
        break;
      }
    }
  }
  return Status::Ok();
}

Status VerifyChunkSignatures(const std::vector<AwsChunkedDecoder::Chunk>& chunks,
                             std::string_view seed_signature, std::string_view signing_key,
                             std::string_view amz_date, std::string_view scope) {
  // A signed body ends with its empty final chunk: one cut short is refused here too.
  if (chunks.empty() || chunks.back().sha256_hex != kEmptySha256) {
    return Status::PermissionDenied(
        "IncompleteBody: the aws-chunked body has no final chunk (it was cut short)");
  }
  std::string previous(seed_signature);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const AwsChunkedDecoder::Chunk& c = chunks[i];
    std::string to_sign = "AWS4-HMAC-SHA256-PAYLOAD\n";
    to_sign.append(amz_date).append("\n").append(scope).append("\n");
    to_sign += previous + "\n" + kEmptySha256 + "\n" + c.sha256_hex;
    const std::string expected = HexEncode(HmacSha256(signing_key, to_sign));
    if (!ConstantTimeEquals(expected, c.signature)) {
      return Status::PermissionDenied(
          "SignatureDoesNotMatch: the signature of aws-chunked chunk " + std::to_string(i + 1) +
          " of " + std::to_string(chunks.size()) +
          " does not match: the body was changed in flight or signed with another key");
    }
    previous = c.signature;
  }
  return Status::Ok();
}

}  // namespace lote::api
