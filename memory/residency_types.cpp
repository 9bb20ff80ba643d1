#include <uma/memory/residency_types.hpp>

#include <iterator>

namespace uma {

namespace {

constexpr std::string_view policy_names[] = {"migrate", "read_mostly", "remote_map", "discard",
                                             "auto"};

}  // namespace

std::string_view to_string(residency_policy p) noexcept {
  const auto i = static_cast<std::size_t>(p);
  return i < std::size(policy_names) ? policy_names[i] : "unknown";
}

std::optional<residency_policy> parse_residency_policy(std::string_view s) noexcept {
  for (std::size_t i = 0; i < std::size(policy_names); ++i)
    if (s == policy_names[i])
      return static_cast<residency_policy>(i);
  return std::nullopt;
}

std::string_view to_string(residency_move_kind k) noexcept {
  switch (k) {
    case residency_move_kind::to_device:
      return "to_device";
    case residency_move_kind::to_host:
      return "to_host";
    case residency_move_kind::drop_copy:
      return "drop_copy";
    case residency_move_kind::discard:
      return "discard";
    case residency_move_kind::map_remote:
      return "map_remote";
  }
  return "unknown";
}

residency_ledger& residency_ledger::operator+=(const residency_ledger& o) noexcept {
  to_device_bytes += o.to_device_bytes;
  to_host_bytes += o.to_host_bytes;
  dropped_bytes += o.dropped_bytes;
  discarded_bytes += o.discarded_bytes;
  placements += o.placements;
  evictions += o.evictions;
  refetches += o.refetches;
  return *this;
}

}  // namespace uma
