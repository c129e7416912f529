/* Checks, and on request repairs, a store that no mount is using.
 *
 * One problem is one path on LOWERDIR, and its repair is one atomic
 * removal of that path (unlink; a dead staging directory is emptied, then
 * removed).  Nothing is ever rewritten, so a repair interrupted at any
 * point leaves a store that is as correct as before, and a second run
 * finishes the job.
 *
 * After the top of LOWERDIR (unknown entries), the walk takes four passes:
 *   1. objects/: hash every object inode once (all links of an object are
 *      in one fan-out directory, so the inode table lives per directory),
 *      compare with the hash in each link's name: torn-hash.  The torn
 *      links are remembered (few) for pass 2.
 *   2. names/: parse every record and stat its reference: dangling,
 *      torn-size, torn-hash (its reference is torn), unparsable.  The
 *      references of the records that stay go into one string table: the
 *      only structure that grows with the store (about 100 bytes a name).
 *   3. objects/ again, stat only: references no staying record uses and
 *      anchors whose inode has no used reference are orphans.  Skipped when
 *      pass 2 could not read every record: an unread record's object would
 *      look orphaned.
 *   4. staging/: every directory is a dead mount's (a live one made the
 *      check refuse to start).
 * A record whose object is torn or gone is removed: a name either reads
 * back exactly its bytes or does not exist. */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "record.h"
#include "store.h"

#define LOCK_NAME "lock"

G_DEFINE_QUARK(kvt-check-error-quark, kvt_check_error)

static const char *const problem_names[] = {
	[KVT_TORN_HASH] = "torn-hash",
	[KVT_TORN_SIZE] = "torn-size",
	[KVT_DANGLING] = "dangling",
	[KVT_UNPARSABLE] = "unparsable",
	[KVT_ORPHAN] = "orphan",
	[KVT_SHARED_REF] = "shared-ref",
	[KVT_STALE_STAGING] = "stale-staging",
	[KVT_UNKNOWN] = "unknown",
};

const char *kvt_problem_name(enum kvt_problem kind)
{
	if ((size_t)kind >= G_N_ELEMENTS(problem_names))
		return "?";
	return problem_names[kind];
}

/* What pass 1 found in a torn object link, for the records using it. */
struct torn {
	guint64 size;
	kvt_hash found;
};

struct ctx {
	const struct kvt_check_opts *o;
	struct kvt_check_result *res;
	const char *lowerdir;
	int lowerfd, objfd, namesfd, stagesfd;
	GHashTable *torn;     /* "<ab>/<name>" -> struct torn */
	GHashTable *refs;     /* set of "<ab>/<hash>.<ref>" that staying records use */
	GStringChunk *keys;   /* the keys of refs, without a malloc each */
	bool names_complete;  /* every record under names/ was read */
};

struct entry {
	unsigned char type; /* DT_* */
	char name[];
};

static void walk_error(struct ctx *c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void walk_error(struct ctx *c, const char *fmt, ...)
{
	g_autofree char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	c->res->errors++;
	if (c->o->error)
		c->o->error(msg, c->o->data);
}

static void problem(struct ctx *c, enum kvt_problem kind, const char *path,
		    bool repairable, int repair, const char *fmt, ...) G_GNUC_PRINTF(6, 7);

static void problem(struct ctx *c, enum kvt_problem kind, const char *path,
		    bool repairable, int repair, const char *fmt, ...)
{
	g_autofree char *detail = NULL;
	struct kvt_problem_report p = {
		.kind = kind, .path = path, .repairable = repairable, .repair = repair,
	};
	va_list ap;

	va_start(ap, fmt);
	detail = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	p.detail = detail;
	c->res->problems++;
	if (repair > 0)
		c->res->repaired++;
	if (c->o->problem)
		c->o->problem(&p, c->o->data);
}

/* The one lower step that repairs a problem, when repairing: 1 done,
 * 0 not asked for, -errno failed.  Gone already counts as done. */
static int remove_at(struct ctx *c, int dirfd, const char *name)
{
	if (!c->o->repair)
		return 0;
	if (unlinkat(dirfd, name, 0) && errno != ENOENT)
		return -errno;
	return 1;
}

static const char *type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return "a directory";
	case S_IFLNK: return "a symbolic link";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFREG: return "a regular file";
	default: return "of unknown type";
	}
}

