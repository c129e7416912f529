/* Extended attributes.
 *
 * user.kvtierfs.* are kvtierfs's answers about a file (verdict, hash, size,
 * object) and are read-only.  Every other user.* attribute is the client's:
 * it is kept in memory while a file is pending and in the name record once
 * published, so it follows the name across rename and remount, within
 * -o max_xattr_size a file and -o xattr_memory in memory (bounds.h).  Other
 * namespaces are not stored; security.capability, which the kernel asks
 * before every write, is answered here without any lower I/O; nor are
 * they listed, whatever a record or a lower directory carries.  The mount
 * root has user.kvtierfs.stats, the mount's counters, and .purges, which
 * show a user of a shared mount nothing of what others store
 * (sees_all). */
#include <errno.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "evictor.h"
#include "object.h"
#include "ops.h"
#include "publish.h"
#include "purge.h"
#include "resolve.h"
#include "usage.h"
#include "version.h"

#define OWN_PREFIX "user.kvtierfs."
#define STATS_NAME OWN_PREFIX "stats"
#define MOUNT_NAME OWN_PREFIX "mount"
#define PURGES_NAME OWN_PREFIX "purges"

static const char *const own_names[] = {
	OWN_PREFIX "verdict", OWN_PREFIX "hash", OWN_PREFIX "size", OWN_PREFIX "object",
};

