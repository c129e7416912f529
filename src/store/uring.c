#include "uring.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#else
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)(addr), (void)(len))
#endif

#include "pool.h"

/* Four reads of 256 KiB in flight: 1 MiB of buffers per hash under way,
 * enough to keep a disk's queue busy for one object. */
#define DEPTH 4
#define CHUNK (256u << 10)

struct thread_ring {
	struct io_uring ring;
	char *buf[DEPTH];
};

static gint enabled;

void kvt_uring_enable(bool on)
{
	g_atomic_int_set(&enabled, on);
}

bool kvt_uring_enabled(void)
{
	return g_atomic_int_get(&enabled);
}

static void ring_free(struct thread_ring *tr)
{
	if (!tr)
		return;
	io_uring_queue_exit(&tr->ring);
	for (int i = 0; i < DEPTH; i++)
		free(tr->buf[i]);
	g_free(tr);
}

/* A ring could not be made (io_uring disabled): do not try again. */
static gint no_ring;

static struct thread_ring *ring_new(void)
{
	struct thread_ring *tr = g_new0(struct thread_ring, 1);

	if (io_uring_queue_init(DEPTH, &tr->ring, 0) < 0) {
		g_free(tr);
		g_atomic_int_set(&no_ring, 1);
		return NULL;
	}
	for (int i = 0; i < DEPTH; i++) {
		if (posix_memalign((void **)&tr->buf[i], 4096, CHUNK)) {
			ring_free(tr);
			return NULL;
		}
	}
	return tr;
}

/* Rings and their buffers are lent to the thread that hashes.  16 are
 * kept (16 loaders' worth), not one for every thread libfuse started. */
static struct kvt_pool ring_pool = KVT_POOL_INIT(16, (GDestroyNotify)ring_free);

static struct thread_ring *ring_get(void)
{
	struct thread_ring *tr;

	if (g_atomic_int_get(&no_ring))
		return NULL;
	tr = kvt_pool_get(&ring_pool);
	return tr ? tr : ring_new();
}

void kvt_uring_cleanup(void)
{
	kvt_pool_clear(&ring_pool);
}

/* The rest of a chunk the ring read short, or not at all (-EAGAIN: ext4
 * on dm-log-writes answers a ring's buffered read so), read with pread:
 * only a read that finds the end of the file says the file ends early
 * (-ENODATA).  Taken for a torn object, a good block would be purged. */
static int finish_chunk(int fd, char *dst, uint64_t off, int64_t res, size_t want)
{
	size_t got = res > 0 ? (size_t)res : 0;
	int again = 0;

	if (res < 0 && res != -EAGAIN)
		return (int)res;
	while (got < want) {
		ssize_t n = pread(fd, dst + got, want - got, (off_t)(off + got));

		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			return -ENODATA;
		} else if (errno != EINTR && (errno != EAGAIN || ++again > 100)) {
			return -errno;
		}
	}
	return 0;
}

static int hash_with_ring(struct thread_ring *tr, int fd, uint64_t size, kvt_hash *out,
			  char *copy)
{
	/* Chunk k lives in buf[k % DEPTH]; res[] holds its completion. */
	int64_t res[DEPTH];
	char *dst[DEPTH];  /* where chunk k % DEPTH is read */
	bool done[DEPTH] = { false };
	uint64_t submitted = 0, hashed = 0; /* in chunks */
	uint64_t nchunks = (size + CHUNK - 1) / CHUNK;
	unsigned inflight = 0;
	kvt_hash_stream *hs;
	int ret = 0;

	hs = kvt_hash_stream_new();
	if (!hs)
		return -ENOMEM;
	posix_fadvise(fd, 0, size, POSIX_FADV_WILLNEED);
	while (hashed < nchunks) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		while (ret == 0 && submitted < nchunks && submitted - hashed < DEPTH) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&tr->ring);
			uint64_t off = submitted * CHUNK;
			int slot = submitted % DEPTH;

			if (!sqe)
				break;
			dst[slot] = copy ? copy + off : tr->buf[slot];
			io_uring_prep_read(sqe, fd, dst[slot], MIN(CHUNK, size - off), off);
			io_uring_sqe_set_data64(sqe, slot);
			done[slot] = false;
			submitted++;
			inflight++;
		}
		if (inflight == 0)
			break; /* an error stopped new reads and all are back */
		while ((seen = io_uring_submit_and_wait(&tr->ring, 1)) == (unsigned)-EINTR)
			;
		if ((int)seen < 0 && ret == 0)
			ret = -EIO;
		seen = 0;
		io_uring_for_each_cqe(&tr->ring, head, cqe) {
			int slot = (int)io_uring_cqe_get_data64(cqe);

			res[slot] = cqe->res;
			/* The kernel filled it: memcheck cannot see io_uring. */
			if (cqe->res > 0)
				VALGRIND_MAKE_MEM_DEFINED(dst[slot], cqe->res);
			done[slot] = true;
			inflight--;
			seen++;
		}
		io_uring_cq_advance(&tr->ring, seen);
		/* In order: XXH3 is a stream. */
		while (ret == 0 && hashed < submitted && done[hashed % DEPTH]) {
			int slot = hashed % DEPTH;
			uint64_t want = MIN(CHUNK, size - hashed * CHUNK);

			if (res[slot] < 0 || (uint64_t)res[slot] < want)
				ret = finish_chunk(fd, dst[slot], hashed * CHUNK, res[slot], want);
			if (ret == 0)
				kvt_hash_stream_update(hs, dst[slot], want);
			done[slot] = false;
			hashed++;
		}
		if (ret < 0 && inflight == 0)
			break;
	}
	if (ret == 0)
		kvt_hash_stream_digest(hs, out);
	kvt_hash_stream_free(hs);
	return ret;
}

int kvt_uring_hash_fd(int fd, uint64_t size, kvt_hash *out, void *copy)
{
	struct thread_ring *tr = kvt_uring_enabled() ? ring_get() : NULL;
	int ret;

	if (!tr)
		return -ENOSYS;
	ret = hash_with_ring(tr, fd, size, out, copy);
	kvt_pool_put(&ring_pool, tr);
	return ret;
}