static int entry_cmp(gconstpointer a, gconstpointer b)
{
	const struct entry *x = *(struct entry *const *)a;
	const struct entry *y = *(struct entry *const *)b;

	return strcmp(x->name, y->name);
}

/* The entries of @dirfd/@rel, sorted by name so that reports come in a
 * stable order; -errno and NULL on failure. */
static GPtrArray *read_dir(int dirfd, const char *rel, int *ret)
{
	int fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	GPtrArray *out;
	struct dirent *de;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		*ret = -errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	out = g_ptr_array_new_with_free_func(g_free);
	for (;;) {
		struct entry *e;
		size_t len;

		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		len = strlen(de->d_name);
		e = g_malloc(sizeof(*e) + len + 1);
		e->type = de->d_type;
		memcpy(e->name, de->d_name, len + 1);
		g_ptr_array_add(out, e);
	}
	*ret = -errno;
	closedir(d);
	if (*ret) {
		g_ptr_array_unref(out);
		return NULL;
	}
	g_ptr_array_sort(out, entry_cmp);
	return out;
}

/* read_dir, with a walk error about @shown on failure. */
static GPtrArray *list_dir(struct ctx *c, int dirfd, const char *rel, const char *shown)
{
	int ret;
	GPtrArray *out = read_dir(dirfd, rel, &ret);

	if (!out)
		walk_error(c, "%s: cannot read: %s", shown, g_strerror(-ret));
	return out;
}

/* ------------------------------------------------------------ store */

static bool open_store(struct ctx *c, GError **err)
{
	static const char *const dirs[] = { "objects", "names", "staging" };
	int *fds[] = { &c->objfd, &c->namesfd, &c->stagesfd };
	char buf[64];
	int fd, version;
	ssize_t n;

	c->lowerfd = open(c->lowerdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->lowerfd < 0) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: %s", c->lowerdir, g_strerror(errno));
		return false;
	}
	fd = openat(c->lowerfd, KVT_MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s is not a kvtierfs store (no %s)",
			    c->lowerdir, KVT_MARKER);
		return false;
	}
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: cannot read %s: %s", c->lowerdir,
			    KVT_MARKER, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	buf[n] = '\0';
	/* The same test as the daemon's: what a mount accepts, fsck checks. */
	if (sscanf(buf, KVT_MARKER " %d", &version) != 1) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: %s is not a kvtierfs store marker",
			    c->lowerdir, KVT_MARKER);
		return false;
	}
	if (version != KVT_FORMAT_VERSION) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: store format %d, kvtierfs-fsck checks format %d",
			    c->lowerdir, version, KVT_FORMAT_VERSION);
		return false;
	}
	for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
		/* Followed if symbolic links, as a mount does. */
		*fds[i] = openat(c->lowerfd, dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (*fds[i] < 0) {
			g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
				    "LOWERDIR %s: damaged store: %s/: %s", c->lowerdir,
				    dirs[i], g_strerror(errno));
			return false;
		}
	}
	return true;
}

/* Whether a live mount holds staging/@name/lock: 1 yes, 0 no, -errno.
 * A mount holds an OFD write lock on it for its lifetime; asking with
 * F_OFD_GETLK takes nothing, so it works on a read-only store too. */
