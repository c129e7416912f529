/* Stages: the staging file of one version being written, its writes
 * (O_DIRECT where aligned) and the running hash of its bytes, sealed for
 * its publication and opened again if that fails (stage.h). */
#include "stage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "io.h"
#include "lowerr.h"
#include "pool.h"
#include "store-int.h"

/* O_DIRECT wants offset, length and memory aligned to the device's block;
 * 4096 covers every device in use. */
#define DIO_ALIGN 4096
#define DIO_BUF_SIZE (1u << 20)  /* max_write */
/* How long a write beyond the hashed prefix waits for the writes before
 * it (an O_DIRECT write arrives as parallel requests).  After that the
 * hash is computed again from the file at publication. */
#define HASH_WAIT_US 20000

/* Aligned buffers for O_DIRECT writes whose data FUSE handed at an
 * unaligned address (receive.h aligns most).  Lent for one write.  32
 * are kept, not one for every thread libfuse started: enough for 16
 * writers of 2 MiB blocks (two 1 MiB requests each at once); past them a
 * buffer is made and unmapped per write, which with 8 kept cost a sixth
 * of the store rate. */
static struct kvt_pool dio_pool = KVT_POOL_INIT(32, free);

static void *dio_buf_get(void)
{
	void *p = kvt_pool_get(&dio_pool);

	if (!p && posix_memalign(&p, DIO_ALIGN, DIO_BUF_SIZE))
		p = NULL;
	return p;
}

void kvt_stage_cleanup(void)
{
	kvt_pool_clear(&dio_pool);
}

/* The stage's record file: an empty file in staging, left open. */
static int make_record_file(struct kvt_stage *st)
{
	int fd;

	for (;;) {
		st->record = kvt_store_stage_name(st->store, 'n');
		fd = kvt_dir_open_file(st->store->stage, st->record, O_WRONLY | O_CREAT | O_EXCL,
				       0600, &st->record_st);
		if (fd >= 0)
			break;
		g_clear_pointer(&st->record, g_free);
		if (fd != -EEXIST)
			return fd;
	}
	st->record_fd = fd;
	return 0;
}

int kvt_stage_new(struct kvt_store *store, struct kvt_stage **out)
{
	struct kvt_stage *st;
	char *name;
	int fd, ret;

	for (;;) {
		name = kvt_store_stage_name(store, 'd');
		fd = kvt_dir_open_file(store->stage, name, O_RDWR | O_CREAT | O_EXCL, 0600, NULL);
		if (fd >= 0)
			break;
		g_free(name);
		if (fd != -EEXIST)
			return fd;
	}
	st = g_new0(struct kvt_stage, 1);
	st->refs = 1;
	st->store = store;
	st->fd = fd;
	st->name = name;
	ret = make_record_file(st);
	if (ret < 0) {
		kvt_dir_unlink(store->stage, name);
		close(fd);
		g_free(name);
		g_free(st);
		return ret;
	}
	st->dfd = kvt_file_reopen(fd, O_WRONLY | O_DIRECT);
	if (st->dfd < 0 && st->dfd != -EINVAL) /* no /proc here; EINVAL: no O_DIRECT */
		st->dfd = kvt_dir_open_file(store->stage, name, O_WRONLY | O_DIRECT, 0, NULL);
	g_rw_lock_init(&st->io);
	g_mutex_init(&st->hash_lock);
	g_cond_init(&st->hash_cond);
	st->hs = kvt_hash_stream_new();
	*out = st;
	return 0;
}

struct kvt_stage *kvt_stage_ref(struct kvt_stage *st)
{
	g_atomic_int_inc(&st->refs);
	return st;
}

void kvt_stage_unref(struct kvt_stage *st)
{
	if (!st || !g_atomic_int_dec_and_test(&st->refs))
		return;
	if (kvt_stage_state(st) != KVT_STAGE_PUBLISHED)
		kvt_dir_unlink(st->store->stage, st->name);
	if (st->record) {
		close(st->record_fd);
		kvt_dir_unlink(st->store->stage, st->record);
		g_free(st->record);
	}
	close(st->fd);
	if (st->dfd >= 0)
		close(st->dfd);
	kvt_hash_stream_free(st->hs);
	g_cond_clear(&st->hash_cond);
	g_mutex_clear(&st->hash_lock);
	g_rw_lock_clear(&st->io);
	g_free(st->name);
	if (st->gone)
		st->gone(st->gone_data);
	g_free(st);
}

static void break_hash_locked(struct kvt_stage *st)
{
	g_clear_pointer(&st->hs, kvt_hash_stream_free);
	g_cond_broadcast(&st->hash_cond);
}

