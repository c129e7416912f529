#include "verify.h"

#include "lower.h"
#include "object.h"
#include "uring.h"

#include <errno.h>
#include <string.h>

/* Sharded so that concurrent opens of different objects rarely meet on
 * one mutex. */
#define SHARDS 16

struct identity {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

/* One allocation per object remembered (about 100 bytes with the table's
 * share), so that the option bounding their number bounds memory. */
struct entry {
	kvt_hash hash;
	struct identity id;
	GList link;        /* in the shard's order */
};

struct shard {
	GMutex lock;
	GHashTable *known; /* &entry->hash -> struct entry */
	GQueue order;      /* entries, oldest first */
};

struct kvt_verifier {
	guint capacity_per_shard;
	struct shard shards[SHARDS];
};

static guint hash_hash(gconstpointer p)
{
	guint h;

	memcpy(&h, ((const kvt_hash *)p)->b, sizeof(h));
	return h;
}

static gboolean hash_eq(gconstpointer a, gconstpointer b)
{
	return kvt_hash_equal(a, b);
}

struct kvt_verifier *kvt_verifier_new(guint capacity)
{
	struct kvt_verifier *v = g_new0(struct kvt_verifier, 1);

	v->capacity_per_shard = MAX(capacity / SHARDS, 1);
	for (int i = 0; i < SHARDS; i++) {
		g_mutex_init(&v->shards[i].lock);
		v->shards[i].known = g_hash_table_new_full(hash_hash, hash_eq, NULL, g_free);
		g_queue_init(&v->shards[i].order);
	}
	return v;
}

void kvt_verifier_free(struct kvt_verifier *v)
{
	if (!v)
		return;
	for (int i = 0; i < SHARDS; i++) {
		g_hash_table_unref(v->shards[i].known);
		g_mutex_clear(&v->shards[i].lock);
	}
	g_free(v);
}

static struct shard *shard_of(struct kvt_verifier *v, const kvt_hash *h)
{
	return &v->shards[h->b[15] % SHARDS];
}

static void identity_of(const struct stat *st, struct identity *id)
{
	memset(id, 0, sizeof(*id));
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = st->st_size;
	id->mtime = st->st_mtim;
	id->ctime = st->st_ctim;
}

static bool identity_eq(const struct identity *a, const struct identity *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

bool kvt_verifier_known(struct kvt_verifier *v, const kvt_hash *hash,
			const struct stat *st)
{
	struct shard *s = shard_of(v, hash);
	struct identity id;
	struct entry *have;
	bool known;

	identity_of(st, &id);
	g_mutex_lock(&s->lock);
	have = g_hash_table_lookup(s->known, hash);
	known = have && identity_eq(&have->id, &id);
	g_mutex_unlock(&s->lock);
	return known;
}

static void remember(struct kvt_verifier *v, const kvt_hash *hash,
		     const struct stat *st)
{
	struct shard *s = shard_of(v, hash);
	struct entry *e;

	g_mutex_lock(&s->lock);
	e = g_hash_table_lookup(s->known, hash);
	if (e) {
		identity_of(st, &e->id);
	} else {
		while (g_hash_table_size(s->known) >= v->capacity_per_shard) {
			GList *old = g_queue_pop_head_link(&s->order);

			if (!old)
				break;
			g_hash_table_remove(s->known, &((struct entry *)old->data)->hash);
		}
		e = g_new0(struct entry, 1);
		e->hash = *hash;
		identity_of(st, &e->id);
		e->link.data = e;
		g_queue_push_tail_link(&s->order, &e->link);
		g_hash_table_insert(s->known, &e->hash, e);
	}
	g_mutex_unlock(&s->lock);
}

void kvt_verifier_forget(struct kvt_verifier *v, const kvt_hash *hash)
{
	struct shard *s = shard_of(v, hash);
	struct entry *e;

	g_mutex_lock(&s->lock);
	e = g_hash_table_lookup(s->known, hash);
	if (e) {
		g_queue_unlink(&s->order, &e->link);
		g_hash_table_remove(s->known, hash);
	}
	g_mutex_unlock(&s->lock);
}

static int verify(struct kvt_verifier *v, int fd, const struct stat *st,
		  const struct kvt_record *rec, bool force, struct kvt_verify_result *res,
		  void *copy)
{
	kvt_hash h;
	int ret;

	memset(res, 0, sizeof(*res));
	if ((uint64_t)st->st_size != rec->size) {
		res->found_size = st->st_size;
		return -ENODATA;
	}
	if (!force && kvt_verifier_known(v, &rec->hash, st))
		return 1;
	ret = kvt_object_fault(KVT_FAULT_READ, rec);
	if (ret < 0)
		return ret;
	ret = kvt_uring_hash_fd(fd, rec->size, &h, copy);
	if (ret == -ENOSYS)
		ret = kvt_hash_fd(fd, rec->size, &h, copy);
	if (ret == -ENODATA) {
		/* Shrunk while being hashed; a read error is not a verdict
		 * on the object and goes back as it is. */
		struct stat now;

		res->found_size = kvt_file_stat(fd, NULL, &now) == 0 ? (uint64_t)now.st_size : 0;
		return -ENODATA;
	}
	if (ret < 0)
		return ret;
	if (!kvt_hash_equal(&h, &rec->hash)) {
		res->found_hash = h;
		kvt_verifier_forget(v, &rec->hash);
		return -EBADMSG;
	}
	remember(v, &rec->hash, st);
	return 0;
}

int kvt_verify_fd(struct kvt_verifier *v, int fd, const struct stat *st,
		  const struct kvt_record *rec, bool force,
		  struct kvt_verify_result *res)
{
	return verify(v, fd, st, rec, force, res, NULL);
}

int kvt_verify_fd_into(struct kvt_verifier *v, int fd, const struct stat *st,
		       const struct kvt_record *rec, struct kvt_verify_result *res, void *copy)
{
	return verify(v, fd, st, rec, true, res, copy);
}
