// What the arbiter's requests must satisfy (actors/remote/arbiter/detail/arbiter_checks.hpp).

#include <uma/actors/remote/arbiter/detail/arbiter_checks.hpp>

#include <cstdio>

#include <uma/sys/error.hpp>

namespace uma::detail {

using std::to_string;

namespace {

constexpr std::size_t name_limit = 64;
constexpr std::uint32_t weight_limit = 1000;

}  // namespace

std::string member_name(std::uint64_t id, const std::string& tenant) {
  return "member " + to_string(id) + " (" + tenant + ")";
}

std::string identity_of(const std::string& tenant) {
  const auto slash = tenant.rfind('/');
  return slash == std::string::npos ? std::string{} : tenant.substr(0, slash);
}

void check_name(const std::string& what, const std::string& name) {
  if (name.empty() || name.size() > name_limit)
    raise(errc::invalid_argument,
          what + ": a name of " + to_string(name.size()) + " characters; a name has 1 to 64");
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c > 0x7e || c == '/') {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned>(c));
      raise(errc::invalid_argument, what + ": the name has character " + code + " at position " +
                                        to_string(i) +
                                        "; a name is printable ASCII without '/' (1 to 64)");
    }
  }
}

void check_weight(const std::string& what, int device, std::uint32_t weight) {
  if (weight < 1 || weight > weight_limit)
    raise(errc::invalid_argument, what + " asks a weight of " + to_string(weight) + " on device " +
                                      to_string(device) + "; a weight is 1 to 1000");
}

void check_claim(const std::string& tenant, const arbiter_claim& c,
                 std::optional<std::uint64_t> total, const arbiter_policy& p) {
  const auto what = "join: member '" + tenant + "'";
  const auto on = " on device " + to_string(c.device);
  if (!total)
    raise(errc::invalid_argument,
          what + " claims device " + to_string(c.device) + ", which the arbiter does not divide");
  check_weight(what, c.device, c.weight);
  if (c.min_bytes > p.min_bytes)
    raise(errc::invalid_argument, what + " asks a minimum of " + to_string(c.min_bytes) + " bytes" +
                                      on + ", but its policy allows " + to_string(p.min_bytes) +
                                      ": the minimum is the operator's");
  if (c.priority > p.priority)
    raise(errc::invalid_argument, what + " asks priority " + to_string(c.priority) + on +
                                      ", but its policy allows " + to_string(p.priority) +
                                      ": the priority is the operator's");
  if (c.weight > p.weight)
    raise(errc::invalid_argument, what + " asks a weight of " + to_string(c.weight) + on +
                                      ", but its policy allows " + to_string(p.weight) +
                                      ": the weight is the operator's");
  if (c.wanted_bytes > *total)
    raise(errc::invalid_argument, what + " wants " + to_string(c.wanted_bytes) + " bytes" + on +
                                      ", above its total of " + to_string(*total) + " bytes");
  if (c.wanted_bytes < c.min_bytes)
    raise(errc::invalid_argument, what + " wants " + to_string(c.wanted_bytes) + " bytes" + on +
                                      ", below its own minimum of " + to_string(c.min_bytes));
}

}  // namespace uma::detail