static int stage_is_live(int stagesfd, const char *name)
{
	g_autofree char *lock = g_strdup_printf("%s/" LOCK_NAME, name);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd = openat(stagesfd, lock, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		/* No lock file: a dead mount's, or one dying at birth. */
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	if (fcntl(fd, F_OFD_GETLK, &fl))
		ret = -errno;
	else
		ret = fl.l_type != F_UNLCK;
	close(fd);
	return ret;
}

/* Fails when a mount is using the store. */
static bool check_not_live(struct ctx *c, GError **err)
{
	int ret;
	g_autoptr(GPtrArray) stages = read_dir(c->stagesfd, ".", &ret);

	if (!stages) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: cannot read staging/: %s", c->lowerdir,
			    g_strerror(-ret));
		return false;
	}
	for (guint i = 0; i < stages->len; i++) {
		const struct entry *e = stages->pdata[i];
		int live = stage_is_live(c->stagesfd, e->name);

		if (live > 0) {
			g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_BUSY,
				    "LOWERDIR %s is in use by a mount (staging/%s/"
				    LOCK_NAME " is locked); unmount it first",
				    c->lowerdir, e->name);
			return false;
		}
		if (live < 0) {
			g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
				    "LOWERDIR %s: staging/%s/" LOCK_NAME ": %s",
				    c->lowerdir, e->name, g_strerror(-live));
			return false;
		}
	}
	return true;
}

/* Anything at the top of LOWERDIR that a store does not have. */
static void check_top(struct ctx *c)
{
	static const char *const dirs[] = { "objects", "names", "staging", "lost+found" };
	g_autoptr(GPtrArray) top = list_dir(c, c->lowerfd, ".", "LOWERDIR");

	for (guint i = 0; top && i < top->len; i++) {
		const struct entry *e = top->pdata[i];
		bool known = !strcmp(e->name, KVT_MARKER);

		for (size_t j = 0; !known && j < G_N_ELEMENTS(dirs); j++)
			known = !strcmp(e->name, dirs[j]);
		if (!known)
			problem(c, KVT_UNKNOWN, e->name, false, 0,
				"not part of a kvtierfs store");
	}
}

/* ------------------------------------------------------------ objects */

static bool is_fanout(const char *name)
{
	return strlen(name) == 2 && g_ascii_isxdigit(name[0]) && g_ascii_isxdigit(name[1]) &&
	       !g_ascii_isupper(name[0]) && !g_ascii_isupper(name[1]);
}

/* "<hash>" (anchor) or "<hash>.<ref>" (reference) inside fan-out @dir. */
static bool parse_object_name(const char *dir, const char *name, kvt_hash *h,
			      bool *is_ref)
{
	size_t len = strlen(name);

	if (len < KVT_HASH_HEX_LEN || strncmp(name, dir, 2) ||
	    !kvt_hash_parse(name, KVT_HASH_HEX_LEN, h))
		return false;
	if (len == KVT_HASH_HEX_LEN) {
		*is_ref = false;
		return true;
	}
	*is_ref = true;
	return name[KVT_HASH_HEX_LEN] == '.' && len > KVT_HASH_HEX_LEN + 1 &&
	       len - KVT_HASH_HEX_LEN - 1 < KVT_REF_MAX;
}

enum { HASH_TODO, HASH_DONE, HASH_FAILED };

struct obj_inode {
	guint64 ino; /* key */
	int state;
	guint64 size;
	kvt_hash found;
};

/* Hashes the inode behind @dfd/@name, once for all its links. */
static struct obj_inode *hash_inode(struct ctx *c, GHashTable *inodes, int dfd,
				    const char *name, const char *shown,
				    const struct stat *st)
{
	guint64 ino = st->st_ino;
	struct obj_inode *oi = g_hash_table_lookup(inodes, &ino);
	struct stat fst;
	int fd, ret;

	if (oi)
		return oi;
	oi = g_new0(struct obj_inode, 1);
	oi->ino = ino;
	g_hash_table_insert(inodes, &oi->ino, oi);
	c->res->objects++;
	oi->state = HASH_FAILED;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		walk_error(c, "%s: cannot open: %s", shown, g_strerror(errno));
		return oi;
	}
	if (fstat(fd, &fst)) {
		walk_error(c, "%s: cannot stat: %s", shown, g_strerror(errno));
	} else {
		ret = kvt_hash_fd(fd, fst.st_size, &oi->found);
		if (ret < 0) {
			walk_error(c, "%s: cannot read: %s", shown, g_strerror(-ret));
		} else {
			oi->size = fst.st_size;
			oi->state = HASH_DONE;
		}
	}
	close(fd);
	return oi;
}

