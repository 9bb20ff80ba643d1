// The node's arbiter in the C ABI (actors/c/uma.h, docs/c_abi.md "The node's arbiter"): a
// uma::arbiter_member whose grants become the budgets of the allocator it joined with and, for
// the default allocator, the spill limits of PyTorch's hooks.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <uma/actors/c/c_allocator.hpp>
#include <uma/actors/c/c_guard.hpp>
#include <uma/actors/c/c_torch_spill.hpp>
#include <uma/actors/remote/arbiter/arbiter_member.hpp>
#include <uma/sys/log.hpp>

/// A membership (the C side of `uma_arbiter`): the member and what it was joined with.
struct uma_arbiter {
  uma_allocator* allocator = nullptr;
  std::vector<int> devices;  ///< the devices claimed
  std::unique_ptr<uma::arbiter_member> member;
};

namespace uma::c {

namespace {

/// Throws UMA_ERR_NULL_ARGUMENT or UMA_ERR_INVALID_ARGUMENT for a NULL or empty string.
std::string text_of(const char* s, const char* what, const char* example) {
  require(s, what);
  if (*s == '\0')
    throw status_error(UMA_ERR_INVALID_ARGUMENT, std::string(what) + " is empty (" + example + ")");
  return s;
}

/// One claim read from the caller's array (`stride` bytes apart: claims[0].struct_size).
uma_arbiter_claim claim_at(const uma_arbiter_claim* claims, std::size_t i, std::uint32_t stride) {
  uma_arbiter_claim c{};
  std::memcpy(&c, reinterpret_cast<const unsigned char*>(claims) + i * stride, sizeof c);
  return c;
}

/// The caller's claims checked and converted. The arbiter checks what is its to judge (weights,
/// minimums, wants, the operator's policy); this checks the array and the devices.
std::vector<arbiter_claim> claims_of(const uma_allocator& a, const uma_arbiter_claim* claims,
                                     std::size_t count) {
  require(claims, "uma_arbiter_join: claims");
  const int devices = a.backend->device_count();
  if (count == 0 || count > static_cast<std::size_t>(std::max(devices, 1)))
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_arbiter_join: count is " + std::to_string(count) +
                           "; a member claims 1 to " + std::to_string(std::max(devices, 1)) +
                           " device(s), each once (the " +
                           std::string(to_string(a.backend->kind())) + " backend has " +
                           std::to_string(devices) + ")");
  std::uint32_t stride = 0;
  std::memcpy(&stride, claims, sizeof stride);
  if (stride < sizeof(uma_arbiter_claim))
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_arbiter_join: claims[0].struct_size is " + std::to_string(stride) +
                           ", under the " + std::to_string(sizeof(uma_arbiter_claim)) +
                           " bytes of uma_arbiter_claim (fill it with uma_arbiter_claim_init)");
  std::vector<arbiter_claim> out;
  for (std::size_t i = 0; i < count; ++i) {
    const auto c = claim_at(claims, i, stride);
    const auto at = "uma_arbiter_join: claims[" + std::to_string(i) + "]";
    if (c.struct_size != stride)
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         at + ".struct_size is " + std::to_string(c.struct_size) +
                             ", claims[0]'s is " + std::to_string(stride) +
                             ": the claims of one array carry the same");
    if (c.device < 0 || c.device >= devices)
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         at + ".device is " + std::to_string(c.device) + ": the " +
                             std::string(to_string(a.backend->kind())) + " backend has " +
                             std::to_string(devices) + " device(s) whose budget to share");
    const auto twice = std::find_if(out.begin(), out.end(),
                                    [&](const arbiter_claim& o) { return o.device == c.device; });
    if (twice != out.end())
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         at + " claims device " + std::to_string(c.device) + " again (claims[" +
                             std::to_string(twice - out.begin()) + "] did)");
    out.push_back({c.device, c.min_bytes, c.wanted_bytes, c.priority, c.weight, c.idle != 0});
  }
  return out;
}

