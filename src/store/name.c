/* Name records under names/ (name.h). */
#include "name.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "evictor.h"
#include "fault.h"
#include "hold.h"
#include "io.h"
#include "log.h"
#include "object.h"
#include "store.h"
#include "store-int.h"

static int read_record_fd(int fd, const char *name, const struct stat *st,
			  struct kvt_record *rec)
{
	g_autofree char *buf = NULL;
	ssize_t n;

	if (st->st_size > KVT_RECORD_MAX)
		return -EBADMSG;
	n = kvt_fault(KVT_FAULT_READ, name);
	if (n < 0)
		return n;
	buf = g_malloc(st->st_size + 1);
	n = kvt_pread_full(fd, buf, st->st_size, 0);
	if (n < 0)
		return n;
	return kvt_record_parse(buf, n, rec);
}

int kvt_name_read(struct kvt_dir *d, const char *name, struct kvt_record *rec,
		  struct stat *st)
{
	struct stat own;
	/* A lookup is no use of the name: the record's atime, which a load
	 * sets (evictor.h), stays as it is. */
	kvt_autofd fd = kvt_dir_open_file(d, name, O_RDONLY | O_NOATIME, 0, st ? st : &own);

	if (fd == -EPERM) /* not ours and no CAP_FOWNER */
		fd = kvt_dir_open_file(d, name, O_RDONLY, 0, st ? st : &own);
	kvt_record_init(rec);
	if (fd < 0)
		return fd;
	return read_record_fd(fd, name, st ? st : &own, rec);
}

/* kvt_name_read of the record held at @held (kvt_dir_hold), whose
 * metadata @st has; by its name if it cannot be opened from there. */
static int name_read_held(struct kvt_dir *d, const char *name, int held,
			  struct kvt_record *rec, struct stat *st)
{
	kvt_autofd fd = S_ISREG(st->st_mode) ?
				kvt_file_reopen(held, O_RDONLY | O_NONBLOCK | O_NOATIME) : -1;
	int ret;

