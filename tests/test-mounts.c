/* Unit tests of two mounts of one lower directory, without FUSE: two store
 * handles (two staging areas) on one LOWERDIR, and the other mount's step
 * put, through the fault layer's hook (fault.h), exactly between two steps
 * of a transaction.  The reference count kept in link counts (object.h):
 * no anchor is left that nobody removes, and a failed publication's bytes
 * are shared by nobody; a record read just before another mount replaced
 * it is read again instead of being taken for torn (kvt_name_lookup); a
 * purge does not take another mount's new record.  At the end the store
 * is checked as kvtierfs-fsck does.  Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fault.h"
#include "store-int.h"
#include "unit.h"

#define LEN (64u << 10)

static const char *top;
static struct kvt_store *A, *B;

static char *pattern(unsigned seed)
{
	char *buf = g_malloc(LEN);

	for (size_t i = 0; i < LEN; i++)
		buf[i] = (char)(i * 7 + seed * 131 + (i >> 10));
	return buf;
}

static struct kvt_stage *stage_of(struct kvt_store *s, const char *buf)
{
	struct kvt_stage *st = NULL;

	if (kvt_stage_new(s, &st) == 0 && kvt_stage_write(st, buf, LEN, 0) == 0)
		return st;
	kvt_stage_unref(st);
	return NULL;
}

/* Publishes @st at names/@name; the record it replaced is released. */
static int publish(struct kvt_store *s, struct kvt_stage *st, const char *name,
		   struct kvt_published *pub)
{
	struct kvt_meta meta = { .mode = 0644 };

	if (!st)
		return -ENOMEM;
	return kvt_store_publish(s, st, kvt_store_names(s), name, &meta, NULL, 0, pub);
}

static int publish_buf(struct kvt_store *s, const char *name, const char *buf,
		       struct kvt_published *pub)
{
	struct kvt_stage *st = stage_of(s, buf);
	int ret = publish(s, st, name, pub);

	kvt_stage_unref(st);
	return ret;
}

/* The name reads back @buf, through store @s. */
static bool reads(struct kvt_store *s, const char *name, const char *buf)
{
	g_autofree char *back = g_malloc(LEN + 1);
	struct kvt_record rec;
	kvt_autofd fd = -1;
	bool good;

	if (kvt_name_read(kvt_store_names(s), name, &rec, NULL) < 0)
		return false;
	fd = kvt_object_open(s, &rec, O_RDONLY, NULL);
	good = fd >= 0 && rec.size == LEN && pread(fd, back, LEN + 1, 0) == LEN &&
	       !memcmp(back, buf, LEN);
	kvt_record_clear(&rec);
	return good;
}

/* Links under objects/ of the bytes @buf: their anchor and references. */
static int links_of(const char *buf)
{
	g_autofree char *dir = NULL;
	char hex[KVT_HASH_HEX_LEN + 1], fan[3];
	g_autoptr(GDir) d = NULL;
	const char *e;
	kvt_hash h;
	int n = 0;

	kvt_hash_buf(buf, LEN, &h);
	kvt_hash_hex(&h, hex);
	kvt_object_fanout(&h, fan);
	dir = g_build_filename(top, "objects", fan, NULL);
	d = g_dir_open(dir, 0, NULL);
	while (d && (e = g_dir_read_name(d)))
		n += g_str_has_prefix(e, hex);
	return n;
}

static bool anchored(const char *buf)
{
	struct kvt_record rec = { 0 };
	g_autofree char *anchor = NULL;

	kvt_hash_buf(buf, LEN, &rec.hash);
	anchor = object_file(top, &rec, true);
	return lower_exists(anchor);
}

static bool lower_name_exists(const char *name)
{
	g_autofree char *path = g_build_filename(top, "names", name, NULL);

	return lower_exists(path);
}

/* Only the lock in @s's staging area. */
static bool staging_clean(struct kvt_store *s)
{
	g_autofree char *dir = g_build_filename(top, "staging", s->mount_id, NULL);
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *e;
	int n = 0;

	while (d && (e = g_dir_read_name(d)))
		n += strcmp(e, "lock") != 0 && strcmp(e, KVT_MARKS_MOVES) != 0;
	return d && n == 0;
}

/* The other mount's step, run by the hook. */
struct step {
	const char *name;
	const char *buf;
	struct kvt_published pub;
	int ret;
	bool ran;
};

