/* uma's C ABI (C11; usable from C, C++ and any FFI such as Python's ctypes).
 *
 * An allocator made here is a uma allocator actor like any other: every block handed out counts
 * in its stats, quota and region report, and stopping it (uma_destroy) makes what is still out
 * inert. uma_malloc/uma_free go through a stream-aware caching layer on the caller's thread for
 * the sizes it serves (no message on the hot path); a block freed on a stream is reused on that
 * stream at once and on another stream only once an event recorded at the free has completed.
 *
 * Errors never abort the process: every call returns a uma_status, and uma_last_error() gives
 * the message of the calling thread's last failing call. A pointer uma did not hand out (or
 * handed out and took back) gets UMA_ERR_UNKNOWN_POINTER, not a crash.
 *
 * Thread-safety: every function may be called from any thread, concurrently, on one allocator,
 * except uma_destroy, which must not race other calls on the same allocator.
 */
#ifndef UMA_C_UMA_H
#define UMA_C_UMA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define UMA_C_EXPORT
#else
#define UMA_C_EXPORT __attribute__((visibility("default")))
#endif

/* The ABI's version: bumped when a function or a struct changes incompatibly. */
#define UMA_C_ABI_VERSION 1

/* A CUDA stream, layout-compatible with cudaStream_t (pass one without a cast); NULL is the
 * legacy default stream. On the host backend any value is a stream token. */
typedef struct CUstream_st* uma_stream;

/* Marks a name kept one release for what it was renamed to: the compiler says what to write. */
#if defined(__GNUC__) || defined(__clang__)
#define UMA_C_DEPRECATED(message) __attribute__((deprecated(message)))
#else
#define UMA_C_DEPRECATED(message)
#endif

/* The device id meaning the host (cudaCpuDeviceId). */
#define UMA_DEVICE_HOST (-1)

/* Status codes. 1..12 are uma's errc values (sys/error.hpp) and never change. */
typedef enum uma_status {
  UMA_OK = 0,
  UMA_ERR_OUT_OF_MEMORY = 1,
  UMA_ERR_QUOTA_EXCEEDED = 2,
  UMA_ERR_INVALID_ARGUMENT = 3,
  UMA_ERR_ALLOCATOR_STOPPED = 4,
  UMA_ERR_CAPTURE_IN_PROGRESS = 5,
  UMA_ERR_NOT_SUPPORTED = 6,
  UMA_ERR_NO_DEVICE = 7,
  UMA_ERR_BACKEND = 8,
  UMA_ERR_OVERFLOW = 9,
  UMA_ERR_CONTEXT_LOST = 10,
  UMA_ERR_UNRECOVERABLE = 11,
  UMA_ERR_TIMEOUT = 12, /* no reply within the client's timeout */
  /* C ABI only */
  UMA_ERR_UNKNOWN_POINTER = 64, /* not a live block of this allocator */
  UMA_ERR_NULL_ARGUMENT = 65,   /* a required pointer argument was NULL */
  UMA_ERR_BUFFER_TOO_SMALL = 66 /* uma_stats_json: *needed says how much */
} uma_status;

typedef enum uma_backend_choice {
  UMA_BACKEND_AUTO = 0, /* CUDA if a device is usable, else host */
  UMA_BACKEND_HOST = 1,
  UMA_BACKEND_CUDA = 2
} uma_backend_choice;

typedef enum uma_policy {
  UMA_POLICY_DIRECT = 0, /* a request the allocator serves is its own backend allocation */
  UMA_POLICY_POOL = 1    /* so is one above max_block_bytes; smaller ones reaching the allocator
                            are blocks of the block allocator (uma_malloc's are under both) */
} uma_policy;

/* Same values as uma::advice (sys/advice.hpp). */
typedef enum uma_advice {
  UMA_ADVICE_SET_READ_MOSTLY = 1,
  UMA_ADVICE_UNSET_READ_MOSTLY = 2,
  UMA_ADVICE_SET_PREFERRED_LOCATION = 3,
  UMA_ADVICE_UNSET_PREFERRED_LOCATION = 4,
  UMA_ADVICE_SET_ACCESSED_BY = 5,
  UMA_ADVICE_UNSET_ACCESSED_BY = 6
} uma_advice;