	if (fd == -EPERM && S_ISREG(st->st_mode))
		fd = kvt_file_reopen(held, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return kvt_name_read(d, name, rec, st);
	kvt_record_init(rec);
	ret = kvt_fault(KVT_FAULT_OPEN, name); /* as kvt_name_read's open */
	return ret < 0 ? ret : read_record_fd(fd, name, st, rec);
}

/* The object of @rec, as kvt_object_stat; a record of another kind has
 * none, and its size is the record's. */
static int stat_object(struct kvt_store *s, const struct kvt_record *rec, struct stat *ost)
{
	if (rec->kind == KVT_KIND_FILE)
		return kvt_object_stat(s, rec, ost);
	memset(ost, 0, sizeof(*ost));
	ost->st_size = (off_t)rec->size;
	return 0;
}

static bool same_record(const struct kvt_record *a, const struct kvt_record *b)
{
	return a->kind == b->kind && !strcmp(a->ref, b->ref);
}

/* A record is read again this often, each time because another mount
 * replaced the one before between its read and its object's stat: then
 * the lookup gives up (EIO), never answering that the name is not there. */
#define LOOKUP_TRIES 64

int kvt_name_lookup(struct kvt_store *s, struct kvt_dir *d, const char *name, bool known,
		    int held, struct kvt_record *rec, struct stat *st, struct stat *ost,
		    bool *fresh)
{
	*fresh = false;
	for (int attempt = 0; attempt < LOOKUP_TRIES; attempt++) {
		struct kvt_record now;
		struct stat nst;
		int ret;

		if (!known) {
			kvt_record_clear(rec);
			ret = held >= 0 && attempt == 0 ? name_read_held(d, name, held, rec, st)
							: kvt_name_read(d, name, rec, st);
			if (ret < 0)
				return ret;
			*fresh = known = true;
		}
		ret = stat_object(s, rec, ost);
		if (ret != -ENOENT && ret != -EBADMSG)
			return ret;
		/* Its reference went, and a reference goes only after its
		 * record left the name: another mount replaced it (and
		 * released the object) after we read it.  Torn only if the
		 * record is still there. */
		ret = kvt_name_read(d, name, &now, &nst);
		if (ret == 0 && same_record(&now, rec))
			ret = KVT_LOOKUP_MISSING;
		if (ret != 0) {
			kvt_record_clear(&now);
			return ret;
		}
		kvt_record_clear(rec);
		*rec = now;
		*st = nst;
		*fresh = true;
	}
	return -EIO;
}

int kvt_name_peek(struct kvt_dir *d, const char *name, struct kvt_record *rec)
{
	struct stat st;
	kvt_autofd fd = kvt_dir_open_file(d, name, O_RDONLY | O_NOATIME, 0, &st);

	/* Not ours and no CAP_FOWNER: read all the same. */
	if (fd == -EPERM)
		fd = kvt_dir_open_file(d, name, O_RDONLY, 0, &st);
	kvt_record_init(rec);
	if (fd < 0)
		return fd;
	return read_record_fd(fd, name, &st, rec);
}

void kvt_meta_apply(const struct kvt_meta *meta, struct kvt_record *r)
{
	r->has_meta = true;
	r->uid = meta->uid;
	r->gid = meta->gid;
	r->mode = meta->mode & 07777;
}

/* @rec with @meta, encoded. */
static GString *encode_with(const struct kvt_record *rec, const struct kvt_meta *meta)
{
	struct kvt_record shown = *rec; /* shallow: read only */

	kvt_meta_apply(meta, &shown);
	return kvt_record_encode(&shown);
}

/* Writes the record @body with @meta's times into the staged file @fd
 * (@name).  The file stays root's and 0600, as made: the name's owner
 * and mode are in @body. */
static int fill_record(int fd, const char *name, const GString *body,
		       const struct kvt_meta *meta, bool sync)
{
	struct timespec ts[2] = { meta->atime, meta->mtime };
	int ret;

	ret = kvt_fault(KVT_FAULT_WRITE, name);
	if (ret == 0 && pwrite(fd, body->str, body->len, 0) != (ssize_t)body->len)
		ret = errno ? -errno : -ENOSPC;
	if (ret == 0 && meta->set_times)
		ret = kvt_file_setattr(fd, name, KVT_SET_TIMES, 0, 0, 0, ts);
	if (ret == 0 && sync)
		/* Written, and allocated in the journal's running transaction,
		 * before the rename that follows: a journaling file system
		 * commits them first.  No commit is waited for here, under
		 * the caller's locks; kvt_store_sync_published makes it
		 * durable. */
		ret = kvt_file_write_out(fd, name);
	else if (ret == 0 && !sync)
		/* Not durable, but on its way: written back now, the record's
		 * bytes reach the disk before its rename does on a journaling
		 * file system in ordered mode (ext4's default), and a power cut
		 * leaves the name with its record, not with an empty file (a
		 * block lost whose object is intact).  Best effort. */
		kvt_file_start_writeback(fd);
	return ret;
}

int kvt_name_stage(struct kvt_store *s, const struct kvt_record *rec,
		   const struct kvt_meta *meta, bool sync, char **name_out, ino_t *ino)
{
	g_autoptr(GString) body = encode_with(rec, meta);
	g_autofree char *name = NULL;
	kvt_autofd fd = -1;
	struct stat st;
	int ret;

	for (;;) {
		g_free(name);
		name = kvt_store_stage_name(s, 'n');
		fd = kvt_dir_open_file(s->stage, name, O_WRONLY | O_CREAT | O_EXCL, 0600, &st);
		if (fd != -EEXIST)
			break;
	}
	if (fd < 0)
		return fd;
	ret = fill_record(fd, name, body, meta, sync);
	if (ret < 0) {
		kvt_dir_unlink(s->stage, name);
		return ret;
	}
	*name_out = g_steal_pointer(&name);
	if (ino)
		*ino = st.st_ino;
	return 0;
}

int kvt_name_stage_into(const struct kvt_record *rec, const struct kvt_meta *meta, bool sync,
			int fd, const char *name, struct stat *st, bool *dirty)
{
	g_autoptr(GString) body = encode_with(rec, meta);
	int ret;

	/* What a failed attempt wrote or set goes first. */
	if (*dirty) {
		ret = kvt_file_truncate(fd, name, 0);
		if (ret == 0)
			ret = kvt_file_stat(fd, name, st);
		if (ret < 0)
			return ret;
	}
	*dirty = true;
	ret = fill_record(fd, name, body, meta, sync);
	if (ret == 0)
		*dirty = false;
	return ret;
}

/* Reads and removes the record that a rename brought into staging. */
static void take_staged(struct kvt_store *s, const char *tmp, struct kvt_record *old)
{
	if (kvt_name_read(s->stage, tmp, old, NULL) < 0)
		kvt_record_clear(old);
	kvt_dir_unlink(s->stage, tmp);
}

/* @ret of a rename of the file staged at @tmp: an ESTALE (another mount
 * changed the name as the rename looked at it) is a rename done if
 * @tmp is gone, else one to make again. */
static int renamed_unless_stale(struct kvt_store *s, const char *tmp, int ret)
{
	struct stat st;

	if (ret == -ESTALE && kvt_dir_stat(s->stage, tmp, &st) == -ENOENT)
		return 0;
	return ret;
}

/* Puts the file staged at @tmp at @d/@name if nothing is there (-EEXIST
 * if something is).  On failure @tmp stays. */
static int place_new(struct kvt_store *s, const char *tmp, struct kvt_dir *d, const char *name,
		     bool *tmp_left)
{
	int ret;

	if (tmp_left)
		*tmp_left = false;
	if (!__atomic_load_n(&s->no_noreplace, __ATOMIC_RELAXED)) {
		ret = kvt_dir_rename(s->stage, tmp, d, name, RENAME_NOREPLACE);
		ret = renamed_unless_stale(s, tmp, ret);
		if (ret != -EINVAL)
			return ret;
		__atomic_store_n(&s->no_noreplace, true, __ATOMIC_RELAXED);
	}
	/* No renameat2 flags here (NFS, GlusterFS): a link refuses an
	 * existing name as atomically. */
	ret = kvt_dir_link(s->stage, tmp, d, name);
	if (ret == 0 && tmp_left)
		*tmp_left = true;
	else if (ret == 0)
		kvt_dir_unlink(s->stage, tmp);
	return ret;
}

/* A name for kvt_hold_record's link of a record that a rename replaces,
 * where the lower file system needs one (NFS), or NULL. */
static char *hold_alias(struct kvt_store *s)
{
	return s->silly_renames ? kvt_store_stage_name(s, 'h') : NULL;
}

/* Lets go of a hold of a record that a rename replaced: closes it, then
 * removes its link @alias. */
static void let_go(struct kvt_store *s, int *fd, const char *alias)
{
	if (*fd < 0)
		return;
	close(*fd);
	*fd = -1;
	if (alias)
		kvt_dir_unlink(s->stage, alias);
}

/* Renames the file staged at @tmp over the record at @d/@name, which it
 * returns in @old: held while it goes (hold.h), so that it is exactly
 * the one replaced.  -ENOENT when the name went meanwhile. */
static int replace_held(struct kvt_store *s, const char *tmp, struct kvt_dir *d,
			const char *name, struct kvt_record *old)
{
	g_autofree char *alias = hold_alias(s);
	struct stat st;
	kvt_autofd fd = kvt_hold_record(d, name, alias ? s->stage : NULL, alias, &st);
	int ret;

	/* Something else than a record (planted there) is replaced unheld:
	 * it names no object. */
	if (fd < 0 && fd != -EBADMSG)
		return fd;
	if (fd >= 0 && read_record_fd(fd, name, &st, old) < 0)
		kvt_record_clear(old);
	ret = renamed_unless_stale(s, tmp, kvt_dir_rename(s->stage, tmp, d, name, 0));
	let_go(s, &fd, alias);
	if (ret < 0)
		kvt_record_clear(old);
	return ret;
}

static bool no_exchange(struct kvt_store *s)
{
	return __atomic_load_n(&s->no_exchange, __ATOMIC_RELAXED);
}

int kvt_name_place(struct kvt_store *s, const char *tmp, struct kvt_dir *d,
		   const char *name, struct kvt_record *old, bool *tmp_left)
{
	struct stat st;
	int ret;

	kvt_record_init(old);
	for (int attempt = 0; attempt < 16; attempt++) {
		ret = place_new(s, tmp, d, name, tmp_left);
		if (ret == -ESTALE)
			continue; /* the name changed as we looked: again */
		if (ret != -EEXIST)
			return ret;
		if (kvt_dir_stat(d, name, &st) == 0 && S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!no_exchange(s)) {
			/* Swap, so that exactly the record we replaced lands
			 * in our staging, even if another mount replaced it a
			 * moment ago. */
			ret = kvt_dir_rename(s->stage, tmp, d, name, RENAME_EXCHANGE);
			if (ret == 0) {
				take_staged(s, tmp, old);
				return 0;
			}
			if (ret == -EINVAL)
				__atomic_store_n(&s->no_exchange, true, __ATOMIC_RELAXED);
			else if (ret != -ENOENT)
				return ret;
		}
		if (no_exchange(s)) {
			ret = replace_held(s, tmp, d, name, old);
			if (ret != -ENOENT && ret != -ESTALE)
				return ret;
		}
	}
	/* ESTALE each time: maybe the directory went (the caller makes
	 * it again). */
	return ret == -ESTALE ? ret : -EAGAIN;
}

/* Renames the record at @d/@name to @tname in our staging: the one atomic
 * step that removes a name and tells exactly which record was there;
 * held meanwhile where names change under holds (hold.h). */
static int take_record(struct kvt_store *s, struct kvt_dir *d, const char *name,
		       const char *tname)
{
	struct stat st;
	kvt_autofd fd = -1;

	if (no_exchange(s)) {
		fd = kvt_hold_record(d, name, NULL, NULL, &st);
		/* Something else than a record (planted there) goes unheld:
		 * no mount replaces it. */
		if (fd < 0 && fd != -EBADMSG)
			return fd;
	}
	return kvt_dir_rename(d, name, s->stage, tname, 0);
}

int kvt_name_create(struct kvt_store *s, struct kvt_dir *d, const char *name,
		    const struct kvt_record *rec, const struct kvt_meta *meta)
{
	g_autofree char *tmp = NULL;
	int ret = kvt_name_stage(s, rec, meta, false, &tmp, NULL);

	if (ret == 0)
		ret = place_new(s, tmp, d, name, NULL);
	if (ret < 0 && tmp)
		kvt_dir_unlink(s->stage, tmp);
	return ret;
}

/* The record staged at @tmp goes, with its object: a version that another
 * mount's newer one replaced. */
static void drop_staged(struct kvt_store *s, const char *tmp)
{
	struct kvt_record gone;

	take_staged(s, tmp, &gone);
	if (gone.ref[0])
		kvt_object_release(s, &gone);
	kvt_record_clear(&gone);
}

/* kvt_name_rewrite where names change under holds: the name keeps a
 * record throughout. */
static int rewrite_held(struct kvt_store *s, const char *tmp, const struct stat *tmp_st,
			struct kvt_dir *d, const char *name, const struct kvt_record *rec,
			struct stat *rec_st)
{
	g_autofree char *alias = hold_alias(s);
	struct kvt_record was;
	struct stat st;
	kvt_autofd fd = kvt_hold_record(d, name, alias ? s->stage : NULL, alias, &st);
	bool ours;
	int ret = fd < 0 ? fd : 0;

