/* Checks, and on request repairs, a store that no mount is using.
 *
 * One problem is one path on LOWERDIR, and its repair is one atomic
 * removal of that path (unlink; a dead staging directory is emptied, then
 * removed), or for a lost marker one atomic rename of a new one into
 * place.  Nothing else is ever rewritten, so a repair interrupted at any
 * point leaves a store that is as correct as before, and a second run
 * finishes the job.
 *
 * The marker first: a store whose marker a power cut lost (missing, or
 * empty because it was never synced) is still checked when the rest is
 * clearly a store, and --repair writes the marker again so that it mounts.
 * After that and the top of LOWERDIR (unknown entries), the walk takes
 * four passes:
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
 *      check refuse to start); so is every marker in moves/.
 * A record whose object is torn or gone is removed: a name either reads
 * back exactly its bytes or does not exist. */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "layout.h"
#include "name.h"
#include "object.h"
#include "record.h"

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
	[KVT_LOST_MARKER] = "marker",
	[KVT_OPEN_LOWERDIR] = "open-lowerdir",
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
	struct kvt_layout l;
	GHashTable *torn;     /* "<ab>/<name>" -> struct torn */
	GHashTable *refs;     /* set of "<ab>/<hash>.<ref>" that staying records use */
	GStringChunk *keys;   /* the keys of refs, without a malloc each */
	struct kvt_dir *fan[256]; /* objects/<ab>, as the records need them */
	bool names_complete;  /* every record under names/ was read */
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
static int remove_at(struct ctx *c, struct kvt_dir *d, const char *name)
{
	int ret;

	if (!c->o->repair)
		return 0;
	ret = kvt_dir_unlink(d, name);
	return ret == 0 || ret == -ENOENT ? 1 : ret;
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

/* The entries of @d sorted by name, so that reports come in a stable
 * order; a walk error about @shown on failure. */
static GPtrArray *list_dir(struct ctx *c, struct kvt_dir *d, const char *shown)
{
	int ret;
	GPtrArray *out = kvt_dir_list(d, true, &ret);

	if (!out)
		walk_error(c, "%s: cannot read: %s", shown, g_strerror(-ret));
	return out;
}

/* @rel under @at, a walk error about @shown on failure. */
static struct kvt_dir *open_dir(struct ctx *c, struct kvt_dir *at, const char *rel,
				const char *shown)
{
	struct kvt_dir *d = NULL;
	int ret = kvt_dir_open(at, rel, &d);

	if (ret < 0)
		walk_error(c, "%s: cannot open: %s", shown, g_strerror(-ret));
	return d;
}

/* ------------------------------------------------------------ store */

/* Fails when a mount is using the store. */
static bool check_not_live(struct ctx *c, GError **err)
{
	int ret;
	g_autoptr(GPtrArray) stages = kvt_dir_list(c->l.staging, true, &ret);

	if (!stages) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: cannot read staging/: %s", c->lowerdir,
			    g_strerror(-ret));
		return false;
	}
	for (guint i = 0; i < stages->len; i++) {
		const struct kvt_dirent *e = stages->pdata[i];
		int live = kvt_staging_live(&c->l, e->name);

		if (live > 0) {
			g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_BUSY,
				    "LOWERDIR %s is in use by a mount (staging/%s/lock "
				    "is locked); unmount it first", c->lowerdir, e->name);
			return false;
		}
		/* Not a directory: reported by the staging pass. */
		if (live < 0 && live != -ENOTDIR && live != -ELOOP) {
			g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
				    "LOWERDIR %s: staging/%s/lock: %s",
				    c->lowerdir, e->name, g_strerror(-live));
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------------ marker */

/* How many files of names/ are read, at most, for a sign of a store. */
#define SAMPLE_FILES 64

/* Whether @d (names/ or below) holds a record among its first files: 1
 * yes, 0 files but no record, -1 no file seen.  *@budget counts down the
 * files read. */
