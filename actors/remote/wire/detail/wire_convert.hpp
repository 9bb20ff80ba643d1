#pragma once

// The remote interface's values in protobuf form (actors/remote/wire/remote.proto) and back. Shared
// by the gRPC server, the client and the fuzz target; includes protobuf's generated header, so only
// the wire's own sources include it.
//
// From the wire, every enum-like field arrives as a uint32: one that does not fit the enum's
// byte is refused here (`error(invalid_argument)` naming the field), so that 257 cannot become
// 1; values that fit go on to the gateway's own range checks
// (actors/remote/detail/remote_checks.hpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <remote.pb.h>

#include <uma/messages/remote_types.hpp>

namespace uma::detail {

/// `value` as the byte of an enum named `field`; throws `error(invalid_argument)` above 255.
[[nodiscard]] std::uint8_t enum_byte(std::uint32_t value, const char* field);

[[nodiscard]] session_key from_wire(const wire::v1::SessionKey& k);
void to_wire(const session_key& k, wire::v1::SessionKey& out);
[[nodiscard]] region_handle from_wire(const wire::v1::RegionHandle& h);
void to_wire(const region_handle& h, wire::v1::RegionHandle& out);
[[nodiscard]] location from_wire(const wire::v1::Location& l);
void to_wire(const location& l, wire::v1::Location& out);
[[nodiscard]] std::vector<region_handle> from_wire(
    const google::protobuf::RepeatedPtrField<wire::v1::RegionHandle>& hs);

// -- requests (client -> server) ------------------------------------------------------------------
[[nodiscard]] remote_allocate_request from_wire(const wire::v1::AllocateRequest& r);
[[nodiscard]] remote_prefetch_request from_wire(const wire::v1::PrefetchRequest& r);
[[nodiscard]] remote_discard_request from_wire(const wire::v1::DiscardRequest& r);
[[nodiscard]] remote_advise_request from_wire(const wire::v1::AdviseRequest& r);
[[nodiscard]] remote_access_plan from_wire(const wire::v1::AccessPlan& r);

// -- replies (server -> client); from_wire throws on values out of range -------------------------
void to_wire(const remote_op_result& r, wire::v1::OpResult& out);
[[nodiscard]] remote_op_result from_wire(const wire::v1::OpResult& r);
void to_wire(const residency_result& r, wire::v1::ResidencyResult& out);
[[nodiscard]] residency_result from_wire(const wire::v1::ResidencyResult& r);
void to_wire(const remote_attributes& a, wire::v1::Attributes& out);
[[nodiscard]] remote_attributes from_wire(const wire::v1::Attributes& a);
void to_wire(const allocator_stats& s, wire::v1::AllocatorStats& out);
[[nodiscard]] allocator_stats from_wire(const wire::v1::AllocatorStats& s);
void to_wire(const remote_stats& s, wire::v1::Stats& out);
[[nodiscard]] remote_stats from_wire(const wire::v1::Stats& s);
void to_wire(const region_info& r, wire::v1::RegionInfo& out);
[[nodiscard]] region_info from_wire(const wire::v1::RegionInfo& r);
void to_wire(const remote_region_info& r, wire::v1::RegionRow& out);
[[nodiscard]] remote_region_info from_wire(const wire::v1::RegionRow& r);
void to_wire(const remote_snapshot& s, wire::v1::Snapshot& out);
[[nodiscard]] remote_snapshot from_wire(const wire::v1::Snapshot& s);

/// A snapshot on the wire as a stream (StreamSnapshot): `full` cut into messages of at most about
/// `max_bytes` each (one region or event larger than that goes alone). The first carries
/// everything but the regions and events; every later one regions, then events, in order.
[[nodiscard]] std::vector<wire::v1::Snapshot> split_snapshot(wire::v1::Snapshot full,
                                                             std::size_t max_bytes);
/// Appends the regions and events of `part` (a later message of the stream) to `into` (begun by
/// its first).
void merge_snapshot(wire::v1::Snapshot& into, wire::v1::Snapshot& part);

}  // namespace uma::detail
