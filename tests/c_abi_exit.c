/* Process exit with the C ABI's default allocator alive and a block still handed out (what a
 * Python process using the PyTorch entry points does): the process must exit 0, with no crash
 * in the teardown of uma's threads. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include <uma/c/uma.h>

int main(void) {
  setenv("UMA_BACKEND", "host", 1);
  setenv("UMA_MAX_BLOCK_BYTES", "1048576", 1);
  void* kept = uma_torch_malloc(1 << 20, 0, NULL);
  void* large = uma_torch_malloc(8 << 20, 0, NULL); /* past the cache's 1 MiB: a region */
  void* freed = uma_torch_malloc(4096, 0, NULL);
  if (kept == NULL || large == NULL || freed == NULL) {
    fprintf(stderr, "c_abi_exit: allocation failed: %s\n", uma_last_error());
    return 1;
  }
  uma_torch_free(freed, 4096, 0, NULL);
  fprintf(stderr, "c_abi_exit: ok\n");
  return 0;
}
