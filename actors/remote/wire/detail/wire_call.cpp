#include <uma/actors/remote/wire/detail/wire_call.hpp>

#include <caf/sec.hpp>

namespace uma::detail {

grpc::Status to_status(const error& e) {
  auto code = grpc::StatusCode::INTERNAL;
  switch (e.code()) {
    case errc::invalid_argument:
    case errc::overflow:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case errc::quota_exceeded:
    case errc::out_of_memory:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case errc::allocator_stopped:
    case errc::no_device:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case errc::not_supported:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case errc::timeout:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    default:
      break;
  }
  return {code, e.what()};
}

bool in_flight_counter::acquire(const std::string& who) {
  std::lock_guard lock(mutex_);
  auto& mine = by_identity_[who];
  if (total_ >= max_total_ || mine >= max_per_identity_) {
    if (mine == 0)
      by_identity_.erase(who);
    return false;
  }
  ++total_;
  ++mine;
  return true;
}

void in_flight_counter::release(const std::string& who) {
  std::lock_guard lock(mutex_);
  --total_;
  if (auto it = by_identity_.find(who); it != by_identity_.end() && --it->second == 0)
    by_identity_.erase(it);
}

void wire_call::fail(const error& e) {
  if (done_.load())
    return;
  ctx_->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(e.code())));
  finish(to_status(e));
}

void wire_call::fail_with(const caf::error& err, std::chrono::milliseconds timeout) {
  if (err.category() == error_category) {
    fail(to_uma_error(err));
    return;
  }
  if (err == caf::sec::request_timeout) {
    fail(error(errc::timeout, "the serving node's gateway did not answer within " +
                                  std::to_string(timeout.count()) + " ms"));
    return;
  }
  fail(error(errc::allocator_stopped,
             "the serving node's gateway is gone (" + caf::to_string(err) + ")"));
}

void wire_call::finish(const grpc::Status& status) {
  if (done_.exchange(true))
    return;
  counter_.release(who_.tenant);
  reactor_->Finish(status);
}

}  // namespace uma::detail