static int sample_records(struct kvt_dir *d, int *budget)
{
	int ret, found = -1;
	g_autoptr(GPtrArray) ents = kvt_dir_list(d, true, &ret);

	for (guint i = 0; ents && i < ents->len && *budget > 0 && found < 1; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		struct kvt_record rec;
		struct stat st;

		if (kvt_dir_stat(d, e->name, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			g_autoptr(kvt_dir) sub = NULL;

			if (kvt_dir_open(d, e->name, &sub) == 0)
				found = MAX(found, sample_records(sub, budget));
		} else if (S_ISREG(st.st_mode)) {
			(*budget)--;
			ret = kvt_name_read(d, e->name, &rec, NULL);
			kvt_record_clear(&rec);
			found = MAX(found, ret == 0 ? 1 : 0);
		}
	}
	return found;
}

/* A store whose marker is lost is still clearly one: objects/ holds only
 * fan-out directories, and names/ either holds no file among the first
 * ones looked at, or a record among them (a power cut may have emptied
 * some records, never all that were written before the marker was). */
static bool clearly_a_store(struct ctx *c)
{
	int ret, budget = SAMPLE_FILES;
	g_autoptr(GPtrArray) fans = kvt_dir_list(c->l.objects, false, &ret);

	if (!fans)
		return false;
	for (guint i = 0; i < fans->len; i++) {
		const struct kvt_dirent *e = fans->pdata[i];

		if (!kvt_object_is_fanout(e->name))
			return false;
	}
	return sample_records(c->l.names, &budget) != 0;
}

/* The marker problem of a store opened without one; with --repair it is
 * written again. */
static void check_marker(struct ctx *c, int marker)
{
	const char *what = marker == -ENOENT ? "missing" : kvt_layout_what_is(c->l.root, KVT_MARKER);
	g_autofree char *other = NULL;
	int repair = 0;

	if (c->o->repair) {
		repair = kvt_layout_write_marker(c->l.root);
		if (repair == 0)
			repair = 1;
	}
	if (!strcmp(what, "a regular file"))
		what = "empty or not a marker";
	else if (marker != -ENOENT)
		what = other = g_strdup_printf("%s, not a marker", what);
	problem(c, KVT_LOST_MARKER, KVT_MARKER, true, repair, "%s; the rest is a store", what);
}

/* A LOWERDIR that others can enter: they could read and forge the store
 * around a mount (layout.h), which closes it as the repair does. */
static void check_root_mode(struct ctx *c)
{
	mode_t was = c->l.root_mode;
	int repair = 0;

	if (!(was & 077))
		return;
	if (c->o->repair)
		repair = kvt_layout_close_root(&c->l);
	problem(c, KVT_OPEN_LOWERDIR, ".", true, repair,
		"mode %04o: others can reach the store around the mount; it should be 0700",
		(unsigned int)was);
}

/* Anything at the top of LOWERDIR that a store does not have. */
static void check_top(struct ctx *c)
{
	static const char *const dirs[] = { "objects", "names", "staging", KVT_MOVES,
					    "lost+found" };
	g_autoptr(GPtrArray) top = list_dir(c, c->l.root, "LOWERDIR");

	for (guint i = 0; top && i < top->len; i++) {
		const struct kvt_dirent *e = top->pdata[i];
		bool known = !strcmp(e->name, KVT_MARKER);

		for (size_t j = 0; !known && j < G_N_ELEMENTS(dirs); j++)
			known = !strcmp(e->name, dirs[j]);
		if (!known)
			problem(c, KVT_UNKNOWN, e->name, false, 0,
				"not part of a kvtierfs store");
	}
}

/* ------------------------------------------------------------ objects */

enum { HASH_TODO, HASH_DONE, HASH_FAILED };

struct obj_inode {
	guint64 ino; /* key */
	int state;
	guint64 size;
	kvt_hash found;
};

/* Hashes the inode behind @fan/@name, once for all its links. */
static struct obj_inode *hash_inode(struct ctx *c, GHashTable *inodes, struct kvt_dir *fan,
				    const char *name, const char *shown,
				    const struct stat *st)
{
	guint64 ino = st->st_ino;
	struct obj_inode *oi = g_hash_table_lookup(inodes, &ino);
	struct stat fst;
	kvt_autofd fd = -1;
	int ret;

	if (oi)
		return oi;
	oi = g_new0(struct obj_inode, 1);
	oi->ino = ino;
	g_hash_table_insert(inodes, &oi->ino, oi);
	c->res->objects++;
	oi->state = HASH_FAILED;
	fd = kvt_dir_open_file(fan, name, O_RDONLY, 0, &fst);
	if (fd < 0) {
		walk_error(c, "%s: cannot open: %s", shown, g_strerror(-fd));
		return oi;
	}
	ret = kvt_hash_fd(fd, fst.st_size, &oi->found, NULL);
	if (ret < 0) {
		walk_error(c, "%s: cannot read: %s", shown, g_strerror(-ret));
	} else {
		oi->size = fst.st_size;
		oi->state = HASH_DONE;
	}
	return oi;
}

static void hash_fanout(struct ctx *c, const char *dir)
{
	g_autofree char *shown = g_strdup_printf("objects/%s", dir);
	g_autoptr(kvt_dir) fan = open_dir(c, c->l.objects, dir, shown);
	g_autoptr(GPtrArray) ents = fan ? list_dir(c, fan, shown) : NULL;
	g_autoptr(GHashTable) inodes = NULL;

	if (!ents)
		return;
	inodes = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *path = g_strdup_printf("objects/%s/%s", dir, e->name);
		char want[KVT_HASH_HEX_LEN + 1], got[KVT_HASH_HEX_LEN + 1];
		struct obj_inode *oi;
		struct torn *t;
		struct stat st;
		kvt_hash h;
		bool is_ref;
		int ret;

		if (!kvt_object_parse_name(dir, e->name, &h, &is_ref)) {
			problem(c, KVT_UNKNOWN, path, false, 0, "not an object name");
			continue;
		}
		ret = kvt_dir_stat(fan, e->name, &st);
		if (ret < 0) {
			walk_error(c, "%s: cannot stat: %s", path, g_strerror(-ret));
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			problem(c, KVT_UNKNOWN, path, false, 0, "%s, not an object",
				type_name(st.st_mode));
			continue;
		}
		oi = hash_inode(c, inodes, fan, e->name, path, &st);
		if (oi->state != HASH_DONE || kvt_hash_equal(&h, &oi->found))
			continue;
		t = g_new(struct torn, 1);
		t->size = oi->size;
		t->found = oi->found;
		g_hash_table_insert(c->torn, g_strdup_printf("%s/%s", dir, e->name), t);
		kvt_hash_hex(&h, want);
		kvt_hash_hex(&oi->found, got);
		problem(c, KVT_TORN_HASH, path, true, remove_at(c, fan, e->name),
			"expected xxh3-128:%s, found xxh3-128:%s", want, got);
	}
}