static void b_publishes(void *arg)
{
	struct step *x = arg;

	x->ran = true;
	x->ret = publish_buf(B, x->name, x->buf, &x->pub);
}

static void b_removes(void *arg)
{
	struct step *x = arg;

	x->ran = true;
	x->ret = kvt_name_remove(B, kvt_store_names(B), x->name);
}

/* Mount A installs its record; before A's staged file goes, mount B
 * replaces that record and releases it.  The staged file's link must not
 * count as a user when B looks at the anchor. */
static void test_replaced_before_unstage(void)
{
	g_autofree char *a = pattern(1), *b = pattern(2);
	struct step x = { .name = "n", .buf = b };
	struct kvt_published pa;
	struct kvt_stage *st = stage_of(A, a);

	kvt_fault_hook(KVT_FAULT_UNLINK, "d.*", b_publishes, &x);
	ok(publish(A, st, "n", &pa) == 0 && x.ran && x.ret == 0,
	   "A publishes; B replaces A's record between its install and the staged file's removal");
	kvt_stage_unref(st);
	ok(reads(A, "n", b) && reads(B, "n", b), "the name holds B's bytes, seen from both");
	ok(links_of(a) == 0 && !anchored(a),
	   "A's bytes are gone whole: B released the reference, and no anchor is left");
	ok(staging_clean(A) && staging_clean(B), "both staging areas hold only their lock and mark");
	kvt_published_clear(&pa);
	kvt_published_clear(&x.pub);
}

/* Mount A's publication fails at the record (a directory has the name);
 * meanwhile B stores the same bytes.  B must not share A's staged file,
 * which A's version takes writes into again. */
static void test_failed_publication_not_shared(void)
{
	g_autofree char *a = pattern(3), *other = pattern(4);
	struct step x = { .name = "b1", .buf = a };
	struct kvt_published pa;
	struct kvt_stage *st = stage_of(A, a);

	ok(kvt_dir_mkdir(kvt_store_names(A), "dir", 0755) == 0, "a directory takes the name 'dir'");
	/* B's store comes when A's publication writes its record file
	 * (made with the stage): after A's object is made. */
	kvt_fault_hook(KVT_FAULT_WRITE, "n.*", b_publishes, &x);
	ok(publish(A, st, "dir", &pa) == -EISDIR && x.ran && x.ret == 0 &&
	   kvt_stage_state(st) == KVT_STAGE_OPEN,
	   "A's publication over a directory fails, its version open again; B stored the same bytes meanwhile");
	ok(!x.pub.dedup, "B did not share A's staged bytes (they had no anchor yet)");
	ok(kvt_stage_write(st, other, LEN, 0) == 0 && reads(B, "b1", a),
	   "A writes its version again: B's name still reads its own bytes");
	ok(publish(A, st, "a1", &pa) == 0 && reads(A, "a1", other),
	   "A's new bytes are published under another name");
	kvt_stage_unref(st);
	ok(links_of(a) == 2 && anchored(a), "B's bytes: its reference and their anchor, nothing of A's");
	ok(staging_clean(A), "A's staging holds only its lock and mark");
	kvt_published_clear(&pa);
	kvt_published_clear(&x.pub);
}

/* A's release has looked at the count (1: only the anchor) and is about to
 * unlink the anchor when B stores the same bytes (dedup): B keeps them
 * through its reference, and only the sharing is lost. */
static void test_dedup_during_release(void)
{
	g_autofree char *c = pattern(5);
	g_autofree char *anchor = NULL;
	struct step x = { .name = "s2", .buf = c };
	struct kvt_published pa;
	struct kvt_dir *names = kvt_store_names(A);

	ok(publish_buf(A, "s1", c, &pa) == 0 && anchored(c), "A stores bytes at 's1'");
	anchor = kvt_object_anchor_name(&pa.rec.hash);
	kvt_fault_hook(KVT_FAULT_UNLINK, anchor, b_publishes, &x);
	ok(kvt_name_remove(A, names, "s1") == 0 && x.ran && x.ret == 0 && x.pub.dedup,
	   "A removes 's1'; between its look at the anchor and its unlink, B stores the same bytes (dedup)");
	ok(reads(B, "s2", c) && links_of(c) == 1, "B's name reads them, through its reference alone");
	ok(kvt_name_remove(B, names, "s2") == 0 && links_of(c) == 0,
	   "B removes it: nothing of the bytes is left");
	kvt_published_clear(&pa);
	kvt_published_clear(&x.pub);
}

