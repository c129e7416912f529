/* Unit tests of a version being written (stage.h) and of the publication
 * transaction (publish.h), without FUSE: in-order, out-of-order and
 * parallel writes, O_DIRECT and buffered; publication, dedup, replacement,
 * rollback when the record cannot be installed, a write error that sticks;
 * the publication in parts, prepared, installed, finished or undone.
 * Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store-int.h"
#include "unit.h"

static const char *top;

static char *pattern(size_t len, unsigned seed)
{
	char *buf = g_malloc(len);

	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 131 + seed + (i >> 12));
	return buf;
}

/* The stage's file holds @buf and its seal says @buf's hash. */
static bool stage_holds(struct kvt_stage *st, const char *buf, size_t len)
{
	g_autofree char *back = g_malloc(len + 1);
	kvt_hash want, got;
	uint64_t size;

	kvt_hash_buf(buf, len, &want);
	if (kvt_stage_read(st, back, len + 1, 0) != (ssize_t)len || memcmp(back, buf, len))
		return false;
	if (kvt_stage_seal(st, &got, &size) != 0)
		return false;
	kvt_stage_unseal(st);
	return size == len && kvt_hash_equal(&got, &want);
}

static bool hash_whole(struct kvt_stage *st)
{
	bool whole;

	g_mutex_lock(&st->hash_lock);
	whole = st->hs && st->hashed == kvt_stage_size(st);
	g_mutex_unlock(&st->hash_lock);
	return whole;
}

struct chunk {
	struct kvt_stage *st;
	const char *buf;
	size_t off, len;
	int ret;
};

static gpointer write_chunk(gpointer data)
{
	struct chunk *c = data;

	c->ret = kvt_stage_write(c->st, c->buf + c->off, c->len, c->off);
	return NULL;
}

static void test_stage(struct kvt_store *s)
{
	const size_t len = 4u << 20;
	g_autofree char *buf = pattern(len, 1);
	g_autofree char *stage_rel = g_strdup_printf("staging/%s", s->mount_id);
	struct kvt_stage *st;
	bool good = true;

	/* Buffered, in order, odd sizes: hashed as the bytes come. */
	ok(kvt_stage_new(s, &st) == 0, "stage: a new stage in this mount's staging area");
	for (size_t off = 0; good && off < len; off += 100000)
		good = kvt_stage_write(st, buf + off, MIN(100000, len - off), off) == 0;
	ok(good && hash_whole(st), "in-order buffered writes keep the running hash whole");
	ok(stage_holds(st, buf, len), "its bytes and its seal's hash are the written ones");
	kvt_stage_unref(st);

	/* O_DIRECT: aligned 1 MiB writes go through the direct fd. */
	ok(kvt_stage_new(s, &st) == 0 && st->dfd >= 0, "an O_DIRECT fd is open on the stage");
	good = true;
	for (size_t off = 0; good && off < len; off += 1u << 20)
		good = kvt_stage_write(st, buf + off, 1u << 20, off) == 0;
	ok(good && hash_whole(st) && stage_holds(st, buf, len),
	   "aligned writes (O_DIRECT) read back and hash right");
	kvt_stage_unref(st);

	/* Out of order beyond the wait: the stream breaks, the seal hashes
	 * the file again. */
	ok(kvt_stage_new(s, &st) == 0, "a third stage");
	good = kvt_stage_write(st, buf + len / 2, len / 2, len / 2) == 0 &&
	       kvt_stage_write(st, buf, len / 2, 0) == 0;
	ok(good && !hash_whole(st), "a write ahead of the hashed bytes breaks the running hash");
	ok(stage_holds(st, buf, len), "and the seal hashes the file again, right");
	ok(hash_whole(st), "after which the running hash is whole again");
	ok(kvt_stage_write(st, buf, 4096, len) == 0 && hash_whole(st),
	   "and an append keeps it whole");
	kvt_stage_unref(st);

	/* Parallel: the requests of one O_DIRECT write arrive at once, the
	 * later ones wait for the earlier ones to be hashed. */
	ok(kvt_stage_new(s, &st) == 0, "a fourth stage");
	{
		struct chunk c[4];
		GThread *t[4];

		for (int i = 3; i >= 0; i--) {
			c[i] = (struct chunk){ st, buf, i * (len / 4), len / 4, -1 };
			t[i] = g_thread_new("w", write_chunk, &c[i]);
		}
		good = true;
		for (int i = 0; i < 4; i++) {
			g_thread_join(t[i]);
			good = good && c[i].ret == 0;
		}
	}
	ok(good && stage_holds(st, buf, len), "parallel writes of one block read back and hash right");

	/* O_TRUNC on the open stage: a fresh version. */
	ok(kvt_stage_truncate(st, 0) == 0 && kvt_stage_size(st) == 0 &&
	   kvt_stage_write(st, buf, 8192, 0) == 0 && hash_whole(st) && stage_holds(st, buf, 8192),
	   "a truncate to 0 starts hashing again from the first byte");
	ok(kvt_stage_truncate(st, 5000) == 0 && stage_holds(st, buf, 5000),
	   "a truncate inside the bytes is hashed again at the seal");
	kvt_stage_unref(st);
	ok(count_in(top, stage_rel) == 2,
	   "unpublished stages leave nothing behind but the lock and marks-moves");
}

