/* The C ABI (actors/c/uma.h) from a C11 program on the host backend: bad inputs, many threads,
 * stats as a struct and as JSON, the default allocator and the PyTorch entry points, and a
 * destroy while blocks are still handed out. Exit status 0 when every check held. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uma/c/uma.h>

static int failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              uma_last_error());                                                               \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

#define CHECK_STATUS(call, expected)                                                           \
  do {                                                                                         \
    uma_status s_ = (call);                                                                    \
    if (s_ != (expected)) {                                                                    \
      fprintf(stderr, "%s:%d: %s gave %s, expected %s (last error: %s)\n", __FILE__, __LINE__, \
              #call, uma_status_string(s_), uma_status_string(expected), uma_last_error());    \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

static uma_allocator* make_host(uint64_t quota, uint64_t max_block) {
  uma_config c;
  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
  c.quota_bytes = quota;
  c.max_block_bytes = max_block;
  uma_allocator* a = NULL;
  CHECK_STATUS(uma_create(&c, &a), UMA_OK);
  return a;
}

static uma_stats stats_of(uma_allocator* a) {
  uma_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_STATUS(uma_get_stats(a, &s), UMA_OK);
  return s;
}

static void test_null_and_bad_arguments(void) {
  uma_allocator* a = make_host(64u << 20, 0);
  void* p = (void*)1;
  CHECK_STATUS(uma_create(NULL, NULL), UMA_ERR_NULL_ARGUMENT);
  CHECK(strstr(uma_last_error(), "out") != NULL);
  CHECK_STATUS(uma_malloc(NULL, 64, 0, NULL, &p), UMA_ERR_NULL_ARGUMENT);
  CHECK_STATUS(uma_trim(NULL, NULL), UMA_ERR_NULL_ARGUMENT);
  CHECK_STATUS(uma_malloc(a, 64, 0, NULL, NULL), UMA_ERR_NULL_ARGUMENT);
  CHECK_STATUS(uma_malloc(a, 0, 0, NULL, &p), UMA_OK);
  CHECK(p == NULL);
  CHECK_STATUS(uma_free(a, NULL, 0, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_malloc(a, 64, -2, NULL, &p), UMA_ERR_INVALID_ARGUMENT);
  CHECK(strstr(uma_last_error(), "device -2") != NULL);
  CHECK_STATUS(uma_malloc(a, 64, 7, NULL, &p), UMA_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(uma_get_stats(a, NULL), UMA_ERR_NULL_ARGUMENT);
  CHECK_STATUS(uma_set_quota(a, 0), UMA_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(uma_prefetch(a, NULL, 16, -1, NULL), UMA_ERR_NULL_ARGUMENT);
  CHECK_STATUS(uma_advise(a, &p, 16, (uma_advice)99, -1), UMA_ERR_INVALID_ARGUMENT);
  CHECK(strcmp(uma_status_string(UMA_ERR_UNKNOWN_POINTER), "UMA_ERR_UNKNOWN_POINTER") == 0);
  CHECK(strcmp(uma_status_string((uma_status)12345), "UMA_ERR_UNKNOWN_STATUS") == 0);
  uma_config bad;
  uma_config_init(&bad);
  bad.backend = UMA_BACKEND_HOST;
  bad.device_budget_bytes = 1u << 20;
  bad.host_devices = 0;
  uma_allocator* b = NULL;
  CHECK_STATUS(uma_create(&bad, &b), UMA_ERR_NOT_SUPPORTED); /* no device to budget */
  CHECK(b == NULL && strstr(uma_last_error(), "host backend has no device") != NULL);
  bad.host_devices = 65;
  CHECK_STATUS(uma_create(&bad, &b), UMA_ERR_INVALID_ARGUMENT);
  CHECK(b == NULL && strstr(uma_last_error(), "host_devices 65") != NULL);
  bad.host_devices = 1;
  bad.driver_counters = 2; /* a switch: 0 or 1 */
  CHECK_STATUS(uma_create(&bad, &b), UMA_ERR_INVALID_ARGUMENT);
  CHECK(b == NULL && strstr(uma_last_error(), "driver_counters 2") != NULL);
  bad.driver_counters = 1; /* on: the host backend has no driver counters, the report says why */
  /* host_devices 1 is the default: one emulated device takes the budget */
  bad.host_device_bytes = 64u << 20;
  CHECK_STATUS(uma_create(&bad, &b), UMA_OK);
  void* on_device = NULL;
  CHECK_STATUS(uma_malloc(b, 65536, 0, NULL, &on_device), UMA_OK);
  CHECK_STATUS(uma_prefetch(b, on_device, 65536, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_free(b, on_device, 65536, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(b), UMA_OK);
  b = NULL;
  uma_config_init(&bad);
  bad.policy = (uma_policy)7;
  CHECK_STATUS(uma_create(&bad, &b), UMA_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(uma_destroy(NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

static void test_pointers_the_allocator_did_not_hand_out(void) {
  uma_allocator* a = make_host(64u << 20, 0);
  void* p = NULL;
  int on_stack = 0;
  void* from_libc = malloc(4096);
  CHECK_STATUS(uma_malloc(a, 65536, 0, NULL, &p), UMA_OK);
  CHECK(p != NULL);
  memset(p, 0xab, 65536);
  CHECK_STATUS(uma_free(a, &on_stack, 0, 0, NULL), UMA_ERR_UNKNOWN_POINTER);
  CHECK_STATUS(uma_free(a, from_libc, 4096, 0, NULL), UMA_ERR_UNKNOWN_POINTER);
  CHECK_STATUS(uma_free(a, (char*)p + 64, 0, 0, NULL), UMA_ERR_UNKNOWN_POINTER);
  CHECK_STATUS(uma_free(a, p, 1000, 0, NULL), UMA_ERR_INVALID_ARGUMENT); /* size mismatch */
  CHECK(strstr(uma_last_error(), "1000") != NULL);
  CHECK(stats_of(a).cache_blocks_in_use == 1); /* the refused free changed nothing */
  CHECK_STATUS(uma_free(a, p, 65536, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_free(a, p, 65536, 0, NULL), UMA_ERR_UNKNOWN_POINTER); /* double free */
  CHECK(stats_of(a).cache_blocks_in_use == 0);
  free(from_libc);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

static void test_sizes_past_the_quota(void) {
  uma_allocator* a = make_host(64u << 20, 0);
  void* p = (void*)1;
  CHECK_STATUS(uma_malloc(a, (size_t)1 << 40, 0, NULL, &p), UMA_ERR_QUOTA_EXCEEDED);
  CHECK(p == NULL);
  CHECK_STATUS(uma_malloc(a, 32u << 20, 0, NULL, &p), UMA_OK); /* cached, 32 MiB */
  void* q = NULL;
  CHECK_STATUS(uma_malloc(a, 40u << 20, 0, NULL, &q), UMA_ERR_QUOTA_EXCEEDED);
  CHECK_STATUS(uma_malloc(a, SIZE_MAX, 0, NULL, &q), UMA_ERR_QUOTA_EXCEEDED);
  CHECK_STATUS(uma_set_quota(a, 1u << 20), UMA_ERR_INVALID_ARGUMENT); /* below what is held */
  CHECK_STATUS(uma_free(a, p, 0, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

static void test_stats_struct_and_json(void) {
  uma_allocator* a = make_host(256u << 20, 0);
  void* p[4];
  const size_t sizes[4] = {100, 5000, 65536, 300000};
  size_t requested = 0;
  for (int i = 0; i < 4; ++i) {
    CHECK_STATUS(uma_malloc(a, sizes[i], 0, NULL, &p[i]), UMA_OK);
    requested += sizes[i];
  }
  uma_stats s = stats_of(a);
  CHECK(s.struct_size == sizeof s);
  CHECK(s.cache_blocks_in_use == 4);
  CHECK(s.cache_requested_bytes == requested);
  CHECK(s.cache_in_use_bytes >= requested);
  CHECK(s.cache_in_use_bytes - requested < requested); /* size classes: at most 25% + a page */
  CHECK(s.live_bytes == s.cache_in_use_bytes + s.cache_free_bytes); /* every block in a lease */
  CHECK(s.cache_misses == 4 && s.cache_hits == 0);
  CHECK(s.generation == 1);
  /* an older, smaller struct gets only its fields */
  uma_stats small;
  memset(&small, 0xee, sizeof small);
  small.struct_size = (uint32_t)offsetof(uma_stats, live_bytes);
  CHECK_STATUS(uma_get_stats(a, &small), UMA_OK);
  CHECK(small.quota_bytes == s.quota_bytes && small.live_bytes == 0xeeeeeeeeeeeeeeeeull);
  size_t needed = 0;
  CHECK_STATUS(uma_stats_json(a, NULL, 0, &needed), UMA_ERR_BUFFER_TOO_SMALL);
  CHECK(needed > 100);
  char* json = malloc(needed);
  CHECK_STATUS(uma_stats_json(a, json, needed - 1, &needed), UMA_ERR_BUFFER_TOO_SMALL);
  CHECK_STATUS(uma_stats_json(a, json, needed, &needed), UMA_OK);
  CHECK(strstr(json, "\"live_bytes\"") != NULL && strstr(json, "\"requested_bytes\":") != NULL);
  CHECK(strstr(json, "\"backend\":\"host\"") != NULL);
  free(json);
  for (int i = 0; i < 4; ++i)
    CHECK_STATUS(uma_free(a, p[i], sizes[i], 0, NULL), UMA_OK);
  void* again = NULL;
  CHECK_STATUS(uma_malloc(a, 65536, 0, NULL, &again), UMA_OK);
  s = stats_of(a);
  CHECK(again == p[2]); /* freed on the same stream: reused at once */
  CHECK(s.cache_hits == 1 && s.cache_misses == 4 && s.cache_blocks_in_use == 1);
  CHECK_STATUS(uma_free(a, again, 65536, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

static void test_range_operations(void) {
  uma_allocator* a = make_host(256u << 20, 1u << 20); /* larger than 1 MiB: the message path */
  void* small = NULL;
  void* large = NULL;
  CHECK_STATUS(uma_malloc(a, 65536, 0, NULL, &small), UMA_OK);
  CHECK_STATUS(uma_malloc(a, 4u << 20, 0, NULL, &large), UMA_OK);
  memset(large, 1, 4u << 20);
  CHECK_STATUS(uma_prefetch(a, small, 65536, UMA_DEVICE_HOST, NULL), UMA_OK);
  CHECK_STATUS(uma_prefetch(a, (char*)large + 4096, 8192, UMA_DEVICE_HOST, NULL), UMA_OK);
  CHECK_STATUS(uma_advise(a, small, 4096, UMA_ADVICE_SET_READ_MOSTLY, UMA_DEVICE_HOST), UMA_OK);
  CHECK_STATUS(uma_discard(a, large, 4096, NULL), UMA_OK);
  CHECK_STATUS(uma_prefetch(a, small, 65536 + 4096, UMA_DEVICE_HOST, NULL),
               UMA_ERR_UNKNOWN_POINTER); /* past the block */
  CHECK_STATUS(uma_free(a, large, 1, 0, NULL), UMA_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(uma_free(a, large, 4u << 20, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_free(a, large, 0, 0, NULL), UMA_ERR_UNKNOWN_POINTER);
  CHECK_STATUS(uma_prefetch(a, large, 4096, UMA_DEVICE_HOST, NULL), UMA_ERR_UNKNOWN_POINTER);
  uma_stats s = stats_of(a);
  CHECK(s.prefetch_bytes >= 65536 + 8192);
  CHECK_STATUS(uma_free(a, small, 0, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

struct worker {
  uma_allocator* a;
  int id;
  int bad;
};

static void* hammer(void* arg) {
  struct worker* w = arg;
  void* held[8] = {0};
  size_t sizes[8] = {0};
  unsigned seed = (unsigned)w->id * 7919u + 1u;
  uma_stream stream = (uma_stream)(uintptr_t)(16 + w->id % 3); /* three stream tokens */
  for (int i = 0; i < 3000; ++i) {
    int slot = (int)(rand_r(&seed) % 8);
    if (held[slot] != NULL) {
      unsigned char* b = held[slot];
      if (b[0] != (unsigned char)w->id || b[sizes[slot] - 1] != (unsigned char)w->id)
        ++w->bad; /* somebody else wrote into a block this thread holds */
      if (uma_free(w->a, held[slot], sizes[slot], 0, stream) != UMA_OK)
        ++w->bad;
      held[slot] = NULL;
    } else {
      sizes[slot] = 1 + rand_r(&seed) % (256u << 10);
      if (uma_malloc(w->a, sizes[slot], 0, stream, &held[slot]) != UMA_OK) {
        ++w->bad;
        continue;
      }
      memset(held[slot], w->id, sizes[slot]);
    }
  }
  for (int slot = 0; slot < 8; ++slot)
    if (held[slot] != NULL && uma_free(w->a, held[slot], sizes[slot], 0, stream) != UMA_OK)
      ++w->bad;
  return NULL;
}

static void test_many_threads(void) {
  uma_allocator* a = make_host(1u << 30, 0);
  enum { n = 8 };
  pthread_t threads[n];
  struct worker workers[n];
  for (int i = 0; i < n; ++i) {
    workers[i] = (struct worker){a, i + 1, 0};
    CHECK(pthread_create(&threads[i], NULL, hammer, &workers[i]) == 0);
  }
  for (int i = 0; i < n; ++i) {
    pthread_join(threads[i], NULL);
    CHECK(workers[i].bad == 0);
  }
  uma_stats s = stats_of(a);
  CHECK(s.cache_blocks_in_use == 0 && s.cache_in_use_bytes == 0 && s.cache_requested_bytes == 0);
  CHECK(s.cache_hits > s.cache_misses);
  CHECK(s.live_bytes == s.cache_free_bytes);
  /* every lease is idle: trim gives all of it back */
  uint64_t released = 0;
  CHECK_STATUS(uma_trim(a, &released), UMA_OK);
  CHECK(released == s.cache_free_bytes);
  s = stats_of(a);
  CHECK(s.live_bytes == 0 && s.cache_free_bytes == 0);
  void* p = NULL; /* and the cache goes on */
  CHECK_STATUS(uma_malloc(a, 4096, 0, NULL, &p), UMA_OK);
  CHECK_STATUS(uma_free(a, p, 4096, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

static void test_destroy_with_blocks_out(void) {
  uma_allocator* a = make_host(256u << 20, 1u << 20);
  void* p[3];
  CHECK_STATUS(uma_malloc(a, 4096, 0, NULL, &p[0]), UMA_OK);
  CHECK_STATUS(uma_malloc(a, 200000, 0, NULL, &p[1]), UMA_OK);
  CHECK_STATUS(uma_malloc(a, 3u << 20, 0, NULL, &p[2]), UMA_OK); /* a large block */
  void* returned = NULL;
  CHECK_STATUS(uma_malloc(a, 8192, 0, NULL, &returned), UMA_OK);
  CHECK_STATUS(uma_free(a, returned, 8192, 0, NULL), UMA_OK); /* its lease has no block out */
  uma_stop_report r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  CHECK_STATUS(uma_destroy_with_report(a, &r), UMA_OK);
  CHECK(r.blocks_outstanding == 3);
  CHECK(r.regions_leaked == 3); /* two leases and the large block */
  CHECK(r.bytes_leaked >= (3u << 20) + 200000 + 4096);
  CHECK(r.regions_freed == 1); /* the idle lease */
  /* leaked, not freed: the memory is still mapped and writable */
  memset(p[0], 0x5a, 4096);
  memset(p[2], 0x5a, 3u << 20);
}

static void test_default_allocator_and_torch_entry_points(void) {
  setenv("UMA_POLICY", "bogus", 1);
  uma_allocator* d = NULL;
  CHECK_STATUS(uma_default_allocator(NULL, &d), UMA_ERR_INVALID_ARGUMENT);
  CHECK(strstr(uma_last_error(), "UMA_POLICY") != NULL);
  /* (uma_torch_malloc's failures throw for PyTorch: tests/c_abi_torch_hook_test.cpp) */
  setenv("UMA_POLICY", "pool", 1);
  setenv("UMA_BACKEND", "host", 1);
  setenv("UMA_QUOTA_BYTES", "134217728", 1);
  void* t = uma_torch_malloc(1 << 20, 0, NULL);
  CHECK(t != NULL);
  CHECK_STATUS(uma_default_allocator(NULL, &d), UMA_OK);
  CHECK(stats_of(d).quota_bytes == 134217728u && stats_of(d).cache_blocks_in_use == 1);
  uma_config other;
  uma_config_init(&other);
  other.quota_bytes = 1u << 20;
  uma_allocator* e = NULL;
  CHECK_STATUS(uma_default_allocator(&other, &e), UMA_ERR_INVALID_ARGUMENT);
  uma_torch_free(t, 1 << 20, 0, NULL);
  CHECK(stats_of(d).cache_blocks_in_use == 0);
  CHECK(stats_of(d).live_bytes > 0); /* the idle lease stays cached ... */
  uma_torch_empty_cache();
  CHECK(stats_of(d).live_bytes == 0); /* ... until PyTorch's empty_cache hook */
  CHECK_STATUS(uma_destroy(d), UMA_OK);
}

/* issue 22: a free naming another device than the block's is refused and changes nothing (the
 * block would otherwise go to that device's free list); scheduler threads are bounded. */
static void test_free_on_another_device_and_too_many_threads(void) {
  uma_config c;
  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
  c.host_devices = 2;
  c.max_block_bytes = 1u << 20;
  uma_allocator* a = NULL;
  CHECK_STATUS(uma_create(&c, &a), UMA_OK);
  void* cached = NULL;
  void* large = NULL;
  CHECK_STATUS(uma_malloc(a, 65536, 0, NULL, &cached), UMA_OK);
  CHECK_STATUS(uma_malloc(a, 2u << 20, 1, NULL, &large), UMA_OK); /* past the cache */
  CHECK_STATUS(uma_free(a, cached, 65536, 1, NULL), UMA_ERR_INVALID_ARGUMENT);
  CHECK(strstr(uma_last_error(), "device 1 is not the device the block was allocated for") != NULL);
  CHECK_STATUS(uma_free(a, cached, 0, UMA_DEVICE_HOST, NULL), UMA_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(uma_free(a, large, 0, 0, NULL), UMA_ERR_INVALID_ARGUMENT);
  CHECK(strstr(uma_last_error(), "allocated for (1)") != NULL);
  CHECK(stats_of(a).cache_blocks_in_use == 1); /* the refused frees changed nothing */
  CHECK_STATUS(uma_free(a, cached, 65536, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_free(a, large, 0, 1, NULL), UMA_OK);
  CHECK(stats_of(a).cache_blocks_in_use == 0);
  CHECK_STATUS(uma_destroy(a), UMA_OK);

  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
  c.scheduler_threads = 1024;
  a = NULL;
  CHECK_STATUS(uma_create(&c, &a), UMA_ERR_INVALID_ARGUMENT);
  CHECK(a == NULL &&
        strstr(uma_last_error(), "scheduler_threads 1024 is over the limit of 256") != NULL);
  c.scheduler_threads = 257;
  CHECK_STATUS(uma_create(&c, &a), UMA_ERR_INVALID_ARGUMENT);
  c.scheduler_threads = 4;
  CHECK_STATUS(uma_create(&c, &a), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

static void test_a_block_past_a_gibibyte_is_cached_too(void) {
  /* By default the block allocator serves every size, as PyTorch's allocator caches every size
     (a framework's largest buffers come back every step): the second one is a hit. */
  uma_allocator* a = make_host((uint64_t)4 << 30, 0);
  const size_t big = (size_t)5 << 28; /* 1.25 GiB */
  void* p = NULL;
  void* q = NULL;
  CHECK_STATUS(uma_malloc(a, big, 0, NULL, &p), UMA_OK);
  CHECK_STATUS(uma_free(a, p, big, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_malloc(a, big, 0, NULL, &q), UMA_OK);
  uma_stats s = stats_of(a);
  CHECK(q == p);
  CHECK(s.cache_misses == 1 && s.cache_hits == 1 && s.cache_blocks_in_use == 1);
  CHECK_STATUS(uma_free(a, q, big, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

/* issue 38: cache_max_bytes is max_block_bytes's old name, kept one release as the same field
 * (a union): writing either sets the block limit. */
static void test_the_old_name_of_max_block_bytes_is_the_same_field(void) {
  uma_config c;
  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  c.cache_max_bytes = 1u << 20;
#pragma GCC diagnostic pop
  CHECK(c.max_block_bytes == 1u << 20);
  uma_allocator* a = NULL;
  CHECK_STATUS(uma_create(&c, &a), UMA_OK);
  void* small = NULL;
  void* large = NULL;
  CHECK_STATUS(uma_malloc(a, 4096, 0, NULL, &small), UMA_OK);
  CHECK_STATUS(uma_malloc(a, 2u << 20, 0, NULL, &large), UMA_OK); /* past the limit: a region */
  CHECK(stats_of(a).cache_blocks_in_use == 1);
  CHECK_STATUS(uma_free(a, small, 4096, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_free(a, large, 2u << 20, 0, NULL), UMA_OK);
  CHECK_STATUS(uma_destroy(a), UMA_OK);
}

int main(void) {
  test_null_and_bad_arguments();
  test_the_old_name_of_max_block_bytes_is_the_same_field();
  test_free_on_another_device_and_too_many_threads();
  test_pointers_the_allocator_did_not_hand_out();
  test_sizes_past_the_quota();
  test_stats_struct_and_json();
  test_a_block_past_a_gibibyte_is_cached_too();
  test_range_operations();
  test_many_threads();
  test_destroy_with_blocks_out();
  test_default_allocator_and_torch_entry_points();
  if (failures != 0) {
    fprintf(stderr, "c_abi_test: %d check(s) failed\n", failures);
    return 1;
  }
  fprintf(stderr, "c_abi_test: ok\n");
  return 0;
}