/* Two mounts release the two references of one object at once: the last
 * look at the anchor's count removes it, whichever mount makes it. */
static void test_two_releases(void)
{
	g_autofree char *d = pattern(6);
	g_autofree char *anchor = NULL;
	struct step x = { .name = "t2" };
	struct kvt_published pa, pb;
	struct kvt_dir *names = kvt_store_names(A);

	ok(publish_buf(A, "t1", d, &pa) == 0 && publish_buf(B, "t2", d, &pb) == 0 && pb.dedup &&
	   links_of(d) == 3, "A and B store the same bytes: one anchor, two references");
	anchor = kvt_object_anchor_name(&pa.rec.hash);
	kvt_fault_hook(KVT_FAULT_STAT, anchor, b_removes, &x);
	ok(kvt_name_remove(A, names, "t1") == 0 && x.ran && x.ret == 0,
	   "A removes 't1'; before its look at the anchor, B removes 't2'");
	ok(links_of(d) == 0, "nothing of the bytes is left");
	kvt_published_clear(&pa);
	kvt_published_clear(&pb);
}

/* A reads a record; before A stats its object, B replaces the record and
 * releases the object.  That is no torn name: A reads the name again. */
static void test_lookup_replaced(void)
{
	g_autofree char *a = pattern(7), *b = pattern(8), *c = pattern(9);
	g_autofree char *ref = NULL;
	struct step x = { .name = "r", .buf = b };
	struct kvt_dir *names = kvt_store_names(A);
	struct kvt_published pa;
	struct kvt_record rec, old;
	struct stat st, ost;
	bool fresh;

	ok(publish_buf(A, "r", a, &pa) == 0, "A stores 'r'");
	ref = kvt_object_ref_name(&pa.rec);
	kvt_record_init(&rec);
	kvt_fault_hook(KVT_FAULT_STAT, ref, b_publishes, &x);
	ok(kvt_name_lookup(A, names, "r", false, -1, &rec, &st, &ost, &fresh) == 0 && x.ran &&
	   x.ret == 0 && fresh && !strcmp(rec.ref, x.pub.rec.ref) && ost.st_size == LEN,
	   "lookup: B replaced the record A read before A looked at its object: A gets B's record");
	ok(links_of(a) == 0, "A's bytes went with its record");

	/* A knows the record of B (its in-memory one), but B has replaced
	 * it again meanwhile. */
	kvt_record_init(&old);
	kvt_record_copy(&old, &rec);
	kvt_published_clear(&x.pub);
	ok(publish_buf(B, "r", c, &x.pub) == 0, "B stores 'r' again");
	ok(kvt_name_lookup(A, names, "r", true, -1, &old, &st, &ost, &fresh) == 0 && fresh &&
	   old.size == LEN && reads(A, "r", c) && strcmp(old.ref, rec.ref) != 0,
	   "lookup of a known record whose object went: the name's new record is read");
	kvt_record_clear(&old);
	kvt_record_clear(&rec);

	/* Torn for real: the record stays, its object does not. */
	{
		g_autofree char *obj = NULL, *anchor = NULL;
		g_autofree char *rpath = g_build_filename(top, "names", "r", NULL);
		struct kvt_record now;

		ok(kvt_name_read(names, "r", &now, NULL) == 0, "the record of 'r' is read");
		obj = object_file(top, &now, false);
		anchor = object_file(top, &now, true);
		ok(unlink(obj) == 0 && unlink(anchor) == 0 &&
		   kvt_name_lookup(A, names, "r", true, -1, &now, &st, &ost, &fresh) ==
			   KVT_LOOKUP_MISSING && !fresh,
		   "a record that stays at its name with its object gone is missing (torn)");
		ok(kvt_name_purge(A, names, "r", &now, true) == 1 && !lower_exists(rpath) &&
		   links_of(c) == 0, "purged: the name goes");
		kvt_record_clear(&now);
	}
	ok(kvt_name_lookup(A, names, "r", false, -1, &rec, &st, &ost, &fresh) == -ENOENT,
	   "lookup of a name that is gone: ENOENT");
	kvt_record_clear(&rec);
	kvt_published_clear(&pa);
	kvt_published_clear(&x.pub);
}

/* A purges an unparsable record; before A takes it off the name, B
 * publishes there.  B's record stays. */
