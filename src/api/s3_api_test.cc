// S3Api without sockets: requests built by hand, the bucket folders in a
// temporary directory, no authentication (tests/api/test_s3.py drives the
// signed protocol with the aws CLI and boto3 against a real server).
#include "api/s3_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/clock.h"

namespace lote::api {
namespace {

class S3ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("s3_api_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    auto buckets = objstore::Buckets::Open(dir_.string());
    ASSERT_TRUE(buckets.ok()) << buckets.status().ToString();
    buckets_ = std::move(*buckets);
    S3Options options;
    options.buckets = buckets_.get();
    options.clock = &clock_;
    api_ = std::make_unique<S3Api>(options);
    HttpResponse created = Call("PUT", "/bkt");
    ASSERT_EQ(created.status, 200) << created.body;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static HttpRequest Req(const std::string& method, const std::string& path,
                         const std::string& query = "",
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpRequest r;
    r.method = method;
    r.raw_path = path;
    r.raw_query = query;
    r.headers = std::move(headers);
    if (!r.HasHeader("host")) r.headers.emplace_back("Host", "127.0.0.1:7480");
    return r;
  }

  HttpResponse Send(HttpRequest r, const std::string& body = "") {
    if (std::shared_ptr<BodySink> sink = api_->BodySinkFor(r)) {
      if (Status refusal = sink->Refusal(); !refusal.ok()) {
        return api_->TransportError(r, 400, refusal);
      }
      if (Status st = sink->Write(body); !st.ok()) return api_->TransportError(r, 400, st);
      r.body_sink = sink;
    } else {
      r.body = body;
    }
    return api_->Handle(r, "req-1", /*verify=*/false, "");
  }

  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& query = "", const std::string& body = "",
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
    return Send(Req(method, path, query, std::move(headers)), body);
  }

