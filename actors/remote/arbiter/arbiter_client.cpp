#include <uma/actors/remote/arbiter/arbiter_client.hpp>

#include <grpcpp/grpcpp.h>

#include <arbiter.grpc.pb.h>

#include <uma/actors/remote/detail/remote_channel.hpp>
#include <uma/actors/remote/wire/detail/arbiter_convert.hpp>

namespace uma {

namespace w = wire::v1;

struct arbiter_client::impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<w::Arbiter::Stub> stub;
};

namespace {

/// One call with `timeout`; throws what its status stands for (UNIMPLEMENTED: no arbiter).
template <class Req, class Method>
arbiter_report ask(w::Arbiter::Stub& stub, Method method, const Req& req,
                   const std::string& address, std::chrono::milliseconds timeout) {
  return detail::from_wire(
      detail::unary_call<w::ArbiterReport>(stub, method, req, address, timeout, [&] {
        raise(errc::not_supported,
              "the uma server at " + address + " has no arbiter (uma serve --arbiter-total)");
      }));
}

}  // namespace

arbiter_client::arbiter_client(std::string target, remote_client_options options)
    : target_(std::move(target)), timeout_(options.timeout), impl_(std::make_unique<impl>()) {
  impl_->channel = detail::open_channel(target_, options);
  detail::await_ready(*impl_->channel, target_, timeout_);
  impl_->stub = w::Arbiter::NewStub(impl_->channel);
}

arbiter_client::~arbiter_client() = default;

arbiter_report arbiter_client::report() const {
  return ask(*impl_->stub, &w::Arbiter::Stub::Report, w::ArbiterReportRequest{}, target_, timeout_);
}

arbiter_report arbiter_client::set_policy(const std::string& tenant, int device,
                                          const arbiter_policy& policy) {
  w::PolicyRequest req;
  req.set_tenant(tenant);
  req.set_device(device);
  req.set_min_bytes(policy.min_bytes);
  req.set_priority(policy.priority);
  req.set_weight(policy.weight);
  return ask(*impl_->stub, &w::Arbiter::Stub::SetPolicy, req, target_, timeout_);
}

arbiter_report arbiter_client::set_total(int device, std::uint64_t bytes) {
  w::TotalRequest req;
  req.set_device(device);
  req.set_total_bytes(bytes);
  return ask(*impl_->stub, &w::Arbiter::Stub::SetTotal, req, target_, timeout_);
}

}  // namespace uma
