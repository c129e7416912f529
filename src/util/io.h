/* Small I/O helpers shared by the store and the daemon. */
#pragma once
#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

/* Reads up to @size bytes at @off, retrying short reads until end of
 * file: returns the bytes read (fewer only at end of file) or -errno. */
static inline ssize_t kvt_pread_full(int fd, void *buf, size_t size, off_t off)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = pread(fd, (char *)buf + done, size - done, off + done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += n;
	}
	return done;
}
