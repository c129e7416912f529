/* Encoding and parsing of name records (format in record.h). */
#include "record.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#define RECORD_MAGIC "kvtierfs-record 1\n"

void kvt_record_init(struct kvt_record *r)
{
	memset(r, 0, sizeof(*r));
}

void kvt_record_clear(struct kvt_record *r)
{
	if (r->xattrs)
		g_hash_table_unref(r->xattrs);
	g_free(r->target);
	kvt_record_init(r);
}

static const struct {
	const char *name;
	mode_t type;
} kinds[] = {
	[KVT_KIND_FILE] = { "file", S_IFREG },
	[KVT_KIND_SYMLINK] = { "symlink", S_IFLNK },
	[KVT_KIND_FIFO] = { "fifo", S_IFIFO },
	[KVT_KIND_SOCK] = { "sock", S_IFSOCK },
	[KVT_KIND_CHR] = { "chr", S_IFCHR },
	[KVT_KIND_BLK] = { "blk", S_IFBLK },
};

mode_t kvt_kind_type(enum kvt_kind kind)
{
	return kinds[kind].type;
}

int kvt_kind_of_mode(mode_t mode)
{
	for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++)
		if (kinds[i].type == (mode & S_IFMT))
			return (int)i;
	return -1;
}

GHashTable *kvt_xattrs_new(void)
{
	return g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
				     (GDestroyNotify)g_bytes_unref);
}

GHashTable *kvt_xattrs_dup(GHashTable *src)
{
	GHashTable *dst = kvt_xattrs_new();
	GHashTableIter it;
	gpointer k, v;

	if (src) {
		g_hash_table_iter_init(&it, src);
		while (g_hash_table_iter_next(&it, &k, &v))
			g_hash_table_insert(dst, g_strdup(k), g_bytes_ref(v));
	}
	return dst;
}

bool kvt_xattrs_equal(GHashTable *a, GHashTable *b)
{
	GHashTableIter it;
	gpointer k, v;

	if ((a ? g_hash_table_size(a) : 0) != (b ? g_hash_table_size(b) : 0))
		return false;
	if (!a)
		return true;
	g_hash_table_iter_init(&it, a);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		GBytes *w = g_hash_table_lookup(b, k);

		if (!w || !g_bytes_equal(v, w))
			return false;
	}
	return true;
}

void kvt_record_copy(struct kvt_record *dst, const struct kvt_record *src)
{
	kvt_record_clear(dst);
	dst->hash = src->hash;
	dst->size = src->size;
	memcpy(dst->ref, src->ref, sizeof(dst->ref));
	dst->kind = src->kind;
	dst->target = g_strdup(src->target);
	dst->rdev = src->rdev;
	dst->has_meta = src->has_meta;
	dst->uid = src->uid;
	dst->gid = src->gid;
	dst->mode = src->mode;
	if (src->xattrs && g_hash_table_size(src->xattrs))
		dst->xattrs = kvt_xattrs_dup(src->xattrs);
}

void kvt_record_show(const struct kvt_record *r, struct stat *st)
{
	if (!r->has_meta)
		return;
	st->st_uid = r->uid;
	st->st_gid = r->gid;
	st->st_mode = (st->st_mode & S_IFMT) | (r->mode & 07777);
}