/* How an allocator is made. Fill with uma_config_init, then change fields. struct_size lets
 * the ABI grow: a caller built against an older, smaller struct still works. */
typedef struct uma_config {
  uint32_t struct_size;
  uma_backend_choice backend;
  uma_policy policy;
  uint64_t quota_bytes;         /* 0: the backend's default */
  uint64_t device_budget_bytes; /* residency budget of every device (CUDA); 0: none */
  /* The largest request the block allocator serves; 0: default. cache_max_bytes is its name
   * before issue 38, one field with it (a union: either name reads and writes the same
   * bytes), deprecated: it goes in the next release. */
  union {
    uint64_t max_block_bytes;
    uint64_t cache_max_bytes UMA_C_DEPRECATED("uma_config.cache_max_bytes is max_block_bytes");
  };
  uint32_t scheduler_threads; /* CAF scheduler threads, at most 256; 0: uma's default */
  /* Added with the host backend's emulated devices (struct_size tells whether a caller has
   * them; docs/c_abi.md): */
  uint32_t host_devices;      /* devices the host backend emulates, 0 to 64; init: 1 */
  uint64_t host_device_bytes; /* memory of each emulated device; 0: half of physical memory */
  /* Added with range plans: */
  uint32_t driver_counters; /* 1: the driver's unified-memory counters (CUPTI) feed the
                               residency report's driver figures; 0 (init): off */
} uma_config;

/* An allocator's counters (see docs/cli.md for each figure). */
typedef struct uma_stats {
  uint32_t struct_size;
  uint64_t generation;
  uint64_t quota_bytes;
  uint64_t live_bytes; /* bytes held by the allocator for live regions (slabs included) */
  uint64_t live_regions;
  uint64_t peak_bytes;
  uint64_t allocations; /* allocations the actor served (slabs, direct regions) */
  uint64_t releases;
  uint64_t cache_in_use_bytes; /* block allocator: bytes in blocks handed out */
  uint64_t cache_free_bytes;   /* block allocator: bytes in free blocks */
  uint64_t cache_hits;         /* uma_malloc calls served without the actor */
  uint64_t cache_misses;
  uint64_t prefetch_bytes;
  uint64_t discard_bytes;
  /* Added in the first implementation (struct_size tells whether a caller has it): */
  uint64_t cache_requested_bytes; /* bytes asked for, of the blocks handed out; what a framework
                                     holds (cache_in_use_bytes minus it is the rounding) */
  uint64_t cache_blocks_in_use;
  /* Added with the stats field table (every allocator_stats figure; docs/cli.md "Stats fields"
     says what each one is; backend and failures are in uma_stats_json only): */
  uint64_t total_bytes_allocated;
  uint64_t prefetches;
  uint64_t advises;
  uint64_t discards;
  uint64_t inert_refusals;
  uint64_t pending_jobs;
  uint64_t advice_elided;
  uint64_t ranges_coalesced;
  uint64_t reserved_bytes;
  uint64_t pool_slabs; /* always 0: the pool policy's small requests are the block allocator's
                          blocks (its slabs: live_leases); kept for the struct's layout */
  uint64_t live_leases;
  uint64_t leased_bytes;
  double fragmentation; /* always 0 (no pool slabs since the pool policy uses the block
                           allocator); kept for the struct's layout */
  uint64_t resident_bytes;
  uint64_t residency_to_device_bytes;
  uint64_t residency_to_host_bytes;
  uint64_t driver_to_device_bytes;
  uint64_t driver_to_host_bytes;
  uint64_t driver_page_faults;
  /* Added with the tiers (issue 39; docs/c_abi.md "Tiers and copies"): */
  uint64_t host_tier_bytes;      /* pinned host memory held (uma_host_alloc), charged bytes */
  uint64_t device_tier_bytes;    /* device memory held (uma_device_alloc), charged bytes */
  uint64_t copy_to_device_bytes; /* uma_copy bytes host -> device (copy engines) */
  uint64_t copy_to_host_bytes;   /* uma_copy bytes device -> host */
  uint64_t copy_other_bytes;     /* uma_copy bytes within one side (device->device, host->host) */
  uint64_t copies;               /* uma_copy calls that enqueued a copy */
} uma_stats;