  // The bytes of a response: its file body, or its body.
  static std::string Bytes(const HttpResponse& r) {
    if (!r.file) return r.body;
    std::string out(r.file->length, '\0');
    EXPECT_EQ(::pread(*r.file->fd, out.data(), out.size(), static_cast<off_t>(r.file->offset)),
              static_cast<ssize_t>(out.size()));
    return out;
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
    return "";
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<objstore::Buckets> buckets_;
  std::unique_ptr<S3Api> api_;
};

TEST_F(S3ApiTest, PutThenGetWithRangesAndConditions) {
  HttpResponse put = Call("PUT", "/bkt/dir/hello.txt", "", "hello world",
                          {{"Content-Type", "text/plain"}, {"x-amz-meta-Team", "ml"}});
  ASSERT_EQ(put.status, 200) << put.body;
  // MD5("hello world")
  EXPECT_EQ(Header(put, "ETag"), "\"5eb63bbbe01eeed093cb22bb8f5acdc3\"");

  HttpResponse get = Call("GET", "/bkt/dir/hello.txt");
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(Bytes(get), "hello world");
  EXPECT_EQ(Header(get, "Content-Type"), "text/plain");
  EXPECT_EQ(Header(get, "x-amz-meta-team"), "ml");

  struct RangeCase {
    std::string range;
    int status;
    std::string bytes;
    std::string content_range;
  };
  for (const RangeCase& c : std::vector<RangeCase>{
           {"bytes=0-4", 206, "hello", "bytes 0-4/11"},
           {"bytes=6-", 206, "world", "bytes 6-10/11"},
           {"bytes=-5", 206, "world", "bytes 6-10/11"},
           {"bytes=6-100", 206, "world", "bytes 6-10/11"},
           {"bytes=5-2", 200, "hello world", ""},  // invalid: ignored (RFC 7233)
           {"bytes=0-1,3-4", 200, "hello world", ""},
       }) {
    HttpResponse r = Call("GET", "/bkt/dir/hello.txt", "", "", {{"Range", c.range}});
    EXPECT_EQ(r.status, c.status) << c.range;
    EXPECT_EQ(Bytes(r), c.bytes) << c.range;
    EXPECT_EQ(Header(r, "Content-Range"), c.content_range) << c.range;
  }
  HttpResponse beyond = Call("GET", "/bkt/dir/hello.txt", "", "", {{"Range", "bytes=11-20"}});
  EXPECT_EQ(beyond.status, 416);
  EXPECT_NE(beyond.body.find("<Code>InvalidRange</Code>"), std::string::npos) << beyond.body;

  const std::string etag = Header(put, "ETag");
  EXPECT_EQ(Call("GET", "/bkt/dir/hello.txt", "", "", {{"If-None-Match", etag}}).status, 304);
  EXPECT_EQ(Call("GET", "/bkt/dir/hello.txt", "", "", {{"If-Match", etag}}).status, 200);
  HttpResponse failed = Call("GET", "/bkt/dir/hello.txt", "", "", {{"If-Match", "\"other\""}});
  EXPECT_EQ(failed.status, 412);
  EXPECT_NE(failed.body.find("<Code>PreconditionFailed</Code>"), std::string::npos);
  HttpResponse head = Call("HEAD", "/bkt/dir/hello.txt");
  EXPECT_EQ(head.status, 200);
  ASSERT_TRUE(head.file.has_value());
  EXPECT_EQ(head.file->length, 11u);

  HttpResponse overridden =
      Call("GET", "/bkt/dir/hello.txt", "response-content-type=application%2Fjson");
  EXPECT_EQ(Header(overridden, "Content-Type"), "application/json");

  // If-None-Match: * refuses to replace an existing key.
  HttpResponse again = Call("PUT", "/bkt/dir/hello.txt", "", "other", {{"If-None-Match", "*"}});
  EXPECT_EQ(again.status, 412) << again.body;
  EXPECT_EQ(Bytes(Call("GET", "/bkt/dir/hello.txt")), "hello world");
}

TEST_F(S3ApiTest, VirtualHostsNameTheBucket) {
  ASSERT_EQ(Call("PUT", "/bkt/k", "", "v").status, 200);
  for (const char* host :
       {"bkt.s3.localhost:7480", "bkt.s3.us-east-1.amazonaws.com", "bkt.localhost"}) {
    HttpRequest r = Req("GET", "/k", "", {{"Host", host}});
    EXPECT_TRUE(api_->Claims(r)) << host;
    HttpResponse got = Send(r);
    EXPECT_EQ(got.status, 200) << host << ": " << got.body;
    EXPECT_EQ(Bytes(got), "v") << host;
  }
  // A Batch call on the same port is not S3's.
  HttpRequest batch = Req("POST", "/v1/describejobs", "",
                          {{"Authorization",
                            "AWS4-HMAC-SHA256 Credential=AK/20261206/us-east-1/batch/aws4_request, "
                            "SignedHeaders=host, Signature=00"}});
  EXPECT_FALSE(api_->Claims(batch));
  HttpRequest s3 = Req("GET", "/bkt/k", "",
                       {{"Authorization",
                         "AWS4-HMAC-SHA256 Credential=AK/20261206/us-east-1/s3/aws4_request, "
                         "SignedHeaders=host, Signature=00"}});
  EXPECT_TRUE(api_->Claims(s3));
}

TEST_F(S3ApiTest, ListObjectsV2PagesDelimitsAndEncodes) {
  for (const char* key : {"a/1", "a/2", "b/1", "c d", "e"})
    ASSERT_EQ(
        Call("PUT", std::string("/bkt/") + (std::string(key) == "c d" ? "c%20d" : key), "", "x")
            .status,
        200);
  std::vector<std::string> seen;
  std::string token;
  for (int page = 0; page < 10; ++page) {
    std::string query = "list-type=2&max-keys=2";
    if (!token.empty()) query += "&continuation-token=" + token;
    HttpResponse r = Call("GET", "/bkt", query);
    ASSERT_EQ(r.status, 200) << r.body;
    for (size_t at = r.body.find("<Key>"); at != std::string::npos;
         at = r.body.find("<Key>", at + 1)) {
      seen.push_back(r.body.substr(at + 5, r.body.find("</Key>", at) - at - 5));
    }
    const size_t next = r.body.find("<NextContinuationToken>");
    if (next == std::string::npos) {
      EXPECT_NE(r.body.find("<IsTruncated>false</IsTruncated>"), std::string::npos);
      break;
    }
    token = r.body.substr(next + 23, r.body.find("</NextContinuationToken>") - next - 23);
    std::string encoded;
    for (char c : token) encoded += c == '=' ? "%3D" : c == '+' ? "%2B" : std::string(1, c);
    token = encoded;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a/1", "a/2", "b/1", "c d", "e"}));

  HttpResponse delimited = Call("GET", "/bkt", "list-type=2&delimiter=%2F&encoding-type=url");
  ASSERT_EQ(delimited.status, 200);
  EXPECT_NE(delimited.body.find("<CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes>"),
            std::string::npos)
      << delimited.body;
  EXPECT_NE(delimited.body.find("<Key>c%20d</Key>"), std::string::npos) << delimited.body;
  EXPECT_EQ(delimited.body.find("<Key>a/1</Key>"), std::string::npos);

  HttpResponse bad = Call("GET", "/bkt", "list-type=2&continuation-token=bm90LWxvdGU%3D");
  EXPECT_EQ(bad.status, 400);
}

TEST_F(S3ApiTest, ErrorsAreS3Xml) {
  HttpResponse no_bucket = Call("GET", "/nobucket/k");
  EXPECT_EQ(no_bucket.status, 404);
  EXPECT_NE(no_bucket.body.find("<Code>NoSuchBucket</Code>"), std::string::npos);
  HttpResponse no_key = Call("GET", "/bkt/missing");
  EXPECT_EQ(no_key.status, 404);
  EXPECT_NE(no_key.body.find("<Code>NoSuchKey</Code>"), std::string::npos);
  EXPECT_EQ(Call("PUT", "/bkt").status, 200);  // us-east-1: re-creating your bucket succeeds
  EXPECT_EQ(Call("PUT", "/Bad_Name").status, 400);
  HttpResponse tagging = Call("GET", "/bkt", "tagging");
  EXPECT_EQ(tagging.status, 501);
  EXPECT_NE(tagging.body.find("<Code>NotImplemented</Code>"), std::string::npos);
  ASSERT_EQ(Call("PUT", "/bkt/k", "", "v").status, 200);
  HttpResponse not_empty = Call("DELETE", "/bkt");
  EXPECT_EQ(not_empty.status, 409);
  EXPECT_NE(not_empty.body.find("<Code>BucketNotEmpty</Code>"), std::string::npos);
  EXPECT_EQ(Call("DELETE", "/bkt/k").status, 204);
  EXPECT_EQ(Call("DELETE", "/bkt/k").status, 204);  // a missing key is not an error
  EXPECT_EQ(Call("DELETE", "/bkt").status, 204);
  HttpResponse put_nowhere = Call("PUT", "/bkt/k", "", "v");
  EXPECT_EQ(put_nowhere.status, 404) << put_nowhere.body;
}

TEST_F(S3ApiTest, AwsChunkedBodiesDecodeAndTheirChecksumsAreChecked) {
  // CRC32("hello") = 0x3610a686.
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Encoding", "aws-chunked,gzip"},
      {"x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"},
      {"x-amz-decoded-content-length", "5"},
      {"x-amz-trailer", "x-amz-checksum-crc32"}};
  HttpResponse put = Call("PUT", "/bkt/chunked", "",
                          "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n", headers);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Header(put, "x-amz-checksum-crc32"), "NhCmhg==");
  HttpResponse get = Call("GET", "/bkt/chunked", "", "", {{"x-amz-checksum-mode", "ENABLED"}});
  EXPECT_EQ(Bytes(get), "hello");
  EXPECT_EQ(Header(get, "Content-Encoding"), "gzip");  // aws-chunked was the transfer's
  EXPECT_EQ(Header(get, "x-amz-checksum-crc32"), "NhCmhg==");