	kvt_record_init(&was);
	ours = ret == 0 && read_record_fd(fd, name, &st, &was) == 0 && !strcmp(was.ref, rec->ref);
	kvt_record_clear(&was);
	if (ret == 0 && ours)
		ret = kvt_dir_rename(s->stage, tmp, d, name, 0);
	let_go(s, &fd, alias);
	if (ret < 0 || !ours) {
		kvt_dir_unlink(s->stage, tmp);
		/* Gone, or another mount's version now: not ours to change. */
		return ret == -ENOENT || ret == -EBADMSG || (ret == 0 && !ours) ? -ESTALE : ret;
	}
	if (kvt_dir_stat(d, name, rec_st) < 0 || rec_st->st_ino != tmp_st->st_ino)
		memset(rec_st, 0, sizeof(*rec_st));
	return 0;
}

int kvt_name_rewrite(struct kvt_store *s, struct kvt_dir *d, const char *name,
		     const struct kvt_record *rec, const struct kvt_meta *meta,
		     struct stat *rec_st)
{
	g_autofree char *tmp = NULL;
	g_autofree char *taken = kvt_store_stage_name(s, 'w');
	struct kvt_record was;
	struct stat st;
	bool ours;
	int ret;

	memset(rec_st, 0, sizeof(*rec_st));
	ret = kvt_name_stage(s, rec, meta, false, &tmp, &st.st_ino);
	if (ret < 0)
		return ret;
	if (no_exchange(s))
		return rewrite_held(s, tmp, &st, d, name, rec, rec_st);
	/* Taking the record off the name is the one atomic step that tells
	 * exactly which version is there. */
	ret = kvt_dir_rename(d, name, s->stage, taken, 0);
	if (ret < 0) {
		kvt_dir_unlink(s->stage, tmp);
		return ret == -ENOENT ? -ESTALE : ret;
	}
	ours = kvt_name_read(s->stage, taken, &was, NULL) == 0 && !strcmp(was.ref, rec->ref);
	kvt_record_clear(&was);
	if (!ours) {
		/* Another mount's version: back it goes, unless a newer one
		 * took the name meanwhile. */
		kvt_dir_unlink(s->stage, tmp);
		if (place_new(s, taken, d, name, NULL) < 0)
			drop_staged(s, taken);
		return -ESTALE;
	}
	ret = place_new(s, tmp, d, name, NULL);
	if (ret == 0) {
		kvt_dir_unlink(s->stage, taken);
		if (kvt_dir_stat(d, name, rec_st) < 0 || rec_st->st_ino != st.st_ino)
			memset(rec_st, 0, sizeof(*rec_st));
		return 0;
	}
	kvt_dir_unlink(s->stage, tmp);
	if (ret == -EEXIST) {
		/* A publication took the name in between: it replaced this
		 * version, whose object goes. */
		drop_staged(s, taken);
		return 0;
	}
	/* The old record back, unless a publication took the name. */
	if (place_new(s, taken, d, name, NULL) < 0)
		drop_staged(s, taken);
	return ret;
}

int kvt_name_take(struct kvt_store *s, struct kvt_dir *d, const char *name,
		  struct kvt_record *old)
{
	g_autofree char *tmp = kvt_store_stage_name(s, 'x');
	int ret;