static void append_hex(GString *s, const guint8 *p, gsize n)
{
	for (gsize i = 0; i < n; i++)
		g_string_append_printf(s, "%02x", p[i]);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

GString *kvt_record_encode(const struct kvt_record *r)
{
	char hex[KVT_HASH_HEX_LEN + 1];
	GString *s = g_string_sized_new(256);

	g_string_append(s, RECORD_MAGIC);
	switch (r->kind) {
	case KVT_KIND_FILE:
		kvt_hash_hex(&r->hash, hex);
		g_string_append_printf(s, "hash %s\nsize %" G_GUINT64_FORMAT "\nref %s\n",
				       hex, r->size, r->ref);
		break;
	case KVT_KIND_SYMLINK:
		g_string_append(s, "kind symlink\ntarget ");
		append_hex(s, (const guint8 *)r->target, strlen(r->target));
		g_string_append_c(s, '\n');
		break;
	case KVT_KIND_CHR:
	case KVT_KIND_BLK:
		g_string_append_printf(s, "kind %s\nrdev %u:%u\n", kinds[r->kind].name,
				       major(r->rdev), minor(r->rdev));
		break;
	default:
		g_string_append_printf(s, "kind %s\n", kinds[r->kind].name);
		break;
	}
	if (r->has_meta)
		g_string_append_printf(s, "owner %u %u\nmode %o\n", (unsigned int)r->uid,
				       (unsigned int)r->gid, (unsigned int)(r->mode & 07777));
	if (r->xattrs && g_hash_table_size(r->xattrs)) {
		/* Sorted so that equal records encode to equal bytes. */
		guint n;
		g_autofree gpointer *names = g_hash_table_get_keys_as_array(r->xattrs, &n);

		qsort(names, n, sizeof(*names), cmp_str);
		for (guint i = 0; i < n; i++) {
			const char *name = names[i];
			GBytes *v = g_hash_table_lookup(r->xattrs, name);
			gsize vlen;
			const guint8 *vp = g_bytes_get_data(v, &vlen);

			g_string_append(s, "xattr ");
			append_hex(s, (const guint8 *)name, strlen(name));
			g_string_append_c(s, ' ');
			append_hex(s, vp, vlen);
			g_string_append_c(s, '\n');
		}
	}
	g_string_append_printf(s, "check %016" G_GINT64_MODIFIER "x\n",
			       (guint64)XXH3_64bits_dispatch(s->str, s->len));
	return s;
}

static int unhex(const char *p, size_t n, GByteArray *out)
{
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		int hi = g_ascii_xdigit_value(p[i]), lo = g_ascii_xdigit_value(p[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		guint8 b = (guint8)(hi << 4 | lo);
		g_byte_array_append(out, &b, 1);
	}
	return 0;
}

/* The lines a record has seen, as bits of *seen. */
enum {
	SEEN_HASH = 1,
	SEEN_SIZE = 2,
	SEEN_REF = 4,
	SEEN_KIND = 8,
	SEEN_TARGET = 16,
	SEEN_RDEV = 32,
	SEEN_OWNER = 64,
	SEEN_MODE = 128,
	SEEN_OBJECT = SEEN_HASH | SEEN_SIZE | SEEN_REF,
	SEEN_META = SEEN_OWNER | SEEN_MODE,
};

static int parse_kind(const char *v, size_t vlen, struct kvt_record *r)
{
	for (size_t i = 1; i < G_N_ELEMENTS(kinds); i++) {
		if (vlen == strlen(kinds[i].name) && !memcmp(v, kinds[i].name, vlen)) {
			r->kind = i;
			return 0;
		}
	}
	return -1;
}

static int parse_rdev(const char *v, size_t vlen, struct kvt_record *r)
{
	char buf[24];
	unsigned int ma, mi;
	int used = 0;

	if (vlen == 0 || vlen >= sizeof(buf))
		return -1;
	memcpy(buf, v, vlen);
	buf[vlen] = '\0';
	if (sscanf(buf, "%u:%u%n", &ma, &mi, &used) != 2 || (size_t)used != vlen ||
	    !g_ascii_isdigit(buf[0]))
		return -1;
	r->rdev = makedev(ma, mi);
	return 0;
}

/* Decimal digits only, no overflow.  By hand: g_ascii_strtoull's errno
 * cannot be trusted, its first call in a process takes a lock
 * (g_once_init_enter) whose futex can leave errno set by a thread
 * racing it, and a good record would read as torn. */
static int parse_size(const char *v, size_t vlen, uint64_t *out)
{
	uint64_t n = 0;

	if (vlen == 0 || vlen > 20)
		return -1;
	for (size_t i = 0; i < vlen; i++) {
		unsigned d = (unsigned char)v[i] - '0';

		if (d > 9 || n > (UINT64_MAX - d) / 10)
			return -1;
		n = n * 10 + d;
	}
	*out = n;
	return 0;
}

/* "<uid> <gid>": two decimal ids that fit their types. */
static int parse_owner(const char *v, size_t vlen, struct kvt_record *r)
{
	const char *sp = memchr(v, ' ', vlen);
	uint64_t u, g;

	if (!sp || parse_size(v, sp - v, &u) || parse_size(sp + 1, vlen - (sp - v) - 1, &g) ||
	    u > UINT32_MAX || g > UINT32_MAX)
		return -1;
	r->uid = (uid_t)u;
	r->gid = (gid_t)g;
	return 0;
}

static int parse_mode(const char *v, size_t vlen, struct kvt_record *r)
{
	mode_t m = 0;

	if (vlen == 0 || vlen > 5)
		return -1;
	for (size_t i = 0; i < vlen; i++) {
		if (v[i] < '0' || v[i] > '7')
			return -1;
		m = m << 3 | (mode_t)(v[i] - '0');
	}
	if (m & ~07777)
		return -1;
	r->mode = m;
	return 0;
}

static int parse_line(const char *line, size_t len, struct kvt_record *r,
		      unsigned *seen)
{
	const char *sp = memchr(line, ' ', len);
	size_t klen, vlen;
	const char *v;

	if (!sp)
		return -1;
	klen = sp - line;
	v = sp + 1;
	vlen = len - klen - 1;
	if (klen == 4 && !memcmp(line, "hash", 4)) {
		if (!kvt_hash_parse(v, vlen, &r->hash))
			return -1;
		*seen |= SEEN_HASH;
	} else if (klen == 4 && !memcmp(line, "size", 4)) {
		if (parse_size(v, vlen, &r->size))
			return -1;
		*seen |= SEEN_SIZE;
	} else if (klen == 3 && !memcmp(line, "ref", 3)) {
		/* A file name suffix: a NUL would cut it short, to an
		 * empty ref (no record) at worst. */
		if (vlen == 0 || vlen >= KVT_REF_MAX || memchr(v, '/', vlen) ||
		    memchr(v, '\0', vlen))
			return -1;
		memcpy(r->ref, v, vlen);
		r->ref[vlen] = '\0';
		*seen |= SEEN_REF;
	} else if (klen == 4 && !memcmp(line, "kind", 4)) {
		if ((*seen & SEEN_KIND) || parse_kind(v, vlen, r))
			return -1;
		*seen |= SEEN_KIND;
	} else if (klen == 6 && !memcmp(line, "target", 6)) {
		g_autoptr(GByteArray) t = g_byte_array_new();

		if ((*seen & SEEN_TARGET) || unhex(v, vlen, t) || t->len == 0 ||
		    t->len > PATH_MAX || memchr(t->data, 0, t->len))
			return -1;
		r->target = g_strndup((char *)t->data, t->len);
		*seen |= SEEN_TARGET;
	} else if (klen == 4 && !memcmp(line, "rdev", 4)) {
		if ((*seen & SEEN_RDEV) || parse_rdev(v, vlen, r))
			return -1;
		*seen |= SEEN_RDEV;
	} else if (klen == 5 && !memcmp(line, "owner", 5)) {
		if ((*seen & SEEN_OWNER) || parse_owner(v, vlen, r))
			return -1;
		*seen |= SEEN_OWNER;
	} else if (klen == 4 && !memcmp(line, "mode", 4)) {
		if ((*seen & SEEN_MODE) || parse_mode(v, vlen, r))
			return -1;
		*seen |= SEEN_MODE;
	} else if (klen == 5 && !memcmp(line, "xattr", 5)) {
		const char *sp2 = memchr(v, ' ', vlen);
		g_autoptr(GByteArray) name = g_byte_array_new();
		g_autoptr(GByteArray) val = g_byte_array_new();

		if (!sp2 || unhex(v, sp2 - v, name) ||
		    unhex(sp2 + 1, vlen - (sp2 - v) - 1, val) || name->len == 0 ||
		    memchr(name->data, 0, name->len))
			return -1;
		if (!r->xattrs)
			r->xattrs = kvt_xattrs_new();
		g_hash_table_replace(r->xattrs,
				     g_strndup((char *)name->data, name->len),
				     g_bytes_new(val->data, val->len));
	} else {
		return -1;
	}
	return 0;
}

int kvt_record_parse(const char *buf, size_t len, struct kvt_record *r)
{
	const size_t mlen = strlen(RECORD_MAGIC);
	const size_t clen = strlen("check ") + 16 + 1;
	unsigned seen = 0;
	size_t body;
	char want[17];

	kvt_record_init(r);
	if (len < mlen + clen || memcmp(buf, RECORD_MAGIC, mlen) ||
	    buf[len - 1] != '\n')
		return -EBADMSG;
	body = len - clen;
	if (memcmp(buf + body, "check ", 6))
		return -EBADMSG;
	g_snprintf(want, sizeof(want), "%016" G_GINT64_MODIFIER "x",
		   (guint64)XXH3_64bits_dispatch(buf, body));
	if (memcmp(buf + body + 6, want, 16))
		return -EBADMSG;
	for (size_t pos = mlen; pos < body;) {
		const char *nl = memchr(buf + pos, '\n', body - pos);

		if (!nl || parse_line(buf + pos, nl - (buf + pos), r, &seen))
			goto bad;
		pos = nl - buf + 1;
	}
	/* Both metadata lines or none (a record of format 1). */
	if ((seen & SEEN_META) && (seen & SEEN_META) != SEEN_META)
		goto bad;
	r->has_meta = (seen & SEEN_META) != 0;
	seen &= ~SEEN_META;
	/* Exactly the lines its kind has. */
	switch (r->kind) {
	case KVT_KIND_FILE:
		if (seen != SEEN_OBJECT)
			goto bad;
		break;
	case KVT_KIND_SYMLINK:
		if (seen != (SEEN_KIND | SEEN_TARGET))
			goto bad;
		r->size = strlen(r->target);
		break;
	case KVT_KIND_CHR:
	case KVT_KIND_BLK:
		if (seen != (SEEN_KIND | SEEN_RDEV))
			goto bad;
		break;
	default:
		if (seen != SEEN_KIND)
			goto bad;
		break;
	}
	return 0;
bad:
	kvt_record_clear(r);
	return -EBADMSG;
}
