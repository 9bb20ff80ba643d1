#include "tools/cli_arbiter_options.hpp"

#include <charconv>
#include <cstdint>
#include <string_view>
#include <utility>

#include <CLI/CLI.hpp>

#include <uma/sys/error.hpp>

namespace uma::cli {

namespace {

/// `text` as a number in [least, most], or nullopt.
[[nodiscard]] std::optional<std::uint64_t> number_in(std::string_view text, std::uint64_t least,
                                                     std::uint64_t most) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < least || value > most)
    return std::nullopt;
  return value;
}

/// `DEVICE:BYTES` of `option` (--arbiter-total, --set-total); throws a ValidationError naming
/// the option and the value otherwise.
[[nodiscard]] std::pair<int, std::uint64_t> device_bytes(std::string_view option,
                                                         const std::string& text) {
  const auto colon = text.find(':');
  const auto device = number_in(std::string_view(text).substr(0, colon), 0, max_arbiter_device);
  const auto bytes = colon == std::string::npos
                         ? std::nullopt
                         : number_in(std::string_view(text).substr(colon + 1), 4096, UINT64_MAX);
  if (!device || !bytes)
    throw CLI::ValidationError(std::string(option) + " needs DEVICE:BYTES, DEVICE from 0 to " +
                               std::to_string(max_arbiter_device) +
                               " and BYTES at least 4096, not '" + text + "'");
  return {static_cast<int>(*device), *bytes};
}

/// `TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT`, split from the right (a tenant holds spaces and may
/// hold ':'); throws a ValidationError naming `option` and the value otherwise. Whether the
/// tenant is '<identity>/<name>' and the weight 1 to 1000 is the arbiter's to say.
[[nodiscard]] tenant_policy policy(std::string_view option, const std::string& text) {
  std::string_view rest = text;
  std::optional<std::uint64_t> fields[4];
  const std::uint64_t most[4] = {UINT32_MAX, UINT32_MAX, UINT64_MAX, max_arbiter_device};
  bool ok = true;
  for (int i = 0; i < 4 && ok; ++i) {  // WEIGHT, PRIORITY, MIN_BYTES, DEVICE
    const auto colon = rest.rfind(':');
    ok = colon != std::string_view::npos;
    if (ok) {
      fields[i] = number_in(rest.substr(colon + 1), 0, most[i]);
      rest = rest.substr(0, colon);
      ok = fields[i].has_value();
    }
  }
  if (!ok || rest.empty())
    throw CLI::ValidationError(std::string(option) +
                               " needs TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT (TENANT as "
                               "'uid 1000/infer', DEVICE from 0 to " +
                               std::to_string(max_arbiter_device) + "), not '" + text + "'");
  return {std::string(rest), static_cast<int>(*fields[3]),
          arbiter_policy{*fields[2], static_cast<std::uint32_t>(*fields[1]),
                         static_cast<std::uint32_t>(*fields[0])}};
}

}  // namespace

void add_arbiter_options(CLI::App& serve, options& o) {
  serve
      .add_option_function<std::vector<std::string>>(
          "--arbiter-total",
          [&o](const std::vector<std::string>& values) {
            for (const auto& v : values) {
              const auto [device, bytes] = device_bytes("--arbiter-total", v);
              if (!o.arbiter_totals.emplace(device, bytes).second)
                throw CLI::ValidationError("--arbiter-total gives device " +
                                           std::to_string(device) + " twice ('" + v + "')");
            }
          },
          "the node's arbiter divides BYTES of DEVICE among the processes that join it "
          "(repeatable, a device once; none: no arbiter)")
      ->type_name("DEVICE:BYTES")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  serve
      .add_option_function<std::vector<std::string>>(
          "--arbiter-policy",
          [&o](const std::vector<std::string>& values) {
            for (const auto& v : values)
              o.arbiter_policies.push_back(policy("--arbiter-policy", v));
          },
          "the most a tenant ('uid 1000/infer') may claim on a device (repeatable; with "
          "--arbiter-total)")
      ->type_name("TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  serve
      .add_option_function<std::string>(
          "--arbiter-deadline",
          [&o](const std::string& v) {
            const auto ms = number_in(v, 1, 3'600'000);
            if (!ms)
              throw CLI::ValidationError(
                  "--arbiter-deadline needs milliseconds from 1 to 3600000, not '" + v + "'");
            o.arbiter_deadline = std::chrono::milliseconds(*ms);
            o.arbiter_deadline_given = true;
          },
          "how long a member has to evict down to a lowered budget, 1 to 3600000 (10000)")
      ->type_name("MS");
}

void add_budget_settings(CLI::App& budgets, options& o) {
  budgets
      .add_option_function<std::string>(
          "--set-total",
          [&o](const std::string& v) { o.set_total = device_bytes("--set-total", v); },
          "the operator's: the bytes the arbiter divides on DEVICE, then the report")
      ->type_name("DEVICE:BYTES");
  budgets
      .add_option_function<std::string>(
          "--set-policy", [&o](const std::string& v) { o.set_policy = policy("--set-policy", v); },
          "the operator's: the most TENANT may claim on DEVICE, then the report")
      ->type_name("TENANT:DEVICE:MIN:PRIORITY:WEIGHT");
}

std::string check_arbiter_combination(const options& o) {
  if (!o.arbiter_totals.empty())
    return {};
  if (!o.arbiter_policies.empty())
    return "--arbiter-policy goes with --arbiter-total (without it the node has no arbiter)";
  if (o.arbiter_deadline_given)
    return "--arbiter-deadline goes with --arbiter-total (without it the node has no arbiter)";
  return {};
}

std::string arbiter_totals_complaint(const options& o, const backend& b) {
  for (const auto& [device, bytes] : o.arbiter_totals) {
    const auto given = "--arbiter-total " + std::to_string(device) + ":" + std::to_string(bytes);
    if (device >= b.device_count())
      return given + ": the " + std::string(to_string(b.kind())) + " backend has no device " +
             std::to_string(device) + " (it has " + std::to_string(b.device_count()) +
             " device(s))";
    const auto memory = b.capabilities(device).total_memory;
    if (bytes > memory)
      return given + ": device " + std::to_string(device) + " has " + std::to_string(memory) +
             " bytes of memory, fewer than that";
  }
  return {};
}

std::shared_ptr<arbiter> make_node_arbiter(const options& o,
                                           std::function<void(const std::string&)> log) {
  if (o.arbiter_totals.empty())
    return nullptr;
  auto a = std::make_shared<arbiter>(arbiter_config{
      .totals = o.arbiter_totals, .evict_deadline = o.arbiter_deadline, .log = std::move(log)});
  for (const auto& p : o.arbiter_policies) {
    try {
      a->set_policy(p.tenant, p.device, p.policy);
    } catch (const error& e) {
      if (e.code() != errc::invalid_argument)
        throw;
      raise(errc::invalid_argument, "--arbiter-policy '" + to_string(p) + "': " + e.what());
    }
  }
  return a;
}

std::string to_string(const tenant_policy& p) {
  return p.tenant + ":" + std::to_string(p.device) + ":" + std::to_string(p.policy.min_bytes) +
         ":" + std::to_string(p.policy.priority) + ":" + std::to_string(p.policy.weight);
}

}  // namespace uma::cli
