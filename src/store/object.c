/* Objects and their references (object.h). */
#include "object.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "store-int.h"
#include "usage.h"

void kvt_object_fanout(const kvt_hash *h, char out[3])
{
	g_snprintf(out, 3, "%02x", h->b[0]);
}

bool kvt_object_is_fanout(const char *name)
{
	return strlen(name) == 2 && g_ascii_isxdigit(name[0]) && g_ascii_isxdigit(name[1]) &&
	       !g_ascii_isupper(name[0]) && !g_ascii_isupper(name[1]);
}

char *kvt_object_anchor_name(const kvt_hash *h)
{
	char hex[KVT_HASH_HEX_LEN + 1];

	kvt_hash_hex(h, hex);
	return g_strdup(hex);
}

char *kvt_object_ref_name(const struct kvt_record *rec)
{
	char hex[KVT_HASH_HEX_LEN + 1];

	kvt_hash_hex(&rec->hash, hex);
	return g_strdup_printf("%s.%s", hex, rec->ref);
}

bool kvt_object_parse_name(const char *fanout, const char *name, kvt_hash *h,
			   bool *is_ref)
{
	size_t len = strlen(name);

	if (len < KVT_HASH_HEX_LEN || strncmp(name, fanout, 2) ||
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

/* objects/<ab> for @h, opened (and with @create made) as first used. */
static int fanout_dir(struct kvt_store *s, const kvt_hash *h, bool create,
		      struct kvt_dir **out)
{
	char name[3];
	struct kvt_dir **slot = &s->fanout[h->b[0]];
	int ret = 0;

	kvt_object_fanout(h, name);
	g_mutex_lock(&s->fanout_lock);
	if (!*slot) {
		ret = kvt_dir_open(s->layout.objects, name, slot);
		if (ret == -ENOENT && create) {
			ret = kvt_dir_mkdir(s->layout.objects, name, 0700);
			/* A directory removed by hand since the mount:
			 * durable too, as the store's open makes them. */
			if (ret == 0)
				ret = kvt_dir_sync(s->layout.objects);
			if (ret == 0 || ret == -EEXIST)
				ret = kvt_dir_open(s->layout.objects, name, slot);
		}
	}
	if (ret == 0)
		*out = kvt_dir_ref(*slot);
	g_mutex_unlock(&s->fanout_lock);
	return ret;
}

char *kvt_object_path(const struct kvt_record *rec)
{
	g_autofree char *ref = kvt_object_ref_name(rec);

	return g_strdup_printf("objects/%.2s/%s", ref, ref);
}

int kvt_object_open(struct kvt_store *s, const struct kvt_record *rec, int flags,
		    struct stat *st)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *ref = kvt_object_ref_name(rec);
	int ret = fanout_dir(s, &rec->hash, false, &fan);

	return ret < 0 ? ret : kvt_dir_open_file(fan, ref, flags, 0, st);
}

int kvt_object_stat(struct kvt_store *s, const struct kvt_record *rec, struct stat *st)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *ref = kvt_object_ref_name(rec);
	int ret = fanout_dir(s, &rec->hash, false, &fan);

	if (ret == 0)
		ret = kvt_dir_stat(fan, ref, st);
	if (ret == 0 && !S_ISREG(st->st_mode))
		ret = -EBADMSG;
	return ret;
}

/* Whether a reference to @anchor is left in @fan.  On NFS the link count
 * says nothing: a file unlinked while a host has it open stays linked
 * there, as ".nfs<hex>", until the last close, and the staged file a
 * publication unlinks is open still (kvt_publication_finish).  A listing
 * that fails keeps the anchor. */
static bool has_refs(struct kvt_dir *fan, const char *anchor)
{
	g_autoptr(GPtrArray) ents = NULL;
	size_t len = strlen(anchor);
	int err;

	ents = kvt_dir_list(fan, false, &err);
	if (!ents)
		return true;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];

		if (!strncmp(e->name, anchor, len) && e->name[len] == '.')
			return true;
	}
	return false;
}

/* Unlinks the object link @fan/@name; its bytes leave the usage when
 * it was the inode's last link (usage.h; NFS, where a link count counts
 * names a client keeps for open files, is put right by the next count). */