/* What uma_destroy_with_report's stop did. */
typedef struct uma_stop_report {
  uint32_t struct_size;
  uint64_t regions_freed;
  uint64_t bytes_freed;
  uint64_t regions_leaked; /* still handed out at the stop: leaked on purpose, never freed */
  uint64_t bytes_leaked;
  uint64_t blocks_outstanding; /* blocks of uma_malloc not given back before the stop */
} uma_stop_report;

typedef struct uma_allocator uma_allocator;

/* Fills *config with the defaults (struct_size set). */
UMA_C_EXPORT void uma_config_init(uma_config* config);

/* Makes an allocator (its own CAF actor system). *out is set only on UMA_OK. */
UMA_C_EXPORT uma_status uma_create(const uma_config* config, uma_allocator** out);

/* Stops the allocator and frees it. Blocks still out are made inert: what a caller may still
 * be using is leaked and reported rather than freed under it. NULL is a no-op. */
UMA_C_EXPORT uma_status uma_destroy(uma_allocator* allocator);
/* uma_destroy that also says what the stop did (out may be NULL; out->struct_size must be
 * set). The allocator is destroyed whatever the status. */
UMA_C_EXPORT uma_status uma_destroy_with_report(uma_allocator* allocator, uma_stop_report* out);

/* size bytes of managed memory for use on `device` (ordered on `stream`). size 0 gives NULL
 * and UMA_OK. */
UMA_C_EXPORT uma_status uma_malloc(uma_allocator* allocator, size_t size, int device,
                                   uma_stream stream, void** out);

/* Gives back a block from uma_malloc. size is checked against the block's size when non-zero;
 * device must be the one uma_malloc named; stream is the stream its last use was ordered on. */
UMA_C_EXPORT uma_status uma_free(uma_allocator* allocator, void* ptr, size_t size, int device,
                                 uma_stream stream);

/* Range operations on memory handed out by this allocator (the range must lie inside one
 * block). device is a device id or UMA_DEVICE_HOST. */
UMA_C_EXPORT uma_status uma_prefetch(uma_allocator* allocator, const void* ptr, size_t bytes,
                                     int device, uma_stream stream);
UMA_C_EXPORT uma_status uma_advise(uma_allocator* allocator, const void* ptr, size_t bytes,
                                   uma_advice advice, int device);
UMA_C_EXPORT uma_status uma_discard(uma_allocator* allocator, const void* ptr, size_t bytes,
                                    uma_stream stream);

/* The counters as a struct (out->struct_size must be set by the caller). */
UMA_C_EXPORT uma_status uma_get_stats(uma_allocator* allocator, uma_stats* out);
/* The counters as JSON (the schema of `uma stats --json`), NUL-terminated. With buffer NULL or
 * capacity too small, returns UMA_ERR_BUFFER_TOO_SMALL and sets *needed (NUL included). */
UMA_C_EXPORT uma_status uma_stats_json(uma_allocator* allocator, char* buffer, size_t capacity,
                                       size_t* needed);
/* Changes the quota (bytes held from the backend); refused below what is held now. */
UMA_C_EXPORT uma_status uma_set_quota(uma_allocator* allocator, uint64_t quota_bytes);

/* Gives memory back: the block allocator's slabs whose blocks are all free and finished on
 * their streams go back to the allocator, which frees them (CUDA: cudaFree).
 * *released_bytes (may be NULL) gets the bytes of the slabs given back. */
UMA_C_EXPORT uma_status uma_trim(uma_allocator* allocator, uint64_t* released_bytes);

/* The status's name, e.g. "UMA_ERR_UNKNOWN_POINTER" (never NULL). */
UMA_C_EXPORT const char* uma_status_string(uma_status status);
/* The message of this thread's last failing call ("" if none); valid until its next call. */
UMA_C_EXPORT const char* uma_last_error(void);

/* The process-wide allocator the framework adapters use: made from *config (NULL: defaults
 * and the UMA_* environment, see docs/c_abi.md) on the first call; later calls return it.
 * UMA_ERR_INVALID_ARGUMENT if it exists already with another config. */
UMA_C_EXPORT uma_status uma_default_allocator(const uma_config* config, uma_allocator** out);

