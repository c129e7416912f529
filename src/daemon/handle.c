/* Open files: a handle's life, and the writers waiting for their open's
 * O_TRUNC (handle.h). */
#include "handle.h"

#include <unistd.h>

#include "evictor.h"

static void handle_free(struct kvt_fs *fs, struct kvt_live *l)
{
	struct kvt_handle *h = (struct kvt_handle *)l;

	if (h->copy)
		kvt_copy_put(fs->copies, h->copy);
	else if (h->fd >= 0)
		close(h->fd);
	kvt_stage_unref(h->rstage);
	kvt_stage_unref(h->wstage);
	kvt_record_clear(&h->rec);
	kvt_evictor_unpin(fs->store, h->evict_key);
	g_free(h);
}

struct kvt_handle *kvt_handle_new(struct kvt_fs *fs)
{
	struct kvt_handle *h = g_new0(struct kvt_handle, 1);

	h->fd = -1;
	kvt_record_init(&h->rec);
	kvt_live_add(fs, &h->live, handle_free);
	return h;
}

void kvt_handle_close(struct kvt_fs *fs, struct kvt_handle *h)
{
	kvt_live_remove(fs, &h->live);
	handle_free(fs, &h->live);
}

struct kvt_handle *kvt_handle_of(struct fuse_file_info *fi)
{
	return (struct kvt_handle *)(uintptr_t)fi->fh;
}

struct kvt_stage **kvt_handle_wstage(struct fuse_file_info *fi)
{
	struct kvt_handle *h = kvt_handle_of(fi);

	return h->writer ? &h->wstage : NULL;
}

void kvt_handle_unfresh(struct kvt_inode *ino, struct kvt_handle *h)
{
	/* fresh is read without the lock by a write (kvt_op_write) */
	if (h->fresh) {
		ino->fresh_writers = g_slist_remove(ino->fresh_writers, h);
		__atomic_store_n(&h->fresh, false, __ATOMIC_RELAXED);
	}
}

struct kvt_stage **kvt_handle_trunc(struct kvt_inode *ino, pid_t pid)
{
	struct kvt_stage **wstage = NULL;

	kvt_inode_lock(ino);
	for (GSList *l = ino->fresh_writers; l; l = l->next) {
		struct kvt_handle *h = l->data;

		if (h->opener == pid) {
			kvt_handle_unfresh(ino, h);
			wstage = &h->wstage;
			break;
		}
	}
	kvt_inode_unlock(ino);
	return wstage;
}
