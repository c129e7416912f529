/* Unit tests of the store checker (check.h), without FUSE: a store made
 * through the store API, damaged by hand, checked, repaired.  Prints TAP. */
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
#include "store.h"
#include "unit.h"

#define SIZE 65536
/* The marker this kvtierfs writes. */
#define MARKER_NOW KVT_MARKER " " G_STRINGIFY(KVT_FORMAT_VERSION) "\n"

static void diag_lines(GPtrArray *lines)
{
	for (guint i = 0; i < lines->len; i++)
		printf("#   %s\n", (char *)lines->pdata[i]);
}

static bool reads_back(const char *top, const char *name, char fill, size_t len)
{
	g_autofree char *rpath = g_build_filename(top, "names", name, NULL);
	g_autofree char *body = NULL;
	g_autofree char *opath = NULL;
	g_autofree char *data = NULL;
	struct kvt_record rec;
	gsize blen, dlen;
	bool good;

	if (!g_file_get_contents(rpath, &body, &blen, NULL) ||
	    kvt_record_parse(body, blen, &rec) < 0)
		return false;
	opath = object_file(top, &rec, false);
	good = rec.size == len && g_file_get_contents(opath, &data, &dlen, NULL) &&
	       dlen == len;
	for (size_t i = 0; good && i < len; i++)
		good = data[i] == fill;
	kvt_record_clear(&rec);
	return good;
}

/* "objects/<ab>/<hash>.<ref>" (or the anchor) of the record names/@name. */
static char *object_of(const char *top, const char *name, bool anchor)
{
	g_autofree char *rpath = g_build_filename(top, "names", name, NULL);
	g_autofree char *body = NULL;
	g_autofree char *path = NULL;
	struct kvt_record rec;
	gsize blen;

	if (!g_file_get_contents(rpath, &body, &blen, NULL) ||
	    kvt_record_parse(body, blen, &rec) < 0)
		return g_strdup("objects/NO-RECORD");
	path = object_file("", &rec, anchor);
	kvt_record_clear(&rec);
	return g_steal_pointer(&path);
}

struct seen {
	GPtrArray *lines;  /* "<keyword> <path>" */
	GPtrArray *errors;
};

static void on_problem(const struct kvt_problem_report *p, void *data)
{
	struct seen *s = data;

	g_ptr_array_add(s->lines, g_strdup_printf("%s %s", kvt_problem_name(p->kind), p->path));
}

static void on_error(const char *msg, void *data)
{
	struct seen *s = data;

	g_ptr_array_add(s->errors, g_strdup(msg));
}

static bool run_check(const char *top, bool repair, struct seen *s,
		      struct kvt_check_result *res, GError **err)
{
	struct kvt_check_opts o = {
		.repair = repair, .problem = on_problem, .error = on_error, .data = s,
	};

	if (s->lines)
		g_ptr_array_unref(s->lines);
	if (s->errors)
		g_ptr_array_unref(s->errors);
	s->lines = g_ptr_array_new_with_free_func(g_free);
	s->errors = g_ptr_array_new_with_free_func(g_free);
	return kvt_check(top, &o, res, err);
}