/* -- PyTorch (docs/frameworks.md; python/uma_torch) ---------------------------------------
 * PyTorch's pluggable-allocator signatures over the default allocator, for the global install
 * (torch.cuda.memory.CUDAPluggableAllocator(path, "uma_torch_malloc", "uma_torch_free")).
 * They are PyTorch's hooks, called from C++: on failure uma_torch_malloc throws a C++
 * std::runtime_error naming the reason (PyTorch passes a NULL on into the tensor unchecked;
 * the exception reaches Python as a RuntimeError). C callers use uma_malloc.
 * uma_torch_malloc refuses a stream that is capturing a CUDA graph: a graph replays into the
 * addresses it captured, which only PyTorch's own graph pools keep for it (the error names
 * uma_torch.pool(), under which capture works). Every hook call is counted in PyTorch's terms
 * (uma_torch_memory_stats_json). */
UMA_C_EXPORT void* uma_torch_malloc(ptrdiff_t size, int device, uma_stream stream);
UMA_C_EXPORT void uma_torch_free(void* ptr, ptrdiff_t size, int device, uma_stream stream);
/* PyTorch's empty_cache hook (the pluggable allocator's reset function): uma_trim on the
 * default allocator. */
UMA_C_EXPORT void uma_torch_empty_cache(void);
/* PyTorch's set_per_process_memory_fraction hook: the default allocator's residency budget of
 * `device` becomes fraction x the device's memory, and so does the hooks' spill limit: a block
 * handed to PyTorch that would take the bytes it has placed on the device past that is placed
 * on the host and mapped for the device (read over the link) instead of refused. The limit
 * moves at once: a lowered one spills the most recently allocated blocks on the device (moved
 * to the host, contents kept) until they fit; a raised one brings spilled blocks back, oldest
 * first, while they fit (a fraction of 1: no limit). A fraction outside (0, 1] or a device the
 * backend lacks is ignored (PyTorch checked both). */
UMA_C_EXPORT void uma_torch_set_memory_fraction(double fraction, int device);
/* The bytes of the blocks the hooks placed on the host so far (spilled, every spill counted:
 * a block spilled twice counts twice), over the process. */
UMA_C_EXPORT uint64_t uma_torch_spilled_bytes(void);

/* torch.cuda.memory_stats()'s flat keys ("allocated_bytes.all.current", ...) for the hooks'
 * allocations on `device`, as a JSON object (uma_stats_json's buffer convention). */
UMA_C_EXPORT uma_status uma_torch_memory_stats_json(int device, char* buffer, size_t capacity,
                                                    size_t* needed);
/* The blocks the hooks handed PyTorch on `device` and it still holds, as a JSON array of
 * {"address", "size", "stream"} ordered by address (uma_torch.memory_snapshot's segments). */
UMA_C_EXPORT uma_status uma_torch_live_json(int device, char* buffer, size_t capacity,
                                            size_t* needed);
/* torch.cuda.reset_peak_memory_stats / reset_accumulated_memory_stats for the hooks' figures. */
UMA_C_EXPORT uma_status uma_torch_reset_peak_memory_stats(int device);
UMA_C_EXPORT uma_status uma_torch_reset_accumulated_memory_stats(int device);

/* Called after every hook allocation (action 0), free (1) and refused allocation (2), on the
 * allocating thread, while set (NULL: none). For memory history (uma_torch); it must not call
 * back into uma_torch_malloc or uma_torch_free. */
#define UMA_TORCH_ALLOC 0
#define UMA_TORCH_FREE 1
#define UMA_TORCH_OOM 2
typedef void (*uma_torch_observer)(int action, uintptr_t ptr, size_t size, int device,
                                   uma_stream stream);
UMA_C_EXPORT void uma_torch_set_observer(uma_torch_observer observer);

/* A torch.cuda.MemPool backed by `allocator` (uma_torch.pool): PyTorch's caching allocator
 * carves the pool's tensors out of segments it takes from these functions, which have PyTorch's
 * pluggable-allocator signatures (pass them to torch._C._cuda_customAllocator). Each call binds
 * one of UMA_TORCH_POOL_SLOTS slots to the allocator for the rest of the process (PyTorch keeps
 * a pool's functions while any of its segments lives): the allocator must not be destroyed
 * after. UMA_ERR_OUT_OF_MEMORY once every slot is bound. */
#define UMA_TORCH_POOL_SLOTS 16
UMA_C_EXPORT uma_status uma_torch_pool_functions(uma_allocator* allocator, void** malloc_fn,
                                                 void** free_fn);