/// uma::apply_to on the allocator (the grant capped at the device's memory, which no budget may
/// pass), plus PyTorch's hooks when `a` is the allocator they use: the grant becomes their spill
/// limit, and their blocks placed on the device count as resident.
arbiter_apply apply_of(uma_allocator* a) {
  return [a, allocator_side = apply_to(*a->client)](const arbiter_grant& g) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto capped = g;
    capped.budget_bytes =
        std::min<std::uint64_t>(g.budget_bytes, a->backend->capabilities(g.device).total_memory);
    auto resident = allocator_side(capped);
    const auto allocator_done = clock::now();
    // PyTorch's blocks are slabs no plan covers: the account does not count them, so they get
    // what the grant leaves after the planned bytes, and the two together stay within it.
    if (a == default_allocator_if_made())
      resident += process_torch_spill().shrink_to(
          a, g.device, g.revoked || resident >= g.budget_bytes ? 0 : g.budget_bytes - resident);
    const auto ms = [](clock::duration d) {
      return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    };
    // One line a grant (grants are rare): how long a member takes to apply one is what decides
    // how fast bytes move between processes (docs/distributed.md).
    log(log_level::info, "arbiter member: budget " + std::to_string(g.budget_bytes) +
                             " bytes on device " + std::to_string(g.device) + " applied in " +
                             ms(clock::now() - start) + " ms (the allocator's budget and report " +
                             ms(allocator_done - start) + " ms, PyTorch's blocks " +
                             ms(clock::now() - allocator_done) + " ms); resident " +
                             std::to_string(resident) + " bytes");
    return resident;
  };
}

/// Throws UMA_ERR_NULL_ARGUMENT for a NULL member, UMA_ERR_INVALID_ARGUMENT for a device it did
/// not claim.
void check_claimed(const uma_arbiter* m, int device, const char* what) {
  require(m, (std::string(what) + ": member").c_str());
  if (std::find(m->devices.begin(), m->devices.end(), device) == m->devices.end())
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       std::string(what) + ": device " + std::to_string(device) +
                           " is not a device this member claimed when it joined");
}

using object = boost::json::object;

object claim_json(const arbiter_claim& c) {
  return {{"device", c.device},     {"min_bytes", c.min_bytes}, {"wanted_bytes", c.wanted_bytes},
          {"priority", c.priority}, {"weight", c.weight},       {"idle", c.idle}};
}

object member_json(const arbiter_member_row& m) {
  return {{"member", m.member},
          {"tenant", m.tenant},
          {"claim", claim_json(m.claim)},
          {"granted_bytes", m.granted_bytes},
          {"held_bytes", m.held_bytes},
          {"resident_bytes", m.resident_bytes},
          {"state", m.state},
          {"grown_bytes", m.grown_bytes},
          {"shrunk_bytes", m.shrunk_bytes},
          {"shrinks", m.shrinks},
          {"slowest_shrink_ms", m.slowest_shrink.count()}};
}

std::string report_json(const arbiter_member& self, const arbiter_report& r) {
  boost::json::array devices;
  for (const auto& d : r.devices) {
    boost::json::array members;
    for (const auto& m : d.members)
      members.push_back(member_json(m));
    devices.push_back(object{{"device", d.device},
                             {"total_bytes", d.total_bytes},
                             {"held_bytes", d.held_bytes},
                             {"members", std::move(members)}});
  }
  boost::json::array decisions;
  for (const auto& x : r.decisions)
    decisions.push_back(object{{"at_ms", x.at.count()},
                               {"member", x.member},
                               {"tenant", x.tenant},
                               {"device", x.device},
                               {"from_bytes", x.from_bytes},
                               {"to_bytes", x.to_bytes},
                               {"why", x.why}});
  return boost::json::serialize(object{{"member", self.id()},
                                       {"revoked", self.revoked()},
                                       {"ended", self.ended()},
                                       {"devices", std::move(devices)},
                                       {"decisions", std::move(decisions)},
                                       {"members", r.members},
                                       {"revocations", r.revocations}});
}

}  // namespace

}  // namespace uma::c

using uma::c::check_claimed;
using uma::c::guarded;
using uma::c::require;
using uma::c::status_error;