static void reply_value(fuse_req_t req, const void *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

/* "verified" if this mount found the object intact and its lower file
 * has not changed since. */
static const char *published_verdict(struct kvt_fs *fs, const struct kvt_record *rec)
{
	struct stat st;

	if (kvt_object_stat(fs->store, rec, &st) == 0 &&
	    (uint64_t)st.st_size == rec->size &&
	    kvt_verifier_known(fs->verifier, &rec->hash, &st))
		return "verified";
	return "unverified";
}

/* kvtierfs's own attribute of a file, or NULL. */
static char *own_value(struct kvt_fs *fs, struct kvt_inode *ino, const char *name)
{
	const char *key = name + strlen(OWN_PREFIX);
	char hex[KVT_HASH_HEX_LEN + 1];
	struct kvt_record rec;
	bool pending, published, special;

	kvt_inode_lock(ino);
	pending = kvt_inode_pending(ino) || !ino->has_record;
	published = ino->has_record;
	if (published)
		kvt_record_id(&rec, &ino->rec);
	kvt_inode_unlock(ino);
	/* A symbolic link or a special file has no bytes to verify. */
	special = published && rec.kind != KVT_KIND_FILE;
	if (special)
		return NULL;
	if (!strcmp(key, "verdict"))
		return g_strdup(pending ? "pending" : published_verdict(fs, &rec));
	if (!published)
		return NULL;
	if (!strcmp(key, "hash")) {
		kvt_hash_hex(&rec.hash, hex);
		return g_strdup_printf("xxh3-128:%s", hex);
	}
	if (!strcmp(key, "size"))
		return g_strdup_printf("%" G_GUINT64_FORMAT, rec.size);
	if (!strcmp(key, "object"))
		return kvt_object_path(&rec);
	return NULL;
}

/* Whether @req's caller may learn what others store: root, and the user
 * who mounted (who owns LOWERDIR and can read it all there).  Another
 * user must not: whether a store of a guess dedups, and the paths of the
 * names purged, tell him what other users' files hold and are called. */
static bool sees_all(fuse_req_t req)
{
	uid_t uid = fuse_req_ctx(req)->uid;

	return uid == 0 || uid == geteuid();
}

/* The budget (usage.h) and the evictor's index (evictor.h), when there
 * is a budget: what statfs shows, and what only this mount knows. */
static void budget_lines(struct kvt_fs *fs, GString *s)
{
	uint64_t budget = kvt_usage_budget(fs->store), used;
	struct kvt_evictor_info ev;

	if (!budget)
		return;
	g_string_append_printf(s, "budget %" G_GUINT64_FORMAT "\n", budget);
	if (kvt_usage_get(fs->store, &used))
		g_string_append_printf(s, "usage %" G_GUINT64_FORMAT "\n", used);
	if (!kvt_evictor_info(fs->store, &ev)) {
		g_string_append(s, "evict off\n");
		return;
	}
	g_string_append_printf(s, "evict %s\nevict_high %u\nevict_low %u\nindexed %d\n"
			       "indexed_blocks %" G_GUINT64_FORMAT "\nindexed_bytes %"
			       G_GUINT64_FORMAT "\npinned_bytes %" G_GUINT64_FORMAT "\nevicting %d\n"
			       "evict_lead %d\n",
			       ev.policy, ev.high_pct, ev.low_pct, ev.indexed, ev.blocks, ev.bytes,
			       ev.pinned_bytes, ev.passing, ev.leads);
}

/* The mount's own attributes on its root, for kvtierfs-stat; NULL for
 * another name.  @all: for a caller who sees_all. */
static GString *root_value(struct kvt_fs *fs, const char *name, bool all)
{
	GString *s;

	if (!strcmp(name, STATS_NAME))
		return all ? kvt_stats_format(&fs->stats) : kvt_stats_format_public(&fs->stats);
	if (!strcmp(name, PURGES_NAME))
		return kvt_purges_format(fs, all);
	if (strcmp(name, MOUNT_NAME))
		return NULL;
	s = g_string_new(NULL);
	g_string_append_printf(s, "version %s\npid %d\nstarted %" G_GINT64_FORMAT
			       "\nstore %s\nverify %s\nshared %d\n",
			       PACKAGE_VERSION, (int)getpid(), fs->started / G_USEC_PER_SEC,
			       fs->lower_path, fs->verify_always ? "always" : "once",
			       (int)__atomic_load_n(&fs->shared, __ATOMIC_RELAXED));
	budget_lines(fs, s);
	return s;
}

void kvt_op_getxattr(fuse_req_t req, fuse_ino_t n, const char *name, size_t size)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	g_autofree char *own = NULL;
	GBytes *val = NULL;

	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (ino == fs->root && g_str_has_prefix(name, OWN_PREFIX)) {
		g_autoptr(GString) s = root_value(fs, name, sees_all(req));

		if (s)
			reply_value(req, s->str, s->len, size);
		else
			fuse_reply_err(req, ENODATA);
		return;
	}
	if (ino->is_dir && g_str_has_prefix(name, OWN_PREFIX)) {
		/* The daemon's own on a lower directory (KVT_DIR_SHOWN_XATTR):
		 * never a client's to read. */
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (ino->is_dir) {
		g_autofree char *buf = g_malloc(XATTR_SIZE_MAX);
		g_autoptr(kvt_dir) d = NULL;
		ssize_t len = kvt_inode_dir(fs, ino, &d);

		if (len == 0)
			len = kvt_dir_getxattr(d, name, buf, XATTR_SIZE_MAX);
		if (len < 0)
			fuse_reply_err(req, len == -ENOTSUP ? ENODATA : (int)-len);
		else
			reply_value(req, buf, len, size);
		return;
	}
	if (g_str_has_prefix(name, OWN_PREFIX)) {
		own = own_value(fs, ino, name);
	} else {
		kvt_inode_lock(ino);
		if (ino->rec.xattrs && (val = g_hash_table_lookup(ino->rec.xattrs, name)))
			g_bytes_ref(val);
		kvt_inode_unlock(ino);
	}
	if (own) {
		reply_value(req, own, strlen(own), size);
	} else if (val) {
		gsize len;
		const void *p = g_bytes_get_data(val, &len);

		reply_value(req, p, len, size);
		g_bytes_unref(val);
	} else {
		fuse_reply_err(req, ENODATA);
	}
}

/* Writes @ino's client xattrs into its record, if it has one. */
static int persist_xattrs(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_record rec;
	struct kvt_inode *p;
	struct kvt_dir *pd;
	struct kvt_meta meta;
	struct stat st;
	int ret;

	kvt_record_init(&rec);
	p = kvt_lock_parent(fs, ino, &pd, &ret);
	if (!p)
		return ret;
	kvt_inode_lock(ino);
	if (ino->has_record) {
		kvt_record_copy(&rec, &ino->rec);
		meta = kvt_inode_meta(ino, true);
	}
	kvt_inode_unlock(ino);
	if (rec.ref[0]) {
		ret = kvt_store_rewrite(fs->store, pd, ino->name, &rec, &meta, &st);
		if (ret == 0 && st.st_ino) {
			kvt_inode_lock(ino);
			ino->rec_ino = ino->st_ino = st.st_ino; /* see inode.c */
			ino->rec_ctime = st.st_ctim;
			kvt_inode_unlock(ino);
		}
	}
	kvt_inode_unlock(p);
	kvt_dir_unref(pd);
	kvt_record_clear(&rec);
	return ret;
}

/* Sets (@value != NULL) or removes a client attribute of a file. */
static int change_xattr(struct kvt_fs *fs, struct kvt_inode *ino, uid_t uid, const char *name,
			const char *value, size_t size, int flags)
{
	GHashTable *saved;
	bool exists;
	int ret;

	kvt_inode_lock(ino);
	exists = ino->rec.xattrs && g_hash_table_contains(ino->rec.xattrs, name);
	if ((flags & XATTR_CREATE) && exists) {
		kvt_inode_unlock(ino);
		return -EEXIST;
	}
	if (((flags & XATTR_REPLACE) || !value) && !exists) {
		kvt_inode_unlock(ino);
		return -ENODATA;
	}
	ret = value ? kvt_bounds_xattr_room(fs, ino, uid, name, size) : 0;
	if (ret < 0) {
		kvt_inode_unlock(ino);
		return ret;
	}
	saved = kvt_xattrs_dup(ino->rec.xattrs);
	if (!ino->rec.xattrs)
		ino->rec.xattrs = kvt_xattrs_new();
	if (value)
		g_hash_table_replace(ino->rec.xattrs, g_strdup(name),
				     g_bytes_new(value, size));
	else
		g_hash_table_remove(ino->rec.xattrs, name);
	kvt_inode_unlock(ino);
	ret = persist_xattrs(fs, ino);
	kvt_inode_lock(ino);
	if (ret < 0) {
		/* Not stored: the attribute must not appear to be. */
		if (ino->rec.xattrs)
			g_hash_table_unref(ino->rec.xattrs);
		ino->rec.xattrs = saved;
	} else {
		g_hash_table_unref(saved);
	}
	/* A record holds them now, or memory only (pending, unlinked). */
	kvt_bounds_xattr_settle(fs, ino);
	kvt_inode_unlock(ino);
	return ret;
}

/* Sets (@value != NULL) or removes a user attribute of a directory: on
 * its lower directory. */
static int dir_xattr(struct kvt_fs *fs, struct kvt_inode *ino, const char *name,
		     const char *value, size_t size, int flags)
{
	g_autoptr(kvt_dir) d = NULL;
	int ret = kvt_inode_dir(fs, ino, &d);

	if (ret < 0)
		return ret;
	return value ? kvt_dir_setxattr(d, name, value, size, flags) :
		       kvt_dir_removexattr(d, name);
}

/* setxattr (@value != NULL) or removexattr of @name: the daemon's own
 * attributes are read-only, and clients have the user namespace alone
 * (@other_errno for the others: setxattr's EOPNOTSUPP, removexattr's
 * ENODATA). */
static void change(fuse_req_t req, fuse_ino_t n, const char *name, const char *value,
		   size_t size, int flags, int other_errno)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	int ret;

	if (g_str_has_prefix(name, OWN_PREFIX))
		ret = -EPERM;
	else if (strncmp(name, "user.", 5))
		ret = -other_errno;
	else if (ino->is_dir)
		ret = dir_xattr(fs, ino, name, value, size, flags);
	else
		ret = change_xattr(fs, ino, fuse_req_ctx(req)->uid, name, value, size, flags);
	fuse_reply_err(req, -ret);
}