static int unlink_counted(struct kvt_store *s, struct kvt_dir *fan, const char *name)
{
	struct stat st;
	bool last = s->usage && kvt_dir_stat(fan, name, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_nlink == 1;
	int ret = kvt_dir_unlink(fan, name);

	if (ret == 0 && last)
		kvt_usage_move(s, kvt_usage_fan_of(name), -(int64_t)st.st_size);
	return ret;
}

/* Removes @anchor if it is all that is left of its inode: nobody uses
 * these bytes.  Every link but the anchor is a reference, and every
 * removal of a reference (or making of an anchor, kvt_object_anchor) is
 * followed by this look, so the last one's sees the count at 1
 * (object.h).  Not on NFS: there the references are counted by name
 * (has_refs).  A mount that links to the anchor between the look and the
 * unlink holds its own reference: it loses the sharing only. */
static void drop_lone_anchor(struct kvt_store *s, struct kvt_dir *fan, const char *anchor)
{
	struct stat st;

	if (s->silly_renames ? !has_refs(fan, anchor) :
	    kvt_dir_stat(fan, anchor, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1)
		unlink_counted(s, fan, anchor);
}

int kvt_object_release(struct kvt_store *s, const struct kvt_record *rec)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *ref = kvt_object_ref_name(rec);
	g_autofree char *anchor = kvt_object_anchor_name(&rec->hash);
	int ret = fanout_dir(s, &rec->hash, false, &fan);

	if (ret < 0)
		return ret == -ENOENT ? 0 : ret;
	ret = unlink_counted(s, fan, ref);
	drop_lone_anchor(s, fan, anchor);
	return ret == -ENOENT ? 0 : ret;
}

/* Whether the object at @fan/@ref holds bytes whose hash is @h: then it
 * is intact, whatever size a record gives it. */
static bool intact(struct kvt_dir *fan, const char *ref, const kvt_hash *h)
{
	struct stat st;
	kvt_autofd fd = kvt_dir_open_file(fan, ref, O_RDONLY, 0, &st);
	kvt_hash got;

	return fd >= 0 && kvt_hash_fd(fd, st.st_size, &got, NULL) == 0 &&
	       kvt_hash_equal(&got, h);
}

int kvt_object_purge(struct kvt_store *s, const struct kvt_record *rec, bool unless_intact)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *ref = kvt_object_ref_name(rec);
	g_autofree char *anchor = kvt_object_anchor_name(&rec->hash);
	struct stat rst, ast;
	int removed = 0, ret = fanout_dir(s, &rec->hash, false, &fan);

	if (ret < 0)
		return ret == -ENOENT ? 0 : ret;
	ret = kvt_dir_stat(fan, ref, &rst);
	if (ret < 0)
		return ret == -ENOENT ? 0 : ret;
	/* Intact bytes under a record that says another size: the record
	 * is wrong, not the object, which other records may share (a copy
	 * of a record names the same reference).  The reference goes with
	 * reclamation once no record names it. */
	if (unless_intact && intact(fan, ref, &rec->hash))
		return 0;
	ret = unlink_counted(s, fan, ref);
	if (ret == 0)
		removed = 1;
	else if (ret != -ENOENT)
		return ret;
	if (kvt_dir_stat(fan, anchor, &ast) == 0 && ast.st_ino == rst.st_ino &&
	    ast.st_dev == rst.st_dev)
		unlink_counted(s, fan, anchor);
	return removed;
}

/* Whether the first @size bytes of @a and @b are the same: a read error
 * says no (the bytes then get an object of their own). */
static bool same_bytes(int a, int b, uint64_t size)
{
	enum { CHUNK = 256 * 1024 };
	g_autofree char *x = g_malloc(CHUNK), *y = g_malloc(CHUNK);

	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < CHUNK ? size - off : CHUNK;

		if (pread(a, x, n, off) != (ssize_t)n || pread(b, y, n, off) != (ssize_t)n ||
		    memcmp(x, y, n))
			return false;
		off += n;
	}
	return true;
}

/* Whether the object just linked at @fan/@ref holds the staged bytes
 * (@stage_fd, @size): the same size, and, compared byte for byte, the
 * same bytes.  XXH3 resists accidents, not adversaries: another user can
 * build bytes of the same hash and size in a moment, and a store that
 * shared his object would read his bytes back, verified (DESIGN.md 14).
 * The read is paid on a dedup only, once per store of bytes already
 * stored. */
static bool shares_bytes(struct kvt_dir *fan, const char *ref, int stage_fd, uint64_t size)
{
	struct stat st;
	kvt_autofd fd = kvt_dir_open_file(fan, ref, O_RDONLY, 0, &st);

	return fd >= 0 && (uint64_t)st.st_size == size && same_bytes(fd, stage_fd, size);
}

