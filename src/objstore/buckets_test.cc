#include "objstore/buckets.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/crypto.h"
#include "common/files.h"

namespace lote::objstore {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed afterwards.
class BucketsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lote-buckets-test-" + std::to_string(::getpid()) + "-" + HexEncode(RandomBytes(4)));
    root_ = (dir_ / "s3").string();
    auto opened = Buckets::Open(root_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    buckets_ = std::move(*opened);
    ASSERT_TRUE(buckets_->CreateBucket("bkt", 1000).ok());
  }
  void TearDown() override {
    buckets_.reset();
    fs::remove_all(dir_);
  }

  std::string PathOf(const std::string& rel) const { return root_ + "/" + rel; }

  Result<ObjectMeta> Put(const std::string& key, std::string_view data, ObjectMeta meta = {},
                         bool if_none_match = false, const std::string& bucket = "bkt") {
    ASSIGN_OR_RETURN(std::unique_ptr<PendingFile> file, buckets_->NewPendingFile(bucket));
    RETURN_IF_ERROR(file->Append(data));
    meta.etag = Md5Hex(data);
    return buckets_->PutObject(bucket, key, std::move(file), std::move(meta), if_none_match);
  }

  // The bytes of an object, read through its descriptor.
  std::string Read(const std::string& bucket, const std::string& key) {
    auto object = buckets_->GetObject(bucket, key);
    EXPECT_TRUE(object.ok()) << object.status().ToString();
    if (!object.ok()) return "";
    std::string out(object->meta.size, '\0');
    EXPECT_EQ(::pread(*object->fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    return out;
  }

  static std::string Md5Raw(std::string_view data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), out, &n, EVP_md5(), nullptr);
    return std::string(reinterpret_cast<const char*>(out), n);
  }
  static std::string Md5Hex(std::string_view data) { return HexEncode(Md5Raw(data)); }

  static void WriteRaw(const std::string& path, std::string_view data) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << data;
  }

  fs::path dir_;
  std::string root_;
  std::unique_ptr<Buckets> buckets_;
};

TEST(BucketsErrorTest, CodesLeadTheMessage) {
  Status st = S3Error(Status::NotFound(""), "NoSuchKey", "the key k does not exist");
  EXPECT_TRUE(st.IsNotFound());
  EXPECT_EQ(st.message(), "NoSuchKey: the key k does not exist");
  EXPECT_EQ(S3ErrorCode(st), "NoSuchKey");
  EXPECT_EQ(S3ErrorCode(Status::Internal("cannot open /x: No such file")), "InternalError");
  EXPECT_EQ(S3ErrorCode(Status::Internal("disk full")), "InternalError");
}

TEST_F(BucketsTest, CreatesListsAndDeletesBuckets) {
  Status dup = buckets_->CreateBucket("bkt", 2000);
  EXPECT_TRUE(dup.IsAlreadyExists());
  EXPECT_EQ(S3ErrorCode(dup), "BucketAlreadyOwnedByYou");
  const std::vector<std::string> bad_names = {
      "ab", "Upper", "a_b", "-ab", "ab-", "a..b", "192.168.1.2", std::string(64, 'a'), ".abc"};
  for (const std::string& bad : bad_names) {
    Status st = buckets_->CreateBucket(bad, 1);
    EXPECT_TRUE(st.IsInvalidArgument()) << bad;
    EXPECT_EQ(S3ErrorCode(st), "InvalidBucketName") << bad;
  }
  ASSERT_TRUE(buckets_->CreateBucket("a.b-3", 3000).ok());
  fs::create_directories(PathOf("made-by-hand"));  // a folder made through file://
  auto list = buckets_->ListBuckets();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "a.b-3");
  EXPECT_EQ((*list)[0].created_millis, 3000);
  EXPECT_EQ((*list)[1].name, "bkt");
  EXPECT_EQ((*list)[1].created_millis, 1000);
  EXPECT_EQ((*list)[2].name, "made-by-hand");
  EXPECT_GT((*list)[2].created_millis, 0);

  ASSERT_TRUE(Put("k", "x").ok());
  Status busy = buckets_->DeleteBucket("bkt");
  EXPECT_TRUE(busy.IsFailedPrecondition());
  EXPECT_EQ(S3ErrorCode(busy), "BucketNotEmpty");
  auto upload = buckets_->CreateUpload("a.b-3", "u", {}, 1);
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ(S3ErrorCode(buckets_->DeleteBucket("a.b-3")), "BucketNotEmpty");
  ASSERT_TRUE(buckets_->AbortUpload("a.b-3", *upload).ok());
  EXPECT_TRUE(buckets_->DeleteBucket("a.b-3").ok());
  EXPECT_FALSE(fs::exists(PathOf("a.b-3")));
  ASSERT_TRUE(buckets_->DeleteObject("bkt", "k").ok());
  EXPECT_TRUE(buckets_->DeleteBucket("bkt").ok());
  Status gone = buckets_->DeleteBucket("bkt");
  EXPECT_TRUE(gone.IsNotFound());
  EXPECT_EQ(S3ErrorCode(gone), "NoSuchBucket");
  EXPECT_EQ(S3ErrorCode(buckets_->HeadBucket("bkt").status()), "NoSuchBucket");
  EXPECT_EQ(S3ErrorCode(buckets_->HeadBucket("..").status()), "NoSuchBucket");
  EXPECT_EQ(S3ErrorCode(buckets_->NewPendingFile("nope").status()), "NoSuchBucket");
}