/* Calls @fn for each fan-out directory of objects/ (reporting anything
 * else there when @report). */
static void each_fanout(struct ctx *c, bool report, void (*fn)(struct ctx *, const char *))
{
	g_autoptr(GPtrArray) top = list_dir(c, c->l.objects, "objects");

	for (guint i = 0; top && i < top->len; i++) {
		const struct kvt_dirent *e = top->pdata[i];
		g_autofree char *path = g_strdup_printf("objects/%s", e->name);
		struct stat st;
		int ret = kvt_dir_stat(c->l.objects, e->name, &st);

		if (ret < 0) {
			if (report)
				walk_error(c, "%s: cannot stat: %s", path, g_strerror(-ret));
			continue;
		}
		if (!kvt_object_is_fanout(e->name) || !S_ISDIR(st.st_mode)) {
			if (report)
				problem(c, KVT_UNKNOWN, path, false, 0,
					"%s, not an object fan-out directory",
					type_name(st.st_mode));
			continue;
		}
		fn(c, e->name);
	}
}

/* ------------------------------------------------------------ names */

/* The reference link a record names. */
static int stat_ref(struct ctx *c, const struct kvt_record *rec, const char *refname,
		    struct stat *st)
{
	struct kvt_dir **fan = &c->fan[rec->hash.b[0]];
	char dir[3];

