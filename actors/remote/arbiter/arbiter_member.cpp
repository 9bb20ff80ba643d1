// A process's membership of its node's arbiter (actors/remote/arbiter/arbiter_member.hpp).

#include <uma/actors/remote/arbiter/arbiter_member.hpp>

#include <algorithm>
#include <future>

#include <grpcpp/grpcpp.h>

#include <arbiter.grpc.pb.h>

#include <uma/actors/client.hpp>
#include <uma/actors/remote/detail/remote_channel.hpp>
#include <uma/actors/remote/wire/detail/arbiter_convert.hpp>
#include <uma/sys/log.hpp>

namespace uma {

namespace w = wire::v1;

arbiter_apply apply_to(client& c) {
  return [&c](const arbiter_grant& g) -> std::uint64_t {
    static_cast<void>(c.device_budget(g.device, std::max<std::uint64_t>(g.budget_bytes, 1)));
    if (g.revoked)
      static_cast<void>(c.quota(std::max<std::uint64_t>(c.stats().live_bytes, 1)));
    const auto report = c.residency();
    const auto d = static_cast<std::size_t>(g.device);
    return d < report.devices.size() ? report.devices[d].resident : 0;
  };
}

struct arbiter_member::impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<w::Arbiter::Stub> stub;
  grpc::ClientContext join_ctx;
  std::unique_ptr<grpc::ClientReader<w::GrantEvent>> stream;
  w::MemberKey key;

  template <class Req, class Rep, class Method>
  Rep call(Method method, const Req& req, const std::string& address,
           std::chrono::milliseconds timeout) {
    return detail::unary_call<Rep>(*stub, method, req, address, timeout);
  }

  /// Opens the Join stream and reads its first event (the key) within `timeout`.
  void join(const w::JoinRequest& req, const std::string& address,
            std::chrono::milliseconds timeout) {
    stream = stub->Join(&join_ctx, req);
    w::GrantEvent first;
    auto read = std::async(std::launch::async, [&] { return stream->Read(&first); });
    if (read.wait_for(timeout) != std::future_status::ready) {
      join_ctx.TryCancel();
      read.wait();
      detail::connect_failed(
          address, "no answer to the join within " + std::to_string(timeout.count()) + " ms");
    }
    if (!read.get()) {
      const auto status = stream->Finish();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED)
        raise(errc::not_supported,
              "the uma server at " + address + " has no arbiter (uma serve --arbiter-total)");
      detail::throw_status(join_ctx, status, address, timeout);
    }
    key = first.key();
  }
};

arbiter_member::arbiter_member(std::string target, std::string name,
                               std::vector<arbiter_claim> claims, arbiter_apply apply,
                               remote_client_options options)
    : target_(std::move(target)),
      timeout_(options.timeout),
      apply_(std::move(apply)),
      impl_(std::make_unique<impl>()) {
  impl_->channel = detail::open_channel(target_, options);
  detail::await_ready(*impl_->channel, target_, timeout_);
  impl_->stub = w::Arbiter::NewStub(impl_->channel);
  w::JoinRequest req;
  req.set_name(name);
  for (const auto& c : claims)
    detail::to_wire(c, *req.add_devices());
  impl_->join(req, target_, timeout_);
  id_ = impl_->key.id();
  reader_ = std::thread([this] { read_grants(); });
  std::unique_lock lock(mutex_);
  const bool all = changed_.wait_for(lock, timeout_, [&] {
    return !ended_.empty() || std::ranges::all_of(claims, [&](const arbiter_claim& c) {
      return budgets_.count(c.device) != 0;
    });
  });
  if (!all || !ended_.empty()) {
    const auto why = ended_.empty() ? "its first grants did not arrive in time" : ended_;
    lock.unlock();
    impl_->join_ctx.TryCancel();
    reader_.join();
    detail::connect_failed(target_, "joined its arbiter, but " + why);
  }
}

arbiter_member::~arbiter_member() {
  impl_->join_ctx.TryCancel();
  if (reader_.joinable())
    reader_.join();
}

void arbiter_member::read_grants() {
  w::GrantEvent ev;
  while (impl_->stream->Read(&ev))
    apply_one(detail::from_wire(ev));
  const auto status = impl_->stream->Finish();
  std::lock_guard lock(mutex_);
  ended_ = "the membership ended (" +
           (status.ok() ? std::string("closed") : status.error_message()) + ")";
  changed_.notify_all();
}

void arbiter_member::apply_one(const arbiter_grant& g) {
  std::uint64_t resident = 0;
  try {
    resident = apply_(g);
  } catch (const std::exception& e) {
    // Not acknowledged: the arbiter's deadline decides (docs/distributed.md).
    log(log_level::warning, "arbiter member " + std::to_string(id_) + ": applying a budget of " +
                                std::to_string(g.budget_bytes) + " bytes on device " +
                                std::to_string(g.device) + " failed: " + e.what());
    return;
  }
  if (g.shrink && !g.revoked)
    acknowledge(g, resident);
  {
    std::lock_guard lock(mutex_);
    budgets_[g.device] = g.revoked ? 0 : g.budget_bytes;
    revoked_ = revoked_ || g.revoked;
    if (g.revoked && ended_.empty())
      ended_ = "the node revoked every grant of this member (" + g.why + ")";
  }
  changed_.notify_all();
}

void arbiter_member::acknowledge(const arbiter_grant& g, std::uint64_t resident) {
  w::EvictedRequest req;
  *req.mutable_key() = impl_->key;
  req.set_device(g.device);
  req.set_sequence(g.sequence);
  req.set_resident_bytes(resident);
  try {
    static_cast<void>(impl_->call<w::EvictedRequest, w::ArbiterAck>(&w::Arbiter::Stub::Evicted, req,
                                                                    target_, timeout_));
  } catch (const error& e) {
    log(log_level::warning, "arbiter member " + std::to_string(id_) +
                                ": the acknowledgement of a shrink failed: " + e.what());
  }
}

void arbiter_member::want(int device, std::uint64_t bytes, bool idle) {
  w::DemandRequest req;
  *req.mutable_key() = impl_->key;
  req.set_device(device);
  req.set_wanted_bytes(bytes);
  req.set_idle(idle);
  static_cast<void>(impl_->call<w::DemandRequest, w::ArbiterAck>(&w::Arbiter::Stub::Demand, req,
                                                                 target_, timeout_));
}

std::uint64_t arbiter_member::budget(int device) const {
  std::lock_guard lock(mutex_);
  const auto it = budgets_.find(device);
  return it == budgets_.end() ? 0 : it->second;
}

bool arbiter_member::wait_for_budget(int device, const std::function<bool(std::uint64_t)>& pred,
                                     std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] {
    const auto it = budgets_.find(device);
    return it != budgets_.end() && pred(it->second);
  });
}

bool arbiter_member::revoked() const {
  std::lock_guard lock(mutex_);
  return revoked_;
}

std::string arbiter_member::ended() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

arbiter_report arbiter_member::report() const {
  return detail::from_wire(impl_->call<w::ArbiterReportRequest, w::ArbiterReport>(
      &w::Arbiter::Stub::Report, w::ArbiterReportRequest{}, target_, timeout_));
}

}  // namespace uma