TEST_F(BucketsTest, PutGetHeadDeleteRoundTrip) {
  ObjectMeta meta;
  meta.content_type = "text/plain";
  meta.headers = {{"Content-Encoding", "gzip"}, {"Cache-Control", "no-cache"}};
  meta.user = {{"owner", "ann"}};
  meta.checksums = {{"CRC32", "AAAAAA=="}};
  auto put = Put("dir/sub/hello.txt", "hello world", meta);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->etag, Md5Hex("hello world"));
  EXPECT_EQ(put->size, 11u);
  EXPECT_GT(put->mtime_millis, 0);

  // The bytes are a plain file at <root>/<bucket>/<key>.
  auto raw = ReadFile(PathOf("bkt/dir/sub/hello.txt"));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw, "hello world");
  EXPECT_EQ(Read("bkt", "dir/sub/hello.txt"), "hello world");

  auto head = buckets_->HeadObject("bkt", "dir/sub/hello.txt");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->etag, Md5Hex("hello world"));
  EXPECT_EQ(head->size, 11u);
  EXPECT_EQ(head->mtime_millis, put->mtime_millis);
  EXPECT_EQ(head->content_type, "text/plain");
  EXPECT_EQ(head->headers, meta.headers);
  EXPECT_EQ(head->user, meta.user);
  EXPECT_EQ(head->checksums, meta.checksums);
  EXPECT_EQ(head->parts, 0);

  // Replacing keeps a reader's descriptor on the old bytes.
  auto old = buckets_->GetObject("bkt", "dir/sub/hello.txt");
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(Put("dir/sub/hello.txt", "bye").ok());
  EXPECT_EQ(Read("bkt", "dir/sub/hello.txt"), "bye");
  char buf[11];
  EXPECT_EQ(::pread(*old->fd, buf, sizeof(buf), 0), 11);
  EXPECT_EQ(std::string(buf, 11), "hello world");
  auto replaced = buckets_->HeadObject("bkt", "dir/sub/hello.txt");
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->content_type, "");
  EXPECT_TRUE(replaced->user.empty());

  Status missing = buckets_->HeadObject("bkt", "dir/nope").status();
  EXPECT_TRUE(missing.IsNotFound());
  EXPECT_EQ(S3ErrorCode(missing), "NoSuchKey");
  EXPECT_EQ(S3ErrorCode(buckets_->HeadObject("bkt", "dir/sub").status()), "NoSuchKey");
  EXPECT_EQ(S3ErrorCode(buckets_->GetObject("nob", "k").status()), "NoSuchBucket");

  ASSERT_TRUE(buckets_->DeleteObject("bkt", "dir/sub/hello.txt").ok());
  EXPECT_EQ(S3ErrorCode(buckets_->HeadObject("bkt", "dir/sub/hello.txt").status()), "NoSuchKey");
  EXPECT_TRUE(buckets_->DeleteObject("bkt", "dir/sub/hello.txt").ok());  // missing: fine
  EXPECT_EQ(S3ErrorCode(buckets_->DeleteObject("nob", "k")), "NoSuchBucket");
  // The emptied folders are gone from the data tree and the metadata tree.
  EXPECT_FALSE(fs::exists(PathOf("bkt/dir")));
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-s3/meta/dir")));
  EXPECT_TRUE(fs::exists(PathOf("bkt")));
}