extern "C" {

void uma_arbiter_claim_init(uma_arbiter_claim* claim) {
  if (claim == nullptr)
    return;
  *claim = uma_arbiter_claim{};
  claim->struct_size = sizeof *claim;
  claim->weight = 1;
}

uma_status uma_arbiter_join(uma_allocator* allocator, const char* target, const char* name,
                            const uma_arbiter_claim* claims, size_t count, uma_arbiter** out) {
  return guarded([&] {
    require(allocator, "uma_arbiter_join: allocator");
    require(out, "uma_arbiter_join: out");
    *out = nullptr;
    auto where =
        uma::c::text_of(target, "uma_arbiter_join: target", "the node's socket: unix:PATH");
    auto who = uma::c::text_of(name, "uma_arbiter_join: name", "what the node calls this process");
    auto wanted = uma::c::claims_of(*allocator, claims, count);
    auto m = std::make_unique<uma_arbiter>();
    m->allocator = allocator;
    for (const auto& c : wanted)
      m->devices.push_back(c.device);
    m->member = std::make_unique<uma::arbiter_member>(
        std::move(where), std::move(who), std::move(wanted), uma::c::apply_of(allocator));
    *out = m.release();
    return UMA_OK;
  });
}

uma_status uma_arbiter_want(uma_arbiter* member, int device, uint64_t wanted_bytes, int idle) {
  return guarded([&] {
    check_claimed(member, device, "uma_arbiter_want");
    member->member->want(device, wanted_bytes, idle != 0);
    return UMA_OK;
  });
}

uma_status uma_arbiter_budget(const uma_arbiter* member, int device, uint64_t* out) {
  return guarded([&] {
    check_claimed(member, device, "uma_arbiter_budget");
    require(out, "uma_arbiter_budget: out");
    *out = member->member->budget(device);
    return UMA_OK;
  });
}

uma_status uma_arbiter_wait_budget(const uma_arbiter* member, int device, uint64_t at_least,
                                   uint64_t at_most, uint32_t timeout_ms, uint64_t* out) {
  return guarded([&] {
    check_claimed(member, device, "uma_arbiter_wait_budget");
    std::string range = "[";  // appended: GCC 12 warns falsely of "[" + std::string (-Wrestrict)
    range.append(std::to_string(at_least)).append(", ").append(std::to_string(at_most)).append("]");
    if (at_least > at_most)
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "uma_arbiter_wait_budget: at_least is above at_most: " + range);
    const auto& m = *member->member;
    const auto within = [&](std::uint64_t b) { return b >= at_least && b <= at_most; };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    // In slices, so that a membership that ends is seen before the timeout.
    bool ok = false;
    std::string ended;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      ok = m.wait_for_budget(
          device, within,
          std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(100)));
      ended = m.ended();
      if (ok || !ended.empty() || std::chrono::steady_clock::now() >= deadline)
        break;
    }
    const auto budget = m.budget(device);
    if (out != nullptr)
      *out = budget;
    if (ok)
      return UMA_OK;
    const auto where = "uma_arbiter_wait_budget: device " + std::to_string(device) +
                       "'s budget is " + std::to_string(budget) + " bytes, not within " + range;
    if (!ended.empty())
      throw status_error(UMA_ERR_ALLOCATOR_STOPPED, where + ": " + ended);
    throw status_error(UMA_ERR_TIMEOUT, where + " after " + std::to_string(timeout_ms) + " ms");
  });
}

uma_status uma_arbiter_report_json(const uma_arbiter* member, char* buffer, size_t capacity,
                                   size_t* needed) {
  return guarded([&] {
    require(member, "uma_arbiter_report_json: member");
    const auto& m = *member->member;
    return uma::c::copy_json(uma::c::report_json(m, m.report()), buffer, capacity, needed,
                             "uma_arbiter_report_json");
  });
}

void uma_arbiter_leave(uma_arbiter* member) {
  delete member;  // ~arbiter_member ends the membership: the node frees its budgets at once
}

}  // extern "C"
