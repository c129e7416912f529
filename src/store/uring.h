/* Reading objects through io_uring: several reads of one object in flight
 * at once, hashed in order as they complete.  A hash borrows a small
 * ring and its buffers from a pool; where io_uring is not available (old kernel, seccomp,
 * disabled by sysctl) the callers use plain reads. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "hash.h"

/* Turns the io_uring path on or off for the whole process. */
void kvt_uring_enable(bool on);
bool kvt_uring_enabled(void);

/* Hashes the first @size bytes of @fd; -ENODATA if it holds fewer, the
 * read's -errno on an I/O error, -ENOSYS when io_uring is off or not
 * available.  @copy: NULL, or @size bytes that receive the bytes hashed
 * (read there rather than into the ring's buffers). */
int kvt_uring_hash_fd(int fd, uint64_t size, kvt_hash *out, void *copy);
/* Frees the rings kept for the next hashes (at exit). */
void kvt_uring_cleanup(void);
