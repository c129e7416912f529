/* Unit tests of the door's fault layer (fault.h): the KVT_FAULTS spec
 * parser and its errors, when rules fire (every, after, max, probability
 * with a seed, names, first rule wins, several threads), the door's calls
 * failing as told, and the store leaving nothing behind when a
 * publication meets an injected error at each of its steps.  Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"
#include "store-int.h"
#include "verify.h"
#include "unit.h"

static const char *top;

static bool init(const char *spec)
{
	g_autoptr(GError) err = NULL;
	bool good = kvt_faults_init(spec, &err);

	if (!good)
		printf("# KVT_FAULTS=%s: %s\n", spec, err->message);
	return good;
}

/* The calls 1..@n of @op on @name that fail, as a string "3 6 9". */
static char *failing(enum kvt_fault_op op, const char *name, int n, int *err)
{
	GString *s = g_string_new(NULL);

	*err = 0;
	for (int i = 1; i <= n; i++) {
		int f = kvt_fault(op, name);

		if (f) {
			g_string_append_printf(s, "%s%d", s->len ? " " : "", i);
			*err = f;
		}
	}
	return g_string_free(s, FALSE);
}

static void test_parse(void)
{
	static const char *const bad[] = {
		"rename", "renam:EIO", "rename:EFOO", "rename:EIO:every=0",
		"rename:EIO:p=2", "rename:EIO:p=0", "rename:EIO:1/0", "rename:EIO:foo=1",
		"rename:EIO:name=", "rename:EIO:name=!", "seed=x,rename:EIO", "seed=3",
		"rename:EIO:every=3x", ",", "rename:EIO,,stat:EIO", "write:EIO:max=0",
		"link:0ms", "link:ms", "link:5s", "link:60001ms", "link:-3ms",
	};
	g_autofree char *summary = NULL;
	bool all_bad = true;

	ok(init(NULL) && !kvt_faults_on && init("") && !kvt_faults_on &&
	   !kvt_fault(KVT_FAULT_RENAME, "x") && !kvt_faults_summary(),
	   "no KVT_FAULTS, or an empty one: nothing armed, no call fails");
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_autoptr(GError) e = NULL;

		if (kvt_faults_init(bad[i], &e) || !e || kvt_faults_on) {
			printf("# accepted: %s\n", bad[i]);
			all_bad = false;
		}
	}
	ok(all_bad, "bad specs are refused with a message, and nothing is armed");
	{
		g_autoptr(GError) e = NULL;

		kvt_faults_init("stat:EIO,rename:EWHAT:3", &e);
		ok(e && strstr(e->message, "rename:EWHAT:3") && strstr(e->message, "EWHAT"),
		   "the message names the rule and the part that is wrong");
		if (e)
			printf("# %s\n", e->message);
	}
	ok(init("rename:ENOSPC:1/50,link:EIO:name=*.tmp*,write:EIO:3") && kvt_faults_on &&
	   (summary = kvt_faults_summary()) &&
	   !strcmp(summary, "rename:ENOSPC:1/50: 0 faults in 0 calls\n"
			    "link:EIO:name=*.tmp*: 0 faults in 0 calls\n"
			    "write:EIO:3: 0 faults in 0 calls"),
	   "a spec of three rules is armed, and summed up one rule a line");
	ok(init("write:28:2") && !kvt_fault(KVT_FAULT_WRITE, NULL) &&
	   kvt_fault(KVT_FAULT_WRITE, NULL) == -ENOSPC, "an errno may be a number");
	ok(init("read:EDQUOT") && kvt_fault(KVT_FAULT_READ, NULL) == -EDQUOT &&
	   kvt_fault(KVT_FAULT_READ, "x") == -EDQUOT && kvt_fault(KVT_FAULT_READ, NULL) == -EDQUOT,
	   "no condition: every call fails");
	kvt_faults_fini();
	ok(!kvt_faults_on && !kvt_fault(KVT_FAULT_READ, NULL) && !kvt_faults_summary(),
	   "disarmed: nothing fails");
}