int kvt_object_make(struct kvt_store *s, const char *stage_name, int stage_fd, uint64_t size,
		    const kvt_hash *hash, struct kvt_record *rec, bool *dedup)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *anchor = kvt_object_anchor_name(hash);
	g_autofree char *ref = NULL;
	struct stat st;
	int ret;

	rec->hash = *hash;
	rec->size = size;
	kvt_store_new_ref(s, rec->ref);
	ref = kvt_object_ref_name(rec);
	*dedup = false;
	ret = fanout_dir(s, hash, true, &fan);
	if (ret < 0)
		return ret;

	/* Same content already stored: share its inode. */
	ret = kvt_dir_link(fan, anchor, fan, ref);
	if (ret == 0) {
		if (shares_bytes(fan, ref, stage_fd, size)) {
			kvt_store_count(s, KVT_STAT_dedups, 1);
			*dedup = true;
			return 0;
		}
		/* Same hash, other bytes: the anchor is torn, or a collision;
		 * never share it.  A torn anchor (another size, or not a
		 * file) goes; one that holds other bytes of the same hash
		 * and size is another name's object, and stays. */
		kvt_dir_unlink(fan, ref);
		if (kvt_dir_stat(fan, anchor, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size != size)
			kvt_dir_unlink(fan, anchor);
	} else if (ret != -ENOENT && ret != -EMLINK && ret != -ENOSPC) {
		/* EMLINK: the shared inode has all the links its file system
		 * allows (65000 on ext4); ENOSPC: GlusterFS says so of an
		 * inode with some 46 links in one directory, whose brick has
		 * no room left for their count.  These bytes get an object of
		 * their own; a file system that is full fails the link of
		 * that one too. */
		return ret;
	}

	/* A link, not a rename: until a record names the object, the staged
	 * file is still the version's, and a failed record install leaves
	 * it to be published again.  No anchor yet (kvt_object_anchor):
	 * nobody can share an inode that still has the staged file's link. */
	ret = kvt_usage_room(s, size);
	if (ret == 0)
		ret = kvt_dir_link(s->stage, stage_name, fan, ref);
	if (ret < 0)
		return ret;
	kvt_usage_move(s, hash->b[0], (int64_t)size);
	kvt_store_count(s, KVT_STAT_objects, 1);
	kvt_store_count(s, KVT_STAT_bytes_stored, size);
	return 0;
}

/* Whether @ref is still there once its anchor is made.  A network file
 * system's client links the inode it looked @ref up as, not the name:
 * another mount that released @ref between that lookup and the link
 * (the staged file, still open here, keeps the inode alive: as a ".nfs"
 * name on NFS) leaves an anchor that no reference uses and nobody would
 * remove.  @fd is the staged file: its link count is one call on an open
 * file, where a look by name is three round trips on GlusterFS; not on
 * NFS, where the ".nfs" name counts too. */
static bool ref_left(struct kvt_store *s, struct kvt_dir *fan, const char *ref, int fd)
{
	struct stat st;

	if (s->silly_renames)
		return kvt_dir_stat(fan, ref, &st) != -ENOENT;
	/* The anchor and the reference (or a reference another mount
	 * linked to the anchor meanwhile: its release looks again). */
	return kvt_file_stat(fd, NULL, &st) != 0 || st.st_nlink > 1;
}

void kvt_object_anchor(struct kvt_store *s, const struct kvt_record *rec, int fd)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *ref = kvt_object_ref_name(rec);
	g_autofree char *anchor = kvt_object_anchor_name(&rec->hash);
	int ret = fanout_dir(s, &rec->hash, false, &fan);

	/* ENOENT: another mount replaced the record and released the object
	 * already; EEXIST: it made an anchor of the same bytes meanwhile,
	 * and these simply are not shared. */
	if (ret == 0)
		ret = kvt_dir_link(fan, ref, fan, anchor);
	/* Made, but maybe for a reference released meanwhile: then the
	 * anchor goes as that release would have removed it.  Of the
	 * release's look and this one, the later sees the other's step. */
	if (ret == 0 && !ref_left(s, fan, ref, fd))
		drop_lone_anchor(s, fan, anchor);
	if (ret < 0 && ret != -EEXIST && ret != -ENOENT)
		g_debug("anchor objects/%02x/%s: %s", rec->hash.b[0], anchor, g_strerror(-ret));
}

int kvt_object_unmake(struct kvt_store *s, const struct kvt_record *rec, bool dedup)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autofree char *ref = kvt_object_ref_name(rec);
	int ret;

	if (dedup)
		return kvt_object_release(s, rec);
	/* New bytes have no anchor yet: the staged file keeps them. */
	ret = fanout_dir(s, &rec->hash, false, &fan);
	if (ret == 0)
		ret = kvt_dir_unlink(fan, ref);
	if (ret == 0)
		kvt_usage_move(s, rec->hash.b[0], -(int64_t)rec->size);
	return ret;
}

int kvt_object_fault_check(enum kvt_fault_op op, const struct kvt_record *rec)
{
	g_autofree char *ref = kvt_object_ref_name(rec);

	return kvt_fault(op, ref);
}

int kvt_object_sync_links(struct kvt_store *s, const struct kvt_record *rec)
{
	g_autoptr(kvt_dir) fan = NULL;
	int ret = fanout_dir(s, &rec->hash, false, &fan);

	return ret < 0 ? ret : kvt_dir_sync(fan);
}

int kvt_object_sync(struct kvt_store *s, const struct kvt_record *rec)
{
	kvt_autofd fd = kvt_object_open(s, rec, O_RDONLY, NULL);
	g_autofree char *ref = NULL;
	int ret;

	if (fd < 0)
		return fd;
	ref = kvt_object_ref_name(rec);
	ret = kvt_file_datasync(fd, ref);
	if (ret < 0)
		return ret;
	return kvt_object_sync_links(s, rec);
}
