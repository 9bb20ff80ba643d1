// The blocking client over the gRPC wire (docs/distributed.md).

#include <uma/actors/remote/remote_client.hpp>

#include <future>
#include <thread>

#include <grpcpp/grpcpp.h>

#include <remote.grpc.pb.h>

#include <uma/actors/remote/detail/remote_channel.hpp>
#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/wire/detail/wire_convert.hpp>

namespace uma {

namespace w = wire::v1;

struct remote_client::impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<w::Remote::Stub> stub;
  grpc::ClientContext session_ctx;
  std::unique_ptr<grpc::ClientReader<w::SessionEvent>> session;

  /// One unary call with the client's timeout; throws what the status stands for.
  template <class Req, class Rep, class Method>
  Rep call(Method method, const Req& req, const std::string& address,
           std::chrono::milliseconds timeout) {
    return detail::unary_call<Rep>(*stub, method, req, address, timeout);
  }

  /// The server's snapshot, read from its stream (StreamSnapshot) within `timeout` and at most
  /// `max_snapshot_bytes`: a server that sends more is refused, not trusted with this process's
  /// memory.
  w::Snapshot snapshot(const std::string& address, std::chrono::milliseconds timeout) {
    constexpr std::size_t max_snapshot_bytes = std::size_t{1} << 30;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    auto reader = stub->StreamSnapshot(&ctx, w::SnapshotRequest{});
    w::Snapshot all, part;
    std::size_t bytes = 0;
    for (bool first = true; reader->Read(&part); first = false) {
      bytes += part.ByteSizeLong();
      if (bytes > max_snapshot_bytes) {
        ctx.TryCancel();
        static_cast<void>(reader->Finish());
        raise(errc::backend_error, "the uma server at " + address +
                                       " sent a snapshot of more than " +
                                       std::to_string(max_snapshot_bytes) + " bytes; refused");
      }
      if (first)
        all.Swap(&part);
      else
        detail::merge_snapshot(all, part);
      part.Clear();
    }
    const auto status = reader->Finish();
    if (!status.ok())
      detail::throw_status(ctx, status, address, timeout);
    return all;
  }

  /// Opens the session's stream and reads its first event (the key) within `timeout`: the read
  /// runs on a helper thread, cancelled when the server stays silent.
  session_key open(const std::string& address, std::chrono::milliseconds timeout) {
    session = stub->OpenSession(&session_ctx, w::OpenSessionRequest{});
    w::SessionEvent first;
    auto read = std::async(std::launch::async, [&] { return session->Read(&first); });
    if (read.wait_for(timeout) != std::future_status::ready) {
      session_ctx.TryCancel();
      read.wait();
      detail::connect_failed(address,
                             "no session within " + std::to_string(timeout.count()) + " ms");
    }
    if (!read.get()) {
      const auto status = session->Finish();
      try {
        detail::throw_status(session_ctx, status, address, timeout);
      } catch (const error& e) {
        detail::connect_failed(address, std::string("cannot open a session: ") + e.what());
      }
    }
    return detail::from_wire(first.key());
  }

  void end_session() {
    if (!session)
      return;
    session_ctx.TryCancel();
    static_cast<void>(session->Finish());
    session.reset();
  }
};

remote_client::remote_client(std::string target, remote_client_options options)
    : address_(target), timeout_(options.timeout), impl_(std::make_unique<impl>()) {
  impl_->channel = detail::open_channel(target, options);
  impl_->stub = w::Remote::NewStub(impl_->channel);
  detail::await_ready(*impl_->channel, address_, timeout_);
  session_ = impl_->open(address_, timeout_);
}

remote_client::~remote_client() {
  try {
    close();
  } catch (const std::exception&) {
    // The server is gone or slow: the session ends anyway when its stream does.
  }
  impl_->end_session();
}

void remote_client::check_open() const {
  if (closed_)
    raise(errc::invalid_argument, "remote_client: the session with the uma server at " + address_ +
                                      " is closed (close() was called)");
}