static void hash_fanout(struct ctx *c, const char *dir)
{
	g_autofree char *shown = g_strdup_printf("objects/%s", dir);
	g_autoptr(GPtrArray) ents = list_dir(c, c->objfd, dir, shown);
	g_autoptr(GHashTable) inodes = NULL;
	int dfd;

	if (!ents)
		return;
	dfd = openat(c->objfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		walk_error(c, "%s: cannot open: %s", shown, g_strerror(errno));
		return;
	}
	inodes = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	for (guint i = 0; i < ents->len; i++) {
		const struct entry *e = ents->pdata[i];
		g_autofree char *path = g_strdup_printf("objects/%s/%s", dir, e->name);
		char want[KVT_HASH_HEX_LEN + 1], got[KVT_HASH_HEX_LEN + 1];
		struct obj_inode *oi;
		struct torn *t;
		struct stat st;
		kvt_hash h;
		bool is_ref;

		if (!parse_object_name(dir, e->name, &h, &is_ref)) {
			problem(c, KVT_UNKNOWN, path, false, 0, "not an object name");
			continue;
		}
		if (fstatat(dfd, e->name, &st, AT_SYMLINK_NOFOLLOW)) {
			walk_error(c, "%s: cannot stat: %s", path, g_strerror(errno));
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			problem(c, KVT_UNKNOWN, path, false, 0, "%s, not an object",
				type_name(st.st_mode));
			continue;
		}
		oi = hash_inode(c, inodes, dfd, e->name, path, &st);
		if (oi->state != HASH_DONE || kvt_hash_equal(&h, &oi->found))
			continue;
		t = g_new(struct torn, 1);
		t->size = oi->size;
		t->found = oi->found;
		g_hash_table_insert(c->torn, g_strdup_printf("%s/%s", dir, e->name), t);
		kvt_hash_hex(&h, want);
		kvt_hash_hex(&oi->found, got);
		problem(c, KVT_TORN_HASH, path, true, remove_at(c, dfd, e->name),
			"expected xxh3-128:%s, found xxh3-128:%s", want, got);
	}
	close(dfd);
}

static void check_objects(struct ctx *c)
{
	g_autoptr(GPtrArray) top = list_dir(c, c->objfd, ".", "objects");

	for (guint i = 0; top && i < top->len; i++) {
		const struct entry *e = top->pdata[i];
		g_autofree char *path = g_strdup_printf("objects/%s", e->name);
		struct stat st;

		if (fstatat(c->objfd, e->name, &st, AT_SYMLINK_NOFOLLOW)) {
			walk_error(c, "%s: cannot stat: %s", path, g_strerror(errno));
			continue;
		}
		if (!is_fanout(e->name) || !S_ISDIR(st.st_mode)) {
			problem(c, KVT_UNKNOWN, path, false, 0,
				"%s, not an object fan-out directory",
				type_name(st.st_mode));
			continue;
		}
		hash_fanout(c, e->name);
	}
}

/* ------------------------------------------------------------ names */