TEST_F(BucketsTest, DeleteKeepsFoldersThatHoldOtherKeys) {
  ASSERT_TRUE(Put("a/b/c", "1").ok());
  ASSERT_TRUE(Put("a/d", "2").ok());
  ASSERT_TRUE(buckets_->DeleteObject("bkt", "a/b/c").ok());
  EXPECT_FALSE(fs::exists(PathOf("bkt/a/b")));
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-s3/meta/a/b")));
  EXPECT_TRUE(fs::exists(PathOf("bkt/a/d")));
  EXPECT_TRUE(fs::exists(PathOf("bkt/.lote-s3/meta/a/d.meta")));
}

TEST_F(BucketsTest, FileWrittenIntoTheFolderIsAnObject) {
  WriteRaw(PathOf("bkt/by-hand/data.bin"), "written through file://");
  fs::create_directories(PathOf("hand-bucket/x"));
  WriteRaw(PathOf("hand-bucket/x/y"), "yy");
  auto list = buckets_->List("bkt", ListRequest{});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->objects.size(), 1u);
  EXPECT_EQ(list->objects[0].key, "by-hand/data.bin");
  EXPECT_EQ(list->objects[0].meta.etag, Md5Hex("written through file://"));
  EXPECT_EQ(list->objects[0].meta.size, 23u);
  auto head = buckets_->HeadObject("bkt", "by-hand/data.bin");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->etag, Md5Hex("written through file://"));
  // The MD5 is cached in a sidecar stamped with the file.
  EXPECT_TRUE(fs::exists(PathOf("bkt/.lote-s3/meta/by-hand/data.bin.meta")));
  EXPECT_EQ(Read("hand-bucket", "x/y"), "yy");
  auto other = buckets_->List("hand-bucket", ListRequest{});
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->objects.size(), 1u);
  EXPECT_EQ(other->objects[0].meta.etag, Md5Hex("yy"));
}

TEST_F(BucketsTest, StaleSidecarIsIgnored) {
  ObjectMeta meta;
  meta.content_type = "text/plain";
  ASSERT_TRUE(Put("k", "original", meta).ok());
  // Replace the data file behind the store's back (a new inode, another size).
  const std::string path = PathOf("bkt/k");
  WriteRaw(path + ".new", "replaced by hand");
  fs::rename(path + ".new", path);
  auto head = buckets_->HeadObject("bkt", "k");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->etag, Md5Hex("replaced by hand"));
  EXPECT_EQ(head->size, 16u);
  EXPECT_EQ(head->content_type, "");
  // Same size, rewritten in place (same inode, new mtime).
  ASSERT_TRUE(Put("k2", "aaaa").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::fstream f(PathOf("bkt/k2"), std::ios::in | std::ios::out | std::ios::binary);
    f << "bbbb";
  }
  auto head2 = buckets_->HeadObject("bkt", "k2");
  ASSERT_TRUE(head2.ok());
  EXPECT_EQ(head2->etag, Md5Hex("bbbb"));
  auto list = buckets_->List("bkt", ListRequest{});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->objects.size(), 2u);
  EXPECT_EQ(list->objects[0].meta.etag, Md5Hex("replaced by hand"));
  EXPECT_EQ(list->objects[1].meta.etag, Md5Hex("bbbb"));
}

TEST_F(BucketsTest, RefusesBadKeys) {
  const std::vector<std::string> bad_keys = {"",
                                             "/abs",
                                             "a//b",
                                             "./a",
                                             "a/./b",
                                             "a/..",
                                             "../x",
                                             ".lote-s3/x",
                                             ".lote-s3",
                                             "a/.lote-s3/b",
                                             "a/.lote-tmp-1",
                                             "x/.lote-s3-folder",
                                             "a//",
                                             std::string("a\0b", 3)};
  for (const std::string& key : bad_keys) {
    auto put = Put(key, "x");
    EXPECT_TRUE(put.status().IsInvalidArgument()) << key;
    EXPECT_EQ(S3ErrorCode(put.status()), "InvalidArgument") << key;
    EXPECT_TRUE(buckets_->HeadObject("bkt", key).status().IsInvalidArgument()) << key;
  }
  EXPECT_EQ(S3ErrorCode(Put(std::string(1025, 'k'), "x").status()), "KeyTooLongError");
  EXPECT_TRUE(Put(std::string(200, 'k') + "/" + std::string(200, 'k'), "x").ok());
  EXPECT_EQ(S3ErrorCode(Put(std::string(251, 'k'), "x").status()), "KeyTooLongError");
  // Only the debris of refused puts was written: no files besides the one object.
  auto list = buckets_->List("bkt", ListRequest{});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->objects.size(), 1u);
}