namespace {

void set_key(const session_key& k, w::SessionKey* out) {
  detail::to_wire(k, *out);
}

template <class Fn>
auto checked_reply(const std::string& address, Fn fn) {
  try {
    return fn();
  } catch (const error& e) {
    if (e.code() != errc::invalid_argument)
      throw;
    raise(errc::backend_error,
          "the uma server at " + address + " sent a malformed reply: " + e.what());
  }
}

}  // namespace

void remote_client::close() {
  if (closed_)
    return;
  struct mark_closed {  // closed even when the server does not answer: later calls fail here
    bool& closed;
    ~mark_closed() { closed = true; }
  } mark{closed_};
  w::CloseSessionRequest req;
  set_key(session_, req.mutable_session());
  static_cast<void>(impl_->call<w::CloseSessionRequest, w::CountReply>(
      &w::Remote::Stub::CloseSession, req, address_, timeout_));
  impl_->end_session();
}

region_handle remote_client::allocate(std::uint64_t bytes, std::string label,
                                      std::uint64_t alignment, attach_flag attach) {
  check_open();
  w::AllocateRequest req;
  set_key(session_, req.mutable_session());
  req.set_bytes(bytes);
  req.set_alignment(alignment);
  req.set_attach(static_cast<std::uint32_t>(attach));
  req.set_label(std::move(label));
  return detail::from_wire(impl_->call<w::AllocateRequest, w::RegionHandle>(
      &w::Remote::Stub::Allocate, req, address_, timeout_));
}

std::uint64_t remote_client::release(region_handle region) {
  check_open();
  w::RegionRequest req;
  set_key(session_, req.mutable_session());
  detail::to_wire(region, *req.mutable_region());
  return impl_
      ->call<w::RegionRequest, w::CountReply>(&w::Remote::Stub::Release, req, address_, timeout_)
      .value();
}

namespace {

void add_regions(const std::vector<region_handle>& regions,
                 google::protobuf::RepeatedPtrField<w::RegionHandle>* out) {
  for (const auto& h : regions)
    detail::to_wire(h, *out->Add());
}

}  // namespace

remote_op_result remote_client::prefetch(std::vector<region_handle> regions,
                                         std::vector<location> locations, completion when) {
  check_open();
  w::PrefetchRequest req;
  set_key(session_, req.mutable_session());
  add_regions(regions, req.mutable_regions());
  for (const auto& l : locations)
    detail::to_wire(l, *req.add_locations());
  req.set_reply_when(static_cast<std::uint32_t>(when));
  return detail::from_wire(impl_->call<w::PrefetchRequest, w::OpResult>(&w::Remote::Stub::Prefetch,
                                                                        req, address_, timeout_));
}

remote_op_result remote_client::discard(std::vector<region_handle> regions, completion when) {
  check_open();
  w::DiscardRequest req;
  set_key(session_, req.mutable_session());
  add_regions(regions, req.mutable_regions());
  req.set_reply_when(static_cast<std::uint32_t>(when));
  return detail::from_wire(impl_->call<w::DiscardRequest, w::OpResult>(&w::Remote::Stub::Discard,
                                                                       req, address_, timeout_));
}

remote_op_result remote_client::advise(std::vector<region_handle> regions, advice what,
                                       location where) {
  check_open();
  w::AdviseRequest req;
  set_key(session_, req.mutable_session());
  add_regions(regions, req.mutable_regions());
  req.set_advice(static_cast<std::uint32_t>(what));
  detail::to_wire(where, *req.mutable_where());
  return detail::from_wire(impl_->call<w::AdviseRequest, w::OpResult>(&w::Remote::Stub::Advise, req,
                                                                      address_, timeout_));
}

residency_result remote_client::will_access(remote_access_plan plan) {
  check_open();
  w::AccessPlan req;
  set_key(session_, req.mutable_session());
  add_regions(plan.regions, req.mutable_regions());
  req.set_device(plan.device);
  req.set_mode(static_cast<std::uint32_t>(plan.mode));
  req.set_policy(static_cast<std::uint32_t>(plan.policy));
  req.set_reply_when(static_cast<std::uint32_t>(plan.reply_when));
  return detail::from_wire(impl_->call<w::AccessPlan, w::ResidencyResult>(
      &w::Remote::Stub::WillAccess, req, address_, timeout_));
}