static int publish_buf(struct kvt_store *s, struct kvt_dir *d, const char *name,
		       const char *buf, size_t len, unsigned flags, struct kvt_published *pub,
		       struct kvt_stage **keep)
{
	struct kvt_meta meta = { .mode = 0640, .uid = getuid(), .gid = getgid() };
	struct kvt_stage *st;
	int ret = kvt_stage_new(s, &st);

	if (ret == 0)
		ret = kvt_stage_write(st, buf, len, 0);
	if (ret == 0)
		ret = kvt_store_publish(s, st, d, name, &meta, NULL, flags, pub);
	if (keep)
		*keep = st;
	else
		kvt_stage_unref(st);
	return ret;
}

static bool name_reads(struct kvt_store *s, const char *name, const char *buf, size_t len)
{
	g_autofree char *back = g_malloc(len + 1);
	struct kvt_record rec;
	kvt_autofd fd = -1;
	bool good;

	if (kvt_name_read(kvt_store_names(s), name, &rec, NULL) < 0)
		return false;
	fd = kvt_object_open(s, &rec, O_RDONLY, NULL);
	good = fd >= 0 && rec.size == len && pread(fd, back, len + 1, 0) == (ssize_t)len &&
	       !memcmp(back, buf, len);
	kvt_record_clear(&rec);
	return good;
}

