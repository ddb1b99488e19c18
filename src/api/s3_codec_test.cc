// Tests for S3's body codecs: the digests of a body (s3_digest), the
// aws-chunked content encoding (s3_chunked) and the XML of request bodies
// (s3_xml). Expected values are public known answers, not outputs of this code:
// RFC 3720 and the "123456789" check values for the CRCs, the MD5/SHA-1/SHA-256
// of "" and "abc" (FIPS 180 / RFC 1321), and AWS's documented example of a
// signed streaming upload ("Signature Calculations for the Authorization
// Header: Transferring Payload in Multiple Chunks", 66560 bytes of 'a').

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/s3_chunked.h"
#include "api/s3_digest.h"
#include "api/s3_xml.h"
#include "common/sigv4.h"

namespace lote::api {
namespace {

// ---------------------------------------------------------------------------
// s3_digest

TEST(Crc32cTest, KnownAnswers) {
  EXPECT_EQ(Crc32c(0, ""), 0u);
  EXPECT_EQ(Crc32c(0, "123456789"), 0xE3069283u);  // the CRC-32C check value
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, 32 bytes of 0xff.
  EXPECT_EQ(Crc32c(0, std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(0, std::string(32, '\xff')), 0x62A8AB43u);
}

TEST(Crc32cTest, ContinuesFromAPreviousValue) {
  EXPECT_EQ(Crc32c(Crc32c(0, "1234"), "56789"), 0xE3069283u);
  uint32_t crc = 0;
  for (char c : std::string_view("123456789")) crc = Crc32c(crc, std::string_view(&c, 1));
  EXPECT_EQ(crc, 0xE3069283u);
}

TEST(BodyDigestTest, Md5AndSha256OfEmptyAndAbc) {
  BodyDigest empty(/*sha256=*/true, "");
  EXPECT_EQ(empty.Md5Hex(), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(empty.Sha256Hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(empty.ChecksumBase64(), "");

  BodyDigest abc(/*sha256=*/true, "");
  abc.Update("abc");
  EXPECT_EQ(abc.Md5Hex(), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(abc.Sha256Hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(BodyDigestTest, NoSha256UnlessAskedFor) {
  BodyDigest d(/*sha256=*/false, "");
  d.Update("abc");
  EXPECT_EQ(d.Md5Hex(), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(d.Sha256Hex(), "");
}

struct ChecksumCase {
  const char* algorithm;
  const char* body;
  const char* base64;  // base64 of the big-endian CRC, or of the digest
};

// CRC-32("123456789") = 0xCBF43926, CRC-32("abc") = 0x352441C2,
// CRC-32C("123456789") = 0xE3069283, CRC-32C("abc") = 0x364B3FB7.
constexpr ChecksumCase kChecksumCases[] = {
    {"CRC32", "", "AAAAAA=="},
    {"CRC32", "abc", "NSRBwg=="},
    {"CRC32", "123456789", "y/Q5Jg=="},
    {"CRC32C", "", "AAAAAA=="},
    {"CRC32C", "abc", "Nks/tw=="},
    {"CRC32C", "123456789", "4waSgw=="},
    {"SHA1", "", "2jmj7l5rSw0yVb/vlWAYkK/YBwk="},
    {"SHA1", "abc", "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="},
    {"SHA256", "", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
    {"SHA256", "abc", "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="},
};

TEST(BodyDigestTest, ChecksumsAsS3SendsThem) {
  for (const ChecksumCase& c : kChecksumCases) {
    SCOPED_TRACE(std::string(c.algorithm) + " of '" + c.body + "'");
    BodyDigest whole(/*sha256=*/true, c.algorithm);
    EXPECT_EQ(whole.checksum_algorithm(), c.algorithm);
    whole.Update(c.body);
    EXPECT_EQ(whole.ChecksumBase64(), c.base64);

    // The same bytes in one-byte updates give the same checksum.
    BodyDigest pieces(/*sha256=*/false, c.algorithm);
    for (char ch : std::string_view(c.body)) pieces.Update(std::string_view(&ch, 1));
    EXPECT_EQ(pieces.ChecksumBase64(), c.base64);
  }
}

TEST(BodyDigestTest, ChecksumDoesNotDisturbTheOtherDigests) {
  // SHA256 as the checksum and as the payload hash are separate contexts.
  BodyDigest d(/*sha256=*/true, "SHA256");
  d.Update("a");
  d.Update("bc");
  EXPECT_EQ(d.Md5Hex(), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(d.Sha256Hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(d.ChecksumBase64(), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
}

TEST(BodyDigestTest, KnowsS3sChecksumAlgorithms) {
  for (const char* a : {"CRC32", "CRC32C", "SHA1", "SHA256"}) EXPECT_TRUE(IsS3ChecksumAlgorithm(a));
  for (const char* a : {"", "crc32", "MD5", "SHA512", "CRC32 "})
    EXPECT_FALSE(IsS3ChecksumAlgorithm(a));
}

// ---------------------------------------------------------------------------
// s3_chunked

// AWS's example: PUT of 66560 bytes of 'a' in chunks of 65536, 1024 and 0.
constexpr char kExampleSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kExampleAmzDate[] = "20130524T000000Z";
constexpr char kExampleScope[] = "20130524/us-east-1/s3/aws4_request";
constexpr char kExampleSeed[] = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
constexpr char kExampleSig1[] = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648";
constexpr char kExampleSig2[] = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497";
constexpr char kExampleSig3[] = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9";
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string ExampleBody() {
  return std::string("10000;chunk-signature=") + kExampleSig1 + "\r\n" + std::string(65536, 'a') +
         "\r\n" + "400;chunk-signature=" + kExampleSig2 + "\r\n" + std::string(1024, 'a') + "\r\n" +
         "0;chunk-signature=" + kExampleSig3 + "\r\n\r\n";
}

std::string ExampleSigningKey() {
  return sigv4::SigningKey(kExampleSecret, "20130524", "us-east-1", "s3");
}

Status VerifyExample(const std::vector<AwsChunkedDecoder::Chunk>& chunks,
                     std::string_view seed = kExampleSeed) {
  return VerifyChunkSignatures(chunks, seed, ExampleSigningKey(), kExampleAmzDate, kExampleScope);
}

// Feeds `encoded` in pieces whose sizes `next_size` picks (at least 1),
// appending the decoded bytes to `decoded`; stops at the first error.
Status FeedInPieces(AwsChunkedDecoder* decoder, std::string_view encoded,
                    const std::function<size_t()>& next_size, std::string* decoded) {
  const auto sink = [decoded](std::string_view bytes) {
    decoded->append(bytes);
    return Status::Ok();
  };
  while (!encoded.empty()) {
    const size_t n = std::min(encoded.size(), std::max<size_t>(1, next_size()));
    RETURN_IF_ERROR(decoder->Feed(encoded.substr(0, n), sink));
    encoded.remove_prefix(n);
  }
  return Status::Ok();
}

// One way of cutting an encoded stream into pieces.
struct Split {
  std::string name;
  std::function<size_t()> next_size;
};

Split Whole() {
  return {"whole", [] { return SIZE_MAX; }};
}

std::vector<Split> Splits() {
  std::vector<Split> splits = {
      Whole(),
      {"byte by byte", [] { return size_t{1}; }},
  };
  for (uint32_t seed : {1u, 2u, 3u, 42u}) {
    auto rng = std::make_shared<std::mt19937>(seed);
    // Mostly short pieces (cutting inside header lines and CRLFs), some long.
    splits.push_back({"random seed " + std::to_string(seed), [rng] {
                        const uint32_t r = (*rng)();
                        return static_cast<size_t>(1 + (r % 4 == 0 ? r % 20000 : r % 7));
                      }});
  }
  return splits;
}

struct Decoded {
  Status status;
  std::string data;
  bool done = false;
  std::vector<AwsChunkedDecoder::Chunk> chunks;
  std::map<std::string, std::string> trailers;
};

Decoded Decode(std::string_view encoded, const Split& split, bool hash_chunks = true) {
  AwsChunkedDecoder decoder;
  decoder.set_hash_chunks(hash_chunks);
  Decoded out;
  out.status = FeedInPieces(&decoder, encoded, split.next_size, &out.data);
  out.done = decoder.done();
  out.chunks = decoder.chunks();
  out.trailers = decoder.trailers();
  return out;
}

TEST(AwsChunkedDecoderTest, AwsExampleDecodesTheSameInAnyPieces) {
  const std::string body = ExampleBody();
  for (const Split& split : Splits()) {
    SCOPED_TRACE(split.name);
    Decoded d = Decode(body, split);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.done);
    EXPECT_EQ(d.data, std::string(66560, 'a'));
    EXPECT_TRUE(d.trailers.empty());
    ASSERT_EQ(d.chunks.size(), 3u);
    EXPECT_EQ(d.chunks[0].signature, kExampleSig1);
    EXPECT_EQ(d.chunks[1].signature, kExampleSig2);
    EXPECT_EQ(d.chunks[2].signature, kExampleSig3);
    // SHA-256 of 65536 'a' is in AWS's string to sign for the first chunk.
    EXPECT_EQ(d.chunks[0].sha256_hex,
              "bf718b6f653bebc184e1479f1935b8da974d701b893afcf49e701f3e2f9f9c5a");
    EXPECT_EQ(d.chunks[1].sha256_hex,
              "2edc986847e209b4016e141a6dc8716d3207350f416969382d431539bf292e4a");
    EXPECT_EQ(d.chunks[2].sha256_hex, kEmptySha256);
    Status verified = VerifyExample(d.chunks);
    EXPECT_TRUE(verified.ok()) << verified.ToString();
  }
}

TEST(AwsChunkedDecoderTest, TamperedChunkFailsVerification) {
  std::string body = ExampleBody();
  // One byte of the second chunk's data changes in flight.
  const size_t second_data = body.find("400;chunk-signature=");
  ASSERT_NE(second_data, std::string::npos);
  body[body.find("\r\n", second_data) + 2 + 100] = 'b';
  Decoded d = Decode(body, Whole());
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  ASSERT_EQ(d.chunks.size(), 3u);
  Status s = VerifyExample(d.chunks);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("SignatureDoesNotMatch"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("chunk 2 of 3"), std::string::npos) << s.ToString();
}

TEST(AwsChunkedDecoderTest, WrongSeedKeyOrChainFailsVerification) {
  Decoded d = Decode(ExampleBody(), Whole());
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  ASSERT_TRUE(VerifyExample(d.chunks).ok());

  std::string other_seed = kExampleSeed;
  other_seed[0] = '5';
  EXPECT_EQ(VerifyExample(d.chunks, other_seed).code(), StatusCode::kPermissionDenied);

  const std::string other_key = sigv4::SigningKey(kExampleSecret, "20130525", "us-east-1", "s3");
  EXPECT_FALSE(
      VerifyChunkSignatures(d.chunks, kExampleSeed, other_key, kExampleAmzDate, kExampleScope)
          .ok());
  EXPECT_FALSE(VerifyChunkSignatures(d.chunks, kExampleSeed, ExampleSigningKey(),
                                     "20130524T000001Z", kExampleScope)
                   .ok());

  // A chunk dropped from the chain: the next one was signed after it.
  std::vector<AwsChunkedDecoder::Chunk> dropped = {d.chunks[0], d.chunks[2]};
  Status s = VerifyExample(dropped);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("chunk 2 of 2"), std::string::npos) << s.ToString();

  // A signature of the right length but changed.
  std::vector<AwsChunkedDecoder::Chunk> forged = d.chunks;
  forged[0].signature[63] = forged[0].signature[63] == '0' ? '1' : '0';
  EXPECT_NE(VerifyExample(forged).message().find("chunk 1 of 3"), std::string::npos);
}

TEST(AwsChunkedDecoderTest, UnsignedChunksDecodeAndDoNotVerify) {
  const std::string body = "5\r\nhello\r\nA\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n";
  for (const Split& split : Splits()) {
    SCOPED_TRACE(split.name);
    // Unsigned (STREAMING-UNSIGNED-PAYLOAD-TRAILER): any chunk sizes, nothing kept.
    Decoded d = Decode(body, split, /*hash_chunks=*/false);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.done);
    EXPECT_EQ(d.data, "hello0123456789abcdefghij");
    EXPECT_TRUE(d.chunks.empty());
    // Signed, the same small chunks are refused: only the last may be under 8 KiB.
    Decoded signed_small = Decode(body, split);
    EXPECT_FALSE(signed_small.status.ok());
    EXPECT_NE(signed_small.status.message().find("InvalidChunkSizeError"), std::string::npos);
  }
  // One small data chunk then the final one is fine when signed.
  Decoded one = Decode("5\r\nhello\r\n0\r\n\r\n", Splits()[0]);
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  ASSERT_EQ(one.chunks.size(), 2u);
  EXPECT_EQ(one.chunks[0].signature, "");
  EXPECT_EQ(one.chunks[0].sha256_hex,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  EXPECT_EQ(one.chunks[1].sha256_hex, kEmptySha256);
  EXPECT_FALSE(VerifyExample(one.chunks).ok());
}

TEST(AwsChunkedDecoderTest, TrailersAreParsed) {
  // CRC-32("hello") = 0x3610A686 → "NhCmhg==", CRC-32C("hello") = 0x9A71BB4C → "mnG7TA==".
  const std::string body =
      "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n"
      "X-Amz-Checksum-CRC32C:   mnG7TA==\r\n"
      "x-amz-trailer-signature:abcd==\r\n\r\n";
  for (const Split& split : Splits()) {
    SCOPED_TRACE(split.name);
    Decoded d = Decode(body, split);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.done);
    EXPECT_EQ(d.data, "hello");
    EXPECT_EQ(d.trailers, (std::map<std::string, std::string>{
                              {"x-amz-checksum-crc32", "NhCmhg=="},
                              {"x-amz-checksum-crc32c", "mnG7TA=="},
                              {"x-amz-trailer-signature", "abcd=="},
                          }));
    // The trailer is what BodyDigest computes over the decoded data.
    BodyDigest digest(/*sha256=*/false, "CRC32");
    digest.Update(d.data);
    EXPECT_EQ(digest.ChecksumBase64(), d.trailers["x-amz-checksum-crc32"]);
  }
  Decoded one = Decode("0\r\nx-amz-checksum-crc32:abcd==\r\n\r\n", Whole());
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  EXPECT_TRUE(one.done);
  EXPECT_EQ(one.data, "");
  EXPECT_EQ(one.trailers.at("x-amz-checksum-crc32"), "abcd==");
}

TEST(AwsChunkedDecoderTest, TruncatedStreamIsNotDone) {
  for (std::string_view body : {"", "5\r\nhel", "5\r\nhello", "5\r\nhello\r\n",
                                "5\r\nhello\r\n0\r\n", "0\r\nx-amz-checksum-crc32:abcd==\r\n"}) {
    SCOPED_TRACE(std::string(body));
    Decoded d = Decode(body, Whole());
    EXPECT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_FALSE(d.done);
  }
}

TEST(AwsChunkedDecoderTest, MalformedStreamsAreErrors) {
  const std::string long_line(5000, '1');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad hex size", "zz\r\nhello\r\n0\r\n\r\n"},
      {"negative size", "-5\r\nhello\r\n0\r\n\r\n"},
      {"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n"},
      {"empty size", "\r\nhello\r\n0\r\n\r\n"},
      {"space in size", "5 \r\nhello\r\n0\r\n\r\n"},
      {"size of 16 hex digits", "1000000000000000\r\nhello\r\n0\r\n\r\n"},
      {"missing CRLF after data", "5\r\nhello0\r\n\r\n"},
      {"data longer than size", "3\r\nhello\r\n0\r\n\r\n"},
      {"data shorter than size", "7\r\nhello\r\n0\r\n\r\n"},
      {"trailer without colon", "0\r\nx-amz-checksum-crc32\r\n\r\n"},
      {"header line too long", long_line},
  };
  for (const auto& [name, body] : cases) {
    for (const Split& split : Splits()) {
      SCOPED_TRACE(name + ", " + split.name);
      Decoded d = Decode(body, split);
      EXPECT_TRUE(d.status.IsInvalidArgument()) << d.status.ToString();
      EXPECT_FALSE(d.done);
    }
  }
}

TEST(AwsChunkedDecoderTest, BytesAfterTheEndAreAnError) {
  for (const Split& split : Splits()) {
    SCOPED_TRACE(split.name);
    Decoded d = Decode("5\r\nhello\r\n0\r\n\r\nextra", split);
    EXPECT_TRUE(d.status.IsInvalidArgument()) << d.status.ToString();
    EXPECT_EQ(d.data, "hello");
  }
}

TEST(AwsChunkedDecoderTest, SinkErrorStopsDecoding) {
  AwsChunkedDecoder decoder;
  Status s = decoder.Feed("5\r\nhello\r\n0\r\n\r\n",
                          [](std::string_view) { return Status::Unavailable("disk full"); });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(decoder.done());
}

// ---------------------------------------------------------------------------
// s3_xml

TEST(ParseXmlTest, CompleteMultipartUploadWithNamespace) {
  Result<XmlElement> xml = ParseXml(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
      "  <Part><ETag>&quot;a54357aff0632cce46d942af68356b38&quot;</ETag>"
      "<PartNumber>1</PartNumber></Part>\n"
      "  <Part><PartNumber>2</PartNumber><ETag>\"0c78aef83f66abc1fa1e8477f296d394\"</ETag>"
      "<ChecksumCRC32>NSRBwg==</ChecksumCRC32></Part>\n"
      "</CompleteMultipartUpload>");
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(xml->name, "CompleteMultipartUpload");
  ASSERT_EQ(xml->children.size(), 2u);
  const XmlElement& first = xml->children[0];
  EXPECT_EQ(first.name, "Part");
  ASSERT_NE(first.Child("ETag"), nullptr);
  EXPECT_EQ(first.Child("ETag")->text, "\"a54357aff0632cce46d942af68356b38\"");
  ASSERT_NE(first.Child("PartNumber"), nullptr);
  EXPECT_EQ(first.Child("PartNumber")->text, "1");
  EXPECT_EQ(first.Child("ChecksumCRC32"), nullptr);
  const XmlElement& second = xml->children[1];
  ASSERT_NE(second.Child("PartNumber"), nullptr);
  EXPECT_EQ(second.Child("PartNumber")->text, "2");
  EXPECT_EQ(second.Child("ETag")->text, "\"0c78aef83f66abc1fa1e8477f296d394\"");
  EXPECT_EQ(second.Child("ChecksumCRC32")->text, "NSRBwg==");
  // Child finds the first of several.
  ASSERT_NE(xml->Child("Part"), nullptr);
  EXPECT_EQ(xml->Child("Part"), &xml->children[0]);
  EXPECT_EQ(xml->Child("Missing"), nullptr);
  EXPECT_EQ(xml->Child("PartNumber"), nullptr);  // only direct children
}

TEST(ParseXmlTest, PrefixedNamespaceGivesLocalNames) {
  Result<XmlElement> xml = ParseXml(
      "<s3:Delete xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<s3:Object><s3:Key>a</s3:Key></s3:Object><s3:Quiet>true</s3:Quiet></s3:Delete>");
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(xml->name, "Delete");
  ASSERT_NE(xml->Child("Object"), nullptr);
  ASSERT_NE(xml->Child("Object")->Child("Key"), nullptr);
  EXPECT_EQ(xml->Child("Object")->Child("Key")->text, "a");
  EXPECT_EQ(xml->Child("Quiet")->text, "true");
}

TEST(ParseXmlTest, ManyChildrenKeepTheirText) {
  // Enough siblings that the children vector reallocates while parsing.
  std::string body = "<Delete>";
  for (int i = 0; i < 1000; ++i)
    body += "<Object><Key>k" + std::to_string(i) + "</Key><VersionId>v</VersionId></Object>";
  body += "</Delete>";
  Result<XmlElement> xml = ParseXml(body);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  ASSERT_EQ(xml->children.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    const XmlElement* key = xml->children[static_cast<size_t>(i)].Child("Key");
    ASSERT_NE(key, nullptr);
    EXPECT_EQ(key->text, "k" + std::to_string(i));
  }
}

TEST(ParseXmlTest, TextIsDecodedAndDirect) {
  Result<XmlElement> xml =
      ParseXml("<Key>a&amp;b&lt;&#x41;<![CDATA[<c>&amp;]]><Inner>x</Inner>z</Key>");
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(xml->text, "a&b<A<c>&amp;z");
  ASSERT_NE(xml->Child("Inner"), nullptr);
  EXPECT_EQ(xml->Child("Inner")->text, "x");
}

TEST(ParseXmlTest, MalformedXmlIsAnError) {
  for (std::string_view bad : {"", "not xml", "<a>", "<a></b>", "<a><b></a></b>", "<a/><b/>",
                               "<a>&bogus;</a>", "<x:a/>", "<a b=c/>"}) {
    SCOPED_TRACE(std::string(bad));
    Result<XmlElement> xml = ParseXml(bad);
    ASSERT_FALSE(xml.ok());
    EXPECT_TRUE(xml.status().IsInvalidArgument());
    EXPECT_EQ(xml.status().message().rfind("MalformedXML", 0), 0u) << xml.status().ToString();
  }
}

std::string Nested(int depth) {
  std::string xml;
  for (int i = 0; i < depth; ++i) xml += "<e>";
  xml += "deep";
  for (int i = 0; i < depth; ++i) xml += "</e>";
  return xml;
}

TEST(ParseXmlTest, DepthIsLimited) {
  Result<XmlElement> ok = ParseXml(Nested(32));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const XmlElement* e = &*ok;
  for (int i = 1; i < 32; ++i) {
    ASSERT_NE(e->Child("e"), nullptr) << "level " << i;
    e = e->Child("e");
  }
  EXPECT_EQ(e->text, "deep");
  EXPECT_TRUE(e->children.empty());

  Result<XmlElement> deep = ParseXml(Nested(33));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message().rfind("MalformedXML", 0), 0u) << deep.status().ToString();
}

TEST(XmlEscapeTest, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(XmlEscape(""), "");
  EXPECT_EQ(XmlEscape("plain key/é"), "plain key/é");
  EXPECT_EQ(XmlEscape("&<>\"'"), "&amp;&lt;&gt;&quot;&apos;");
  EXPECT_EQ(XmlEscape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(XmlEscape("&amp;"), "&amp;amp;");
}

TEST(XmlEscapeTest, EscapedTextParsesBackToItself) {
  for (std::string_view text : {"a&b<c>d\"e'f", "]]>", "line\r\nbreak", "tab\there"}) {
    SCOPED_TRACE(std::string(text));
    const std::string escaped = XmlEscape(text);
    Result<XmlElement> in_text = ParseXml("<Key>" + escaped + "</Key>");
    ASSERT_TRUE(in_text.ok()) << in_text.status().ToString();
    EXPECT_EQ(in_text->text, text);
    EXPECT_TRUE(ParseXml("<Key a=\"" + escaped + "\" b='" + escaped + "'/>").ok());
  }
}

}  // namespace
}  // namespace lote::api
