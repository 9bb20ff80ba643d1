# uma's public headers: what `cmake --install` puts under include/uma/, each at its path in the
# source tree (so installed code includes <uma/actors/client.hpp> as uma's own code does). An
# explicit list: a header is public because it is named here, never because of the folder it is
# in. Nothing under detail/ is public (tests/installed_headers.cmake checks the installed tree,
# and that every installed header compiles on its own). Left out: sys/cuda_check.hpp and
# sys/cuda_backend_impl.hpp (they include CUDA's headers and serve sys/cuda_*.cpp only), the C
# ABI's sources in actors/c/ (its header uma.h installs on its own as <uma/c/uma.h>).
set(UMA_PUBLIC_HEADERS
  actors/access_sequence.hpp
  actors/allocator_config.hpp
  actors/allocator_supervisor.hpp
  actors/asio_bridge.hpp
  actors/asio_error.hpp
  actors/asio_operation.hpp
  actors/client.hpp
  actors/managed_allocator.hpp
  actors/metrics/metrics_endpoint.hpp
  actors/metrics/metrics_snapshot.hpp
  actors/metrics/prometheus_text.hpp
  actors/remote/arbiter/arbiter.hpp
  actors/remote/arbiter/arbiter_client.hpp
  actors/remote/arbiter/arbiter_member.hpp
  actors/remote/arbiter/arbiter_types.hpp
  actors/remote/gateway_config.hpp
  actors/remote/remote_client.hpp
  actors/remote/remote_client_options.hpp
  actors/remote/remote_gateway.hpp
  actors/remote/remote_tls.hpp
  actors/remote/wire/wire_config.hpp
  actors/remote/wire/wire_server.hpp
  actors/reply_value.hpp
  actors/scheduler_tuning.hpp
  actors/supervision.hpp
  memory/advice_ops.hpp
  memory/advice_state.hpp
  memory/allocation_handoff.hpp
  memory/allocator_snapshot.hpp
  memory/allocator_stats.hpp
  memory/backend_resource.hpp
  memory/block_allocator.hpp
  memory/coalesce.hpp
  memory/control_block.hpp
  memory/copy.hpp
  memory/copy_ledger.hpp
  memory/device_residency.hpp
  memory/event_history.hpp
  memory/hook.hpp
  memory/label_rows.hpp
  memory/labelled_block.hpp
  memory/limit_resource.hpp
  memory/location_rules.hpp
  memory/managed_ref.hpp
  memory/memory_resource.hpp
  memory/migration_ledger.hpp
  memory/pin.hpp
  memory/planned_extents.hpp
  memory/region_info.hpp
  memory/residency_account.hpp
  memory/residency_json.hpp
  memory/residency_types.hpp
  memory/resource_adaptor.hpp
  memory/resource_stack.hpp
  memory/resource_stack_config.hpp
  memory/statistics_resource.hpp
  memory/stats_fields.hpp
  memory/stop_report.hpp
  memory/tenant_budgets.hpp
  memory/tracking_resource.hpp
  memory/vocabulary.hpp
  messages/atoms.hpp
  messages/caller_calls.hpp
  messages/error_category.hpp
  messages/handles.hpp
  messages/inspect.hpp
  messages/interface.hpp
  messages/memory_requests.hpp
  messages/names.hpp
  messages/register_types.hpp
  messages/remote_interface.hpp
  messages/remote_types.hpp
  messages/requests.hpp
  messages/supervision_types.hpp
  sys/advice.hpp
  sys/backend.hpp
  sys/cuda_backend.hpp
  sys/device_capabilities.hpp
  sys/error.hpp
  sys/fault_injecting_backend.hpp
  sys/host_backend.hpp
  sys/location.hpp
  sys/log.hpp
  sys/log_limiter.hpp
  sys/memory_kind.hpp
  sys/renamed_field.hpp
  sys/um_counters.hpp
  sys/vocabulary.hpp
  sys/work_queue.hpp
  sys/worker_lanes.hpp
)

# The old paths of headers that moved, kept for one release: each only includes its new path and
# says so in a #pragma message (which -Werror does not make an error). Installed like the rest;
# nothing in the repository includes them (tools/check_includes.py). CHANGELOG.md, "Deprecated".
set(UMA_DEPRECATED_HEADERS
  actors/metrics_endpoint.hpp
  actors/metrics_snapshot.hpp
  actors/prometheus_text.hpp
  actors/remote_client.hpp
  actors/remote_gateway.hpp
  actors/remote_tls.hpp
  actors/wire/wire_server.hpp
)
list(APPEND UMA_PUBLIC_HEADERS ${UMA_DEPRECATED_HEADERS})