/* -- Residency: device budgets and access plans (docs/residency.md, docs/c_abi.md) ------------
 * Added with issue 25; UMA_C_ABI_VERSION stays 1 (additions only). A plan names byte ranges of
 * blocks this allocator handed out (uma_malloc), rounds each outward to whole 4 KiB pages of the
 * block's slab or region and charges exactly those pages to the device's budget: two blocks
 * sharing a page charge it once. */

/* Same values as uma::access_mode / uma::residency_policy. */
typedef enum uma_access_mode { UMA_ACCESS_READ = 0, UMA_ACCESS_WRITE = 1 } uma_access_mode;
typedef enum uma_residency_policy {
  UMA_RESIDENCY_MIGRATE = 0,     /* prefetched before use, prefetched back on eviction */
  UMA_RESIDENCY_READ_MOSTLY = 1, /* duplicated on the device; eviction drops the copy */
  UMA_RESIDENCY_REMOTE_MAP = 2,  /* stays on the host, mapped for the device */
  UMA_RESIDENCY_DISCARD = 3,     /* scratch: its contents dropped on eviction */
  UMA_RESIDENCY_AUTO = 4         /* chosen per plan by the account */
} uma_residency_policy;

/* A byte range inside memory this allocator handed out (a uma_malloc block or part of one).
 * Plans round it outward to whole pages (4 KiB) and charge exactly those pages. */
typedef struct uma_range {
  const void* ptr;
  size_t bytes;
} uma_range;

/* How a plan runs. Fill with uma_plan_options_init, then change fields (struct_size lets it
 * grow). NULL options: the defaults. */
typedef struct uma_plan_options {
  uint32_t struct_size;
  int device;                  /* init: 0 */
  uma_access_mode mode;        /* init: UMA_ACCESS_READ */
  uma_residency_policy policy; /* init: UMA_RESIDENCY_AUTO */
  int has_stream;              /* init: 0 (moves on the allocator's lanes); 1: on `stream` */
  uma_stream stream;
  int wait_complete;    /* init: 0: returns once the moves were issued; 1: once done */
  uint64_t cycle_bytes; /* init: 0 (no cycle known): the auto policy's hint */
  uint32_t cycle_plans;
  const char* tenant; /* init: NULL (none) */
} uma_plan_options;
UMA_C_EXPORT void uma_plan_options_init(uma_plan_options* options);

/* What a plan (or uma_dead) did. out->struct_size must be set by the caller. */
typedef struct uma_plan_result {
  uint32_t struct_size;
  uint64_t to_device_bytes, to_host_bytes, dropped_bytes, discarded_bytes, mapped_bytes;
  uint32_t placements, evictions;
} uma_plan_result;

/* Budget of `device`: 1 byte up to its memory. A budget below what is resident evicts the least
 * recently used pages no plan holds down to it (contents kept) and returns once they are moved;
 * held pages stay, even above it. UMA_ERR_NO_DEVICE on a backend without devices (or a device
 * id it does not have). */
UMA_C_EXPORT uma_status uma_set_device_budget(uma_allocator* a, int device, uint64_t bytes);
/* Plans. `out` may be NULL. A range uma did not hand out: UMA_ERR_UNKNOWN_POINTER, nothing
 * changes. A plan the budget cannot hold: UMA_ERR_QUOTA_EXCEEDED, nothing changes. */
UMA_C_EXPORT uma_status uma_will_access(uma_allocator* a, const uma_range* ranges, size_t count,
                                        const uma_plan_options* options, uma_plan_result* out);
UMA_C_EXPORT uma_status uma_done_with(uma_allocator* a, const uma_range* ranges, size_t count);
UMA_C_EXPORT uma_status uma_dead(uma_allocator* a, const uma_range* ranges, size_t count,
                                 uma_plan_result* out);

/* The sequence form (uma::access_sequence): steps named once, each plan sent `lookahead`
 * steps ahead. Not thread-safe per sequence; destroy sequences before their allocator. */
typedef struct uma_sequence uma_sequence;
UMA_C_EXPORT uma_status uma_sequence_create(uma_allocator* a, size_t lookahead, uma_sequence** out);
/* Copies the ranges and options; only before the first uma_sequence_begin. */
UMA_C_EXPORT uma_status uma_sequence_add_step(uma_sequence* s, const uma_range* ranges,
                                              size_t count, const uma_plan_options* options);