static void test_publish(struct kvt_store *s)
{
	struct kvt_dir *names = kvt_store_names(s);
	const size_t len = 1u << 20;
	g_autofree char *a = pattern(len, 2), *b = pattern(len, 3);
	g_autofree char *stage_rel = g_strdup_printf("staging/%s", s->mount_id);
	struct kvt_published p1, p2, p3;
	struct kvt_stage *st;
	struct stat s1, s2;
	int objects;

	ok(publish_buf(s, names, "one", a, len, 0, &p1, NULL) == 0 && name_reads(s, "one", a, len),
	   "publish: the name reads back its bytes");
	ok(count_in(top, stage_rel) == 2, "the staged file and the staged record are gone");
	{
		g_autofree char *obj = object_file(top, &p1.rec, false);

		ok(stat(obj, &s1) == 0 && s1.st_nlink == 2 && !p1.dedup,
		   "a new object: its reference and its anchor");
	}
	ok(p1.rec_st.st_ino && p1.rec.has_meta && p1.rec.mode == 0640 && p1.rec.uid == getuid() &&
	   p1.rec.size == len, "the result says the record's owner and mode and the object's size");
	ok((p1.rec_st.st_mode & 07777) == 0600 && p1.rec_st.st_uid == geteuid(),
	   "the record file is the daemon's and 0600, whoever owns the name");

	ok(publish_buf(s, names, "two", a, len, 0, &p2, NULL) == 0 && p2.dedup &&
	   kvt_hash_equal(&p1.rec.hash, &p2.rec.hash) && strcmp(p1.rec.ref, p2.rec.ref),
	   "dedup: the same bytes under another name share the object, with their own reference");
	{
		g_autofree char *obj = object_file(top, &p2.rec, false);

		ok(stat(obj, &s2) == 0 && s2.st_ino == s1.st_ino && s2.st_nlink == 3,
		   "one inode, three links");
	}

	objects = count_objects(top);
	ok(publish_buf(s, names, "two", b, len, KVT_PUBLISH_KEEP_REPLACED, &p3, NULL) == 0 &&
	   name_reads(s, "two", b, len) && !strcmp(p3.replaced.ref, p2.rec.ref),
	   "replace: the name shows the new bytes; the record it replaced comes back to the caller");
	ok(count_objects(top) == objects + 2, "which keeps the replaced reference until it releases it");
	ok(kvt_object_release(s, &p3.replaced) == 0 && count_objects(top) == objects + 1,
	   "released, the replaced reference goes (the object stays for 'one')");
	kvt_published_clear(&p3);
	objects = count_objects(top);
	ok(publish_buf(s, names, "one", b, len, 0, &p3, NULL) == 0 && name_reads(s, "one", b, len) &&
	   count_objects(top) == objects - 1,
	   "replace without keeping: the last reference of the old bytes goes with its anchor");
	kvt_published_clear(&p3);

	/* Rollback: the record cannot be installed (a directory has the
	 * name), so nothing is published and the version is open again. */
	objects = count_objects(top);
	ok(kvt_dir_mkdir(names, "dir", 0755) == 0 &&
	   publish_buf(s, names, "dir", a, len, 0, &p3, &st) == -EISDIR,
	   "rollback: a publication over a directory fails (EISDIR)");
	ok(count_objects(top) == objects && kvt_stage_state(st) == KVT_STAGE_OPEN,
	   "no object is left behind (nor its anchor), and the version is open again");
	ok(kvt_store_publish(s, st, names, "retry", &(struct kvt_meta){ .mode = 0644 }, NULL, 0,
			     &p3) == 0 && name_reads(s, "retry", a, len),
	   "a retry publishes the same bytes under another name");
	ok(kvt_store_publish(s, st, names, "again", &(struct kvt_meta){ .mode = 0644 }, NULL, 0,
			     &p3) == 1, "a published version has nothing more to publish (1)");
	kvt_stage_unref(st);
	kvt_published_clear(&p3);

	/* A sealed version belongs to its publication. */
	{
		kvt_hash h;
		uint64_t size;

		ok(kvt_stage_new(s, &st) == 0 && kvt_stage_write(st, a, 4096, 0) == 0 &&
		   kvt_stage_seal(st, &h, &size) == 0 &&
		   kvt_store_publish(s, st, names, "sealed", &(struct kvt_meta){ .mode = 0644 },
				     NULL, 0, &p3) == 1,
		   "a version another publication sealed is not published twice");
		kvt_stage_unseal(st);
		kvt_stage_unref(st);
	}

	/* A write error sticks: the version can never be published. */
	{
		g_autofree char *torn = g_build_filename(top, "names", "torn", NULL);
		int full = open("/dev/full", O_WRONLY | O_CLOEXEC), saved = -1;
		struct kvt_meta meta = { .mode = 0644 };

		ok(full >= 0 && kvt_stage_new(s, &st) == 0 && (saved = dup(st->fd)) >= 0 &&
		   dup2(full, st->fd) >= 0 && kvt_stage_write(st, a, 100, 0) == -ENOSPC,
		   "a write that fails (ENOSPC) answers its error");
		ok(kvt_store_publish(s, st, names, "torn", &meta, NULL, 0, &p3) == -ENOSPC &&
		   !lower_exists(torn),
		   "publication fails with the write's error, the name does not appear");
		ok(dup2(saved, st->fd) >= 0 && kvt_stage_write(st, a, 100, 0) == 0 &&
		   kvt_store_publish(s, st, names, "torn", &meta, NULL, 0, &p3) == -ENOSPC &&
		   !lower_exists(torn),
		   "a later good write does not mend it: a version with a hole is never published");
		close(full);
		close(saved);
		kvt_stage_unref(st);
	}

	/* Client xattrs and a rewrite of the record. */
	{
		struct kvt_record rec, back;
		struct kvt_meta meta = { .mode = 0600 };
		struct stat rst;

		kvt_published_clear(&p1);
		ok(kvt_name_read(names, "one", &rec, NULL) == 0, "the record of 'one' is read");
		rec.xattrs = kvt_xattrs_new();
		g_hash_table_insert(rec.xattrs, g_strdup("user.vllm.kv_crc32c"),
				    g_bytes_new("\x01\x02", 2));
		ok(kvt_store_rewrite(s, names, "one", &rec, &meta, &rst) == 0 &&
		   (rst.st_mode & 07777) == 0600 && kvt_name_read(names, "one", &back, NULL) == 0 &&
		   back.xattrs && g_hash_table_contains(back.xattrs, "user.vllm.kv_crc32c") &&
		   !strcmp(back.ref, rec.ref) && name_reads(s, "one", b, len),
		   "rewrite: same object, new xattrs and mode");
		ok(kvt_store_sync_name(s, names, "one", &back) == 0,
		   "the published name is made durable (fsync of object, record, directories)");
		kvt_record_clear(&rec);
		kvt_record_clear(&back);
	}
	kvt_published_clear(&p2);
	ok(count_in(top, stage_rel) == 2,
	   "after all of it, staging holds only the lock and marks-moves");
}