void kvt_op_setxattr(fuse_req_t req, fuse_ino_t n, const char *name,
		     const char *value, size_t size, int flags)
{
	change(req, n, name, value, size, flags, EOPNOTSUPP);
}

void kvt_op_removexattr(fuse_req_t req, fuse_ino_t n, const char *name)
{
	change(req, n, name, NULL, 0, 0, ENODATA);
}

static void list_add(GString *s, const char *name)
{
	g_string_append_len(s, name, strlen(name) + 1);
}

/* Whether @name, found on a record or a lower directory, is the
 * client's to see: user.* only, as getxattr answers.  A record or a
 * directory on the lower disk may carry others (trusted.*, security.*,
 * put there by another program, or by hand); they are not the
 * client's, and their names alone may say what they should not.  A
 * user.kvtierfs.* there is shadowed by kvtierfs's own. */
static bool client_name(const char *name)
{
	return g_str_has_prefix(name, "user.") && !g_str_has_prefix(name, OWN_PREFIX);
}

void kvt_op_listxattr(fuse_req_t req, fuse_ino_t n, size_t size)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	g_autoptr(GString) s = g_string_new(NULL);

	if (ino->is_dir) {
		g_autofree char *buf = g_malloc(XATTR_LIST_MAX);
		g_autoptr(kvt_dir) d = NULL;
		ssize_t len = kvt_inode_dir(fs, ino, &d);

		if (len == 0)
			len = kvt_dir_listxattr(d, buf, XATTR_LIST_MAX);
		for (ssize_t at = 0; at < len; at += strlen(buf + at) + 1)
			if (client_name(buf + at))
				list_add(s, buf + at);
		if (ino == fs->root) {
			list_add(s, STATS_NAME);
			list_add(s, MOUNT_NAME);
			list_add(s, PURGES_NAME);
		}
	} else {
		kvt_inode_lock(ino);
		for (size_t i = 0; i < G_N_ELEMENTS(own_names); i++)
			if ((i == 0 || ino->has_record) &&
			    (!ino->has_record || ino->rec.kind == KVT_KIND_FILE))
				list_add(s, own_names[i]);
		if (ino->rec.xattrs) {
			GHashTableIter it;
			gpointer k, v;

			g_hash_table_iter_init(&it, ino->rec.xattrs);
			while (g_hash_table_iter_next(&it, &k, &v))
				if (client_name(k))
					list_add(s, k);
		}
		kvt_inode_unlock(ino);
	}
	reply_value(req, s->str, s->len, size);
}
