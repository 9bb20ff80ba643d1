#include <uma/memory/copy.hpp>

#include <string>

#include <uma/memory/control_block.hpp>
#include <uma/memory/pin.hpp>
#include <uma/sys/detail/format.hpp>
#include <uma/sys/error.hpp>

namespace uma {

namespace {

/// "region 7 (pinned_host)": how a refusal names a side of the copy.
std::string describe(const char* side, const byte_ref& ref) {
  const auto* r = detail::record_of(ref);
  return std::string(side) + " (region " + std::to_string(r->home->id) + ", " +
         std::string(to_string(r->home->kind)) + ")";
}

}  // namespace

void copy(const byte_ref& dst, const byte_ref& src, stream_view stream) {
  if (dst.empty() || src.empty())
    raise(errc::invalid_argument,
          std::string("copy: the ") + (dst.empty() ? "destination" : "source") + " ref is empty");
  const auto* to = detail::record_of(dst);
  const auto* from = detail::record_of(src);
  if (to->control != from->control)
    raise(errc::invalid_argument,
          "copy: " + describe("the destination", dst) + " and " + describe("the source", src) +
              " belong to different allocators (or incarnations); copy within one");
  // Pinned for the call (an inert ref is refused here): a stop waits for them, and the memory
  // stays until the device synchronized.
  const auto out = dst.pin();
  const auto in = src.pin();
  if (dst.bytes() != src.bytes())
    raise(errc::invalid_argument, "copy: the destination has " + detail::bytes(dst.bytes()) +
                                      ", the source " + detail::bytes(src.bytes()) +
                                      "; they must be the same size");
  const auto* a = reinterpret_cast<const std::byte*>(out.data());
  const auto* b = reinterpret_cast<const std::byte*>(in.data());
  if (a < b + src.bytes() && b < a + dst.bytes())
    raise(errc::invalid_argument, "copy: " + describe("the destination", dst) + " at " +
                                      detail::hex(a) + " and " + describe("the source", src) +
                                      " at " + detail::hex(b) + " overlap by part of their " +
                                      detail::bytes(dst.bytes()));
  auto& control = *to->control;
  control.watched(
      [&] { control.owning_backend().copy(out.data(), in.data(), dst.bytes(), stream); });
  control.copies().count(direction_of(from->home->kind, to->home->kind), dst.bytes());
}

}  // namespace uma