/* A kvt_sync_wanted that counts the names it is asked about and wants
 * none. */
static bool want_none(const struct kvt_record *rec, const struct stat *st, void *data)
{
	(void)rec;
	(void)st;
	(*(guint *)data)++;
	return false;
}

/* -o sync: the stage's bytes synced before the locks, the publication
 * with KVT_PUBLISH_SYNC, then the rest after them. */
static void test_sync(struct kvt_store *s)
{
	struct kvt_dir *names = kvt_store_names(s);
	struct kvt_published pub;
	struct kvt_meta meta = { .mode = 0644 };
	struct kvt_stage *st;
	char buf[8192];
	guint asked;
	bool good;

	memset(buf, 's', sizeof(buf));
	good = kvt_stage_new(s, &st) == 0 && kvt_stage_write(st, buf, 4096, 0) == 0 &&
	       !kvt_stage_durable(st) && kvt_stage_sync(st) == 0 && kvt_stage_durable(st);
	ok(good, "sync: a stage synced is durable");
	good = kvt_stage_write(st, buf + 4096, 4096, 4096) == 0 && !kvt_stage_durable(st);
	ok(good, "sync: a write after the sync makes it not durable again");
	good = kvt_store_publish(s, st, names, "synced", &meta, NULL, KVT_PUBLISH_SYNC, &pub) == 0 &&
	       kvt_store_sync_published(s, names, "synced", &pub.rec) == 0 &&
	       name_reads(s, "synced", buf, sizeof(buf));
	ok(good, "sync: published with KVT_PUBLISH_SYNC (its late write synced in the "
	   "transaction), then synced, it reads back");
	kvt_published_clear(&pub);
	kvt_stage_unref(st);
	good = publish_buf(s, names, "synced-dup", buf, sizeof(buf), KVT_PUBLISH_SYNC, &pub,
			   NULL) == 0 && pub.dedup &&
	       kvt_store_sync_published(s, names, "synced-dup", &pub.rec) == 0 &&
	       name_reads(s, "synced-dup", buf, sizeof(buf));
	ok(good, "sync: the same bytes again (dedup) with KVT_PUBLISH_SYNC");
	kvt_published_clear(&pub);
	ok(kvt_store_sync_published(s, names, "gone-meanwhile", &(struct kvt_record){ 0 }) == 0,
	   "sync: a name gone before its sync is no error");
	ok(kvt_store_sync_dir(s, names, NULL, NULL) == 0, "sync: a directory's names made durable");
	asked = 0;
	ok(kvt_store_sync_dir(s, names, want_none, &asked) == 0 && asked >= 2,
	   "sync: a directory's names offered to the caller's choice, none wanted: no error");
}

