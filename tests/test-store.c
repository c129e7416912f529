/* Unit tests of the lower store, without FUSE: publish, replace, dedup,
 * unlink, staging cleanup.  Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#include "store-int.h"
#include "unit.h"

static int count_files(const char *dir)
{
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *e;
	int n = 0;

	while (d && (e = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(dir, e, NULL);

		n += g_file_test(p, G_FILE_TEST_IS_DIR) ? count_files(p) : 1;
	}
	return n;
}

static bool reads_back(struct kvt_store *s, const char *name, char fill, size_t len)
{
	struct kvt_record rec;
	g_autofree char *buf = g_malloc(len + 1);
	bool good;
	int fd;

	if (kvt_name_read(kvt_store_names(s), name, &rec, NULL) < 0)
		return false;
	fd = kvt_object_open(s, &rec, O_RDONLY, NULL);
	good = fd >= 0 && rec.size == len && pread(fd, buf, len + 1, 0) == (ssize_t)len;
	for (size_t i = 0; good && i < len; i++)
		good = buf[i] == fill;
	if (fd >= 0)
		close(fd);
	kvt_record_clear(&rec);
	return good;
}

static void test_record_format(void)
{
	struct kvt_record r, back;
	g_autoptr(GString) enc = NULL;

	kvt_record_init(&r);
	kvt_hash_buf("abc", 3, &r.hash);
	r.size = 3;
	g_strlcpy(r.ref, "0123abcd1", sizeof(r.ref));
	r.xattrs = kvt_xattrs_new();
	g_hash_table_insert(r.xattrs, g_strdup("user.vllm.kv_crc32c"), g_bytes_new("\x01\x00\xff", 3));
	enc = kvt_record_encode(&r);
	ok(kvt_record_parse(enc->str, enc->len, &back) == 0 &&
	   kvt_hash_equal(&back.hash, &r.hash) && back.size == 3 &&
	   !strcmp(back.ref, r.ref) && back.xattrs &&
	   g_bytes_equal(g_hash_table_lookup(back.xattrs, "user.vllm.kv_crc32c"),
			 g_hash_table_lookup(r.xattrs, "user.vllm.kv_crc32c")),
	   "record encodes and parses back, with a binary client xattr");
	kvt_record_clear(&back);
	ok(kvt_record_parse(enc->str, enc->len - 5, &back) == -EBADMSG,
	   "a truncated record does not parse");
	enc->str[20] ^= 1;
	ok(kvt_record_parse(enc->str, enc->len, &back) == -EBADMSG,
	   "a record with one flipped bit does not parse");
	ok(kvt_record_parse("garbage\n", 8, &back) == -EBADMSG, "garbage does not parse");
	kvt_record_clear(&r);

	/* Links and special files: a kind instead of an object. */
	kvt_record_init(&r);
	r.kind = KVT_KIND_SYMLINK;
	r.target = g_strdup("../some where/target");
	g_string_free(enc, TRUE);
	enc = kvt_record_encode(&r);
	ok(kvt_record_parse(enc->str, enc->len, &back) == 0 && back.kind == KVT_KIND_SYMLINK &&
	   !strcmp(back.target, r.target) && back.size == strlen(r.target),
	   "a symbolic link's record parses back with its target and size");
	kvt_record_clear(&back);
	kvt_record_clear(&r);
	kvt_record_init(&r);
	r.kind = KVT_KIND_CHR;
	r.rdev = makedev(4, 64);
	g_string_free(enc, TRUE);
	enc = kvt_record_encode(&r);
	ok(kvt_record_parse(enc->str, enc->len, &back) == 0 && back.kind == KVT_KIND_CHR &&
	   back.rdev == makedev(4, 64), "a device node's record keeps its numbers");
	kvt_record_clear(&back);
	kvt_record_clear(&r);
	{
		static const char *const bad[] = {
			"kind file\n",                     /* files have no kind line */
			"kind symlink\n",                  /* a link without a target */
			"kind fifo\nrdev 1:3\n",           /* a FIFO with a device */
			"kind chr\n",                      /* a device without numbers */
			"kind sock\nhash 00000000000000000000000000000000\n",
			"kind symlink\ntarget 2f\ntarget 2f\n",
			"kind door\n",
			"kind fifo\nowner 1 2\n",          /* an owner without a mode */
			"kind fifo\nmode 644\n",           /* a mode without an owner */
			"kind fifo\nowner 1 2\nmode 10000\n", /* more than permission bits */
			"kind fifo\nowner 1 2\nmode 8\n",
			"kind fifo\nowner 4294967296 2\nmode 644\n", /* past a uid_t */
			"kind fifo\nowner 1\nmode 644\n",
			"kind fifo\nowner 1 2\nowner 1 2\nmode 644\n",
		};
		bool all = true;

		for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
			g_autoptr(GString) b = g_string_new("kvtierfs-record 1\n");

			g_string_append(b, bad[i]);
			g_string_append_printf(b, "check %016" G_GINT64_MODIFIER "x\n",
					       (guint64)XXH3_64bits(b->str, b->len));
			all = all && kvt_record_parse(b->str, b->len, &back) == -EBADMSG;
		}
		ok(all, "a record with lines its kind does not have, or without the ones it has, does not parse");
	}

	/* Format 2: the name's owner and mode are the record's. */
	kvt_record_init(&r);
	r.kind = KVT_KIND_FIFO;
	r.has_meta = true;
	r.uid = 4294967294u;
	r.gid = 7;
	r.mode = 04751;
	g_string_free(enc, TRUE);
	enc = kvt_record_encode(&r);
	{
		struct stat st = { .st_mode = S_IFREG | 0600, .st_uid = 0, .st_gid = 0 };

		ok(kvt_record_parse(enc->str, enc->len, &back) == 0 && back.has_meta &&
		   back.uid == 4294967294u && back.gid == 7 && back.mode == 04751 &&
		   (kvt_record_show(&back, &st), st.st_uid == 4294967294u) && st.st_gid == 7 &&
		   st.st_mode == (S_IFREG | 04751),
		   "a record's owner, group and mode parse back and are what the name shows");
		kvt_record_clear(&back);
		r.has_meta = false;
		g_string_free(enc, TRUE);
		enc = kvt_record_encode(&r);
		st = (struct stat){ .st_mode = S_IFREG | 0640, .st_uid = 5, .st_gid = 6 };
		ok(kvt_record_parse(enc->str, enc->len, &back) == 0 && !back.has_meta &&
		   !strstr(enc->str, "owner") && (kvt_record_show(&back, &st), st.st_uid == 5) &&
		   st.st_mode == (S_IFREG | 0640),
		   "a record of format 1 (no owner line) shows its record file's owner and mode");
		kvt_record_clear(&back);
	}
	g_string_truncate(enc, 0);

	/* A NUL in the ref, under a valid check, once parsed as the empty
	 * ref of "no record" (tests/fuzz/corpus/record/regress-ref-nul). */
	g_string_assign(enc, "kvtierfs-record 1\nhash 06b05ab6733a618578af5f94892f3950\n"
			"size 3\nref ");
	g_string_append_len(enc, "\0\0" "9c", 4);
	g_string_append_c(enc, '\n');
	g_string_append_printf(enc, "check %016" G_GINT64_MODIFIER "x\n",
			       (guint64)XXH3_64bits_dispatch(enc->str, enc->len));
	ok(kvt_record_parse(enc->str, enc->len, &back) == -EBADMSG,
	   "a record whose ref holds a NUL does not parse");
	kvt_record_clear(&back);
}