static void test_purge_unparsable_replaced(void)
{
	g_autofree char *b = pattern(10);
	g_autofree char *bad = g_build_filename(top, "names", "bad", NULL);
	struct step x = { .name = "bad", .buf = b };
	struct kvt_dir *names = kvt_store_names(A);

	ok(g_file_set_contents(bad, "not a record\n", -1, NULL), "an unparsable record at 'bad'");
	kvt_fault_hook(KVT_FAULT_RENAME, "bad", b_publishes, &x);
	ok(kvt_name_purge(A, names, "bad", NULL, true) == 0 && x.ran && x.ret == 0,
	   "A purges it; B publishes at 'bad' first: nothing removed");
	ok(reads(A, "bad", b) && links_of(b) == 2, "B's record is at the name, with its object");
	ok(staging_clean(A) && staging_clean(B), "both staging areas hold only their lock and mark");
	kvt_published_clear(&x.pub);
}

/* B's publication, at the @at-th rename call of A's transaction. */
struct nth_step {
	struct step x;
	int at, seen;
};

static void b_publishes_nth(void *arg)
{
	struct nth_step *n = arg;

	if (++n->seen < n->at) {
		kvt_fault_hook(KVT_FAULT_RENAME, "*", b_publishes_nth, n);
		return;
	}
	b_publishes(&n->x);
}

/* A renames the published 'src' over the published 'dst' while B
 * publishes at 'src', before each of A's renames in turn.  Either B came
 * first (its record moves: 'dst' reads B's bytes, 'src' is gone) or the
 * rename did ('dst' reads A's bytes, 'src' B's); B's store is never lost
 * and the old 'dst' goes with its object. */
static void test_rename_while_published_at_source(void)
{
	struct kvt_dir *names = kvt_store_names(A);

	for (int at = 1; at <= 3; at++) {
		g_autofree char *a = pattern(20 + at), *b = pattern(30 + at), *d = pattern(40 + at);
		struct nth_step n = { .x = { .name = "src", .buf = b }, .at = at };
		struct kvt_published pa, pd;
		struct kvt_record replaced;
		g_autofree char *desc = NULL;
		bool b_first, rename_first;
		int ret;

		ok(publish_buf(A, "src", a, &pa) == 0 && publish_buf(A, "dst", d, &pd) == 0,
		   "A stores 'src' and 'dst'");
		kvt_fault_hook(KVT_FAULT_RENAME, "*", b_publishes_nth, &n);
		ret = kvt_name_rename(A, names, "src", names, "dst", 0, &replaced);
		if (ret == 0 && replaced.ref[0])
			kvt_object_release(A, &replaced);
		kvt_record_clear(&replaced);
		b_first = reads(A, "dst", b) && !lower_name_exists("src");
		rename_first = reads(A, "dst", a) && reads(A, "src", b);
		desc = g_strdup_printf("rename, B publishing at its source before A's rename call %d: %s",
				       at, b_first ? "B's record moved" :
				       rename_first ? "B's record stays at 'src'" : "B's store is lost");
		ok(ret == 0 && n.x.ran && n.x.ret == 0 && (b_first || rename_first), desc);
		ok(links_of(d) == 0 && links_of(b) == 2 && links_of(a) == (b_first ? 0 : 2),
		   "... the old 'dst' went whole (and A's 'src' if B replaced it); what is named keeps its reference and anchor");
		ok(staging_clean(A) && staging_clean(B), "... both staging areas hold only their lock and mark");
		kvt_name_remove(A, names, "src");
		kvt_name_remove(A, names, "dst");
		kvt_published_clear(&pa);
		kvt_published_clear(&pd);
		kvt_published_clear(&n.x.pub);
	}
}

/* A sets an xattr of 'x' (kvt_store_rewrite of the record it knows) while
 * B replaces 'x': before A takes the record off the name, and between A's
 * two steps.  B's bytes stay at the name either way, and A's go. */