	kvt_record_init(old);
	/* Moving the record into our staging is the one atomic step that
	 * removes the name; what it pointed at is then ours. */
	ret = take_record(s, d, name, tmp);
	if (ret == 0)
		take_staged(s, tmp, old);
	return ret;
}

char *kvt_name_path(struct kvt_store *s, struct kvt_dir *d, const char *name)
{
	g_autofree char *dir = kvt_dir_path_below(d, kvt_store_names(s));

	if (!dir)
		return g_strdup_printf("(moved)/%s", name);
	return dir[0] ? g_strdup_printf("%s/%s", dir, name) : g_strdup(name);
}

int kvt_name_remove(struct kvt_store *s, struct kvt_dir *d, const char *name)
{
	struct kvt_record old;
	int ret = kvt_name_take(s, d, name, &old);

	if (ret == 0 && kvt_log_debug_on()) {
		g_autofree char *path = kvt_name_path(s, d, name);

		g_debug("removed %s", path);
	}

	if (ret == 0 && old.ref[0])
		kvt_object_release(s, &old);
	kvt_record_clear(&old);
	return ret;
}

static int rename_marked(struct kvt_store *s, struct kvt_dir *from, const char *fname,
			 struct kvt_dir *to, const char *tname, unsigned int flags,
			 struct kvt_record *replaced)
{
	g_autofree char *tmp = NULL;
	struct stat sst, dst;
	int ret;