/* The publication in parts (publish.h): prepared before a caller's
 * locks, installed under them, finished or undone after. */
static void test_parts(struct kvt_store *s)
{
	struct kvt_dir *names = kvt_store_names(s);
	const size_t len = 256 * 1024;
	g_autofree char *a = pattern(len, 7), *b = pattern(len, 8);
	g_autofree char *stage_rel = g_strdup_printf("staging/%s", s->mount_id);
	struct kvt_meta meta = { .mode = 0640, .uid = getuid(), .gid = getgid() };
	struct kvt_publication pr, again;
	struct kvt_published out;
	g_autoptr(GHashTable) xattrs = kvt_xattrs_new();
	struct kvt_stage *st;
	int objects = count_objects(top), staged;
	ino_t made_ino;

	g_hash_table_insert(xattrs, g_strdup("user.k"), g_bytes_new("v", 1));
	ok(kvt_stage_new(s, &st) == 0 && kvt_stage_write(st, a, len, 0) == 0 &&
	   kvt_publication_prepare(s, st, &meta, xattrs, 0, &pr) == 0,
	   "parts: a version prepared (its object and its record made)");
	staged = count_in(top, stage_rel);
	ok(count_objects(top) == objects + 1 && staged == 4 && kvt_stage_state(st) == KVT_STAGE_SEALED,
	   "the object's reference is made, the record is staged, the version sealed");
	ok(kvt_publication_prepare(s, st, &meta, NULL, 0, &again) == 1,
	   "a second preparation of it has nothing to do (1)");
	{
		struct kvt_meta m2 = meta;
		g_autoptr(GHashTable) x2 = kvt_xattrs_dup(xattrs);

		m2.mode = 0600;
		ok(kvt_publication_matches(&pr, &meta, xattrs) &&
		   !kvt_publication_matches(&pr, &m2, xattrs) &&
		   !kvt_publication_matches(&pr, &meta, NULL),
		   "it matches its metadata and xattrs, not a chmod's nor a removed xattr's");
		g_hash_table_insert(x2, g_strdup("user.k"), g_bytes_new("w", 1));
		ok(!kvt_publication_matches(&pr, &meta, x2), "nor an xattr's new value");
	}
	kvt_publication_abort(s, &pr);
	/* The record file is the stage's from its creation (its number is
	 * the file's): it goes back to the stage, and goes with it. */
	ok(count_objects(top) == objects && count_in(top, stage_rel) == 4 && st->record &&
	   kvt_stage_state(st) == KVT_STAGE_OPEN,
	   "undone: no object, the record file the stage's again, the version open again");
	made_ino = st->record_st.st_ino;

	ok(kvt_publication_prepare(s, st, &meta, xattrs, 0, &pr) == 0 &&
	   kvt_publication_install(s, &pr, names, "parts", &out) == 0 &&
	   kvt_stage_state(st) == KVT_STAGE_PUBLISHED && name_reads(s, "parts", a, len),
	   "prepared again and installed: the name reads back");
	{
		ino_t rec_ino = out.rec_ino;
		g_autofree char *path = g_build_filename(top, "names", "parts", NULL);
		struct stat rst;

		kvt_publication_finish(s, &pr, names, "parts", &out, false);
		ok(count_in(top, stage_rel) == 2 && count_objects(top) == objects + 2 && !pr.st,
		   "finished: the staged file and record names gone, the object anchored");
		ok(rec_ino == made_ino && !st->record, "the record installed is the file the stage made");
		ok(rec_ino && stat(path, &rst) == 0 && rst.st_ino == rec_ino &&
		   out.rec_st.st_ino == rec_ino && out.rec_st.st_ctim.tv_sec == rst.st_ctim.tv_sec &&
		   out.rec_st.st_ctim.tv_nsec == rst.st_ctim.tv_nsec,
		   "the install says the record's number, the finish what the name shows of it");
	}
	{
		struct kvt_record rec;

		ok(kvt_name_read(names, "parts", &rec, NULL) == 0 && rec.xattrs &&
		   g_hash_table_contains(rec.xattrs, "user.k"), "the record holds the xattrs");
		kvt_record_clear(&rec);
	}
	kvt_stage_unref(st);
	kvt_published_clear(&out);

	/* Where rename flags are refused (GlusterFS, NFS), a link makes the
	 * name, and the staged name of the record goes after the locks. */
	s->no_noreplace = true;
	ok(kvt_stage_new(s, &st) == 0 && kvt_stage_write(st, b, len, 0) == 0 &&
	   kvt_publication_prepare(s, st, &meta, NULL, 0, &pr) == 0 &&
	   kvt_publication_install(s, &pr, names, "linked", &out) == 0 && pr.record_left &&
	   count_in(top, stage_rel) == 4 && name_reads(s, "linked", b, len),
	   "no RENAME_NOREPLACE: a link makes the name, the record's staged name stays meanwhile");
	kvt_publication_finish(s, &pr, names, "linked", &out, false);
	ok(count_in(top, stage_rel) == 2 && out.rec_st.st_ino && out.rec_st.st_nlink == 1,
	   "and goes at the finish: the record has one link, at the name");
	s->no_noreplace = false;
	kvt_stage_unref(st);
	kvt_published_clear(&out);

	/* Install fails (a directory has the name): the name is untouched and
	 * the preparation stays, for the caller to undo. */
	ok(kvt_dir_mkdir(names, "pdir", 0755) == 0 && kvt_stage_new(s, &st) == 0 &&
	   kvt_stage_write(st, b, len, 0) == 0 &&
	   kvt_publication_prepare(s, st, &meta, NULL, 0, &pr) == 0 &&
	   kvt_publication_install(s, &pr, names, "pdir", &out) == -EISDIR && pr.st &&
	   pr.record, "an install over a directory fails (EISDIR), the preparation kept");
	kvt_publication_abort(s, &pr);
	ok(count_objects(top) == objects + 4 && count_in(top, stage_rel) == 4 && st->record &&
	   kvt_stage_state(st) == KVT_STAGE_OPEN,
	   "undone: nothing left but the open version (its bytes and its record file)");
	kvt_stage_unref(st);
	ok(count_in(top, stage_rel) == 2, "the version's end removes both");
}

int main(void)
{
	g_autofree char *dir = g_dir_make_tmp("kvt-publish-XXXXXX", NULL);
	g_autoptr(GError) err = NULL;
	struct kvt_store *s;

	printf("1..63\n");
	top = dir;
	s = kvt_store_open(top, &err);
	ok(s != NULL, "a store is created");
	if (!s)
		return 1;
	test_stage(s);
	test_publish(s);
	test_parts(s);
	test_sync(s);
	kvt_store_close(s);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", top);

		ok(system(cmd) == 0, "cleanup");
	}
	return n_fail ? 1 : 0;
}
