#pragma once

#include <memory>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/actors/reply_value.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/messages/interface.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/host_backend.hpp>

namespace uma::test {

/// An actor system config with uma's types registered.
struct uma_config : caf::actor_system_config {
  uma_config() { register_types(*this); }
};

/// An actor system per test (configured by `Config`), with uma registered, and a host-backend
/// allocator behind a facade. The backend is kept so tests can read its call counters.
template <class Config>
class basic_actor_fixture : public ::testing::Test {
 protected:
  allocator_config host_config() {
    allocator_config c;
    c.backend.instance = backend_;
    return c;
  }

  /// A config on a host backend of its own that emulates one device of `device_bytes` (the
  /// residency suites: budgets and plans need a device).
  static allocator_config one_device_config(std::size_t device_bytes = std::size_t{64} << 20) {
    allocator_config c;
    c.backend.instance = std::make_shared<host_backend>(emulated_devices{1, device_bytes});
    return c;
  }

  /// A fresh allocator on the fixture's backend. Its facade sends every allocation to the
  /// allocator (the block allocator off): the suites on this fixture test the allocator's message
  /// path and count its regions; tests/block_allocator_test.cpp and the parameterized lifetime
  /// and client suites run the facade with the block allocator on.
  std::unique_ptr<client> make_client(allocator_config c) {
    if (!c.backend.instance)
      c.backend.instance = backend_;
    auto out = std::make_unique<client>(sys_, std::move(c));
    out->set_max_block_bytes(0);
    return out;
  }

  std::shared_ptr<host_backend> backend_ = std::make_shared<host_backend>();
  Config cfg_;
  caf::actor_system sys_{cfg_};
  std::unique_ptr<client> uma_ = make_client(host_config());
};

using actor_fixture = basic_actor_fixture<uma_config>;

/// Asserts that `stmt` throws uma::error with `expected_code`: how a test identifies an error.
#define UMA_EXPECT_ERRC(stmt, expected_code)          \
  do {                                                \
    try {                                             \
      static_cast<void>(stmt);                        \
      ADD_FAILURE() << #stmt " did not throw";        \
    } catch (const ::uma::error& e) {                 \
      EXPECT_EQ(e.code(), expected_code) << e.what(); \
    }                                                 \
  } while (false)

/// Asserts that `stmt` throws uma::error with `code` and a message containing `words`. Only for
/// tests where the message's content is the behaviour ("names the sizes"); otherwise use
/// UMA_EXPECT_ERRC.
#define UMA_EXPECT_ERROR(stmt, expected_code, words)                   \
  do {                                                                 \
    try {                                                              \
      static_cast<void>(stmt);                                         \
      ADD_FAILURE() << #stmt " did not throw";                         \
    } catch (const ::uma::error& e) {                                  \
      EXPECT_EQ(e.code(), expected_code) << e.what();                  \
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos)  \
          << "message '" << e.what() << "' lacks '" << (words) << "'"; \
    }                                                                  \
  } while (false)

}  // namespace uma::test