UMA_C_EXPORT uma_status uma_sequence_begin(uma_sequence* s, size_t step, uma_plan_result* out);
UMA_C_EXPORT uma_status uma_sequence_finish(uma_sequence* s);  /* ends every plan held */
UMA_C_EXPORT uma_status uma_sequence_destroy(uma_sequence* s); /* finishes first; NULL ok */

/* Residency report: a struct that can grow, plus JSON. */
typedef struct uma_device_residency {
  uint64_t memory_bytes, budget_bytes, resident_bytes, peak_bytes, held_bytes;
} uma_device_residency;
typedef struct uma_residency_report {
  uint32_t struct_size;
  uint32_t device_count; /* devices the account has (entries filled: min(count, 16)) */
  uma_device_residency devices[16];
  uint64_t to_device_bytes, to_host_bytes, dropped_bytes, discarded_bytes;
  uint64_t placements, evictions, refetches;
  int driver_counters_on;
  uint64_t driver_to_device_bytes, driver_to_host_bytes, driver_page_faults;
  uint64_t unplanned_bytes; /* persistent memory outside every plan on the device side */
  /* Of the driver's moves above, those no prefetch asked for (faults, its own eviction and
     speculation): near zero for planned data. */
  uint64_t driver_fault_to_device_bytes, driver_fault_to_host_bytes;
  /* Added with the tiers: the copy engines' bytes each way (uma_copy), beside the moves above. */
  uint64_t copy_to_device_bytes, copy_to_host_bytes;
} uma_residency_report;
UMA_C_EXPORT uma_status uma_get_residency(uma_allocator* a, uma_residency_report* out);
/* Same as uma_stats_json's convention: UMA_ERR_BUFFER_TOO_SMALL with *needed. */
UMA_C_EXPORT uma_status uma_residency_json(uma_allocator* a, char* buffer, size_t capacity,
                                           size_t* needed);

/* -- Tiers and copy-engine moves (issue 39; docs/c_abi.md "Tiers and copies") ---------------
 * Two kinds of memory beside managed memory, owned like it (quota, stats, region report, freed
 * at stop, unknown pointers refused):
 * - the host tier: page-locked host memory (CUDA: cudaHostAlloc), the home of state that does
 *   not fit the device budget. It never migrates.
 * - device memory (CUDA: cudaMalloc) on one device, for staging: resident for its whole life
 *   and charged to that device's budget (refused with UMA_ERR_QUOTA_EXCEEDED when the budget
 *   cannot make room; unheld managed data is evicted first, as a plan would).
 * Prefetch, advice, discard and plans refuse both (UMA_ERR_INVALID_ARGUMENT). uma_copy moves
 * bytes between any memory of this allocator on the copy engines (cudaMemcpyAsync on `stream`:
 * returns once enqueued), counted in the stats and the residency ledger by direction. On the
 * host backend the tiers are system memory and a copy is a memcpy done before it returns. */
UMA_C_EXPORT uma_status uma_host_alloc(uma_allocator* a, size_t size, void** out);
UMA_C_EXPORT uma_status uma_device_alloc(uma_allocator* a, size_t size, int device, void** out);
/* Frees what uma_host_alloc or uma_device_alloc returned (ordered after the device's work). */
UMA_C_EXPORT uma_status uma_tier_free(uma_allocator* a, void* ptr);
/* Copies `bytes` from `src` to `dst`, each inside one live block of this allocator (a tier
 * block, a uma_malloc block), not overlapping. bytes 0: nothing, UMA_OK. */
UMA_C_EXPORT uma_status uma_copy(uma_allocator* a, void* dst, const void* src, size_t bytes,
                                 uma_stream stream);

/* -- The node's arbiter (docs/distributed.md "One GPU, many processes"; docs/c_abi.md "The
 * node's arbiter") ------------------------------------------------------------------------------
 * A serving node started with `uma serve --arbiter-total DEVICE:BYTES` divides each device's
 * bytes live among the processes that join it over its socket. A member receives its budget of
 * each device it claimed on a thread of its own and applies it to the allocator it joined with:
 * the grant becomes the allocator's device budget (uma_set_device_budget's path: a lowered one
 * evicts at once, least recently used first, contents kept; 0 bytes is 1 byte) and, when that
 * allocator is the default one PyTorch's hooks use, the hooks' spill limit of the device is
 * what the grant leaves after the allocator's planned resident bytes (a lowered one spills the
 * most recently allocated blocks to the host at once). Only then is a
 * lowered budget acknowledged, with the bytes still resident, so the bytes reach another process
 * once they are off the device. A revoked member (it did not evict in time) also gets a quota of
 * what it holds: its further allocations are refused. Additions to ABI 1. */