TEST_F(BucketsTest, RefusesCollidingKeys) {
  ASSERT_TRUE(Put("a", "file").ok());
  Status below = Put("a/b", "x").status();
  EXPECT_TRUE(below.IsInvalidArgument());
  EXPECT_NE(below.message().find("collides"), std::string::npos) << below.message();
  EXPECT_TRUE(Put("a/", "").status().IsInvalidArgument());
  ASSERT_TRUE(Put("c/d", "x").ok());
  EXPECT_TRUE(Put("c", "x").status().IsInvalidArgument());
  EXPECT_EQ(Read("bkt", "a"), "file");
  EXPECT_EQ(Read("bkt", "c/d"), "x");
  // An empty leftover folder makes room.
  fs::create_directories(PathOf("bkt/e/f"));
  ASSERT_TRUE(Put("e/f", "x").ok());
  EXPECT_EQ(Read("bkt", "e/f"), "x");
  // The metadata tree has its own collision: key "m"'s sidecar is m.meta, a folder of "m.meta/x".
  ASSERT_TRUE(Put("m", "x").ok());
  EXPECT_TRUE(Put("m.meta/x", "y").status().IsInvalidArgument());
  ASSERT_TRUE(Put("n.meta/x", "y").ok());
  EXPECT_TRUE(Put("n", "x").status().IsInvalidArgument());
  // A refused put leaves no folders behind.
  EXPECT_FALSE(Put("a/x/y", "z").ok());
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-s3/meta/a")));
}

TEST_F(BucketsTest, FolderMarkerKey) {
  auto put = Put("dir/", "");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(fs::is_regular_file(PathOf("bkt/dir/.lote-s3-folder")));
  ASSERT_TRUE(Put("dir/inner", "i").ok());
  auto head = buckets_->HeadObject("bkt", "dir/");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, 0u);
  EXPECT_EQ(head->etag, Md5Hex(""));
  auto list = buckets_->List("bkt", ListRequest{});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->objects.size(), 2u);
  EXPECT_EQ(list->objects[0].key, "dir/");
  EXPECT_EQ(list->objects[1].key, "dir/inner");
  auto rolled = buckets_->List(
      "bkt", ListRequest{.prefix = "", .delimiter = "/", .start_after = "", .max_keys = 1000});
  ASSERT_TRUE(rolled.ok());
  EXPECT_TRUE(rolled->objects.empty());
  EXPECT_EQ(rolled->common_prefixes, std::vector<std::string>{"dir/"});
  ASSERT_TRUE(buckets_->DeleteObject("bkt", "dir/").ok());
  EXPECT_FALSE(fs::exists(PathOf("bkt/dir/.lote-s3-folder")));
  EXPECT_EQ(Read("bkt", "dir/inner"), "i");
  ASSERT_TRUE(buckets_->DeleteObject("bkt", "dir/inner").ok());
  EXPECT_FALSE(fs::exists(PathOf("bkt/dir")));
}

// What S3 answers for a listing, computed from all keys sorted.
ListResult ReferenceList(const std::vector<std::string>& sorted_keys, const ListRequest& r) {
  struct Item {
    std::string name;
    bool is_prefix;
  };
  std::vector<Item> items;
  for (const std::string& key : sorted_keys) {
    if (!key.starts_with(r.prefix)) continue;
    Item item{.name = key, .is_prefix = false};
    if (!r.delimiter.empty()) {
      size_t at = key.find(r.delimiter, r.prefix.size());
      if (at != std::string::npos)
        item = {.name = key.substr(0, at + r.delimiter.size()), .is_prefix = true};
    }
    if (item.name <= r.start_after) continue;
    if (!items.empty() && items.back().name == item.name) continue;
    items.push_back(item);
  }
  ListResult out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i == static_cast<size_t>(r.max_keys)) {
      out.truncated = true;
      break;
    }
    out.last = items[i].name;
    if (items[i].is_prefix) {
      out.common_prefixes.push_back(items[i].name);
    } else {
      out.objects.push_back(ListedObject{.key = items[i].name, .meta = {}});
    }
  }
  return out;
}

std::vector<std::string> KeysOf(const ListResult& list) {
  std::vector<std::string> out;
  for (const ListedObject& o : list.objects) out.push_back(o.key);
  return out;
}