  HttpResponse bad = Call("PUT", "/bkt/chunked2", "",
                          "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", headers);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("<Code>BadDigest</Code>"), std::string::npos) << bad.body;
  EXPECT_EQ(Call("HEAD", "/bkt/chunked2").status, 404);

  HttpResponse cut = Call("PUT", "/bkt/chunked3", "", "5\r\nhel", headers);
  EXPECT_EQ(cut.status, 400);
  EXPECT_NE(cut.body.find("<Code>IncompleteBody</Code>"), std::string::npos) << cut.body;

  HttpResponse md5 =
      Call("PUT", "/bkt/md5", "", "hello", {{"Content-MD5", "AAAAAAAAAAAAAAAAAAAAAA=="}});
  EXPECT_EQ(md5.status, 400);
  EXPECT_NE(md5.body.find("<Code>BadDigest</Code>"), std::string::npos) << md5.body;
}

TEST_F(S3ApiTest, MultipartUploadEndToEnd) {
  HttpResponse created = Call("POST", "/bkt/big", "uploads");
  ASSERT_EQ(created.status, 200) << created.body;
  const size_t at = created.body.find("<UploadId>");
  const std::string id = created.body.substr(at + 10, created.body.find("</UploadId>") - at - 10);
  const std::string part1(objstore::Buckets::kMinPartBytes, 'a');
  HttpResponse p1 = Call("PUT", "/bkt/big", "partNumber=1&uploadId=" + id, part1);
  ASSERT_EQ(p1.status, 200) << p1.body;
  HttpResponse p2 = Call("PUT", "/bkt/big", "partNumber=2&uploadId=" + id, "tail");
  ASSERT_EQ(p2.status, 200) << p2.body;
  HttpResponse parts = Call("GET", "/bkt/big", "uploadId=" + id);
  EXPECT_NE(parts.body.find("<PartNumber>2</PartNumber>"), std::string::npos) << parts.body;
  const std::string complete = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" +
                               Header(p1, "ETag") +
                               "</ETag></Part><Part><PartNumber>2</PartNumber><ETag>" +
                               Header(p2, "ETag") + "</ETag></Part></CompleteMultipartUpload>";
  HttpResponse done = Call("POST", "/bkt/big", "uploadId=" + id, complete);
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_NE(done.body.find("-2&quot;</ETag>"), std::string::npos) << done.body;
  HttpResponse got = Call("GET", "/bkt/big");
  EXPECT_EQ(Bytes(got), part1 + "tail");
  // A multipart object is read by range; by part number only part 1 of a
  // single-part object (what S3 answers for it).
  EXPECT_EQ(Header(got, "x-amz-mp-parts-count"), "");
  EXPECT_EQ(Call("GET", "/bkt/big", "partNumber=1").status, 501);
  EXPECT_EQ(Call("GET", "/bkt/big", "uploadId=" + id).status, 404);
}