static void test_when(void)
{
	g_autofree char *a = NULL, *b = NULL, *c = NULL;
	g_autofree char *summary = NULL;
	int err;

	ok(init("rename:EIO:every=3") &&
	   !strcmp((a = failing(KVT_FAULT_RENAME, "x", 10, &err)), "3 6 9") && err == -EIO &&
	   !kvt_fault(KVT_FAULT_LINK, "x"),
	   "every=3: the 3rd, 6th, 9th call, of that op only");
	ok(init("stat:EIO:after=2:max=3") &&
	   !strcmp((b = failing(KVT_FAULT_STAT, "x", 10, &err)), "3 4 5"),
	   "after=2:max=3: calls 3, 4, 5");
	ok(init("stat:EIO:after=2:every=2") &&
	   !strcmp((c = failing(KVT_FAULT_STAT, "x", 9, &err)), "4 6 8"),
	   "after=2:every=2: calls 4, 6, 8");
	ok(init("create:ENOSPC:name=d.*") && kvt_fault(KVT_FAULT_CREATE, "d.1f") == -ENOSPC &&
	   !kvt_fault(KVT_FAULT_CREATE, "n.1f") && !kvt_fault(KVT_FAULT_CREATE, NULL) &&
	   !kvt_fault(KVT_FAULT_OPEN, "d.1f"),
	   "name=d.*: only names that match; a call on no name never");
	ok(init("read:EIO:name=!*.bin") && kvt_fault(KVT_FAULT_READ, "ab.cd") == -EIO &&
	   !kvt_fault(KVT_FAULT_READ, "x.bin") && !kvt_fault(KVT_FAULT_READ, NULL),
	   "name=!*.bin: only names that do not match");
	ok(init("rename:ENOSPC:name=*.bin") &&
	   kvt_fault2(KVT_FAULT_RENAME, "n.1", "k.bin") == -ENOSPC &&
	   kvt_fault2(KVT_FAULT_RENAME, "k.bin", "x.2") == -ENOSPC &&
	   !kvt_fault2(KVT_FAULT_RENAME, "n.1", "k.tmp"),
	   "link and rename: either name matches");
	ok(init("opendir:EIO:name=a*c") && kvt_fault(KVT_FAULT_OPENDIR, "a/b/c") == -EIO,
	   "'*' matches '/' in a path");
	ok(init("stat:EIO:every=2,stat:ENOSPC") &&
	   kvt_fault(KVT_FAULT_STAT, "x") == -ENOSPC && kvt_fault(KVT_FAULT_STAT, "x") == -EIO &&
	   kvt_fault(KVT_FAULT_STAT, "x") == -ENOSPC && (summary = kvt_faults_summary()) &&
	   !strcmp(summary, "stat:EIO:every=2: 1 faults in 3 calls\n"
			    "stat:ENOSPC: 2 faults in 2 calls"),
	   "the first rule that fires decides; the next one sees only the other calls");
	{
		gint64 t0 = g_get_monotonic_time();
		bool good = init("link:30ms:max=2,link:EIO") && !kvt_fault(KVT_FAULT_LINK, "a") &&
			    !kvt_fault(KVT_FAULT_LINK, "b");
		gint64 waited = g_get_monotonic_time() - t0;

		printf("# two delayed calls: %" G_GINT64_FORMAT " us\n", waited);
		ok(good && waited >= 60000 && kvt_fault(KVT_FAULT_LINK, "c") == -EIO &&
		   !kvt_fault(KVT_FAULT_STAT, "a"),
		   "a delay (link:30ms) makes the call wait, then go on");
	}
	ok(init("any:EROFS") && kvt_fault(KVT_FAULT_MKDIR, "x") == -EROFS &&
	   kvt_fault(KVT_FAULT_SYNC, NULL) == -EROFS, "any: every op");
	{
		const char *names[] = { "lock", "d.1", "x.bin" };

		ok(init("list:EIO:name=*.bin") && kvt_fault_check_names(KVT_FAULT_LIST, names, 3) == -EIO &&
		   !kvt_fault_check_names(KVT_FAULT_LIST, names, 2) &&
		   !kvt_fault_check_names(KVT_FAULT_LIST, names, 0),
		   "a listing matches when one of its names does");
	}
	{
		int n = 20000, hits = 0, same = 0;
		g_autofree bool *first = g_new0(bool, n);

		init("seed=1,write:EIO:p=1/4");
		for (int i = 0; i < n; i++)
			hits += first[i] = kvt_fault(KVT_FAULT_WRITE, NULL) != 0;
		init("seed=1,write:EIO:p=0.25");
		for (int i = 0; i < n; i++)
			same += first[i] == (kvt_fault(KVT_FAULT_WRITE, NULL) != 0);
		ok(hits > n / 4 - n / 40 && hits < n / 4 + n / 40 && same == n,
		   "p=1/4: about a quarter of the calls, the same ones for the same seed");
		printf("# %d of %d calls failed\n", hits, n);
		same = 0;
		init("seed=2,write:EIO:p=1/4");
		for (int i = 0; i < n; i++)
			same += first[i] == (kvt_fault(KVT_FAULT_WRITE, NULL) != 0);
		ok(same < n - n / 10, "another seed picks other calls");
	}
}