TEST_F(BucketsTest, ListingMatchesSortedReference) {
  std::vector<std::string> keys;
  const std::vector<std::string> dirs = {"a", "a-b", "a.b", "b", "é", "日本"};
  const std::vector<std::string> subs = {"s", "s-1", "s.2", "ß"};
  const std::vector<std::string> leaves = {"k", "k-1", "k.2", "k0", "ñ", "z"};
  for (const std::string& d : dirs) {
    for (const std::string& l : leaves) keys.push_back(d + "/" + l);
    for (const std::string& s : subs) {
      for (const std::string& l : leaves) keys.push_back(d + "/" + s + "/" + l);
    }
  }
  for (const char* top : {"a-", "a0", "a.c", "top", "üb", "a/", "b/s-1/"}) {
    keys.push_back(top);
  }
  // Objects written by hand go through the same listing as the ones put (half and half).
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE(Put(keys[i], keys[i].back() == '/' ? "" : keys[i]).ok()) << keys[i];
    } else if (keys[i].back() == '/') {
      WriteRaw(PathOf("bkt/" + keys[i] + ".lote-s3-folder"), "");
    } else {
      WriteRaw(PathOf("bkt/" + keys[i]), keys[i]);
    }
  }
  std::sort(keys.begin(), keys.end());
  ASSERT_GT(keys.size(), 180u);
  // A pending file and an empty folder are not listed.
  auto pending = buckets_->NewPendingFile("bkt");
  ASSERT_TRUE(pending.ok());
  fs::create_directories(PathOf("bkt/empty/folder"));

  int pages = 0;
  for (const std::string prefix : {"", "a", "a/", "a/s", "é/", "zz"}) {
    for (const std::string delimiter : {"", "/", "-", "s/"}) {
      for (int32_t max_keys : {1, 7, 1000}) {
        for (const std::string start : {"", "a/s-1/k", "a-", "b/s-1/"}) {
          if (max_keys == 1 && prefix.size() < 2) continue;  // long; the others cover it
          ListRequest request{
              .prefix = prefix, .delimiter = delimiter, .start_after = start, .max_keys = max_keys};
          for (;;) {
            ListResult want = ReferenceList(keys, request);
            auto got = buckets_->List("bkt", request);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            const std::string where = "prefix=" + prefix + " delimiter=" + delimiter +
                                      " start_after=" + request.start_after +
                                      " max_keys=" + std::to_string(max_keys);
            ASSERT_EQ(KeysOf(*got), KeysOf(want)) << where;
            ASSERT_EQ(got->common_prefixes, want.common_prefixes) << where;
            ASSERT_EQ(got->truncated, want.truncated) << where;
            ASSERT_EQ(got->last, want.last) << where;
            for (const ListedObject& o : got->objects) {
              const std::string& body = o.key.back() == '/' ? "" : o.key;
              ASSERT_EQ(o.meta.etag, Md5Hex(body)) << o.key;
              ASSERT_EQ(o.meta.size, body.size()) << o.key;
            }
            ++pages;
            if (!got->truncated) break;
            request.start_after = got->last;
          }
        }
      }
    }
  }
  EXPECT_GT(pages, 500);
  auto none = buckets_->List(
      "bkt", ListRequest{.prefix = "", .delimiter = "", .start_after = "", .max_keys = 0});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->objects.empty());
  EXPECT_FALSE(none->truncated);
}

