/* Unit tests of reclamation (reclaim.h), without FUSE: stores made through
 * the store API by mounts that are then gone, orphans made by hand (a
 * record lost as at a power cut, a reference link no record names, an
 * anchor alone, a dead mount's staging), a publication in progress in a
 * live mount, moves and a mount born during the walk; a pass removes
 * exactly the orphans, every name reads back and the checker finds the
 * store clean.  Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "layout.h"
#include "log.h"
#include "reclaim.h"
#include "store-int.h"
#include "unit.h"

#define SIZE 4096

static struct kvt_reclaim_opts fast = { .rate = 0 };

/* The record names/@name, parsed; false when there is none. */
static bool record_of(const char *top, const char *name, struct kvt_record *rec)
{
	g_autofree char *p = g_build_filename(top, "names", name, NULL);
	g_autofree char *body = NULL;
	gsize len;

	kvt_record_init(rec);
	return g_file_get_contents(p, &body, &len, NULL) && kvt_record_parse(body, len, rec) == 0;
}

/* names/@name holds a record whose object holds @len bytes of @fill. */
static bool reads_back(const char *top, const char *name, char fill, size_t len)
{
	g_autofree char *opath = NULL;
	g_autofree char *data = NULL;
	struct kvt_record rec;
	gsize dlen;
	bool good;

	if (!record_of(top, name, &rec))
		return false;
	opath = object_file(top, &rec, false);
	good = rec.size == len && g_file_get_contents(opath, &data, &dlen, NULL) && dlen == len;
	for (size_t i = 0; good && i < len; i++)
		good = data[i] == fill;
	kvt_record_clear(&rec);
	return good;
}

/* The reference (or anchor) path of the record names/@name, kept for
 * after the record is gone. */
static char *object_of(const char *top, const char *name, bool anchor)
{
	struct kvt_record rec;
	char *p;

	if (!record_of(top, name, &rec))
		return g_strdup("NO-RECORD");
	p = object_file(top, &rec, anchor);
	kvt_record_clear(&rec);
	return p;
}

static bool rm_name(const char *top, const char *name)
{
	g_autofree char *p = g_build_filename(top, "names", name, NULL);

	return unlink(p) == 0;
}

/* A mount that stores @n names "<prefix><i>" (bytes 'A' + i % 26) and
 * is gone. */
static bool dead_mount_stores(const char *top, const char *prefix, int n)
{
	g_autoptr(GError) err = NULL;
	struct kvt_store *s = kvt_store_open(top, &err);
	bool good = s != NULL;

	for (int i = 0; good && i < n; i++) {
		g_autofree char *name = g_strdup_printf("%s%d", prefix, i);

		good = store_bytes(s, name, 'A' + i % 26, SIZE, NULL) == 0;
	}
	kvt_store_close(s);
	return good;
}

static guint64 check_problems(const char *top)
{
	struct kvt_check_opts o = { 0 };
	struct kvt_check_result res;
	g_autoptr(GError) err = NULL;

	if (!kvt_check(top, &o, &res, &err))
		return G_MAXUINT64;
	return res.problems + res.errors;
}

static void cleanup(const char *dir)
{
	g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);

	if (system(cmd))
		printf("# cannot remove %s\n", dir);
}

static void show(const char *what, const struct kvt_reclaim_result *r)
{
	printf("# %s: %" G_GUINT64_FORMAT " records, %" G_GUINT64_FORMAT " links, %"
	       G_GUINT64_FORMAT " reclaimed, %" G_GUINT64_FORMAT " bytes, objects/%02x-%02x, %s\n",
	       what, r->records, r->links, r->reclaimed, r->bytes, r->lo, r->hi - 1,
	       r->aborted ? r->aborted : "swept");
}