TEST_F(S3ApiTest, ResponseOverridesCannotSplitTheAnswer) {
  ASSERT_EQ(Call("PUT", "/bkt/k", "", "v").status, 200);
  HttpResponse r = Call("GET", "/bkt/k", "response-content-type=x%0D%0ASet-Cookie:%20s=1");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("<Code>InvalidArgument</Code>"), std::string::npos);
}

TEST_F(S3ApiTest, ListMultipartUploadsPagesThroughUploadsOfOneKey) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    HttpResponse created = Call("POST", "/bkt/same", "uploads");
    ASSERT_EQ(created.status, 200);
    const size_t at = created.body.find("<UploadId>");
    ids.push_back(created.body.substr(at + 10, created.body.find("</UploadId>") - at - 10));
  }
  std::vector<std::string> seen;
  std::string query = "uploads&max-uploads=1";
  for (int page = 0; page < 5; ++page) {
    HttpResponse r = Call("GET", "/bkt", query);
    ASSERT_EQ(r.status, 200) << r.body;
    const size_t at = r.body.find("<UploadId>");
    if (at == std::string::npos) break;
    seen.push_back(r.body.substr(at + 10, r.body.find("</UploadId>") - at - 10));
    if (r.body.find("<IsTruncated>true</IsTruncated>") == std::string::npos) break;
    query = "uploads&max-uploads=1&key-marker=same&upload-id-marker=" + seen.back();
  }
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, ids);
  EXPECT_EQ(seen.size(), 3u);
}

}  // namespace
}  // namespace lote::api