TEST_F(BucketsTest, ListsAPageOfTenThousandQuickly) {
  for (int i = 0; i < 10'000; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "d%02d/obj-%05d", i % 10, i);
    WriteRaw(PathOf(std::string("bkt/") + name), "x");
  }
  // The first listing hashes the files written by hand (and caches their sidecars).
  ListRequest request{.prefix = "", .delimiter = "", .start_after = "", .max_keys = 1000};
  for (int pass = 0; pass < 2; ++pass) {
    request.start_after = "";
    int total = 0;
    auto start = std::chrono::steady_clock::now();
    int pages = 0;
    for (;; ++pages) {
      auto page = buckets_->List("bkt", request);
      ASSERT_TRUE(page.ok());
      total += static_cast<int>(page->objects.size());
      if (!page->truncated) break;
      request.start_after = page->last;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(total, 10'000);
    if (pass == 1) {
      EXPECT_LT(seconds / (pages + 1), 0.5) << seconds << " s for all pages";
    }
  }
  request = ListRequest{
      .prefix = "d05/", .delimiter = "/", .start_after = "d05/obj-05005", .max_keys = 3};
  auto page = buckets_->List("bkt", request);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(KeysOf(*page),
            (std::vector<std::string>{"d05/obj-05015", "d05/obj-05025", "d05/obj-05035"}));
  EXPECT_TRUE(page->truncated);
}

TEST_F(BucketsTest, IfNoneMatchHasOneWinner) {
  for (int round = 0; round < 20; ++round) {
    const std::string key = "race/" + std::to_string(round);
    std::atomic<int> ready{0};
    Result<ObjectMeta> results[2] = {Status::Internal("unset"), Status::Internal("unset")};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        auto file = buckets_->NewPendingFile("bkt");
        ASSERT_TRUE(file.ok());
        ASSERT_TRUE((*file)->Append("writer " + std::to_string(t)).ok());
        ObjectMeta meta;
        meta.etag = Md5Hex("writer " + std::to_string(t));
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        results[t] = buckets_->PutObject("bkt", key, std::move(*file), meta, true);
      });
    }
    for (std::thread& t : threads) t.join();
    const int wins = results[0].ok() + results[1].ok();
    ASSERT_EQ(wins, 1) << round;
    const int loser = results[0].ok() ? 1 : 0;
    EXPECT_TRUE(results[loser].status().IsFailedPrecondition());
    EXPECT_EQ(S3ErrorCode(results[loser].status()), "PreconditionFailed");
    EXPECT_EQ(Read("bkt", key), "writer " + std::to_string(1 - loser));
  }
  auto list = buckets_->List("bkt", ListRequest{});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->objects.size(), 20u);  // the losers' files are gone
}

std::string Pattern(size_t n, char seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(seed + i * 7 % 251);
  return out;
}

TEST_F(BucketsTest, MultipartCompletesThreeParts) {
  ObjectMeta meta;
  meta.content_type = "application/x-big";
  meta.user = {{"k", "v"}};
  auto id = buckets_->CreateUpload("bkt", "big/object.bin", meta, 5000);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size(), 32u);
  auto upload = buckets_->GetUpload("bkt", *id);
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ(upload->key, "big/object.bin");
  EXPECT_EQ(upload->initiated_millis, 5000);
  EXPECT_EQ(upload->meta.content_type, "application/x-big");

  const std::vector<std::string> bodies = {Pattern(5 << 20, 1), Pattern(5 << 20, 2), "z"};
  std::vector<std::pair<int32_t, std::string>> listed;
  for (int32_t n = 1; n <= 3; ++n) {
    auto file = buckets_->NewPendingFile("bkt");
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append(bodies[n - 1]).ok());
    PartInfo part{.number = n,
                  .etag = "\"" + Md5Hex(bodies[n - 1]) + "\"",
                  .size = 0,
                  .mtime_millis = 0,
                  .checksums = {}};
    auto put = buckets_->PutPart("bkt", *id, std::move(*file), part);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    EXPECT_EQ(put->etag, Md5Hex(bodies[n - 1]));
    EXPECT_EQ(put->size, bodies[n - 1].size());
    listed.emplace_back(n, "\"" + Md5Hex(bodies[n - 1]) + "\"");
  }
  auto parts = buckets_->ListParts("bkt", *id);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[2].number, 3);
  EXPECT_EQ((*parts)[2].size, 1u);
  auto uploads = buckets_->ListUploads("bkt", "big/");
  ASSERT_TRUE(uploads.ok());
  ASSERT_EQ(uploads->size(), 1u);
  EXPECT_EQ((*uploads)[0].upload_id, *id);
  EXPECT_TRUE(buckets_->ListUploads("bkt", "small/")->empty());

  auto done = buckets_->CompleteUpload("bkt", *id, listed);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  const std::string digests = Md5Raw(bodies[0]) + Md5Raw(bodies[1]) + Md5Raw(bodies[2]);
  const std::string want_etag = Md5Hex(digests) + "-3";
  EXPECT_EQ(done->etag, want_etag);
  EXPECT_EQ(done->parts, 3);
  EXPECT_EQ(done->size, (10u << 20) + 1);
  auto head = buckets_->HeadObject("bkt", "big/object.bin");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->etag, want_etag);
  EXPECT_EQ(head->parts, 3);
  EXPECT_EQ(head->content_type, "application/x-big");
  EXPECT_EQ(head->user, meta.user);
  EXPECT_TRUE(Read("bkt", "big/object.bin") == bodies[0] + bodies[1] + bodies[2]);
  EXPECT_EQ(S3ErrorCode(buckets_->GetUpload("bkt", *id).status()), "NoSuchUpload");
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-s3/uploads/" + *id)));
  EXPECT_TRUE(buckets_->ListUploads("bkt", "")->empty());

  // A copy of a multipart object gets the MD5 of its bytes.
  auto copy = buckets_->CopyObject("bkt", "big/object.bin", "bkt", "copy.bin", std::nullopt);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->etag, Md5Hex(bodies[0] + bodies[1] + bodies[2]));
  EXPECT_EQ(copy->parts, 0);
  EXPECT_EQ(copy->content_type, "application/x-big");
}