	ret = kvt_dir_stat(from, fname, &sst);
	if (ret < 0)
		return ret;
	/* Directories, and swaps, are the lower rename's own business: it
	 * answers ENOTEMPTY, EISDIR, ENOTDIR as rename(2) does. */
	if (S_ISDIR(sst.st_mode) || (flags & RENAME_EXCHANGE))
		return kvt_dir_rename(from, fname, to, tname, flags);
	ret = kvt_dir_stat(to, tname, &dst);
	if (ret == 0 && dst.st_ino == sst.st_ino && dst.st_dev == sst.st_dev)
		return 0; /* the same file: nothing to do */
	if (ret == 0 && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (ret == 0 && S_ISDIR(dst.st_mode))
		return -EISDIR;
	if (ret < 0 && ret != -ENOENT)
		return ret;
	if (flags & RENAME_NOREPLACE) {
		ret = kvt_dir_rename(from, fname, to, tname, RENAME_NOREPLACE);
		if (ret != -EINVAL)
			return ret;
		/* No renameat2 flags here (NFS): best effort. */
		return kvt_dir_stat(to, tname, &dst) == 0 ? -EEXIST
							 : kvt_dir_rename(from, fname, to, tname, 0);
	}
	/* The source record into our staging first: then exactly it moves,
	 * whatever another mount publishes at the source name meanwhile, and
	 * a crash in between loses the name (a miss) instead of leaving the
	 * destination's old record at the source name. */
	tmp = kvt_store_stage_name(s, 'r');
	ret = take_record(s, from, fname, tmp);
	if (ret < 0)
		return ret;
	ret = kvt_name_place(s, tmp, to, tname, replaced, NULL);
	/* Failed: back to its name, unless another mount published a newer
	 * version there meanwhile, which replaced it. */
	if (ret < 0 && place_new(s, tmp, from, fname, NULL) < 0)
		drop_staged(s, tmp);
	return ret;
}

int kvt_name_rename(struct kvt_store *s, struct kvt_dir *from, const char *fname,
		    struct kvt_dir *to, const char *tname, unsigned int flags,
		    struct kvt_record *replaced)
{
	char *marker = NULL;
	int ret;