static gpointer hammer(gpointer data)
{
	int *faults = data;

	for (int i = 0; i < 10000; i++)
		if (kvt_fault(KVT_FAULT_WRITE, "d.1"))
			g_atomic_int_inc(faults);
	return NULL;
}

static void test_threads(void)
{
	GThread *t[8];
	int every = 0, capped = 0;

	init("write:EIO:every=10");
	for (int i = 0; i < 8; i++)
		t[i] = g_thread_new("hammer", hammer, &every);
	for (int i = 0; i < 8; i++)
		g_thread_join(t[i]);
	init("write:EIO:max=100");
	for (int i = 0; i < 8; i++)
		t[i] = g_thread_new("hammer", hammer, &capped);
	for (int i = 0; i < 8; i++)
		g_thread_join(t[i]);
	ok(every == 8000 && capped == 100,
	   "8 threads x 10000 calls: every=10 fails exactly 8000, max=100 exactly 100");
}

static void test_door(void)
{
	g_autofree char *dir = g_dir_make_tmp("kvt-fault-door-XXXXXX", NULL);
	g_autofree char *tmp = g_build_filename(dir, "x.tmp", NULL);
	g_autofree char *bin = g_build_filename(dir, "x.bin", NULL);
	g_autoptr(kvt_dir) d = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	int fd, ret;

	g_file_set_contents(tmp, "x", 1, NULL);
	kvt_faults_fini();
	kvt_dir_open_root(dir, &d);
	init("rename:ENOSPC:name=*.bin");
	ok(d && kvt_dir_rename(d, "x.tmp", d, "x.bin", 0) == -ENOSPC && lower_exists(tmp) &&
	   !lower_exists(bin), "rename onto *.bin fails with ENOSPC and moves nothing");
	ok(kvt_dir_rename(d, "x.tmp", d, "y", 0) == 0 && kvt_dir_rename(d, "y", d, "x.tmp", 0) == 0,
	   "other renames work");
	init("list:EIO:name=*.bin");
	ents = kvt_dir_list(d, false, &ret);
	ok(ents && ents->len == 1 && ret == 0, "a listing without a *.bin works");
	g_clear_pointer(&ents, g_ptr_array_unref);
	g_file_set_contents(bin, "x", 1, NULL);
	ents = kvt_dir_list(d, false, &ret);
	ok(!ents && ret == -EIO, "a listing with a *.bin fails with EIO");
	init("create:ENOSPC:name=*.tmp");
	fd = kvt_dir_open_file(d, "z.tmp", O_WRONLY | O_CREAT | O_EXCL, 0600, NULL);
	ret = kvt_dir_open_file(d, "x.tmp", O_RDONLY, 0, NULL);
	ok(fd == -ENOSPC && ret >= 0 && kvt_dir_stat(d, "z.tmp", &(struct stat){ 0 }) == -ENOENT,
	   "create fails with ENOSPC and creates nothing; an open without O_CREAT works");
	if (ret >= 0)
		close(ret);
	kvt_faults_fini();
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);

		ok(system(cmd) == 0, "cleanup of the door's directory");
	}
}

/* The door's calls on an open file: each fails at its fault point, by
 * its op and the name it is given, before it does anything. */