TEST_F(BucketsTest, MultipartRefusesBadPartLists) {
  auto id = buckets_->CreateUpload("bkt", "k", {}, 1);
  ASSERT_TRUE(id.ok());
  const std::vector<std::string> bodies = {"small one", Pattern(5 << 20, 3), "last"};
  for (int32_t n = 1; n <= 3; ++n) {
    auto file = buckets_->NewPendingFile("bkt");
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append(bodies[n - 1]).ok());
    PartInfo part{
        .number = n, .etag = Md5Hex(bodies[n - 1]), .size = 0, .mtime_millis = 0, .checksums = {}};
    ASSERT_TRUE(buckets_->PutPart("bkt", *id, std::move(*file), part).ok());
  }
  auto tag = [&](int n) { return Md5Hex(bodies[n - 1]); };
  auto code = [&](std::vector<std::pair<int32_t, std::string>> parts) {
    return S3ErrorCode(buckets_->CompleteUpload("bkt", *id, parts).status());
  };
  EXPECT_EQ(code({{2, tag(2)}, {1, tag(1)}}), "InvalidPartOrder");
  EXPECT_EQ(code({{2, tag(2)}, {2, tag(2)}}), "InvalidPartOrder");
  EXPECT_EQ(code({{2, tag(2)}, {4, tag(2)}}), "InvalidPart");
  EXPECT_EQ(code({{2, tag(1)}, {3, tag(3)}}), "InvalidPart");
  EXPECT_EQ(code({{1, tag(1)}, {2, tag(2)}, {3, tag(3)}}), "EntityTooSmall");
  EXPECT_EQ(code({}), "InvalidArgument");
  EXPECT_EQ(code({{1, tag(1)}}), "");  // a lone small part is the last one
  // Out-of-range part numbers and unknown uploads.
  auto id2 = buckets_->CreateUpload("bkt", "k2", {}, 1);
  ASSERT_TRUE(id2.ok());
  auto file = buckets_->NewPendingFile("bkt");
  ASSERT_TRUE(file.ok());
  PartInfo bad{.number = 10'001, .etag = Md5Hex(""), .size = 0, .mtime_millis = 0, .checksums = {}};
  EXPECT_EQ(S3ErrorCode(buckets_->PutPart("bkt", *id2, std::move(*file), bad).status()),
            "InvalidArgument");
  file = buckets_->NewPendingFile("bkt");
  ASSERT_TRUE(file.ok());
  bad.number = 1;
  EXPECT_EQ(S3ErrorCode(buckets_->PutPart("bkt", "0123", std::move(*file), bad).status()),
            "NoSuchUpload");
  EXPECT_EQ(S3ErrorCode(buckets_->CompleteUpload("bkt", "../../x", {{1, tag(1)}}).status()),
            "NoSuchUpload");
  EXPECT_EQ(S3ErrorCode(buckets_->CompleteUpload("bkt", *id, {{1, tag(1)}}).status()),
            "NoSuchUpload");  // completed above
}

