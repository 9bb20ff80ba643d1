#include <uma/memory/detail/block_labels.hpp>

#include <uma/memory/control_block.hpp>

#include <cstdint>
#include <iterator>

namespace uma::detail {

void block_labels::add(const region* rec, std::size_t bytes, std::string label) {
  const auto now = std::chrono::steady_clock::now();
  std::string_view recorded;
  const auto begin = reinterpret_cast<std::uintptr_t>(rec->data);
  {
    auto& sh = shard_of(rec->id);
    std::lock_guard lock(sh.mutex);
    const auto [at, placed] = sh.by_address.insert_or_assign(begin, rec->id);
    try {
      auto [it, fresh] =
          sh.entries.insert_or_assign(rec->id, entry{rec, bytes, std::move(label), now});
      recorded = it->second.label;  // stable: only this block's return erases the entry
    } catch (...) {                 // recording nothing: the index forgets the slot again
      if (placed)
        sh.by_address.erase(at);
      throw;
    }
  }
  note(event_kind::allocate, rec->id, bytes, recorded);
}

void block_labels::remove(std::uint64_t id) noexcept {
  auto& sh = shard_of(id);
  std::unique_lock lock(sh.mutex);
  const auto it = sh.entries.find(id);
  if (it == sh.entries.end())
    return;
  const auto gone = std::move(it->second);
  sh.entries.erase(it);
  sh.by_address.erase(reinterpret_cast<std::uintptr_t>(gone.rec->data));
  lock.unlock();
  note(event_kind::release, id, gone.bytes, gone.label);
}

void block_labels::note(event_kind kind, std::uint64_t id, std::size_t bytes,
                        std::string_view label) const noexcept {
  if (!history_ || !history_->enabled())
    return;
  try {
    history_->record(kind, generation_, id, bytes, label);
  } catch (...) {  // a history that cannot grow loses the event, not the block
  }
}

std::vector<labelled_block> block_labels::list() const {
  std::vector<labelled_block> out;
  for (const auto& sh : shards_) {
    std::lock_guard lock(sh.mutex);
    for (const auto& [id, e] : sh.entries)
      out.push_back({id, e.bytes, e.label, e.rec->refs.load(std::memory_order_relaxed), e.created});
  }
  return out;
}

std::optional<labelled_block> block_labels::holding(const std::byte* p, std::size_t bytes) const {
  // The slot holding `at`, if any, is the one starting last at or before it, over all shards
  // (slots of blocks out never overlap); each shard's candidate is read under its own lock.
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::optional<labelled_block> found;
  std::optional<std::uintptr_t> last_begin;  // of the slot starting last at or before `at`
  for (const auto& sh : shards_) {
    std::lock_guard lock(sh.mutex);
    auto next = sh.by_address.upper_bound(at);
    if (next == sh.by_address.begin() || (last_begin && std::prev(next)->first < *last_begin))
      continue;
    const auto id = std::prev(next)->second;
    const auto it = sh.entries.find(id);  // always there: add and remove keep both maps alike
    if (it == sh.entries.end())
      continue;
    const auto& e = it->second;
    last_begin = std::prev(next)->first;
    const bool holds = bytes <= e.rec->bytes && at - *last_begin <= e.rec->bytes - bytes;
    found = holds
                ? std::optional<labelled_block>{labelled_block{
                      id, e.bytes, e.label, e.rec->refs.load(std::memory_order_relaxed), e.created}}
                : std::nullopt;
  }
  return found;
}

}  // namespace uma::detail