static void test_open_file(void)
{
	g_autofree char *dir = g_dir_make_tmp("kvt-fault-file-XXXXXX", NULL);
	g_autoptr(kvt_dir) d = NULL;
	struct stat st = { 0 };
	int fd = -1, other = -1;
	bool good;

	kvt_faults_fini();
	if (kvt_dir_open_root(dir, &d) == 0)
		fd = kvt_dir_open_file(d, "f", O_RDWR | O_CREAT | O_EXCL, 0600, NULL);
	if (fd >= 0)
		other = kvt_dir_open_file(d, "f", O_RDWR, 0, NULL);
	ok(fd >= 0 && other >= 0 && write(fd, "abc", 3) == 3,
	   "a file to call on, opened twice");

	init("stat:EIO:name=f");
	ok(kvt_file_stat(fd, "f", &st) == -EIO && kvt_file_stat(fd, "g", &st) == 0 &&
	   st.st_size == 3, "fstat: fault op stat, on the name given");
	init("stat:EIO:name=*");
	good = kvt_file_stat(fd, NULL, &st) == 0;
	init("stat:EIO");
	ok(good && kvt_file_stat(fd, NULL, &st) == -EIO,
	   "a call without a name: no name= rule matches it, a rule without one does");

	init("write:ENOSPC:name=f");
	good = kvt_file_truncate(fd, "f", 1) == -ENOSPC && fstat(fd, &st) == 0 &&
	       st.st_size == 3;
	kvt_faults_fini();
	ok(good && kvt_file_truncate(fd, "f", 1) == 0 && fstat(fd, &st) == 0 && st.st_size == 1,
	   "ftruncate: fault op write, the file untouched; without it, truncated");

	init("setattr:EPERM:name=f");
	good = kvt_file_setattr(fd, "f", KVT_SET_MODE, 0640, 0, 0, NULL) == -EPERM &&
	       fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0600;
	kvt_faults_fini();
	ok(good && kvt_file_setattr(fd, "f", KVT_SET_MODE, 0640, 0, 0, NULL) == 0 &&
	   fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0640,
	   "owner, mode and times: fault op setattr, nothing changed; without it, changed");

	init("sync:EIO:name=f");
	good = kvt_file_sync(fd, "f") == -EIO && kvt_file_datasync(fd, "f") == -EIO &&
	       kvt_file_write_out(fd, "f") == -EIO;
	kvt_faults_fini();
	ok(good && kvt_file_sync(fd, "f") == 0 && kvt_file_datasync(fd, "f") == 0 &&
	   kvt_file_write_out(fd, "f") == 0,
	   "fsync, fdatasync, sync_file_range: fault op sync; without it, they work");

	init("lock:EIO:name=f");
	ok(kvt_file_lock(fd, "f") == -EIO && kvt_file_lock_range(fd, "f", 0, 0) == -EIO &&
	   kvt_file_locked(fd, "f") == -EIO, "flock and the range locks: fault op lock");
	kvt_faults_fini();
	ok(kvt_file_lock(fd, "f") == 0 && kvt_file_lock(other, "f") == -EWOULDBLOCK &&
	   kvt_file_lock_range(fd, "f", 0, 0) == 0 && kvt_file_locked(other, "f") == 1 &&
	   kvt_file_lock_range(other, "f", 0, 0) == -EAGAIN,
	   "without it, a lock held is an answer to the other file description, not a failure");
	if (fd >= 0)
		close(fd);
	if (other >= 0)
		close(other);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);

		ok(system(cmd) == 0, "cleanup of the open file's directory");
	}
}