	kvt_object_fanout(&rec->hash, dir);
	if (!*fan) {
		int ret = kvt_dir_open(c->l.objects, dir, fan);

		if (ret < 0)
			return ret;
	}
	return kvt_dir_stat(*fan, refname, st);
}

static void check_record(struct ctx *c, struct kvt_dir *d, const char *name,
			 const char *path)
{
	g_autofree char *refname = NULL, *refp = NULL, *objpath = NULL;
	char want[KVT_HASH_HEX_LEN + 1], got[KVT_HASH_HEX_LEN + 1];
	struct kvt_record rec;
	const struct torn *t;
	struct stat st, ost;
	int ret;

	c->res->names++;
	ret = kvt_dir_stat(d, name, &st);
	if (ret == 0 && (!S_ISREG(st.st_mode) || st.st_size > KVT_RECORD_MAX)) {
		problem(c, KVT_UNPARSABLE, path, true, remove_at(c, d, name),
			"%s of %lld bytes, not a kvtierfs record",
			type_name(st.st_mode), (long long)st.st_size);
		return;
	}
	if (ret == 0)
		ret = kvt_name_read(d, name, &rec, &st);
	if (ret == -EBADMSG) {
		problem(c, KVT_UNPARSABLE, path, true, remove_at(c, d, name),
			"not a kvtierfs record");
		return;
	}
	if (ret < 0) {
		walk_error(c, "%s: cannot read: %s", path, g_strerror(-ret));
		c->names_complete = false;
		return;
	}
	if (rec.kind != KVT_KIND_FILE)
		goto out; /* a link or a special file: no object */
	refname = kvt_object_ref_name(&rec);
	refp = g_strdup_printf("%.2s/%s", refname, refname);
	objpath = kvt_object_path(&rec);
	kvt_hash_hex(&rec.hash, want);

	/* Torn first: pass 1 may already have removed the object. */
	t = g_hash_table_lookup(c->torn, refp);
	if (t && t->size != rec.size) {
		problem(c, KVT_TORN_SIZE, path, true, remove_at(c, d, name),
			"expected %" G_GUINT64_FORMAT " bytes, object %s has %"
			G_GUINT64_FORMAT, rec.size, objpath, t->size);
		goto out;
	}
	if (t) {
		kvt_hash_hex(&t->found, got);
		problem(c, KVT_TORN_HASH, path, true, remove_at(c, d, name),
			"expected xxh3-128:%s, object %s has xxh3-128:%s",
			want, objpath, got);
		goto out;
	}
	ret = stat_ref(c, &rec, refname, &ost);
	if (ret == -ENOENT || ret == -ENOTDIR) {
		problem(c, KVT_DANGLING, path, true, remove_at(c, d, name),
			"object %s missing", objpath);
		goto out;
	} else if (ret < 0) {
		/* Cannot tell: the record stays, and so does its object. */
		walk_error(c, "%s: cannot stat: %s", objpath, g_strerror(-ret));
	} else if (!S_ISREG(ost.st_mode)) {
		problem(c, KVT_DANGLING, path, true, remove_at(c, d, name),
			"object %s is %s", objpath, type_name(ost.st_mode));
		goto out;
	} else if ((guint64)ost.st_size != rec.size) {
		problem(c, KVT_TORN_SIZE, path, true, remove_at(c, d, name),
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

/* @d is names/@rel ("" for names/ itself).  Directories are walked by
 * handle, one component at a time: a name deeper than PATH_MAX is checked
 * like any other. */
static void check_names_dir(struct ctx *c, struct kvt_dir *d, const char *rel)
{
	g_autofree char *shown = rel[0] ? g_strdup_printf("names/%s", rel) : g_strdup("names");
	g_autoptr(GPtrArray) ents = list_dir(c, d, shown);

	if (!ents) {
		c->names_complete = false;
		return;
	}
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *child = rel[0] ? g_strdup_printf("%s/%s", rel, e->name)
						: g_strdup(e->name);
		g_autofree char *path = g_strdup_printf("names/%s", child);
		mode_t type = DTTOIF(e->type);
		struct stat st;

		if (e->type == DT_UNKNOWN) {
			int ret = kvt_dir_stat(d, e->name, &st);

			if (ret < 0) {
				walk_error(c, "%s: cannot stat: %s", path, g_strerror(-ret));
				c->names_complete = false;
				continue;
			}
			type = st.st_mode & S_IFMT;
		}
		if (S_ISDIR(type)) {
			g_autoptr(kvt_dir) sub = open_dir(c, d, e->name, path);

			if (sub)
				check_names_dir(c, sub, child);
			else
				c->names_complete = false;
		} else if (S_ISREG(type)) {
			check_record(c, d, e->name, path);
		} else {
			problem(c, KVT_UNKNOWN, path, false, 0, "%s, not a record",
				type_name(type));
		}
	}
}

/* ------------------------------------------------------------ orphans */

static void orphans_fanout(struct ctx *c, const char *dir)
{
	g_autofree char *shown = g_strdup_printf("objects/%s", dir);
	g_autoptr(kvt_dir) fan = open_dir(c, c->l.objects, dir, shown);
	g_autoptr(GPtrArray) ents = fan ? list_dir(c, fan, shown) : NULL;
	g_autoptr(GHashTable) used = NULL;  /* inodes with a used reference */
	g_autofree guint64 *inos = NULL;
	g_autofree guint8 *kind = NULL;
	enum { SKIP, ANCHOR, REF_USED, REF_UNUSED };

	if (!ents)
		return;
	used = g_hash_table_new(g_int64_hash, g_int64_equal);
	inos = g_new0(guint64, ents->len);
	kind = g_new0(guint8, ents->len);
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *key = g_strdup_printf("%s/%s", dir, e->name);
		struct stat st;
		kvt_hash h;
		bool is_ref;
		int ret;

		/* Unknown and torn links were reported by pass 1. */
		if (!kvt_object_parse_name(dir, e->name, &h, &is_ref) ||
		    g_hash_table_contains(c->torn, key))
			continue;
		ret = kvt_dir_stat(fan, e->name, &st);
		if (ret < 0) {
			if (ret != -ENOENT)
				walk_error(c, "objects/%s: cannot stat: %s", key,
					   g_strerror(-ret));
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
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *path = NULL;

		if (kind[i] == REF_UNUSED) {
			path = g_strdup_printf("objects/%s/%s", dir, e->name);
			problem(c, KVT_ORPHAN, path, true, remove_at(c, fan, e->name),
				"no record uses this reference");
		} else if (kind[i] == ANCHOR && !g_hash_table_contains(used, &inos[i])) {
			path = g_strdup_printf("objects/%s/%s", dir, e->name);
			problem(c, KVT_ORPHAN, path, true, remove_at(c, fan, e->name),
				"no record uses this anchor's object");
		}
	}
}

/* ------------------------------------------------------------ staging */

static void check_staging(struct ctx *c)
{
	g_autoptr(GPtrArray) ents = list_dir(c, c->l.staging, "staging");

	for (guint i = 0; ents && i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *path = g_strdup_printf("staging/%s", e->name);
		struct stat st;
		int ret = kvt_dir_stat(c->l.staging, e->name, &st), repair = 0;

		if (ret < 0) {
			walk_error(c, "%s: cannot stat: %s", path, g_strerror(-ret));
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			problem(c, KVT_UNKNOWN, path, false, 0,
				"%s, not a staging directory", type_name(st.st_mode));
			continue;
		}
		if (kvt_staging_live(&c->l, e->name) > 0) {
			walk_error(c, "%s: a mount started during the check", path);
			continue;
		}
		if (c->o->repair) {
			ret = kvt_staging_remove(&c->l, e->name);
			repair = ret == 0 ? 1 : ret;
		}
		problem(c, KVT_STALE_STAGING, path, true, repair,
			"left by a mount that is gone");
	}
}

/* Markers in moves/: every one is a dead mount's, which died moving
 * records (reclaim.c). */
static void check_moves(struct ctx *c)
{
	g_autoptr(GPtrArray) ents = c->l.moves ? list_dir(c, c->l.moves, KVT_MOVES) : NULL;

	for (guint i = 0; ents && i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *path = g_strdup_printf(KVT_MOVES "/%s", e->name);
		struct stat st;
		int ret = kvt_dir_stat(c->l.moves, e->name, &st);

		if (ret < 0) {
			if (ret != -ENOENT)
				walk_error(c, "%s: cannot stat: %s", path, g_strerror(-ret));
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			problem(c, KVT_UNKNOWN, path, false, 0, "%s, not a marker",
				type_name(st.st_mode));
			continue;
		}
		problem(c, KVT_STALE_STAGING, path, true, remove_at(c, c->l.moves, e->name),
			"a rename by a mount that is gone");
	}
}

/* ------------------------------------------------------------ entry */

bool kvt_check(const char *lowerdir, const struct kvt_check_opts *opts,
	       struct kvt_check_result *res, GError **err)
{
	struct ctx c = {
		.o = opts, .res = res, .lowerdir = lowerdir, .names_complete = true,
	};
	g_autoptr(GError) late = NULL;
	g_autoptr(GError) lerr = NULL;
	bool ok = false;
	int marker;

	memset(res, 0, sizeof(*res));
	if (!kvt_layout_open_unmarked(lowerdir, &c.l, &marker, &lerr)) {
		g_set_error_literal(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE, lerr->message);
		return false;
	}
	if (marker && !clearly_a_store(&c)) {
		g_set_error(err, KVT_CHECK_ERROR, KVT_CHECK_ERROR_STORE,
			    "LOWERDIR %s: %s %s, and the rest does not look like a kvtierfs "
			    "store", lowerdir, KVT_MARKER,
			    marker == -ENOENT ? "is missing" : "is not a kvtierfs store marker");
		goto out;
	}
	if (!check_not_live(&c, err))
		goto out;
	if (marker)
		check_marker(&c, marker);
	check_root_mode(&c);
	c.torn = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	c.refs = g_hash_table_new(g_str_hash, g_str_equal);
	c.keys = g_string_chunk_new(1 << 20);

	check_top(&c);
	each_fanout(&c, true, hash_fanout);
	check_names_dir(&c, c.l.names, "");
	/* An unread record would make its object look orphaned; a mount that
	 * started meanwhile may be publishing objects its records do not yet
	 * name. */
	if (!c.names_complete) {
		walk_error(&c, "not every record could be read: orphans not checked");
	} else if (opts->repair && !check_not_live(&c, &late)) {
		walk_error(&c, "%s: orphans not checked", late->message);
	} else {
		each_fanout(&c, false, orphans_fanout);
	}
	check_staging(&c);
	check_moves(&c);
	ok = true;
out:
	if (c.torn)
		g_hash_table_unref(c.torn);
	if (c.refs)
		g_hash_table_unref(c.refs);
	if (c.keys)
		g_string_chunk_free(c.keys);
	for (size_t i = 0; i < G_N_ELEMENTS(c.fan); i++)
		kvt_dir_unref(c.fan[i]);
	kvt_layout_close(&c.l);
	return ok;
}