static void test_rewrite_while_replaced(void)
{
	struct kvt_dir *names = kvt_store_names(A);
	static const char *const where[] = { "w.*", "n.*" };

	for (guint i = 0; i < G_N_ELEMENTS(where); i++) {
		g_autofree char *a = pattern(50 + i), *b = pattern(60 + i);
		struct step x = { .name = "x", .buf = b };
		struct kvt_meta meta = { .mode = 0644 };
		g_autofree char *desc = NULL;
		struct kvt_published pa;
		struct stat st;
		int ret;

		ok(publish_buf(A, "x", a, &pa) == 0, "A stores 'x'");
		pa.rec.xattrs = kvt_xattrs_new();
		g_hash_table_insert(pa.rec.xattrs, g_strdup("user.k"), g_bytes_new("v", 1));
		kvt_fault_hook(KVT_FAULT_RENAME, where[i], b_publishes, &x);
		ret = kvt_store_rewrite(A, names, "x", &pa.rec, &meta, &st);
		desc = g_strdup_printf("A rewrites the record; B replaced it %s: %s",
				       i == 0 ? "first (ESTALE)" : "between A's two steps (B's came later: 0)",
				       g_strerror(-ret));
		ok(x.ran && x.ret == 0 && (i == 0 ? ret == -ESTALE : ret == 0), desc);
		ok(reads(A, "x", b) && reads(B, "x", b) && links_of(b) == 2,
		   "... the name holds B's bytes, with their reference and anchor");
		ok(links_of(a) == 0, "... A's bytes went whole");
		ok(staging_clean(A) && staging_clean(B), "... both staging areas hold only their lock and mark");
		kvt_name_remove(A, names, "x");
		kvt_published_clear(&pa);
		kvt_published_clear(&x.pub);
	}
}

/* Where names change under holds (GlusterFS), another host replaced 'x'
 * as A looked at it, and the file system answered ESTALE: at the hold's
 * stat of the record (the first stat of 'x' is the check for a
 * directory), or at the rename.  A looks again and publishes; nothing
 * is left over. */
static void test_publish_over_stale(void)
{
	static const char *const rules[] = { "stat:ESTALE:name=x:max=2",
					     "rename:ESTALE:name=x:max=1" };

	A->no_exchange = true;
	for (guint i = 0; i < G_N_ELEMENTS(rules); i++) {
		g_autofree char *a = pattern(70 + i), *b = pattern(80 + i);
		g_autoptr(GError) err = NULL;
		g_autofree char *desc = NULL;
		struct kvt_published pa, pb;
		int ret;

		ok(publish_buf(A, "x", a, &pa) == 0, "A stores 'x'");
		ret = kvt_faults_init(rules[i], &err) ? publish_buf(A, "x", b, &pb) : -EINVAL;
		kvt_faults_fini();
		desc = g_strdup_printf("%s: A replaces 'x' (%s)", rules[i], g_strerror(-ret));
		ok(ret == 0 && reads(A, "x", b) && reads(B, "x", b), desc);
		ok(links_of(a) == 0 && links_of(b) == 2 && staging_clean(A),
		   "... the old bytes went, the new have their reference and anchor, staging is clean");
		kvt_name_remove(A, kvt_store_names(A), "x");
		kvt_published_clear(&pa);
		kvt_published_clear(&pb);
	}
	A->no_exchange = false;
}

static void count_problem(const struct kvt_problem_report *p, void *data)
{
	printf("# %s %s: %s\n", kvt_problem_name(p->kind), p->path, p->detail);
	(void)data;
}

int main(void)
{
	g_autofree char *dir = g_dir_make_tmp("kvt-mounts-XXXXXX", NULL);
	g_autoptr(GError) err = NULL;
	struct kvt_check_opts o = { .problem = count_problem };
	struct kvt_check_result res;

	printf("1..%d\n", 34 + 3 * 4 + 2 * 5 + 2 * 3);
	top = dir;
	A = kvt_store_open(top, &err);
	B = A ? kvt_store_open(top, &err) : NULL;
	ok(A && B && strcmp(A->mount_id, B->mount_id), "two stores open on one lower directory");
	if (!A || !B)
		return 1;
	test_replaced_before_unstage();
	test_failed_publication_not_shared();
	test_dedup_during_release();
	test_two_releases();
	test_lookup_replaced();
	test_purge_unparsable_replaced();
	test_rename_while_published_at_source();
	test_rewrite_while_replaced();
	test_publish_over_stale();
	kvt_store_close(A);
	kvt_store_close(B);
	ok(kvt_check(top, &o, &res, &err) && res.problems == 0 && res.errors == 0,
	   "closed, the store is clean: no orphan, nothing torn");
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", top);

		ok(system(cmd) == 0, "cleanup");
	}
	return n_fail ? 1 : 0;
}