TEST_F(BucketsTest, AbortRemovesTheUpload) {
  auto id = buckets_->CreateUpload("bkt", "k", {}, 1);
  ASSERT_TRUE(id.ok());
  auto file = buckets_->NewPendingFile("bkt");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("part").ok());
  PartInfo part{.number = 1, .etag = Md5Hex("part"), .size = 0, .mtime_millis = 0, .checksums = {}};
  ASSERT_TRUE(buckets_->PutPart("bkt", *id, std::move(*file), part).ok());
  EXPECT_TRUE(fs::exists(PathOf("bkt/.lote-s3/uploads/" + *id + "/00001")));
  ASSERT_TRUE(buckets_->AbortUpload("bkt", *id).ok());
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-s3/uploads/" + *id)));
  EXPECT_EQ(S3ErrorCode(buckets_->AbortUpload("bkt", *id)), "NoSuchUpload");
  EXPECT_EQ(S3ErrorCode(buckets_->ListParts("bkt", *id).status()), "NoSuchUpload");
  EXPECT_EQ(S3ErrorCode(buckets_->HeadObject("bkt", "k").status()), "NoSuchKey");
  EXPECT_TRUE(fs::is_empty(PathOf("bkt/.lote-s3/uploads")));
}

TEST_F(BucketsTest, CopiesObjectsAndMetadata) {
  ObjectMeta meta;
  meta.content_type = "text/csv";
  meta.user = {{"a", "1"}};
  ASSERT_TRUE(Put("src", "copied bytes", meta).ok());
  ASSERT_TRUE(buckets_->CreateBucket("bkt2", 1).ok());
  auto copy = buckets_->CopyObject("bkt", "src", "bkt2", "dst/x", std::nullopt);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->etag, Md5Hex("copied bytes"));
  EXPECT_EQ(Read("bkt2", "dst/x"), "copied bytes");
  EXPECT_EQ(buckets_->HeadObject("bkt2", "dst/x")->user, meta.user);
  ObjectMeta replace;
  replace.content_type = "text/plain";
  replace.etag = "ignored";
  auto updated = buckets_->CopyObject("bkt", "src", "bkt", "src", replace);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  auto head = buckets_->HeadObject("bkt", "src");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->content_type, "text/plain");
  EXPECT_TRUE(head->user.empty());
  EXPECT_EQ(head->etag, Md5Hex("copied bytes"));
  EXPECT_EQ(Read("bkt", "src"), "copied bytes");
  EXPECT_EQ(S3ErrorCode(buckets_->CopyObject("bkt", "nope", "bkt2", "x", std::nullopt).status()),
            "NoSuchKey");
}

TEST_F(BucketsTest, OpenRemovesTemporaryDebris) {
  ASSERT_TRUE(Put("keep/me", "kept").ok());
  WriteRaw(PathOf("bkt/.lote-tmp-0123abcd"), "partial");
  WriteRaw(PathOf("bkt/keep/.lote-tmp-feed"), "partial");
  WriteRaw(PathOf("bkt/.lote-s3/.lote-tmp-meta"), "{");
  fs::create_directories(PathOf(".lote-tmp-gone/inner"));
  buckets_.reset();
  auto reopened = Buckets::Open(root_);
  ASSERT_TRUE(reopened.ok());
  buckets_ = std::move(*reopened);
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-tmp-0123abcd")));
  EXPECT_FALSE(fs::exists(PathOf("bkt/keep/.lote-tmp-feed")));
  EXPECT_FALSE(fs::exists(PathOf("bkt/.lote-s3/.lote-tmp-meta")));
  EXPECT_FALSE(fs::exists(PathOf(".lote-tmp-gone")));
  EXPECT_EQ(Read("bkt", "keep/me"), "kept");
  // A root that does not exist yet is made.
  auto fresh = Buckets::Open((dir_ / "new" / "root").string());
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fs::is_directory(dir_ / "new" / "root"));
}

TEST_F(BucketsTest, PendingFileWithoutCommitLeavesNothing) {
  std::string path;
  {
    auto file = buckets_->NewPendingFile("bkt");
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append("abandoned").ok());
    EXPECT_EQ((*file)->size(), 9u);
    path = (*file)->path();
    EXPECT_EQ(fs::path(path).parent_path(), fs::path(PathOf("bkt")));
    EXPECT_TRUE(fs::path(path).filename().string().starts_with(".lote-tmp-"));
    EXPECT_TRUE(fs::exists(path));
  }
  EXPECT_FALSE(fs::exists(path));
  // A refused put removes its file too.
  auto file = buckets_->NewPendingFile("bkt");
  ASSERT_TRUE(file.ok());
  path = (*file)->path();
  EXPECT_FALSE(buckets_->PutObject("bkt", "../x", std::move(*file), ObjectMeta{}).ok());
  EXPECT_FALSE(fs::exists(path));
  for (const auto& entry : fs::recursive_directory_iterator(PathOf("bkt"))) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".lote-tmp-")) << entry.path();
  }
}

}  // namespace
}  // namespace lote::objstore
