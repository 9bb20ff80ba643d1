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
    std::lock_guard lock(mutex_);
    const auto [at, placed] = by_address_.insert_or_assign(begin, rec->id);
    try {
      auto [it, fresh] =
          entries_.insert_or_assign(rec->id, entry{rec, bytes, std::move(label), now});
      recorded = it->second.label;  // stable: only this block's return erases the entry
    } catch (...) {                 // recording nothing: the index forgets the slot again
      if (placed)
        by_address_.erase(at);
      throw;
    }
  }
  note(event_kind::allocate, rec->id, bytes, recorded);
}

void block_labels::remove(std::uint64_t id) noexcept {
  std::unique_lock lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end())
    return;
  const auto gone = std::move(it->second);
  entries_.erase(it);
  by_address_.erase(reinterpret_cast<std::uintptr_t>(gone.rec->data));
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
  std::lock_guard lock(mutex_);
  std::vector<labelled_block> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_)
    out.push_back({id, e.bytes, e.label, e.rec->refs.load(std::memory_order_relaxed), e.created});
  return out;
}

std::optional<labelled_block> block_labels::holding(const std::byte* p, std::size_t bytes) const {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto next = by_address_.upper_bound(at);  // the slot starting at or before `at` precedes it
  if (next == by_address_.begin())
    return std::nullopt;
  const auto id = std::prev(next)->second;
  const auto& e = entries_.at(id);
  const auto begin = reinterpret_cast<std::uintptr_t>(e.rec->data);
  if (bytes > e.rec->bytes || at - begin > e.rec->bytes - bytes)
    return std::nullopt;
  return labelled_block{id, e.bytes, e.label, e.rec->refs.load(std::memory_order_relaxed),
                        e.created};
}

}  // namespace uma::detail