/* What this process asks of one device. Fill with uma_arbiter_claim_init, then change fields;
 * struct_size lets it grow (an array of claims is read with claims[0].struct_size as its
 * stride: every element must carry the same). */
typedef struct uma_arbiter_claim {
  uint32_t struct_size;
  int device;            /* init: 0 */
  uint64_t min_bytes;    /* guaranteed while a member (init: 0) */
  uint64_t wanted_bytes; /* what it would use, at least min_bytes (init: 0) */
  uint32_t priority;     /* higher first (init: 0); capped by the operator's policy */
  uint32_t weight;       /* share within a priority, 1 to 1000 (init: 1) */
  int idle;              /* 1: lends what it holds above its minimum (init: 0) */
} uma_arbiter_claim;
UMA_C_EXPORT void uma_arbiter_claim_init(uma_arbiter_claim* claim);

/* A membership of a node's arbiter; it lasts until uma_arbiter_leave (or this process ends).
 * Leave before destroying the allocator it joined with. The calls below are thread-safe, except
 * uma_arbiter_leave, which must not race them. */
typedef struct uma_arbiter uma_arbiter;

/* Joins the arbiter of the node at `target` ("unix:PATH", the node's socket) as `name`, with one
 * claim per device (`count` of them, devices of `allocator`'s backend, each once), and applies
 * the first budgets before it returns. The arbiter's refusals come back as their status
 * (UMA_ERR_INVALID_ARGUMENT: a name, a claim, a minimum or priority above the operator's
 * policy; UMA_ERR_QUOTA_EXCEEDED: the minimums do not fit); a node without an arbiter is
 * UMA_ERR_NOT_SUPPORTED, one that cannot be reached UMA_ERR_BACKEND naming the target. *out is
 * set only on UMA_OK. */
UMA_C_EXPORT uma_status uma_arbiter_join(uma_allocator* allocator, const char* target,
                                         const char* name, const uma_arbiter_claim* claims,
                                         size_t count, uma_arbiter** out);
/* This process wants `wanted_bytes` on `device` now (at least its minimum), or is idle there
 * (idle != 0: it lends what it holds above its minimum). The budgets that follow arrive as they
 * come (uma_arbiter_wait_budget). */
UMA_C_EXPORT uma_status uma_arbiter_want(uma_arbiter* member, int device, uint64_t wanted_bytes,
                                         int idle);
/* The budget last applied on `device` (a device this member claimed; 0 once revoked). */
UMA_C_EXPORT uma_status uma_arbiter_budget(const uma_arbiter* member, int device, uint64_t* out);
/* Waits up to timeout_ms until the budget applied on `device` is within [at_least, at_most];
 * *out (may be NULL) gets the budget when it returns. UMA_ERR_TIMEOUT when it was not within
 * them in time; UMA_ERR_ALLOCATOR_STOPPED when the membership ended (the node went down or
 * revoked it) before. */
UMA_C_EXPORT uma_status uma_arbiter_wait_budget(const uma_arbiter* member, int device,
                                                uint64_t at_least, uint64_t at_most,
                                                uint32_t timeout_ms, uint64_t* out);
/* The arbiter's report as this process may see it, as JSON: {"member", "revoked", "ended",
 * "devices": [{"device", "total_bytes", "held_bytes", "members": [...]}], "decisions": [...],
 * "members", "revocations"} (docs/c_abi.md; uma_stats_json's buffer convention). */
UMA_C_EXPORT uma_status uma_arbiter_report_json(const uma_arbiter* member, char* buffer,
                                                size_t capacity, size_t* needed);
/* Leaves: the node frees this member's budgets at once; the allocator keeps the budgets last
 * applied. NULL is a no-op. */
UMA_C_EXPORT void uma_arbiter_leave(uma_arbiter* member);

#ifdef __cplusplus
}
#endif

#endif /* UMA_C_UMA_H */
