#include <uma/sys/backend.hpp>

#include <uma/sys/cuda_backend.hpp>
#include <uma/sys/error.hpp>
#include <uma/sys/host_backend.hpp>

namespace uma {

namespace {
// What the synchronous streams' events point to: any non-null address would do.
char always_complete_event = 0;
}  // namespace

void* backend::create_event() {
  return &always_complete_event;
}

void backend::record_event(void*, stream_view) {}

bool backend::event_done(void*) {
  return true;
}

void backend::destroy_event(void*) noexcept {}

um_counter_source backend::subscribe_um_counters() {
  return {nullptr, "the " + std::string(to_string(kind())) +
                       " backend has no driver counters (the ledger counts uma's own moves)"};
}

std::string_view to_string(backend_kind k) noexcept {
  return k == backend_kind::cuda ? "cuda" : "host";
}

std::string_view to_string(backend_choice c) noexcept {
  switch (c) {
    case backend_choice::automatic:
      return "auto";
    case backend_choice::cuda:
      return "cuda";
    case backend_choice::host:
      return "host";
  }
  return "auto";
}

std::optional<backend_choice> parse_backend_choice(std::string_view text) noexcept {
  if (text == "auto")
    return backend_choice::automatic;
  if (text == "cuda")
    return backend_choice::cuda;
  if (text == "host")
    return backend_choice::host;
  return std::nullopt;
}

bool cuda_backend_compiled() noexcept {
#ifdef UMA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::shared_ptr<backend> make_backend(backend_choice choice, const emulated_devices& host_devices) {
  switch (choice) {
    case backend_choice::host:
      return std::make_shared<host_backend>(host_devices);
    case backend_choice::cuda:
      return make_cuda_backend();
    case backend_choice::automatic:
      break;
  }
  if (probe_cuda().usable)
    return make_cuda_backend();
  return std::make_shared<host_backend>(host_devices);
}

}  // namespace uma