/* Feeds the running hash with bytes written at @off: in order they are
 * hashed at once; a write ahead of the hashed prefix waits a little for
 * the ones before it; anything else (rewrites, holes) breaks the stream. */
static void feed_hash(struct kvt_stage *st, const void *buf, size_t size, off_t off)
{
	gint64 deadline = g_get_monotonic_time() + HASH_WAIT_US;

	g_mutex_lock(&st->hash_lock);
	while (st->hs && (uint64_t)off > st->hashed)
		if (!g_cond_wait_until(&st->hash_cond, &st->hash_lock, deadline))
			break_hash_locked(st);
	if (st->hs && (uint64_t)off == st->hashed) {
		kvt_hash_stream_update(st->hs, buf, size);
		st->hashed += size;
		g_cond_broadcast(&st->hash_cond);
	} else if (st->hs) {
		break_hash_locked(st);
	}
	g_mutex_unlock(&st->hash_lock);
}

static int pwrite_full(int fd, const char *buf, size_t size, off_t off)
{
	size_t done = 0;

	while (done < size) {
		ssize_t w = pwrite(fd, buf + done, size - done, off + done);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += w;
	}
	return 0;
}

static void grow_size(struct kvt_stage *st, uint64_t end)
{
	uint64_t cur = __atomic_load_n(&st->size, __ATOMIC_RELAXED);

	while (end > cur &&
	       !__atomic_compare_exchange_n(&st->size, &cur, end, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

int kvt_stage_write(struct kvt_stage *st, const char *buf, size_t size, off_t off)
{
	const char *src = buf;
	bool direct = st->dfd >= 0 && off % DIO_ALIGN == 0 && size % DIO_ALIGN == 0 &&
		      size > 0;
	bool aligned = (uintptr_t)buf % DIO_ALIGN == 0;
	/* receive.h hands most writes aligned; the others are copied. */
	char *dbuf = direct && !aligned && size <= DIO_BUF_SIZE ? dio_buf_get() : NULL;
	int ret;

	if (dbuf) {
		memcpy(dbuf, buf, size);
		src = dbuf;
	} else if (!aligned) {
		direct = false;
	}
	__atomic_store_n(&st->durable, false, __ATOMIC_RELEASE);
	__atomic_store_n(&st->orphan, false, __ATOMIC_RELEASE);
	feed_hash(st, src, size, off);
	ret = kvt_fault(KVT_FAULT_WRITE, st->name);
	if (ret == 0) {
		ret = pwrite_full(direct ? st->dfd : st->fd, src, size, off);
		if (ret == -EINVAL && direct)
			ret = pwrite_full(st->fd, src, size, off);
		if (ret < 0)
			kvt_lower_failed("write", st->name, -ret);
	}
	kvt_pool_put(&dio_pool, dbuf);
	if (ret < 0) {
		/* A version with a hole where a write failed must never be
		 * published: the error sticks to the stage. */
		__atomic_compare_exchange_n(&st->error, &(int){ 0 }, -ret, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		return ret;
	}
	grow_size(st, off + size);
	return 0;
}

ssize_t kvt_stage_read(struct kvt_stage *st, char *buf, size_t size, off_t off)
{
	int fault = kvt_fault(KVT_FAULT_READ, st->name);

	ssize_t n;

	if (fault)
		return fault;
	n = kvt_pread_full(st->fd, buf, size, off);
	return n < 0 ? kvt_lower_failed("read", st->name, (int)-n) : n;
}

int kvt_stage_truncate(struct kvt_stage *st, uint64_t size)
{
	int ret;

	__atomic_store_n(&st->durable, false, __ATOMIC_RELEASE);
	ret = kvt_file_truncate(st->fd, st->name, size);
	if (ret < 0)
		return ret;
	g_mutex_lock(&st->hash_lock);
	if (size == 0) {
		/* A fresh start (O_TRUNC): hash from the beginning again. */
		if (!st->hs)
			st->hs = kvt_hash_stream_new();
		else
			kvt_hash_stream_reset(st->hs);
		st->hashed = 0;
	} else if (size != st->hashed) {
		break_hash_locked(st);
	}
	g_mutex_unlock(&st->hash_lock);
	__atomic_store_n(&st->size, size, __ATOMIC_RELAXED);
	return 0;
}

int kvt_stage_fill(struct kvt_stage *st, int src_fd, uint64_t len)
{
	loff_t in = 0, out = 0;
	int fault = kvt_fault(KVT_FAULT_WRITE, st->name);

	if (fault)
		return fault;
	__atomic_store_n(&st->durable, false, __ATOMIC_RELEASE);
	g_mutex_lock(&st->hash_lock);
	break_hash_locked(st); /* hashed again at publication */
	g_mutex_unlock(&st->hash_lock);
	while (in < (loff_t)len) {
		ssize_t n = copy_file_range(src_fd, &in, st->fd, &out, len - in, 0);

		if (n <= 0)
			return n < 0 ? -errno : -EIO;
	}
	__atomic_store_n(&st->size, len, __ATOMIC_RELAXED);
	return 0;
}

/* Hashes the staging file's @size bytes into a fresh running hash
 * (caller holds st->io as writer: no write can land meanwhile). */
static int rehash_locked(struct kvt_stage *st, uint64_t size)
{
	g_autofree char *buf = g_malloc(1u << 20);
	kvt_hash_stream *hs = kvt_hash_stream_new();
	uint64_t off = 0;

	while (off < size) {
		ssize_t n = kvt_fault(KVT_FAULT_READ, st->name);

		if (n == 0)
			n = kvt_pread_full(st->fd, buf, MIN(size - off, 1u << 20), off);

		if (n <= 0) {
			kvt_hash_stream_free(hs);
			/* The staged file lost bytes: not a version to publish. */
			return n < 0 ? (int)n : -EIO;
		}
		kvt_hash_stream_update(hs, buf, n);
		off += n;
	}
	g_mutex_lock(&st->hash_lock);
	kvt_hash_stream_free(st->hs);
	st->hs = hs;
	st->hashed = size;
	g_cond_broadcast(&st->hash_cond);
	g_mutex_unlock(&st->hash_lock);
	return 0;
}

static bool hash_covers(struct kvt_stage *st, uint64_t size)
{
	bool ok;

	g_mutex_lock(&st->hash_lock);
	ok = st->hs && st->hashed == size;
	g_mutex_unlock(&st->hash_lock);
	return ok;
}

int kvt_stage_prepare(struct kvt_stage *st)
{
	int ret = 0;

	g_rw_lock_writer_lock(&st->io);
	if (kvt_stage_state(st) == KVT_STAGE_OPEN && !st->error &&
	    !hash_covers(st, kvt_stage_size(st)))
		ret = rehash_locked(st, kvt_stage_size(st));
	g_rw_lock_writer_unlock(&st->io);
	return ret;
}

int kvt_stage_sync(struct kvt_stage *st)
{
	int ret = 0;

	/* Exclusive against writers, so that "durable" covers every byte. */
	g_rw_lock_writer_lock(&st->io);
	if (kvt_stage_state(st) == KVT_STAGE_OPEN && !kvt_stage_durable(st)) {
		ret = kvt_file_datasync(st->fd, st->name);
		if (ret == 0)
			__atomic_store_n(&st->durable, true, __ATOMIC_RELEASE);
	}
	g_rw_lock_writer_unlock(&st->io);
	return ret;
}

int kvt_stage_seal(struct kvt_stage *st, kvt_hash *hash, uint64_t *size)
{
	int ret = 0;

	/* Exclusive against writers: no byte may land in the staged file
	 * once it is on its way to become an immutable object. */
	g_rw_lock_writer_lock(&st->io);
	*size = kvt_stage_size(st);
	if (kvt_stage_state(st) != KVT_STAGE_OPEN)
		ret = 1;
	else if (st->error)
		ret = -st->error;
	else if (!hash_covers(st, *size))
		ret = rehash_locked(st, *size);
	if (ret == 0) {
		g_mutex_lock(&st->hash_lock);
		kvt_hash_stream_digest(st->hs, hash);
		g_mutex_unlock(&st->hash_lock);
		__atomic_store_n(&st->state, KVT_STAGE_SEALED, __ATOMIC_RELEASE);
	}
	g_rw_lock_writer_unlock(&st->io);
	return ret;
}

void kvt_stage_unseal(struct kvt_stage *st)
{
	g_rw_lock_writer_lock(&st->io);
	__atomic_store_n(&st->state, KVT_STAGE_OPEN, __ATOMIC_RELEASE);
	g_rw_lock_writer_unlock(&st->io);
}

void kvt_stage_set_published(struct kvt_stage *st)
{
	g_rw_lock_writer_lock(&st->io);
	__atomic_store_n(&st->state, KVT_STAGE_PUBLISHED, __ATOMIC_RELEASE);
	g_rw_lock_writer_unlock(&st->io);
	/* SEALED until now: no other publication looks at it. */
	close(g_steal_fd(&st->record_fd));
	g_clear_pointer(&st->record, g_free);
}