	kvt_record_init(replaced);
	/* A record, or a directory of them, moves: marked while it does. */
	ret = kvt_store_move_begin(s, &marker);
	if (ret < 0)
		return ret;
	ret = rename_marked(s, from, fname, to, tname, flags, replaced);
	kvt_store_move_end(s, marker);
	if (ret == 0 && s->evictor) {
		struct stat st;

		/* The block keeps its record file, and so its place. */
		if (kvt_dir_stat(to, tname, &st) == 0 && S_ISREG(st.st_mode))
			kvt_evictor_moved(s, st.st_ino, to, tname);
	}
	if (ret == 0 && kvt_log_debug_on()) {
		g_autofree char *src = kvt_name_path(s, from, fname);
		g_autofree char *dst = kvt_name_path(s, to, tname);

		g_debug("renamed %s to %s", src, dst);
	}
	return ret;
}

/* The record to go is @rec's, or with @rec NULL an unparsable one; one
 * that parses and is not @rec's is another mount's newer version. */
static bool other_version(const struct kvt_record *now, bool parsed,
			  const struct kvt_record *rec)
{
	return parsed && (!rec || strcmp(now->ref, rec->ref));
}

/* kvt_name_purge's removal of the name where names change under holds:
 * the record is read under the hold, and another mount's version stays
 * where it is.  1 when it removed the name. */
static int purge_held(struct kvt_store *s, struct kvt_dir *d, const char *name,
		      const struct kvt_record *rec)
{
	g_autofree char *tmp = kvt_store_stage_name(s, 'p');
	struct kvt_record now;
	struct stat st;
	kvt_autofd fd = kvt_hold_record(d, name, NULL, NULL, &st);
	bool other;
	int ret;

	kvt_record_init(&now);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0 && fd != -EBADMSG)
		return fd;
	other = fd >= 0 && other_version(&now, read_record_fd(fd, name, &st, &now) == 0, rec);
	kvt_record_clear(&now);
	if (other)
		return 0;
	ret = kvt_dir_rename(d, name, s->stage, tmp, 0);
	if (ret == 0)
		kvt_dir_unlink(s->stage, tmp);
	return ret == -ENOENT ? 0 : ret < 0 ? ret : 1;
}

/* kvt_name_purge's removal of the name: taking the record into our
 * staging is the atomic step; another mount's version, put there
 * meanwhile, goes back, a move (marked for reclamation, reclaim.c).  1
 * when it removed the name. */
static int purge_taken(struct kvt_store *s, struct kvt_dir *d, const char *name,
		       const struct kvt_record *rec)
{
	g_autofree char *tmp = kvt_store_stage_name(s, 'p');
	struct kvt_record now;
	char *marker = NULL;
	bool other;
	int ret;

	ret = kvt_store_move_begin(s, &marker);
	if (ret == 0)
		ret = kvt_dir_rename(d, name, s->stage, tmp, 0);
	if (ret == 0) {
		other = other_version(&now, kvt_name_read(s->stage, tmp, &now, NULL) == 0, rec);
		if (!other || place_new(s, tmp, d, name, NULL) < 0) {
			if (other && now.ref[0]) /* superseded again meanwhile */
				kvt_object_release(s, &now);
			kvt_dir_unlink(s->stage, tmp);
		}
		kvt_record_clear(&now);
		ret = !other;
	}
	kvt_store_move_end(s, marker);
	return ret == -ENOENT ? 0 : ret;
}

int kvt_name_purge(struct kvt_store *s, struct kvt_dir *d, const char *name,
		   const struct kvt_record *rec, bool unless_intact)
{
	int removed = 0, ret = 0, obj;

	if (name) {
		ret = no_exchange(s) ? purge_held(s, d, name, rec) : purge_taken(s, d, name, rec);
		if (ret > 0) {
			removed = 1;
			ret = 0;
		}
	}
	if (!rec)
		return ret < 0 ? ret : removed;
	obj = kvt_object_purge(s, rec, unless_intact);
	if (obj < 0 && !ret)
		ret = obj;
	if (obj > 0)
		removed = 1;
	return ret < 0 ? ret : removed;
}