static void test_store(struct kvt_store *s)
{
	g_autofree char *stage_rel = g_build_filename("staging", s->mount_id, NULL);
	struct kvt_record rec;
	int objects = count_objects(top), names = count_in(top, "names");
	/* its own files: the lock, marks-moves */
	int own = count_in(top, stage_rel);
	int ret;

	{
		g_autoptr(kvt_dir) nd = kvt_dir_ref(kvt_store_names(s));
		struct kvt_meta meta = { .mode = 0644 };
		struct kvt_published pub;
		struct kvt_stage *st = NULL;
		char buf[4096] = { 0 };
		int wret;

		init("write:EIO:name=d.*:after=1:max=1");
		ret = kvt_stage_new(s, &st);
		wret = ret ? ret : kvt_stage_write(st, buf, sizeof(buf), 0);
		wret = wret ? wret : kvt_stage_write(st, buf, sizeof(buf), 4096);
		kvt_faults_fini();
		ok(ret == 0 && wret == -EIO && kvt_stage_write(st, buf, sizeof(buf), 4096) == 0 &&
		   kvt_store_publish(s, st, nd, "a.bin", &meta, NULL, 0, &pub) == -EIO,
		   "a staged write fails with EIO; written again it works, yet the version "
		   "is never published (EIO)");
		kvt_stage_unref(st);
		ok(count_objects(top) == objects && count_in(top, "names") == names &&
		   count_in(top, stage_rel) == own, "and nothing is left behind");
	}
	init("write:EIO:name=n.*");
	ret = store_bytes(s, "a.bin", 'a', 65536, NULL);
	kvt_faults_fini();
	ok(ret == -EIO && count_objects(top) == objects && count_in(top, "names") == names &&
	   count_in(top, stage_rel) == own,
	   "the record's write fails: EIO, the object goes again, nothing is left behind");
	init("rename:ENOSPC:name=a.bin");
	ret = store_bytes(s, "a.bin", 'a', 65536, NULL);
	kvt_faults_fini();
	ok(ret == -ENOSPC && count_objects(top) == objects && count_in(top, "names") == names &&
	   count_in(top, stage_rel) == own,
	   "the record's rename onto the name fails: ENOSPC, nothing is left behind");
	init("create:ENOSPC:name=d.*");
	ret = store_bytes(s, "a.bin", 'a', 65536, NULL);
	kvt_faults_fini();
	ok(ret == -ENOSPC && count_in(top, stage_rel) == own, "the staged file cannot be created: ENOSPC");
	/* link 1 is anchor -> reference (ENOENT for new bytes), link 2 the
	 * staged file -> reference, link 3 reference -> anchor. */
	init("link:EIO:after=1:max=1");
	ret = store_bytes(s, "a.bin", 'a', 65536, NULL);
	kvt_faults_fini();
	ok(ret == -EIO && count_objects(top) == objects && count_in(top, "names") == names &&
	   count_in(top, stage_rel) == own,
	   "the object's link fails: EIO, nothing is left behind");
	init("link:EIO:after=2:max=1");
	ret = store_bytes(s, "b.bin", 'b', 65536, &rec);
	kvt_faults_fini();
	ok(ret == 0 && count_objects(top) == objects + 1 && count_in(top, "names") == names + 1 &&
	   count_in(top, stage_rel) == own,
	   "the anchor's link fails: published all the same, without an anchor (no dedup)");
	ret = store_bytes(s, "c1.bin", 'c', 65536, NULL);
	init("link:ENOSPC:max=1");
	ret = ret ?: store_bytes(s, "c2.bin", 'c', 65536, NULL);
	kvt_faults_fini();
	ok(ret == 0 && count_objects(top) == objects + 4 && count_in(top, "names") == names + 3,
	   "the same bytes again, whose anchor takes no link more (ENOSPC on GlusterFS): "
	   "published with an object of their own");
	init("link:ENOSPC");
	ret = store_bytes(s, "d.bin", 'd', 65536, NULL);
	kvt_faults_fini();
	ok(ret == -ENOSPC && count_objects(top) == objects + 4 &&
	   count_in(top, "names") == names + 3 && count_in(top, stage_rel) == own,
	   "a full file system: the object's link fails too, ENOSPC, nothing is left behind");
	{
		struct kvt_verifier *v = kvt_verifier_new(16);
		struct kvt_verify_result res;
		struct stat st;
		kvt_autofd fd = kvt_object_open(s, &rec, O_RDONLY, &st);

		init("read:EIO:name=!*.bin");
		ret = kvt_verify_fd(v, fd, &st, &rec, false, &res);
		kvt_faults_fini();
		ok(ret == -EIO && kvt_verify_fd(v, fd, &st, &rec, false, &res) == 0,
		   "the object's read for verification fails: EIO, not remembered as checked");
		kvt_verifier_free(v);
	}
	{
		g_autoptr(kvt_dir) nd = kvt_dir_ref(kvt_store_names(s));

		init("sync:EIO:name=b.bin");
		ret = kvt_store_sync_name(s, nd, "b.bin", &rec);
		kvt_faults_fini();
		ok(ret == -EIO && kvt_store_sync_name(s, nd, "b.bin", &rec) == 0,
		   "the record's fsync fails: EIO; without the fault it works");
	}
	kvt_record_clear(&rec);
}

int main(void)
{
	g_autofree char *dir = g_dir_make_tmp("kvt-fault-XXXXXX", NULL);
	g_autoptr(GError) err = NULL;
	struct kvt_store *s;

	printf("1..49\n");
	top = dir;
	test_parse();
	test_when();
	test_threads();
	test_door();
	test_open_file();
	s = kvt_store_open(top, &err);
	ok(s != NULL, "a store is created");
	if (!s)
		return 1;
	test_store(s);
	kvt_store_close(s);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", top);

		ok(system(cmd) == 0, "cleanup");
	}
	return n_fail ? 1 : 0;
}