static void check_record(struct ctx *c, const char *rel)
{
	g_autofree char *path = g_strdup_printf("names/%s", rel);
	g_autofree char *buf = NULL;
	g_autofree char *refp = NULL;
	g_autofree char *objpath = NULL;
	char want[KVT_HASH_HEX_LEN + 1], got[KVT_HASH_HEX_LEN + 1];
	struct kvt_record rec;
	const struct torn *t;
	struct stat st, ost;
	size_t len = 0;
	ssize_t n = 1;
	int fd, ret;

	c->res->names++;
	fd = openat(c->namesfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		walk_error(c, "%s: cannot open: %s", path, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		c->names_complete = false;
		return;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > KVT_RECORD_MAX) {
		close(fd);
		problem(c, KVT_UNPARSABLE, path, true, remove_at(c, c->namesfd, rel),
			"%s of %lld bytes, not a kvtierfs record",
			type_name(st.st_mode), (long long)st.st_size);
		return;
	}
	buf = g_malloc(st.st_size + 1);
	while (len < (size_t)st.st_size &&
	       (n = pread(fd, buf + len, st.st_size - len, len)) > 0)
		len += n;
	close(fd);
	if (n < 0) {
		walk_error(c, "%s: cannot read: %s", path, g_strerror(errno));
		c->names_complete = false;
		return;
	}
	ret = kvt_record_parse(buf, len, &rec);
	if (ret < 0) {
		problem(c, KVT_UNPARSABLE, path, true, remove_at(c, c->namesfd, rel),
			"not a kvtierfs record");
		return;
	}
	refp = kvt_object_ref_path(&rec.hash, rec.ref);
	objpath = g_strdup_printf("objects/%s", refp);
	kvt_hash_hex(&rec.hash, want);

	/* Torn first: pass 1 may already have removed the object. */
	t = g_hash_table_lookup(c->torn, refp);
	if (t && t->size != rec.size) {
		problem(c, KVT_TORN_SIZE, path, true, remove_at(c, c->namesfd, rel),
			"expected %" G_GUINT64_FORMAT " bytes, object %s has %"
			G_GUINT64_FORMAT, rec.size, objpath, t->size);
		goto out;
	}
	if (t) {
		kvt_hash_hex(&t->found, got);
		problem(c, KVT_TORN_HASH, path, true, remove_at(c, c->namesfd, rel),
			"expected xxh3-128:%s, object %s has xxh3-128:%s",
			want, objpath, got);
		goto out;
	}
	if (fstatat(c->objfd, refp, &ost, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT || errno == ENOTDIR) {
			problem(c, KVT_DANGLING, path, true,
				remove_at(c, c->namesfd, rel), "object %s missing", objpath);
			goto out;
		}
		/* Cannot tell: the record stays, and so does its object. */
		walk_error(c, "%s: cannot stat: %s", objpath, g_strerror(errno));
	} else if (!S_ISREG(ost.st_mode)) {
		problem(c, KVT_DANGLING, path, true, remove_at(c, c->namesfd, rel),
			"object %s is %s", objpath, type_name(ost.st_mode));
		goto out;
	} else if ((guint64)ost.st_size != rec.size) {
		problem(c, KVT_TORN_SIZE, path, true, remove_at(c, c->namesfd, rel),
			"expected %" G_GUINT64_FORMAT " bytes, object %s has %lld",
			rec.size, objpath, (long long)ost.st_size);
		goto out;
	}
	/* The record stays.  Each record owns its reference: were one of two
	 * sharers removed, the other would lose its object. */
	if (g_hash_table_contains(c->refs, refp))
		problem(c, KVT_SHARED_REF, path, false, 0,
			"object %s is also the reference of another record", objpath);
	else
		g_hash_table_add(c->refs, g_string_chunk_insert(c->keys, refp));
out:
	kvt_record_clear(&rec);
}

/* @rel: a directory under names/, "" for names/ itself. */
static void check_names_dir(struct ctx *c, const char *rel)
{
	g_autofree char *shown = rel[0] ? g_strdup_printf("names/%s", rel) : g_strdup("names");
	g_autoptr(GPtrArray) ents = list_dir(c, c->namesfd, rel[0] ? rel : ".", shown);

	if (!ents) {
		c->names_complete = false;
		return;
	}
	/* The listing is in memory and the directory closed: one open
	 * directory at a time, however deep the tree. */
	for (guint i = 0; i < ents->len; i++) {
		const struct entry *e = ents->pdata[i];
		g_autofree char *child = rel[0] ? g_strdup_printf("%s/%s", rel, e->name)
						: g_strdup(e->name);
		mode_t type = DTTOIF(e->type);
		struct stat st;

		if (e->type == DT_UNKNOWN) {
			if (fstatat(c->namesfd, child, &st, AT_SYMLINK_NOFOLLOW)) {
				walk_error(c, "names/%s: cannot stat: %s", child,
					   g_strerror(errno));
				c->names_complete = false;
				continue;
			}
			type = st.st_mode & S_IFMT;
		}
		if (S_ISDIR(type)) {
			check_names_dir(c, child);
		} else if (S_ISREG(type)) {
			check_record(c, child);
		} else {
			g_autofree char *path = g_strdup_printf("names/%s", child);

			problem(c, KVT_UNKNOWN, path, false, 0, "%s, not a record",
				type_name(type));
		}
	}
}

/* ------------------------------------------------------------ orphans */

static void orphans_fanout(struct ctx *c, const char *dir)
{
	g_autofree char *shown = g_strdup_printf("objects/%s", dir);
	g_autoptr(GPtrArray) ents = list_dir(c, c->objfd, dir, shown);
	g_autoptr(GHashTable) used = NULL;  /* inodes with a used reference */
	g_autofree guint64 *inos = NULL;
	g_autofree guint8 *kind = NULL;
	enum { SKIP, ANCHOR, REF_USED, REF_UNUSED };
	int dfd;

	if (!ents)
		return;
	dfd = openat(c->objfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		walk_error(c, "%s: cannot open: %s", shown, g_strerror(errno));
		return;
	}
	used = g_hash_table_new(g_int64_hash, g_int64_equal);
	inos = g_new0(guint64, ents->len);
	kind = g_new0(guint8, ents->len);
	for (guint i = 0; i < ents->len; i++) {
		const struct entry *e = ents->pdata[i];
		g_autofree char *key = g_strdup_printf("%s/%s", dir, e->name);
		struct stat st;
		kvt_hash h;
		bool is_ref;

		/* Unknown and torn links were reported by pass 1. */
		if (!parse_object_name(dir, e->name, &h, &is_ref) ||
		    g_hash_table_contains(c->torn, key))
			continue;
		if (fstatat(dfd, e->name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno != ENOENT)
				walk_error(c, "objects/%s: cannot stat: %s", key,
					   g_strerror(errno));
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		inos[i] = st.st_ino;
		if (!is_ref) {
			kind[i] = ANCHOR;
		} else if (g_hash_table_contains(c->refs, key)) {
			kind[i] = REF_USED;
			g_hash_table_add(used, &inos[i]);
		} else {
			kind[i] = REF_UNUSED;
		}
	}
	for (guint i = 0; i < ents->len; i++) {
		const struct entry *e = ents->pdata[i];
		g_autofree char *path = NULL;

		if (kind[i] == REF_UNUSED) {
			path = g_strdup_printf("objects/%s/%s", dir, e->name);
			problem(c, KVT_ORPHAN, path, true, remove_at(c, dfd, e->name),
				"no record uses this reference");
		} else if (kind[i] == ANCHOR && !g_hash_table_contains(used, &inos[i])) {
			path = g_strdup_printf("objects/%s/%s", dir, e->name);
			problem(c, KVT_ORPHAN, path, true, remove_at(c, dfd, e->name),
				"no record uses this anchor's object");
		}
	}
	close(dfd);
}

static void check_orphans(struct ctx *c)
{
	g_autoptr(GPtrArray) top = list_dir(c, c->objfd, ".", "objects");

	for (guint i = 0; top && i < top->len; i++) {
		const struct entry *e = top->pdata[i];
		struct stat st;

		if (is_fanout(e->name) &&
		    !fstatat(c->objfd, e->name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISDIR(st.st_mode))
			orphans_fanout(c, e->name);
	}
}

/* ------------------------------------------------------------ staging */

/* Removes @parentfd/@name and everything under it; -errno of the first
 * failure. */
static int remove_tree(int parentfd, const char *name)
{
	int fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	int ret = 0;
	DIR *d;

	if (fd < 0) {
		if (errno != ENOTDIR && errno != ELOOP)
			return -errno;
		return unlinkat(parentfd, name, 0) ? -errno : 0;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		int r = 0;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
			r = remove_tree(fd, de->d_name);
		else if (unlinkat(fd, de->d_name, 0))
			r = -errno;
		if (r < 0 && r != -ENOENT && !ret)
			ret = r;
	}
	closedir(d);
	if (unlinkat(parentfd, name, AT_REMOVEDIR) && !ret)
		ret = -errno;
	return ret;
}

/* Removes a dead mount's staging directory the way a new mount does: take
 * its lock first, so that a mount that came to life meanwhile keeps it. */
static int remove_stage(struct ctx *c, const char *name)
{
	g_autofree char *lock = g_strdup_printf("%s/" LOCK_NAME, name);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd, ret;

	if (!c->o->repair)
		return 0;
	fd = openat(c->stagesfd, lock, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl)) {
		ret = errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
		close(fd);
		return ret;
	}
	ret = remove_tree(c->stagesfd, name);
	if (fd >= 0)
		close(fd);
	return ret == 0 || ret == -ENOENT ? 1 : ret;
}

static void check_staging(struct ctx *c)
{
	g_autoptr(GPtrArray) ents = list_dir(c, c->stagesfd, ".", "staging");

	for (guint i = 0; ents && i < ents->len; i++) {
		const struct entry *e = ents->pdata[i];
		g_autofree char *path = g_strdup_printf("staging/%s", e->name);
		struct stat st;

		if (fstatat(c->stagesfd, e->name, &st, AT_SYMLINK_NOFOLLOW)) {
			walk_error(c, "%s: cannot stat: %s", path, g_strerror(errno));
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			problem(c, KVT_UNKNOWN, path, false, 0,
				"%s, not a staging directory", type_name(st.st_mode));
			continue;
		}
		if (stage_is_live(c->stagesfd, e->name) > 0) {
			walk_error(c, "%s: a mount started during the check", path);
			continue;
		}
		problem(c, KVT_STALE_STAGING, path, true, remove_stage(c, e->name),
			"left by a mount that is gone");
	}
}

/* ------------------------------------------------------------ entry */

bool kvt_check(const char *lowerdir, const struct kvt_check_opts *opts,
	       struct kvt_check_result *res, GError **err)
{
	struct ctx c = {
		.o = opts, .res = res, .lowerdir = lowerdir,
		.lowerfd = -1, .objfd = -1, .namesfd = -1, .stagesfd = -1,
		.names_complete = true,
	};
	g_autoptr(GError) late = NULL;
	bool ok = false;

	memset(res, 0, sizeof(*res));
	if (!open_store(&c, err) || !check_not_live(&c, err))
		goto out;
	c.torn = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	c.refs = g_hash_table_new(g_str_hash, g_str_equal);
	c.keys = g_string_chunk_new(1 << 20);

	check_top(&c);
	check_objects(&c);
	check_names_dir(&c, "");
	/* An unread record would make its object look orphaned; a mount that
	 * started meanwhile may be publishing objects its records do not yet
	 * name. */
	if (!c.names_complete) {
		walk_error(&c, "not every record could be read: orphans not checked");
	} else if (opts->repair && !check_not_live(&c, &late)) {
		walk_error(&c, "%s: orphans not checked", late->message);
	} else {
		check_orphans(&c);
	}
	check_staging(&c);
	ok = true;
out:
	if (c.torn)
		g_hash_table_unref(c.torn);
	if (c.refs)
		g_hash_table_unref(c.refs);
	if (c.keys)
		g_string_chunk_free(c.keys);
	if (c.stagesfd >= 0)
		close(c.stagesfd);
	if (c.namesfd >= 0)
		close(c.namesfd);
	if (c.objfd >= 0)
		close(c.objfd);
	if (c.lowerfd >= 0)
		close(c.lowerfd);
	return ok;
}
