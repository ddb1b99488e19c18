#include "data/word_cache.h"

#include <cstring>

namespace lote::data {
namespace {

constexpr size_t kInitialSlots = 1 << 14;
constexpr size_t kFirstBlockBytes = 4 << 10;  // a thread's first block for a cache; then doubling
constexpr size_t kMaxBlockBytes = 256 << 10;
constexpr int kArenasPerThread = 4;

std::atomic<uint64_t> g_next_cache_id{1};

size_t NextPowerOfTwo(size_t n) {
  size_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

// Where a thread appends its entries for one cache.
struct WordCache::ThreadArena {
  uint64_t owner = 0;  // the cache's id_, 0: unused
  uint64_t last_use = 0;
  char* cur = nullptr;
  char* end = nullptr;
  size_t next_block = kFirstBlockBytes;
  size_t pending = 0;  // inserts not yet added to count_
};

WordCache::WordCache(size_t max_words)
    : id_(g_next_cache_id.fetch_add(1)),
      max_words_(max_words),
      max_slots_(NextPowerOfTwo(2 * max_words)) {
  auto first = std::make_unique<Table>(std::min(max_slots_, kInitialSlots));
  table_.store(first.get(), std::memory_order_release);
  tables_.push_back(std::move(first));
  if (max_words == 0) full_.store(true);
}

WordCache::~WordCache() = default;

size_t WordCache::capacity() const { return table_.load(std::memory_order_acquire)->size(); }

WordCache::Placed WordCache::Place(const Table& table, uint64_t hash, uint64_t slot_value,
                                   std::string_view key, bool concurrent) {
  const uint64_t tag = hash & kTagMask;
  size_t i = hash & table.mask;
  for (size_t probe = 0; probe < kMaxProbes; ++probe, i = (i + 1) & table.mask) {
    uint64_t slot = table.slot(i).load(std::memory_order_acquire);
    if (slot == 0) {
      if (!concurrent) {
        table.slot(i).store(slot_value, std::memory_order_relaxed);
        return Placed::kPlaced;
      }
      // On failure `slot` holds the entry another thread put here first.
      if (table.slot(i).compare_exchange_strong(slot, slot_value, std::memory_order_release,
                                                std::memory_order_acquire)) {
        return Placed::kPlaced;
      }
    }
    if ((slot & kTagMask) == tag && Entry::FromSlot(slot)->Matches(hash, key))
      return Placed::kPresent;
  }
  return Placed::kClusterFull;
}

char* WordCache::Allocate(ThreadArena* arena, size_t bytes) {
  if (static_cast<size_t>(arena->end - arena->cur) < bytes) {
    const size_t size = std::max(bytes, arena->next_block);
    arena->next_block = std::min(kMaxBlockBytes, 2 * arena->next_block);
    auto block = std::make_unique_for_overwrite<char[]>(size);
    arena->cur = block.get();
    arena->end = arena->cur + size;
    std::lock_guard<std::mutex> lock(blocks_mu_);
    blocks_.push_back(std::move(block));
  }
  char* p = arena->cur;
  arena->cur += bytes;
  return p;
}

void WordCache::Insert(std::string_view key, uint64_t hash, std::span<const int32_t> ids) {
  if (full_.load(std::memory_order_relaxed) || key.size() > kMaxKeyBytes || ids.size() > kMaxIds)
    return;
  // This thread's arena for this cache (a few caches per thread; least recently used evicted).
  thread_local ThreadArena arenas[kArenasPerThread];
  thread_local uint64_t clock = 0;
  ThreadArena* arena = &arenas[0];
  for (ThreadArena& a : arenas) {
    if (a.owner == id_) {
      arena = &a;
      break;
    }
    if (a.last_use < arena->last_use) arena = &a;
  }
  if (arena->owner != id_) *arena = ThreadArena{.owner = id_};
  arena->last_use = ++clock;

  const size_t bytes = (sizeof(Entry) + ids.size() * sizeof(int32_t) + key.size() + 7) & ~size_t{7};
  char* p = Allocate(arena, bytes);
  const Entry header{hash, static_cast<uint32_t>(key.size()), static_cast<uint32_t>(ids.size())};
  std::memcpy(p, &header, sizeof(header));
  std::memcpy(p + sizeof(Entry), ids.data(), ids.size() * sizeof(int32_t));
  std::memcpy(p + sizeof(Entry) + ids.size() * sizeof(int32_t), key.data(), key.size());
  const auto addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  const Table* table = table_.load(std::memory_order_acquire);
  // An address above 48 bits cannot carry the tag: leave such a word uncached.
  Placed placed = (addr & kTagMask) != 0 ? Placed::kPresent
                                         : Place(*table, hash, (hash & kTagMask) | addr, key, true);
  if (placed == Placed::kClusterFull) {  // split the cluster, then try once more
    MaybeGrow(table, /*cluster_full=*/true);
    table = table_.load(std::memory_order_acquire);
    placed = Place(*table, hash, (hash & kTagMask) | addr, key, true);
  }
  if (placed != Placed::kPlaced) {
    if (arena->cur == p + bytes) arena->cur = p;  // give the room back
    return;
  }
  // count_ is shared by all threads: add to it in batches.
  const size_t batch = max_words_ >= 4096 ? 16 : 1;
  if (++arena->pending < batch) return;
  const size_t n = count_.fetch_add(arena->pending, std::memory_order_relaxed) + arena->pending;
  arena->pending = 0;
  if (n >= max_words_) full_.store(true, std::memory_order_relaxed);
  if (2 * n > table->size()) MaybeGrow(table);
}

void WordCache::MaybeGrow(const Table* seen, bool cluster_full) {
  std::unique_lock<std::mutex> lock(grow_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is growing the table
  const Table* current = table_.load(std::memory_order_acquire);
  if (current != seen || current->size() >= max_slots_ ||
      (!cluster_full && 2 * count_.load(std::memory_order_relaxed) <= current->size())) {
    return;
  }
  auto next = std::make_unique<Table>(std::min(max_slots_, 2 * current->size()));
  for (size_t i = 0; i < current->size(); ++i) {
    const uint64_t slot = current->slot(i).load(std::memory_order_acquire);
    if (slot == 0) continue;
    const Entry* e = Entry::FromSlot(slot);
    Place(*next, e->hash, slot, std::string_view(e->key(), e->key_len), false);
  }
  table_.store(next.get(), std::memory_order_release);
  // Entries that other threads put into the old table during the copy: carry
  // them over too (only an insert that read the old table before the store
  // and lands after this pass is dropped).
  for (size_t i = 0; i < current->size(); ++i) {
    const uint64_t slot = current->slot(i).load(std::memory_order_acquire);
    if (slot == 0) continue;
    const Entry* e = Entry::FromSlot(slot);
    Place(*next, e->hash, slot, std::string_view(e->key(), e->key_len), true);
  }
  tables_.push_back(std::move(next));
}

}  // namespace lote::data
