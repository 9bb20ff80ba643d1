#pragma once

// The arbiter's vocabulary (arbiter_types.hpp) to and from its wire messages
// (actors/remote/wire/arbiter.proto). What comes from the wire is checked by the book, not here.

#include <arbiter.pb.h>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>

namespace uma::detail {

void to_wire(const arbiter_claim& c, wire::v1::DeviceClaim& out);
[[nodiscard]] arbiter_claim from_wire(const wire::v1::DeviceClaim& c);
void to_wire(const arbiter_grant& g, wire::v1::GrantEvent& out);
[[nodiscard]] arbiter_grant from_wire(const wire::v1::GrantEvent& g);
void to_wire(const arbiter_report& r, wire::v1::ArbiterReport& out);
[[nodiscard]] arbiter_report from_wire(const wire::v1::ArbiterReport& r);

}  // namespace uma::detail