/* Files under @top/objects: anchors and references. */
static guint count_links(const char *top)
{
	g_autofree char *objs = g_build_filename(top, "objects", NULL);
	g_autoptr(GDir) d = g_dir_open(objs, 0, NULL);
	const char *fan;
	guint n = 0;

	while (d && (fan = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(objs, fan, NULL);
		g_autoptr(GDir) f = g_dir_open(p, 0, NULL);

		while (f && g_dir_read_name(f))
			n++;
	}
	return n;
}

/* ---------------------------------------------------------------- moves */

enum how { MOVE_MARKED, MOVE_RAW, REWRITE, BIRTH };

/* What the walk's hook does once, after the first directory "dK" it has
 * finished: a record of a directory it has not reached yet appears in the
 * finished one. */
struct mover {
	const char *top;
	struct kvt_store *s; /* the live mount that moves */
	enum how how;
	GHashTable *done;    /* directories the walk finished */
	char *moved;         /* "dJ/xK", where the record went */
	int ndirs;
	bool did;
};

static void after_dir(const char *rel, void *data)
{
	struct mover *m = data;
	g_autofree char *from = NULL;
	int k;

	g_hash_table_add(m->done, g_strdup(rel));
	if (m->did || rel[0] != 'd')
		return;
	m->did = true;
	for (k = 0; k < m->ndirs; k++) {
		g_autofree char *dk = g_strdup_printf("d%d", k);

		if (!g_hash_table_contains(m->done, dk))
			break;
	}
	if (k == m->ndirs)
		return;
	from = g_strdup_printf("d%d/x%d", k, k);
	m->moved = g_strdup_printf("%s/x%d", rel, k);
	if (m->how == MOVE_MARKED) {
		g_autoptr(kvt_dir) fd = NULL, td = NULL;
		g_autofree char *fdir = g_strdup_printf("d%d", k);
		struct kvt_record replaced;

		kvt_dir_open(kvt_store_names(m->s), fdir, &fd);
		kvt_dir_open(kvt_store_names(m->s), rel, &td);
		if (!fd || !td ||
		    kvt_name_rename(m->s, fd, strrchr(from, '/') + 1, td,
				    strrchr(m->moved, '/') + 1, 0, &replaced) < 0)
			printf("# the marked move failed\n");
		kvt_record_clear(&replaced);
	} else if (m->how == MOVE_RAW) {
		g_autofree char *a = g_build_filename(m->top, "names", from, NULL);
		g_autofree char *b = g_build_filename(m->top, "names", m->moved, NULL);

		if (rename(a, b))
			printf("# the raw move failed\n");
	} else if (m->how == REWRITE) {
		/* a record of the finished directory, written again with a
		 * client xattr, as setxattr does */
		g_autoptr(kvt_dir) d = NULL;
		g_autofree char *name = g_strdup_printf("x%s", rel + 1);
		struct kvt_meta meta = { .mode = 0644 };
		struct kvt_record rec;
		struct stat st;

		g_free(m->moved);
		m->moved = g_strdup_printf("%s/%s", rel, name);
		kvt_dir_open(kvt_store_names(m->s), rel, &d);
		if (!d || kvt_name_read(d, name, &rec, NULL) < 0 ||
		    (rec.xattrs = kvt_xattrs_new(),
		     g_hash_table_insert(rec.xattrs, g_strdup("user.x"), g_bytes_new("1", 1)),
		     kvt_store_rewrite(m->s, d, name, &rec, &meta, &st) < 0))
			printf("# the rewrite failed\n");
		kvt_record_clear(&rec);
	} else {
		/* a mount born during the walk publishes into the finished
		 * directory and is gone before the sweep */
		g_autoptr(GError) err = NULL;
		struct kvt_store *c = kvt_store_open(m->top, &err);

		g_free(m->moved);
		m->moved = g_strdup_printf("%s/born", rel);
		if (!c || store_bytes(c, m->moved, 'z', SIZE, NULL) < 0)
			printf("# the newborn mount could not publish\n");
		kvt_store_close(c);
	}
}

/* A store of @ndirs directories dK holding xK each, by a mount that is
 * gone, plus names/lost whose record is then lost; a live mount @*live. */
static char *move_store(int ndirs, struct kvt_store **live)
{
	char *top = g_dir_make_tmp("kvt-reclaim-XXXXXX", NULL);
	g_autoptr(GError) err = NULL;
	struct kvt_store *s = kvt_store_open(top, &err);
	bool good = s != NULL;

	for (int k = 0; good && k < ndirs; k++) {
		g_autofree char *dk = g_strdup_printf("d%d", k);
		g_autofree char *xk = g_strdup_printf("d%d/x%d", k, k);

		good = kvt_dir_mkdir(kvt_store_names(s), dk, 0755) == 0 &&
		       store_bytes(s, xk, 'a' + k, SIZE, NULL) == 0;
	}
	good = good && store_bytes(s, "lost", 'L', SIZE, NULL) == 0;
	kvt_store_close(s);
	good = good && rm_name(top, "lost");
	*live = good ? kvt_store_open(top, &err) : NULL;
	g_usleep(20000); /* every change time before the pass's time */
	return top;
}

/* One pass by @live whose walk meets a move of kind @how; whether the
 * moved (or new) name reads back afterwards, in *@kept. */
static void pass_with(enum how how, struct kvt_reclaim_result *res, bool *kept, char **top_out)
{
	struct kvt_store *live = NULL;
	char *top = move_store(6, &live);
	struct mover m = {
		.top = top, .s = live, .how = how, .ndirs = 6,
		.done = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
	};
	struct kvt_reclaim_opts o = { .after_dir = after_dir, .data = &m };
	struct kvt_reclaimer *r = kvt_reclaimer_new(live, &o);
	char fill = 0;

	memset(res, 0, sizeof(*res));
	if (live)
		kvt_reclaimer_pass(r, res);
	kvt_reclaimer_free(r);
	/* "dJ/xK" holds 'a' + K; "dJ/born" 'z' */
	if (m.moved) {
		const char *leaf = strrchr(m.moved, '/') + 1;

		fill = leaf[0] == 'x' ? 'a' + atoi(leaf + 1) : 'z';
	}
	*kept = m.did && m.moved && reads_back(top, m.moved, fill, SIZE);
	if (m.moved)
		printf("# %s: %s\n", how == BIRTH ? "published" : "moved", m.moved);
	kvt_store_close(live);
	g_hash_table_unref(m.done);
	g_free(m.moved);
	*top_out = top;
}

/* ---------------------------------------------------------------- births */

struct remover {
	struct kvt_layout l;
	gint stop;
	guint n;
};

/* What a pass does first (and a mount's start): every staging directory
 * whose lock is free is a dead mount's, and goes. */
static gpointer remove_dead(gpointer data)
{
	struct remover *r = data;

	while (!g_atomic_int_get(&r->stop)) {
		int ret;
		g_autoptr(GPtrArray) ents = kvt_dir_list(r->l.staging, false, &ret);

		for (guint i = 0; ents && i < ents->len; i++) {
			const struct kvt_dirent *e = ents->pdata[i];

			if (kvt_staging_live(&r->l, e->name) == 0 &&
			    kvt_staging_remove(&r->l, e->name) != -EBUSY)
				r->n++;
		}
		g_usleep(1000);
	}
	return NULL;
}

/* Mounts start and end @n times while dead staging is removed over and
 * over beside them; how many of those mounts, once started, did not hold
 * their lock, or had lost their marks-moves (in *@lost_mark). */
static guint births_beside_removals(const char *t, guint n, guint *lost_mark, guint *removals)
{
	g_autoptr(GError) err = NULL;
	struct kvt_store *first = kvt_store_open(t, &err);
	struct remover r = { 0 };
	GThread *th;
	guint bad = 0;

	kvt_store_close(first);
	*lost_mark = 0;
	*removals = 0;
	if (!first || !kvt_layout_open(t, KVT_LAYOUT_EXISTING, &r.l, &err))
		return n;
	th = g_thread_new("remover", remove_dead, &r);
	for (guint i = 0; i < n; i++) {
		struct kvt_store *s = kvt_store_open(t, &err);
		struct stat st;

		if (!s) {
			printf("# a mount could not start: %s\n", err->message);
			g_clear_error(&err);
			bad++;
			continue;
		}
		if (kvt_staging_live(&s->layout, s->mount_id) != 1 ||
		    kvt_dir_stat(s->stage, "lock", &st) < 0)
			bad++;
		else if (kvt_dir_stat(s->stage, KVT_MARKS_MOVES, &st) < 0)
			(*lost_mark)++;
		kvt_store_close(s);
	}
	g_atomic_int_set(&r.stop, 1);
	g_thread_join(th);
	kvt_layout_close(&r.l);
	*removals = r.n;
	return bad;
}

int main(void)
{
	g_autofree char *top = g_dir_make_tmp("kvt-reclaim-XXXXXX", NULL);
	g_autoptr(GError) err = NULL;
	struct kvt_reclaim_result res;
	struct kvt_reclaimer *r;
	struct kvt_store *a = NULL;
	bool good;

	kvt_log_init(KVT_LOG_INFO);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..31\n");

	/* ---- orphans of every kind, and what must stay ------------------ */
	good = dead_mount_stores(top, "n", 10);
	{
		g_autoptr(GError) e2 = NULL;
		struct kvt_store *d = kvt_store_open(top, &e2);

		/* n10 has n3's bytes (one anchor, two references) */
		good = good && d && store_bytes(d, "n10", 'A' + 3, SIZE, NULL) == 0 &&
		       store_bytes(d, "alone", 'Z', SIZE, NULL) == 0;
		kvt_store_close(d);
	}
	ok(good, "a store of 12 names by mounts that are gone");

	g_autofree char *ref0 = object_of(top, "n0", false);
	g_autofree char *anc0 = object_of(top, "n0", true);
	g_autofree char *ref1 = object_of(top, "n1", false);
	g_autofree char *anc1 = object_of(top, "n1", true);
	g_autofree char *ref10 = object_of(top, "n10", false);
	g_autofree char *anc3 = object_of(top, "n3", true);
	g_autofree char *ref3 = object_of(top, "n3", false);
	g_autofree char *ref_alone = object_of(top, "alone", false);
	g_autofree char *anc_alone = object_of(top, "alone", true);
	g_autofree char *anc4 = object_of(top, "n4", true);
	g_autofree char *extra = g_strdup_printf("%s.deadbeef1", anc4);
	g_autofree char *dead = g_build_filename(top, "staging", "host.1.00000000feedf00d", NULL);
	g_autofree char *staged = g_build_filename(dead, "d.1", NULL);
	g_autofree char *lockf = g_build_filename(dead, "lock", NULL);

	/* a power cut: the records of n0, n1 and n10 lost, their objects
	 * not; alone: its record and its reference gone, the anchor left;
	 * a reference link nobody names on n4's object; a dead mount's
	 * staging holding a link to n1's object */
	good = rm_name(top, "n0") && rm_name(top, "n1") && rm_name(top, "n10") &&
	       rm_name(top, "alone") && unlink(ref_alone) == 0 && link(anc4, extra) == 0;

	/* a live mount with a publication between its object and its record */
	struct kvt_record inflight;
	struct kvt_stage *st = NULL;
	g_autofree char *ref_in = NULL;
	{
		g_autofree char *buf = g_malloc(SIZE);
		uint64_t size;
		kvt_hash h;
		bool dedup;

		a = kvt_store_open(top, &err);
		memset(buf, 'q', SIZE);
		kvt_record_init(&inflight);
		good = a && kvt_stage_new(a, &st) == 0 && kvt_stage_write(st, buf, SIZE, 0) == 0 &&
		       kvt_stage_seal(st, &h, &size) == 0 &&
		       kvt_object_make(a, st->name, st->fd, size, &h, &inflight, &dedup) == 0 && !dedup;
		ref_in = good ? object_file(top, &inflight, false) : g_strdup("NONE");
	}
	ok(good, "a live mount made an object whose record is not written yet");
	/* after that mount began (it would have removed it) */
	good = good && g_mkdir(dead, 0700) == 0 && g_file_set_contents(lockf, "", 0, NULL) &&
	       link(ref1, staged) == 0;
	ok(good, "orphans by hand: 3 lost records, an anchor alone, a stray reference, "
	   "a dead mount's staging");
	g_usleep(20000);

	r = kvt_reclaimer_new(a, &fast);
	kvt_reclaimer_pass(r, &res);
	show("pass", &res);
	/* n0: reference + anchor; n1: the same once the staging went; n10:
	 * its reference (n3 keeps the anchor); alone: its anchor; the stray
	 * reference */
	ok(!res.aborted && res.reclaimed == 7 && res.stale_stages == 1,
	   "one pass: 7 orphan links removed, the dead staging with them");
	ok(res.bytes == 3 * SIZE, "bytes reclaimed: the three objects that went");
	ok(!lower_exists(ref0) && !lower_exists(anc0) && !lower_exists(ref1) &&
	   !lower_exists(anc1) && !lower_exists(ref10) && !lower_exists(anc_alone) &&
	   !lower_exists(extra) && !lower_exists(dead),
	   "the orphans are gone");
	ok(lower_exists(anc3) && lower_exists(ref3) && lower_exists(anc4),
	   "the anchor shared with a used reference stays, and so does the used object");
	ok(lower_exists(ref_in), "the live mount's object without a record yet stays");
	good = true;
	for (int i = 2; i < 10; i++) {
		g_autofree char *name = g_strdup_printf("n%d", i);

		good = good && reads_back(top, name, 'A' + i, SIZE);
	}
	ok(good, "every name reads back");
	{
		struct kvt_meta meta = { .mode = 0644 };
		g_autofree char *tmp = NULL;
		struct kvt_record old;

		good = kvt_name_stage(a, &inflight, &meta, false, &tmp, NULL) == 0 &&
		       kvt_name_place(a, tmp, kvt_store_names(a), "inflight", &old, NULL) == 0;
		kvt_record_clear(&old);
		kvt_stage_set_published(st);
		kvt_stage_unref(st);
	}
	ok(good && reads_back(top, "inflight", 'q', SIZE),
	   "its record lands afterwards: the name reads back");
	kvt_record_clear(&inflight);
	kvt_reclaimer_pass(r, &res);
	ok(!res.aborted && res.reclaimed == 0, "a second pass finds nothing to do");

	/* an older kvtierfs: a live mount that does not say it marks moves */
	{
		g_autoptr(GPtrArray) stages = NULL;
		g_autofree char *sdir = g_build_filename(top, "staging", NULL);
		g_autoptr(GDir) d = g_dir_open(sdir, 0, NULL);
		g_autofree char *mm = NULL;
		const char *e;

		while (d && (e = g_dir_read_name(d)))
			mm = g_build_filename(sdir, e, KVT_MARKS_MOVES, NULL);
		good = mm && unlink(mm) == 0;
		kvt_reclaimer_pass(r, &res);
		ok(good && res.aborted && strstr(res.aborted, "older") && res.reclaimed == 0,
		   "a live mount that does not mark its moves stops the pass");
		if (mm)
			g_file_set_contents(mm, "", 0, NULL);
	}
	/* a dead mount's marker left in moves/ */
	{
		g_autofree char *mark = g_build_filename(top, KVT_MOVES, "0badc0de.7", NULL);
		int passes = 0;

		g_file_set_contents(mark, "", 0, NULL);
		do {
			kvt_reclaimer_pass(r, &res);
			show("after a stale marker", &res);
		} while (res.aborted && res.again && ++passes < 3);
		ok(!lower_exists(mark) && !res.aborted,
		   "a dead mount's marker is removed, and the store is swept");
	}
	kvt_reclaimer_free(r);
	kvt_store_close(a);
	ok(check_problems(top) == 0, "the checker finds the store clean");

	/* ---- moves during the walk ------------------------------------ */
	{
		g_autofree char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL;
		bool kept;

		pass_with(MOVE_MARKED, &res, &kept, &t1);
		show("marked move", &res);
		ok(res.aborted && res.reclaimed == 0,
		   "a marked rename during the walk stops the pass before its sweep");
		ok(kept, "the moved name reads back");
		{
			g_autoptr(GError) e2 = NULL;
			struct kvt_store *s = kvt_store_open(t1, &e2);
			struct kvt_reclaimer *r2 = kvt_reclaimer_new(s, &fast);

			g_usleep(20000);
			kvt_reclaimer_pass(r2, &res);
			kvt_reclaimer_free(r2);
			kvt_store_close(s);
		}
		ok(!res.aborted && res.reclaimed == 2,
		   "the next pass sweeps: the lost record's reference and anchor");
		ok(check_problems(t1) == 0, "... and the checker finds that store clean");

		/* the control: the same move, unmarked, hides the record */
		pass_with(MOVE_RAW, &res, &kept, &t2);
		show("unmarked move", &res);
		ok(!res.aborted && res.reclaimed == 4 && !kept,
		   "control: unmarked (plain rename(2)), the same move hides the record from "
		   "the walk and its object is taken: the marker is what keeps it");

		pass_with(REWRITE, &res, &kept, &t3);
		show("rewrite", &res);
		ok(res.aborted && res.reclaimed == 0 && kept,
		   "a record written again (setxattr) during the walk stops the pass");

		pass_with(BIRTH, &res, &kept, &t4);
		show("birth", &res);
		ok(!res.aborted && res.reclaimed == 2 && kept,
		   "a mount born during the walk publishes where the walk has been and "
		   "is gone: its object is younger than the pass and stays");
		ok(check_problems(t4) == 0, "... and the checker finds that store clean");
		cleanup(t1);
		cleanup(t2);
		cleanup(t3);
		cleanup(t4);
	}

	/* ---- a small filter: a range of fan-out directories per pass ---- */
	{
		g_autofree char *t = g_dir_make_tmp("kvt-reclaim-XXXXXX", NULL);
		struct kvt_reclaim_opts o = { .filter_bytes = 16 };
		bool covered[256] = { false }, all = false, ranged = false;
		struct kvt_store *s;
		int passes = 0;

		/* p<i> holds 'A' + i % 26; the records of every third are
		 * lost: 40 references and all 26 contents stay used */
		good = dead_mount_stores(t, "p", 60);
		for (int i = 0; good && i < 60; i += 3) {
			g_autofree char *name = g_strdup_printf("p%d", i);

			good = rm_name(t, name);
		}
		s = kvt_store_open(t, &err);
		g_usleep(20000);
		r = kvt_reclaimer_new(s, &o);
		/* The filter lets an orphan through now and then (an orphan
		 * stays): passes until all are gone, each with its seed. */
		do {
			kvt_reclaimer_pass(r, &res);
			show("small filter", &res);
			if (res.aborted)
				continue;
			ranged |= res.hi - res.lo < 256;
			for (guint b = res.lo; b < res.hi; b++)
				covered[b] = true;
			all = true;
			for (guint b = 0; b < 256; b++)
				all = all && covered[b];
		} while (++passes < 24 && !(all && count_links(t) == 40 + 26));
		ok(good && ranged && all,
		   "with a filter of 128 bits for 40 records each pass sweeps a range of objects/");
		printf("# %d passes, %u links left\n", passes, count_links(t));
		kvt_reclaimer_free(r);
		kvt_store_close(s);
		ok(count_links(t) == 40 + 26 && check_problems(t) == 0,
		   "over the passes every orphan goes and the checker finds the store clean");
		good = true;
		for (int i = 1; i < 60; i++) {
			g_autofree char *name = g_strdup_printf("p%d", i);

			if (i % 3)
				good = good && reads_back(t, name, 'A' + i % 26, SIZE);
		}
		ok(good, "every name still reads back");
		cleanup(t);
	}

	/* ---- mounts born while dead staging is removed ------------------ */
	{
		g_autofree char *t = g_dir_make_tmp("kvt-reclaim-XXXXXX", NULL);
		guint lost, removals, bad = births_beside_removals(t, 2000, &lost, &removals);

		printf("# 2000 mounts beside %u removals: %u without their lock, %u without "
		       "marks-moves\n", removals, bad, lost);
		ok(bad == 0, "2000 mounts started while dead staging was removed beside them "
		   "(as every pass does): all hold their lock");
		ok(lost == 0, "... and all still say that they mark their moves");
		cleanup(t);
	}

	/* ---- an anchor alone of late: a release a step from its end ----- */
	{
		g_autofree char *t = g_dir_make_tmp("kvt-reclaim-XXXXXX", NULL);
		struct kvt_reclaim_opts graced = { .rate = 0, .anchor_grace = 3600 };
		g_autofree char *ref = NULL, *anc = NULL;
		struct kvt_store *s;

		good = dead_mount_stores(t, "g", 1);
		ref = object_of(t, "g0", false);
		anc = object_of(t, "g0", true);
		/* another mount's release stopped between its two unlinks */
		good = good && rm_name(t, "g0") && unlink(ref) == 0;
		s = kvt_store_open(t, &err);
		r = kvt_reclaimer_new(s, &graced);
		kvt_reclaimer_pass(r, &res);
		show("graced pass", &res);
		ok(good && !res.aborted && res.reclaimed == 0 && lower_exists(anc),
		   "an anchor whose last reference went a moment ago is left to the mount releasing it "
		   "(a grace of an hour)");
		kvt_reclaimer_free(r);
		r = kvt_reclaimer_new(s, &fast);
		kvt_reclaimer_pass(r, &res);
		ok(!res.aborted && res.reclaimed == 1 && !lower_exists(anc),
		   "... a pass without the grace takes it");
		kvt_reclaimer_free(r);
		kvt_store_close(s);
		cleanup(t);
	}

	/* ---- pacing and stopping ---------------------------------------- */
	{
		g_autofree char *t = g_dir_make_tmp("kvt-reclaim-XXXXXX", NULL);
		struct kvt_reclaim_opts slow = { .rate = 200 };
		struct kvt_store *s;
		gint64 t0;
		double want;

		good = dead_mount_stores(t, "q", 30);
		s = kvt_store_open(t, &err);
		r = kvt_reclaimer_new(s, &slow);
		kvt_reclaimer_pass(r, &res);
		want = (res.records + res.links - 1) / 200.0;
		ok(good && !res.aborted && res.secs >= want * 0.95,
		   "at 200 entries a second a pass over 30 records and 60 links takes its time");
		printf("# %.3f s for %" G_GUINT64_FORMAT " entries (at least %.3f s)\n", res.secs,
		       res.records + res.links, want);
		kvt_reclaimer_free(r);

		slow.rate = 2;
		r = kvt_reclaimer_new(s, &slow);
		kvt_reclaimer_start(r, 0);
		g_usleep(200000);
		t0 = g_get_monotonic_time();
		kvt_reclaimer_free(r);
		ok(g_get_monotonic_time() - t0 < G_USEC_PER_SEC / 2,
		   "a slow pass in its thread stops at once when asked");
		kvt_store_close(s);
		cleanup(t);
	}
	cleanup(top);

	return n_fail ? 1 : 0;
}
