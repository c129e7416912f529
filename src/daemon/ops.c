/* The operation table, and the mount's start and end as libfuse sees
 * them: init negotiates with the kernel, destroy frees everything the
 * kernel left (it does not forget or release what it holds when the
 * connection ends). */
#include "ops.h"

#include "inode.h"

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* No atomic O_TRUNC: with it the kernel sets its size of the file to
	 * 0 at the open and lets it follow the writer, and every reader of
	 * the published version sees that size (LMCache rewrites in place).
	 * Without it O_TRUNC arrives as a SETATTR of size 0 after the open,
	 * without the handle but from the thread that opened it, which
	 * starts that handle's own version (kvt_handle_trunc, version.h), and
	 * the size the kernel keeps is the published one. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	/* libfuse before 3.17 leaves this out of its reply to INIT;
	 * receive.c puts it in. */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Object bytes go from the lower page cache to the device by splice
	 * (see splice.h). */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_MOVE)
		conn->want |= FUSE_CAP_SPLICE_MOVE;
	/* Writes must reach the daemon before close() returns so that
	 * FLUSH and rename see every byte. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = 1u << 20;
	conn->max_read = KVT_MAX_READ;
	conn->max_readahead = 1u << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

void kvt_fs_free_all(struct kvt_fs *fs)
{
	GList *l;

	kvt_lru_free_all(fs);
	while ((l = g_queue_pop_head_link(&fs->live_handles))) {
		struct kvt_live *h = l->data;

		h->free(fs, h);
	}
	/* Files being written die with the mount: nothing unpublished
	 * survives. */
	kvt_inodes_free_all(fs);
}

static void op_destroy(void *userdata)
{
	kvt_fs_free_all(userdata);
}

const struct fuse_lowlevel_ops kvt_fuse_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = kvt_op_lookup,
	.forget = kvt_op_forget,
	.forget_multi = kvt_op_forget_multi,
	.getattr = kvt_op_getattr,
	.setattr = kvt_op_setattr,
	.mknod = kvt_op_mknod,
	.mkdir = kvt_op_mkdir,
	.unlink = kvt_op_unlink,
	.rmdir = kvt_op_rmdir,
	.rename = kvt_op_rename,
	.symlink = kvt_op_symlink,
	.readlink = kvt_op_readlink,
	.link = kvt_op_link,
	.open = kvt_op_open,
	.create = kvt_op_create,
	.read = kvt_op_read,
	.write = kvt_op_write,
	.flush = kvt_op_flush,
	.fsync = kvt_op_fsync,
	.release = kvt_op_release,
	.opendir = kvt_op_opendir,
	.readdir = kvt_op_readdir,
	.readdirplus = kvt_op_readdirplus,
	.releasedir = kvt_op_releasedir,
	.fsyncdir = kvt_op_fsyncdir,
	.statfs = kvt_op_statfs,
	.setxattr = kvt_op_setxattr,
	.getxattr = kvt_op_getxattr,
	.listxattr = kvt_op_listxattr,
	.removexattr = kvt_op_removexattr,
};