int main(void)
{
	g_autofree char *top = g_dir_make_tmp("kvt-store-XXXXXX", NULL);
	g_autofree char *objects = g_build_filename(top, "objects", NULL);
	g_autofree char *staging = g_build_filename(top, "staging", NULL);
	g_autofree char *foreign = g_build_filename(top, "foreign", NULL);
	g_autofree char *junk = g_build_filename(foreign, "junk", NULL);
	g_autoptr(GError) err = NULL;
	g_autofree char *name_b = g_build_filename(top, "names", "b", NULL);
	struct kvt_stage *staged = NULL;
	struct kvt_record a, b, c;
	struct kvt_store *s, *s2;
	struct kvt_dir *names;
	struct stat st;

	printf("1..30\n");
	test_record_format();

	s = kvt_store_open(top, &err);
	ok(s != NULL, "an empty directory becomes a store");
	if (!s)
		return 1;
	names = kvt_store_names(s);
	ok(store_bytes(s, "a", 'x', 1 << 20, &a) == 0 && reads_back(s, "a", 'x', 1 << 20),
	   "publish: a name reads back its bytes");
	ok(store_bytes(s, "b", 'x', 1 << 20, &b) == 0 && kvt_hash_equal(&a.hash, &b.hash) &&
	   strcmp(a.ref, b.ref) != 0,
	   "dedup: same bytes under another name, same hash, own reference");
	{
		g_autofree char *anchor = object_file(top, &a, true);

		ok(stat(anchor, &st) == 0 && st.st_nlink == 3,
		   "dedup: one inode holds anchor and both references");
	}
	ok(count_files(objects) == 3, "dedup: no second copy of the bytes");
	ok(store_bytes(s, "a", 'y', 4096, &c) == 0 && reads_back(s, "a", 'y', 4096) &&
	   reads_back(s, "b", 'x', 1 << 20), "replace: the name shows the new bytes, the other name keeps its own");
	ok(kvt_name_remove(s, names, "b") == 0 && !lower_exists(name_b),
	   "unlink: the name is gone");
	ok(count_files(objects) == 2, "unlink: the last user's object goes (anchor and reference of 'y' remain)");
	ok(kvt_name_remove(s, names, "a") == 0 && count_files(objects) == 0,
	   "unlink of the last name empties objects/");
	ok(kvt_name_remove(s, names, "a") == -ENOENT, "unlink of a missing name: ENOENT");
	kvt_record_clear(&a);
	kvt_record_clear(&b);
	kvt_record_clear(&c);

	/* A file being written: kept by its reference. */
	ok(kvt_stage_new(s, &staged) == 0, "a stage is made");
	s2 = kvt_store_open(top, &err);
	/* each staging: lock and marks-moves; the first one's stage too: its
	 * bytes and its record file */
	ok(s2 && count_files(staging) == 6, "a second live mount keeps the first one's staging");
	/* Simulate a dead mount: its lock goes away with its fds. */
	close(s->lockfd);
	s->lockfd = -1;
	kvt_store_close(s2);
	s2 = kvt_store_open(top, &err);
	ok(s2 && kvt_store_stale_removed(s2) == 1 && count_files(staging) == 2,
	   "staging of a dead mount is removed by the next mount");
	/* The dead mount's stage: its file is gone already. */
	kvt_stage_unref(staged);
	kvt_store_close(s);
	kvt_store_close(s2);
	ok(count_files(staging) == 0, "a clean close leaves no staging");

	g_mkdir(foreign, 0755);
	g_file_set_contents(junk, "x", 1, NULL);
	g_clear_error(&err);
	s = kvt_store_open(foreign, &err);
	ok(!s && err && strstr(err->message, "not a kvtierfs store"),
	   "a non-empty foreign directory is refused with a reason");
	ok(count_files(foreign) == 1, "and left unchanged");

	/* A power cut while the first mount made the store: its empty areas
	 * and a marker not renamed yet, as dm-log-writes replays found it
	 * (t-logwrites.sh).  The next mount completes it. */
	{
		g_autofree char *half = g_build_filename(top, "half", NULL);
		g_autofree char *marker = g_build_filename(half, "kvtierfs-store.new", NULL);
		const char *areas[] = { "objects", "names", "staging", "moves", "lost+found" };

		g_mkdir(half, 0700);
		for (size_t i = 0; i < G_N_ELEMENTS(areas); i++) {
			g_autofree char *area = g_build_filename(half, areas[i], NULL);

			g_mkdir(area, 0700);
		}
		g_file_set_contents(marker, "", 0, NULL);
		g_clear_error(&err);
		s = kvt_store_open(half, &err);
		if (!s)
			printf("# %s\n", err->message);
		ok(s != NULL, "a store half made by a mount that was cut is completed");
		if (s)
			kvt_store_close(s);
		g_clear_error(&err);
		s = kvt_store_open(half, &err);
		ok(s != NULL, "and mounts again");
		if (s)
			kvt_store_close(s);
	}
	{
		g_autofree char *notempty = g_build_filename(top, "notempty", NULL);
		g_autofree char *obj = g_build_filename(notempty, "objects", NULL);
		g_autofree char *f = g_build_filename(obj, "f", NULL);

		g_mkdir(notempty, 0700);
		g_mkdir(obj, 0700);
		g_file_set_contents(f, "x", 1, NULL);
		g_clear_error(&err);
		s = kvt_store_open(notempty, &err);
		ok(!s && err && strstr(err->message, "not a kvtierfs store"),
		   "an area that holds something, with no marker, is no half-made store");
	}
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", top);

		ok(system(cmd) == 0, "cleanup");
	}
	return n_fail ? 1 : 0;
}