std::uint64_t remote_client::done_with(std::vector<region_handle> regions) {
  check_open();
  w::RegionsRequest req;
  set_key(session_, req.mutable_session());
  add_regions(regions, req.mutable_regions());
  return impl_
      ->call<w::RegionsRequest, w::CountReply>(&w::Remote::Stub::DoneWith, req, address_, timeout_)
      .value();
}

residency_result remote_client::dead(std::vector<region_handle> regions) {
  check_open();
  w::RegionsRequest req;
  set_key(session_, req.mutable_session());
  add_regions(regions, req.mutable_regions());
  return detail::from_wire(impl_->call<w::RegionsRequest, w::ResidencyResult>(
      &w::Remote::Stub::Dead, req, address_, timeout_));
}

range_attributes remote_client::attributes(region_handle region) {
  check_open();
  w::RegionRequest req;
  set_key(session_, req.mutable_session());
  detail::to_wire(region, *req.mutable_region());
  const auto rep = impl_->call<w::RegionRequest, w::Attributes>(&w::Remote::Stub::GetAttributes,
                                                                req, address_, timeout_);
  return checked_reply(address_, [&] { return to_local(detail::from_wire(rep)); });
}

remote_stats remote_client::stats() {
  check_open();
  const auto rep = impl_->call<w::StatsRequest, w::Stats>(&w::Remote::Stub::GetStats,
                                                          w::StatsRequest{}, address_, timeout_);
  return checked_reply(address_, [&] { return detail::from_wire(rep); });
}

std::vector<remote_region_info> remote_client::regions_page(std::uint64_t start,
                                                            std::uint32_t page_size,
                                                            std::uint64_t& total,
                                                            std::uint64_t& next) {
  check_open();
  w::RegionsPageRequest req;
  set_key(session_, req.mutable_session());
  req.set_start(start);
  req.set_page_size(page_size);
  const auto rep = impl_->call<w::RegionsPageRequest, w::RegionsPage>(&w::Remote::Stub::Regions,
                                                                      req, address_, timeout_);
  total = rep.total();
  next = rep.next_start();
  if (next != 0 && next <= start)
    raise(errc::backend_error, "the uma server at " + address_ + " sent a page that goes back");
  return checked_reply(address_, [&] {
    std::vector<remote_region_info> out;
    for (const auto& row : rep.rows())
      out.push_back(detail::from_wire(row));
    return out;
  });
}

std::vector<remote_region_info> remote_client::regions() {
  std::vector<remote_region_info> all;
  std::uint64_t start = 0, total = 0, next = 0;
  do {
    auto page = regions_page(start, 0, total, next);
    all.insert(all.end(), page.begin(), page.end());
    start = next;
  } while (next != 0);
  return all;
}

remote_snapshot remote_client::snapshot() {
  check_open();
  const auto rep = impl_->snapshot(address_, timeout_);
  auto s = checked_reply(address_, [&] { return detail::from_wire(rep); });
  if (auto bad = detail::check_snapshot(s))
    raise(errc::backend_error,
          "the uma server at " + address_ + " sent a malformed " + bad->message);
  return s;
}

std::uint64_t remote_client::quota() {
  return set_quota(0);
}

std::uint64_t remote_client::set_quota(std::uint64_t bytes) {
  check_open();
  w::QuotaRequest req;
  req.set_bytes(bytes);
  return impl_
      ->call<w::QuotaRequest, w::CountReply>(&w::Remote::Stub::Quota, req, address_, timeout_)
      .value();
}

std::uint64_t remote_client::restart() {
  check_open();
  return impl_
      ->call<w::RestartRequest, w::CountReply>(&w::Remote::Stub::Restart, w::RestartRequest{},
                                               address_, timeout_)
      .value();
}

void remote_client::export_ipc(region_handle region) {
  check_open();
  raise(errc::not_supported, detail::ipc_refusal_message(region));
}

}  // namespace uma