static int cmp_str(gconstpointer a, gconstpointer b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The problems found are exactly @want (NULL-terminated), in any order. */
static bool same_set(GPtrArray *lines, const char *const *want)
{
	g_autoptr(GPtrArray) w = g_ptr_array_new();
	g_autoptr(GPtrArray) got = g_ptr_array_new();

	for (guint i = 0; i < lines->len; i++)
		g_ptr_array_add(got, lines->pdata[i]);
	for (; *want; want++)
		g_ptr_array_add(w, (gpointer)*want);
	if (w->len != got->len)
		return false;
	g_ptr_array_sort(w, cmp_str);
	g_ptr_array_sort(got, cmp_str);
	for (guint i = 0; i < w->len; i++)
		if (strcmp(w->pdata[i], got->pdata[i]))
			return false;
	return true;
}

static void put_file(const char *top, const char *rel, const char *data, gssize len)
{
	g_autofree char *p = g_build_filename(top, rel, NULL);

	if (!g_file_set_contents(p, data, len, NULL))
		printf("# cannot write %s\n", p);
}

/* A listing of every path with its size: what a dry run must not change. */
static void snapshot(const char *top, const char *rel, GString *out)
{
	g_autofree char *dir = g_build_filename(top, rel, NULL);
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	const char *e;

	while (d && (e = g_dir_read_name(d)))
		g_ptr_array_add(names, g_strdup(e));
	g_ptr_array_sort(names, cmp_str);
	for (guint i = 0; i < names->len; i++) {
		g_autofree char *child = g_build_filename(rel, names->pdata[i], NULL);
		g_autofree char *p = g_build_filename(top, child, NULL);
		struct stat st;

		if (lstat(p, &st))
			continue;
		g_string_append_printf(out, "%s %o %lld\n", child, st.st_mode,
				       (long long)st.st_size);
		if (S_ISDIR(st.st_mode))
			snapshot(top, child, out);
	}
}

int main(void)
{
	g_autofree char *top = g_dir_make_tmp("kvt-check-XXXXXX", NULL);
	g_autofree char *other = g_dir_make_tmp("kvt-check-other-XXXXXX", NULL);
	g_autofree char *missing = g_build_filename(other, "missing", NULL);
	g_autoptr(GError) err = NULL;
	g_autoptr(GString) before = g_string_new(NULL);
	g_autoptr(GString) after = g_string_new(NULL);
	struct seen seen = { 0 };
	struct kvt_check_result res;
	struct kvt_store *s;
	bool good;

	printf("1..41\n");

	/* ---- a clean store: 8 names, two of them sharing one object */
	s = kvt_store_open(top, &err);
	good = s != NULL;
	for (int i = 0; good && i < 8; i++) {
		g_autofree char *name = g_strdup_printf("n%d", i);

		good = store_bytes(s, name, 'a' + i, SIZE, NULL) == 0;
	}
	good = good && kvt_dir_mkdir(kvt_store_names(s), "sub", 0755) == 0 &&
	       store_bytes(s, "sub/dup", 'h', SIZE, NULL) == 0 &&
	       store_bytes(s, "sub/torn-dup", 'c', SIZE, NULL) == 0;
	ok(good, "a store with 10 names, 8 contents");

	ok(!run_check(top, false, &seen, &res, &err) && err &&
	   err->code == KVT_CHECK_ERROR_BUSY && strstr(err->message, "in use"),
	   "a store a live mount uses is refused (BUSY, says why)");
	if (err)
		printf("# %s\n", err->message);
	g_clear_error(&err);
	kvt_store_close(s);

	good = run_check(top, false, &seen, &res, &err);
	ok(good && res.problems == 0 && res.errors == 0 && seen.lines->len == 0,
	   "the unmounted store is clean");
	diag_lines(seen.lines);
	ok(res.names == 10 && res.objects == 8,
	   "it counts 10 names and 8 objects (a shared object once)");

	/* ---- refusals */
	ok(!run_check(missing, false, &seen, &res, &err) && err &&
	   err->code == KVT_CHECK_ERROR_STORE, "a missing LOWERDIR is refused");
	g_clear_error(&err);
	ok(!run_check(other, false, &seen, &res, &err) && err &&
	   strstr(err->message, "not a kvtierfs store"),
	   "an empty directory is not a store (fsck makes none)");
	g_clear_error(&err);
	put_file(other, KVT_MARKER, "kvtierfs-store 3\n", -1);
	ok(!run_check(other, false, &seen, &res, &err) && err &&
	   strstr(err->message, "format 3"), "a store format this kvtierfs does not read is refused");
	g_clear_error(&err);
	put_file(other, KVT_MARKER, "hello\n", -1);
	ok(!run_check(other, false, &seen, &res, &err) && err &&
	   strstr(err->message, "marker"), "a garbled marker is refused");
	g_clear_error(&err);
	/* Both once read as format 1 (sscanf's wrapped int, its stop at the
	 * first non-digit): tests/fuzz/corpus/marker/regress-*. */
	put_file(other, KVT_MARKER, "kvtierfs-store 4294967297\n", -1);
	ok(!run_check(other, false, &seen, &res, &err) && err &&
	   strstr(err->message, "marker"), "a marker whose version overflows an int is garbled");
	g_clear_error(&err);
	put_file(other, KVT_MARKER, "kvtierfs-store 1t\n", -1);
	ok(!run_check(other, false, &seen, &res, &err) && err &&
	   strstr(err->message, "marker"), "a marker with bytes after its version is garbled");
	g_clear_error(&err);
	put_file(other, KVT_MARKER, "kvtierfs-store 1\n", -1);
	ok(!run_check(other, false, &seen, &res, &err) && err &&
	   strstr(err->message, "damaged store"),
	   "a marker without objects/, names/, staging/ is a damaged store");
	g_clear_error(&err);

	/* ---- damage */
	{
		g_autofree char *o_trunc = object_of(top, "n0", false);
		g_autofree char *a_trunc = object_of(top, "n0", true);
		g_autofree char *o_flip = object_of(top, "n1", false);
		g_autofree char *a_flip = object_of(top, "n1", true);
		g_autofree char *o_shared = object_of(top, "sub/torn-dup", false);
		g_autofree char *o_shared2 = object_of(top, "n2", false);
		g_autofree char *a_shared = object_of(top, "n2", true);
		g_autofree char *o_gone = object_of(top, "n3", false);
		g_autofree char *a_gone = object_of(top, "n3", true);
		g_autofree char *o_garbage = object_of(top, "n4", false);
		g_autofree char *a_garbage = object_of(top, "n4", true);
		g_autofree char *o_size = object_of(top, "n5", false);
		g_autofree char *a_size = object_of(top, "n5", true);
		g_autofree char *o_n6 = object_of(top, "n6", false);
		g_autofree char *a_n6 = object_of(top, "n6", true);
		g_autofree char *o_dup = object_of(top, "sub/dup", false);
		g_autofree char *p = NULL;
		g_autofree char *orphan = NULL;
		g_autofree char *stray = NULL;
		g_autofree char *body = NULL;
		g_autoptr(GString) enc = NULL;
		struct kvt_record rec;
		gsize len;
		int fd;
		char byte;

		p = g_build_filename(top, o_trunc, NULL);
		good = truncate(p, SIZE - 1) == 0;
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, o_flip, NULL);
		fd = open(p, O_RDWR);
		good = good && fd >= 0 && pread(fd, &byte, 1, 100) == 1;
		byte ^= 0x10;
		good = good && pwrite(fd, &byte, 1, 100) == 1;
		close(fd);
		g_clear_pointer(&p, g_free);
		/* n2 and sub/torn-dup share bytes: one object, torn for both */
		p = g_build_filename(top, o_shared, NULL);
		good = good && truncate(p, 10) == 0;
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, o_gone, NULL);
		good = good && unlink(p) == 0;
		g_clear_pointer(&p, g_free);
		put_file(top, "names/n4", "garbage\n", -1);
		/* n5: a well-formed record whose size is wrong, object intact */
		p = g_build_filename(top, "names", "n5", NULL);
		good = good && g_file_get_contents(p, &body, &len, NULL) &&
		       kvt_record_parse(body, len, &rec) == 0;
		rec.size = SIZE + 1;
		enc = kvt_record_encode(&rec);
		kvt_record_clear(&rec);
		put_file(top, "names/n5", enc->str, enc->len);
		g_clear_pointer(&p, g_free);
		/* an orphan: n6's object copied to a new reference */
		orphan = g_strdup_printf("%s.feedbeef", a_n6);
		p = g_strdup_printf("cp '%s/%s' '%s/%s'", top, a_n6, top, orphan);
		good = good && system(p) == 0;
		g_clear_pointer(&p, g_free);
		/* unknowns, stale staging, a shared reference */
		stray = g_strdup_printf("%.10s/README", o_n6);
		put_file(top, stray, "x", 1);
		p = g_build_filename(top, "names", "link", NULL);
		good = good && symlink("n7", p) == 0;
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, "names", "n7", NULL);
		g_clear_pointer(&body, g_free);
		good = good && g_file_get_contents(p, &body, &len, NULL);
		put_file(top, "names/copy-of-n7", body, len);
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, "staging", "dead.1.x", NULL);
		good = good && g_mkdir(p, 0700) == 0;
		put_file(top, "staging/dead.1.x/lock", "", 0);
		put_file(top, "staging/dead.1.x/d.1", "partial", -1);
		g_clear_pointer(&p, g_free);
		put_file(top, "stray-at-top", "", 0);
		ok(good, "damage injected: 12 kinds");

		{
			g_autofree char *n_o_trunc = g_strdup_printf("torn-hash %s", o_trunc);
			g_autofree char *n_a_trunc = g_strdup_printf("torn-hash %s", a_trunc);
			g_autofree char *n_o_flip = g_strdup_printf("torn-hash %s", o_flip);
			g_autofree char *n_a_flip = g_strdup_printf("torn-hash %s", a_flip);
			g_autofree char *n_o_sh = g_strdup_printf("torn-hash %s", o_shared);
			g_autofree char *n_o_sh2 = g_strdup_printf("torn-hash %s", o_shared2);
			g_autofree char *n_a_sh = g_strdup_printf("torn-hash %s", a_shared);
			g_autofree char *n_a_gone = g_strdup_printf("orphan %s", a_gone);
			g_autofree char *n_o_garb = g_strdup_printf("orphan %s", o_garbage);
			g_autofree char *n_a_garb = g_strdup_printf("orphan %s", a_garbage);
			g_autofree char *n_o_size = g_strdup_printf("orphan %s", o_size);
			g_autofree char *n_a_size = g_strdup_printf("orphan %s", a_size);
			g_autofree char *n_orphan = g_strdup_printf("orphan %s", orphan);
			g_autofree char *n_stray = g_strdup_printf("unknown %s", stray);
			const char *const want[] = {
				n_o_trunc, n_a_trunc, "torn-size names/n0",
				n_o_flip, n_a_flip, "torn-hash names/n1",
				n_o_sh, n_o_sh2, n_a_sh, "torn-size names/n2",
				"torn-size names/sub/torn-dup",
				"dangling names/n3", n_a_gone,
				"unparsable names/n4", n_o_garb, n_a_garb,
				"torn-size names/n5", n_o_size, n_a_size,
				n_orphan,
				n_stray, "unknown names/link", "unknown stray-at-top",
				"shared-ref names/n7",
				"stale-staging staging/dead.1.x",
				NULL,
			};

			snapshot(top, "", before);
			good = run_check(top, false, &seen, &res, &err);
			ok(good && same_set(seen.lines, want) && res.errors == 0,
			   "dry run: exactly the damage is reported");
			if (!same_set(seen.lines, want))
				diag_lines(seen.lines);
			ok(res.problems == G_N_ELEMENTS(want) - 1 && res.repaired == 0,
			   "dry run: 25 problems, none repaired");
			snapshot(top, "", after);
			ok(!strcmp(before->str, after->str), "dry run: the store is unchanged");
			ok(res.names == 11, "dry run: 11 regular files under names/");
			{
				bool intact = true;

				for (guint i = 0; i < seen.lines->len; i++)
					if (strstr(seen.lines->pdata[i], "names/sub/dup") ||
					    strstr(seen.lines->pdata[i], o_dup))
						intact = false;
				ok(intact, "the intact name that shares no torn bytes is not reported");
			}
		}

		good = run_check(top, true, &seen, &res, &err);
		ok(good && res.problems == 25 && res.repaired == 21 && res.errors == 0,
		   "repair: 25 problems, 21 repaired (4 unknown or shared left)");
		if (!good || res.repaired != 21)
			diag_lines(seen.lines);
		p = g_build_filename(top, "staging", "dead.1.x", NULL);
		ok(!g_file_test(p, G_FILE_TEST_EXISTS),
		   "repair: the stale staging directory is gone");
		g_clear_pointer(&p, g_free);
		good = run_check(top, false, &seen, &res, &err);
		{
			g_autofree char *n_stray = g_strdup_printf("unknown %s", stray);
			const char *const want[] = {
				n_stray, "unknown names/link", "unknown stray-at-top",
				"shared-ref names/n7", NULL,
			};

			ok(good && same_set(seen.lines, want),
			   "after repair only what repair leaves alone is left");
			diag_lines(seen.lines);
		}
		ok(reads_back(top, "n6", 'g', SIZE) && reads_back(top, "n7", 'h', SIZE) &&
		   reads_back(top, "sub/dup", 'h', SIZE) &&
		   reads_back(top, "copy-of-n7", 'h', SIZE),
		   "the intact names read back their bytes");
		{
			const char *gone[] = { "n0", "n1", "n2", "n3", "n4", "n5", "sub/torn-dup" };
			bool all = true;

			for (size_t i = 0; i < G_N_ELEMENTS(gone); i++) {
				g_autofree char *q = g_build_filename(top, "names", gone[i], NULL);

				all = all && !g_file_test(q, G_FILE_TEST_EXISTS);
			}
			ok(all, "the damaged names are gone");
		}
		p = g_build_filename(top, o_dup, NULL);
		ok(g_file_test(p, G_FILE_TEST_IS_REGULAR),
		   "the object of the intact dedup name stays");
		g_clear_pointer(&p, g_free);

		/* the admin removes what fsck leaves to them */
		p = g_build_filename(top, stray, NULL);
		unlink(p);
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, "names", "link", NULL);
		unlink(p);
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, "stray-at-top", NULL);
		unlink(p);
		g_clear_pointer(&p, g_free);
		p = g_build_filename(top, "names", "copy-of-n7", NULL);
		unlink(p);
		g_clear_pointer(&p, g_free);
	}
	good = run_check(top, true, &seen, &res, &err);
	ok(good && res.problems == 0, "then the store is clean");
	diag_lines(seen.lines);

	/* ---- staging: a dead one without a lock file, a live one */
	{
		g_autofree char *p = g_build_filename(top, "staging", "nolock.2.y", NULL);

		g_mkdir(p, 0700);
		good = run_check(top, false, &seen, &res, &err) && res.problems == 1 &&
		       seen.lines->len == 1 &&
		       !strcmp(seen.lines->pdata[0], "stale-staging staging/nolock.2.y");
		ok(good, "a staging directory without a lock file is stale");
		good = run_check(top, true, &seen, &res, &err) && res.repaired == 1 &&
		       !g_file_test(p, G_FILE_TEST_EXISTS);
		ok(good, "and removed on repair");
	}
	s = kvt_store_open(top, &err);
	ok(s && store_bytes(s, "new", 'z', 4096, NULL) == 0,
	   "a mount opens the repaired store and stores into it");
	good = !run_check(top, true, &seen, &res, &err) && err &&
	       err->code == KVT_CHECK_ERROR_BUSY;
	g_clear_error(&err);
	ok(good && seen.lines->len == 0, "--repair refuses too while it is mounted");
	kvt_store_close(s);
	good = run_check(top, false, &seen, &res, &err) && res.problems == 0 &&
	       res.names == 4;
	ok(good && reads_back(top, "new", 'z', 4096), "unmounted again: clean, 4 names");
	diag_lines(seen.lines);

	/* ---- a record removed by hand leaves its object orphaned */
	{
		g_autofree char *o = object_of(top, "new", false);
		g_autofree char *a = object_of(top, "new", true);
		g_autofree char *p = g_build_filename(top, "names", "new", NULL);
		g_autofree char *w1 = g_strdup_printf("orphan %s", o);
		g_autofree char *w2 = g_strdup_printf("orphan %s", a);
		const char *const want[] = { w2, w1, NULL };

		unlink(p);
		good = run_check(top, true, &seen, &res, &err) &&
		       same_set(seen.lines, want) && res.repaired == 2;
		ok(good, "an unlinked record's reference and anchor are orphans, removed");
		diag_lines(seen.lines);
		good = g_strcmp0(seen.lines->pdata[0], w2) == 0;
		ok(good, "in byte order: the anchor before its reference");
	}

	/* ---- a lost marker: a power cut before it was synced */
	{
		g_autofree char *m = g_build_filename(top, KVT_MARKER, NULL);
		g_autofree char *body = NULL;
		const char *const want[] = { "marker " KVT_MARKER, NULL };

		good = truncate(m, 0) == 0 && run_check(top, false, &seen, &res, &err) &&
		       same_set(seen.lines, want) && res.problems == 1 && res.repaired == 0 &&
		       res.names == 3;
		ok(good, "an empty marker in a store: reported (marker), the rest checked");
		diag_lines(seen.lines);
		if (err)
			printf("# %s\n", err->message);
		g_clear_error(&err);
		good = g_file_get_contents(m, &body, NULL, NULL) && !body[0];
		ok(good, "dry run: the marker stays empty");
		g_clear_pointer(&body, g_free);
		good = run_check(top, true, &seen, &res, &err) && same_set(seen.lines, want) &&
		       res.repaired == 1 && g_file_get_contents(m, &body, NULL, NULL) &&
		       !strcmp(body, MARKER_NOW);
		ok(good, "--repair writes it again");
		g_clear_pointer(&body, g_free);
		s = kvt_store_open(top, &err);
		ok(s && reads_back(top, "n6", 'g', SIZE), "and the store opens again");
		g_clear_error(&err);
		kvt_store_close(s);

		good = unlink(m) == 0 && run_check(top, true, &seen, &res, &err) &&
		       same_set(seen.lines, want) && res.repaired == 1 &&
		       g_file_get_contents(m, &body, NULL, NULL) && !strcmp(body, MARKER_NOW);
		ok(good, "a missing marker: reported and written again");
		g_clear_pointer(&body, g_free);
		put_file(top, KVT_MARKER, "hello\n", -1);
		good = run_check(top, true, &seen, &res, &err) && same_set(seen.lines, want) &&
		       res.repaired == 1 && g_file_get_contents(m, &body, NULL, NULL) &&
		       !strcmp(body, MARKER_NOW);
		ok(good, "a garbage marker: the same");
		g_clear_error(&err);
	}
	/* ---- without the rest of a store, no marker is made */
	{
		g_autofree char *d = g_build_filename(other, "areas", NULL);
		g_autofree char *p = NULL;
		const char *areas[] = { "objects", "names", "staging" };
		bool made = g_mkdir(d, 0700) == 0;

		for (size_t i = 0; i < G_N_ELEMENTS(areas); i++) {
			g_autofree char *a = g_build_filename(d, areas[i], NULL);

			made = made && g_mkdir(a, 0755) == 0;
		}
		good = made && run_check(d, true, &seen, &res, &err) &&
		       res.problems == 1 && res.repaired == 1;
		ok(good, "three empty areas without a marker: a store cut right after it was made, repaired");
		g_clear_error(&err);
		p = g_build_filename(d, KVT_MARKER, NULL);
		unlink(p);
		put_file(d, "names/notes.txt", "not a record\n", -1);
		good = !run_check(d, true, &seen, &res, &err) && err &&
		       err->code == KVT_CHECK_ERROR_STORE &&
		       strstr(err->message, "does not look like") && !lower_exists(p);
		ok(good, "names/ holding files but no record: refused, no marker written");
		if (err)
			printf("# %s\n", err->message);
		g_clear_error(&err);
		g_clear_pointer(&p, g_free);
		p = g_build_filename(d, "names", "notes.txt", NULL);
		unlink(p);
		g_clear_pointer(&p, g_free);
		put_file(d, "objects/README", "x", 1);
		p = g_build_filename(d, KVT_MARKER, NULL);
		good = !run_check(d, true, &seen, &res, &err) && err &&
		       strstr(err->message, "does not look like") && !lower_exists(p);
		ok(good, "objects/ holding something else than fan-out directories: refused");
		g_clear_error(&err);
	}

	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s' '%s'", top, other);

		ok(system(cmd) == 0, "cleanup");
	}
	g_ptr_array_unref(seen.lines);
	g_ptr_array_unref(seen.errors);
	return n_fail ? 1 : 0;
}
