// FetchDataset: makes a dataset written by `lote data prepare` available as a
// local folder for training, downloading it into a per-node cache when it lives
// in object storage.
//
//   /abs/dir, rel/dir, file:///abs/dir   used in place (no copy): the folder is
//                                        opened like `lote train` opens it
//                                        (engine::IndexedDataset::Open) and the
//                                        sizes of data.bin/data.idx are checked
//                                        against manifest.json's "files".
//   s3://bucket/prefix                   manifest.json, data.idx and data.bin are
//                                        downloaded into
//                                        <cache_root>/<name>-<key>/ and that
//                                        folder is returned.
//
// The cache entry (s3://):
// - <key> is the first 24 hex digits of sha256(URI + "\n" + manifest.json's
//   bytes), so a dataset rewritten at the same URI gets a new entry, and <name>
//   is the last segment of the prefix (for people reading the folder).
// - The download goes to a temporary folder beside the entry, every file is
//   checked, then the folder is renamed into place: an entry either does not
//   exist or is complete. Checks: with a manifest that lists "files" (lote
//   data prepare writes them), size and sha256 of data.bin and data.idx; with
//   an older manifest, only the sizes against the store's Head, and a warning
//   says so. Then the folder is opened like a local one. A mismatch is
//   DataLoss naming the file and both hashes (or sizes); nothing is kept.
// - Callers on one node serialize on an exclusive flock of
//   <cache_root>/<name>-<key>.lock (kept; never deleted, so the lock always
//   names one file): the first downloads, the others wait for the lock and
//   then reuse the entry. An existing entry is reused without reading data.bin
//   again: its file sizes must match the manifest's (old manifests: the
//   store's Head); a damaged entry is moved away and downloaded again, with a
//   warning. Temporary folders left by a killed caller are removed by the next
//   caller holding the lock. Every call reads manifest.json from the store
//   (a few hundred bytes) to know which entry is current.
// - Nothing evicts entries; delete folders under the cache root to reclaim
//   space (not while a job reads them).
// Errors are values: NotFound for a missing URI, folder or object (naming it),
// DataLoss for a corrupt or mismatching file, the object store's errors
// otherwise (with the URI in the message).
// Thread safety: FetchDataset may be called from several threads and processes
// at once, for the same or different datasets.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "objstore/objstore.h"

namespace lote::engine {

// The cache root when none is given: $LOTE_CACHE_DIR, else
// $XDG_CACHE_HOME/lote/datasets, else ~/.cache/lote/datasets (empty variables
// count as unset).
std::string DefaultDatasetCacheRoot();

struct FetchOptions {
  // Where s3:// datasets are cached; empty = DefaultDatasetCacheRoot().
  std::string cache_root;
  // Bytes downloaded of data.idx + data.bin together; called from the calling
  // thread during a download only.
  objstore::ProgressFn progress;
  // Notes for people (waiting for another caller, warnings such as an old
  // manifest without checksums or a damaged entry); null writes them to stderr.
  std::function<void(std::string_view)> log;
  // Opens the store at the dataset's URI; null = objstore::OpenObjectStore.
  // Tests wrap the real store to count requests.
  std::function<Result<std::unique_ptr<objstore::ObjectStore>>(std::string_view uri)> open_store;
  // Called once, before blocking, when another caller holds the entry's lock
  // (lets tests know a second caller really waited).
  std::function<void()> on_wait;
};

struct FetchedDataset {
  std::string dir;          // local folder holding manifest.json, data.idx, data.bin
  bool cached = false;      // true for s3:// (dir is a cache entry)
  bool downloaded = false;  // true when this call downloaded the files
};

Result<FetchedDataset> FetchDataset(const std::string& uri_or_path,
                                    const FetchOptions& options = {});

}  // namespace lote::engine
