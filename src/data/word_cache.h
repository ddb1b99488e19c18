// WordCache: an insert-only map from short byte strings (words) to their token
// ids, shared by every thread that encodes with one tokenizer.
//
// Why shared and lock-free: a corpus's distinct words are its expensive part
// (each needs a BPE run); with one cache per thread, every thread pays for
// every word again, and a cache behind mutexes makes threads copy words
// between caches. Here a word is encoded about once in all, and lookups only
// read shared memory.
//
// Layout: an open-addressing table (linear probing, at most kMaxProbes slots
// from a key's home) of 64-bit slots, each 0 (empty) or a pointer to an
// immutable entry {hash, key, ids} with the top 16 bits of the key's hash in
// its unused high bits, so most mismatching slots are skipped without reading
// the entry. Entries live in per-thread blocks of an arena owned by the cache
// and are never moved or freed before the cache. Slots are claimed with a
// compare-and-swap and read with acquire loads: a reader sees either no entry
// or a complete one.
// Growth: when half full (or when an insert met a cluster of kMaxProbes
// taken slots, which linear probing makes now and then even below half full:
// the insert then retries once in the grown table), one thread (the others go on) copies the entry
// pointers into a table twice the size and publishes it; the old table stays
// readable until the cache is destroyed. Entries added to the old table during
// the copy are carried over by a second pass; an insert that races with that
// pass may be dropped: a cache may forget, never return wrong ids.
// Bound: once max_words entries are in, Insert does nothing; callers then
// encode new words every time (frequent words come early and stay).
//
// Thread safety: Find and Insert may be called from any number of threads at
// once. The ids returned by Find stay valid until the cache is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string_view>
#include <vector>

namespace lote::data {

class WordCache {
 public:
  static constexpr size_t kMaxProbes = 64;
  static constexpr size_t kMaxKeyBytes = 1024;  // longer keys are never cached
  static constexpr size_t kMaxIds = 1024;       // longer id lists are never cached

  // `max_words`: how many words to keep at most; 0 caches nothing.
  explicit WordCache(size_t max_words);
  ~WordCache();
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  // A well-mixed 64-bit hash of `key`, never 0. Pass it to Find and Insert.
  static uint64_t Hash(std::string_view key);

  // True and the cached ids of `key` when it is cached (inline: the hot path).
  bool Find(std::string_view key, uint64_t hash, std::span<const int32_t>* ids) const;

  // Caches key -> ids, unless the cache is full, the key is already there
  // (the first insert wins; equal keys always have equal ids here), or it is
  // too long. Never blocks on other threads' Find or Insert.
  void Insert(std::string_view key, uint64_t hash, std::span<const int32_t> ids);

  // Entries inserted so far (approximate while other threads insert).
  size_t size() const { return count_.load(std::memory_order_relaxed); }
  // Slots of the current table (a power of two).
  size_t capacity() const;

 private:
  static constexpr uint64_t kTagMask = 0xFFFFull << 48;  // slot bits that hold the hash tag

  // An immutable cached word, followed in memory by its ids, then its key bytes.
  struct Entry {
    uint64_t hash;
    uint32_t key_len;
    uint32_t num_ids;

    const int32_t* ids() const { return reinterpret_cast<const int32_t*>(this + 1); }
    const char* key() const { return reinterpret_cast<const char*>(ids() + num_ids); }
    bool Matches(uint64_t h, std::string_view k) const;
    static const Entry* FromSlot(uint64_t slot) {
      return reinterpret_cast<const Entry*>(static_cast<uintptr_t>(slot & ~kTagMask));
    }
  };
  struct Table {
    // calloc: the kernel's zero pages, no memset; slots are only accessed
    // through std::atomic_ref.
    explicit Table(size_t n)
        : mask(n - 1), slots(static_cast<uint64_t*>(std::calloc(n, sizeof(uint64_t)))) {
      if (slots == nullptr) throw std::bad_alloc();
    }
    ~Table() { std::free(slots); }
    Table(const Table&) = delete;
    Table& operator=(const Table&) = delete;
    size_t size() const { return mask + 1; }
    std::atomic_ref<uint64_t> slot(size_t i) const { return std::atomic_ref<uint64_t>(slots[i]); }
    const size_t mask;
    uint64_t* const slots;  // 0 or tag | entry address
  };
  struct ThreadArena;

  // Room for `bytes` (8-aligned) in this thread's current arena block.
  char* Allocate(ThreadArena* arena, size_t bytes);
  enum class Placed { kPlaced, kPresent, kClusterFull };
  // Places `slot_value` (an entry of hash `hash`) in `table` unless an equal
  // key is there (kPresent) or kMaxProbes slots from its home are taken
  // (kClusterFull).
  static Placed Place(const Table& table, uint64_t hash, uint64_t slot_value, std::string_view key,
                      bool concurrent);
  // Grows `seen` when it is current and half full, or when `cluster_full`
  // (an insert found kMaxProbes slots taken: a long cluster, which a table
  // twice the size splits) and it is not at max_slots_ yet.
  void MaybeGrow(const Table* seen, bool cluster_full = false);

  const uint64_t id_;  // distinguishes this cache's per-thread arena state from others'
  const size_t max_words_;
  const size_t max_slots_;
  std::atomic<const Table*> table_;  // read by every Find
  // Written by inserts: on their own cache line, so that they do not slow the
  // reads of table_ on other cores.
  alignas(64) std::atomic<size_t> count_{0};
  std::atomic<bool> full_{false};

  alignas(64) std::mutex grow_mu_;  // one grower at a time (others skip growing)
  // protected by grow_mu_: every table ever published (the last is current)
  std::vector<std::unique_ptr<Table>> tables_;
  std::mutex blocks_mu_;
  // protected by blocks_mu_: arena blocks handed to threads
  std::vector<std::unique_ptr<char[]>> blocks_;
};

inline bool WordCache::Entry::Matches(uint64_t h, std::string_view k) const {
  if (hash != h || key_len != k.size()) return false;
  const char* a = key();
  const char* b = k.data();
  size_t n = k.size();
  for (; n >= 8; a += 8, b += 8, n -= 8) {
    uint64_t x, y;
    std::memcpy(&x, a, 8);
    std::memcpy(&y, b, 8);
    if (x != y) return false;
  }
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

inline uint64_t WordCache::Hash(std::string_view key) {
  const char* p = key.data();
  size_t n = key.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  if (n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;
}

inline bool WordCache::Find(std::string_view key, uint64_t hash,
                            std::span<const int32_t>* ids) const {
  const Table* t = table_.load(std::memory_order_acquire);
  const uint64_t tag = hash & kTagMask;
  size_t i = hash & t->mask;
  for (size_t probe = 0; probe < kMaxProbes; ++probe, i = (i + 1) & t->mask) {
    const uint64_t slot = t->slot(i).load(std::memory_order_acquire);
    if (slot == 0) return false;
    if ((slot & kTagMask) != tag) continue;
    const Entry* e = Entry::FromSlot(slot);
    if (e->Matches(hash, key)) {
      *ids = std::span<const int32_t>(e->ids(), e->num_ids);
      return true;
    }
  }
  return false;
}

}  // namespace lote::data
